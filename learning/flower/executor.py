"""A warm ClientApp executor: serves a SuperNode started with ``--isolation process``.

Flower 1.42's SuperNode, in its default ``--isolation subprocess`` mode, starts a SuperExec that
launches a fresh ``flwr-clientapp`` process for every message; each pays Python's start and
flwr's imports (seconds on a loaded host: ``benchmarks/bench_flower.py`` prints them). With
``--isolation process`` the SuperNode launches nothing and waits for an executor of the
operator's own on its Runtime API. This is one, long-lived::

    flower-supernode --isolation process --insecure --superlink 127.0.0.1:8000 --port 9094 ...
    python -m learning.flower.executor --runtime-api-address 127.0.0.1:9094 --insecure

It imports flwr's ClientApp runtime once, then asks the SuperNode for ClientApp tasks (the
Runtime API's ``AcquireTask``, as flwr's own SuperExec does) and forks a child per task that
runs flwr's own, unmodified ``flwr.supernode.runtime.run_clientapp`` with the task's token: the
child pulls the message, context and app bundle, runs the run's ClientApp and pushes the
reply and the context, exactly as a ``flwr-clientapp`` process does, but starts in
milliseconds. The token never appears on a command line. flwr itself is not changed.

The run's app is loaded from its app bundle in the child, as flwr loads it (this process
imports no fedmarket module: a run's code is the code it shipped). The node's own state
between messages lives in the ClientApp's context, as under flwr's SuperExec, or in a warm
node worker (:mod:`learning.flower.worker`).

Dying with the parent: every child gets ``PR_SET_PDEATHSIG`` (SIGTERM when this process dies,
kill -9 included; :func:`mechanisms.processes.kill_with_parent`) and shares this process's
group; SIGTERM or SIGINT here stops the children (flwr's handlers in them push the task's
status) and exits. ``--parent-pid`` (e.g. the SuperNode's) also ends it when that process
ends.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

__all__ = ["preload", "serve", "write_bytecode"]

TASK_TYPE = "flwr-clientapp"  # flwr.supercore.constant.TaskType.CLIENT_APP
# seconds between task requests while idle. Each request is served by the SuperNode: at 0.1 s
# four idle nodes and their executors took 0.25 of the 2-core host's CPU (0.07 at 0.5 s),
# while a task's message reaches the SuperNode after its task (a child waits for it: 1.3 s
# median at load average 15), so a task taken up to 0.2 s later mostly waits the same
POLL = 0.2
# seconds between task requests while a task of this executor runs: flwr 1.42's SuperNode
# offers no further task until that task's reply is in (it waits for it before it pulls the
# next message, flwr/supernode/start_client_internal.py, _push_messages), so these requests
# are only a fallback; the executor looks every POLL whether its task ended meanwhile
BUSY_POLL = 1.0


# what every ClientApp task needs: flwr's ClientApp runtime (what a flwr-clientapp process
# spends its start on, less the whole SuperNode its entry point also imports), the flwr
# modules a ClientApp module imports, and what fedmarket's forwarding ClientApp imports beyond
# its own modules (multiprocessing.connection: the call to the node's worker)
PRELOAD = ("flwr.supernode.runtime.run_clientapp", "flwr.app", "flwr.clientapp",
           "flwr.serverapp", "numpy", "multiprocessing.connection")
_OWN = ("learning", "mechanisms")  # the toolkit's packages: a run imports its own copy


def preload(modules=()) -> None:
    """Import :data:`PRELOAD` and ``modules`` (third-party libraries a ClientApp imports,
    e.g. ``torch`` for nodes without a worker) before the first task arrives.

    ``modules`` are names of code: typed by the operator (``--preload``) they are imported;
    read from data (a caller inside :func:`mechanisms.lookup.names_from_data`, e.g. a list
    taken from a node or run config) each must be a module the operator trusts, else it is
    refused unimported (:class:`mechanisms.lookup.UntrustedName` naming ``preload``), the
    guard every name read from data goes through. :data:`PRELOAD` is the executor's own."""
    import importlib

    from mechanisms.lookup import import_module_named

    for name in (*PRELOAD, *modules):
        if name.split(".")[0] in _OWN:
            raise ValueError(f"preload: {name!r} is the toolkit's own; a run imports the "
                             "copy in its app bundle")
    for name in PRELOAD:
        importlib.import_module(name)
    for name in modules:
        import_module_named(name, "preload")


def _forget_own() -> None:
    """Drop the toolkit's modules this process imported itself (the executor is one), so that
    the run's ClientApp is imported from the run's app bundle, as in a flwr-clientapp."""
    for name in [n for n in sys.modules if n.split(".")[0] in _OWN]:
        del sys.modules[name]


def _client(address: str, insecure: bool, certificates: bytes | None):
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient

    return RuntimeHttpClient.from_server_address(
        server_address=address, insecure=insecure, root_certificates=certificates,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
        retry_invoker=make_simple_http_retry_invoker())


def _run_child(address: str, token: str, insecure: bool, certificates: bytes | None,
               pdeath, installed: bool = False, timings=None) -> None:
    """In the forked child: one ClientApp task (:func:`run_task`); never returns."""
    code = 1
    try:
        for sig in _SIGNALS:  # run_task installs flwr's own
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        if pdeath is not None:
            pdeath()
        _forget_own()
        code = run_task(address, token, insecure, certificates, installed=installed,
                        timings=timings)
    except SystemExit as exc:  # flwr's signal handler ends the task with sys.exit(code)
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a child never returns into the parent's loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


# how often a task asks again for a message object the SuperNode does not hold yet
PULL_BACKOFF = (0.02, 0.2)  # first wait, longest wait (s); flwr-clientapp's: 1 s, 10 s


def run_task(address: str, token: str, insecure: bool, certificates: bytes | None, *,
             installed: bool = False, timings=None) -> int:
    """One ClientApp task, the steps of flwr 1.42's ``run_clientapp`` (flwr's own functions
    for each): task heartbeat, pull the task's context, run and app bundle, pull the
    message, install the bundle, load the run's ClientApp, call it (an exception becomes the
    error reply flwr sends), push the reply, push the task's status and context. Returns the
    exit code (0, or 1 if the ClientApp raised or the reply could not be pushed).

    One difference, the reason this is not ``run_clientapp`` itself: the SuperNode offers a
    task as soon as it holds the message's metadata, before the message's objects have come
    from the SuperLink (``flwr/supernode/start_client_internal.py``, ``_pull_and_store_message``),
    and ``run_clientapp`` retries a missing object after 1 s, then 2 s, 4 s ... A flwr-clientapp
    process, seconds of imports, never asks that early; a warm task does, and then waited 1 to
    3 s per message (measured). Here the message is pulled with :data:`PULL_BACKOFF`. No
    telemetry is sent.

    ``installed``: the run's app bundle (its hash) was installed by an earlier task of this
    executor, so it is not unpacked and checked again (flwr's ``install_from_fab`` does that
    for every message, then finds the app installed: 0.1 to 0.6 s per message on the loaded
    2-core host). ``timings(line)``, if given, receives the seconds each step took: ``input``
    (the task's context, run and bundle), ``message`` (its objects, which the SuperNode may
    still be pulling from the SuperLink), ``install`` (or ``cached``: ``installed``),
    ``loaded`` (the ClientApp),
    ``called`` (the node's work), ``pushed`` (the reply), ``done`` (status and context)."""
    from flwr.app import Message
    from flwr.app.error import Error
    from flwr.cli.install import install_from_fab
    from flwr.clientapp.client_app import LoadClientAppError
    from flwr.clientapp.utils import get_load_client_app_fn
    from flwr.common.config import get_project_dir
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.common.serde import context_from_proto, fab_from_proto, run_from_proto
    from flwr.proto.node_pb2 import Node
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest, PullTaskInputRequest
    from flwr.supercore.exit import register_signal_handlers
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf,
        make_pull_object_fn_protobuf,
    )
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.supercore.telemetry import EventType
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    retry = make_simple_http_retry_invoker()
    client = RuntimeHttpClient.from_server_address(
        server_address=address, insecure=insecure, root_certificates=certificates,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                      RuntimeTokenHttpInterceptor(token)],
        retry_invoker=retry)
    state = {"context": None, "status": SubStatus.FAILED,
             "details": "ClientApp task failed due to unknown reason"}
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))

    def on_exit() -> None:  # SIGTERM/SIGINT, or the end of the task
        retry.max_tries = 1
        push_task_output(client=client, context=state["context"], sub_status=state["status"],
                         details=state["details"])
        if heartbeat.is_running:
            heartbeat.stop()
        client.close()

    register_signal_handlers(event_type=EventType.FLWR_CLIENTAPP_RUN_LEAVE,
                             exit_message="Task stopped.", exit_handlers=[on_exit])
    message = reply = project = None
    code = 0
    stamps = [("start", time.monotonic())]

    def _t(name: str) -> None:
        stamps.append((name, time.monotonic()))
    try:
        heartbeat.start()
        res = client.PullTaskInput(PullTaskInputRequest())
        TaskIdentity.task_id, TaskIdentity.run_id = res.task_id, res.run.run_id
        TaskIdentity.node_id = res.context.node_id
        context = state["context"] = context_from_proto(res.context)
        run, fab = run_from_proto(res.run), fab_from_proto(res.fab)
        _t("input")
        pulled = client.PullMessages(PullAppMessagesRequest())
        if not pulled.messages_list:
            raise RuntimeError("No messages received from Runtime API")
        node, tree = Node(node_id=context.node_id), pulled.message_object_trees[0]
        message = pull_and_inflate_object_from_tree(
            tree, make_pull_object_fn_protobuf(client.PullObject, node, context.run_id),
            make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node,
                                                      context.run_id),
            return_type=Message, initial_backoff=PULL_BACKOFF[0], backoff_cap=PULL_BACKOFF[1])
        message.metadata.__dict__["_message_id"] = tree.object_id  # as run_clientapp sets it
        _t("message")
        project = get_project_dir(run.fab_id, run.fab_version, fab.hash_str)
        if installed and project.is_dir():
            _t("cached")
        else:
            install_from_fab(fab.content, skip_prompt=True)
            _t("install")
        app = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)(
            run.fab_id, run.fab_version, fab.hash_str)
        _t("loaded")
        reply = app(message=message, context=context)
        _t("called")
        state["status"], state["details"] = SubStatus.COMPLETED, ""
    except Exception as exc:  # flwr's error reply, as run_clientapp builds it
        import traceback

        traceback.print_exc()
        code = 1
        error = ErrorCode.CLIENT_APP_RAISED_EXCEPTION
        reason = str(type(exc)) + ":<'" + str(exc) + "'>"
        if isinstance(exc, LoadClientAppError):
            error = ErrorCode.LOAD_CLIENT_APP_EXCEPTION
            reason = "An exception was raised when attempting to load `ClientApp`"
        state["details"] = reason
        if message is not None:
            reply = Message(Error(code=error, reason=reason), reply_to=message)
    try:
        if reply is not None and state["context"] is not None:
            push_message(client, reply, state["context"])
            _t("pushed")
    except Exception:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        on_exit()
        _t("done")
        if timings is not None:
            from itertools import pairwise

            timings(" ".join(f"{name} {t - before:.3f}"
                             for (_, before), (name, t) in pairwise(stamps)))
        if not installed and project is not None:  # after the reply: off the round's path
            write_bytecode(project)
    return code


def write_bytecode(project) -> list[str]:
    """Write the bytecode cache of every module this process imported from the run's
    unpacked app bundle ``project`` that has none (the paths written), so that the next tasks'
    children load the run's ClientApp from bytecode instead of compiling its source again
    (0.07 s of CPU per task on the loaded 2-core host; Python writes no cache itself where
    ``PYTHONDONTWRITEBYTECODE`` is set, as on the development host). The cache is Python's
    own (``__pycache__``, checked against the source's time stamp and size when loaded): the
    code run stays the code the run shipped. A folder that cannot be written is left as it
    is."""
    import py_compile
    from importlib.util import cache_from_source
    from pathlib import Path

    root = Path(project).resolve()
    written = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py") or not Path(path).resolve().is_relative_to(root):
            continue
        cached = cache_from_source(path)
        if os.path.exists(cached):
            continue
        try:
            py_compile.compile(path, cfile=cached, doraise=True)
        except (OSError, py_compile.PyCompileError):
            continue
        written.append(cached)
    return written


_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _fork() -> int:
    """os.fork() with SIGTERM and SIGINT held until each side has its own handlers (the
    child unblocks them in :func:`_run_child`)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    pid = os.fork()
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    return pid


class _Stop(Exception):
    pass


def _raise_stop(sig, frame) -> None:
    raise _Stop(sig)


def serve(address: str, *, insecure: bool = True, root_certificates: str | None = None,
          poll: float = POLL, max_tasks: int | None = None, modules=(), log=None,
          timings: bool = False, busy_poll: float = BUSY_POLL) -> int:
    """Serve ClientApp tasks of the SuperNode whose Runtime API is at ``address`` until
    SIGTERM/SIGINT (or ``max_tasks`` tasks have run and ended). ``poll``: seconds between
    ``AcquireTask`` calls while idle; ``busy_poll`` while a task of this process runs
    (:data:`BUSY_POLL`; whether it ended is looked at every ``poll``). ``modules``: more to
    import up front (:func:`preload`). ``log(line)`` receives a line per task (launched,
    ended with its exit code; with ``timings``, the seconds each of its steps took,
    :func:`run_task`). Returns the number of tasks run. A run's app bundle is installed by
    the first task of the run that this process serves (a FAB hash whose task ended with
    0 is not installed again)."""
    from mechanisms.processes import kill_with_parent

    if not 0.01 <= poll <= 60:
        raise ValueError(f"poll: is {poll!r}; must lie in [0.01, 60] seconds")
    say = log or (lambda line: None)
    certificates = None
    if not insecure:
        if root_certificates is None:
            raise ValueError("root_certificates: a secure Runtime API needs the CA file "
                             "(or insecure=True)")
        with open(root_certificates, "rb") as f:
            certificates = f.read()
    preload(modules)
    from flwr.proto.runtime_pb2 import AcquireTaskRequest

    pdeath = kill_with_parent(signal.SIGTERM)  # the C library is loaded here, not in a child
    children: dict[int, tuple[float, str]] = {}  # pid -> (when it started, its FAB's hash)
    installed: set[str] = set()  # FABs a child of this process installed and ran
    launched = 0
    previous = {sig: signal.signal(sig, _raise_stop) for sig in _SIGNALS}
    client = _client(address, insecure, certificates)
    asked = float("-inf")  # when AcquireTask was last called
    try:
        while max_tasks is None or launched < max_tasks or children:
            _reap(children, say, installed)
            if (max_tasks is not None and launched >= max_tasks) or \
                    (children and time.monotonic() - asked < busy_poll):
                time.sleep(poll)
                continue
            asked = time.monotonic()
            res = client.AcquireTask(AcquireTaskRequest(supported_task_types=[TASK_TYPE]))
            if res.HasField("task") and res.token:
                if res.task.type != TASK_TYPE:  # never asked for; not ours to run
                    say(f"task {res.task.task_id}: type {res.task.type!r} ignored")
                    continue
                pid = _fork()
                if pid == 0:
                    client = None
                    _run_child(address, res.token, insecure, certificates, pdeath,
                               installed=res.task.fab_hash in installed,
                               timings=_steps_line(say, res.task.task_id) if timings else None)
                children[pid] = (time.monotonic(), res.task.fab_hash)
                launched += 1
                say(f"task {res.task.task_id} (run {res.task.run_id}): child {pid}")
                asked = float("-inf")
                continue  # another task may be waiting: asked again at once
            time.sleep(poll)
    except _Stop:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_children(children, say)
        client.close()
    return launched


def _steps_line(say, task_id: int):
    return lambda line: say(f"task {task_id} steps (s): {line}")


def _reap(children: dict[int, tuple[float, str]], say, installed: set | None = None) -> None:
    """Collect the children that ended; a FAB whose task ended with 0 is ``installed``."""
    for pid in list(children):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            children.pop(pid)
            continue
        if done:
            began, fab = children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            if code == 0 and installed is not None and fab:
                installed.add(fab)
            say(f"child {pid} ended with {code} after {time.monotonic() - began:.3f} s")


def _stop_children(children: dict[int, tuple[float, str]], say, grace: float = 5.0) -> None:
    """SIGTERM to every running child (flwr's handler pushes the task's status), SIGKILL to
    those left after ``grace``."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while children and time.monotonic() < deadline:
        _reap(children, say)
        time.sleep(0.05)
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        children.pop(pid)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m learning.flower.executor",
        description="a warm ClientApp executor for a SuperNode started with "
                    "--isolation process (see the module doc)")
    p.add_argument("--runtime-api-address", required=True,
                   help="the SuperNode's Runtime API, host:port (its --port)")
    p.add_argument("--insecure", action="store_true",
                   help="talk to the Runtime API without TLS")
    p.add_argument("--root-certificates", default=None,
                   help="the CA file of a Runtime API served with TLS")
    p.add_argument("--poll", type=float, default=POLL,
                   help=f"seconds between task requests while idle (default {POLL})")
    p.add_argument("--timings", action="store_true",
                   help="log the seconds each step of each task took")
    p.add_argument("--preload", action="append", default=[], metavar="MODULE",
                   help="also import MODULE up front (repeatable; e.g. torch for a node "
                        "without a warm worker)")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="exit when this process (e.g. the SuperNode) ends")
    args = p.parse_args(argv)
    if not args.insecure and args.root_certificates is None:
        p.error("give --insecure or --root-certificates")
    if args.parent_pid is not None:
        from flwr.supercore.app_utils import start_parent_process_monitor

        start_parent_process_monitor(args.parent_pid)  # SIGINT here when it ends
    try:
        serve(args.runtime_api_address, insecure=args.insecure,
              root_certificates=args.root_certificates, poll=args.poll,
              modules=args.preload, timings=args.timings,
              log=lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr,
                                     flush=True))
    except ValueError as exc:
        p.error(str(exc))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
