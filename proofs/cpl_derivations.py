"""Symbolic derivations behind :mod:`mechanisms.cpl`, checked by sympy (run as tests).

Each function returns the sympy facts it establishes and raises AssertionError if one fails:

* :func:`first_order_condition` - dU/dq = 0 is 2 c q^3 - P q^2 - v K = 0, and its inverse is
  P(q) = 2 c q - v K / q^2.
* :func:`client_strict_concavity` - d^2U/dq^2 = -2 c - 2 v K / q^3 < 0 for q > 0.
* :func:`p1_convex_in_y` - in y = 1/q the objective K (y - 1) is linear and each budget term
  2 c / y^2 - v K y has second derivative 12 c / y^4 > 0.
* :func:`kkt_participation` - stationarity of the Lagrangian gives 4 c q^3 / K + v = 1/lambda.
* :func:`price_identity` - at the KKT point P(q) = (K / (2 q^2)) (1/lambda - 3 v).
"""

from __future__ import annotations

import sympy as sp

__all__ = [
    "ALL",
    "client_strict_concavity",
    "first_order_condition",
    "kkt_participation",
    "p1_convex_in_y",
    "price_identity",
]

q, y, P, c, v, K, lam, others = sp.symbols("q y P c v K lambda S", positive=True)
Preal = sp.Symbol("P", real=True)


def _utility(price):
    # U_n = P q - c q^2 - v (K (1 - q)/q + S), S the other clients' part of the bound
    return price * q - c * q**2 - v * (K * (1 - q) / q + others)


def first_order_condition():
    dU = sp.diff(_utility(Preal), q)
    cubic = sp.expand(-dU * q**2)
    assert sp.simplify(cubic - (2 * c * q**3 - Preal * q**2 - v * K)) == 0
    inverse = sp.solve(sp.Eq(dU, 0), Preal)
    assert len(inverse) == 1
    assert sp.simplify(inverse[0] - (2 * c * q - v * K / q**2)) == 0
    return {"foc": sp.Eq(cubic, 0), "inverse_price": inverse[0]}


def client_strict_concavity():
    d2 = sp.simplify(sp.diff(_utility(Preal), q, 2))
    assert sp.simplify(d2 - (-2 * c - 2 * v * K / q**3)) == 0
    assert d2.is_negative  # c > 0, v K / q^3 > 0 for the positive symbols
    return {"second_derivative": d2}


def p1_convex_in_y():
    objective = K * (y - 1)  # K (1 - q)/q with q = 1/y
    assert sp.simplify(objective - (K * (1 - 1 / y) / (1 / y))) == 0
    assert sp.diff(objective, y, 2) == 0
    # budget term of one client, P(q) q with q = 1/y
    term = sp.simplify(((2 * c * q - v * K / q**2) * q).subs(q, 1 / y))
    assert sp.simplify(term - (2 * c / y**2 - v * K * y)) == 0
    d2 = sp.simplify(sp.diff(term, y, 2))
    assert sp.simplify(d2 - 12 * c / y**4) == 0 and d2.is_positive
    # ... while in q the objective's curvature has the right sign but the budget term's does not
    term_q = sp.diff(2 * c * q**2 - v * K / q, q, 2)
    assert sp.simplify(term_q - (4 * c - 2 * v * K / q**3)) == 0  # indefinite sign in q
    return {"objective_in_y": objective, "budget_term_in_y": term, "d2_budget_term": d2}


def kkt_participation():
    L = K * (1 - q) / q + lam * (2 * c * q**2 - v * K / q)
    stationarity = sp.numer(sp.together(sp.diff(L, q)))
    # -K + lam (4 c q^3 + v K) = 0  <=>  4 c q^3 / K + v = 1/lam
    target = 4 * c * q**3 / K + v - 1 / lam
    ratio = sp.simplify(stationarity / target)
    assert ratio.free_symbols <= {lam, K} and sp.simplify(sp.diff(ratio, q)) == 0
    return {"stationarity": sp.Eq(target, 0)}


def price_identity():
    inverse = 2 * c * q - v * K / q**2
    lam_star = 1 / (4 * c * q**3 / K + v)  # the KKT relation solved for lambda
    claimed = (K / (2 * q**2)) * (1 / lam_star - 3 * v)
    assert sp.simplify(inverse - claimed) == 0
    # threshold theorem: with v^t = 1/(3 lambda), the sign of P is the sign of v^t - v
    vt = 1 / (3 * lam)
    assert sp.simplify((K / (2 * q**2)) * (1 / lam - 3 * v) - (3 * K / (2 * q**2)) * (vt - v)) == 0
    return {"price": claimed}


ALL = (
    first_order_condition,
    client_strict_concavity,
    p1_convex_in_y,
    kkt_participation,
    price_identity,
)
