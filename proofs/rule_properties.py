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
  :class:`~mechanisms.errors.RuleFailed` naming the slot on one line; ``not_a_rule``
  (``"os:getcwd"``), ``not_importable``: refused before any call, an error naming the slot;
* ``sleeps`` (past the call's time limit of :data:`LIMIT` s): a
  :class:`~mechanisms.errors.RuleTimedOut` naming the slot (only where a limit can stop a
  rule: :func:`mechanisms.contain.can_interrupt`; elsewhere the instance is not checked);
* ``from_data`` (a ``"module:function"`` named inside :func:`mechanisms.lookup.
  names_from_data`, its module not trusted): refused with an error naming the slot before
  anything is imported.

In every case the caller's arrays (the market's or game's fields, D) are unchanged. A
violation is 1 (0: contained as stated). Every instance discriminates.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from mechanisms import cpl, ipfl
from mechanisms.contain import can_interrupt, must_pass
from mechanisms.errors import FedmarketError, RuleFailed, RuleTimedOut
from mechanisms.lookup import names_from_data

from .batch import Draws, Sampler
from .core import Property, SubjectError
from .input_properties import (
    FaultSampler,
    cpl_base_sampler,
    cpl_cases,
    ipfl_base_sampler,
    ipfl_cases,
)

__all__ = ["BEHAVIOURS", "LIMIT", "RULE_PROPERTIES", "RuleCase", "contained_violation"]

LIMIT = 0.05  # s: the time limit of a call with a sleeping rule (which sleeps 20 x as long)
GENEROUS = 60.0  # s: the limit of the "_limited" behaviours' calls (in force, never reached:
# the limit counts from the call's start, so 0.05 s could pass in the toolkit's own steps on
# a loaded machine and stop an honest rule before it started)


def _limit(case) -> float | None:
    """The call's time limit: under one, a rule runs in a child process of its own
    (:func:`mechanisms.contain.call_rule`); without, in this process on handed copies."""
    if not can_interrupt():
        return None
    if case.behaviour == "sleeps":
        return LIMIT
    return GENEROUS if case.behaviour.endswith("_limited") else None


SLOTS = {"ipfl": ("rule", "payments", "prices"), "cpl": ("pricing",)}
BEHAVIOURS = ("honest", "writes", "honest_limited", "writes_limited", "raises", "exits",
              "base_exception", "nan", "wrong_shape", "text", "none", "out_of_range",
              "self_purchase", "not_a_rule", "not_importable", "sleeps", "from_data")


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


def _rule(behaviour: str, honest: np.ndarray, slot: str):
    """The rule of your own of ``behaviour`` (a callable or a name), ``honest`` its answer."""
    if behaviour == "not_a_rule":
        return "os:getcwd"
    if behaviour in ("not_importable", "from_data"):
        return "fedmarket_no_such_module.rules:rule" if behaviour == "not_importable" \
            else "proofs.rule_properties:contained_violation"

    behaviour = behaviour.removesuffix("_limited")

    def rule(*args):
        if behaviour == "writes":
            _writer(args)
        elif behaviour == "raises":
            raise ValueError("a bug of the rule's own")
        elif behaviour == "exits":
            sys.exit(3)
        elif behaviour == "base_exception":
            raise _Own("its own")
        elif behaviour == "sleeps":
            time.sleep(20 * LIMIT)
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
        return out

    rule.__name__ = f"{behaviour}_{slot}"
    return rule


# ---------------------------------------------------------------------------------- iPFL


def _ipfl_run(subject, case: RuleCase, honest_outcome):
    """``ipfl.clear`` with the rule of ``case`` in its slot, the subject's rules elsewhere."""
    base = case.base
    honest = {"rule": honest_outcome.adjacency,
              "prices": np.array(honest_outcome.prices),
              "payments": (honest_outcome.remittances if honest_outcome.remittances is not None
                           else honest_outcome.payments)}[case.slot]
    slots = {"rule": subject.rule, "payments": subject.money, "prices": subject.prices}
    slots[case.slot] = _rule(case.behaviour, np.asarray(honest), case.slot)
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
    rule = _rule(case.behaviour, np.asarray(honest_eq.prices), case.slot)
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


def contained_violation(subject, case: RuleCase):
    """0 when the rule of ``case`` was contained as the module doc states, else 1; None
    (not checked) for a sleeping rule where no limit can stop it, or a slot the behaviour
    has no meaning in."""
    if (case.behaviour == "sleeps" or case.behaviour.endswith("_limited")) \
            and not can_interrupt():
        return None
    if case.behaviour == "self_purchase" and case.slot != "rule":
        return None
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
    got = exc = None
    try:
        if case.behaviour == "from_data":
            with names_from_data("a results store"):
                got = run(subject, case, honest)
        else:
            got = run(subject, case, honest)
    except BaseException as e:  # escaped containment: a violation (Ctrl-C, a limit: pass)
        if must_pass(e):
            raise
        exc = e
    after = _ipfl_fields(case) if ipfl_family else _cpl_fields(case)
    unchanged = all(np.array_equal(x, y, equal_nan=True) for x, y in zip(before, after,
                                                                          strict=True))
    if not unchanged:
        return 1.0
    if exc is not None and not isinstance(exc, FedmarketError):
        return 1.0  # anything but the toolkit's own typed error escaped
    if case.behaviour.removesuffix("_limited") in ("honest", "writes"):
        if exc is not None:
            return 1.0
        same = _same_outcome(got, honest) if ipfl_family else _cpl_same(subject, case, honest,
                                                                         got)
        return 0.0 if same else 1.0
    if exc is None or exc.field != case.slot or "\n" in str(exc):
        return 1.0
    if case.behaviour == "sleeps":
        return 0.0 if isinstance(exc, RuleTimedOut) else 1.0
    if case.behaviour == "from_data":
        return 0.0
    # a name that does not import, or imports a function that cannot take the slot's
    # arguments, is refused before any call (an error naming the slot); the rest RuleFailed
    refused = case.behaviour in ("not_importable", "not_a_rule")
    return 0.0 if isinstance(exc, RuleFailed) or refused else 1.0


# ----------------------------------------------------------------------------- the draws


class RuleSampler(FaultSampler):
    """``inner``'s draws with one more uniform per instance: the slot and the behaviour."""

    def __init__(self, inner: Sampler, family: str):
        super().__init__(inner, family)

    def cases(self, d: Draws) -> list[RuleCase]:
        inner = Draws(d.client, d.pair, d.glob[:, :-1], d.gain, d.mode)
        slots = SLOTS[self.family]
        k = len(slots) * len(BEHAVIOURS)
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
              "NaN, the wrong shape, text, None or an out-of-range entry, is not a rule or not "
              "importable is a RuleFailed naming the slot; one running past the time limit a "
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
        discriminates=_DISCRIMINATES, note="proofs.rule_properties lists the behaviours")


RULE_PROPERTIES = {p.key: p for p in [
    _prop("contains_rules", "Contains rules of your own", "ipfl", ipfl_base_sampler, ipfl_cases, 2,
          "ipfl.clear: rules of your own (mechanisms.contain)"),
    _prop("cpl_contains_rules", "Contains rules of your own (CPL)", "cpl", cpl_base_sampler,
          cpl_cases, 1, "cpl.apply_pricing: rules of your own (mechanisms.contain)"),
]}
