"""CFL's update norms in the reproduction's Fig. 2 settings, and the split thresholds the
declared rule gives there (sims.cfl_thresholds; issue 32, part 5).

For each partition: the rule's warm-up run (CFL at the authors' thresholds, eps1 2.0 and eps2
2.5, seed 100) and, with ``--seeds``, runs at the claims' seeds; per round and cluster tested,
the norm of the members' mean update (what eps1 bounds) and the largest member update norm
(what eps2 bounds), as the runs recorded them, and whether it split. Then the thresholds the
rule gives (the authors' where the warm-up split; else both scaled so that eps2 is the median
of the warm-up's rounds' largest norm), and, with ``--check``, a run at those thresholds
(seed 100): whether the criterion fires there. CPU seconds per run.

Usage: python benchmarks/cfl_norms.py [--setting reduced|digits|medium|full]
       [--partitions niid cluster skew] [--seeds 0 1 2] [--check]
"""

from __future__ import annotations

import argparse

import torch
from _timing import pick

from sims.cfl_thresholds import WARMUP_SEED, fig2_config, measure, warmup
from sims.settings import SETTINGS


def _table(rows) -> str:
    cols = ["round", "size", "mean_norm", "max_norm", "split"]
    return rows[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", default="digits", choices=sorted(SETTINGS))
    ap.add_argument("--partitions", nargs="+", default=["niid", "cluster", "skew"])
    ap.add_argument("--seeds", type=int, nargs="*", default=[])
    ap.add_argument("--check", action="store_true",
                    help="also run CFL at the rule's thresholds (seed 100)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    tiny = pick({}, {"rounds": 2, "steps": 2, "train_subsample": 600, "test_subsample": 100})
    for part in a.partitions:
        w = warmup(a.setting, part, **tiny)
        e1, e2 = w.thresholds
        print(f"\n== {a.setting}, {part}: warm-up (seed {WARMUP_SEED}, eps1 {w.ran_at[0]:g}, "
              f"eps2 {w.ran_at[1]:g}), {w.cpu_seconds:.1f} CPU s")
        print(_table(w.rounds))
        how = ("the authors' (the warm-up split)" if w.split else
               f"scaled by {e2 / w.ran_at[1]:.4f}: eps2 = median of the largest norms")
        print(f"thresholds: eps1 {e1:.4f}, eps2 {e2:.4f}, {how}")
        for seed in a.seeds:
            rows, cpu = measure(fig2_config(a.setting, part, seed, **tiny))
            print(f"-- seed {seed} at the authors' thresholds, {cpu:.1f} CPU s: mean norm "
                  f"{rows.mean_norm.min():.4f}-{rows.mean_norm.max():.4f}, largest norm "
                  f"{rows.max_norm.min():.4f}-{rows.max_norm.max():.4f}, split in rounds "
                  f"{sorted(set(rows[rows.split]['round']))}")
        if a.check:
            rows, cpu = measure(fig2_config(a.setting, part, WARMUP_SEED, cfl_eps1=e1,
                                            cfl_eps2=e2, **tiny))
            print(f"-- at eps1 {e1:.4f}, eps2 {e2:.4f} (seed {WARMUP_SEED}), {cpu:.1f} CPU s:")
            print(_table(rows))


if __name__ == "__main__":
    main()
