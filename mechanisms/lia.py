"""LIA clustering (Rokvic et al., IJCNN 2025; spec lia.md): from an influence matrix to clusters.

``I[i, j]`` is the lazy influence of client j on client i (> 0: j's update lowers i's validation
loss). Pure NumPy; the models' per-sample losses are computed in :mod:`learning.lia` (torch),
the scores from them here:

* :func:`influence`: I(i, j) = L(theta_0; Z_i) - L(theta_j; Z_i), mean losses over client i's
  validation samples, from the per-sample losses of the joint model and of every partial model.

* :func:`beneficial_sets`: per client i, an exact 1-D 2-means of the row I[i, :] (sorting and
  prefix sums, no random restarts); the group with the higher centre is C_i, i itself included.
  No-split rule (ours): when the gap between the two centres is below
  ``min_gap = rtol * (max |I[i, :]|) + atol``, or the row has fewer than two distinct values,
  C_i is everyone.
* :func:`cluster`: ``mode="central"`` keeps an edge i - j only when j is in C_i and i is in C_j
  and returns the connected components as cluster ids (numbered by first client); ``mode="p2p"``
  returns each client's personal neighbourhood instead: the (m, m) bool matrix of C_i (row i),
  since in peer-to-peer mode every client aggregates over its own set. The number of clusters is
  never an input.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import connected_components

from .errors import MarketInputError, as_real

__all__ = ["adjusted_rand_index", "beneficial_sets", "cluster", "influence", "two_means_1d"]


def _check(I) -> np.ndarray:
    try:
        M = np.asarray(I, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MarketInputError("I", f"must be numeric, got {type(I).__name__}") from exc
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise MarketInputError("I", f"must be a non-empty square (m, m) matrix, got {M.shape}")
    if not np.isfinite(M).all():
        bad = tuple(int(k) for k in np.argwhere(~np.isfinite(M))[0])
        raise MarketInputError("I", f"entry {bad} is {M[bad]!r}; scores must be finite")
    return M


def influence(base_losses, model_losses, owner) -> np.ndarray:
    """Lazy influence scores (spec lia.md, "Score"): I[i, j] = L(theta_0; Z_i) - L(theta_j; Z_i),
    each L the MEAN loss over client i's validation samples Z_i. ``base_losses`` (n,) are the
    joint model theta_0's per-sample losses, ``model_losses`` (m, n) those of each client's
    partial model theta_j, ``owner`` (n,) the client (0..m-1) each sample belongs to; every
    client needs at least one sample. Per-client means by one bincount per model.

    >>> influence([1.0, 1.0, 2.0], [[0.5, 0.5, 2.5], [1.5, 1.5, 1.0]], [0, 0, 1]).tolist()
    [[0.5, -0.5], [-0.5, 1.0]]
    """
    losses = np.asarray(model_losses, dtype=np.float64)
    if losses.ndim != 2 or losses.shape[0] == 0 or losses.shape[1] == 0:
        raise MarketInputError("model_losses", f"must be (m, n) per-sample losses, got shape "
                                               f"{losses.shape}")
    m, n = losses.shape
    base = np.asarray(base_losses, dtype=np.float64)
    if base.shape != (n,):
        raise MarketInputError("base_losses", f"must be ({n},) like model_losses' rows, got "
                                              f"shape {base.shape}")
    raw = np.asarray(owner)
    if raw.shape != (n,) or (raw.size and not np.issubdtype(raw.dtype, np.integer)):
        raise MarketInputError("owner", f"must be ({n},) client indices, got {raw.dtype} of "
                                        f"shape {raw.shape}")
    who = raw.astype(np.int64)
    if who.min() < 0 or who.max() >= m:
        raise MarketInputError("owner", f"holds {int(who.min())}..{int(who.max())}; clients are "
                                        f"0..{m - 1}")
    counts = np.bincount(who, minlength=m)
    if (counts == 0).any():
        raise MarketInputError("owner", f"client {int(np.argmin(counts))} has no validation "
                                        "sample")
    for field, x in (("base_losses", base), ("model_losses", losses)):
        if not np.isfinite(x).all():
            raise MarketInputError(field, f"{_describe_bad(x)}; losses must be finite")
    before = np.bincount(who, weights=base, minlength=m) / counts
    after = np.stack([np.bincount(who, weights=row, minlength=m) for row in losses]) / counts
    return before[:, None] - after.T


def _describe_bad(x: np.ndarray) -> str:
    where = tuple(int(k) for k in np.argwhere(~np.isfinite(x))[0])
    return f"entry {where[0] if len(where) == 1 else where} is {float(x[where])!r}"


def two_means_1d(values):
    """Exact 2-means of 1-D values: returns (high_mask, low_centre, high_centre).

    The optimal split of sorted values is contiguous; every split point is scored with prefix
    sums in O(m log m) overall. Ties in the objective go to the first (lowest) split.
    """
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    s = v[order]
    m = s.size
    if m < 2 or s[0] == s[-1]:
        return np.ones(m, dtype=bool), float(s.mean()), float(s.mean())
    csum, csq = np.cumsum(s), np.cumsum(s * s)
    k = np.arange(1, m)  # size of the low group
    lo_sse = csq[k - 1] - csum[k - 1] ** 2 / k
    hi_sum, hi_sq = csum[-1] - csum[k - 1], csq[-1] - csq[k - 1]
    hi_sse = hi_sq - hi_sum**2 / (m - k)
    best = int(np.argmin(lo_sse + hi_sse))
    n_lo = best + 1
    high = np.zeros(m, dtype=bool)
    high[order[n_lo:]] = True
    return high, float(s[:n_lo].mean()), float(s[n_lo:].mean())


def beneficial_sets(I, *, rtol: float = 1e-3, atol: float = 1e-12) -> np.ndarray:
    """(m, m) bool: row i is C_i, the clients whose updates help i (i always included).

    >>> beneficial_sets([[1.0, 0.9, -0.5], [0.8, 1.0, -0.4], [-0.3, -0.2, 1.0]]).astype(int)
    array([[1, 1, 0],
           [1, 1, 0],
           [0, 0, 1]])
    """
    M = _check(I)
    rtol = as_real("rtol", rtol, lo=0)
    atol = as_real("atol", atol, lo=0)
    m = M.shape[0]
    out = np.ones((m, m), dtype=bool)
    for i in range(m):
        high, lo_c, hi_c = two_means_1d(M[i])
        if hi_c - lo_c > rtol * np.abs(M[i]).max() + atol:
            out[i] = high
        out[i, i] = True
    return out


def cluster(I, mode: str = "central", **kwargs) -> np.ndarray:
    """Cluster ids (central) or personal neighbourhoods (p2p); see the module docstring."""
    sets = beneficial_sets(I, **kwargs)
    if mode == "p2p":
        return sets
    if mode != "central":
        raise MarketInputError("mode", f"unknown {mode!r}; choose 'central' or 'p2p'")
    mutual = sets & sets.T
    _, labels = connected_components(mutual, directed=False)
    # renumber by order of first appearance, so the ids do not depend on scipy's internals
    _, first = np.unique(labels, return_index=True)
    rank = np.empty(first.size, dtype=int)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[labels]


def adjusted_rand_index(a, b) -> float:
    """Adjusted Rand index of two labelings (1 = identical partitions up to renaming).

    >>> adjusted_rand_index([0, 0, 1, 1], [5, 5, 7, 7])
    1.0
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise MarketInputError("labels", "two 1-D labelings of the same length are needed")
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(table, (ai, bi), 1)

    def comb2(x):
        return x * (x - 1) / 2.0

    index = comb2(table).sum()
    sa, sb = comb2(table.sum(1)).sum(), comb2(table.sum(0)).sum()
    expected = sa * sb / comb2(a.size) if a.size > 1 else 0.0
    top = 0.5 * (sa + sb)
    if top == expected:
        return 1.0
    return float((index - expected) / (top - expected))
