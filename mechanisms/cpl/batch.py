"""Many CPL games at once: the Stackelberg equilibrium and the posted prices, vectorised.

A :class:`GameBatch` holds B games with the same number of clients n as (B, n) arrays (the
property checker draws games grouped by n). :func:`solve_batch` is the ``"bisection"``
solver of :mod:`mechanisms.cpl.equilibrium` for all games at once: the spend S(mu) is
nondecreasing in mu = 1/lambda, so mu* is bracketed between the point where every client
sits at q_min and the one where every client sits at q_max and found by a safeguarded
regula falsi (Illinois) on every game at once, then polished in the shifted variable
d_n + s (d_n = mu - v_n) exactly as the scalar solver does. :func:`posted_pricing_batch`
calibrates a posted price P = p * shape to the budget the same way. Both agree with the
scalar functions to about 1e-9 relative (tests/test_cpl_batch.py).

>>> import numpy as np
>>> from mechanisms import cpl
>>> g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=1.0)
>>> eq = cpl.solve_batch(cpl.GameBatch.from_games([g, g.replace(budget=2.0)]))
>>> bool(np.allclose(eq.q[0], cpl.solve(g).q, rtol=1e-9))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MarketInputError
from .game import Game, bound_coefficient
from .response import positive_root

__all__ = ["BatchEquilibrium", "GameBatch", "posted_floor_spend", "posted_pricing_batch",
           "solve_batch"]

_EPS = np.finfo(float).eps


@dataclass(frozen=True)
class GameBatch:
    """B CPL games with n clients each: ``a, G, c, v, q_max`` (B, n); ``budget, alpha, R,
    q_min`` (B,); ``a`` normalised per game as :class:`mechanisms.cpl.Game` does. Build one
    with :meth:`from_games` or from arrays (no further validation: the arrays must describe
    valid games)."""

    a: np.ndarray
    G: np.ndarray
    c: np.ndarray
    v: np.ndarray
    q_max: np.ndarray
    budget: np.ndarray
    alpha: np.ndarray
    R: np.ndarray
    q_min: np.ndarray

    def __post_init__(self):
        a = np.asarray(self.a, dtype=float)
        total = a.sum(axis=-1, keepdims=True)
        a = np.where(np.isclose(total, 1.0, rtol=1e-12, atol=0), a, a / total)  # as Game
        object.__setattr__(self, "a", a)

    @classmethod
    def from_games(cls, games) -> GameBatch:
        games = list(games)
        if not games or not all(isinstance(g, Game) for g in games):
            raise MarketInputError("games", "must be a non-empty sequence of cpl.Game")
        n = {g.n for g in games}
        if len(n) != 1:
            raise MarketInputError("games", f"must all have the same number of clients; got "
                                            f"{sorted(n)}")
        def rows(name):
            return np.array([np.broadcast_to(getattr(g, name), (g.n,)) for g in games],
                            dtype=float)

        def col(name):
            return np.array([float(getattr(g, name)) for g in games])

        return cls(rows("a"), rows("G"), rows("c"), rows("v"), rows("q_max"), col("budget"),
                   col("alpha"), col("R"), col("q_min"))

    @property
    def size(self) -> int:
        return self.a.shape[0]

    @property
    def n(self) -> int:
        return self.a.shape[1]

    @property
    def K(self) -> np.ndarray:
        return bound_coefficient(self.alpha[:, None], self.a, self.G, self.R[:, None])

    def game(self, k: int) -> Game:
        return Game(a=self.a[k], G=self.G[k], c=self.c[k], v=self.v[k],
                    budget=float(self.budget[k]), alpha=float(self.alpha[k]),
                    R=float(self.R[k]), q_min=float(self.q_min[k]), q_max=self.q_max[k])

    def spend(self, q) -> np.ndarray:
        """sum_n P_n(q_n) q_n per game (:func:`mechanisms.cpl.game.spend`)."""
        return np.sum(2.0 * self.c * q**2 - self.v * self.K / q, axis=-1)

    def bound(self, q) -> np.ndarray:
        """sum_n K_n (1 - q_n) / q_n per game (:func:`mechanisms.cpl.game.bound`)."""
        return np.sum(self.K * (1.0 - q) / q, axis=-1)

    def inverse_price(self, q) -> np.ndarray:
        return 2.0 * self.c * q - self.v * self.K / q**2

    def best_response(self, prices) -> np.ndarray:
        """(B, n) q_n(P_n) (:func:`mechanisms.cpl.response.best_response`)."""
        q = positive_root(prices, self.c, self.v * self.K)
        return np.clip(q, self.q_min[:, None], self.q_max)


@dataclass(frozen=True)
class BatchEquilibrium:
    """Per game: ``q``, ``prices`` (B, n); ``multiplier`` lambda* (0 when slack),
    ``v_threshold`` = 1/(3 lambda*) (inf when slack), ``slack`` (the budget does not bind),
    ``objective``, ``spent``, ``budget_residual`` = |spent - B| / max(|B|, 1) (B,)."""

    q: np.ndarray
    prices: np.ndarray
    multiplier: np.ndarray
    v_threshold: np.ndarray
    slack: np.ndarray
    objective: np.ndarray
    spent: np.ndarray
    budget_residual: np.ndarray


def _root(f, lo, hi, flo, fhi, *, max_iter: int = 400):
    """Roots of nondecreasing f on [lo, hi] (f(lo) <= 0 <= f(hi)), all rows at once:
    Illinois regula falsi, a bisection step whenever it stalls; stops when the bracket is a
    few ulps wide or f hits 0. Returns the final bracket (lo, hi) and a point x in it."""
    lo, hi, flo, fhi = (np.array(x, dtype=float) for x in (lo, hi, flo, fhi))
    side = np.zeros(lo.shape, dtype=int)  # which end moved last (Illinois halving)
    x = lo.copy()
    todo = (flo < 0) & (fhi > 0)
    x = np.where(flo >= 0, lo, np.where(fhi <= 0, hi, x))
    for it in range(max_iter):
        if not todo.any():
            break
        w = hi - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            sec = lo - flo * w / (fhi - flo)
        mid = 0.5 * (lo + hi)
        use_mid = ~np.isfinite(sec) | (sec <= lo) | (sec >= hi) | (it % 4 == 3)
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
        done = hit | (hi - lo <= 4 * _EPS * np.maximum(np.abs(lo), np.abs(hi)))
        x = np.where(done & ~hit & todo, 0.5 * (lo + hi), x)
        todo &= ~done
    return lo, hi, x


def solve_batch(games: GameBatch) -> BatchEquilibrium:
    """The Stackelberg equilibrium of every game (the ``"bisection"`` solver, vectorised).

    Raises :class:`mechanisms.cpl.BudgetInfeasible` naming the first game whose budget is
    below the q_min spend."""
    from .equilibrium import BudgetInfeasible

    B, n = games.size, games.n
    K, c, v, q_min, q_max = games.K, games.c, games.v, games.q_min[:, None], games.q_max
    floor = np.broadcast_to(q_min, (B, n))
    low = games.spend(floor)
    bad = low > games.budget
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise BudgetInfeasible("budget", f"game {k}: {games.budget[k]!r} is below the q_min "
                                         f"spend {low[k]:.6g}")
    top = games.spend(q_max)
    slack = top <= games.budget
    pos = K > 0
    mu_lo = np.min(np.where(pos, v + 4.0 * c * q_min**3 / K, np.inf), axis=1)
    mu_hi = np.max(np.where(pos, v + 4.0 * c * q_max**3 / K, -np.inf), axis=1)
    K4c = K / (4.0 * c)

    def q_at(mu):
        return np.clip(np.cbrt(K4c * np.maximum(mu[:, None] - v, 0.0)), q_min, q_max)

    def excess(mu):
        return games.spend(q_at(mu)) - games.budget

    binding = ~slack
    lo = np.where(binding, mu_lo, 0.0)
    hi = np.where(binding, mu_hi, 1.0)
    flo = np.where(binding, low - games.budget, -1.0)
    fhi = np.where(binding, top - games.budget, 1.0)
    lo, hi, mu = _root(excess, lo, hi, flo, fhi)
    # polish in the shifted variable s: q_n = cbrt(K4c (d_n + s)) with d_n = mu - v_n exact
    d = mu[:, None] - v

    def q_of(s):
        return np.clip(np.cbrt(K4c * np.maximum(d + s[:, None], 0.0)), q_min, q_max)

    def excess_s(s):
        return games.spend(q_of(s)) - games.budget

    width = 64 * _EPS * np.abs(mu)
    s_lo, s_hi = -width, width
    for _ in range(60):
        f_lo, f_hi = excess_s(s_lo), excess_s(s_hi)
        grow = binding & ~((f_lo <= 0) & (f_hi >= 0))
        if not grow.any():
            break
        s_lo, s_hi = np.where(grow, 2 * s_lo, s_lo), np.where(grow, 2 * s_hi, s_hi)
    f_lo, f_hi = excess_s(s_lo), excess_s(s_hi)
    _, _, s = _root(excess_s, s_lo, s_hi, np.where(binding, f_lo, -1.0),
                    np.where(binding, f_hi, 1.0))
    q = np.where(binding[:, None], q_of(s), q_max)
    mu = np.where(binding, mu + s, np.inf)
    multiplier = np.where(binding, 1.0 / mu, 0.0)
    with np.errstate(divide="ignore"):
        v_t = np.where(binding, 1.0 / (3.0 * multiplier), np.inf)
    P = games.inverse_price(q)
    spent = np.sum(P * q, axis=1)
    return BatchEquilibrium(q=q, prices=P, multiplier=multiplier, v_threshold=v_t,
                            slack=slack, objective=games.bound(q), spent=spent,
                            budget_residual=np.abs(spent - games.budget)
                            / np.maximum(np.abs(games.budget), 1.0))


def posted_pricing_batch(games: GameBatch, shape) -> BatchEquilibrium:
    """P = p * shape per game, p > 0 calibrated so the clients' exact best responses spend
    the budget (:func:`mechanisms.cpl.posted_pricing`, vectorised); needs every B > 0.
    ``multiplier`` is NaN and ``v_threshold`` NaN (not an equilibrium)."""
    shape = np.broadcast_to(np.asarray(shape, dtype=float), (games.size, games.n))
    if (games.budget <= 0).any():
        k = int(np.flatnonzero(games.budget <= 0)[0])
        raise MarketInputError("budget", f"game {k}: {games.budget[k]!r}; a posted price "
                                         "needs B > 0")
    if not (np.isfinite(shape).all() and (shape >= 0).all() and (shape > 0).any(axis=1).all()):
        raise MarketInputError("shape", "must be finite values >= 0, not all 0 in a game")

    def excess(p):
        P = p[:, None] * shape
        return np.sum(P * games.best_response(P), axis=1) - games.budget

    hi = np.ones(games.size)
    f_hi = excess(hi)
    for _ in range(1100):
        short = f_hi < 0
        if not short.any():
            break
        hi = np.where(short, 2.0 * hi, hi)
        f_hi = np.where(short, excess(hi), f_hi)
    lo = np.zeros(games.size)
    _, _, p = _root(excess, lo, hi, excess(lo), f_hi)
    P = p[:, None] * shape
    q = games.best_response(P)
    spent = np.sum(P * q, axis=1)
    nan = np.full(games.size, np.nan)
    return BatchEquilibrium(q=q, prices=P, multiplier=nan, v_threshold=nan,
                            slack=np.zeros(games.size, bool), objective=games.bound(q),
                            spent=spent, budget_residual=np.abs(spent - games.budget)
                            / np.maximum(np.abs(games.budget), 1.0))


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
        return np.where(np.isfinite(p), np.sum(P * games.best_response(np.where(
            np.isfinite(P), P, 0.0)), axis=1), np.inf)
