"""Names read from data never import code, rule files and the Flower executor's preload list
included (issue 33, part 4). A rule file of ``fedmarket design`` (designed_rule.json) for a
space of the user's own names ``module:function``; the file is data, so loading it (``prove
--subject FILE.json``, :func:`sims.design.load_rule`) imports that module only if the user
names it (``--rules-from MODULE`` / ``rules_from=``), the guard every name read from data goes
through (:func:`mechanisms.lookup.names_from_data`). The payload creates a marker file when
imported: refused, the marker stays absent; trusted, it appears (the payload is live)."""

import json
import sys

import pytest

from mechanisms.lookup import UntrustedName, names_from_data
from sims.cli import main
from sims.design import UserSpace, load_rule, save_rule

EVIL = '''\
"""Creates MARKER when imported."""
from pathlib import Path

import numpy as np

from mechanisms.ipfl import over_arrays

Path({marker!r}).touch()


def make(theta):
    @over_arrays
    def pay(market, A, D):
        c = np.where(np.isfinite(market.c), market.c, 0.0)
        return np.where(A, theta[0] * c[..., None, :], 0.0)
    return pay
'''

MODULE = "evil_t33r"


@pytest.fixture
def handed_rule(tmp_path, monkeypatch):
    """A folder as handed over: designed_rule.json naming ``evil_t33r:make`` and the module
    beside it, importable (the folder is the current one and on sys.path)."""
    folder = tmp_path / "handed"
    folder.mkdir()
    marker = tmp_path / "MARKER"
    (folder / f"{MODULE}.py").write_text(EVIL.format(marker=str(marker)))
    doc = {"name": "designed", "theta": {"theta[0]": 1.0},
           "space": {"kind": "user", "spec": f"{MODULE}:make", "bounds": [[0.0, 2.0]],
                     "names": ["theta[0]"]}}
    path = folder / "designed_rule.json"
    path.write_text(json.dumps(doc))
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(MODULE, None)
    yield path, marker
    sys.modules.pop(MODULE, None)


def test_a_rule_file_s_space_is_not_imported_unless_trusted(handed_rule):
    path, marker = handed_rule
    with pytest.raises(UntrustedName) as e:
        load_rule(path)
    assert e.value.field == "space" and "\n" not in str(e.value)
    assert str(e.value).startswith(f"space: '{MODULE}:make' is named by the rule file ")
    assert f"--rules-from {MODULE}" in str(e.value)
    assert not marker.exists() and MODULE not in sys.modules
    # trusted by name: imported (the payload is live), the rule is the saved one
    rule = load_rule(path, rules_from=[MODULE])
    assert marker.exists() and callable(rule) and rule.over_arrays


def test_prove_refuses_a_rule_file_s_space_in_one_line_and_trusts_rules_from(handed_rule,
                                                                              capsys):
    path, marker = handed_rule
    argv = ["prove", "--subject", str(path), "--property", "budget_balance", "--engine",
            "batch", "--examples", "20", "--seed", "3", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fedmarket: error: space: '{MODULE}:make' "
                                               "is named by the rule file"), err
    assert f"--rules-from {MODULE}" in err[0] and not marker.exists()
    assert main([*argv, "--rules-from", MODULE]) == 0
    assert marker.exists()


def test_the_module_save_rule_writes_names_the_space_s_module_itself(tmp_path, monkeypatch):
    """The module beside a rule file is code the user imports by choice: it names the
    space's module (rules_from) and so loads; the JSON alone does not."""
    marker = tmp_path / "MARKER"
    (tmp_path / f"{MODULE}.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(MODULE, None)
    try:
        space = UserSpace(f"{MODULE}:make", bounds=((0.0, 2.0),))
        path = save_rule(tmp_path / "mine_t33r.json", space, [0.5], name="mine")
        assert f"rules_from=['{MODULE}']" in path.with_suffix(".py").read_text()
        sys.modules.pop("mine_t33r", None)
        import importlib

        mod = importlib.import_module("mine_t33r")
        assert callable(mod.payments) and mod.payments.over_arrays
        with pytest.raises(UntrustedName, match="space"):
            load_rule(path)
    finally:
        sys.modules.pop(MODULE, None)
        sys.modules.pop("mine_t33r", None)


def test_the_executor_s_preload_list_is_held_to_the_same_guard(tmp_path, monkeypatch):
    """Typed by the operator (--preload) a module is imported; named inside a block of data
    it must be trusted, else it is refused unimported, naming preload."""
    from learning.flower import executor

    marker = tmp_path / "MARKER"
    (tmp_path / f"{MODULE}.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(MODULE, None)
    try:
        with names_from_data("the node config"), pytest.raises(UntrustedName) as e:
            executor.preload([MODULE])
        assert e.value.field == "preload" and f"--rules-from {MODULE}" in str(e.value)
        assert not marker.exists() and MODULE not in sys.modules
        with names_from_data("the node config", [MODULE]):
            executor.preload([MODULE])
        assert marker.exists()
        marker.unlink()
        sys.modules.pop(MODULE, None)
        executor.preload([MODULE])  # the operator's own command line: no data involved
        assert marker.exists()
    finally:
        sys.modules.pop(MODULE, None)
