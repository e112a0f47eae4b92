"""A real deployment on 127.0.0.1: a SuperLink and four SuperNodes (each with a warm worker)
as processes on free ports, iPFL then CPL for two rounds, one node killed mid-run. Asserts the
ledger, the ServerApp's WARNING line naming the client, and the offline re-check. Everything
the test started, and every process flwr started below it, is stopped by process id
(Loopback.stop), every wait is bounded."""

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from learning.algorithms import TrainConfig, run
from learning.flower.loopback import Loopback
from learning.flower.provenance import recheck

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BASE = {"dataset": "digits", "clients": 4, "rounds": 2, "steps": 10, "batch": 16, "lr": 0.05,
        "beta": 0.5, "round-timeout": 60.0, "registration-timeout": 240.0}


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout} s")
        time.sleep(0.2)


def test_deployment_on_loopback_survives_a_killed_node(tmp_path):
    out = tmp_path / "out"
    with Loopback(REPO, 4, tmp_path / "fed", workers=True) as fed:
        run_id = fed.submit({**BASE, "algorithm": "ipfl", "out": str(out)})
        run_dir = out / f"run-{run_id}"
        _wait_for(run_dir / "rounds" / "round-0001.json", 300)
        fed.kill_node(3)  # mid-run: after round 1, before round 2's replies
        res = fed.wait(run_dir, 300)
        log = fed.log(run_id)

        # round 1 traded among all four with the reports the in-process learner uses
        ref = run(TrainConfig(algorithm="ipfl", dataset="digits", clients=4, rounds=2,
                              steps=10, batch=16, lr=0.05, beta=0.5))
        paid = sorted((r["pid"], r["payment"]) for r in res["ledger"] if r["round"] == 1)
        np.testing.assert_allclose([p for _, p in paid],
                                   ref.frame[ref.frame["round"] == 1].payment, atol=1e-5)
        assert {r["pid"] for r in res["ledger"] if r["round"] == 2} == {0, 1, 2}
        for t in (1, 2):
            assert abs(sum(r["payment"] for r in res["ledger"] if r["round"] == t)) < 1e-9
        node3 = res["members"]["3"]
        assert any(r["round"] == 2 and r["pid"] == 3 and "silent" in r["reason"]
                   for r in res["rejected"])
        assert "WARNING" in log and f"round 2: client 3 (node {node3}) rejected: silent" in log
        assert recheck(run_dir)["ok"].all()
        assert res["pids"] == [0, 1, 2]  # the dead node is not waited for at evaluation

        # the node comes back (a new Flower node id) and takes its place in a CPL run
        fed.start_node(3)
        cpl = fed.run({**BASE, "algorithm": "cpl", "cpl-budget": 5.0, "save-uploads": True,
                       "out": str(out)}, timeout=300)
        assert cpl["members"]["3"] != node3 and len(cpl["q"]) == 4
        checks = recheck(cpl["run_dir"])
        assert checks["ok"].all() and "cpl aggregate" in set(checks["check"])
        started = list(fed.procs.values())
        below = set(fed.seen) - {p.pid for p in started}  # flwr's own: SuperExecs, apps
    assert len(started) == 9 and all(p.poll() is not None for p in started)  # all stopped
    assert len(below) >= 5 and fed.survivors() == []  # and everything they started
