"""A Loopback federation dies with the process that started it: SIGTERM, SIGINT or SIGKILL of
that process (here a child of the test running a Loopback with a run in flight) leaves no
process it, or flwr below it, started. Checked by process id (with its start time, so a reused
pid does not count) and by a scan of every process on the host for the federation's private
FLWR_HOME in its environment."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from learning.flower import reaper

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from learning.flower.loopback import Loopback

    repo, work, submit = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "run"
    fed = Loopback(repo, 2, work / "fed", workers=submit).start()  # no `with`: no clean-up
    if submit:
        run_id = fed.submit({"algorithm": "ipfl", "dataset": "digits", "clients": 2,
                             "rounds": 50, "steps": 2, "batch": 16, "out": str(work / "out")})
        first = work / "out" / f"run-{run_id}" / "rounds"  # both nodes registered
    else:  # the federation is up: SuperLink, SuperNodes and their SuperExecs (warm executors)
        first = work / "up"
    while not first.exists():  # no deadline: the test's timeout bounds the wait
        if not submit and len(fed.processes()) >= 6:
            first.touch()
        time.sleep(0.2)
    while True:  # a run in flight: report everything seen so far, until killed
        tmp = work / "pids.tmp"
        tmp.write_text(json.dumps({"pids": fed.processes(), "round": first.exists(),
                                   "me": os.getpid()}))
        tmp.replace(work / "pids.json")
        time.sleep(0.3)
""")


def _stat(pid: int):
    """(state, start time) of a process, None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], fields[19]


def _holding(home: str) -> list[int]:
    """Live (non-zombie) processes whose environment names FLWR_HOME=home."""
    needle = f"FLWR_HOME={home}".encode()
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            st = _stat(int(entry.name))
            if st is not None and st[0] != "Z":
                out.append(int(entry.name))
    return out


def _alive(pids: dict) -> list[int]:
    return sorted(int(p) for p, t in pids.items()
                  if (st := _stat(int(p))) is not None and st[1] == t and st[0] != "Z")


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig, submit, least", [
    # with a run in flight: SuperLink, its SuperExec, the ServerApp, two SuperNodes, their
    # SuperExecs (or warm executors), two workers
    (signal.SIGTERM, "run", 8), (signal.SIGKILL, "run", 8),
    (signal.SIGINT, "idle", 6)],  # KeyboardInterrupt, then interpreter exit (atexit)
    ids=["sigterm", "sigkill", "sigint"])
def test_a_loopback_dies_with_its_process(tmp_path, sig, submit, least):
    home = str(tmp_path / "fed" / "flwr-home")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(REPO), str(tmp_path), submit],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True,
                             # SIGINT as a terminal gives it: a shell's background job (nohup,
                             # CI) starts with SIGINT ignored, and Python keeps that
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        state = tmp_path / "pids.json"
        t0 = time.monotonic()
        # until the federation is up (with a run: its first round recorded) or the child
        # died; no deadline but the suite's timeout (600 s; a fixed one flaked under load)
        while child.poll() is None:
            if state.exists() and json.loads(state.read_text())["round"]:
                break
            time.sleep(0.5)
        assert child.poll() is None, child.stderr.read().decode()[-3000:]
        # the baseline, measured here under this host's load: starting the federation (its
        # 6-8 Python processes and their imports); stopping it is far less work
        startup = time.monotonic() - t0
        seen = json.loads(state.read_text())
        assert seen["round"]
        pids = seen["pids"]
        # the federation and what flwr started below it (and the reaper)
        held = set(_holding(home))
        assert len(pids) >= least and set(_alive(pids)) <= held, (pids, held)
        os.kill(child.pid, sig)
        t0 = time.monotonic()
        # all gone within twice the time it took to start them (stopping is less work than
        # starting; twice: room for the scheduler, still bounded by this host's own pace)
        bound = 2 * startup
        child.wait(bound)
        if sig == signal.SIGKILL:
            assert child.returncode == -signal.SIGKILL
        while (_alive(pids) or _holding(home)) and time.monotonic() - t0 < bound:
            time.sleep(0.2)
        assert _alive(pids) == [] and _holding(home) == [], (startup, time.monotonic() - t0)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        for pid in _holding(home):  # never leave a stray federation behind a failed test
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except OSError:
                pass


def test_the_reaper_stops_the_groups_it_was_told_of_when_its_pipe_closes():
    def sleeper():
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)

    told, untold, dropped = sleeper(), sleeper(), sleeper()
    guard = subprocess.Popen([sys.executable, "-m", "learning.flower.reaper", "--grace", "1"],
                             stdin=subprocess.PIPE, text=True, start_new_session=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        guard.stdin.write(f"+{told.pid}\n+{dropped.pid}\n-{dropped.pid}\n")
        guard.stdin.close()  # as when the parent dies
        guard.wait(20)
        assert told.wait(20) == -signal.SIGTERM
        assert untold.poll() is None and dropped.poll() is None
    finally:
        for p in (told, untold, dropped):
            p.kill()
            p.wait()
    # "done" first: nothing is reaped
    p = sleeper()
    try:
        assert reaper.serve(iter([f"+{p.pid}", "done"])) is False
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
