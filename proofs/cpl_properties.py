"""The CPL properties (Luo et al. 2023; spec cpl.md "Equilibrium facts"), with preconditions
built into the instance strategies, and the variants with a precondition dropped."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mechanisms import cpl

from .core import Property, excess
from .strategies import CPL_FLOOR_RTOL, MAX_CLIENTS, CplCase, cpl_games
from .subjects import CplPricingRule, CplSolver

__all__ = ["CPL_PROPERTIES", "CplCase"]

def _games(max_n=MAX_CLIENTS, **kw):
    """``instances`` of a property: ``(max_clients=None) -> strategy`` of games of 1 to
    ``max_clients`` (default ``max_n``) clients."""

    def instances(max_clients=None):
        top = max_n if max_clients is None else max_clients
        return cpl_games(max_n=top, **kw).map(CplCase)

    instances.clients = (1, max_n)  # the default range, read into Property.clients
    return instances


# ---------------------------------------------------------------------------- violations


def _interior(game, q):
    return (q > game.q_min * (1 + 1e-9)) & (q < game.q_max * (1 - 1e-9))


def _finite_prices(game, eq) -> np.ndarray | None:
    """The subject's prices as an (n,) array, or None when any is NaN or infinite (a failure
    of every CPL property: nothing is computed from them)."""
    P = np.asarray(eq.prices, dtype=float)
    return P if P.shape == (game.n,) and np.isfinite(P).all() else None


def se_identities(subject, case):
    g = case.game
    eq = subject.solve(g)
    if _finite_prices(g, eq) is None or not np.isfinite(np.asarray(eq.q, dtype=float)).all():
        return math.inf
    resid = [float(np.max(np.abs(cpl.best_response(g, eq.prices) - eq.q) / eq.q))]
    if eq.status == "slack":
        resid.append(float(np.max(np.abs(eq.q - g.q_max))))
    else:
        inner = _interior(g, eq.q)
        if not (math.isfinite(eq.multiplier) and eq.multiplier > 0):
            return math.inf  # a binding budget has a positive, finite multiplier
        mu = 1.0 / eq.multiplier
        share = 4 * g.c * eq.q**3 / g.K + g.v
        resid.append(float(np.max(np.abs(share[inner] - mu), initial=0.0)) / mu)
        alt = g.K / (2 * eq.q**2) * (mu - 3 * g.v)
        scale = 1.0 + float(np.max(np.abs(eq.prices)))
        resid.append(float(np.max(np.abs(alt[inner] - eq.prices[inner]), initial=0.0)) / scale)
        resid.append(eq.budget_residual)
    return excess(max(resid), 1e-7)


def _sign_mismatches(subject, case, interior_only):
    g = case.game
    eq = subject.solve(g)
    if eq.status == "slack":
        return None  # the theorem speaks of a binding budget
    vt = eq.v_threshold
    if _finite_prices(g, eq) is None or not (math.isfinite(vt) and vt > 0):
        return math.inf  # NaN is a failure: a binding budget has a finite threshold > 0
    sel = np.abs(g.v - vt) > 1e-6 * vt
    sel &= np.abs(eq.prices) > 1e-9 * (1 + np.abs(eq.prices).max())
    if interior_only:
        sel &= _interior(g, eq.q)
    count = float(np.sum((eq.prices[sel] > 0) != (g.v[sel] < vt)))
    return count, count, bool(sel.any())  # discriminating: some client's sign was tested


def threshold_interior(subject, case):
    return _sign_mismatches(subject, case, True)


def threshold_all(subject, case):
    return _sign_mismatches(subject, case, False)


def _beats_baselines(subject, case, floor_precondition):
    g = case.game
    if g.budget <= 0:
        return None  # precondition B > 0 (built into the strategy)
    compared = []
    for scheme in (cpl.uniform_pricing, cpl.weighted_pricing):
        base = scheme(g)
        if floor_precondition and (base.q <= g.q_min * (1 + CPL_FLOOR_RTOL)).any():
            continue
        compared.append(base)
    if not compared:
        return None  # every baseline put a client on the floor: nothing to compare
    eq = subject.solve(g)
    P = _finite_prices(g, eq)
    if P is None:
        return math.inf
    # the bound its prices buy, recomputed from the clients' best responses (not the
    # subject's own report of its objective)
    bound = cpl.bound(g, cpl.best_response(g, P))
    worst = max(_relative_gap(bound, b.objective, float(np.sum(g.K))) for b in compared)
    return excess(worst, 1e-9)


def _relative_gap(bound_eq, bound_base, scale):
    """(bound_eq - bound_base) / bound_base, relative to at least ``BOUND_FLOOR`` x
    ``scale`` (sum_n K_n, the bound at q = 1/2): a baseline at bound 0 (every client at
    q = 1, possible with a slack budget) is matched by an equilibrium at bound 0 up to the
    rounding of K (1 - q)/q near q = 1 (1e-20 measured), not by an infinite gap."""
    if math.isnan(bound_eq):
        return math.inf
    return (bound_eq - bound_base) / max(bound_base, BOUND_FLOOR * scale)


BOUND_FLOOR = 1e-6


def beats_baselines(subject, case):
    return _beats_baselines(subject, case, True)


def beats_baselines_any(subject, case):
    return _beats_baselines(subject, case, False)


def budget_feasible(subject, case):
    """The prices spend at most the budget: sum_n P_n q_n(P) <= B (relative excess)."""
    g = case.game
    eq = subject.solve(g)
    P = _finite_prices(g, eq)
    if P is None:
        return math.inf
    # the spend recomputed from the prices and the clients' best responses (not the
    # subject's own report of what it spent)
    spent = float(np.sum(P * cpl.best_response(g, P)))
    return excess((spent - g.budget) / max(1.0, abs(g.budget)), 1e-9)


def threshold_formula(subject, case):
    """The threshold's formula (spec cpl.md): v^t = 1/(3 lambda*), and it is where the
    equilibrium price changes sign: with P_n = (K_n/2 q_n^2)(1/lambda* - 3 v_n) for an
    interior client, v^t = v_n + 2 q_n^2 P_n / (3 K_n) for every interior client n, read
    from the subject's prices and responses (relative error). Binding budgets only (a slack
    budget has no threshold); NaN or a non-positive threshold is a failure."""
    g = case.game
    eq = subject.solve(g)
    if eq.status == "slack":
        return None
    vt, lam = eq.v_threshold, eq.multiplier
    P = _finite_prices(g, eq)
    q = np.asarray(eq.q, dtype=float)
    if P is None or not np.isfinite(q).all() or not (
            math.isfinite(vt) and vt > 0 and math.isfinite(lam) and lam > 0):
        return math.inf
    errors = [abs(vt * 3.0 * lam - 1.0)]
    inner = _interior(g, q)
    implied = g.v[inner] + 2.0 * q[inner] ** 2 * P[inner] / (3.0 * g.K[inner])
    errors += list(np.abs(implied - vt) / vt)
    return excess(max(errors), 1e-7), 0.0, bool(inner.any())


# ---------------------------------------------------------------- in bulk (the batch engine)


_POSTED = {"uniform": lambda g: np.ones_like(g.a), "weighted": lambda g: g.a,
           "gradient": lambda g: g.a * g.G}


def _cpl_batch_subject(subject):
    """("solver", solve) or ("pricing", prices-of-games) when ``subject`` can be evaluated
    on a :class:`mechanisms.cpl.GameBatch`: the bisection solver without options, or a
    built-in posted price (uniform, weighted, gradient); None otherwise."""
    if type(subject).solve not in (CplSolver.solve, CplPricingRule.solve):
        return None  # a subclass solves its own way: evaluate what it does, one by one
    if isinstance(subject, CplSolver) and subject.method == "bisection" \
            and not dict(subject.options):
        return "solver", cpl.solve_batch
    if isinstance(subject, CplPricingRule) and isinstance(subject.rule, str) \
            and subject.rule in _POSTED:
        shape = _POSTED[subject.rule]
        return "pricing", lambda g: cpl.posted_pricing_batch(g, shape(g)).prices
    return None


def _interior_b(g, q):
    return (q > g.q_min[:, None] * (1 + 1e-9)) & (q < g.q_max * (1 - 1e-9))


def _cpl_se(kind, solve, g):
    eq = solve(g)
    resid = np.max(np.abs(cpl.best_response(g, eq.prices) - eq.q) / eq.q, axis=1)
    slack_gap = np.max(np.abs(eq.q - g.q_max), axis=1)
    inner = _interior_b(g, eq.q)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.where(eq.slack, 1.0, 1.0 / eq.multiplier)[:, None]
        share = 4 * g.c * eq.q**3 / g.K + g.v
        kkt = np.max(np.where(inner, np.abs(share - mu), 0.0), axis=1) / mu[:, 0]
        alt = g.K / (2 * eq.q**2) * (mu - 3 * g.v)
        scale = 1.0 + np.max(np.abs(eq.prices), axis=1)
        price = np.max(np.where(inner, np.abs(alt - eq.prices), 0.0), axis=1) / scale
    binding = np.maximum.reduce([kkt, price, eq.budget_residual])
    worst = np.maximum(resid, np.where(eq.slack, slack_gap, binding))
    finite = (np.isfinite(eq.prices).all(axis=1) & np.isfinite(eq.q).all(axis=1)
              & (eq.slack | (np.isfinite(eq.multiplier) & (eq.multiplier > 0))))
    return np.where(finite, _excess_b(worst, 1e-7), np.inf), np.ones(g.size, bool)


def _cpl_signs(interior_only):
    def evaluate(kind, solve, g):
        eq = solve(g)
        vt = eq.v_threshold[:, None]
        with np.errstate(invalid="ignore"):
            sel = np.abs(g.v - vt) > 1e-6 * vt
        P = eq.prices
        sel &= np.abs(P) > 1e-9 * (1 + np.abs(P).max(axis=1, keepdims=True))
        if interior_only:
            sel &= _interior_b(g, eq.q)
        count = np.sum(sel & ((P > 0) != (g.v < vt)), axis=1).astype(float)
        # NaN is a failure: non-finite prices or threshold (binding budgets only)
        broken = ~(np.isfinite(P).all(axis=1) & np.isfinite(eq.v_threshold)
                   & (eq.v_threshold > 0))
        # discriminating: some client's sign was tested (away from the threshold, nonzero
        # price, interior where required)
        return (np.where(eq.slack, 0.0, np.where(broken, np.inf, count)), ~eq.slack,
                sel.any(axis=1))

    return evaluate


def _cpl_threshold_formula(kind, solve, g):
    """:func:`threshold_formula` over a batch (the same statement)."""
    eq = solve(g)
    vt, lam, P, q = eq.v_threshold, eq.multiplier, eq.prices, eq.q
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = _interior_b(g, q)
        implied = g.v + 2.0 * q**2 * P / (3.0 * g.K)
        off = np.max(np.where(inner, np.abs(implied - vt[:, None]), 0.0), axis=1) / vt
        worst = np.maximum(np.abs(vt * 3.0 * lam - 1.0), off)
    finite = (np.isfinite(P).all(axis=1) & np.isfinite(q).all(axis=1) & np.isfinite(vt)
              & (vt > 0) & np.isfinite(lam) & (lam > 0))
    amount = np.where(finite, _excess_b(worst, 1e-7), np.inf)
    return np.where(eq.slack, 0.0, amount), ~eq.slack, ~eq.slack & inner.any(axis=1)


def _cpl_beats(floor_precondition):
    def evaluate(kind, solve, g):
        positive = g.budget > 0
        safe = cpl.GameBatch(g.a, g.G, g.c, g.v, g.q_max, np.where(positive, g.budget, 1.0),
                             g.alpha, g.R, g.q_min)
        worst = np.full(g.size, -np.inf)
        compared = np.zeros(g.size, bool)
        eq = solve(safe)
        # the bound the prices buy, recomputed from the best responses (as the scalar check)
        with np.errstate(invalid="ignore", divide="ignore"):
            bound = safe.bound(cpl.best_response(safe, eq.prices))
        bound = np.where(np.isfinite(eq.prices).all(axis=1), bound, np.nan)
        for shape in (np.ones_like(g.a), g.a):
            base = cpl.posted_pricing_batch(safe, shape)
            use = positive.copy()
            if floor_precondition:
                use &= ~(base.q <= g.q_min[:, None] * (1 + CPL_FLOOR_RTOL)).any(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):  # as _relative_gap
                gap = (bound - base.objective) / np.maximum(
                    base.objective, BOUND_FLOOR * safe.K.sum(axis=1))
            worst = np.where(use, np.maximum(worst, gap), worst)
            compared |= use
        return np.where(compared, _excess_b(worst, 1e-9), 0.0), compared

    return evaluate


def _cpl_budget(kind, solve, g):
    # the spend recomputed from the prices and the clients' best responses, for solvers too
    P = solve(g).prices if kind == "solver" else solve(g)
    with np.errstate(invalid="ignore"):
        spent = np.sum(P * cpl.best_response(g, P), axis=1)
    return (_excess_b((spent - g.budget) / np.maximum(1.0, np.abs(g.budget)), 1e-9),
            np.ones(g.size, bool))


def _excess_b(x, tol):
    """:func:`proofs.core.excess` elementwise (NaN is a failure: inf)."""
    out = np.maximum(0.0, x - tol)
    return np.where(np.isnan(out), np.inf, out)


def _bulk(fn, kinds):
    """A Property's ``batch`` hook: ``subject -> (GameBatch -> arrays)`` for the subjects
    evaluated in bulk (of a kind in ``kinds``), None for the others (one by one)."""
    def for_subject(subject):
        found = _cpl_batch_subject(subject)
        if found is None or found[0] not in kinds:
            return None
        kind, solve = found
        return lambda games: fn(kind, solve, games)

    return for_subject


CPL_PROPERTIES = {
    p.key: dataclasses.replace(p, clients=p.instances.clients)
    for p in [
        Property("cpl_se_identities", "Equilibrium identities",
                 "4 c q^3/K + v = 1/lambda* (interior); P = (K/2q^2)(1/lambda* - 3v); "
                 "q(P^SE) = q^SE; budget binds or q = q_max", "Lemma, SE",
                 "feasible budget", "cpl", _games(large_v=True, budget="any"),
                 se_identities, needs="solver", batch=_bulk(_cpl_se, ("solver",)),
                 note="it reads the budget multiplier lambda* of the equilibrium"),
        Property("cpl_threshold", "Price-sign threshold theorem",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)", "threshold theorem",
                 "interior clients (q_min < q_n < q_max_n)", "cpl",
                 _games(large_v=True), threshold_interior, needs="solver",
                 batch=_bulk(_cpl_signs(True), ("solver",)),
                 note="it reads the threshold v^t = 1/(3 lambda*) of the equilibrium"),
        Property("cpl_threshold_all", "Price-sign threshold theorem, clipped clients too",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)",
                 "threshold theorem (precondition dropped)", "every client", "cpl",
                 _games(large_v=True), threshold_all, needs="solver",
                 batch=_bulk(_cpl_signs(False), ("solver",)),
                 note="it reads the threshold v^t = 1/(3 lambda*) of the equilibrium; a client "
                      "pinned at q_max can pay (P < 0) with v_n < v^t"),
        Property("cpl_threshold_formula", "Threshold formula",
                 "v^t = 1/(3 lambda*) = v_n + 2 q_n^2 P_n / (3 K_n) for every interior client",
                 "threshold theorem (formula)", "binding budget", "cpl", _games(large_v=True),
                 threshold_formula, needs="solver",
                 batch=_bulk(_cpl_threshold_formula, ("solver",)),
                 note="it reads the multiplier lambda* and the threshold v^t of the "
                      "equilibrium"),
        Property("cpl_beats_baselines", "Equilibrium beats uniform and weighted pricing",
                 "bound(q^SE) <= bound(q^baseline) at the same budget", "Sec. VI claim",
                 "B > 0; the baseline leaves no client on the q_min floor", "cpl",
                 _games(positive_budget=True, baselines_off_floor=True),
                 beats_baselines, batch=_bulk(_cpl_beats(True), ("solver",))),
        Property("cpl_beats_baselines_any", "Equilibrium beats baselines, floor allowed",
                 "bound(q^SE) <= bound(q^baseline) at the same budget",
                 "Sec. VI claim (precondition dropped)", "B > 0", "cpl",
                 _games(positive_budget=True), beats_baselines_any,
                 batch=_bulk(_cpl_beats(False), ("solver",)),
                 note="a floor client is paid less than P(q_min) by the baseline"),
        Property("cpl_budget_feasible", "Within budget",
                 "sum_n P_n q_n(P) <= B with the clients' best responses q_n(P)", "P1 budget",
                 "B > 0", "cpl", _games(positive_budget=True, budget="any"),
                 budget_feasible, batch=_bulk(_cpl_budget, ("solver", "pricing"))),
    ]
}
