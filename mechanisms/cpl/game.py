"""The CPL game: types, the client's utility, the server's bound (spec cpl.md, "Players").

K_n = alpha a_n^2 G_n^2 / R weighs client n's term in the convergence bound (Thm 1):
    bound(q) = sum_n K_n (1 - q_n) / q_n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import paper
from ..errors import MarketInputError, as_floats, as_vector

__all__ = ["Game", "bound", "bound_coefficient", "check_game", "client_utilities", "inverse_price",
           "spend"]


def bound_coefficient(alpha, a, G, R):
    """K_n = alpha a_n^2 G_n^2 / R, the weight of client n in the convergence bound (spec cpl.md).

    Broadcasts, so a batch of games passes alpha and R as columns."""
    return alpha * a**2 * G**2 / R


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
        a = as_vector("a", self.a, positive=True)
        n = a.size
        G = as_vector("G", self.G, m=n, nonnegative=True)
        c = as_vector("c", self.c, m=n, positive=True)
        v = as_vector("v", self.v, m=n, nonnegative=True)
        for name in ("budget", "alpha", "R", "q_min"):
            bad = getattr(self, name)
            if isinstance(bad, bool | str | bytes | complex | np.complexfloating):
                raise MarketInputError(name, f"must be a real number, got {bad!r}")
            try:
                val = float(bad)
            except (TypeError, ValueError) as exc:
                raise MarketInputError(name, f"must be a number, got {bad!r}") from exc
            if not np.isfinite(val):
                raise MarketInputError(name, f"is {val!r}; must be finite")
            object.__setattr__(self, name, val)
        if self.alpha <= 0:
            raise MarketInputError("alpha", f"is {self.alpha!r}; must be > 0")
        if self.R < 1:
            raise MarketInputError("R", f"is {self.R!r}; must be >= 1")
        if not 0 < self.q_min <= 1:
            raise MarketInputError("q_min", f"is {self.q_min!r}; must lie in (0, 1]")
        try:
            q_max = np.broadcast_to(as_floats("q_max", self.q_max), (n,))
        except (TypeError, ValueError) as exc:
            raise MarketInputError("q_max", f"must be a number or one per client ({n}), got "
                                            f"{self.q_max!r}") from exc
        q_max = as_vector("q_max", q_max, m=n)
        if (q_max > 1).any() or (q_max < self.q_min).any():
            k = int(np.flatnonzero((q_max > 1) | (q_max < self.q_min))[0])
            raise MarketInputError(
                "q_max", f"entry {k} is {q_max[k]!r}; must lie in [q_min={self.q_min}, 1]"
            )
        with np.errstate(over="ignore"):
            total = a.sum()
        if not np.isclose(total, 1.0, rtol=1e-12, atol=0):
            if not np.isfinite(total):  # a = 1e308 each: scale first, the sum overflows
                a = a / a.max()
            a = a / a.sum()
        with np.errstate(over="ignore", invalid="ignore"):
            K = bound_coefficient(self.alpha, a, G, self.R)
        if not np.isfinite(K).all():
            k = int(np.flatnonzero(~np.isfinite(K))[0])
            raise MarketInputError("G", f"entry {k} is {G[k]!r}: K = alpha a^2 G^2 / R "
                                        "overflows float64; rescale G")
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


def bound(game: Game, q) -> float:
    """The server's objective: sum_n K_n (1 - q_n)/q_n (the q-dependent part of Thm 1)."""
    q = np.asarray(q, dtype=np.float64)
    return float(np.sum(game.K * (1.0 - q) / q))


def inverse_price(game: Game, q) -> np.ndarray:
    """P_n(q) = 2 c_n q_n - v_n K_n / q_n^2: the price at which q_n is client n's best
    response (the seed paper prints it without the alpha/R inside K_n: a typo)."""
    q = np.asarray(q, dtype=np.float64)
    return 2.0 * game.c * q - game.v * game.K / q**2


def spend(game: Game, q) -> float:
    """sum_n P_n(q) q_n = sum_n [2 c_n q_n^2 - v_n K_n / q_n]: the budget used to buy q."""
    q = np.asarray(q, dtype=np.float64)
    return float(np.sum(2.0 * game.c * q**2 - game.v * game.K / q))


def client_utilities(game: Game, prices, q) -> np.ndarray:
    """U_n = P_n q_n - c_n q_n^2 - v_n bound(q) (the constant term dropped).

    Evaluate any price vector with its best responses:
    ``client_utilities(game, P, best_response(game, P))``.
    """
    check_game(game)
    P = as_vector("prices", prices, m=game.n, allow_inf=False)
    q = as_vector("q", q, m=game.n, positive=True)
    return P * q - game.c * q**2 - game.v * bound(game, q)
