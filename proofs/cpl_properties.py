"""The CPL properties (Luo et al. 2023; spec cpl.md "Equilibrium facts"), with preconditions
built into the instance strategies, and the variants with a precondition dropped."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from mechanisms import cpl
from mechanisms.errors import FedmarketError

from .core import Property, SubjectError
from .names import fresh
from .oracle import cpl as ocpl
from .seal import handed_back, unsealed
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
#
# Each property is written once, over a mechanisms.cpl.GameBatch (B games of n clients):
# ``check(games, answer) -> (violation, effective[, discriminating])`` arrays of (B,), where
# ``answer(games)`` is what the subject answers for those games (a BatchEquilibrium-like object:
# prices, and for a solver q, multiplier, v_threshold, slack, budget_residual), called only
# when some game needs it. The batch engine calls it with the whole batch and the subject's
# bulk code (``Property.batch``); the one-game check (``Property.violation``) is the same
# function on a batch of one game with the subject's own ``solve`` (:func:`_one_game`), as
# mechanisms/cpl runs one game through the code of many.


@dataclasses.dataclass(frozen=True)
class _Answer:
    """A subject's answer for a batch of one game, in the shape of
    :class:`mechanisms.cpl.BatchEquilibrium` (NaN where the subject gave nothing: a pricing
    rule has no multiplier; prices or responses of the wrong shape are NaN, a failure)."""

    prices: np.ndarray
    q: np.ndarray
    multiplier: np.ndarray
    v_threshold: np.ndarray
    slack: np.ndarray
    budget_residual: np.ndarray


def _row(x, n) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        a = np.full(n, np.nan)
    return (a if a.shape == (n,) else np.full(n, np.nan))[None, :]


def _num(x) -> np.ndarray:
    try:
        return np.array([np.nan if x is None else float(x)])
    except (TypeError, ValueError):
        return np.array([np.nan])


def _answer_of(eq, n: int) -> _Answer:
    return _Answer(_row(eq.prices, n), _row(getattr(eq, "q", None), n),
                   _num(getattr(eq, "multiplier", None)),
                   _num(getattr(eq, "v_threshold", None)),
                   np.array([getattr(eq, "status", None) == "slack"]),
                   _num(getattr(eq, "budget_residual", None)))


def _one_game(check):
    """The one-game violation ``(subject, case) -> ...`` of a check written over a batch:
    ``check`` on a batch of the one game, answered by ``subject.solve(case.game)``."""

    def violation(subject, case):
        games = cpl.GameBatch.from_games([case.game])
        out = check(games, lambda _: _answer_of(subject.solve(case.game), games.n))
        amount, effective = float(out[0][0]), bool(out[1][0])
        if not effective:
            return None
        return amount, amount, bool(out[2][0]) if len(out) > 2 else True

    violation.__name__ = check.__name__.lstrip("_")
    violation.__doc__ = check.__doc__
    return violation


def _interior(g, q):
    return (q > g.q_min[:, None] * (1 + 1e-9)) & (q < g.q_max * (1 - 1e-9))


def _excess_b(x, tol):
    """:func:`proofs.core.excess` elementwise (NaN is a failure: inf)."""
    out = np.maximum(0.0, x - tol)
    return np.where(np.isnan(out), np.inf, out)


def _finite(x):
    return np.isfinite(x).all(axis=1)


def _se_identities(g, answer):
    """The equilibrium identities (spec cpl.md): the prices buy q (best responses), a slack
    budget buys q_max, a binding one has a positive finite multiplier with 4 c q^3/K + v =
    1/lambda* and P = (K/2q^2)(1/lambda* - 3v) for every interior client and spends B."""
    eq = answer(g)
    with np.errstate(divide="ignore", invalid="ignore"):
        resid = np.max(np.abs(cpl.best_response(g, eq.prices) - eq.q) / eq.q, axis=1)
        slack_gap = np.max(np.abs(eq.q - g.q_max), axis=1)
        inner = _interior(g, eq.q)
        mu = np.where(eq.slack, 1.0, 1.0 / eq.multiplier)[:, None]
        share = 4 * g.c * eq.q**3 / g.K + g.v
        kkt = np.max(np.where(inner, np.abs(share - mu), 0.0), axis=1) / mu[:, 0]
        alt = g.K / (2 * eq.q**2) * (mu - 3 * g.v)
        scale = 1.0 + np.max(np.abs(eq.prices), axis=1)
        price = np.max(np.where(inner, np.abs(alt - eq.prices), 0.0), axis=1) / scale
    binding = np.maximum.reduce([kkt, price, eq.budget_residual])
    worst = np.maximum(resid, np.where(eq.slack, slack_gap, binding))
    # NaN is a failure; a binding budget has a positive, finite multiplier
    finite = (_finite(eq.prices) & _finite(eq.q)
              & (eq.slack | (np.isfinite(eq.multiplier) & (eq.multiplier > 0))))
    return np.where(finite, _excess_b(worst, 1e-7), np.inf), np.ones(g.size, bool)


def _signs(interior_only):
    def sign_mismatches(g, answer):
        """P_n > 0 iff v_n < v^t, counted over the clients away from the threshold with a
        nonzero price (interior ones only where required); binding budgets only (a slack
        budget has no threshold); a non-finite price or threshold is a failure."""
        eq = answer(g)
        vt = eq.v_threshold[:, None]
        P = eq.prices
        with np.errstate(invalid="ignore"):
            sel = np.abs(g.v - vt) > 1e-6 * vt
            sel &= np.abs(P) > 1e-9 * (1 + np.abs(P).max(axis=1, keepdims=True))
        if interior_only:
            sel &= _interior(g, eq.q)
        count = np.sum(sel & ((P > 0) != (g.v < vt)), axis=1).astype(float)
        broken = ~(_finite(P) & np.isfinite(eq.v_threshold) & (eq.v_threshold > 0))
        # discriminating: some client's sign was tested
        return (np.where(eq.slack, 0.0, np.where(broken, np.inf, count)), ~eq.slack,
                sel.any(axis=1))

    sign_mismatches.__name__ = "_threshold_interior" if interior_only else "_threshold_all"
    return sign_mismatches


def _threshold_formula(g, answer):
    """The threshold's formula (spec cpl.md): v^t = 1/(3 lambda*), and it is where the
    equilibrium price changes sign: with P_n = (K_n/2 q_n^2)(1/lambda* - 3 v_n) for an
    interior client, v^t = v_n + 2 q_n^2 P_n / (3 K_n) for every interior client n, read
    from the subject's prices and responses (relative error). Binding budgets only (a slack
    budget has no threshold); NaN or a non-positive threshold is a failure."""
    eq = answer(g)
    vt, lam, P, q = eq.v_threshold, eq.multiplier, eq.prices, eq.q
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = _interior(g, q)
        implied = g.v + 2.0 * q**2 * P / (3.0 * g.K)
        off = np.max(np.where(inner, np.abs(implied - vt[:, None]), 0.0), axis=1) / vt
        worst = np.maximum(np.abs(vt * 3.0 * lam - 1.0), off)
    finite = (_finite(P) & _finite(q) & np.isfinite(vt) & (vt > 0) & np.isfinite(lam)
              & (lam > 0))
    amount = np.where(finite, _excess_b(worst, 1e-7), np.inf)
    # every binding game discriminates: v^t 3 lambda* = 1 is checked on each
    return np.where(eq.slack, 0.0, amount), ~eq.slack, ~eq.slack


BOUND_FLOOR = 1e-6
"""A gap of bounds is relative to at least BOUND_FLOOR x sum_n K_n (the bound at q = 1/2): a
baseline at bound 0 (every client at q = 1, possible with a slack budget) is matched by an
equilibrium at bound 0 up to the rounding of K (1 - q)/q near q = 1 (1e-20 measured), not by
an infinite gap."""


def _beats(floor_precondition):
    def beats_baselines(g, answer):
        """bound(q^SE) <= bound(q^baseline) for the uniform and weighted posted prices at
        the same budget B > 0 (relative gap), the bound the subject's prices buy recomputed
        from the clients' best responses (not the subject's own report of its objective);
        with ``floor_precondition`` a baseline leaving a client on the q_min floor is not
        compared, and one that does at a budget above :func:`mechanisms.cpl.posted_floor_spend`
        (1e-9 relative), which promises no client on it there, fails. Not checked where
        nothing is compared."""
        positive = g.budget > 0
        safe = cpl.GameBatch(g.a, g.G, g.c, g.v, g.q_max, np.where(positive, g.budget, 1.0),
                             g.alpha, g.R, g.q_min)
        bases, compared = [], np.zeros(g.size, bool)
        broken = np.zeros(g.size, bool)
        level = g.q_min * (1 + CPL_FLOOR_RTOL)
        for name in ("uniform", "weighted"):
            shape = cpl.POSTED_SHAPES[name](safe)
            base = cpl.posted_pricing_batch(safe, shape)
            use = positive.copy()
            if floor_precondition:
                floor = base.q <= level[:, None]
                use &= ~floor.any(axis=1)
                # the precondition's own promise (cpl.posted_floor_spend, which the games'
                # budgets are drawn above): a budget above the floor spend at this level
                # puts every client whose q_max exceeds it above it
                with np.errstate(invalid="ignore"):
                    above = positive & (safe.budget > cpl.posted_floor_spend(safe, shape, level)
                                        * (1 + 1e-9))
                broken |= above & (floor & (g.q_max > level[:, None])).any(axis=1)
            bases.append((base, use))
            compared |= use
        if not (compared | broken).any():
            return np.zeros(g.size), compared  # the subject is not asked
        P = answer(safe).prices
        with np.errstate(invalid="ignore", divide="ignore"):
            bound = safe.bound(cpl.best_response(safe, P))
        bound = np.where(_finite(P), bound, np.nan)
        worst = np.full(g.size, -np.inf)
        for base, use in bases:
            with np.errstate(invalid="ignore", divide="ignore"):
                gap = (bound - base.objective) / np.maximum(
                    base.objective, BOUND_FLOOR * safe.K.sum(axis=1))
            worst = np.where(use, np.maximum(worst, gap), worst)
        amount = np.where(compared, _excess_b(worst, 1e-9), 0.0)
        return np.where(broken, np.inf, amount), compared | broken

    beats_baselines.__name__ = "_beats_baselines" + ("" if floor_precondition else "_any")
    return beats_baselines


def _budget_feasible(g, answer):
    """The prices spend at most the budget: sum_n P_n q_n(P) <= B (relative excess), the
    spend recomputed from the prices and the clients' best responses (not the subject's own
    report of what it spent)."""
    P = answer(g).prices
    with np.errstate(invalid="ignore"):
        spent = np.sum(P * cpl.best_response(g, P), axis=1)
    return (_excess_b((spent - g.budget) / np.maximum(1.0, np.abs(g.budget)), 1e-9),
            np.ones(g.size, bool))


CONIC_RTOL = 1e-7
"""10x the relative gap and feasibility tolerance (1e-8) of cvxpy's default conic solvers
(Clarabel, ECOS; the "cvxpy" method falls back to the defaults where its tight ones fail):
bounds closer than this, relative, are the same to the conic solver."""

LINESEARCH_POINTS = 30
"""Grid points of the line search in ``cpl_one_path`` (one cvxpy solve each). Nothing
compared depends on the grid's resolution: the line search is held to its own budget
tolerance and to the exact optimum at the budget it spent."""


def _one_path(g, answer):
    """Every method of :func:`mechanisms.cpl.solve` agrees with the subject's equilibrium
    (issue 34: one path; the tolerances are those of tests/test_cpl.py). ``"cvxpy"``: the
    same status (slack or not), the same bound (1e-5 relative, and the subject's never above
    cvxpy's beyond the conic solver's tolerance, :data:`CONIC_RTOL` relative + 1e-15), the
    same responses (1e-3 relative + 1e-6) unless the two bounds agree within CONIC_RTOL
    relative (a game nearly flat along a trade between clients does not determine q beyond
    the conic solver's tolerance: seed 0's draw 5,584 at 10,000 games, a client's q 0.0113
    against the exact 0.0100 with bounds 5e-10 apart, tests/test_cpl_one_path.py) and,
    where the budget binds, a positive finite multiplier lambda* within
    :data:`MULTIPLIER_RTOL` (relative) of the subject's (the conic solver's dual).
    ``"cvxpy-linesearch"`` (:data:`LINESEARCH_POINTS` points; on the games of an even
    number of clients with a progress callback, which must count the grid from (0, points)
    to (points, points), and not be called for a slack budget; on the odd ones the same grid
    asked for by its step, ``eps0``): its info's statuses count each grid point once by
    how its solve ended (positive integers summing to info's grid_points; over_budget, the
    points solved but over budget, beside them and at most the optimal ones), its multiplier
    is positive and finite where the budget binds, it spends at most B +
    LINESEARCH_BUDGET_RTOL x the spend's scale (recomputed from its q), and the exact
    optimum (the bisection solver) at the budget it spent is never above its bound (1e-12
    relative, plus lambda* x (n + 4) eps x the spend's scale: the exact optimum meets its
    budget to the spend's rounding, and at B = -5,255 with lambda* = 19,010 that moved its
    bound 5e-9 above the line search's: seed 0's draw 8,732 at 10,000 games,
    tests/test_cpl_one_path.py), and its bound is never above the exact optimum at the
    budget B - 2 h, h the grid's step (:func:`_grid_resolution_gap`: what the grid's
    resolution guarantees). A method raising SolverFailed fails the property: the line search's
    documented failure (no grid point within its tolerance of B, on a q box narrower than
    that tolerance: tests/test_cpl.py) did not occur on 2,000 games of seed 0 since its grid
    ends where the sub-problems turn infeasible (before, a negative budget with valued
    clients paying left 2 of 30 points feasible, none within B: tests/test_cpl_one_path.py,
    issue 34). A negative budget is a valid game (prices of any sign, spec cpl.md); one
    below the spend at q_min is refused by every method (BudgetInfeasible naming budget) and
    not drawn. On the games of an odd number of clients (no progress callback) the "cvxpy"
    method also runs with :data:`SECOND_SOLVER` (its own default tolerances, where it is
    installed): the same status, the answer naming that solver (a slack budget is answered
    without one), and the exact optimum at the budget it spent never above its bound (as
    for the line search); on the others the game's degenerate copy (every
    G_n = 0) is solved by every method as the oracle solves it (:func:`_degenerate_gap`).
    The conic
    solvers take one game at a
    time; every game discriminates. Bounds are relative to at least BOUND_FLOOR x sum_n K_n."""
    eq = answer(g)
    with np.errstate(invalid="ignore", divide="ignore"):
        mine = g.bound(eq.q)
    den = np.maximum(np.abs(mine), BOUND_FLOOR * g.K.sum(axis=1))
    worst = np.where(_finite(eq.q) & np.isfinite(mine), 0.0, np.inf)
    spent = np.full(g.size, -np.inf)
    ls_bound = np.full(g.size, np.nan)
    spent2 = np.full(g.size, -np.inf)
    bound2 = np.full(g.size, np.nan)
    step = np.full(g.size, np.nan)  # the line search's grid step
    kept = np.zeros(g.size, bool)  # every grid point it solved was a candidate
    for k in np.flatnonzero(np.isfinite(worst)):
        game = g.game(int(k))
        # every other game with a progress callback (the even sizes n: the batch engine
        # hands this property one game at a time, so a game's place in its batch would
        # always be 0), the rest without and through a second conic solver too
        counting = game.n % 2 == 0
        second = not counting and _second_solver()
        c = cpl.solve(game, fresh("cvxpy"))
        q = eq.q[k]
        with np.errstate(invalid="ignore", divide="ignore"):
            gaps = [np.inf if (c.status == "slack") != bool(eq.slack[k]) else 0.0,
                    _excess_b(abs(c.objective - mine[k]) / den[k], 1e-5),
                    _excess_b((mine[k] - c.objective * (1 + CONIC_RTOL) - 1e-15) / den[k],
                              0.0),
                    _excess_b(np.max(np.abs(c.q - q) / (1e-3 * np.abs(q) + 1e-6)), 1.0)
                    if abs(c.objective - mine[k]) > CONIC_RTOL * den[k] else 0.0]
            if not eq.slack[k]:  # a binding budget: lambda*, the subject's within the dual's
                gaps.append(_excess_b(abs(c.multiplier / eq.multiplier[k] - 1.0),  # tolerance
                                      MULTIPLIER_RTOL) if 0 < c.multiplier < np.inf
                            else np.inf)
        if counting:  # the other games: their degenerate copy
            worst[k] = max(worst[k], _degenerate_gap(game))
        if second:  # on the games without a progress callback: a second conic solver
            try:
                with warnings.catch_warnings():  # its "may be inaccurate": checked below
                    warnings.simplefilter("ignore", UserWarning)
                    other = cpl.solve(game, fresh("cvxpy"), solver=SECOND_SOLVER)
            except cpl.SolverFailed:
                gaps.append(np.inf)
            else:
                gaps.append(np.inf if (other.status == "slack") != bool(eq.slack[k])
                            or (other.status != "slack" and other.solver != SECOND_SOLVER)
                            else 0.0)
                spent2[k] = cpl.spend(game, other.q)
                bound2[k] = cpl.bound(game, other.q)
        calls: list = []
        # the grid's range: M = sum c q^2 from sum c q_min^2 to sum c q_max^2 (spec cpl.md),
        # or to where the sub-problem turns infeasible for every q (sum v K y >= 2 M - B with
        # y <= 1 / q_min), if lower; LINESEARCH_POINTS points over it: the even games ask for
        # the points, the odd ones for their step (eps0)
        lo = float(np.sum(game.c * game.q_min**2))
        top = min(float(np.sum(game.c * game.q_max**2)),
                  0.5 * (game.budget + float(np.sum(game.v * game.K)) / game.q_min))
        step[k] = max(0.0, top - lo) / (LINESEARCH_POINTS - 1)
        grid = {"points": LINESEARCH_POINTS} if counting or not step[k] > 0 \
            else {"eps0": step[k]}
        try:
            ls = cpl.solve(game, fresh("cvxpy-linesearch"), **grid,
                           progress=(lambda done, total, seen=calls: seen.append((done, total)))
                           if counting else None)
        except cpl.SolverFailed:
            gaps.append(np.inf)  # no answer on a drawn game (see the docstring)
        else:
            # its progress: (0, points), (1, points), ..., (points, points) over the grid,
            # nothing for a slack budget (no grid is searched)
            counted = [] if ls.status == "slack" or not counting else \
                [(i, LINESEARCH_POINTS) for i in range(LINESEARCH_POINTS + 1)]
            gaps.append(0.0 if calls == counted else np.inf)
            if ls.status == "optimal":
                # its grid's account (info["statuses"]): each point counted once by how its
                # solve ended (a positive count per status named), the points solved but
                # over budget beside them (at most the optimal ones); the multiplier it
                # reports, 1/mu at its q (a median of KKT values, each > 0), positive and
                # the oracle's (ocpl.linesearch_multiplier) to 1e-12
                counts = ls.info.get("statuses", {})
                ended = sum(x for key, x in counts.items() if key != "over_budget")
                K = game.K
                want = ocpl.linesearch_multiplier(game.c.tolist(), game.v.tolist(),
                                                  K.tolist(), np.asarray(ls.q).tolist())
                gaps.append(0.0 if (all(type(x) is int and x >= 1 for x in counts.values())
                                    and ended == ls.info.get("grid_points")
                                    and counts.get("over_budget", 0)
                                    <= counts.get("optimal", 0)
                                    and 0 < ls.multiplier < np.inf
                                    and abs(ls.multiplier - want) <= 1e-12 * want)
                            else np.inf)
            spent[k] = cpl.spend(game, ls.q)
            ls_bound[k] = cpl.bound(game, ls.q)
            # every grid point solved was kept as a candidate (none ended otherwise, none
            # overspent): the resolution bound applies (_grid_resolution_gap)
            kept[k] = set(ls.info.get("statuses", {})) <= {"optimal", "infeasible"}
            over = (spent[k] - game.budget) / (cpl.LINESEARCH_BUDGET_RTOL
                                               * cpl.spend_scale(game, ls.q))
            gaps.append(_excess_b(over, 1.0))
        worst[k] = max(worst[k], *(float(np.nan_to_num(x, nan=np.inf)) for x in gaps))
    for got_spent, got_bound in ((spent, ls_bound), (spent2, bound2)):
        tried = np.isfinite(got_bound)
        if not tried.any():
            continue
        # the exact optimum at the budget each line search (each second solver) spent
        at = cpl.GameBatch(g.a, g.G, g.c, g.v, g.q_max, np.maximum(g.budget, got_spent),
                           g.alpha, g.R, g.q_min)
        exact = cpl.solve_batch(at)
        with np.errstate(invalid="ignore", divide="ignore"):
            # the exact optimum meets its budget to the rounding of the spend, a sum of n
            # terms of its scale: (n + 4) eps x spend scale, which moves the bound by lambda*
            # per unit of budget
            scale = cpl.spend_scale(at, exact.q)
            rounding = exact.multiplier * (g.n + 4) * np.finfo(float).eps * scale
            below = _excess_b((exact.objective - got_bound * (1 + 1e-12) - rounding) / den,
                              0.0)
        worst = np.where(tried, np.maximum(worst, below), worst)
    worst = np.maximum(worst, _grid_resolution_gap(g, np.where(kept, ls_bound, np.nan), step,
                                                   den))
    return worst, np.ones(g.size, bool)


def _grid_resolution_gap(g, ls_bound, step, den):
    """The line search's bound against the exact optimum (the bisection solver) at the
    budget B - 2 h, h its grid step: never above it beyond :data:`CONIC_RTOL` relative. Why:
    the exact optimum q' at B - 2 h has M' = sum c q'^2 in the grid's range, so some grid
    point M lies in [M', M' + h]; there q' meets the sub-problem's constraints (sum c q'^2 <=
    M, and sum v K / q' = 2 M' - spend(q') >= 2 M' - B + 2 h >= 2 M - B), so the best grid
    point's bound is at most q''s. Compared where every grid point the line search solved
    was a candidate (its info's statuses only "optimal" and "infeasible": a point whose
    solved q overspent B beyond LINESEARCH_BUDGET_RTOL, or that the solver left inaccurate,
    is dropped, and the point left may be coarser: seen at seed 0) and B - 2 h is at least the
    spend at q_min (an optimum exists there)."""
    floor = cpl.spend(g, np.broadcast_to(g.q_min[:, None], g.c.shape))
    low = g.budget - 2.0 * np.nan_to_num(step, nan=np.inf)
    ok = np.isfinite(ls_bound) & (low >= floor)
    out = np.zeros(g.size)
    if not ok.any():
        return out
    at = cpl.GameBatch(g.a, g.G, g.c, g.v, g.q_max, np.where(ok, low, g.budget), g.alpha,
                       g.R, g.q_min)
    exact = cpl.solve_batch(at)
    with np.errstate(invalid="ignore"):
        gap = _excess_b((ls_bound - exact.objective) / den, CONIC_RTOL)
    return np.where(ok, gap, out)


MULTIPLIER_RTOL = 1e-2
"""How far, relative, the "cvxpy" method's budget multiplier (its conic solver's dual,
scaled back to the game's units) may sit from the subject's lambda* where the budget binds:
6x the largest gap seen, 1.7e-3 on 3,088 binding games of seed 1 (99 % under 2.1e-4; the
largest where one client alone is interior, whose q the dual follows to about the square
root of the solver's tolerance)."""

SECOND_SOLVER = "SCS"
"""The second conic solver ``cpl_one_path`` runs the "cvxpy" method with (a solver without
tight tolerances: its defaults, about 1e-4 relative; where it is not installed, none)."""


def _second_solver() -> bool:
    """Whether :data:`SECOND_SOLVER` is installed (asked once)."""
    if not _SECOND:
        import cvxpy

        _SECOND.append(SECOND_SOLVER in cvxpy.installed_solvers())
    return _SECOND[0]


_SECOND: list = []


def _degenerate_gap(game) -> float:
    """The game's degenerate copy (every G_n = 0, so every K_n = 0; the budget raised to the
    copy's spend at q_min where below it), solved by every method of
    :func:`mechanisms.cpl.solve`: each must answer as the oracle's equilibrium does
    (:func:`proofs.oracle.cpl.equilibrium`: the floor q_min bought, status "degenerate",
    its inverse prices, to 1e-12 relative) and the clients' best responses to those prices
    must be the floor. 0 when all hold, else inf."""
    n = game.n
    flat = game.replace(G=np.zeros(n))
    floor = cpl.spend(flat, np.full(n, flat.q_min))
    flat = flat.replace(budget=max(float(flat.budget), floor))
    want = ocpl.equilibrium(flat.c.tolist(), flat.v.tolist(), flat.K.tolist(),
                            float(flat.q_min), np.broadcast_to(flat.q_max, (n,)).tolist(),
                            float(flat.budget))
    if want["status"] != "degenerate":
        return np.inf
    q, P = np.array(want["q"]), np.array(want["prices"])
    for method, options in (("bisection", {}), ("cvxpy", {}),
                            ("cvxpy-linesearch", {"points": LINESEARCH_POINTS})):
        try:
            eq = cpl.solve(flat, fresh(method), **options)
        except FedmarketError:
            return np.inf
        if (eq.status != "degenerate"
                or not np.allclose(eq.q, q, rtol=1e-12, atol=0)
                or not np.allclose(eq.prices, P, rtol=1e-12, atol=1e-300)
                or not np.allclose(cpl.best_response(flat, eq.prices), q, rtol=1e-12, atol=0)):
            return np.inf
    return 0.0


def _same(x, y) -> bool:
    """Bit for bit: equal shapes and values, NaN never equal (a NaN is a failure), inf
    equal to inf of the same sign."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return x.shape == y.shape and bool(np.array_equal(x, y))


def _equilibrium_gaps(game, one, bulk, k: int, status: str, equilibrium: bool) -> int:
    """How many fields of the one-game outcome ``one`` (a :class:`mechanisms.cpl.
    Equilibrium`) differ from game ``k`` of the bulk outcome ``bulk`` (a
    :class:`mechanisms.cpl.BatchEquilibrium`): q, prices, payments P q, the clients'
    utilities at those prices and responses, objective, spend, budget residual, status,
    and for an equilibrium the multiplier and the threshold (None otherwise); and ``one``'s
    seal (frozen, read-only arrays: :func:`proofs.seal.unsealed`)."""
    q, P = bulk.q[k], bulk.prices[k]
    pairs = [(one.q, q), (one.prices, P), (one.payments, P * q),
             (one.utilities, cpl.client_utilities(game, P, q)),
             (one.objective, bulk.objective[k]), (one.spent, bulk.spent[k]),
             (one.budget_residual, bulk.budget_residual[k])]
    if equilibrium:
        pairs += [(_num(one.multiplier), bulk.multiplier[k:k + 1]),
                  (_num(one.v_threshold), bulk.v_threshold[k:k + 1])]
    gaps = sum(not _same(x, y) for x, y in pairs) + unsealed(one)
    if not equilibrium and (one.multiplier is not None or one.v_threshold is not None):
        gaps += 1  # prices that are not an equilibrium have no multiplier
    return gaps + (one.status != status)


def _posted_name(subject) -> str | None:
    """The built-in posted price a pricing-rule subject runs (a key of
    :data:`mechanisms.cpl.POSTED_SHAPES`), or None (a rule of your own)."""
    fn = subject.function
    return next((name for name, rule in cpl.PRICING_RULES.items() if rule is fn), None)


def _one_game_paths(subject, one_game=None):
    """``check(games) -> (violation, effective, discriminating)`` of ``cpl_one_game`` for
    ``subject``, or None when it has no bulk code (a solver with other methods or
    options, a pricing rule of your own not written over arrays, a subclass solving its
    own way): there is nothing to compare its one-game path with. ``one_game``: what
    answers one game (``one_game.solve(game)``; default ``subject``), e.g. the checker's
    tracked stand-in for the subject in the Hypothesis engine, so that its calls count."""
    one_game = subject if one_game is None else one_game
    found = _cpl_batch_subject(subject)
    if found is None:
        return None
    kind = found[0]
    posted = _posted_name(subject) if kind == "pricing" else None

    def paths(g):
        B = g.size
        gaps = np.zeros(B)
        # a posted price needs B > 0 (the one-game and the bulk code both refuse the rest:
        # cpl_refuses_bad_input's faults); the property's games have B > 0, a game of
        # another sampler with B <= 0 is not checked for a pricing rule
        use = np.ones(B, bool) if kind == "solver" else g.budget > 0
        if not use.any():
            return gaps, use, use
        rows = np.flatnonzero(use)
        games = g if use.all() else cpl.GameBatch(
            g.a[rows], g.G[rows], g.c[rows], g.v[rows], g.q_max[rows], g.budget[rows],
            g.alpha[rows], g.R[rows], g.q_min[rows])
        if kind == "solver":
            bulk, over = cpl.solve_batch(games), None
        else:
            bulk, over = cpl.apply_pricing_batch(games, subject.function)
        respond = cpl.best_response(games, bulk.prices)
        gaps[rows] += unsealed(bulk)  # the bulk answer sealed (proofs.seal)
        if posted is not None:
            shapes = cpl.POSTED_SHAPES[posted](games)
            calibrated = cpl.posted_pricing_batch(games, shapes)
            authors = cpl.posted_pricing_batch(games, shapes, responses="v0")
            gaps[rows] += unsealed(calibrated) + unsealed(authors)
        for j, k in enumerate(rows.tolist()):
            game = games.game(j)
            try:
                one = _solve_one(one_game, game)  # cpl.solve / apply_pricing, one game
                if kind == "solver":
                    status = ("degenerate" if bulk.degenerate[j] else
                              "slack" if bulk.slack[j] else "optimal")
                else:
                    status = "over-budget" if over[j] else "optimal"
                n_gaps = _equilibrium_gaps(game, one, bulk, j, status, kind == "solver")
                if kind == "solver" and status == "optimal":
                    # the root the bisection solved for, reported as info["mu"]: 1/lambda*
                    n_gaps += not _same(one.info.get("mu", np.nan), 1.0 / bulk.multiplier[j])
                if kind == "solver":  # the root finder's work, as the bulk answer reports it
                    n_gaps += _work_gaps(one.info, bulk, j)
                # the clients' best responses to one game's prices (a Game's prices checked),
                # the prices handed in as the caller's own array: still the same values and
                # writeable after (proofs.seal); the game and the answer sealed
                mine = {"prices": np.array(one.prices)}
                kept = {"prices": mine["prices"].copy()}
                n_gaps += not _same(cpl.best_response(game, mine["prices"]), respond[j])
                n_gaps += handed_back(kept, mine) + unsealed(game)
                if posted is not None:
                    # the named baseline (cpl.uniform_pricing & co.: cpl.posted_pricing of
                    # its shape), the authors' v0 responses, and the built-in rule called on
                    # a Game (cpl.PRICING_RULES[name](game)) against the bulk calibration
                    eq = getattr(cpl, f"{posted}_pricing")(game)
                    n_gaps += _equilibrium_gaps(game, eq, calibrated, j, "optimal", False)
                    n_gaps += not _same(eq.info["p"], calibrated.scale[j])
                    n_gaps += _work_gaps(eq.info, calibrated, j)
                    v0 = cpl.posted_pricing(game, cpl.POSTED_SHAPES[posted](game),
                                            responses=fresh("v0"))
                    n_gaps += _equilibrium_gaps(game, v0, authors, j, "optimal", False)
                    n_gaps += not _same(v0.info["p"], authors.scale[j])
                    n_gaps += not _same(cpl.PRICING_RULES[posted](game), calibrated.prices[j])
            except FedmarketError:
                n_gaps = np.inf  # the one-game path refused a game the bulk code answered
            gaps[k] += n_gaps
        return gaps, use, use

    return paths


def _work_gaps(info, bulk, k: int) -> int:
    """How many of the root finder's work counts (:data:`mechanisms.cpl.WORK_FIELDS`) a
    one-game answer's ``info`` reports differently from game ``k`` of the bulk answer (a
    count missing: different)."""
    return sum(not _same(info.get(name, np.nan), getattr(bulk, name)[k])
               for name in cpl.WORK_FIELDS)


def _solve_one(subject, game):
    """``subject.solve(game)``; a refusal is a FedmarketError whether or not the checker's
    tracked stand-in wrapped it (as a SubjectError) on the way."""
    try:
        return subject.solve(game)
    except SubjectError as exc:
        if isinstance(exc.original, FedmarketError):
            raise exc.original from exc
        raise


def _one_game_violation(subject, case):
    """``cpl_one_game`` on one instance: the same comparison on the batch of one game (the
    subject as the engine hands it answers the game: the Hypothesis engine counts it)."""
    paths = _one_game_paths(getattr(subject, "_subject", subject), one_game=subject)
    if paths is None:
        return None
    out = paths(cpl.GameBatch.from_games([case.game]))
    if not out[1][0]:
        return None
    amount = float(out[0][0])
    return amount, amount, True


se_identities = _one_game(_se_identities)
threshold_interior = _one_game(_signs(True))
threshold_all = _one_game(_signs(False))
threshold_formula = _one_game(_threshold_formula)
beats_baselines = _one_game(_beats(True))
beats_baselines_any = _one_game(_beats(False))
budget_feasible = _one_game(_budget_feasible)
one_path = _one_game(_one_path)


# ---------------------------------------------------------------- in bulk (the batch engine)


@dataclasses.dataclass(frozen=True)
class _Prices:
    prices: np.ndarray


def _cpl_batch_subject(subject):
    """("solver", answer) or ("pricing", answer) when ``subject`` can be evaluated on a
    :class:`mechanisms.cpl.GameBatch`: the bisection solver without options, or a pricing
    rule written over arrays (the built-in posted prices, uniform, weighted, gradient, or
    yours marked ``over_arrays``) through :func:`mechanisms.cpl.apply_pricing_batch`, the
    code :func:`mechanisms.cpl.apply_pricing` runs on one game; None otherwise."""
    if type(subject).solve not in (CplSolver.solve, CplPricingRule.solve):
        return None  # a subclass solves its own way: evaluate what it does, one by one
    if isinstance(subject, CplSolver) and subject.method == "bisection" \
            and not dict(subject.options):
        return "solver", cpl.solve_batch
    if isinstance(subject, CplPricingRule) and getattr(subject.function, "over_arrays", False):
        rule = subject.function
        return "pricing", lambda g: _Prices(cpl.apply_pricing_batch(g, rule)[0].prices)
    return None


def _bulk(check, kinds):
    """A Property's ``batch`` hook: ``subject -> (GameBatch -> arrays)``, ``check`` answered
    by the subject's bulk code, for the subjects evaluated in bulk (of a kind in ``kinds``);
    None for the others (one game at a time, by the same ``check``)."""
    def for_subject(subject):
        found = _cpl_batch_subject(subject)
        if found is None or found[0] not in kinds:
            return None
        return lambda games: check(games, found[1])

    return for_subject


# ------------------------------------------------------------ the work of the root finder


def _field(res, name) -> np.ndarray:
    """A work field of a result as floats (NaN where the result reports none)."""
    value = getattr(res, name, None)
    try:
        return np.asarray(np.nan if value is None else value, dtype=float)
    except (TypeError, ValueError):
        return np.asarray(np.nan)


def _work_excess(res, one_sided, posted: bool, games=None) -> np.ndarray:
    """Per game, how far the root finder's reported work exceeds its documented bound
    (relative to the bound; 0 within it), inf where a count is missing, NaN or negative:
    every search within the proven bound, iterations <= ROOT_BISECTION_EVERY x (halvings +
    ROOT_HALVING_SLACK) (the equilibrium's root and its polish, a posted price's root); a
    game whose budget does not bind (``one_sided``: the solver's slack and degenerate games)
    within the measured ONE_SIDED_ROOT_STEPS x (halvings + ROOT_HALVING_SLACK); a binding
    game searched at least once; a posted price's bracket doubled at most
    max(0, ceil(log2 p)) + 1 times (p the calibrated scale: the bracket [0, 2^d] stops
    doubling at the first end above the root, so 2^(d-1) < p up to the root's rounding);
    an equilibrium's polish never doubled (:data:`POLISH_DOUBLINGS`) and, with ``games``,
    its ``root_halvings`` no more than the spec's bracket needs (:func:`_spec_halvings`)."""
    it, h = _field(res, "root_iterations"), _field(res, "root_halvings")
    pit, ph = _field(res, "polish_iterations"), _field(res, "polish_halvings")
    doublings = _field(res, "doublings")
    counts = np.broadcast_arrays(it, h, pit, ph, doublings)
    bad = np.zeros(counts[0].shape, bool)
    for x in counts:
        bad |= ~(x >= 0)  # NaN (missing) or negative
    every, extra = cpl.ROOT_BISECTION_EVERY, cpl.ROOT_HALVING_SLACK
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.maximum(it / (every * (h + extra)), pit / (every * (ph + extra))) - 1.0
        one = cpl.ONE_SIDED_ROOT_STEPS * (h + extra)
        excess = np.where(one_sided, np.maximum(excess, it / one - 1.0), excess)
        if posted:
            p = _field(res, "scale")
            allowed = np.maximum(0.0, np.ceil(np.log2(p))) + 1.0
            excess = np.maximum(excess, doublings - allowed)
            bad |= ~(p > 0)
        else:
            excess = np.maximum(excess, np.where(~one_sided & (it < 1), 1.0, 0.0))
            # the equilibrium's polish never doubled (xtol = 0: proven, cpl.solve_batch)
            excess = np.maximum(excess, doublings - POLISH_DOUBLINGS)
            if games is not None:
                excess = np.maximum(excess, np.where(
                    one_sided, 0.0, h - _spec_halvings(games, _field(res, "multiplier"))))
    return np.where(bad | np.isnan(excess), np.inf, np.maximum(excess, 0.0))


_EPS = np.finfo(float).eps
POLISH_DOUBLINGS = 0
"""How often :func:`mechanisms.cpl.solve_batch` (xtol = 0) may double the polish's bracket:
never (the proof in its docstring: the search in mu leaves the root within a few ulps, the
polish starts 64 eps mu wide on each side). Measured 0 on 721,480 binding games."""


def _spec_halvings(games, multiplier) -> np.ndarray:
    """Per game, the halvings a plain bisection needs from the bracket of the spec (the
    oracle's :func:`proofs.oracle.cpl.mu_bracket`: every client at q_min below it, at q_max
    above it) to the solver's stopping width 4 eps mu* (mu* = 1/lambda*), each end of the
    ratio given the rounding of the two brackets' arithmetic (8 eps of the ends, 1e-9 of
    mu*): what ``root_halvings`` may be at most. The work bound counts from the first
    bracket; one wider than the spec's (mu_hi with 5 c q_max^3 / K for 4: generated mutant
    0c4cd2228e, 1.5e-8 relative in q, up to 9 iterations more) hides work behind halvings of
    its own making. inf where no root was sought (no K_n > 0 or no finite mu*)."""
    out = np.full(games.size, np.inf)
    mu = 1.0 / np.broadcast_to(np.asarray(multiplier, float), (games.size,))
    K = games.K
    for k in np.flatnonzero(np.isfinite(mu) & (mu > 0) & (K > 0).any(axis=1)):
        lo, hi = ocpl.mu_bracket(games.c[k].tolist(), games.v[k].tolist(), K[k].tolist(),
                                 float(games.q_min[k]), games.q_max[k].tolist())
        width = hi - lo + 8 * _EPS * (abs(lo) + abs(hi))
        out[k] = max(0.0, np.ceil(np.log2(width / (4 * _EPS * mu[k] * (1 - 1e-9)))))
    return out


def _work_solver(games, eq, spec: bool = True):
    """``cpl_work_bound`` of the solver's answer ``eq`` (a BatchEquilibrium, or the info of
    one game's): (violation, effective, discriminating), every game; ``spec``: the halvings
    against the spec's bracket too (:func:`_spec_halvings`)."""
    one_sided = np.asarray(eq.slack, bool) | np.asarray(eq.degenerate, bool)
    out = _work_excess(eq, one_sided, posted=False, games=games if spec else None)
    every = np.ones(games.size, bool)
    return out, every, every


def _work_posted(games, calibrate):
    """``cpl_work_bound`` of a posted price: ``calibrate(games, responses)`` answered with
    the exact and the authors' v0 responses (the games with B > 0: a posted price needs
    one)."""
    B = games.size
    use = games.budget > 0
    out = np.zeros(B)
    if use.any():
        rows = np.flatnonzero(use)
        sub = games if use.all() else _rows(games, rows)
        for responses in ("exact", "v0"):
            res = calibrate(sub, fresh(responses))
            out[rows] = np.maximum(out[rows], _work_excess(res, np.zeros(sub.size, bool),
                                                           posted=True))
    return out, use, use


def _work_bulk(subject):
    """``cpl_work_bound``'s batch hook: the bisection solver through
    :func:`mechanisms.cpl.solve_batch`, a built-in posted price through
    :func:`mechanisms.cpl.posted_pricing_batch` of its shape; None for the others."""
    found = _cpl_batch_subject(subject)
    if found is None:
        return None
    if found[0] == "solver":
        def both(games):
            out, every, _ = _work_solver(games, cpl.solve_batch(games))
            rows = np.arange(0, games.size, 4)
            far = _far_valued(_rows(games, rows))
            out[rows] = np.maximum(out[rows], _work_solver(far, cpl.solve_batch(far), False)[0])
            return out, every, every

        return both
    posted = _posted_name(subject)
    if posted is None:
        return None
    return lambda games: _work_posted(games, lambda g, r: cpl.posted_pricing_batch(
        g, cpl.POSTED_SHAPES[posted](g), responses=r))


def _rows(games, rows):
    """The games ``rows`` of a GameBatch, as a GameBatch."""
    return cpl.GameBatch(*(getattr(games, f)[rows] for f in (
        "a", "G", "c", "v", "q_max", "budget", "alpha", "R", "q_min")))


def _far_valued(games):
    """The games with every client's valuation v_n = 2^64 max_n 4 c_n q_max_n^3 / K_n and a
    budget where the drawn one sits between its game's floor and q_max spends (kept within 1 %
    and 99 % of the way): every client leaves its floor and reaches its cap at a mu within the
    rounding of v, so the bracket of mu is narrower than its stopping width (often 0 wide)
    and only the polish in d_n + s resolves the root (cpl.solve_batch). The draws never
    reach it (v <= 1e6); a count there (a first search of width 0, the polish's halvings from
    2^18 X down to the root) is where the work's own arithmetic meets its edge: generated
    mutant 3bf4151221 (a bracket narrower than its stopping width counted as log2 of the
    ratio, not 0: negative or -inf halvings) survived every row before. Checked on every
    fourth game of a batch and on one game."""
    top = np.max(4.0 * games.c * games.q_max**3 / np.where(games.K > 0, games.K, np.inf),
                 axis=1)
    v = np.broadcast_to(np.ldexp(np.where(top > 0, top, 1.0), 64)[:, None], games.v.shape)
    far = cpl.GameBatch(games.a, games.G, games.c, v, games.q_max, np.zeros(games.size),
                        games.alpha, games.R, games.q_min)
    floor = np.broadcast_to(games.q_min[:, None], v.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        at = (games.budget - games.spend(floor)) / (games.spend(games.q_max)
                                                    - games.spend(floor))
    at = np.clip(np.nan_to_num(at, nan=0.5), 0.01, 0.99)
    lo, hi = far.spend(floor), far.spend(games.q_max)
    return cpl.GameBatch(games.a, games.G, games.c, v, games.q_max, lo + at * (hi - lo),
                         games.alpha, games.R, games.q_min)


@dataclasses.dataclass(frozen=True)
class _Work:
    """One game's reported work (an Equilibrium's info) as a batch of one."""

    root_iterations: np.ndarray
    root_halvings: np.ndarray
    polish_iterations: np.ndarray
    polish_halvings: np.ndarray
    doublings: np.ndarray
    scale: np.ndarray
    slack: np.ndarray
    degenerate: np.ndarray
    multiplier: np.ndarray


def _work_of(eq) -> _Work:
    info = getattr(eq, "info", None) or {}
    status = getattr(eq, "status", None)
    return _Work(*(_num(info.get(name)) for name in cpl.WORK_FIELDS), _num(info.get("p")),
                 np.array([status == "slack"]), np.array([status == "degenerate"]),
                 _num(getattr(eq, "multiplier", None)))


def _work_violation(subject, case):
    """``cpl_work_bound`` on one game: the solver's own answer (``cpl.solve``: its info),
    or for a built-in posted price the subject's answer and ``cpl.posted_pricing`` of its
    shape with both responses (their info)."""
    inner = getattr(subject, "_subject", subject)
    games = cpl.GameBatch.from_games([case.game])
    if isinstance(inner, CplSolver):
        if inner.method != "bisection" or dict(inner.options):
            return None  # another method: no root finder to bound
        out = _work_solver(games, _work_of(_solve_one(subject, case.game)))
        far = _far_valued(games)
        out = (np.maximum(out[0], _work_solver(far, _work_of(_solve_one(subject, far.game(0))),
                                               False)[0]),)
    else:
        posted = _posted_name(inner) if isinstance(inner, CplPricingRule) else None
        if posted is None or case.game.budget <= 0:
            return None
        _solve_one(subject, case.game)  # the subject answers the game (the engine counts it)
        shape = cpl.POSTED_SHAPES[posted](case.game)
        out = _work_posted(games, lambda g, r: _work_of(
            cpl.posted_pricing(case.game, shape, responses=r)))
    amount = float(out[0][0])
    return amount, amount, True


_EVERY = ("every effective example (no discriminating flag: {what}, checked on each, "
          "could break on any game)")
# which effective examples could have failed each property (Property.discriminates)
DISCRIMINATES = {
    "cpl_se_identities": _EVERY.format(what="the best responses, the KKT identities and "
                                            "the budget or q_max condition"),
    "cpl_threshold": "some interior client's price sign was tested (v_n away from v^t by "
                     "more than 1e-6 v^t, a nonzero price)",
    "cpl_threshold_all": "some client's price sign was tested (v_n away from v^t by more "
                         "than 1e-6 v^t, a nonzero price)",
    "cpl_threshold_formula": "every effective example (a binding budget: v^t 3 lambda* = 1 "
                             "is checked on each, the interior clients' formula beside it)",
    "cpl_beats_baselines": _EVERY.format(what="the bound against each baseline compared"),
    "cpl_beats_baselines_any": _EVERY.format(what="the bound against each baseline"),
    "cpl_budget_feasible": _EVERY.format(what="the spend of the prices"),
    "cpl_one_path": _EVERY.format(what="the other methods' answers compared with the "
                                       "subject's"),
    "cpl_one_game": _EVERY.format(what="every field of each one-game answer against the "
                                       "bulk code's"),
    "cpl_work_bound": _EVERY.format(what="the root finder's iterations against their bound, "
                                         "on every game a root was sought for"),
}

CPL_PROPERTIES = {
    p.key: dataclasses.replace(p, clients=p.instances.clients,
                               discriminates=DISCRIMINATES[p.key])
    for p in [
        Property("cpl_se_identities", "Equilibrium identities",
                 "4 c q^3/K + v = 1/lambda* (interior); P = (K/2q^2)(1/lambda* - 3v); "
                 "q(P^SE) = q^SE; budget binds or q = q_max", "Lemma, SE",
                 "feasible budget", "cpl", _games(large_v=True, budget="any"),
                 se_identities, needs="solver", batch=_bulk(_se_identities, ("solver",)),
                 note="it reads the budget multiplier lambda* of the equilibrium"),
        Property("cpl_threshold", "Price-sign threshold theorem",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)", "threshold theorem",
                 "interior clients (q_min < q_n < q_max_n)", "cpl",
                 _games(large_v=True), threshold_interior, needs="solver",
                 batch=_bulk(_signs(True), ("solver",)),
                 note="it reads the threshold v^t = 1/(3 lambda*) of the equilibrium"),
        Property("cpl_threshold_all", "Price-sign threshold theorem, clipped clients too",
                 "P_n > 0 iff v_n < v^t = 1/(3 lambda*)",
                 "threshold theorem (precondition dropped)", "every client", "cpl",
                 _games(large_v=True), threshold_all, needs="solver",
                 batch=_bulk(_signs(False), ("solver",)),
                 note="it reads the threshold v^t = 1/(3 lambda*) of the equilibrium; a client "
                      "pinned at q_max can pay (P < 0) with v_n < v^t"),
        Property("cpl_threshold_formula", "Threshold formula",
                 "v^t = 1/(3 lambda*) = v_n + 2 q_n^2 P_n / (3 K_n) for every interior client",
                 "threshold theorem (formula)", "binding budget", "cpl", _games(large_v=True),
                 threshold_formula, needs="solver",
                 batch=_bulk(_threshold_formula, ("solver",)),
                 note="it reads the multiplier lambda* and the threshold v^t of the "
                      "equilibrium"),
        Property("cpl_beats_baselines", "Equilibrium beats uniform and weighted pricing",
                 "bound(q^SE) <= bound(q^baseline) at the same budget", "Sec. VI claim",
                 "B > 0; the baseline leaves no client on the q_min floor", "cpl",
                 _games(positive_budget=True, baselines_off_floor=True),
                 beats_baselines, batch=_bulk(_beats(True), ("solver",))),
        Property("cpl_beats_baselines_any", "Equilibrium beats baselines, floor allowed",
                 "bound(q^SE) <= bound(q^baseline) at the same budget",
                 "Sec. VI claim (precondition dropped)", "B > 0", "cpl",
                 _games(positive_budget=True), beats_baselines_any,
                 batch=_bulk(_beats(False), ("solver",)),
                 note="a floor client is paid less than P(q_min) by the baseline"),
        Property("cpl_budget_feasible", "Within budget",
                 "sum_n P_n q_n(P) <= B with the clients' best responses q_n(P)", "P1 budget",
                 "B > 0", "cpl", _games(positive_budget=True, budget="any"),
                 budget_feasible, batch=_bulk(_budget_feasible, ("solver", "pricing"))),
        Property("cpl_one_path", "Every solve method agrees",
                 "cvxpy: the same status, bound and responses, lambda* > 0 where the "
                 "budget binds; the line search: "
                 "within its budget tolerance, never better than the optimum at its spend, "
                 "its grid points each counted once by how its solve ended, lambda > 0; "
                 "cvxpy with a second solver (SCS): the same status, never better than the "
                 "optimum at its spend; every method on a degenerate copy (every G_n = 0): "
                 "the oracle's floor",
                 "one implementation (issue 34); Solvers", "feasible budget", "cpl",
                 _games(budget="any"), one_path, needs="solver",
                 note="game by game through the conic solvers (about 0.06 CPU s a game; no "
                      "bulk hook: the batch engine evaluates it one game at a time and stops "
                      "at the first failure): the standard run gives it its own budget "
                      "(proofs.standard)"),
        Property("cpl_one_game", "One game is the batch of one",
                 "every one-game entry point equals the bulk code bit for bit: the subject's "
                 "own solve (cpl.solve, cpl.apply_pricing) against cpl.solve_batch or "
                 "cpl.apply_pricing_batch (q, prices, payments, utilities, objective, spend, "
                 "budget residual, status, multiplier and threshold; the bisection's "
                 "info['mu'] = 1/lambda* where the budget binds; the root finder's work "
                 "counts in info, cpl.WORK_FIELDS); cpl.best_response on "
                 "the Game; for a built-in posted price the named baseline (cpl.uniform_pricing "
                 "& co., i.e. cpl.posted_pricing of its shape), cpl.posted_pricing with the "
                 "authors' v0 responses and the rule called on a Game "
                 "(cpl.PRICING_RULES[name](game)) against cpl.posted_pricing_batch; every "
                 "answer and game sealed (a frozen dataclass, read-only arrays) and the "
                 "prices handed to cpl.best_response unchanged and writeable (proofs.seal)",
                 "one implementation (issue 34)",
                 "B > 0", "cpl",
                 _games(large_v=True, budget="any", positive_budget=True),
                 _one_game_violation,
                 batch=_one_game_paths,
                 note="a NaN anywhere is a failure; a one-game path that refuses a game "
                      "the bulk code answers fails by inf; subjects without bulk code "
                      "(other solve methods, rules of your own not over arrays) are not "
                      "checked"),
        Property("cpl_work_bound", "The root finder's work within its bound",
                 "every root search of cpl.solve_batch (the equilibrium's root in mu and "
                 "its polish) and of cpl.posted_pricing_batch (exact and v0 responses) takes "
                 "at most cpl.ROOT_BISECTION_EVERY x (halvings + cpl.ROOT_HALVING_SLACK) "
                 "iterations (proven), a game whose budget does not bind at most "
                 "cpl.ONE_SIDED_ROOT_STEPS x (halvings + cpl.ROOT_HALVING_SLACK) (measured), "
                 "a posted price's bracket doubled at most max(0, ceil(log2 p)) + 1 times; "
                 "as each result reports its work (BatchEquilibrium.root_iterations & co., "
                 "an Equilibrium's info)",
                 "the documented bounds (mechanisms/cpl/batch.py)", "B > 0", "cpl",
                 _games(large_v=True, budget="any", positive_budget=True, edge=True),
                 _work_violation, batch=_work_bulk,
                 note="half the binding budgets a hair above the floor spend or below the "
                      "q_max spend, the root at a kink of the spend "
                      "(proofs.strategies.edge_budgets); a "
                      "count missing, NaN or negative is a failure; other solve methods and "
                      "rules of your own have no root finder to bound (not checked)"),
    ]
}
