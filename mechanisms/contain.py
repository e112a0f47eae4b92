"""Code of the user's own, contained: the one place that decides what a rule (a payment,
price, selection or pricing rule, a gain, a subject's rule, a design space's function, a
learning algorithm) may do to the toolkit when the toolkit calls it.

* **Errors.** Whatever a rule raises -- any ``BaseException``: its own bug, ``sys.exit``,
  ``GeneratorExit``, a ``BaseException`` subclass of its own -- becomes one
  :class:`~mechanisms.errors.RuleFailed` naming the kind of rule (``field``), the rule and its
  error (chained as ``__cause__``), except ``KeyboardInterrupt`` (Ctrl-C stops the command)
  and the toolkit's own :class:`Interrupt` (a time limit). A typed fedmarket error the rule
  raises (it called the toolkit with bad input) passes as itself. :func:`call_rule` calls a
  rule so; :class:`contained` is the same for code that is not one call (a generator's
  ``next``); :func:`must_pass` says which exceptions no wrapper may turn into a result.
* **Copies.** A rule receives copies (:func:`handed`): every numpy array it is given, and
  those inside the toolkit's objects it is given (a Market, a Game, a batch of either), is a
  fresh read-only copy made for that call. A rule that turns writing back on
  (``arr.flags.writeable = True``, on the array or its base) and writes, or keeps a reference
  and writes later, changes its copy only: never the caller's arrays, the outcome's or the
  toolkit's own.
* **Time.** :class:`Limit` is a time limit in the main thread of a Unix process: SIGALRM
  (``setitimer``) raises :class:`TimeUp` once it has passed. A limit made with
  ``anywhere=True`` (a sweep cell) stops whatever runs; the others stop a *rule* only: the
  alarm raises inside a call of :func:`call_rule` (or at the start of the next one), never in
  the toolkit's own steps, which the caller bounds by its own checks; and only a rule started
  inside the limit (a rule of your own that clears a market under a limit of its own is not
  stopped by that limit in the clearing's steps, nor named by it). Limits nest (the
  earliest deadline rings first and is raised to its own owner); a SIGALRM timer set before
  (a test runner's timeout) keeps its handler and rings at its own time; the previous handler
  and timer are restored when the last limit ends. The garbage collector's finalizers (any
  code's ``__del__`` and weakref callbacks, run wherever a collection starts) are not
  interrupted: a stop raised there could only be printed as "Exception ignored", and the
  finalizer's clean-up would be lost; the limit stops what runs when the collection is over
  (its next ring, :data:`_AGAIN` later), as it does a call into C.
* **Time, held.** While a limit is in force, :func:`call_rule` runs the rule in a child
  process of its own (``os.fork``: it inherits the handed copies, nothing is sent to it;
  its return value, or what it raised, comes back through a pipe), and the parent waits
  for it under the limit: when the limit passes the parent kills the child (SIGKILL) and
  raises the same stop. So the limit holds whatever the rule does -- it swallows every
  ``BaseException`` in a loop, sits in one long call into C, calls ``os._exit`` (then it
  is a RuleFailed: its process ended without returning) -- and no process is left
  behind: the child runs in a process group of its own, killed as a whole (programs the
  rule started go too), and dies with its parent
  (:func:`mechanisms.processes.die_with_parent`).
  What the rule changes besides its return value stays in the child; its output is
  flushed. Code run under :class:`contained` (not one call) runs in the toolkit's process;
  there a rule that catches the stop and goes on is stopped again every :data:`_AGAIN`
  seconds, and a call into C ends first. Where there is no ``fork`` (Windows) rules run
  in the toolkit's process too. Elsewhere (another
  thread, Windows) :func:`can_interrupt` is False and each caller says what it does:
  ``ipfl.clear``, ``cpl.apply_pricing`` and ``proofs.check`` (for a subject with code of
  your own) refuse a time limit there with an error naming ``time_limit``; a sweep checks
  its cells' limits at their steps.
"""

from __future__ import annotations

import copy
import gc
import math
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

from .errors import FedmarketError, MarketInputError, RuleFailed, RuleTimedOut, as_real
from .processes import before_fork, die_with_parent

__all__ = ["Interrupt", "Limit", "ProcessEnded", "TimeUp", "call_rule", "can_interrupt",
           "contained", "describe", "handed", "must_pass", "rule_timed_out", "within"]


class Interrupt(BaseException):
    """The toolkit's own way of stopping work (a time limit): contained code lets it through
    (:func:`must_pass`). A BaseException, so that a rule's ``except Exception`` does too."""


class TimeUp(Interrupt):
    """``limit`` has passed; ``where`` is (field, label) of the rule that was running, or
    None when the alarm rang in the toolkit's own code (an ``anywhere`` limit)."""

    def __init__(self, limit: Limit | None = None, where: tuple[str, str] | None = None,
                 started: bool = True):
        super().__init__("time limit")
        self.limit = limit
        self.where = where
        self.started = started  # False: the rule was about to start when it was stopped


def must_pass(exc: BaseException) -> bool:
    """True for the exceptions no wrapper may turn into a rule's error or a verdict:
    Ctrl-C and the toolkit's own :class:`Interrupt`."""
    return isinstance(exc, KeyboardInterrupt | Interrupt)


def describe(exc: BaseException, limit: int = 300) -> str:
    """``"TypeError: message"`` on one line, at most ``limit`` characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --------------------------------------------------------------------------- copies


def handed(value):
    """What a rule receives in place of ``value``: a numpy array as a fresh read-only copy;
    a tuple or list of them item by item; one of the toolkit's objects (a Market, a Game, a
    batch of either; anything defined in ``mechanisms``) as a shallow copy whose arrays (and
    such objects) are handed in turn. Anything else (numbers, strings, the user's own
    objects) as it is."""
    if isinstance(value, np.ndarray):
        out = np.array(value, copy=True)
        out.setflags(write=False)
        return out
    if isinstance(value, tuple | list):
        return type(value)(handed(v) for v in value)
    if type(value).__module__.startswith("mechanisms.") and hasattr(value, "__dict__"):
        out = copy.copy(value)
        for name, v in vars(value).items():
            if isinstance(v, np.ndarray) or type(v).__module__.startswith("mechanisms."):
                object.__setattr__(out, name, handed(v))
        return out
    return value


# --------------------------------------------------------------------------- errors

_MAIN = threading.main_thread().ident
_running: list[tuple[str, str]] = []  # (field, label) of the rules running, main thread only


class contained:
    """``with contained(field, label): ...`` runs code of the user's own: what it raises
    becomes :class:`RuleFailed` (see the module doc), and a :class:`Limit` may stop it
    (started after a limit passed, it raises :class:`TimeUp` at once)."""

    __slots__ = ("field", "label", "main", "passing")

    def __init__(self, field: str, label: str, passing: tuple[type, ...] = ()):
        self.field, self.label, self.passing = field, label, passing  # passing: as themselves

    def __enter__(self):
        self.main = threading.get_ident() == _MAIN
        if self.main:
            if _limits and any(lim.expired for lim in _limits):  # past a limit: not started
                raise TimeUp(next(lim for lim in _limits if lim.expired),
                             (self.field, self.label), started=False)
            entry = (self.field, self.label)
            try:  # a limit's alarm may raise as the append returns, before the block starts
                _running.append(entry)  # (its __exit__ then never runs): take it off again
            except BaseException:
                if _running and _running[-1] is entry:
                    _running.pop()
                raise
        return self

    def __exit__(self, kind, exc, tb):
        if self.main:
            _running.pop()
        if exc is None or isinstance(exc, (FedmarketError, *self.passing)) or must_pass(exc):
            return False
        raise RuleFailed(self.field, f"{self.label} raised {describe(exc)}") from exc


def call_rule(field: str, label: str, fn: Callable, *args):
    """``fn(*args)`` for a rule of the user's own: it receives :func:`handed` copies of the
    arguments; a typed fedmarket error passes as itself, anything else it raises (but Ctrl-C
    and the toolkit's :class:`Interrupt`) is a :class:`RuleFailed` naming ``field``, the rule
    and the error, chained to the original; a :class:`Limit` may stop it."""
    args = handed(args)
    with contained(field, label):
        if _limits and not _CHILD and hasattr(os, "fork") \
                and threading.get_ident() == _MAIN:
            return _in_child(fn, args)
        return fn(*args)


# --------------------------------------------------------------------------- a child

_CHILD = False  # True in the child process :func:`_in_child` started
_FORKING = False  # True while this process forks a rule's child
_COLLECTING = False  # True while the garbage collector runs (its finalizers): see _collecting


class ProcessEnded(Exception):
    """The child running a rule ended without sending back a result (it called
    ``os._exit``, was killed by a signal, or its result could not be sent)."""


def _in_child(fn: Callable, args: tuple):
    """``fn(*args)`` in a forked child process; its return value is returned, what it
    raised is raised (the exception itself when it can be sent back, else a
    :class:`ProcessEnded` that says what it was). While the parent waits, a :class:`Limit`
    that passes raises in the parent (SIGALRM, as for a rule in this process); the parent
    then kills the child before the stop goes on. The child dies with its parent."""
    for stream in (sys.stdout, sys.stderr):  # else the child would write the parent's again
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    parent = os.getpid()
    before_fork()  # the child's die_with_parent then loads nothing
    r, w = os.pipe()
    # a limit passing inside os.fork (its callbacks run Python code) must not raise there,
    # where Python can only print "Exception ignored": while _FORKING, _ring only re-arms,
    # and its next ring stops the rule in the read loop below, where the child is killed
    # (a signal mask would not do: it holds back one thread's share of the alarm only)
    global _FORKING
    _FORKING = True
    try:
        pid = os.fork()
    except BaseException:
        _FORKING = False
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the child: run the rule, send back its result, end without cleanup
        status = 0
        try:
            global _CHILD
            _CHILD = True
            _FORKING = False
            os.setpgid(0, 0)  # a group of its own: what the rule starts is killed with it
            os.close(r)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # no limit is armed in here
            _limits.clear()
            _running.clear()
            die_with_parent(parent)
            try:
                result = ("returned", fn(*args))
            except BaseException as exc:  # sent to the parent, which decides
                result = ("raised", exc)
            try:
                data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                what = ("returned an object" if result[0] == "returned" else
                        f"raised {describe(result[1])}, which")
                data = pickle.dumps(("raised", ProcessEnded(
                    f"{what} that cannot be sent back from its process: {describe(exc)}")))
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except BaseException:  # nothing may escape the child
            status = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(status)
    os.close(w)
    try:
        os.setpgid(pid, pid)  # (also done in the child: whichever runs first)
    except OSError:
        pass
    chunks = []
    try:
        _FORKING = False  # a limit that passed while forking stops it at its next ring
        while True:
            chunk = os.read(r, 1 << 20)  # a Limit's alarm raises here
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:
        try:
            os.killpg(pid, signal.SIGKILL)  # the child and whatever the rule started
        except OSError:
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(r)
        _reap(pid)
    if not chunks:
        raise ProcessEnded("ended its process without returning")
    kind, value = pickle.loads(b"".join(chunks))  # our own child's bytes, never a file
    if kind == "raised":
        raise value
    return value


def _reap(pid: int) -> None:
    """Wait for the child ``pid`` (killed or ending), the alarm held back meanwhile (a
    limit's repeated ring must not leave it unreaped)."""
    with _blocked():
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


# --------------------------------------------------------------------------- time

_limits: list[Limit] = []  # the limits in force in the main thread, outermost first
_foreign: dict = {}  # the SIGALRM handler and timer found when the first limit started
_AGAIN = 0.05  # s: the alarm rings again this often once a limit has passed, until its
# owner has stopped (a rule that catches BaseException and goes on is stopped again)
_EARLY = 1e-3  # s: a timer that rings this close to a deadline counts it as passed
_due = math.inf  # the monotonic time our timer was last set to ring at (inf: not set)


def _set_due(when: float) -> None:
    global _due
    _due = when


def can_interrupt() -> bool:
    """Whether a :class:`Limit` can stop running code here: the main thread of a process on
    a system with ``setitimer`` (not Windows)."""
    return hasattr(signal, "setitimer") and threading.get_ident() == _MAIN


class Limit:
    """A time limit of ``seconds`` (None: none), a context manager::

        limit = Limit(2.0)
        try:
            with limit:
                work()
        except TimeUp as exc:
            if exc.limit is not limit:  # an outer limit: its owner's business
                raise
            ...  # exc.where: the rule that was running

    ``anywhere``: stop whatever runs when the limit passes (a sweep cell); otherwise only a
    rule (a call of :func:`call_rule`). Where :func:`can_interrupt` is False the limit is not
    armed: ``passed`` still tells whether it has passed (the caller's own checks)."""

    def __init__(self, seconds: float | None, *, anywhere: bool = False):
        self.seconds = seconds
        self.anywhere = anywhere
        self.expired = False
        self.armed = False
        self.deadline = math.inf
        self.depth = 0  # the rules running as it started: it stops only those started in it

    @property
    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.deadline

    def __enter__(self):
        self.deadline = (math.inf if self.seconds is None
                         else time.monotonic() + float(self.seconds))
        if self.seconds is None or not can_interrupt():
            return self
        with _blocked():
            if not _limits:
                if _collecting not in gc.callbacks:
                    gc.callbacks.append(_collecting)
                # the timer found stopped before our handler is in: a ring of its that
                # comes now still finds its own handler
                left, interval = signal.setitimer(signal.ITIMER_REAL, 0)
                handler = signal.getsignal(signal.SIGALRM)
                _foreign.clear()
                _foreign.update(handler=handler, interval=interval, rung=False,
                                deadline=time.monotonic() + left if left else None,
                                unsure=not left and callable(handler))
                signal.signal(signal.SIGALRM, _ring)
            self.depth = len(_running)
            _limits.append(self)
            self.armed = True
            _arm()
        return self

    def __exit__(self, kind, exc, tb):
        if not self.armed:
            return False
        with _blocked():
            self.armed = False
            _limits.remove(self)
            if _limits:
                _arm()
                return False
            signal.setitimer(signal.ITIMER_REAL, 0)
            _set_due(math.inf)
            _foreign["unsure"] = False  # a ring from now on is ours, late
            _drop_pending_alarm()  # ours, held back: never the old handler's
        # SIGALRM let through with our handler still in: a late ring of ours that another
        # thread took reaches _ring here (the timer found's handler, if its time has come),
        # not the handler put back below, which would then ring twice
        with _blocked():
            if not _limits:
                old = _foreign.get("handler")
                signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)
                if _foreign.get("deadline") is not None and not _foreign["rung"]:
                    left = _foreign["deadline"] - time.monotonic()
                    signal.setitimer(signal.ITIMER_REAL, max(left, _EARLY),
                                     _foreign["interval"])
                _foreign.clear()
        return False


def _drop_pending_alarm() -> None:
    """Take a SIGALRM of ours that is pending (held back by :class:`_blocked`) off the queue
    without waiting: another thread, which does not hold it back, may take it between a
    look at the pending signals and a wait for it, and a wait (``sigwait``) would then never
    end (the timer is off)."""
    if hasattr(signal, "sigtimedwait"):
        signal.sigtimedwait({signal.SIGALRM}, 0)
    elif hasattr(signal, "sigpending") and signal.SIGALRM in signal.sigpending():
        signal.sigwait({signal.SIGALRM})  # (no sigtimedwait: macOS)


def _collecting(phase: str, info: dict) -> None:
    """A ``gc.callbacks`` entry from the first limit on (kept: removed in the middle of a
    collection, it would miss the collection's end): whether a collection, and so the
    finalizers of whatever code left garbage, is running now."""
    global _COLLECTING
    _COLLECTING = phase == "start"


class _blocked:
    """SIGALRM held back while the limits are changed (delivered after, if it came)."""

    def __enter__(self):
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})

    def __exit__(self, *exc):
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        return False


def _arm() -> None:
    """Set the timer for the next thing to ring: the earliest deadline not yet passed, the
    foreign timer, or (a limit passed, its owner not yet out) :data:`_AGAIN` from now."""
    now = time.monotonic()
    times = [lim.deadline for lim in _limits if not lim.expired]
    if _foreign.get("deadline") is not None and not _foreign["rung"]:
        times.append(_foreign["deadline"])
    if any(lim.expired and (lim.anywhere or len(_running) > lim.depth) for lim in _limits):
        times.append(now + _AGAIN)
    if times:
        wait = max(min(times) - now, _EARLY)
        _set_due(now + wait)
        signal.setitimer(signal.ITIMER_REAL, wait)
    else:
        _set_due(math.inf)
        signal.setitimer(signal.ITIMER_REAL, 0)


def _ring(signum, frame):
    now = time.monotonic()
    if now < _due - _EARLY and _foreign.get("unsure"):
        # not our timer's ring (nothing of ours is due): the timer found, which had no time
        # left as the first limit started, rang in that moment and its ring (taken by
        # another thread, or held back) comes only now. Its handler gets it, once.
        _foreign["unsure"] = False
        _call_foreign(signum, frame)
        return
    for lim in _limits:
        if now >= lim.deadline - _EARLY:
            lim.expired = True
    for lim in _limits:  # the outermost passed limit that may stop what runs now
        if lim.expired and (lim.anywhere or len(_running) > lim.depth):
            _arm()
            if _FORKING or _COLLECTING:  # inside os.fork's callbacks or a finalizer the
                return  # collector runs, a stop could only be printed ("Exception ignored")
                # and the finalizer's clean-up lost: the next ring, _AGAIN later, stops it
            raise TimeUp(lim, _running[-1] if _running else None)
    fdl = _foreign.get("deadline")
    if fdl is not None and not _foreign["rung"] and now >= fdl - _EARLY:
        _foreign["rung"] = True
        handler = _foreign["handler"]
        if callable(handler):
            _call_foreign(signum, frame)
            return
        _arm()
        if handler == signal.SIG_DFL:  # what the timer would have done: end the process
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGALRM)
        return
    _arm()


def _call_foreign(signum, frame) -> None:
    """The timer found's handler, called for its ring with our timer stopped: a limit that
    passes meanwhile stops what runs once the handler has returned, never cutting the
    handler short (a stop raised in its first line would lose the ring). Ours is set again
    after, whatever the handler does."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        _foreign["handler"](signum, frame)
    finally:
        _arm()


def rule_timed_out(exc: TimeUp, seconds: float, what: str = "time_limit") -> RuleTimedOut:
    """The one-line error of a rule stopped by a limit (``exc.where``), naming the rule and
    the limit; without a rule, ``what`` was stopped."""
    if exc.where is None:
        return RuleTimedOut(what, f"stopped at the time limit of {seconds:g} s")
    field, label = exc.where
    if not exc.started:
        return RuleTimedOut(field, f"{label} was not started: the time limit of {seconds:g} "
                                   f"s ({what}) had passed")
    return RuleTimedOut(field, f"{label} was stopped at the time limit of {seconds:g} s "
                               f"({what}): it had not returned")


def within(seconds: float | None, fn: Callable, *args, field: str = "time_limit", **kw):
    """``fn(*args, **kw)`` with a rule time limit of ``seconds`` (None: none; else finite
    and > 0, checked here): a rule of the user's own still running when it passes is stopped
    with :class:`~mechanisms.errors.RuleTimedOut` naming the rule and the limit; the
    toolkit's own steps are not interrupted. Where :func:`can_interrupt` is False (another
    thread, Windows) a limit is refused with an error naming ``field``: it could not stop a
    rule there."""
    if seconds is None:
        return fn(*args, **kw)
    seconds = as_real(field, seconds, lo=0, lo_open=True)
    if not can_interrupt():
        raise MarketInputError(field, f"is {seconds:g}; a time limit can stop a rule only in "
                                      "the main thread of a Unix process (SIGALRM): call "
                                      "from the main thread, or run the call in a child "
                                      "process and stop that")
    limit = Limit(seconds)
    try:
        with limit:
            return fn(*args, **kw)
    except TimeUp as exc:
        if exc.limit is not limit:
            raise
        raise rule_timed_out(exc, seconds, field) from None
