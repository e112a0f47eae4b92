"""Unbiased aggregation under randomised participation (spec cpl.md, first section).

w^{r+1} = w^r + sum_{n in S} (a_n / q_n) (w_n^{r+1} - w^r), S the clients that showed up,
each independently with probability q_n. E[w^{r+1}] = sum_n a_n w_n^{r+1}. An empty round
leaves w unchanged.
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketInputError, as_floats, as_vector
from .game import normalised_weights

__all__ = ["unbiased_aggregate"]


def unbiased_aggregate(w, updates, participated, a, q) -> np.ndarray:
    """One aggregation step. ``updates`` (N, p) are the clients' new models w_n^{r+1} (rows of
    absent clients are ignored, even NaN), ``participated`` (N,) bool; ``a`` the weights a_n
    (> 0, normalised to sum to 1 as a :class:`~mechanisms.cpl.game.Game`'s are: data sizes
    d_n will do), ``q`` the participation probabilities in (0, 1].

    >>> unbiased_aggregate([0.0], [[1.0], [3.0]], [True, False], [0.5, 0.5], [0.5, 0.5])
    array([1.])
    """
    w = as_floats("w", w)
    U = as_floats("updates", updates)
    S = np.asarray(participated, dtype=bool)
    a = as_vector("a", a, positive=True)
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
    if np.isnan(q).any():
        raise MarketInputError("q", f"entry {int(np.flatnonzero(np.isnan(q))[0])} is NaN; "
                                    "participation probabilities must lie in (0, 1]")
    if not np.isfinite(w).all():
        raise MarketInputError("w", "must be finite")
    bad = S[:, None] & ~np.isfinite(U)
    if bad.any():
        raise MarketInputError("updates", f"row {int(np.argwhere(bad)[0][0])} (a client that "
                                          "participated) holds NaN or inf")
    a = normalised_weights(a)
    U = np.where(S[:, None], U, w[None, :])  # an absent client's row: w itself, its step 0
    weights = np.where(S, a / q, 0.0)
    return w + weights @ (U - w[None, :]) if S.any() else w.copy()
