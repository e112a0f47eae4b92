"""Shared helpers of the benchmark scripts: timing, and the tiny size.

``FEDMARKET_BENCH_TINY=1 python benchmarks/X.py ...`` runs every section of a benchmark at a
tiny size (:func:`tiny`, :func:`pick`): the figures then mean nothing, but every line of the
script runs, so a benchmark cannot rot unnoticed (tests/test_benchmarks.py, slow tier, runs
each one so; ``make bench`` runs them at full size).
"""

from __future__ import annotations

import os
import time

TINY_VARIABLE = "FEDMARKET_BENCH_TINY"


def tiny() -> bool:
    """Whether this run is the tiny one (``FEDMARKET_BENCH_TINY=1``)."""
    return os.environ.get(TINY_VARIABLE, "") == "1"


def pick(full, small):
    """``small`` in a tiny run, else ``full``: how each script sizes its sections."""
    return small if tiny() else full


def best_of(fn, repeat=3, clock=time.perf_counter):
    """(best time over ``repeat`` calls, the last result); wall time unless ``clock`` is
    another (``time.process_time``: this process's CPU time, robust to other jobs). A tiny
    run calls ``fn`` once."""
    times, out = [], None
    for _ in range(pick(repeat, 1)):
        t = clock()
        out = fn()
        times.append(clock() - t)
    return min(times), out
