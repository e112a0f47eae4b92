"""Clearing one round of the iPFL market: thresholds -> graph -> money.

:func:`clear` is the public entry point; it returns a frozen :class:`Outcome` that records how it
was computed (rule, threshold mode, exact methods, sizes) next to the numbers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import MarketInputError
from . import money, selection
from .market import Market
from .thresholds import MODES
from .thresholds import thresholds as solve_thresholds

__all__ = ["Outcome", "clear"]


def _ro(a):
    a = np.asarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Outcome:
    """One cleared round. Arrays are read-only; index = client id.

    adjacency    (m, m) bool, a_ij = client i buys client j's model
    thresholds   (m, m) Box 2 thresholds, 0 = never worth buying, inf = always
    prices       (m, m) P_ij = c_j + lam (N_j/N_i) d_ij (reported values)
    remittances  (m, m) r_ij of Eq. 12
    payments     (m,)   p_i of Eq. 13, sums to 0
    gains        (m,)   G_i(a_i) with the true data amounts
    utilities    (m,)   U_i of Eq. 3 (true N and c)
    welfare      float  Eq. 5
    """

    rule: str
    threshold_mode: str
    method: str
    m: int
    adjacency: np.ndarray
    thresholds: np.ndarray
    prices: np.ndarray
    remittances: np.ndarray
    payments: np.ndarray
    gains: np.ndarray
    utilities: np.ndarray
    welfare: float
    gain: str
    truthful: bool
    exact_methods: dict = field(default_factory=dict)

    @property
    def budget_residual(self) -> float:
        """|sum_i p_i|: zero up to float rounding (budget balance)."""
        return float(abs(self.payments.sum()))

    def sellers_of(self, i: int) -> list[int]:
        """Clients whose models client i bought."""
        return np.flatnonzero(self.adjacency[i]).tolist()

    def buyers_of(self, j: int) -> list[int]:
        """Clients who bought client j's model."""
        return np.flatnonzero(self.adjacency[:, j]).tolist()

    def to_frame(self):
        """A tidy per-client pandas DataFrame (one row per client)."""
        import pandas as pd

        R = self.remittances
        return pd.DataFrame(
            {
                "client": np.arange(self.m),
                "n_bought": self.adjacency.sum(axis=1),
                "n_sold": self.adjacency.sum(axis=0),
                "paid": R.sum(axis=1),
                "earned": R.sum(axis=0),
                "payment": self.payments,
                "gain": self.gains,
                "utility": self.utilities,
            }
        )


def clear(
    market: Market,
    D,
    rule: str = "local",
    *,
    thresholds: str = "exact",
    exact_method: str = "auto",
    allow_negative_distances: bool = False,
) -> Outcome:
    """Clear one round: select every buyer's sellers with ``rule``, then settle the money.

    Parameters
    ----------
    market : the reported (and true) types.
    D : (m, m) model distances d_ij, zero diagonal, non-negative unless
        ``allow_negative_distances`` (individual rationality needs d >= 0).
    rule : "box2" (the paper as printed), "local" (skip failures; satisfies Eq. 11) or
        "exact" (a global minimiser of Eq. 10 per buyer).
    thresholds : "exact" roots (default) or "published" (the published code's numerics).
    exact_method : for rule "exact": "auto", "enumeration", "dp" or "branch-and-bound".

    >>> mk = Market(N=[400, 500, 600], c=[0.5, 1.0, 0.0], K=[5e4, 3e4, 0.0], lam=2.0)
    >>> d = [[0, .1, .3], [.1, 0, .2], [.3, .2, 0]]
    >>> out = clear(mk, d, rule="local")
    >>> out.adjacency.astype(int)
    array([[0, 1, 1],
           [1, 0, 1],
           [0, 0, 0]])
    >>> bool(abs(out.payments.sum()) < 1e-12)
    True
    """
    if not isinstance(market, Market):
        raise MarketInputError("market", f"must be an ipfl.Market, got {type(market).__name__}")
    if rule not in selection.RULES:
        raise MarketInputError("rule", f"unknown rule {rule!r}; choose one of {selection.RULES}")
    if thresholds not in MODES:
        raise MarketInputError("thresholds", f"unknown mode {thresholds!r}; choose one of {MODES}")
    if exact_method not in selection.EXACT_METHODS:
        raise MarketInputError(
            "exact_method",
            f"unknown method {exact_method!r}; choose one of {selection.EXACT_METHODS}",
        )
    D = market.check_distances(D, allow_negative=allow_negative_distances)
    T = solve_thresholds(market, D, thresholds)
    P = market.prices(D)
    exact_methods: dict = {}
    if rule == "box2":
        A = selection.box2(T, market.N)
        method = "greedy-stop"
    elif rule == "local":
        A = selection.local(T, market.N)
        method = "greedy-skip"
    else:
        if exact_method == "dp" and not np.all(market.N == np.round(market.N)):
            raise MarketInputError("exact_method", "'dp' needs integer data amounts N")
        A, per_buyer = selection.exact(market, P, T, exact_method)
        exact_methods = dict(Counter(per_buyer.tolist()))
        used = sorted(k for k in exact_methods if k != "none")
        method = "+".join(used) if used else "none"
    R = money.remittances(market, A, D)
    p = money.payments(R)
    U = money.utilities(market, A, p)
    G = U + p + money._sharing_cost(market.true_c, A.sum(axis=0))
    return Outcome(
        rule=rule,
        threshold_mode=thresholds,
        method=method,
        m=market.m,
        adjacency=_ro(A),
        thresholds=_ro(T),
        prices=_ro(P),
        remittances=_ro(R),
        payments=_ro(p),
        gains=_ro(G),
        utilities=_ro(U),
        welfare=float(U.sum()),
        gain=market.gain.name,
        truthful=market.truthful,
        exact_methods=exact_methods,
    )
