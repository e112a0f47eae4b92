"""The iPFL properties (Zhang et al. 2025; spec ipfl.md "Properties"), each with its exact
preconditions built into its instance strategy, and the variants with a precondition dropped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from mechanisms import ipfl
from mechanisms.errors import FedmarketError
from mechanisms.gains import ROOT_CALLS_MAX, CallableGain, as_gain
from mechanisms.ipfl import selection

from .core import Property
from .names import fresh
from .regret import (
    JointMisreportBatch,
    Misreport,
    MisreportBatch,
    joint_regret_arrays,
    regret_arrays,
    regret_search,
)
from .seal import handed_back, unsealed
from .strategies import MAX_CLIENTS, ipfl_instances, misreports

__all__ = [
    "GAINS",
    "GLOBAL_MAX_CLIENTS",
    "IPFL_PROPERTIES",
    "IpflCase",
    "best_misreport",
    "budget_side",
    "operator_balance",
    "tiny_markets",
]

_TOL = 1e-9
# the gain kinds the checker draws markets with (proofs.batch.IpflSpec.gains,
# :func:`_cases`): the paper's (Eq. 4), the log and power gains of mechanisms.gains and the
# linear one (power, alpha = 1: concave but not strictly; its thresholds are infinite below
# the marginal's positive limit)
GAINS = {"sqrt": ipfl.SqrtGain(), "log": ipfl.LogGain(), "power": ipfl.PowerGain(0.5),
         "linear": ipfl.PowerGain(1.0)}
EVERY_GAIN = tuple(GAINS)
EVERY_MODE = tuple(ipfl.MODES)
# payment rules whose cost grows exponentially with the market (VCG re-solves each buyer
# without each seller; the Shapley split enumerates 2^k coalitions, k <= 20 sellers a buyer):
# the batch engine draws no size tier for them (proofs.batch.IpflSpec.tiers)
SIZE_LIMITED = ("vcg", "shapley")
_ALL = {"gains": EVERY_GAIN, "modes": EVERY_MODE}  # the draws of every gain and mode
_GAINS_ONLY = {"gains": EVERY_GAIN}  # every gain, exact thresholds
_GAIN_TYPES = (ipfl.LogGain, ipfl.PowerGain)  # rebuilt from their repr by IpflCase.code


def _arr(a) -> str:
    vals = ", ".join("float('inf')" if np.isinf(v) else repr(float(v)) for v in np.ravel(a))
    return f"[{vals}]"


@dataclass(frozen=True, eq=False)
class IpflCase:
    """One instance of an iPFL property.

    market : the truthful :class:`mechanisms.ipfl.Market`.
    D : (m, m) model distances d_ij.
    client : the client the property singles out (the liar for misreport properties, the
        one whose N grows for Thm 3), or None.
    factor : how the liar misreports (c_i -> c_i * factor + factor - 1 for Lemma 1 / Thm 2;
        N_i -> N_i * factor for truthfulness in N), or None.
    perm : the relabelling of clients for permutation equivariance, or None.
    search : the misreport search's settings for the regret properties (options of
        :func:`proofs.regret.regret_arrays`: span, grid, starts, iters), or None (its
        defaults); ``check(..., search=)`` sets it.
    thresholds : the threshold mode the market is cleared with ("exact" or "published",
        :data:`mechanisms.ipfl.MODES`); the gain is the market's own (``market.gain``).

    ``code()`` is Python that rebuilds it as ``case`` (needs numpy as np, ipfl, IpflCase).
    """

    market: ipfl.Market
    D: np.ndarray
    client: int | None = None
    factor: float | None = None
    perm: np.ndarray | None = None
    search: dict | None = None
    thresholds: str = "exact"

    def __post_init__(self):  # the mode as a user's program passes it (proofs.names)
        object.__setattr__(self, "thresholds", fresh(self.thresholds))

    def code(self) -> str:
        mk = self.market
        D = np.asarray(self.D)
        rows = ",\n     ".join(_arr(r) for r in D)
        gain = "" if isinstance(mk.gain, ipfl.SqrtGain) else \
            f", gain=ipfl.{mk.gain!r}" if type(mk.gain) in _GAIN_TYPES else \
            f", gain={mk.gain.name!r}"
        s = (f"market = ipfl.Market(N={_arr(mk.N)}, c={_arr(mk.c)}, K={_arr(mk.K)}, "
             f"lam={mk.lam!r}{gain})\nD = np.array([{rows}])")
        args = ["market", "D"]
        if self.client is not None:
            args.append(f"client={self.client}")
        if self.factor is not None:
            args.append(f"factor={self.factor!r}")
        if self.perm is not None:
            args.append(f"perm=np.array({np.asarray(self.perm).tolist()})")
        if self.search is not None:
            args.append(f"search={dict(self.search)!r}")
        if self.thresholds != "exact":
            args.append(f"thresholds={self.thresholds!r}")
        return s + f"\ncase = IpflCase({', '.join(args)})"

    def __repr__(self):
        return self.code()


def _cases(negative=False, positive=False, lam_min=0.0, liar=None, perm=False, ties=False,
           max_m=MAX_CLIENTS, min_m=2, gains=("sqrt",), modes=("exact",)):
    """``instances`` of a property: ``(max_clients=None) -> strategy`` of markets of 2 to
    ``max_clients`` (default ``max_m``) clients with the preconditions built in; ``gains``
    (keys of :data:`proofs.batch.GAINS`) and threshold ``modes`` drawn as the batch engine
    draws them (its :class:`proofs.batch.IpflSpec` takes the same)."""

    def instances(max_clients=None):
        return build(max_m if max_clients is None else max_clients)

    instances.clients = (min_m, max_m)  # the default range, read into Property.clients

    @st.composite
    def build(draw, max_m):
        gain = draw(st.sampled_from(gains))
        mode = draw(st.sampled_from(modes))
        market, D = draw(ipfl_instances(negative_distances=negative, positive_distances=positive,
                                        symmetric=None, min_m=min_m, max_m=max_m,
                                        distinct=perm and not ties, gain=GAINS[gain]))
        if lam_min > 0 and market.lam < lam_min:
            market = market.replace(lam=draw(st.floats(lam_min, 5.0)))
        if ties and market.m >= 3:
            # client 1 becomes an exact copy of client 2: their thresholds tie for everyone
            N, c, K = market.N.copy(), market.c.copy(), market.K.copy()
            N[1], c[1], K[1] = N[2], c[2], K[2]
            market = market.replace(N=N, c=c, K=K)
            D = D.copy()
            D[1, :], D[:, 1] = D[2, :], D[:, 2]
            D[1, 2] = D[2, 1] = 0.0 if not positive else 1e-3
            np.fill_diagonal(D, 0.0)
        client = factor = None
        if liar == "who":
            client = draw(st.integers(0, market.m - 1))
        elif liar is not None:
            client, factor = draw(misreports(market.m, over=(liar == "over")))
        p = draw(st.permutations(list(range(market.m))).map(np.array)) if perm else None
        return IpflCase(market, D, client, factor, p, thresholds=mode)

    return instances


def _settle(subject, case, allow_negative=False):
    return subject.settle(case.market, case.D, allow_negative=allow_negative)


def _scale(s) -> float:
    return 1.0 + float(np.max(np.abs(s.utilities))) + float(np.max(np.abs(s.payments)))


# ------------------------------------------------------------------------ clearing in bulk
#
# Every property below is written once, over a batch of markets (arrays with a leading batch
# dimension, as proofs.batch.IpflSampler.arrays builds them: N, c, K (B, m), lam (B,), D
# (B, m, m), client (B,), factor (B,), perm (B, m)): ``check(settle, a) -> violations`` or
# ``(violations, effective[, discriminating[, search score]])`` arrays, where ``settle(N, c,
# K, lam, D, true_N=, true_c=, true_K=)`` clears the batch. The batch engine runs it with
# the subject's bulk clearing (:func:`batch_rule`: mechanisms.ipfl.clear_batch, for every
# subject whose rules can run in bulk; ``Property.batch``); the one-instance check
# (``Property.violation``, the Hypothesis engine, ``rerun()``) runs the same function on a
# batch of one market cleared by the subject's own ``settle`` (:func:`settle_one`).

BULK_RULES = ipfl.BULK_RULES
BULK_PAYMENTS = tuple(ipfl.PAYMENT_RULES)
BULK_PRICES = tuple(ipfl.PRICE_RULES)


def settle_batch(rule, N, c, K, lam, D, true_N=None, true_c=None, money="paper",
                 true_K=None, prices="paper", gain="sqrt", thresholds="exact") -> dict:
    """Clear a batch of markets (arrays with a leading batch dimension) with
    :func:`mechanisms.ipfl.clear_batch` (the markets' ``gain``, the ``thresholds`` mode);
    returns adjacency "A", payments "p", utilities "U", prices "P", welfare "W",
    remittances "R" and the "market" (what the checks read). Negative and asymmetric
    distances are accepted (the properties about them, and the type space, draw them on
    purpose)."""
    rule, money, prices, gain, thresholds = map(fresh, (rule, money, prices, gain, thresholds))
    out = ipfl.clear_batch(ipfl.MarketArrays(N, c, K, lam, true_N, true_c, true_K, gain=gain),
                           D, rule, payments=money, prices=prices, thresholds=thresholds,
                           allow_negative_distances=True, allow_asymmetric_distances=True)
    return {"A": out.adjacency, "p": out.payments, "U": out.utilities, "P": out.prices,
            "W": out.welfare, "R": out.remittances, "market": out.market,
            "T": out.thresholds}


def _in_bulk(spec, names) -> bool:
    return (isinstance(spec, str) and spec in names) or getattr(spec, "over_arrays", False)


def batch_rule(subject):
    """A settle-batch function (:func:`settle_batch` with the subject's rules) when
    ``subject`` can be cleared in bulk by :func:`mechanisms.ipfl.clear_batch`: every rule a
    built-in name or a function marked :func:`mechanisms.ipfl.over_arrays` (the built-in
    rule functions are). None otherwise (the pair is then evaluated one instance at a
    time)."""
    from .subjects import IpflMechanism

    if not isinstance(subject, IpflMechanism):
        return None
    if type(subject).settle is not IpflMechanism.settle:
        return None  # a subclass clears its own way: evaluate what it does, one by one
    rule, money, prices = subject.rule, subject.money, subject.prices
    if not (_in_bulk(rule, BULK_RULES) and _in_bulk(money, BULK_PAYMENTS)
            and _in_bulk(prices, BULK_PRICES)):
        return None

    def settle(N, c, K, lam, D, true_N=None, true_c=None, true_K=None, gain="sqrt",
               thresholds="exact"):
        return settle_batch(rule, N, c, K, lam, D, true_N=true_N, true_c=true_c, money=money,
                            true_K=true_K, prices=prices, gain=gain, thresholds=thresholds)

    return settle


def _configured(settle, a):
    """``settle`` with the batch's gain and threshold mode (``a["gain"]``,
    ``a["thresholds"]``, as the sampler drew them) bound: every clearing of a check (the
    truthful market and each misreport) uses them."""
    gain, mode = a.get("gain"), a.get("thresholds")
    if gain is None and mode is None:
        return settle

    def configured(*args, **kwargs):
        return settle(*args, gain=gain or "sqrt", thresholds=mode or "exact", **kwargs)

    return configured


def _first(x):
    return None if x is None else np.asarray(x)[0]


class _OneOutcome(dict):
    """One market's outcome as :func:`settle_batch`'s dict (batch of one); its "market"
    (the market cleared as a :class:`mechanisms.ipfl.MarketArrays` batch of one) is made
    when a check first reads it (most checks never do)."""

    def __init__(self, outcome, market):
        self._market = market
        super().__init__(outcome)

    def __missing__(self, key):
        if key != "market":
            raise KeyError(key)
        arrays = ipfl.MarketArrays.of(self._market)
        self["market"] = arrays
        return arrays


def settle_one(subject, case, a=None):
    """A settle function (the signature of :func:`settle_batch`'s) for batches of ONE
    market, cleared by ``subject.settle`` itself (the code a user runs on one market; the
    checker's call count and error wrapping see it), with ``case``'s gain; returns the
    outcome's arrays with a leading batch dimension of 1. ``a``: ``case``'s arrays
    (:func:`case_arrays`); a call with exactly those (the truthful market) clears
    ``case.market`` and ``case.D`` as they are, without building the market again."""
    market = case.market

    def settle(N, c, K, lam, D, true_N=None, true_c=None, true_K=None):
        if a is not None and N is a["N"] and c is a["c"] and K is a["K"] \
                and lam is a["lam"] and D is a["D"] and true_N is None and true_c is None \
                and true_K is None:
            mk, D1 = market, case.D
        else:
            mk = ipfl.Market(N=_first(N), c=_first(c), K=_first(K), lam=float(lam[0]),
                             true_N=_first(true_N), true_c=_first(true_c),
                             true_K=_first(true_K), gain=market.gain)
            D1 = np.asarray(D)[0]
        s = subject.settle(mk, D1, allow_negative=True,
                           thresholds=fresh(getattr(case, "thresholds", "exact")))
        R = s.remittances
        return _OneOutcome({"A": np.asarray(s.adjacency, dtype=bool)[None],
                            "p": np.asarray(s.payments, dtype=float)[None],
                            "U": np.asarray(s.utilities, dtype=float)[None],
                            "P": np.asarray(s.prices, dtype=float)[None],
                            "W": np.array([float(s.welfare)]),
                            "T": np.asarray(s.thresholds, dtype=float)[None],
                            "R": None if R is None else np.asarray(R, dtype=float)[None]},
                           mk)

    return settle


def case_arrays(case) -> dict:
    """One :class:`IpflCase` as a batch of one (the arrays a check reads)."""
    mk = case.market
    return {"N": np.asarray(mk.N, dtype=float)[None], "c": np.asarray(mk.c, dtype=float)[None],
            "K": np.asarray(mk.K, dtype=float)[None], "lam": np.array([float(mk.lam)]),
            "D": np.asarray(case.D, dtype=float)[None],
            "client": None if case.client is None else np.array([int(case.client)]),
            "factor": None if case.factor is None else np.array([float(case.factor)]),
            "perm": None if case.perm is None else np.asarray(case.perm)[None],
            "search": getattr(case, "search", None), "gain": mk.gain,
            "thresholds": getattr(case, "thresholds", "exact")}


def _one_market(check):
    """The one-instance violation ``(subject, case) -> ...`` of a check written over a
    batch: ``check`` on the batch of one market ``case``, cleared by the subject's own
    ``settle``."""

    def violation(subject, case):
        a = case_arrays(case)
        if getattr(check, "reads_subject", False):
            out = check(settle_one(subject, case, a), a,
                        subject=getattr(subject, "_subject", subject))
        else:
            out = check(settle_one(subject, case, a), a)
        if not isinstance(out, tuple):
            out = (out,)
        if len(out) > 1 and not bool(np.asarray(out[1])[0]):
            return None  # not checked on this instance
        amount = float(np.asarray(out[0])[0])
        discriminating = bool(np.asarray(out[2])[0]) if len(out) > 2 else True
        score = float(np.asarray(out[3])[0]) if len(out) > 3 else amount
        return amount, score, discriminating

    violation.__name__ = check.__name__.lstrip("_")
    violation.__doc__ = check.__doc__
    return violation


def _hook(check):
    """A Property's ``batch`` hook: ``subject -> (arrays -> ...)``, ``check`` with the
    subject's bulk clearing; None for a subject that cannot be cleared in bulk."""

    def for_subject(subject):
        settle = batch_rule(subject)
        if settle is None:
            return None
        if getattr(check, "reads_subject", False):
            return lambda a: check(_configured(settle, a), a, subject=subject)
        return lambda a: check(_configured(settle, a), a)

    return for_subject


def _scale_b(s):
    return 1.0 + np.abs(s["U"]).max(axis=1) + np.abs(s["p"]).max(axis=1)


def _excess(x, tol):
    """:func:`proofs.core.excess` elementwise (NaN is a failure: inf)."""
    out = np.maximum(0.0, x - tol)
    return np.where(np.isnan(out), np.inf, out)


def _rows(x, client):
    return x[np.arange(x.shape[0]), client]


def _with(x, client, values):
    y = x.copy()
    y[np.arange(x.shape[0]), client] = values
    return y


def _truthful(settle, a):
    return settle(a["N"], a["c"], a["K"], a["lam"], a["D"])


# ---------------------------------------------------------------------------- violations


def _budget_balance(settle, a):
    """Eq. 13: sum_i p_i = 0 (relative tolerance)."""
    s = _truthful(settle, a)
    return _excess(np.abs(s["p"].sum(axis=1)), _TOL * _scale_b(s))


def _individual_rationality(settle, a):
    """Thm 1: U_i >= 0 for every client."""
    s = _truthful(settle, a)
    return _excess(-s["U"].min(axis=1), _TOL * _scale_b(s))


def _local_optimality(settle, a):
    """(single flips that lower phi_i (Eq. 11), effective, discriminating, search score);
    :func:`mechanisms.ipfl.eq11_violations` (the public test, its default tolerance) must
    list exactly the pairs whose margin is below -1e-9; on the batches of
    :func:`_side_batch` the test is the same in another unit of money, where every K is
    below 1 (:func:`_eq11_unit_gap`).
    The score is how close the best single flip comes to lowering phi_i (minus the smallest
    relative margin of :func:`mechanisms.ipfl.eq11_margins`, clipped to [-1, 1]), so
    Hypothesis' targeted phase climbs towards markets where one flip pays."""
    s = _truthful(settle, a)
    margins = ipfl.eq11_margins(s["market"], s["P"], s["A"])
    count = (margins < -_TOL).sum(axis=(-2, -1)).astype(float)
    # the public test of Eq. 11 at its documented default (rtol 1e-9, the checker's _TOL)
    # finds exactly these pairs: each pair it gets otherwise counts too
    found = ipfl.eq11_violations(s["market"], s["P"], s["A"])
    listed = np.zeros(margins.shape, bool)
    listed[tuple(found.T)] = True
    count += (listed != (margins < -_TOL)).sum(axis=(-2, -1))
    if _side_batch(a, s):
        count[0] += _eq11_unit_gap(settle, a, s, margins)  # on its first markets
    with np.errstate(invalid="ignore"):
        closest = np.nanmin(margins, axis=(-2, -1)) if margins.shape[-1] > 1 \
            else np.full(len(count), np.inf)
    ones = np.ones(len(count), bool)
    return count, ones, ones, 10.0 * count + np.clip(-closest, -1.0, 1.0)


EQ11_UNIT_K = 2.0**-20
"""The factor on K of :func:`_eq11_unit_gap`'s other unit of money: every K the checker
draws (1e3 to 1e6) becomes at most 0.95, a buyer whose K is below 1."""
EQ11_UNIT_MARKETS = 16  # the markets of a batch (its first) cleared in that unit too


def _eq11_unit_gap(settle, a, s, margins) -> float:
    """Eq. 11's test of the batch's first :data:`EQ11_UNIT_MARKETS` markets in another unit
    of money: every price and gain times u (c and lam times u, K times
    :data:`EQ11_UNIT_K`: u = 2^-10 for the sqrt
    gain, whose gain grows as sqrt(K), 2^-20 for the others, linear in K; powers of 2, so
    every price, threshold and gain is scaled exactly). phi_i is then u phi_i: the same
    selection, and ``ipfl.eq11_margins`` (a relative change) of the same sign at every pair
    and +inf at the same pairs (its floor of 1e-12 on the scale may change a margin's size,
    never its sign). Returns the pairs (and edges) that differ."""
    u = 2.0**-10 if isinstance(s["market"].gain, ipfl.SqrtGain) else EQ11_UNIT_K
    first = {key: np.asarray(a[key])[:EQ11_UNIT_MARKETS] for key in ("N", "c", "K", "D")}
    lam = np.asarray(a["lam"])
    lam = lam[:EQ11_UNIT_MARKETS] if lam.ndim else lam
    with np.errstate(over="ignore", under="ignore"):
        other = settle(first["N"], first["c"] * u, first["K"] * EQ11_UNIT_K, lam * u,
                       first["D"])
    got = ipfl.eq11_margins(other["market"], other["P"], other["A"])
    want = margins[:EQ11_UNIT_MARKETS]
    sign, sign_want = np.sign(got), np.sign(want)
    differ = (sign != sign_want) & ~(np.isnan(sign) & np.isnan(sign_want))  # NaN on one side
    return float((other["A"] != s["A"][:EQ11_UNIT_MARKETS]).sum() + differ.sum()
                 + (np.isposinf(got) != np.isposinf(want)).sum())


def _overstate(a):
    i, f = a["client"], a["factor"]
    ci = _rows(a["c"], i)
    return _with(a["c"], i, ci * f + (f - 1.0))  # strictly above, also from c = 0


def _lemma1(settle, a):
    """(new buyers of the liar, effective, discriminating, score): discriminating when the
    lie changed who buys from the liar (an unchanged column cannot gain a buyer)."""
    honest = _truthful(settle, a)
    lied = settle(a["N"], _overstate(a), a["K"], a["lam"], a["D"], true_c=a["c"])
    i = a["client"]
    b = np.arange(len(i))
    gained = (lied["A"][b, :, i] & ~honest["A"][b, :, i]).sum(axis=1).astype(float)
    changed = (lied["A"][b, :, i] != honest["A"][b, :, i]).any(axis=1)
    return gained, np.ones(len(i), bool), changed


def _thm3(settle, a):
    """(buyers of i after N_i x 1e12, effective, discriminating): discriminating when i
    sells to somebody in the truthful market (isolation then has something to remove) or
    after."""
    i = a["client"]
    N_hat = _with(a["N"], i, _rows(a["N"], i) * 1e12)
    s = settle(N_hat, a["c"], a["K"], a["lam"], a["D"], true_N=a["N"])
    honest = _truthful(settle, a)
    b = np.arange(len(i))
    buyers = s["A"][b, :, i].sum(axis=1).astype(float)
    sold = honest["A"][b, :, i].any(axis=1)
    return buyers, np.ones(len(i), bool), sold | (buyers > 0)


def _permutation(settle, a):
    """Relabelling the clients permutes the graph and the payments: mismatched edges plus
    the payments' gap beyond 1e-7 (relative)."""
    base = _truthful(settle, a)
    pi = a["perm"]
    b = np.arange(pi.shape[0])[:, None, None]
    rows, cols = pi[:, :, None], pi[:, None, :]

    def take(x):
        return np.take_along_axis(x, pi, axis=1)

    s = settle(take(a["N"]), take(a["c"]), take(a["K"]), a["lam"], a["D"][b, rows, cols])
    mismatched = (s["A"] != base["A"][b, rows, cols]).sum(axis=(1, 2)).astype(float)
    gap = np.abs(s["p"] - take(base["p"])).max(axis=1)
    return mismatched + _excess(gap, 1e-7 * _scale_b(base))


def _global_optimality(settle, a):
    """How far some buyer's phi_i is above the best over all subsets of the sellers it can
    buy from (Eq. 10, enumerated: :func:`mechanisms.ipfl.phi_subsets`)."""
    s = _truthful(settle, a)
    market, P, A = s["market"], s["P"], s["A"]
    best = np.minimum(0.0, ipfl.phi_subsets(market, P)[..., 1:].min(axis=-1))  # empty set: 0
    gap = np.where(market.K > 0, ipfl.phi(market, P, A) - best, 0.0)
    return _excess(np.maximum(gap.max(axis=1), 0.0), _TOL * _scale_b(s))


def _no_deficit(settle, a):
    """Weak budget balance: the operator never pays, sum_i p_i >= 0."""
    s = _truthful(settle, a)
    return _excess(-s["p"].sum(axis=1), _TOL * _scale_b(s))


def _budget_identity(settle, a):
    """Eq. 3 summed over the clients: sum_i U_i = SW - sum_i p_i, the welfare of Eq. 5 less
    what the clients pay out of the market (to the operator; 0 for a balanced rule), read from
    the outcome's own utilities, welfare and payments. Discriminating when somebody traded
    (with no trade every term is 0)."""
    s = _truthful(settle, a)
    U, p, W = s["U"], s["p"], s["W"]
    gap = np.abs(U.sum(axis=1) - (W - p.sum(axis=1)))
    scale = 1.0 + np.abs(U).sum(axis=1) + np.abs(W) + np.abs(p).sum(axis=1)
    return (_excess(gap, _TOL * scale), np.ones(len(W), bool), s["A"].any(axis=(1, 2)),
            gap)


def _shapley_shares(s, a):
    """Sh_ij = r_ij + lam (N_j/N_i) d_ij on the bought pairs (Eq. 12's model-difference term
    added back to the remittance), or None when the rule returned payments only."""
    if s["R"] is None:
        return None
    N = a["N"]
    term = ipfl.model_difference(N[:, None, :], N[:, :, None], a["D"], a["lam"][:, None, None])
    return np.where(s["A"], s["R"] + term, 0.0)


def _unchecked(B):
    return np.zeros(B), np.zeros(B, bool)


def _shapley_efficiency(settle, a):
    """For every buyer i: sum_j Sh_ij = v_i(S_i) - v_i({}), the value of the coalition of the
    sellers it bought from, v_i(T) = g_i(sum_{j in T} N_j) (the Shapley values of a game add
    up to the grand coalition's value). Not checked for a rule that returns payments only;
    discriminating when somebody bought."""
    s = _truthful(settle, a)
    shares = _shapley_shares(s, a)
    if shares is None:
        return _unchecked(len(a["N"]))  # nothing to read: payments, not remittances
    A, N, K = s["A"], a["N"], a["K"]
    bought = ipfl.bought(A, N)
    gain = s["market"].gain.value
    value = gain(bought, K, N) - gain(0.0 * bought, K, N)
    buyers = A.any(axis=2)
    gap = np.where(buyers, np.abs(shares.sum(axis=2) - value), 0.0)
    tol = _TOL * (1.0 + np.abs(value) + np.abs(shares).sum(axis=2))
    return (_excess(np.max(gap - tol, axis=1, initial=0.0), 0.0), np.ones(len(N), bool),
            buyers.any(axis=1), np.zeros(len(N)))


def _twin_buyers(A):
    """(B, m) bool: the rows other than the twins (clients 1 and 2)."""
    rows = np.ones(A.shape[:2], dtype=bool)
    rows[:, 1:3] = False
    return rows


def _shapley_symmetry(settle, a):
    """Two sellers that are the same client in all but the label (clients 1 and 2 of the
    ties precondition: same N, c, K and distances) get the same Shapley value from every
    buyer that bought both. Discriminating when some buyer bought both."""
    if a["N"].shape[1] < 3:
        return _unchecked(len(a["N"]))
    s = _truthful(settle, a)
    shares = _shapley_shares(s, a)
    if shares is None:
        return _unchecked(len(a["N"]))
    A = s["A"]
    both = A[:, :, 1] & A[:, :, 2] & _twin_buyers(A)
    s1, s2 = shares[:, :, 1], shares[:, :, 2]
    gap = np.where(both, np.abs(s1 - s2), 0.0)
    tol = _TOL * (1.0 + np.abs(s1) + np.abs(s2))
    return (_excess(np.max(gap - tol, axis=1, initial=0.0), 0.0), np.ones(len(A), bool),
            both.any(axis=1), np.zeros(len(A)))


def _greedy_tie_rule(settle, a):
    """The greedy selections' documented tie rule (mechanisms.ipfl.selection: thresholds in
    descending order, ties: the lower index first): between two identical sellers (clients
    1 and 2 of the ties precondition, whose thresholds tie for every buyer) a buyer that
    takes only one takes client 1. The violation counts buyers that took client 2 alone;
    discriminating when some buyer took exactly one of the two."""
    if a["N"].shape[1] < 3:
        return _unchecked(len(a["N"]))
    A = _truthful(settle, a)["A"]
    rows = _twin_buyers(A)
    wrong = np.sum(rows & A[:, :, 2] & ~A[:, :, 1], axis=1).astype(float)
    return wrong, np.ones(len(A), bool), np.any(rows & (A[:, :, 1] != A[:, :, 2]), axis=1)


def _box2_prefix(settle, a):
    """Box 2 as printed stops at the first failure: every buyer i buys a prefix of the
    other clients ordered by T_ij descending, ties by the lower index (the thresholds of
    :func:`mechanisms.ipfl.thresholds` at the prices the buyer faced): after the first
    client it leaves out, it buys none. The local rule skips a failing client and goes on,
    so it breaks this where Box 2 breaks Eq. 11. The violation counts the buyers whose row
    is not a prefix; discriminating when some buyer left out a client that is not the last
    in its order (buying a later one would break the prefix)."""
    s = _truthful(settle, a)
    A, m = s["A"], a["N"].shape[1]
    T = ipfl.thresholds(s["market"], a["D"], prices=s["P"])
    T = np.where(np.eye(m, dtype=bool), -np.inf, T)  # a buyer's own model: last, never bought
    order = np.argsort(-T, axis=-1, kind="stable")  # descending, ties: the lower index first
    bought = np.take_along_axis(A, order, axis=-1)[..., :m - 1]  # (B, m, m - 1)
    out = np.logical_not(bought)
    # a purchase after a left-out client: some later position bought
    later = np.flip(np.logical_or.accumulate(np.flip(bought, -1), axis=-1), -1)
    broken = out[..., :-1] & later[..., 1:]
    wrong = broken.any(axis=-1).sum(axis=-1).astype(float)
    return wrong, np.ones(len(A), bool), out[..., :-1].any(axis=(1, 2))


def _pure_sellers_never_buy(settle, a):
    """Spec (types): a pure seller (K_i = 0) never buys: a_ij = 0 for every j. The
    violation counts a pure seller's purchases; discriminating when some pure seller could
    buy: another client's model is on sale (finite c_j), whatever the price -- a selection
    rule of one's own could take it anywhere, the paper's thresholds only at a price <= 0
    (c_j = 0 with lam d_ij = 0, or below: T_ij = inf; the mutant pure_seller_buys)."""
    s = _truthful(settle, a)
    pure = (a["K"] == 0)[:, :, None]
    off = ~np.eye(a["N"].shape[1], dtype=bool)
    bought = (s["A"] & pure).sum(axis=(1, 2)).astype(float)
    on_sale = (pure & off & np.isfinite(a["c"])[:, None, :]).any(axis=(1, 2))
    return bought, np.ones(len(bought), bool), on_sale | (bought > 0)


def _stopped_searches(market, P, T, A, phi, scale) -> np.ndarray:
    """The exact selection stopped before it could prove an optimum -- branch-and-bound at
    a node limit of 1, and a time limit of 0 s (every buyer keeps the local rule's choice)
    -- answers within its proven gap: per buyer phi_i(answer) - phi_i(default) <= gap_i
    (the default is at least as good as the optimum it bounds), gaps >= 0, and the time
    limit reported as what stopped it where a buyer had a candidate; with a progress
    callback, the default search reports what :func:`mechanisms.ipfl.exact` documents --
    (0, buyers) first (buyers: K_i > 0), then at once the buyers settled without a search
    of their own, if any, then one more per buyer its ``methods`` say was searched on its
    own (the dynamic programme, branch-and-bound, out of time), ending at (buyers, buyers)
    once -- and selects what it selects without one (``A``, the subject's selection).
    Returns the violation per market (the phi excess beyond 1e-9 of the market's scale,
    plus 1 per broken report)."""
    B = len(phi)
    amount = np.zeros(B)
    searched = ((T > 0) & np.isfinite(T) & (np.asarray(market.K)[..., :, None] > 0)).any(
        axis=(1, 2))
    for kwargs in ({"method": "branch-and-bound", "node_limit": 1}, {"time_limit": 0.0}):
        found = ipfl.exact(market, P, T, **kwargs)
        over = (ipfl.phi(market, P, found.adjacency) - phi - found.gaps) / scale
        amount += _excess(over.max(axis=1), _TOL) + (found.gaps < 0).any(axis=1)
        if "time_limit" in kwargs:  # one report for the whole batch: held by market 0
            amount[0] += searched.any() != (found.stopped == "time-limit")
    calls = []
    counted = ipfl.exact(market, P, T, progress=lambda done, total: calls.append(
        (done, total)))
    buyers = int((np.asarray(market.K) > 0).sum())
    alone = int(np.isin(counted.methods, ("dp", "branch-and-bound", "time-limit")).sum())
    settled = buyers - alone
    documented = [(0, buyers)] + ([(settled, buyers)] if settled else []) \
        + [(settled + j, buyers) for j in range(1, alone + 1)]
    broken = calls != documented
    amount += (counted.adjacency != A).sum(axis=(1, 2))
    amount[0] += broken  # one report for the whole batch: held by market 0
    return amount


PADDING_MAX = 8  # candidates per buyer in _padding_gap's sub-problems (2^8 subsets each)


def _padding_gap(market, P, k: int) -> float:
    """:func:`mechanisms.ipfl.selection.best_subsets` with padded candidate lists (its
    ``valid`` mask), on market ``k`` of the batch: every buyer's sub-problem (its first
    :data:`PADDING_MAX` sellers j != i at a finite price, bought on top of its own data
    N_i), all buyers at once padded to one width plus a column of an irresistible fake
    seller (price -1e9, 1e6 data) marked invalid, chooses what each buyer's sub-problem
    alone chooses, and never the padding. Returns the number of buyers that differ."""
    N, K = np.asarray(market.N, float)[k], np.asarray(market.K, float)[k]
    P = np.asarray(P, float)[k]
    m = len(N)
    lists = [[j for j in range(m) if j != i and np.isfinite(P[i, j])][:PADDING_MAX]
             for i in range(m)]
    width = 1 + max(len(x) for x in lists)
    cost, size = np.full((m, width), -1e9), np.full((m, width), 1e6)
    valid = np.zeros((m, width), bool)
    for i, js in enumerate(lists):
        cost[i, :len(js)], size[i, :len(js)], valid[i, :len(js)] = P[i, js], N[js], True
    padded = selection.best_subsets(cost, size, N, K, N, market.gain, valid)
    wrong = 0
    for i, js in enumerate(lists):
        alone = selection.best_subsets(P[i, js], N[js], N[i], K[i], N[i], market.gain)
        wrong += bool(padded[i, len(js):].any() or not np.array_equal(padded[i, :len(js)],
                                                                      alone))
    return float(wrong)


SIDE_MARKETS = 2
"""The batches the fixed side markets of one_path and local_optimality are checked on
(:func:`_side_batch`): those of markets of this many clients, the draws' smallest and
likeliest size (P(m) ~ m^-3), so every call of the sampler holds a few and a row of 20
examples reaches them; the others skip them. Each such check costs 1-6 ms, and the batch
engine's rows evaluate thousands of batches (all of them: +30 CPU s on local/one_path's
100,000 examples, measured)."""


def _side_batch(a, s, sqrt_only: bool = False) -> bool:
    """Whether this batch checks the side markets: its markets have
    :data:`SIDE_MARKETS` clients (and, ``sqrt_only``, the sqrt gain: one batch in four of
    them)."""
    return a["N"].shape[1] == SIDE_MARKETS and (
        not sqrt_only or isinstance(s["market"].gain, ipfl.SqrtGain))


LARGE_GREEDY_CLIENTS = 257
"""The clients of :func:`_large_greedy_gap`'s market: past CPython's cache of small integers
(-5..256), where two equal sizes compared by identity (``is``) are not the same object."""
LARGE_GREEDY_SELLERS = 12  # sellers each buyer of that market could buy (T > 0)


def _large_greedy_gap(rule: str) -> float:
    """The greedy rule ``rule`` ("box2" or "local") on a market of
    :data:`LARGE_GREEDY_CLIENTS` clients, far beyond the draws' sizes: answered (a
    well-formed (m, m) threshold matrix is never refused) and the same with the default
    scan and with ``top=1`` (rows scanned again with 8 and 64 thresholds). Thresholds
    (seed 0): :data:`LARGE_GREEDY_SELLERS` random sellers a buyer at T uniform on (0, 40),
    N uniform on [1, 3], so a buyer takes several and leaves some (the scan stays short: a
    few ms). Returns the edges bought differently, or the market's m^2 when either scan
    refused it."""
    m, k = LARGE_GREEDY_CLIENTS, LARGE_GREEDY_SELLERS
    rng = np.random.default_rng(0)
    N = rng.uniform(1.0, 3.0, m)
    T = np.zeros((m, m))
    sellers = (np.arange(m)[:, None] + rng.choice(np.arange(1, m), k, replace=False)) % m
    np.put_along_axis(T, sellers, rng.uniform(0.0, 40.0, (m, k)), axis=1)
    try:
        default = getattr(ipfl, rule)(T, N)
        rescanned = getattr(ipfl, rule)(T, N, top=1)
    except FedmarketError:  # good input refused (anything else raised: the row errs)
        return float(m * m)
    return float((np.asarray(default) != np.asarray(rescanned)).sum())


DP_UNIT = 2.0**40
"""The data unit of :func:`_dp_in_units_gap`'s market: every N_j a small multiple of it."""
DP_MONEY_SCALES = (1.0, 2.0**-80)
"""The units of money :func:`_dp_in_units_gap` clears its market in (c and lam times s, K
times s^2: every price and the sqrt gain times s, exactly): phi_i times s has the same
minimisers, so every selection is the same; 2^-80 puts the prices far below 1."""


def _dp_in_units_gap() -> float:
    """The exact rule's dynamic programme (``exact_method="dp"``) where the data amounts are
    huge but share a large unit (N = (1, 2, 3, 5) x :data:`DP_UNIT`): its table (candidates
    x total data / gcd: 3 x 11 cells at most) is tiny, so its size guard must let it run
    (measured in raw amounts, not in data units, the table would be about 1e13 cells);
    in every unit of money of :data:`DP_MONEY_SCALES` it reaches the enumeration's phi_i
    (beyond 1e-9 of the buyer's scale s + |phi_i|: a gap) and selects what it selects in
    the first (a minimiser of phi_i is one in any unit). Buyer 0 searches 3 candidates and
    buys 2 of them. Returns 1 when refused, when nobody had a candidate to search, when a
    buyer's phi differs or a selection changes with the unit, else 0."""
    N = DP_UNIT * np.array([1.0, 2.0, 3.0, 5.0])
    c = np.array([100.0, 300.0, 200.0, 400.0])
    D = 1.0 - np.eye(4)
    chosen = []
    for s in DP_MONEY_SCALES:
        market = ipfl.Market(N=N, c=s * c, K=np.full(4, 1e18 * s * s), lam=0.1 * s)
        try:
            dp = ipfl.clear(market, D, "exact", exact_method=fresh("dp"))
        except FedmarketError:
            return 1.0  # a table of a few cells refused
        enum = ipfl.clear(market, D, "exact", exact_method=fresh("enumeration"))
        phi_dp = ipfl.phi(market, dp.prices, dp.adjacency)
        phi_enum = ipfl.phi(market, enum.prices, enum.adjacency)
        searched = ((dp.thresholds > 0) & np.isfinite(dp.thresholds)).any()
        if not searched or np.any(np.abs(phi_dp - phi_enum) > _TOL * (s + np.abs(phi_enum))):
            return 1.0
        chosen.append(np.asarray(dp.adjacency))
    return float(any(not np.array_equal(x, chosen[0]) for x in chosen))


def _one_path(settle, a, subject=None):
    """Every algorithm the subject's built-in rules may pick for a market gives its outcome
    (mechanisms/ runs one implementation; where it keeps more than one algorithm, this is
    the declared equality, issue 34): the greedy scan of each row's top threshold only
    (``top=1``: every row not proven final is scanned again) buys what the default scan
    bought; the exact selection's dynamic programme (integer N) and branch-and-bound reach
    the phi_i of the default (enumeration up to 16 candidates); VCG's pivot by enumeration
    and by search give the default's payments; the exact selection's options hold to what
    they document (:func:`_stopped_searches`: a search stopped at a node limit or a time
    limit answers within its proven gap, a progress callback counts the buyers and changes
    nothing; the enumeration of padded candidate lists chooses what each list alone
    chooses, :func:`_padding_gap`, once a batch; the dynamic programme answers huge data
    amounts in a common unit, in two units of money, :func:`_dp_in_units_gap`); the greedy
    rules on a market of :data:`LARGE_GREEDY_CLIENTS` clients (:func:`_large_greedy_gap`;
    both on the batches of :func:`_side_batch`). The
    violation: edges bought differently plus the phi and payment gaps beyond 1e-9
    (relative), plus 1 per broken report. Discriminating when an alternative had
    work to do: a buyer with two or more sellers it could buy (0 < T_ij), a buyer with a
    candidate to search (0 < T_ij < inf), somebody trading under VCG."""
    B = len(a["N"])
    rule = getattr(subject, "rule", None)
    money = getattr(subject, "money", None)
    s = _truthful(settle, a)
    if not (rule in ("box2", "local", "exact") or money == "vcg"):
        return np.zeros(B), np.ones(B, bool), np.zeros(B, bool)  # no alternative: cannot fail
    market, P, T, A = s["market"], s["P"], s["T"], s["A"]
    amount = np.zeros(B)
    disc = np.zeros(B, bool)
    if rule in ("box2", "local"):
        other = getattr(ipfl, rule)(T, market.N, top=1)
        amount += (other != A).sum(axis=(1, 2))
        disc |= ((T > 0).sum(axis=-1) > 1).any(axis=-1)
        if _side_batch(a, s, sqrt_only=True):
            amount[0] += _large_greedy_gap(rule)  # on its first market
    if rule == "exact":
        phi = ipfl.phi(market, P, A)
        scale = 1.0 + np.abs(phi)
        integer = np.all(a["N"] == np.round(a["N"]))
        for method in ("dp", "branch-and-bound") if integer else ("branch-and-bound",):
            other = ipfl.exact(market, P, T, fresh(method)).adjacency
            gap = np.abs(ipfl.phi(market, P, other) - phi) / scale
            amount += _excess(gap.max(axis=1), _TOL)
        amount += _stopped_searches(market, P, T, A, phi, scale)
        amount[0] += _padding_gap(market, P, 0)  # once a batch, on its first market
        if _side_batch(a, s, sqrt_only=True):
            amount[0] += _dp_in_units_gap()  # on its first market
        disc |= ((T > 0) & np.isfinite(T)).any(axis=(1, 2))
    if money == "vcg":
        scale = _scale_b(s)
        pivots = ("enumeration", "search") if a["N"].shape[1] <= ipfl.VCG_ENUMERATION_MAX \
            else ("search",)
        for pivot in pivots:
            p = ipfl.vcg_payments(market, A, a["D"], pivot=fresh(pivot))
            amount += _excess(np.abs(p - s["p"]).max(axis=1), _TOL * scale)
        disc |= A.any(axis=(1, 2))
    return amount, np.ones(B, bool), disc


_one_path.reads_subject = True


def _work_bound(settle, a):
    """The exact selection's branch-and-bound within its documented work (run on every
    buyer of the drawn market, ``ipfl.exact(..., "branch-and-bound")``, at the subject's
    prices and thresholds): a buyer with k candidates (0 < T_ij < inf, K_i > 0) explores at
    least one node and at most ``ipfl.bb_node_bound(k)`` (min(2^(k+1) - 1, ipfl.NODE_LIMIT,
    ipfl.BB_NODES_FLOOR + ipfl.BB_NODES_PER_CANDIDATE (k + 1))) nodes
    (``ExactSelection.nodes``), a buyer without one none; and once a batch the generic
    gains' root finder within ``gains.ROOT_CALLS_MAX`` (:func:`_root_calls_excess`) and
    ``ipfl.bb_node_bound`` itself the documented formula (:func:`_node_bound_off`, 1 per
    (k, node limit) where it differs), and an ``ExactSelection`` built without a count has
    ``nodes`` None, as documented (1 otherwise). The
    violation: the largest excess over the bound relative to it, plus 1 per buyer searched
    without a node or counted without a search; a count missing or NaN is inf.
    Discriminating where some buyer had a candidate."""
    s = _truthful(settle, a)
    market, P, T = s["market"], s["P"], s["T"]
    B = len(a["N"])
    found = ipfl.exact(market, P, T, fresh("branch-and-bound"))
    k = ((T > 0) & np.isfinite(T) & (np.asarray(market.K)[..., :, None] > 0)).sum(axis=-1)
    try:
        nodes = np.asarray(found.nodes, dtype=float)
    except (AttributeError, TypeError, ValueError):
        nodes = np.full(k.shape, np.nan)
    if nodes.shape != k.shape:
        return np.full(B, np.inf), np.ones(B, bool), np.ones(B, bool)
    bound = ipfl.bb_node_bound(k)
    with np.errstate(invalid="ignore"):
        over = np.where(k > 0, nodes / bound - 1.0, 0.0).max(axis=1)
        wrong = ((k > 0) & ~(nodes >= 1)) | ((k == 0) & (nodes != 0))
    amount = np.maximum(over, 0.0) + wrong.sum(axis=1)
    amount[0] += _root_calls_excess(market, P)  # once a batch, on its first market
    amount[0] += _node_bound_off()
    # a selection built without a count keeps none (ExactSelection documents None)
    amount[0] += selection.ExactSelection(found.adjacency, found.methods, found.gaps).nodes \
        is not None
    return np.where(np.isnan(amount) | np.isnan(nodes).any(axis=1), np.inf, amount), \
        np.ones(B, bool), (k > 0).any(axis=1)


# the declaration of mechanisms/ipfl/selection.py (BB_NODES_FLOOR, BB_NODES_PER_CANDIDATE,
# NODE_LIMIT), written here, not imported: a bound that read its constants from the code it
# bounds would move with them
NODE_BOUND_FLOOR, NODE_BOUND_PER_CANDIDATE, NODE_BOUND_LIMIT = 511, 8, 20_000
# the candidate counts and node limits the bound is compared at: every k the draws reach
# (the 100-client tier: k < 100) and far beyond, the default limit and others on each side
# of the other two terms
NODE_BOUND_KS = range(0, 301)
NODE_BOUND_LIMITS = (None, 1, 2, 600, 1000, 10**9)


def _node_bound_off() -> float:
    """``ipfl.bb_node_bound`` as documented, the bound :func:`_work_bound` compares the
    nodes with: at every k of :data:`NODE_BOUND_KS` and node limit of
    :data:`NODE_BOUND_LIMITS` (None: the default), min(2^(k+1) - 1, node limit, 511 +
    8 (k + 1)) in exact integer arithmetic (a looser bound lets more work pass; a tighter
    one is not what the docs promise). Returns the number of (k, limit) where it differs."""
    ks = np.array(NODE_BOUND_KS)
    off = 0
    for limit in NODE_BOUND_LIMITS:
        got = ipfl.bb_node_bound(ks) if limit is None else ipfl.bb_node_bound(ks, limit)
        cap = NODE_BOUND_LIMIT if limit is None else limit
        want = [min(2**(k + 1) - 1, cap, NODE_BOUND_FLOOR + NODE_BOUND_PER_CANDIDATE * (k + 1))
                for k in NODE_BOUND_KS]
        got = np.asarray(got, dtype=float)
        off += len(want) if got.shape != ks.shape else int((got != np.array(want, float)).sum())
    return float(off)


def _root_calls_excess(market, P) -> float:
    """The generic gains' threshold root finder within its documented work: the market's
    gain as a gain of your own (its value counted) solves every pair of the market (or
    batch) at the prices ``P`` in at most ``gains.ROOT_CALLS_MAX`` calls of it, whatever
    the gain kind (the sqrt gain's closed form is bypassed: the root finder runs on it too).
    The excess over the bound relative to it (0 within it)."""
    calls = [0]
    value = market.gain.value

    def counted(x, K, N):
        calls[0] += 1
        return value(x, K, N)

    own = CallableGain(counted, label="counted")
    N, K = np.asarray(market.N, float), np.asarray(market.K, float)
    own.thresholds(P, N[..., None, :], K[..., :, None], N[..., :, None])
    return max(0.0, calls[0] / ROOT_CALLS_MAX - 1.0)

ONE_MARKET_RTOL = 1e-12
"""``one_market``'s tolerance on money (remittances, payments, gains, sharing costs,
utilities, welfare), relative to the market's scale (1 + the largest |U_i| and |p_i| of the
bulk outcome): a few ulps of the largest amount, where a sum over a different number of
markets may round differently. Adjacency, prices and thresholds are compared exactly."""


def _gap_count(x, y, scale=None) -> float:
    """Entries of ``x`` that differ from ``y`` (exactly, or beyond ONE_MARKET_RTOL x
    ``scale``); a shape mismatch or a NaN on either side counts every entry."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        return float(max(x.size, y.size, 1))
    if np.isnan(x).any() or np.isnan(y).any():
        return float(x.size)
    if scale is None:
        return float(np.sum(x != y))
    with np.errstate(invalid="ignore"):
        return float(np.sum(~(np.abs(x - y) <= ONE_MARKET_RTOL * scale) & (x != y)))


def _gap_count_b(x, y, scale=None) -> np.ndarray:
    """:func:`_gap_count` market by market (the leading axis; ``scale`` one per market)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape[:1] != y.shape[:1]:
        return np.full(len(y), float(max(x.size, y.size, 1)))
    return np.array([_gap_count(x[k], y[k], None if scale is None else scale[k])
                     for k in range(len(y))])


def _one_market_gaps(subject, market, D, mode, bulk, k: int) -> tuple[float, object]:
    """How many entries the one-market paths get differently from market ``k`` of ``bulk``
    (the subject's :func:`mechanisms.ipfl.clear_batch` outcome): the subject's ``settle``
    (:func:`mechanisms.ipfl.clear` on one Market), then each built-in rule function the
    subject runs called on the one Market (its (m,) fields, (m, m) arrays) with the bulk
    outcome's own inputs (so a stage's fault counts at that stage): the prices, the
    thresholds (:func:`mechanisms.ipfl.thresholds`), the selection (box2, local, exact,
    share-all), the payment rule (Eq. 12 and Eq. 13, VCG, Shapley, cost-plus, none) and the
    settlement (gains, sharing costs, utilities, welfare: a float for one market, as
    documented); and the subject's one-market Outcome."""
    P, T, A, p = (np.asarray(x)[k] for x in (bulk.prices, bulk.thresholds, bulk.adjacency,
                                              bulk.payments))
    R = None if bulk.remittances is None else np.asarray(bulk.remittances)[k]
    scale = 1.0 + np.abs(np.asarray(bulk.utilities)[k]).max() + np.abs(p).max()
    one = subject.settle(market, D, allow_negative=True, thresholds=fresh(mode))
    gaps = _outcome_gaps(one, bulk, k, scale)
    # the rule functions on one Market, each fed the bulk outcome's inputs
    _, price_fn = ipfl.resolve("prices", subject.prices)
    own_P = np.array(price_fn(market, D), dtype=float)
    np.fill_diagonal(own_P, np.inf)  # the clearing's convention (the diagonal is ignored)
    gaps += _gap_count(own_P, P)
    gaps += _gap_count(ipfl.thresholds(market, D, fresh(mode), prices=P), T)
    label, rule_fn = ipfl.resolve("rule", subject.rule)
    if rule_fn is not None:
        own_A = rule_fn(market, D, T, P)
    elif label == "exact":
        found = ipfl.exact(market, P, T)
        own_A = found.adjacency
        gaps += unsealed(found)  # the ExactSelection sealed as every result (proofs.seal)
    else:
        own_A = getattr(ipfl, label)(T, market.N)
    gaps += _gap_count(own_A, A)
    _, pay_fn = ipfl.resolve("payments", subject.money)
    money = np.asarray(pay_fn(market, A, D), dtype=float)
    if money.ndim == 2:
        gaps += _gap_count(money, R, scale) + _gap_count(ipfl.payments(money), p, scale)
    else:
        gaps += _gap_count(money, p, scale)
    G, C = ipfl.gains(market, A), ipfl.sharing_costs(market, A)
    gaps += _gap_count(G, bulk.gains[k], scale) + _gap_count(C, bulk.sharing_costs[k], scale)
    gaps += _gap_count(ipfl.utilities(market, A, p), bulk.utilities[k], scale)
    welfare = ipfl.welfare(market, A)
    gaps += _gap_count(welfare, bulk.welfare[k], scale)
    gaps += type(welfare) is not float  # one market's welfare: a float (its docstring)
    return gaps, one


def _outcome_gaps(one, bulk, k: int, scale: float) -> float:
    """Entries of the one-market :class:`~mechanisms.ipfl.Outcome` ``one`` that differ from
    market ``k`` of ``bulk`` (adjacency, prices, thresholds and D exactly; payments,
    remittances, gains, sharing costs, utilities and welfare to ONE_MARKET_RTOL x
    ``scale``), plus its seal's breaches (proofs.seal)."""
    P, T, A, p = (np.asarray(x)[k] for x in (bulk.prices, bulk.thresholds, bulk.adjacency,
                                              bulk.payments))
    R = None if bulk.remittances is None else np.asarray(bulk.remittances)[k]
    gaps = _gap_count(one.adjacency, A) + _gap_count(one.prices, P) \
        + _gap_count(one.thresholds, T) + _gap_count(one.D, np.asarray(bulk.D)[k]) \
        + unsealed(one)
    for got, want in ((one.payments, p), (one.gains, bulk.gains[k]),
                      (one.sharing_costs, bulk.sharing_costs[k]),
                      (one.utilities, bulk.utilities[k]), (one.welfare, bulk.welfare[k])):
        gaps += _gap_count(got, want, scale)
    if (one.remittances is None) != (R is None):
        gaps += 1
    elif R is not None:
        gaps += _gap_count(one.remittances, R, scale)
    return gaps


_RECLEARED = ("rule", "payment_rule", "price_rule", "threshold_mode", "options")
"""The fields of an :class:`~mechanisms.ipfl.Outcome` that :meth:`~mechanisms.ipfl.Outcome.reclear`
keeps whatever market it clears (its docstring: the same rules and options)."""


def _reclear_gaps(one, market, D, bulk, k: int, scale: float) -> float:
    """:meth:`mechanisms.ipfl.Outcome.reclear`, documented as clearing again with the same
    rules and options: ``one.reclear(market=market, D=D)`` (``market`` and ``D`` market
    ``k`` of the batch; ``None`` for ``one``'s own) must be :func:`_outcome_gaps`-equal to
    market ``k`` of ``bulk`` and keep ``one``'s rules and options (:data:`_RECLEARED`)."""
    again = one.reclear(market=market, D=D)
    kept = sum(getattr(again, f) != getattr(one, f) for f in _RECLEARED)
    return _outcome_gaps(again, bulk, k, scale) + kept


FRAME_COLUMNS = ("client", "n_bought", "n_sold", "paid", "earned", "payment", "gain",
                 "utility")
"""The columns of :meth:`mechanisms.ipfl.Outcome.to_frame`, in order (its docstring)."""


def _frame_gaps(one, scale: float) -> float:
    """Entries of :meth:`mechanisms.ipfl.Outcome.to_frame` that differ from the outcome it
    tabulates, one row per client in id order (its docstring): n_bought / n_sold the
    adjacency's row / column sums, payment, gain and utility the outcome's own (exactly);
    paid / earned the sums of the remittances' rows / columns (to ONE_MARKET_RTOL x
    ``scale``), or for a rule that returns payments, what the client pays to / receives
    from the operator: both >= 0, at most one of them non-zero, paid - earned = payment
    exactly. A column missing or out of order counts every client."""
    frame = one.to_frame()
    m = one.m
    if tuple(frame.columns) != FRAME_COLUMNS or len(frame) != m:
        return float(max(m, 1))
    A = np.asarray(one.adjacency)
    col = {c: frame[c].to_numpy() for c in FRAME_COLUMNS}
    gaps = _gap_count(col["client"], np.arange(m)) + _gap_count(col["n_bought"], A.sum(axis=1)) \
        + _gap_count(col["n_sold"], A.sum(axis=0)) + _gap_count(col["payment"], one.payments) \
        + _gap_count(col["gain"], one.gains) + _gap_count(col["utility"], one.utilities)
    paid, earned = col["paid"].astype(float), col["earned"].astype(float)
    R = one.remittances
    if R is not None:
        return gaps + _gap_count(paid, np.sum(R, axis=1), scale) \
            + _gap_count(earned, np.sum(R, axis=0), scale)
    with np.errstate(invalid="ignore"):
        wrong = ~((paid >= 0) & (earned >= 0) & ((paid == 0) | (earned == 0))
                  & (paid - earned == np.asarray(one.payments)))
    return gaps + float(np.sum(wrong))


TWO_DIMS = ("adjacency", "prices", "thresholds", "remittances", "payments", "gains",
            "sharing_costs", "utilities", "welfare", "exact_methods", "exact_gap", "D")
"""The fields of an :class:`~mechanisms.ipfl.OutcomeBatch` that ``one_market`` compares
between a batch with two leading dimensions and the same markets in one."""


def _two_dims_gaps(subject, a, bulk, gain, mode) -> np.ndarray:
    """Per market of ``bulk`` (:func:`mechanisms.ipfl.clear_batch` of the batch ``a``), the
    entries that differ when its first 2 x (B // 2) markets are cleared as a batch of shape
    (2, B // 2): the API takes any leading batch dimensions (``MarketArrays`` (..., m),
    ``D`` (..., m, m)), so the answer must not depend on how they are laid out. Adjacency,
    prices, thresholds and methods exactly, money to ONE_MARKET_RTOL of the market's scale
    (as one market against the batch), the market's own fields and the shape exactly."""
    B = len(a["N"])
    h = B // 2
    gaps = np.zeros(B)
    if h == 0:
        return gaps

    def two(x):
        return np.asarray(x)[:2 * h].reshape(2, h, *np.shape(x)[1:])

    out = ipfl.clear_batch(
        ipfl.MarketArrays(two(a["N"]), two(a["c"]), two(a["K"]), two(a["lam"]), gain=gain),
        two(a["D"]), subject.rule, payments=subject.money, prices=subject.prices,
        thresholds=mode, allow_negative_distances=True, allow_asymmetric_distances=True)
    scale = 1.0 + np.abs(bulk.utilities).max(axis=-1) + np.abs(bulk.payments).max(axis=-1)
    gaps[:2 * h] += (out.shape != (2, h)) + unsealed(out)
    for f in TWO_DIMS:
        got, want = getattr(out, f), getattr(bulk, f)
        if (got is None) != (want is None):
            gaps[:2 * h] += 1
            continue
        if got is None:
            continue
        got = np.asarray(got)
        flat = got.reshape(2 * h, *got.shape[2:]) if got.shape[:2] == (2, h) else got
        if flat.dtype.kind in "OUS":  # the exact rule's methods: names
            want = np.asarray(want)[:2 * h]
            same = flat.shape == want.shape
            gaps[:2 * h] += ([float(np.sum(flat[k] != want[k])) for k in range(2 * h)]
                             if same else float(max(flat.size, 1)))
            continue
        money = f not in ("adjacency", "prices", "thresholds", "D")
        gaps[:2 * h] += _gap_count_b(flat, np.asarray(want)[:2 * h],
                                     scale[:2 * h] if money else None)
    # the baselines' ledger (mechanisms.ipfl.baseline_utilities) over both layouts, for
    # the full graph and the outcome's
    for W in (np.ones(np.shape(bulk.adjacency)), np.asarray(bulk.adjacency, float)):
        got = np.asarray(ipfl.baseline_utilities(out.market, two(W)), float)
        flat = got.reshape(2 * h, *got.shape[2:]) if got.shape[:2] == (2, h) else got
        want = np.asarray(ipfl.baseline_utilities(bulk.market, W), float)[:2 * h]
        gaps[:2 * h] += _gap_count_b(flat, want, scale[:2 * h])
    for f in ("N", "c", "K", "lam", "true_N", "true_c", "true_K"):
        got = np.asarray(getattr(out.market, f))
        flat = got.reshape(2 * h, *got.shape[2:]) if got.shape[:2] == (2, h) else got
        gaps[:2 * h] += _gap_count_b(flat, np.asarray(getattr(bulk.market, f))[:2 * h])
    if bulk.price_rule == "paper":
        gaps += _paper_prices_layouts(a, bulk)
    return gaps


BIG_BATCH = 2**17
"""Entries of the (..., m, m) prices in the large batch ``one_market`` asks
:func:`mechanisms.ipfl.paper_prices_arrays` for (markets repeated): past any blocking of a
batch into a few hundred kB."""


def _paper_prices_layouts(a, bulk) -> np.ndarray:
    """Per market, the entries of Eq. 10's prices (the bulk outcome's, the "paper" price
    rule) that :func:`mechanisms.ipfl.paper_prices_arrays` gives differently when its
    arrays are laid out otherwise, as its signature allows (``N``, ``c`` (..., m), ``lam``
    (...,) or a number, ``D`` (..., m, m), broadcast against each other): two leading
    dimensions; a batch of BIG_BATCH entries (the markets repeated); one D shared by the
    batch ((m, m)); one lam for the batch (a number). Exactly: the same elementwise
    formula."""
    N, c, lam, D = (np.asarray(a[f], dtype=float) for f in ("N", "c", "lam", "D"))
    B, m = N.shape
    P = np.asarray(bulk.prices)
    gaps = np.zeros(B)
    h = B // 2
    if h:
        got = ipfl.paper_prices_arrays(*(x[:2 * h].reshape(2, h, *x.shape[1:])
                                         for x in (N, c, lam, D)))
        gaps[:2 * h] += _gap_count_b(np.reshape(got, (2 * h, m, m)) if got.size == 2 * h * m * m
                                     else got, P[:2 * h])
    reps = -(-BIG_BATCH // (B * m * m))
    got = ipfl.paper_prices_arrays(*(np.concatenate([x] * reps) for x in (N, c, lam, D)))
    if got.shape != (reps * B, m, m):
        gaps += m * m
    else:
        # exactly, per market over its repeats (a NaN on either side differs)
        same = got.reshape(reps, B, m, m) == P
        gaps += np.sum(~same, axis=(0, 2, 3))
    for k in ({0, B - 1} if B else ()):
        # market k's D shared by the batch, market k's lam as a number: market k's prices
        shared = ipfl.paper_prices_arrays(N, c, lam, D[k])
        one = ipfl.paper_prices_arrays(N, c, float(lam[k]), D)
        if shared.shape != (B, m, m) or one.shape != (B, m, m):
            gaps[k] += m * m
            continue
        gaps[k] += _gap_count(shared[k], P[k]) + _gap_count(one[k], P[k])
        # and every other market priced with it as its own: N, c of that market, D of k
        same_lam = lam == lam[k]
        gaps[k] += _gap_count(one[same_lam], P[same_lam])
    return gaps


def _own_log_gain(x, K, N):
    """A gain of your own (K log(1 + x/N) as a plain function)."""
    return K * np.log1p(x / N)


def _one_market_check(settle, a, subject=None):
    """One market is the batch of one (issue 34, one implementation): on every market of
    the batch, :func:`mechanisms.ipfl.clear` (the subject's own ``settle``) and the
    subject's built-in rule functions called on one :class:`mechanisms.ipfl.Market` give
    what :func:`mechanisms.ipfl.clear_batch` gives that market in the batch
    (:func:`_one_market_gaps`; adjacency, prices and thresholds exactly, money to
    :data:`ONE_MARKET_RTOL` of the market's scale, a NaN a failure), and so do the
    Outcome's own methods: ``reclear`` (the first market's outcome cleared again as it is
    and with the second market and D, :func:`_reclear_gaps`) and ``to_frame``
    (:func:`_frame_gaps`). The violation counts
    the entries that differ; a one-market path refusing a market the bulk code cleared
    fails by inf. Not checked for a subject without bulk code (a rule of your own not
    written over arrays, a subclass clearing its own way): nothing to compare with."""
    B = len(a["N"])
    if subject is None or batch_rule(subject) is None:
        return np.zeros(B), np.zeros(B, bool)
    gain, mode = a.get("gain") or "sqrt", a.get("thresholds") or "exact"
    bulk = ipfl.clear_batch(
        ipfl.MarketArrays(a["N"], a["c"], a["K"], a["lam"], gain=gain), a["D"], subject.rule,
        payments=subject.money, prices=subject.prices, thresholds=mode,
        allow_negative_distances=True, allow_asymmetric_distances=True)
    # the subject's clearing as the engine runs it (the batch engine: its bulk settle; the
    # Hypothesis engine: its own settle on the one market, counted and error-wrapped by the
    # checker) against the bulk outcome, then every one-market path market by market
    own = _truthful(settle, a)
    gaps = (_gap_count_b(own["A"], bulk.adjacency) + _gap_count_b(own["P"], bulk.prices)
            + _gap_count_b(own["T"], bulk.thresholds))
    scale = 1.0 + np.abs(bulk.utilities).max(axis=-1) + np.abs(bulk.payments).max(axis=-1)
    for got, want in ((own["p"], bulk.payments), (own["U"], bulk.utilities)):
        gaps += _gap_count_b(got, want, scale)
    gaps += unsealed(bulk)  # the batch's outcome sealed (proofs.seal), its market too
    # the same markets as a batch of two leading dimensions (the API's (..., m))
    gaps += _two_dims_gaps(subject, a, bulk, gain, mode)
    # a gain of your own becomes a CallableGain a Market holds: sealed as the built-in ones
    gaps += unsealed(as_gain(_own_log_gain))
    first = None  # market 0's one-market outcome
    for k in range(B):
        # the caller's own arrays (writeable copies): after every one-market path they hold
        # the same values and are still writeable (proofs.seal.handed_back)
        mine = {f: np.array(a[f][k]) for f in ("N", "c", "K", "D")}
        kept = {f: v.copy() for f, v in mine.items()}
        market = ipfl.Market(N=mine["N"], c=mine["c"], K=mine["K"], lam=float(a["lam"][k]),
                             gain=bulk.market.gain)
        try:
            # the market stacked alone (MarketArrays.from_markets of one) is row k of the batch
            alone = ipfl.MarketArrays.from_markets([market])
            gaps[k] += sum(_gap_count(getattr(alone, f)[0], getattr(bulk.market, f)[k])
                           for f in ("N", "c", "K", "lam", "true_N", "true_c", "true_K"))
            gaps[k] += alone.gain != bulk.market.gain
            found, one = _one_market_gaps(subject, market, mine["D"], mode, bulk, k)
            gaps[k] += found
            # the outcome's own methods (once a batch: each clears again): cleared again
            # as it is, and the first market's outcome cleared again with the second's
            # market and D; the first tabulated (to_frame)
            if k == 0:
                first = one
                gaps[k] += _reclear_gaps(one, None, None, bulk, k, scale[k]) \
                    + _frame_gaps(one, scale[k])
            elif k == 1 and first is not None:
                gaps[k] += _reclear_gaps(first, market, mine["D"], bulk, k, scale[k])
            gaps[k] += unsealed(market) + unsealed(alone) + handed_back(kept, mine)
        except FedmarketError:
            gaps[k] = np.inf  # the one-market path refused a market the bulk code cleared
    return gaps, np.ones(B, bool)


_one_market_check.reads_subject = True

budget_balance = _one_market(_budget_balance)
individual_rationality = _one_market(_individual_rationality)
local_optimality = _one_market(_local_optimality)
lemma1_monotone_sales = _one_market(_lemma1)
thm3_isolation = _one_market(_thm3)
global_optimality = _one_market(_global_optimality)
permutation_equivariance = _one_market(_permutation)
no_deficit = _one_market(_no_deficit)
budget_identity = _one_market(_budget_identity)
shapley_efficiency = _one_market(_shapley_efficiency)
shapley_symmetry = _one_market(_shapley_symmetry)
greedy_tie_rule = _one_market(_greedy_tie_rule)
pure_sellers_never_buy = _one_market(_pure_sellers_never_buy)
one_path = _one_market(_one_path)
work_bound = _one_market(_work_bound)
one_market = _one_market(_one_market_check)
box2_prefix = _one_market(_box2_prefix)


def operator_balance(subject, case) -> tuple[str, float]:
    """(side, amount) of the operator's balance on ``case``: amount = sum_i p_i, signed
    (positive a surplus it keeps, negative a deficit it pays), and side "deficit", "surplus"
    or "balanced" (|amount| within float rounding of the market's scale)."""
    s = _settle(subject, case)
    total, tol = float(s.payments.sum()), _TOL * _scale(s)
    return ("deficit" if total < -tol else "surplus" if total > tol else "balanced"), total


def budget_side(subject, case) -> str:
    """"deficit" (sum p < 0: the operator pays), "surplus" (sum p > 0) or "balanced"
    (the side of :func:`operator_balance`)."""
    return operator_balance(subject, case)[0]


# ------------------------------------------------------------------ the misreport searches


def misreports_batch(settle, a: dict, dimension: str, direction: str,
                     **search) -> tuple[MisreportBatch, dict]:
    """(the best misreport of ``a["client"]``'s ``dimension`` in ``direction`` for every
    market of the batch ``a``, the truthful clearing), cleared with ``settle`` (a
    :func:`settle_batch`-like function): :func:`proofs.regret.regret_arrays` over B x
    (grid + refinement) markets per call."""
    i = a["client"]
    truth_all = a[dimension]
    truth = _rows(truth_all, i)
    ok = np.isfinite(truth_all) & (truth_all > 0)
    count = ok.sum(axis=1)
    reference = np.where(count > 0, np.where(ok, truth_all, 0.0).sum(axis=1)
                         / np.maximum(count, 1), 1.0)
    honest = _truthful(settle, a)
    honest_u = _rows(honest["U"], i)

    def utilities(values):
        # a market whose every report is the truth (a type the search cannot move: c = inf,
        # K = 0, a zero it cannot understate) is the truthful market: its utilities are the
        # truthful clearing's, not cleared again (the search reads none of them)
        k = values.shape[1]
        out = np.repeat(honest_u[:, None], k, axis=1)
        moved = np.flatnonzero(~(values == truth[:, None]).all(axis=1))
        if not moved.size:
            return out
        sub = {d: a[d][moved] for d in ("N", "c", "K", "lam", "D")}
        who = np.repeat(i[moved], k)
        rep = {d: np.repeat(sub[d], k, axis=0) for d in ("N", "c", "K")}
        truth_rep = dict(rep)
        rep[dimension] = _with(rep[dimension], who, values[moved].ravel())
        s = settle(rep["N"], rep["c"], rep["K"], np.repeat(sub["lam"], k),
                   np.repeat(sub["D"], k, axis=0), true_N=truth_rep["N"],
                   true_c=truth_rep["c"], true_K=truth_rep["K"])
        out[moved] = _rows(s["U"], who).reshape(moved.size, k)
        return out

    found = regret_arrays(utilities, truth, reference, honest_u, direction, **search)
    return found, honest


def misreports_joint_batch(settle, a: dict, dimensions: tuple[str, str],
                           **search) -> tuple[JointMisreportBatch, dict]:
    """(the best joint misreport of ``a["client"]``'s two ``dimensions`` at once, each
    either way, for every market of the batch ``a``, the truthful clearing), cleared with
    ``settle``: :func:`proofs.regret.joint_regret_arrays`, the reference levels of a zero
    type as in :func:`misreports_batch`."""
    i = a["client"]
    B = a["N"].shape[0]
    cols = []
    for dim in dimensions:
        x = a[dim]
        ok = np.isfinite(x) & (x > 0)
        count = ok.sum(axis=1)
        ref = np.where(count > 0, np.where(ok, x, 0.0).sum(axis=1) / np.maximum(count, 1), 1.0)
        cols.append((_rows(x, i), ref))
    truth = np.stack([t for t, _ in cols], axis=1)
    reference = np.stack([r for _, r in cols], axis=1)
    honest = _truthful(settle, a)

    def utilities(values):  # (B, k, 2)
        k = values.shape[1]
        rep = {d: np.repeat(a[d], k, axis=0) for d in ("N", "c", "K")}
        truth_rep = dict(rep)
        who = np.repeat(i, k)
        for col, dim in enumerate(dimensions):
            rep[dim] = _with(rep[dim], who, values[..., col].ravel())
        s = settle(rep["N"], rep["c"], rep["K"], np.repeat(a["lam"], k),
                   np.repeat(a["D"], k, axis=0), true_N=truth_rep["N"],
                   true_c=truth_rep["c"], true_K=truth_rep["K"])
        return _rows(s["U"], who).reshape(B, k)

    found = joint_regret_arrays(utilities, truth, reference, _rows(honest["U"], i), **search)
    return found, honest


def _regret_amount(gain, spread, tol):
    """The regret statement, elementwise: the gain beyond the tolerance is the violation (a
    NaN utility anywhere in the search, spread inf, is a failure); an instance on which no
    lie changed the liar's utility could not have shown a regret (not discriminating)."""
    return np.where(np.isinf(spread), np.inf, _excess(gain, tol)), spread > tol


def _regret(dimension: str, direction: str):
    def evaluate(settle, a):
        found, honest = misreports_batch(settle, a, dimension, direction,
                                         **(a.get("search") or {}))
        gain = found.lying_utility - found.honest_utility
        amount, discriminating = _regret_amount(gain, found.spread, _TOL * _scale_b(honest))
        return amount, np.ones(len(gain), bool), discriminating

    return evaluate


_SEARCH = {"span": 100.0, "grid": 8, "starts": 2, "maxiter": 10}


def best_misreport(subject, case, dimension: str, direction: str, *, first: bool = False):
    """(the best misreport found, the truthful outcome).

    A subject the batch engine clears in bulk (built-in or :func:`mechanisms.ipfl.over_arrays`
    rules, the paper's prices, sqrt gain) is searched by the vectorised search
    :func:`proofs.regret.regret_arrays` (the same search the batch engine runs, so both
    engines agree on every instance); any other subject by the scalar
    :func:`proofs.regret.regret_search`, where ``first`` stops at the first profitable lie
    beyond the tolerance."""
    import time

    honest = _settle(subject, case)
    inner = getattr(subject, "_subject", subject)
    mk = case.market
    settle = batch_rule(inner)
    if settle is not None and type(mk.gain) is ipfl.SqrtGain and mk.truthful:
        t0 = time.perf_counter()
        a = {"N": mk.N[None], "c": mk.c[None], "K": mk.K[None], "lam": np.array([mk.lam]),
             "D": np.asarray(case.D, dtype=float)[None], "client": np.array([case.client])}
        found, _ = misreports_batch(settle, a, dimension, direction,
                                    **(getattr(case, "search", None) or {}))
        truth = float(getattr(mk, f"true_{dimension}")[case.client])
        # honest and lying utilities from the same (bulk) clearing of the subject
        return Misreport(case.client, dimension, direction, float(found.factor[0]), truth,
                         float(found.report[0]), float(found.honest_utility[0]),
                         float(found.lying_utility[0]), found.evaluations,
                         time.perf_counter() - t0, float(found.spread[0])), honest
    stop = _TOL * _scale(honest) if first else None
    opts = dict(_SEARCH)
    wanted = getattr(case, "search", None)
    if wanted:  # the scalar search's equivalents of the vectorised search's settings
        opts.update({k: wanted[k] for k in ("span", "grid", "starts") if k in wanted})
        if "iters" in wanted:
            opts["maxiter"] = int(wanted["iters"]) + 2
    return regret_search(subject.settle, case.market, case.D, case.client, dimension,
                         direction, honest=honest, stop_above=stop,
                         batch=grid_batch(subject, case, dimension), **opts), honest


def grid_batch(subject, case, dimension: str):
    """The regret search's grid cleared in one vectorised call, where the rule allows: a
    subject the batch engine clears in bulk with a greedy or array selection (the bulk exact
    enumeration measured slower than clearing one by one; benchmarks/bench_regret.py) and the
    paper's prices (:mod:`proofs.batch`), the sqrt gain, and N or c misreports (bulk clearing
    has no separate true K). None otherwise (the grid is then cleared market by market)."""
    inner = getattr(subject, "_subject", subject)
    settle = batch_rule(inner)
    mk = case.market
    if settle is None or getattr(inner, "rule", None) == "exact" or dimension == "K" \
            or type(mk.gain) is not ipfl.SqrtGain or not mk.truthful:
        return None
    i, D = case.client, np.asarray(case.D, dtype=float)

    def utilities(values):
        G = len(values)
        rows = {d: np.tile(getattr(mk, d), (G, 1)) for d in ("N", "c", "K")}
        rows[dimension][:, i] = values
        out = settle(rows["N"], rows["c"], rows["K"], np.full(G, mk.lam),
                     np.broadcast_to(D, (G, mk.m, mk.m)), true_N=np.tile(mk.N, (G, 1)),
                     true_c=np.tile(mk.c, (G, 1)))
        return out["U"][:, i]

    return utilities


def _no_regret(dimension: str, direction: str):
    def violation(subject, case):
        # the full search, not the first profitable lie: a counterexample's figure is the
        # largest gain the search finds (stopping early saves nothing on instances where no
        # lie pays, and on a failing one the figure would be whichever lie came first)
        found, honest = best_misreport(subject, case, dimension, direction)
        gain = found.lying_utility - found.honest_utility
        tol = _TOL * _scale(honest)
        # the gain steers the search; float noise within the tolerance (a truthful rule's
        # "gains" of 1e-13) is no direction: Hypothesis' optimiser hill-climbed that noise for
        # minutes (vcg, truthful_K_over: 852 examples in 225 s, 2,000 in 16 s without it)
        score = gain if np.isfinite(gain) and abs(gain) > tol else 0.0
        amount, discriminating = _regret_amount(np.array([gain]), np.array([found.spread]),
                                                tol)
        return float(amount[0]), score, bool(discriminating[0])

    violation.__name__ = f"regret_{dimension}_{direction}"
    violation.dimension, violation.direction = dimension, direction
    return violation


thm2_no_gain_from_overstating_c = _no_regret("c", "over")


# ---------------------------------------------------------------------------- the list

_BASE = "truthful reports; d_ij >= 0"
# Eq. 10's global optimum is enumerated over every subset of sellers: 2^(m-1) per buyer
GLOBAL_MAX_CLIENTS = 8

_EVERY = ("every effective example (no discriminating flag: {what}, checked on each, "
          "could break on any market)")
_LIE = ("some misreport the search tried changed the liar's true utility (by more than "
        "the tolerance); a lie that changes nothing cannot show a regret")
# which effective examples could have failed each property (Property.discriminates)
DISCRIMINATES = {
    "budget_balance": _EVERY.format(what="every payment"),
    "no_deficit": _EVERY.format(what="every payment"),
    "individual_rationality": _EVERY.format(what="every client's utility"),
    "ir_negative_distances": _EVERY.format(what="every client's utility"),
    "local_optimality": _EVERY.format(what="every buyer's single flips"),
    "global_optimality": _EVERY.format(what="every buyer's choice against all subsets"),
    "permutation": _EVERY.format(what="the relabelled outcome"),
    "permutation_ties": _EVERY.format(what="the relabelled outcome"),
    "lemma1": "the overstated cost changed who buys from the liar (an unchanged column "
              "cannot gain a buyer)",
    "thm3": "the client whose N grows sells to somebody in the truthful market or after "
            "(isolation then has something to remove, or failed)",
    "thm3_lam0": "the client whose N grows sells to somebody in the truthful market or "
                 "after",
    **{key: _LIE for key in ("thm2", "truthful_N_over", "truthful_N_under",
                             "truthful_c_under", "truthful_K_over", "truthful_K_under")},
    "budget_identity": "somebody traded (with no trade every term is 0)",
    "shapley_efficiency": "somebody bought (a buyer's shares are then summed)",
    "shapley_symmetry": "some buyer bought both identical sellers",
    "greedy_tie_rule": "some buyer took exactly one of the two identical sellers",
    "pure_sellers_never_buy": "some pure seller could buy: another client's model is on "
                              "sale (finite c_j), whatever its price",
    "box2_prefix": "some buyer left out a client that is not the last in its threshold "
                   "order (a later purchase would break the prefix)",
    "one_path": "an alternative algorithm had work to do: a buyer with two or more sellers "
                "worth buying alone (greedy), a candidate to search (exact), a trade (VCG)",
    "one_market": _EVERY.format(what="every entry of the one-market outcome and of each "
                                     "rule function against the bulk clearing's"),
    "work_bound": "some buyer had a candidate to search (0 < T_ij < inf): its "
                  "branch-and-bound explored nodes to count",
}

# key -> the check the property's violation runs on one market and its batch hook on a batch
_CHECKS = {
    "budget_balance": _budget_balance, "no_deficit": _no_deficit,
    "budget_identity": _budget_identity, "shapley_efficiency": _shapley_efficiency,
    "shapley_symmetry": _shapley_symmetry, "greedy_tie_rule": _greedy_tie_rule,
    "individual_rationality": _individual_rationality,
    "ir_negative_distances": _individual_rationality,
    "local_optimality": _local_optimality, "global_optimality": _global_optimality,
    "lemma1": _lemma1, "thm3": _thm3, "thm3_lam0": _thm3,
    "pure_sellers_never_buy": _pure_sellers_never_buy, "box2_prefix": _box2_prefix,
    "one_path": _one_path, "one_market": _one_market_check, "work_bound": _work_bound,
    "permutation": _permutation, "permutation_ties": _permutation,
    "thm2": _regret("c", "over"),
    **{f"truthful_{dim}_{way}": _regret(dim, way)
       for dim in ("N", "c", "K") for way in ("over", "under") if (dim, way) != ("c", "over")},
}

IPFL_PROPERTIES = {
    p.key: dataclasses.replace(p, clients=p.instances.clients, batch=_hook(_CHECKS[p.key]),
                               discriminates=DISCRIMINATES[p.key])
    for p in [
        Property("budget_balance", "Budget balance", "sum_i p_i = 0", "Eq. 13",
                 _BASE, "ipfl", _cases(**_ALL), budget_balance),
        Property("individual_rationality", "Individual rationality",
                 "U_i >= 0 for every client", "Thm 1", _BASE, "ipfl", _cases(**_GAINS_ONLY),
                 individual_rationality),
        Property("ir_negative_distances", "Individual rationality, negative d allowed",
                 "U_i >= 0 for every client", "Thm 1 (precondition dropped)",
                 "truthful reports; d_ij may be < 0", "ipfl", _cases(negative=True),
                 individual_rationality,
                 note="one neighbour alone gives U_i = lam (N_j/N_i) d_ij < 0"),
        Property("local_optimality", "Local optimality (Eq. 11)",
                 "no single addition or removal lowers phi_i", "Eq. 11 / Box 2",
                 _BASE, "ipfl", _cases(**_GAINS_ONLY), local_optimality),
        Property("global_optimality", "Global optimality of each buyer's choice",
                 "phi_i(a_i) = min over all subsets S of phi_i(S)", "Eq. 10",
                 _BASE + " (subsets enumerated)", "ipfl",
                 _cases(max_m=GLOBAL_MAX_CLIENTS, **_GAINS_ONLY),
                 global_optimality, note="the greedy rules are heuristics (the paper says so)"),
        Property("lemma1", "Monotone sales in the reported cost",
                 "reporting c_i' > c_i weakly shrinks {j : a_ji = 1}", "Lemma 1",
                 _BASE + "; one client overstates c", "ipfl", _cases(liar="over", **_GAINS_ONLY),
                 lemma1_monotone_sales),
        Property("thm2", "No gain from overstating c",
                 "overstating c_i never raises i's true utility (regret search)", "Thm 2",
                 _BASE + "; one client overstates c (x 1 to 100)", "ipfl",
                 _cases(liar="who"), thm2_no_gain_from_overstating_c),
        Property("thm3", "Isolation as N_i grows",
                 "reported N_i -> inf (here x 1e12) => nobody buys from i", "Thm 3",
                 "d_ji > 0 for all j; lam > 0", "ipfl",
                 _cases(positive=True, lam_min=0.01, liar="who"), thm3_isolation),
        Property("thm3_lam0", "Isolation as N_i grows, lam = 0 allowed",
                 "reported N_i -> inf (here x 1e12) => nobody buys from i",
                 "Thm 3 (precondition dropped)", "d_ji > 0 for all j; lam >= 0", "ipfl",
                 _cases(positive=True, liar="who"), thm3_isolation,
                 note="with lam = 0 the price c_i ignores N_i, and g(N_i) -> sqrt(K_j/N_j)"),
        Property("permutation", "Permutation equivariance",
                 "relabelling clients permutes the graph and the payments", "-",
                 _BASE + "; no two clients identical (no tied thresholds)", "ipfl",
                 _cases(perm=True, **_ALL), permutation_equivariance),
        Property("permutation_ties", "Permutation equivariance with tied clients",
                 "relabelling clients permutes the graph and the payments",
                 "- (precondition dropped)", _BASE + "; two identical clients", "ipfl",
                 _cases(perm=True, ties=True), permutation_equivariance,
                 note="ties break by index, so identical clients swap roles"),
        *[Property(f"truthful_{dim}_{way}", f"No gain from {way}stating {dim}",
                   f"{way}stating {dim}_i never raises i's true utility (regret search)",
                   ref, _BASE + f" for all but the liar; {dim}_i x "
                   + ("1 to 100" if way == "over" else "1/100 to 1"), "ipfl",
                   _cases(liar="who"), _no_regret(dim, way))
          for dim, way, ref in [("N", "over", "Table 2 (not a theorem)"),
                                ("N", "under", "Table 2 (not a theorem)"),
                                ("c", "under", "- (Thm 2 covers overstating only)"),
                                ("K", "over", "- (K has no theorem)"),
                                ("K", "under", "- (K has no theorem)")]],
        Property("no_deficit", "No deficit (weak budget balance)",
                 "sum_i p_i >= 0: the operator never pays", "-", _BASE, "ipfl", _cases(**_ALL),
                 no_deficit),
        Property("budget_identity", "Budget identity",
                 "sum_i U_i = SW - sum_i p_i: utilities add up to the welfare less what "
                 "leaves the market", "Eqs. 3, 5", _BASE, "ipfl", _cases(**_ALL),
                 budget_identity),
        Property("shapley_efficiency", "Shapley efficiency",
                 "for every buyer i, sum_j Sh_ij = g_i(sum_j a_ij N_j) - g_i(0) with Sh_ij = "
                 "r_ij + lam (N_j/N_i) d_ij", "Shapley value (efficiency)",
                 _BASE + "; the rule returns remittances", "ipfl", _cases(**_ALL),
                 shapley_efficiency),
        Property("shapley_symmetry", "Shapley symmetry",
                 "two sellers identical but for the label get the same Sh_ij from every "
                 "buyer of both", "Shapley value (symmetry)",
                 _BASE + "; clients 1 and 2 identical; the rule returns remittances", "ipfl",
                 _cases(ties=True, min_m=3, **_ALL), shapley_symmetry),
        Property("pure_sellers_never_buy", "Pure sellers never buy",
                 "K_i = 0 => a_ij = 0 for every j", "Types (K_i = 0: a pure seller)",
                 _BASE, "ipfl", _cases(**_ALL), pure_sellers_never_buy),
        Property("greedy_tie_rule", "Greedy tie rule",
                 "between two sellers with tied thresholds a buyer that takes one takes the "
                 "lower index", "Box 2 (ties: lower index first, as documented)",
                 _BASE + "; clients 1 and 2 identical", "ipfl", _cases(ties=True, min_m=3),
                 greedy_tie_rule),
        Property("box2_prefix", "Box 2 stops at the first failure",
                 "each buyer buys a prefix of the others ordered by T_ij descending (ties: "
                 "the lower index first)", "Box 2 (as printed: STOP at the first failure)",
                 _BASE, "ipfl", _cases(min_m=3), box2_prefix,
                 note="the local rule skips a failing client and goes on; the batch engine "
                      "draws the market sizes uniformly here (a prefix breaks mostly in large "
                      "markets; the other properties favour small ones)"),
        Property("one_path", "Every algorithm agrees",
                 "the algorithms a built-in rule may pick give one outcome: the greedy scan "
                 "of the top thresholds and of all, exact's enumeration, dynamic programme "
                 "and branch-and-bound, VCG's pivot by enumeration and by search",
                 "one implementation (issue 34)", _BASE, "ipfl", _cases(**_ALL),
                 one_path,
                 note="rules of your own and share-all have no alternative (nothing to "
                      "compare: not checked)"),
        Property("work_bound", "Branch-and-bound's work within its bound",
                 "the exact selection's branch-and-bound, run on every buyer, explores at "
                 "most ipfl.bb_node_bound(k) = min(2^(k+1) - 1, ipfl.NODE_LIMIT, "
                 "ipfl.BB_NODES_FLOOR + ipfl.BB_NODES_PER_CANDIDATE (k + 1)) nodes for a "
                 "buyer with k candidates, at least one where k > 0 (ExactSelection.nodes), "
                 "the bound being that formula with the documented constants (511, 8, "
                 "20,000) at every k up to 300; "
                 "the generic gains' threshold root finder calls the gain at most "
                 "gains.ROOT_CALLS_MAX times",
                 "the documented bound (mechanisms/ipfl/selection.py)", _BASE, "ipfl",
                 _cases(**_ALL), work_bound,
                 note="the bound beyond the full tree and the node limit is measured "
                      "(branch-and-bound is exponential in the worst case); the subjects "
                      "whose rule is the exact selection declare it"),
        Property("one_market", "One market is the batch of one",
                 "ipfl.clear on one market and the subject's built-in rule functions called "
                 "on one Market (prices, thresholds, selection, payments, settlement) give "
                 "what ipfl.clear_batch gives that market in a batch: adjacency, prices and "
                 "thresholds exactly, money to 1e-12 of the market's scale; the Outcome's "
                 "reclear (as it is, and with another market and D) and to_frame agree "
                 "with it; every result "
                 "sealed (a frozen dataclass, read-only arrays: the outcomes, the markets, "
                 "a gain of your own, ipfl.exact's ExactSelection) and the caller's N, c, K "
                 "and D handed back unchanged "
                 "and writeable (proofs.seal)",
                 "one implementation (issue 34)", _BASE, "ipfl", _cases(**_ALL),
                 one_market,
                 note="a NaN is a failure; a one-market path refusing a market the bulk "
                      "code cleared fails by inf; subjects without bulk code are not "
                      "checked"),
    ]
}


def tiny_markets(m: int = 3, *, N=(100.0, 400.0), c=(0.0, 0.5, np.inf), K=(0.0, 5e4),
                 lam=(0.0, 2.0), d=(0.0, 0.1, 1.0)):
    """Every market on a grid of types with symmetric distances (exhaustive checks)."""
    import itertools

    types = list(itertools.product(N, c, K))
    pairs = [(i, j) for i in range(m) for j in range(i + 1, m)]
    for combo in itertools.product(types, repeat=m):
        Ns, cs, Ks = (np.array(x, dtype=float) for x in zip(*combo, strict=True))
        for lm in lam:
            market = ipfl.Market(N=Ns, c=cs, K=Ks, lam=lm)
            for ds in itertools.product(d, repeat=len(pairs)):
                D = np.zeros((m, m))
                for (i, j), v in zip(pairs, ds, strict=True):
                    D[i, j] = D[j, i] = v
                yield IpflCase(market, D)
