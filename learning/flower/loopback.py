"""A real Flower deployment on one host: a SuperLink and SuperNodes as processes on 127.0.0.1.

Used by the deployment test, the benchmark and docs/howto-flower.md. Ports are chosen free at
run time, the Flower configuration file lives in a private ``FLWR_HOME`` (a SuperLink
connection named ``loopback``), every process is started in its own process group and stopped
by its id, and every wait is bounded::

    with Loopback(app_dir=".", nodes=4, workdir="/tmp/fl") as fed:
        summary = fed.run({"algorithm": "ipfl", "rounds": 2})

``workers=True`` starts a warm node worker (:mod:`learning.flower.worker`) next to each
SuperNode and names it in the node's config. ``task_poll`` sets how often each SuperNode's
SuperExec asks for a ClientApp task to start (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, flwr's
default 1 s; here 0.1 s).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["FLWR_FLOORS", "Loopback", "flwr_floors", "free_port", "toml_value"]


# Flower 1.42's fixed waits on a deployment round's critical path (module, source line, what):
# the SuperNode sleeps 3 s whenever a pull finds no message, which is always the case right
# after it replied (the server waits for every node before it sends the next round), and it
# looks for the ClientApp's reply every 0.5 s.
FLWR_FLOORS = (
    ("flwr.supernode.start_client_internal", "time.sleep(3)",
     "an idle SuperNode pulls from the SuperLink every 3 s", 3.0),
    ("flwr.supernode.start_client_internal", "time.sleep(0.5)",
     "a SuperNode looks for its ClientApp's reply every 0.5 s (0.25 s on average)", 0.25),
    # not a wait: the flwr-clientapp entry point (one process per message) imports the whole
    # SuperNode package; its cost is the host's, measured by benchmarks/bench_flower.py
    ("flwr.supernode.cli", "from .flower_supernode import flower_supernode",
     "every flwr-clientapp process imports the whole SuperNode", None),
)


def flwr_floors() -> list[dict]:
    """Where the installed flwr hard-codes the waits of :data:`FLWR_FLOORS`: one dict per wait
    (``where`` = file:line of its first occurrence, None if this flwr no longer has it;
    ``what``; ``seconds`` a round spends in it on its critical path, None where the host
    decides)."""
    import importlib.util

    out = []
    for module, code, what, seconds in FLWR_FLOORS:
        spec = importlib.util.find_spec(module)
        where = None
        if spec is not None and spec.origin:
            lines = Path(spec.origin).read_text().splitlines()
            hit = next((i for i, line in enumerate(lines, 1) if line.strip() == code), None)
            if hit is not None:
                parts = Path(spec.origin).parts
                where = f"{'/'.join(parts[parts.index('flwr'):])}:{hit}"
        out.append({"where": where, "what": what, "seconds": seconds})
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml_value(v) -> str:
    """A value as Flower's ``key=value`` config strings want it (TOML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return json.dumps(str(v))


def _pairs(config: dict) -> str:
    return " ".join(f"{k}={toml_value(v)}" for k, v in config.items())


def _proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) of every process, from /proc (empty elsewhere)."""
    out = {}
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self/stat").exists() else ():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) "
        out[int(entry.name)] = (int(fields[1]), fields[0], fields[19])
    return out


def _wait_port(port: int, deadline: float, proc) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} in time")


class Loopback:
    """One SuperLink and ``nodes`` SuperNodes on 127.0.0.1 (see the module docstring).

    ``nodes``: a count (node i gets ``partition-id=i num-partitions=count``) or a list of node
    configs. ``bin_dir``: where flower-superlink, flower-supernode and flwr live (default: next
    to this Python)."""

    def __init__(self, app_dir, nodes, workdir, *, workers: bool = False, bin_dir=None,
                 start_timeout: float = 60.0, task_poll: float = 0.1):
        self.app_dir = Path(app_dir).resolve()
        self.workdir = Path(workdir).resolve()
        n = nodes if isinstance(nodes, int) else len(nodes)
        self.node_configs = [{"partition-id": i, "num-partitions": n} for i in range(n)] \
            if isinstance(nodes, int) else [dict(c) for c in nodes]
        self.workers, self.start_timeout = workers, start_timeout
        self.bin = Path(bin_dir) if bin_dir else Path(sys.executable).parent
        self.home = self.workdir / "flwr-home"
        self.procs: dict[str, subprocess.Popen] = {}
        self.seen: dict[int, str] = {}  # every process started here or below: pid -> start time
        self.env = {**os.environ, "FLWR_HOME": str(self.home),
                    "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                    "PYTHONPATH": os.pathsep.join(
                        [str(self.app_dir)] + ([os.environ["PYTHONPATH"]]
                                               if os.environ.get("PYTHONPATH") else [])),
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
                    "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": str(float(task_poll))}

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                cwd=self.workdir, start_new_session=True)
        log.close()
        self.procs[name] = proc
        return proc

    def start(self) -> Loopback:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        (self.home / "config.toml").write_text(
            '[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        deadline = time.monotonic() + self.start_timeout
        link = self._spawn("superlink", [str(self.bin / "flower-superlink"), "--insecure",
                                         "--port", str(self.port),
                                         "--disable-runtime-dependency-installation"])
        _wait_port(self.port, deadline, link)
        for i in range(len(self.node_configs)):
            self.start_node(i)
        return self

    def start_node(self, i: int) -> None:
        """Start (or restart) SuperNode ``i`` (and its worker)."""
        config = dict(self.node_configs[i])
        if self.workers:
            sock = str(self.workdir / f"node{i}.sock")
            if os.path.exists(sock):
                os.unlink(sock)
            self._spawn(f"worker{i}", [sys.executable, "-m", "learning.flower.worker", sock])
            config["worker"] = sock
        self._spawn(f"node{i}", [str(self.bin / "flower-supernode"), "--insecure",
                                 "--superlink", f"127.0.0.1:{self.port}",
                                 "--port", str(free_port()), "--node-config", _pairs(config)])

    def kill_node(self, i: int) -> None:
        """Kill SuperNode ``i`` (its whole process group: SuperExec, ClientApp) at once."""
        for name in (f"node{i}", f"worker{i}"):
            self._stop(name, signal.SIGKILL)

    def _stop(self, name: str, sig=signal.SIGTERM, grace: float = 5.0) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(grace)

    def _track(self) -> None:
        """Remember every live descendant of the processes started here (flwr starts the
        SuperLink's SuperExec and the ServerApps in sessions of their own)."""
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        todo = [p.pid for p in self.procs.values()]
        while todo:
            pid = todo.pop()
            if pid in table and table[pid][1] != "Z":
                self.seen.setdefault(pid, table[pid][2])
            todo.extend(children.get(pid, ()))

    def survivors(self) -> list[int]:
        """Processes started here or below that are still alive (not zombies)."""
        table = _proc_table()
        return sorted(p for p, t in self.seen.items()
                      if p in table and table[p][2] == t and table[p][1] != "Z")

    def stop(self, grace: float = 5.0) -> None:
        """Stop every process started here (SIGTERM to each process group, SIGKILL after
        ``grace``), then wait up to ``grace`` for their descendants and kill any left, by
        process id."""
        self._track()
        for name in [n for n in self.procs if n != "superlink"] + ["superlink"]:
            self._stop(name, grace=grace)
        deadline = time.monotonic() + grace
        while self.survivors() and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.survivors():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> Loopback:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ runs
    def flwr(self, *args: str, timeout: float = 120.0) -> str:
        out = subprocess.run([str(self.bin / "flwr"), *args], env=self.env, cwd=self.app_dir,
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"flwr {' '.join(args)} failed: {out.stderr or out.stdout}")
        return out.stdout

    def submit(self, run_config: dict) -> int:
        """Start a run of the app (``flwr run``); its run id."""
        args = ["run", ".", "loopback", "--format", "json"]
        if run_config:
            args += ["--run-config", _pairs(run_config)]
        text = self.flwr(*args)
        self._track()
        return int(json.loads(text[text.index("{"):])["run-id"])

    def wait(self, run_dir: Path, timeout: float) -> dict:
        """The run's result.json once the ServerApp has written it (bounded)."""
        deadline = time.monotonic() + timeout
        path = Path(run_dir) / "result.json"
        while time.monotonic() < deadline:
            self._track()
            if path.is_file():
                return json.loads(path.read_text())
            if self.procs["superlink"].poll() is not None:
                raise RuntimeError("the SuperLink exited")
            time.sleep(0.5)
        raise TimeoutError(f"no {path} within {timeout:g} s")

    def log(self, run_id: int) -> str:
        """The run's log stream (the ServerApp's log lines)."""
        return self.flwr("log", str(run_id), "loopback", "--show")

    def run(self, run_config: dict, timeout: float = 300.0) -> dict:
        """Submit a run and wait for its result; the summary plus run_id and run_dir."""
        out = Path(run_config.get("out") or self.workdir / "out").resolve()
        run_id = self.submit({**run_config, "out": str(out)})
        summary = self.wait(out / f"run-{run_id}", timeout)
        return {**summary, "run_id": run_id, "run_dir": str(out / f"run-{run_id}")}
