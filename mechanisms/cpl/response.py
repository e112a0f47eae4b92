"""Client n's best response to a price (spec cpl.md, "Players").

maximise U_n = P_n q - c_n q^2 - v_n * bound(q) over q in [q_min, q_max_n]. The first-order
condition P_n - 2 c_n q + v_n K_n / q^2 = 0 is the cubic

    f(q) = 2 c_n q^3 - P_n q^2 - v_n K_n = 0,

which has exactly one positive root (for v_n = 0: q = P_n / (2 c_n) when P_n > 0). U_n is
strictly concave in q, so clipping that root to the box gives the constrained optimum.

Each function takes a :class:`~mechanisms.cpl.game.Game` or a
:class:`~mechanisms.cpl.game.GameBatch` (prices (n,) or (B, n)): one code path for one game
and for many.
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketInputError, as_floats
from .game import Game, GameBatch, per_game

__all__ = ["best_response", "best_response_v0", "positive_root", "unconstrained_response"]


def unconstrained_response(game, prices) -> np.ndarray:
    """The positive root of 2 c q^3 - P q^2 - v K = 0 (0 when v = 0 and P <= 0).

    Newton on the scaled cubic x^3 - b x^2 - 1 (q = s x, s = cbrt(v K / 2c), b = P / (2 c s))
    from x_u = max(b, 0) + 1, a point where it is >= 0; it is increasing and convex on
    [root, x_u], so the iterates fall monotonically onto the root.
    """
    return positive_root(_prices(game, prices), game.c, game.v * game.K)


def _prices(game, prices) -> np.ndarray:
    """A :class:`Game`'s prices checked (finite reals, one per client); a
    :class:`GameBatch`'s taken as the (B, n) floats they are (the bulk path: NaN prices give
    NaN responses, which the caller reads as a failure)."""
    if isinstance(game, GameBatch):
        return np.asarray(prices, dtype=np.float64)
    if not isinstance(game, Game):
        raise MarketInputError("game", f"must be a cpl.Game, got {type(game).__name__}")
    P = as_floats("prices", prices)
    if P.shape != (game.n,):
        raise MarketInputError("prices", f"has shape {P.shape}, expected ({game.n},)")
    if not np.isfinite(P).all():
        raise MarketInputError("prices", "must be finite")
    return P


def positive_root(P, c, vK) -> np.ndarray:
    """The positive root of 2 c q^3 - P q^2 - v K = 0, elementwise over arrays of any shape
    (the clients of one game, or a batch of games: see :mod:`mechanisms.cpl.batch`)."""
    P, c, vK = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (P, c, vK)))
    with np.errstate(over="ignore"):  # a price near the float range's top: the root is inf
        q = np.maximum(P, 0.0) / (2.0 * c)  # v K = 0: the root is max(P, 0) / (2c) exactly
    live = vK > 0
    if live.any():
        # scaled cubic: q = s x with s = cbrt(v K / 2c) gives x^3 - b x^2 - 1 = 0, b = P/(2 c s),
        # well conditioned even when v K is tiny (subnormal v K underflows q^3 otherwise)
        s = np.cbrt(vK[live]) / np.cbrt(2.0 * c[live])  # no underflow to 0 for tiny v K
        with np.errstate(over="ignore"):
            b = P[live] / (2.0 * c[live] * s)
        huge = b > 1e100  # x = b + 1/b^2 + ...: the root is P/(2c) to double precision
        # b < -1e100: x^2 (x - b) = 1 gives x = 1/sqrt(x - b) = 1/sqrt(-b) to double
        # precision (x/|b| < 1e-150); Newton's 2 b x would overflow near -1e308 and stall at 1
        deep = b < -1e100
        x = np.maximum(b, 0.0) + 1.0  # g(x) >= 0 here; g increasing and convex on [root, x]
        x[huge] = 0.0
        x[deep] = 1.0 / np.sqrt(-b[deep])
        # the iterates still moving, compacted (idx: their places in x), stepped together;
        # one leaves once its step is within 4e-16 of it and is written back (the same
        # steps as stepping every moving root of the whole array, without gathering them
        # again each step)
        idx = np.flatnonzero(~(huge | deep))
        xl, bl = x[idx], b[idx]
        for _ in range(200):
            if not idx.size:
                break
            step = (xl**3 - bl * xl**2 - 1.0) / (3.0 * xl**2 - 2.0 * bl * xl)
            xl = xl - step
            moving = ~(np.abs(step) <= 4e-16 * xl)
            if not moving.all():
                x[idx[~moving]] = xl[~moving]
                idx, xl, bl = idx[moving], xl[moving], bl[moving]
        # roots still moving after 200 steps: some b near 3.97-3.98 (10 of 2,000,000 random
        # roots), whose iterates alternate between two floats 2 ulps apart, each step just
        # over the 4e-16 test; either float is the root to the cubic's rounding
        x[idx] = xl
        q[live] = np.where(huge, q[live], s * x)
    return q


def best_response(game, prices) -> np.ndarray:
    """q_n(P_n): the cubic's positive root clipped to [q_min, q_max_n], all clients (of all
    games) at once.

    >>> from mechanisms import cpl
    >>> g = cpl.Game(a=[0.5, 0.5], G=[1, 1], c=[5, 5], v=[0, 0], budget=1.0)
    >>> cpl.best_response(g, [2.0, 20.0]).tolist()   # v = 0: P/(2c), clipped at q_max = 1
    [0.2, 1.0]
    """
    return np.clip(unconstrained_response(game, prices), per_game(game.q_min), game.q_max)


def best_response_v0(game, prices) -> np.ndarray:
    """The authors' shortcut: the response as if v_n = 0, clip(P/(2c), q_min, q_max)."""
    P = _prices(game, prices)
    return np.clip(P / (2.0 * game.c), per_game(game.q_min), game.q_max)
