"""Throughput of the design module's bulk evaluation: markets x misreports cleared per second
(every drawn liar's best misreport in N, c, K, over and under, as the search measures a rule),
for the family's paper point against the shipped paper rule on the same markets and path (the
ratio: the cost of writing the rule as a weighted sum of features), and for the references.
CPU time of this process (robust to other jobs on the machine), best of ``--repeat``.

    python benchmarks/bench_design.py [--markets 2000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time

from _timing import best_of, pick

from sims.design import REFERENCES, LinearSpace, draw_markets, evaluate


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--markets", type=int, default=pick(2000, 20))
    p.add_argument("--repeat", type=int, default=pick(2, 1))
    args = p.parse_args(argv)
    mk = draw_markets(args.markets, seed=0)
    space = LinearSpace()
    rules = {"family: paper point": space.rule(space.point(marginal=1, distance=1)),
             "family: cost point": space.rule(space.point(cost=1)),
             **{f"reference: {k}": v for k, v in REFERENCES.items()}}
    print(f"{mk.size} markets, sizes {mk.sizes()}, 6 misreport searches per market")
    base = None
    for name, rule in rules.items():
        secs, ev = best_of(lambda r=rule: evaluate(r, mk), args.repeat, time.process_time)
        rate = ev.clearings / secs
        if name == "reference: paper":
            base = rate
        print(f"{name:24s} {ev.clearings:>9d} clearings  {secs:7.2f} s CPU  "
              f"{rate:>10.0f} clearings/s  {mk.size / secs:>8.0f} markets/s (all 6 searches)")
    fam = evaluate(rules["family: paper point"], mk)
    secs, _ = best_of(lambda: evaluate(rules["family: paper point"], mk), args.repeat,
                      time.process_time)
    print(f"ratio family paper point / shipped paper rule (clearings/s): "
          f"{fam.clearings / secs / base:.2f}")


if __name__ == "__main__":
    main()
