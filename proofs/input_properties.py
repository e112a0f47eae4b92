"""Bad input is refused, naming the field (issue 34, part 2): one property per family,
``refuses_bad_input`` (iPFL), ``cpl_refuses_bad_input`` and ``lia_refuses_bad_input``.

Each instance is a well-formed instance of the family (the checker's own draws) and a fault
drawn from the family's table (:data:`IPFL_FAULTS`, :data:`CPL_FAULTS`, :data:`LIA_FAULTS`),
or none. A fault is one malformed input of a kind the public API validates -- a field of a
Market or a Game that is NaN, inf, negative, text, complex, of the wrong length; distances
of the wrong shape or with a nonzero diagonal; an unknown rule, method, mode or option; an
option of the wrong type; a budget below what q = q_min spends -- made from the instance and
given to the subject's own entry point (``settle`` / ``solve`` / ``scores``, ``sets``,
``cluster``) where the subject takes it, else to the public function of ``mechanisms`` that
validates it (a Market, a Game, ``ipfl.clear`` with the subject's rules, the distances, the
posted prices, the aggregation). The property:

* a fault must raise a :class:`mechanisms.errors.FedmarketError` (a ``ValueError`` for bad
  input) whose ``field`` is the fault's field and whose text is one line, and which says
  what the fault's ``says`` requires where it has one (the offending game of a batch, the
  first point where a gain's slope rises, the size of the memory guard);
* a fault given several ways (:func:`each`: an unknown name sorting before every choice and
  one sorting after, a length one short and one long) must be refused every way, naming
  the same field (a check comparing with ``<`` or ``>`` where it means ``!=`` lets one
  side through);
* the subject's entry point must answer the well-formed instance, checked on every
  instance before its fault (a fedmarket error there refuses good input: a violation);
  an iPFL instance drawn without a fault is also answered with its distances scaled until
  their sum overflows float64 (every entry finite: well-formed; :data:`EDGE_ANSWER`), and
  every family's validators take their bounds from inside (a cost-plus markup of 0, lam 0,
  the greedy's top of 1; R = 1, q_min = q_max = 1; rtol = atol = 0, one client, one
  validation sample per client, a row of one value, the index of one item and of none);
* every rule of validation is crossed from both sides and beyond it, on one instance and on
  a batch (leading dimensions) where the function takes batches; a refusal of a shape names
  the shape got (and the one expected where one is determined), of an index out of range the
  valid range, of a non-finite entry its index and value (``says``).

Anything else raised (a TypeError, an IndexError, a NaN let through) is a violation of size
1. Every instance discriminates: any fault could pass unrefused, any well-formed instance be
refused. The fault index is drawn as one more uniform of the draw (the batch engine) or an
integer (Hypothesis); no fault with probability about ATOM + 1 / (faults + 1).
"""

from __future__ import annotations

import functools
import math
import re
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from mechanisms import cpl, ipfl, lia
from mechanisms.cpl.equilibrium import CVXPY_MAX_N
from mechanisms.distances import distance_gradients, pairwise_distances, prox_centres
from mechanisms.errors import (
    FedmarketError,
    MarketInputError,
    as_choice,
    as_int,
    as_real,
    as_seed,
    check_size,
)
from mechanisms.files import read_arrays, replace_atomically
from mechanisms.lookup import untrusted
from mechanisms.roles import attack, draw_types, inclusive_roles, market_roles

from .batch import Draws, IpflSampler, IpflSpec, Sampler
from .core import Property, SubjectError
from .names import fresh
from .strategies import MAX_CLIENTS, CplCase, cpl_games, ipfl_instances

__all__ = [
    "CPL_FAULTS",
    "INPUT_PROPERTIES",
    "IPFL_FAULTS",
    "LIA_FAULTS",
    "Fault",
    "FaultCase",
    "FaultSampler",
    "cpl_base_sampler",
    "cpl_cases",
    "each",
    "ipfl_base_sampler",
    "ipfl_cases",
    "lia_base_sampler",
    "lia_cases",
    "refusal",
]

NAN, INF = math.nan, math.inf
# the memory guard mechanisms.errors documents (8 GiB), written here, not imported: a guard
# changed in the code is a fault the refusals (and the bound accepted from inside) show
MEMORY_GUARD = 8 * 2**30


@dataclass(frozen=True)
class Fault:
    """One malformed input: ``call(subject, case)`` gives it to the public API; it must be
    refused with an error naming ``field``, whose message ``says(case, message)`` accepts
    where ``says`` is given (what the message claims beyond the field, computed from the
    case, not from the code that refuses)."""

    field: str
    what: str
    call: Any
    says: Any = None


@dataclass(frozen=True, eq=False)
class FaultCase:
    """A well-formed instance ``base`` and the fault given with it (an index into the
    family's table, 1-based; 0: none)."""

    base: Any
    fault: int
    family: str

    def describe(self) -> str:
        if self.fault == 0:
            return "no fault"
        f = FAULTS[self.family][self.fault - 1]
        return f"{f.field}: {f.what}"

    def code(self) -> str:
        base = self.base.code()
        imp = f"from {type(self.base).__module__} import {type(self.base).__name__}\n"
        return (imp + base + f"\ncase = FaultCase(case, {self.fault}, {self.family!r})"
                f"  # {self.describe()}")

    def __repr__(self):
        return self.code()


UNKNOWN_NAMES = ("Aunknown", "zzunknown")
"""Two names no choice of the toolkit has: one sorting before every choice (an upper-case
letter sorts before the lower-case names), one after."""


def each(values, call):
    """A fault made ``call(subject, case, value)`` for each of ``values(case)``: refused every
    way, naming one field (a way that passes makes the fault pass: a violation; the first
    error naming another field than the first way's is the one reported)."""

    def fault(subject, case):
        errors = []
        for value in values(case):
            try:
                call(subject, case, value)
            except FedmarketError as exc:
                errors.append(exc)
            else:
                return None  # this way passed unrefused
        raise next((e for e in errors if e.field != errors[0].field), errors[0])

    return fault


def _names(case):
    return UNKNOWN_NAMES


def _lengths(n):
    """One more and one fewer than ``n`` entries."""
    return n + 1, n - 1


def _named_rise(message: str):
    """(slope below, x, slope above) that a concavity refusal of Gain.check names ("its slope
    rises from A below x = X to B above it"), else None."""
    got = re.search(r"rises from ([-+0-9.einf]+) below x = ([-+0-9.einf]+) to "
                    r"([-+0-9.einf]+) above", message)
    return tuple(map(float, got.groups())) if got else None


def _rise_named_right(case, message: str) -> bool:
    """A concavity refusal of :func:`_convex` (g = (1 + K)(x/N)^2) names the first point
    where the slope rises (below the largest N) and its two slopes around it truly: for some
    buyer the slope below x <= g'(x) = 2 (1 + K) x / N^2 <= the slope above (a convex gain's
    secants straddle its derivative), to the message's 6 digits."""
    named = _named_rise(message)
    if named is None:
        return False
    below, x, above = named
    mk = case.market
    slope = 2.0 * (1.0 + mk.K) * x / mk.N**2
    ok = (below * (1 - 1e-5) <= slope) & (slope <= above * (1 + 1e-5))
    return bool(above > below and x <= float(np.max(mk.N)) and ok.any())


def _kink_named(case, message: str) -> bool:
    """A concavity refusal of :func:`_convex_far_out` names its kink, x = 2^20 N for some
    buyer (to the message's 6 digits): the first point where the slope rises; and the
    slope it names above the kink is higher than the one below."""
    named = _named_rise(message)
    if named is None:
        return False
    below, x, above = named
    return bool(above > below and (np.abs(x / (2.0**20 * case.market.N) - 1.0) < 1e-5).any())


def _put(a, value, k=0):
    """A copy of ``a`` (float) with entry ``k`` set to ``value``."""
    out = np.array(a, dtype=float)
    out.flat[k] = value
    return out


def _negative_pair(case):
    """The case's D made symmetric, with d_01 = d_10 = -0.5 (only the sign is wrong)."""
    D = np.asarray(case.D, dtype=float)
    return _put(_put((D + D.T) / 2.0, -0.5, 1), -0.5, case.market.m)


def _text(a):
    return np.array([str(x) for x in np.ravel(a)]).reshape(np.shape(a))


# ---------------------------------------------------------------------------------- iPFL


def _market(case, **changes):
    mk = case.market
    fields = {"N": mk.N, "c": mk.c, "K": mk.K, "lam": mk.lam, "gain": mk.gain, **changes}
    return ipfl.Market(**fields)


def _clear(subject, case, market=None, D=None, **options):
    """``ipfl.clear`` with the subject's rules (the options ``settle`` does not take)."""
    options.setdefault("allow_asymmetric_distances", True)  # the draws' D may be asymmetric
    # every argument by keyword, as the documented signature allows (market, D, rule are
    # positional-or-keyword; the rest keyword-only)
    return ipfl.clear(market=case.market if market is None else market,
                      D=case.D if D is None else D, rule=subject.rule, payments=subject.money,
                      prices=subject.prices, thresholds=case.thresholds, **options)


def _settle(subject, case, D=None, **kw):
    return subject.settle(case.market, case.D if D is None else D,
                          thresholds=kw.pop("thresholds", case.thresholds), **kw)


def _smaller(case):
    mk = case.market
    return ipfl.Market(N=mk.N[:1], c=mk.c[:1], K=mk.K[:1], lam=mk.lam, gain=mk.gain)


def _decreasing(x, K, N):
    return -(1.0 + np.asarray(K)) * np.asarray(x) / np.asarray(N)  # whatever K is


def _nan_gain(x, K, N):
    return np.where(np.asarray(x) > 0, np.nan, 0.0) * np.asarray(K)


def _asymmetric(D):
    """``D`` with d_01 one more than d_10: asymmetric far beyond rounding."""
    out = np.array(D, dtype=float)
    out[0, 1] = out[1, 0] + 1.0
    return out


SYMMETRY_ALLOWANCE = 1e-9
"""How far d_ij and d_ji may differ, relative to the matrix's largest |d|, and still pass
the symmetry check (mechanisms.errors.check_symmetric's documented rounding allowance,
written here, not imported)."""


def _off_by_rounding(D, times: float):
    """A D of ``D``'s size, every distance 1e6 (off the diagonal), but d_01 moved ``times``
    the symmetry allowance away from d_10 (0.5: within the allowance, 2: beyond it)."""
    m = np.shape(D)[0]
    out = 1e6 * (1.0 - np.eye(m))
    out[0, 1] = out[1, 0] + times * SYMMETRY_ALLOWANCE * 1e6
    return out


def _names_pair(D, message):
    """A symmetry refusal names D's first pair that differs, (0, 1), and both its values."""
    return f"D[0, 1] = {float(D[0, 1])!r} but D[1, 0] = {float(D[1, 0])!r}" in message


def _mixed(a):
    """``a`` as a list with its first entry replaced by text: numbers mixed with text."""
    out = [float(x) for x in np.ravel(a)]
    out[0] = "x"
    return out


def _fractions_with_true(a):
    """``a`` as exact fractions (numbers numpy keeps as objects) with its first entry True:
    an object array whose float conversion would read True as 1.0, unrefused."""
    out: list = [Fraction(float(x)) for x in np.ravel(a)]
    out[0] = True
    return out


def _arrays(case, **changes):
    """The market as a batch of one built from arrays (``MarketArrays``), with changes."""
    mk = case.market
    fields = {"N": mk.N[None], "c": mk.c[None], "K": mk.K[None], "lam": [mk.lam],
              "gain": mk.gain, **changes}
    return ipfl.MarketArrays(**fields)


def _overflowing_second_market(case):
    """The market and its copy as a batch of two (sqrt gain), the copy's client 0 with N
    1e-3 and K 1e308: the gain overflows at entry (1, 0) only."""
    mk = case.market
    N = np.stack([mk.N, _put(mk.N, 1e-3)])
    K = np.stack([mk.K, _put(mk.K, 1e308)])
    return ipfl.MarketArrays(N=N, c=np.stack([mk.c, mk.c]), K=K, lam=[mk.lam, mk.lam],
                             gain="sqrt")


def _pair_of(case):
    """The market twice, as a batch of two (``MarketArrays.from_markets``)."""
    return ipfl.MarketArrays.from_markets([case.market, case.market])


def _batch_D(case, k=1, value=None, symmetric=True):
    """The market's D for a batch of ``k``, entry (0, 1) (and (1, 0) when ``symmetric``)
    of the first market set to ``value``; the diagonal's first entry for value "diagonal"."""
    D = np.repeat(np.array(case.D, dtype=float)[None], k, axis=0)
    D = 0.5 * (D + np.swapaxes(D, -1, -2))
    if value == "diagonal":
        D[0, 0, 0] = 0.5
    elif value is not None:
        D[0, 0, 1] = value
        if symmetric:
            D[0, 1, 0] = value
    return D


def _symmetric(D):
    D = np.array(D, dtype=float)
    return np.abs(0.5 * (D + D.T))


def _sized(m, N=1e3, K=1e4):
    """A market of ``m`` clients that all sell and buy (c 0.1, lam 0.1, D all 1 off the
    diagonal), for the size guards."""
    mk = ipfl.Market(N=np.broadcast_to(np.asarray(N, dtype=float), (m,)), c=np.full(m, 0.1),
                     K=np.full(m, float(K)), lam=0.1)
    return mk, 1.0 - np.eye(m)


def _dp_too_large(subject, case):
    """The exact rule's dynamic programme on three buyers of about 1e12 coprime data units
    each, every other client a candidate: its table (candidates x total data / gcd, about
    4e12 cells) is far over the memory guard."""
    mk, D = _sized(3, 10.0**12 + np.array([1.0, 3.0, 7.0]), K=1e18)
    return ipfl.clear(mk, D, "exact", exact_method="dp")


def _dp_too_large_later(subject, case):
    """:func:`_dp_too_large` where the one buyer too large is buyer 2 of the second market of
    a batch of two (every other client a pure seller, K = 0): the refusal must name the
    buyer by its index in its market (2), not 0 nor its index in the batch."""
    mk, D = _sized(3, 10.0**12 + np.array([1.0, 3.0, 7.0]), K=1e18)
    sellers = mk.replace(K=np.zeros(3))
    later = mk.replace(K=np.array([0.0, 0.0, 1e18]))
    batch = ipfl.MarketArrays.from_markets([sellers, later])
    return ipfl.clear_batch(batch, np.stack([D, D]), "exact", exact_method="dp")


def _enumeration_too_large(subject, case):
    """The exact rule's enumeration asked for on a market of 28 clients that all trade: each
    buyer has 27 candidates, 2^27 subsets (9 k 2^k bytes, about 30 GiB, by the estimate
    its guard documents), refused before any subset is built."""
    mk, D = _sized(28)
    return ipfl.clear(mk, D, "exact", exact_method="enumeration")


def _read_objects_npz(case):
    """mechanisms.files.read_arrays on an .npz file whose second array holds Python objects
    (a crafted file could run code when unpickled): refused, naming ``arrays``."""
    with tempfile.TemporaryDirectory(prefix="fedmarket-npz-") as folder:
        path = Path(folder) / "market.npz"
        np.savez(path, N=case.market.N, objects=np.array([None, "x"], dtype=object))
        return read_arrays(path, lambda message: MarketInputError("arrays", message))


def _write_fails(case, halfway: bool):
    """mechanisms.files.replace_atomically: a file written whole (the path returned, nothing
    left beside it), then a write that fails (``halfway``: after its temporary file, beside
    the path with the path's suffix, was half written; else before it exists) with an error
    naming ``rows``: raised as it came, the file as it was, nothing left beside it. Answers
    (a violation) where the file or the folder is not so; another error passes as itself."""
    with tempfile.TemporaryDirectory(prefix="fedmarket-write-") as folder:
        path = Path(folder) / f"market{case.market.m}.json"
        old = f"{case.market.N.tolist()}"
        done = replace_atomically(path, lambda tmp: tmp.write_text(old))
        if done != path or path.read_text() != old or [p.name for p in
                                                        Path(folder).iterdir()] != [path.name]:
            return None
        seen = []

        def failing(tmp):
            seen.append(tmp.parent == path.parent and tmp.suffix == path.suffix)
            if halfway:
                tmp.write_text(old[: len(old) // 2])
            raise MarketInputError("rows", "cannot be written (the check's own failing write)")

        try:
            replace_atomically(path, failing)
        except MarketInputError:
            if seen == [True] and path.read_text() == old and [
                    p.name for p in Path(folder).iterdir()] == [path.name]:
                raise
        return None


# The gains of these faults are faults whatever the market's K, also where every K is 0 (a
# gain scaled by K alone is 0 everywhere there: valid; fault 80 and 82 passed then).
def _not_zero_at_0(x, K, N):
    return (1.0 + np.asarray(K)) * (1.0 + np.sqrt(np.asarray(x) / np.asarray(N)))


def _one_number(x, K, N):
    return 1.0


def _convex(x, K, N):
    return (1.0 + np.asarray(K)) * (np.asarray(x) / np.asarray(N)) ** 2


def _barely_convex(x, K, N):
    return (1.0 + np.asarray(K)) * (np.asarray(x) / np.asarray(N)) ** 1.01


def _gently_decreasing(x, K, N):
    """Linear (so concave) and decreasing by at most 3/16 over the whole grid of Gain.check
    (2^-52 x/N): only the increasing test can refuse it, and only one that compares each step
    with the rounding of its own values, not with a fixed amount."""
    return -(2.0**-52) * np.asarray(x) / np.asarray(N) + 0.0 * np.asarray(K)


def _convex_far_out(x, K, N):
    """Linear up to 2^20 N, convex beyond (slopes rising 4x a step of the grid there): only
    a concavity test whose rounding allowance shrinks with the step's width sees it."""
    t = np.asarray(x) / np.asarray(N)
    return (1.0 + np.asarray(K)) * (t + np.maximum(t - 2.0**20, 0.0) ** 2 / 2.0**20)


# Gain.check's documented allowance for neighbouring slopes: a relative tolerance plus the
# rounding of the values (each value may be 2^-40 of itself off)
CHECK_RTOL, CHECK_ROUND = 1e-9, 2.0**-40


def _kinked(share: float, steep: float = 0.0):
    """A gain linear in t = x/N with one convex kink at t = 2 (slope 1 on [1, 2], 1 + delta
    beyond), delta ``share`` times the allowance Gain.check documents at that kink, on its
    grid points t = 1, 2, 4: CHECK_RTOL (1 + delta) + 2 CHECK_ROUND g(2) / 1 (the slope on
    [1, 2]) + 2 CHECK_ROUND g(4) / 2 (the one on [2, 4]). ``steep``: the slope is 1 + steep
    on [0, 1] (concave there; the allowance is relative to the slopes beside the kink, not to
    the steepest), so g(2) = 2 + steep and g(4) = 4 + steep + 2 delta. Just past it (1.002)
    the gain is refused; just within (0.998) it is accepted. Used on markets whose N are
    powers of 4 (:func:`_quartic_N`), where the grid's multiples of N and its absolute
    amounts are the same points (elsewhere the absolute amounts straddle the kink or sit at
    it with other neighbours, and their allowance differs)."""
    r = CHECK_ROUND
    delta = share * (CHECK_RTOL + 8.0 * r + 3.0 * r * steep) / (
        1.0 - share * (CHECK_RTOL + 2.0 * r))

    def gain(x, K, N):
        t = np.asarray(x) / np.asarray(N)
        return (t + steep * np.minimum(t, 1.0) + delta * np.maximum(t - 2.0, 0.0)
                + 0.0 * np.asarray(K))

    gain.__name__ = f"kinked_{share}" + (f"_steep_{steep:g}" if steep else "")
    return gain


def _kinks_past(case):
    """The kink 0.2 % past the allowance, on a gain of one slope before it and on one whose
    slope fell 1000-fold before it."""
    return _kinked(1.002), _kinked(1.002, steep=999.0)


def _passes_nan_on(case):
    """A gain of your own that passes NaN on where its input is NaN is answered there (no
    refusal: only a NaN where every input is a number is the gain's own fault), with NaN in
    x, in K and in N."""
    gain = _market(case, gain=_own_sqrt).gain
    for args in ((np.array([NAN, 1.0]), 1.0, 1.0), (np.ones(2), np.array([NAN, 1.0]), 1.0),
                 (np.ones(2), 1.0, np.array([1.0, NAN]))):
        gain.value(*args)


def _g0_allowance() -> float:
    """The e with e = 1e-9 (e + 16) in float64: the largest |g(0)| Gain.check accepts (1e-9
    of the largest |g| over the buyer's core amounts 0..16 N) for g = e + x/N."""
    e = 1.6e-8
    for _ in range(8):
        e = 1e-9 * (e + 16.0)
    return e


def _off_at_0(x, K, N):
    """Linear (e + x/N), its g(0) = e exactly the allowance Gain.check documents
    (:func:`_g0_allowance`): accepted (the next float up is refused)."""
    return _G0_ALLOWANCE + np.asarray(x) / np.asarray(N) + 0.0 * np.asarray(K)


_G0_ALLOWANCE = _g0_allowance()


def _drops_by_the_rounding(x, K, N):
    """Linear (x/N) up to N, then flat at 1, then from 2^20 N flat at 1 - 2^-39: one step
    down of exactly the rounding Gain.check documents for a step (CHECK_ROUND of each of its
    two values, 2^-40 x 1 + 2^-40 x (1 - 2^-39), compared with the larger twice: 2^-39):
    accepted (a drop one float larger is refused). Only an allowance taken from the step's
    own two values, not from another point of the grid, reads it so."""
    t = np.asarray(x) / np.asarray(N)
    return np.where(t > 2.0**20, 1.0 - 2.0**-39, np.minimum(t, 1.0)) + 0.0 * np.asarray(K)


def _dip(x, K, N):
    """Piecewise linear: slope 1 up to 2^48 N, 1/10 up to 2^49 N, 6/5 beyond: convex at
    2^49 N, inside the span Gain.check covers. With N of the form 2 4^j (:func:`_odd_N`) the
    multiples of N it tries (2^48 N, 2^50 N) straddle the kink and their secants stay
    concave (1, then 0.83); its absolute amounts put 2^49 N on the grid, and only their last
    step (2^49 N to 2^51 N or 2^50 N) sees the slope rise."""
    t = np.asarray(x, dtype=float) / np.asarray(N, dtype=float)
    a, b = 2.0**48, 2.0**49
    g = np.minimum(t, a) + 0.1 * np.clip(t - a, 0.0, b - a) + 1.2 * np.maximum(t - b, 0.0)
    return g + 0.0 * np.asarray(K)


def _odd_N(case):
    """The case's N, each rounded to 2 4^j (an odd power of two)."""
    return 2.0 * 4.0 ** np.round(np.log(case.market.N / 2.0) / np.log(4.0))


def _quartic_N(case):
    """The case's N, each rounded to a power of 4."""
    return 4.0 ** np.round(np.log(case.market.N) / np.log(4.0))


def _eight_columns(x, K, N):
    """Right on the 8-point core of Gain.check, of another shape on its longer grids."""
    return np.asarray(K) * np.sqrt(np.asarray(x)[..., :8] / np.asarray(N))


def _one_more_column(x, K, N):
    """Right on the 8-point core of Gain.check; on its longer grids one column more than x
    (a shape that compares greater than x's)."""
    x = np.asarray(x)
    g = np.asarray(K) * np.sqrt(x / np.asarray(N))
    return g if x.shape[-1] == 8 else np.concatenate([g, g[..., -1:]], axis=-1)


def _wrong_columns(case):
    return _eight_columns, _one_more_column


def _scalar_nan(x, K, N):
    return np.array([np.nan])


def _own_sqrt(x, K, N):
    """A valid gain of your own (K sqrt(x / N)): it passes Gain.check."""
    return np.asarray(K) * np.sqrt(np.asarray(x) / np.asarray(N))


def _not_over_arrays(market, D, thresholds, prices):
    return np.zeros(np.shape(thresholds), bool)


def _bad_aggregations(case):
    """Malformed aggregation matrices W for ``ipfl.baseline_utilities`` of the case's market
    (m clients): (m - 1, m - 1), (m + 1, m + 1), (m,), (1, m, m), NaN at (0, 1), text."""
    m = case.market.m
    nan = np.ones((m, m))
    nan[0, 1] = NAN
    return (np.ones((m - 1, m - 1)), np.ones((m + 1, m + 1)), np.ones(m), np.ones((1, m, m)),
            nan, np.full((m, m), "1"))


def _theta(case):
    return np.array(case.D, dtype=float)  # m parameter vectors, finite


def _wide_theta(case):
    """m models of m + 1 parameters (so that a message naming the number of parameters is
    told from one naming the number of clients)."""
    theta = _theta(case)
    return np.concatenate([theta, theta[:, :1]], axis=1)


IPFL_FAULTS = (
    Fault("N", "an entry NaN", lambda s, c: _market(c, N=_put(c.market.N, NAN)),
          says=lambda c, msg: "entry 0 is nan" in msg),
    Fault("N", "an entry 0", lambda s, c: _market(c, N=_put(c.market.N, 0.0))),
    Fault("N", "an entry inf", lambda s, c: _market(c, N=_put(c.market.N, INF))),
    Fault("N", "text", lambda s, c: _market(c, N=_text(c.market.N)),
          says=lambda c, msg: "got text" in msg),
    Fault("N", "dates (datetime64) and durations (timedelta64)",
          each(lambda c: ("datetime64[D]", "timedelta64[s]"),
               lambda s, c, v: _market(c, N=np.asarray(c.market.N, dtype=np.int64).astype(v))),
          says=lambda c, msg: "got dates or durations" in msg),
    Fault("N", "a 2-D array", lambda s, c: _market(c, N=c.market.N[None, :])),
    Fault("N", "empty", lambda s, c: _market(c, N=[], c=[], K=[])),
    Fault("N", "an entry subnormal (1e-310) with K 1e4: sqrt(K/N) overflows (the refusal "
               "says why: the others' data over its own overflows)",
          lambda s, c: _market(c, N=_put(c.market.N, 1e-310), K=_put(c.market.K, 1e4),
                               gain="sqrt"),
          says=lambda c, message: "over its own" in message),
    Fault("c", "an entry negative", lambda s, c: _market(c, c=_put(c.market.c, -1.0))),
    Fault("c", "one entry more, one fewer",
          each(lambda c: _lengths(c.market.m),
               lambda s, c, n: _market(c, c=np.resize(np.asarray(c.market.c), n)))),
    Fault("c", "complex", lambda s, c: _market(c, c=np.asarray(c.market.c) + 1j)),
    Fault("K", "an entry inf", lambda s, c: _market(c, K=_put(c.market.K, INF))),
    Fault("K", "an entry negative", lambda s, c: _market(c, K=_put(c.market.K, -1.0))),
    Fault("K", "booleans", lambda s, c: _market(c, K=np.asarray(c.market.K) > 0),
          says=lambda c, msg: "got booleans" in msg),
    Fault("K", "objects", lambda s, c: _market(c, K=np.array([None] * c.market.m))),
    Fault("K", "1e308 with N 1e-3: sqrt(K/N) overflows",
          lambda s, c: _market(c, N=_put(c.market.N, 1e-3), K=_put(c.market.K, 1e308),
                               gain="sqrt")),
    Fault("K", "1e308 with N 1e-3 at client 0 of market 1, to MarketArrays of two markets "
               "(the refusal names client 0, not the market's index)",
          lambda s, c: _overflowing_second_market(c),
          says=lambda c, msg: "client 0 (" in msg),
    Fault("lam", "NaN", lambda s, c: _market(c, lam=NAN)),
    Fault("lam", "negative", lambda s, c: _market(c, lam=-0.5)),
    Fault("lam", "text", lambda s, c: _market(c, lam="1")),
    Fault("lam", "True", lambda s, c: _market(c, lam=True)),
    Fault("true_N", "an entry 0", lambda s, c: _market(c, true_N=_put(c.market.N, 0.0))),
    Fault("gain", "an unknown name (before and after every name)",
          each(_names, lambda s, c, v: _market(c, gain=v))),
    Fault("gain", "a number", lambda s, c: _market(c, gain=2.0)),
    Fault("gain", "a decreasing function", lambda s, c: _market(c, gain=_decreasing)),
    Fault("gain", "a function returning NaN", lambda s, c: _market(c, gain=_nan_gain)),
    Fault("alpha", "a power gain of exponent 2, just above 1, 0, -0.5 or NaN (in (0, 1])",
          each(lambda c: (2.0, 1.0 + 2.0**-52, 0.0, -0.5, NAN),
               lambda s, c, a: ipfl.PowerGain(a))),
    Fault("lambda", "not a field of a Market", lambda s, c: c.market.replace(**{"lambda": 1.0})),
    Fault("D", "one row short", lambda s, c: _settle(s, c, D=np.asarray(c.D)[:-1])),
    Fault("D", "an entry NaN", lambda s, c: _settle(s, c, D=_put(c.D, NAN, 1))),
    Fault("D", "an entry inf", lambda s, c: _settle(s, c, D=_put(c.D, INF, 1))),
    Fault("D", "a nonzero diagonal", lambda s, c: _settle(s, c, D=_put(c.D, 0.5, 0))),
    Fault("D", "a nonzero diagonal at (0, 0) and at (m - 1, m - 1) (named by the first)",
          lambda s, c: _settle(s, c, D=_put(_put(c.D, 0.5, 0), 0.25, c.market.m**2 - 1)),
          says=lambda c, msg: "diagonal entry (0, 0) is 0.5" in msg),
    Fault("D", "an entry negative (the last row's first; named by its place and value)",
          lambda s, c: _settle(s, c, D=_put(c.D, -0.5, (c.market.m - 1) * c.market.m)),
          says=lambda c, msg: f"entry ({c.market.m - 1}, 0) is -0.5" in msg),
    Fault("D", "a negative pair (d_01 = d_10 = -0.5), to Market.check_distances and "
               "MarketArrays.check_distances called with their defaults",
          each(lambda c: ("market", "arrays"), lambda s, c, how: (
              c.market.check_distances(_negative_pair(c)) if how == "market"
              else ipfl.MarketArrays.of(c.market).check_distances(_negative_pair(c)[None])))),
    Fault("D", "asymmetric at (0, 1) alone, to Market.check_distances and "
               "MarketArrays.check_distances called with their defaults (refused as "
               "asymmetric, not for a sign)",
          each(lambda c: ("market", "arrays"), lambda s, c, how: (
              c.market.check_distances(_asymmetric(_symmetric(c.D))) if how == "market"
              else ipfl.MarketArrays.of(c.market).check_distances(
                  _asymmetric(_symmetric(c.D))[None]))),
          says=lambda c, msg: "is not symmetric" in msg),
    Fault("D", "text", lambda s, c: _settle(s, c, D=_text(c.D))),
    Fault("N", "text of a batch of 64 markets, to MarketArrays (a value too long to show "
               "whole: the message cuts it)",
          lambda s, c: _arrays(c, N=_text(np.repeat(c.market.N[None], 64, axis=0)))),
    Fault("D", "asymmetric by twice the rounding the symmetry check allows (relative to "
               "the largest |d|, every d 1e6), to Market.check_distances",
          lambda s, c: c.market.check_distances(_off_by_rounding(c.D, 2.0)),
          says=lambda c, msg: "is not symmetric" in msg),
    Fault("D", "asymmetric, not allowed on purpose",
          lambda s, c: _clear(s, c, D=_asymmetric(c.D), allow_asymmetric_distances=False)),
    Fault("D", "asymmetric at (0, 1) alone, not allowed on purpose (named by the pair and "
               "its values)",
          lambda s, c: _clear(s, c, D=_asymmetric(_symmetric(c.D)),
                              allow_asymmetric_distances=False),
          says=lambda c, msg: _names_pair(_asymmetric(_symmetric(c.D)), msg)),
    Fault("D", "asymmetric to clear_batch, not allowed on purpose",
          lambda s, c: ipfl.clear_batch(ipfl.MarketArrays.of(c.market),
                                        _asymmetric(c.D)[None])),
    Fault("allow_asymmetric_distances", "the text 'yes'",
          lambda s, c: _clear(s, c, allow_asymmetric_distances="yes")),
    Fault("thresholds", "an unknown mode (before and after every mode)",
          each(_names, lambda s, c, v: _settle(s, c, thresholds=v))),
    Fault("allow_negative_distances", "the text 'no'",
          lambda s, c: _settle(s, c, allow_negative="no")),
    Fault("market", "a dict, not a Market",
          lambda s, c: _clear(s, c, market={"N": c.market.N})),
    Fault("exact_method", "an unknown method (before and after every method)",
          each(_names, lambda s, c, v: _clear(s, c, exact_method=v))),
    Fault("exact_method", "'dp' on fractional data amounts",
          lambda s, c: ipfl.clear(_market(c, N=np.asarray(c.market.N) + 0.5), c.D, "exact",
                                  exact_method="dp", allow_negative_distances=True,
                                  allow_asymmetric_distances=True)),
    Fault("exact_node_limit", "0", lambda s, c: _clear(s, c, exact_node_limit=0)),
    Fault("exact_time_limit", "negative", lambda s, c: _clear(s, c, exact_time_limit=-1.0)),
    Fault("progress", "not a function", lambda s, c: _clear(s, c, progress=5)),
    Fault("time_limit", "negative", lambda s, c: _clear(s, c, time_limit=-1.0)),
    Fault("rule", "an unknown rule (before and after every rule)",
          each(_names, lambda s, c, v: ipfl.clear(c.market, c.D, v))),
    Fault("payments", "an unknown rule (before and after every rule)",
          each(_names, lambda s, c, v: ipfl.clear(c.market, c.D, s.rule, payments=v))),
    Fault("prices", "an unknown rule (before and after every rule)",
          each(_names, lambda s, c, v: ipfl.clear(c.market, c.D, s.rule, payments=s.money,
                                                  prices=v))),
    Fault("markets", "none", lambda s, c: ipfl.MarketArrays.from_markets([])),
    Fault("markets", "of different sizes",
          lambda s, c: ipfl.MarketArrays.from_markets([c.market, _smaller(c)])),
    Fault("market", "a Market, not MarketArrays, to clear_batch",
          lambda s, c: ipfl.clear_batch(c.market, np.asarray(c.D)[None])),
    Fault("thresholds", "an unknown mode to clear_batch (before and after every mode)",
          each(_names, lambda s, c, v: ipfl.clear_batch(ipfl.MarketArrays.of(c.market),
                                                         np.asarray(c.D)[None], thresholds=v))),
    Fault("D", "one row short to clear_batch",
          lambda s, c: ipfl.clear_batch(ipfl.MarketArrays.of(c.market),
                                        np.asarray(c.D)[None, :-1])),
    Fault("thresholds", "an unknown mode to ipfl.thresholds (before and after every mode)",
          each(_names, lambda s, c, v: ipfl.thresholds(c.market, c.D, mode=v))),
    Fault("markup", "negative", lambda s, c: ipfl.cost_plus(-0.1)),
    Fault("pivot", "unknown (before and after every pivot)",
          each(_names, lambda s, c, v: ipfl.rules.vcg_payments(
              c.market, np.zeros((c.market.m,) * 2, bool), c.D, pivot=v))),
    Fault("theta", "its last entry NaN or inf (named by its place)",
          each(lambda c: (NAN, INF),
               lambda s, c, v: pairwise_distances(_put(_theta(c), v, c.market.m ** 2 - 1))),
          says=lambda c, msg: f"entry ({c.market.m - 1}, {c.market.m - 1}) is not" in msg),
    Fault("theta", "one vector", lambda s, c: pairwise_distances(_theta(c)[0])),
    Fault("metric", "unknown (before and after every metric)",
          each(_names, lambda s, c, v: pairwise_distances(_theta(c), metric=v))),
    Fault("reference", "of the wrong length (models of m + 1 parameters, m + 2 given)",
          lambda s, c: pairwise_distances(_wide_theta(c), "cosine",
                                          reference=np.ones(2 + c.market.m)),
          says=lambda c, msg: f"({2 + c.market.m},)" in msg
          and f"expected ({1 + c.market.m},)" in msg),
    Fault("reference", "NaN",
          lambda s, c: pairwise_distances(_theta(c), "cosine",
                                          reference=np.full(c.market.m, NAN))),
    Fault("metric", "unknown, for the gradients (before and after every metric)",
          each(_names, lambda s, c, v: distance_gradients(_theta(c), [[0, 1]], v))),
    Fault("adjacency", "of the wrong shape (models of m + 1 parameters: the refusal names "
                       "(m, m))",
          lambda s, c: prox_centres(_wide_theta(c), np.ones((1, 1), bool), c.market.N, 0.1),
          says=lambda c, msg: f"expected ({c.market.m}, {c.market.m})" in msg),
    Fault("metric", "unknown, to prox_centres (before and after every metric)",
          each(_names, lambda s, c, v: prox_centres(_theta(c), np.eye(c.market.m, dtype=bool),
                                                    c.market.N, 0.1, metric=v))),
    Fault("eta", "0, NaN or inf",
          each(lambda c: (0.0, NAN, INF),
               lambda s, c, v: prox_centres(_theta(c), np.eye(c.market.m, dtype=bool),
                                            c.market.N, v))),
    Fault("attackers", "as many as the clients",
          lambda s, c: market_roles(c.market.m, attackers=c.market.m)),
    Fault("attackers", "one more than the clients, and -1",
          each(lambda c: (c.market.m + 1, -1),
               lambda s, c, v: market_roles(c.market.m, attackers=v)),
          says=lambda c, msg: f"[0, {c.market.m})" in msg),
    Fault("traders", "negative", lambda s, c: inclusive_roles(traders=-1)),
    Fault("roles", "an unknown role (before and after every role)",
          each(_names, lambda s, c, v: draw_types(["trader", v], K=1e3, C=1.0, rng=0))),
    Fault("attack", "an unknown attack (before and after every attack)",
          each(_names, lambda s, c, v: attack(v, _theta(c)[0], 0))),
    # the validation of the rest of the public API (issue 34, part 2: each branch reached)
    Fault("N", "numbers mixed with text", lambda s, c: _market(c, N=_mixed(c.market.N))),
    Fault("c", "an entry negative, through Market.replace",
          lambda s, c: c.market.replace(c=_put(c.market.c, -1.0))),
    Fault("N", "a number, to MarketArrays", lambda s, c: _arrays(c, N=100.0)),
    Fault("N", "no clients, to MarketArrays",
          lambda s, c: _arrays(c, N=np.zeros((1, 0)), c=np.zeros((1, 0)), K=np.zeros((1, 0)))),
    Fault("c", "an entry negative, to MarketArrays",
          lambda s, c: _arrays(c, c=_put(c.market.c, -1.0)[None])),
    Fault("lam", "NaN, to MarketArrays", lambda s, c: _arrays(c, lam=[NAN])),
    Fault("gain", "a decreasing function, to MarketArrays",
          lambda s, c: _arrays(c, gain=_decreasing)),
    Fault("market", "a dict, to MarketArrays.of",
          lambda s, c: ipfl.MarketArrays.of({"N": c.market.N})),
    Fault("markets", "with different gains (a valid one of your own and a built-in one)",
          lambda s, c: ipfl.MarketArrays.from_markets(
              [_market(c, gain=_own_sqrt), _market(c, gain="log")])),
    Fault("D", "an entry NaN, to clear_batch (two markets)",
          lambda s, c: ipfl.clear_batch(_pair_of(c), _batch_D(c, 2, NAN))),
    Fault("D", "a nonzero diagonal, to clear_batch",
          lambda s, c: ipfl.clear_batch(_pair_of(c), _batch_D(c, 2, "diagonal"))),
    Fault("D", "an entry negative, to clear_batch",
          lambda s, c: ipfl.clear_batch(_pair_of(c), _batch_D(c, 2, -0.5))),
    Fault("rule", "a function not marked over_arrays, to clear_batch",
          lambda s, c: ipfl.clear_batch(ipfl.MarketArrays.of(c.market), _batch_D(c),
                                        _not_over_arrays)),
    Fault("time_limit", "negative, after a symmetric D passed the symmetry check",
          lambda s, c: _clear(s, c, D=_symmetric(c.D), allow_asymmetric_distances=False,
                              allow_negative_distances=False, time_limit=-1.0)),
    Fault("gain", "a function not 0 at 0", lambda s, c: _market(c, gain=_not_zero_at_0)),
    Fault("gain", "a function returning one number", lambda s, c: _market(c, gain=_one_number)),
    Fault("gain", "a convex function (the refusal names a point below the largest N: the "
                  "first where the slope rises, not the last, about 2^50 N; and the "
                  "slopes either side of it, which straddle g' there)",
          lambda s, c: _market(c, gain=_convex), says=_rise_named_right),
    Fault("gain", "a function barely convex (x^1.01, slopes rising 0.7 % a doubling)",
          lambda s, c: _market(c, gain=_barely_convex)),
    Fault("gain", "a function of the wrong shape beyond 8 points (8 columns; one more than x)",
          each(_wrong_columns, lambda s, c, v: _market(c, gain=v))),
    Fault("gain", "a function returning one NaN", lambda s, c: _market(c, gain=_scalar_nan)),
    Fault("gain", "a function decreasing by little (-2^-52 x/N: at most 3/16 over the grid)",
          lambda s, c: _market(c, gain=_gently_decreasing)),
    Fault("gain", "a function linear up to 2^20 N and convex beyond (the refusal names "
                  "2^20 N and a slope rising there)",
          lambda s, c: _market(c, gain=_convex_far_out), says=_kink_named),
    Fault("gain", "a function convex at 2^49 N, between the multiples of N tried (N odd "
                  "powers of 2: only the absolute amounts' last step sees it)",
          lambda s, c: _market(c, N=_odd_N(c), gain=_dip)),
    Fault("gain", "a function convex 0.2 % past the allowance Gain.check documents (N powers "
                  "of 4; also where its slope fell 1000-fold before the kink)",
          each(_kinks_past, lambda s, c, v: _market(c, N=_quartic_N(c), gain=v))),
    Fault("thresholds", "an unknown mode, with cost-plus rules of a valid markup",
          lambda s, c: ipfl.clear(c.market, c.D, s.rule, payments=ipfl.cost_plus(0.1)[1],
                                  prices=ipfl.cost_plus(0.1)[0], thresholds="approx",
                                  allow_asymmetric_distances=True)),
    Fault("pivot", "enumeration past VCG_ENUMERATION_MAX clients",
          lambda s, c: ipfl.rules.vcg_payments(
              _sized(ipfl.VCG_ENUMERATION_MAX + 1)[0],
              np.zeros((ipfl.VCG_ENUMERATION_MAX + 1,) * 2, bool),
              _sized(ipfl.VCG_ENUMERATION_MAX + 1)[1], pivot="enumeration")),
    Fault("payments", "a Shapley split over more than SHAPLEY_MAX_SELLERS sellers",
          lambda s, c: ipfl.rules.shapley_remittances(
              _sized(ipfl.rules.SHAPLEY_MAX_SELLERS + 2)[0],
              ~np.eye(ipfl.rules.SHAPLEY_MAX_SELLERS + 2, dtype=bool),
              _sized(ipfl.rules.SHAPLEY_MAX_SELLERS + 2)[1])),
    Fault("exact_method", "'dp' over data amounts of about 1e12 (over the memory guard, "
                          "named in GiB)",
          _dp_too_large, says=lambda c, msg: f"{MEMORY_GUARD // 2**30} GiB guard" in msg),
    Fault("exact_method", "'dp' over about 1e12 data for buyer 2 of a batch's second market "
                          "alone (the message names buyer 2)",
          _dp_too_large_later, says=lambda c, msg: "buyer 2 " in msg
          and f"{MEMORY_GUARD // 2**30} GiB guard" in msg),
    Fault("exact_method", "'enumeration' for buyers of 27 candidates (over the memory guard, "
                          "named in GiB)",
          _enumeration_too_large,
          says=lambda c, msg: f"{MEMORY_GUARD // 2**30} GiB guard" in msg),
    Fault("size", "1.5 times the memory guard and one byte over it, to the shared size check "
                  "(the need and the guard named in GiB)",
          lambda s, c: _refused_saying("size", check_size, (
              (1.5 * MEMORY_GUARD, {"what": "a table"},
               f"would need {1.5 * MEMORY_GUARD / 2**30:g} GiB, over the "
               f"{MEMORY_GUARD // 2**30} GiB guard"),
              (MEMORY_GUARD + 1, {"what": "a table"},
               f"over the {MEMORY_GUARD // 2**30} GiB guard")))),
    Fault("exact_method", "unknown, to selection.exact (before and after every method)",
          each(_names, lambda s, c, v: ipfl.exact(c.market, c.market.prices(c.D),
                                                  ipfl.thresholds(c.market, c.D), method=v))),
    Fault("theta", "so large that the squared distances overflow",
          lambda s, c: pairwise_distances(_theta(c) * 0.0 + np.arange(c.market.m)[:, None]
                                          * 1e200)),
    Fault("reference", "so far that theta - reference overflows",
          lambda s, c: pairwise_distances(np.full((c.market.m, 2), 1e308), "cosine",
                                          reference=np.full(2, -1e308))),
    Fault("placement", "unknown (before and after every placement)",
          each(_names, lambda s, c, v: market_roles(c.market.m, attackers=1, placement=v))),
    Fault("rule", "None", lambda s, c: ipfl.clear(c.market, c.D, None)),
    Fault("arrays", "an .npz file holding an array of objects (never unpickled)",
          lambda s, c: _read_objects_npz(c)),
    Fault("rows", "a write failing before its temporary file exists (replace_atomically: the "
          "error as it came, the file as it was, nothing left)",
          lambda s, c: _write_fails(c, halfway=False)),
    Fault("rows", "a write failing halfway through its temporary file (replace_atomically: "
          "the error as it came, the file as it was, nothing left)",
          lambda s, c: _write_fails(c, halfway=True)),
    Fault("rules_from", "not a module name, as the modules trusted for names read from data",
          lambda s, c: untrusted([s.rule if isinstance(s.rule, str) else "local"],
                                 ["not a module"])),
    Fault("N", "exact fractions with True among them (an array of objects)",
          lambda s, c: _market(c, N=_fractions_with_true(c.market.N))),
    Fault("N", "exact fractions with True first and text last (the message names the first)",
          lambda s, c: _market(c, N=np.array([*_fractions_with_true(c.market.N)[:-1], "x"],
                                             dtype=object)),
          says=lambda c, msg: "holds True;" in msg),
    # each validator's boundary from just outside on both sides (issue 34: `arr <= 0` ->
    # `arr == 0` in MarketArrays let a negative N through, a theta of no parameters passed)
    Fault("N", "an entry negative", lambda s, c: _market(c, N=_put(c.market.N, -1.0))),
    Fault("N", "an entry 0, to MarketArrays",
          lambda s, c: _arrays(c, N=_put(c.market.N, 0.0)[None])),
    Fault("N", "an entry negative, to MarketArrays (the last two: the refusal names the "
               "first, entry (0, m - 2))",
          lambda s, c: _arrays(c, N=_put(_put(c.market.N, -1.0, -1), -1.0, -2)[None]),
          says=lambda c, message: f"entry (0, {c.market.m - 2})" in message),
    Fault("true_N", "an entry 0, to MarketArrays",
          lambda s, c: _arrays(c, true_N=_put(c.market.N, 0.0)[None])),
    Fault("true_N", "an entry negative, to MarketArrays",
          lambda s, c: _arrays(c, true_N=_put(c.market.N, -1.0)[None])),
    Fault("lam", "negative, to MarketArrays", lambda s, c: _arrays(c, lam=[-0.5])),
    Fault("theta", "no parameters (m x 0), to the distances",
          lambda s, c: pairwise_distances(np.zeros((c.market.m, 0)))),
    Fault("theta", "no parameters (m x 0), for the gradients",
          lambda s, c: distance_gradients(np.zeros((c.market.m, 0)), [[0, 1]])),
    Fault("theta", "no clients (0 x 2)", lambda s, c: pairwise_distances(np.zeros((0, 2)))),
    Fault("eta", "negative", lambda s, c: prox_centres(_theta(c), np.eye(c.market.m, dtype=bool),
                                                       c.market.N, -0.1)),
    Fault("exact_node_limit", "0, to selection.exact",
          lambda s, c: ipfl.exact(c.market, c.market.prices(c.D),
                                  ipfl.thresholds(c.market, c.D), node_limit=0)),
    Fault("exact_time_limit", "negative, to selection.exact",
          lambda s, c: ipfl.exact(c.market, c.market.prices(c.D),
                                  ipfl.thresholds(c.market, c.D), time_limit=-1.0)),
    Fault("top", "0, to the greedy scan",
          lambda s, c: ipfl.local(ipfl.thresholds(c.market, c.D), c.market.N, top=0)),
    Fault("T", "not square (one column short), to the greedy scan",
          lambda s, c: ipfl.local(ipfl.thresholds(c.market, c.D)[:, :-1], c.market.N)),
    Fault("N", "one entry short, to the greedy scan",
          lambda s, c: ipfl.box2(ipfl.thresholds(c.market, c.D), c.market.N[:-1])),
    Fault("neighbours", "a client index out of range (m) in the third pair, for the gradients",
          lambda s, c: distance_gradients(_theta(c), [[0, 1], [1, 0], [0, c.market.m]]),
          says=lambda c, msg: "pair 2 " in msg and f"[0, {c.market.m})" in msg),
    Fault("neighbours", "a client index -1 in the second pair, for the gradients",
          lambda s, c: distance_gradients(_theta(c), [[0, 1], [-1, 0]]),
          says=lambda c, msg: "pair 1 " in msg and f"[0, {c.market.m})" in msg),
    Fault("neighbours", "fractional indices, for the gradients",
          lambda s, c: distance_gradients(_theta(c), [[0.5, 1.0]])),
    Fault("neighbours", "not pairs: triples (2, 3) and a flat row of 3 indices, for the "
                        "gradients",
          each(lambda c: (np.zeros((2, 3), int), np.zeros(3, int)),
               lambda s, c, v: distance_gradients(_theta(c), v))),
    Fault("N", "an entry 0, to prox_centres",
          lambda s, c: prox_centres(_theta(c), np.eye(c.market.m, dtype=bool),
                                    _put(c.market.N, 0.0), 0.1)),
    Fault("theta", "an entry NaN, to prox_centres",
          lambda s, c: prox_centres(_put(_theta(c), NAN), np.eye(c.market.m, dtype=bool),
                                    c.market.N, 0.1)),
    Fault("N", "entries summing past the float range (each 1e308, finite), to Market and "
               "to MarketArrays",
          each(lambda c: (False, True), lambda s, c, batch: (
              _arrays(c, N=np.full((1, c.market.m), 1e308)) if batch
              else _market(c, N=np.full(c.market.m, 1e308))))),
    Fault("true_N", "entries summing past the float range (each 1e308, finite)",
          lambda s, c: _market(c, true_N=np.full(c.market.m, 1e308))),
    Fault("W", "a baseline's aggregation one client short, one more, a vector, a batch of "
               "one, NaN, text (baseline_utilities)",
          each(_bad_aggregations, lambda s, c, W: ipfl.baseline_utilities(c.market, W))),
)


def _ipfl_answer(subject, case):
    subject.settle(case.market, case.D, thresholds=case.thresholds)


OVERFLOWING = 1.7e308  # the largest distance of the well-formed D whose sum overflows


def _ipfl_answer_overflowing(subject, case):
    """The subject answers the instance with its distances scaled so that the largest is
    :data:`OVERFLOWING`: every entry finite (well-formed), their sum past the float range."""
    D = np.asarray(case.D, dtype=float)
    if D.max(initial=0.0) > 0:
        subject.settle(case.market, D / D.max() * OVERFLOWING, thresholds=case.thresholds)


def _ipfl_edges(subject, case):
    """The overflowing distances (:func:`_ipfl_answer_overflowing`), and each validator's
    bound from inside, accepted: a cost-plus markup of 0, lam 0, the greedy's top of 1, a
    gain convex 0.2 % within the allowance Gain.check documents, a gain whose g(0) is exactly
    the allowance Gain.check documents (1e-9 of its largest value on 0..16 N), a gain whose
    one step down is exactly the rounding it documents (:func:`_drops_by_the_rounding`), a
    power gain of exponent 2^-20, a gain of your own passing NaN on
    (:func:`_passes_nan_on`), a batch of two markets built apart with the same named gain
    ("log"), a D asymmetric by half the rounding the symmetry check allows
    (:data:`SYMMETRY_ALLOWANCE`)."""
    _ipfl_answer_overflowing(subject, case)
    ipfl.cost_plus(0.0)
    _market(case, N=_quartic_N(case), gain=_kinked(0.998))
    _market(case, N=_quartic_N(case), gain=_kinked(0.998, steep=999.0))
    _market(case, gain=_off_at_0)
    _market(case, gain=_drops_by_the_rounding)
    _market(case, gain=ipfl.PowerGain(2.0**-20))  # alpha's open end at 0, from inside
    # two markets built apart with the same named gain: equal gains, not the same object
    ipfl.MarketArrays.from_markets([_market(case, gain="log"), _market(case, gain="log")])
    _passes_nan_on(case)
    _market(case, lam=0.0)
    ipfl.local(ipfl.thresholds(case.market, case.D), case.market.N, top=1)
    case.market.check_distances(_off_by_rounding(case.D, 0.5))  # within the allowance
    _distances_and_roles_edges(case)


def _distances_and_roles_edges(case):
    """mechanisms.distances and mechanisms.roles at their bounds from inside: one client (a
    (1, p) theta: every function, both metrics, the pair (0, 0)), one parameter ((m, 1)),
    no neighbours (also as an empty list), pairs of unsigned and 32-bit integers, each
    answered in its documented shape (one distance per pair of clients, one gradient per
    pair of neighbours: none for none, one centre per client); as many
    attackers as one less than the clients (both placements) and none; an inclusive market
    of no client of one kind or of none at all."""
    theta, m = _theta(case), case.market.m
    for X in (theta[:1], theta[:, :1]):
        k, p = X.shape
        for metric in ("l2sq", "cosine"):
            got = (pairwise_distances(X, metric, reference=np.zeros(p)).shape,
                   distance_gradients(X, [[0, 0]], metric, reference=np.zeros(p)).shape,
                   prox_centres(X, np.eye(k, dtype=bool), case.market.N[:k], 0.1,
                                metric).shape)
            if got != ((k, k), (1, p), (k, p)):  # one distance per pair of clients, one
                # gradient per pair of neighbours, one centre per client
                raise AssertionError(f"{metric} answers of shapes {got} for {k} clients of "
                                     f"{p} parameters")
        for empty in (np.zeros((0, 2), int), []):  # no neighbours, also as a bare []
            none = distance_gradients(X, empty).shape
            if none != (0, p):  # no neighbours: no gradient
                raise AssertionError(f"no neighbours ({empty!r}) gave gradients of shape "
                                     f"{none}")
        # the pairs as integers of another type (unsigned, narrow): client indices all the same
        for kind in (np.uint8, np.int32):
            one = distance_gradients(X, np.zeros((1, 2), kind)).shape
            if one != (1, p):
                raise AssertionError(f"the pair (0, 0) as {np.dtype(kind)} gave gradients of "
                                     f"shape {one}")
    for a in (0, m - 1):
        for placement in ("last", "random"):
            market_roles(m, attackers=a, placement=placement, rng=0)
    inclusive_roles(traders=0)
    inclusive_roles(0, 0, 0, 0)


# the well-formed edge each family's instances without a fault are also answered at (the
# CPL and pFedLIA ones are defined below)
EDGE_ANSWER = {"ipfl": _ipfl_edges}


# ----------------------------------------------------------------------------------- CPL


def _game(case, **changes):
    return case.game.replace(**changes)


def _wrong_n(g):
    return g.n + 1


def _floor(case):
    g = case.game
    return cpl.spend(g, np.full(g.n, g.q_min))


def _infeasible(case):
    """The game with a budget below what q = q_min spends."""
    low = _floor(case)
    return _game(case, budget=low - 1.0 - abs(low))


def _aggregate(case, **bad):
    g = case.game
    n = g.n
    args = {"w": np.zeros(2), "updates": np.ones((n, 2)), "participated": np.ones(n, bool),
            "a": g.a, "q": np.full(n, 0.5)}
    args.update(bad)
    return cpl.unbiased_aggregate(**args)


def _refused_saying(field, check, ways):
    """Each of ``ways`` ((value, options, words)) given to the shared validator
    ``check(field, value, **options)`` must be refused naming ``field`` with ``words`` in its
    message; the last refusal is raised. A way that passes: None (the fault unrefused); one
    refused otherwise: an AssertionError (a violation)."""
    last = None
    for value, options, words in ways:
        try:
            check(field, value, **options)
        except FedmarketError as exc:
            if exc.field != field or words not in exc.message:
                raise AssertionError(f"{value!r} with {options} refused as {exc}") from exc
            last = exc
        else:
            return None
    raise last


def _shared_checks_inside():
    """The shared validators' bounds from inside, each answered as itself: an integer at lo,
    at hi and of numpy's type; a number at hi, at a closed lo, just above an open one, +inf
    where allowed; every choice; the seeds 0 and 2**63 - 1; a size of exactly the documented
    memory guard (:data:`MEMORY_GUARD`)."""
    got = [as_int("top", 1, lo=1, hi=8), as_int("top", 8, lo=1, hi=8),
           as_int("top", np.int64(3), lo=1), as_int("top", -5, hi=8),
           as_real("rounds", 8.0, lo=1.0, hi=8.0), as_real("rounds", 1, lo=1.0),
           as_real("rounds", np.nextafter(1.0, 2.0), lo=1.0, lo_open=True),
           as_real("rounds", INF, lo=1.0, allow_inf=True),
           as_choice("method", "bisection", ("bisection", "cvxpy")),
           as_choice("method", 2, (1, 2)), as_seed("seed", 0), as_seed("seed", 2**63 - 1),
           check_size("size", MEMORY_GUARD, "a table")]
    want = [1, 8, 3, -5, 8.0, 1.0, float(np.nextafter(1.0, 2.0)), INF, "bisection", 2, 0,
            2**63 - 1, None]
    if got != want or not all(type(g) is type(w) for g, w in zip(got, want, strict=True)):
        raise AssertionError(f"the shared checks answered {got} for {want}")


def _choice(value):
    """The shared choice check: one of the choices passes as itself (else an AssertionError,
    a violation), then ``value`` is checked."""
    choices = ("bisection", "cvxpy")
    if as_choice("method", "cvxpy", choices) != "cvxpy":
        raise AssertionError("as_choice changed a valid choice")
    return as_choice("method", value, choices)


@functools.cache
def _huge_game():
    """A valid game of CVXPY_MAX_N + 1 clients (made once: about 8 ms)."""
    n = CVXPY_MAX_N + 1
    return cpl.Game(a=np.ones(n), G=np.ones(n), c=np.ones(n), v=np.zeros(n), budget=1e9)


def _last_two(case, value):
    """The game's q_max per client (q_max = 1) with its last two entries ``value`` (one
    client: its only entry)."""
    out = np.ones(case.game.n)
    out[-2:] = value
    return out


def _names_entry_of_last_two(case, msg):
    """A refusal names the first of the last two entries (``entry k is``), the first of the
    two out of range."""
    return f"entry {max(case.game.n - 2, 0)} is " in msg


def _wrong_shape_over_arrays(games):
    return np.ones((games.size, games.n + 1))


_wrong_shape_over_arrays.over_arrays = True


def _batch_of(case, *budgets):
    """The game as a batch, one game per budget given (none: the game itself, once)."""
    games = [case.game.replace(budget=b) for b in budgets] if budgets else [case.game]
    return cpl.GameBatch.from_games(games)


def _batch_arrays(case, field, shape_of):
    """The game twice as a GameBatch's arrays (B = 2), ``field`` replaced by
    ``shape_of(array, n)``."""
    b = _batch_of(case, case.game.budget, case.game.budget)
    arrays = {name: getattr(b, name) for name in ("a", "G", "c", "v", "q_max", "budget",
                                                     "alpha", "R", "q_min")}
    arrays[field] = shape_of(arrays[field], b.n)
    return arrays


def _client_column(x, n):
    """A per-client (B, n) field as (B, 1) where n >= 2, as (B, 2) where n = 1: the wrong
    shape either way, and one that broadcasts against (B, n)."""
    return x[:, :1] if n >= 2 else np.repeat(x, 2, axis=1)


def _game_column(x, n):
    """A per-game (B,) field as (B, 1): broadcasts against (B, n) (to (B, B, n) in a
    formula reading it per game)."""
    return x[:, None]


def _shapes_named(want, got):
    """A refusal's message names the shape expected and the shape got (from the case's n)."""
    return lambda c, msg: (str(want(c.game.n)) in msg and str(got(c.game.n)) in msg)


def _batch_value_fault(field, value):
    """A GameBatch built from arrays whose ``field`` is ``value`` in game 1 (at its last
    client for a per-client field; "below q_min": q_min / 2 there), solved: refused naming
    the field and game 1 (and client n - 1)."""
    per_client = field in ("a", "G", "c", "v", "q_max")

    def shape_of(x, n, case):
        x = np.array(x, dtype=float)
        at = (1, n - 1) if per_client else (1,)
        x[at] = case.game.q_min / 2 if value == "below q_min" else value
        return x

    def says(case, msg):
        where = f"game 1, client {case.game.n - 1}" if per_client else "game 1"
        return where in msg

    return Fault(field, f"{value} in a GameBatch's second game, built from arrays",
                 lambda s, c: cpl.solve_batch(cpl.GameBatch(**_batch_arrays(
                     c, field, lambda x, n: shape_of(x, n, c)))), says=says)


def _wrong_shape_fault(field, per_client):
    shape_of = _client_column if per_client else _game_column
    if per_client:
        what = "(B, 1) for n >= 2 clients, (B, 2) for one, in a GameBatch built from arrays"
        want, got = (lambda n: (2, n)), (lambda n: (2, 1 if n >= 2 else 2))
    else:
        what = "(B, 1), not (B,), in a GameBatch built from arrays"
        want, got = (lambda n: (2,)), (lambda n: (2, 1))
    return Fault(field, what + " (a broadcastable shape: refused, not broadcast)",
                 lambda s, c: cpl.solve_batch(cpl.GameBatch(**_batch_arrays(c, field,
                                                                             shape_of))),
                 says=_shapes_named(want, got))


CPL_FAULTS = (
    Fault("a", "an entry 0", lambda s, c: _game(c, a=_put(c.game.a, 0.0))),
    Fault("a", "an entry NaN", lambda s, c: _game(c, a=_put(c.game.a, NAN))),
    Fault("a", "text", lambda s, c: _game(c, a=_text(c.game.a))),
    Fault("G", "an entry negative", lambda s, c: _game(c, G=_put(c.game.G, -1.0))),
    Fault("G", "an entry inf", lambda s, c: _game(c, G=_put(c.game.G, INF))),
    Fault("G", "so large that K overflows", lambda s, c: _game(c, G=_put(c.game.G, 1e300))),
    Fault("G", "one entry more, one fewer",
          each(lambda c: _lengths(c.game.n),
               lambda s, c, n: _game(c, G=np.resize(np.asarray(c.game.G), n)))),
    Fault("c", "an entry 0", lambda s, c: _game(c, c=_put(c.game.c, 0.0))),
    Fault("c", "complex", lambda s, c: _game(c, c=np.asarray(c.game.c) + 1j)),
    Fault("v", "an entry negative", lambda s, c: _game(c, v=_put(c.game.v, -1.0))),
    Fault("v", "an entry NaN", lambda s, c: _game(c, v=_put(c.game.v, NAN))),
    Fault("budget", "NaN", lambda s, c: _game(c, budget=NAN)),
    Fault("budget", "inf", lambda s, c: _game(c, budget=INF)),
    Fault("budget", "text", lambda s, c: _game(c, budget="1")),
    Fault("budget", "True", lambda s, c: _game(c, budget=True)),
    Fault("budget", "None", lambda s, c: _game(c, budget=None)),
    Fault("alpha", "0", lambda s, c: _game(c, alpha=0.0)),
    Fault("R", "below 1", lambda s, c: _game(c, R=0.5)),
    Fault("q_min", "0", lambda s, c: _game(c, q_min=0.0)),
    Fault("q_min", "above 1", lambda s, c: _game(c, q_min=1.5)),
    # q_max out of range in its last two entries (one client: its only one): the refusal
    # names the first of them (generated mutants d1b729fddf and 36cbff9a1f named entry 0 or
    # the last; a scalar q_max, every entry out of range, hid both)
    Fault("q_max", "above 1 (the last two entries; the refusal names the first of them)",
          lambda s, c: _game(c, q_max=_last_two(c, 1.5)), says=_names_entry_of_last_two),
    Fault("q_max", "below q_min (the last two entries; the refusal names the first of them)",
          lambda s, c: _game(c, q_max=_last_two(c, c.game.q_min / 2)),
          says=_names_entry_of_last_two),
    Fault("q_max", "of the wrong length (one more, one fewer, and one entry for two or more "
                   "clients: refused, not broadcast)",
          each(lambda c: (c.game.n + 1, c.game.n - 1) + ((1,) if c.game.n > 2 else ()),
               lambda s, c, n: _game(c, q_max=np.ones(n)))),
    Fault("q_max", "text", lambda s, c: _game(c, q_max="all")),
    Fault("budget", "below the spend at q_min, to the subject",
          lambda s, c: s.solve(_infeasible(c))),
    Fault("game", "not a Game", lambda s, c: cpl.solve({"budget": 1.0})),
    Fault("method", "unknown (before and after every method)",
          each(_names, lambda s, c, v: cpl.solve(c.game, v))),
    Fault("options", "an option the method does not take",
          lambda s, c: cpl.solve(c.game, "bisection", points=3)),
    Fault("solver", "not installed", lambda s, c: cpl.solve(c.game, "cvxpy", solver="NOPE")),
    Fault("progress", "not a function",
          lambda s, c: cpl.solve(c.game, "cvxpy-linesearch", progress=5)),
    Fault("points", "1", lambda s, c: cpl.solve(c.game, "cvxpy-linesearch", points=1)),
    Fault("points", "a float", lambda s, c: cpl.solve(c.game, "cvxpy-linesearch", points=3.5)),
    Fault("eps0", "0", lambda s, c: cpl.solve(c.game, "cvxpy-linesearch", eps0=0.0)),
    Fault("points", "over the work guard",
          lambda s, c: cpl.check_solve(c.game, "cvxpy-linesearch", points=10**9)),
    Fault("responses", "unknown (before and after every name)",
          each(_names, lambda s, c, v: cpl.posted_pricing(c.game, np.ones(c.game.n),
                                                          responses=v))),
    Fault("shape", "an entry negative",
          lambda s, c: cpl.posted_pricing(c.game, _put(np.ones(c.game.n), -1.0))),
    Fault("shape", "all zero", lambda s, c: cpl.posted_pricing(c.game, np.zeros(c.game.n))),
    Fault("shape", "of the wrong length (one more, one fewer)",
          each(lambda c: _lengths(c.game.n),
               lambda s, c, n: cpl.posted_pricing(c.game, np.ones(n)))),
    Fault("budget", "not positive, for a posted price",
          lambda s, c: cpl.posted_pricing(_game(c, budget=min(0.0, c.game.budget)),
                                          np.ones(c.game.n))),
    Fault("prices", "of the wrong length (one more, one fewer)",
          each(lambda c: _lengths(c.game.n),
               lambda s, c, n: cpl.best_response(c.game, np.ones(n)))),
    Fault("prices", "an entry NaN, inf or -inf (each refused as not finite)",
          each(lambda c: (NAN, INF, -INF),
               lambda s, c, v: cpl.best_response(c.game, _put(np.ones(c.game.n), v)))),
    Fault("game", "not a Game, to the best response",
          lambda s, c: cpl.best_response("game", np.ones(c.game.n))),
    Fault("q", "an entry 0",
          lambda s, c: cpl.client_utilities(c.game, np.ones(c.game.n),
                                            _put(np.full(c.game.n, 0.5), 0.0))),
    Fault("game", "not a Game, to apply_pricing",
          lambda s, c: cpl.apply_pricing("game", "uniform")),
    Fault("pricing", "an unknown rule (before and after every rule)",
          each(_names, lambda s, c, v: cpl.apply_pricing(c.game, v))),
    Fault("time_limit", "0", lambda s, c: cpl.apply_pricing(c.game, "uniform", time_limit=0.0)),
    Fault("games", "none", lambda s, c: cpl.GameBatch.from_games([])),
    Fault("games", "of different sizes",
          lambda s, c: cpl.GameBatch.from_games(
              [c.game, cpl.Game(a=[1.0] * _wrong_n(c.game), G=[1.0] * _wrong_n(c.game),
                                c=[1.0] * _wrong_n(c.game), v=[0.0] * _wrong_n(c.game),
                                budget=1.0)])),
    # solve_batch's games by keyword, as its signature allows (generated mutant 1e4224b12c,
    # `games, /, xtol`, refused it)
    Fault("budget", "below the spend at q_min, in a batch, after a feasible game (the "
                    "refusal names game 1)",
          lambda s, c: cpl.solve_batch(games=_batch_of(c, c.game.budget,
                                                       _infeasible(c).budget)),
          says=lambda c, msg: "game 1" in msg),
    # posted_pricing_batch's games and shape by keyword, as its signature allows (both are
    # positional-or-keyword)
    Fault("budget", "not positive, for posted prices in a batch, after a game of budget 0.5 "
                    "(the refusal names game 1)",
          lambda s, c: cpl.posted_pricing_batch(games=_batch_of(c, 0.5,
                                                                min(0.0, c.game.budget)),
                                                shape=np.ones((2, c.game.n))),
          says=lambda c, msg: "game 1" in msg),
    Fault("shape", "all zero for the second game of a batch of two, the first all ones "
                   "(the refusal names game 1)",
          lambda s, c: cpl.posted_pricing_batch(
              _batch_of(c, abs(c.game.budget) + 1.0, abs(c.game.budget) + 1.0),
              np.stack([np.ones(c.game.n), np.zeros(c.game.n)])),
          says=lambda c, msg: "game 1" in msg),
    Fault("shape", "NaN, for posted prices in a batch",
          lambda s, c: cpl.posted_pricing_batch(games=_batch_of(c, abs(c.game.budget) + 1.0),
                                                shape=np.full((1, c.game.n), NAN))),
    Fault("responses", "unknown, in a batch (before and after every name)",
          each(_names, lambda s, c, v: cpl.priced(_batch_of(c), np.ones((1, c.game.n)),
                                                  responses=v))),
    Fault("pricing", "a rule not written over arrays, in a batch",
          lambda s, c: cpl.apply_pricing_batch(_batch_of(c), lambda g: np.ones(g.n))),
    Fault("updates", "of the wrong shape: a row more or fewer, a column fewer or more than w "
                     "(named with the shape expected)",
          each(lambda c: ((c.game.n + 1, 2), (c.game.n - 1, 2), (c.game.n, 1), (c.game.n, 3)),
               lambda s, c, shape: _aggregate(c, updates=np.ones(shape))),
          says=lambda c, msg: f"expected ({c.game.n}, 2)" in msg),
    Fault("participated", "of the wrong length (one more, one fewer)",
          each(lambda c: _lengths(c.game.n),
               lambda s, c, n: _aggregate(c, participated=np.ones(n, bool))),
          says=lambda c, msg: f"expected ({c.game.n},)" in msg),
    Fault("q", "an entry 0", lambda s, c: _aggregate(c, q=_put(np.full(c.game.n, 0.5), 0.0))),
    Fault("q", "an entry negative, just above 1 and 2 (each side of (0, 1] and beyond)",
          each(lambda c: (-0.5, np.nextafter(1.0, 2.0), 2.0),
               lambda s, c, v: _aggregate(c, q=_put(np.full(c.game.n, 0.5), v)))),
    Fault("q", "of the wrong length (one more, one fewer), to the aggregation",
          each(lambda c: _lengths(c.game.n),
               lambda s, c, n: _aggregate(c, q=np.full(n, 0.5))),
          says=lambda c, msg: f"expected ({c.game.n},)" in msg),
    Fault("q", "an entry NaN, to the aggregation (named by its index)",
          lambda s, c: _aggregate(c, q=_put(np.full(c.game.n, 0.5), NAN, c.game.n - 1)),
          says=lambda c, msg: f"entry {c.game.n - 1} is NaN" in msg),
    Fault("a", "an entry 0, negative or NaN, to the aggregation",
          each(lambda c: (0.0, -0.5, NAN),
               lambda s, c, v: _aggregate(c, a=_put(c.game.a, v, c.game.n - 1)))),
    Fault("w", "an entry NaN or inf, to the aggregation",
          each(lambda c: (NAN, INF, -INF),
               lambda s, c, v: _aggregate(c, w=_put(np.zeros(2), v, 1)))),
    Fault("updates", "NaN or inf in the rows of clients that participated, to the "
                     "aggregation: at (k, 1) and (n - 1, 0), k = (n - 1) // 2 (the refusal "
                     "names row k, the first)",
          each(lambda c: (NAN, INF, -INF),
               lambda s, c, v: _aggregate(c, updates=_put(_put(
                   np.ones((c.game.n, 2)), v, 2 * ((c.game.n - 1) // 2) + 1), v,
                   2 * c.game.n - 2))),
          says=lambda c, msg: f"row {(c.game.n - 1) // 2} (" in msg),
    # the validation of the rest of the public API (issue 34, part 2: each branch reached)
    Fault("game", "over CVXPY_MAX_N clients, for a cvxpy method",
          lambda s, c: cpl.check_solve(_huge_game(), "cvxpy")),
    Fault("pricing", "a rule over arrays returning the wrong shape, in a batch",
          lambda s, c: cpl.apply_pricing_batch(_batch_of(c), _wrong_shape_over_arrays)),
    Fault("rounds", "above its upper bound, to the shared number check",
          lambda s, c: as_real("rounds", 2.0 * c.game.n + 1.0, lo=0.0, hi=2.0 * c.game.n)),
    Fault("method", "not one of the choices, to the shared choice check (a choice passes; "
                    "before and after every choice)",
          each(_names, lambda s, c, v: _choice(v))),
    Fault("seed", "True, to the shared seed check", lambda s, c: as_seed("seed", True)),
    Fault("top", "above and below its bounds, a bool and a float, to the shared integer check "
                 "(each message names the bounds)",
          lambda s, c: _refused_saying("top", as_int, (
              (9, {"lo": 1, "hi": 8}, "is 9; must be in [1, 8]"),
              (0, {"lo": 1, "hi": 8}, "is 0; must be in [1, 8]"),
              (0, {"lo": 1}, "is 0; must be >= 1"),
              (9, {"hi": 8}, "is 9; must be <= 8"),
              (True, {"lo": 1, "hi": 8}, "must be an integer"),
              (2.0, {}, "must be an integer")))),
    Fault("rounds", "just above hi, at an open lo, below lo, NaN, inf, a bool, text, to the "
                    "shared number check (each message names the bound)",
          lambda s, c: _refused_saying("rounds", as_real, (
              (np.nextafter(8.0, 9.0), {"lo": 1.0, "hi": 8.0}, "must be <= 8.0"),
              (1.0, {"lo": 1.0, "hi": 8.0, "lo_open": True}, "must be > 1.0"),
              (np.nextafter(1.0, 0.0), {"lo": 1.0}, "must be >= 1.0"),
              (NAN, {}, "must be finite"),
              (INF, {"lo": 1.0}, "must be finite"),
              (-INF, {"allow_inf": True, "lo": 1.0}, "must be >= 1.0"),
              (True, {}, "must be a number"),
              ("1", {}, "must be a number")))),
    Fault("seed", "-1, 2**63 and a float, to the shared seed check",
          lambda s, c: _refused_saying("seed", as_seed, (
              (-1, {}, "in [0, 2**63)"), (2**63, {}, "in [0, 2**63)"),
              (1.0, {}, "a seed is an integer >= 0")))),
    Fault("seed", "2**63, to the shared seed check", lambda s, c: as_seed("seed", 2**63)),
    # each boundary from just outside on both sides
    Fault("a", "an entry negative", lambda s, c: _game(c, a=_put(c.game.a, -0.5))),
    Fault("c", "an entry negative", lambda s, c: _game(c, c=_put(c.game.c, -1.0))),
    Fault("alpha", "negative", lambda s, c: _game(c, alpha=-1.0)),
    Fault("q_min", "negative", lambda s, c: _game(c, q_min=-0.1)),
    Fault("xtol", "negative", lambda s, c: cpl.solve(c.game, "bisection", xtol=-1.0)),
    # a GameBatch's fields of a shape that broadcasts (a q_max of (B, 1) for two clients was
    # read as one bound per game): the message names the shape expected and the shape got
    *(_wrong_shape_fault(field, True) for field in ("G", "c", "v", "q_max")),
    *(_wrong_shape_fault(field, False) for field in ("budget", "alpha", "R", "q_min")),
    # a GameBatch's values off Game's rules, in its second game (its last client): they were
    # answered (NaN, or a game no Game allows); the message names game 1 (and the client)
    *(_batch_value_fault(field, value) for field, value in (
        ("a", 0.0), ("G", np.nan), ("G", -1.0), ("c", 0.0), ("v", -np.inf),
        ("q_max", "below q_min"), ("q_max", 1.5), ("budget", np.inf), ("alpha", 0.0),
        ("R", 0.5), ("q_min", 0.0))),
)


def _cpl_answer(subject, case):
    subject.solve(case.game)


def _cpl_edges(subject, case):
    """Each bound of a Game from inside, accepted: R = 1, q_min = q_max = 1; a GameBatch
    built from arrays of the right shapes (B = 2 games: (2, n) and (2,); (2, 1) where n = 1)
    is solved, and one whose first game's weights sum past the float range (1e308 each) is
    normalised game by game as a Game is; the aggregation's participation probabilities
    q = 1 (every client always) and 2^-20; the shared validators' bounds
    (:func:`_shared_checks_inside`); the bisection's checks on a game over the conic
    solvers' size guard (accepted: that guard is theirs)."""
    _game(case, R=1.0)
    _game(case, q_min=1.0, q_max=1.0)
    # the bisection is not bound by the conic solvers' size guard (CVXPY_MAX_N): a game of
    # one client more passes its checks (the method's name a fresh string, as a user's is)
    cpl.check_solve(_huge_game(), fresh("bisection"))
    _aggregate(case, q=np.ones(case.game.n))
    _aggregate(case, q=np.full(case.game.n, 2.0**-20))
    _shared_checks_inside()
    cpl.solve_batch(cpl.GameBatch(**_batch_arrays(case, "a", lambda x, n: x)))
    # weights whose sum overflows (1e308 each) in game 0 of a batch, the game's own in game
    # 1: each row normalised as one game's (1/n each, and the game's own weights; generated
    # mutant a5d83c57ce summed the scaled weights without keepdims, numpy's broadcasting
    # error, or every game divided by the wrong totals where B = n)
    big = cpl.GameBatch(**_batch_arrays(case, "a", lambda x, n: np.vstack(
        [np.full(n, 1e308), x[1]])))
    if not (np.array_equal(big.a[0], np.full(case.game.n, 1.0) / case.game.n)
            and np.array_equal(big.a[1], np.asarray(case.game.a))):
        raise AssertionError("a GameBatch normalised weights whose sum overflows otherwise "
                             "than cpl.Game")


EDGE_ANSWER["cpl"] = _cpl_edges


# ----------------------------------------------------------------------------------- LIA


def _scores(subject, case, base=None, losses=None, owner=None):
    return subject.scores(case.base if base is None else base,
                          case.losses if losses is None else losses,
                          case.owner if owner is None else owner)


def _I(case):
    return lia.influence(case.base, case.losses, case.owner)


def _n(case) -> int:
    return len(case.base)


def _named(*shapes):
    """A refusal's message names each of ``shapes(case)`` (the shape expected, the shape
    got), written as numpy writes a shape."""
    return lambda c, msg: all(str(tuple(f(c))) in msg for f in shapes)


def _twice(x):
    """``x`` as a batch of two: (2, *x.shape)."""
    return np.stack([np.asarray(x, dtype=float)] * 2)


def _lia_batch(case, base=None, losses=None, owner=None):
    """lia.influence on the instance as a batch of two ((2, n) and (2, m, n)), with changes."""
    return lia.influence(_twice(case.base) if base is None else base,
                         _twice(case.losses) if losses is None else losses,
                         case.owner if owner is None else owner)


def _first_samples(case):
    """The index of each client's first validation sample (clients in order)."""
    owner = np.asarray(case.owner)
    return np.array([int(np.flatnonzero(owner == i)[0]) for i in range(case.m)])


LIA_FAULTS = (
    Fault("model_losses", "one vector", lambda s, c: _scores(s, c, losses=c.losses[0])),
    Fault("model_losses", "no samples",
          lambda s, c: _scores(s, c, base=c.base[:0], losses=c.losses[:, :0], owner=c.owner[:0])),
    Fault("base_losses", "one entry short", lambda s, c: _scores(s, c, base=c.base[:-1]),
          says=_named(lambda c: (_n(c),), lambda c: (_n(c) - 1,))),
    Fault("owner", "floats", lambda s, c: _scores(s, c, owner=np.asarray(c.owner) + 0.5)),
    Fault("owner", "a client that does not exist",
          lambda s, c: _scores(s, c, owner=_put(c.owner, c.m).astype(int)),
          says=lambda c, msg: f"0..{c.m - 1}" in msg),
    Fault("owner", "a client without samples",
          lambda s, c: _scores(s, c, owner=np.zeros_like(c.owner))),
    Fault("model_losses", "an entry NaN",
          lambda s, c: _scores(s, c, losses=_put(c.losses, NAN)),
          says=lambda c, msg: "entry (0, 0) is nan" in msg),
    Fault("I", "not square", lambda s, c: s.sets(_I(c)[:, :-1])),
    Fault("I", "an entry inf", lambda s, c: s.sets(_put(_I(c), INF)),
          says=lambda c, msg: "entry (0, 0) is inf" in msg),
    Fault("I", "text", lambda s, c: s.cluster(_text(_I(c)))),
    Fault("I", "an entry NaN, to the clustering", lambda s, c: s.cluster(_put(_I(c), NAN))),
    Fault("mode", "unknown (before and after every mode)",
          each(_names, lambda s, c, v: lia.cluster(_I(c), mode=v))),
    Fault("rtol", "negative", lambda s, c: lia.beneficial_sets(_I(c), rtol=-1.0)),
    Fault("model_losses", "text", lambda s, c: _scores(s, c, losses=_text(c.losses))),
    Fault("labels", "of another length",
          lambda s, c: lia.adjusted_rand_index(c.groups, np.append(c.groups, 0))),
    Fault("atol", "negative", lambda s, c: lia.beneficial_sets(_I(c), atol=-1.0)),
    Fault("values", "no values in a row, to two_means_1d",
          lambda s, c: lia.two_means_1d(_I(c)[:, :0])),
    Fault("values", "an entry NaN, to two_means_1d",
          lambda s, c: lia.two_means_1d(_put(_I(c)[0], NAN))),
    Fault("values", "an entry inf, to two_means_1d",
          lambda s, c: lia.two_means_1d(_put(_I(c), INF))),
    # every rule of validation crossed from both sides and beyond, on one instance and on a
    # batch (leading dimensions); a refusal of a shape names the shape got (and the one
    # expected where one is determined), of an index out of range the valid range, of a
    # non-finite entry its index and value
    Fault("model_losses", "a number (0-D)", lambda s, c: _scores(s, c, losses=c.losses[0, 0])),
    Fault("model_losses", "no clients (0, n)", lambda s, c: _scores(s, c, losses=c.losses[:0]),
          says=_named(lambda c: (0, _n(c)))),
    Fault("model_losses", "no samples, in a batch (2, m, 0)",
          lambda s, c: _lia_batch(c, base=np.ones((2, 0)), losses=np.ones((2, c.m, 0)),
                                  owner=np.zeros(0, int)),
          says=_named(lambda c: (2, c.m, 0))),
    Fault("model_losses", "no clients, in a batch (2, 0, n)",
          lambda s, c: _lia_batch(c, losses=np.ones((2, 0, _n(c)))),
          says=_named(lambda c: (2, 0, _n(c)))),
    Fault("model_losses", "booleans", lambda s, c: _scores(s, c, losses=c.losses > 1.0)),
    Fault("model_losses", "an entry inf, in a batch",
          lambda s, c: _lia_batch(c, losses=_put(_twice(c.losses), INF, c.losses.size))),
    Fault("base_losses", "one entry long", lambda s, c: _scores(s, c, base=np.append(c.base, 1.0)),
          says=_named(lambda c: (_n(c),), lambda c: (_n(c) + 1,))),
    Fault("base_losses", "(n,) for a batch of losses (2, m, n)",
          lambda s, c: _lia_batch(c, base=c.base),
          says=_named(lambda c: (2, _n(c)), lambda c: (_n(c),))),
    Fault("base_losses", "an entry -inf", lambda s, c: _scores(s, c, base=_put(c.base, -INF, 1)),
          says=lambda c, msg: "entry 1 is -inf" in msg),
    Fault("base_losses", "text", lambda s, c: _scores(s, c, base=_text(c.base))),
    Fault("owner", "one entry short", lambda s, c: _scores(s, c, owner=c.owner[:-1]),
          says=_named(lambda c: (_n(c),), lambda c: (_n(c) - 1,))),
    Fault("owner", "one entry long", lambda s, c: _scores(s, c, owner=np.append(c.owner, 0)),
          says=_named(lambda c: (_n(c),), lambda c: (_n(c) + 1,))),
    Fault("owner", "(n, 1), not (n,)",
          lambda s, c: _scores(s, c, owner=np.asarray(c.owner)[:, None]),
          says=_named(lambda c: (_n(c),), lambda c: (_n(c), 1))),
    Fault("owner", "a client index -1",
          lambda s, c: _scores(s, c, owner=_put(c.owner, -1).astype(int)),
          says=lambda c, msg: f"0..{c.m - 1}" in msg),
    Fault("owner", "booleans", lambda s, c: _scores(s, c, owner=np.asarray(c.owner) == 0)),
    Fault("owner", "a client without samples, in a batch",
          lambda s, c: _lia_batch(c, owner=np.zeros_like(c.owner))),
    Fault("I", "one column more (m, m + 1)",
          lambda s, c: s.sets(np.hstack([_I(c), _I(c)[:, :1]])),
          says=_named(lambda c: (c.m, c.m + 1))),
    Fault("I", "one row short, one row more",
          each(lambda c: (c.m - 1, c.m + 1),
               lambda s, c, k: s.sets(np.resize(_I(c), (k, c.m))))),
    Fault("I", "empty (0, 0)", lambda s, c: s.sets(np.zeros((0, 0))),
          says=_named(lambda c: (0, 0))),
    Fault("I", "empty, in a batch (2, 0, 0), to the clustering",
          lambda s, c: lia.cluster(np.zeros((2, 0, 0))), says=_named(lambda c: (2, 0, 0))),
    Fault("I", "not square, in a batch (2, m, m - 1)",
          lambda s, c: lia.beneficial_sets(_twice(_I(c))[..., :-1]),
          says=_named(lambda c: (2, c.m, c.m - 1))),
    Fault("I", "a vector (m,)", lambda s, c: s.sets(_I(c)[0]), says=_named(lambda c: (c.m,))),
    Fault("I", "a number (0-D), to the clustering", lambda s, c: s.cluster(_I(c)[0, 0])),
    Fault("I", "booleans", lambda s, c: s.sets(_I(c) > 0)),
    Fault("I", "an entry -inf, in a batch, to the clustering",
          lambda s, c: lia.cluster(_put(_twice(_I(c)), -INF, c.m * c.m))),
    Fault("values", "a number (0-D), to two_means_1d", lambda s, c: lia.two_means_1d(1.0)),
    Fault("values", "an empty row (0,), to two_means_1d", lambda s, c: lia.two_means_1d([])),
    Fault("values", "text, to two_means_1d", lambda s, c: lia.two_means_1d(_text(_I(c)[0]))),
    Fault("rtol", "just below 0 (-1e-300)",
          lambda s, c: lia.beneficial_sets(_I(c), rtol=-1e-300)),
    Fault("rtol", "NaN", lambda s, c: lia.beneficial_sets(_I(c), rtol=NAN)),
    Fault("rtol", "True", lambda s, c: lia.beneficial_sets(_I(c), rtol=True)),
    Fault("atol", "just below 0 (-1e-300), to the clustering",
          lambda s, c: lia.cluster(_I(c), "p2p", atol=-1e-300)),
    Fault("atol", "inf", lambda s, c: lia.beneficial_sets(_I(c), atol=INF)),
    Fault("atol", "text", lambda s, c: lia.beneficial_sets(_I(c), atol="0")),
    Fault("mode", "not a name (None)", lambda s, c: lia.cluster(_I(c), mode=None)),
    Fault("labels", "one entry short",
          lambda s, c: lia.adjusted_rand_index(c.groups, np.asarray(c.groups)[:-1])),
    Fault("labels", "2-D labelings of one shape",
          lambda s, c: lia.adjusted_rand_index(np.asarray(c.groups)[None],
                                               np.asarray(c.groups)[None])),
    Fault("labels", "two numbers (0-D)", lambda s, c: lia.adjusted_rand_index(0, 0)),
)


def _lia_answer(subject, case):
    I = subject.scores(case.base, case.losses, case.owner)
    subject.sets(I)
    subject.cluster(I)


def _lia_edges(subject, case):
    """Each bound of pFedLIA's validation from inside, accepted: the no-split tolerances
    rtol = atol = 0; one client (m = 1: scores (1, 1), its set and cluster in both modes), one
    validation sample per client (n = m), owners of another integer type (uint8), a batch
    (2, m, n) of losses and (2, m, m) of scores; two_means_1d of a row given alone and of a
    row of one value; the adjusted Rand index of one item and of none."""
    lia.beneficial_sets(_I(case), rtol=0.0, atol=0.0)
    one = lia.influence(case.base, case.losses[:1], np.zeros(_n(case), int))
    lia.beneficial_sets(one)
    lia.cluster(one, "central")
    lia.cluster(one, "p2p")
    first = _first_samples(case)
    lia.influence(case.base[first], case.losses[:, first], np.arange(case.m))
    lia.influence(case.base, case.losses, np.asarray(case.owner).astype(np.uint8))
    I = _lia_batch(case)
    lia.cluster(I, "central")
    lia.cluster(I, "p2p")
    lia.two_means_1d(I[0, 0])
    lia.two_means_1d(I[0, 0, :1])
    lia.adjusted_rand_index(case.groups[:1], case.groups[:1])
    lia.adjusted_rand_index([], [])


EDGE_ANSWER["lia"] = _lia_edges


FAULTS = {"ipfl": IPFL_FAULTS, "cpl": CPL_FAULTS, "lia": LIA_FAULTS}
ANSWER = {"ipfl": _ipfl_answer, "cpl": _cpl_answer, "lia": _lia_answer}


# ---------------------------------------------------------------------------- the check


def _raised(call, subject, case):
    """What ``call(subject, case)`` raised (the subject's own error unwrapped), or None."""
    try:
        call(subject, case)
    except SubjectError as exc:
        return exc.original
    except Exception as exc:
        return exc
    return None


# a refusal's message: one line of at most this many characters (a value it shows is cut to
# 80, mechanisms.errors; the longest message of the tables, D's asymmetry, is about 230)
MESSAGE_MAX = 300


def refusal(subject, case: FaultCase):
    """The violation: 0 when the subject answered the well-formed instance and the fault
    (if any) was refused with an error naming its field on one line of at most
    :data:`MESSAGE_MAX` characters, or (none: iPFL) the
    instance at the edge of :data:`EDGE_ANSWER` was answered too; 1 otherwise."""
    exc = _raised(ANSWER[case.family], subject, case.base)
    if exc is not None:
        if isinstance(exc, FedmarketError):
            return 1.0  # good input refused
        raise exc
    if case.fault == 0:
        edge = EDGE_ANSWER.get(case.family)
        exc = None if edge is None else _raised(edge, subject, case.base)
        if exc is None:
            return 0.0
        if isinstance(exc, FedmarketError):
            return 1.0  # good input refused
        raise exc
    fault = FAULTS[case.family][case.fault - 1]
    exc = _raised(fault.call, subject, case.base)
    ok = (isinstance(exc, FedmarketError) and isinstance(exc, ValueError)
          and exc.field == fault.field and "\n" not in str(exc)
          and len(str(exc)) <= MESSAGE_MAX
          and (fault.says is None or bool(fault.says(case.base, str(exc)))))
    return 0.0 if ok else 1.0


# ----------------------------------------------------------------------------- the draws


class FaultSampler(Sampler):
    """``inner``'s draws with one more uniform per instance: the fault (0: none)."""

    def __init__(self, inner: Sampler, family: str):
        self.inner, self.family = inner, family
        self.n_client, self.n_glob = inner.n_client, inner.n_glob + 1
        self.atom = inner.atom

    # the size settings are the inner sampler's (the engine sets max_m, tiers on this one)
    min_m = property(lambda self: self.inner.min_m,
                     lambda self, v: setattr(self.inner, "min_m", v))
    max_m = property(lambda self: self.inner.max_m,
                     lambda self, v: setattr(self.inner, "max_m", v))
    tiers = property(lambda self: self.inner.tiers,
                     lambda self, v: setattr(self.inner, "tiers", v))

    def draw(self, rng, size: int) -> list[Draws]:
        """The inner draws, each with one more uniform u: none (u = 0) with probability
        ``atom``; the others stratified over the :meth:`cells` (cell f is [f/k, (f+1)/k)):
        every cell once in each k consecutive draws of a call, from a random cell on, in a
        random order. A fault of the table is thus drawn in every call of k draws or more
        (uniform u would leave about 1 in e^(draws/k) unseen: a third of them at 200
        examples of a table of 120 faults)."""
        out = self.inner.draw(rng, size)
        total = sum(d.size for d in out)
        k = self.cells()
        none = rng.random(total) < self.atom
        n = int((~none).sum())
        cells = rng.permutation((rng.integers(k) + np.arange(n)) % k)
        u = np.zeros(total)
        u[~none] = (cells + rng.random(n)) / k
        at = 0
        for d in out:
            d.glob = np.concatenate([d.glob, u[at:at + d.size, None]], axis=1)
            at += d.size
        return out

    def cells(self) -> int:
        """The number of choices the extra uniform picks among: the table's faults and none."""
        return len(FAULTS[self.family]) + 1

    def faults(self, d: Draws) -> np.ndarray:
        k = self.cells()
        return np.minimum((d.glob[:, -1] * k).astype(int), k - 1)

    def cases(self, d: Draws) -> list[FaultCase]:
        inner = Draws(d.client, d.pair, d.glob[:, :-1], d.gain, d.mode)
        return [FaultCase(base, int(f), self.family)
                for base, f in zip(self.inner.cases(inner), self.faults(d), strict=True)]

    def simple(self) -> dict:
        return self.inner.simple()


def ipfl_base_sampler():
    from .ipfl_properties import EVERY_GAIN, EVERY_MODE

    return IpflSampler(IpflSpec(gains=EVERY_GAIN, modes=EVERY_MODE))


def cpl_base_sampler():
    from .batch import CplSampler

    return CplSampler(large_v=True, budget="any", positive_budget=True)


def lia_base_sampler():
    """pFedLIA's instances of 2 or more clients (a fault such as "a client without samples"
    needs two; one client is answered among the edges, :func:`_lia_edges`)."""
    from .lia_properties import LiaSampler

    sampler = LiaSampler("any")
    sampler.min_m = 2
    return sampler


def _strategy(family, base):
    k = len(FAULTS[family])

    def instances(max_clients=None):
        return st.builds(lambda b, f: FaultCase(b, f, family), base(max_clients),
                         st.integers(0, k))

    return instances


def ipfl_cases(max_clients):
    from .ipfl_properties import IpflCase

    top = MAX_CLIENTS if max_clients is None else max_clients
    return ipfl_instances(symmetric=None, min_m=2, max_m=top).map(lambda x: IpflCase(*x))


def cpl_cases(max_clients):
    top = MAX_CLIENTS if max_clients is None else max_clients
    return cpl_games(max_n=top, large_v=True, budget="any", positive_budget=True).map(CplCase)


def lia_cases(max_clients):
    from .lia_properties import lia_instances  # any noise, as LiaSampler("any"); m >= 2

    return lia_instances("any", min_clients=2)(max_clients=max_clients)


_STATEMENT = ("every malformed input of the table is refused with an error (a ValueError) "
              "naming its field on one line of at most 300 characters; a well-formed instance "
              "is answered")
_DISCRIMINATES = ("every effective example (no discriminating flag: a fault could pass "
                  "unrefused or be refused under another field, a well-formed instance could "
                  "be refused)")


def _prop(key, name, family, base_sampler, base_cases, lo, where):
    instances = _strategy(family, base_cases)
    instances.clients = (lo, MAX_CLIENTS)
    return Property(
        key, name, _STATEMENT, "conventions: bad input -> one clear line naming the field",
        f"a drawn instance; a fault of {len(FAULTS[family])} ({where}) or none", family,
        instances, refusal, sample=lambda: FaultSampler(base_sampler(), family),
        clients=(lo, MAX_CLIENTS), discriminates=_DISCRIMINATES,
        note="proofs.input_properties lists the faults")


INPUT_PROPERTIES = {p.key: p for p in [
    _prop("refuses_bad_input", "Refuses bad input, naming the field", "ipfl", ipfl_base_sampler,
          ipfl_cases, 2, "Market, D, clear's options and rules, the batch, thresholds, "
                          "rules' options, distances, roles"),
    _prop("cpl_refuses_bad_input", "Refuses bad input, naming the field (CPL)", "cpl",
          cpl_base_sampler, cpl_cases, 1, "Game, the infeasible budget to the subject, solve's "
                                    "methods and options, posted prices, responses, "
                                    "apply_pricing, batches (a GameBatch's shapes), aggregation"),
    _prop("lia_refuses_bad_input", "Refuses bad input, naming the field (pFedLIA)", "lia",
          lia_base_sampler, lia_cases, 2, "losses, owner, scores to the sets and the clustering, "
                                    "mode, tolerances, labelings"),
]}
