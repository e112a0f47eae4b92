"""Conformance to the equations: every subject's outcome equals the reference oracle's
(:mod:`proofs.oracle`, written from the papers and the specifications, never from
:mod:`mechanisms`) within stated tolerances, stage by stage.

**iPFL** (property ``conforms``; a subject's every stage that is a built-in rule is checked
against the oracle's transcription of that rule, a stage of the user's own is taken as it
comes and the later stages are checked on it):

* prices: Eq. 10 (``"paper"``) or the cost-plus posted price, off the diagonal: equal to
  1e-12 relative (inf where the seller is a pure buyer);
* thresholds (Box 2) at the prices the buyers faced: the root of g_i(T) - g_i(T - N_j) = P_ij
  to 1e-9 relative or to float noise of the equation itself (the flat regime), exactly 0 for
  a pure seller's row, the diagonal and P_ij >= g_i(N_j), exactly inf for P_ij <= 0 (inf
  also accepted for a root beyond 2^50 N_j, where g_i(T) - g_i(T - N_j) is float noise)
  (``thresholds="published"``: the published numerics' never / always / root outcomes);
* adjacency: Box 2 as printed, the local rule, the exact rule (its reduction: every T = inf
  seller in, no T = 0 seller; a least phi_i within 1e-9 of the market's scale; of the subsets
  within 1e-12 of the least phi, the first in the documented subset order), share-all,
  on the subject's thresholds (checked above), so a near-tie of two thresholds cannot read
  as a fault; every mismatch counts 1;
* money: Eq. 12 remittances, the Shapley split, cost-plus, VCG (Clarke pivot) payments or
  none; Eq. 13 payments from the remittances; Eq. 3 utilities from the true gains and costs;
  Eq. 5 welfare: all to 1e-9 of the market's scale (1 + the largest gain any buyer can reach
  + the largest finite price); a pure buyer's cost for selling nothing is 0, never NaN;
* the baselines' ledger (:func:`mechanisms.ipfl.baseline_utilities`, which no clearing
  calls) on the same market, with every client weighting everyone and with the outcome's
  graph: to the same tolerance;
* the clearing and the ledger are silent on the well-formed market: a warning is a failure.

**CPL** (property ``cpl_conforms``): the bound coefficients K_n = alpha a_n^2 G_n^2 / R and
the normalised weights; the clients' best responses to the subject's prices and to prices at
both ends of the float range (1e-9 relative), the bound, the spend, the budget residual,
payments and utilities as the subject reports them (1e-9 of their scale); the aggregation
step w + sum (a_n/q_n)(w_n - w) with the subject's q; for the equilibrium solver the
oracle's own solution of P1' (status, q to 1e-8 relative, prices to 1e-8 of their terms,
1/lambda* to 1e-6 where the budget binds, the threshold 1/(3 lambda*)) and, where the budget
binds, a spend of B to its rounding ((n + 4) eps x the spend's scale: the bisection solves
1/lambda* to a few ulps); for a built-in posted price one scale p > 0 times its shape
(1e-12) whose best responses spend exactly B (1e-9), and :func:`mechanisms.cpl.posted_floor_spend`
of its shape against the oracle's (1e-9; every fourth game of a batch).

Both engines run the same comparison: one instance through the subject's own ``settle`` /
``solve``, a batch through the bulk code (:func:`mechanisms.ipfl.clear_batch`,
:func:`mechanisms.cpl.solve_batch`, :func:`mechanisms.cpl.posted_pricing_batch`) with the
oracle run market by market on the outcome.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np
from hypothesis import strategies as st

from mechanisms import cpl, distances, ipfl, paper, roles

from .batch import CHEAP_DATA_SHARE, CplSampler, IpflSampler, IpflSpec
from .core import Property
from .ipfl_properties import EVERY_GAIN, EVERY_MODE, GAINS, IpflCase, batch_rule
from .names import fresh
from .oracle import cpl as ocpl
from .oracle import ipfl as oipfl
from .strategies import MAX_CLIENTS, CplCase, cpl_games, ipfl_instances, misreports
from .subjects import CplPricingRule, CplSolver, IpflMechanism

__all__ = ["CONFORMANCE_PROPERTIES", "CplView", "Gaps", "IpflView", "baseline_ledgers",
           "cpl_gaps", "gradient_gaps", "ipfl_gaps", "lied", "model_gaps", "models",
           "outcome_view", "range_gaps", "scale_gaps", "scenario_gaps", "subject_rules"]

INF = math.inf
EPS = 2.220446049250313e-16

PRICE_RTOL = 1e-12
THRESHOLD_RTOL = 1e-9
MONEY_TOL = 1e-9  # of the market's scale
TIE_TOL = 1e-12  # of the market's scale: subsets this close to the least phi tie
CPL_RTOL = 1e-9
CPL_Q_RTOL = 1e-8
CPL_MU_RTOL = 1e-6
KKT_MARGIN = 1e-6  # a client this close (relative) to a bound of its box may count as
# interior or not in cpl.Equilibrium.kkt_residual (the toolkit's band is 1e-9)
UNRESOLVABLE = 2.0**50  # a threshold root beyond this many N_j may read inf (float noise)


@dataclass
class Gaps:
    """What the comparison found: per checked quantity, how far beyond its tolerance the
    subject is (0: within it; counts for discrete quantities such as edges), and the first
    entry of each that was out (for a reader)."""

    amounts: dict = field(default_factory=dict)
    where: dict = field(default_factory=dict)
    unchecked: list = field(default_factory=list)

    def add(self, name: str, amount: float, where=None) -> None:
        amount = INF if math.isnan(amount) else float(amount)
        if amount > self.amounts.get(name, 0.0):
            self.amounts[name] = amount
            if where is not None:
                self.where[name] = where
        else:
            self.amounts.setdefault(name, 0.0)

    @property
    def violation(self) -> float:
        return max(self.amounts.values(), default=0.0)

    def failing(self) -> dict:
        return {k: (v, self.where.get(k)) for k, v in self.amounts.items() if v > 0}


def _close(gaps: Gaps, name: str, got, want, tol: float, where=None) -> None:
    """|got - want| within ``tol`` (absolute): the excess is the amount; inf must match inf
    of the same sign; NaN on either side is a failure (inf)."""
    got, want = float(got), float(want)
    if math.isnan(got) or math.isnan(want):
        gaps.add(name, INF, where)
    elif math.isinf(want) or math.isinf(got):
        gaps.add(name, 0.0 if got == want else INF, where)
    else:
        excess = abs(got - want) - tol
        gaps.add(name, excess if excess > 0 else 0.0, where)


def _flat(x) -> list:
    """A number, a list (of lists) or an array, as one flat list of floats."""
    if isinstance(x, np.ndarray):
        return x.ravel().tolist()
    if isinstance(x, list | tuple):
        return [v for item in x for v in _flat(item)] if x and isinstance(
            x[0], list | tuple | np.ndarray) else [float(v) for v in x]
    return [float(x)]


def _close_all(gaps: Gaps, name: str, got, want, tol, mask=None) -> None:
    """:func:`_close` entry by entry (flattened in row order; ``tol`` a number or one per
    entry; ``mask``: the entries compared); the largest excess is the amount, its flat index
    the place. Plain Python: the arrays are small (one market), where numpy's overhead
    costs more than the comparison."""
    got, want = _flat(got), _flat(want)
    tols = _flat(tol)
    if len(tols) == 1:
        tols = tols * len(want)
    keep = _flat(mask) if mask is not None else None
    worst, at = 0.0, None
    for k, (x, y, t) in enumerate(zip(got, want, tols, strict=True)):
        if keep is not None and not keep[k]:
            continue
        if x != x or y != y:  # NaN
            excess = INF
        elif x in (INF, -INF) or y in (INF, -INF):
            excess = 0.0 if x == y else INF
        else:
            excess = abs(x - y) - t
        if excess > worst:
            worst, at = excess, k
    gaps.add(name, worst, at)


# =================================================================================== iPFL


@dataclass(frozen=True)
class IpflView:
    """One market's outcome as a subject gave it (lists and floats)."""

    A: list
    T: list
    P: list
    R: list | None
    p: list
    G: list
    C: list
    U: list
    W: float


def outcome_view(out) -> IpflView:
    R = out.remittances
    return IpflView(np.asarray(out.adjacency, bool).tolist(),
                    np.asarray(out.thresholds, float).tolist(),
                    np.asarray(out.prices, float).tolist(),
                    None if R is None else np.asarray(R, float).tolist(),
                    np.asarray(out.payments, float).tolist(),
                    np.asarray(out.gains, float).tolist(),
                    np.asarray(out.sharing_costs, float).tolist(),
                    np.asarray(out.utilities, float).tolist(), float(out.welfare))


def _views_of_batch(out) -> list[IpflView]:
    A, T, P = out.adjacency.tolist(), out.thresholds.tolist(), out.prices.tolist()
    R = None if out.remittances is None else out.remittances.tolist()
    p, G, C = out.payments.tolist(), out.gains.tolist(), out.sharing_costs.tolist()
    U, W = out.utilities.tolist(), out.welfare.tolist()
    return [IpflView(A[k], T[k], P[k], None if R is None else R[k], p[k], G[k], C[k], U[k],
                     W[k]) for k in range(len(A))]


def subject_rules(subject) -> tuple:
    """(selection, payments, prices) of an iPFL subject: the built-in names, or None for a
    rule of the user's own (its output is taken as it comes)."""
    def name(spec, table):
        return spec if isinstance(spec, str) and spec in table else None

    return (name(subject.rule, ipfl.SELECTION_RULES), name(subject.money, ipfl.PAYMENT_RULES),
            name(subject.prices, ipfl.PRICE_RULES))


def _market_scale(g, N, c, K, true_N, true_K, P) -> float:
    m = len(N)
    top = 0.0
    for i in range(m):
        rest = math.fsum(N[j] for j in range(m) if j != i)
        true_rest = math.fsum(true_N[j] for j in range(m) if j != i)
        top = max(top, abs(g(rest, K[i], N[i])), abs(g(true_rest, true_K[i], true_N[i])))
    finite = [abs(x) for row in P for x in row if math.isfinite(x)]
    return 1.0 + top + max(finite, default=0.0)


def _check_threshold(gaps, g, Ki, Ni, Nj, P, T, mode, others, where, limit) -> None:
    """Box 2's threshold (or the published numerics' outcome) against the subject's T: the
    conventions exactly, a root by :func:`proofs.oracle.ipfl.solves` (the bracket is
    computed only to measure a failure)."""
    if math.isnan(T):
        gaps.add("thresholds", INF, where)
        return
    if mode == "published":
        what, lo, hi = oipfl.published_threshold(g, Ki, Ni, Nj, P, others, limit)
        if what == "never" or (what == "either" and T <= Nj):
            # never bought: the toolkit's convention is T = 0 exactly (a stalled root is set
            # to 0; at the edge of "either" the root itself, N_j, is the other outcome)
            ok = T == 0.0 or (what == "either" and T == Nj)
            gaps.add("thresholds", 0.0 if ok else 1.0, where)
            return
        if what == "always":
            gaps.add("thresholds", 0.0 if T > others else 1.0, where)
            return
        kind = "root"
    else:
        kind = oipfl.threshold_kind(g, Ki, Ni, Nj, P, limit)
    if kind == "zero":  # exactly 0, or a root at N_j where P is g_i(N_j) to float noise
        top = g(Nj, Ki, Ni) - g(0.0, Ki, Ni)
        edge = Ki > 0 and abs(P - top) <= 16 * EPS * (abs(top) + abs(P)) and Nj <= T <= \
            Nj * (1 + 1e-6)
        gaps.add("thresholds", 0.0 if T == 0.0 or edge else 1.0, where)
        return
    if kind == "inf":
        gaps.add("thresholds", 0.0 if T == INF else 1.0, where)
        return
    if oipfl.solves(g, Ki, Ni, Nj, P, T, THRESHOLD_RTOL):
        gaps.add("thresholds", 0.0, where)
        return
    lo, hi = oipfl.threshold(g, Ki, Ni, Nj, P, limit)
    if T == INF and lo >= UNRESOLVABLE * Nj:
        # past 2^50 N_j the left side g(T) - g(T - N_j) is below the float resolution of
        # g(T) (N_j / T < 2^-50): the root is float noise there, and inf (always worth
        # buying: no market holds 2^50 times a client's data) is the convention
        gaps.add("thresholds", 0.0, where)
        return
    off = (T - hi) / hi if T > hi else (lo - T) / lo
    gaps.add("thresholds", off if math.isfinite(off) and off > 0 else INF, where)


SQRT_Q_MIN = 1e8
SQRT_XTOL = 1e-14
SUBNORMAL = 2.2250738585072014e-308  # the least normal float64


def _check_sqrt_threshold(gaps, g, Ki, Ni, Nj, P, T, where) -> None:
    """The sqrt gain's closed form where prices are tiny (q = 4 sqrt(K_i) / (P sqrt(N_j)) >
    :data:`SQRT_Q_MIN`: around and in its large-q asymptote, where the Box 2 residual's
    cancellation leaves :func:`proofs.oracle.ipfl.solves` a loose 1e-9): T against the
    cancellation-free root (:func:`proofs.oracle.ipfl.sqrt_threshold`) to
    :data:`SQRT_XTOL` of N_i + T (the closed form is exact to rounding: at most 1.1e-15 of it
    on 20,000 pairs, q from 1e7 to 1e13). Checked there only (the oracle's bisection is
    Python: a few thousand pairs a row), at normal prices (a subnormal one, as the type
    space's edge values give, has too few bits for 1e-14)."""
    if P < SUBNORMAL or oipfl.threshold_kind(g, Ki, Ni, Nj, P) != "root":
        return  # a subnormal price carries fewer bits than the tolerance asks
    if 4.0 * math.sqrt(Ki) / (P * math.sqrt(Nj)) <= SQRT_Q_MIN:
        return
    lo, hi = oipfl.sqrt_threshold(Ki, Ni, Nj, P)
    if not math.isfinite(hi):
        return
    # a finite root answered inf or NaN is off by everything
    off = INF if not math.isfinite(T) else \
        (T - hi if T > hi else lo - T if T < lo else 0.0) / (Ni + hi)
    gaps.add("thresholds_sqrt", max(0.0, off - SQRT_XTOL) / SQRT_XTOL,
             where if off > SQRT_XTOL else None)


def _check_exact_row(gaps, i, g, Ki, Ni, P_row, T_row, N, row, scale) -> None:
    found = oipfl.exact_row(i, g, Ki, Ni, P_row, T_row, N)
    if found is None:
        return
    wrong = sum(1 for j in found["in"] if not row[j]) + sum(1 for j in found["out"] if row[j])
    gaps.add("adjacency", float(wrong), (i, "reduction") if wrong else None)
    if not found["checked"]:
        gaps.unchecked.append(f"exact: buyer {i}'s {len(found['candidates'])} candidates")
        return
    cand = found["candidates"]
    chosen = [cand[k] for k in range(len(cand)) if row[cand[k]]]
    value = oipfl.phi(g, Ki, Ni, [P_row[j] for j in chosen], [N[j] for j in chosen],
                      math.fsum(N[j] for j in found["in"]),
                      math.fsum(P_row[j] for j in found["in"]))
    over = value - found["best"]
    gaps.add("exact_optimum", max(0.0, over - MONEY_TOL * scale) / scale,
             (i, chosen) if over > MONEY_TOL * scale else None)
    if found["phi"] is None:
        return
    s_code = sum(1 << k for k in range(len(cand)) if row[cand[k]])
    first = next(s for s, v in enumerate(found["phi"]) if v <= found["best"] + TIE_TOL * scale)
    tie = (found["phi"][s_code] <= found["best"] + TIE_TOL * scale) and s_code != first
    gaps.add("exact_tie_order", 1.0 if tie else 0.0, (i, s_code, first) if tie else None)


def ipfl_gaps(market, D, view: IpflView, names: tuple, mode: str = "exact",
              baselines: tuple = ()) -> Gaps:
    """Compare one market's outcome ``view`` (what the subject gave) with the oracle, stage
    by stage. ``market``: the :class:`mechanisms.ipfl.Market` cleared (reports and truth);
    ``names``: (selection, payments, prices) built-in names or None (:func:`_names`);
    ``baselines``: pairs (W, utilities) of :func:`mechanisms.ipfl.baseline_utilities` to
    check beside it."""
    gaps = Gaps()
    rule, money, price_rule = names
    g = oipfl.gain_function(market.gain)
    N, c, K = (np.asarray(x, float).tolist() for x in (market.N, market.c, market.K))
    tN, tc, tK = (np.asarray(x, float).tolist()
                  for x in (market.true_N, market.true_c, market.true_K))
    lam = float(market.lam)
    D = np.asarray(D, float).tolist()
    m = len(N)
    P = view.P
    scale = _market_scale(g, N, c, K, tN, tK, P)
    # prices (Eq. 10 or cost-plus), off the diagonal
    if price_rule is not None:
        rule_price = oipfl.paper_price if price_rule == "paper" else oipfl.cost_plus_price
        want = [[rule_price(i, j, N, c, lam, D) for j in range(m)] for i in range(m)]
        size = [[PRICE_RTOL * (1.0 + abs(x)) if math.isfinite(x) else 0.0 for x in row]
                for row in want]
        _close_all(gaps, "prices", P, want, size, [[i != j for j in range(m)]
                                                   for i in range(m)])
    # thresholds (Box 2) at the prices faced
    T = view.T
    sqrt = isinstance(market.gain, ipfl.SqrtGain)
    total = math.fsum(N)
    for i in range(m):
        for j in range(m):
            if i == j or K[i] == 0.0:
                gaps.add("thresholds", 0.0 if T[i][j] == 0.0 else 1.0, (i, j))
            else:
                _check_threshold(gaps, g, K[i], N[i], N[j], P[i][j], T[i][j], mode,
                                 total - N[i], (i, j),
                                 oipfl.marginal_limit(market.gain, K[i], N[i], N[j]))
                if sqrt and mode == "exact":
                    _check_sqrt_threshold(gaps, g, K[i], N[i], N[j], P[i][j], T[i][j],
                                          (i, j))
    # selection, on the subject's thresholds
    A = view.A
    if rule in ("box2", "local", "share-all"):
        for i in range(m):
            want = (oipfl.box2_row(i, T[i], N) if rule == "box2" else
                    oipfl.local_row(i, T[i], N) if rule == "local" else
                    oipfl.share_all_row(i, N, c, K))
            wrong = [j for j in range(m) if bool(A[i][j]) != want[j]]
            gaps.add("adjacency", float(len(wrong)), (i, wrong) if wrong else None)
    elif rule == "exact":
        for i in range(m):
            _check_exact_row(gaps, i, g, K[i], N[i], P[i], T[i], N, A[i], scale)
    if rule is not None:  # every built-in rule: a pure seller never buys
        pure = sum(1 for i in range(m) if K[i] == 0.0 for j in range(m) if A[i][j])
        gaps.add("adjacency", float(pure))
    # money
    tol = MONEY_TOL * scale
    R_want = None
    if money == "paper":
        R_want = oipfl.paper_remittances(g, A, N, K, lam, D)
    elif money == "shapley":
        R_want = oipfl.shapley_remittances(g, A, N, K, lam, D)
    elif money == "cost-plus":
        R_want = oipfl.cost_plus_remittance(A, c)
    if R_want is not None:
        if view.R is None:
            gaps.add("remittances", INF, "none returned")
        else:
            _close_all(gaps, "remittances", view.R, R_want, tol)
    p_want = None
    if view.R is not None:  # Eq. 13 of the remittances the rule returned
        p_want = oipfl.payments(view.R)
    if money == "vcg":
        p_want = oipfl.vcg_payments(g, A, P, N, c, K)
        if p_want is None:
            gaps.unchecked.append("vcg: a buyer's search beyond the enumeration")
    elif money == "none":
        p_want = [0.0] * m
        if view.R is not None:
            _close_all(gaps, "remittances", view.R, [[0.0] * m] * m, 0.0)
    if p_want is not None:
        _close_all(gaps, "payments", view.p, p_want, tol)
    # gains, costs, utilities (Eq. 3) and welfare (Eq. 5): the truth, on the subject's graph
    G = oipfl.gains(g, A, tN, tK)
    C = oipfl.sharing_costs(A, tc)
    U = oipfl.utilities(G, C, view.p)
    _close_all(gaps, "gains", view.G, G, tol)
    _close_all(gaps, "sharing_costs", view.C, C, tol)
    _close_all(gaps, "utilities", view.U, U, tol)
    _close(gaps, "welfare", view.W, oipfl.welfare(G, A, tc), tol * m)
    for W, got in baselines:
        want = oipfl.baseline_utilities(g, np.asarray(W).tolist(), tN, tc, tK)
        _close_all(gaps, "baseline_utilities", got, want, tol)
    return gaps


def baseline_ledgers(market, view: IpflView) -> tuple:
    """The baselines' ledger on ``market`` (mechanisms.ipfl.baseline_utilities) for the full
    graph and for the outcome's graph, as pairs (W, utilities) for :func:`ipfl_gaps`."""
    m = market.m
    return tuple((W, np.asarray(ipfl.baseline_utilities(market, W), float).tolist())
                 for W in (np.ones((m, m)), np.asarray(view.A, float)))


# ------------------------------------------------------------ the lie, the models (Eq. 8)


def lied(a: dict) -> tuple:
    """The reports of the lying market beside each drawn (truthful) one: client
    ``a["client"]`` misreports one type by ``a["factor"]`` -- N (N x f), c (c f + max(f - 1,
    0), so overstating also from c = 0; a pure buyer's inf stays) or K (K x f), which one
    read off the factor
    (floor(7 f) mod 3) -- and the truth stays as drawn. Returns (N, c, K) reported."""
    N, c, K = (np.array(a[k], dtype=float) for k in ("N", "c", "K"))
    b, who, f = np.arange(len(N)), a["client"], a["factor"]
    dim = np.floor(7.0 * f).astype(int) % 3
    for d, x in enumerate((N, c, K)):
        sel = dim == d
        old = x[b[sel], who[sel]]
        x[b[sel], who[sel]] = old * f[sel] + (np.maximum(f[sel] - 1.0, 0.0) if d == 1 else 0.0)
    return N, c, K


def models(market) -> tuple:
    """Model parameters theta (m, 3) derived from the clients' types (N_i / 2000, c_i / 5
    (0.7 for a pure buyer), K_i / 1e6, each less 0.5), the reference theta_0 = client 0's
    model (so client 0 has no cosine direction), and the prox step eta = 1 + lam: the
    distances and prox-centres (Eq. 8) of the market's own clients, identical models where
    the types repeat."""
    N, c, K = (np.asarray(x, float) for x in (market.N, market.c, market.K))
    theta = np.stack([N / 2000.0, np.where(np.isfinite(c), c / 5.0, 0.7), K / 1e6], axis=-1)
    theta = theta - 0.5
    return theta, theta[..., 0, :], 1.0 + np.asarray(market.lam, float)


def model_gaps(gaps: Gaps, theta, reference, eta, N, A, D_got: dict, P_got: dict) -> None:
    """mechanisms.distances against the oracle: the pairwise distances ``D_got[metric]``
    (1e-12 of the squared norms) and the prox-centres ``P_got[metric]`` on the graph ``A``
    (1e-12 of the terms)."""
    theta, reference = np.asarray(theta, float).tolist(), np.asarray(reference, float).tolist()
    m = len(theta)
    sq = [1.0 + math.fsum(x * x for x in t) for t in theta]
    dsize = [[1e-12 * (a + b) for b in sq] for a in sq]
    psize = [[1e-12 * (1.0 + math.fsum(abs(x) for x in theta[i]) + eta * 4.0 * (
        1.0 + sum(1 for j in range(m) if A[i][j])) * max(1.0, max(N) / N[i]))] * len(theta[i])
        for i in range(m)]
    for metric in ("l2sq", "cosine"):
        want = [[0.0 if i == j else oipfl.distance(metric, theta[i], theta[j], reference)
                 for j in range(m)] for i in range(m)]
        _close_all(gaps, f"distances_{metric}", D_got[metric], want, dsize)
        want = [oipfl.prox_centre(i, theta, A, N, eta, metric, reference) for i in range(m)]
        _close_all(gaps, f"prox_{metric}", P_got[metric], want, psize)


# powers of two the models are scaled by (exact): cosine far past where the squares of the
# entries underflow or overflow float64; l2sq where the distances themselves stay normal
COSINE_SCALES = (-540, 520)
L2SQ_SCALES = (-200, 200)


def scale_gaps(gaps: Gaps, theta, reference, D_got: dict) -> None:
    """mechanisms.distances.pairwise_distances of the models (and the reference) times 2^k
    against ``D_got``, the unscaled ones, bit for bit: cosine distances measure angles
    (:data:`COSINE_SCALES`: the same, where the entries' squares underflow or overflow
    float64), squared Euclidean ones scale by 2^(2k) (:data:`L2SQ_SCALES`). Scaling by a
    power of two rounds nothing, so any difference is the code's; a NaN is a failure."""
    X, ref = np.asarray(theta, float), np.asarray(reference, float)
    for metric, scales, power in (("cosine", COSINE_SCALES, 0), ("l2sq", L2SQ_SCALES, 2)):
        want = np.asarray(D_got[metric], float)
        for k in scales:
            got = distances.pairwise_distances(np.ldexp(X, k), fresh(metric),
                                               reference=np.ldexp(ref, k))
            _close_all(gaps, f"distances_{metric}_scaled", np.ldexp(got, -power * k), want,
                       0.0)


def gradient_gaps(gaps: Gaps, theta, reference) -> None:
    """mechanisms.distances.distance_gradients against the oracle's gradients
    (:func:`proofs.oracle.ipfl.distance_gradient`) for every ordered pair of the models
    ``theta`` (their rows), both metrics (each named by a fresh string and by the literal,
    and by either name the same distances and prox-centres bit for bit):
    l2sq to 1e-12 of 1 + its largest entry, cosine to
    1e-12 (1 + 2 / |theta_i - theta_0|) (its bracket's terms are at most 1 each, divided by
    |theta_i - theta_0|). No warning (client 0's model is the reference: its pairs take the
    vanishing-delta arm)."""
    X = np.asarray(theta, float)
    m = len(X)
    pairs = [(i, j) for i in range(m) for j in range(m) if i != j]
    if not pairs:
        return
    rows, ref = X.tolist(), np.asarray(reference, float).tolist()
    with warnings.catch_warnings(record=True) as noise:  # silent on well-formed input
        warnings.simplefilter("always")
        _gradients_by_name(gaps, X, reference, pairs, rows, ref)
    gaps.add("gradient_warnings", float(len(noise)), [str(w.message) for w in noise[:1]] or None)


def _gradients_by_name(gaps: Gaps, X, reference, pairs, rows, ref) -> None:
    m = len(X)
    for metric in ("l2sq", "cosine"):
        want, tol = [], []
        for i, j in pairs:
            w = oipfl.distance_gradient(metric, rows[i], rows[j], ref)
            if metric == "l2sq":
                size = 1.0 + max(abs(x) for x in w)
            else:
                u = [a - b for a, b in zip(rows[i], ref, strict=True)]
                nu = math.sqrt(math.fsum(x * x for x in u))
                size = 1.0 + (2.0 / nu if nu > 0 else 0.0)
            want.append(w)
            tol.append([1e-12 * size] * len(w))
        # the metric named by a fresh string (a name compared by identity fails) and by the
        # literal itself (interned, the toolkit's own object: `is not` fails there)
        for name in (fresh(metric), metric):
            got = distances.distance_gradients(X, pairs, name, reference=reference).tolist()
            _close_all(gaps, f"gradients_{metric}", got, want, tol)
        # and the distances and Eq. 8's prox-centres (every other client a neighbour) the
        # same bit for bit by either name: a name read from a file is the literal's equal
        A, N = ~np.eye(m, dtype=bool), np.arange(1.0, m + 1.0)
        D_by = [distances.pairwise_distances(X, name, reference=reference)
                for name in (fresh(metric), metric)]
        P_by = [distances.prox_centres(X, A, N, 0.5, name, reference=reference)
                for name in (fresh(metric), metric)]
        gaps.add(f"by_name_{metric}", float(not np.array_equal(*D_by, equal_nan=True))
                 + float(not np.array_equal(*P_by, equal_nan=True)))
    # the metric's default, l2sq (documented), for each of the three functions
    A, N = ~np.eye(m, dtype=bool), np.arange(1.0, m + 1.0)
    same = (np.array_equal(distances.pairwise_distances(X), distances.pairwise_distances(
                X, fresh("l2sq")))
            and np.array_equal(distances.distance_gradients(X, pairs),
                               distances.distance_gradients(X, pairs, fresh("l2sq")))
            and np.array_equal(distances.prox_centres(X, A, N, 0.5),
                               distances.prox_centres(X, A, N, 0.5, fresh("l2sq"))))
    gaps.add("default_metric", 0.0 if same else 1.0)


# the relative offset of each model's near copy in :func:`range_gaps`: far below the models'
# size, so that sq_i + sq_j - 2 <x_i, x_j> is a cancellation whose rounding may be negative
NEAR = 2.0**-40


def range_gaps(gaps: Gaps, theta, reference) -> None:
    """mechanisms.distances.pairwise_distances within its documented ranges, exactly (no
    tolerance: a distance is a squared norm, >= 0; a cosine distance lies in [0, 2]), on the
    models ``theta`` with, for each model x_i, a near copy x_i (1 + :data:`NEAR`) and its
    reflection 2 theta_0 - x_i through the reference added: the pairs where rounding would
    leave a range (a cancellation to a tiny negative squared distance, a cosine of opposite
    deltas a little below -1). The amount is how far outside."""
    X, ref = np.asarray(theta, float), np.asarray(reference, float)
    Y = np.concatenate([X, X * (1.0 + NEAR), 2.0 * ref - X])
    l2 = distances.pairwise_distances(Y, fresh("l2sq"))
    cos = distances.pairwise_distances(Y, fresh("cosine"), reference=ref)
    gaps.add("distances_l2sq_range", float(max(0.0, -float(np.min(l2)))))
    gaps.add("distances_cosine_range",
             float(max(0.0, -float(np.min(cos)), float(np.max(cos)) - 2.0)))


def _model_outputs(market, A) -> tuple:
    """(theta, reference, eta, distances by metric, prox-centres by metric) of ``market``'s
    derived models (:func:`models`) on the graph ``A``, by mechanisms.distances."""
    theta, reference, eta = models(market)
    D = {metric: distances.pairwise_distances(theta, fresh(metric), reference=reference)
         for metric in ("l2sq", "cosine")}
    P = {metric: distances.prox_centres(theta, A, market.N, float(eta), fresh(metric),
                                        reference=reference) for metric in ("l2sq", "cosine")}
    return theta, reference, eta, D, P


EDGE_ALPHAS = (0.05, 0.3, 0.7, 0.95, 1.0 - 2.0**-20)
"""The power gains' exponents of :func:`threshold_edge_gaps` besides the draws' 0.5 and 1
(one on a batch in three, in turn by the market's total data: each costs the generic root
finder's ~1 ms a solve): a Market accepts any alpha in (0, 1]."""
EDGE_PRICES = ("zero", "g(N_j)", "above g(N_j)", "below g(N_j)", "limit", "half g(N_j)")
"""The placed prices of :func:`threshold_edge_gaps`, one market each."""


EMPTY_SHAPES = ((0,), (3, 0), (0, 3))
"""The shapes of no pairs :func:`threshold_edge_gaps` asks each gain's thresholds for."""


def _answers_empty(gain, shape) -> bool:
    """``gain.thresholds`` of no pairs (prices and N of ``shape``) answers an array of that
    shape (raising is a failure)."""
    try:
        return np.shape(gain.thresholds(np.ones(shape), 1.0, 1.0, np.ones(shape))) == shape
    except Exception:  # any error on a valid input is the failure counted
        return False


def _same_root(a: float, b: float) -> bool:
    """Equal, or both finite roots within :data:`THRESHOLD_RTOL` of each other (numpy's
    power of one number and of an array may differ in the last bit, which moves a root)."""
    return a == b or (math.isfinite(a) and math.isfinite(b)
                      and abs(a - b) <= THRESHOLD_RTOL * max(abs(a), abs(b)))


def threshold_edge_gaps(gaps: Gaps, market) -> None:
    """Box 2's classification at its edges (:meth:`mechanisms.gains.Gain.thresholds`: a
    price of g_i(N_j) or more, as the gain's value gives it, is never worth buying, T = 0; a
    price of 0 or less, or at or below the marginal's limit, always, T = inf; anything else
    a root T >= N_j) on the market's N and K, for the sqrt gain and, in turn by the market's
    total data, one of the generic gains of :data:`GAINS` (they share one root finder) and, on
    a market in three, a power gain of an exponent of :data:`EDGE_ALPHAS`:
    ``ipfl.thresholds`` at placed prices (:data:`EDGE_PRICES`, one market of a batch each:
    0; g_i(N_j); the next float above it; the next float below it; the marginal's limit
    where positive -- the linear gain's K_i N_j / N_i --, else g_i(N_j) again; half of
    g_i(N_j), a root). Rows of pure sellers and the diagonal are 0. With the published
    numerics (``"published"``) at the same prices: the same thresholds, a root with N_i + T
    <= 2 N_j set to 0. Each pair off the rule counts 1. A buyer's pair at the price 0 (and,
    for the sqrt gain, half of g_i(N_j)) asked of ``gain.thresholds`` as plain numbers gives
    a number (shape ()): inf as in the arrays, a root within :data:`THRESHOLD_RTOL` of the
    arrays' (numpy's power of one number and of an array may differ in the last bit, and so
    g_i(N_j) itself: the edge prices are not asked so); no pairs (:data:`EMPTY_SHAPES`) an
    empty array of that shape; and the sqrt gain at tiny placed prices
    (:func:`_tiny_price_gaps`)."""
    N, K = np.asarray(market.N, float), np.asarray(market.K, float)
    m = len(N)
    e = len(EDGE_PRICES)
    Nj, Ki, Ni = N[None, :], K[:, None], N[:, None]
    off = ~np.eye(m, dtype=bool) & (Ki > 0)
    # the sqrt gain and one generic gain a batch, in turn by the market's data (the generic
    # gains share Gain.thresholds' root finder; each solve costs ~200 calls of numpy)
    generic = [g for g in GAINS.values() if not isinstance(g, ipfl.SqrtGain)]
    total = int(N.sum())
    chosen = [g for g in GAINS.values() if isinstance(g, ipfl.SqrtGain)] + \
        [generic[total % len(generic)]] + \
        ([ipfl.PowerGain(EDGE_ALPHAS[total // 3 % len(EDGE_ALPHAS)])] if total % 3 == 0 else [])
    buyers = np.flatnonzero(K > 0)
    i = int(buyers[0]) if len(buyers) else 0
    j = 1 if i == 0 else 0
    for gain in chosen:
        first = np.broadcast_to(gain.value(Nj, Ki, Ni), (m, m))
        limit = np.broadcast_to(gain.marginal_limit(Nj, Ki, Ni), (m, m))
        P = np.stack([np.zeros((m, m)), first, np.nextafter(first, INF),
                      np.nextafter(first, 0.0), np.where(limit > 0, limit, first),
                      0.5 * first])
        markets = ipfl.MarketArrays(np.tile(N, (e, 1)), np.zeros((e, m)), np.tile(K, (e, 1)),
                                    np.zeros(e), gain=gain)
        T = np.asarray(ipfl.thresholds(markets, np.zeros((e, m, m)), prices=P), float)
        want_inf = (P <= 0) | ((P <= limit) & (P < first))
        want_zero = (P >= first) & ~(P <= 0)
        ok = np.where(want_inf, T == INF, np.where(want_zero, T == 0.0, T >= Nj))
        ok = np.where(off, ok, T == 0.0)
        # the published numerics at the same prices: the exact thresholds, a root stalled
        # (N_i + T <= 2 N_j) set to 0; the diagonal and pure sellers' rows 0 as well
        Tp = np.asarray(ipfl.thresholds(markets, np.zeros((e, m, m)), fresh("published"),
                                        prices=P), float)
        stalled = np.isfinite(T) & (T > 0) & (Ni + T <= 2.0 * Nj)
        ok &= Tp == np.where(stalled, 0.0, T)
        bad = np.argwhere(~ok)
        gaps.add("threshold_edges", float(len(bad)),
                 (gain.name, EDGE_PRICES[bad[0][0]], *bad[0][1:].tolist()) if len(bad)
                 else None)
        # one pair (a buyer's) as plain numbers (the public Gain.thresholds broadcasts them),
        # away from g_i(N_j), which one number may round differently: at the price 0, and
        # for the sqrt gain's closed form at half of g_i(N_j)
        ends = ((0, e - 1) if isinstance(gain, ipfl.SqrtGain) else (0,)) if len(buyers) \
            else ()
        one = [gain.thresholds(float(P[k, i, j]), float(N[j]), float(K[i]), float(N[i]))
               for k in ends]
        wrong = sum(np.shape(x) != () or not _same_root(float(x), float(T[k, i, j]))
                    for k, x in zip(ends, one, strict=True))
        gaps.add("threshold_one_pair", float(wrong), gain.name if wrong else None)
        # no pairs at all: an empty answer of the input's shape
        wrong = sum(not _answers_empty(gain, s) for s in EMPTY_SHAPES)
        gaps.add("threshold_no_pairs", float(wrong), gain.name if wrong else None)
        _small_data_gaps(gaps, gain, N, K)
    _tiny_price_gaps(gaps, N, K)


SMALL_DATA_PRICES = (0.5, 0.05)
"""The prices of :func:`_small_data_gaps`, as fractions of g_i(N_j): roots."""


def _small_data_gaps(gaps: Gaps, gain, N, K) -> None:
    """Box 2's roots at placed prices, :data:`SMALL_DATA_PRICES` of g_i(N_j), for the first
    buyer's row asked of ``gain.thresholds``, each against the oracle
    (:func:`_check_threshold`): on the market's data, and at data amounts below 1 (a Market
    accepts any positive amount; the type spaces draw 20 or more): the market's data scaled
    by a power of two (exact), so that the smallest client other than the first buyer holds
    between 2^-6 and 2^-5."""
    buyers = np.flatnonzero(K > 0)
    if not len(buyers) or len(N) < 2:
        return
    i = int(buyers[0])
    js = np.array([j for j in range(len(N)) if j != i])
    g = oipfl.gain_function(gain)
    # the market's own data too (the draws' roots are checked at the prices faced; these
    # are placed, and reach the gains only this check draws: EDGE_ALPHAS)
    for Ns in (N, N * 2.0 ** -(math.floor(math.log2(N[js].min())) + 6)):
        P = np.array(SMALL_DATA_PRICES)[:, None] * gain.value(Ns[js], K[i], Ns[i])[None, :]
        T = np.asarray(gain.thresholds(P, Ns[js][None, :], K[i], Ns[i]), float)
        others = math.fsum(Ns) - Ns[i]
        for a in range(len(SMALL_DATA_PRICES)):
            for b, j in enumerate(js.tolist()):
                _check_threshold(gaps, g, float(K[i]), float(Ns[i]), float(Ns[j]),
                                 float(P[a, b]), float(T[a, b]), "exact", others,
                                 ("placed root", gain.name, float(Ns[j]), i, j),
                                 oipfl.marginal_limit(gain, float(K[i]), float(Ns[i]),
                                                      float(Ns[j])))


def price_edge_gaps(gaps: Gaps, market, D) -> None:
    """Eq. 10's model-difference term where it adds nothing (``Market.prices``,
    :func:`mechanisms.ipfl.model_difference`: "d_ij = 0 or lam = 0 adds nothing, never
    inf * 0"): a Market built without lam (its documented default, 0) prices P_ij = c_j
    whatever D; so does lam = 0 with D scaled until (N_j/N_i) d_ij overflows float64 (every
    d finite), and a lam of 1e308 with every d 0. Off the diagonal exactly; the diagonal
    inf. Each entry off counts 1."""
    N, c, K = (np.asarray(x, float) for x in (market.N, market.c, market.K))
    m = len(N)
    D = np.asarray(D, float)
    top = np.abs(D).max(initial=0.0)
    big = D / top * 1.7e308 if top > 0 else D
    want = np.broadcast_to(c[None, :], (m, m)).copy()
    np.fill_diagonal(want, INF)
    got = [ipfl.Market(N=N, c=c, K=K).prices(D), ipfl.Market(N=N, c=c, K=K, lam=0.0).prices(big),
           ipfl.Market(N=N, c=c, K=K, lam=1e308).prices(np.zeros((m, m)))]
    wrong = sum(int((np.asarray(P, float) != want).sum()) for P in got)
    gaps.add("price_edges", float(wrong))


TINY_PRICE_Q = (1e8, 1.01e9, 3e9, 1e10, 1e12)
"""The q = 4 sqrt(K_i) / (P sqrt(N_j)) of :func:`_tiny_price_gaps`' placed prices."""


def _tiny_price_gaps(gaps: Gaps, N, K) -> None:
    """The sqrt gain's closed form at placed tiny prices, q (:data:`TINY_PRICE_Q`) from 1e8
    to 1e12 (around and in its large-q asymptote, which a draw reaches only in the cheap-data
    markets), for the first buyer of the market and every other client: each threshold
    against the cancellation-free root (:func:`_check_sqrt_threshold`)."""
    buyers = np.flatnonzero(K > 0)
    if not len(buyers):
        return
    i = int(buyers[0])
    js = np.array([j for j in range(len(N)) if j != i])
    if not len(js):
        return
    q = np.array(TINY_PRICE_Q)[:, None]
    P = 4.0 * math.sqrt(K[i]) / (q * np.sqrt(N[js])[None, :])
    T = ipfl.SqrtGain().thresholds(P, N[js][None, :], K[i], N[i])
    g = oipfl.gain_function(ipfl.SqrtGain())
    for a in range(len(TINY_PRICE_Q)):
        for b, j in enumerate(js.tolist()):
            _check_sqrt_threshold(gaps, g, float(K[i]), float(N[i]), float(N[j]),
                                  float(P[a, b]), float(T[a, b]), ("tiny price", i, j))


def scenario_gaps(gaps: Gaps, market) -> None:
    """The paper's scenarios (mechanisms.roles, mechanisms.paper) against the specification,
    on parameters read off the market: each client's role from its type (a pure buyer, a
    pure seller, else a trader; the last of three or more an attacker), types drawn for those
    roles (K = 1e3 + the largest K, C = 0.5 + the largest finite c, seed N_0, fixed when
    lam < 2.5) in the role table's ranges and equal to the oracle's draws (K_i ~ U(K/2, K)
    for every client, then c_i ~ U(C/2, C), seeded: :func:`proofs.oracle.ipfl.role_types`),
    and the same draws for the others when client 0's role changes; every attack on client
    0's derived model (:func:`models`), the seeded ones equal to the oracle's draws, and
    which of them ride free; the attackers' placement (at random: the oracle's seeded
    choice) and :func:`mechanisms.roles.market_roles`' and ``draw_types``' defaults; the
    inclusive
    market's block order, also with its defaults (the Fig. 5 market) and with one block
    given by keyword; the paper's settings."""
    N, c, K = (np.asarray(x, float) for x in (market.N, market.c, market.K))
    m = len(N)
    kinds = ["buyer" if ci == INF else "seller" if ki == 0 else "trader"
             for ci, ki in zip(c.tolist(), K.tolist(), strict=True)]
    if m >= 3:
        kinds[-1] = "attacker"
    seed = int(N[0])
    scale = 1e3 + float(K.max())
    C = 0.5 + float(np.max(c[np.isfinite(c)], initial=0.0))
    fixed = float(market.lam) < 2.5
    Kd, cd = roles.draw_types(tuple(kinds), K=scale, C=C, rng=seed, fixed=fixed)
    wrong = sum(not oipfl.role_types_conform(r, float(k), float(x), scale, C, fixed)
                for r, k, x in zip(kinds, Kd, cd, strict=True))
    wrong += (Kd.tolist(), cd.tolist()) != oipfl.role_types(kinds, scale, C, seed, fixed)
    other = ("seller" if kinds[0] != "seller" else "trader", *kinds[1:])
    K2, c2 = roles.draw_types(other, K=scale, C=C, rng=seed, fixed=fixed)
    wrong += sum((float(K2[j]), float(c2[j])) != (float(Kd[j]), float(cd[j]))
                 for j in range(1, m))
    honest = np.asarray(models(market)[0][0], float)
    # every attack (a fresh name each), its values as specified and, where it draws, the
    # oracle's seeded draws; which of them ride free (an unknown name does not)
    wrong += tuple(roles.ATTACKS) != oipfl.ATTACKS
    for name in oipfl.ATTACKS:
        kind = fresh(name)
        attacked = np.asarray(roles.attack(kind, honest, rng=seed), float).ravel().tolist()
        wrong += not oipfl.attack_conforms(name, honest.tolist(), attacked)
        wrong += oipfl.attack_draws(name, honest.tolist(), seed) not in (None, attacked)
    wrong += sum(roles.attacker_is_free_rider(fresh(name)) != oipfl.free_rider(name)
                 for name in (*oipfl.ATTACKS, "none"))
    a = seed % m
    # m by keyword, as the signature allows (generated mutant 1f5c5081f6, `m, /,`, refused it)
    wrong += list(roles.market_roles(m=m, attackers=a, placement=fresh("last"))) != \
        ["trader"] * (m - a) + ["attacker"] * a
    # the defaults as documented: no attacker, placed last; types drawn (not fixed)
    wrong += list(roles.market_roles(m)) != ["trader"] * m
    wrong += list(roles.market_roles(m, attackers=a)) != ["trader"] * (m - a) + ["attacker"] * a
    Kx, cx = roles.draw_types(tuple(kinds), K=scale, C=C, rng=seed)
    wrong += (Kx.tolist(), cx.tolist()) != oipfl.role_types(kinds, scale, C, seed, False)
    placed = list(roles.market_roles(m, attackers=a, placement=fresh("random"), rng=seed))
    wrong += placed != oipfl.random_placement(m, a, seed)
    blocks = (seed % 4, seed % 3, seed % 5, seed % 2)
    wrong += list(roles.inclusive_roles(*blocks)) != oipfl.inclusive_roles(*blocks)
    # its defaults (the Fig. 5 market), all of them and all but one block given by keyword
    fig5 = oipfl.INCLUSIVE_MARKET
    wrong += list(roles.inclusive_roles()) != oipfl.inclusive_roles(**fig5)
    name = tuple(fig5)[seed % 4]
    wrong += (list(roles.inclusive_roles(**{name: blocks[0]}))
              != oipfl.inclusive_roles(**{**fig5, name: blocks[0]}))
    wrong += any(getattr(paper, k) != v for k, v in oipfl.IPFL_SETTINGS.items())
    gaps.add("scenarios", float(wrong))


# ---------------------------------------------------------------------- the property


def _mode(case) -> str:
    return getattr(case, "thresholds", None) or "exact"


def _one_market_gaps(subject, market, D, names, mode, with_models=True) -> float:
    with warnings.catch_warnings(record=True) as noise:  # silent on well-formed input
        warnings.simplefilter("always")
        out = subject.settle(market, D, allow_negative=True, thresholds=fresh(mode))
    view = outcome_view(out)
    gaps = ipfl_gaps(market, D, view, names, mode, baseline_ledgers(market, view))
    gaps.add("warnings", float(len(noise)), [str(w.message) for w in noise[:1]] or None)
    if with_models:
        theta, reference, eta, Dm, Pm = _model_outputs(market, np.asarray(view.A))
        model_gaps(gaps, theta, reference, eta, np.asarray(market.N, float).tolist(), view.A,
                   Dm, Pm)
        gradient_gaps(gaps, theta, reference)
        range_gaps(gaps, theta, reference)
        scale_gaps(gaps, theta, reference, Dm)
        scenario_gaps(gaps, market)
        threshold_edge_gaps(gaps, market)
        price_edge_gaps(gaps, market, D)
    # the one-market outcome's accessors
    m = market.m
    A = np.asarray(view.A)
    wrong = sum(list(out.sellers_of(i)) != np.flatnonzero(A[i]).tolist()
                or list(out.buyers_of(i)) != np.flatnonzero(A[:, i]).tolist()
                for i in range(m))
    gaps.add("accessors", float(wrong))
    _close(gaps, "budget_surplus", out.budget_surplus, math.fsum(view.p),
           MONEY_TOL * (1.0 + math.fsum(abs(x) for x in view.p)))
    return gaps.violation


DATA_UNITS = (2.0**-12, 2.0**30)
"""The other units of data of :func:`_other_data_units`: every N_i times each."""


def _other_data_units(subject, market, D, names, mode) -> float:
    """The market in other units of data (:data:`DATA_UNITS`: N_i of 0.005 to 0.5, and of
    2e10 to 2e12, where the type spaces draw 20 to 2,000; a Market accepts any positive
    amount), cleared by the subject's own one-market path and compared with the oracle
    (:func:`_one_market_gaps`, without the models). K_i goes with N_i where the gain is the
    paper's (Eq. 4, g depends on K_i / N_i and x / N_i) and stays for the log and power gains
    (x / N_i only), so each gain, and every price, threshold in data units aside, is what it
    was: the same trades, in the regimes of the drawn market, at data amounts of another
    size. One unit or none a market, by its total data: each unit on one market in four (a
    clearing and the oracle: 1.5 ms a market, 8.5 ms for the exact rule). Skipped for a gain
    of your own (its units are its own)."""
    pick = int(np.sum(market.N)) % 4
    if pick >= len(DATA_UNITS) or \
            not isinstance(market.gain, ipfl.SqrtGain | ipfl.LogGain | ipfl.PowerGain):
        return 0.0
    unit = DATA_UNITS[pick]
    K = np.asarray(market.K, float) * (unit if isinstance(market.gain, ipfl.SqrtGain) else 1.0)
    mk = ipfl.Market(N=np.asarray(market.N, float) * unit, c=market.c, K=K, lam=market.lam,
                     gain=market.gain)
    return _one_market_gaps(subject, mk, D, names, mode, False)


def ipfl_conforms(subject, case) -> float:
    """The property's one-instance check: the subject clears ``case``'s market and its lying
    twin (:func:`lied`) itself (its ``settle``); each outcome, the baselines' ledger and the
    derived models' distances and prox-centres (:func:`models`) are compared with the oracle
    (:func:`ipfl_gaps`, :func:`model_gaps`). Every effective example discriminates."""
    mode, names = _mode(case), subject_rules(subject)
    worst = _one_market_gaps(subject, case.market, case.D, names, mode)
    if case.client is not None and case.factor is not None:
        a = {"N": case.market.N[None], "c": case.market.c[None], "K": case.market.K[None],
             "client": np.array([case.client]), "factor": np.array([case.factor])}
        N, c, K = (x[0] for x in lied(a))
        mk = ipfl.Market(N=N, c=c, K=K, lam=case.market.lam, true_N=case.market.N,
                         true_c=case.market.c, true_K=case.market.K, gain=case.market.gain)
        worst = max(worst, _one_market_gaps(subject, mk, case.D, names, mode, False))
    return worst


def _ipfl_hook(subject):
    """The batch hook: the subject's bulk clearing (mechanisms.ipfl.clear_batch) of a whole
    batch and of its lying twin, then the oracle market by market; None for a subject that
    cannot be cleared in bulk."""
    if not isinstance(subject, IpflMechanism) or batch_rule(subject) is None:
        return None
    names = subject_rules(subject)

    def check(markets, D, mode, with_models):
        with warnings.catch_warnings(record=True) as noise:  # silent on well-formed input
            warnings.simplefilter("always")
            out = ipfl.clear_batch(markets, D, subject.rule, payments=subject.money,
                                   prices=subject.prices, thresholds=fresh(mode),
                                   allow_negative_distances=True,
                                   allow_asymmetric_distances=True)
        views = _views_of_batch(out)
        B, m = markets.N.shape
        ones = np.ones((B, m, m))
        with warnings.catch_warnings(record=True) as ledger:
            warnings.simplefilter("always")
            full = np.asarray(ipfl.baseline_utilities(markets, ones), float).tolist()
            own = np.asarray(ipfl.baseline_utilities(markets, out.adjacency), float).tolist()
        if with_models:
            theta, reference, eta = models(markets)
            metrics = tuple(map(fresh, ("l2sq", "cosine")))  # proofs.names
            Dm = {x: [distances.pairwise_distances(theta[k], x, reference=reference[k])
                      for k in range(B)] for x in metrics}
            Pm = {x: [distances.prox_centres(theta[k], out.adjacency[k], markets.N[k],
                                             float(eta[k]), x, reference=reference[k])
                      for k in range(B)] for x in metrics}
        cols = {k: np.asarray(getattr(markets, k), float).tolist()
                for k in ("N", "c", "K", "lam", "true_N", "true_c", "true_K")}
        Dl = np.asarray(D, float).tolist()
        viol = np.empty(B)
        for k in range(B):
            mk = SimpleNamespace(gain=markets.gain, **{f: v[k] for f, v in cols.items()})
            base = ((ones[k], full[k]), (views[k].A, own[k]))
            gaps = ipfl_gaps(mk, Dl[k], views[k], names, mode, base)
            if with_models:
                model_gaps(gaps, theta[k], reference[k], float(eta[k]), cols["N"][k],
                           views[k].A, {x: Dm[x][k] for x in Dm}, {x: Pm[x][k] for x in Pm})
                if k % 4 == 0:  # ~55 us a market: every fourth (each draws afresh)
                    range_gaps(gaps, theta[k], reference[k])
                if k == 0:  # the market-independent part: once a batch (~1 ms a market)
                    scenario_gaps(gaps, markets.market(k))
                    threshold_edge_gaps(gaps, markets.market(k))
                    price_edge_gaps(gaps, markets.market(k), Dl[k])
                    gradient_gaps(gaps, theta[k], reference[k])  # ~1-3 ms a market
                    scale_gaps(gaps, theta[k], reference[k], {x: Dm[x][k] for x in Dm})
            viol[k] = gaps.violation
            if with_models and k == 0:
                viol[k] = max(viol[k], _other_data_units(subject, markets.market(k),
                                                         np.asarray(D[k]), names, mode))
        # a warning of the clearing or the ledger: once a batch
        viol[0] = max(viol[0], float(len(noise) + len(ledger)))
        return viol

    def evaluate(a):
        mode = a.get("thresholds") or "exact"
        gain = a.get("gain") or "sqrt"
        truthful = ipfl.MarketArrays(a["N"], a["c"], a["K"], a["lam"], gain=gain)
        worst = check(truthful, a["D"], mode, True)
        if a.get("client") is not None and a.get("factor") is not None:
            N, c, K = lied(a)
            lying = ipfl.MarketArrays(N, c, K, a["lam"], a["N"], a["c"], a["K"], gain=gain)
            worst = np.maximum(worst, check(lying, a["D"], mode, False))
        return worst

    return evaluate


@st.composite
def _with_a_liar(draw, max_m):
    gain = GAINS[draw(st.sampled_from(EVERY_GAIN))]
    mode = draw(st.sampled_from(EVERY_MODE))
    market, D = draw(ipfl_instances(symmetric=None, min_m=2, max_m=max_m, gain=gain))
    client, factor = draw(misreports(market.m))
    return IpflCase(market, D, client, factor, thresholds=mode)


def _ipfl_instances(max_clients=None):
    return _with_a_liar(MAX_CLIENTS if max_clients is None else max_clients)


_ipfl_instances.clients = (2, MAX_CLIENTS)


# ==================================================================================== CPL


@dataclass(frozen=True)
class CplView:
    """One game's answer as a subject gave it."""

    q: list
    prices: list
    multiplier: float  # NaN: none given (a pricing rule)
    v_threshold: float
    status: str  # "slack", "degenerate" or another status (binding / optimal / ...)
    objective: float
    spent: float
    budget_residual: float
    payments: list | None = None
    utilities: list | None = None
    kkt_residual: float | None = None  # None: not reported by the path; NaN: reported None


def _view_of_equilibrium(eq) -> CplView:
    def num(x):
        return math.nan if x is None else float(x)

    return CplView(np.asarray(eq.q, float).tolist(), np.asarray(eq.prices, float).tolist(),
                   num(eq.multiplier), num(eq.v_threshold), str(eq.status),
                   float(eq.objective), float(eq.spent), float(eq.budget_residual),
                   np.asarray(eq.payments, float).tolist(),
                   np.asarray(eq.utilities, float).tolist(),
                   math.nan if eq.kkt_residual is None else float(eq.kkt_residual))


def _views_of_batch_eq(eq) -> list[CplView]:
    out = []
    for k in range(eq.q.shape[0]):
        status = "slack" if eq.slack[k] else "degenerate" if eq.degenerate[k] else "binding"
        out.append(CplView(eq.q[k].tolist(), eq.prices[k].tolist(), float(eq.multiplier[k]),
                           float(eq.v_threshold[k]), status, float(eq.objective[k]),
                           float(eq.spent[k]), float(eq.budget_residual[k])))
    return out


_SHAPES = {"uniform": lambda a, G: [1.0] * len(a),
           "weighted": lambda a, G: list(a),
           "gradient": lambda a, G: [x * y for x, y in zip(a, G, strict=True)]}


def _cpl_kind(subject) -> tuple[str, str | None]:
    """("solver", None), ("posted", shape name) or ("pricing", None)."""
    if isinstance(subject, CplSolver):
        return ("solver", None) if subject.method == "bisection" else ("other-solver", None)
    rule = getattr(subject, "rule", None)
    if isinstance(rule, str) and rule in _SHAPES:
        return "posted", rule
    return "pricing", None


def cpl_gaps(game, view: CplView, kind: tuple, aggregated: list | None = None,
             v0: list | None = None, edges: list | None = None,
             floor: float | None = None, roots: list | None = None) -> Gaps:
    """Compare one game's answer ``view`` with the oracle (``kind`` from
    :func:`_cpl_kind`; ``aggregated``: triples from :func:`_aggregated`);
    ``v0``: what :func:`mechanisms.cpl.best_response_v0` (the authors' responses as if
    v = 0) returned for the view's prices; ``edges``: pairs (prices, what
    :func:`mechanisms.cpl.best_response` returned for them) at the ends of the float range,
    :func:`_edge_prices`). :func:`mechanisms.cpl.spend_scale` of the view's q is compared with
    the oracle's sum of the spend's terms' sizes. ``floor``: what
    :func:`mechanisms.cpl.posted_floor_spend` returned for a posted price's shape at its
    default level (q_min), against :func:`proofs.oracle.cpl.posted_floor_spend`. ``roots``:
    pairs (prices, what :func:`mechanisms.cpl.unconstrained_response` returned for them) at
    :func:`_root_prices`, each against the oracle's root of the cubic (its best response
    clipped to [0, an upper bound of the root]) to :data:`ROOT_RTOL`."""
    gaps = Gaps()
    a = np.asarray(game.a, float).tolist()
    G, c, v = (np.asarray(x, float).tolist() for x in (game.G, game.c, game.v))
    n = len(a)
    q_max = np.broadcast_to(np.asarray(game.q_max, float), (n,)).tolist()
    q_min, B = float(game.q_min), float(game.budget)
    K = ocpl.bound_coefficients(float(game.alpha), a, G, float(game.R))
    for k, (got, want) in enumerate(zip(np.asarray(game.K, float).tolist(), K, strict=True)):
        _close(gaps, "bound_coefficients", got, want, 1e-12 * abs(want), k)
    _close(gaps, "weights", math.fsum(a), 1.0, 1e-12)
    # the same weights given at a scale where their sum overflows float64 (the largest put
    # in [2^1022, 2^1023) by a power of two): normalised to the oracle's weights all the same
    scaled = np.ldexp(np.asarray(a), 1023 - math.frexp(max(a))[1])
    for k, (got, want) in enumerate(zip(cpl.normalised_weights(scaled).tolist(),
                                        ocpl.weights(a), strict=True)):
        _close(gaps, "weights_at_scale", got, want, 1e-12 * want, k)
    gaps.add("settings", float(any(getattr(paper, k) != v
                                   for k, v in ocpl.CPL_SETTINGS.items())))
    q, P = view.q, view.prices
    # the clients' best responses to the subject's prices
    for k in range(n):
        want = ocpl.best_response(c[k], v[k], K[k], P[k], q_min, q_max[k])
        _close(gaps, "best_response", q[k], want, CPL_RTOL * want, k)
    for prices, got in edges or ():
        for k in range(n):
            want = ocpl.best_response(c[k], v[k], K[k], prices[k], q_min, q_max[k])
            _close(gaps, "best_response_at_the_edge", got[k], want, CPL_RTOL * want, k)
    for prices, got in roots or ():
        for k in range(n):
            if 0.0 < v[k] * K[k] < ROOT_VK_MIN:
                continue  # the oracle's cubic at the root is below the normal floats
            # the root is at most P/(2c) + cbrt(v K / 2c): the cubic is >= 0 there
            top = (max(prices[k], 0.0) / (2.0 * c[k]) + (v[k] * K[k] / (2.0 * c[k])) ** (1 / 3))
            want = ocpl.best_response(c[k], v[k], K[k], prices[k], 0.0, 1.000001 * top + 1e-300)
            _close(gaps, "unconstrained_response", got[k], want, ROOT_RTOL * want, k)
    if v0 is not None:
        for k in range(n):
            want = ocpl.best_response_v0(c[k], P[k], q_min, q_max[k])
            _close(gaps, "best_response_v0", v0[k], want, 1e-15 * want, k)
    if all(x > 0 for x in q):
        want = ocpl.spend_scale(q, c, v, K)
        _close(gaps, "spend_scale", cpl.spend_scale(game, np.asarray(q, float)), want,
               CPL_RTOL * want)
    terms = math.fsum(abs(P[k] * q[k]) for k in range(n))
    _close(gaps, "objective", view.objective, ocpl.bound(K, q),
           CPL_RTOL * (1 + ocpl.bound(K, q)))
    _close(gaps, "spent", view.spent, ocpl.spend(P, q), CPL_RTOL * (1 + terms))
    _close(gaps, "budget_residual", view.budget_residual,
           abs(view.spent - B) / max(abs(B), 1.0), CPL_RTOL)
    if view.payments is not None:
        for k in range(n):
            _close(gaps, "payments", view.payments[k], P[k] * q[k],
                   CPL_RTOL * (1 + abs(P[k] * q[k])), k)
    if view.utilities is not None:
        U = ocpl.client_utilities(P, q, c, v, K)
        for k in range(n):
            _close(gaps, "utilities", view.utilities[k], U[k],
                   CPL_RTOL * (1 + abs(P[k] * q[k]) + v[k] * ocpl.bound(K, q)), k)
    for participated, scale, got in aggregated or ():
        # the oracle reads only the rows of the clients that participated, and normalises
        # the weights it is given (as the code must: data sizes d_n will do)
        want = ocpl.unbiased_aggregate([0.5], [[k + 1.0] for k in range(n)], participated,
                                       [scale * x for x in a], q)
        _close(gaps, "aggregation", got[0], want[0], 1e-12 * (1 + abs(want[0])))
    what, shape = kind
    if what == "solver":
        eq = ocpl.equilibrium(c, v, K, q_min, q_max, B)
        status = view.status if view.status in ("slack", "degenerate") else "binding"
        gaps.add("status", 0.0 if status == eq["status"] else 1.0, (status, eq["status"]))
        for k in range(n):
            _close(gaps, "q", q[k], eq["q"][k], CPL_Q_RTOL * eq["q"][k], k)
            size = 2 * c[k] * eq["q"][k] + v[k] * K[k] / eq["q"][k] ** 2
            _close(gaps, "prices", P[k], eq["prices"][k], CPL_Q_RTOL * size, k)
        if eq["status"] == "binding" and view.kkt_residual is not None \
                and math.isnan(view.kkt_residual):
            # none reported (a one-game Equilibrium's None): only where no client is
            # interior (a client within KKT_MARGIN of a bound may count either way)
            inside = [k for k in range(n) if K[k] > 0 and q_min * (1 + KKT_MARGIN) < q[k]
                      < q_max[k] * (1 - KKT_MARGIN)]
            gaps.add("kkt_residual", 1.0 if inside else 0.0, ("none reported", inside))
        elif eq["status"] == "binding" and view.kkt_residual is not None:
            # max over the interior clients of |4 c q^3 / K + v - 1/lambda*| lambda*
            mu = 1.0 / view.multiplier
            inner = [abs(ocpl.kkt_value(c[k], v[k], K[k], q[k]) - mu) / mu for k in range(n)
                     if q_min < q[k] < q_max[k] and K[k] > 0]
            if inner:
                _close(gaps, "kkt_residual", view.kkt_residual, max(inner), 1e-9)
            else:  # reported where no client is interior
                gaps.add("kkt_residual", 1.0, ("reported with no interior client",
                                               view.kkt_residual))
        if eq["status"] == "binding":
            # the exact solver (xtol = 0: 1/lambda* to a few ulps) spends a binding budget to
            # the rounding of the spend, a sum of n terms of its scale (as cpl_one_path
            # assumes of it): |spent - B| <= (n + 4) eps x the oracle's spend scale of q
            _close(gaps, "spends_budget", view.spent, B,
                   (n + 4) * EPS * ocpl.spend_scale(q, c, v, K))
            _close(gaps, "multiplier", 1.0 / view.multiplier, eq["mu"], CPL_MU_RTOL * eq["mu"])
            _close(gaps, "v_threshold", view.v_threshold, eq["mu"] / 3.0,
                   CPL_MU_RTOL * eq["mu"])
        elif eq["status"] == "slack":
            _close(gaps, "multiplier", view.multiplier, 0.0, 0.0)
            _close(gaps, "v_threshold", view.v_threshold, INF, 0.0)
    elif what == "posted":
        s = _SHAPES[shape](a, G)
        scale = [P[k] / s[k] for k in range(n) if s[k] > 0]
        p = scale[0] if scale else math.nan
        gaps.add("posted_scale", 0.0 if p > 0 else INF)
        for k in range(n):
            _close(gaps, "posted_shape", P[k], p * s[k], 1e-12 * abs(p * s[k]), k)
        resp = [ocpl.best_response(c[k], v[k], K[k], P[k], q_min, q_max[k]) for k in range(n)]
        _close(gaps, "posted_budget", ocpl.spend(P, resp), B, CPL_RTOL * max(abs(B), 1.0))
        if floor is not None:
            want = ocpl.posted_floor_spend(c, v, K, s, q_min, q_min, q_max)
            if math.isinf(want) or math.isinf(floor):
                gaps.add("posted_floor_spend", 0.0 if want == floor else INF, (floor, want))
            else:
                _close(gaps, "posted_floor_spend", floor, want,
                       CPL_RTOL * (1.0 + abs(want)))
    return gaps


def _participations(n: int) -> list[list[bool]]:
    return [[True] * n, [k % 2 == 0 for k in range(n)]]


AGGREGATION_SCALE = 7.0
"""The weights handed to :func:`mechanisms.cpl.unbiased_aggregate` in :func:`_aggregated`'s
further rounds: 7 times the game's (weights not summing to 1, as data sizes d_n would be,
which it must normalise), with the absent clients' rows of the updates NaN (ignored: the
oracle never reads them)."""


def _aggregated(game, q, further: bool = True) -> list:
    """Triples (participated, scale, what :func:`mechanisms.cpl.unbiased_aggregate` returned
    for w = [0.5], updates k + 1, the weights scale x the game's a and the participation
    probabilities q): the game's own weights (scale 1) for each pattern of
    :func:`_participations`; ``further``: also every other client from the second, every
    client, and none (an empty round), at :data:`AGGREGATION_SCALE` with NaN rows where
    absent."""
    n = game.n
    rounds = [(pattern, 1.0) for pattern in _participations(n)]
    if further:
        rounds += [(pattern, AGGREGATION_SCALE) for pattern in
                   ([k % 2 == 1 for k in range(n)], [True] * n, [False] * n)]
    out = []
    for pattern, scale in rounds:
        updates = np.arange(1.0, n + 1.0)[:, None]
        if scale != 1.0:
            updates[~np.asarray(pattern, bool)] = np.nan
        got = cpl.unbiased_aggregate([0.5], updates, pattern, scale * game.a, q)
        out.append((pattern, scale, np.asarray(got, float).tolist()))
    return out


def cpl_conforms(subject, case) -> float:
    """The property's one-game check: the subject's own ``solve`` of the game, compared with
    the oracle (:func:`cpl_gaps`)."""
    game = case.game
    eq = subject.solve(game)
    view = _view_of_equilibrium(eq)
    edges = [(P.tolist(), np.asarray(cpl.best_response(game, P), float).tolist())
             for P in _edge_prices(game.n)]
    roots = [(P.tolist(), np.asarray(cpl.unconstrained_response(game, P), float).tolist())
             for P in _root_prices(game)]
    kind = _cpl_kind(subject)
    return cpl_gaps(game, view, kind, _aggregated(game, view.q), _v0(game, view.prices), edges,
                    _floor(cpl.GameBatch.from_games([game]), kind, [0])[0], roots).violation


def _floor(games, kind, rows) -> list:
    """:func:`mechanisms.cpl.posted_floor_spend` of a built-in posted price's shape (the
    subject's) on the games ``rows`` of a GameBatch (None for the others, and for a subject
    that is not a built-in posted price)."""
    out = [None] * games.size
    if kind[0] == "posted" and len(rows):
        shape = np.array([_SHAPES[kind[1]](a, G) for a, G in
                          zip(games.a.tolist(), games.G.tolist(), strict=True)])
        got = cpl.posted_floor_spend(games, shape)
        for k in rows:
            out[k] = float(got[k])
    return out


def _edge_prices(n: int, shape=None) -> tuple:
    """Prices at both ends of the float range, -/+ its largest finite value for every client
    (``shape``: of a batch, default (n,)): a price is any finite real, and there the cubic's
    scaled form leaves Newton's range (b beyond -/+1e100: :func:`mechanisms.cpl.positive_root`
    answers in closed form)."""
    top = np.finfo(float).max
    return tuple(np.full((n,) if shape is None else shape, sign * top) for sign in (-1.0, 1.0))


ROOT_B = (1e4, 1e16, 1e40, -1e4, -1e16, -1e40, -1e90, -1e200)
"""The b = P / (2 c s), s = cbrt(v K / 2c), of :func:`_root_prices`: Newton's range of
:func:`mechanisms.cpl.positive_root` (|b| <= 1e100) far from b ~ 1 on both sides, which the
drawn prices (the equilibria's) seldom reach, and its closed form below b = -1e100 (x =
1/sqrt(-b); above b = 1e100 the root, about P / 2c, would overflow the oracle's cubic)."""
ROOT_RTOL = 1e-14
"""Of :func:`cpl_gaps`' unconstrained roots against the oracle's (the code's were within
5.1e-16 relative on 300 random (c, v, K) at every b of :data:`ROOT_B`, 2,400 roots; seed 1)."""
ROOT_VK_MIN = 1e-290
"""Below it (a subnormal v, say) the oracle's cubic 2 c q^3 - P q^2 - v K at the root has
terms near or below the least normal float: it cannot resolve the root to ROOT_RTOL, and
the unconstrained roots are not compared there (the code's scaled cubic can)."""


def _root_prices(game) -> list:
    """Prices placing every client's scaled cubic at each b of :data:`ROOT_B` (one array of
    the game's or batch's shape each; a client with v K = 0 gets the price 0, one whose price
    would overflow float64 as well)."""
    c = np.asarray(game.c, float)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.cbrt(np.asarray(game.v, float) * np.asarray(game.K, float)) / np.cbrt(2.0 * c)
        out = [b * 2.0 * c * s for b in ROOT_B]
    return [np.where(np.isfinite(P), P, 0.0) for P in out]


def _v0(game, prices) -> list | None:
    """:func:`mechanisms.cpl.best_response_v0` of the prices (one game, or (B, n) of a
    GameBatch), as a list; None where a price is not finite (refused: nothing to compare)."""
    P = np.asarray(prices, float)
    if not np.isfinite(P).all():
        return None
    return np.asarray(cpl.best_response_v0(game, P), float).tolist()


def _cpl_hook(subject):
    """The batch hook: the bisection solver or a built-in posted price on a whole
    GameBatch, then the oracle game by game; None for other subjects."""
    if type(subject).solve not in (CplSolver.solve, CplPricingRule.solve):
        return None
    kind = _cpl_kind(subject)
    if kind[0] == "solver" and not dict(subject.options):
        def answer(games):
            return cpl.solve_batch(games)
    elif kind[0] == "posted":
        def answer(games):
            shape = np.array([_SHAPES[kind[1]](a, G) for a, G in
                              zip(games.a.tolist(), games.G.tolist(), strict=True)])
            return cpl.posted_pricing_batch(games, shape)
    else:
        return None

    def evaluate(games):
        eq = answer(games)
        views = _views_of_batch_eq(eq)
        finite = np.isfinite(eq.prices).all(axis=1)
        v0 = np.asarray(cpl.best_response_v0(games, np.where(finite[:, None], eq.prices, 0.0)))
        edges = [(P[0].tolist(), np.asarray(cpl.best_response(games, P), float))
                 for P in _edge_prices(games.n, (games.size, games.n))]
        # the unconstrained roots at placed prices: the whole batch solved, the first game
        # compared (the oracle bisects ~100 times a root: ~3 ms a game)
        roots = [(P[0].tolist(), np.asarray(cpl.unconstrained_response(games, P), float)[0]
                  .tolist()) for P in _root_prices(games)]
        viol = np.empty(games.size)
        # posted_floor_spend on every fourth game (the oracle's responses: ~0.1 ms a game)
        floor = _floor(games, kind, range(0, games.size, 4))
        # and the aggregation's further rounds (_aggregated) on every fourth game too
        for k in range(games.size):
            game = _game_of(games, k)
            viol[k] = cpl_gaps(game, views[k], kind, _aggregated(game, views[k].q, k % 4 == 0),
                               v0[k].tolist() if finite[k] else None,
                               [(P, got[k].tolist()) for P, got in edges], floor[k],
                               roots if k == 0 else None).violation
        # the first game of each batch through the subject's own one-game solve too: the
        # fields only a one-game answer reports (its KKT residual) against the equations
        one = _view_of_equilibrium(subject.solve(games.game(0)))
        viol[0] = max(viol[0], cpl_gaps(_game_of(games, 0), one, kind).violation)
        return viol

    return evaluate


def _game_of(games, k: int):
    """Game k of a GameBatch, as the fields :func:`cpl_gaps` reads (the batch's own K)."""
    return SimpleNamespace(a=games.a[k], G=games.G[k], c=games.c[k], v=games.v[k],
                           budget=games.budget[k], alpha=games.alpha[k], R=games.R[k],
                           q_min=games.q_min[k], q_max=games.q_max[k], K=games.K[k],
                           n=games.a.shape[1])


_CPL_DRAWS = {"large_v": True, "budget": "any", "positive_budget": True}


def _cpl_instances(max_clients=None):
    top = MAX_CLIENTS if max_clients is None else max_clients
    return cpl_games(max_n=top, **_CPL_DRAWS).map(CplCase)


_cpl_instances.clients = (1, MAX_CLIENTS)


CONFORMANCE_PROPERTIES = {
    "conforms": Property(
        "conforms", "Conforms to the equations",
        "prices, thresholds, graph, remittances, payments, gains, costs, utilities, welfare "
        "and the baselines' ledger equal the oracle's transcription of the subject's rules",
        "Eqs. 3, 4, 5, 10, 12, 13; Box 2; the reference rules",
        "any market the checker draws (truthful reports)", "ipfl", _ipfl_instances,
        ipfl_conforms, sample=lambda: IpflSampler(IpflSpec(liar="any", gains=EVERY_GAIN,
                                                            modes=EVERY_MODE,
                                                            tiers=((24, 0.0005),),
                                                            cheap_data=CHEAP_DATA_SHARE)),
        batch=_ipfl_hook,
        clients=_ipfl_instances.clients,
        note="the oracle (proofs.oracle.ipfl) is written from the paper and the spec; "
             "tolerances and conventions in proofs.conformance"),
    "cpl_conforms": Property(
        "cpl_conforms", "Conforms to the equations (CPL)",
        "bound coefficients, weights, best responses, bound, spend, payments, utilities, "
        "aggregation; the equilibrium of P1' (solver) or the budget-calibrated posted price "
        "equal the oracle's",
        "spec cpl.md: Players, Solvers, Baselines, Aggregation",
        "B > 0 (binding or slack)", "cpl", _cpl_instances, cpl_conforms,
        sample=lambda: CplSampler(**_CPL_DRAWS), batch=_cpl_hook,
        clients=_cpl_instances.clients,
        note="the oracle (proofs.oracle.cpl) is written from the spec"),
}
_EVERY = ("every effective example (no discriminating flag: {what}, checked on each, "
          "could break on any {where})")
CONFORMANCE_PROPERTIES = {
    "conforms": replace(CONFORMANCE_PROPERTIES["conforms"], discriminates=_EVERY.format(
        what="every stage of the outcome", where="market")),
    "cpl_conforms": replace(CONFORMANCE_PROPERTIES["cpl_conforms"], discriminates=_EVERY.format(
        what="every quantity of the answer", where="game")),
}
