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
  in for the block and the old one back after.

The pool (one worker; forked where the platform forks) is kept between instances in a
process and started again after each stop, so an instance costs a task's round trip
(milliseconds), and a stop a pool's start and end. A violation is 1 (0: as stated); every
instance discriminates (the worker could answer otherwise, a stop leave it running).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import signal
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

__all__ = ["BUSY", "GRACE", "PROCESS_PROPERTIES", "STOP_SHARE", "WorkerCase", "alive",
           "clear_in_worker", "in_a_worker", "on_threads"]

STOP_SHARE = 0.1  # the share of instances that stop the pool (each starts a new one after)
BUSY = 60.0  # s: the busy task's sleep (far past GRACE: only a stop ends it in time)
GRACE = 2.0  # s: how long a stopped worker may take to be gone

_POOL: list = []  # the pool kept between instances in this process (at most one)
_FINALIZER: list = []  # its exit finalizer, registered once per process


@dataclass(frozen=True, eq=False)
class WorkerCase:
    """A drawn iPFL instance ``base`` and whether the pool is stopped after it."""

    base: Any
    stop: bool

    def code(self) -> str:
        imp = f"from {type(self.base).__module__} import {type(self.base).__name__}\n"
        return imp + self.base.code() + f"\ncase = WorkerCase(case, {self.stop!r})"

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
    (below :data:`STOP_SHARE`; no atom at 0)."""

    def draw(self, rng, size: int) -> list[Draws]:
        out = self.inner.draw(rng, size)
        for d in out:
            d.glob = np.concatenate([d.glob, rng.random((d.size, 1))], axis=1)
        return out

    def cases(self, d: Draws) -> list[WorkerCase]:
        inner = Draws(d.client, d.pair, d.glob[:, :-1], d.gain, d.mode)
        return [WorkerCase(base, bool(u < STOP_SHARE))
                for base, u in zip(self.inner.cases(inner), d.glob[:, -1], strict=True)]


def _instances(max_clients=None):
    return st.builds(WorkerCase, ipfl_cases(max_clients),
                     st.integers(0, 9).map(lambda k: k == 9))  # a stop 1 in 10 (STOP_SHARE)


def _sample() -> Sampler:
    return WorkerSampler(ipfl_base_sampler(), "ipfl")


_instances.clients = (2, 12)

PROCESS_PROPERTIES = {p.key: p for p in [Property(
    "runs_in_a_worker", "Runs in a pool worker; a stopped pool ends",
    "ipfl.clear with the subject's rules run in a process pool worker (started with "
    "mechanisms.processes.pool_worker) equals the subject's clearing here; stop_pool ends a "
    "pool whose worker is busy: the worker gone within 2 s, the busy task done, a second "
    "stop harmless; off the main thread kill_with_parent gives None and "
    "ctrl_c_between_steps leaves SIGINT alone, as it does where SIGINT is ignored",
    "mechanisms.processes (sweeps, reproduce, prove --jobs); conventions: every process "
    "started dies with its parent",
    f"a drawn instance; the pool stopped with probability {STOP_SHARE:g} (batch engine)",
    "ipfl", _instances, in_a_worker, sample=_sample, clients=(2, 12),
    discriminates="every effective example (no discriminating flag: the worker could "
                  "answer otherwise, a stop could leave it running)",
    note="proofs.process_properties; one pool kept between instances, started again after "
         "each stop")]}
