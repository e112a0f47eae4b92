"""Symbolic derivations behind :mod:`mechanisms.ipfl`, checked by sympy (run as tests).

* :func:`sqrt_threshold_quartic` - for the sqrt gain, the Box 2 equation
  g(T) - g(T - N_j) = P becomes P t^4 + 4 sqrt(K) t^3 - P N_j^2 = 0 with x = N_i + T,
  t = sqrt(x) - sqrt(x - N_j), and x = ((N_j/t + t)/2)^2.
* :func:`quartic_monotone_convex` - that quartic is increasing and convex on t > 0, the
  reason Newton from the right converges monotonically.
* :func:`sqrt_gain_concave` - the sqrt gain is increasing and concave with g(0) = 0.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["ALL", "quartic_monotone_convex", "sqrt_gain_concave", "sqrt_threshold_quartic"]

t, Nj, Ni, K, P, x = sp.symbols("t N_j N_i K P x", positive=True)


def sqrt_gain_concave():
    g = sp.sqrt(K / Ni) - sp.sqrt(K / (Ni + x))
    assert sp.simplify(g.subs(x, 0)) == 0
    d1, d2 = sp.diff(g, x), sp.diff(g, x, 2)
    assert d1.is_positive and d2.is_negative
    return {"g": g, "g'": d1, "g''": d2}


def sqrt_threshold_quartic():
    # with a = sqrt(x), b = sqrt(x - N_j): a - b = t and a + b = N_j / t
    a = (Nj / t + t) / 2
    b = (Nj / t - t) / 2
    assert sp.simplify(a**2 - b**2 - Nj) == 0
    # g(T) - g(T - N_j) = sqrt(K) (1/b - 1/a) with x = N_i + T
    marginal = sp.sqrt(K) * (1 / b - 1 / a)
    equation = sp.numer(sp.together(marginal - P))
    quartic = P * t**4 + 4 * sp.sqrt(K) * t**3 - P * Nj**2
    ratio = sp.simplify(equation / quartic)
    assert not ratio.has(P) and not ratio.has(K)  # same roots (ratio free of P and K)
    return {"quartic": sp.Eq(quartic, 0), "x": a**2}


def quartic_monotone_convex():
    f = P * t**4 + 4 * sp.sqrt(K) * t**3 - P * Nj**2
    assert sp.diff(f, t).is_positive and sp.diff(f, t, 2).is_positive
    return {"f'": sp.diff(f, t), "f''": sp.diff(f, t, 2)}


ALL = (sqrt_gain_concave, sqrt_threshold_quartic, quartic_monotone_convex)
