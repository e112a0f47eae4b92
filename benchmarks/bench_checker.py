"""Property checker: batch engine vs Hypothesis engine, side by side in one run.

For IR, budget balance, Lemma 1 and Eq. 11 on box2 / local / exact: effective (checked)
examples per second of each engine on the same property and subject, and the ratio
(target >= 100x). Then the time the batch engine needs for 10^5 effective examples per
property. Timings are best of ``--repeat`` warm runs; verdicts are printed next to them.

Usage: python benchmarks/bench_checker.py [--hypothesis 300] [--batch 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse

from _timing import best_of

from proofs import PROPERTIES, SUBJECTS, check

PAIRS = [(s, k) for s in ("box2", "local", "exact")
         for k in ("individual_rationality", "budget_balance", "lemma1", "local_optimality")]


def rate(subject, key, n, engine, repeat):
    def run():
        return check(SUBJECTS[subject], PROPERTIES[key], max_examples=n, seed=0, engine=engine)

    check(SUBJECTS[subject], PROPERTIES[key], max_examples=min(n, 50), engine=engine)  # warm
    t, r = best_of(run, repeat)
    return r.effective / t, r, t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hypothesis", type=int, default=300, help="Hypothesis examples per pair")
    ap.add_argument("--batch", type=int, default=100_000, help="batch examples per pair")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many warm runs")
    args = ap.parse_args(argv)
    print(f"effective examples/s; Hypothesis {args.hypothesis} and batch {args.batch} examples "
          f"per pair, best of {args.repeat}")
    print(f"{'subject':8} {'property':24} {'hypothesis/s':>13} {'batch/s':>10} {'ratio':>7} "
          f"{'batch s':>8}  verdicts (hyp / batch)")
    ratios = []
    for subject, key in PAIRS:
        rh, r1, _ = rate(subject, key, args.hypothesis, "hypothesis", args.repeat)
        rb, r2, tb = rate(subject, key, args.batch, "batch", args.repeat)
        ratios.append(rb / rh)
        note = "" if r1.verdict != "counterexample" else " (first failure; shrink incl.)"
        print(f"{subject:8} {key:24} {rh:13.0f} {rb:10.0f} {rb / rh:6.0f}x {tb:8.2f}  "
              f"{r1.verdict} / {r2.verdict}{note}")
    print(f"\nratio batch/hypothesis: min {min(ratios):.0f}x, "
          f"median {sorted(ratios)[len(ratios) // 2]:.0f}x")


if __name__ == "__main__":
    main()
