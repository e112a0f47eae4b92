"""Money and welfare: remittances (Eq. 12), payments (Eq. 13), utilities (Eq. 3), social
welfare (Eq. 5), and the no-payment utility of baselines (Table 1).

Selection and payments use the REPORTED N, c and K; realised utilities use the TRUE N (in the
gain), the TRUE K (the gain's scale) and the TRUE c (in the sharing cost). With no liar the two
coincide.

Every function here runs over arrays: ``market`` may be a :class:`~mechanisms.ipfl.Market`
or a :class:`~mechanisms.ipfl.MarketArrays` with leading batch dimensions (then ``A``, ``D``
and ``R`` are (..., m, m) and the results (..., m)). :func:`mechanisms.ipfl.clear` and
:func:`mechanisms.ipfl.clear_batch` call these same functions: each equation is written once.
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketInputError
from .market import Market, model_difference

__all__ = ["baseline_support", "baseline_utilities", "bought", "gains", "payments",
           "remittances", "reported_values", "sharing_costs", "utilities", "welfare"]


def bought(A, N) -> np.ndarray:
    """n_i = sum_j a_ij N_j, the data client i obtains (over arrays: A (..., m, m), N
    (..., m)). Summed over the bought pairs only, in seller order (sparse graphs cost
    what they hold; the same sum in bulk and for one market)."""
    A = np.asarray(A, dtype=bool)
    return _bought(_pairs(A), A.shape, np.asarray(N, dtype=np.float64))


def _pairs(A: np.ndarray) -> tuple:
    """``np.nonzero(A)`` (the same index arrays, in C order) from the flat positions: numpy's
    one-dimensional nonzero is about 10x faster than its n-dimensional one on a sparse
    4,000 x 4,000 graph (benchmarks/bench_ipfl.py)."""
    return np.unravel_index(np.flatnonzero(A), A.shape)


def _bought(idx, shape, N) -> np.ndarray:
    """n_i from the bought pairs ``idx`` (np.nonzero of A, shape ``shape``)."""
    rows = np.ravel_multi_index(idx[:-1], shape[:-1]) if len(shape) > 2 else idx[0]
    size = int(np.prod(shape[:-1]))
    n = np.bincount(rows, weights=N[(*idx[:-2], idx[-1])], minlength=size)
    return n.reshape(shape[:-1])


def _gain(gain, A, N, K) -> np.ndarray:
    """G_i(a_i) = g_i(sum_j a_ij N_j) for the given data amounts and gain scales."""
    return gain.value(bought(A, N), K, N)


def _sharing_cost(c, A) -> np.ndarray:
    """c_i * #{j : a_ji = 1}, with inf * 0 = 0 (a pure buyer that sold nothing pays nothing)."""
    c = np.asarray(c, dtype=np.float64)
    sold = np.asarray(A, dtype=bool).sum(axis=-2)
    return np.multiply(c, sold, out=np.zeros(np.broadcast(c, sold).shape), where=sold > 0)


def gains(market: Market, A) -> np.ndarray:
    """G_i(a_i) = g_i(sum_j a_ij N_j) with the TRUE data amounts and the TRUE gain scale K_i
    (computed directly from the graph, never as utility + payment + cost)."""
    return _gain(market.gain, A, market.true_N, market.true_K)


def sharing_costs(market: Market, A) -> np.ndarray:
    """c_i #{j : a_ji = 1} with the TRUE costs (0 for a client that sold nothing)."""
    return _sharing_cost(market.true_c, A)


def reported_values(market: Market, A) -> np.ndarray:
    """v_i(A) = g_i(a_i) - c_i #{j : a_ji = 1} on the REPORTED N, K and c: client i's own
    value as the mechanism sees it (VCG's v_i)."""
    return _gain(market.gain, A, market.N, market.K) - _sharing_cost(market.c, A)


def remittances(market: Market, A, D) -> np.ndarray:
    """Eq. 12: r_ij = a_ij [G_i(a_i) - G_i(a_i - e_j) - lam (N_j/N_i) d_ij], reported values.

    The marginal is evaluated only on the bought pairs (sparse when the graph is).
    """
    A = np.asarray(A, dtype=bool)
    N, K = market.N, market.K
    lam = np.asarray(market.lam, dtype=np.float64)
    idx = _pairs(A)
    n = _bought(idx, A.shape, np.asarray(N, dtype=np.float64))
    lead, i, j = idx[:-2], idx[-2], idx[-1]
    Ni, Nj, Ki, ni = N[(*lead, i)], N[(*lead, j)], K[(*lead, i)], n[(*lead, i)]
    gain = market.gain.value
    with np.errstate(invalid="ignore"):
        marginal = gain(ni, Ki, Ni) - gain(ni - Nj, Ki, Ni)
    R = np.zeros(A.shape)
    R[idx] = marginal - model_difference(Nj, Ni, np.asarray(D)[idx], lam[lead])
    return R


def payments(R: np.ndarray) -> np.ndarray:
    """Eq. 13: p_i = sum_j r_ij - sum_j r_ji (sums to zero: budget balance)."""
    R = np.asarray(R)
    return R.sum(axis=-1) - R.sum(axis=-2)


def utilities(market: Market, A, p, *, G=None, C=None) -> np.ndarray:
    """Eq. 3: U_i = G_i(a_i) - c_i #{j : a_ji = 1} - p_i, with the TRUE N, K and c.

    ``G``, ``C``: :func:`gains` and :func:`sharing_costs` of (market, A) when already
    computed (the clearing passes them; nothing else changes)."""
    G = gains(market, A) if G is None else G
    C = sharing_costs(market, A) if C is None else C
    return G - C - np.asarray(p)


def welfare(market: Market, A, *, G=None, C=None):
    """Eq. 5: SW = sum_i [G_i(a_i) - sum_j a_ij c_j] (true values; payments cancel); a float
    for one market, (...,) for a batch. ``G``, ``C`` as in :func:`utilities`."""
    G = gains(market, A) if G is None else G
    C = sharing_costs(market, A) if C is None else C
    out = G.sum(axis=-1) - C.sum(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def baseline_utilities(market: Market, W) -> np.ndarray:
    """Per-round utility of a baseline that pays nothing (spec, "Money").

    ``W`` is the baseline's (m, m) aggregation matrix: client i gains from the data of every
    other client j with W_ij != 0, and pays c_i for every other client that puts weight on i.

    >>> mk = Market(N=[200.0] * 6, c=[1.0] * 6, K=[2e4] * 6)
    >>> round(50 * float(baseline_utilities(mk, np.ones((6, 6)))[0]), 2)  # Table 1: 45.9
    45.88
    """
    support = baseline_support(market, W)
    return gains(market, support) - sharing_costs(market, support)


def _aggregation(market: Market, W) -> np.ndarray:
    """A baseline's aggregation matrix ``W`` as float64, validated against ``market``."""
    try:
        raw = np.asarray(W)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise MarketInputError("W", "must be an array of numbers") from exc
    if raw.dtype.kind not in "biuf":
        raise MarketInputError("W", f"must be numbers (or booleans), got dtype {raw.dtype}")
    N = np.asarray(market.N)
    want = (*N.shape[:-1], N.shape[-1], N.shape[-1])
    if raw.shape != want:
        raise MarketInputError("W", f"has shape {raw.shape}, expected {want} (the market's "
                                    "clients x clients)")
    W = raw.astype(np.float64)
    if np.isnan(W).any():
        k = tuple(int(x) for x in np.argwhere(np.isnan(W))[0])
        raise MarketInputError("W", f"entry {k} is NaN; must be a number")
    return W


def baseline_support(market: Market, W) -> np.ndarray:
    """(m, m) bool: i draws on j's data in a baseline's aggregation ``W`` (W_ij != 0, j != i)
    and j sells at all. A client with an infinite true cost (a pure buyer) does not sell: its
    column is empty, so it never pays an infinite cost (no -inf utilities) and nobody gains
    its data in the ledger. Over arrays too: a MarketArrays and W (..., m, m). A W of another
    shape than the market's (m, m) (the batch's (..., m, m)), not numbers (booleans are: an
    adjacency) or holding NaN is refused naming ``W``."""
    W = _aggregation(market, W)
    support = (W != 0) & ~np.eye(W.shape[-1], dtype=bool)
    support &= np.isfinite(market.true_c)[..., None, :]
    return support
