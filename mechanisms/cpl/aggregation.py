"""Unbiased aggregation under randomised participation (spec cpl.md, first section).

w^{r+1} = w^r + sum_{n in S} (a_n / q_n) (w_n^{r+1} - w^r), S the clients that showed up,
each independently with probability q_n. E[w^{r+1}] = sum_n a_n w_n^{r+1}. An empty round
leaves w unchanged.
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketInputError, as_floats

__all__ = ["unbiased_aggregate"]


def unbiased_aggregate(w, updates, participated, a, q) -> np.ndarray:
    """One aggregation step. ``updates`` (N, p) are the clients' new models w_n^{r+1} (rows of
    absent clients are ignored), ``participated`` (N,) bool.

    >>> unbiased_aggregate([0.0], [[1.0], [3.0]], [True, False], [0.5, 0.5], [0.5, 0.5])
    array([1.])
    """
    w = as_floats("w", w)
    U = as_floats("updates", updates)
    S = np.asarray(participated, dtype=bool)
    a = as_floats("a", a)
    q = as_floats("q", q)
    if U.shape != (a.size, w.size):
        raise MarketInputError("updates", f"has shape {U.shape}, expected ({a.size}, {w.size})")
    if S.shape != a.shape:
        raise MarketInputError("participated", f"has shape {S.shape}, expected {a.shape} (one "
                                               "entry per client, as a)")
    if q.shape != a.shape:
        raise MarketInputError("q", f"has shape {q.shape}, expected {a.shape} (one entry per "
                                    "client, as a)")
    if ((q <= 0) | (q > 1)).any():
        raise MarketInputError("q", "participation probabilities must lie in (0, 1]")
    weights = np.where(S, a / q, 0.0)
    return w + weights @ (U - w[None, :]) if S.any() else w.copy()
