"""docs/reference-design.md prints figures from benchmark runs; each is checked here against
the committed output of the command the page names (the frontier section is checked by
tests/test_design_frontier.py): the misreport searches' strength (one dimension and joint),
the bound on truthful rules, and the two rule files of the goal. The slow tests measure a
row of each again on the same markets."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGE = (DOCS / "reference-design.md").read_text()
STRENGTH = "design_search_strength.csv"  # --markets 1000 --seed 1000
JOINT = "design_search_strength_joint.csv"  # --markets 300 --seed 1000 --joint
BOUND = "truthful_bound.csv"  # --markets 20000 --seed 1000


def _bench(name: str):
    """benchmarks/<name>.py as a module (its folder on sys.path while it imports, as when
    it runs as a script: it imports benchmarks/_timing.py)."""
    folder = str(ROOT / "benchmarks")
    spec = importlib.util.spec_from_file_location(f"bench_{name}", f"{folder}/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(DOCS / name, keep_default_na=False)  # truthful_bound's class ""


def test_the_page_names_the_commands_that_wrote_the_committed_tables():
    for command in (
            "python benchmarks/design_search_strength.py --markets 1000 --seed 1000 \\\n"
            f"        --csv docs/{STRENGTH}",
            "python benchmarks/design_search_strength.py --markets 300 --seed 1000 --joint \\\n"
            f"        --csv docs/{JOINT}",
            f"python benchmarks/truthful_bound.py --markets 20000 --seed 1000 --csv docs/{BOUND}"):
        assert command in PAGE, command
    assert set(_csv(STRENGTH).search) == set(_csv(JOINT).search) == {"former", "strong",
                                                                     "wider"}


def test_the_search_table_is_proofs_regret_searches():
    """Each row of the page's table of searches: span, grid, refinements x steps, joint
    grid and steps from SEARCHES; the markets cleared per search counted by a search."""
    from proofs.regret import SEARCHES
    from sims.design import REFERENCES, draw_markets, evaluate

    mk = draw_markets(4, seed=0)
    counts = {}
    for name, s in SEARCHES.items():
        one, joint = s["single"], s["joint"]
        ev = evaluate(REFERENCES["paper"], mk, combos=(("c", "over"),), search=name)
        per_search = ev.clearings // mk.size  # the truthful clearing, then the search's
        span = "100" if one["span"] == 100 else f"10^{round(math.log10(one['span']))}"
        row = (f"| {name} | [1/{span}, {span}] | {one['grid']} | {one['starts']} x "
               f"{one['iters']} | {per_search} | {joint['grid']} x {joint['grid']}, "
               f"{joint['iters']} |")
        assert row in PAGE, row
        counts[name] = per_search
    assert counts["strong"] == 5 * counts["former"]
    assert (f"clears 5 x as many\nmarkets per search as the former ({counts['strong']} against "
            f"{counts['former']})") in PAGE


def test_the_strength_paragraph_is_the_committed_csv():
    """Known bad: one figure of the CSV changed and the paragraph no longer matches."""
    bench = _bench("design_search_strength")
    df = _csv(STRENGTH)
    text = bench.strength_paragraph(df)
    assert text in PAGE
    bad = df.copy()
    k = bad.index[(bad.rule == "paper") & (bad.direction == "N_under")
                  & (bad.statistic == "max") & (bad.search == "strong")][0]
    bad.loc[k, "value"] *= 1.01
    assert bench.strength_paragraph(bad) not in PAGE


def test_the_joint_table_and_paragraph_are_the_committed_csv():
    bench = _bench("design_search_strength")
    df = _csv(JOINT)
    assert bench.joint_table(df) in PAGE
    assert bench.joint_paragraph(df) in PAGE
    # what the page says of the table: lying in two dimensions at once pays more than in
    # either alone for the paper rule (N and K) and the midpoint (N and c); the report-free
    # posted price with the exact selection stays jointly truthful in c and K
    v = df[df.search == "strong"].set_index(["rule", "direction", "statistic"]).value
    assert v[("paper", "joint_NK", "mean")] > max(v[("paper", "N", "mean")],
                                                  v[("paper", "K", "mean")])
    mid = "midpoint (clipped split 1/2)"
    assert v[(mid, "joint_Nc", "mean")] > max(v[(mid, "N", "mean")], v[(mid, "c", "mean")])
    assert v[("posted 4, exact", "joint_cK", "max")] == 0
    assert v[("share at pi*", "joint_NK", "max")] == 0


def test_the_bound_table_is_the_committed_csv():
    bench = _bench("truthful_bound")
    df = _csv(BOUND)
    assert bench.bound_table(df) in PAGE
    v = df.set_index(["row", "class"]).share
    assert f"kappa = {v[('kappa', '')]:.2g}" in PAGE.replace("\n", " ")
    assert f"kappa2 = {v[('kappa2', '')]:.3g}" in PAGE.replace("\n", " ")
    assert v[("bound", "total")] < 0.95  # no such rule keeps 95 % of the welfare
    assert f"**{100 * v[('bound', 'total')]:.1f} %**" in PAGE


def test_the_bound_table_is_what_the_code_measures(tmp_path):
    """The whole bound run again (1.4 s CPU): the committed CSV, number for number."""
    bench = _bench("truthful_bound")
    out = tmp_path / "bound.csv"
    bench.main(["--markets", "20000", "--seed", "1000", "--csv", str(out)])
    again, committed = pd.read_csv(out, keep_default_na=False), _csv(BOUND)
    assert again[["row", "class"]].equals(committed[["row", "class"]])
    assert again.share.to_numpy() == pytest.approx(committed.share.to_numpy(), rel=1e-12)


def test_the_rule_files_table_is_their_recorded_estimates():
    """The goal's table of rule files: welfare share, price and regret left, as recorded in
    docs/designed/*.json (benchmarks/designed_rules.py); the held-out welfare share of
    share at pi* is the bound table's."""
    truthful = json.loads((DOCS / "designed" / "truthful.json").read_text())
    posted = json.loads((DOCS / "designed" / "posted.json").read_text())
    t, p = truthful["estimates"], posted["estimates"]
    held = _csv(BOUND).set_index(["row", "class"]).share[("share at pi*", "total")]
    share_t = t["mean_welfare"] / truthful["paper_welfare"]
    row_t = (f"| {100 * share_t:.1f} % ({100 * held:.1f} % on 20,000 held-out markets) | "
             "none found |")
    assert row_t in PAGE, row_t
    assert f"pi* = {truthful['theta']['base']:.3g}" in PAGE
    dims = [f"max_regret_{d}_{w}" for d in "NcK" for w in ("over", "under")]
    assert all(t[k] == 0 for k in dims) and t["ir_rate"] == t["deficit_rate"] == 0
    share_p = p["mean_welfare"] / posted["paper_welfare"]
    row_p = (f"| {100 * share_p:.1f} % | N overstated: mean {p['mean_regret_N_over']:.3g}, "
             f"q90 {p['q90_regret_N_over']:.3g}, max {p['max_regret_N_over']:.3g} |")
    assert row_p in PAGE, row_p
    assert all(p[k] == 0 for k in dims if k != "max_regret_N_over")
    assert p["max_regret_N_over"] > 0 and p["ir_rate"] == p["deficit_rate"] == 0
    assert f"posted price {posted['theta']['base']:g} " in PAGE


@pytest.mark.slow
def test_a_row_of_each_committed_table_is_what_the_code_measures():
    """The paper rule's N understatement under the former and strong searches on the
    strength run's markets, its N-and-K joint regret under the strong search on the joint
    run's, and the welfare of the share-at-pi* rule file on its training markets: the
    committed figures."""
    from sims.design import REFERENCES, draw_markets, evaluate, load_rule

    df = _csv(STRENGTH).set_index(["rule", "search", "direction", "statistic"]).value
    mk = draw_markets(1000, seed=1000)
    for search in ("former", "strong"):
        s = evaluate(REFERENCES["paper"], mk, combos=(("N", "under"),), search=search).summary
        for stat in ("mean", "q90", "max"):
            assert s[f"{stat}_regret_N_under"] == pytest.approx(
                df[("paper", search, "N_under", stat)], rel=1e-9, abs=1e-12)
    jf = _csv(JOINT).set_index(["rule", "search", "direction", "statistic"]).value
    s = evaluate(REFERENCES["paper"], draw_markets(300, seed=1000),
                 combos=(("N", "over"), ("N", "under"), ("K", "over"), ("K", "under")),
                 joint=(("N", "K"),), search="strong").summary
    for stat in ("mean", "max"):
        assert s[f"{stat}_regret_joint_NK"] == pytest.approx(
            jf[("paper", "strong", "joint_NK", stat)], rel=1e-9, abs=1e-12)
    truthful = json.loads((DOCS / "designed" / "truthful.json").read_text())
    w = evaluate(load_rule(DOCS / "designed" / "truthful.json"), draw_markets(2000, seed=0),
                 combos=(("c", "over"),)).summary["mean_welfare"]
    assert w == pytest.approx(truthful["estimates"]["mean_welfare"], rel=1e-9)


def test_the_family_verdicts_are_the_committed_run():
    """The checker's verdicts on the families that change who trades: the page shows the
    file benchmarks/design_family_verdicts.py wrote, and the page's prose matches it."""
    text = (DOCS / "design_family_verdicts.md").read_text()
    assert text in PAGE
    rows = {r.split(" | ")[1]: r for r in text.splitlines() if r.startswith("| ")}
    assert "counterexample" not in rows["share at pi*"]
    posted = rows["posted 4, exact"].split(" | ")
    assert posted[2:5] == ["holds (2,000)"] * 3  # IR, balance, no deficit
    assert "**counterexample**" in rows["McAfee (share 1)"].split(" | ")[2]  # IR


@pytest.mark.slow
def test_a_family_verdict_is_what_the_checker_finds():
    """McAfee's IR counterexample (draw and violation) and posted 4's c-over verdict,
    checked again with the run's settings."""
    from proofs import PROPERTIES, IpflMechanism, check
    from sims.design.frontier import registered_rules

    rules = {name: mech for _, name, mech in registered_rules(("posted prices",
                                                               "trade reduction"))}
    text = (DOCS / "design_family_verdicts.md").read_text()
    row = next(r for r in text.splitlines() if "| McAfee (share 1) |" in r).split(" | ")
    m = rules["McAfee (share 1)"]
    r = check(IpflMechanism("McAfee (share 1)", m.rule, payments=m.payments, prices=m.prices),
              PROPERTIES["individual_rationality"], max_examples=2000, seed=1000,
              engine="batch", search="strong")
    assert row[2] == (f"**counterexample** ({r.counterexample.violation:.3g} at draw "
                      f"{r.first_failure:,})")
    m = rules["posted 4, exact"]
    r = check(IpflMechanism("posted 4, exact", m.rule, payments=m.payments, prices=m.prices),
              PROPERTIES["thm2"], max_examples=2000, seed=1000, engine="batch",
              search="strong")
    assert r.verdict == "holds" and r.discriminating == 2000


def test_the_certification_of_the_truthful_rule_file():
    """docs/designed/truthful_certification.md is what the page's command writes (its own
    header names the same command); every one of its nine rows (IR, budget balance, no
    deficit, the six misreport directions) holds on 100,000 discriminating examples, as the
    page says."""
    text = (DOCS / "designed" / "truthful_certification.md").read_text()
    assert ("`fedmarket prove --engine batch --examples 100000 --seed 1000 --jobs 2 --search "
            "strong --markdown docs/designed/truthful_certification.md --subject "
            "docs/designed/truthful.json`") in text
    assert ("    fedmarket prove --subject docs/designed/truthful.json --engine batch "
            "--search strong \\\n        --examples 100000 --seed 1000 --jobs 2 --markdown "
            "docs/designed/truthful_certification.md") in PAGE
    head = "| property | reference | preconditions | subject | declared | verdict |"
    table = text[text.index(head):].split("\n\n")[0].splitlines()[2:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in table]
    assert len(cells) == 9
    assert {c[0] for c in cells} == {
        "Individual rationality", "Budget balance", "No deficit (weak budget balance)",
        *(f"No gain from {w}stating {d}" for d in "NcK" for w in ("over", "under"))}
    for c in cells:
        assert c[3] == "docs/designed/truthful.json" and c[5] == "holds" and c[9] == "100000"
    regret = [c for c in cells if c[0].startswith("No gain")]
    assert all("10^6" in c[2] for c in regret)  # the strong search's span
    assert ("all nine rows hold on 100,000 discriminating examples each"
            in PAGE.replace("\n", " "))
