"""A real Flower deployment on one host: a SuperLink and SuperNodes as processes on 127.0.0.1.

Used by the deployment test, the benchmark and docs/howto-flower.md. Ports are chosen free at
run time, the Flower configuration file lives in a private ``FLWR_HOME`` (a SuperLink
connection named ``loopback``), every process is started in its own process group and stopped
by its id, and every wait is bounded::

    with Loopback(app_dir=".", nodes=4, workdir="/tmp/fl") as fed:
        summary = fed.run({"algorithm": "ipfl", "rounds": 2})

``warm=True`` (the default) starts each SuperNode with ``--isolation process`` and a warm
ClientApp executor (:mod:`learning.flower.executor`) next to it, which runs every ClientApp
task in a forked child of one long-lived process; ``warm=False`` leaves it to flwr's own
SuperExec (a fresh ``flwr-clientapp`` process per message). ``workers=True`` starts a warm
node worker (:mod:`learning.flower.worker`) next to each SuperNode and names it in the
node's config (without workers, the executor imports torch up front). ``task_poll`` sets how
often a node's executor (default :data:`learning.flower.executor.POLL`, 0.2 s) or, with
``warm=False``, its SuperExec (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, flwr's default 1 s; here
0.1 s) asks for a ClientApp task; the SuperLink's own SuperExec, which starts a run's
ServerApp, keeps flwr's 1 s. ``timings=True`` has each executor log the seconds each step of
each task took (``executor<i>.log`` in ``workdir``).

The federation dies with the process that started it, however that process ends:

* :meth:`Loopback.stop` (``with`` block, ``KeyboardInterrupt`` from SIGINT) and interpreter
  exit (``atexit``) stop every process it started and everything flwr started below them;
* SIGTERM or SIGHUP: a handler (installed from the main thread where the signal's disposition
  is the default) stops every live Loopback, then lets the signal end the process as it would
  have;
* SIGKILL, where no handler runs: a reaper (:mod:`learning.flower.reaper`, in a session of its
  own) holds a pipe from this process and, when it closes, stops every process group the
  Loopback told it of; on Linux the processes started from the main thread also get
  ``PR_SET_PDEATHSIG`` (SIGTERM when their parent thread dies;
  :func:`mechanisms.processes.kill_with_parent`, the toolkit's one such mechanism).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

from mechanisms.processes import kill_with_parent

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


# ------------------------------------------------------------------ dying with the parent
_LIVE: weakref.WeakSet = weakref.WeakSet()  # Loopbacks started and not stopped yet
_HANDLED: dict[int, object] = {}  # signal -> the disposition our handler replaced
def _stop_all() -> None:
    for fed in list(_LIVE):
        try:
            fed.stop(grace=2.0)
        except Exception:
            pass


def _on_signal(sig, frame) -> None:
    """SIGTERM/SIGHUP while a Loopback runs: stop the federations, then let the signal do what
    it did before."""
    _stop_all()
    previous = _HANDLED.get(sig, signal.SIG_DFL)
    signal.signal(sig, previous)
    if callable(previous):
        previous(sig, frame)
    elif previous == signal.SIG_DFL:
        os.kill(os.getpid(), sig)


def _install_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        current = signal.getsignal(sig)
        if current is _on_signal:
            continue
        if current == signal.SIG_DFL:  # never take over a handler the program set itself
            _HANDLED[sig] = current
            signal.signal(sig, _on_signal)


atexit.register(_stop_all)


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

    ``nodes``: a count (node i gets ``partition-id=i num-partitions=count`` and keeps its demo
    partition in ``workdir/cache``, so that a restarted node reloads it from disk) or a list
    of node configs. ``bin_dir``: where flower-superlink, flower-supernode and flwr live
    (default: next to this Python)."""

    def __init__(self, app_dir, nodes, workdir, *, workers: bool = False, warm: bool = True,
                 bin_dir=None, start_timeout: float = 60.0, task_poll: float | None = None,
                 timings: bool = False):
        self.app_dir = Path(app_dir).resolve()
        self.workdir = Path(workdir).resolve()
        n = nodes if isinstance(nodes, int) else len(nodes)
        self.node_configs = [{"partition-id": i, "num-partitions": n,
                              "cache-dir": str(self.workdir / "cache")} for i in range(n)] \
            if isinstance(nodes, int) else [dict(c) for c in nodes]
        self.workers, self.warm, self.start_timeout = workers, warm, start_timeout
        from .executor import POLL

        self.task_poll = float(task_poll if task_poll is not None else
                               POLL if warm else 0.1)
        self.timings = bool(timings)
        self.bin = Path(bin_dir) if bin_dir else Path(sys.executable).parent
        self.home = self.workdir / "flwr-home"
        self.procs: dict[str, subprocess.Popen] = {}
        self.seen: dict[int, str] = {}  # every process started here or below: pid -> start time
        self.env = {**os.environ, "FLWR_HOME": str(self.home),
                    "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                    "PYTHONPATH": os.pathsep.join(
                        [str(self.app_dir)] + ([os.environ["PYTHONPATH"]]
                                               if os.environ.get("PYTHONPATH") else [])),
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                env={**self.env, **(env or {})},
                                cwd=self.workdir, start_new_session=True,
                                preexec_fn=kill_with_parent(signal.SIGTERM))
        log.close()
        self.procs[name] = proc
        self._tell(f"+{proc.pid}")  # its own session: its process group is its pid
        return proc

    def _tell(self, line: str) -> None:
        """A line to the reaper (``+pgid``, ``-pgid``, ``done``); nothing if it is gone."""
        reaper = getattr(self, "reaper", None)
        if reaper is None or reaper.stdin is None or reaper.stdin.closed:
            return
        try:
            reaper.stdin.write(f"{line}\n")
            reaper.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def start(self) -> Loopback:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        _install_handlers()
        self.groups: set[int] = set()
        self.reaper = subprocess.Popen(
            [sys.executable, "-m", "learning.flower.reaper"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=self.env,
            cwd=self.workdir, start_new_session=True)
        _LIVE.add(self)
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
        self._track()  # the SuperLink's SuperExec (a session of its own)
        return self

    def start_node(self, i: int) -> None:
        """Start (or restart) SuperNode ``i`` (and its worker and executor)."""
        config = dict(self.node_configs[i])
        if self.workers:
            sock = str(self.workdir / f"node{i}.sock")
            if os.path.exists(sock):
                os.unlink(sock)
            self._spawn(f"worker{i}", [sys.executable, "-m", "learning.flower.worker", sock])
            config["worker"] = sock
        runtime = free_port()
        self._spawn(f"node{i}", [str(self.bin / "flower-supernode"), "--insecure",
                                 "--superlink", f"127.0.0.1:{self.port}",
                                 "--port", str(runtime), "--node-config", _pairs(config)]
                    + (["--isolation", "process"] if self.warm else []),
                    env=None if self.warm else {  # its SuperExec's poll (flwr's: 1 s)
                        "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": str(self.task_poll)})
        if self.warm:
            self._spawn(f"executor{i}", [
                sys.executable, "-m", "learning.flower.executor", "--insecure",
                "--runtime-api-address", f"127.0.0.1:{runtime}", "--poll", str(self.task_poll),
                *([] if self.workers else ["--preload", "torch"]),
                *(["--timings"] if self.timings else [])])

    def kill_node(self, i: int) -> None:
        """Kill SuperNode ``i``, its executor and worker (their whole process groups:
        SuperExec or executor, ClientApps) at once."""
        for name in (f"node{i}", f"executor{i}", f"worker{i}"):
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
        if name not in ("superlink",):  # a stopped node's group is gone; forget it
            self._tell(f"-{proc.pid}")

    def _track(self) -> None:
        """Remember every live descendant of the processes started here (flwr starts the
        SuperLink's SuperExec and the ServerApps in sessions of their own) and tell the reaper
        of every process group among them."""
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        todo = [p.pid for p in self.procs.values()]
        while todo:
            pid = todo.pop()
            if pid in table and table[pid][1] != "Z":
                self.seen.setdefault(pid, table[pid][2])
                try:
                    group = os.getpgid(pid)
                except OSError:
                    group = None
                if group is not None and group not in self.groups:
                    self.groups.add(group)
                    self._tell(f"+{group}")
            todo.extend(children.get(pid, ()))

    def processes(self) -> dict[int, str]:
        """Every process started here or below so far (pid -> its start time in clock ticks
        since boot, which tells a pid reused later apart)."""
        self._track()
        return dict(self.seen)

    def survivors(self) -> list[int]:
        """Processes started here or below that are still alive (not zombies)."""
        table = _proc_table()
        return sorted(p for p, t in self.seen.items()
                      if p in table and table[p][2] == t and table[p][1] != "Z")

    def stop(self, grace: float = 5.0) -> None:
        """Stop every process started here (SIGTERM to each process group, SIGKILL after
        ``grace``), then wait up to ``grace`` for their descendants and kill any left, by
        process id. Safe to call again."""
        if not hasattr(self, "groups"):  # never started
            return
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
        reaper = getattr(self, "reaper", None)
        if reaper is not None:
            self._tell("done")
            if reaper.stdin is not None:
                try:
                    reaper.stdin.close()
                except OSError:
                    pass
            try:
                reaper.wait(grace)
            except subprocess.TimeoutExpired:
                reaper.kill()
                reaper.wait(grace)
            self.reaper = None
        _LIVE.discard(self)

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
                             capture_output=True, text=True, timeout=timeout,
                             preexec_fn=kill_with_parent(signal.SIGTERM))
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

    def status(self, run_id: int) -> dict:
        """The run's status as the SuperLink reports it (``flwr ls loopback --run-id ID
        --format json``): ``status`` ("pending", "running", "finished:completed",
        "finished:failed", ...) and ``details`` (flwr's reason for a failure). ``flwr run``
        exits 0 when the run fails: this is how to tell."""
        text = self.flwr("ls", "loopback", "--run-id", str(int(run_id)), "--format", "json")
        run = json.loads(text[text.index("{"):])["runs"][0]
        return {"status": run["status"], "details": run.get("status-details", "")}

    def wait(self, run_dir: Path, timeout: float, check_every: float = 20.0) -> dict:
        """The run's result.json once the ServerApp has written it (bounded). Every
        ``check_every`` s it asks the SuperLink for the run's status: a run that finished
        without writing its result (it failed) raises at once, with flwr's reason and the
        ServerApp's last log lines, instead of after ``timeout``."""
        deadline = time.monotonic() + timeout
        path = Path(run_dir) / "result.json"
        run_id = Path(run_dir).name.removeprefix("run-")
        checked = time.monotonic()
        while time.monotonic() < deadline:
            self._track()
            if path.is_file():
                return json.loads(path.read_text())
            if self.procs["superlink"].poll() is not None:
                raise RuntimeError("the SuperLink exited")
            if run_id.isdigit() and time.monotonic() - checked >= check_every:
                checked = time.monotonic()
                state = self.status(int(run_id))
                if state["status"].startswith("finished") and not path.is_file():
                    tail = "\n".join(self.log(int(run_id)).splitlines()[-15:])
                    raise RuntimeError(f"run {run_id} ended {state['status']} without a "
                                       f"result ({state['details']}); its log ends:\n{tail}")
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
