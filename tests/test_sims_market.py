"""The inclusive-market scenario and the ``fedmarket`` CLI, as a user runs them."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from mechanisms.errors import MarketInputError
from sims.cli import main
from sims.inclusive import InclusiveMarket, run_inclusive_market

SMALL = {"rounds": 4, "n_params": 2000}


def test_roles_and_expected_outcome():
    res = run_inclusive_market(InclusiveMarket(**SMALL))
    s = res.summary()
    assert list(s.role.value_counts().sort_index().items()) == [
        ("attacker", 1), ("buyer", 4), ("seller", 4), ("trader", 3)]
    att = s[s.role == "attacker"].iloc[0]
    assert att.sold_to == [] and att.bought_from == [] and att.earned == 0.0
    assert (s[s.role == "buyer"].earned == 0).all()  # c = inf: never sells
    assert all(b == [] for b in s[s.role.isin(["seller", "attacker"])].bought_from)  # K = 0
    assert (res.rounds.utility >= -1e-9).all()  # IR, every round, every honest client
    assert abs(res.rounds.groupby("round").payment.sum()).max() < 1e-10
    np.testing.assert_allclose(res.flows.sum(axis=1), s.paid)


@pytest.mark.parametrize("attack", ["gaussian", "shuffle", "signflip", "same"])
def test_attacker_isolated_under_each_attack(attack):
    res = run_inclusive_market(InclusiveMarket(attack=attack, **SMALL))
    att = [i for i, r in enumerate(res.roles) if r == "attacker"]
    assert res.bought[:, att].sum() == 0


def test_seed_reproducible_across_processes():
    code = (
        "from sims.inclusive import run_inclusive_market, InclusiveMarket;"
        "r = run_inclusive_market(InclusiveMarket(rounds=3, n_params=500, seed=7));"
        "print(repr(float(r.rounds.utility.sum())))"
    )
    a = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    b = run_inclusive_market(InclusiveMarket(rounds=3, n_params=500, seed=7))
    assert float(a.stdout) == b.rounds.utility.sum()
    other = run_inclusive_market(InclusiveMarket(rounds=3, n_params=500, seed=8))
    assert other.rounds.utility.sum() != b.rounds.utility.sum()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"rounds": 0}, "rounds"), ({"attack": "ddos"}, "attack"), ({"lam": -1.0}, "lam"),
     ({"n_min": 500, "n_max": 100}, "n_max"), ({"rule": "fast"}, "rule")],
)
def test_bad_config(kwargs, field):
    with pytest.raises(MarketInputError) as info:
        InclusiveMarket(**kwargs)
    assert info.value.field == field


def test_cli_market_writes_csv_json_png(tmp_path, capsys):
    assert main(["market", "--rounds", "3", "--out", str(tmp_path), "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "attacker isolated: True" in text
    rounds = pd.read_csv(tmp_path / "rounds.csv")
    assert len(rounds) == 3 * 12
    assert {"round", "client", "role", "paid", "earned", "payment", "utility"} <= set(rounds)
    meta = json.loads((tmp_path / "rounds.json").read_text())
    assert meta["config"]["seed"] == 1 and meta["rows"] == 36 and meta["versions"]["numpy"]
    png = (tmp_path / "transactions.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_cli_clear_from_json(tmp_path, capsys):
    spec = {"N": [400, 500, 600], "c": [0.5, "inf", 0.0], "K": [5e4, 3e4, 0.0], "lam": 2.0,
            "D": [[0, 0.1, 0.3], [0.1, 0, 0.2], [0.3, 0.2, 0]]}
    f = tmp_path / "m.json"
    f.write_text(json.dumps(spec))
    assert main(["clear", str(f), "--rule", "exact", "--csv", str(tmp_path / "o.csv")]) == 0
    out = pd.read_csv(tmp_path / "o.csv")
    assert out.payment.sum() == pytest.approx(0, abs=1e-12)
    assert out.loc[0, "bought_from"] == "[2]"  # client 1 is a pure buyer: nobody buys it
    assert "welfare" in capsys.readouterr().out


def test_cli_reports_bad_input_by_field(tmp_path, capsys):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"N": [1, -2], "c": [0, 0], "K": [1, 1], "D": [[0, 0], [0, 0]]}))
    assert main(["clear", str(f)]) == 2
    assert "N: entry 1 is -2.0" in capsys.readouterr().err


def test_console_script_installed():
    r = subprocess.run([sys.executable, "-m", "sims.cli", "--help"], capture_output=True,
                       text=True, check=True)
    assert "market" in r.stdout and "clear" in r.stdout


def test_cli_cpl_table_png_and_sweep(tmp_path, capsys):
    args = ["cpl", "--clients", "12", "--points", "20", "--out", str(tmp_path),
            "--sweep", "5", "30", "4"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "bisection" in text and "lambda*" in text
    table = pd.read_csv(tmp_path / "comparison.csv")
    assert list(table.scheme) == ["bisection", "cvxpy", "cvxpy-linesearch", "uniform",
                                  "weighted", "gradient"]
    best = table.set_index("scheme").objective_bound
    assert best["bisection"] <= best["cvxpy-linesearch"]
    assert best["bisection"] == pytest.approx(best["cvxpy"], rel=1e-6)
    sweep = pd.read_csv(tmp_path / "budget_sweep.csv")
    assert set(sweep.scheme) == {"bisection", "uniform", "weighted"} and len(sweep) == 12
    for png in ("prices.png", "budget_sweep.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_cli_cpl_infeasible_budget_is_a_clear_error(tmp_path, capsys):
    assert main(["cpl", "--budget=-1e6", "--out", str(tmp_path), "--quiet"]) == 2
    assert "budget" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_prove_writes_markdown_with_counterexample(tmp_path, capsys):
    md = tmp_path / "report.md"
    code = main(["prove", "--examples", "40", "--subject", "local", "--property", "truthful_N_over",
                 "--property", "budget_balance", "--exhaustive", "--markdown", str(md)])
    assert code == 0
    text = md.read_text()
    assert "No gain from overstating N" in text and "counterexample" in text
    assert "exhaustive" in text  # budget balance also checked on the tiny-market grid
    out = capsys.readouterr().out
    assert "checks as declared" in out and "case = IpflCase(market, D, client=" in out


def test_cli_prove_unknown_property(capsys):
    assert main(["prove", "--property", "thm9"]) == 2
    assert "property" in capsys.readouterr().err


def test_cli_train_two_algorithms(tmp_path, capsys):
    args = ["train", "--algorithm", "ipfl", "local", "--dataset", "digits", "--clients", "4",
            "--rounds", "2", "--steps", "5", "--batch", "8", "--beta", "0.5", "--out",
            str(tmp_path)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "ipfl: mean personalised accuracy" in text and "local:" in text
    frame = pd.read_parquet(tmp_path / "ipfl.parquet")
    assert len(frame) == 8 and {"acc_personalised", "utility", "payment"} <= set(frame)
    meta = json.loads((tmp_path / "ipfl.json").read_text())
    assert meta["config"]["algorithm"] == "ipfl" and meta["config"]["clients"] == 4
    assert (tmp_path / "accuracy.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_train_missing_data_dir(tmp_path, capsys):
    args = ["train", "--dataset", "fashion-mnist", "--data-dir", str(tmp_path), "--out",
            str(tmp_path / "o"), "--quiet"]
    assert main(args) == 2
    assert "dataset-fashion-mnist" in capsys.readouterr().err


@pytest.mark.parametrize("config, field, constant", [
    ("learning.config:TrainConfig", "K", "IPFL_K"),
    ("learning.config:TrainConfig", "C", "IPFL_C"),
    ("learning.config:TrainConfig", "eta", "IPFL_ETA"),
    ("learning.config:TrainConfig", "cpl_budget", "CPL_BUDGET"),
    ("learning.config:TrainConfig", "cpl_c", "CPL_C"),
    ("learning.config:TrainConfig", "cpl_v_mean", "CPL_V_MEAN"),
    ("learning.config:TrainConfig", "cpl_alpha", "CPL_ALPHA"),
    ("learning.config:TrainConfig", "cpl_q_min", "CPL_Q_MIN"),
    ("sims.inclusive:InclusiveMarket", "K", "IPFL_K"),
    ("sims.inclusive:InclusiveMarket", "C", "IPFL_C"),
    ("sims.cpl_game:CplBenchmark", "c", "CPL_C"),
    ("sims.cpl_game:CplBenchmark", "budget", "CPL_BUDGET"),
    ("sims.cpl_game:CplBenchmark", "alpha", "CPL_ALPHA"),
    ("sims.cpl_game:CplBenchmark", "q_min", "CPL_Q_MIN"),
    ("mechanisms.cpl:Game", "alpha", "CPL_ALPHA"),
    ("mechanisms.cpl:Game", "R", "CPL_R"),
    ("learning.flower.strategies:IpflStrategy", "eta", "IPFL_ETA"),
    ("learning.flower.strategies:CplStrategy", "c", "CPL_C"),
    ("learning.flower.strategies:CplStrategy", "budget", "CPL_BUDGET"),
    ("learning.flower.strategies:CplStrategy", "alpha", "CPL_ALPHA"),
    ("learning.flower.strategies:CplStrategy", "q_min", "CPL_Q_MIN"),
])
def test_paper_defaults_have_one_source(config, field, constant):
    """Each config's default (a dataclass field, or a keyword of a Flower strategy's
    ``__init__``) is written as ``paper.CONSTANT`` in its source (not a copy of the number),
    and equals it."""
    import ast
    import dataclasses
    import importlib
    import inspect
    import textwrap

    from mechanisms import paper

    module_name, cls_name = config.split(":")
    if module_name.startswith("learning.flower"):
        pytest.importorskip("flwr")
    cls = getattr(importlib.import_module(module_name), cls_name)
    if dataclasses.is_dataclass(cls):
        default = {f.name: f.default for f in dataclasses.fields(cls)}[field]
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
        (value,) = [s.value for s in body if isinstance(s, ast.AnnAssign)
                    and isinstance(s.target, ast.Name) and s.target.id == field]
    else:
        default = inspect.signature(cls.__init__).parameters[field].default
        fn = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__))).body[0]
        value = dict(zip([a.arg for a in fn.args.kwonlyargs], fn.args.kw_defaults,
                         strict=True))[field]
    assert default == getattr(paper, constant)
    assert ast.unparse(value) == f"paper.{constant}"
