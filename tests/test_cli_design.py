"""``fedmarket design``: misuse is one line (exit 2); a tiny run writes the designed rule,
the frontier (CSV, sidecar, figure) and the certification, and the exported rule clears."""

import json
import sys

import numpy as np
import pandas as pd
import pytest

from mechanisms import ipfl
from sims.cli import main


@pytest.mark.parametrize("argv", [
    pytest.param(["--goal", "IR, make it fair"], id="goal"),
    pytest.param(["--space", "wobbly"], id="space"),
    pytest.param(["--features", "charisma"], id="features"),
    pytest.param(["--bounds", "cost=2"], id="bounds"),
    pytest.param(["--heldout-seed", "0"], id="heldout"),
    pytest.param(["--generations", "0"], id="generations"),
    pytest.param(["--space", "nosuchmod:f", "--bounds", "0:1"], id="user-space"),
])
def test_misuse_is_one_line(argv, capsys, tmp_path):
    assert main(["design", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err


def test_tiny_run_writes_and_certifies(tmp_path, capsys, monkeypatch):
    out = tmp_path / "d"
    code = main(["design", "--markets", "12", "--generations", "1", "--popsize", "2",
                 "--features", "marginal", "cost", "--heldout-markets", "20",
                 "--frontier-size", "2", "--certify-examples", "50", "--out", str(out),
                 "--goal", "IR, budget balance, minimise max regret over K c",
                 "--search", "former"])  # the files, not the search's strength (1/3 the CPU)
    assert code == 0
    text = capsys.readouterr().out
    assert "certification on held-out seed 1000" in text and "corner:" in text
    table = pd.read_csv(out / "frontier.csv")
    assert {"designed", "paper", "vcg", "shapley", "cost-plus", "share-all"} <= \
        set(table["rule"])
    side = json.loads((out / "frontier.json").read_text())
    assert side["heldout_seed"] == 1000 and "seed 0" in side["training"]
    cert = pd.read_csv(out / "certification.csv")
    assert set(cert["verdict"]) <= {"holds", "counterexample", "vacuous", "inconclusive"}
    assert cert.set_index("property").loc["budget_balance", "verdict"] == "holds"
    assert (out / "frontier.png").stat().st_size > 0
    monkeypatch.syspath_prepend(str(out))
    sys.modules.pop("designed_rule", None)
    market = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 0.0], K=[5e4, 3e4, 0.0], lam=2.0)
    D = np.array([[0, .1, .3], [.1, 0, .2], [.3, .2, 0]])
    s = ipfl.clear(market, D, "local", payments="designed_rule:payments")
    assert abs(s.payments.sum()) < 1e-9  # balanced family: remittances


def test_market_file_trains_on_your_market(tmp_path, capsys):
    f = tmp_path / "market.json"
    f.write_text(json.dumps({"N": [400, 500, 600], "c": [0.5, 1.0, 0.0],
                             "K": [5e4, 3e4, 0.0], "lam": 2.0,
                             "D": [[0, .1, .3], [.1, 0, .2], [.3, .2, 0]]}))
    out = tmp_path / "d"
    assert main(["design", "--market-file", str(f), "--generations", "1", "--popsize", "2",
                 "--features", "cost", "--heldout-markets", "10", "--frontier-size", "1",
                 "--certify-examples", "0", "--quiet", "--out", str(out)]) == 0
    doc = json.loads((out / "design.json").read_text())
    assert doc["training"] == str(f) and not (out / "certification.csv").exists()
    assert main(["design", "--market-file", str(tmp_path / "none.json"), "--out",
                 str(out)]) == 2
    assert "market_file" in capsys.readouterr().err


@pytest.mark.slow
def test_prove_certifies_an_exported_rule(tmp_path, capsys, monkeypatch):
    """The CLI path users run: `fedmarket prove --subject designed_rule.json` checks the
    exported rule on held-out markets (a seed other than the training seed) and shows each
    verdict beside the search's own training estimate; the same rule named as
    "designed_rule:payments" from its folder is the same subject; a rule file that pays
    nobody (known bad: sellers bear their cost) gets an IR counterexample through it."""
    from sims.design import LinearSpace, save_rule

    out = tmp_path / "d"
    assert main(["design", "--markets", "12", "--generations", "1", "--popsize", "2",
                 "--features", "marginal", "cost", "--heldout-markets", "10",
                 "--frontier-size", "1", "--certify-examples", "0", "--quiet",
                 "--out", str(out)]) == 0
    rule = out / "designed_rule.json"
    doc = json.loads(rule.read_text())
    assert doc["training_seed"] == 0 and "max_regret_K_under" in doc["estimates"]
    monkeypatch.setenv("COLUMNS", "400")
    capsys.readouterr()
    assert main(["prove", "--subject", str(rule), "--engine", "batch", "--examples", "400",
                 "--seed", "7"]) == 0
    text = capsys.readouterr().out
    assert "beside the search's own estimates" in " ".join(text.split())  # the title may wrap
    lines = [ln for ln in text.splitlines() if "budget_balance" in ln]
    assert lines and all("holds" in ln for ln in lines)
    k_under = [ln for ln in text.splitlines() if "truthful_K_under" in ln]
    est = doc["estimates"]["max_regret_K_under"]
    assert k_under and f"{est:.6g}" in k_under[-1]  # the estimate printed beside it
    # the training seed is refused: one line naming --seed
    assert main(["prove", "--subject", str(rule), "--engine", "batch", "--examples", "10",
                 "--seed", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "seed" in err and "training" in err and "\n" not in err
    assert main(["prove", "--subject", str(tmp_path / "none.json")]) == 2
    assert "no such rule file" in capsys.readouterr().err
    # "module:function" from the export's folder: the same rule
    monkeypatch.chdir(out)
    sys.modules.pop("designed_rule", None)
    assert main(["prove", "--subject", "designed_rule:payments", "--engine", "batch",
                 "--examples", "200", "--seed", "7", "--property", "budget_balance"]) == 0
    assert "holds" in capsys.readouterr().out
    # known bad: no payments at all breaks IR (a seller bears its cost unpaid)
    space = LinearSpace(("cost",), bounds={"cost": (0.0, 2.0)})
    bad = save_rule(tmp_path / "pays_nobody.json", space, [0.0], name="pays nobody",
                    extra={"training_seed": 0, "estimates": {"ir_rate": 0.0}})
    assert main(["prove", "--subject", str(bad), "--engine", "batch", "--examples", "400",
                 "--seed", "7", "--property", "individual_rationality"]) == 0
    text = capsys.readouterr().out
    ir = [ln for ln in text.splitlines() if "individual_rationality" in ln]
    assert ir and "counterexample" in ir[-1]


@pytest.mark.slow
def test_lagrangian_method_from_the_cli(tmp_path):
    out = tmp_path / "al"
    assert main(["design", "--markets", "10", "--generations", "1", "--popsize", "2",
                 "--features", "marginal", "cost", "--method", "lagrangian", "--stages", "2",
                 "--heldout-markets", "10", "--frontier-size", "1", "--certify-examples", "0",
                 "--quiet", "--out", str(out)]) == 0
    doc = json.loads((out / "design.json").read_text())
    assert [h["stage"] for h in doc["stages"]] == [1, 2]
    assert doc["search"]["method"] == "lagrangian"


@pytest.mark.parametrize("text", ["[1, 2]", "{bad", '{"name": "x"}'])
def test_prove_refuses_a_file_that_is_not_a_rule_file(text, tmp_path, capsys):
    f = tmp_path / "rule.json"
    f.write_text(text)
    assert main(["prove", "--subject", str(f), "--engine", "batch", "--examples", "10",
                 "--seed", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "rule_file" in err and "\n" not in err and "Traceback" not in err
