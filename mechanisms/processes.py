"""Processes that die with their parent: the one mechanism every pool and child process the
toolkit starts uses (the sweep's and ``reproduce``'s process pool, ``prove --jobs``, child
programs), so that killing a command (kill -9, SIGTERM, SIGINT) leaves no orphans.

* :func:`die_with_parent` runs in the child (a pool's ``initializer``): on Linux the kernel
  sends it SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon
  thread also watches the parent's pid and exits when it changes (the fallback, and a cover
  for a parent that died before the child got this far).
* :func:`kill_with_parent` is the same for a program started with :mod:`subprocess`
  (``preexec_fn``): PR_SET_PDEATHSIG survives ``exec``.
* :func:`stop_pool` ends a ``ProcessPoolExecutor`` now (an error or Ctrl-C in the parent):
  waiting tasks are cancelled and running workers terminated, instead of ``shutdown``
  waiting for every queued task to finish.
* :func:`ctrl_c_between_steps`: while a pool runs, Ctrl-C sets a flag that the pool loop
  turns into ``KeyboardInterrupt`` at a safe point (not inside concurrent.futures' locks).

Once a pool's workers are gone, the multiprocessing resource tracker (started for spawned
pools) reads end-of-file on its pipe and exits by itself.

Caveat of PR_SET_PDEATHSIG: the signal comes when the *thread* that started the child ends;
start pools from a thread that outlives them (the main thread, as every command does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

__all__ = ["before_fork", "ctrl_c_between_steps", "die_with_parent", "kill_with_parent",
           "pool_worker", "stop_pool", "to_parent"]

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


_LIBC: object = None  # the C library, loaded once in the parent (never in a forked child)


def _libc():
    """libc with ``prctl`` (Linux), or None where unavailable."""
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _LIBC = ctypes.CDLL(None, use_errno=True)
                _LIBC.prctl  # noqa: B018  (raises AttributeError where there is none)
            except (OSError, AttributeError):  # musl variants, sandboxes
                _LIBC = False
    return _LIBC or None


def before_fork() -> None:
    """Load what :func:`die_with_parent` needs (the C library) in this process, so that a
    child it forks next, which calls :func:`die_with_parent` first, loads nothing: a forked
    child of a process with threads must not import or load libraries (a lock another
    thread held at the fork stays held in the child)."""
    _libc()


def _death_signal(sig: int = signal.SIGKILL, libc=None) -> bool:
    """Ask the kernel for ``sig`` when the parent dies (Linux); False where unavailable.
    ``libc`` loaded beforehand: a forked child must not import or load libraries."""
    libc = libc if libc is not None else _libc()
    if libc is None:
        return False
    return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def die_with_parent(parent: int, poll: float = 0.5) -> None:
    """Make this process exit when process ``parent`` (its parent's pid, as the parent saw
    it: ``os.getpid()`` passed in ``initargs``) dies, by kill -9 included. Call it first
    thing in a pool worker's initializer."""
    _death_signal()
    if os.getppid() != parent:  # the parent died before we asked (reparented already)
        os._exit(1)

    def watch():
        while True:
            time.sleep(poll)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


_TO_PARENT = None  # in a pool worker started by pool_worker(): its queue to the parent


def pool_worker(parent: int, to_parent=None) -> None:
    """A pool's ``initializer`` (``initargs=(os.getpid(), queue)``): :func:`die_with_parent`,
    then keep ``to_parent`` (a queue the worker's tasks report progress on, or None) for
    :func:`to_parent`. It lives here, in a module that imports next to nothing, so that a
    spawned worker asks for its death signal within a second of starting: an initializer in
    a heavy module (the checker, pandas) left workers alive for the 10-20 s of their
    imports after a kill -9 of the parent on a loaded host."""
    global _TO_PARENT
    die_with_parent(parent)
    _TO_PARENT = to_parent


def to_parent():
    """The queue :func:`pool_worker` kept in this worker (None elsewhere)."""
    return _TO_PARENT


def kill_with_parent(sig: int = signal.SIGKILL):
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the started program gets ``sig``
    (default SIGKILL; SIGTERM lets it shut down cleanly) when the process that started it
    dies (Linux; elsewhere it does nothing)::

        subprocess.Popen(argv, preexec_fn=kill_with_parent())

    None off the main thread: the kernel sends the signal when the starting *thread* ends,
    which would kill the program early; such callers need another backstop.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()
    libc = _libc()  # loaded here, in the parent

    def preexec():  # runs in the forked child, before exec: no threads, no imports
        _death_signal(sig, libc)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def stop_pool(pool) -> None:
    """End a ``concurrent.futures.ProcessPoolExecutor`` now: cancel the tasks not started,
    terminate the workers running one (a task can take hours).

    A worker terminated halfway through sending its result (a sweep cell's rows, about
    160 kB, are more than a pipe holds, so a worker waits in mid-message for the pool's
    manager thread to read on) leaves part of a message in the result pipe, and the manager
    thread then waits for the rest forever: this process holds the pipe's write end too.
    Python joins that thread before it exits, so the command never ended (Ctrl-C on
    ``sweep --executor processes`` on a loaded host; tests/test_stop_pool.py). So this
    process's write end is closed here: once the terminated workers are gone, the manager
    thread reads end-of-file, marks the pool broken and ends."""
    running = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)  # shutdown() forgets it
    if hasattr(pool, "terminate_workers"):  # Python >= 3.14
        pool.terminate_workers()
    else:
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in running:
            proc.terminate()
    writer = getattr(results, "_writer", None)  # only the workers write to it
    if writer is not None:
        writer.close()


@contextlib.contextmanager
def ctrl_c_between_steps():
    """While a process pool runs: Ctrl-C (SIGINT) only sets a flag, which the pool loop reads
    every 0.2 s and turns into KeyboardInterrupt there (then :func:`stop_pool`). Raised
    asynchronously, it could land inside concurrent.futures' own bookkeeping (``wait``
    acquires every future's lock in turn; an interrupt between two acquisitions leaves locks
    held, and the pool's manager thread, which Python joins before it exits, then waits on
    one forever). Yields ``interrupted()``. Only in the main thread, and only where SIGINT is
    not ignored (a background job keeps ignoring it); elsewhere ``interrupted()`` is always
    False. Used by the sweep's and ``reproduce``'s pool and by ``prove --jobs``."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    old = signal.getsignal(signal.SIGINT)
    if old in (signal.SIG_IGN, None):
        yield lambda: False
        return
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield lambda: bool(got)
    finally:
        signal.signal(signal.SIGINT, old)
