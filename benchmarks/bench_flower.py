"""One iPFL round (digits, 4 clients, 50 local steps each, clearing, prox-centres) timed the
same way on every side: in process, Flower simulation, and a Flower deployment on 127.0.0.1
(a SuperLink and 4 SuperNodes as processes, each with a warm node worker) whose ClientApps
run in the warm executor (``--isolation process``, :mod:`learning.flower.executor`) or in
flwr's own SuperExec (a fresh flwr-clientapp process per message); optionally also without
workers (a cold ClientApp per message).

Every side runs R = 5 rounds; a round's cost is the time between the ends of consecutive
rounds 1 -> 2 -> ... -> R-1 (set-up, start-up and the final evaluation fall outside; the
in-process learner evaluates only in rounds 0 and R-1, so no evaluation falls inside either).
In process: the runner's progress callbacks; Flower: the times the ServerApp writes each
round's provenance file. It then prints the waits Flower 1.42 hard-codes on a deployment
round's critical path (located in the installed flwr) and the imports of one flwr-clientapp
process (one per message), measured on this host: the floor under a deployment round; how
many objects (one request each per hop) a train message is; where a warm round's task spends
its time; and the CPU seconds each kind of the federation's processes (SuperLink, SuperNodes,
executors and their task children, workers, ServerApp) spent per round, read from /proc.
Usage: python benchmarks/bench_flower.py [--skip-cold] [--skip-superexec] [--skip-simulation]
       (FEDMARKET_BENCH_TINY=1: every side and section, with 2 clients (nodes) instead of 4,
       R = 3 rounds instead of 5 and 2 local steps a round instead of 50)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import best_of, pick

from learning.config import TrainConfig
from learning.flower.loopback import flwr_floors

ROUNDS = pick(5, 3)  # R: rounds 1 .. R-1 are timed (R - 2 of them)
NODES = pick(4, 2)  # clients: in process, simulated nodes, SuperNodes
CFG = dict(algorithm="ipfl", dataset="digits", clients=NODES, rounds=ROUNDS,
           steps=pick(50, 2), batch=32, lr=0.05, beta=0.5)
TIMED = ROUNDS - 2  # the rounds whose mean is a side's seconds per round


def _per_round(ends: list[float]) -> float:
    """Mean time between the ends of rounds 1->2, ..., R-2->R-1 (``ends[t]`` = end of round
    t)."""
    return (ends[ROUNDS - 1] - ends[1]) / TIMED


def inproc() -> float:
    from learning.runner import run

    cfg = TrainConfig(**CFG, evaluate_every=1000)
    run(TrainConfig(**{**CFG, "rounds": 1}))  # warm-up: imports, data, first torch calls
    ends: list[float] = []
    run(cfg, progress=lambda done, total: ends.append(time.perf_counter()))
    return _per_round([0.0, *ends[:-1]])  # ends[t-1] is the end of round t-1 (0-based)


def _round_ends(run_dir: Path) -> list[float]:
    files = sorted((run_dir / "rounds").glob("round-*.json"))
    return [0.0, *(f.stat().st_mtime for f in files)]  # index = Flower round (1-based)


def simulation(out: Path) -> float:
    from flwr.simulation import run_simulation

    from learning.flower.app import make_apps

    # Ray starts its workers (the simulated nodes' ClientApps) 15 niceness steps below the
    # process that starts it (its worker_niceness, "so that the OS prioritizes CPU for other
    # processes"): on a host shared with other jobs they waited behind all of them (2 s of
    # CPU in 3 minutes at load 10) while every other side here runs at the benchmark's own
    # priority. The same priority on every side, so that all are timed alike
    os.environ.setdefault("RAY_worker_niceness", "0")
    got: list = []
    server, client = make_apps(TrainConfig(**CFG), out=str(out), on_result=got.append)
    run_simulation(server, client, num_supernodes=NODES,
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": 2}})
    # Flower round t + 1 trains what the in-process round t trains: compare 2->3->4->5
    return _per_round(_round_ends(Path(got[0]["run_dir"]))[1:])


STEPS = ("input", "message", "install", "loaded", "called", "pushed", "done")


KINDS = (("flower-superlink", "SuperLink"), ("flower-supernode", "SuperNodes"),
         ("learning.flower.executor", "executors and their task children"),
         ("learning.flower.worker", "workers (the nodes' training)"),
         ("flwr-serverapp", "ServerApp"), ("flower-superexec", "SuperExecs"),
         ("flwr-clientapp", "flwr-clientapp processes"))


def _cpu_seconds(pids) -> dict[str, float]:
    """CPU seconds (user + system, with those of the children each has waited for) of the
    processes ``pids`` so far, summed by kind (:data:`KINDS`)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile (its parent's waited-for children count it)
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        kind = next((k for key, k in KINDS if key in cmd), "other")
        out[kind] = out.get(kind, 0.0) + sum(int(f) for f in fields[11:15]) / tick
    return out


def deployment(workdir: Path, workers: bool, warm: bool) -> tuple[float, dict[str, float]]:
    """(seconds per round, CPU seconds per round by kind of process) of a deployment; the CPU
    between the ends of rounds 1 and R-1, read from /proc (empty elsewhere)."""
    from learning.flower.loopback import Loopback

    repo = Path(__file__).resolve().parents[1]
    snaps: dict[int, dict[str, float]] = {}
    with Loopback(repo, NODES, workdir, workers=workers, warm=warm, timings=warm) as fed:
        out = workdir / "out"
        run_id = fed.submit({**CFG, "round-timeout": 600.0, "registration-timeout": 600.0,
                             "out": str(out)})
        run_dir = out / f"run-{run_id}"
        deadline = time.monotonic() + 1800
        while len(snaps) < 2 and time.monotonic() < deadline and Path("/proc/self").exists():
            done = len(list((run_dir / "rounds").glob("round-*.json")))
            for t in (1, ROUNDS - 1):
                if done >= t and t not in snaps:
                    snaps[t] = _cpu_seconds(fed.processes())
            if fed.procs["superlink"].poll() is not None:
                break
            time.sleep(0.05)
        fed.wait(run_dir, timeout=max(deadline - time.monotonic(), 1.0))
    cpu = {k: (v - snaps[1].get(k, 0.0)) / TIMED
           for k, v in snaps.get(ROUNDS - 1, {}).items()} \
        if len(snaps) == 2 else {}
    return _per_round(_round_ends(run_dir)[1:]), cpu


def task_steps(workdir: Path) -> dict[str, float]:
    """Median seconds of each step of the training tasks the warm executors ran (their
    ``--timings`` lines; each node's first task, its registration query, left out) and of
    the node's work in its worker (``train``)."""
    import re
    from statistics import median

    steps: dict[str, list[float]] = {}
    for log in sorted(workdir.glob("executor*.log")):
        lines = re.findall(r"steps \(s\): (.*)", log.read_text())[1:]
        for line in lines:
            words = line.split()
            for name, sec in zip(words[::2], words[1::2], strict=True):
                steps.setdefault("install" if name == "cached" else name, []).append(
                    float(sec))
    for log in sorted(workdir.glob("worker*.log")):
        steps.setdefault("work", []).extend(
            float(m) for m in re.findall(r" train \d+ ([\d.]+) s", log.read_text()))
    return {k: median(v) for k, v in steps.items() if v}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--skip-cold", action="store_true",
                   help="skip the deployment without workers (slow: a process per message)")
    p.add_argument("--skip-simulation", action="store_true",
                   help="skip the Flower simulation (Ray)")
    p.add_argument("--skip-superexec", action="store_true",
                   help="skip the deployment with flwr's SuperExec (a flwr-clientapp process "
                        "per message)")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench_flower_"))
    rows = [(f"in process (lockstep, {NODES} clients at once)", inproc())]
    if not args.skip_simulation:
        rows.append((f"Flower simulation (Ray, {NODES} nodes)", simulation(tmp / "sim")))
    first = len(rows)  # the deployments' rows from here on
    cpus = {}
    sides = [("deployment, warm executor + workers", "warm", True, True)]
    if not args.skip_superexec:
        sides.append(("deployment, flwr's SuperExec + workers", "superexec", True, False))
    if not args.skip_cold:
        sides.append(("deployment, flwr's SuperExec, no workers", "cold", False, False))
    for name, folder, workers, warm in sides:
        sec, cpus[name] = deployment(tmp / folder, workers=workers, warm=warm)
        rows.append((name, sec))
    base = rows[0][1]
    print(f"iPFL, digits, {NODES} clients, {CFG['steps']} local steps per round: seconds per "
          f"round (mean of {TIMED} round{'s' * (TIMED > 1)}), {os.cpu_count()} CPUs")
    for name, sec in rows:
        print(f"   {name:<55s} {sec:7.3f} s   {sec / base:6.1f}x in process")
    sleeps = 0.0
    print("Flower 1.42's fixed cost on a deployment round's critical path:")
    floors = flwr_floors()
    for f in floors:
        if f["seconds"] is not None:
            print(f"   {f['seconds']:5.2f} s  {f['what']} ({f['where'] or 'not in this flwr'})")
            sleeps += f["seconds"] if f["where"] else 0.0
    start, runtime = clientapp_start()
    print(f"   {sleeps:5.2f} s  in all: flwr's floor, {sleeps / base:.1f}x the in-process round "
          f"before any work")
    print(f"   {start:5.2f} s  and with flwr's SuperExec, a flwr-clientapp process per message "
          f"(it exits after one, flwr/supernode/runtime/run_clientapp.py): its imports alone, "
          f"one process at a time, best of 3 on this host now; {start - runtime:.2f} s of them "
          f"the whole SuperNode its entry point imports ({floors[-1]['where']}); the warm "
          f"executor forks a child that has them already")
    print(f"A message is {objects_per_message()} objects (a train message or its reply: the "
          f"message, its record dict, one config record holding the model's bytes; "
          f"learning.flower.wire); flwr moves each with a request of its own on each hop.")
    print("Side by side, seconds per round: the round, flwr's floor (its two sleeps), the "
          "in-process round (the same work) and our overhead, what is left above both "
          f"(message trips, a task per message, {NODES} nodes on the host's cores at once):")
    print(f"   {'side':<55s} {'round':>7s} {'floor':>7s} {'work':>7s} {'ours':>7s}")
    for name, sec in rows[first:]:
        print(f"   {name:<55s} {sec:7.3f} {sleeps:7.3f} {base:7.3f} "
              f"{sec - sleeps - base:7.3f}")
    print(f"   (load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end)")
    for name, cpu in cpus.items():
        if cpu:
            print(f"CPU seconds per round of the federation's processes ({name}; between the "
                  f"ends of rounds 1 and {ROUNDS - 1}, from /proc; {os.cpu_count()} CPUs):")
            for kind, sec in sorted(cpu.items(), key=lambda kv: -kv[1]):
                print(f"   {sec:7.3f} s  {kind}")
            print(f"   {sum(cpu.values()):7.3f} s  in all")
    steps = task_steps(tmp / "warm")
    if steps:
        warm = rows[first][1]
        task = sum(steps.get(k, 0.0) for k in STEPS)
        print("Where a warm deployment round goes (median seconds of one node's training "
              "task, from the executors' --timings and the workers' logs):")
        what = {"input": "the task's context, run and app bundle from the SuperNode",
                "message": "its message's objects: the server's push to the SuperLink and "
                           "the SuperNode's pull from it (flwr's, 1 s retries included)",
                "install": "the app bundle (installed by the node's first task only)",
                "loaded": "loading the ClientApp",
                "called": f"the ClientApp, of which {steps.get('work', 0.0):.3f} s the "
                          "node's training in its worker",
                "pushed": "the reply to the SuperNode", "done": "the task's status"}
        for k in STEPS:
            if k in steps:
                print(f"   {steps[k]:7.3f} s  {what[k]}")
        print(f"   {task:7.3f} s  the task in all; the other {warm - task:.3f} s of the "
              f"{warm:.3f} s round: flwr's SuperNode sleeping 3 s before it pulls, polling "
              "every 0.5 s for the reply and uploading it to the SuperLink (an HTTP request "
              "per object), the server's pull, and the server's clearing and next messages "
              "(ours)")


def objects_per_message() -> int:
    """The objects flwr moves for one of the benchmark's train messages (the message and what
    its content holds)."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    from learning.flower.adapter import initial_model
    from learning.flower.wire import CONFIG, content

    theta = initial_model(TrainConfig(**CFG), (64,), 10)[2]
    record = content(CONFIG, {"server-round": 2, "prox": 0.1}, model=theta)
    return 1 + len(get_all_nested_objects(record))


def clientapp_start() -> tuple[float, float]:
    """Seconds a fresh Python takes to import what the flwr-clientapp entry point imports, and
    what the ClientApp runtime alone would (best of 3 each)."""
    def imports(code: str) -> float:
        return best_of(lambda: subprocess.run([sys.executable, "-c", code], check=True))[0]

    bare = imports("pass")
    return (imports("import flwr.supernode.cli.flwr_clientapp") - bare,
            imports("import flwr.supernode.runtime.run_clientapp") - bare)


if __name__ == "__main__":
    main()
