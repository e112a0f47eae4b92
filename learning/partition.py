"""Partitions of a labelled training set across clients (spec ipfl.md, "Partitions").

Each is a pure function of (labels, rng) returning one index array per client, and always
terminates: a partition that cannot meet its minimum size within ``max_tries`` draws raises a
clear error instead of looping.
"""

from __future__ import annotations

import numpy as np

from mechanisms.errors import MarketInputError

__all__ = ["PartitionError", "by_group", "cluster", "iid", "niid", "pairs", "partition",
           "skew"]


class PartitionError(MarketInputError):
    pass


def _check(labels, m):
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0:
        raise MarketInputError("labels", "must be a non-empty 1-D array")
    if int(m) < 1:
        raise MarketInputError("clients", f"is {m}; must be >= 1")
    if y.size < m:
        raise MarketInputError("clients", f"{m} clients but only {y.size} samples")
    return y


def iid(labels, m: int, rng) -> list[np.ndarray]:
    y = _check(labels, m)
    order = np.random.default_rng(rng).permutation(y.size)
    return [np.sort(p) for p in np.array_split(order, m)]


def _dirichlet_split(idx_by_class, m, beta, g, min_size, max_tries, what, cap=None):
    """Per-class Dirichlet(beta) proportions; with ``cap`` (NIID-Bench's balancing, used by
    the iPFL authors) a client already holding ``cap`` samples gets none of the later classes.
    """
    for _ in range(max_tries):
        parts = [[] for _ in range(m)]
        sizes = np.zeros(m)
        for idx in idx_by_class:
            if idx.size == 0:
                continue
            props = g.dirichlet(np.full(m, beta))
            if cap is not None:
                props = props * (sizes < cap)
                props = props / props.sum() if props.sum() > 0 else np.full(m, 1.0 / m)
            cuts = (np.cumsum(props) * idx.size).astype(int)[:-1]
            for k, chunk in enumerate(np.split(g.permutation(idx), cuts)):
                parts[k].append(chunk)
                sizes[k] += chunk.size
        parts = [np.sort(np.concatenate(p)) if p else np.array([], int) for p in parts]
        if min(p.size for p in parts) >= min_size:
            return parts
    raise PartitionError(
        "beta", f"{what}: no draw in {max_tries} tries gave every client >= {min_size} samples; "
                "raise beta, lower min_size or use fewer clients")


def niid(labels, m: int, beta: float, rng, *, min_size: int = 10,
         max_tries: int = 1000, cap: bool = False) -> list[np.ndarray]:
    """Per-class Dirichlet(beta) proportions across clients; every client >= min_size.
    ``cap``: a client stops receiving classes once it holds N/m samples (the authors')."""
    y = _check(labels, m)
    if not beta > 0:
        raise MarketInputError("beta", f"is {beta}; must be > 0")
    g = np.random.default_rng(rng)
    by_class = [np.flatnonzero(y == c) for c in np.unique(y)]
    return _dirichlet_split(by_class, m, beta, g, min_size, max_tries, "niid",
                            cap=y.size / m if cap else None)


def cluster(labels, m: int, n_clusters: int, beta: float, rng, *, beta_in: float = 10.0,
            min_size: int = 10, max_tries: int = 1000, cap: bool = False):
    """Dirichlet(beta) of each class across clusters, then Dirichlet(beta_in) inside each
    cluster. Returns (parts, cluster_of_client)."""
    y = _check(labels, m)
    if not 1 <= n_clusters <= m:
        raise MarketInputError("n_clusters", f"is {n_clusters}; must lie in [1, {m}]")
    g = np.random.default_rng(rng)
    owner = np.arange(m) % n_clusters
    by_class = [np.flatnonzero(y == c) for c in np.unique(y)]
    per_cluster = _dirichlet_split(by_class, n_clusters, beta, g, min_size * m // n_clusters,
                                   max_tries, "cluster (across clusters)",
                                   cap=y.size / n_clusters if cap else None)
    parts: list = [None] * m
    for k in range(n_clusters):
        members = np.flatnonzero(owner == k)
        idx = per_cluster[k]
        inner = _dirichlet_split([idx[y[idx] == c] for c in np.unique(y[idx])], members.size,
                                 beta_in, g, min_size, max_tries, "cluster (inside)",
                                 cap=idx.size / members.size if cap else None)
        for member, p in zip(members, inner, strict=True):
            parts[member] = p
    return parts, owner


def skew(labels, m: int, s: int, rng) -> list[np.ndarray]:
    """s classes per client, each class cut into equal shards among the clients holding it."""
    y = _check(labels, m)
    classes = np.unique(y)
    if not 1 <= s <= classes.size:
        raise MarketInputError("s", f"is {s}; must lie in [1, {classes.size}]")
    g = np.random.default_rng(rng)
    holders = [(np.arange(s) + k * s) % classes.size for k in range(m)]  # round robin
    count = np.zeros(classes.size, int)
    for h in holders:
        count[h] += 1
    shards = {c: np.array_split(g.permutation(np.flatnonzero(y == classes[c])), max(count[c], 1))
              for c in range(classes.size)}
    used = np.zeros(classes.size, int)
    parts = []
    for h in holders:
        chunks = []
        for c in h:
            chunks.append(shards[c][used[c]])
            used[c] += 1
        parts.append(np.sort(np.concatenate(chunks)))
    return parts


def pairs(labels, m: int, n_groups: int, rng):
    """The LIA paper's synthetic check: group g holds classes (2g, 2g + 1); client k belongs to
    group k mod n_groups and gets an equal shard of its group's samples. Samples of classes
    >= 2 n_groups are not used. Returns (parts, group_of_client)."""
    y = _check(labels, m)
    if not 1 <= n_groups <= m or 2 * n_groups > np.unique(y).size:
        raise MarketInputError("n_clusters", f"is {n_groups}; need 1 <= groups <= clients and "
                                             "2 classes per group")
    g = np.random.default_rng(rng)
    owner = np.arange(m) % n_groups
    parts: list = [None] * m
    for grp in range(n_groups):
        members = np.flatnonzero(owner == grp)
        idx = g.permutation(np.flatnonzero((y == 2 * grp) | (y == 2 * grp + 1)))
        for member, chunk in zip(members, np.array_split(idx, members.size), strict=True):
            parts[member] = np.sort(chunk)
    return parts, owner


def by_group(groups, m: int | None = None) -> list[np.ndarray]:
    """The natural partition of generated data (one client per group id)."""
    groups = np.asarray(groups)
    m = int(groups.max()) + 1 if m is None else m
    return [np.flatnonzero(groups == k) for k in range(m)]


def partition(kind: str, labels, m: int, rng, *, beta: float = 0.1, s: int = 2,
              n_clusters: int = 3, beta_in: float = 10.0, groups=None, cap: bool = False):
    """By name: "iid" | "niid" | "cluster" | "skew" | "pairs" | "natural".

    Returns (parts, cluster_ids); cluster_ids is None unless the partition defines groups.
    ``cap``: NIID-Bench's N/m balancing for niid and cluster (the iPFL authors' pipeline)."""
    if kind == "iid":
        return iid(labels, m, rng), None
    if kind == "niid":
        return niid(labels, m, beta, rng, cap=cap), None
    if kind == "cluster":
        return cluster(labels, m, n_clusters, beta, rng, beta_in=beta_in, cap=cap)
    if kind == "skew":
        return skew(labels, m, s, rng), None
    if kind == "pairs":
        return pairs(labels, m, n_clusters, rng)
    if kind == "natural":
        if groups is None:
            raise MarketInputError("partition", "'natural' needs a dataset with groups "
                                                "(synthetic)")
        return by_group(groups, m), np.arange(m)
    raise MarketInputError("partition", f"unknown {kind!r}; choose iid, niid, cluster, skew, "
                                        "pairs, natural")
