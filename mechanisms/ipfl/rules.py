"""A mechanism is data: a selection rule, a payment rule and (optionally) a price rule, each a
plain function. Names pick the built-in ones; any callable with the signature below (or a
``"package.module:function"`` string naming one) is a rule of your own.

==========  ==========================================  =====================================
kind        signature                                   returns
==========  ==========================================  =====================================
selection   ``rule(market, D, thresholds, prices)``     (m, m) bool, a_ij = i buys j's model
payments    ``payments(market, A, D)``                  (m, m) remittances r_ij paid by buyer i
                                                        to seller j (then p_i = sum_j r_ij -
                                                        sum_j r_ji, Eq. 13, balanced by
                                                        construction), or (m,) payments p_i
                                                        straight (what i pays the operator;
                                                        need not balance)
prices      ``prices(market, D)``                       (m, m) price P_ij of j's model for buyer
                                                        i, which selection (the thresholds and
                                                        Eq. 10) uses; the diagonal is ignored
==========  ==========================================  =====================================

Every argument holds REPORTED types (``market.N``, ``market.c``, ``market.K``); realised
utilities are computed afterwards from the true ones.

Reference payment rules ship beside the paper's, each declaring what it claims (``.claims``:
property key -> True claimed / False known not to hold) for the selection rule it is meant for
(``.pairs_with``). They are the yardsticks a new rule is compared against:

* ``"paper"``: Eq. 12 remittances r_ij = marginal gain - lam (N_j/N_i) d_ij.
* ``"vcg"``: Vickrey-Clarke-Groves with the Clarke pivot on the exact selection: truthful in the
  costs and gain scales, individually rational, but the operator may run a deficit.
* ``"shapley"``: each buyer's gain split among the sellers it bought from by their Shapley
  values (net of the model-difference term, as in Eq. 12).
* ``"cost-plus"``: a posted price (1 + markup) c_j, used by selection (price rule
  ``"cost-plus"``) and paid to the seller.
* ``"none"`` with selection ``"share-all"``: the FedAvg-like baseline, no money at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np
from scipy.special import comb

from ..errors import MarketInputError
from ..lookup import load_callable, rule_name
from . import selection
from .market import Market
from .money import remittances as paper_remittances

__all__ = [
    "COST_PLUS_MARKUP",
    "PAYMENT_RULES",
    "PRICE_RULES",
    "SELECTION_RULES",
    "SHAPLEY_MAX_SELLERS",
    "cost_plus",
    "cost_plus_prices",
    "cost_plus_remittances",
    "load_callable",
    "no_payments",
    "paper_prices",
    "paper_remittances",
    "resolve",
    "rule_name",
    "shapley_remittances",
    "share_all",
    "vcg_payments",
]

SELECTION_RULES = (*selection.RULES, "share-all")
COST_PLUS_MARKUP = 0.25
SHAPLEY_MAX_SELLERS = 20  # 2^20 coalitions per buyer; beyond that exact Shapley is too costly


def _declare(pairs_with: str, **claims: bool):
    def mark(fn):
        fn.claims = MappingProxyType(dict(claims))
        fn.pairs_with = pairs_with
        return fn

    return mark


# ---------------------------------------------------------------------------- prices


def paper_prices(market: Market, D) -> np.ndarray:
    """Eq. 10 prices P_ij = c_j + lam (N_j/N_i) d_ij (see :meth:`Market.prices`)."""
    return market.prices(D)


def cost_plus_prices(market: Market, D, markup: float = COST_PLUS_MARKUP) -> np.ndarray:
    """Posted price (1 + markup) c_j, plus the model-difference term lam (N_j/N_i) d_ij that
    the buyer bears as in Eq. 10 (not paid to anyone)."""
    D = np.asarray(D, dtype=np.float64)
    posted = (1.0 + markup) * market.c
    P = posted[None, :] + market.lam * (market.N[None, :] / market.N[:, None]) * D
    np.fill_diagonal(P, np.inf)
    return P


# ---------------------------------------------------------------------------- payments


def cost_plus_remittances(market: Market, A, D, markup: float = COST_PLUS_MARKUP):
    """Each buyer pays each seller it bought from the seller's posted price (1 + markup) c_j.

    Pair it with the price rule :func:`cost_plus_prices` so that buyers choose at the price
    they pay. Budget balanced (remittances); overstating c raises the seller's own price.
    """
    A = np.asarray(A, dtype=bool)
    posted = (1.0 + markup) * market.c
    return np.where(A, posted[None, :], 0.0)


_declare("local", budget_balance=True, no_deficit=True, individual_rationality=True,
         thm2=False)(cost_plus_remittances)  # thm2: overstating c raises one's own price


def cost_plus(markup: float):
    """(prices, payments) of a cost-plus posted price with your own markup >= 0.

    >>> prices, pay = cost_plus(0.5)
    >>> mk = Market(N=[100, 100], c=[1.0, 2.0], K=[1e4, 1e4])
    >>> pay(mk, [[False, True], [True, False]], [[0, 0], [0, 0]]).tolist()
    [[0.0, 3.0], [1.5, 0.0]]
    """
    markup = float(markup)
    if not np.isfinite(markup) or markup < 0:
        raise MarketInputError("markup", f"is {markup!r}; must be finite and >= 0")

    def prices(market, D):
        return cost_plus_prices(market, D, markup)

    def payments(market, A, D):
        return cost_plus_remittances(market, A, D, markup)

    prices.__name__ = payments.__name__ = f"cost_plus_{markup:g}"
    return prices, payments


# the paper's rule: balanced and IR (Thm 1), no gain from overstating c (Thm 2); a buyer
# gains by understating its gain scale K (it pays its reported marginal gains) and a seller
# by overstating its data N (buyers value its model by the reported N)
_declare("local", budget_balance=True, no_deficit=True, individual_rationality=True,
         thm2=True, truthful_K_under=False, truthful_N_over=False)(paper_remittances)


def _reported_welfare(market: Market, P: np.ndarray, A: np.ndarray) -> float:
    """sum_i -phi_i(a_i): reported gains minus prices (Eq. 10 summed over buyers)."""
    return float(-selection.phi(market, P, A).sum())


@_declare("exact", individual_rationality=True, ir_negative_distances=True,
          budget_balance=False, no_deficit=False, thm2=True, truthful_c_under=True,
          truthful_K_over=True, truthful_K_under=True, truthful_N_over=False)
def vcg_payments(market: Market, A, D) -> np.ndarray:
    """Vickrey-Clarke-Groves payments with the Clarke pivot, for the objective the exact
    selection maximises: W(A) = sum_i [g_i(a_i) - sum_j a_ij P_ij] = -sum_i phi_i (Eq. 10).

    p_i = W*_{-i} - [W(A) - v_i(A)], with v_i(A) = g_i(a_i) - c_i #{j : a_ji = 1} client i's own
    (reported) value and W*_{-i} the best objective without i (nobody buys from i, i buys
    nothing), solved exactly. Paired with ``rule="exact"``: truthful in c and K (they enter
    only i's own value), individually rational (U_i = W(A) - W*_{-i} >= 0), but the payments
    can sum to less than zero (the operator pays a deficit). Costs one exact selection plus,
    for each client, re-solving the buyers that bought from it.
    """
    A = np.asarray(A, dtype=bool)
    D = np.asarray(D, dtype=np.float64)
    P = market.prices(D)
    T = market.gain.thresholds(P, market.N[None, :], market.K[:, None], market.N[:, None])
    T[market.K == 0, :] = 0.0
    np.fill_diagonal(T, 0.0)
    W = _reported_welfare(market, P, A)
    own_gain = market.gain.value(A @ market.N, market.K, market.N)
    sold = A.sum(axis=0)
    own = own_gain - np.multiply(market.c, sold, out=np.zeros(market.m), where=sold > 0)
    # W*_{-i}: each buyer's problem is separate, so only the buyers whose optimum used i
    # need solving again without i; the others keep their optimal rows
    best = selection.exact(market, P, T).adjacency
    row_value = -selection.phi(market, P, best)
    p = np.empty(market.m)
    for i in range(market.m):
        redo = best[:, i].copy()
        redo[i] = False
        value = row_value.sum() - row_value[i] - row_value[redo].sum()
        if redo.any():
            Ti, Pi = T.copy(), P.copy()
            Ti[~redo, :] = 0.0
            Ti[:, i] = 0.0
            Pi[:, i] = np.inf
            A_i = selection.exact(market, Pi, Ti).adjacency
            value += float(-selection.phi(market, Pi, A_i)[redo].sum())
        p[i] = value - (W - own[i])
    return p


@_declare("local", budget_balance=True, no_deficit=True, individual_rationality=True,
          truthful_K_under=False, truthful_N_over=False)
def shapley_remittances(market: Market, A, D) -> np.ndarray:
    """Each buyer i splits its gain g_i(n) among the sellers S it bought from by their Shapley
    values in the game v(T) = g_i(sum_{j in T} N_j), net of the model-difference term:
    r_ij = Sh_j - lam (N_j/N_i) d_ij.

    The Shapley values add up to g_i(n), so a buyer keeps only the model-difference terms; for
    a concave gain each Sh_j is at least j's last marginal, so with a selection satisfying
    Eq. 11 every seller earns at least its price (individual rationality). Exact over the
    2^|S| coalitions (|S| <= 20).
    """
    A = np.asarray(A, dtype=bool)
    D = np.asarray(D, dtype=np.float64)
    N, K = market.N, market.K
    R = np.zeros(A.shape)
    for i in np.flatnonzero(A.any(axis=1)):
        S = np.flatnonzero(A[i])
        k = S.size
        if k > SHAPLEY_MAX_SELLERS:
            raise MarketInputError("payments", f"the Shapley split enumerates 2^{k} coalitions "
                                               f"for buyer {i}; at most {SHAPLEY_MAX_SELLERS} "
                                               "sellers per buyer")
        size = N[S]
        masks = ((np.arange(1 << k)[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)
        card = masks.sum(axis=1)
        n_T = masks @ size
        g_T = market.gain.value(n_T, K[i], N[i])
        marginal = market.gain.value(n_T[:, None] + size[None, :], K[i], N[i]) - g_T[:, None]
        # weight of coalition T (j not in T): |T|! (k - |T| - 1)! / k! = 1 / (k C(k-1, |T|))
        with np.errstate(divide="ignore"):
            w = 1.0 / (k * comb(k - 1, card))
        share = np.where(~masks, w[:, None] * marginal, 0.0).sum(axis=0)
        R[i, S] = share - market.lam * (size / N[i]) * D[i, S]
    return R


def share_all(market: Market, D, thresholds, prices) -> np.ndarray:
    """Selection of the FedAvg-like baseline: every client with a gain (K_i > 0) takes every
    model on sale (finite cost), whatever the price. Pair it with ``payments="none"``."""
    A = (market.K[:, None] > 0) & np.isfinite(market.c)[None, :]
    np.fill_diagonal(A, False)
    return A


@_declare("share-all", budget_balance=True, no_deficit=True, individual_rationality=False,
          thm2=True, truthful_c_under=True, truthful_K_over=True, truthful_K_under=True,
          truthful_N_over=True, truthful_N_under=True)
def no_payments(market: Market, A, D) -> np.ndarray:
    """Nobody pays anybody. With ``rule="share-all"`` no report changes anything but whether
    a client sells (a finite cost) or buys (K > 0), so no misreport pays; but a seller bears
    its sharing cost for nothing (not individually rational)."""
    return np.zeros(market.m)


# ---------------------------------------------------------------------------- resolution

PAYMENT_RULES: Mapping[str, Callable] = MappingProxyType({
    "paper": paper_remittances,
    "vcg": vcg_payments,
    "shapley": shapley_remittances,
    "cost-plus": cost_plus_remittances,
    "none": no_payments,
})
PRICE_RULES: Mapping[str, Callable] = MappingProxyType({
    "paper": paper_prices,
    "cost-plus": cost_plus_prices,
})
_KINDS = {"rule": SELECTION_RULES, "payments": PAYMENT_RULES, "prices": PRICE_RULES}
_SELECTION_FUNCTIONS = {"share-all": share_all}  # the others run inside ipfl.clear


def resolve(kind: str, spec) -> tuple[str, Callable | None]:
    """(name, function) of a rule: ``kind`` is "rule" (selection), "payments" or "prices";
    ``spec`` a built-in name, ``"module:function"`` or a callable. Built-in selection rules
    return function None (:func:`mechanisms.ipfl.clear` runs them itself)."""
    table = _KINDS[kind]
    if callable(spec):
        return rule_name(spec), spec
    if isinstance(spec, str):
        if ":" in spec:
            return spec, load_callable(spec, kind)
        if spec in table:
            if kind == "rule":
                return spec, _SELECTION_FUNCTIONS.get(spec)
            return spec, table[spec]
    known = tuple(table)
    raise MarketInputError(kind, f"unknown {spec!r}; choose one of {known}, 'module:function' "
                                 "or a callable")
