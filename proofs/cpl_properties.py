"""The CPL properties (Luo et al. 2023; spec cpl.md "Equilibrium facts"), with preconditions
built into the instance strategies, and the variants with a precondition dropped."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from mechanisms import cpl

from .checker import Property, excess
from .strategies import CPL_FLOOR_RTOL, MAX_CLIENTS, cpl_games

__all__ = ["CPL_PROPERTIES", "CplCase"]

def _arr(a) -> str:
    return "[" + ", ".join(repr(float(v)) for v in np.ravel(a)) + "]"


@dataclass(frozen=True, eq=False)
class CplCase:
    """A CPL game (and, for some properties, extra data drawn with it)."""

    game: cpl.Game
    extra: tuple = ()

    def code(self) -> str:
        g = self.game
        s = (f"game = cpl.Game(a={_arr(g.a)}, G={_arr(g.G)}, c={_arr(g.c)}, v={_arr(g.v)}, "
             f"budget={g.budget!r}, alpha={g.alpha!r}, R={g.R!r}, q_min={g.q_min!r}, "
             f"q_max={_arr(g.q_max)})")
        return s + (f"\ncase = CplCase(game, {self.extra!r})" if self.extra
                    else "\ncase = CplCase(game)")

    def __repr__(self):
        return self.code()


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


CPL_PROPERTIES = {
    p.key: dataclasses.replace(p, clients=p.instances.clients)
    for p in [
        Property("cpl_se_identities", "Equilibrium identities",
                 "4 c q^3/K + v = 1/lambda* (interior); P = (K/2q^2)(1/lambda* - 3v); "
                 "q(P^SE) = q^SE; budget binds or q = q_max", "Lemma, SE",
                 "feasible budget", "cpl", _games(large_v=True, budget="any"),
                 se_identities, needs="solver",
                 note="it reads the budget multiplier lambda* of the equilibrium"),
        Property("cpl_threshold", "Price-sign threshold theorem",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)", "threshold theorem",
                 "interior clients (q_min < q_n < q_max_n)", "cpl",
                 _games(large_v=True), threshold_interior, needs="solver",
                 note="it reads the threshold v^t = 1/(3 lambda*) of the equilibrium"),
        Property("cpl_threshold_all", "Price-sign threshold theorem, clipped clients too",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)",
                 "threshold theorem (precondition dropped)", "every client", "cpl",
                 _games(large_v=True), threshold_all, needs="solver",
                 note="it reads the threshold v^t = 1/(3 lambda*) of the equilibrium; a client "
                      "pinned at q_max can pay (P < 0) with v_n < v^t"),
        Property("cpl_threshold_formula", "Threshold formula",
                 "v^t = 1/(3 lambda*) = v_n + 2 q_n^2 P_n / (3 K_n) for every interior client",
                 "threshold theorem (formula)", "binding budget", "cpl", _games(large_v=True),
                 threshold_formula, needs="solver",
                 note="it reads the multiplier lambda* and the threshold v^t of the "
                      "equilibrium"),
        Property("cpl_beats_baselines", "Equilibrium beats uniform and weighted pricing",
                 "bound(q^SE) <= bound(q^baseline) at the same budget", "Sec. VI claim",
                 "B > 0; the baseline leaves no client on the q_min floor", "cpl",
                 _games(positive_budget=True, baselines_off_floor=True),
                 beats_baselines),
        Property("cpl_beats_baselines_any", "Equilibrium beats baselines, floor allowed",
                 "bound(q^SE) <= bound(q^baseline) at the same budget",
                 "Sec. VI claim (precondition dropped)", "B > 0", "cpl",
                 _games(positive_budget=True), beats_baselines_any,
                 note="a floor client is paid less than P(q_min) by the baseline"),
        Property("cpl_budget_feasible", "Within budget",
                 "sum_n P_n q_n(P) <= B with the clients' best responses q_n(P)", "P1 budget",
                 "B > 0", "cpl", _games(positive_budget=True, budget="any"),
                 budget_feasible),
    ]
}
