"""A deliberately plain scalar reference: one root finding per pair and Python loops, the way
the published code is organised (but with a bracketed solver, so its roots are right).

It exists to cross-check the vectorised code and to measure it against (benchmarks/). Never
use it in a hot path.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from .market import Market

__all__ = ["reference_clear", "reference_thresholds"]


def reference_thresholds(market: Market, D) -> np.ndarray:
    m = market.m
    N, K, c, lam = market.N.tolist(), market.K.tolist(), market.c.tolist(), market.lam
    gain = market.gain.value
    T = np.zeros((m, m))
    for i in range(m):
        if K[i] == 0:
            continue
        for j in range(m):
            if i == j:
                continue
            price = c[j] + lam * N[j] / N[i] * float(D[i][j])
            if price <= 0:
                T[i, j] = math.inf
                continue

            def f(t, i=i, j=j, price=price):
                return float(gain(t, K[i], N[i]) - gain(t - N[j], K[i], N[i])) - price

            if f(N[j]) <= 0:
                continue  # no root: never worth buying
            hi = 2.0 * N[j]
            while f(hi) > 0:
                hi *= 2.0
                if math.isinf(hi):
                    break
            T[i, j] = math.inf if math.isinf(hi) else brentq(f, N[j], hi, xtol=1e-12, rtol=1e-14)
    return T


def reference_clear(market: Market, D, rule: str = "box2"):
    """Scalar thresholds, then the greedy rule buyer by buyer; returns the adjacency."""
    T = reference_thresholds(market, D)
    m = market.m
    A = np.zeros((m, m), dtype=bool)
    for i in range(m):
        order = sorted((j for j in range(m) if j != i), key=lambda j: (-T[i, j], j))
        n = 0.0
        for j in order:
            if n + market.N[j] < T[i, j]:
                A[i, j] = True
                n += market.N[j]
            elif rule == "box2":
                break
    return A
