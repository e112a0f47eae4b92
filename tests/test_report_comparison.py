"""The report compares mechanisms on equal footing: every number per seed (one cell is one
game), then the mean and 95 % interval over seeds; never the first row of some seed."""

import json

import numpy as np
import pandas as pd
import pytest

from sims.comparison import cpl_per_seed, intervals
from sims.report import write_report
from sims.stats import ci95
from sims.sweep import Store, expand, run_sweep


def _cpl_rows(seed, bound, utilities):
    return pd.DataFrame({"mechanism": "uniform", "budget": 15.0, "seed": seed,
                         "client": np.arange(len(utilities)), "objective_bound": bound,
                         "spent": 15.0, "utility": utilities, "price": 1.0})


def test_two_seeds_with_different_values_both_count():
    # seed 1's rows come first, as a store may return them: the first row is not the answer
    df = pd.concat([_cpl_rows(1, 4.0, [1.0, 1.0]), _cpl_rows(0, 2.0, [3.0, 5.0])])
    per = cpl_per_seed(df)
    assert per.seed.tolist() == [0, 1]
    assert per.objective_bound.tolist() == [2.0, 4.0]
    assert per.client_utility_sum.tolist() == [8.0, 2.0]  # per seed, never summed across
    s = intervals(per, ["mechanism", "budget"], ["objective_bound", "client_utility_sum"])
    s = s.set_index("metric")
    assert s.loc["objective_bound", "mean"] == pytest.approx(3.0)
    assert s.loc["client_utility_sum", "mean"] == pytest.approx(5.0)
    assert (s.seeds == 2).all()
    # Student's t 95 % interval over the two seeds: 3 +- 12.706 * sd / sqrt(2), sd = sqrt(2)
    assert s.loc["objective_bound", "high"] == pytest.approx(3.0 + 12.7062047, rel=1e-6)


@pytest.fixture(scope="module")
def cpl_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpl")
    spec = {"seeds": [0, 1, 2], "scenarios": [{
        "name": "cpl-pricing", "mechanisms": ["bisection", "uniform", "weighted"],
        "params": {"clients": 12, "budget": [5.0, 30.0]}}]}
    run_sweep(expand(spec), out)
    write_report(out, verdict_examples=0)
    store = Store(out, mode="r")
    frame = store.frame("cpl-pricing")
    store.close()
    return out, frame


def test_the_cpl_table_aggregates_every_seed_of_the_store(cpl_report):
    out, frame = cpl_report
    # what each cell says, recomputed here from the stored rows
    truth = frame.groupby(["mechanism", "budget", "seed"]).agg(
        bound=("objective_bound", "first"), profit=("utility", "sum"))
    per_mech = truth.groupby(["mechanism", "budget"])
    assert (per_mech.bound.nunique() == 3).all()  # the seeds' games differ: a first row is wrong
    got = pd.read_csv(out / "cpl_pricing_intervals.csv").set_index(
        ["mechanism", "budget", "metric"])
    for (mech, budget), g in per_mech:
        assert got.loc[(mech, budget, "objective_bound"), "mean"] == pytest.approx(
            g.bound.mean(), rel=1e-12)
        assert got.loc[(mech, budget, "client_utility_sum"), "mean"] == pytest.approx(
            g.profit.mean(), rel=1e-12)
        assert got.loc[(mech, budget, "objective_bound"), "seeds"] == 3
    seeds = pd.read_csv(out / "cpl_pricing_seeds.csv")
    assert len(seeds) == 3 * 2 * 3 and seeds.cell.nunique() == len(seeds)
    side = json.loads((out / "cpl_pricing_seeds.json").read_text())
    assert set(side["cells"]) == set(seeds.cell) and side["seeds"] == [0, 1, 2]
    # the printed table says mean [low, high] and how many seeds
    table = pd.read_csv(out / "cpl_pricing.csv")
    assert (table.seeds == 3).all()
    row = table[(table.mechanism == "bisection") & (table.budget == 30.0)].iloc[0]
    m = got.loc[("bisection", 30.0, "objective_bound")]
    assert row.objective_bound == f"{m['mean']:.4g} [{m['low']:.4g}, {m['high']:.4g}]"
    text = (out / "report.md").read_text()
    assert "mean and 95 % interval over 3 seeds" in text


def test_with_the_mean_over_seeds_the_equilibrium_beats_both_posted_prices(cpl_report):
    """What the first-row table got wrong: on the same games (every seed), the equilibrium's
    bound is below weighted and uniform pricing at each budget, and every rule's bound falls
    as the budget grows."""
    out, _ = cpl_report
    got = pd.read_csv(out / "cpl_pricing_intervals.csv")
    bound = got[got.metric == "objective_bound"].pivot(index="budget", columns="mechanism",
                                                        values="mean")
    assert (bound["bisection"] < bound["weighted"]).all()
    assert (bound["bisection"] < bound["uniform"]).all()
    assert (bound.loc[30.0] < bound.loc[5.0]).all()


RULES = '''
import numpy as np

def flat_fee(market, A, D):
    """Every buyer pays the operator 30 per model bought (a surplus; IR fails)."""
    return 30.0 * np.asarray(A).sum(axis=-1)

def subsidy(market, A, D):
    """The operator pays every seller 2 per model sold (a deficit)."""
    return -2.0 * np.asarray(A).sum(axis=-2)
'''
MARKET_MECHS = ["local", "exact+vcg", "local+t20p7_rules:flat_fee", "local+t20p7_rules:subsidy"]


@pytest.fixture(scope="module")
def market_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("market")
    (out / "t20p7_rules.py").write_text(RULES)
    spec = {"seeds": [0, 1], "scenarios": [{"name": "inclusive-market",
                                            "mechanisms": MARKET_MECHS,
                                            "params": {"rounds": 2, "n_params": 200}}]}
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(out))
        run_sweep(expand(spec), out / "results")
        write_report(out / "results", verdict_examples=0, regret_markets=40,
                     rules_from=["t20p7_rules"])
    store = Store(out / "results", mode="r")
    frame = store.frame("inclusive-market")
    store.close()
    return out, out / "results", frame


def test_welfare_and_the_signed_balance_per_seed(market_report):
    _, res, frame = market_report
    per = pd.read_csv(res / "inclusive_comparison_seeds.csv").set_index(["mechanism", "seed"])
    by = frame.groupby(["mechanism", "seed"])
    # Eq. 3 summed over clients and rounds: sum U = SW - sum p (an identity of the stored
    # rows, checked here apart from the clearing that wrote round_welfare)
    assert per.welfare.to_dict() == pytest.approx(
        (by.utility.sum() + by.payment.sum()).to_dict(), rel=1e-9, abs=1e-9)
    assert per.operator_balance.to_dict() == pytest.approx(by.payment.sum().to_dict(),
                                                           abs=1e-9)
    # by hand: the flat fee is 30 per model bought (a surplus), the subsidy -2 per model
    # sold (a deficit), and the paper's rule balances
    bought = by.n_bought.sum()
    for seed in (0, 1):
        fee = per.loc[("local+t20p7_rules:flat_fee", seed)]
        assert fee.operator_balance == pytest.approx(30 * bought[("local+t20p7_rules:flat_fee",
                                                                  seed)])
        assert fee.total_payments == pytest.approx(fee.operator_balance)
        sub = per.loc[("local+t20p7_rules:subsidy", seed)]
        assert sub.operator_balance == pytest.approx(
            -2 * bought[("local+t20p7_rules:subsidy", seed)]) and sub.operator_balance < 0
        assert abs(per.loc[("local", seed)].operator_balance) < 1e-9
    table = pd.read_csv(res / "inclusive_comparison.csv").set_index("mechanism")
    assert table.loc["local+t20p7_rules:subsidy", "operator_balance"].startswith("-")
    assert table.loc["local", "operator_balance"] == "0 [0, 0]"  # rounding is not a surplus
    assert (table.seeds == 2).all()
    vcg = per.loc["exact+vcg"].operator_balance
    shown = table.loc["exact+vcg", "operator_balance"]
    assert shown.startswith(f"{vcg.mean():.4g} [")  # VCG's balance keeps its sign


def test_ir_failures_name_the_client_the_shortfall_and_the_cell(market_report, monkeypatch):
    out, res, frame = market_report
    fails = pd.read_csv(res / "inclusive_ir_failures.csv")
    negative = frame[frame.utility < -1e-9 * frame.gain.abs().clip(lower=1.0)]
    assert len(fails) == negative.groupby(["mechanism", "seed", "client"]).ngroups > 0
    assert set(fails.mechanism) == {"local+t20p7_rules:flat_fee"}
    assert fails.worst_utility.is_monotonic_increasing  # worst first
    for r in fails.itertuples():
        rows = frame[(frame.mechanism == r.mechanism) & (frame.seed == r.seed)
                     & (frame.client == r.client)]
        assert r.worst_utility == pytest.approx(rows.utility.min())
        assert r.cumulative_utility == pytest.approx(rows.utility.sum())
        assert r.role == rows.role.iloc[0]
    # the cell named reruns to the same shortfall
    from sims.sweep import Cell, run_cell

    monkeypatch.syspath_prepend(str(out))
    worst = fails.iloc[0]
    cell = json.loads(worst.rerun)
    _, rows, _ = run_cell(Cell(cell["scenario"], cell["mechanism"],
                               tuple(sorted(cell["params"].items())), cell["seed"]))
    again = rows[(rows["round"] == worst.worst_round) & (rows.client == worst.client)]
    assert float(again.utility.iloc[0]) == worst.worst_utility
    text = (res / "report.md").read_text()
    assert f"{len(fails)} (mechanism, seed, client) with a negative utility" in text


def test_the_default_ranking_puts_promises_first(market_report):
    _, res, _ = market_report
    r = pd.read_csv(res / "inclusive_ranking.csv")
    # default 'ir,deficit,regret,welfare': the IR-failing fee last, the subsidy's deficit next
    # to last (their regret is not measured: rules the bulk clearing cannot run)
    assert r.mechanism.tolist()[-2:] == ["local+t20p7_rules:subsidy",
                                         "local+t20p7_rules:flat_fee"]
    assert r.ir.iloc[-1] > 0 and r.deficit.iloc[-2] > 0
    assert (r.ir.iloc[:-1] == 0).all() and (r.deficit.iloc[:-2] == 0).all()
    assert "the default 'ir,deficit,regret,welfare'" in (res / "report.md").read_text()


def _overlaps(labels) -> bool:
    boxes = [t.get_window_extent() for t in labels if t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_box_plot_labels_stay_readable_with_long_rule_names():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sims.plots import plot_utility_boxes

    names = ["local", "exact+vcg", "local+mymodule:my_payments+mymodule:my_prices",
             "box2+mymodule:another_payment_rule", "share-all+none",
             "local+mymodule:my_payments+cost-plus"]
    per = pd.DataFrame({"mechanism": np.repeat(names, 5),
                        "utility": np.arange(5 * len(names), dtype=float)})
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(names)))
    plot_utility_boxes(per, ax=ax)
    fig.tight_layout()
    fig.canvas.draw()
    labels = ax.get_yticklabels()
    assert sorted(t.get_text().replace("\n", "") for t in labels) == sorted(names)
    assert not _overlaps(labels)
    inside = fig.bbox
    assert all(inside.x0 <= t.get_window_extent().x0 for t in labels)
    plt.close(fig)
    # known-bad: the old vertical boxes with the names under them overlap
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.boxplot([per[per.mechanism == m].utility for m in sorted(names)],
               tick_labels=sorted(names))
    fig.tight_layout()
    fig.canvas.draw()
    assert _overlaps(ax.get_xticklabels())
    plt.close(fig)


def test_liars_and_attacks_tables_keep_the_mechanism_and_count_every_seed(tmp_path):
    spec = {"seeds": [0, 1], "scenarios": [
        {"name": "liars", "mechanisms": ["local", "exact+vcg"],
         "params": {"kind": "size", "factor": 10.0, "rounds": 2, "n_params": 200}},
        {"name": "attacks", "mechanisms": ["local"],
         "params": {"attack": ["gaussian", "same"], "rounds": 2, "n_params": 200}}]}
    run_sweep(expand(spec), tmp_path)
    write_report(tmp_path, verdict_examples=0)
    store = Store(tmp_path, mode="r")
    liars = store.frame("liars")
    store.close()
    table = pd.read_csv(tmp_path / "liars.csv").set_index("mechanism")
    assert set(table.index) == {"local", "exact+vcg"} and (table.seeds == 2).all()
    from sims.summary import last_rounds

    assert len(liars) == 2 * 2 * 2  # a row per round; the report takes one per cell
    for mech, g in last_rounds(liars).groupby("mechanism"):
        m, lo, hi, _ = ci95(g.liar_gain)
        assert table.loc[mech, "liar_gain"] == f"{m:.4g} [{lo:.4g}, {hi:.4g}]"
    attacks = pd.read_csv(tmp_path / "attacks.csv")
    assert attacks.attack.tolist() == ["gaussian", "same"] and (attacks.seeds == 2).all()
    assert "distance" in attacks and len(pd.read_csv(tmp_path / "attacks_seeds.csv")) == 4


def test_rows_without_the_round_totals_are_named_not_guessed(market_report):
    """Cells stored before round_welfare / round_operator_balance existed: the comparison
    says which columns are missing (no welfare re-derived from other columns)."""
    from sims.comparison import market_per_seed

    _, _, frame = market_report
    with pytest.raises(KeyError, match=r"round_welfare.*--recompute-stale"):
        market_per_seed(frame.drop(columns=["round_welfare"]))
