"""What the checker checks: iPFL mechanisms (a selection rule, a payment rule and a price rule,
the built-in ones or a user's own) and CPL pricing rules, each declaring the properties it
claims. The clearing itself lives in :func:`mechanisms.ipfl.clear`; a subject only names the
rules and what it claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from mechanisms import cpl, ipfl

__all__ = ["CplSolver", "IpflMechanism", "Settlement"]

Settlement = ipfl.Outcome  # what :meth:`IpflMechanism.settle` returns (kept name)


@dataclass(frozen=True, eq=False)
class IpflMechanism:
    """An iPFL-style mechanism: a selection rule, a payment rule and a price rule.

    rule : "box2" | "local" | "exact", or your own ``rule(market, D, thresholds, prices) ->
        adjacency`` ((m, m) bool, a_ij = i buys j).
    payments : "paper" | "vcg" | "shapley" | "cost-plus", or your own ``f(market, A, D)``
        returning (m, m) remittances r_ij (paid by i to j; p_i = sum_j r_ij - sum_j r_ji,
        Eq. 13) or (m,) payments p_i directly (need not balance).
    remittances : the same as ``payments`` (kept for rules returning remittances).
    prices : "paper" | "cost-plus", or your own ``prices(market, D) -> (m, m)`` that
        selection uses.
    declares : property key -> True (claimed) / False (known not to hold).
    """

    name: str
    rule: str | Callable = "local"
    remittances: Callable | None = None
    payments: str | Callable | None = None
    prices: str | Callable = "paper"
    declares: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self):  # resolve names now: a typo fails here, not mid-search
        ipfl.resolve("rule", self.rule)
        ipfl.resolve("payments", self.money)
        ipfl.resolve("prices", self.prices)

    @property
    def money(self):
        return self.payments if self.payments is not None else (self.remittances or "paper")

    def settle(self, market: ipfl.Market, D, *, allow_negative: bool = False,
               thresholds: str = "exact") -> ipfl.Outcome:
        """Clear one round with :func:`mechanisms.ipfl.clear`."""
        return ipfl.clear(market, D, self.rule, payments=self.money, prices=self.prices,
                          thresholds=thresholds, allow_negative_distances=allow_negative)


@dataclass(frozen=True, eq=False)
class CplSolver:
    """A CPL equilibrium solver by name (see :func:`mechanisms.cpl.solve`)."""

    name: str
    method: str = "bisection"
    options: Mapping = field(default_factory=dict)
    declares: Mapping[str, bool] = field(default_factory=dict)

    def solve(self, game: cpl.Game) -> cpl.Equilibrium:
        return cpl.solve(game, self.method, **dict(self.options))
