"""The iPFL properties (Zhang et al. 2025; spec ipfl.md "Properties"), each with its exact
preconditions built into its instance strategy, and the variants with a precondition dropped.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from mechanisms import ipfl

from .core import Property, excess
from .regret import Misreport, regret_search
from .strategies import MAX_CLIENTS, ipfl_instances, misreports

__all__ = [
    "GLOBAL_MAX_CLIENTS",
    "IPFL_PROPERTIES",
    "IpflCase",
    "best_misreport",
    "budget_side",
    "operator_balance",
    "tiny_markets",
]

_TOL = 1e-9


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

    ``code()`` is Python that rebuilds it as ``case`` (needs numpy as np, ipfl, IpflCase).
    """

    market: ipfl.Market
    D: np.ndarray
    client: int | None = None
    factor: float | None = None
    perm: np.ndarray | None = None

    def code(self) -> str:
        mk = self.market
        D = np.asarray(self.D)
        rows = ",\n     ".join(_arr(r) for r in D)
        s = (f"market = ipfl.Market(N={_arr(mk.N)}, c={_arr(mk.c)}, K={_arr(mk.K)}, "
             f"lam={mk.lam!r})\nD = np.array([{rows}])")
        args = ["market", "D"]
        if self.client is not None:
            args.append(f"client={self.client}")
        if self.factor is not None:
            args.append(f"factor={self.factor!r}")
        if self.perm is not None:
            args.append(f"perm=np.array({np.asarray(self.perm).tolist()})")
        return s + f"\ncase = IpflCase({', '.join(args)})"

    def __repr__(self):
        return self.code()


def _cases(negative=False, positive=False, lam_min=0.0, liar=None, perm=False, ties=False,
           max_m=MAX_CLIENTS, min_m=2):
    """``instances`` of a property: ``(max_clients=None) -> strategy`` of markets of 2 to
    ``max_clients`` (default ``max_m``) clients with the preconditions built in."""

    def instances(max_clients=None):
        return build(max_m if max_clients is None else max_clients)

    instances.clients = (min_m, max_m)  # the default range, read into Property.clients

    @st.composite
    def build(draw, max_m):
        market, D = draw(ipfl_instances(negative_distances=negative, positive_distances=positive,
                                        symmetric=None, min_m=min_m, max_m=max_m,
                                        distinct=perm and not ties))
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
        return IpflCase(market, D, client, factor, p)

    return instances


def _settle(subject, case, allow_negative=False):
    return subject.settle(case.market, case.D, allow_negative=allow_negative)


def _scale(s) -> float:
    return 1.0 + float(np.max(np.abs(s.utilities))) + float(np.max(np.abs(s.payments)))


# ---------------------------------------------------------------------------- violations


def budget_balance(subject, case):
    s = _settle(subject, case)
    return excess(abs(float(s.payments.sum())), _TOL * _scale(s))


def individual_rationality(subject, case):
    s = _settle(subject, case, allow_negative=True)
    return excess(-float(s.utilities.min()), _TOL * _scale(s))


def local_optimality(subject, case):
    """(single flips that lower phi_i (Eq. 11), search score). The score is how close the
    best single flip comes to lowering phi_i (minus the smallest relative margin of
    :func:`mechanisms.ipfl.eq11_margins`, clipped to [-1, 1]), so Hypothesis' targeted phase
    climbs towards markets where one flip pays."""
    s = _settle(subject, case)
    mk, P, A = case.market, s.prices, s.adjacency
    count = float(len(ipfl.eq11_violations(mk, P, A)))
    margins = ipfl.eq11_margins(mk, P, A)
    closest = float(np.nanmin(margins)) if mk.m > 1 else math.inf
    return count, 10.0 * count + float(np.clip(-closest, -1.0, 1.0))


def _overstate_c(case):
    mk, i = case.market, case.client
    c_hat = mk.c.copy()
    c_hat[i] = mk.c[i] * case.factor + (case.factor - 1.0)  # strictly above, also from c = 0
    return mk.replace(c=c_hat, true_c=mk.c)


def lemma1_monotone_sales(subject, case):
    """(new buyers of the liar, score, discriminating): discriminating when the lie changed
    who buys from the liar (an unchanged column cannot gain a buyer)."""
    honest = _settle(subject, case)
    lied = subject.settle(_overstate_c(case), case.D)
    i = case.client
    gained = float(np.sum(lied.adjacency[:, i] & ~honest.adjacency[:, i]))
    return gained, gained, bool(np.any(lied.adjacency[:, i] != honest.adjacency[:, i]))


def thm3_isolation(subject, case):
    """(buyers of i after N_i x 1e12, score, discriminating): discriminating when i sells to
    somebody in the truthful market (isolation then has something to remove) or after."""
    mk, i = case.market, case.client
    N_hat = mk.N.copy()
    N_hat[i] = mk.N[i] * 1e12
    s = subject.settle(mk.replace(N=N_hat, true_N=mk.N), case.D)
    buyers = float(s.adjacency[:, i].sum())
    sold = bool(_settle(subject, case).adjacency[:, i].any())
    return buyers, buyers, sold or buyers > 0


def global_optimality(subject, case):
    """How far some buyer's phi_i is above the best over all subsets (enumerated)."""
    import itertools

    s = _settle(subject, case)
    mk, P = case.market, s.prices
    got = ipfl.phi(mk, P, s.adjacency)
    worst = 0.0
    for i in np.flatnonzero(mk.K > 0):
        others = [j for j in range(mk.m) if j != i and np.isfinite(P[i, j])]
        best = 0.0
        for r in range(1, len(others) + 1):
            for sub in itertools.combinations(others, r):
                idx = list(sub)
                val = float(P[i, idx].sum() - mk.gain.value(mk.N[idx].sum(), mk.K[i], mk.N[i]))
                best = min(best, val)
        worst = max(worst, float(got[i]) - best)
    return excess(worst, _TOL * _scale(s))


def permutation_equivariance(subject, case):
    mk, pi = case.market, case.perm
    base = _settle(subject, case)
    permuted = mk.replace(N=mk.N[pi], c=mk.c[pi], K=mk.K[pi])
    s = subject.settle(permuted, np.asarray(case.D)[np.ix_(pi, pi)])
    mismatched = float(np.sum(s.adjacency != base.adjacency[np.ix_(pi, pi)]))
    gap = float(np.max(np.abs(s.payments - base.payments[pi])))
    return mismatched + excess(gap, 1e-7 * _scale(base))


def no_deficit(subject, case):
    """Weak budget balance: the operator never pays, sum_i p_i >= 0."""
    s = _settle(subject, case)
    return excess(-float(s.payments.sum()), _TOL * _scale(s))


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


# ------------------------------------------------------------- accounting and the rules' own facts


def budget_identity(subject, case):
    """Eq. 3 summed over the clients: sum_i U_i = SW - sum_i p_i, the welfare of Eq. 5 less
    what the clients pay out of the market (to the operator; 0 for a balanced rule), read from
    the outcome's own utilities, welfare and payments. Discriminating when somebody traded
    (with no trade every term is 0)."""
    s = _settle(subject, case)
    U, p = np.asarray(s.utilities, dtype=float), np.asarray(s.payments, dtype=float)
    gap = abs(float(U.sum()) - (float(s.welfare) - float(p.sum())))
    scale = 1.0 + float(np.abs(U).sum()) + abs(float(s.welfare)) + float(np.abs(p).sum())
    return excess(gap, _TOL * scale), gap, bool(np.any(s.adjacency))


def _shapley_shares(s, case):
    """Sh_ij = r_ij + lam (N_j/N_i) d_ij on the bought pairs (Eq. 12's model-difference term
    added back to the remittance), or None when the rule returned payments only."""
    if s.remittances is None:
        return None
    mk, A = case.market, np.asarray(s.adjacency, dtype=bool)
    ratio = mk.N[None, :] / mk.N[:, None]
    return np.where(A, np.asarray(s.remittances) + mk.lam * ratio * np.asarray(case.D), 0.0)


def shapley_efficiency(subject, case):
    """For every buyer i: sum_j Sh_ij = v_i(S_i) - v_i({}), the value of the coalition of the
    sellers it bought from, v_i(T) = g_i(sum_{j in T} N_j) (the Shapley values of a game add
    up to the grand coalition's value). Discriminating when somebody bought."""
    s = _settle(subject, case)
    shares = _shapley_shares(s, case)
    if shares is None:
        return None  # nothing to read: the rule returned payments, not remittances
    mk, A = case.market, np.asarray(s.adjacency, dtype=bool)
    bought = (A * mk.N[None, :]).sum(axis=1)
    value = mk.gain.value(bought, mk.K, mk.N) - mk.gain.value(0.0 * bought, mk.K, mk.N)
    buyers = A.any(axis=1)
    gap = np.where(buyers, np.abs(shares.sum(axis=1) - value), 0.0)
    tol = _TOL * (1.0 + np.abs(value) + np.abs(shares).sum(axis=1))
    return excess(float(np.max(gap - tol, initial=0.0))), 0.0, bool(buyers.any())


def shapley_symmetry(subject, case):
    """Two sellers that are the same client in all but the label (clients 1 and 2 of the
    ties precondition: same N, c, K and distances) get the same Shapley value from every
    buyer that bought both. Discriminating when some buyer bought both."""
    if case.market.m < 3:
        return None
    s = _settle(subject, case)
    shares = _shapley_shares(s, case)
    if shares is None:
        return None
    A = np.asarray(s.adjacency, dtype=bool)
    both = A[:, 1] & A[:, 2]
    both[1:3] = False  # the twins themselves
    gap = np.where(both, np.abs(shares[:, 1] - shares[:, 2]), 0.0)
    tol = _TOL * (1.0 + np.abs(shares[:, 1]) + np.abs(shares[:, 2]))
    return excess(float(np.max(gap - tol, initial=0.0))), 0.0, bool(both.any())


def greedy_tie_rule(subject, case):
    """The greedy selections' documented tie rule (mechanisms.ipfl.selection: thresholds in
    descending order, ties: the lower index first): between two identical sellers (clients
    1 and 2 of the ties precondition, whose thresholds tie for every buyer) a buyer that
    takes only one takes client 1. The violation counts buyers that took client 2 alone;
    discriminating when some buyer took exactly one of the two."""
    if case.market.m < 3:
        return None
    A = np.asarray(_settle(subject, case).adjacency, dtype=bool)
    rows = np.ones(case.market.m, dtype=bool)
    rows[1:3] = False  # the twins themselves
    wrong = float(np.sum(rows & A[:, 2] & ~A[:, 1]))
    return wrong, wrong, bool(np.any(rows & (A[:, 1] != A[:, 2])))


def pure_sellers_never_buy(subject, case):
    """Spec (types): a pure seller (K_i = 0) never buys: a_ij = 0 for every j. The
    violation counts a pure seller's purchases; discriminating when some pure seller could
    buy: another client's model is on sale (finite c_j), whatever the price -- a selection
    rule of one's own could take it anywhere, the paper's thresholds only at a price <= 0
    (c_j = 0 with lam d_ij = 0, or below: T_ij = inf; the mutant pure_seller_buys)."""
    mk = case.market
    A = np.asarray(_settle(subject, case).adjacency, dtype=bool)
    pure = np.asarray(mk.K) == 0
    off = ~np.eye(mk.m, dtype=bool)
    bought = float((A & pure[:, None]).sum())
    on_sale = bool((pure[:, None] & off & np.isfinite(np.asarray(mk.c))[None, :]).any())
    return bought, bought, on_sale or bought > 0


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
    from .batch import batch_rule, misreports_batch

    settle = batch_rule(inner)
    if settle is not None and type(mk.gain) is ipfl.SqrtGain and mk.truthful:
        t0 = time.perf_counter()
        a = {"N": mk.N[None], "c": mk.c[None], "K": mk.K[None], "lam": np.array([mk.lam]),
             "D": np.asarray(case.D, dtype=float)[None], "client": np.array([case.client])}
        found, _ = misreports_batch(settle, a, dimension, direction)
        truth = float(getattr(mk, f"true_{dimension}")[case.client])
        # honest and lying utilities from the same (bulk) clearing of the subject
        return Misreport(case.client, dimension, direction, float(found.factor[0]), truth,
                         float(found.report[0]), float(found.honest_utility[0]),
                         float(found.lying_utility[0]), found.evaluations,
                         time.perf_counter() - t0, float(found.spread[0])), honest
    stop = _TOL * _scale(honest) if first else None
    return regret_search(subject.settle, case.market, case.D, case.client, dimension,
                         direction, honest=honest, stop_above=stop,
                         batch=grid_batch(subject, case, dimension), **_SEARCH), honest


def grid_batch(subject, case, dimension: str):
    """The regret search's grid cleared in one vectorised call, where the rule allows: a
    subject the batch engine clears in bulk with a greedy or array selection (the bulk exact
    enumeration measured slower than clearing one by one; benchmarks/bench_regret.py) and the
    paper's prices (:mod:`proofs.batch`), the sqrt gain, and N or c misreports (bulk clearing
    has no separate true K). None otherwise (the grid is then cleared market by market)."""
    from .batch import batch_rule

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
        # a NaN utility anywhere in the search is a failure; an instance on which no lie
        # changed the liar's utility could not have shown a regret (not discriminating)
        amount = math.inf if math.isinf(found.spread) else excess(gain, tol)
        return amount, score, found.spread > tol

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
}

IPFL_PROPERTIES = {
    p.key: dataclasses.replace(p, clients=p.instances.clients,
                               discriminates=DISCRIMINATES[p.key])
    for p in [
        Property("budget_balance", "Budget balance", "sum_i p_i = 0", "Eq. 13",
                 _BASE, "ipfl", _cases(), budget_balance),
        Property("individual_rationality", "Individual rationality",
                 "U_i >= 0 for every client", "Thm 1", _BASE, "ipfl", _cases(),
                 individual_rationality),
        Property("ir_negative_distances", "Individual rationality, negative d allowed",
                 "U_i >= 0 for every client", "Thm 1 (precondition dropped)",
                 "truthful reports; d_ij may be < 0", "ipfl", _cases(negative=True),
                 individual_rationality,
                 note="one neighbour alone gives U_i = lam (N_j/N_i) d_ij < 0"),
        Property("local_optimality", "Local optimality (Eq. 11)",
                 "no single addition or removal lowers phi_i", "Eq. 11 / Box 2",
                 _BASE, "ipfl", _cases(), local_optimality),
        Property("global_optimality", "Global optimality of each buyer's choice",
                 "phi_i(a_i) = min over all subsets S of phi_i(S)", "Eq. 10",
                 _BASE + " (subsets enumerated)", "ipfl",
                 _cases(max_m=GLOBAL_MAX_CLIENTS),
                 global_optimality, note="the greedy rules are heuristics (the paper says so)"),
        Property("lemma1", "Monotone sales in the reported cost",
                 "reporting c_i' > c_i weakly shrinks {j : a_ji = 1}", "Lemma 1",
                 _BASE + "; one client overstates c", "ipfl", _cases(liar="over"),
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
                 _cases(perm=True), permutation_equivariance),
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
                 "sum_i p_i >= 0: the operator never pays", "-", _BASE, "ipfl", _cases(),
                 no_deficit),
        Property("budget_identity", "Budget identity",
                 "sum_i U_i = SW - sum_i p_i: utilities add up to the welfare less what "
                 "leaves the market", "Eqs. 3, 5", _BASE, "ipfl", _cases(), budget_identity),
        Property("shapley_efficiency", "Shapley efficiency",
                 "for every buyer i, sum_j Sh_ij = g_i(sum_j a_ij N_j) - g_i(0) with Sh_ij = "
                 "r_ij + lam (N_j/N_i) d_ij", "Shapley value (efficiency)",
                 _BASE + "; the rule returns remittances", "ipfl", _cases(),
                 shapley_efficiency),
        Property("shapley_symmetry", "Shapley symmetry",
                 "two sellers identical but for the label get the same Sh_ij from every "
                 "buyer of both", "Shapley value (symmetry)",
                 _BASE + "; clients 1 and 2 identical; the rule returns remittances", "ipfl",
                 _cases(ties=True, min_m=3), shapley_symmetry),
        Property("pure_sellers_never_buy", "Pure sellers never buy",
                 "K_i = 0 => a_ij = 0 for every j", "Types (K_i = 0: a pure seller)",
                 _BASE, "ipfl", _cases(), pure_sellers_never_buy),
        Property("greedy_tie_rule", "Greedy tie rule",
                 "between two sellers with tied thresholds a buyer that takes one takes the "
                 "lower index", "Box 2 (ties: lower index first, as documented)",
                 _BASE + "; clients 1 and 2 identical", "ipfl", _cases(ties=True, min_m=3),
                 greedy_tie_rule),
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
