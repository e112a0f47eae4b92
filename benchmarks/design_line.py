"""The regret line of the IR, budget-balanced payment rules: the largest K and c misreport
regret of the clipped family's two one-parameter splits (sims.design.frontier.split_points),
of designed rule files, and of the reference rules (paper, VCG, Shapley, cost-plus,
share-all), all measured on the SAME held-out markets; writes a tidy CSV with a JSON sidecar
and the figure of docs/reference-design.md, with the floor no IR rule without deficit goes
below (sims.design.frontier.regret_floor) shaded.

    python benchmarks/design_line.py --markets 2000 --seed 1000 \\
        --rule results/design-clipped/designed_rule.json \\
        --csv docs/design_line.csv --figure docs/img/design_line.png

``--floor-only`` prints the floor alone (seconds): its largest value from the critical
reports beside the closed form's, and in how many single-trade markets the closed form's
premises fail, for IR demanded on every type and on the drawn costs and gain scales only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib
from _timing import pick

from sims.design import LinearSpace, draw_markets, load_rule
from sims.design.frontier import (
    floor_summary,
    line_table,
    plot_line,
    regret_floor,
    split_points,
)
from sims.results import versions, write_table


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markets", type=int, default=pick(2000, 20), help="held-out markets")
    p.add_argument("--seed", type=int, default=1000, help="their seed (not a training seed)")
    p.add_argument("--steps", type=int, default=pick(11, 3), help="points per split line")
    p.add_argument("--rule", action="append", default=[], type=Path,
                   help="a designed rule file (designed_rule.json) to place; repeatable")
    p.add_argument("--csv", type=Path, default=Path("results/design_line.csv"))
    p.add_argument("--figure", type=Path, default=Path("results/design_line.png"))
    p.add_argument("--floor-only", action="store_true",
                   help="print the floor (critical reports and closed form) and stop")
    args = p.parse_args(argv)
    t0, c0 = time.perf_counter(), time.process_time()
    markets = draw_markets(args.markets, args.seed)
    if args.floor_only:
        floor_report(markets)
        return
    space = LinearSpace(("marginal", "cost", "distance"), clip=True)
    rules = {name: space.rule(space.point(**w), name=name)
             for name, w in split_points(args.steps).items()}
    for path in args.rule:
        rules[f"designed ({path.parent.name})"] = load_rule(path)
    table = line_table(markets, rules, progress=lambda k, n: print(
        f"{k}/{n} rules measured", file=sys.stderr, flush=True))
    floors = regret_floor(markets)
    floor = float(floors["floor"].max())
    matplotlib.use("Agg")
    ax = plot_line(table, floor=floor)
    ax.set_title(f"{markets.size} held-out markets (seed {args.seed}), "
                 f"m = {markets.sizes()[0]}..{markets.sizes()[1]}", fontsize=9)
    ax.figure.tight_layout()
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    ax.figure.savefig(args.figure, dpi=120)
    write_table(table, args.csv, {
        "command": "python benchmarks/design_line.py " + " ".join(argv or sys.argv[1:]),
        "markets": markets.source, "rules": [str(r) for r in args.rule],
        "floor": floor, "single_trade_markets": int(floors["single_trade"].sum()),
        "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
        "versions": versions()})
    cols = ["rule", "max_regret_c", "max_regret_K", "ir_rate", "mean_balance", "deficit_rate"]
    print(table[cols].round(3).to_string(index=False))
    print(f"floor (every IR rule without deficit, paper's selection): {floor:.4g}, the "
          f"largest over {int(floors['single_trade'].sum())} single-trade markets")
    print(f"wall {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s")


def floor_report(markets):
    """The floor on ``markets`` (:func:`sims.design.frontier.floor_summary`): single-trade
    markets, premise failures, the largest floor from the critical reports and from the
    closed form; and with IR demanded only on the drawn costs (<= 5) and gain scales
    (>= 1e3)."""
    f = floor_summary(markets, cost_max=5.0, scale_min=1e3)
    print(f"IR for every type: {f['single_trade']} single-trade markets of {markets.size}; "
          f"the closed form's premises fail in {f['premise_failures']} (seller "
          f"{f['seller_failures']}, buyer {f['buyer_failures']}); largest floor "
          f"{f['largest']:.4g} (closed form {f['largest_closed']:.4g}); where a premise "
          f"fails the closed form reaches {f['worst_closed']:.4g} where the floor is "
          f"{f['worst_floor']:.4g}")
    print(f"IR for costs <= 5 and gain scales >= 1e3 only (the drawn support): largest "
          f"floor {f['largest_on_support']:.4g}")


if __name__ == "__main__":
    main()
