"""Statistics over seeds, one implementation for every table, verdict and figure: each seed
gives one number (one run, one game), and a quantity is reported as the mean and Student's t
95 % interval of those numbers.

* :func:`t_half_width`: the interval's half width t(0.975, n - 1) sd / sqrt(n), element-wise;
* :func:`ci95`: (mean, low, high, n) of the interval over given per-seed values, optionally
  clipped to the range the quantity cannot leave.

Used by :mod:`sims.claims` (the reproduction's verdicts and seeds needed),
:mod:`sims.comparison` and :mod:`sims.report` (the sweep report's tables),
:mod:`sims.ranking` and :mod:`sims.plots` (the bands over rounds).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ACC", "DACC", "ci95", "t_half_width"]

ACC = (0.0, 1.0)  # an accuracy's range: its intervals are clipped to it
DACC = (-1.0, 1.0)  # the range of a difference of two accuracies


def t_half_width(sd, n):
    """Half width of Student's t 95 % interval of a mean of ``n`` values with sample standard
    deviation ``sd``: t(0.975, n - 1) sd / sqrt(n). Broadcasts over arrays; ``n`` >= 2.

    >>> round(float(t_half_width(1.0, 3)), 3)
    2.484
    """
    from scipy import stats

    n = np.asarray(n)
    return stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)


def ci95(values, bounds=None) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of Student's t 95 % interval over the given per-seed values
    (non-finite values dropped; low = high = NaN for a single seed). With
    ``bounds = (lo, hi)``, the range the quantity cannot leave (an accuracy's [0, 1]), the
    interval is clipped to it: the t interval's coverage is unchanged by dropping values no
    seed can take.

    >>> m, lo, hi, n = ci95([1.0, 2.0, 3.0])
    >>> round(m, 3), round(lo, 3), round(hi, 3), n
    (2.0, -0.484, 4.484, 3)
    >>> [round(x, 3) for x in ci95([0.95, 0.97, 0.99], bounds=ACC)[:3]]
    [0.97, 0.92, 1.0]
    """
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    n = v.size
    if n == 0:
        return np.nan, np.nan, np.nan, 0
    m = float(v.mean())
    if n == 1:
        return m, np.nan, np.nan, 1
    half = float(t_half_width(v.std(ddof=1), n))
    lo, hi = m - half, m + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return m, lo, hi, n
