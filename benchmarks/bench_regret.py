"""Cost of the regret search per market: every client, every type dimension (N, c, K), both
directions, for the paper's rule and the reference rules, next to one clearing of the same
market (the ratio is the number of clearings the search spends). Warm, best of 3.

    python benchmarks/bench_regret.py
"""

from __future__ import annotations

import numpy as np
from _timing import best_of

from mechanisms import ipfl
from proofs import SUBJECTS
from proofs.regret import DIMENSIONS, DIRECTIONS, regret_search


def market(m: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    mk = ipfl.Market(N=rng.integers(100, 1000, m).astype(float), c=rng.uniform(0, 2, m),
                     K=rng.uniform(1e4, 1e5, m), lam=1.0)
    x = rng.standard_normal((m, 8))
    D = ipfl.pairwise_distances(x, "l2sq") / 8
    return mk, D


def search_market(subject, mk, D):
    honest = subject.settle(mk, D)
    found = [regret_search(subject.settle, mk, D, i, dim, way, honest=honest)
             for i in range(mk.m) for dim in DIMENSIONS for way in DIRECTIONS]
    return max(f.regret for f in found), sum(f.evaluations for f in found)


def main():
    print(f"{'subject':10s} {'m':>3s} {'clear ms':>9s} {'market s':>9s} {'per search ms':>14s} "
          f"{'clearings':>10s} {'ratio':>7s} {'max regret':>11s}")
    for m in (4, 8, 12):
        mk, D = market(m)
        for name in ("local", "exact", "shapley", "cost-plus", "vcg"):
            subject = SUBJECTS[name]
            one, _ = best_of(lambda s=subject, mk=mk, D=D: s.settle(mk, D))
            total, (regret, evals) = best_of(
                lambda s=subject, mk=mk, D=D: search_market(s, mk, D))
            per = total / (m * len(DIMENSIONS) * len(DIRECTIONS))
            print(f"{name:10s} {m:3d} {one * 1e3:9.2f} {total:9.2f} {per * 1e3:14.1f} "
                  f"{evals:10d} {total / one:7.0f} {regret:11.4g}")


if __name__ == "__main__":
    main()
