"""iPFL's selection, payment and price rules in learning runs: the forms ipfl.clear takes (a
built-in name or "module:function", a designed rule included) in ``TrainConfig``, ``fedmarket
train``, sweeps and ``fedmarket reproduce``; stored cells keep their config hash."""

import sys

import numpy as np
import pandas as pd
import pytest

from learning.algorithms import TrainConfig, run
from learning.config import TrainInputError
from mechanisms.errors import RuleFailed

TINY = {"algorithm": "ipfl", "dataset": "digits", "clients": 4, "rounds": 2, "steps": 5,
        "batch": 16, "lr": 0.05, "beta": 0.5}

RULES = '''
import numpy as np


def flat(market, A, D):
    """Remittances: every purchase costs the buyer 0.5, paid to the seller."""
    return np.where(A, 0.5, 0.0)


def nobody(market, D, thresholds, prices):
    """A selection rule under which nobody buys."""
    return np.zeros(thresholds.shape, dtype=bool)


def broken(market, A, D):
    raise ZeroDivisionError("my bug")
'''


@pytest.fixture
def myrules(user_module):
    return user_module("myrules", RULES)


def test_a_payment_rule_of_your_own_settles_every_round(myrules):
    df = run(TrainConfig(**TINY, payments="myrules:flat")).frame
    assert df.n_bought.sum() > 0  # somebody bought: the rule had something to price
    # p_i = sum_j r_ij - sum_j r_ji (Eq. 13) with r_ij = 0.5 a_ij
    np.testing.assert_allclose(df.payment, 0.5 * (df.n_bought - df.n_sold))
    np.testing.assert_allclose(df.utility, df.gain - df.cost - df.payment)
    paper = run(TrainConfig(**TINY)).frame
    assert not np.allclose(paper.payment, 0.5 * (paper.n_bought - paper.n_sold))
    # the same training: the rule changes the money, not the trades or the models
    np.testing.assert_array_equal(paper.n_bought, df.n_bought)
    np.testing.assert_array_equal(paper.acc_personalised, df.acc_personalised)


def test_built_in_payment_and_selection_rules_by_name(myrules):
    none = run(TrainConfig(**TINY, payments="none")).frame
    assert none.n_bought.sum() > 0 and (none.payment == 0).all()
    alone = run(TrainConfig(**TINY, rule="myrules:nobody")).frame
    assert (alone.n_bought == 0).all() and (alone.payment == 0).all()


def test_a_rule_that_raises_or_does_not_exist_is_named(myrules):
    with pytest.raises(RuleFailed, match="my bug") as e:
        run(TrainConfig(**TINY, payments="myrules:broken"))
    assert e.value.field == "payments"
    for field, value in (("payments", "nosuch"), ("payments", "myrules:missing"),
                         ("rule", "os:getcwd"), ("prices", 3.0)):
        with pytest.raises(TrainInputError) as e:
            TrainConfig(**{field: value})
        assert e.value.field == field


def test_a_designed_rule_runs_in_fedmarket_train(tmp_path, monkeypatch):
    from sims.cli import main
    from sims.design import LinearSpace, save_rule

    space = LinearSpace()
    save_rule(tmp_path / "designed_rule.json", space,
              space.point(marginal=0.7, cost=0.3, distance=1.0), name="designed")
    monkeypatch.chdir(tmp_path)  # the command finds ./designed_rule.py, as a user's would
    sys.modules.pop("designed_rule", None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    argv = ["train", "--dataset", "digits", "--clients", "4", "--rounds", "2", "--steps", "5",
            "--batch", "16", "--lr", "0.05", "--beta", "0.5", "--quiet"]
    assert main([*argv, "--out", "paper"]) == 0
    assert main([*argv, "--selection", "local", "--payments", "designed_rule:payments",
                 "--out", "designed"]) == 0
    sys.modules.pop("designed_rule", None)
    paper = pd.read_parquet(tmp_path / "paper" / "ipfl.parquet")
    designed = pd.read_parquet(tmp_path / "designed" / "ipfl.parquet")
    np.testing.assert_array_equal(paper.n_bought, designed.n_bought)
    assert designed.n_bought.sum() > 0
    assert not np.allclose(paper.payment, designed.payment)  # the designed rule paid
    assert (designed.groupby("round").payment.sum().abs() < 1e-9).all()  # remittances
    assert main([*argv, "--payments", "nosuch", "--out", "x"]) == 2


def test_learning_sweep_cells_take_payment_rules(myrules):
    from sims.sweep import expand, run_cell

    spec = {"seeds": [0], "scenarios": [{
        "name": "ipfl-learning", "mechanisms": ["ipfl"],
        "params": {"payments": "myrules:flat", "clients": 4, "rounds": 1, "steps": 5}}]}
    (cell,) = expand(spec)
    _, df, _ = run_cell(cell)
    np.testing.assert_allclose(df.payment, 0.5 * (df.n_bought - df.n_sold))
    bad = {**spec, "scenarios": [{**spec["scenarios"][0], "params": {"payments": "nosuch"}}]}
    with pytest.raises(ValueError, match="payments"):
        expand(bad)


def test_reproduce_runs_the_ipfl_cells_with_your_rules(myrules, tmp_path, capsys):
    from sims.cli import main
    from sims.reproduce import spec, with_rules
    from sims.scenarios import SCENARIOS
    from sims.sweep import config_hash, expand

    cells = expand(spec(seeds=[0]))
    mine = with_rules(cells, payments="myrules:flat")
    assert len(mine) == len(cells)
    changed = [(a, b) for a, b in zip(cells, mine, strict=True) if a != b]
    for a, b in changed:
        if a.mechanism == "ipfl":  # a learning cell: the rule as a parameter
            assert dict(b.params)["payments"] == "myrules:flat"
            assert config_hash(a) != config_hash(b)
        else:  # a market-level cell: the rule in its mechanism
            assert b.mechanism == f"{a.mechanism}+myrules:flat"
    kinds = {a.scenario for a, _ in changed}
    assert {"fig2", "liars", "inclusive-market", "fig5-learning"} <= kinds
    for a, b in zip(cells, mine, strict=True):  # baselines and CPL run as they were
        ipfl_cell = a.mechanism == "ipfl" or SCENARIOS[a.scenario].custom_rules
        assert (a != b) is ipfl_cell, a
    out, page = tmp_path / "store", tmp_path / "r.md"
    argv = ["reproduce", "--seeds", "0", "--scenarios", "liars", "--out", str(out), "--docs",
            str(page), "--quiet"]
    assert main([*argv, "--payments", "myrules:flat"]) == 0
    text = page.read_text()
    assert "12 cells of the 12" in text and "--payments myrules:flat" in text
    assert main([*argv, "--payments", "myrules:missing"]) == 2
    assert "--payments" in capsys.readouterr().err


def test_a_neutral_added_field_keeps_stored_cells_current():
    """Cells stored before ``payments``/``prices`` existed keep their config hash (the
    committed summary's), so a resumed reproduction does not recompute them; any other
    value is a new config."""
    from pathlib import Path

    from sims.reproduce import spec
    from sims.sweep import Cell, config_hash, expand

    summary = pd.read_csv(Path(__file__).parents[1] / "docs" / "reproduction_cells.csv",
                          usecols=["scenario", "mechanism", "cell", "config_hash"],
                          low_memory=False).drop_duplicates("cell")
    stored = dict(zip(summary.cell, summary.config_hash, strict=True))
    cells = [c for c in expand(spec()) if c.key in stored and c.scenario == "fig2"]
    assert any(c.mechanism == "ipfl" for c in cells)
    for c in cells:
        assert config_hash(c) == stored[c.key], c
    ipfl_cell = next(c for c in cells if c.mechanism == "ipfl")
    for params, same in (({"payments": "paper"}, True), ({"prices": "paper"}, True),
                         ({"payments": "vcg"}, False), ({"prices": "cost-plus"}, False)):
        other = Cell(ipfl_cell.scenario, "ipfl",
                     tuple(sorted({**dict(ipfl_cell.params), **params}.items())), ipfl_cell.seed)
        assert (config_hash(other) == stored[ipfl_cell.key]) is same, params
