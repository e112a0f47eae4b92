"""What the checker checks: iPFL mechanisms (a selection rule plus a payment rule, the built-in
ones or a user's own) and CPL pricing solvers, each declaring the properties it claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from mechanisms import cpl, ipfl
from mechanisms.errors import MarketInputError

__all__ = ["CplSolver", "IpflMechanism", "Settlement"]


@dataclass(frozen=True, eq=False)
class Settlement:
    """One cleared round of any iPFL-style mechanism."""

    adjacency: np.ndarray
    payments: np.ndarray
    utilities: np.ndarray
    prices: np.ndarray
    thresholds: np.ndarray
    remittances: np.ndarray | None = None  # None when the rule returned payments directly


@dataclass(frozen=True, eq=False)
class IpflMechanism:
    """An iPFL-style mechanism: a selection rule and a payment rule.

    rule : "box2" | "local" | "exact", or your own function
        ``rule(market, D, thresholds, prices) -> adjacency`` ((m, m) bool, a_ij = i buys j).
    remittances : optional ``f(market, adjacency, D) -> R`` ((m, m), r_ij paid by i to j);
        payments are then p_i = sum_j r_ij - sum_j r_ji (Eq. 13). Default: Eq. 12.
    payments : optional ``f(market, adjacency, D) -> p`` ((m,), what each client pays);
        overrides ``remittances`` (use it to prototype rules that need not balance).
    declares : property key -> True (claimed) / False (known not to hold).
    """

    name: str
    rule: str | Callable = "local"
    remittances: Callable | None = None
    payments: Callable | None = None
    declares: Mapping[str, bool] = field(default_factory=dict)

    def settle(self, market: ipfl.Market, D, *, allow_negative: bool = False,
               thresholds: str = "exact") -> Settlement:
        """Clear one round; ``thresholds`` as in :func:`mechanisms.ipfl.clear`."""
        custom_money = self.remittances is not None or self.payments is not None
        if isinstance(self.rule, str) and not custom_money:
            out = ipfl.clear(market, D, rule=self.rule, thresholds=thresholds,
                             allow_negative_distances=allow_negative)
            return Settlement(out.adjacency, out.payments, out.utilities, out.prices,
                              out.thresholds, out.remittances)
        D = market.check_distances(D, allow_negative=allow_negative)
        T = ipfl.thresholds(market, D, thresholds)
        P = market.prices(D)
        if isinstance(self.rule, str):
            A = ipfl.clear(market, D, rule=self.rule, thresholds=thresholds,
                           allow_negative_distances=allow_negative).adjacency
        else:
            A = np.asarray(self.rule(market, D, T, P), dtype=bool)
            if A.shape != (market.m, market.m):
                raise MarketInputError("rule", f"returned shape {A.shape}, expected "
                                               f"({market.m}, {market.m})")
            if np.diagonal(A).any():
                raise MarketInputError("rule", "returned a client buying its own model")
        R = None
        if self.payments is not None:
            p = np.asarray(self.payments(market, A, D), dtype=float)
            if p.shape != (market.m,):
                raise MarketInputError("payments", f"returned shape {p.shape}, expected "
                                                   f"({market.m},)")
        else:
            f = self.remittances or ipfl.remittances
            R = np.asarray(f(market, A, D), dtype=float)
            p = ipfl.payments(R)
        return Settlement(A, p, ipfl.utilities(market, A, p), P, T, R)


@dataclass(frozen=True, eq=False)
class CplSolver:
    """A CPL equilibrium solver by name (see :func:`mechanisms.cpl.solve`)."""

    name: str
    method: str = "bisection"
    options: Mapping = field(default_factory=dict)
    declares: Mapping[str, bool] = field(default_factory=dict)

    def solve(self, game: cpl.Game) -> cpl.Equilibrium:
        return cpl.solve(game, self.method, **dict(self.options))
