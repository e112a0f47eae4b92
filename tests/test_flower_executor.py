"""The warm ClientApp executor (learning.flower.executor): a SuperNode started with
``--isolation process`` gets every ClientApp task run by it (a forked child per task, flwr's
own runtime functions), with the in-process learner's payments; misuse is answered in one
line. That every process it starts dies with the Loopback's process is
tests/test_flower_loopback.py's (a Loopback is warm by default)."""

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from learning.flower import executor

REPO = Path(__file__).resolve().parents[1]


def test_misuse_is_answered_in_one_line():
    out = subprocess.run([sys.executable, "-m", "learning.flower.executor",
                          "--runtime-api-address", "127.0.0.1:9094"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2 and "give --insecure or --root-certificates" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "learning.flower.executor", "--insecure",
                          "--runtime-api-address", "127.0.0.1:9094", "--poll", "0"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2 and "poll: is 0.0; must lie in [0.01, 60]" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_toolkits_own_modules_are_never_preloaded():
    # a run's ClientApp is imported from the run's app bundle, not from this process
    with pytest.raises(ValueError, match=r"preload: 'learning\.flower\.app' is the toolkit's"):
        executor.preload(["learning.flower.app"])


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_clientapp_task_runs_in_the_warm_executor(tmp_path):
    from learning.algorithms import TrainConfig, run
    from learning.flower.loopback import Loopback

    cfg = {"algorithm": "ipfl", "dataset": "digits", "clients": 2, "rounds": 2, "steps": 5,
           "batch": 16, "lr": 0.05, "beta": 0.5}
    with Loopback(REPO, 2, tmp_path / "fed", workers=True, timings=True) as fed:
        assert fed.warm
        res = fed.run({**cfg, "round-timeout": 300.0, "registration-timeout": 300.0},
                      timeout=600)
        names = sorted(fed.procs)
    assert names == ["executor0", "executor1", "node0", "node1", "superlink", "worker0",
                     "worker1"]
    ref = run(TrainConfig(**{**cfg, "rounds": 1}))
    paid = sorted((r["pid"], r["payment"]) for r in res["ledger"] if r["round"] == 1)
    np.testing.assert_allclose([p for _, p in paid], ref.frame[ref.frame["round"] == 0].payment,
                               atol=1e-5)
    for i in (0, 1):
        log = (tmp_path / "fed" / f"executor{i}.log").read_text()
        ended = re.findall(r"child \d+ ended with (-?\d+)", log)
        # every message to the node: its registration query and 2 rounds (the last one also
        # evaluates the node's final model)
        assert ended == ["0"] * 3, log[-3000:]
        # the run's app bundle is installed by the node's first task only
        steps = re.findall(r"steps \(s\): input [\d.]+ message [\d.]+ (install|cached) ", log)
        assert steps == ["install", "cached", "cached"], log[-3000:]
    # the first task left the bytecode of the run's ClientApp modules in the installed bundle
    (bundle,) = (tmp_path / "fed" / "flwr-home" / "apps").iterdir()
    for module in ("learning/flower/app.py", "learning/flower/wire.py",
                   "learning/flower/worker.py", "mechanisms/errors.py"):
        assert Path(importlib.util.cache_from_source(str(bundle / module))).is_file(), module


def _imported_by_the_forwarding_clientapp(preloaded) -> list[str]:
    """The modules other than the toolkit's that importing the forwarding ClientApp (what a
    task's child loads from the run's bundle) imports after ``preloaded``, in a fresh
    Python."""
    code = (f"import importlib, sys\nfor name in {list(preloaded)!r}:\n"
            "    importlib.import_module(name)\nbefore = set(sys.modules)\n"
            "import learning.flower.app, learning.flower.wire, learning.flower.worker\n"
            "print(sorted(n for n in set(sys.modules) - before\n"
            "             if n.split('.')[0] not in ('learning', 'mechanisms', '__mp_main__')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=REPO, check=True)
    return ast.literal_eval(out.stdout)


def test_the_preload_holds_all_the_forwarding_clientapp_imports_beyond_its_own_modules():
    assert _imported_by_the_forwarding_clientapp(executor.PRELOAD) == []
    # known bad: the former list, without the worker's connection module
    former = [m for m in executor.PRELOAD if m != "multiprocessing.connection"]
    assert "multiprocessing.connection" in _imported_by_the_forwarding_clientapp(former)


def test_write_bytecode_caches_the_bundles_imported_modules_only(tmp_path, monkeypatch):
    bundle, elsewhere = tmp_path / "bundle", tmp_path / "elsewhere"
    (bundle / "runapp").mkdir(parents=True)
    (bundle / "runapp" / "__init__.py").write_text("")
    (bundle / "runapp" / "task.py").write_text("VALUE = 41 + 1\n")
    (bundle / "runapp" / "unused.py").write_text("VALUE = 0\n")
    elsewhere.mkdir()
    (elsewhere / "other_mod.py").write_text("VALUE = 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # Python writes none itself
    monkeypatch.syspath_prepend(str(elsewhere))
    monkeypatch.syspath_prepend(str(bundle))
    for name in ("runapp", "runapp.task", "other_mod"):
        sys.modules.pop(name, None)
    import other_mod  # noqa: F401
    import runapp.task

    assert runapp.task.VALUE == 42
    cache = importlib.util.cache_from_source
    assert not Path(cache(str(bundle / "runapp" / "task.py"))).exists()
    written = executor.write_bytecode(bundle)
    assert sorted(written) == sorted(cache(str(bundle / "runapp" / f)) for f in
                                     ("__init__.py", "task.py"))
    assert all(Path(p).is_file() for p in written)
    assert not Path(cache(str(bundle / "runapp" / "unused.py"))).exists()  # never imported
    assert not Path(cache(str(elsewhere / "other_mod.py"))).exists()  # not the bundle's
    assert executor.write_bytecode(bundle) == []  # written once
    # Python's own cache, valid for the source as installed (what its loader checks: magic
    # number, time-stamp mode, the source's modification time and size)
    for source in ("__init__.py", "task.py"):
        st = (bundle / "runapp" / source).stat()
        head = Path(cache(str(bundle / "runapp" / source))).read_bytes()[:16]
        assert head[:4] == importlib.util.MAGIC_NUMBER
        assert [int.from_bytes(head[k:k + 4], "little") for k in (4, 8, 12)] == \
            [0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF]
    for name in ("runapp", "runapp.task", "other_mod"):
        sys.modules.pop(name, None)


def test_the_howtos_executor_commands_use_flags_it_has():
    import re

    text = (REPO / "docs" / "howto-flower.md").read_text().replace("\\\n", " ")
    commands = [line.strip().split("#")[0].rstrip(" &") for line in text.splitlines()
                if line.strip().startswith("python -m learning.flower.executor")]
    assert len(commands) >= 3  # one host, warm nodes, several hosts
    helps = subprocess.run([sys.executable, "-m", "learning.flower.executor", "--help"],
                           capture_output=True, text=True, timeout=60, cwd=REPO).stdout
    for cmd in commands:
        for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", cmd):
            assert flag in helps, f"the executor has no {flag} (docs: {cmd})"
    assert "--isolation process" in text
