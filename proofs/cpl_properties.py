"""The CPL properties (Luo et al. 2023; spec cpl.md "Equilibrium facts"), with preconditions
built into the instance strategies, and the variants with a precondition dropped."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from mechanisms import cpl

from .checker import Property
from .strategies import cpl_games

__all__ = ["CPL_PROPERTIES", "CplCase"]

_finite = {"allow_nan": False, "allow_infinity": False}


def _arr(a) -> str:
    return "[" + ", ".join(repr(float(v)) for v in np.ravel(a)) + "]"


@dataclass(frozen=True, eq=False)
class CplCase:
    game: cpl.Game
    extra: tuple = ()

    def code(self) -> str:
        g = self.game
        s = (f"game = cpl.Game(a={_arr(g.a)}, G={_arr(g.G)}, c={_arr(g.c)}, v={_arr(g.v)}, "
             f"budget={g.budget!r}, alpha={g.alpha!r}, R={g.R!r}, q_min={g.q_min!r}, "
             f"q_max={_arr(g.q_max)})")
        if self.extra:
            s += f"\nextra = {self.extra!r}"
        return s

    def __repr__(self):
        return self.code()


def _games(**kw):
    return cpl_games(**kw).map(CplCase)


@st.composite
def _with_prices(draw):
    game = draw(cpl_games(n=1, budget="any"))
    P0 = draw(st.floats(-50, 50, **_finite))
    h = draw(st.floats(1e-3, 20, **_finite))
    return CplCase(game, (P0, h))


@st.composite
def _with_two_q(draw):
    game = draw(cpl_games(budget="any"))
    u = np.array(draw(st.lists(st.floats(0, 1), min_size=game.n, max_size=game.n)))
    w = np.array(draw(st.lists(st.floats(0, 1), min_size=game.n, max_size=game.n)))
    q = game.q_min + u * (game.q_max - game.q_min)
    q2 = q + w * (game.q_max - q)
    return CplCase(game, (tuple(q), tuple(q2)))


@st.composite
def _aggregation(draw):
    n = draw(st.integers(1, 6))
    a = np.array(draw(st.lists(st.floats(0.05, 1), min_size=n, max_size=n)))
    q = np.array(draw(st.lists(st.floats(0.05, 1), min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.floats(-5, 5), min_size=2, max_size=2)))
    U = np.array(draw(st.lists(st.floats(-5, 5), min_size=2 * n, max_size=2 * n))).reshape(n, 2)
    game = cpl.Game(a=a, G=np.ones(n), c=np.ones(n), v=np.zeros(n), budget=1.0, q_min=0.01)
    return CplCase(game, (tuple(q), tuple(w), tuple(map(tuple, U))))


# ---------------------------------------------------------------------------- violations


def br_monotone_convex(subject, case):
    P0, h = case.extra
    q = cpl.unconstrained_response(case.game, [P0])[0], \
        cpl.unconstrained_response(case.game, [P0 + h])[0], \
        cpl.unconstrained_response(case.game, [P0 + 2 * h])[0]
    tol = 1e-12 * (1 + max(q))
    return max(0.0, q[0] - q[1] - tol) + max(0.0, q[1] - 0.5 * (q[0] + q[2]) - tol)


def _interior(game, q):
    return (q > game.q_min * (1 + 1e-9)) & (q < game.q_max * (1 - 1e-9))


def se_identities(subject, case):
    g = case.game
    eq = subject.solve(g)
    resid = [float(np.max(np.abs(cpl.best_response(g, eq.prices) - eq.q) / eq.q))]
    if eq.status == "slack":
        resid.append(float(np.max(np.abs(eq.q - g.q_max))))
    else:
        inner = _interior(g, eq.q)
        mu = 1.0 / eq.multiplier
        share = 4 * g.c * eq.q**3 / g.K + g.v
        resid.append(float(np.max(np.abs(share[inner] - mu), initial=0.0)) / mu)
        alt = g.K / (2 * eq.q**2) * (mu - 3 * g.v)
        scale = 1.0 + float(np.max(np.abs(eq.prices)))
        resid.append(float(np.max(np.abs(alt[inner] - eq.prices[inner]), initial=0.0)) / scale)
        resid.append(eq.budget_residual)
    return max(0.0, max(resid) - 1e-7)


def _sign_mismatches(subject, case, interior_only):
    g = case.game
    eq = subject.solve(g)
    if eq.status == "slack":
        return 0.0
    vt = eq.v_threshold
    sel = np.abs(g.v - vt) > 1e-6 * vt
    sel &= np.abs(eq.prices) > 1e-9 * (1 + np.abs(eq.prices).max())
    if interior_only:
        sel &= _interior(g, eq.q)
    return float(np.sum((eq.prices[sel] > 0) != (g.v[sel] < vt)))


def threshold_interior(subject, case):
    return _sign_mismatches(subject, case, True)


def threshold_all(subject, case):
    return _sign_mismatches(subject, case, False)


def aggregation_unbiased(subject, case):
    g = case.game
    q, w, U = (np.asarray(x, dtype=float) for x in case.extra)
    n = g.n
    mean = np.zeros_like(w)
    for bits in itertools.product([False, True], repeat=n):
        S = np.array(bits)
        prob = float(np.prod(np.where(S, q, 1 - q)))
        mean += prob * cpl.unbiased_aggregate(w, U, S, g.a, q)
    return max(0.0, float(np.max(np.abs(mean - g.a @ U))) - 1e-9 * (1 + np.abs(U).max()))


def bound_monotone(subject, case):
    q, q2 = (np.asarray(x) for x in case.extra)
    b, b2 = cpl.bound(case.game, q), cpl.bound(case.game, q2)
    return max(0.0, b2 - b - 1e-12 * (1 + abs(b)))


def _beats_baselines(subject, case, floor_precondition):
    g = case.game
    if g.budget <= 0:
        return 0.0
    eq = subject.solve(g)
    worst = 0.0
    for scheme in (cpl.uniform_pricing, cpl.weighted_pricing):
        base = scheme(g)
        if floor_precondition and (base.q <= g.q_min * (1 + 1e-12)).any():
            continue
        worst = max(worst, (eq.objective - base.objective) / base.objective)
    return max(0.0, worst - 1e-9)


def beats_baselines(subject, case):
    return _beats_baselines(subject, case, True)


def beats_baselines_any(subject, case):
    return _beats_baselines(subject, case, False)


CPL_PROPERTIES = {
    p.key: p
    for p in [
        Property("cpl_best_response", "Best response increasing and convex in the price",
                 "q_n(P) is increasing and convex", "cubic FOC", "c_n > 0, v_n >= 0", "cpl",
                 _with_prices, br_monotone_convex),
        Property("cpl_se_identities", "Equilibrium identities",
                 "4 c q^3/K + v = 1/lambda* (interior); P = (K/2q^2)(1/lambda* - 3v); "
                 "q(P^SE) = q^SE; budget binds or q = q_max", "Lemma, SE",
                 "feasible budget", "cpl", lambda: _games(large_v=True, budget="any"),
                 se_identities),
        Property("cpl_threshold", "Price-sign threshold theorem",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)", "threshold theorem",
                 "interior clients (q_min < q_n < q_max_n)", "cpl",
                 lambda: _games(large_v=True), threshold_interior),
        Property("cpl_threshold_all", "Price-sign threshold theorem, clipped clients too",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)",
                 "threshold theorem (precondition dropped)", "every client", "cpl",
                 lambda: _games(large_v=True, max_n=3), threshold_all,
                 note="a client pinned at q_max can pay (P < 0) with v_n < v^t"),
        Property("cpl_unbiased", "Unbiased aggregation",
                 "E[w'] = sum_n a_n w_n (exact, over all participation subsets)",
                 "aggregation rule", "N <= 6 (exhaustive expectation)", "cpl",
                 _aggregation, aggregation_unbiased),
        Property("cpl_bound_monotone", "Bound decreasing in participation",
                 "q <= q' elementwise => bound(q') <= bound(q)", "Thm 1", "q in the box",
                 "cpl", _with_two_q, bound_monotone),
        Property("cpl_beats_baselines", "Equilibrium beats uniform and weighted pricing",
                 "bound(q^SE) <= bound(q^baseline) at the same budget", "Sec. VI claim",
                 "B > 0; the baseline leaves no client on the q_min floor", "cpl",
                 lambda: _games(), beats_baselines),
        Property("cpl_beats_baselines_any", "Equilibrium beats baselines, floor allowed",
                 "bound(q^SE) <= bound(q^baseline) at the same budget",
                 "Sec. VI claim (precondition dropped)", "B > 0", "cpl",
                 lambda: _games(max_n=4), beats_baselines_any,
                 note="a floor client is paid less than P(q_min) by the baseline"),
    ]
}
