"""The toolkit's process management, checked (issue 34, part 2; :mod:`mechanisms.processes`):
``runs_in_a_worker`` (iPFL; declared by the ``local`` subject: it checks the toolkit's pool
handling, which is the same for every subject, through one subject's clearing).

Sweeps, ``reproduce`` and ``prove --jobs`` clear markets in process pool workers started with
:func:`mechanisms.processes.pool_worker` (a worker dies with its parent) and end a pool at
once with :func:`mechanisms.processes.stop_pool` (on an error or Ctrl-C, while a worker may
be busy for hours). Each instance is a drawn market and a flag ``stop`` (drawn with
probability :data:`STOP_SHARE`):

* ``ipfl.clear`` of the market with the subject's rules (as a sweep cell clears it) run in a
  pool worker gives what the subject's own clearing gives in this process (adjacency,
  payments, utilities, welfare: the same bits);
* with ``stop``: a task that sleeps :data:`BUSY` s is started on the worker, then
  ``stop_pool`` ends the pool: the worker's process is gone within :data:`GRACE` s, the busy
  task's future is done (not left pending) within the same, and a second ``stop_pool`` on
  the stopped pool is harmless (no error). A worker left running is killed by the check
  itself (nothing is left behind either way);
* with ``stop`` too, off the main thread and where SIGINT is ignored, as documented
  (:func:`on_threads`):
  :func:`mechanisms.processes.kill_with_parent` gives a ``preexec_fn`` on the main thread
  and None on another (the kernel would signal the program when that thread ends);
  :func:`mechanisms.processes.ctrl_c_between_steps` on another thread, or on the main thread
  with SIGINT ignored (a background job), leaves SIGINT's handler as it was and its
  ``interrupted()`` False, and on the main thread with a handler in force it puts its own
  in for the block and the old one back after;
* on half the draws that stop (Linux, where the kernel's death signal exists), every process
  the toolkit starts dies with its parent (:func:`orphans`): a process of the check's own
  starts children with :func:`mechanisms.processes.pool_worker`, with
  :func:`~mechanisms.processes.die_with_parent` asking for the death signal only (a watch of
  an hour) and watching only (the death signal taken back; its default watch, and one of
  :data:`WATCH` s; the default one on markets of an odd number of clients only: it takes
  0.5 s), and with :func:`~mechanisms.processes.kill_with_parent`'s ``preexec_fn``
  (as ``subprocess`` calls it before ``exec``); each runs on while that process lives
  (:data:`SETTLE` s, several watches), and all are gone within :data:`ORPHAN_GRACE` s once
  it is killed (SIGKILL); a child told another process is its parent (its real parent's pid
  + 1 and - 1, or a ``preexec_fn`` made in its grandparent or in the check's process: its
  parent died before it asked) ends at once.

The pool (one worker; forked where the platform forks) is kept between instances in a
process and started again after each stop, so an instance costs a task's round trip
(milliseconds), and a stop a pool's start and end. A violation is 1 (0: as stated); every
instance discriminates (the worker could answer otherwise, a stop leave it running).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.util
import os
import select
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from mechanisms import ipfl, processes
from mechanisms.processes import pool_worker, stop_pool

from .batch import Draws, Sampler
from .core import Property
from .input_properties import FaultSampler, ipfl_base_sampler, ipfl_cases

__all__ = ["BUSY", "GRACE", "ORPHAN_GRACE", "PROCESS_PROPERTIES", "SETTLE", "STOP_SHARE",
           "WATCH", "WorkerCase", "alive", "clear_in_worker", "in_a_worker", "on_threads",
           "orphans"]

STOP_SHARE = 0.1  # the share of instances that stop the pool (each starts a new one after)
BUSY = 60.0  # s: the busy task's sleep (far past GRACE: only a stop ends it in time)
GRACE = 2.0  # s: how long a stopped worker may take to be gone
WATCH = 0.02  # s: the short watch of :func:`orphans`' watching-only child
SETTLE = 3 * WATCH  # s: how long its children run before their parent is killed
ORPHAN_GRACE = 1.0  # s: how long they may take to be gone then: the default watch (0.5 s)
# once and half a second of scheduling. Measured: the default watch's child gone 0.41-0.44 s
# after the kill (40 checks at load 3-4 on 2 cores; its watch started about SETTLE earlier)

_POOL: list = []  # the pool kept between instances in this process (at most one)
_FINALIZER: list = []  # its exit finalizer, registered once per process


@dataclass(frozen=True, eq=False)
class WorkerCase:
    """A drawn iPFL instance ``base``, whether the pool is stopped after it and (with a
    stop) whether the toolkit's processes are checked to die with their parent
    (:func:`orphans`)."""

    base: Any
    stop: bool
    orphans: bool = False

    def code(self) -> str:
        imp = f"from {type(self.base).__module__} import {type(self.base).__name__}\n"
        return imp + self.base.code() + (f"\ncase = WorkerCase(case, {self.stop!r}, "
                                         f"{self.orphans!r})")

    def __repr__(self):
        return self.code()


def _drop_pool() -> None:
    """Stop the kept pool (at this process's exit: see :func:`_pool`)."""
    if _POOL:
        stop_pool(_POOL.pop())


def _pool() -> ProcessPoolExecutor:
    """The kept pool, started when there is none. Stopped at this process's exit by a
    multiprocessing finalizer: in a pool worker of the checker (``prove --jobs``) that exits,
    multiprocessing joins the worker's own children before Python's exit handlers run, and
    the kept pool's worker, waiting for a task, would never end (the checker's worker hung
    there, the run with it)."""
    if not _POOL:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        _POOL.append(ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context(method),
            initializer=pool_worker, initargs=(os.getpid(), None)))
        if not _FINALIZER:
            _FINALIZER.append(multiprocessing.util.Finalize(None, _drop_pool,
                                                            exitpriority=100))
    return _POOL[0]


def _outcome(o) -> list[np.ndarray]:
    return [np.asarray(x) for x in (o.adjacency, o.payments, o.utilities, o.welfare)]


def _clear(rules, market, D, thresholds):
    rule, payments, prices = rules
    return _outcome(ipfl.clear(market, D, rule, payments=payments, prices=prices,
                               thresholds=thresholds, allow_asymmetric_distances=True))


def clear_in_worker(rules, market, D, thresholds):
    """The task a worker runs: (its pid, the outcome's arrays of ``ipfl.clear`` with the
    subject's rules)."""
    return os.getpid(), _clear(rules, market, D, thresholds)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended and not yet reaped, does not); also
    :mod:`proofs.rule_properties`' check that a stopped rule's program is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True  # no /proc: it answered the signal


def _within(grace: float, ok) -> bool:
    deadline = time.monotonic() + grace
    while not ok():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _ctrl_c_block() -> dict:
    """What :func:`mechanisms.processes.ctrl_c_between_steps` does here: SIGINT's handler
    before, inside and after the block, and ``interrupted()`` inside (or what it raised)."""
    seen: dict = {"before": signal.getsignal(signal.SIGINT)}
    try:
        with processes.ctrl_c_between_steps() as interrupted:
            seen["inside"] = signal.getsignal(signal.SIGINT)
            seen["flag"] = interrupted()
    except Exception as exc:  # e.g. a handler set off the main thread (ValueError)
        seen["raised"] = exc
    seen["after"] = signal.getsignal(signal.SIGINT)
    return seen


def _unchanged(seen: dict) -> bool:
    """The block left SIGINT's handler alone and never read as interrupted."""
    return ("raised" not in seen and seen["flag"] is False
            and seen["inside"] == seen["before"] == seen["after"])


def on_threads() -> bool:
    """:func:`mechanisms.processes.kill_with_parent` and :func:`mechanisms.processes.
    ctrl_c_between_steps` as documented off the main thread and with SIGINT ignored (see
    the module doc); True when every part holds. The main-thread parts are checked only when
    this runs on the main thread (a pool worker's task does). SIGINT is ignored for the
    length of one block (microseconds: a Ctrl-C then is lost), its handler put back after."""
    off: dict = {}

    def elsewhere():
        try:
            off["preexec"] = processes.kill_with_parent()
            off["block"] = _ctrl_c_block()
        except Exception as exc:  # anything raised there is a violation
            off["raised"] = exc

    worker = threading.Thread(target=elsewhere, name="fedmarket-off-main")
    worker.start()
    worker.join()
    ok = "raised" not in off and off["preexec"] is None and _unchanged(off["block"])
    if threading.current_thread() is not threading.main_thread():
        return ok
    ok = ok and callable(processes.kill_with_parent())
    old = signal.getsignal(signal.SIGINT)
    if old is None:  # a handler not set from Python: it could not be put back
        return ok
    if old != signal.SIG_IGN:  # a handler in force: the block puts its own in
        here = _ctrl_c_block()
        ok = ok and ("raised" not in here and here["flag"] is False
                     and here["inside"] != old and here["after"] == old)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ignored = _ctrl_c_block()
    finally:
        signal.signal(signal.SIGINT, old)
    return ok and _unchanged(ignored) and ignored["inside"] == signal.SIG_IGN


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PRCTL: list = []  # the C library's prctl, loaded once in this process (never in a fork)
_PARENT_LIVES = 7  # the status a child told of a dead parent ends with when it does not end


def _prctl():
    """libc's ``prctl`` (Linux), or None."""
    if not _PRCTL:
        try:
            _PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        except (OSError, AttributeError):
            _PRCTL.append(None)
    return _PRCTL[0]


def _forked(body) -> None:
    """End a process :func:`orphans` forked (never returns): ``body()`` gives its exit
    status; 0 (a child set up to run on): wait to be killed instead; anything raised: 4."""
    status = 4
    try:
        status = body()
        while status == 0:
            time.sleep(3600)
    except BaseException:
        status = 4
    finally:
        os._exit(status)


def _kind_of_child(kind: str, parent: int, out: int, prctl, preexec, stranger) -> int:
    """The body of one child of :func:`orphans`' parent ``parent`` (run by :func:`_forked`):
    set up as ``kind`` says, write its pid (and its kind) to ``out`` and answer 0 (then it
    waits to be killed); the children told of a dead parent end, and answer
    :data:`_PARENT_LIVES` if they go on."""
    status = 0
    if kind == "pool_worker":
        processes.pool_worker(parent, out)
        if processes.to_parent() != out:  # the queue kept for the worker's tasks
            status = 3
    elif kind == "signal_only":
        processes.die_with_parent(parent, poll=3600.0)
    elif kind in ("watch_only", "default_watch"):
        if kind == "watch_only":
            processes.die_with_parent(parent, poll=WATCH)
        else:
            processes.die_with_parent(parent)
        prctl(_PR_SET_PDEATHSIG, 0, 0, 0, 0)  # the death signal taken back: a watch only
    elif kind == "preexec":
        preexec()  # made in ``parent``, its program's starter, as subprocess calls it
    elif kind in ("above", "below"):
        processes.die_with_parent(parent + (1 if kind == "above" else -1))
        status = _PARENT_LIVES
    elif kind == "stranger":
        stranger()  # made in another process: its starter is not this one's parent
        status = _PARENT_LIVES
    elif kind == "grandchild":  # parent's preexec_fn one generation down (its parent's
        pid = os.fork()  # pid compared the other way round with the stranger's, as far
        if pid == 0:  # as pids are given in order)
            try:
                preexec()
            finally:
                os._exit(_PARENT_LIVES)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        status = _PARENT_LIVES if code == _PARENT_LIVES else 5  # (ended with any status)
    if status == 0:
        os.write(out, f"{kind} {os.getpid()}\n".encode())
    return status


ALIVE_KINDS = ("pool_worker", "signal_only", "watch_only", "preexec", "default_watch")
ENDING_KINDS = ("above", "below", "stranger", "grandchild")


def orphans(default_watch: bool = True) -> bool | None:
    """Every process the toolkit starts dies with its parent (see the module doc); None
    where this cannot be checked (no ``fork``, not Linux, no ``prctl``). A process of this
    check's own (forked) starts one child of each of :data:`ALIVE_KINDS` (they write their
    pids to a pipe once set up; ``default_watch`` False: not the last, whose watch of 0.5 s
    takes that long to end it) and of :data:`ENDING_KINDS` (it reports their exit status);
    it is killed once they have run :data:`SETTLE` s; whatever is left is killed after."""
    if not (hasattr(os, "fork") and sys.platform.startswith("linux")) or _prctl() is None:
        return None
    prctl = _prctl()
    stranger = processes.kill_with_parent()  # its parent: this process
    if stranger is None:  # not the main thread: no preexec_fn to check
        return None
    alive_kinds = ALIVE_KINDS if default_watch else ALIVE_KINDS[:-1]
    processes.before_fork()  # (kill_with_parent above loaded it too) its children load nothing
    r, w = os.pipe()
    starter = os.fork()
    if starter == 0:  # the parent of the children: start them, report, wait to be killed
        def start() -> int:
            os.close(r)
            me = os.getpid()
            preexec = processes.kill_with_parent()  # made here: this process starts them
            kinds = {}
            for kind in alive_kinds:
                pid = os.fork()
                if pid == 0:
                    _forked(lambda kind=kind: _kind_of_child(kind, me, w, prctl, preexec,
                                                             stranger))
                kinds[pid] = kind
            for kind in ENDING_KINDS:
                pid = os.fork()
                if pid == 0:
                    _forked(lambda kind=kind: _kind_of_child(kind, me, w, prctl, preexec,
                                                             stranger))
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                os.write(w, f"{kind} {'ends' if code != _PARENT_LIVES else 'lives'}\n"
                         .encode())
            while kinds:  # a child that should run on and ends: said at once
                pid, _ = os.waitpid(-1, 0)
                os.write(w, f"{kinds.pop(pid)} died\n".encode())
            return 0  # then killed

        _forked(start)
    os.close(w)
    pids: dict = {}
    said: dict = {}
    ok = False
    try:
        buffer = b""
        deadline = time.monotonic() + 10.0  # setting up: forks, on a loaded host
        while len(said) < len(alive_kinds) + len(ENDING_KINDS):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                break
            chunk = os.read(r, 4096)
            if not chunk:  # the starter ended (it may not)
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                kind, value = line.decode().split()
                if value.isdigit():
                    pids[kind] = int(value)
                said.setdefault(kind, value)  # a pid, "died" (a running child), "ends" or
                # "lives" (a child told of a dead parent)
        else:
            time.sleep(SETTLE)  # several watches: a watch that ends its child too soon has
            ok = (all(alive(pid) for pid in pids.values())  # ended it by now
                  and all(said[k].isdigit() for k in alive_kinds)
                  and all(said[k] == "ends" for k in ENDING_KINDS) and alive(starter))
    finally:
        os.close(r)
        os.kill(starter, signal.SIGKILL)
        os.waitpid(starter, 0)
    gone = _within(ORPHAN_GRACE, lambda: not any(alive(pid) for pid in pids.values()))
    for pid in pids.values():  # the check leaves nothing behind
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        try:  # a zombie of ours, where this process is their subreaper
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return ok and gone


def in_a_worker(subject, case: WorkerCase) -> float:
    """0 when the worker's clearing equals this process's and (``stop``) stop_pool ended
    the busy pool as stated and :func:`on_threads` holds; 1 otherwise."""
    base = case.base
    rules = (subject.rule, subject.money, subject.prices)
    here = _outcome(subject.settle(base.market, base.D, thresholds=base.thresholds))
    pool = _pool()
    try:
        pid, there = pool.submit(clear_in_worker, rules, base.market, base.D,
                                 base.thresholds).result(timeout=60)
    except BaseException:
        stop_pool(_POOL.pop())
        raise
    same = all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(here, there,
                                                                            strict=True))
    if not case.stop:
        return 0.0 if same else 1.0
    same = same and on_threads()  # with the stops: a thread's start, ~2 ms wall
    if case.orphans:  # the default watch (0.5 s to wait) on the markets of odd size
        same = same and orphans(base.market.m % 2 == 1) is not False  # None: not Linux
    _POOL.clear()
    busy = pool.submit(time.sleep, BUSY)
    _within(GRACE, busy.running)  # handed to the worker (or about to be)
    stop_pool(pool)
    gone = _within(GRACE, lambda: not alive(pid))
    done = _within(GRACE, busy.done)
    if not gone:  # the check leaves nothing behind
        os.kill(pid, signal.SIGKILL)
    try:
        stop_pool(pool)  # again, on the stopped pool: harmless
        again = True
    except Exception:
        again = False
    return 0.0 if same and gone and done and again else 1.0


class WorkerSampler(FaultSampler):
    """``inner``'s draws with one more uniform per instance: whether the pool is stopped
    (below :data:`STOP_SHARE`; no atom at 0), and whether :func:`orphans` is checked then
    (below half of it)."""

    def draw(self, rng, size: int) -> list[Draws]:
        out = self.inner.draw(rng, size)
        for d in out:
            d.glob = np.concatenate([d.glob, rng.random((d.size, 1))], axis=1)
        return out

    def cases(self, d: Draws) -> list[WorkerCase]:
        inner = Draws(d.client, d.pair, d.glob[:, :-1], d.gain, d.mode)
        return [WorkerCase(base, bool(u < STOP_SHARE), bool(u < STOP_SHARE / 2))
                for base, u in zip(self.inner.cases(inner), d.glob[:, -1], strict=True)]


def _instances(max_clients=None):
    # a stop 1 in 10 (STOP_SHARE), half of them with orphans
    return st.builds(lambda base, k: WorkerCase(base, k >= 18, k == 19),
                     ipfl_cases(max_clients), st.integers(0, 19))


def _sample() -> Sampler:
    return WorkerSampler(ipfl_base_sampler(), "ipfl")


_instances.clients = (2, 12)

PROCESS_PROPERTIES = {p.key: p for p in [Property(
    "runs_in_a_worker", "Runs in a pool worker; a stopped pool ends",
    "ipfl.clear with the subject's rules run in a process pool worker (started with "
    "mechanisms.processes.pool_worker) equals the subject's clearing here; stop_pool ends a "
    "pool whose worker is busy: the worker gone within 2 s, the busy task done, a second "
    "stop harmless; off the main thread kill_with_parent gives None and "
    "ctrl_c_between_steps leaves SIGINT alone, as it does where SIGINT is ignored; every "
    "process the toolkit starts (pool_worker, die_with_parent's death signal and its watch, "
    "kill_with_parent's preexec_fn) runs while its parent lives and is gone within 1 s of "
    "its parent's kill -9, and one told of a dead parent ends at once",
    "mechanisms.processes (sweeps, reproduce, prove --jobs); conventions: every process "
    "started dies with its parent",
    f"a drawn instance; the pool stopped with probability {STOP_SHARE:g} (batch engine)",
    "ipfl", _instances, in_a_worker, sample=_sample, clients=(2, 12),
    discriminates="every effective example (no discriminating flag: the worker could "
                  "answer otherwise, a stop could leave it running)",
    note="proofs.process_properties; one pool kept between instances, started again after "
         "each stop")]}
