"""Neighbour selection: each buyer's sub-problem (Eq. 10), solved three ways.

phi_i(S) = sum_{j in S} P_ij - g_i(sum_{j in S} N_j), separable across buyers.

* :func:`box2`  - the paper's Box 2 as printed: thresholds in descending order (ties: lower
  index first), add j while n + N_j < T_ij, stop at the first failure.
* :func:`local` - the same order, but a failing j is skipped and the scan goes on. The result
  satisfies both conditions of Eq. 11 (no single addition or removal lowers phi_i).
* :func:`exact` - a global minimiser of phi_i per buyer: enumeration of the candidate subsets
  when they are few, dynamic programming over integer data amounts when the N_j are integers,
  an iterative branch-and-bound otherwise (node-limited per buyer, and optionally
  time-limited over all buyers; a proven gap is reported when it stops early). Which method
  ran is reported per buyer.

Box 2 and Eq. 11: the paper says Box 2's output satisfies Eq. 11. It does not always: the break
can leave out a later j whose addition still lowers phi_i (its T is smaller, but so is N_j).
:func:`eq11_violations` finds such cases; the property checker uses it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import MarketInputError, as_int, as_real, check_size
from .market import Market
from .money import bought

__all__ = [
    "BB_NODES_FLOOR",
    "BB_NODES_PER_CANDIDATE",
    "EXACT_METHODS",
    "NODE_LIMIT",
    "RULES",
    "ExactSelection",
    "bb_node_bound",
    "best_subsets",
    "box2",
    "eq11_margins",
    "eq11_violations",
    "exact",
    "exact_enumeration",
    "local",
    "phi",
    "phi_subsets",
    "phi_subsets_arrays",
    "subset_masks",
    "subset_members",
    "subset_sums",
]

RULES = ("box2", "local", "exact")
EXACT_METHODS = ("auto", "enumeration", "dp", "branch-and-bound")
ENUMERATION_MAX = 16  # candidates enumerated outright (2^16 subsets, vectorised)
DP_MAX_CELLS = 50_000_000  # candidates x (total data / gcd) for the dynamic programme
NODE_LIMIT = 20_000  # branch-and-bound nodes per buyer before it stops with a proven gap
BB_NODES_PER_CANDIDATE = 8
BB_NODES_FLOOR = 511
"""The work of :func:`exact`'s branch-and-bound, reported per buyer (``ExactSelection.nodes``,
``OutcomeBatch.exact_nodes``): a buyer with k candidates is searched in at most
min(2^(k+1) - 1, node_limit, BB_NODES_FLOOR + BB_NODES_PER_CANDIDATE (k + 1)) nodes (see
:func:`bb_node_bound`). The first two are proven (each node decides one more candidate, in
or out, so the tree has depth k; the search stops at the node limit); the third is
measured, branch-and-bound being exponential in the worst case: on the 427,290 buyers
searched by it in ``fedmarket prove --engine batch --examples 100000 --subject exact
--property work_bound`` at seeds 0 and 1 (every buyer with a candidate searched that way),
the relaxation bound pruned all but 2-5 nodes per candidate beyond k = 9 (at most 4.65
(k + 1): 377 nodes at k = 80), while a few small searches explored most of their tree (231
of 255 nodes at k = 7, 63 of 63 at k = 5: a generic gain whose relaxation bound is loose).
Declared: the full tree of 8 candidates (511 nodes) plus 8 per candidate (a margin of 1.7
over the largest per-candidate count measured beyond k = 9)."""


def bb_node_bound(k, node_limit: int = NODE_LIMIT) -> np.ndarray:
    """The most branch-and-bound nodes :func:`exact` documents for a buyer with ``k``
    candidates (elementwise): min(2^(k+1) - 1, ``node_limit``, :data:`BB_NODES_FLOOR` +
    :data:`BB_NODES_PER_CANDIDATE` (k + 1)).

    >>> bb_node_bound([0, 3, 8, 80]).tolist()
    [1.0, 15.0, 511.0, 1159.0]
    """
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(over="ignore"):
        full = 2.0 ** (k + 1.0) - 1.0
    return np.minimum.reduce([full, np.full(k.shape, float(node_limit)),
                              BB_NODES_FLOOR + BB_NODES_PER_CANDIDATE * (k + 1.0)])


GREEDY_TOP = 64  # sellers per buyer the greedy scan orders first (more only when needed)


def _greedy(T: np.ndarray, N: np.ndarray, stop_at_first_failure: bool,
            top: int | None = None) -> np.ndarray:
    """Scan every buyer's sellers in descending-threshold order, all buyers at once.

    ``T`` is (..., m, m) and ``N`` (..., m): leading dimensions are independent markets (the
    property checker's batch engine clears thousands at once with this same code).

    Only the top L thresholds of each row are ordered (a partition, then a sort of L):
    every other seller j has T_ij <= cut_i (the L-th largest), so once the scan of the top
    L has bought data n_i with n_i + min_j N_j >= cut_i, no other seller passes
    n_i + N_j < T_ij and the row is final (the skip rule skips them all; Box 2 stops at
    the first). Rows not proven final are scanned again with 8 L, up to the full sort.
    ``top``: L (default :data:`GREEDY_TOP`); any L >= 1 buys the same.
    """
    T = np.asarray(T, dtype=np.float64)
    if T.ndim < 2 or T.shape[-1] != T.shape[-2]:
        raise MarketInputError("T", f"has shape {T.shape}; thresholds are (..., m, m)")
    m = T.shape[-1]
    if np.ndim(N) < 1 or np.shape(N)[-1] != m:
        raise MarketInputError("N", f"has shape {np.shape(N)}; expected (..., {m}), one per "
                                    "client of T")
    top = min(m, GREEDY_TOP if top is None else as_int("top", top, lo=1))
    while True:
        A, final = _greedy_top(T, N, stop_at_first_failure, top)
        if top == m or final.all():
            return A
        top = min(m, 8 * top)


def _top_indices(T, top: int) -> np.ndarray:
    """(..., m, top): the column indices of each row's ``top`` largest entries (unordered),
    a block of rows at a time (no m x m index array)."""
    m = T.shape[-1]
    flat = np.ascontiguousarray(T).reshape(-1, m)
    out = np.empty((flat.shape[0], top), dtype=np.intp)
    step = max(1, 2**16 // m)
    for lo in range(0, flat.shape[0], step):
        part = np.argpartition(flat[lo:lo + step], m - top, axis=-1)
        out[lo:lo + step] = part[:, m - top:]
    return out.reshape((*T.shape[:-1], top))


def _greedy_top(T, N, stop_at_first_failure: bool, top: int):
    """(adjacency, rows proven final) of the scan over each row's ``top`` largest
    thresholds (descending; ties: the lower index first)."""
    m = T.shape[-1]
    if top < m:
        idx = _top_indices(T, top)
        idx.sort(axis=-1)  # ties keep the lower index first in the stable sort below
        Tt = np.take_along_axis(T, idx, axis=-1)
        cut = Tt.min(axis=-1)
    else:
        idx = np.broadcast_to(np.arange(m), T.shape)
        Tt = T
        cut = np.full(T.shape[:-1], -np.inf)
    order = np.argsort(-Tt, axis=-1, kind="stable")
    idx = np.take_along_axis(idx, order, axis=-1)
    Tt = np.take_along_axis(Tt, order, axis=-1)
    Nt = np.take_along_axis(np.broadcast_to(N[..., None, :], T.shape), idx, axis=-1)
    # only sellers above the cut (and with T > 0: T = 0 is never bought) are scanned;
    # columns contiguous per position for the scan
    scan = (Tt > cut[..., None]) & (Tt > 0)
    last = int(scan.sum(axis=-1).max(initial=0))
    Tc = np.moveaxis(Tt[..., :last], -1, 0).copy()
    Nc = np.moveaxis(Nt[..., :last], -1, 0).copy()
    Sc = np.moveaxis(scan[..., :last], -1, 0).copy()
    took = np.zeros(Tc.shape, dtype=bool)
    n = np.zeros(T.shape[:-1])
    active = np.ones(T.shape[:-1], dtype=bool)
    for k in range(last):
        take = active & Sc[k] & (n + Nc[k] < Tc[k])
        took[k] = take
        n += np.where(take, Nc[k], 0.0)
        if stop_at_first_failure:
            active &= take | ~Sc[k]
            if not active.any():
                break
    A = np.zeros(T.shape, dtype=bool)
    np.put_along_axis(A, idx[..., :last], np.moveaxis(took, 0, -1), axis=-1)
    final = (n + N.min(axis=-1)[..., None] >= cut) | ~active
    return A, final


def box2(T: np.ndarray, N: np.ndarray, *, top: int | None = None) -> np.ndarray:
    """Box 2 as printed (stops at the first threshold that fails). ``top``: how many of
    each row's thresholds the scan orders first (default :data:`GREEDY_TOP`; the rest only
    when needed): the same adjacency for any ``top`` >= 1."""
    return _greedy(T, np.asarray(N, dtype=np.float64), stop_at_first_failure=True, top=top)


def local(T: np.ndarray, N: np.ndarray, *, top: int | None = None) -> np.ndarray:
    """Box 2's order, skipping failures: a local optimum in the sense of Eq. 11. ``top`` as
    in :func:`box2`."""
    return _greedy(T, np.asarray(N, dtype=np.float64), stop_at_first_failure=False, top=top)


def phi(market: Market, P: np.ndarray, A: np.ndarray) -> np.ndarray:
    """phi_i(a_i) of Eq. 10 for every buyer (reported values); rows of A are the a_i.

    Over arrays too: a :class:`~mechanisms.ipfl.MarketArrays`, P and A (..., m, m) give
    (..., m)."""
    A = np.asarray(A, dtype=bool)
    cost = np.where(A, P, 0.0).sum(axis=-1)
    return cost - market.gain.value(bought(A, market.N), market.K, market.N)


def subset_masks(k: int) -> np.ndarray:
    """(2^k, k) bool: row s holds the members of subset s (bit j of s set = j in it).

    Built by doubling in place (the subsets holding j are those of the first j members
    plus j), so the call allocates this table alone, k 2^k bytes: the bits of s taken from an
    int64 (2^k, k) table of s >> j would need 8 k 2^k bytes more, 16 k 2^k where numpy
    cannot reuse the temporary of the shift for the mask.

    >>> subset_masks(2).astype(int).tolist()
    [[0, 0], [1, 0], [0, 1], [1, 1]]
    """
    out = np.zeros((1 << k, k), dtype=bool)
    for j in range(k):
        h = 1 << j
        out[h:2 * h, :j] = out[:h, :j]
        out[h:2 * h, j] = True
    return out


def subset_members(s, k: int) -> np.ndarray:
    """(..., k) bool: row ``subset_masks(k)[s]`` for subset numbers ``s`` (...), without the
    (2^k, k) table (bit j of s set = j in it).

    >>> subset_members(np.array([5, 2]), 3).astype(int).tolist()
    [[1, 0, 1], [0, 1, 0]]
    """
    s = np.asarray(s, dtype=np.int64)
    return ((s[..., None] >> np.arange(k)) & 1).astype(bool)


def phi_subsets(market: Market, P: np.ndarray) -> np.ndarray:
    """phi_i(S) of Eq. 10 for every buyer i and every subset S of the m clients (subset s
    holds client j when bit j of s is set): (..., m, 2^m), +inf where S holds a seller i
    cannot buy (an infinite price: a pure buyer, or i itself). Over arrays; for small m
    (global optimality checks and VCG in bulk)."""
    return phi_subsets_arrays(market.N, market.K, market.gain, P)


def phi_subsets_arrays(N, K, gain, P, buyers=None) -> np.ndarray:
    """:func:`phi_subsets` on the arrays ``N``, ``K`` (..., m) and ``P`` (..., m, m) of buyers
    with the gain ``gain`` (what a caller evaluating a batch block by block passes).
    ``buyers`` (..., m) bool: only those buyers' rows, (r, 2^m) in C order of ``buyers``
    (each entry what the full (..., m, 2^m) array holds there, computed alone)."""
    N = np.asarray(N, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    # a seller with a price that is not finite blocks every subset holding it: +inf there
    price = np.where(np.isfinite(P), P, np.inf)
    if buyers is None:
        cost = subset_sums(price)
        value = gain.value(subset_sums(N)[..., None, :], K[..., :, None], N[..., :, None])
        return cost - value
    at = np.nonzero(np.broadcast_to(np.asarray(buyers, dtype=bool), K.shape))
    cost = subset_sums(price[at])
    value = gain.value(subset_sums(N)[at[:-1]], K[at][:, None], N[at][:, None])
    return cost - value


def subset_sums(x) -> np.ndarray:
    """(..., k) -> (..., 2^k): entry s is the sum of ``x`` over the members of subset s (bit
    j of s set = j in it), by doubling: the subsets holding j are those of the first j
    members plus x_j (2^k additions in all, where a product with :func:`subset_masks` takes
    k 2^k).

    >>> subset_sums(np.array([1.0, 2.0, 4.0])).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    """
    x = np.asarray(x, dtype=np.float64)
    k = x.shape[-1]
    out = np.empty((*x.shape[:-1], 1 << k))
    out[..., 0] = 0.0
    with np.errstate(over="ignore"):  # a sum past the float range is inf (prices of 1e308)
        for j in range(k):
            h = 1 << j
            np.add(out[..., :h], x[..., j, None], out=out[..., h:2 * h])
    return out


def eq11_margins(market: Market, P: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(m, m) relative change of phi_i when a_ij alone is flipped: (phi after - phi now) /
    (|g_i| + |P_ij|). Negative: the flip lowers phi_i (Eq. 11 broken when below float
    noise). Pure sellers' rows (K_i = 0, they never buy) and the diagonal are +inf.
    Over arrays too ((..., m, m))."""
    A = np.asarray(A, dtype=bool)
    N, K = market.N, market.K
    n = bought(A, N)
    g = market.gain.value
    base = g(n, K, N)
    with np.errstate(invalid="ignore"):
        flipped_n = np.where(A, n[..., :, None] - N[..., None, :],
                             n[..., :, None] + N[..., None, :])
        dgain = g(flipped_n, K[..., :, None], N[..., :, None]) - base[..., :, None]
        dcost = np.where(A, -P, P)
        delta = dcost - dgain  # phi after the flip minus phi now
    scale = np.abs(base)[..., :, None] + np.where(np.isfinite(P), np.abs(P), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = delta / np.maximum(scale, 1e-12)
    out = np.where(K[..., :, None] > 0, out, np.inf)
    m = N.shape[-1]
    out[..., np.arange(m), np.arange(m)] = np.inf
    return out


def eq11_violations(market: Market, P: np.ndarray, A: np.ndarray, rtol: float = 1e-9):
    """Pairs (i, j) breaking Eq. 11: flipping a_ij strictly lowers phi_i.

    Returns an int array of shape (k, 2). Pure sellers (K_i = 0) are exempt: they never buy.
    A change counts only when it beats float noise (relative tolerance ``rtol``; see
    :func:`eq11_margins`).
    """
    return np.argwhere(eq11_margins(market, P, A) < -rtol)


# ----------------------------------------------------------------------------------------
# exact
# ----------------------------------------------------------------------------------------


def best_subsets(cost, size, n0, K, N, gain, valid=None) -> np.ndarray:
    """Enumeration: for every sub-problem (leading dimensions ...) the subset of its k
    candidates minimising phi = sum of their prices - g(n0 + sum of their data) (Eq. 10):
    ``cost``, ``size`` (..., k), ``n0``, ``K``, ``N`` (...) the data already bought and the
    buyer's parameters; ``valid`` (..., k) marks real candidates (padding is never chosen).
    Ties: the first minimiser in subset order (bit j of s = candidate j). Returns (..., k)
    bool. The one enumeration behind :func:`exact` (scalar) and :func:`exact_enumeration`
    (bulk).

    The subsets' prices and data are summed elementwise (:func:`subset_sums`), so each
    sub-problem's values, and its choice between exactly tied subsets (identical sellers),
    are the same whatever block of sub-problems it is evaluated in: a matrix product with
    the subset masks rounds differently with the number of rows BLAS is given, and a market
    picked another of two tied sellers in a batch than alone (issue 34)."""
    cost = np.asarray(cost, dtype=np.float64)
    size = np.asarray(size, dtype=np.float64)
    k = cost.shape[-1]
    if valid is not None:
        cost = np.where(valid, cost, 0.0)
        size = np.where(valid, size, 0.0)
    n0, K, N = (np.asarray(x, dtype=np.float64)[..., None] for x in (n0, K, N))
    with np.errstate(invalid="ignore"):
        obj = subset_sums(cost) - gain.value(n0 + subset_sums(size), K, N)
    if valid is not None:
        padded = subset_sums(~np.asarray(valid, dtype=bool)) > 0
        obj = np.where(padded, np.inf, obj)
    return subset_members(np.argmin(obj, axis=-1), k)


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
        np.less(cand, best[s:], out=took[idx, s:])
        # in place: where cand < best take cand (prices of candidates are > 0, so no NaN
        # and no -0.0 tells the minimum from that choice)
        np.minimum(best[s:], cand, out=best[s:])
    amounts = np.arange(total + 1) * float(unit)
    obj = best - gfun(n0 + amounts)
    n = int(np.argmin(obj))
    chosen = np.zeros(cost.size, dtype=bool)
    for idx in range(cost.size - 1, -1, -1):
        if took[idx, n]:
            chosen[idx] = True
            n -= int(steps[idx])
    return chosen


_GRID = np.linspace(0.0, 1.0, 5)[:-1]  # points per item segment in the relaxation bound


def _relaxation_bound(rest, n, c, cost, size, n0, gfun) -> float:
    """A lower bound on phi over every superset of the node's set (data n, cost c) drawn from
    ``rest`` (indices sorted by price per unit of data).

    Relaxation: buying data t from ``rest`` costs at least C(t), the fractional-knapsack cost
    (cheapest per unit first, piecewise linear). So phi >= c + C(t) - g(n0 + n + t) =: f(t)
    for t in [0, N(rest)]. f is evaluated on a grid; between grid points u < v the concave g
    lies below its chord extension from the previous interval (whose slope is >= g' on
    [u, v]), which bounds f from below on [u, v]; the first interval uses g <= g(v).
    """
    sizes, costs = size[rest], cost[rest]
    starts = np.concatenate(([0.0], np.cumsum(sizes)[:-1]))
    cstarts = np.concatenate(([0.0], np.cumsum(costs)[:-1]))
    t = (starts[:, None] + sizes[:, None] * _GRID[None, :]).ravel()
    C = (cstarts[:, None] + costs[:, None] * _GRID[None, :]).ravel()
    t = np.append(t, starts[-1] + sizes[-1])
    C = np.append(C, cstarts[-1] + costs[-1])
    g = gfun(n0 + n + t)
    f = c + C - g
    dt = np.diff(t)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope_c = np.diff(C) / dt
        slope_g = np.diff(g) / dt
    lows = [c + C[0] - g[1], f[-1]]
    if t.size > 2:
        # interval k = [t_k, t_k+1] for k >= 1, with the previous interval's g slope
        ext = f[1:-1] + (slope_c[1:] - slope_g[:-1]) * dt[1:]
        lows.append(float(np.min(np.minimum(f[1:-1], np.where(np.isfinite(ext), ext,
                                                                 -np.inf)))))
    return float(min(lows))


def _open_bound(rest, n, c, cost, size, n0, gfun) -> float:
    """A lower bound on phi over a node's set (data n, cost c) and all its supersets from
    ``rest``."""
    return _relaxation_bound(rest, n, c, cost, size, n0, gfun) if rest.size else \
        c - float(gfun(n0 + n))


def _gap(best_set, cost, size, n0, gfun, lower: float) -> float:
    """phi(best_set) minus a lower bound on the optimum: a proven gap (never below 0)."""
    return max(0.0, float(cost[best_set].sum() - gfun(n0 + size[best_set].sum())) - lower)


def _root_gap(cost, size, n0, gfun, chosen) -> float:
    """The proven gap of ``chosen`` against the relaxation bound of the whole sub-problem
    (what an unsearched buyer gets: no node explored, dominated items removed first)."""
    rest = np.argsort(cost / size, kind="stable")
    rest = rest[gfun(n0 + size[rest]) - gfun(n0) - cost[rest] > 0]
    return _gap(chosen, cost, size, n0, gfun, _open_bound(rest, 0.0, 0.0, cost, size, n0, gfun))


def _branch_and_bound(cost, size, n0, gfun, incumbent, node_limit: int,
                      deadline: float = np.inf):
    """Iterative depth-first branch-and-bound (no recursion, so no depth limit).

    Items are branched on in order of price per unit of data (include first). Dominance
    (concavity): an item whose increment at the node's data n does not beat its price never
    lowers phi of any superset, so it leaves the subtree. Bound: :func:`_relaxation_bound`.

    Stops after ``node_limit`` nodes or at ``deadline`` (a ``time.monotonic()`` value);
    returns (best set, proven gap, stopped), the gap being phi(best) minus a lower bound on
    the optimum over every node still open (0 means proven optimal, up to a relative 1e-12),
    ``stopped`` "" (searched to the end), "node-limit" or "time-limit".
    """
    k = cost.size
    order = np.argsort(cost / size, kind="stable")
    best_set = incumbent.copy()
    best_val = float(cost[best_set].sum() - gfun(n0 + size[best_set].sum()))
    # a node: (remaining candidate indices in ratio order, data n, cost c, chosen as a list)
    stack = [(order, 0.0, 0.0, None)]
    nodes = 0
    while stack:
        stopped = "node-limit" if nodes >= node_limit else \
            "time-limit" if time.monotonic() > deadline else ""
        if stopped:
            lower = min(_open_bound(r, n, c, cost, size, n0, gfun) for r, n, c, _ in stack)
            return best_set, max(0.0, best_val - lower), stopped, nodes
        rest, n, c, chosen = stack.pop()
        nodes += 1
        here = c - float(gfun(n0 + n))
        if here < best_val:
            best_val = here
            best_set = np.zeros(k, dtype=bool)
            link = chosen
            while link is not None:
                best_set[link[0]] = True
                link = link[1]
        if rest.size == 0:
            continue
        rest = rest[gfun(n0 + n + size[rest]) - gfun(n0 + n) - cost[rest] > 0]
        if rest.size == 0:
            continue
        tol = 1e-12 * max(1.0, abs(best_val))
        if _relaxation_bound(rest, n, c, cost, size, n0, gfun) >= best_val - tol:
            continue
        j, tail = int(rest[0]), rest[1:]
        stack.append((tail, n, c, chosen))  # exclude j (explored second)
        stack.append((tail, n + size[j], c + cost[j], (j, chosen)))  # include j (first)
    return best_set, 0.0, "", nodes


@dataclass(frozen=True, eq=False)
class ExactSelection:
    """What :func:`exact` found, with the leading batch dimensions (...) of its input: the
    adjacency (..., m, m), the method per buyer (..., m) ("none" when nothing was left to
    search, "time-limit" when the time budget ran out before the buyer's turn: the local
    rule's choice), per buyer a proven gap (..., m) (phi found minus a lower bound on the
    optimum; 0 = proven optimal, > 0 only when a node or time limit stopped the search),
    ``stopped``: "" (every buyer searched to the end), "node-limit" or "time-limit", and per
    buyer (..., m) the ``nodes`` its branch-and-bound explored (0 for the other methods;
    bounded by :func:`bb_node_bound`; None when not given).

    Sealed as every result of the toolkit (``proofs.seal``): frozen, its arrays read-only.
    An array already read-only is kept as it is (:func:`exact` freezes the arrays it made,
    no copy); any other is copied first, so an array the caller still holds is never made
    read-only."""

    adjacency: np.ndarray
    methods: np.ndarray
    gaps: np.ndarray
    stopped: str = ""
    nodes: np.ndarray | None = None

    def __post_init__(self):
        for name in ("adjacency", "methods", "gaps", "nodes"):
            value = getattr(self, name)
            if name == "nodes" and value is None:
                continue
            if not isinstance(value, np.ndarray) or value.flags.writeable:
                value = np.array(value)
                value.setflags(write=False)
                object.__setattr__(self, name, value)


ENUMERATION_CHUNK = 2**22  # subset x candidate entries one enumeration step evaluates


def _enumerate_rows(rows, k, cost, size, n0, K, N, gain, A, cand_idx) -> None:
    """The enumeration of :func:`best_subsets` for the buyers ``rows`` (flat indices), all
    with ``k`` candidates (their indices ``cand_idx`` (len(rows), k), in descending-threshold
    order): every subset of each buyer's candidates at once, a block of buyers at a time;
    the optimum written into ``A`` (flat (rows, m))."""
    step = max(1, ENUMERATION_CHUNK // ((1 << k) * k))
    for lo in range(0, rows.size, step):
        r = rows[lo:lo + step]
        idx = cand_idx[lo:lo + step]
        chosen = best_subsets(np.take_along_axis(cost[r], idx, axis=-1),
                              np.take_along_axis(size[r], idx, axis=-1), n0[r], K[r], N[r],
                              gain)
        sub = A[r]  # fancy index: a copy, written back
        np.put_along_axis(sub, idx, chosen | np.take_along_axis(sub, idx, axis=-1), axis=-1)
        A[r] = sub


def exact(market: Market, P: np.ndarray, T: np.ndarray, method: str = "auto", *,
          node_limit: int = NODE_LIMIT, time_limit: float | None = None,
          progress: Callable[[int, int], None] | None = None) -> ExactSelection:
    """A global minimiser of phi_i (Eq. 10) for every buyer, over arrays: ``market`` a
    :class:`Market` or a :class:`~mechanisms.ipfl.MarketArrays` with leading batch
    dimensions, ``P`` and ``T`` (..., m, m); every buyer of every market at once
    (:func:`mechanisms.ipfl.clear` runs it on a batch of one market).

    Reduction first: sellers with P_ij <= 0 are always in an optimum (T = inf), sellers with
    P_ij >= g_i(N_j) never need to be (T = 0: by concavity their increment never beats the
    price); only the rest (0 < T < inf), in descending-threshold order (ties: the lower
    index first), are searched. Method per buyer (``method="auto"``): enumeration of the
    candidate subsets when there are at most ``ENUMERATION_MAX`` (every such buyer of the
    batch at once, grouped by candidate count; ties: the first minimiser in subset order,
    :func:`best_subsets`), else the dynamic programme over integer data amounts when the
    market's N are integers and the table fits, else branch-and-bound; those two run buyer
    by buyer. A forced ``method`` runs every buyer that way. Enumeration and the dynamic
    programme refuse (ProblemTooLarge) sizes whose tables exceed the memory guard;
    branch-and-bound searches at most ``node_limit`` nodes per buyer and reports the proven
    gap when it stops early (never a wrong claim of optimality).

    ``time_limit`` (seconds, default None: no limit) bounds the whole selection: the
    enumerations run first; when it runs out, the buyer being searched by branch-and-bound
    stops with its proven gap, and every buyer not yet reached keeps the local rule's choice
    with the gap proven by the relaxation bound of its whole sub-problem (method
    "time-limit"). Enumeration and the dynamic programme are not interrupted (each is
    bounded by its size guard). A time limit makes the result depend on the machine's speed;
    the node limit does not. ``progress(done, total)`` counts the buyers (K_i > 0) done:
    (0, total) first; then at once the buyers settled without a search of their own (nothing
    to search, or enumerated), if any; then one more per buyer searched on its own (the
    dynamic programme, branch-and-bound, or out of time: ``methods`` says which), so that
    the last report is (total, total), made once.
    """
    if method not in EXACT_METHODS:
        raise MarketInputError("exact_method", f"unknown {method!r}; choose one of "
                                               f"{EXACT_METHODS}")
    node_limit = as_int("exact_node_limit", node_limit, lo=1)
    deadline = np.inf
    if time_limit is not None:
        deadline = time.monotonic() + as_real("exact_time_limit", time_limit, lo=0)
    N = np.asarray(market.N, dtype=np.float64)
    K = np.asarray(market.K, dtype=np.float64)
    T = np.asarray(T, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    shape, m = T.shape, T.shape[-1]
    rows = int(np.prod(shape[:-1]))
    A = np.isinf(T).reshape(rows, m)
    Tf, Pf = T.reshape(rows, m), P.reshape(rows, m)
    Nm = N.reshape(-1, m)  # (markets, m)
    size = np.repeat(Nm, m, axis=0)  # (rows, m): the sellers' N for every buyer row
    Kf, Nf = K.reshape(rows), N.reshape(rows)
    integer = np.repeat((Nm == np.round(Nm)).all(axis=1), m)
    if method == "dp" and not integer.all():
        raise MarketInputError("exact_method", "'dp' needs integer data amounts N")
    cand = (Tf > 0) & np.isfinite(Tf) & (Kf[:, None] > 0)
    k = cand.sum(axis=1)
    order = np.argsort(-np.where(cand, Tf, -np.inf), axis=1, kind="stable")
    n0 = bought(A.reshape(shape), N).reshape(rows)  # the data always bought (T = inf)
    methods = np.full(rows, "none", dtype=object)
    gaps = np.zeros(rows)
    nodes = np.zeros(rows, dtype=np.int64)
    buyers = int((Kf > 0).sum())
    done = 0
    if progress is not None:
        progress(0, buyers)
    use = np.full(rows, "none", dtype=object)
    if method == "auto":
        small = (k > 0) & (k <= ENUMERATION_MAX)
        use[small] = "enumeration"
        big = np.flatnonzero(k > ENUMERATION_MAX)
        for r in big:
            sz = size[r, order[r, :k[r]]]
            use[r] = "dp" if integer[r] and k[r] * _dp_width(sz) <= DP_MAX_CELLS \
                else "branch-and-bound"
    else:
        use[k > 0] = method
    for kk in np.unique(k[use == "enumeration"]):
        r = np.flatnonzero((use == "enumeration") & (k == kk))
        if time.monotonic() > deadline:  # out of time: the buyers keep the local choice
            use[r] = "time-limit"
            continue
        # 9 k 2^k bytes: an upper estimate; one buyer's enumeration holds four float64 rows
        # of 2^k at its peak (32 x 2^k bytes measured, tests/test_selection.py), a block of
        # buyers at most ENUMERATION_CHUNK / k of them; refuses k >= 26
        check_size("exact_method", 9.0 * kk * 2.0**kk,
                   f"enumerating 2^{kk} subsets for buyer {int(r[0]) % m}",
                   "use exact_method='auto' or 'branch-and-bound'")
        _enumerate_rows(r, int(kk), Pf, size, n0, Kf, Nf, market.gain, A, order[r, :kk])
        methods[r] = "enumeration"
    enum = methods == "enumeration"
    # the buyers settled without a search of their own: nothing to search, or enumerated
    done = int(((enum | (k == 0)) & (Kf > 0)).sum())
    if progress is not None and done:
        progress(done, buyers)
    stopped = ""
    fallback = None
    for r in np.flatnonzero(~enum & (k > 0)):
        cidx = order[r, :k[r]]
        cost, sz = Pf[r, cidx], size[r, cidx]
        Ki, Ni = Kf[r], Nf[r]

        def gfun(x, Ki=Ki, Ni=Ni):
            return market.gain.value(x, Ki, Ni)

        how = use[r]
        if time.monotonic() > deadline:
            how = "time-limit"
        if how == "dp":
            check_size("exact_method", 9.0 * sz.size * (_dp_width(sz) + 1),
                       f"the dynamic programme for buyer {int(r) % m} ({sz.size} candidates x "
                       f"{_dp_width(sz):.3g} data units)",
                       "use exact_method='auto' or 'branch-and-bound'")
            chosen = _dp(cost, sz, n0[r], gfun)
        else:
            if fallback is None:
                fallback = local(T, N).reshape(rows, m)
            if how == "time-limit":
                chosen = fallback[r, cidx]
                gaps[r] = _root_gap(cost, sz, n0[r], gfun, chosen)
                stopped = "time-limit"
            else:
                chosen, gaps[r], why, nodes[r] = _branch_and_bound(
                    cost, sz, n0[r], gfun, fallback[r, cidx], node_limit, deadline)
                if why and stopped != "time-limit":
                    stopped = why
        A[r, cidx[chosen]] = True
        methods[r] = how
        done += 1
        if progress is not None:
            progress(done, buyers)
    found = (A.reshape(shape), methods.reshape(shape[:-1]), gaps.reshape(shape[:-1]))
    counted = nodes.reshape(shape[:-1])
    for arr in (*found, counted):  # made here, held by nobody else: sealed without a copy
        arr.setflags(write=False)
    return ExactSelection(*found, stopped, counted)


def exact_enumeration(market: Market, P: np.ndarray, T: np.ndarray) -> np.ndarray:
    """The adjacency of :func:`exact` with every buyer's candidates enumerated (kept name):
    ``exact(market, P, T, "enumeration").adjacency``, over arrays."""
    return exact(market, P, T, "enumeration").adjacency
