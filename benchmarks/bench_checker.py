"""Property checker: batch engine vs Hypothesis engine, side by side in one run.

For IR, budget balance, Lemma 1 and Eq. 11 on box2 / local / exact: effective (checked)
examples per second of each engine on the same property and subject, and the ratio
(target >= 100x). Then the time the batch engine needs for 10^5 effective examples per
property. Timings are best of ``--repeat`` warm runs; verdicts are printed next to them.

Second table: the rows the batch engine evaluated one instance at a time before they were
vectorised (regret searches, CPL, the reference rules cost-plus, share-all, vcg and
shapley, global optimality): the same
engine and numpy draws, per instance vs in bulk (``proofs.batch.check_batch(bulk=False)``).

Usage: python benchmarks/bench_checker.py [--hypothesis 300] [--batch 100000] [--repeat 3]
       [--per-instance 100] [--bulk 20000]
       FEDMARKET_BENCH_TINY=1 python benchmarks/bench_checker.py   (every pair, tiny sizes)
"""

from __future__ import annotations

import argparse

from _timing import best_of, pick

from proofs import PROPERTIES, SUBJECTS, check
from proofs.batch import check_batch

PAIRS = [(s, k) for s in ("box2", "local", "exact")
         for k in ("individual_rationality", "budget_balance", "lemma1", "local_optimality")]


BULK_PAIRS = [("box2", "thm2"), ("local", "thm2"), ("exact", "thm2"),
              ("share-all", "truthful_K_over"),
              ("cpl-bisection", "cpl_se_identities"), ("cpl-bisection", "cpl_threshold"),
              ("cpl-bisection", "cpl_beats_baselines"),
              ("cpl-bisection", "cpl_budget_feasible"), ("cpl-uniform", "cpl_budget_feasible"),
              ("cpl-weighted", "cpl_budget_feasible"), ("cpl-gradient", "cpl_budget_feasible"),
              ("cost-plus", "individual_rationality"), ("share-all", "budget_balance"),
              ("vcg", "individual_rationality"), ("vcg", "thm2"),
              ("shapley", "individual_rationality"), ("exact", "global_optimality")]


def bulk_rate(subject, key, n, bulk, repeat):
    def run():
        return check_batch(SUBJECTS[subject], PROPERTIES[key], max_examples=n, seed=0,
                           tolerance=0.0, bulk=bulk)

    check_batch(SUBJECTS[subject], PROPERTIES[key], max_examples=min(n, 50), seed=1,
                tolerance=0.0, bulk=bulk)  # warm
    t, r = best_of(run, repeat)
    return r.effective / t, r, t


def rate(subject, key, n, engine, repeat):
    def run():
        return check(SUBJECTS[subject], PROPERTIES[key], max_examples=n, seed=0, engine=engine)

    check(SUBJECTS[subject], PROPERTIES[key], max_examples=min(n, 50), engine=engine)  # warm
    t, r = best_of(run, repeat)
    return r.effective / t, r, t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hypothesis", type=int, default=pick(300, 5),
                    help="Hypothesis examples per pair")
    ap.add_argument("--batch", type=int, default=pick(100_000, 200), help="batch examples per pair")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many warm runs")
    ap.add_argument("--per-instance", type=int, default=pick(100, 5),
                    help="batch engine, one instance at a time: examples per pair")
    ap.add_argument("--bulk", type=int, default=pick(20_000, 100),
                    help="batch engine in bulk: examples per pair (second table)")
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
    print(f"\nbatch engine, per instance ({args.per_instance}) vs in bulk ({args.bulk}), "
          f"effective examples/s, best of {args.repeat}")
    print(f"{'subject':14} {'property':24} {'per inst/s':>11} {'bulk/s':>10} {'ratio':>7}  "
          "verdicts (per instance / bulk)")
    for subject, key in BULK_PAIRS:
        rp, r1, _ = bulk_rate(subject, key, args.per_instance, False, args.repeat)
        rb, r2, _ = bulk_rate(subject, key, args.bulk, True, args.repeat)
        print(f"{subject:14} {key:24} {rp:11.0f} {rb:10.0f} {rb / rp:6.0f}x  "
              f"{r1.verdict} / {r2.verdict}")


if __name__ == "__main__":
    main()
