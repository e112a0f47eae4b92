"""Sweep benchmarks: ratios measured side by side in one run (not a timed test).

1. Overhead per cell (store + scheduling) against the cells' own work, at 1,000
   mechanism-only cells (the inclusive market, 2 rounds of 12 clients with 500 parameters):
   overhead = wall time - sum of the cells' own run times, serial executor.
2. The processes executor on 2 cores against serial, same cells.

Usage: python benchmarks/bench_sweep.py
       FEDMARKET_BENCH_TINY=1 python benchmarks/bench_sweep.py   (every section, 8 cells)
"""

from __future__ import annotations

import os
import shutil
import tempfile

from _timing import pick

from sims.sweep import expand, run_sweep

SPEC = {"seeds": list(range(pick(250, 2))), "scenarios": [
    {"name": "inclusive-market", "mechanisms": ["box2", "local"],
     "params": {"rounds": 2, "n_params": 500, "attack": ["gaussian", "same"]}}]}


def main():
    cells = expand(SPEC)
    tmp = tempfile.mkdtemp()
    try:
        serial = run_sweep(cells, os.path.join(tmp, "serial"))
        over = serial["wall_s"] - serial["work_s"]
        print(f"1. {len(cells)} cells, serial: wall {serial['wall_s']:.2f} s, cell work "
              f"{serial['work_s']:.2f} s, overhead {over:.2f} s "
              f"({100 * over / serial['work_s']:.1f}% of the work, "
              f"{1000 * over / len(cells):.2f} ms per cell)")
        proc = run_sweep(cells, os.path.join(tmp, "proc"), executor="processes", workers=2)
        print(f"2. processes (2 workers): wall {proc['wall_s']:.2f} s -> "
              f"{serial['wall_s'] / proc['wall_s']:.2f}x the serial speed on "
              f"{os.cpu_count()} cores")
        again = run_sweep(cells, os.path.join(tmp, "serial"))
        print(f"3. rerun of a finished sweep: {again['skipped']} cells skipped in "
              f"{again['wall_s']:.3f} s")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
