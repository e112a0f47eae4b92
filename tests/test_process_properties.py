"""The checker's ``runs_in_a_worker`` (issue 34, part 2: proofs.process_properties): the
toolkit's pool handling (mechanisms.processes) checked through the ``local`` subject. It
holds, and it rejects a stop that leaves the busy worker running, a worker that clears
otherwise, and kill_with_parent / ctrl_c_between_steps without their guards (another thread,
SIGINT ignored)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading

import numpy as np
import pytest

from proofs import PROPERTIES, SUBJECTS, check
from proofs import process_properties as pp

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.skipif(not hasattr(os, "fork"), reason="a forked pool worker")]


def _cases(stop, k=6):
    smp = pp._sample()
    cases = [c for d in smp.draw(np.random.default_rng(0), k) for c in smp.cases(d)]
    return [dataclasses.replace(c, stop=stop) for c in cases]


def test_it_holds_and_every_draw_is_checked():
    r = check(SUBJECTS["local"], PROPERTIES["runs_in_a_worker"], max_examples=60, seed=0,
              engine="batch")
    assert r.verdict == "holds" and r.discriminating >= 60
    assert SUBJECTS["local"].declares["runs_in_a_worker"] is True


def test_a_stop_that_leaves_the_busy_worker_running_is_caught(monkeypatch):
    case = _cases(stop=True, k=1)[0]
    assert pp.in_a_worker(SUBJECTS["local"], case) == 0.0
    # shutdown only: the worker sleeps on in its task (the check kills it after 2 s)
    monkeypatch.setattr(pp, "stop_pool",
                        lambda pool: pool.shutdown(wait=False, cancel_futures=True))
    assert pp.in_a_worker(SUBJECTS["local"], case) == 1.0


def test_a_worker_that_clears_otherwise_is_caught(monkeypatch):
    """A worker whose outcome differs from this process's (here: payments rounded to 3
    digits in any other process) is caught."""
    home = os.getpid()
    monkeypatch.setattr(pp, "_outcome", lambda o: [np.asarray(x) for x in (
        o.adjacency, o.payments if os.getpid() == home else np.round(o.payments, 3),
        o.utilities, o.welfare)])
    if pp._POOL:  # a new worker: forked with the fault
        pp.stop_pool(pp._POOL.pop())
    assert any(pp.in_a_worker(SUBJECTS["local"], c) == 1.0 for c in _cases(stop=False))


# kill_with_parent and ctrl_c_between_steps off the main thread and with SIGINT ignored
# (pp.on_threads, checked on the draws that stop the pool): each fault is a copy of the
# function in mechanisms.processes with one of its guards dropped


def _preexec_everywhere(sig=signal.SIGKILL):
    """kill_with_parent without its main-thread guard: a preexec_fn on any thread."""
    return lambda: None


def _ctrl_c_without(guard: str):
    """ctrl_c_between_steps with guards dropped: "thread" both (signal.signal then raises
    off the main thread), "ignored" the SIG_IGN one only (a background job's ignored SIGINT
    would be caught)."""
    @contextlib.contextmanager
    def faulty():
        got = []
        if guard != "thread" and threading.current_thread() is not threading.main_thread():
            yield lambda: False
            return
        old = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
        try:
            yield lambda: bool(got)
        finally:
            signal.signal(signal.SIGINT, old)

    return faulty


@pytest.mark.parametrize("name, fault", [("kill_with_parent", _preexec_everywhere),
                                         ("ctrl_c_between_steps", _ctrl_c_without("thread")),
                                         ("ctrl_c_between_steps", _ctrl_c_without("ignored"))])
def test_process_helpers_without_their_thread_or_sigint_guard_are_caught(monkeypatch, name,
                                                                          fault):
    from mechanisms import processes

    case = _cases(stop=True, k=1)[0]
    before = signal.getsignal(signal.SIGINT)
    assert pp.on_threads() is True
    monkeypatch.setattr(processes, name, fault)
    assert pp.on_threads() is False
    assert pp.in_a_worker(SUBJECTS["local"], case) == 1.0
    assert signal.getsignal(signal.SIGINT) == before  # the check puts SIGINT back
