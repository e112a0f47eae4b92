"""Which rule, with incentives in it (issue 31, part 6): the checker's scan reports the
largest violation found over the whole budget; `prove` on a subject that declares nothing
counts its counterexamples."""

import textwrap

import numpy as np
import pandas as pd
import pytest

from proofs import PROPERTIES, IpflMechanism, check
from proofs.checker import CheckerInputError
from sims.cli import main
from sims.design.space import linear_rule
from sims.errors import SpecError
from sims.ranking import DEFAULT

MIDPOINT = linear_rule({"marginal": 0.5, "cost": 0.5}, clip=True, name="midpoint")


@pytest.fixture(autouse=True)
def _midpoint_module(tmp_path, monkeypatch):
    """mymid_t31:payments, the midpoint split as a module of your own."""
    (tmp_path / "mymid_t31.py").write_text(
        "from sims.design.space import linear_rule\n"
        "payments = linear_rule({'marginal': 0.5, 'cost': 0.5}, clip=True, name='mymid')\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_scan_reports_the_largest_violation_over_the_budget():
    """Without scan the batch engine stops at the first counterexample (its largest
    violation is the largest seen up to there); with scan it checks the whole budget, the
    counterexample stays the first one found, and the largest violation is over every
    example: at least the stopped run's, and the failures are counted. Known bad for the
    count: a property that holds has none."""
    subject = IpflMechanism("midpoint", "local", payments=MIDPOINT)
    prop = PROPERTIES["truthful_K_under"]
    first = check(subject, prop, max_examples=600, seed=3, engine="batch")
    whole = check(subject, prop, max_examples=600, seed=3, engine="batch", scan=True)
    assert first.verdict == whole.verdict == "counterexample"
    assert first.discriminating < 600 == whole.discriminating
    assert whole.first_failure == first.first_failure
    assert whole.counterexample.violation == first.counterexample.violation
    assert whole.largest_violation > 10 * first.largest_violation
    assert 0 < whole.extra["failures"] <= whole.discriminating
    holds = check(subject, PROPERTIES["budget_balance"], max_examples=600, seed=3,
                  engine="batch", scan=True)
    assert holds.verdict == "holds" and holds.extra["failures"] == 0
    with pytest.raises(CheckerInputError, match="scan"):
        check(subject, prop, max_examples=10, seed=3, engine="hypothesis", scan=True)


@pytest.mark.slow
def test_prove_counts_the_counterexamples_of_a_subject_that_declares_nothing(
        tmp_path, monkeypatch, capsys):
    """'N of N checks as declared' is true of rows that declare nothing; the line also says
    how many of them found a counterexample, and --scan prints the largest violation and
    the failures of each row."""
    (tmp_path / "mid.py").write_text(textwrap.dedent("""
        from sims.design.space import linear_rule
        payments = linear_rule({"marginal": 0.5, "cost": 0.5}, clip=True, name="mid")
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.syspath_prepend(str(tmp_path))
    props = ["budget_balance", "individual_rationality", "thm2", "truthful_K_under"]
    args = ["prove", "--subject", "mid:payments", "--engine", "batch", "--examples", "300"]
    for p in props:
        args += ["--property", p]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "4 of 4 checks as declared; 4 of them check claims nobody declared: 2 found a " \
           "counterexample, 2 holds" in out
    assert main([*args, "--scan"]) == 0
    out = capsys.readouterr().out
    assert "failures" in out and "largest_violation" in out
    row = next(ln for ln in out.splitlines() if "No gain from understating K" in ln)
    assert row.split("│")[-2].strip() not in ("", "None", "0")  # failures counted
    # --scan on the built-in subjects (they declare their claims) is misuse: one line
    assert main(["prove", "--scan", "--engine", "batch", "--examples", "10"]) == 2
    assert "--scan" in capsys.readouterr().err


SPACE_MODULE = '''
import numpy as np

def make_rule(theta):
    def pay(market, A, D):  # not marked over_arrays: the bulk clearing cannot run it
        return np.zeros(np.shape(A))
    return pay

def broken(theta):
    raise ValueError("theta must be positive")
'''


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param("ownspace:make_rule", "must return a payment rule marked over_arrays",
                 id="unmarked"),
    pytest.param("ownspace:broken", "ValueError: theta must be positive", id="raises"),
])
def test_a_design_space_with_an_unmarked_rule_is_one_line(spec, message, tmp_path,
                                                          monkeypatch, capsys):
    """Inside the search scipy wraps any error of the objective in a 40-line RuntimeError
    traceback; the rule is built once before the search and the error is one line."""
    (tmp_path / "ownspace.py").write_text(SPACE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    code = main(["design", "--space", spec, "--bounds", "0:1", "--markets", "3",
                 "--generations", "1", "--popsize", "2", "--heldout-markets", "3",
                 "--certify-examples", "0", "--quiet", "--out", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_regret_criteria_rank_by_regret():
    """The midpoint split, with the paper's selection, welfare and budget but less regret,
    ranks above the paper's rule once regret counts (the default); without it (known bad:
    the former default 'ir,deficit,welfare') they tie and the name decides."""
    from sims.ranking import Priorities, rank

    market = pd.DataFrame({"mechanism": ["local"] * 3 + ["local+mid:payments"] * 3,
                           "seed": [0, 1, 2] * 2, "welfare": 10.0, "ir_failures": 0,
                           "operator_balance": 0.0,
                           "regret": [160.0, 150.0, 170.0, 100.0, 104.0, 98.0],
                           "regret_K": [140.0, 130.0, 150.0, 70.0, 60.0, 65.0]})
    old = rank(market, Priorities.parse("ir,deficit,welfare"))
    assert old.mechanism.tolist()[0] == "local"
    assert old.ahead_of_next[0] == "welfare: equal on every seed"
    new = rank(market, Priorities.parse(DEFAULT))
    assert new.mechanism.tolist() == ["local+mid:payments", "local"]
    assert new.ahead_of_next[0].startswith("regret +59.33 [") and \
        new.ahead_of_next[0].endswith("(separated; ahead on 3 of 3 seeds)")
    assert rank(market, Priorities.parse("regret_K")).regret_K.tolist() == [65.0, 140.0]
    # not measured (NaN) ranks after every measured value
    gap = market.assign(regret=np.where(market.mechanism == "local", np.nan, 1e9))
    assert rank(gap, Priorities.parse("regret")).mechanism.tolist()[0] == "local+mid:payments"
    with pytest.raises(SpecError, match="regret-markets"):
        rank(market.drop(columns=["regret"]), Priorities.parse("regret"))


@pytest.mark.slow
def test_regret_per_seed_is_the_design_measure_on_the_same_markets():
    """regret_per_seed measures each mechanism on the SAME markets per seed with the design
    evaluation (the frontier's numbers); a rule the bulk clearing cannot run is NaN with
    the reason."""
    from sims.comparison import regret_per_seed
    from sims.design import Mechanism, draw_markets, evaluate

    reg = regret_per_seed(["local", "local+mymid_t31:payments"], [0, 1], markets=40)
    assert (reg.regret_note == "").all()
    for seed in (0, 1):
        s = evaluate(Mechanism("local"), draw_markets(40, seed)).summary
        got = reg[(reg.mechanism == "local") & (reg.seed == seed)].iloc[0]
        assert got.regret_K == s["max_regret_K"] and got.regret == max(
            s["max_regret_N"], s["max_regret_c"], s["max_regret_K"])
    bad = regret_per_seed(["local+no_such_module_t31:pay"], [0], markets=5)
    assert bad.regret.isna().all() and bad.regret_note[0].startswith("not measured")


def test_beats_baselines_counterexample_shows_the_bounds(tmp_path, monkeypatch):
    """A pricing rule that loses to a baseline: the verdict's detail gives its bound and the
    baselines' on the counterexample game, recomputed here."""
    from mechanisms import cpl
    from proofs import CplPricingRule
    from sims.verdicts import cpl_verdicts

    (tmp_path / "halfprice_t31.py").write_text(textwrap.dedent("""
        import numpy as np
        from mechanisms import cpl

        def half_uniform(game):
            return np.asarray(cpl.uniform_pricing(game).prices) * 0.5
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    v = cpl_verdicts(["halfprice_t31:half_uniform"], examples=200,
                     keys=("cpl_beats_baselines",)).iloc[0]
    assert v.verdict == "counterexample"
    subject = CplPricingRule("halfprice_t31:half_uniform", "halfprice_t31:half_uniform")
    report = check(subject, PROPERTIES["cpl_beats_baselines"], max_examples=200, seed=0,
                   engine="batch")
    game = report.counterexample.instance.game
    own, uni = subject.solve(game).objective, cpl.uniform_pricing(game).objective
    assert v.detail.startswith(f"bound {own:.6g} against uniform {uni:.6g} (+")
    assert "weighted" in v.detail and f"{game.n} clients" in v.detail


def test_a_check_renders_in_a_notebook():
    r = check(IpflMechanism("paper", "local"), PROPERTIES["thm2"], max_examples=20, seed=0,
              engine="batch")
    page = r._repr_html_()
    assert page.startswith("<table>") and "No gain from overstating c" in page


@pytest.mark.slow
def test_the_report_ranks_with_incentives_and_pairs_the_cpl_games(tmp_path):
    """A sweep of the paper's rule and the midpoint split (inclusive market) and of three
    CPL pricing rules: the comparison table carries regret per dimension, the default
    ranking puts the midpoint first on regret; the CPL rules are ranked too, their paired
    table counts the games each pair's rules win (recomputed from the per-game rows), the
    client utility is labelled as lacking its constant, and every table exports to LaTeX."""
    from sims.report import write_report
    from sims.sweep import expand, run_sweep

    spec = {"seeds": [0, 1, 2, 3], "scenarios": [
        {"name": "inclusive-market", "mechanisms": ["local", "local+mymid_t31:payments"],
         "params": {"rounds": 2, "n_params": 200}},
        {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform", "weighted"],
         "params": {"clients": 8, "budget": [5.0]}}]}
    out = tmp_path / "r"
    run_sweep(expand(spec), out)
    write_report(out, verdict_examples=0, regret_markets=40, rules_from=["mymid_t31"])
    table = pd.read_csv(out / "inclusive_comparison.csv").set_index("mechanism")
    assert {"regret_N", "regret_c", "regret_K", "regret"} <= set(table.columns)
    ranking = pd.read_csv(out / "inclusive_ranking.csv")
    assert ranking.mechanism.tolist() == ["local+mymid_t31:payments", "local"]
    assert ranking.ahead_of_next[0].startswith("regret +")
    text = (out / "report.md").read_text()
    assert f"the default {DEFAULT!r}" in text and "WITHOUT each client's constant" in text
    cpl_rank = pd.read_csv(out / "cpl_ranking.csv")
    assert cpl_rank.mechanism.iloc[0] == "bisection"
    pairs = pd.read_csv(out / "cpl_paired.csv")
    games = pd.read_csv(out / "cpl_pricing_seeds.csv").pivot(
        index="seed", columns="mechanism", values="objective_bound")
    for r in pairs.itertuples():
        lower = (games[r.mechanism_a] < games[r.mechanism_b]).sum()
        assert r.a_better == lower and r.seeds == 4  # lower bound is better
        assert r.a_better + r.b_better + r.equal == 4
    tex = (out / "cpl_paired.tex").read_text()
    assert "\\toprule" in tex and "mechanism\\_a" in tex
    assert (out / "inclusive_ranking.tex").is_file()


def test_sweep_checks_the_report_options_before_any_cell(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[[scenarios]]\nname = "inclusive-market"\nmechanisms = ["local"]\n'
                    'params = { rounds = 1, n_params = 100 }\n')
    out = tmp_path / "out"
    for args, message in ((["--report", "--cpl-rank-by", "welfare"],
                           "cpl-rank-by: unknown criterion 'welfare'"),
                          (["--report", "--regret-markets", "0"], "--regret-markets above 0"),
                          (["--regret-markets", "10"], "add --report")):
        assert main(["sweep", str(spec), "--out", str(out), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert not (out / "store.sqlite").exists()


def test_prove_markdown_names_the_command_that_wrote_it_and_the_span_searched(tmp_path):
    """The markdown's "Generated by" line is a command that writes the same file (the
    subject, the properties, the search, the file's own path), and the preconditions of a
    regret row give the span the search reached (x 1 to 10^6 for the strong search, not the
    former's 100); the former search's row reads x 1/100 to 1."""
    md = tmp_path / "own.md"
    args = ["prove", "--subject", "local", "--property", "truthful_K_under", "--property",
            "budget_balance", "--engine", "batch", "--examples", "5", "--search", "strong",
            "--markdown", str(md), "--quiet"]
    assert main(args) == 0
    text = md.read_text()
    assert (f"`fedmarket prove --engine batch --examples 5 --seed 0 --search strong "
            f"--markdown {md} --subject local --property truthful_K_under --property "
            "budget_balance`") in text
    # a subject of your own is named too (a rule file: its path)
    rule = tmp_path / "mid.json"
    from sims.design import LinearSpace, save_rule

    space = LinearSpace(("marginal", "cost"), clip=True)
    save_rule(rule, space, space.point(marginal=0.5, cost=0.5), name="mid")
    own = tmp_path / "own2.md"
    assert main(["prove", "--subject", str(rule), "--property", "budget_balance", "--engine",
                 "batch", "--examples", "5", "--seed", "3", "--markdown", str(own),
                 "--quiet"]) == 0
    assert f"--markdown {own} --subject {rule} --property budget_balance`" in own.read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| No gain from understating K"))
    assert "K_i x 1/10^6 to 1" in row and "1/100" not in row
    former = check(IpflMechanism("paper", "local"), PROPERTIES["truthful_K_under"],
                   max_examples=5, seed=0, engine="batch")
    assert "K_i x 1/100 to 1" in former.preconditions
