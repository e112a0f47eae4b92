"""Clearing one round of the iPFL market: prices -> thresholds -> graph -> money.

:func:`clear` is the public entry point; :func:`clear_batch` clears many markets at once
with the same steps and the same (array-generic) rule functions. A mechanism is data: a
selection rule, a payment rule and a price rule, each a built-in name or a plain function
(signatures in
:mod:`mechanisms.ipfl.rules`). :func:`clear` returns a frozen :class:`Outcome` that keeps its
inputs (market, distances, rule names and functions) next to the numbers, so any outcome can be
re-checked or cleared again with one input changed (:meth:`Outcome.reclear`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..contain import call_rule, within
from ..errors import MarketInputError, RuleFailed, as_floats, as_int, as_real, check_sellers
from . import money, rules, selection
from .market import Market, MarketArrays, read_only
from .thresholds import MODES
from .thresholds import thresholds as solve_thresholds

__all__ = ["BULK_RULES", "Outcome", "OutcomeBatch", "clear", "clear_batch"]


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
    method       how the adjacency was selected: "greedy-stop" (box2), "greedy-skip"
        (local); rule "exact": the methods its buyers used (``exact_methods`` but "none"),
        joined by "+" in sorted order ("none" when no buyer had a candidate); a built-in
        rule function's name, or "custom" for a rule of your own
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
    exact_nodes  (m,)   rule "exact": the branch-and-bound nodes per buyer (0: another method)
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
    exact_nodes: np.ndarray | None = None  # rule "exact": branch-and-bound nodes per buyer
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


def _check_output(kind: str, label: str, value, shapes: tuple) -> np.ndarray:
    """What rule ``label`` returned, as float64: text, booleans and complex numbers are
    refused (:func:`mechanisms.errors.as_floats`), then the shape is checked; a refusal is a
    RuleFailed naming the kind of rule and the rule."""
    try:
        arr = as_floats(kind, value)
    except MarketInputError as exc:
        raise RuleFailed(kind, f"{label} returned {type(value).__name__}: "
                               f"{exc.message}") from None
    if arr.shape not in shapes:
        want = " or ".join(str(s) for s in shapes)
        raise RuleFailed(kind, f"{label} returned shape {arr.shape}, expected {want}")
    return arr


# ----------------------------------------------------------------------------------------
# the steps of a clearing, shared by clear (one market) and clear_batch (many): every array
# handed to a rule is a fresh read-only copy made for that call (mechanisms.contain.handed),
# so code of your own cannot change the caller's arrays, the outcome or the toolkit's own,
# even if it turns writing back on
# ----------------------------------------------------------------------------------------


_BUILT_IN = (*rules.PAYMENT_RULES.values(), *rules.PRICE_RULES.values())  # fresh arrays


def _call(field: str, label: str, fn: Callable, *args):
    """``fn(*args)``; a rule of the user's own gets copies of the arguments, and what it
    raises (its own bug, sys.exit, a write into the read-only arrays it is handed, a function
    that is not a rule) is a RuleFailed naming ``field``, the rule and its error, as in
    cpl.apply_pricing and the learning runs (:func:`mechanisms.contain.call_rule`)."""
    if fn in _BUILT_IN or fn is rules.share_all:
        return fn(*args)
    return call_rule(field, label, fn, *args)


def _price_step(label: str, fn: Callable, market, D: np.ndarray) -> np.ndarray:
    """Prices of the price rule (..., m, m), checked (numbers, no NaN), diagonal +inf."""
    shape = D.shape
    P = _check_output("prices", label, _call("prices", label, fn, market, D), (shape,))
    if fn not in _BUILT_IN:  # code of your own may hold on to what it returned
        P = P.copy()
    low = P.min(initial=np.inf)  # min propagates NaN (no (m, m) mask)
    if np.isnan(low) or low == -np.inf:
        raise RuleFailed("prices", f"{label} returned {float(low)!r}; prices must be numbers or "
                                   "+inf (never sold)")
    m = shape[-1]
    P[..., np.arange(m), np.arange(m)] = np.inf
    return read_only(P, copy=False)


def _rule_step(label: str, fn: Callable, market, D, T, P) -> np.ndarray:
    """The adjacency of a selection rule given as a function, checked: (..., m, m), 0/1
    entries, nobody buying its own model."""
    shape = T.shape
    out = _call("rule", label, fn, market, D, T, P)
    try:
        A = np.asarray(out)
    except Exception as exc:  # an object numpy cannot read
        raise RuleFailed("rule", f"{label} returned {type(out).__name__}: {exc}") from None
    if A.shape != shape:
        raise RuleFailed("rule", f"{label} returned shape {A.shape}, expected {shape}")
    if A.dtype != bool:  # NaN would cast to True: only 0/1 entries pass
        vals = _check_output("rule", label, A, (shape,))
        bad = (vals != 0) & (vals != 1)
        if bad.any():
            k = tuple(int(x) for x in np.argwhere(bad)[0])
            raise RuleFailed("rule", f"{label} returned a_{k[-2]}{k[-1]} = {float(vals[k])!r}; "
                                     "adjacency entries are 0/1")
        A = vals.astype(bool)
    m = shape[-1]
    if A[..., np.arange(m), np.arange(m)].any():
        raise RuleFailed("rule", f"{label} returned a client buying its own model")
    try:
        check_sellers("rule", A, market.c, label)  # a pure buyer (c = inf) sells nothing
    except MarketInputError as exc:
        raise RuleFailed("rule", exc.message) from None
    return A


def _money_step(label: str, fn: Callable, market, A, D):
    """(remittances or None, payments) of a payment rule: (..., m, m) remittances give Eq. 13
    payments; (..., m) payments are taken as they are. Must be finite."""
    shape = A.shape
    out = _check_output("payments", label, _call("payments", label, fn, market, A, D),
                        (shape, shape[:-1]))
    if not (np.isfinite(out.sum()) or np.isfinite(out).all()):  # a finite sum: all finite
        raise RuleFailed("payments", f"{label} returned NaN or inf; money must be finite")
    if fn not in _BUILT_IN:  # code of your own may hold on to what it returned
        out = out.copy()
    out = read_only(out, copy=False)
    if out.ndim == len(shape):
        return out, money.payments(out)
    return None, out


def _settle_step(market, A, p):
    """Gains, sharing costs, utilities (Eq. 3) and welfare (Eq. 5) on the true types."""
    G = money.gains(market, A)
    C = money.sharing_costs(market, A)
    U = money.utilities(market, A, p, G=G, C=C)
    return G, C, U, money.welfare(market, A, G=G, C=C)


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
    allow_asymmetric_distances: bool = False,
    progress: Callable[[int, int], None] | None = None,
    time_limit: float | None = None,
) -> Outcome:
    """Clear one round: price, select every buyer's sellers with ``rule``, settle the money.

    Parameters
    ----------
    market : the reported (and true) types.
    D : (m, m) model distances d_ij, zero diagonal, non-negative unless
        ``allow_negative_distances`` (individual rationality needs d >= 0), symmetric up to
        rounding unless ``allow_asymmetric_distances``. Row i is buyer i's: d_ij =
        d(theta_i, theta_j), the difference of j's model from i's in i's objective (Eq. 6's
        term lam (N_j/N_i) d(theta_i, theta_j)), so an asymmetric ``D`` (a divergence,
        d_ij != d_ji) is meaningful, and with ``allow_asymmetric_distances=True`` it is
        used as given: buyer i's selection and the remittances it sends read row i only.
        Without it an asymmetric ``D`` is refused in one line naming the first pair that
        differs (more often a mistake: a transposed or half-filled matrix). Validated by
        :meth:`Market.check_distances`, the one check of ``D`` (``fedmarket clear`` too).
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
    time_limit : seconds (default None: no limit) the clearing may run rules of your own: a
        rule still running when they have passed is stopped, and one not yet started is not
        started, with a :class:`~mechanisms.errors.RuleTimedOut` naming the rule and the
        limit; the built-in steps are not interrupted (``exact_time_limit`` bounds the exact
        selection). SIGALRM does the stopping: in the main thread of a Unix process only;
        elsewhere a time limit is refused (an error naming ``time_limit``)
        (:func:`mechanisms.contain.within`).

    Any rule may also be given as a "package.module:function" string. Rules of your own
    receive read-only copies made for each call (market, D, thresholds, prices, adjacency):
    writing into them (even after turning writing back on) changes nothing of the
    caller's or the outcome's; whatever they raise (sys.exit included) is a
    :class:`~mechanisms.errors.RuleFailed` naming the rule. One market is the batch of
    one of :func:`clear_batch`: the same code (:func:`_clear`) runs both; a rule of your own
    sees this Market and (m, m) arrays, as documented.

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
    _check_options(progress, allow_negative_distances, thresholds, exact_method,
                   exact_node_limit, exact_time_limit, allow_asymmetric_distances)
    rule_label, rule_fn = rules.resolve("rule", rule)
    pay_label, pay_fn = rules.resolve("payments", payments)
    price_label, price_fn = rules.resolve("prices", prices)
    D = read_only(market.check_distances(D, allow_negative=allow_negative_distances,
                                        allow_asymmetric=allow_asymmetric_distances),
                  np.float64)
    out = within(time_limit, _clear, MarketArrays.of(market), D[None], (rule_label, rule_fn),
                 (pay_label, pay_fn), (price_label, price_fn), thresholds,
                 dict(method=exact_method, node_limit=exact_node_limit,
                      time_limit=exact_time_limit, progress=progress), one=market)
    exact_methods: dict = {}
    exact_gap = 0.0
    if rule_fn is not None:
        method = "custom" if ":" in rule_label or rule_label not in rules.SELECTION_RULES \
            else rule_label
    elif rule_label in _GREEDY:
        method = _GREEDY[rule_label]
    else:
        exact_gap = float(out.exact_gap[0].sum())
        exact_methods = dict(Counter(out.exact_methods[0].tolist()))
        used = sorted(k for k in exact_methods if k != "none")
        method = "+".join(used) if used else "none"
    R = out.remittances
    return Outcome(
        rule=rule_label,
        threshold_mode=thresholds,
        method=method,
        m=market.m,
        adjacency=out.adjacency[0],
        thresholds=out.thresholds[0],
        prices=out.prices[0],
        remittances=None if R is None else R[0],
        payments=out.payments[0],
        gains=out.gains[0],
        utilities=out.utilities[0],
        welfare=float(out.welfare[0]),
        gain=market.gain.name,
        truthful=market.truthful,
        exact_methods=exact_methods,
        exact_gap=exact_gap,
        exact_stopped=out.exact_stopped,
        exact_nodes=None if out.exact_nodes is None else out.exact_nodes[0],
        market=market,
        D=D,
        payment_rule=pay_label,
        price_rule=price_label,
        sharing_costs=out.sharing_costs[0],
        functions={"rule": rule, "payments": payments, "prices": prices},
        options={"thresholds": thresholds, "exact_method": exact_method,
                 "exact_node_limit": exact_node_limit, "exact_time_limit": exact_time_limit,
                 "allow_negative_distances": allow_negative_distances,
                 "allow_asymmetric_distances": allow_asymmetric_distances,
                 "time_limit": time_limit},
    )


_GREEDY = {"box2": "greedy-stop", "local": "greedy-skip"}


def _check_options(progress, allow_negative, thresholds, exact_method, node_limit,
                   exact_time_limit, allow_asymmetric=False) -> None:
    """The options of :func:`clear` and :func:`clear_batch`, whatever the rule (an exact
    option given to a greedy rule is still checked): ``progress`` a function or None;
    ``allow_negative_distances`` and ``allow_asymmetric_distances`` bools (the text "no"
    would otherwise read as yes); the
    threshold mode; the exact rule's method, node limit (an integer >= 1) and time limit
    (None or >= 0)."""
    if thresholds not in MODES:
        raise MarketInputError("thresholds", f"unknown mode {thresholds!r}; choose one of {MODES}")
    if exact_method not in selection.EXACT_METHODS:
        raise MarketInputError(
            "exact_method",
            f"unknown method {exact_method!r}; choose one of {selection.EXACT_METHODS}",
        )
    as_int("exact_node_limit", node_limit, lo=1)
    if exact_time_limit is not None:
        as_real("exact_time_limit", exact_time_limit, lo=0)
    if progress is not None and not callable(progress):
        raise MarketInputError("progress", f"is {progress!r}; must be a function "
                                           "progress(done, total), or None")
    for name, flag in (("allow_negative_distances", allow_negative),
                       ("allow_asymmetric_distances", allow_asymmetric)):
        if not isinstance(flag, bool | np.bool_):
            raise MarketInputError(name, f"is {flag!r}; must be True or False")


# ----------------------------------------------------------------------------------------
# many markets at once
# ----------------------------------------------------------------------------------------

BULK_RULES = ("box2", "local", "exact", "share-all")


@dataclass(frozen=True, eq=False)
class OutcomeBatch:
    """Many cleared rounds (:func:`clear_batch`). Arrays are read-only, with the batch's
    leading dimensions (...); index = client id in the last axes.

    market       the MarketArrays cleared (reports and truth)
    D            (..., m, m) the model distances used
    adjacency    (..., m, m) bool, a_ij = client i buys client j's model
    thresholds   (..., m, m) Box 2 thresholds at ``prices``
    prices       (..., m, m) the prices buyers faced (Eq. 10 for the paper's rule)
    remittances  (..., m, m) r_ij (Eq. 12 for the paper's rule), or None when the payment
                 rule returned payments
    payments     (..., m) p_i (Eq. 13 from remittances)
    gains, sharing_costs, utilities (..., m): true values; utilities by Eq. 3
    welfare      (...,) Eq. 5
    exact_methods (..., m) rule "exact": the method per buyer (None for the other rules)
    exact_gap    (..., m) rule "exact": proven bound on phi_i above the optimum (0: optimal)
    exact_nodes  (..., m) rule "exact": the branch-and-bound nodes per buyer (0: another
                 method; bounded by :func:`mechanisms.ipfl.selection.bb_node_bound`)
    exact_stopped str     rule "exact": "" (searched to the end), "node-limit" or
                 "time-limit"
    """

    rule: str
    payment_rule: str
    price_rule: str
    threshold_mode: str
    market: MarketArrays
    D: np.ndarray
    adjacency: np.ndarray
    thresholds: np.ndarray
    prices: np.ndarray
    remittances: np.ndarray | None
    payments: np.ndarray
    gains: np.ndarray
    sharing_costs: np.ndarray
    utilities: np.ndarray
    welfare: np.ndarray
    exact_methods: np.ndarray | None = None
    exact_gap: np.ndarray | None = None
    exact_stopped: str = ""
    exact_nodes: np.ndarray | None = None

    @property
    def shape(self) -> tuple:
        """The leading batch dimensions."""
        return self.payments.shape[:-1]

    @property
    def budget_surplus(self) -> np.ndarray:
        """(...,) sum_i p_i per market: > 0 surplus, < 0 deficit."""
        return self.payments.sum(axis=-1)


def _bulk_function(kind: str, label: str, fn: Callable | None) -> Callable | None:
    if fn is not None and not getattr(fn, "over_arrays", False):
        raise MarketInputError(kind, f"{label} is not marked over_arrays: clear_batch calls "
                                     "rules with leading batch dimensions; write it over "
                                     "arrays and mark it with ipfl.over_arrays (or clear "
                                     "market by market with ipfl.clear)")
    return fn


def clear_batch(
    market: MarketArrays,
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
    allow_asymmetric_distances: bool = False,
    progress: Callable[[int, int], None] | None = None,
    time_limit: float | None = None,
) -> OutcomeBatch:
    """Clear a batch of markets at once: the code :func:`clear` runs on a batch of one.

    Prices (Eq. 10, or the cost-plus posted price), thresholds (Box 2), selection ("box2",
    "local", "exact": :func:`mechanisms.ipfl.selection.exact` over arrays, every buyer of
    every market at once, "share-all"), money ("paper": Eq. 12 remittances and Eq. 13
    payments; "vcg", "shapley", "cost-plus", "none"), then gains, sharing costs, utilities
    (Eq. 3) and welfare (Eq. 5) on the true types. The options are :func:`clear`'s
    (``time_limit`` and ``allow_asymmetric_distances`` included; ``D`` is (..., m, m)).
    Rules of your own must be written over arrays and marked
    :func:`over_arrays`; they receive copies of the MarketArrays and read-only copies of the
    arrays. Market by market, the outcome equals :func:`clear`'s
    (tests/test_batch_engine.py).

    >>> mk = MarketArrays(N=[[400, 500, 600]] * 2, c=[[0.5, 1.0, 0.0]] * 2,
    ...                   K=[[5e4, 3e4, 0.0]] * 2, lam=[2.0, 0.0])
    >>> d = [[0, .1, .3], [.1, 0, .2], [.3, .2, 0]]
    >>> out = clear_batch(mk, [d, d], "local")
    >>> out.adjacency[0].astype(int)
    array([[0, 1, 1],
           [1, 0, 1],
           [0, 0, 0]])
    >>> bool(np.allclose(out.payments[0], clear(mk.market(0), d).payments, atol=1e-12))
    True
    """
    if not isinstance(market, MarketArrays):
        raise MarketInputError("market", f"must be an ipfl.MarketArrays, got "
                                         f"{type(market).__name__}")
    _check_options(progress, allow_negative_distances, thresholds, exact_method,
                   exact_node_limit, exact_time_limit, allow_asymmetric_distances)
    rule_label, rule_fn = rules.resolve("rule", rule)
    pay_label, pay_fn = rules.resolve("payments", payments)
    price_label, price_fn = rules.resolve("prices", prices)
    rule_fn = _bulk_function("rule", rule_label, rule_fn)
    pay_fn = _bulk_function("payments", pay_label, pay_fn)
    price_fn = _bulk_function("prices", price_label, price_fn)
    D = read_only(market.check_distances(D, allow_negative=allow_negative_distances,
                                        allow_asymmetric=allow_asymmetric_distances),
                  np.float64)
    return within(time_limit, _clear, market, D, (rule_label, rule_fn), (pay_label, pay_fn),
                  (price_label, price_fn), thresholds,
                  dict(method=exact_method, node_limit=exact_node_limit,
                       time_limit=exact_time_limit, progress=progress))


def _clear(market: MarketArrays, D: np.ndarray, rule, pay, price, thresholds: str,
           exact: dict, one: Market | None = None) -> OutcomeBatch:
    """The clearing itself, of a batch (the only code that clears): prices, thresholds,
    selection, money, settlement. ``rule``, ``pay``, ``price``: (label, function or None);
    ``exact``: the exact selection's options. ``one``: the Market when :func:`clear` clears
    one market (``market`` its batch of one): a rule of your own then sees that Market and
    (m, m) arrays, as documented, and its output gets the batch dimension back; the built-in
    rules always see the batch."""
    (rule_label, rule_fn), (pay_label, pay_fn), (price_label, price_fn) = rule, pay, price

    def own(fn):  # a rule of your own called on the one market
        return one is not None and fn is not None and fn not in _BUILT_IN \
            and fn is not rules.share_all

    if own(price_fn):
        P = read_only(_price_step(price_label, price_fn, one, D[0])[None], copy=False)
    else:
        P = _price_step(price_label, price_fn, market, D)
    T = read_only(solve_thresholds(market, D, thresholds, prices=P), copy=False)
    found = None
    if rule_fn is not None:
        if own(rule_fn):
            A = _rule_step(rule_label, rule_fn, one, D[0], T[0], P[0])[None]
        else:
            A = _rule_step(rule_label, rule_fn, market, D, T, P)
    elif rule_label == "box2":
        A = selection.box2(T, market.N)
    elif rule_label == "local":
        A = selection.local(T, market.N)
    else:
        found = selection.exact(market, P, T, **exact)
        A = found.adjacency
    A = read_only(A, bool, copy=rule_fn is not None)  # a rule of your own may keep its A
    if own(pay_fn):
        R, p = _money_step(pay_label, pay_fn, one, A[0], D[0])
        R, p = (None if R is None else R[None]), p[None]
    else:
        R, p = _money_step(pay_label, pay_fn, market, A, D)
    G, C, U, W = _settle_step(market, A, p)
    return OutcomeBatch(
        rule=rule_label, payment_rule=pay_label, price_rule=price_label,
        threshold_mode=thresholds, market=market, D=D, adjacency=A, thresholds=T, prices=P,
        remittances=R, payments=_ro(p), gains=_ro(G),
        sharing_costs=_ro(C), utilities=_ro(U), welfare=_ro(W),
        exact_methods=None if found is None else found.methods,  # sealed (ExactSelection)
        exact_gap=None if found is None else found.gaps,
        exact_stopped="" if found is None else found.stopped,
        exact_nodes=None if found is None else found.nodes)
