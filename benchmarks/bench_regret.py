"""Cost of the regret search per market: every client, every type dimension (N, c, K), both
directions, for the paper's rule and the reference rules, next to one clearing of the same
market (the ratio: one search of the whole market in clearings' time). Then the grid cleared
in one vectorised call (where the rule allows: N and c, bulk-clearable rules) against market
by market. Warm, best of 3.

    python benchmarks/bench_regret.py
    FEDMARKET_BENCH_TINY=1 python benchmarks/bench_regret.py   (every section, tiny sizes)
"""

from __future__ import annotations

import numpy as np
from _timing import best_of, pick

from mechanisms import ipfl
from proofs import SUBJECTS
from proofs.ipfl_properties import IpflCase, grid_batch
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


def search_nc(subject, mk, D, vectorised):
    out = []
    for i in range(mk.m):
        for dim in ("N", "c"):
            batch = grid_batch(subject, IpflCase(mk, D, i), dim) if vectorised else None
            out += [regret_search(subject.settle, mk, D, i, dim, way, batch=batch).regret
                    for way in DIRECTIONS]
    return out


def main():
    print(f"{'subject':10s} {'m':>3s} {'clear ms':>9s} {'market s':>9s} {'per search ms':>14s} "
          f"{'clearings':>10s} {'ratio':>7s} {'max regret':>11s}")
    for m in pick((4, 8, 12), (2, 3)):
        mk, D = market(m)
        for name in ("local", "exact", "shapley", "cost-plus", "vcg"):
            subject = SUBJECTS[name]
            one, _ = best_of(lambda s=subject, mk=mk, D=D: s.settle(mk, D))
            total, (regret, evals) = best_of(
                lambda s=subject, mk=mk, D=D: search_market(s, mk, D))
            per = total / (m * len(DIMENSIONS) * len(DIRECTIONS))
            print(f"{name:10s} {m:3d} {one * 1e3:9.2f} {total:9.2f} {per * 1e3:14.1f} "
                  f"{evals:10d} {total / one:7.0f} {regret:11.4g}")


    print(f"\n{'subject':10s} {'m':>3s} {'N,c scalar s':>13s} {'vectorised s':>13s} "
          f"{'speed-up':>9s}")
    for m in pick((4, 12), (2, 3)):
        mk, D = market(m)
        for name in ("box2", "local"):
            subject = SUBJECTS[name]
            slow, a = best_of(lambda s=subject, mk=mk, D=D: search_nc(s, mk, D, False))
            fast, b = best_of(lambda s=subject, mk=mk, D=D: search_nc(s, mk, D, True))
            assert np.allclose(a, b, atol=1e-9)
            print(f"{name:10s} {m:3d} {slow:13.2f} {fast:13.2f} {slow / fast:9.2f}")


if __name__ == "__main__":
    main()
