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
from ..lookup import load_callable, lookup, rule_name
from . import money, selection
from .market import Market, model_difference, over_arrays, paper_prices_arrays
from .money import remittances as paper_remittances
from .thresholds import thresholds

__all__ = [
    "COST_PLUS_MARKUP",
    "PAYMENT_RULES",
    "PRICE_RULES",
    "SELECTION_RULES",
    "SHAPLEY_MAX_SELLERS",
    "VCG_ENUMERATION_MAX",
    "VCG_PIVOTS",
    "cost_plus",
    "cost_plus_prices",
    "cost_plus_remittances",
    "load_callable",
    "no_payments",
    "over_arrays",
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
#
# Every built-in rule is written over arrays (marked :func:`over_arrays`): ``market`` is a
# Market or a MarketArrays with leading batch dimensions, A and D (..., m, m). ipfl.clear
# (one market) and ipfl.clear_batch (many) run these same functions.


@over_arrays
def paper_prices(market: Market, D) -> np.ndarray:
    """Eq. 10 prices P_ij = c_j + lam (N_j/N_i) d_ij (see :meth:`Market.prices`)."""
    return market.prices(D)


@over_arrays
def cost_plus_prices(market: Market, D, markup: float = COST_PLUS_MARKUP) -> np.ndarray:
    """Posted price (1 + markup) c_j, plus the model-difference term lam (N_j/N_i) d_ij that
    the buyer bears as in Eq. 10 (not paid to anyone)."""
    posted = (1.0 + markup) * np.asarray(market.c, dtype=np.float64)
    return paper_prices_arrays(market.N, posted, market.lam, D)


# ---------------------------------------------------------------------------- payments


@over_arrays
def cost_plus_remittances(market: Market, A, D, markup: float = COST_PLUS_MARKUP):
    """Each buyer pays each seller it bought from the seller's posted price (1 + markup) c_j.

    Pair it with the price rule :func:`cost_plus_prices` so that buyers choose at the price
    they pay. Budget balanced (remittances); overstating c raises the seller's own price.
    """
    A = np.asarray(A, dtype=bool)
    posted = (1.0 + markup) * np.asarray(market.c, dtype=np.float64)
    return np.where(A, posted[..., None, :], 0.0)


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

    @over_arrays
    def prices(market, D):
        return cost_plus_prices(market, D, markup)

    @over_arrays
    def payments(market, A, D):
        return cost_plus_remittances(market, A, D, markup)

    prices.__name__ = payments.__name__ = f"cost_plus_{markup:g}"
    return prices, payments


# the paper's rule: balanced and IR (Thm 1), no gain from overstating c (Thm 2); a buyer
# gains by understating its gain scale K (it pays its reported marginal gains) and a seller
# by overstating its data N (buyers value its model by the reported N)
_declare("local", budget_balance=True, no_deficit=True, individual_rationality=True,
         thm2=True, truthful_K_under=False, truthful_N_over=False)(
    over_arrays(paper_remittances))

VCG_ENUMERATION_MAX = 12  # vcg's pivot enumerates the 2^m subsets up to this many clients
VCG_PIVOTS = ("auto", "enumeration", "search")
VCG_ENUMERATION_BLOCK = 2**18  # subset x buyer entries the enumeration pivot evaluates at once


def _best_without_search(market: Market, P: np.ndarray, T: np.ndarray) -> np.ndarray:
    """(..., m, m): entry (b, i) = max over a_b without seller i of -phi_b (Eq. 10), every
    market of a batch at once by the exact selection's search (:func:`selection.exact` over
    arrays: enumeration, dp or branch-and-bound per buyer). Only the buyers whose optimum
    used i are solved again."""
    m = market.m
    best = selection.exact(market, P, T).adjacency
    row_value = -selection.phi(market, P, best)
    without = np.repeat(row_value[..., :, None], m, axis=-1)
    for i in range(m):
        redo = best[..., :, i].copy()
        redo[..., i] = False
        if redo.any():
            Ti = np.where(redo[..., :, None], T, 0.0)
            Ti[..., :, i] = 0.0
            Pi = P.copy()
            Pi[..., :, i] = np.inf
            A_i = selection.exact(market, Pi, Ti).adjacency
            without[..., :, i] = np.where(redo, -selection.phi(market, Pi, A_i),
                                          without[..., :, i])
    return without


def _best_without_enumeration(market, P: np.ndarray) -> np.ndarray:
    """(..., m, m): entry (b, i) = max over a_b without seller i of -phi_b (Eq. 10), every
    market of a batch at once by enumerating the 2^m subsets (:func:`selection.phi_subsets`)."""
    m = market.m
    if m > VCG_ENUMERATION_MAX:
        raise MarketInputError("pivot", f"'enumeration' enumerates 2^m subsets; m is {m}, at "
                                        f"most {VCG_ENUMERATION_MAX} (use 'auto' or 'search')")
    N = np.asarray(market.N, dtype=np.float64)
    K = np.asarray(market.K, dtype=np.float64)
    lead = N.shape[:-1]
    Nf, Kf = N.reshape(-1, m), K.reshape(-1, m)
    Pf = np.asarray(P, dtype=np.float64).reshape(-1, m, m)
    best = np.empty((Nf.shape[0], m, m))
    # a block of markets at a time: the (markets, m, 2^m) subsets stay near the cache (200
    # markets of 12 clients at once took 1.8x the time of blocks of 5)
    step = max(1, VCG_ENUMERATION_BLOCK // (m << m))
    for lo in range(0, Nf.shape[0], step):
        blk = slice(lo, lo + step)
        # only the buyers (K > 0): a pure seller's row is 0 below, whatever it would hold
        buyers = Kf[blk] > 0
        phi = selection.phi_subsets_arrays(Nf[blk], Kf[blk], market.gain, Pf[blk],
                                           buyers=buyers)
        part = np.zeros((buyers.shape[0], m, m))
        part[buyers] = _min_without_each(phi, m)
        best[blk] = part
    best = best.reshape(*lead, m, m)
    return np.where(K[..., :, None] > 0, -best, 0.0)  # K = 0 buys nothing


def _min_without_each(phi_all: np.ndarray, m: int) -> np.ndarray:
    """(..., m): entry i = the minimum of ``phi_all`` (..., 2^m) over the subsets without
    client i (bit i of s clear). The subsets as a 2 x ... x 2 cube (axis k holds bit m-1-k),
    halved recursively: each half of the bits is reached after reducing over the other half,
    about 2 2^m work for all m entries (taking each i's 2^(m-1) subsets apart costs m/2 2^m
    and copies them)."""
    lead = phi_all.shape[:-1]
    nb = len(lead)
    out = np.empty((*lead, m))

    def split(cube, bits):  # cube (..., 2, ..., 2): one binary axis per bit in ``bits``
        k = len(bits)
        if k == 1:
            out[..., bits[0]] = cube[..., 0]
            return
        h = k // 2
        split(cube.min(axis=tuple(range(nb + h, nb + k))), bits[:h])
        split(cube.min(axis=tuple(range(nb, nb + h))), bits[h:])

    split(phi_all.reshape(lead + (2,) * m), [m - 1 - k for k in range(m)])
    return out


@over_arrays
@_declare("exact", individual_rationality=True, ir_negative_distances=True,
          budget_balance=False, no_deficit=False, thm2=True, truthful_c_under=True,
          truthful_K_over=True, truthful_K_under=True, truthful_N_over=False)
def vcg_payments(market: Market, A, D, *, pivot: str = "auto") -> np.ndarray:
    """Vickrey-Clarke-Groves payments with the Clarke pivot, for the objective the exact
    selection maximises: W(A) = sum_i [g_i(a_i) - sum_j a_ij P_ij] = -sum_i phi_i (Eq. 10).

    p_i = W*_{-i} - [W(A) - v_i(A)], with v_i(A) = g_i(a_i) - c_i #{j : a_ji = 1} client i's own
    (reported) value and W*_{-i} the best objective without i (nobody buys from i, i buys
    nothing), solved exactly. Paired with ``rule="exact"``: truthful in c and K (they enter
    only i's own value), individually rational (U_i = W(A) - W*_{-i} >= 0), but the payments
    can sum to less than zero (the operator pays a deficit). Costs one exact selection plus,
    for each client, re-solving the buyers that bought from it.

    Over arrays (one market is a batch of one). W*_{-i} by ``pivot``: "enumeration" of every
    buyer's 2^m subsets (m <= VCG_ENUMERATION_MAX), "search" (the exact selection re-solved
    without each seller), or "auto": enumeration up to VCG_ENUMERATION_MAX clients (1.2-3x
    faster there, benchmarks/bench_ipfl.py), search beyond. Both feed the one Clarke formula
    below; the checker's property ``one_path`` holds the two to each other on every market
    it draws.
    """
    if pivot not in VCG_PIVOTS:
        raise MarketInputError("pivot", f"unknown {pivot!r}; choose one of {VCG_PIVOTS}")
    A = np.asarray(A, dtype=bool)
    P = market.prices(D)
    if pivot == "search" or (pivot == "auto" and market.m > VCG_ENUMERATION_MAX):
        T = thresholds(market, D, prices=P)
        without = _best_without_search(market, P, T)
    else:
        without = _best_without_enumeration(market, P)
    # W*_{-i} = sum over buyers b != i of their best value without seller i
    w_minus = without.sum(axis=-2) - np.diagonal(without, axis1=-2, axis2=-1)
    W = -selection.phi(market, P, A).sum(axis=-1)
    own = money.reported_values(market, A)
    return w_minus - (W[..., None] - own)


SHAPLEY_CHUNK = 2**24  # coalition x seller entries evaluated per step


def _shapley_values(size, valid, K, N, gain) -> np.ndarray:
    """Shapley values of the games v(T) = g(sum_{j in T} size_j) (K, N the buyer's), one
    game per row: ``size``, ``valid`` (rows, k), ``K``, ``N`` (rows,). Players marked
    invalid are padding (value 0). Weight of a coalition T of a game with k_r players
    (j not in T): |T|! (k_r - |T| - 1)! / k_r! = 1 / (k_r C(k_r - 1, |T|)).

    Each row's players come first (as :func:`shapley_remittances` lays them out): the rows
    are evaluated in groups of the same player count k_r, over their first k_r columns and
    2^k_r coalitions (the coalitions left out are those holding padding, which add 0); a
    row without players is 0. The work of a row then follows its own game, not the batch's
    largest (2^k_r k_r, not 2^k k)."""
    rows, k = size.shape
    counts = valid.sum(axis=1)
    out = np.zeros((rows, k))
    for kr in np.unique(counts[counts > 0]).tolist():
        r = np.flatnonzero(counts == kr)
        out[r, :kr] = _shapley_block(size[r, :kr], valid[r, :kr], K[r], N[r], gain)
    return out


def _shapley_block(size, valid, K, N, gain) -> np.ndarray:
    """:func:`_shapley_values` of one group, over the whole width of ``size`` (every
    coalition of its k columns, those holding padding excluded by ``valid``)."""
    rows, k = size.shape
    masks = selection.subset_masks(k)
    mf = masks.astype(np.float64)
    card = masks.sum(axis=1)
    out = np.zeros((rows, k))
    step = max(1, SHAPLEY_CHUNK // max(1, (1 << k) * k))
    for lo in range(0, rows, step):
        sl = slice(lo, lo + step)
        sz = np.where(valid[sl], size[sl], 0.0)
        kr = valid[sl].sum(axis=1)[:, None]  # (r, 1)
        inside = np.matmul((~valid[sl]).astype(np.float64), mf.T) == 0  # (r, S)
        # the data of every coalition by doubling (elementwise: each row's sums the same
        # whatever the block; a matrix product's rounding depends on how many rows it has)
        n_T = selection.subset_sums(sz)  # (r, S)
        Kr, Nr = K[sl][:, None], N[sl][:, None]
        g_T = gain.value(n_T, Kr, Nr)
        marginal = gain.value(n_T[..., None] + sz[:, None, :], Kr[..., None], Nr[..., None]) \
            - g_T[..., None]  # (r, S, k)
        fits = card[None, :] < kr  # coalitions a player outside them can join
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(fits, 1.0 / (kr * comb(kr - 1, card[None, :])), 0.0)  # (r, S)
        take = inside[..., None] & ~masks[None] & valid[sl][:, None, :]
        out[sl] = np.where(take, w[..., None] * marginal, 0.0).sum(axis=1)
    return out


@over_arrays
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
    N = np.asarray(market.N, dtype=np.float64)
    K = np.asarray(market.K, dtype=np.float64)
    counts = A.sum(axis=-1)
    k = int(counts.max(initial=0))
    if k > SHAPLEY_MAX_SELLERS:
        where = tuple(int(x) for x in np.argwhere(counts == k)[0])
        raise MarketInputError("payments", f"the Shapley split enumerates 2^{k} coalitions "
                                           f"for buyer {where[-1]}; at most "
                                           f"{SHAPLEY_MAX_SELLERS} sellers per buyer")
    R = np.zeros(A.shape)
    if k == 0:
        return R
    order = np.argsort(~A, axis=-1, kind="stable")[..., :k]  # each buyer's sellers first
    valid = np.take_along_axis(A, order, axis=-1)
    size = np.take_along_axis(np.broadcast_to(N[..., None, :], A.shape), order, axis=-1)
    Kb = np.broadcast_to(K, A.shape[:-1])
    Nb = np.broadcast_to(N, A.shape[:-1])
    share = _shapley_values(size.reshape(-1, k), valid.reshape(-1, k), Kb.reshape(-1),
                            Nb.reshape(-1), market.gain).reshape(valid.shape)
    np.put_along_axis(R, order, np.where(valid, share, 0.0), axis=-1)
    lam = np.asarray(market.lam, dtype=np.float64)[..., None, None]
    term = model_difference(N[..., None, :], N[..., :, None], np.asarray(D, dtype=np.float64),
                            lam)
    return np.where(A, R - term, 0.0)


@over_arrays
def share_all(market: Market, D, thresholds, prices) -> np.ndarray:
    """Selection of the FedAvg-like baseline: every client with a gain (K_i > 0) takes every
    model on sale (finite cost), whatever the price. Pair it with ``payments="none"``."""
    K, c = np.asarray(market.K), np.asarray(market.c)
    A = (K[..., :, None] > 0) & np.isfinite(c)[..., None, :]
    m = K.shape[-1]
    A[..., np.arange(m), np.arange(m)] = False
    return A


@over_arrays
@_declare("share-all", budget_balance=True, no_deficit=True, individual_rationality=False,
          thm2=True, truthful_c_under=True, truthful_K_over=True, truthful_K_under=True,
          truthful_N_over=True, truthful_N_under=True)
def no_payments(market: Market, A, D) -> np.ndarray:
    """Nobody pays anybody. With ``rule="share-all"`` no report changes anything but whether
    a client sells (a finite cost) or buys (K > 0), so no misreport pays; but a seller bears
    its sharing cost for nothing (not individually rational)."""
    return np.zeros(np.shape(market.N))


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
# name -> function; the built-in selections other than share-all run inside ipfl.clear (None)
_KINDS = {"rule": MappingProxyType({**dict.fromkeys(selection.RULES), "share-all": share_all}),
          "payments": PAYMENT_RULES, "prices": PRICE_RULES}


def resolve(kind: str, spec) -> tuple[str, Callable | None]:
    """(name, function) of a rule: ``kind`` is "rule" (selection), "payments" or "prices";
    ``spec`` a built-in name, ``"module:function"`` or a callable. Built-in selection rules
    return function None (:func:`mechanisms.ipfl.clear` runs them itself)."""
    return lookup(kind, spec, _KINDS[kind])
