"""The CPL oracle: Luo, Feng, Wang, Huang, Tassiulas, "Incentive Mechanism Design for
Unbiased Federated Learning with Randomized Client Participation" (ICDCS 2023), in the forms
the specification (spec cpl.md; docs/explanation-cpl.md) reconstructs, one client at a time.

Plain Python floats and ``math``; sums by ``math.fsum``. The game's clients n = 0..N-1 have
aggregation weights a_n, gradient bounds G_n, cost coefficients c_n > 0, valuations v_n >= 0,
boxes [q_min, q_max_n]; the server has the budget B and the bound's constants alpha and R.

Used only to check the mechanisms (:mod:`proofs.conformance`), never in their place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "CPL_SETTINGS",
    "best_response",
    "best_response_v0",
    "bound",
    "bound_coefficients",
    "client_utilities",
    "equilibrium",
    "inverse_price",
    "kkt_value",
    "linesearch_multiplier",
    "mu_bracket",
    "posted_floor_spend",
    "spend",
    "spend_scale",
    "unbiased_aggregate",
    "weights",
]

INF = math.inf

CPL_SETTINGS = {"CPL_C": 5.0, "CPL_V_MEAN": 100.0, "CPL_BUDGET": 15.0, "CPL_ALPHA": 1.82,
                "CPL_R": 200, "CPL_Q_MIN": 0.01, "CPL_Q_MAX": 1.0}
"""The benchmark's settings (spec, "Experimental settings"): c_n = 5, v_n ~ Exp(mean 100),
B = 15 (MNIST), alpha = 1.82 (MNIST), R = 200, q_min = 0.01, q_max = 1."""


def weights(a: Sequence[float]) -> list[float]:
    """The aggregation weights a_n = d_n / sum_m d_m (spec, "Unbiased aggregation"): they
    sum to 1."""
    total = math.fsum(a)
    return [x / total for x in a]


def bound_coefficients(alpha: float, a: Sequence[float], G: Sequence[float],
                       R: float) -> list[float]:
    """K_n = alpha a_n^2 G_n^2 / R (spec, "Players"), with a_n the normalised weights."""
    return [alpha * w * w * g * g / R for w, g in zip(weights(a), G, strict=True)]


def unbiased_aggregate(w: Sequence[float], updates, participated: Sequence[bool],
                       a: Sequence[float], q: Sequence[float]) -> list[float]:
    """The server's step: w^{r+1} = w^r + sum_{n in S^r} (a_n / q_n) (w_n^{r+1} - w^r), the
    weights a_n normalised; an empty round leaves w unchanged."""
    a = weights(a)
    return [math.fsum([w[k], *((a[n] / q[n]) * (updates[n][k] - w[k])
                               for n in range(len(a)) if participated[n])])
            for k in range(len(w))]


def bound(K: Sequence[float], q: Sequence[float]) -> float:
    """The q-dependent part of the convergence bound (Thm 1): sum_n K_n (1 - q_n)/q_n."""
    return math.fsum(k * (1.0 - x) / x for k, x in zip(K, q, strict=True))


def inverse_price(c: float, v: float, K: float, q: float) -> float:
    """The price at which q is client n's best response: P_n(q) = 2 c_n q - v_n K_n / q^2."""
    return 2.0 * c * q - v * K / (q * q)


def spend(P: Sequence[float], q: Sequence[float]) -> float:
    """What the server pays: sum_n P_n q_n."""
    return math.fsum(p * x for p, x in zip(P, q, strict=True))


def best_response(c: float, v: float, K: float, P: float, q_min: float,
                  q_max: float) -> float:
    """Client n's best response to the price P_n: the unique positive root of
    2 c_n q^3 - P_n q^2 - v_n K_n = 0 (for v_n K_n = 0: q = P_n / (2 c_n), nothing for
    P_n <= 0), clipped to [q_min, q_max_n]. Found by bisection on the sign of the cubic in
    the box: the cubic is < 0 below its one positive root and > 0 above it (Descartes)."""

    def cubic(q):
        return 2.0 * c * q ** 3 - P * q * q - v * K

    if cubic(q_min) >= 0.0:
        return q_min
    if cubic(q_max) <= 0.0:
        return q_max
    lo, hi = q_min, q_max
    while True:
        mid = lo + (hi - lo) / 2.0
        if not lo < mid < hi:
            return hi if abs(cubic(hi)) <= abs(cubic(lo)) else lo
        if cubic(mid) < 0.0:
            lo = mid
        else:
            hi = mid


def posted_floor_spend(c, v, K, shape, level: float, q_min: float, q_max) -> float:
    """The spend of the posted price P_n = p s_n at the least scale p >= 0 at which every
    client's unconstrained best response reaches ``level``: a client's response to P_n
    increases with P_n and is q at its inverse price P_n(q), so p* = max(0, max_n
    P_n(level) / s_n) (inf where a client with s_n = 0 needs a positive price; a client with
    P_n(level) <= 0 reaches it at any p >= 0); the spend sum_n p* s_n q_n(p* s_n) with the
    clipped best responses (inf where p* is)."""
    p = 0.0
    for k in range(len(c)):
        need = inverse_price(c[k], v[k], K[k], level)
        if need > 0.0:
            p = max(p, need / shape[k] if shape[k] > 0.0 else INF)
    if p == INF:
        return INF
    P = [p * x for x in shape]
    return spend(P, [best_response(c[k], v[k], K[k], P[k], q_min, q_max[k])
                     for k in range(len(c))])


def best_response_v0(c: float, P: float, q_min: float, q_max: float) -> float:
    """The authors' shortcut (spec cpl.md, "Baselines": the response as if v_n = 0):
    q_n = P_n / (2 c_n), clipped to [q_min, q_max_n]."""
    return min(max(P / (2.0 * c), q_min), q_max)


def spend_scale(q, c, v, K) -> float:
    """The size of the terms the spend sums at the inverse prices of q (the scale a solver's
    relative budget tolerance refers to): sum_n [|2 c_n q_n^2| + |v_n K_n / q_n|], the two
    terms of P_n q_n = 2 c_n q_n^2 - v_n K_n / q_n."""
    return math.fsum(abs(2.0 * c[n] * q[n] * q[n]) + abs(v[n] * K[n] / q[n])
                     for n in range(len(q)))


def client_utilities(P, q, c, v, K) -> list[float]:
    """U_n = P_n q_n - c_n q_n^2 - v_n bound(q) (the constant dropped)."""
    b = bound(K, q)
    return [P[n] * q[n] - c[n] * q[n] * q[n] - v[n] * b for n in range(len(q))]


def _q_of_mu(mu: float, c, v, K, q_min: float, q_max) -> list[float]:
    """The KKT participation at mu = 1/lambda (spec, "Solvers", bisection):
    q_n(mu) = clip([K_n (mu - v_n)_+ / (4 c_n)]^(1/3), q_min, q_max_n)."""
    out = []
    for n in range(len(c)):
        inner = K[n] * max(mu - v[n], 0.0) / (4.0 * c[n])
        out.append(min(max(inner ** (1.0 / 3.0), q_min), q_max[n]))
    return out


def mu_bracket(c, v, K, q_min: float, q_max) -> tuple[float, float]:
    """The bracket of mu = 1/lambda where the budget's root lies (spec "Solvers",
    bisection): q_n(mu) sits at q_min for mu <= v_n + 4 c_n q_min^3 / K_n and at q_max_n for
    mu >= v_n + 4 c_n q_max_n^3 / K_n (K_n > 0; a client with K_n = 0 sits at q_min for every
    mu), so every client sits at q_min below the least of the first and at its q_max above
    the largest of the second. Needs some K_n > 0."""
    pos = [k for k in range(len(c)) if K[k] > 0.0]
    return (min(v[k] + 4.0 * c[k] * q_min ** 3 / K[k] for k in pos),
            max(v[k] + 4.0 * c[k] * q_max[k] ** 3 / K[k] for k in pos))


def kkt_value(c: float, v: float, K: float, q: float) -> float:
    """4 c q^3 / K + v: the 1/lambda* that client n's first-order condition gives at an
    interior q (the stationarity of P1' in q_n: its price's derivative against the bound's,
    spec "Solvers"). A client with K = 0 has no bound term; the toolkit documents its value
    as v (cpl.Equilibrium: the line search's multiplier)."""
    return v if K == 0.0 else 4.0 * c * q ** 3 / K + v


def linesearch_multiplier(c, v, K, q) -> float:
    """The multiplier the line search reports (no multiplier comes out of a grid search;
    cpl.Equilibrium documents it): 1 / the median over the clients of :func:`kkt_value` at
    its q (the mean of the middle two for an even number of clients)."""
    values = sorted(kkt_value(c[k], v[k], K[k], q[k]) for k in range(len(q)))
    n = len(values)
    mid = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2.0
    return 1.0 / mid


def _spend_of(q, c, v, K) -> float:
    """S = sum_n [2 c_n q_n^2 - v_n K_n / q_n]: the budget the inverse prices of q use."""
    return math.fsum(2.0 * c[n] * q[n] * q[n] - v[n] * K[n] / q[n] for n in range(len(q)))


def equilibrium(c, v, K, q_min: float, q_max, B: float) -> dict:
    """The Stackelberg equilibrium (Problem P1', spec "Players" and "Solvers"): the server
    minimises sum K_n (1 - q_n)/q_n subject to sum_n [2 c_n q_n^2 - v_n K_n / q_n] <= B on the
    box; the clients are priced at P_n = 2 c_n q_n - v_n K_n / q_n^2.

    * every K_n = 0: the bound is 0 whatever q is; the floor q_min (the least spend) is
      bought ("degenerate");
    * the q_max spend within B: the budget is slack, q = q_max, lambda* = 0 ("slack");
    * the q_min spend above B: infeasible ("infeasible");
    * otherwise the budget binds: S(mu) = B for the nondecreasing S(mu) = spend of
      q(mu), found by bisection on mu = 1/lambda* until no float lies between the ends.

    Returns {"status", "q", "prices", "mu"} (mu = 1/lambda*, 0 when slack or degenerate)."""
    n = len(c)
    top = [q_max[k] for k in range(n)]
    floor = [q_min] * n

    def answer(status, q, mu):
        return {"status": status, "q": q, "mu": mu,
                "prices": [inverse_price(c[k], v[k], K[k], q[k]) for k in range(n)]}

    if all(k == 0.0 for k in K):
        return answer("degenerate", floor, 0.0)
    if _spend_of(top, c, v, K) <= B:
        return answer("slack", top, 0.0)
    if _spend_of(floor, c, v, K) > B:
        return answer("infeasible", floor, math.nan)
    lo = 0.0
    hi = mu_bracket(c, v, K, q_min, q_max)[1]
    while True:
        mid = lo + (hi - lo) / 2.0
        if not lo < mid < hi:
            break
        if _spend_of(_q_of_mu(mid, c, v, K, q_min, q_max), c, v, K) < B:
            lo = mid
        else:
            hi = mid
    return answer("binding", _q_of_mu(hi, c, v, K, q_min, q_max), hi)

