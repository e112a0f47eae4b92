"""Shared Hypothesis strategies for market instances.

Constraints are built in (bounds drawn in sequence) rather than filtered, so every draw is a
valid market. Used by the test suite and by the property checker.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from mechanisms import ipfl

__all__ = ["distance_matrices", "ipfl_instances", "ipfl_markets"]

_finite = {"allow_nan": False, "allow_infinity": False}


@st.composite
def distance_matrices(draw, m: int, *, low: float = 0.0, high: float = 2.0, symmetric=True):
    """(m, m) distances with zero diagonal, entries in [low, high]."""
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
):
    """A truthful iPFL market. With ``pure_roles``, some clients are pure buyers (c = inf)
    or pure sellers (K = 0)."""
    if m is None:
        m = draw(st.integers(min_m, max_m))
    if integer_N:
        N = draw(st.lists(st.integers(20, 2000), min_size=m, max_size=m))
    else:
        N = draw(st.lists(st.floats(20.0, 2000.0, **_finite), min_size=m, max_size=m))
    K = draw(st.lists(st.floats(1e3, 1e6, **_finite), min_size=m, max_size=m))
    c = draw(st.lists(st.floats(0.0, 5.0, **_finite), min_size=m, max_size=m))
    if pure_roles:
        roles = draw(st.lists(st.sampled_from(["trader", "trader", "buyer", "seller"]),
                              min_size=m, max_size=m))
        c = [np.inf if r == "buyer" else v for r, v in zip(roles, c, strict=True)]
        K = [0.0 if r == "seller" else v for r, v in zip(roles, K, strict=True)]
    lam = draw(st.floats(0.0, 5.0, **_finite))
    return ipfl.Market(N=N, c=c, K=K, lam=lam, gain=gain)


@st.composite
def ipfl_instances(draw, *, negative_distances: bool = False, **market_kwargs):
    """(market, D): a market and a distance matrix for it."""
    market = draw(ipfl_markets(**market_kwargs))
    low = -1.0 if negative_distances else 0.0
    D = draw(distance_matrices(market.m, low=low, high=2.0))
    return market, D
