"""The report compares mechanisms on equal footing: every number per seed (one cell is one
game), then the mean and 95 % interval over seeds; never the first row of some seed."""

import json

import numpy as np
import pandas as pd
import pytest

from sims.comparison import cpl_per_seed, intervals
from sims.report import write_report
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
