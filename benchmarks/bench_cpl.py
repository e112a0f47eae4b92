"""CPL solver benchmarks: ratios measured side by side in one run (not a timed test).

1. bisection vs cvxpy-linesearch (the paper's method, 400 grid points) on the paper's N = 40
   game: speed-up and objective.
2. bisection vs cvxpy (one convex solve in y = 1/q): agreement and time ratio.
3. bisection at N = 1e4, 1e5, 1e6: scaling (time(1e6) / time(1e4); linear would be 100).

Usage: python benchmarks/bench_cpl.py
       FEDMARKET_BENCH_TINY=1 python benchmarks/bench_cpl.py   (every section, tiny sizes)
"""

from __future__ import annotations

import numpy as np
from _timing import best_of, pick

from mechanisms import cpl
from sims.cpl_game import CplBenchmark


def main():
    game = CplBenchmark().game()
    print(f"paper's benchmark game: N = {game.n}, B = {game.budget}, c = 5, v ~ Exp(100)")
    t_b, b = best_of(lambda: cpl.solve(game), 20)
    points = pick(400, 4)
    t_ls, ls = best_of(lambda: cpl.solve(game, "cvxpy-linesearch", points=points), 1)
    print(f"\n1. bisection vs cvxpy-linesearch ({points} grid points)")
    print(f"   bisection        {t_b:10.6f} s   objective {b.objective:.10g}")
    print(f"   cvxpy-linesearch {t_ls:10.6f} s   objective {ls.objective:.10g}")
    print(f"   speed-up {t_ls / t_b:,.0f}x; line search objective is "
          f"{100 * (ls.objective / b.objective - 1):.4f}% above bisection")

    t_c, c = best_of(lambda: cpl.solve(game, "cvxpy"), 3)
    rel = abs(c.objective - b.objective) / b.objective
    dq = float(np.max(np.abs(c.q - b.q) / b.q))
    print(f"\n2. bisection vs cvxpy ({c.solver}, status {c.status})")
    print(f"   cvxpy {t_c:.4f} s vs bisection {t_b:.6f} s: {t_c / t_b:,.0f}x")
    print(f"   objective relative difference {rel:.2e}; max relative q difference {dq:.2e}; "
          f"lambda* {b.multiplier:.8g} vs {c.multiplier:.8g}")

    print("\n3. bisection scaling")
    times = {}
    sizes = pick((10_000, 100_000, 1_000_000), (100, 1_000, 10_000))
    for n in sizes:
        g = CplBenchmark(clients=n, budget=15.0 * n / 40).game()
        times[n], eq = best_of(lambda g=g: cpl.solve(g), 3)
        print(f"   N = {n:>9,}: {times[n]:8.4f} s  ({eq.status}, {eq.solver} root finder, "
              f"budget residual {eq.budget_residual:.1e})")
    lo, hi = sizes[0], sizes[-1]
    print(f"   time({hi:.0e}) / time({lo:.0e}) = {times[hi] / times[lo]:.1f}  "
          f"(linear: {hi // lo})")


if __name__ == "__main__":
    main()
