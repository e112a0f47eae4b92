"""The CPL game: types, the client's utility, the server's bound (spec cpl.md, "Players").

K_n = alpha a_n^2 G_n^2 / R weighs client n's term in the convergence bound (Thm 1):
    bound(q) = sum_n K_n (1 - q_n) / q_n.

Every formula here is written once over leading batch dimensions: it takes a :class:`Game`
(n clients) or a :class:`GameBatch` (B games of n clients, per-client fields (B, n), per-game
fields (B,)) and reduces over the last axis only, so one game is the batch-of-one case of
the same code (issue 20, part 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .. import paper
from ..errors import MarketInputError, as_floats, as_vector

__all__ = ["BudgetInfeasible", "Game", "GameBatch", "bound", "bound_coefficient", "check_game",
           "client_utilities", "inverse_price", "normalised_weights", "per_game", "spend"]


class BudgetInfeasible(MarketInputError):
    """Even q = q_min for everyone overspends the budget."""


def bound_coefficient(alpha, a, G, R):
    """K_n = alpha a_n^2 G_n^2 / R, the weight of client n in the convergence bound (spec cpl.md).

    Broadcasts, so a batch of games passes alpha and R as columns."""
    return alpha * a**2 * G**2 / R


def normalised_weights(a) -> np.ndarray:
    """The aggregation weights a_n, normalised along the last axis to sum to 1 unless they
    already do (to 1e-12 relative); weights so large that their sum overflows are scaled by
    their largest first. One game (n,) or a batch (B, n)."""
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(over="ignore"):
        total = a.sum(axis=-1, keepdims=True)
    if not np.isfinite(total).all():  # a = 1e308 each: scale first, the sum overflows
        a = np.where(np.isfinite(total), a, a / a.max(axis=-1, keepdims=True))
        total = a.sum(axis=-1, keepdims=True)
    return np.where(np.isclose(total, 1.0, rtol=1e-12, atol=0), a, a / total)


def per_game(x) -> np.ndarray:
    """A per-game field (a float for one game, (B,) for a batch) as a column that broadcasts
    against the per-client fields ((1,) or (B, 1))."""
    return np.asarray(x, dtype=np.float64)[..., None]


def _ro(a) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Game:
    """A participation-pricing game with N clients.

    a : aggregation weights a_n > 0 (normalised to sum to 1 if they do not).
    G : per-client gradient-norm bounds G_n >= 0.
    c : cost coefficients c_n > 0.
    v : intrinsic values of the global model v_n >= 0.
    budget : the server's budget B (finite).
    alpha, R : constants of the convergence bound (alpha > 0, R >= 1 rounds).
    q_min : the participation floor, 0 < q_min <= q_max_n.
    q_max : scalar or per client, q_max_n <= 1.

    >>> g = Game(a=[0.5, 0.5], G=[1, 1], c=[5, 5], v=[0, 0], budget=1.0)
    >>> g.n, g.K.round(6).tolist()
    (2, [0.002275, 0.002275])
    """

    a: np.ndarray
    G: np.ndarray
    c: np.ndarray
    v: np.ndarray
    budget: float
    alpha: float = paper.CPL_ALPHA
    R: float = paper.CPL_R
    q_min: float = paper.CPL_Q_MIN
    q_max: np.ndarray | float = paper.CPL_Q_MAX

    def __post_init__(self):
        a = as_vector("a", self.a, shape_only=True)
        n = a.size
        G, c, v = (as_vector(name, getattr(self, name), m=n, shape_only=True)
                   for name in ("G", "c", "v"))
        for name in ("budget", "alpha", "R", "q_min"):
            bad = getattr(self, name)
            if isinstance(bad, bool | str | bytes | complex | np.complexfloating):
                raise MarketInputError(name, f"must be a real number, got {bad!r}")
            try:
                object.__setattr__(self, name, float(bad))
            except (TypeError, ValueError) as exc:
                raise MarketInputError(name, f"must be a number, got {bad!r}") from exc
        try:
            q_max = as_floats("q_max", self.q_max)
            if q_max.ndim and q_max.shape != (n,):  # a length-1 list for 2 clients: a slip
                raise ValueError(q_max.shape)
            q_max = np.broadcast_to(q_max, (n,))
        except (TypeError, ValueError) as exc:
            raise MarketInputError("q_max", f"must be a number or one per client ({n}), got "
                                            f"{self.q_max!r}") from exc
        a = _check_values(a, G, c, v, q_max, self.budget, self.alpha, self.R, self.q_min,
                          batch=False)
        for name, val in (("a", a), ("G", G), ("c", c), ("v", v), ("q_max", q_max)):
            object.__setattr__(self, name, _ro(val))

    @property
    def n(self) -> int:
        return int(self.a.size)

    @property
    def K(self) -> np.ndarray:
        """K_n = alpha a_n^2 G_n^2 / R."""
        return bound_coefficient(self.alpha, self.a, self.G, self.R)

    def replace(self, **changes) -> Game:
        fields = {k: getattr(self, k) for k in
                  ("a", "G", "c", "v", "budget", "alpha", "R", "q_min", "q_max")}
        fields.update(changes)
        return Game(**fields)


def check_game(game) -> Game:
    """``game`` itself if it is a :class:`Game`; MarketInputError naming ``game`` otherwise."""
    if not isinstance(game, Game):
        raise MarketInputError("game", f"must be a cpl.Game, got {type(game).__name__}")
    return game


def _per_game_value(x):
    """A float for one game, the (B,) array for a batch."""
    return float(x) if np.ndim(x) == 0 else x


def bound(game, q):
    """The server's objective: sum_n K_n (1 - q_n)/q_n (the q-dependent part of Thm 1).
    A float for a :class:`Game`, (B,) for a :class:`GameBatch`."""
    q = np.asarray(q, dtype=np.float64)
    return _per_game_value(np.sum(game.K * (1.0 - q) / q, axis=-1))


def inverse_price(game, q) -> np.ndarray:
    """P_n(q) = 2 c_n q_n - v_n K_n / q_n^2: the price at which q_n is client n's best
    response (the seed paper prints it without the alpha/R inside K_n: a typo)."""
    q = np.asarray(q, dtype=np.float64)
    return 2.0 * game.c * q - game.v * game.K / q**2


def spend(game, q):
    """sum_n P_n(q) q_n = sum_n [2 c_n q_n^2 - v_n K_n / q_n]: the budget used to buy q.
    A float for a :class:`Game`, (B,) for a :class:`GameBatch`."""
    q = np.asarray(q, dtype=np.float64)
    return _per_game_value(np.sum(2.0 * game.c * q**2 - game.v * game.K / q, axis=-1))


def client_utilities(game: Game, prices, q) -> np.ndarray:
    """U_n = P_n q_n - c_n q_n^2 - v_n bound(q) (the constant term dropped).

    Evaluate any price vector with its best responses:
    ``client_utilities(game, P, best_response(game, P))``.
    """
    check_game(game)
    P = as_vector("prices", prices, m=game.n, allow_inf=False)
    q = as_vector("q", q, m=game.n, positive=True)
    return P * q - game.c * q**2 - game.v * bound(game, q)


def _first(bad, batch: bool) -> tuple[tuple[int, ...], str]:
    """The index of the first True entry of ``bad`` and where it is, said with a space
    after: ``entry j`` of one game's (n,) field ('' of its 0-d field); ``game k, client j``
    of a batch's (B, n) field, ``game k`` of its (B,) field."""
    at = tuple(np.argwhere(bad)[0].tolist())
    if not batch:
        return at, "".join(f"entry {j} " for j in at)
    return at, f"game {at[0]}" + (f", client {at[1]}" if len(at) > 1 else "") + " "


def _check_values(a, G, c, v, q_max, budget, alpha, R, q_min, *, batch: bool) -> np.ndarray:
    """:class:`Game`'s rules on its values, one copy for one game (``a`` and the per-client
    fields (n,), the per-game fields floats) and for a :class:`GameBatch` (``batch``:
    (B, n), (B,)), every entry at once: a_n > 0, G_n >= 0, c_n > 0, v_n >= 0, all finite;
    budget, alpha, R, q_min finite with alpha > 0, R >= 1, 0 < q_min <= 1;
    q_min <= q_max_n <= 1; K finite (``a`` as given). The first entry off them is refused
    (MarketInputError), naming its field, where it is (:func:`_first`) and its value; else
    ``a`` normalised (:func:`normalised_weights`)."""
    rules = (("a", a, " and > 0", lambda x: x > 0),
             ("G", G, " and >= 0", lambda x: x >= 0),
             ("c", c, " and > 0", lambda x: x > 0),
             ("v", v, " and >= 0", lambda x: x >= 0),
             ("budget", budget, "", lambda x: True),
             ("alpha", alpha, " and > 0", lambda x: x > 0),
             ("R", R, " and >= 1", lambda x: x >= 1),
             ("q_min", q_min, " and in (0, 1]", lambda x: (x > 0) & (x <= 1)))
    for name, x, rule, ok in rules:
        x = np.asarray(x)
        bad = ~(np.isfinite(x) & ok(x))
        if bad.any():
            at, where = _first(bad, batch)
            raise MarketInputError(name, f"{where}is {float(x[at])!r}; must be finite{rule}")
    q_max, lo = np.asarray(q_max), np.broadcast_to(per_game(q_min), np.shape(q_max))
    bad = ~(np.isfinite(q_max) & (q_max >= lo) & (q_max <= 1))
    if bad.any():
        at, where = _first(bad, batch)
        raise MarketInputError("q_max", f"{where}is {float(q_max[at])!r}; must lie in "
                                        f"[q_min={float(lo[at])!r}, 1]")
    a = normalised_weights(a)
    with np.errstate(over="ignore", invalid="ignore"):
        K = bound_coefficient(per_game(alpha), a, G, per_game(R))
    bad = ~np.isfinite(K)
    if bad.any():
        at, where = _first(bad, batch)
        raise MarketInputError("G", f"{where}is {float(np.asarray(G)[at])!r}: K = alpha a^2 "
                                    "G^2 / R overflows float64; rescale G")
    return a


_PER_CLIENT = ("G", "c", "v", "q_max")  # (B, n) in a GameBatch, as a is
_PER_GAME = ("budget", "alpha", "R", "q_min")  # (B,)


@dataclass(frozen=True)
class GameBatch:
    """B CPL games with n clients each: ``a, G, c, v, q_max`` (B, n); ``budget, alpha, R,
    q_min`` (B,); ``a`` normalised per game by :func:`normalised_weights`, as
    :class:`Game` does. Build one with :meth:`from_games` or from arrays: ``a`` gives B and
    n, and every other field must have exactly its shape (MarketInputError naming the field,
    the shape expected and the shape got): nothing is broadcast, so a q_max of shape (B, 1)
    for n = 2 clients is refused, not read as one bound per game. The values obey
    :class:`Game`'s rules, checked for every game at once (MarketInputError naming the
    field, the first game and client off them, and the value): a_n > 0, G_n >= 0, c_n > 0,
    v_n >= 0, all finite; budget, alpha, R, q_min finite with alpha > 0, R >= 1,
    0 < q_min <= 1; q_min <= q_max_n <= 1; K finite. Every formula of this module takes it
    in place of a :class:`Game`.

    >>> GameBatch(a=[[0.5, 0.5]], G=[[1.0, 1.0]], c=[[5.0, 5.0]], v=[[0.0, 0.0]],
    ...           q_max=[[1.0]], budget=[1.0], alpha=[1.0], R=[10.0], q_min=[0.01])
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mechanisms.errors.MarketInputError: q_max: has shape (1, 1), expected (1, 2) (B games...
    """

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
        a = as_floats("a", self.a)
        if a.ndim != 2 or 0 in a.shape:
            raise MarketInputError("a", f"has shape {a.shape}, expected (B, n): B >= 1 games of "
                                        "n >= 1 clients")
        B, n = a.shape
        for names, want, what in ((_PER_CLIENT, (B, n), "B games x n clients"),
                                  (_PER_GAME, (B,), "one per game")):
            for name in names:
                arr = as_floats(name, getattr(self, name))
                if arr.shape != want:
                    raise MarketInputError(name, f"has shape {arr.shape}, expected {want} "
                                                 f"({what}, B and n from a's shape); a "
                                                 "GameBatch broadcasts nothing")
                object.__setattr__(self, name, arr)
        a = _check_values(a, **{name: getattr(self, name) for name in (*_PER_CLIENT,
                                                                        *_PER_GAME)},
                          batch=True)
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

    @cached_property
    def K(self) -> np.ndarray:
        """K_n = alpha a_n^2 G_n^2 / R per game (:func:`bound_coefficient`)."""
        return bound_coefficient(per_game(self.alpha), self.a, self.G, per_game(self.R))

    def game(self, k: int) -> Game:
        return Game(a=self.a[k], G=self.G[k], c=self.c[k], v=self.v[k],
                    budget=float(self.budget[k]), alpha=float(self.alpha[k]),
                    R=float(self.R[k]), q_min=float(self.q_min[k]), q_max=self.q_max[k])

    def spend(self, q) -> np.ndarray:
        """:func:`spend` per game."""
        return spend(self, q)

    def bound(self, q) -> np.ndarray:
        """:func:`bound` per game."""
        return bound(self, q)

    def inverse_price(self, q) -> np.ndarray:
        """:func:`inverse_price` per game."""
        return inverse_price(self, q)
