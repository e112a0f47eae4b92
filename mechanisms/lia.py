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

from .errors import MarketInputError, as_floats, as_real

__all__ = ["adjusted_rand_index", "beneficial_sets", "cluster", "influence", "two_means_1d"]


def _check(I) -> np.ndarray:
    M = as_floats("I", I)  # text, booleans and complex refused, not converted
    if M.ndim < 2 or M.shape[-1] != M.shape[-2] or M.shape[-1] == 0:
        raise MarketInputError("I", f"must be a non-empty square (m, m) matrix (or a batch "
                                    f"(..., m, m)), got {M.shape}")
    if not np.isfinite(M).all():
        bad = tuple(int(k) for k in np.argwhere(~np.isfinite(M))[0])
        raise MarketInputError("I", f"entry {bad} is {float(M[bad])!r}; scores must be finite")
    return M


def influence(base_losses, model_losses, owner) -> np.ndarray:
    """Lazy influence scores (spec lia.md, "Score"): I[i, j] = L(theta_0; Z_i) - L(theta_j; Z_i),
    each L the MEAN loss over client i's validation samples Z_i. ``base_losses`` (n,) are the
    joint model theta_0's per-sample losses, ``model_losses`` (m, n) those of each client's
    partial model theta_j, ``owner`` (n,) the client (0..m-1) each sample belongs to; every
    client needs at least one sample. Over batches too: ``base_losses`` (..., n) and
    ``model_losses`` (..., m, n) with one ``owner`` give (..., m, m). The per-client means are
    each client's samples added in sample order, then divided by their count: the same bits
    for an instance alone as inside any batch.

    >>> influence([1.0, 1.0, 2.0], [[0.5, 0.5, 2.5], [1.5, 1.5, 1.0]], [0, 0, 1]).tolist()
    [[0.5, -0.5], [-0.5, 1.0]]
    """
    losses = as_floats("model_losses", model_losses)
    if losses.ndim < 2 or losses.shape[-2] == 0 or losses.shape[-1] == 0:
        raise MarketInputError("model_losses", f"must be (m, n) per-sample losses, got shape "
                                               f"{losses.shape}")
    m, n = losses.shape[-2:]
    base = as_floats("base_losses", base_losses)
    if base.shape != (*losses.shape[:-2], n):
        raise MarketInputError("base_losses", f"must be {(*losses.shape[:-2], n)} like "
                                              f"model_losses' rows, got shape {base.shape}")
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
    before = _client_means(base, who, counts)  # (..., m): L(theta_0; Z_i)
    after = _client_means(losses, who, counts)  # (..., j, i): L(theta_j; Z_i)
    return before[..., :, None] - np.swapaxes(after, -1, -2)


def _client_means(x: np.ndarray, who: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(..., m) each client's mean of ``x`` (..., n) over its samples: the samples added one
    at a time in sample order (elementwise, every instance alike), then divided by the count.
    Not a product with a matrix of 1 / |Z_i|: BLAS rounds that product differently for one
    row (its matrix-vector kernel) than for a batch (the matrix kernel), so an instance's
    scores would depend on the batch that holds it."""
    n = len(who)
    order = np.argsort(who, kind="stable")  # each client's samples, in sample order
    start = np.cumsum(counts) - counts
    padded = np.concatenate([x, np.zeros((*x.shape[:-1], 1))], axis=-1)  # column n: zero
    total = padded[..., order[start]]  # every client's first sample
    for t in range(1, int(counts.max())):  # then its t-th (the zero column once it has none)
        column = np.where(t < counts, order[np.minimum(start + t, n - 1)], n)
        total = total + padded[..., column]
    return total / counts


def _describe_bad(x: np.ndarray) -> str:
    where = tuple(int(k) for k in np.argwhere(~np.isfinite(x))[0])
    return f"entry {where[0] if len(where) == 1 else where} is {float(x[where])!r}"


def two_means_1d(values):
    """Exact 2-means of 1-D values: returns (high_mask, low_centre, high_centre).

    The optimal split of sorted values is contiguous; every split point is scored with prefix
    sums in O(m log m) overall. Ties in the objective go to the first (lowest) split. A row of
    fewer than two distinct values is all high, both centres its mean. Over rows too:
    ``values`` (..., m) gives masks (..., m) and centres (...,). Finite numbers, at least one
    per row (else a MarketInputError naming ``values``: no centre of nothing, no NaN).
    """
    v = as_floats("values", values)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise MarketInputError("values", f"needs at least one value per row, got shape "
                                         f"{v.shape}")
    if not np.isfinite(v).all():
        raise MarketInputError("values", "must be finite (no NaN or inf)")
    order = np.argsort(v, axis=-1, kind="stable")
    s = np.take_along_axis(v, order, axis=-1)
    m = s.shape[-1]
    flat = s[..., 0] == s[..., -1]
    csum, csq = np.cumsum(s, axis=-1), np.cumsum(s * s, axis=-1)
    k = np.arange(1, m)  # size of the low group
    lo_sse = csq[..., :-1] - csum[..., :-1] ** 2 / k
    hi_sum = csum[..., -1:] - csum[..., :-1]
    hi_sse = (csq[..., -1:] - csq[..., :-1]) - hi_sum**2 / (m - k)
    cost = lo_sse + hi_sse
    n_lo = (np.argmin(cost, axis=-1) + 1) if m > 1 else np.full(s.shape[:-1], m)
    n_lo = np.where(flat, 0, n_lo)  # no split: everyone high
    high_sorted = np.arange(m) >= n_lo[..., None]
    high = np.empty(v.shape, dtype=bool)
    np.put_along_axis(high, order, high_sorted, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s.mean(axis=-1)
        lo_c = np.where(flat, mean, np.sum(np.where(high_sorted, 0.0, s), axis=-1) / n_lo)
        hi_c = np.where(flat, mean, np.sum(np.where(high_sorted, s, 0.0), axis=-1) / (m - n_lo))
    if v.ndim == 1:
        return high, float(lo_c), float(hi_c)
    return high, lo_c, hi_c


def beneficial_sets(I, *, rtol: float = 1e-3, atol: float = 1e-12) -> np.ndarray:
    """(m, m) bool: row i is C_i, the clients whose updates help i (i always included).
    Over batches too: ``I`` (..., m, m) gives (..., m, m).

    >>> beneficial_sets([[1.0, 0.9, -0.5], [0.8, 1.0, -0.4], [-0.3, -0.2, 1.0]]).astype(int)
    array([[1, 1, 0],
           [1, 1, 0],
           [0, 0, 1]])
    """
    M = _check(I)
    rtol = as_real("rtol", rtol, lo=0)
    atol = as_real("atol", atol, lo=0)
    high, lo_c, hi_c = two_means_1d(M)  # every row at once
    split = hi_c - lo_c > rtol * np.abs(M).max(axis=-1) + atol
    out = np.where(split[..., None], high, True)
    return out | np.eye(M.shape[-1], dtype=bool)


def cluster(I, mode: str = "central", **kwargs) -> np.ndarray:
    """Cluster ids (central) or personal neighbourhoods (p2p); see the module docstring. Over
    batches too: ``I`` (..., m, m) gives ids (..., m) (central) or sets (..., m, m) (p2p).

    Central ids are the connected components of the mutual edges, found by giving every
    client the least index it reaches (at most m rounds of a min over its neighbours) and
    numbering the components 0, 1, ... in the order of their least (first) client."""
    if mode not in ("central", "p2p"):
        raise MarketInputError("mode", f"unknown {mode!r}; choose 'central' or 'p2p'")
    sets = beneficial_sets(I, **kwargs)
    if mode == "p2p":
        return sets
    m = sets.shape[-1]
    linked = sets & np.swapaxes(sets, -1, -2)  # mutual edges (and every client to itself)
    least = np.broadcast_to(np.arange(m), sets.shape[:-1]).copy()
    for _ in range(m):
        reach = np.where(linked, least[..., None, :], m).min(axis=-1)
        if np.array_equal(reach, least):
            break
        least = reach
    first = least == np.arange(m)  # each component's least client
    rank = np.cumsum(first, axis=-1) - 1
    return np.take_along_axis(rank, least, axis=-1)


def adjusted_rand_index(a, b) -> float:
    """Adjusted Rand index of two labelings (1 = identical partitions up to renaming).
    Where it is undefined (no pairs of items or both labelings alike trivial: one cluster
    each, or all singletons) it is 1.0, as scikit-learn's.

    >>> adjusted_rand_index([0, 0, 1, 1], [5, 5, 7, 7])
    1.0
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise MarketInputError("labels", "two 1-D labelings of the same length are needed")
    if a.size == 0:
        return 1.0  # no items, no pairs (np.unique's inverse has no max)
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
