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

__all__ = ["DIMENSIONS", "DIRECTIONS", "Misreport", "misreport", "regret_search"]

DIMENSIONS = ("N", "c", "K")
DIRECTIONS = ("over", "under")


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
    :func:`proofs.ipfl_properties.best_misreport`); the refinement stays scalar.
    """
    if direction not in DIRECTIONS:
        raise MarketInputError("direction", f"unknown {direction!r}; choose one of {DIRECTIONS}")
    if not (span > 1 and grid >= 1 and starts >= 0 and maxiter >= 1):
        raise MarketInputError("span", "need span > 1, grid >= 1, starts >= 0, maxiter >= 1")
    t0 = time.perf_counter()
    truth = float(getattr(market, f"true_{dimension}")[client])
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
        u = -math.inf if lied is None else float(settle(lied, D).utilities[client])
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
                     len(cache), time.perf_counter() - t0)
