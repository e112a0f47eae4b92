"""The Stackelberg equilibrium and the posted prices of CPL games, one or many at once.

This is the one implementation: :func:`mechanisms.cpl.solve` (method ``"bisection"``) and
:func:`mechanisms.cpl.posted_pricing` are the batch-of-one case of :func:`solve_batch` and
:func:`posted_pricing_batch`, and every solver's outcome (prices, threshold, spend) is
computed by :func:`outcome`. A :class:`~mechanisms.cpl.game.GameBatch` holds B games with the
same number of clients n as (B, n) arrays (the property checker draws games grouped by n).

:func:`solve_batch`: the spend S(mu) is nondecreasing in mu = 1/lambda, so mu* is bracketed
between the point where every client sits at q_min and the one where every client sits at
q_max and found by a safeguarded regula falsi (Illinois) on every game at once, then
polished in the shifted variable d_n + s (d_n = mu - v_n), where d_n is exact.
:func:`posted_pricing_batch` calibrates a posted price P = p * shape to the budget the same
way.

>>> import numpy as np
>>> from mechanisms import cpl
>>> g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=1.0)
>>> eq = cpl.solve_batch(cpl.GameBatch.from_games([g, g.replace(budget=2.0)]))
>>> bool(np.array_equal(eq.q[0], cpl.solve(g).q))
True
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from types import MappingProxyType

import numpy as np

from ..contain import call_rule
from ..errors import MarketInputError, RuleFailed, as_floats, as_real
from .game import BudgetInfeasible, GameBatch, bound, inverse_price, per_game, spend
from .response import best_response, best_response_v0

__all__ = [
    "ONE_SIDED_ROOT_STEPS",
    "POSTED_SHAPES",
    "RESPONSES",
    "ROOT_BISECTION_EVERY",
    "ROOT_HALVING_SLACK",
    "BatchEquilibrium",
    "GameBatch",
    "apply_pricing_batch",
    "check_budget",
    "outcome",
    "over_budget",
    "posted_floor_spend",
    "posted_pricing_batch",
    "priced",
    "q_of_mu",
    "rule_outcome",
    "solve_batch",
    "solve_games",
    "v_threshold",
]

_EPS = np.finfo(float).eps
_TINY = np.finfo(float).smallest_subnormal

RESPONSES = {"exact": best_response, "v0": best_response_v0}

# The shapes of the built-in posted prices P = p * shape (the baselines of the paper's
# Sec. VI and a price linear in the gradient bounds), of a Game (n,) or a GameBatch (B, n):
# the one copy, read by cpl.uniform_pricing & co., cpl.PRICING_RULES and the checker.
POSTED_SHAPES = MappingProxyType({
    "uniform": lambda games: np.ones_like(np.asarray(games.a, dtype=np.float64)),
    "weighted": lambda games: np.asarray(games.a, dtype=np.float64),
    "gradient": lambda games: np.asarray(games.a, dtype=np.float64)
    * np.asarray(games.G, dtype=np.float64),
})
OVER_BUDGET_RTOL = 1e-9  # spend above B + 1e-9 max(1, |B|): over budget (rounding allowed)

# The work of the root finder (:func:`_root`), reported on every result of solve_batch and
# posted_pricing_batch (BatchEquilibrium.root_iterations & co.) and bounded here; the
# property checker's ``cpl_work_bound`` checks every drawn game against these bounds
# (docs/reference-proofs.md, "The work of the iterative algorithms").
ROOT_BISECTION_EVERY = 4
"""_root takes a bisection step (the bracket's midpoint) every ROOT_BISECTION_EVERY-th
iteration, whatever the Illinois step would have been."""
ROOT_HALVING_SLACK = 2
"""The proven bound: a root search of a row takes at most
``ROOT_BISECTION_EVERY * (halvings + ROOT_HALVING_SLACK)`` iterations, ``halvings`` the
number a plain bisection needs from the first bracket to the width at which the search
stopped (``BatchEquilibrium.root_halvings``). Proof: no step widens the bracket, and each
bisection step halves it up to the rounding of the midpoint (at most eps M / 2, M the
bracket's largest |end|); the stopping width max(xtol, 4 eps M) only shrinks as the bracket
does (M of nested brackets does not grow), so it is at least the final one. Rounding aside,
``halvings`` bisection steps bring the width below the final stopping width; the midpoint's
rounding adds less than one halving over the steps whose width exceeds 16 eps M and at most
one over the last ones, hence the 2. A search stops at the latest in the iteration after its
last needed bisection step (or earlier, when f hits 0)."""
ONE_SIDED_ROOT_STEPS = 0.75
"""The measured bound on the search :func:`solve_batch` runs for a game whose budget does
not bind (slack or degenerate: its answer is q_max or q_min, and the search is carried along
with the batch's binding games on the bracket [0, 1] with f(1) taken as 1, while the spend
excess is <= 0 on the whole bracket, a one-sided function): at most
``ONE_SIDED_ROOT_STEPS * (halvings + ROOT_HALVING_SLACK)`` iterations. The Illinois halving
of f(hi) makes the secant step reach the top within a few iterations: measured at most 0.481
x (25 iterations of halvings + 2 = 52) on 230,582 such games (every CPL sampler of the
checker, 100,000 draws each, seed 1); declared with a margin of 1.5. (Plain regula falsi
keeps f(hi) = 1 and creeps up with the bisection steps alone: up to 3.5 x, 182 iterations.)"""


@dataclass(frozen=True)
class BatchEquilibrium:
    """Per game: ``q``, ``prices`` (B, n); ``multiplier`` lambda* (0 when slack or
    degenerate), ``v_threshold`` = 1/(3 lambda*) (inf when lambda* = 0), ``slack`` (the
    budget does not bind), ``degenerate`` (every K_n = 0: the floor q_min is bought),
    ``objective``, ``spent``, ``budget_residual`` = |spent - B| / max(|B|, 1) (B,);
    ``scale``: a posted price's p (B,), None for an equilibrium.

    The work done per game (B,) integers, None where no root was sought (:func:`outcome`,
    :func:`priced`): ``root_iterations``, the iterations of the root finder on the game's
    equation (S(mu) = B for the equilibrium, the spend of p * shape = B for a posted price),
    and ``root_halvings``, the halvings a plain bisection needs from its first bracket to the
    width at which it stopped; ``polish_iterations`` and ``polish_halvings`` the same of the
    equilibrium's polish in the shifted variable (0 for a posted price); ``doublings``: how
    often the bracket was doubled before its search (a posted price's upper end for p, the
    polish's bracket). Their bounds: :data:`ROOT_HALVING_SLACK` (proven),
    :data:`ONE_SIDED_ROOT_STEPS` (measured); an equilibrium's polish is never doubled with
    ``xtol`` = 0 (proven: :func:`solve_batch`), and ``root_halvings`` counts from the
    bracket of mu where every client sits at q_min to where every client sits at q_max."""

    q: np.ndarray
    prices: np.ndarray
    multiplier: np.ndarray
    v_threshold: np.ndarray
    slack: np.ndarray
    objective: np.ndarray
    spent: np.ndarray
    budget_residual: np.ndarray
    degenerate: np.ndarray
    scale: np.ndarray | None = None
    root_iterations: np.ndarray | None = None
    root_halvings: np.ndarray | None = None
    polish_iterations: np.ndarray | None = None
    polish_halvings: np.ndarray | None = None
    doublings: np.ndarray | None = None

    def __post_init__(self):
        # sealed as every result of the toolkit (Outcome, OutcomeBatch, Equilibrium): each
        # array a read-only copy, never an array the caller still holds made read-only
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value = np.array(value)
                value.setflags(write=False)
                object.__setattr__(self, f.name, value)


def v_threshold(multiplier):
    """The price-sign threshold v^t = 1/(3 lambda*) (inf where lambda* = 0: slack budget),
    elementwise."""
    lam = np.asarray(multiplier, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(lam == 0, np.inf, 1.0 / (3.0 * lam))


def _kkt_q(games, d):
    """clip(cbrt(K (d)_+ / (4c)), q_min, q_max) with d_n = mu - v_n (+ a shift)."""
    return np.clip(np.cbrt(games.K / (4.0 * games.c) * np.maximum(d, 0.0)),
                   per_game(games.q_min), games.q_max)


def q_of_mu(game, mu) -> np.ndarray:
    """KKT participation for mu = 1/lambda: clip(cbrt(K (mu - v)_+ / (4c)), q_min, q_max).
    A :class:`~mechanisms.cpl.Game` and a float, or a GameBatch and one mu per game."""
    return _kkt_q(game, per_game(mu) - game.v)


def check_budget(games, *, name_games: bool = True) -> np.ndarray:
    """The spend at q_max per game; :class:`~mechanisms.cpl.BudgetInfeasible` naming the
    first game (``name_games``) whose budget is below the spend at the q_min floor."""
    low = np.atleast_1d(spend(games, np.broadcast_to(per_game(games.q_min),
                                                     np.shape(games.q_max))))
    budget = np.atleast_1d(games.budget)
    bad = low > budget
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        where = f"game {k}: " if name_games else ""
        raise BudgetInfeasible("budget", f"{where}is {float(budget[k])!r}, but even q = q_min for "
                                         f"every client spends {low[k]:.6g}; raise the "
                                         "budget or lower q_min")
    return np.atleast_1d(spend(games, games.q_max))


def outcome(games: GameBatch, q, multiplier, *, slack, degenerate) -> BatchEquilibrium:
    """What participation ``q`` (B, n) costs and buys per game: the prices that induce it
    (the inverse price), the threshold of ``multiplier``, the spend, the bound."""
    q = np.asarray(q, dtype=np.float64)
    return _result(games, inverse_price(games, q), q, multiplier, slack, degenerate)


def priced(games: GameBatch, prices, *, responses: str = "exact") -> BatchEquilibrium:
    """What prices (B, n) buy per game: the clients' best responses (``responses``: "exact",
    or "v0", the authors' response as if v = 0), the spend, the bound; ``multiplier`` and
    ``v_threshold`` NaN (not an equilibrium)."""
    if responses not in RESPONSES:
        raise MarketInputError("responses", f"unknown {responses!r}; choose one of "
                                            f"{tuple(RESPONSES)}")
    P = np.asarray(prices, dtype=np.float64)
    none = np.zeros(np.shape(games.budget), bool)
    return _result(games, P, RESPONSES[responses](games, P), np.full(none.shape, np.nan),
                   none, none)


def _result(games, P, q, multiplier, slack, degenerate, scale=None, **work
            ) -> BatchEquilibrium:
    spent = np.sum(P * q, axis=-1)
    return BatchEquilibrium(
        q=q, prices=P, multiplier=np.asarray(multiplier, dtype=np.float64),
        v_threshold=v_threshold(multiplier), slack=np.asarray(slack, bool),
        objective=bound(games, q), spent=spent,
        budget_residual=np.abs(spent - games.budget) / np.maximum(np.abs(games.budget), 1.0),
        degenerate=np.asarray(degenerate, bool), scale=scale, **work)


def _root(f, lo, hi, flo, fhi, *, xtol: float = 0.0, max_iter: int = 400):
    """Roots of nondecreasing f on [lo, hi] (f(lo) <= 0 <= f(hi)), all rows at once:
    Illinois regula falsi, a bisection step whenever it stalls and every
    :data:`ROOT_BISECTION_EVERY`-th iteration; stops when the bracket is a few ulps (or
    ``xtol``) wide or f hits 0. Returns the final bracket (lo, hi), a point x in it, and per
    row its iterations (the steps at which f was evaluated for it) and the halvings a plain
    bisection needs from the first bracket to the final stopping width (the proven bound
    :data:`ROOT_HALVING_SLACK` relates them; 0 for a row not searched)."""
    lo, hi, flo, fhi = (np.array(x, dtype=float) for x in (lo, hi, flo, fhi))
    side = np.zeros(lo.shape, dtype=int)  # which end moved last (Illinois halving)
    x = lo.copy()
    todo = (flo < 0) & (fhi > 0)
    x = np.where(flo >= 0, lo, np.where(fhi <= 0, hi, x))
    iterations = np.zeros(lo.shape, dtype=np.int64)
    searched, width0 = todo.copy(), hi - lo
    for it in range(max_iter):
        if not todo.any():
            break
        iterations += todo
        w = hi - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            sec = lo - flo * w / (fhi - flo)
        mid = 0.5 * (lo + hi)
        use_mid = ~np.isfinite(sec) | (sec <= lo) | (sec >= hi) \
            | (it % ROOT_BISECTION_EVERY == ROOT_BISECTION_EVERY - 1)
        t = np.where(use_mid, mid, sec)
        ft = f(np.where(todo, t, x))
        below = todo & (ft < 0)
        above = todo & (ft > 0)
        hit = todo & (ft == 0)
        # Illinois: halve the function value at the end that stays put twice in a row
        flo = np.where(below, ft, np.where(above & (side == 1), 0.5 * flo, flo))
        fhi = np.where(above, ft, np.where(below & (side == -1), 0.5 * fhi, fhi))
        side = np.where(below, -1, np.where(above, 1, side))
        lo = np.where(below, t, lo)
        hi = np.where(above, t, hi)
        x = np.where(todo, t, x)
        done = hit | (hi - lo <= np.maximum(xtol, 4 * _EPS * np.maximum(np.abs(lo),
                                                                 np.abs(hi))))
        x = np.where(done & ~hit & todo, 0.5 * (lo + hi), x)
        todo &= ~done
    # the halvings a plain bisection needs from the first bracket to the width at which
    # this one stopped (its own stopping rule at the final bracket)
    stop = np.maximum.reduce([np.full(lo.shape, float(xtol)), 4 * _EPS * np.maximum(
        np.abs(lo), np.abs(hi)), np.full(lo.shape, _TINY)])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        halvings = np.where(searched, np.ceil(np.log2(np.clip(width0 / stop, 1.0, np.inf))), 0.0)
    return lo, hi, x, iterations, np.minimum(halvings, 4096).astype(np.int64)



def solve_batch(games: GameBatch, *, xtol: float = 0.0) -> BatchEquilibrium:
    """The Stackelberg equilibrium of every game (the ``"bisection"`` solver).

    The search in mu starts from the bracket [mu_lo, mu_hi], mu_lo = min_n (v_n + 4 c_n
    q_min^3 / K_n) (below it every client sits at q_min) and mu_hi = max_n (v_n + 4 c_n
    q_max_n^3 / K_n) (above it every client sits at q_max_n), over the clients with K_n > 0;
    ``root_halvings`` counts from it. The polish in s (q_n = cbrt(K_n (d_n + s) / 4 c_n),
    d_n = mu - v_n) starts from [-64 eps mu, 64 eps mu] and, with ``xtol`` = 0, is never
    doubled (``doublings`` 0; proven): the search in mu stopped with a bracket [lo, hi] of
    width <= 4 eps max(|lo|, |hi|) and f(lo) <= 0 <= f(hi) (or f(mu) = 0), as it does
    unless cut at ``_root``'s 400 iterations (at most 326 on 100,000 games of extreme
    parameters: c over 12 decades, G 9, v 18, q_min 5, half the budgets a hair above the
    floor spend); every step of the spend is monotone under rounding (d + s, the cube root,
    the clip, 2 c q^2 and -v K / q, the sum), and d_n + s differs from lo - v_n (hi - v_n) by
    at most 2 eps mu at s = lo - mu - 2 eps mu (hi - mu + 2 eps mu) wherever it matters (a
    client with v_n > 2 mu sits at q_min either way), so the spend excess is <= 0 there
    (>= 0), both points inside the polish's first bracket. Measured: no doubling on 721,480
    binding games (every CPL sampler of the checker, 100,000 draws each, seed 2) nor on
    those 100,000. A positive ``xtol`` stops the search in mu
    at a width up to xtol: about log2(xtol / (64 eps mu)) doublings more.

    ``xtol``: an absolute tolerance on mu = 1/lambda (default 0: to a few ulps). A game whose
    K_n are all 0 is degenerate: the bound is 0 whatever q is, and the floor q_min (the least
    spend) is bought. Raises :class:`mechanisms.cpl.BudgetInfeasible` naming the first game
    whose budget is below the q_min spend."""
    return solve_games(games, xtol=xtol, name_games=True)


def solve_games(games: GameBatch, *, xtol: float = 0.0, name_games: bool = True
                ) -> BatchEquilibrium:
    """:func:`solve_batch`; ``name_games=False`` leaves the game's index out of the
    infeasible-budget message (one game: :func:`mechanisms.cpl.solve`)."""
    xtol = as_real("xtol", xtol, lo=0)
    top = check_budget(games, name_games=name_games)
    K, c, v, q_min, q_max = games.K, games.c, games.v, per_game(games.q_min), games.q_max
    pos = K > 0
    degenerate = ~pos.any(axis=-1)
    slack = ~degenerate & (top <= games.budget)
    binding = ~(slack | degenerate)
    low = spend(games, np.broadcast_to(q_min, q_max.shape))
    with np.errstate(divide="ignore", invalid="ignore"):  # K = 0 clients are masked
        mu_lo = np.min(np.where(pos, v + 4.0 * c * q_min**3 / K, np.inf), axis=-1)
        mu_hi = np.max(np.where(pos, v + 4.0 * c * q_max**3 / K, -np.inf), axis=-1)

    def excess(mu):
        return spend(games, q_of_mu(games, mu)) - games.budget

    lo = np.where(binding, mu_lo, 0.0)
    hi = np.where(binding, mu_hi, 1.0)
    flo = np.where(binding, low - games.budget, -1.0)
    fhi = np.where(binding, top - games.budget, 1.0)
    lo, hi, mu, iterations, halvings = _root(excess, lo, hi, flo, fhi, xtol=xtol)
    # polish in the shifted variable s: q_n = cbrt(K (d_n + s) / 4c) with d_n = mu - v_n
    # exact (a client with v_n near mu* has q_n ~ cbrt(mu - v_n), which the original
    # variable resolves only to eps * mu)
    d = per_game(mu) - v

    def excess_s(s):
        return spend(games, _kkt_q(games, d + per_game(s))) - games.budget

    width = 64 * _EPS * np.abs(mu)
    s_lo, s_hi = -width, width
    doublings = np.zeros(games.size, dtype=np.int64)
    for _ in range(60):
        f_lo, f_hi = excess_s(s_lo), excess_s(s_hi)
        grow = binding & ~((f_lo <= 0) & (f_hi >= 0))
        if not grow.any():
            break
        doublings += grow
        s_lo, s_hi = np.where(grow, 2 * s_lo, s_lo), np.where(grow, 2 * s_hi, s_hi)
    f_lo, f_hi = excess_s(s_lo), excess_s(s_hi)
    _, _, s, polish, polish_halvings = _root(excess_s, s_lo, s_hi, np.where(binding, f_lo, -1.0),
                            np.where(binding, f_hi, 1.0))
    q = np.where(per_game(binding), _kkt_q(games, d + per_game(s)),
                 np.where(per_game(degenerate), np.broadcast_to(q_min, q_max.shape), q_max))
    with np.errstate(divide="ignore"):
        multiplier = np.where(binding, 1.0 / (mu + s), 0.0)
    # what outcome() returns, with the work done
    return _result(games, inverse_price(games, q), q, multiplier, slack, degenerate,
                   root_iterations=iterations, root_halvings=halvings,
                   polish_iterations=polish, polish_halvings=polish_halvings,
                   doublings=doublings)


def posted_pricing_batch(games: GameBatch, shape, *, responses: str = "exact"
                         ) -> BatchEquilibrium:
    """P = p * shape per game, p > 0 calibrated so the clients' best responses spend the
    budget (``responses``: "exact", or "v0", the authors' response as if v = 0; one game:
    :func:`mechanisms.cpl.posted_pricing`); needs every B > 0. ``multiplier`` and
    ``v_threshold`` are NaN (not an equilibrium); ``scale`` is p."""
    priced(games, np.zeros((games.size, games.n)), responses=responses)  # checks the name
    respond = RESPONSES[responses]
    given = as_floats("shape", shape)
    try:
        shape = np.broadcast_to(given, (games.size, games.n))
    except ValueError:
        raise MarketInputError("shape", f"has shape {given.shape}; expected ({games.n},) or "
                                        f"({games.size}, {games.n}): one value per client"
                               ) from None
    good = (np.isfinite(shape) & (shape >= 0)).all(axis=1) & (shape > 0).any(axis=1)
    if not good.all():
        k = int(np.flatnonzero(~good)[0])
        raise MarketInputError("shape", f"game {k}: must be finite values >= 0, not all 0; "
                                        f"got {shape[k].tolist()}")
    if (games.budget <= 0).any():
        k = int(np.flatnonzero(games.budget <= 0)[0])
        raise MarketInputError("budget", f"game {k}: {float(games.budget[k])!r}; a posted price "
                                         "needs B > 0")

    def excess(p):
        P = per_game(p) * shape
        return np.sum(P * respond(games, P), axis=-1) - games.budget

    hi = np.ones(games.size)
    f_hi = excess(hi)
    doublings = np.zeros(games.size, dtype=np.int64)
    for _ in range(1100):
        short = f_hi < 0
        if not short.any():
            break
        doublings += short
        hi = np.where(short, 2.0 * hi, hi)
        f_hi = np.where(short, excess(hi), f_hi)
    lo = np.zeros(games.size)
    _, _, p, iterations, halvings = _root(excess, lo, hi, excess(lo), f_hi)
    # what priced() returns, with the scale and the work done
    P = per_game(p) * shape
    nan = np.full(games.size, np.nan)
    none = np.zeros(games.size, dtype=np.int64)
    return _result(games, P, respond(games, P), nan, none.astype(bool), none.astype(bool),
                   scale=p, root_iterations=iterations, root_halvings=halvings,
                   polish_iterations=none, polish_halvings=none, doublings=doublings)


def posted_floor_spend(games: GameBatch, shape, level=None) -> np.ndarray:
    """Per game, the spend of the posted price P = p * shape at the least scale p >= 0 at
    which every client's unconstrained best response reaches ``level`` (default the q_min
    floor; a scalar or one per game); (B,).

    Client n's unconstrained response to P_n increases with P_n and equals q at the inverse
    price P_n(q) = 2 c_n q - v_n K_n / q^2, so the least such scale is
    p* = max(0, max_n P_n(level) / shape_n) (inf if a client with shape_n = 0 needs a
    positive price). The spend sum p s_n q_n(p s_n) increases with p, so a posted price
    calibrated to any budget B above this spend puts every client whose q_max_n exceeds
    ``level`` strictly above it, and one calibrated to a budget at or below it leaves some
    client at or below it."""
    shape = np.broadcast_to(np.asarray(shape, dtype=float), (games.size, games.n))
    level = games.q_min if level is None else np.broadcast_to(np.asarray(level, float),
                                                              (games.size,))
    need = games.inverse_price(np.broadcast_to(level[:, None], shape.shape))
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(need <= 0, 0.0, np.where(shape > 0, need / shape, np.inf))
    p = np.max(per, axis=1)
    with np.errstate(invalid="ignore"):
        P = p[:, None] * shape
        return np.where(np.isfinite(p), np.sum(P * best_response(games, np.where(
            np.isfinite(P), P, 0.0)), axis=1), np.inf)


def over_budget(games, spent) -> np.ndarray:
    """Per game: ``spent`` exceeds the budget beyond rounding (B + 1e-9 max(1, |B|))."""
    budget = np.asarray(games.budget, dtype=np.float64)
    return np.asarray(spent) > budget + OVER_BUDGET_RTOL * np.maximum(1.0, np.abs(budget))


def apply_pricing_batch(games: GameBatch, rule) -> tuple[BatchEquilibrium, np.ndarray]:
    """(what the prices of ``rule`` buy, over budget) for every game of the batch: ``rule``
    a pricing rule written over arrays (a built-in one of :data:`mechanisms.cpl.PRICING_RULES`,
    or a function of yours marked ``over_arrays``) called once on the whole GameBatch,
    returning (B, n) finite prices; the clients answer with their exact best responses
    (:func:`priced`); over budget: :func:`over_budget`. :func:`mechanisms.cpl.apply_pricing`
    runs this on a batch of one game."""
    label = getattr(rule, "__name__", None) or "custom"
    if not getattr(rule, "over_arrays", False):
        raise MarketInputError("pricing", f"{label} is not marked over_arrays: "
                                          "apply_pricing_batch calls it on a GameBatch")
    out = call_rule("pricing", label, rule, games)
    try:
        P = as_floats("pricing", out)
    except MarketInputError as exc:
        raise RuleFailed("pricing", f"{label} returned {type(out).__name__}: "
                                    f"{exc.message}") from None
    return rule_outcome(games, P, label)


def rule_outcome(games, P, label: str) -> tuple[BatchEquilibrium, np.ndarray]:
    """What a pricing rule's prices ``P`` (B, n) buy, checked (shape, finite), and whether
    each game went over its budget."""
    want = (games.size, games.n)
    if P.shape != want:
        raise RuleFailed("pricing", f"{label} returned shape {P.shape}, expected {want}")
    if not np.isfinite(P).all():
        raise RuleFailed("pricing", f"{label} returned NaN or inf; prices must be finite")
    out = priced(games, P)
    return out, over_budget(games, out.spent)
