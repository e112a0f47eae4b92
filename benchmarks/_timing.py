"""Shared timing helper for the benchmark scripts."""

from __future__ import annotations

import time


def best_of(fn, repeat=3):
    """(best wall time over ``repeat`` calls, the last result)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out
