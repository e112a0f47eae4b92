"""Names read from data never import code (issue 33, part 2): a results folder handed to you
holds a store whose cells name ``evil:rule`` and, next to it, ``evil.py``, which creates a
marker file when imported. ``fedmarket report`` (run from inside that folder, the module
importable) and ``fedmarket recheck`` never import it: the marker stays absent and the
refusal is one line naming the rule and the flag that would trust it. The payload is live:
the same report with ``--rules-from`` naming the module does create the marker (the known-bad
reader)."""

import json
import sys

import pandas as pd
import pytest

from mechanisms.lookup import (
    UntrustedName,
    load_callable,
    named_modules,
    names_from_data,
    untrusted,
)
from sims.cli import main
from sims.sweep import expand, run_sweep

EVIL = '''\
"""Creates MARKER when imported (module code) and when its rule runs."""
from pathlib import Path

Path({marker!r}).touch()


def rule(market, A, D):
    Path({marker!r}).touch()
    return 0.0 * A.sum(axis=-2)
'''


def _forget(name):
    sys.modules.pop(name, None)


@pytest.fixture
def handed_folder(tmp_path, monkeypatch):
    """A results folder as an attacker hands it over: a real store whose cells name
    ``evil_t33a:rule`` (run with the module importable, as the attacker did) and the module
    beside it; the marker removed afterwards, the module forgotten by this process."""
    folder = tmp_path / "handed"
    folder.mkdir()
    marker = tmp_path / "MARKER"
    (folder / "evil_t33a.py").write_text(EVIL.format(marker=str(marker)))
    spec = {"seeds": [0], "scenarios": [
        {"name": "inclusive-market", "mechanisms": ["local", "local+evil_t33a:rule"],
         "params": {"rounds": 1, "n_params": 100}}]}
    with monkeypatch.context() as mp:
        mp.syspath_prepend(str(folder))
        run_sweep(expand(spec), folder)
    assert marker.exists()  # the attacker's own run did import it
    marker.unlink()
    _forget("evil_t33a")
    yield folder, marker
    _forget("evil_t33a")


def _one_line(capsys, *words) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for w in words:
        assert w in err[0], err[0]
    return err[0]


@pytest.mark.slow
def test_a_report_of_a_handed_folder_imports_nothing_it_names(handed_folder, monkeypatch,
                                                                capsys):
    """Standing in the folder (the module importable from the current folder and from
    sys.path): the report is written, the marker never appears, one line says what was not
    imported; the rule's verdicts, regret and graph read "not checked" / "not drawn"."""
    folder, marker = handed_folder
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    code = main(["report", ".", "--verdict-examples", "20", "--regret-markets", "2"])
    assert code == 0
    assert not marker.exists()
    assert "evil_t33a" not in sys.modules
    _one_line(capsys, "not imported", "evil_t33a:rule", "--rules-from")
    verdicts = pd.read_csv(folder / "inclusive_verdicts.csv").set_index("mechanism")
    assert set(verdicts.loc["local+evil_t33a:rule"]) == {"not checked"}
    details = pd.read_csv(folder / "inclusive_verdicts_details.csv")
    mine = details[details.mechanism == "local+evil_t33a:rule"]
    assert len(mine) == len(verdicts.columns)
    assert mine.detail.str.contains("'evil_t33a:rule' is named by the store").all()
    assert "not drawn" in (folder / "report.md").read_text()
    assert not verdicts.loc["local"].eq("not checked").any()  # the built-in rule is checked


@pytest.mark.slow
def test_the_payload_is_live_when_the_user_trusts_it(handed_folder, monkeypatch, capsys):
    """The known-bad reader: naming the module with --rules-from imports it (the marker
    appears), so an absent marker above means refused, not broken."""
    folder, marker = handed_folder
    monkeypatch.chdir(folder)
    code = main(["report", ".", "--verdict-examples", "0", "--regret-markets", "0",
                 "--rank-by", "welfare", "--rules-from", "evil_t33a"])
    assert code == 0
    assert marker.exists()
    assert "not imported" not in capsys.readouterr().err


def test_recheck_refuses_a_rule_the_run_folder_names(tmp_path, monkeypatch, capsys):
    """A Flower run folder whose recorded round names ``evil_t33b:rule``: recheck refuses it
    in one line (exit 2), the module never imported though it sits in the current folder."""
    run = tmp_path / "run-1"
    run.mkdir()
    marker = tmp_path / "MARKER"
    (run / "evil_t33b.py").write_text(EVIL.format(marker=str(marker)))
    (run / "config.json").write_text("{}")
    (run / "rounds").mkdir()
    (run / "rounds" / "round-001.json").write_text(json.dumps({
        "round": 1, "algorithm": "ipfl", "rule": "evil_t33b:rule", "lam": 1.0,
        "reports": {"N": [10, 20], "c": [0.1, 0.1], "K": [1.0, 1.0]},
        "distances": [[0.0, 1.0], [1.0, 0.0]], "participants": [0, 1],
        "outcome": {"adjacency": [[0, 0], [0, 0]], "payments": [0.0, 0.0],
                    "utilities": [0.0, 0.0]}}))
    monkeypatch.chdir(run)
    monkeypatch.syspath_prepend(str(run))
    _forget("evil_t33b")
    assert main(["recheck", str(run)]) == 2
    assert not marker.exists()
    _one_line(capsys, "evil_t33b:rule", "named by the run folder", "--rules-from evil_t33b")
    _forget("evil_t33b")


def test_the_guard_itself():
    """Inside a data block a name imports only from a trusted module (or a package below
    one); outside it, as ever; built-in names need no import at all."""
    with names_from_data("the store in x", trusted=["json"]):
        assert load_callable("json:dumps", "x") is json.dumps
        with pytest.raises(UntrustedName, match=r"'os:getcwd' is named by the store in x"):
            load_callable("os:getcwd", "payments")
        with pytest.raises(UntrustedName):  # a prefix that is not a package above it
            load_callable("jsonx:f", "payments")
    with names_from_data("the store in y", trusted=["email"]):
        load_callable("email.utils:formatdate", "x")
    import os

    assert load_callable("os:getcwd", "x") is os.getcwd  # not data: the caller's own name
    assert untrusted(["local+a.b:c", "a.bc:d"], ["a.b"]) == ["a.bc:d"]
    assert named_modules(["local+a.b:c+cost-plus", "d:e"]) == ["a.b", "d"]
    with pytest.raises(ValueError, match="rules_from"):
        with names_from_data("x", trusted=["not a module"]):
            pass


def test_recheck_of_a_run_folder_with_an_unknown_pricing_is_one_line(tmp_path, capsys):
    """A run folder's pricing.json naming no pricing scheme: one line naming the field, not a
    traceback (it was a KeyError)."""
    run = tmp_path / "run-2"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "pricing.json").write_text(json.dumps({
        "reports": {"N": [10, 20], "v": [1.0, 1.0]}, "G": [1.0, 1.0], "c": 1.0,
        "budget": 5.0, "alpha": 1.0, "rounds": 5, "q_min": 0.1,
        "pricing": "evil_t33c:rule", "prices": [1.0, 1.0], "q": [1.0, 1.0]}))
    assert main(["recheck", str(run)]) == 2
    _one_line(capsys, "pricing: unknown 'evil_t33c:rule'", "equilibrium")
