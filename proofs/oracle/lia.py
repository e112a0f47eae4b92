"""The pFedLIA oracle: Rokvic, Danassis, Faltings, "Lazy But Effective: Collaborative
Personalized Federated Learning with Heterogeneous Data" (IJCNN 2025), as the paper's summary
and the specification (spec lia.md; docs/explanation-lia.md) state the score and the
clustering; the choices marked *ours* there are the toolkit's and are transcribed as stated.

Plain Python floats, loops over clients, samples and split points, ``math.fsum`` for sums.
Used only to check the mechanisms (:mod:`proofs.lia_properties`), never in their place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "adjusted_rand_index", "beneficial_set", "clusters",
           "influence", "split_cost", "two_means"]

# The no-split rule's tolerances where a call leaves them out, as documented
# (docs/explanation-lia.md: "defaults 1e-3 and 1e-12")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-12


def influence(base: Sequence[float], losses, owner: Sequence[int], m: int) -> list[list[float]]:
    """The lazy influence of client j on client i (spec, "Score"):
    I(i, j) = L(theta_0; Z_i) - L(theta_j; Z_i), each L the MEAN loss over i's validation
    samples Z_i (``owner[z] = i``): ``base[z]`` the joint model's loss on sample z,
    ``losses[j][z]`` client j's partial model's. > 0: j's update helps i."""
    I = [[0.0] * m for _ in range(m)]
    for i in range(m):
        Z = [z for z in range(len(owner)) if owner[z] == i]
        before = math.fsum(base[z] for z in Z) / len(Z)
        for j in range(m):
            I[i][j] = before - math.fsum(losses[j][z] for z in Z) / len(Z)
    return I


def split_cost(values: Sequence[float], high: Sequence[bool]) -> float:
    """The 2-means objective of a split of ``values`` into two groups: the sum of squared
    distances of each value to its group's mean (its centre)."""
    out = []
    for side in (True, False):
        group = [v for v, h in zip(values, high, strict=True) if h == side]
        if group:
            centre = math.fsum(group) / len(group)
            out.extend((v - centre) ** 2 for v in group)
    return math.fsum(out)


def _centres(values, high) -> tuple[float, float]:
    low_group = [v for v, h in zip(values, high, strict=True) if not h]
    high_group = [v for v, h in zip(values, high, strict=True) if h]
    return math.fsum(low_group) / len(low_group), math.fsum(high_group) / len(high_group)


def two_means(values: Sequence[float]) -> list[tuple[float, list[bool]]]:
    """Every split the exact 1-D 2-means may return, with its objective (:func:`split_cost`),
    best first: in one dimension an optimal 2-means split puts the values below a cut in one
    group and those above it in the other (a value nearer the other centre would lower the
    objective by moving), so the candidates are the m - 1 cuts of the values in ascending
    order (a cut may fall between equal values: the order among them is the clients'
    order). ``high[k]``: value k is in the group of the higher centre. Ties in the objective
    keep the cut order (the lowest cut first, as documented)."""
    order = sorted(range(len(values)), key=lambda k: (values[k], k))
    out = []
    for cut in range(1, len(values)):
        high = [False] * len(values)
        for k in order[cut:]:
            high[k] = True
        out.append((split_cost(values, high), high))
    out.sort(key=lambda pair: pair[0])  # stable: equal objectives keep the lowest cut first
    return out


def beneficial_set(i: int, row: Sequence[float], rtol: float, atol: float) -> dict:
    """Client i's beneficial set C_i (spec, "Clustering"): the exact 2-means of its row
    I(i, .) (i's own score included); the group with the higher centre, i itself always in.
    No split (*ours*): when the gap between the two centres is below
    ``rtol * max_j |I(i, j)| + atol``, or the row has fewer than two distinct values, C_i is
    everyone. Returns {"best": the least objective, "splits": every candidate of
    :func:`two_means` as (objective, high, gap), "min_gap": the no-split threshold,
    "distinct": whether the row has two distinct values}."""
    m = len(row)
    min_gap = rtol * max(abs(v) for v in row) + atol
    distinct = len(set(row)) > 1
    splits = []
    for cost, high in two_means(row) if m > 1 else []:
        low_centre, high_centre = _centres(row, high)
        splits.append((cost, high, high_centre - low_centre))
    return {"best": splits[0][0] if splits else 0.0, "splits": splits, "min_gap": min_gap,
            "distinct": distinct}


def clusters(C: Sequence[Sequence[bool]]) -> list[int]:
    """Centralised mode (*ours*): keep an edge i - j only when j is in C_i and i is in C_j,
    take the connected components as clusters, numbered 0, 1, ... in the order of their
    first (lowest-index) client."""
    m = len(C)
    label = [-1] * m
    next_label = 0
    for start in range(m):
        if label[start] >= 0:
            continue
        label[start] = next_label
        stack = [start]
        while stack:
            i = stack.pop()
            for j in range(m):
                if j != i and label[j] < 0 and C[i][j] and C[j][i]:
                    label[j] = next_label
                    stack.append(j)
        next_label += 1
    return label


def adjusted_rand_index(a: Sequence, b: Sequence) -> float:
    """Hubert and Arabie's adjusted Rand index of two labelings of the same items (the LIA
    paper's measure of a clustering against the planted one, spec lia.md), from its pair
    counts: over the n (n - 1) / 2 pairs of items, x = pairs together in both, p = together
    in ``a``, q = together in ``b``; expected = p q / pairs, ARI = (x - expected) /
    ((p + q) / 2 - expected). Where the denominator is 0 (both labelings one cluster, or both
    all singletons, or a single item) the index is undefined; the toolkit's convention
    (*ours*, as scikit-learn's) is 1.0."""
    n = len(a)
    x = p = q = 0
    for i in range(n):
        for j in range(i + 1, n):
            sa, sb = a[i] == a[j], b[i] == b[j]
            p += sa
            q += sb
            x += sa and sb
    pairs = n * (n - 1) / 2
    expected = p * q / pairs if pairs else 0.0
    top = (p + q) / 2
    if top == expected:
        return 1.0
    return (x - expected) / (top - expected)
