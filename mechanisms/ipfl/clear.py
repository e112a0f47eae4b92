"""Clearing one round of the iPFL market: prices -> thresholds -> graph -> money.

:func:`clear` is the public entry point. A mechanism is data: a selection rule, a payment rule
and a price rule, each a built-in name or a plain function (signatures in
:mod:`mechanisms.ipfl.rules`). :func:`clear` returns a frozen :class:`Outcome` that keeps its
inputs (market, distances, rule names and functions) next to the numbers, so any outcome can be
re-checked or cleared again with one input changed (:meth:`Outcome.reclear`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import MarketInputError
from . import money, rules, selection
from .market import Market
from .thresholds import MODES
from .thresholds import thresholds as solve_thresholds

__all__ = ["Outcome", "clear"]


def _ro(a):
    a = np.array(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Outcome:
    """One cleared round. Arrays are read-only; index = client id.

    market       the Market cleared (reports and truth)
    D            (m, m) the model distances used
    rule, payment_rule, price_rule : names of the selection, payment and price rules
        (built-in names, or "module:qualname" for rules of your own)
    adjacency    (m, m) bool, a_ij = client i buys client j's model
    thresholds   (m, m) Box 2 thresholds at ``prices``, 0 = never worth buying, inf = always
    prices       (m, m) the prices buyers faced (paper: P_ij = c_j + lam (N_j/N_i) d_ij)
    remittances  (m, m) r_ij paid by i to j, or None when the payment rule returned payments
    payments     (m,)   p_i, what client i pays (negative: receives)
    gains        (m,)   G_i(a_i) = g_i(sum_j a_ij N_j), true N and K, computed directly
    sharing_costs (m,)  c_i #{j : a_ji = 1}, true c
    utilities    (m,)   U_i = gains - sharing_costs - payments (Eq. 3)
    welfare      float  Eq. 5 (true values)
    exact_gap    float  rule "exact": proven bound on phi above the optimum (0: optimal)
    exact_stopped str   rule "exact": "" (searched to the end), "node-limit" or "time-limit"
    """

    rule: str
    threshold_mode: str
    method: str
    m: int
    adjacency: np.ndarray
    thresholds: np.ndarray
    prices: np.ndarray
    remittances: np.ndarray | None
    payments: np.ndarray
    gains: np.ndarray
    utilities: np.ndarray
    welfare: float
    gain: str
    truthful: bool
    exact_methods: dict = field(default_factory=dict)
    exact_gap: float = 0.0  # proven bound on phi above the optimum, summed over buyers
    exact_stopped: str = ""  # "node-limit" or "time-limit" when the exact search stopped early
    market: Market | None = None
    D: np.ndarray | None = None
    payment_rule: str = "paper"
    price_rule: str = "paper"
    sharing_costs: np.ndarray | None = None
    functions: dict = field(default_factory=dict, repr=False)  # the callables, for reclear
    options: dict = field(default_factory=dict)  # thresholds, exact_method, allow_negative

    @property
    def budget_surplus(self) -> float:
        """sum_i p_i: > 0 the operator keeps a surplus, < 0 it pays a deficit, 0 balanced."""
        return float(self.payments.sum())

    @property
    def budget_residual(self) -> float:
        """|sum_i p_i|: zero up to float rounding for a budget-balanced rule."""
        return float(abs(self.payments.sum()))

    def sellers_of(self, i: int) -> list[int]:
        """Clients whose models client i bought."""
        return np.flatnonzero(self.adjacency[i]).tolist()

    def buyers_of(self, j: int) -> list[int]:
        """Clients who bought client j's model."""
        return np.flatnonzero(self.adjacency[:, j]).tolist()

    def reclear(self, market: Market | None = None, D=None) -> Outcome:
        """Clear again with the same rules and options, optionally another market or D
        (e.g. one client's misreport)."""
        return clear(self.market if market is None else market, self.D if D is None else D,
                     **self.functions, **self.options)

    def to_frame(self):
        """A tidy per-client pandas DataFrame (one row per client).

        paid / earned: sums of remittances when the rule has them; for a rule that returns
        payments directly, what the client pays to / receives from the operator.
        """
        import pandas as pd

        R = self.remittances
        p = self.payments
        paid = R.sum(axis=1) if R is not None else np.clip(p, 0.0, None)
        earned = R.sum(axis=0) if R is not None else np.clip(-p, 0.0, None)
        return pd.DataFrame(
            {
                "client": np.arange(self.m),
                "n_bought": self.adjacency.sum(axis=1),
                "n_sold": self.adjacency.sum(axis=0),
                "paid": paid,
                "earned": earned,
                "payment": p,
                "gain": self.gains,
                "utility": self.utilities,
            }
        )


def _check_output(kind: str, value, shapes: tuple) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MarketInputError(kind, f"returned {type(value).__name__}, not numbers") from exc
    if arr.shape not in shapes:
        want = " or ".join(str(s) for s in shapes)
        raise MarketInputError(kind, f"returned shape {arr.shape}, expected {want}")
    return arr


def clear(
    market: Market,
    D,
    rule: str | Callable = "local",
    *,
    payments: str | Callable = "paper",
    prices: str | Callable = "paper",
    thresholds: str = "exact",
    exact_method: str = "auto",
    exact_node_limit: int = selection.NODE_LIMIT,
    exact_time_limit: float | None = None,
    allow_negative_distances: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Outcome:
    """Clear one round: price, select every buyer's sellers with ``rule``, settle the money.

    Parameters
    ----------
    market : the reported (and true) types.
    D : (m, m) model distances d_ij, zero diagonal, non-negative unless
        ``allow_negative_distances`` (individual rationality needs d >= 0).
    rule : selection: "box2" (the paper as printed), "local" (skip failures; satisfies
        Eq. 11), "exact" (a global minimiser of Eq. 10 per buyer), "share-all" (everyone
        takes every model on sale: the FedAvg-like baseline), or your own
        ``rule(market, D, thresholds, prices) -> adjacency``.
    payments : "paper" (Eqs. 12-13), "vcg", "shapley", "cost-plus", "none", or your own
        ``payments(market, A, D)`` returning (m, m) remittances or (m,) payments.
    prices : "paper" (Eq. 10), "cost-plus", or your own ``prices(market, D) -> (m, m)``;
        the thresholds and every selection rule use these prices.
    thresholds : "exact" roots (default) or "published" (the published code's numerics).
    exact_method : for rule "exact": "auto", "enumeration", "dp" or "branch-and-bound".
    exact_node_limit : branch-and-bound nodes per buyer; when it stops early the outcome's
        ``exact_gap`` (> 0) bounds how far the selection may be from the optimum.
    exact_time_limit : seconds for the exact selection of all buyers (default None: no
        limit); when it runs out the search stops and ``exact_gap`` bounds the shortfall
        (``exact_stopped`` says which limit stopped it). See :func:`selection.exact`.
    progress : ``progress(done, total)`` over the buyers the exact rule searches.

    Any rule may also be given as a "package.module:function" string.

    >>> mk = Market(N=[400, 500, 600], c=[0.5, 1.0, 0.0], K=[5e4, 3e4, 0.0], lam=2.0)
    >>> d = [[0, .1, .3], [.1, 0, .2], [.3, .2, 0]]
    >>> out = clear(mk, d, rule="local")
    >>> out.adjacency.astype(int)
    array([[0, 1, 1],
           [1, 0, 1],
           [0, 0, 0]])
    >>> bool(abs(out.payments.sum()) < 1e-12)
    True
    >>> vcg = clear(mk, d, rule="exact", payments="vcg")
    >>> vcg.payment_rule, vcg.remittances is None, round(vcg.budget_surplus, 4)
    ('vcg', True, 0.0508)
    """
    if not isinstance(market, Market):
        raise MarketInputError("market", f"must be an ipfl.Market, got {type(market).__name__}")
    rule_label, rule_fn = rules.resolve("rule", rule)
    pay_label, pay_fn = rules.resolve("payments", payments)
    price_label, price_fn = rules.resolve("prices", prices)
    if thresholds not in MODES:
        raise MarketInputError("thresholds", f"unknown mode {thresholds!r}; choose one of {MODES}")
    if exact_method not in selection.EXACT_METHODS:
        raise MarketInputError(
            "exact_method",
            f"unknown method {exact_method!r}; choose one of {selection.EXACT_METHODS}",
        )
    m = market.m
    D = market.check_distances(D, allow_negative=allow_negative_distances)
    P = _check_output("prices", price_fn(market, D), ((m, m),)).copy()
    if np.isnan(P).any():
        raise MarketInputError("prices", "returned NaN; prices must be numbers or +inf")
    np.fill_diagonal(P, np.inf)
    T = solve_thresholds(market, D, thresholds, prices=P)
    exact_methods: dict = {}
    exact_gap = 0.0
    exact_stopped = ""
    if rule_fn is not None:
        A = np.asarray(rule_fn(market, D, T, P))
        if A.shape != (m, m):
            raise MarketInputError("rule", f"{rule_label} returned shape {A.shape}, "
                                           f"expected ({m}, {m})")
        if A.dtype != bool:  # NaN would cast to True: only 0/1 entries pass
            vals = _check_output("rule", A, ((m, m),))
            bad = (vals != 0) & (vals != 1)
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise MarketInputError("rule", f"{rule_label} returned a_{i}{j} = "
                                               f"{vals[i, j]!r}; adjacency entries are 0/1")
            A = vals.astype(bool)
        if np.diagonal(A).any():
            raise MarketInputError("rule", f"{rule_label} returned a client buying its own "
                                           "model")
        method = "custom" if ":" in rule_label or rule_label not in rules.SELECTION_RULES \
            else rule_label
    elif rule_label == "box2":
        A = selection.box2(T, market.N)
        method = "greedy-stop"
    elif rule_label == "local":
        A = selection.local(T, market.N)
        method = "greedy-skip"
    else:
        A, per_buyer, gaps, exact_stopped = selection.exact(
            market, P, T, exact_method, node_limit=exact_node_limit,
            time_limit=exact_time_limit, progress=progress)
        exact_gap = float(gaps.sum())
        exact_methods = dict(Counter(per_buyer.tolist()))
        used = sorted(k for k in exact_methods if k != "none")
        method = "+".join(used) if used else "none"
    money_out = _check_output("payments", pay_fn(market, A, D), ((m, m), (m,)))
    if not np.isfinite(money_out).all():
        raise MarketInputError("payments", f"{pay_label} returned NaN or inf; money must be "
                                           "finite")
    if money_out.ndim == 2:
        R = money_out
        p = money.payments(R)
    else:
        R, p = None, money_out
    G = money.gains(market, A)
    C = money.sharing_costs(market, A)
    U = G - C - p
    return Outcome(
        rule=rule_label,
        threshold_mode=thresholds,
        method=method,
        m=m,
        adjacency=_ro(A),
        thresholds=_ro(T),
        prices=_ro(P),
        remittances=None if R is None else _ro(R),
        payments=_ro(p),
        gains=_ro(G),
        utilities=_ro(U),
        welfare=float(G.sum() - C.sum()),
        gain=market.gain.name,
        truthful=market.truthful,
        exact_methods=exact_methods,
        exact_gap=exact_gap,
        exact_stopped=exact_stopped,
        market=market,
        D=_ro(D),
        payment_rule=pay_label,
        price_rule=price_label,
        sharing_costs=_ro(C),
        functions={"rule": rule, "payments": payments, "prices": prices},
        options={"thresholds": thresholds, "exact_method": exact_method,
                 "exact_node_limit": exact_node_limit, "exact_time_limit": exact_time_limit,
                 "allow_negative_distances": allow_negative_distances},
    )
