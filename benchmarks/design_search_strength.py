"""Is the misreport search strong enough? (issue 31, part 4.) The same rules on the same
held-out markets, their regret measured with searches of growing strength; the figures of a
strong enough search do not move when it is widened.

Each search is (span, grid, starts, iters) of :func:`proofs.regret.regret_arrays`; the joint
searches (two dimensions at once) are (span, grid, iters) of
:func:`proofs.regret.joint_regret_arrays`. For every rule, direction and statistic (mean, q90,
q99, max over markets) it prints the figure under each search and the largest relative
change between the last two (the strongest pair); with ``--csv`` it writes the long table.

    python benchmarks/design_search_strength.py --markets 2000 --seed 1000 \\
        --csv results/search_strength.csv
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from proofs.regret import JOINT_PAIRS, SEARCHES
from proofs.typespace import DEFAULT
from sims.design import REFERENCES, draw_markets, evaluate
from sims.design.families import posted_mechanism, truthful_posted_price
from sims.design.space import LinearSpace

STATS = ("mean", "q90", "q99", "max")


def rules() -> dict:
    clipped = LinearSpace(("marginal", "cost"), clip=True)
    return {
        "paper": REFERENCES["paper"],
        "midpoint (clipped split 1/2)": clipped.rule(clipped.point(marginal=0.5, cost=0.5)),
        "posted 4, exact": posted_mechanism({"base": 4.0}, "exact"),
        "posted 2.5 + lam d, local": posted_mechanism({"base": 2.5, "distance": 1.0}, "local"),
        "issue: 2.5 + lam (N_j/N_i) d, exact": posted_mechanism({"base": 2.5, "ratio": 1.0},
                                                               "exact"),
        "share at pi*": posted_mechanism({"base": truthful_posted_price(DEFAULT)}, "all"),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markets", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--searches", nargs="+", default=list(SEARCHES),
                   help=f"named searches, weakest first (of {list(SEARCHES)})")
    p.add_argument("--joint", action="store_true", help="also the joint misreports")
    p.add_argument("--csv", default=None)
    args = p.parse_args(argv)
    mk = draw_markets(args.markets, seed=args.seed)
    print(f"{mk.size} markets ({mk.source}); searches: "
          + "; ".join(f"{s} {SEARCHES[s]['single']}" for s in args.searches))
    rows = []
    for name, mech in rules().items():
        for s in args.searches:
            t0 = time.process_time()
            ev = evaluate(mech, mk, search=SEARCHES[s]["single"],
                          joint=JOINT_PAIRS if args.joint else (),
                          joint_search=SEARCHES[s]["joint"], name=name)
            secs = time.process_time() - t0
            keys = [k.removeprefix("max_regret_") for k in ev.summary
                    if k.startswith("max_regret_")]
            for key in keys:
                for stat in STATS:
                    rows.append({"rule": name, "search": s, "direction": key, "statistic": stat,
                                 "value": ev.summary[f"{stat}_regret_{key}"]})
            print(f"  {name:38s} {s:7s} {ev.clearings:>10,d} clearings {secs:7.1f} s CPU",
                  flush=True)
    df = pd.DataFrame(rows)
    if args.csv:
        df.to_csv(args.csv, index=False)
    wide = df.pivot_table(index=["rule", "direction", "statistic"], columns="search",
                          values="value", sort=False)[args.searches]
    a, b = args.searches[-2], args.searches[-1]
    scale = np.maximum(np.abs(wide[a]), np.abs(wide[b]))
    wide["change"] = np.where(scale > 0, (wide[b] - wide[a]) / np.where(scale > 0, scale, 1), 0)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 1000)
    print(wide.round(3).to_string())
    worst = wide["change"].abs().groupby(level="statistic").max()
    print(f"\nlargest relative change {a} -> {b} by statistic (over every rule and direction):")
    print(worst.round(4).to_string())


if __name__ == "__main__":
    main()
