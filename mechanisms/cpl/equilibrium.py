"""The server's problem and the Stackelberg equilibrium (spec cpl.md, "Solvers").

Problem P1' in q:  min sum K_n (1 - q_n)/q_n  s.t.  sum [2 c_n q_n^2 - v_n K_n / q_n] <= B.
It is convex in y = 1/q. KKT, with mu = 1/lambda:  q_n(mu) = clip(cbrt(K_n (mu - v_n)_+ /
(4 c_n)), q_min, q_max_n), i.e. interior clients share 4 c_n q_n^3 / K_n + v_n = mu.

Three solvers, all returning :class:`Equilibrium`:

* ``"bisection"`` (default): the spend S(mu) is nondecreasing; a safeguarded regula falsi on
  S(mu) = B, O(N) per step: :func:`mechanisms.cpl.solve_batch` on a batch of one game (one
  implementation for one game and for many).
* ``"cvxpy"``: P1' in y, one convex solve (a cross-check).
* ``"cvxpy-linesearch"``: the paper's method, written correctly in y: for each M on a grid,
  min sum K (y - 1) s.t. sum c / y^2 <= M, sum v K y >= 2M - B, box on y; M is a cvxpy
  Parameter, so the problem compiles once; the best grid point wins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..contain import call_rule, within
from ..errors import (
    MarketInputError,
    ProblemTooLarge,
    RuleFailed,
    SolverFailed,
    as_floats,
    as_int,
    as_real,
)
from ..lookup import lookup
from .batch import (
    POSTED_SHAPES,
    BatchEquilibrium,
    check_budget,
    outcome,
    posted_pricing_batch,
    q_of_mu,
    rule_outcome,
    solve_games,
)
from .game import BudgetInfeasible, Game, GameBatch, check_game, client_utilities, spend

__all__ = [
    "LINESEARCH_BUDGET_RTOL",
    "METHODS",
    "PRICING_RULES",
    "WORK_FIELDS",
    "BudgetInfeasible",
    "Equilibrium",
    "SolverFailed",
    "apply_pricing",
    "check_solve",
    "gradient_pricing",
    "posted_pricing",
    "q_of_mu",
    "solve",
    "spend_scale",
    "uniform_pricing",
    "weighted_pricing",
]

METHODS = ("bisection", "cvxpy", "cvxpy-linesearch")
WORK_FIELDS = ("root_iterations", "root_halvings", "polish_iterations", "polish_halvings",
               "doublings")
"""The root finder's work a one-game answer reports in ``info`` (the bisection, posted
prices), named as the fields of :class:`~mechanisms.cpl.BatchEquilibrium`."""


def _ro(a):
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Equilibrium:
    """A pricing outcome with how it was computed. ``multiplier`` and ``v_threshold`` are
    None for pricing schemes that are not the equilibrium (uniform, weighted).

    q, prices, payments (= prices * q), utilities (client utilities, constant dropped)
    multiplier lambda*, v_threshold = 1/(3 lambda*) (inf when the budget is slack)
    objective = sum K (1 - q)/q, spent = sum P q, status "optimal" | "slack" | solver status
    kkt_residual: max over interior clients of |4 c q^3/K + v - 1/lambda*| relative to 1/lambda*
    (interior: K > 0 and q more than 1e-9 relative inside its box); None where no client is
    interior or there is no multiplier. The line search, which has no multiplier of its own,
    reports 1/lambda* = the median over the clients of 4 c q^3/K + v at its q (a client with
    K = 0 counting v; the mean of the middle two for an even number of clients)
    budget_residual: |spent - B| / max(|B|, 1) (0 expected unless slack)
    info: the bisection's mu = 1/lambda* (a binding budget) or why a game is degenerate, and
    (bisection, posted prices) the root finder's work, the fields :data:`WORK_FIELDS` of
    :class:`~mechanisms.cpl.BatchEquilibrium` as ints (iterations, halvings, doublings); the
    line search's grid_points, best_M and statuses (each grid point counted once by how its
    solve ended, the solver's status or solver_error, and over_budget beside them: the
    points solved whose spend exceeded B beyond its tolerance); a posted price's p, responses
    """

    method: str
    status: str
    q: np.ndarray
    prices: np.ndarray
    payments: np.ndarray
    utilities: np.ndarray
    objective: float
    spent: float
    budget: float
    multiplier: float | None
    v_threshold: float | None
    kkt_residual: float | None
    budget_residual: float
    seconds: float
    solver: str | None = None
    info: dict = field(default_factory=dict)

    @property
    def n_negative_prices(self) -> int:
        return int((self.prices < 0).sum())


def _kkt_residual(game: Game, q: np.ndarray, mu: float) -> float | None:
    interior = (q > game.q_min * (1 + 1e-9)) & (q < game.q_max * (1 - 1e-9)) & (game.K > 0)
    if not interior.any() or not np.isfinite(mu):
        return None
    gap = 4.0 * game.c[interior] * q[interior] ** 3 / game.K[interior] + game.v[interior] - mu
    return float(np.max(np.abs(gap)) / abs(mu))


def _one(game: Game) -> GameBatch:
    return GameBatch.from_games([game])


def _equilibrium(game: Game, method: str, status: str, out: BatchEquilibrium, t0,
                 solver=None, info=None) -> Equilibrium:
    """Game 0 of a batch-of-one outcome as an :class:`Equilibrium`."""
    q, P = out.q[0], out.prices[0]
    multiplier = float(out.multiplier[0])
    equilibrium = not np.isnan(multiplier)
    mu = (np.inf if multiplier == 0 else 1.0 / multiplier) if equilibrium else None
    return Equilibrium(
        method=method,
        status=status,
        q=_ro(q),
        prices=_ro(P),
        payments=_ro(P * q),
        utilities=_ro(client_utilities(game, P, q)),
        objective=float(out.objective[0]),
        spent=float(out.spent[0]),
        budget=game.budget,
        multiplier=multiplier if equilibrium else None,
        v_threshold=float(out.v_threshold[0]) if equilibrium else None,
        kkt_residual=_kkt_residual(game, q, mu) if equilibrium else None,
        budget_residual=float(out.budget_residual[0]),
        seconds=time.perf_counter() - t0,
        solver=solver,
        info=info or {},
    )


def _finish(game, method, status, q, mu, t0, solver=None, info=None, multiplier=None):
    """An outcome of the cvxpy solvers: participation ``q`` and mu = 1/lambda (or the
    solver's ``multiplier``), priced and totalled by :func:`mechanisms.cpl.batch.outcome`."""
    if multiplier is None:
        multiplier = 0.0 if not np.isfinite(mu) else 1.0 / mu
    out = outcome(_one(game), np.asarray(q, dtype=np.float64)[None], [multiplier],
                  slack=[status == "slack"], degenerate=[False])
    return _equilibrium(game, method, status, out, t0, solver, info)


def _check_feasible(game: Game):
    return float(check_budget(_one(game), name_games=False)[0])


OPTIONS = {"bisection": ("xtol",), "cvxpy": ("solver",),
           "cvxpy-linesearch": ("points", "eps0", "solver", "progress")}
CVXPY_MAX_N = 100_000  # clients; beyond, the conic solvers need tens of GB and minutes
# grid points x clients of one line search (one cvxpy solve per point). A solve costs about
# 2e-4 s per client on a loaded 2-core machine (measured with cpl.solve(CplBenchmark(
# clients=5000).game(), "cvxpy-linesearch", points=4), 0.9 s a point), so the guard keeps one
# line search near a minute or two (the paper's 40 clients x 400 points is 16,000); it was
# 4,000,000, about a quarter of an hour at n = 10,000 with no progress shown.
LINESEARCH_MAX_WORK = 500_000
# The line search accepts a grid point's q when its spend exceeds B by at most this fraction
# of the spend's scale, sum_n (2 c_n q_n^2 + v_n K_n / q_n): 10x the relative feasibility
# tolerance (1e-8) of cvxpy's default conic solvers (Clarabel, ECOS), applied to the terms
# the budget constraint sums. (It was 1e-7 max(1, |B|), absolute below |B| = 1: a tiny budget
# on a narrow q box could be overspent by a few % of its whole range.)
LINESEARCH_BUDGET_RTOL = 1e-7


def spend_scale(game: Game, q):
    """sum_n (2 c_n q_n^2 + v_n K_n / q_n): the size of the terms :func:`spend` sums, the
    scale a solver's relative feasibility tolerance on the budget refers to. A float for a
    :class:`Game`; over arrays too: a :class:`~mechanisms.cpl.GameBatch` and q (B, n) give
    (B,) (the one game is the batch of one)."""
    q = np.asarray(q, dtype=np.float64)
    s = np.sum(2.0 * game.c * q**2 + game.v * game.K / q, axis=-1)
    return float(s) if np.ndim(s) == 0 else s


def _bisection(game: Game, xtol: float = 0.0, method: str = "bisection"):
    """:func:`mechanisms.cpl.solve_batch` on the batch of one game. Every K_n = 0 (G = 0,
    or a^2 G^2 underflowing): the bound is 0 whatever q is, so every feasible q is optimal;
    the server buys the floor q_min (the least it can spend), whatever the ``method``."""
    t0 = time.perf_counter()
    out = solve_games(_one(game), xtol=xtol, name_games=False)
    if out.degenerate[0]:
        return _equilibrium(game, method, "degenerate", out, t0,
                            info={"reason": "every K_n = alpha a_n^2 G_n^2 / R is 0",
                                  **_work(out)})
    if out.slack[0]:
        return _equilibrium(game, method, "slack", out, t0, info=_work(out))
    mu = 1.0 / float(out.multiplier[0])
    return _equilibrium(game, method, "optimal", out, t0, solver="illinois",
                        info={"mu": mu, **_work(out)})


def _work(out: BatchEquilibrium) -> dict:
    """The root finder's work on game 0 of a batch-of-one outcome, as ints (info)."""
    return {name: int(getattr(out, name)[0]) for name in WORK_FIELDS}


def _scale(game: Game) -> float:
    total = float(game.K.sum())
    return total if total > 0 else 1.0


_TIGHT = {"CLARABEL": {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}}


def _solve_tight(prob, solver):
    """Solve with tight tolerances where the solver takes them (Clarabel by default); if the
    solver cannot reach them, solve again with its defaults."""
    import warnings

    import cvxpy as cp

    name = solver or ("CLARABEL" if "CLARABEL" in _installed_solvers() else None)
    tight = _TIGHT.get(name or "", {})
    if tight:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=name, **tight)
        if prob.status == cp.OPTIMAL:
            return
    prob.solve(solver=name)


def _installed_solvers():
    import cvxpy as cp

    return cp.installed_solvers()


def _cvxpy_problem(game: Game, linesearch: bool):
    import cvxpy as cp

    n = game.n
    K, c, vK = game.K, game.c, game.v * game.K
    y = cp.Variable(n)
    box = [y >= 1.0 / game.q_max, y <= 1.0 / game.q_min]
    # K_n is tiny (alpha a^2 G^2 / R ~ 1e-6): scale the objective to O(1) so that the
    # solver's absolute tolerances mean something; the budget dual is scaled back by _scale.
    objective = cp.Minimize((K / _scale(game)) @ (y - 1.0))
    if not linesearch:
        budget = cp.sum(cp.multiply(2.0 * c, cp.power(y, -2))) - vK @ y <= game.budget
        return cp.Problem(objective, [budget, *box]), y, budget, None
    M = cp.Parameter(nonneg=True)
    cons = [cp.sum(cp.multiply(c, cp.power(y, -2))) <= M, vK @ y >= 2 * M - game.budget, *box]
    return cp.Problem(objective, cons), y, cons[0], M


def _cvxpy(game: Game, solver: str | None = None):
    import cvxpy as cp

    t0 = time.perf_counter()
    top = _check_feasible(game)
    if top <= game.budget:
        return _finish(game, "cvxpy", "slack", game.q_max.copy(), np.inf, t0)
    prob, y, budget, _ = _cvxpy_problem(game, linesearch=False)
    _solve_tight(prob, solver)
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise SolverFailed("cvxpy", f"solver {prob.solver_stats.solver_name} ended "
                                    f"{prob.status}; try method='bisection' (exact)")
    q = np.clip(1.0 / np.asarray(y.value), game.q_min, game.q_max)
    lam = float(budget.dual_value) * _scale(game)
    mu = np.inf if lam <= 0 else 1.0 / lam
    return _finish(game, "cvxpy", prob.status, q, mu, t0,
                   solver=prob.solver_stats.solver_name, multiplier=lam)


def _linesearch_grid(game: Game, points: int | None = 400, eps0: float | None = None,
                     **_ignored) -> np.ndarray:
    """The line search's grid of M values, refused (ProblemTooLarge) over its work guard.

    M = sum c_n q_n^2 ranges over [sum c q_min^2, sum c q_max^2] (spec cpl.md), but the
    sub-problem's constraint sum v K y >= 2M - B with y <= 1/q_min is infeasible for every
    M > (B + sum_n v_n K_n / q_min) / 2, whatever q is, so the grid stops there: its points
    all fall where a sub-problem can be solved. (On the full range a low budget, negative
    with valued clients paying, left 1 or 2 of 30 points feasible: issue 34.) A feasible
    budget (spend at q_min <= B) puts that end at or above the lower one."""
    lo = float(np.sum(game.c * game.q_min**2))
    hi = float(np.sum(game.c * game.q_max**2))
    hi = max(lo, min(hi, 0.5 * (game.budget + float(np.sum(game.v * game.K)) / game.q_min)))
    if eps0 is not None:
        eps0 = as_real("eps0", eps0, lo=0, lo_open=True)
        count = (hi - lo) / eps0 + 1
        field = "eps0"
    else:
        count = as_int("points", points, lo=2)
        field = "points"
    if count * game.n > LINESEARCH_MAX_WORK:
        raise ProblemTooLarge(field, f"the line search would solve {count:.3g} cvxpy problems "
                                     f"of {game.n} clients, over its guard of "
                                     f"{LINESEARCH_MAX_WORK:,} grid points x clients; use fewer "
                                     "points or method='bisection' (exact)")
    return np.arange(lo, hi + eps0, eps0) if eps0 is not None else np.linspace(lo, hi, count)


def _linesearch(game: Game, points: int | None = 400, eps0: float | None = None,
                solver: str | None = None, progress=None):
    import cvxpy as cp

    t0 = time.perf_counter()
    top = _check_feasible(game)
    if top <= game.budget:
        return _finish(game, "cvxpy-linesearch", "slack", game.q_max.copy(), np.inf, t0)
    grid = _linesearch_grid(game, points, eps0)
    prob, y, _, M = _cvxpy_problem(game, linesearch=True)
    best = (np.inf, None, None)
    statuses: dict = {}
    for k, value in enumerate(grid):
        if progress is not None:
            progress(k, grid.size)
        M.value = float(value)
        try:
            prob.solve(solver=solver)  # the paper's method with the solver's defaults
        except cp.SolverError:
            statuses["solver_error"] = statuses.get("solver_error", 0) + 1
            continue
        statuses[prob.status] = statuses.get(prob.status, 0) + 1
        if prob.status != cp.OPTIMAL or prob.value >= best[0]:
            continue
        yv = np.asarray(y.value).copy()
        qv = np.clip(1.0 / yv, game.q_min, game.q_max)
        if spend(game, qv) > game.budget + LINESEARCH_BUDGET_RTOL * spend_scale(game, qv):
            statuses["over_budget"] = statuses.get("over_budget", 0) + 1
            continue  # the solver's tolerance let it overspend: not a feasible price vector
        best = (prob.value, yv, float(value))
    if progress is not None:
        progress(grid.size, grid.size)
    if best[1] is None:
        raise SolverFailed("cvxpy-linesearch", f"no grid point solved within the budget "
                                               f"({statuses}); try more points or "
                                               "method='bisection' (exact)")
    q = np.clip(1.0 / best[1], game.q_min, game.q_max)
    # no budget multiplier comes out of the grid search; report the KKT value it implies
    mu = float(np.median(4.0 * game.c * q**3 / np.where(game.K > 0, game.K, np.inf) + game.v))
    return _finish(game, "cvxpy-linesearch", "optimal", q, mu, t0,
                   solver=prob.solver_stats.solver_name,
                   info={"grid_points": int(grid.size), "best_M": best[2],
                         "statuses": statuses})


def check_solve(game: Game, method: str = "bisection", **options) -> None:
    """Every check :func:`solve` makes before it solves (method, options, solver, the size
    guards), so that a caller solving several ways refuses before the first one runs."""
    check_game(game)
    if method not in METHODS:
        raise MarketInputError("method", f"unknown method {method!r}; choose one of {METHODS}")
    unknown = sorted(set(options) - set(OPTIONS[method]))
    if unknown:
        raise MarketInputError("options", f"method {method!r} takes no option(s) {unknown}; "
                                          f"allowed: {list(OPTIONS[method])}")
    if options.get("solver") is not None and options["solver"] not in _installed_solvers():
        raise MarketInputError("solver", f"unknown or not installed {options['solver']!r}; "
                                         f"installed: {_installed_solvers()}")
    if options.get("progress") is not None and not callable(options["progress"]):
        raise MarketInputError("progress", f"must be a function (done, total), got "
                                           f"{options['progress']!r}")
    if method != "bisection" and game.n > CVXPY_MAX_N:
        raise ProblemTooLarge("game", f"{game.n} clients is beyond the {CVXPY_MAX_N:,} the "
                                      f"cvxpy methods take; use method='bisection' (exact, "
                                      "O(n) per step)")
    if method == "cvxpy-linesearch":
        _linesearch_grid(game, **options)


def solve(game: Game, method: str = "bisection", **options) -> Equilibrium:
    """The Stackelberg equilibrium: the server's optimal q, and the prices that induce it.

    Options: ``points`` or ``eps0`` (grid of the line search; default 400 points), ``solver``
    (a cvxpy solver name for the cvxpy methods), ``progress(done, total)`` (the line search,
    per grid point: one cvxpy solve each). :func:`check_solve` makes the same checks without
    solving.

    >>> from mechanisms import cpl
    >>> g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 1, 1], c=[5, 5, 5], v=[1, 0, 3], budget=1.0)
    >>> eq = cpl.solve(g)
    >>> eq.status, round(eq.spent, 12)
    ('optimal', 1.0)
    >>> bool(np.allclose(cpl.best_response(g, eq.prices), eq.q))
    True
    """
    check_solve(game, method, **options)
    if not (game.K > 0).any():
        return _bisection(game, method=method)
    if method == "bisection":
        return _bisection(game, **options)
    if method == "cvxpy":
        return _cvxpy(game, **options)
    if method == "cvxpy-linesearch":
        return _linesearch(game, **options)
    raise MarketInputError("method", f"unknown method {method!r}; choose one of {METHODS}")


def posted_pricing(game: Game, shape, *, responses: str = "exact",
                   name: str = "posted") -> Equilibrium:
    """A posted price of a given shape, calibrated to the budget: P = p * shape with the scale
    p > 0 chosen so that the clients' best responses spend exactly B, sum P q(P) = B.

    ``shape``: (n,) non-negative, not all zero (``np.ones(n)``: uniform; ``game.a``: weighted;
    ``game.a * game.G``: linear in the gradient bounds). ``responses="exact"`` uses the exact
    cubic best response; ``"v0"`` reproduces the authors' code, which computed the clients'
    responses as if v_n = 0 (q = P/(2c), clipped).

    >>> from mechanisms import cpl
    >>> g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=1.0)
    >>> eq = cpl.posted_pricing(g, g.a * g.G)
    >>> round(eq.spent, 12), bool(np.allclose(eq.prices / (g.a * g.G), eq.info["p"]))
    (1.0, True)
    """
    check_game(game)
    shape = as_floats("shape", shape)
    if shape.shape != (game.n,):  # one game's own rule; the rest is the batch's
        raise MarketInputError("shape", f"has shape {shape.shape}; expected ({game.n},): one "
                                        "value per client")
    t0 = time.perf_counter()
    # the batch of one refuses an unknown responses, a shape with a value that is not finite
    # and >= 0 or all 0, and B <= 0, naming the field (as game 0)
    out = posted_pricing_batch(_one(game), shape[None], responses=responses)
    p = float(out.scale[0])
    return _equilibrium(game, name, "optimal", out, t0, solver="illinois",
                        info={"p": p, "responses": responses, **_work(out)})


def _posted(name: str, game: Game, responses: str) -> Equilibrium:
    return posted_pricing(game, POSTED_SHAPES[name](check_game(game)), responses=responses,
                          name=name)


def uniform_pricing(game: Game, responses: str = "exact") -> Equilibrium:
    """Baseline: one price p for every client, spending the budget exactly."""
    return _posted("uniform", game, responses)


def weighted_pricing(game: Game, responses: str = "exact") -> Equilibrium:
    """Baseline: P_n = p a_n, spending the budget exactly."""
    return _posted("weighted", game, responses)


def gradient_pricing(game: Game, responses: str = "exact") -> Equilibrium:
    """Posted price linear in the gradient bounds: P_n = p a_n G_n, spending the budget."""
    return _posted("gradient", game, responses)


def apply_pricing(game: Game, rule, *, name: str | None = None,
                  time_limit: float | None = None) -> Equilibrium:
    """Evaluate a pricing rule: ``rule(game) -> prices`` ((n,) finite real P_n, what the
    server pays client n per unit of participation; negative = the client pays). The clients
    answer with their exact best responses; the outcome says whether the budget held (status
    "optimal" when sum P q <= B up to rounding, else "over-budget").

    ``rule`` is named as everywhere (:mod:`mechanisms.lookup`): a callable, a built-in name of
    :data:`PRICING_RULES` ("uniform", "weighted", "gradient") or "module:function". The rule
    sees a copy of the game made for the call, its arrays read-only (writing into them, even
    after turning writing back on, changes nothing of the caller's); prices that are text,
    booleans, complex, NaN, inf or of the wrong shape are refused, and a rule that raises
    (sys.exit included) is a :class:`~mechanisms.errors.RuleFailed` naming it.
    ``time_limit`` (seconds, default None): a rule of your own still running when it has
    passed is stopped with a :class:`~mechanisms.errors.RuleTimedOut` naming it and the
    limit (SIGALRM: the main thread of a Unix process; elsewhere a limit is refused,
    :func:`mechanisms.contain.within`).

    >>> from mechanisms import cpl
    >>> g = cpl.Game(a=[0.5, 0.5], G=[1, 1], c=[5, 5], v=[0, 0], budget=1.0)
    >>> cpl.apply_pricing(g, lambda game: cpl.uniform_pricing(game).prices).status
    'optimal'
    >>> cpl.apply_pricing(g, "uniform").method
    'uniform'
    >>> cpl.apply_pricing(g, lambda game: np.full(game.n, 100.0)).status
    'over-budget'
    """
    if not isinstance(game, Game):
        raise MarketInputError("game", f"must be a cpl.Game, got {type(game).__name__}")
    spec_name, fn = lookup("pricing", rule, PRICING_RULES)
    label = name or (spec_name if isinstance(rule, str) else
                     getattr(rule, "__name__", None) or "custom")
    t0 = time.perf_counter()
    games = _one(game)
    # the built-in rules are written over arrays: they price the batch of one game (the code
    # apply_pricing_batch runs on many); a rule of your own sees the Game
    bulk = getattr(fn, "over_arrays", False) and fn in PRICING_RULES.values()
    out = within(time_limit, call_rule, "pricing", label, fn, games if bulk else game)
    try:
        P = as_floats("pricing", out)
    except MarketInputError as exc:
        raise RuleFailed("pricing", f"{label} returned {type(out).__name__}: "
                                    f"{exc.message}") from None
    if not bulk:
        if P.shape != (game.n,):
            raise RuleFailed("pricing", f"{label} returned shape {P.shape}, expected "
                                        f"({game.n},)")
        P = P[None]
    out, over = rule_outcome(games, P, label)
    return _equilibrium(game, label, "over-budget" if over[0] else "optimal", out, t0,
                        solver="rule")


def _posted_rule(name: str):
    """The built-in pricing rule ``name``: the posted price of shape POSTED_SHAPES[name]
    calibrated to the budget, written over arrays (a Game gives (n,), a GameBatch (B, n))."""

    def rule(game):
        if isinstance(game, GameBatch):
            return posted_pricing_batch(game, POSTED_SHAPES[name](game)).prices
        return _posted(name, game, "exact").prices

    rule.__name__ = rule.__qualname__ = f"{name}_prices"
    rule.over_arrays = True
    return rule


PRICING_RULES = {name: _posted_rule(name) for name in POSTED_SHAPES}
