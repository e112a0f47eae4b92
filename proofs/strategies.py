"""Shared Hypothesis strategies for market instances.

Constraints are built in (bounds drawn in sequence) rather than filtered, so every draw is a
valid market. Used by the test suite and by the property checker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from mechanisms import cpl, ipfl

from .names import fresh

__all__ = [
    "CPL_FLOOR_RTOL",
    "MAX_CLIENTS",
    "CplCase",
    "cpl_games",
    "distance_matrices",
    "edge_budgets",
    "ipfl_instances",
    "ipfl_markets",
    "misreports",
    "permutations",
]

_finite = {"allow_nan": False, "allow_infinity": False}

MAX_CLIENTS = 12
"""The largest market the checker draws by default, for every iPFL and CPL property (the
smallest: 2 iPFL clients, 1 CPL client); ``check(..., max_clients=k)`` draws up to k. A rule
that misbehaves only in larger markets is caught only when they are drawn (issue 20, part 3).
"""

CPL_FLOOR_RTOL = 1e-12
"""A CPL response q_n <= q_min (1 + CPL_FLOOR_RTOL) counts as on the q_min floor."""


@st.composite
def distance_matrices(draw, m: int, *, low: float = 0.0, high: float = 2.0, symmetric=True):
    """(m, m) distances with zero diagonal, entries in [low, high] (``low < 0`` draws
    negative distances on purpose; ``symmetric=False`` an asymmetric matrix)."""
    vals = draw(
        st.lists(st.floats(low, high, **_finite), min_size=m * m, max_size=m * m)
    )
    D = np.array(vals).reshape(m, m)
    if symmetric:
        D = np.triu(D, 1)
        D = D + D.T
    np.fill_diagonal(D, 0.0)
    return D


@st.composite
def ipfl_markets(
    draw,
    m: int | None = None,
    *,
    min_m: int = 2,
    max_m: int = 7,
    integer_N: bool = True,
    pure_roles: bool = True,
    gain="sqrt",
    distinct: bool = False,
):
    """A truthful iPFL market (:class:`mechanisms.ipfl.Market`).

    m : number of clients (default: drawn in [min_m, max_m]).
    integer_N : N_i integers in [20, 2000] (else floats in the same range).
    pure_roles : some clients are pure buyers (c = inf) or pure sellers (K = 0).
    gain : the gain function (default the paper's sqrt gain).
    distinct : no two clients share N_i (so no two clients are identical and thresholds
        cannot tie between them; the permutation property's precondition, built in).

    K_i in [1e3, 1e6], c_i in [0, 5], lam in [0, 5].
    """
    n_value = st.integers(20, 2000) if integer_N else st.floats(20.0, 2000.0, **_finite)
    role = st.sampled_from(["trader", "trader", "buyer", "seller"]) if pure_roles \
        else st.just("trader")
    record = st.tuples(n_value, st.floats(0.0, 5.0, **_finite),
                       st.floats(1e3, 1e6, **_finite), role)
    # one record per client: shrinking deletes whole clients (minimal counterexamples)
    lo, hi = (m, m) if m is not None else (min_m, max_m)
    clients = draw(st.lists(record, min_size=lo, max_size=hi,
                            unique_by=(lambda r: r[0]) if distinct else None))
    N = [r[0] for r in clients]
    c = [np.inf if r[3] == "buyer" else r[1] for r in clients]
    K = [0.0 if r[3] == "seller" else r[2] for r in clients]
    lam = draw(st.floats(0.0, 5.0, **_finite))
    return ipfl.Market(N=N, c=c, K=K, lam=lam, gain=fresh(gain))  # proofs.names


@st.composite
def ipfl_instances(draw, *, negative_distances: bool = False, positive_distances=False,
                   symmetric: bool | None = True, **market_kwargs):
    """(market, D): a market and a distance matrix for it. ``positive_distances`` keeps every
    off-diagonal d_ij >= 1e-3; ``symmetric=None`` lets Hypothesis choose."""
    market = draw(ipfl_markets(**market_kwargs))
    low = -1.0 if negative_distances else (1e-3 if positive_distances else 0.0)
    sym = draw(st.booleans()) if symmetric is None else symmetric
    D = draw(distance_matrices(market.m, low=low, high=2.0, symmetric=sym))
    return market, D


@st.composite
def misreports(draw, m: int, factors=(0.1, 0.5, 2.0, 5.0, 10.0), *, over: bool = False):
    """(client, factor): which client lies and by what factor; ``over`` keeps factor > 1."""
    i = draw(st.integers(0, m - 1))
    if over:
        factor = draw(st.one_of(st.sampled_from([f for f in factors if f > 1] or [2.0]),
                                st.floats(1.0 + 1e-6, 20.0, **_finite)))
    else:
        factor = draw(st.one_of(st.sampled_from(list(factors)),
                                st.floats(0.05, 20.0, **_finite)))
    return i, float(factor)


def permutations(m: int):
    """A permutation of range(m) as a numpy array."""
    return st.permutations(list(range(m))).map(np.array)


@st.composite
def cpl_games(draw, n: int | None = None, *, min_n: int = 1, max_n: int = 12,
              large_v: bool = False, budget: str = "binding", positive_budget: bool = False,
              baselines_off_floor: bool = False, edge: bool = False):
    """A CPL game (:class:`mechanisms.cpl.Game`).

    n : number of clients (default: drawn in [min_n, max_n]).
    large_v : some v_n are large enough to turn prices negative.
    budget : "binding" (strictly between the q_min and the q_max spend: the budget binds;
        slack only in the degenerate box q_max = q_min), "slack" (above the q_max spend) or
        "any" (either, half and half).
    positive_budget : B > 0 (with "binding": between max(0, q_min spend) and the q_max spend;
        when valuations make the q_max spend negative they are scaled down until it is
        positive, so the precondition is built in rather than filtered).
    baselines_off_floor : q_max_n > q_min (1 + CPL_FLOOR_RTOL) (a box [q_min, q_min] holds its
        client on the floor at any price), and B above the spend at which the uniform and the
        weighted posted price lift every client above that level
        (:func:`mechanisms.cpl.posted_floor_spend`, the larger of the two), so both baselines
        leave no client on the floor: the
        beats-baselines precondition, built in. With "binding" B is drawn between that spend
        and the q_max spend; where that window is empty (a posted price lifting the last client
        off the floor already saturates others at q_max and outspends the q_max spend), no
        budget is both binding and off the floor, and B is drawn above both (a slack budget).
    edge : half the binding budgets a hair above the floor spend or below the q_max spend
        (:func:`edge_budgets`: the root at a kink of the spend).
    """
    from mechanisms import cpl

    if budget not in ("binding", "slack", "any"):
        raise ValueError(f"budget: unknown {budget!r}; allowed: 'binding', 'slack', 'any'")
    if n is None:
        n = draw(st.integers(min_n, max_n))
    a = draw(st.lists(st.floats(0.05, 1.0, **_finite), min_size=n, max_size=n))
    G = draw(st.lists(st.floats(0.5, 20.0, **_finite), min_size=n, max_size=n))
    c = draw(st.lists(st.floats(0.1, 10.0, **_finite), min_size=n, max_size=n))
    v_hi = 1e6 if large_v else 100.0
    v = draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, v_hi, **_finite)),
                      min_size=n, max_size=n))
    q_min = draw(st.sampled_from([0.01, 0.05, 0.1]))
    per_client = draw(st.booleans())
    off = q_min * (1 + CPL_FLOOR_RTOL)  # above it: off the floor
    q_box = st.floats(off, 1.0, exclude_min=True, **_finite) if baselines_off_floor \
        else st.floats(q_min, 1.0, **_finite)
    if per_client:
        q_max = draw(st.lists(q_box, min_size=n, max_size=n))
    else:
        q_max = draw(q_box)
    game = cpl.Game(a=a, G=G, c=c, v=v, budget=0.0, alpha=draw(st.floats(0.1, 3.0)),
                    R=draw(st.integers(10, 500)), q_min=q_min, q_max=q_max)
    if positive_budget:
        qm = np.asarray(game.q_max)
        cost = float(np.sum(2.0 * game.c * qm**2))
        value = float(np.sum(game.v * game.K / qm))
        if value >= 0.5 * cost:  # scale the valuations so that the q_max spend is > 0
            game = game.replace(v=np.asarray(game.v) * (0.5 * cost / value))
    lo = cpl.spend(game, np.full(n, q_min))
    hi = cpl.spend(game, game.q_max)
    if positive_budget:
        lo = max(lo, 0.0)
    if baselines_off_floor:
        batch = cpl.GameBatch.from_games([game])
        lo = max(lo, *(float(cpl.posted_floor_spend(batch, shape, off)[0])
                       for shape in (cpl.POSTED_SHAPES[name](game)
                                     for name in ("uniform", "weighted"))))
    frac = draw(st.floats(0.01, 0.99))
    binding = budget == "binding" or (budget == "any" and draw(st.booleans()))
    inside = binding and hi - lo > 1e-9 * max(1.0, abs(hi))
    if inside:
        B = lo + frac * (hi - lo)
    else:
        top = max(hi, lo)  # hi, unless baselines_off_floor found no binding budget
        B = top + frac * (abs(top) + 1.0)
    if edge and inside and draw(st.booleans()):
        B = float(edge_budgets(B, True, draw(st.floats(0.0, 1.0, exclude_max=True)), lo, hi))
    return game.replace(budget=B)


def edge_budgets(budget, chosen, u, lo, hi) -> np.ndarray:
    """The edge stratum of the CPL draws (``CplSampler(edge=True)``, half the binding games,
    ``chosen``): a budget a hair above the floor spend ``lo`` or below the q_max spend
    ``hi``, B = lo + (hi - lo) 10^-(1 + 15 u') for u < 1/2, B = hi - (hi - lo) 10^-(1 + 15 u')
    for the rest, u' = 2 u mod 1 (relative offsets 1e-1 to 1e-16). The root of the spend then
    sits where a client leaves its floor or reaches its cap (a kink of S(mu)): regula falsi's
    steps alone can stall there, and the root finder's bisection steps are what bounds its
    work (``cpl_work_bound``). A budget not strictly inside (lo, hi) after rounding keeps the
    plain draw's."""
    u = np.asarray(u, dtype=float)
    gap = (hi - lo) * 10.0 ** (-1.0 - 15.0 * ((2.0 * u) % 1.0))
    edge = np.where(u < 0.5, lo + gap, hi - gap)
    return np.where(chosen & (edge > lo) & (edge < hi), edge, budget)


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
