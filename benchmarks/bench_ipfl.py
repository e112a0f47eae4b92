"""iPFL clearing benchmarks: ratios measured side by side in one run (not a timed test).

1. clear() vs the reference oracle (proofs.oracle.ipfl: per-pair bisection on Box 2's
   equation + Python loops, the published code's organisation) at m = 10, 100, 1000:
   identical adjacency, speed-up.
2. clear(m = 1000, rule local) vs the physical floor of a round: the Gram matrix of 1000
   models of 44,426 float64 parameters (one GEMM), which any distance-based market pays.
3. exact vs local vs box2 at m = 20 and m = 100: time and welfare lost by the greedy rules.
4. clear(rule local, D given) at m = 1000, 2000, 4000 against the floor of one float64 pass
   over the m x m matrix (D.sum()), warm, best of several, CPU time of this process: the
   ratio to the floor, the growth exponent from 1000 to 4000 (2 = as the floor), and the
   share of each step (prices, thresholds, selection). Targets (issue 20, part 9): clear at
   m = 4000 within TARGET_SECONDS and a growth exponent of at most TARGET_GROWTH; the run
   prints whether each is met, and the load average (other jobs on the host slow it).

Usage: python benchmarks/bench_ipfl.py [--quick] [--growth-only]
  (--quick: skip the m = 1000 reference; --growth-only: section 4 alone;
  FEDMARKET_BENCH_TINY=1: every section at tiny sizes)
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _timing import best_of, pick

from mechanisms import ipfl
from proofs.oracle.ipfl import market_greedy

TARGET_SECONDS = 1.0  # clear(rule='local', D given) at m = 4000, CPU seconds
TARGET_GROWTH = 2.1  # growth exponent of clear from m = 1000 to 4000
# sizes (FEDMARKET_BENCH_TINY=1: tiny ones, every section still run)
FLOOR_P, FLOOR_M = pick(44_426, 300), pick(1000, 40)  # section 2: parameters, clients
RULE_MARKETS = pick(5, 1)  # section 3: markets per size
GROWTH_SIZES = pick((1000, 2000, 4000), (50, 100, 200))  # section 4


def random_market(m, rng):
    N = rng.integers(200, 800, m).astype(float)
    K = rng.uniform(2.5e5, 5e5, m)
    c = rng.uniform(0.5, 1.0, m)
    mk = ipfl.Market(N=N, c=c, K=K, lam=2.0)
    X = rng.standard_normal((m, 3)) + rng.integers(0, 4, m)[:, None] * 2.0
    D = ipfl.pairwise_distances(X) * 0.05
    return mk, D


def bench_reference(sizes, rng):
    print("\n1. clear(rule='box2') vs the reference oracle (per-pair bisection + Python loops)")
    print(f"{'m':>6} {'ours (s)':>11} {'reference (s)':>14} {'speed-up':>10} {'same A':>7}")
    for m in sizes:
        mk, D = random_market(m, rng)
        t_ours, out = best_of(lambda mk=mk, D=D: ipfl.clear(mk, D, rule="box2"))
        t_ref, A_ref = best_of(lambda mk=mk, D=D: market_greedy(mk, D, "box2"),
                               repeat=1 if m >= 100 else 3)
        same = np.array_equal(out.adjacency, A_ref)
        print(f"{m:>6} {t_ours:>11.5f} {t_ref:>14.3f} {t_ref / t_ours:>9.0f}x {same!s:>7}")


def bench_floor(rng, p=FLOOR_P, m=FLOOR_M):
    print(f"\n2. clear(m={m}, rule='local') vs the floor: Gram matrix of {m} x {p} float64")
    X = rng.standard_normal((m, p))
    t_gram, _ = best_of(lambda: X @ X.T)
    t_dist, D = best_of(lambda: ipfl.pairwise_distances(X))
    mk, _ = random_market(m, rng)
    D = D / np.median(D) * 0.3  # distances on the scale where markets trade
    t_clear, out = best_of(lambda: ipfl.clear(mk, D, rule="local"))
    t_thr, _ = best_of(lambda: ipfl.thresholds(mk, D))
    print(f"   Gram matrix X @ X.T        {t_gram:8.4f} s   (floor, 1.00x)")
    print(f"   pairwise_distances (l2sq)  {t_dist:8.4f} s   ({t_dist / t_gram:.2f}x floor)")
    print(f"   clear(local), of which     {t_clear:8.4f} s   ({t_clear / t_gram:.2f}x floor)")
    print(f"     thresholds (1e6 pairs)   {t_thr:8.4f} s   ({t_thr / t_gram:.2f}x floor)")
    print(f"   edges bought: {int(out.adjacency.sum())}; budget residual {out.budget_residual:.1e}")


def bench_rules(sizes, rng, markets=RULE_MARKETS):
    print("\n3. exact vs local vs box2 (mean over random markets)")
    print("   objective = sum_i phi_i of Eq. 10 (what each rule minimises; lower is better);")
    print("   welfare = Eq. 5 (gains minus sharing costs; it leaves out the distance term)")
    print(f"{'m':>5} {'rule':>6} {'time (s)':>10} {'objective':>11} {'excess':>9} "
          f"{'welfare':>10} {'vs exact':>9} {'method':>16}")
    for m in sizes:
        rows = {r: np.zeros(3) for r in ipfl.RULES}
        methods = set()
        for _ in range(markets):
            mk, D = random_market(m, rng)
            for rule in ipfl.RULES:
                t, out = best_of(lambda mk=mk, D=D, rule=rule: ipfl.clear(mk, D, rule=rule), 1)
                obj = ipfl.phi(mk, out.prices, out.adjacency).sum()
                rows[rule] += np.array([t, obj, out.welfare]) / markets
                if rule == "exact":
                    methods.update(k for k in out.exact_methods if k != "none")
        _, o_exact, w_exact = rows["exact"]
        for rule, (t, o, w) in rows.items():
            excess = 100.0 * (o - o_exact) / abs(o_exact)
            dw = 100.0 * (w - w_exact) / abs(w_exact)
            meth = "+".join(sorted(methods)) if rule == "exact" else "greedy"
            print(f"{m:>5} {rule:>6} {t:>10.4f} {o:>11.3f} {excess:>8.3f}% {w:>10.3f} "
                  f"{dw:>+8.3f}% {meth:>16}")


def bench_growth(sizes=GROWTH_SIZES, repeat=5):
    print("\n4. clear(rule='local', D given) vs the floor: one float64 pass over m x m "
          "(D.sum()); CPU seconds of this process, warm, best of", repeat)
    print("   load average (1, 5, 15 min) before the run: "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'m':>6} {'floor (s)':>10} {'clear (s)':>10} {'ratio':>8} {'prices':>8} "
          f"{'thresh.':>8} {'local':>8}")
    clock = time.process_time
    rows = []
    for m in sizes:
        mk, D = random_market(m, np.random.default_rng(m))
        D = np.ascontiguousarray(D)
        ipfl.clear(mk, D, rule="local")  # warm
        t_floor, _ = best_of(lambda D=D: D.sum(), repeat, clock)
        t_clear, out = best_of(lambda mk=mk, D=D: ipfl.clear(mk, D, rule="local"), repeat,
                               clock)
        P = out.prices
        t_p, _ = best_of(lambda mk=mk, D=D: ipfl.paper_prices(mk, D), repeat, clock)
        t_t, T = best_of(lambda mk=mk, D=D, P=P: ipfl.thresholds(mk, D, prices=P), repeat,
                         clock)
        t_l, _ = best_of(lambda T=T, mk=mk: ipfl.local(T, mk.N), repeat, clock)
        rows.append((m, t_floor, t_clear))
        print(f"{m:>6} {t_floor:>10.4f} {t_clear:>10.4f} {t_clear / t_floor:>7.0f}x "
              f"{t_p / t_clear:>7.0%} {t_t / t_clear:>7.0%} {t_l / t_clear:>7.0%}")
    (m0, f0, c0), (m1, f1, c1) = rows[0], rows[-1]
    scale = np.log(m1 / m0)
    growth = np.log(c1 / c0) / scale
    print(f"   growth exponent {m0} -> {m1}: clear {growth:.2f}, "
          f"floor {np.log(f1 / f0) / scale:.2f}")
    if m1 == 4000:
        print(f"   target clear(m=4000) <= {TARGET_SECONDS:g} s: "
              f"{'met' if c1 <= TARGET_SECONDS else 'NOT met'} ({c1:.3f} s); growth <= "
              f"{TARGET_GROWTH:g}: {'met' if growth <= TARGET_GROWTH else 'NOT met'} "
              f"({growth:.2f})")
    print("   load average (1, 5, 15 min) after the run: "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the m = 1000 scalar reference")
    ap.add_argument("--growth-only", action="store_true", help="run section 4 alone")
    args = ap.parse_args()
    rng = np.random.default_rng(2025)
    if not args.growth_only:
        bench_reference(pick([10, 100] if args.quick else [10, 100, 1000], [5, 10]), rng)
        bench_floor(rng)
        bench_rules(pick([20, 100], [6, 10]), rng)
    bench_growth()


if __name__ == "__main__":
    main()
