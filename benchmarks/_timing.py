"""Shared timing helper for the benchmark scripts."""

from __future__ import annotations

import time


def best_of(fn, repeat=3, clock=time.perf_counter):
    """(best time over ``repeat`` calls, the last result); wall time unless ``clock`` is
    another (``time.process_time``: this process's CPU time, robust to other jobs)."""
    times, out = [], None
    for _ in range(repeat):
        t = clock()
        out = fn()
        times.append(clock() - t)
    return min(times), out
