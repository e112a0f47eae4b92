"""Rules of your own are contained (issue 34, part 2; :mod:`mechanisms.contain`): one property
per family, ``contains_rules`` (iPFL: ``ipfl.clear``) and ``cpl_contains_rules`` (CPL:
``cpl.apply_pricing``).

Each instance is a well-formed instance of the family, a slot (iPFL: the selection rule, the
payments or the prices; CPL: the pricing rule) and a rule of your own drawn from
:data:`BEHAVIOURS`, put in that slot in place of the subject's own (the other slots keep the
subject's rules). The honest rule returns what the subject's own rule gave in that slot
(its adjacency, payments or prices, computed first); the others misbehave:

* ``honest``, ``writes`` (turns writing back on in the arrays it is handed and overwrites
  them, then answers honestly), the same under a time limit of :data:`GENEROUS` s
  (``honest_limited``, ``writes_limited``: the rule then runs in a child process of its
  own): the outcome must equal the subject's own -- the path of a
  rule of your own (one market, copies made for the call) gives what the built-in path gives
  (iPFL: adjacency, payments, utilities, welfare to 1e-12 relative; CPL: the same prices
  through :func:`mechanisms.cpl.apply_pricing_batch` on the batch of one, exactly);
* ``raises``, ``exits`` (sys.exit), ``base_exception`` (a BaseException of its own), ``nan``,
  ``wrong_shape``, ``text``, ``none``, ``out_of_range`` (an adjacency entry 2, a price of
  -inf, a payment of inf), ``self_purchase`` (the selection slot only): a
  :class:`~mechanisms.errors.RuleFailed` naming the slot on one line (``raises``' error,
  :data:`RAISED`, is two lines and 500 characters: shown cut to :data:`DESCRIBED`
  characters ending in "...", its start kept); ``not_a_rule``
  (``"os:getcwd"``), ``not_importable``: refused before any call, an error naming the slot;
* ``sleeps`` (past the call's time limit of :data:`LIMIT` s): a
  :class:`~mechanisms.errors.RuleTimedOut` naming the slot (only where a limit can stop a
  rule: :func:`mechanisms.contain.can_interrupt`; elsewhere the instance is not checked);
* ``nested_clear`` (iPFL; the call itself without a limit): the rule clears its market
  with ``ipfl.clear(..., time_limit=LIMIT)`` and a payment rule of its own (a price rule in
  the payments slot) that sleeps past that limit: a RuleTimedOut naming that inner slot,
  the rule running when the limit passed (not the slot's rule around it);
* ``nested_late`` (iPFL; the call itself without a limit): the rule, within a limit of
  :data:`LATE` s of its own (:func:`mechanisms.contain.within`), sleeps :data:`BUSY` s in
  steps of its own, past that limit's ring, then clears its market with a quick rule of its
  own in another slot: a limit stops only a rule started inside it, never the steps of the
  rule it started in (nor names that rule), so the inner rule is stopped as it starts: a
  RuleTimedOut naming that inner slot;
* ``from_data`` (a ``"module:function"`` named inside :func:`mechanisms.lookup.
  names_from_data`, its module not trusted: the block trusts nothing, or, on the draws of
  an odd number of clients, only :data:`NEIGHBOURS`, modules sorting before and after it, a
  sibling sharing its prefix without a dot and a submodule of it): refused with an error
  naming the slot before anything is imported (the guard's
  :class:`~mechanisms.lookup.UntrustedName`: the rule, were it imported, would be refused
  for its arity instead), and :func:`mechanisms.lookup.untrusted` lists it (given the same
  trusted modules);
  ``trusted_from_data`` (the same, its module trusted as a spec of your own trusts it:
  :func:`mechanisms.lookup.named_modules`): imported and run, the subject's own outcome,
  and ``untrusted`` lists nothing;
* ``malformed_name`` (``"os:"``), ``not_callable`` (``"math:pi"``): refused before any call,
  an error naming the slot;
* ``import_raises`` (a ``"module:function"`` whose module raises ValueError while it is
  imported): a RuleFailed naming the slot; ``import_interrupted`` (the module raises
  KeyboardInterrupt while it is imported, as Ctrl-C during the import would): the
  KeyboardInterrupt passes through, never turned into an error of the rule's (the two
  modules are written to a folder of this process's own, on ``sys.path`` for the call only;
  the check lets through a KeyboardInterrupt that is not the module's, a real Ctrl-C);
* ``zero_one`` (the selection slot only: the adjacency as floats 0.0 / 1.0): the subject's
  own outcome; ``sells_pure_buyer`` (the selection slot, a market with a pure buyer
  c_j = inf: someone buys from it): a RuleFailed naming the slot;
* under a time limit, in a child process: ``raises_limited`` (the error comes back from the
  child: a RuleFailed), ``ends_process_limited`` (``os._exit``: a RuleFailed, its process
  ended without returning); ``nested_limited`` (the sleeping rule under the call's generous
  limit inside an outer limit of :data:`LIMIT` s, :func:`mechanisms.contain.within`: the
  outer one stops it, a RuleTimedOut naming the slot);
* ``threaded`` (the call made from another thread, no limit: the subject's own outcome);
  ``threaded_limited`` (the same with a time limit, which no signal can enforce there:
  refused with an error naming ``time_limit``);
* a SIGALRM timer of someone else's set before the call (a test runner's timeout):
  ``foreign_timer_rings`` (0.02 s, the sleeping rule under the :data:`LIMIT` s limit: its
  handler is called once, the rule stopped, a RuleTimedOut naming the slot) and
  ``foreign_timer_kept`` (60 s, an honest rule under a limit: the subject's own outcome),
  ``foreign_timer_ignored`` (0.02 s with SIG_IGN as its handler, the sleeping rule: a
  RuleTimedOut naming the slot, nothing else happening when it rings);
  ``foreign_timer_late`` (60 s; first a rule limit of 1e-9 s passes while no rule runs,
  ``Limit(LATE)`` around a 20 ms sleep, then an honest rule under the ``late`` limit: a
  limit's ring that stops nothing leaves it alone: never called, still running);
  ``foreign_handler_idle`` (its handler a function, no timer set: never called) and
  ``foreign_ring_pending`` (the same with one SIGALRM of its raised and held back as the
  call starts, a ring that came in that moment: called once), each with the sleeping rule
  under the :data:`LIMIT` s limit (a RuleTimedOut naming the slot);
  either way the foreign handler is back in place after the call, and a timer that has
  not rung still runs;
* ``late`` (an honest rule under a limit of 1e-9 s, whose timer rings 1 ms on: mostly in
  the toolkit's own steps, which are not interrupted, so the rule is then not started):
  a RuleTimedOut naming the slot, or (the rule answered within that 1 ms) the subject's
  own outcome;
* ``finalizer`` (the selection and pricing slots; no rule is called): under a limit that
  stops whatever runs (``Limit(FINALIZER_LIMIT, anywhere=True)``, as a sweep cell's), the garbage
  collector finalizes a cycle whose finalizer outlasts the limit (:data:`FINALIZER` s): it
  runs to its end (nothing "Exception ignored") and the limit's TimeUp comes after it (a
  draw whose limit passed before the collection is not checked);
* ``starts_program`` (under the :data:`PROGRAM_LIMIT` s limit, the rule starts a program of
  its own, ``sleep 30`` with :func:`mechanisms.processes.kill_with_parent`, then sleeps past
  the limit): a RuleTimedOut naming the slot, and the program is gone within 2 s (killed
  with the rule's process group); a draw whose limit passed before the rule's child had
  started its program (nothing to contain: a loaded host) is not checked (None), never
  counted as holding;

In every case the caller's arrays (the market's or game's fields, D) are unchanged, and a
child process a rule ran in (under a time limit: the rule writes its pid; not ``late``'s,
whose race with its 1 ms ring the write would shift) has been reaped when the call is over
(no zombie left, nothing running). A
violation is 1 (0: contained as stated). Every instance checked (not None) discriminates.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from mechanisms import cpl, ipfl
from mechanisms.contain import Limit, TimeUp, can_interrupt, must_pass, within
from mechanisms.errors import FedmarketError, RuleFailed, RuleTimedOut
from mechanisms.lookup import UntrustedName, named_modules, names_from_data, untrusted
from mechanisms.processes import kill_with_parent

from .batch import Draws, Sampler
from .core import Property, SubjectError
from .input_properties import (
    FaultSampler,
    cpl_base_sampler,
    cpl_cases,
    ipfl_base_sampler,
    ipfl_cases,
)
from .process_properties import alive

__all__ = ["BEHAVIOURS", "LIMIT", "RULE_PROPERTIES", "RuleCase", "contained_violation"]

LIMIT = 0.05  # s: the time limit of a call with a sleeping rule (which sleeps 20 x as long)
PROGRAM_LIMIT = 0.1  # s: starts_program's limit: its child forks, then starts a program, which
# took more than 0.05 s on a loaded host (the draw then saw nothing to contain: not checked).
# Measured at load 4 on 2 cores, 20 draws each: 2 not checked at 0.05 s, none at 0.1, 0.2, 0.5
GENEROUS = 60.0  # s: the limit of the "_limited" behaviours' calls (in force, never reached:
# the limit counts from the call's start, so 0.05 s could pass in the toolkit's own steps on
# a loaded machine and stop an honest rule before it started)


FOREIGN = {"foreign_timer_rings": 0.02, "foreign_timer_kept": 60.0,  # s: someone else's timer
           "foreign_timer_ignored": 0.02, "foreign_timer_late": 60.0,
           "foreign_handler_idle": 0.0, "foreign_ring_pending": 0.0}  # 0: no timer set
_SLEEPING = ("sleeps", "foreign_timer_rings", "foreign_timer_ignored", "starts_program",
             "foreign_handler_idle", "foreign_ring_pending")
_LATE = ("late", "foreign_timer_late")  # under the LATE limit
_NEEDS_SIGNALS = ("sleeps", "nested_limited", "ends_process_limited", "starts_program",
                  "late", "nested_clear", "nested_late", "finalizer", *FOREIGN)
IN_FLIGHT = 1.0  # s: how long a ring that came just as the call returned may take to reach
# its handler (a ring taken by another thread runs the handler in the main thread later, on
# a loaded host ms on); waited for only when no ring was seen and none is still to come
LATE = 1e-9  # s: the "late" behaviour's limit, passed before the toolkit reaches the rule
BUSY = 0.005  # s: nested_late's own steps inside its limit of LATE s (its timer rings 1 ms on)


def _limit(case) -> float | None:
    """The call's time limit: under one, a rule runs in a child process of its own
    (:func:`mechanisms.contain.call_rule`); without, in this process on handed copies."""
    if case.behaviour == "threaded_limited":
        return GENEROUS  # refused: no limit can be enforced outside the main thread
    if not can_interrupt():
        return None
    if case.behaviour in _LATE:
        return LATE
    if case.behaviour == "starts_program":
        return PROGRAM_LIMIT
    if case.behaviour in _SLEEPING:
        return LIMIT
    return GENEROUS if case.behaviour.endswith("_limited") or case.behaviour in FOREIGN \
        else None


SLOTS = {"ipfl": ("rule", "payments", "prices"), "cpl": ("pricing",)}
BEHAVIOURS = ("honest", "writes", "honest_limited", "writes_limited", "raises", "exits",
              "base_exception", "nan", "wrong_shape", "text", "none", "out_of_range",
              "self_purchase", "not_a_rule", "not_importable", "sleeps", "from_data",
              "trusted_from_data", "malformed_name", "not_callable", "zero_one",
              "sells_pure_buyer", "raises_limited", "ends_process_limited", "nested_limited",
              "threaded", "threaded_limited", "foreign_timer_rings", "foreign_timer_kept",
              "starts_program", "late", "foreign_timer_ignored", "import_raises",
              "import_interrupted", "nested_clear", "nested_late", "finalizer",
              "foreign_timer_late", "foreign_handler_idle", "foreign_ring_pending")
_SAME = ("honest", "writes", "trusted_from_data", "zero_one", "threaded",
         "foreign_timer_kept")  # (after "_limited" is removed) the subject's own outcome
_REFUSED = ("not_importable", "not_a_rule", "malformed_name", "not_callable")  # before a call
_SELECTION_ONLY = ("self_purchase", "zero_one", "sells_pure_buyer")
_FROM_DATA_ANSWER: list = []  # the answer of the rule named by data (set for its one call)
_PROGRAM_PID: list = []  # the file the starts_program rule writes its program's pid to
_CHILD_PID: list = []  # the file a rule run in a child process of its own writes its pid to
RAISED = "a bug of the rule's own, at length:\n" + "0123456789" * 50
"""The ``raises`` rule's error message: over two lines and 500 characters long, cut to one
line of :data:`DESCRIBED` characters in the RuleFailed (:func:`mechanisms.contain.describe`)."""
DESCRIBED = 300  # the characters of the rule's error a RuleFailed shows, "..." included
FROM_DATA_RULE = "proofs.rule_properties:answer_from_data"
NEIGHBOURS = ("mechanisms.lookup", "proofs.rule_prop", "proofs.rule_properties_x",
              "proofs.rule_properties.inner", "proofs.strategies")
"""What the ``from_data`` block trusts on the draws of an odd number of clients (nothing on
the others): modules that do not cover the refused rule's module ``proofs.rule_properties``,
sorting before and after it, one sharing its prefix without a dot (a sibling), one below it
(a submodule does not vouch for its package). A guard comparing module names by order or by
bare prefix lets the rule through (issue 34: ``module == t`` -> ``module <= t`` survived)."""
RAISING_MODULES = {"import_raises": ("fedmarket_import_raises", "ValueError"),
                   "import_interrupted": ("fedmarket_import_interrupted", "KeyboardInterrupt")}
IMPORT_MARK = "fedmarket: raised while the module is imported"
_FOLDER: list = []  # the folder the raising modules are written to (one per process)
_PASSED = object()  # the call let the module's KeyboardInterrupt through


def _raising_modules() -> str:
    """The folder holding the modules of :data:`RAISING_MODULES` (each raises its
    exception, marked :data:`IMPORT_MARK`, while it is imported), written once a process;
    removed at its exit."""
    if not _FOLDER:
        folder = tempfile.TemporaryDirectory(prefix="fedmarket-modules-")
        for module, exc in RAISING_MODULES.values():
            with open(os.path.join(folder.name, f"{module}.py"), "w") as f:
                f.write(f"raise {exc}({IMPORT_MARK!r})\n\n\ndef rule(*args):\n    return None\n")
        _FOLDER.append(folder)
    return _FOLDER[0].name


def _with_modules(call):
    """``call()`` with the raising modules' folder first on ``sys.path`` (taken off after);
    the module's own KeyboardInterrupt answered :data:`_PASSED`."""
    folder = _raising_modules()
    sys.path.insert(0, folder)
    try:
        return call()
    except KeyboardInterrupt as exc:
        if exc.args == (IMPORT_MARK,):
            return _PASSED
        raise  # a real Ctrl-C
    finally:
        sys.path.remove(folder)


def answer_from_data(*args):
    """The rule ``trusted_from_data`` names: it answers what the subject's own rule gave
    (set for the one call it is named in)."""
    return np.array(_FROM_DATA_ANSWER[-1])


class _Own(BaseException):
    """A BaseException of the rule's own (not an Exception)."""


@dataclass(frozen=True, eq=False)
class RuleCase:
    """A well-formed instance ``base``, the slot and the behaviour of the rule put there."""

    base: Any
    slot: str
    behaviour: str
    family: str

    def code(self) -> str:
        imp = f"from {type(self.base).__module__} import {type(self.base).__name__}\n"
        return (imp + self.base.code() + f"\ncase = RuleCase(case, {self.slot!r}, "
                f"{self.behaviour!r}, {self.family!r})")

    def __repr__(self):
        return self.code()


def _writer(args):
    """Overwrite every array handed to the rule (writing turned back on first)."""
    for a in args:
        arrays = [a] if isinstance(a, np.ndarray) else \
            [v for v in vars(a).values() if isinstance(v, np.ndarray)] \
            if hasattr(a, "__dict__") else []
        for arr in arrays:
            try:
                arr.flags.writeable = True
            except ValueError:  # a view of a read-only base: leave it
                continue
            if arr.dtype.kind in "fb" and arr.size:
                arr.flat[0] = arr.dtype.type(7)


def _sleeping_payments(market, A, D):
    """nested_clear's inner payment rule: sleeps past the limit."""
    time.sleep(20 * LIMIT)
    return np.zeros(market.m)


def _sleeping_prices(market, D):
    """nested_clear's inner price rule: sleeps past the limit."""
    time.sleep(20 * LIMIT)
    return np.ones((market.m, market.m))


def _quick_payments(market, A, D):
    """nested_late's inner payment rule."""
    return np.zeros(market.m)


def _quick_prices(market, D):
    """nested_late's inner price rule."""
    return np.ones((market.m, market.m))


def _busy_then_clear(mk, slot: str) -> None:
    """nested_late's own steps: :data:`BUSY` s asleep, then a clearing with a quick rule
    of its own in the slot :func:`_inner_slot`."""
    time.sleep(BUSY)  # a ring in it runs the handler between sleeps (PEP 475)
    inner = {"payments": _quick_payments} if _inner_slot(slot) == "payments" else \
        {"prices": _quick_prices}
    ipfl.clear(mk, np.zeros((mk.m, mk.m)), **inner)


def _inner_slot(slot: str) -> str:
    """The slot of nested_clear's and nested_late's inner rule."""
    return "payments" if slot != "payments" else "prices"


def _rule(behaviour: str, honest: np.ndarray, slot: str):
    """The rule of your own of ``behaviour`` (a callable or a name), ``honest`` its answer."""
    names = {"not_a_rule": "os:getcwd", "not_importable": "fedmarket_no_such_module.rules:rule",
             "from_data": "proofs.rule_properties:contained_violation",
             "trusted_from_data": FROM_DATA_RULE, "malformed_name": "os:",
             "not_callable": "math:pi",
             **{b: f"{module}:rule" for b, (module, _) in RAISING_MODULES.items()}}
    if behaviour in names:
        return names[behaviour]

    record = behaviour not in _LATE  # (a race with its 1 ms ring, left as it was)
    behaviour = behaviour.removesuffix("_limited")
    behaviour = {"nested": "sleeps", "foreign_timer_rings": "sleeps", "threaded": "honest",
                 "foreign_timer_ignored": "sleeps",
                 "foreign_timer_kept": "honest", "late": "honest",
                 "foreign_timer_late": "honest", "foreign_handler_idle": "sleeps",
                 "foreign_ring_pending": "sleeps"}.get(behaviour, behaviour)

    parent = os.getpid()

    def rule(*args):
        if record and os.getpid() != parent and _CHILD_PID:  # in a child process of its
            with open(_CHILD_PID[-1], "w") as f:  # own: its pid, which the toolkit must
                f.write(f"{os.getpid()} started")  # have reaped after (the word: whole)
        if behaviour == "nested_clear":  # clears under a limit, a sleeping rule inside
            mk = args[0]
            inner = {"payments": _sleeping_payments} if _inner_slot(slot) == "payments" else \
                {"prices": _sleeping_prices}
            ipfl.clear(mk, np.zeros((mk.m, mk.m)), time_limit=LIMIT, **inner)
        if behaviour == "nested_late":  # its own steps past a limit of its own, then a rule
            within(LATE, _busy_then_clear, args[0], slot)
        if behaviour == "writes":
            _writer(args)
        elif behaviour == "raises":
            raise ValueError(RAISED)
        elif behaviour == "exits":
            sys.exit(3)
        elif behaviour == "base_exception":
            raise _Own("its own")
        elif behaviour == "sleeps":
            time.sleep(20 * LIMIT)
        elif behaviour == "starts_program":  # a program of its own, then past the limit
            # kill_with_parent is made in the process that starts the program (the rule's
            # child): the program gets SIGKILL when that process dies
            prog = subprocess.Popen([shutil.which("sleep"), "30"],
                                    preexec_fn=kill_with_parent())
            time.sleep(0.005)
            with open(_PROGRAM_PID[-1], "w") as f:  # its pid; and whether it runs at all
                f.write(f"{prog.pid} {int(prog.poll() is None)}")
            time.sleep(20 * PROGRAM_LIMIT)
        elif behaviour == "ends_process" and os.getpid() != parent:
            os._exit(3)  # under a limit: in a child process of its own (else it answers:
            # not run in a child, it would have ended the checker; a violation)
        out = np.array(honest, dtype=float if behaviour == "nan" else honest.dtype)
        if behaviour == "nan":
            out.flat[1 if out.size > 1 else 0] = np.nan
        elif behaviour == "wrong_shape":
            return out[:-1]
        elif behaviour == "text":
            return np.array([str(x) for x in out.ravel()]).reshape(out.shape)
        elif behaviour == "none":
            return None
        elif behaviour == "out_of_range":
            value = {"rule": 2.0, "prices": -np.inf, "payments": np.inf, "pricing": np.inf}[slot]
            out = out.astype(float)
            out.flat[1 if out.size > 1 else 0] = value
        elif behaviour == "self_purchase":
            out = out.copy()
            out[0, 0] = True
        elif behaviour == "zero_one":
            return out.astype(float)
        elif behaviour == "sells_pure_buyer":
            pure = np.flatnonzero(np.isinf(np.asarray(args[0].c)))
            out = out.copy()
            out[(pure[0] + 1) % out.shape[0], pure[0]] = True
        return out

    rule.__name__ = f"{behaviour}_{slot}"
    return rule


# ---------------------------------------------------------------------------------- iPFL


def _honest_answer(case: RuleCase, honest) -> np.ndarray:
    """What the subject's own rule gave in the slot of ``case`` (``honest``: its outcome or
    equilibrium)."""
    if case.family == "cpl":
        return np.asarray(honest.prices)
    return np.asarray({"rule": lambda: honest.adjacency,
                       "prices": lambda: np.array(honest.prices),
                       "payments": lambda: (honest.remittances
                                            if honest.remittances is not None
                                            else honest.payments)}[case.slot]())


def _ipfl_run(subject, case: RuleCase, honest_outcome):
    """``ipfl.clear`` with the rule of ``case`` in its slot, the subject's rules elsewhere."""
    base = case.base
    slots = {"rule": subject.rule, "payments": subject.money, "prices": subject.prices}
    slots[case.slot] = _rule(case.behaviour, _honest_answer(case, honest_outcome), case.slot)
    return ipfl.clear(base.market, base.D, slots["rule"], payments=slots["payments"],
                      prices=slots["prices"], thresholds=base.thresholds,
                      allow_asymmetric_distances=True, time_limit=_limit(case))


def _same_outcome(a, b) -> bool:
    def close(x, y):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        return x.shape == y.shape and np.allclose(x, y, rtol=1e-12, atol=1e-12, equal_nan=True)

    return bool(np.array_equal(a.adjacency, b.adjacency) and close(a.payments, b.payments)
                and close(a.utilities, b.utilities) and close(a.welfare, b.welfare))


def _ipfl_fields(case):
    mk = case.base.market
    return [np.array(x, copy=True) for x in (mk.N, mk.c, mk.K, mk.true_N, mk.true_c,
                                              mk.true_K, case.base.D)]


# ----------------------------------------------------------------------------------- CPL


def _cpl_run(subject, case: RuleCase, honest_eq):
    rule = _rule(case.behaviour, _honest_answer(case, honest_eq), case.slot)
    return cpl.apply_pricing(case.base.game, rule,
                             time_limit=_limit(case))


def _cpl_same(subject, case, honest_eq, got) -> bool:
    P = np.array(honest_eq.prices)

    def constant(games):
        return np.broadcast_to(P, (games.size, P.size))

    constant.over_arrays = True
    bulk, over = cpl.apply_pricing_batch(cpl.GameBatch.from_games([case.base.game]), constant)
    return bool(np.array_equal(got.prices, bulk.prices[0]) and np.array_equal(got.q, bulk.q[0])
                and got.spent == float(bulk.spent[0])
                and (got.status == "over-budget") == bool(over[0]))


def _cpl_fields(case):
    g = case.base.game
    return [np.array(x, copy=True) for x in (g.a, g.G, g.c, g.v, g.q_max)]


# ---------------------------------------------------------------------------- the check


def _in_thread(call):
    """``call()`` run in another thread: (its result, None) or (None, what it raised)."""
    out: list = [None, None]

    def target():
        try:
            out[0] = call()
        except BaseException as exc:  # handed back to the caller's thread
            out[1] = exc

    worker = threading.Thread(target=target, name="fedmarket-rule-call")
    worker.start()
    worker.join()
    if out[1] is not None:
        raise out[1]
    return out[0]


def _under_foreign_timer(seconds: float, call, seen: dict, ignored: bool = False,
                         pending: bool = False):
    """``call()`` with a SIGALRM timer of someone else's set ``seconds`` before it (0: its
    handler set, no timer) (a Python handler that counts its calls; ``ignored``: SIG_IGN;
    ``pending``: a SIGALRM of its raised and held back as the call starts, as a ring that
    comes in that moment is). Records in ``seen``: how often the handler ran, whether it is
    the SIGALRM handler again after the call, and the timer's time left then. The handler,
    timer and signal mask in force before are restored whatever happens."""
    seen["rung"] = 0

    def counting(signum, frame):
        seen["rung"] += 1

    handler = signal.SIG_IGN if ignored else counting
    old = signal.signal(signal.SIGALRM, handler)
    t0 = time.monotonic()
    old_left, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}) if pending else None
    try:
        if pending:
            signal.raise_signal(signal.SIGALRM)  # held back: the call's limit lets it in
        return call()
    finally:
        # read and stopped at once: no ring between the look and the stop
        seen["left"] = signal.setitimer(signal.ITIMER_REAL, 0)[0]
        if mask is not None:  # a ring still held back reaches the handler now
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        seen["restored"] = signal.getsignal(signal.SIGALRM) is handler
        deadline = time.monotonic() + IN_FLIGHT
        while (not ignored and (seconds or pending) and seen["restored"] and not seen["rung"]
               and not seen["left"] and time.monotonic() < deadline):  # a ring that came
            time.sleep(1e-3)  # just before (taken by another thread: its handler runs in
            # this one soon) counts
        signal.signal(signal.SIGALRM, old)
        if old_left:
            signal.setitimer(signal.ITIMER_REAL,
                             max(old_left - (time.monotonic() - t0), 1e-3), old_interval)


def _program_gone(case, path) -> bool | None:
    """The program a stopped rule started is gone within 2 s (killed with the rule's
    process group); None when nothing was written: the rule was stopped before it had
    started one, so this draw could not tell a toolkit that leaves programs running from
    one that does not (not checked)."""
    if case.behaviour != "starts_program":
        return True
    text = open(path).read().split()
    if not text:
        return None
    pid, running = int(text[0]), text[1:] == ["1"]
    if not running:  # it ended at once: nothing was left to contain (a check that saw
        return False  # nothing would pass on any toolkit)
    deadline = time.monotonic() + 2.0
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # the checker leaves nothing behind either way
            return False
        time.sleep(0.01)
    return True


def _child_reaped(path) -> bool:
    """The child process a rule ran in (its pid in ``path``; none written: it ran in this
    process, or was not started) is reaped once the call is over: no zombie of it, nothing
    running. What is left is killed and reaped here."""
    text = open(path).read().split()
    if text[1:] != ["started"]:  # none, or cut short as the toolkit killed the child
        return True
    pid = int(text[0])
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # reaped by the toolkit (or not this process's child)
        return True
    if got == 0:  # still running
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return False


def _described(case, exc) -> bool:
    """The ``raises`` rule's long error is shown on one line, cut to :data:`DESCRIBED`
    characters ending in "...", its start kept."""
    if case.behaviour.removesuffix("_limited") != "raises":
        return True
    text = str(exc)
    start = text.find("ValueError: " + RAISED[:20])
    return start >= 0 and len(text) - start == DESCRIBED and text.endswith("...")


def _foreign_ok(case, seen: dict) -> bool:
    """The foreign timer's handler is back after the call; the short one rang once, the
    long one did not ring and still runs."""
    if case.behaviour not in FOREIGN:
        return True
    if not seen.get("restored"):
        return False
    if case.behaviour == "foreign_timer_ignored":  # ignored: nothing to count
        return True
    if case.behaviour == "foreign_timer_rings":  # rung once, or (a limit rang at the same
        # moment first) put back to ring after the call: once either way, never lost
        return seen["rung"] + (seen["left"] > 0) == 1
    if case.behaviour == "foreign_handler_idle":  # no timer: never called
        return seen["rung"] == 0 and not seen["left"]
    if case.behaviour == "foreign_ring_pending":  # its one ring: called once, no timer after
        return seen["rung"] == 1 and not seen["left"]
    return seen["rung"] == 0 and 0 < seen["left"] <= FOREIGN[case.behaviour]


def _names_listed(case) -> bool:
    """:func:`mechanisms.lookup.untrusted` agrees with what the guard does: the name read
    from data is listed when nothing trusts it, not when a spec naming it does."""
    if case.behaviour == "from_data":
        name = _rule("from_data", np.zeros(1), case.slot)
        return untrusted(["local", f"local+{name}", name], _neighbours(case)) == [name]
    if case.behaviour == "trusted_from_data":
        return untrusted([f"local+{FROM_DATA_RULE}"], _trusted()) == []
    return True


def _neighbours(case) -> tuple:
    """:data:`NEIGHBOURS` on the draws of an odd number of clients, else nothing."""
    base = case.base
    size = base.market.m if hasattr(base, "market") else base.game.n
    return NEIGHBOURS if size % 2 else ()


def _trusted() -> list[str]:
    """What a spec of your own naming the rule trusts (a sweep spec's rules: names, parts
    joined by "+", callables)."""
    return named_modules(["local", f"local+{FROM_DATA_RULE}+cost-plus", answer_from_data])


def _expected(case) -> str:
    """What the call must end in: "same" (the subject's own outcome), "timed out", either
    ("same or timed out"), "failed" (a RuleFailed), "refused" (an error before any call),
    "time_limit" (the limit refused), "passed" (the module's KeyboardInterrupt let
    through)."""
    if case.behaviour == "threaded_limited":
        return "time_limit"
    b = case.behaviour.removesuffix("_limited")
    if b in _SAME:
        return "same"
    if b in ("sleeps", "nested", "foreign_timer_rings", "foreign_timer_ignored",
             "starts_program", "nested_clear", "nested_late", "foreign_handler_idle",
             "foreign_ring_pending"):
        return "timed out"
    if b in _LATE:
        return "same or timed out"
    if b in _REFUSED or b == "from_data":
        return "refused"
    if b == "import_interrupted":
        return "passed"
    return "failed"


def _skip(case) -> bool:
    """Not checked: a behaviour that needs a limit (or SIGALRM) where none can stop a rule;
    a selection behaviour in another slot (finalizer: any slot but the family's first); a
    pure buyer's seller with no pure buyer; an iPFL clearing nested in a CPL pricing rule."""
    needs = case.behaviour.endswith("_limited") and case.behaviour != "threaded_limited"
    if (needs or case.behaviour in _NEEDS_SIGNALS) and not can_interrupt():
        return True
    if case.behaviour in ("nested_clear", "nested_late") and case.family != "ipfl":
        return True
    if case.behaviour in _SELECTION_ONLY and case.slot != "rule":
        return True
    if case.behaviour == "finalizer" and case.slot not in ("rule", "pricing"):
        return True  # no rule is called: one slot a family
    if case.behaviour == "starts_program" and shutil.which("sleep") is None:
        return True
    if case.behaviour == "foreign_ring_pending" and not hasattr(signal, "pthread_sigmask"):
        return True
    return case.behaviour == "sells_pure_buyer" and not np.isinf(case.base.market.c).any()


class _SlowGarbage:
    """A reference cycle whose finalizer takes :data:`FINALIZER` s: it records its start
    and its end (in ``seen``): garbage of someone else's code, for the collector."""

    def __init__(self, seen: list):
        self.me, self.seen = self, seen

    def __del__(self):
        self.seen.append("started")
        time.sleep(FINALIZER)
        self.seen.append("ended")


FINALIZER_LIMIT = 0.01  # s: the finalizer behaviour's limit (it passes in the finalizer)
FINALIZER = 3 * FINALIZER_LIMIT  # s: the finalizer's length


def _finalizer_violation() -> float | None:
    """``finalizer``: under a limit that stops whatever runs (``Limit(FINALIZER_LIMIT,
    anywhere=True)``, a sweep cell's), the collector finalizes garbage whose finalizer
    outlasts the limit: the finalizer runs to its end (nothing "Exception ignored") and the
    stop (TimeUp of that limit) comes after it, in the code that runs next. None (not
    checked) where the limit stopped the check before the finalizer started (a loaded
    host)."""
    seen: list = []
    ignored: list = []
    hook = sys.unraisablehook
    sys.unraisablehook = ignored.append
    limit = Limit(FINALIZER_LIMIT, anywhere=True)
    stopped = False
    try:
        with limit:
            _SlowGarbage(seen)
            gc.collect(0)  # a young cycle: the youngest generation's collection finds it
            time.sleep(100 * FINALIZER_LIMIT)  # stopped here, after the finalizer
    except TimeUp as exc:
        if exc.limit is not limit:
            raise
        stopped = True
    finally:
        sys.unraisablehook = hook
    if not seen:
        return None  # stopped before the collection: nothing to tell
    return 0.0 if stopped and seen == ["started", "ended"] and not ignored else 1.0


def contained_violation(subject, case: RuleCase):
    """0 when the rule of ``case`` was contained as the module doc states, else 1; None
    (not checked) for a behaviour that needs a limit where no limit can stop a rule, or a
    slot the behaviour has no meaning in."""
    if _skip(case):
        return None
    if case.behaviour == "finalizer":
        return _finalizer_violation()
    ipfl_family = case.family == "ipfl"
    try:  # the subject's own answer (the honest rule's output)
        honest = subject.settle(case.base.market, case.base.D, thresholds=case.base.thresholds) \
            if ipfl_family else subject.solve(case.base.game)
    except SubjectError as exc:
        if isinstance(exc.original, FedmarketError):
            return None  # refused as the subject's own input: no rule to contain
        raise
    before = _ipfl_fields(case) if ipfl_family else _cpl_fields(case)
    run = _ipfl_run if ipfl_family else _cpl_run
    b = case.behaviour

    def call():
        if b == "foreign_timer_late":  # first a rule limit passing where no rule runs (the
            with Limit(LATE):  # toolkit's own steps, here a sleep): it stops nothing
                time.sleep(20e-3)
        if b == "nested_limited":  # an outer limit of LIMIT s around the call's own
            return within(LIMIT, run, subject, case, honest)
        if b.startswith("threaded"):
            return _in_thread(lambda: run(subject, case, honest))
        if b == "from_data":
            with names_from_data("a results store", _neighbours(case)):
                return run(subject, case, honest)
        if b == "trusted_from_data":
            with names_from_data("a results store", _trusted()):
                _FROM_DATA_ANSWER.append(_honest_answer(case, honest))
                try:
                    return run(subject, case, honest)
                finally:
                    _FROM_DATA_ANSWER.pop()
        if b in RAISING_MODULES:
            return _with_modules(lambda: run(subject, case, honest))
        return run(subject, case, honest)

    got = exc = None
    seen: dict = {}
    with tempfile.NamedTemporaryFile("r", prefix="fedmarket-pid-") as pid_file, \
            tempfile.NamedTemporaryFile("r", prefix="fedmarket-child-") as child_file:
        _PROGRAM_PID.append(pid_file.name)
        _CHILD_PID.append(child_file.name)
        try:
            got = _under_foreign_timer(FOREIGN[b], call, seen, b == "foreign_timer_ignored",
                                       b == "foreign_ring_pending") \
            if b in FOREIGN else call()
        except BaseException as e:  # escaped containment: a violation (Ctrl-C, a limit: pass)
            if must_pass(e):
                raise
            exc = e
        finally:
            _PROGRAM_PID.pop()
            _CHILD_PID.pop()
        gone = _program_gone(case, pid_file.name)
        reaped = _child_reaped(child_file.name)
    if gone is None:
        return None  # stopped before its program started: nothing was contained or not
    if not gone or not reaped:
        return 1.0
    after = _ipfl_fields(case) if ipfl_family else _cpl_fields(case)
    unchanged = all(np.array_equal(x, y, equal_nan=True) for x, y in zip(before, after,
                                                                          strict=True))
    if not unchanged or not _foreign_ok(case, seen) or not _names_listed(case):
        return 1.0
    if exc is not None and not isinstance(exc, FedmarketError):
        return 1.0  # anything but the toolkit's own typed error escaped
    want = _expected(case)
    if want == "passed":
        return 0.0 if exc is None and got is _PASSED else 1.0
    if want == "same or timed out":  # a race the rule may win (it answers within 1 ms)
        want = "same" if exc is None else "timed out"
    if want == "same":
        if exc is not None:
            return 1.0
        same = _same_outcome(got, honest) if ipfl_family else _cpl_same(subject, case, honest,
                                                                         got)
        return 0.0 if same else 1.0
    # the rule running when the limit passed (nested_clear's inner rule) or started after
    # (nested_late's), not the slot's rule around it
    field = "time_limit" if want == "time_limit" else _inner_slot(case.slot) \
        if b in ("nested_clear", "nested_late") else case.slot
    if exc is None or exc.field != field or "\n" in str(exc):
        return 1.0
    if want == "timed out":
        return 0.0 if isinstance(exc, RuleTimedOut) else 1.0
    if b == "from_data" and not isinstance(exc, UntrustedName):
        return 1.0  # refused, but not by the guard (imported: its arity failed instead)
    if want == "refused":  # before any call: not the failure of a call (RuleFailed)
        return 1.0 if isinstance(exc, RuleFailed) else 0.0
    if want == "time_limit":
        return 0.0  # an error naming the limit before any call
    return 0.0 if isinstance(exc, RuleFailed) and not isinstance(exc, RuleTimedOut) \
        and _described(case, exc) else 1.0


# ----------------------------------------------------------------------------- the draws


class RuleSampler(FaultSampler):
    """``inner``'s draws with one more uniform per instance: the slot and the behaviour."""

    def __init__(self, inner: Sampler, family: str):
        super().__init__(inner, family)

    def cells(self) -> int:
        return len(SLOTS[self.family]) * len(BEHAVIOURS)

    def cases(self, d: Draws) -> list[RuleCase]:
        inner = Draws(d.client, d.pair, d.glob[:, :-1], d.gain, d.mode)
        slots = SLOTS[self.family]
        k = self.cells()
        pick = np.minimum((d.glob[:, -1] * k).astype(int), k - 1)
        return [RuleCase(base, slots[p // len(BEHAVIOURS)], BEHAVIOURS[p % len(BEHAVIOURS)],
                         self.family)
                for base, p in zip(self.inner.cases(inner), pick, strict=True)]


def _strategy(family, base):
    def instances(max_clients=None):
        return st.builds(lambda b, s, h: RuleCase(b, s, h, family), base(max_clients),
                         st.sampled_from(SLOTS[family]), st.sampled_from(BEHAVIOURS))

    return instances


_STATEMENT = ("a rule of your own in any slot: an honest one (or one writing into the arrays "
              "it is handed) gives the subject's own outcome; one that raises, exits, returns "
              "NaN, the wrong shape, text, None or an out-of-range entry, is not a rule, not "
              "importable or whose module raises on import is a RuleFailed naming the slot "
              "(Ctrl-C during the import passes through); one running past the time limit a "
              "RuleTimedOut; a name read from data is refused; the caller's arrays unchanged")
_DISCRIMINATES = ("every effective example (no discriminating flag: any rule of your own "
                  "could escape, change the caller's arrays or the outcome)")


def _prop(key, name, family, base_sampler, base_cases, lo, reference):
    instances = _strategy(family, base_cases)
    instances.clients = (lo, 12)
    return Property(
        key, name, _STATEMENT, reference,
        f"a drawn instance; a slot ({', '.join(SLOTS[family])}) and one of "
        f"{len(BEHAVIOURS)} behaviours", family, instances, contained_violation,
        sample=lambda: RuleSampler(base_sampler(), family), clients=(lo, 12),
        discriminates=_DISCRIMINATES, note="proofs.rule_properties lists the behaviours",
        # a row of 3,000 draws sleeps 28-30 s in the rules stopped at their limits (LIMIT,
        # PROGRAM_LIMIT) and computes 10.5-14.6 CPU s (the standard run's 11 rows, measured
        # behaviour by behaviour): about 40 s wall on an idle core, most of it asleep
        waits=True)


RULE_PROPERTIES = {p.key: p for p in [
    _prop("contains_rules", "Contains rules of your own", "ipfl", ipfl_base_sampler, ipfl_cases, 2,
          "ipfl.clear: rules of your own (mechanisms.contain)"),
    _prop("cpl_contains_rules", "Contains rules of your own (CPL)", "cpl", cpl_base_sampler,
          cpl_cases, 1, "cpl.apply_pricing: rules of your own (mechanisms.contain)"),
]}
