"""Ex-post regret of a misreport, found by search (in the spirit of RegretNet's ex-post regret).

For a market, a client i and one private type dimension (its data amount N, sharing cost c or
gain scale K), client i's regret is the most true utility it can gain by reporting its type
times a factor instead of the truth, everyone else truthful:

    regret_i = max_f [ U_i(report x_i f) - U_i(truth) ]    (U_i with i's TRUE type)

over f in [1, span] ("over"-reporting) or [1/span, 1] ("under"-reporting). The utility is a
step function of f (the graph changes at thresholds) with smooth pieces in between, so the
search is a log-spaced grid followed by a bounded scalar refinement (scipy's bounded Brent)
around the best few grid points ("starts"). It is a search, not a proof: regret 0 means no
profitable misreport was found, a positive regret comes with the misreport that achieves it
(re-run it with :meth:`Misreport.market`).

A type that cannot move in a direction has nothing to search (regret 0): understating a zero
cost or gain scale, or any misreport of an infinite cost (a pure buyer). Overstating a zero
cost or gain scale reports ``(f - 1) x`` a reference level (the mean positive finite value of
that dimension in the market, or 1).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from mechanisms import ipfl
from mechanisms.errors import MarketInputError

__all__ = ["DIMENSIONS", "DIRECTIONS", "JOINT_PAIRS", "SEARCHES", "JointMisreportBatch",
           "Misreport", "MisreportBatch", "joint_regret_arrays", "misreport", "regret_arrays",
           "regret_search"]

DIMENSIONS = ("N", "c", "K")
DIRECTIONS = ("over", "under")

# named search settings, weakest first: "single" for regret_arrays (one dimension, one
# direction), "joint" for joint_regret_arrays (two dimensions, both ways);
# benchmarks/design_search_strength.py measures the same rules under each
SEARCHES = {
    "former": {"single": {"span": 100.0, "grid": 8, "starts": 2, "iters": 8},
               "joint": {"span": 100.0, "grid": 9, "iters": 8}},
    "strong": {"single": {"span": 1e6, "grid": 48, "starts": 6, "iters": 14},
               "joint": {"span": 1e6, "grid": 25, "iters": 14}},
    "wider": {"single": {"span": 1e8, "grid": 128, "starts": 12, "iters": 16},
              "joint": {"span": 1e8, "grid": 41, "iters": 16}},
}


def _reference(values: np.ndarray) -> float:
    ok = values[np.isfinite(values) & (values > 0)]
    return float(ok.mean()) if ok.size else 1.0


def misreport(market: ipfl.Market, client: int, dimension: str, factor: float):
    """The market in which ``client`` reports its ``dimension`` ("N", "c" or "K") times
    ``factor`` (everyone else truthful), or None when that type cannot move that way."""
    if dimension not in DIMENSIONS:
        raise MarketInputError("dimension", f"unknown {dimension!r}; choose one of {DIMENSIONS}")
    truth = getattr(market, f"true_{dimension}")
    x = float(truth[client])
    if not math.isfinite(x) or factor == 1.0:
        return None
    if x > 0:
        new = x * factor
    elif factor > 1.0:
        new = (factor - 1.0) * _reference(truth)
    else:
        return None
    report = np.array(truth, dtype=float)
    report[client] = new
    return market.replace(**{dimension: report, f"true_{dimension}": truth})


@dataclass(frozen=True)
class Misreport:
    """The best misreport found: ``client`` reports ``dimension`` x ``factor``.

    regret : true utility gained over the truthful report (> 0: lying pays), 0 when nothing
        better than the truth was found.
    evaluations : how many markets were cleared; seconds : wall time of the search.
    spread : the largest |U_i(lie) - U_i(truth)| over every misreport evaluated (0: no lie
        the search tried changed the liar's utility, so the instance could not have shown a
        regret).
    """

    client: int
    dimension: str
    direction: str
    factor: float
    truth: float
    report: float
    honest_utility: float
    lying_utility: float
    evaluations: int
    seconds: float
    spread: float = 0.0

    @property
    def regret(self) -> float:
        return max(0.0, self.lying_utility - self.honest_utility)

    def describe(self) -> str:
        if self.regret <= 0:
            return (f"no profitable {self.direction}-report of {self.dimension} found "
                    f"({self.evaluations} evaluations)")
        return (f"client {self.client} reports {self.dimension} = {self.report:.6g} instead of "
                f"{self.truth:.6g} (x {self.factor:.4g}): utility {self.honest_utility:.6g} -> "
                f"{self.lying_utility:.6g}, regret {self.regret:.6g}")


def regret_search(settle, market: ipfl.Market, D, client: int, dimension: str,
                  direction: str, *, span: float = 100.0, grid: int = 8, starts: int = 2,
                  maxiter: int = 12, honest=None, stop_above: float | None = None,
                  batch=None) -> Misreport:
    """Search client ``client``'s best misreport of ``dimension`` in ``direction``.

    ``settle(market, D) -> outcome`` clears a market (e.g. ``subject.settle`` or
    ``functools.partial(ipfl.clear, rule="exact", payments="vcg")``); outcomes need
    ``.utilities``. ``grid`` log-spaced factors in (1, span] or [1/span, 1), then ``starts``
    bounded scalar refinements (at most ``maxiter`` evaluations each) on the log-factor
    interval around each of the best grid points. ``honest``: the truthful outcome, if known.
    ``stop_above``: stop as soon as a misreport gains more than this (a property only needs
    one profitable lie; the full search then reports the largest regret).
    ``batch``: optional ``batch(values) -> utilities``, client ``client``'s true utility for
    each reported value in ``values`` at once (a vectorised clearing of the whole grid, see
    :func:`proofs.ipfl_properties.best_misreport`). When given, it evaluates every utility of
    the search, the truthful one and the refinement's included: honest and lying utilities
    always come from the same code (``settle`` and ``honest`` are then not used).
    """
    if direction not in DIRECTIONS:
        raise MarketInputError("direction", f"unknown {direction!r}; choose one of {DIRECTIONS}")
    if not (span > 1 and grid >= 1 and starts >= 0 and maxiter >= 1):
        raise MarketInputError("span", "need span > 1, grid >= 1, starts >= 0, maxiter >= 1")
    t0 = time.perf_counter()
    truth = float(getattr(market, f"true_{dimension}")[client])
    if batch is not None:
        u0 = float(np.asarray(batch(np.array([float(getattr(market, dimension)[client])])),
                              dtype=float)[0])
    else:
        base = honest if honest is not None else settle(market, D)
        u0 = float(base.utilities[client])
    sign = 1.0 if direction == "over" else -1.0
    cache: dict[float, float] = {}

    class _Found(Exception):
        pass

    def utility(logf: float) -> float:
        if logf in cache:
            return cache[logf]
        lied = misreport(market, client, dimension, math.exp(sign * logf))
        if lied is None:
            u = -math.inf
        elif batch is not None:
            value = float(getattr(lied, dimension)[client])
            u = float(np.asarray(batch(np.array([value])), dtype=float)[0])
        else:
            u = float(settle(lied, D).utilities[client])
        cache[logf] = u
        if stop_above is not None and u - u0 > stop_above:
            raise _Found
        return u

    top = math.log(span)
    xs = np.linspace(top / grid, top, grid)  # log-factors; 0 (the truth) excluded
    if misreport(market, client, dimension, math.exp(sign * xs[0])) is None:
        return Misreport(client, dimension, direction, 1.0, truth, truth, u0, u0, 0,
                         time.perf_counter() - t0)
    try:
        if batch is not None:
            values = [getattr(misreport(market, client, dimension, math.exp(sign * x)),
                              dimension)[client] for x in xs]
            us = np.asarray(batch(np.array(values)), dtype=float)
            cache.update(zip(xs.tolist(), us.tolist(), strict=True))
            if stop_above is not None and (us - u0 > stop_above).any():
                raise _Found
        else:
            us = np.array([utility(float(x)) for x in xs])
        knots = np.concatenate([[0.0], xs])
        for k in np.argsort(-us, kind="stable")[:starts]:
            lo, hi = knots[k], knots[min(k + 2, grid)]
            minimize_scalar(lambda x: -utility(float(x)), bounds=(float(lo), float(hi)),
                            method="bounded", options={"maxiter": maxiter, "xatol": 1e-4 * top})
    except _Found:
        pass
    best = max((x for x in cache if x > 0), key=lambda x: (cache[x], -x))
    f = math.exp(sign * best)
    lied = misreport(market, client, dimension, f)
    report = float(getattr(lied, dimension)[client])
    return Misreport(client, dimension, direction, f, truth, report, u0, cache[best],
                     len(cache), time.perf_counter() - t0, _spread(cache.values(), u0))


def _spread(utilities, honest: float) -> float:
    """The largest |u - honest| over the finite utilities (NaN counts as a change)."""
    out = 0.0
    for u in utilities:
        if math.isnan(u) or math.isnan(honest):
            return math.inf
        if math.isfinite(u):
            out = max(out, abs(u - honest))
    return out


_GOLD = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class MisreportBatch:
    """The best misreports found for a batch of instances (one liar each), all arrays (B,).

    factor : the best factor found (1.0 where nothing can move); report : the reported value;
    honest_utility, lying_utility : the liar's true utility truthful / at ``factor``;
    evaluations : markets cleared per instance (the truthful one included);
    spread : the largest |U(lie) - U(truth)| over every misreport evaluated (inf where a
    utility was NaN; 0 where no lie changed anything)."""

    factor: np.ndarray
    report: np.ndarray
    honest_utility: np.ndarray
    lying_utility: np.ndarray
    evaluations: int
    spread: np.ndarray | None = None

    @property
    def regret(self) -> np.ndarray:
        return np.maximum(0.0, self.lying_utility - self.honest_utility)


def regret_arrays(utilities, truth, reference, honest, direction: str, *, span: float = 100.0,
                  grid: int = 8, starts: int = 2, iters: int = 8) -> MisreportBatch:
    """The regret search of :func:`regret_search`, vectorised across a batch of instances.

    ``utilities(values)`` -> the liar's true utility when it reports ``values`` ((B, k) ->
    (B, k); one vectorised clearing of B x k markets); ``truth`` (B,) the liar's true type,
    ``reference`` (B,) the level a zero type overstates from, ``honest`` (B,) its truthful
    utility. The search: ``grid`` log-spaced factors in (1, span] (or [1/span, 1)), then a
    golden-section refinement of ``iters`` steps on the log-factor bracket around each of
    the ``starts`` best grid points, all instances at once. Resolution: the grid step is
    ln(span)/grid in log-factor, the refined brackets shrink to 2 ln(span)/grid x 0.618^iters
    (3 % of ln(span) with the defaults: the scalar search's grid, brackets and number of
    evaluations per bracket). Like the scalar search it is a search, not a
    proof: the regret it returns is a lower bound on the true regret.
    """
    if direction not in DIRECTIONS:
        raise MarketInputError("direction", f"unknown {direction!r}; choose one of {DIRECTIONS}")
    if not (span > 1 and grid >= 1 and starts >= 0 and iters >= 0):
        raise MarketInputError("span", "need span > 1, grid >= 1, starts >= 0, iters >= 0")
    truth = np.asarray(truth, dtype=float)
    reference = np.asarray(reference, dtype=float)
    honest = np.asarray(honest, dtype=float)
    sign = 1.0 if direction == "over" else -1.0
    movable = np.isfinite(truth) & ((truth > 0) | (sign > 0))
    safe = np.where(movable, truth, 1.0)

    def values(logf):
        f = np.exp(sign * logf)
        v = np.where((safe > 0)[:, None], safe[:, None] * f, (f - 1.0) * reference[:, None])
        return np.where(movable[:, None], v, truth[:, None])

    spread = np.zeros(truth.size)

    def value_of(logf):
        nonlocal spread
        u = np.asarray(utilities(values(logf)), dtype=float)
        with np.errstate(invalid="ignore"):
            gap = np.where(np.isnan(u) | np.isnan(honest)[:, None], np.inf,
                           np.where(np.isfinite(u), np.abs(u - honest[:, None]), 0.0))
        spread = np.maximum(spread, np.where(movable, gap.max(axis=1, initial=0.0), 0.0))
        return np.where(movable[:, None] & ~np.isnan(u), u, -np.inf)

    top = math.log(span)
    xs = np.broadcast_to(np.linspace(top / grid, top, grid), (truth.size, grid))
    us = value_of(xs)
    evals = 1 + grid
    best_x, best_u = xs, us
    if starts and iters:
        S = min(starts, grid)
        knots = np.concatenate([np.zeros(1), xs[0]])
        k = np.argsort(-us, axis=1, kind="stable")[:, :S]
        a, b = knots[k], knots[np.minimum(k + 2, grid)]
        x1, x2 = b - _GOLD * (b - a), a + _GOLD * (b - a)
        f1, f2 = value_of(x1), value_of(x2)
        seen_x, seen_u = [x1, x2], [f1, f2]
        for _ in range(iters):
            left = f1 >= f2  # the maximum lies in [a, x2]
            a, b = np.where(left, a, x1), np.where(left, x2, b)
            x1, x2, f1, f2 = (np.where(left, b - _GOLD * (b - a), x2),
                              np.where(left, x1, a + _GOLD * (b - a)),
                              np.where(left, np.nan, f2), np.where(left, f1, np.nan))
            new_x = np.where(left, x1, x2)
            new_u = value_of(new_x)
            f1, f2 = np.where(left, new_u, f1), np.where(left, f2, new_u)
            seen_x.append(new_x)
            seen_u.append(new_u)
        evals += S * (2 + iters)
        best_x = np.concatenate([xs, *seen_x], axis=1)
        best_u = np.concatenate([us, *seen_u], axis=1)
    # the largest utility; ties go to the smallest lie (as the scalar search)
    order = np.lexsort((best_x, -best_u), axis=1)[:, 0] if best_u.size else np.zeros(0, int)
    rows = np.arange(truth.size)
    bx, bu = best_x[rows, order], best_u[rows, order]
    gain = np.where(movable, bu, honest)
    factor = np.where(movable, np.exp(sign * bx), 1.0)
    report = np.where(movable, values(bx[:, None])[:, 0], truth)
    return MisreportBatch(factor, report, honest, gain, evals, spread)


JOINT_PAIRS = (("N", "c"), ("N", "K"), ("c", "K"))  # two dimensions misreported at once


@dataclass(frozen=True)
class JointMisreportBatch:
    """The best joint misreports found (two type dimensions at once, each either way), one
    liar per instance, arrays (B,): ``factors`` (B, 2) the best factor per dimension (1.0
    where a dimension cannot move or did not), ``honest_utility`` / ``lying_utility``,
    ``evaluations`` (markets cleared per instance), ``spread`` as in
    :class:`MisreportBatch`."""

    factors: np.ndarray
    honest_utility: np.ndarray
    lying_utility: np.ndarray
    evaluations: int
    spread: np.ndarray

    @property
    def regret(self) -> np.ndarray:
        return np.maximum(0.0, self.lying_utility - self.honest_utility)


def joint_regret_arrays(utilities, truth, reference, honest, *, span: float = 100.0,
                        grid: int = 9, iters: int = 8) -> JointMisreportBatch:
    """The liar's best misreport of TWO type dimensions at once, vectorised across a batch.

    ``utilities(values)`` -> the liar's true utility reporting ``values`` ((B, k, 2) ->
    (B, k): one clearing of B x k markets); ``truth`` and ``reference`` (B, 2) per dimension
    as in :func:`regret_arrays`; ``honest`` (B,). The search: a ``grid`` x ``grid`` grid of
    log-factors in [-ln span, ln span]^2 (both directions of both dimensions; with an odd
    ``grid`` it contains the one-dimensional lies on its axes), then ``iters`` steps of a
    compass search from the best grid point (the four neighbours at step delta, moving to
    the best improvement, else halving delta; delta starts at the grid step). A dimension
    that cannot move (an infinite cost, understating a zero) keeps its truth. Like every
    search here the regret is a lower bound on the true regret."""
    if not (span > 1 and grid >= 2 and iters >= 0):
        raise MarketInputError("span", "need span > 1, grid >= 2, iters >= 0")
    truth = np.asarray(truth, dtype=float)
    reference = np.asarray(reference, dtype=float)
    honest = np.asarray(honest, dtype=float)
    B = truth.shape[0]
    fin = np.isfinite(truth)
    safe = np.where(fin, truth, 1.0)

    def values(logf):  # logf (B, k, 2) -> reports (B, k, 2)
        f = np.exp(logf)
        t, r = safe[:, None, :], reference[:, None, :]
        v = np.where(t > 0, t * f, np.where(f > 1.0, (f - 1.0) * r, 0.0))
        return np.where(fin[:, None, :], v, truth[:, None, :])

    spread = np.zeros(B)
    evals = [0]

    def value_of(logf):
        nonlocal spread
        u = np.asarray(utilities(values(logf)), dtype=float)
        evals[0] += logf.shape[1]
        with np.errstate(invalid="ignore"):
            gap = np.where(np.isnan(u) | np.isnan(honest)[:, None], np.inf,
                           np.where(np.isfinite(u), np.abs(u - honest[:, None]), 0.0))
        spread = np.maximum(spread, gap.max(axis=1, initial=0.0))
        return np.where(np.isnan(u), -np.inf, u)

    top = math.log(span)
    axis = np.linspace(-top, top, grid)
    g1, g2 = np.meshgrid(axis, axis, indexing="ij")
    pts = np.stack([g1.ravel(), g2.ravel()], axis=-1)
    pts = pts[np.abs(pts).sum(axis=1) > 0]  # the truth is the honest utility
    xs = np.broadcast_to(pts, (B, *pts.shape))
    us = value_of(xs)
    k = np.argmax(us, axis=1)
    best_x, best_u = xs[np.arange(B), k], us[np.arange(B), k]
    step = np.full(B, axis[1] - axis[0])
    moves = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    for _ in range(iters):
        cand = np.clip(best_x[:, None, :] + step[:, None, None] * moves[None], -top, top)
        cu = value_of(cand)
        j = np.argmax(cu, axis=1)
        better = cu[np.arange(B), j] > best_u
        best_x = np.where(better[:, None], cand[np.arange(B), j], best_x)
        best_u = np.where(better, cu[np.arange(B), j], best_u)
        step = np.where(better, step, step / 2.0)
    moved = fin & ((truth > 0) | (best_x > 0))
    factors = np.where(moved, np.exp(best_x), 1.0)
    return JointMisreportBatch(factors, honest, best_u, 1 + evals[0], spread)
