"""Symbolic derivations behind :mod:`mechanisms.ipfl`, checked by sympy (run as tests).

* :func:`sqrt_threshold_quartic` - for the sqrt gain, the Box 2 equation
  g(T) - g(T - N_j) = P becomes P t^4 + 4 sqrt(K) t^3 - P N_j^2 = 0 with x = N_i + T,
  t = sqrt(x) - sqrt(x - N_j), and x = ((N_j/t + t)/2)^2.
* :func:`sqrt_threshold_ferrari` - its closed form (the code's): v = sqrt(N_j)/t solves
  v^4 - q v - 1 = 0, solved by Ferrari through the resolvent cubic y^3 + y = q^2/8.
* :func:`quartic_monotone_convex` - that quartic is increasing and convex on t > 0, the
  reason Newton from the right converges monotonically.
* :func:`sqrt_gain_concave` - the sqrt gain is increasing and concave with g(0) = 0.
* :func:`ir_lemma_two`, :func:`ir_lemma_three` - the lemma behind Thm 1: for concave g with
  g(0) = 0, the final marginal gains of the bought models add up to at most the total gain.

The lemma, written out (any number k of bought models, in any order 1..k, S_l = N_1 + ... +
N_l): the total gain telescopes, g(S_k) = sum_l [g(S_l) - g(S_{l-1})]. Model l's final marginal
is g(S_k) - g(S_k - N_l). Since S_k - N_l >= S_{l-1} and concave increments shrink as their
start moves right, g(S_k) - g(S_k - N_l) <= g(S_l) - g(S_{l-1}). Summing over l: the sum of
final marginals is at most g(S_k). Thm 1 follows: i pays each seller its final marginal minus
lam (N_j/N_i) d_ij (Eq. 12), so with d >= 0 it pays at most its gain; and each seller receives
at least its cost c_j, because every rule keeps a bought model's final marginal above its price.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["ALL", "quartic_monotone_convex", "sqrt_gain_concave", "sqrt_threshold_ferrari",
           "sqrt_threshold_quartic"]

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


def sqrt_threshold_ferrari():
    """The closed form :meth:`mechanisms.gains.SqrtGain.thresholds` evaluates: with
    v = sqrt(N_j) / t the quartic reads v^4 - q v - 1 = 0, q = 4 sqrt(K) / (P sqrt(N_j));
    for r = sqrt(2y), y the real root of the resolvent cubic y^3 + y = q^2 / 8, it factors as
    (v^2 - r v + y - q/(2r)) (v^2 + r v + y + q/(2r)), whose first factor has the real root
    v = (r + sqrt(2q/r - r^2)) / 2; and x = N_j (v + 1/v)^2 / 4."""
    v, q, y = sp.symbols("v q y", positive=True)
    quartic = P * t**4 + 4 * sp.sqrt(K) * t**3 - P * Nj**2
    in_v = sp.expand(quartic.subs(t, sp.sqrt(Nj) / v) * v**4 / (P * Nj**2))
    qv = 4 * sp.sqrt(K) / (P * sp.sqrt(Nj))
    assert sp.simplify(in_v - (1 + qv * v - v**4)) == 0
    r = sp.sqrt(2 * y)
    factors = sp.expand((v**2 - r * v + y - q / (2 * r)) * (v**2 + r * v + y + q / (2 * r)))
    residue = sp.simplify(factors - (v**4 - q * v - 1))  # a constant: ab + 1
    assert not residue.has(v)
    assert sp.simplify(residue * y - (y**3 + y - q**2 / 8)) == 0  # zero on the resolvent
    root = (r + sp.sqrt(2 * q / r - r**2)) / 2
    assert sp.simplify(root**2 - r * root + y - q / (2 * r)) == 0
    x_of_v = ((Nj / t + t) / 2) ** 2
    assert sp.simplify(x_of_v.subs(t, sp.sqrt(Nj) / v) - Nj * (v + 1 / v) ** 2 / 4) == 0
    return {"quartic_in_v": sp.Eq(v**4 - q * v - 1, 0), "resolvent": sp.Eq(y**3 + y, q**2 / 8),
            "v": root}


def quartic_monotone_convex():
    f = P * t**4 + 4 * sp.sqrt(K) * t**3 - P * Nj**2
    assert sp.diff(f, t).is_positive and sp.diff(f, t, 2).is_positive
    return {"f'": sp.diff(f, t), "f''": sp.diff(f, t, 2)}


g = sp.Function("g")
a, b, e = sp.symbols("a b e", positive=True)


def ir_lemma_two():
    """Two models: total gain minus the sum of final marginals is g(a) + g(b) - g(a+b) (with
    g(0) = 0), i.e. subadditivity, which concavity with g(0) = 0 gives."""
    total = g(a + b) - g(0)
    marginals = (g(a + b) - g(b)) + (g(a + b) - g(a))
    slack = sp.expand(total - marginals)
    assert sp.simplify(slack - (g(a) + g(b) - g(a + b) - g(0))) == 0
    # for the sqrt gain the slack is positive: check it symbolically at g = sqrt gain
    K_, N_ = sp.symbols("K N", positive=True)

    def sq(x):
        return sp.sqrt(K_ / N_) - sp.sqrt(K_ / (N_ + x))

    sq_slack = sq(a) + sq(b) - sq(a + b)
    # d/db of the slack is g'(b) - g'(a + b) > 0 and the slack is 0 at b = 0
    assert sp.simplify(sq_slack.subs(b, 0)) == 0
    deriv = sp.diff(sq_slack, b)
    assert (deriv - (sp.diff(sq(b), b) - sp.diff(sq(a + b), b))).equals(0)
    assert sp.simplify(sp.diff(sq(x), x, 2)).is_negative  # g' decreasing: deriv > 0
    return {"slack": slack, "sqrt_slack": sq_slack}


def ir_lemma_three():
    """Three models: the slack splits into two telescoped concavity gaps, each >= 0."""
    S = a + b + e
    total = g(S) - g(0)
    marginals = (g(S) - g(S - a)) + (g(S) - g(S - b)) + (g(S) - g(S - e))
    # order 1 = a, 2 = b, 3 = e: S_1 = a, S_2 = a + b, S_3 = S
    gaps = [
        (g(a) - g(0)) - (g(S) - g(S - a)),      # increment over [0, a] vs [S - a, S]
        (g(a + b) - g(a)) - (g(S) - g(S - b)),  # increment over [a, a+b] vs [S - b, S]
        (g(S) - g(a + b)) - (g(S) - g(S - e)),  # the last one: equal (S - e = a + b)
    ]
    assert sp.simplify(sp.expand(total - marginals - sum(gaps))) == 0
    assert sp.simplify(gaps[2]) == 0
    return {"gaps": gaps}


ALL = (sqrt_gain_concave, sqrt_threshold_quartic, sqrt_threshold_ferrari,
       quartic_monotone_convex, ir_lemma_two, ir_lemma_three)
