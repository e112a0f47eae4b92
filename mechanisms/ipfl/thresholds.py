"""Box 2 thresholds T_ij for all m^2 pairs at once.

T_ij solves g_i(T) - g_i(T - N_j) = P_ij with T >= N_j, P_ij the price of j for i (Eq. 10).
Paper convention: 0 = j is never worth buying, +inf = always worth buying. Adding j on top of
n already-bought data lowers phi_i exactly when n + N_j < T_ij.

Two modes:

* ``"exact"`` (default): the true root (closed form for the sqrt gain, vectorised bisection for
  any other increasing concave gain).
* ``"published"``: the outcomes of the published code's numerics (spec, last section). Its
  unbracketed root finder, started at 3 N_j on a residual that is 0 below N_j, stalls in the
  flat region whenever the own-data-inclusive root x = N_i + T is at most 2 N_j (then j is never
  bought), and runs off to a huge value when P_ij = 0 (then j is always bought).
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketInputError
from .market import Market

__all__ = ["MODES", "thresholds"]

MODES = ("exact", "published")


def thresholds(market: Market, D, mode: str = "exact", prices=None) -> np.ndarray:
    """(m, m) thresholds T_ij; rows of pure sellers (K_i = 0) and the diagonal are 0.

    ``D`` must already be validated (see :meth:`Market.check_distances`). ``prices``: the
    (m, m) prices P_ij buyers face (default: the paper's, :meth:`Market.prices`); a price
    rule of your own passes its own here. Over arrays too: ``market`` a
    :class:`~mechanisms.ipfl.MarketArrays` with leading batch dimensions gives (..., m, m).

    >>> import numpy as np
    >>> mk = Market(N=[100.0, 100.0], c=[0.0, 0.0], K=[1e4, 1e4], lam=0.0)
    >>> thresholds(mk, np.zeros((2, 2)))  # free models are always worth buying
    array([[ 0., inf],
           [inf,  0.]])
    """
    if mode not in MODES:
        raise MarketInputError("thresholds", f"unknown mode {mode!r}; choose one of {MODES}")
    P = market.prices(D) if prices is None else np.asarray(prices, dtype=np.float64)
    N, K = market.N, market.K
    Nj, Ni, Ki = N[..., None, :], N[..., :, None], K[..., :, None]
    T = market.gain.thresholds(P, Nj, Ki, Ni)
    pure = K == 0  # a pure seller never buys, whatever the prices
    if pure.any():
        np.copyto(T, 0.0, where=pure[..., :, None])
    m = N.shape[-1]
    T[..., np.arange(m), np.arange(m)] = 0.0
    if mode == "published":
        stalled = np.isfinite(T) & (T > 0) & (Ni + T <= 2.0 * Nj)
        T[stalled] = 0.0
        # a price of 0 (the published finder runs off: always bought) is already inf above
        # (P <= 0); the diagonal and pure sellers' rows stay 0 whatever their prices
    return T
