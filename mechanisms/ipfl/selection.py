"""Neighbour selection: each buyer's sub-problem (Eq. 10), solved three ways.

phi_i(S) = sum_{j in S} P_ij - g_i(sum_{j in S} N_j), separable across buyers.

* :func:`box2`  - the paper's Box 2 as printed: thresholds in descending order (ties: lower
  index first), add j while n + N_j < T_ij, stop at the first failure.
* :func:`local` - the same order, but a failing j is skipped and the scan goes on. The result
  satisfies both conditions of Eq. 11 (no single addition or removal lowers phi_i).
* :func:`exact` - a global minimiser of phi_i per buyer: enumeration of the candidate subsets
  when they are few, dynamic programming over integer data amounts when the N_j are integers,
  branch-and-bound otherwise. Which method ran is reported per buyer.

Box 2 and Eq. 11: the paper says Box 2's output satisfies Eq. 11. It does not always: the break
can leave out a later j whose addition still lowers phi_i (its T is smaller, but so is N_j).
:func:`eq11_violations` finds such cases; the property checker uses it.
"""

from __future__ import annotations

import numpy as np

from .market import Market

__all__ = [
    "EXACT_METHODS",
    "RULES",
    "box2",
    "eq11_violations",
    "exact",
    "local",
    "phi",
]

RULES = ("box2", "local", "exact")
EXACT_METHODS = ("auto", "enumeration", "dp", "branch-and-bound")
ENUMERATION_MAX = 16  # candidates enumerated outright (2^16 subsets, vectorised)
DP_MAX_CELLS = 50_000_000  # candidates x (total data / gcd) for the dynamic programme


def _greedy(T: np.ndarray, N: np.ndarray, stop_at_first_failure: bool) -> np.ndarray:
    """Scan every buyer's sellers in descending-threshold order, all buyers at once."""
    m = T.shape[0]
    order = np.argsort(-T, axis=1, kind="stable")  # stable: ties keep the lower index first
    T_sorted = np.take_along_axis(T, order, axis=1)
    rows = np.arange(m)
    A = np.zeros((m, m), dtype=bool)
    n = np.zeros(m)
    active = np.ones(m, dtype=bool)
    last = int((T_sorted > 0).sum(axis=1).max(initial=0))  # T = 0 is never bought
    for k in range(last):
        cols = order[:, k]
        take = active & (n + N[cols] < T_sorted[:, k])
        A[rows[take], cols[take]] = True
        n += np.where(take, N[cols], 0.0)
        if stop_at_first_failure:
            active &= take
            if not active.any():
                break
    return A


def box2(T: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Box 2 as printed (stops at the first threshold that fails)."""
    return _greedy(T, np.asarray(N, dtype=np.float64), stop_at_first_failure=True)


def local(T: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Box 2's order, skipping failures: a local optimum in the sense of Eq. 11."""
    return _greedy(T, np.asarray(N, dtype=np.float64), stop_at_first_failure=False)


def phi(market: Market, P: np.ndarray, A: np.ndarray) -> np.ndarray:
    """phi_i(a_i) of Eq. 10 for every buyer (reported values); rows of A are the a_i."""
    A = np.asarray(A, dtype=bool)
    bought = A @ market.N
    cost = np.where(A, P, 0.0).sum(axis=1)
    return cost - market.gain.value(bought, market.K, market.N)


def eq11_violations(market: Market, P: np.ndarray, A: np.ndarray, rtol: float = 1e-9):
    """Pairs (i, j) breaking Eq. 11: flipping a_ij strictly lowers phi_i.

    Returns an int array of shape (k, 2). Pure sellers (K_i = 0) are exempt: they never buy.
    A change counts only when it beats float noise (relative tolerance ``rtol``).
    """
    A = np.asarray(A, dtype=bool)
    N, K = market.N, market.K
    n = A @ N
    g = market.gain.value
    base = g(n, K, N)
    with np.errstate(invalid="ignore"):
        flipped_n = np.where(A, n[:, None] - N[None, :], n[:, None] + N[None, :])
        dgain = g(flipped_n, K[:, None], N[:, None]) - base[:, None]
        dcost = np.where(A, -P, P)
        delta = dcost - dgain  # phi after the flip minus phi now
    scale = np.abs(base)[:, None] + np.where(np.isfinite(P), np.abs(P), 0.0)
    bad = (delta < -rtol * np.maximum(scale, 1e-12)) & (K[:, None] > 0)
    np.fill_diagonal(bad, False)
    return np.argwhere(bad)


# ----------------------------------------------------------------------------------------
# exact
# ----------------------------------------------------------------------------------------


def _enumerate(cost, size, n0, gfun):
    k = cost.size
    masks = ((np.arange(1 << k)[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)
    obj = masks @ cost - gfun(n0 + masks @ size)
    return masks[int(np.argmin(obj))]


def _dp_width(size) -> float:
    """Columns of the dynamic programme: total data in units of the gcd of the sizes."""
    return float(size.sum() / np.gcd.reduce(size.astype(np.int64)))


def _dp(cost, size, n0, gfun):
    """0/1 knapsack over integer data amounts: min cost to obtain exactly n, then min over n."""
    sizes = size.astype(np.int64)
    unit = int(np.gcd.reduce(sizes))
    steps = sizes // unit
    total = int(steps.sum())
    best = np.full(total + 1, np.inf)
    best[0] = 0.0
    took = np.zeros((cost.size, total + 1), dtype=bool)
    for idx, (s, p) in enumerate(zip(steps, cost, strict=True)):
        cand = best[:-s] + p
        better = cand < best[s:]
        took[idx, s:] = better
        best[s:] = np.where(better, cand, best[s:])
    amounts = np.arange(total + 1) * float(unit)
    obj = best - gfun(n0 + amounts)
    n = int(np.argmin(obj))
    chosen = np.zeros(cost.size, dtype=bool)
    for idx in range(cost.size - 1, -1, -1):
        if took[idx, n]:
            chosen[idx] = True
            n -= int(steps[idx])
    return chosen


def _branch_and_bound(cost, size, n0, gfun, incumbent):
    """Depth-first search with the concavity bound: from a partial set with data n, the most
    the remaining items R can lower phi is sum_{j in R} max(0, g(n + N_j) - g(n) - P_j),
    because the increments of a concave g are subadditive."""
    k = cost.size
    best_set = incumbent.copy()
    best_val = float(cost[best_set].sum() - gfun(n0 + size[best_set].sum()))
    chosen = np.zeros(k, dtype=bool)

    def visit(idx, n, c):
        nonlocal best_val, best_set
        here = c - gfun(n0 + n)
        if here < best_val:
            best_val, best_set = here, chosen.copy()
        if idx == k:
            return
        rest_gain = gfun(n0 + n + size[idx:]) - gfun(n0 + n) - cost[idx:]
        if here - np.clip(rest_gain, 0.0, None).sum() >= best_val:
            return
        chosen[idx] = True
        visit(idx + 1, n + size[idx], c + cost[idx])
        chosen[idx] = False
        visit(idx + 1, n, c)

    visit(0, 0.0, 0.0)
    return best_set


def exact(market: Market, P: np.ndarray, T: np.ndarray, method: str = "auto"):
    """A global minimiser of phi_i (Eq. 10) for every buyer.

    Reduction first: sellers with P_ij <= 0 are always in an optimum (T = inf), sellers with
    P_ij >= g_i(N_j) never need to be (T = 0: by concavity their increment never beats the
    price); only the rest (0 < T < inf) are searched. Returns (A, methods) where ``methods[i]``
    names what ran for buyer i ("none" when nothing was left to search).
    """
    if method not in EXACT_METHODS:
        raise ValueError(f"exact_method: unknown {method!r}; choose one of {EXACT_METHODS}")
    m = market.m
    N, K = market.N, market.K
    A = np.zeros((m, m), dtype=bool)
    A[np.isinf(T)] = True
    methods = np.full(m, "none", dtype=object)
    integer = bool(np.all(N == np.round(N)))
    fallback = local(T, N)
    for i in np.flatnonzero(K > 0):
        cand = np.flatnonzero((T[i] > 0) & np.isfinite(T[i]))
        if cand.size == 0:
            continue
        cand = cand[np.argsort(-T[i, cand], kind="stable")]
        cost, size = P[i, cand], N[cand]
        n0 = float(N[A[i]].sum())
        Ki, Ni = K[i], N[i]

        def gfun(x, Ki=Ki, Ni=Ni):
            return market.gain.value(x, Ki, Ni)

        use = method
        if use == "auto":
            if cand.size <= ENUMERATION_MAX:
                use = "enumeration"
            elif integer and cand.size * _dp_width(size) <= DP_MAX_CELLS:
                use = "dp"
            else:
                use = "branch-and-bound"
        if use == "enumeration":
            chosen = _enumerate(cost, size, n0, gfun)
        elif use == "dp":
            if not integer:
                raise ValueError("exact_method: 'dp' needs integer data amounts N")
            chosen = _dp(cost, size, n0, gfun)
        else:
            chosen = _branch_and_bound(cost, size, n0, gfun, fallback[i, cand])
        A[i, cand[chosen]] = True
        methods[i] = use
    return A, methods
