"""The iPFL oracle: Zhang, Chai, Ye, Wang, Chen, "Incentivizing inclusive contributions in
model sharing markets" (Nature Communications 2025), equation by equation, as the paper and
the specification (spec ipfl.md; docs/explanation-ipfl.md) state them.

Plain Python: one client, one pair, one subset at a time, Python floats, ``math.fsum`` for
every sum (exactly rounded, so a sum does not depend on the order of its terms: two subsets
holding the same values tie exactly). Clients are indexed 0..m-1; ``N``, ``c``, ``K`` are the
REPORTED types (selection and payments), ``true_N``, ``true_c``, ``true_K`` the truth (realised
gains, costs, utilities and welfare). Conventions, as the specification fixes them:

* a pure buyer (c_j = inf) is never for sale: its price is inf, its threshold 0, it is never
  bought, and a client that sold nothing bears no cost (inf x 0 is 0);
* a pure seller (K_i = 0) never buys: its threshold row is 0 and every rule leaves its row
  empty;
* lam = 0 or d_ij = 0 adds nothing to a price (never inf x 0);
* a price <= 0 gives the threshold inf (always worth buying), a price >= g_i(N_j) the
  threshold 0 (never worth buying).

Used only to check the mechanisms (:mod:`proofs.conformance`), never in their place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "ATTACKS",
    "ENUMERATION_MAX",
    "INCLUSIVE_MARKET",
    "IPFL_SETTINGS",
    "attack_conforms",
    "attack_draws",
    "baseline_utilities",
    "box2_row",
    "cost_plus_price",
    "cost_plus_remittance",
    "distance",
    "distance_gradient",
    "exact_row",
    "free_rider",
    "gain_function",
    "gains",
    "inclusive_roles",
    "local_row",
    "marginal",
    "marginal_limit",
    "market_greedy",
    "market_thresholds",
    "paper_price",
    "paper_remittances",
    "payments",
    "phi",
    "prox_centre",
    "published_threshold",
    "random_placement",
    "role_draws",
    "role_types",
    "role_types_conform",
    "shapley_remittances",
    "share_all_row",
    "sharing_costs",
    "solves",
    "sqrt_threshold",
    "threshold",
    "threshold_kind",
    "utilities",
    "vcg_payments",
    "welfare",
]

INF = math.inf

ENUMERATION_MAX = 16
"""The most candidate sellers (0 < T_ij < inf) the oracle enumerates per buyer: 2^16 subsets.
Beyond it the exact rule is checked by :func:`exact_row`'s dynamic programme over integer
data amounts, and not at all where the amounts are not integers."""

Gain = Callable[[float, float, float], float]  # g(x, K_i, N_i)


# ------------------------------------------------------------------------------ Eq. 4


def sqrt_gain(x: float, K: float, N: float) -> float:
    """Eq. 4: g_i(x) = sqrt(K_i/N_i) - sqrt(K_i/(N_i + x))."""
    return math.sqrt(K / N) - math.sqrt(K / (N + x))


def log_gain(x: float, K: float, N: float) -> float:
    """The log gain the specification admits beside Eq. 4: g_i(x) = K_i log(1 + x/N_i)."""
    return K * math.log1p(x / N)


def power_gain(alpha: float) -> Gain:
    """The power gain the specification admits: g_i(x) = K_i ((1 + x/N_i)^alpha - 1)."""

    def g(x: float, K: float, N: float) -> float:
        return K * ((1.0 + x / N) ** alpha - 1.0)

    return g


def gain_function(gain) -> Gain:
    """The scalar g(x, K_i, N_i) of a market's gain (``Market.gain``): the paper's sqrt gain
    (Eq. 4), the log and power gains written here from their definitions; a gain of the
    user's own (a ``CallableGain``) is its own function, called on one value (it is an input
    of the market, not an equation of the paper)."""
    name = type(gain).__name__
    if name == "SqrtGain":
        return sqrt_gain
    if name == "LogGain":
        return log_gain
    if name == "PowerGain":
        return power_gain(float(gain.alpha))
    fn = getattr(gain, "fn", None)
    if fn is None:
        raise TypeError(f"the oracle knows no gain {gain!r}")

    def own(x: float, K: float, N: float) -> float:
        return float(fn(x, K, N))

    return own


# ------------------------------------------------------------------------------ Eq. 10


def _distance_term(lam: float, Ni: float, Nj: float, d: float) -> float:
    """lam (N_j/N_i) d_ij, 0 when lam = 0 or d_ij = 0."""
    if lam == 0.0 or d == 0.0:
        return 0.0
    return lam * (Nj / Ni) * d


def paper_price(i: int, j: int, N: Sequence[float], c: Sequence[float], lam: float,
                D) -> float:
    """Eq. 10: the price of j's model for buyer i, P_ij = c_j + lam (N_j/N_i) d_ij; inf for
    i = j (nobody buys its own model) and for a pure buyer j (c_j = inf)."""
    if i == j or c[j] == INF:
        return INF
    return c[j] + _distance_term(lam, N[i], N[j], float(D[i][j]))


def cost_plus_price(i: int, j: int, N, c, lam: float, D, markup: float = 0.25) -> float:
    """The cost-plus posted price (a reference rule beside the paper's): (1 + markup) c_j,
    plus the model-difference term lam (N_j/N_i) d_ij the buyer bears as in Eq. 10."""
    if i == j or c[j] == INF:
        return INF
    return (1.0 + markup) * c[j] + _distance_term(lam, N[i], N[j], float(D[i][j]))


def phi(g: Gain, Ki: float, Ni: float, prices: Sequence[float], sizes: Sequence[float],
        n0: float = 0.0, base: float = 0.0) -> float:
    """Eq. 10: phi_i(S) = sum_{j in S} P_ij - g_i(sum_{j in S} N_j), for the sellers S given
    by their ``prices`` and data ``sizes``; ``n0`` data and ``base`` prices already bought
    (the sellers every optimum holds) come on top."""
    return math.fsum([base, *prices]) - g(math.fsum([n0, *sizes]), Ki, Ni)


# ------------------------------------------------------------------------------ Box 2


def marginal(g: Gain, Ki: float, Ni: float, T: float, Nj: float) -> float:
    """The left side of Box 2's equation: g_i(T) - g_i(T - N_j)."""
    return g(T, Ki, Ni) - g(T - Nj, Ki, Ni)


def marginal_limit(gain, Ki: float, Ni: float, Nj: float) -> float:
    """The limit of Box 2's left side g_i(T) - g_i(T - N_j) as T -> inf: N_j g_i'(inf),
    0 for the sqrt and log gains and the power gains with alpha < 1, K_i N_j / N_i for the
    linear one (alpha = 1); 0 for a gain of the user's own (its threshold bracket decides)."""
    if type(gain).__name__ == "PowerGain" and float(gain.alpha) == 1.0:
        return Ki * Nj / Ni
    return 0.0


def threshold_kind(g: Gain, Ki: float, Ni: float, Nj: float, P: float,
                   limit: float = 0.0) -> str:
    """Which of Box 2's cases the pair is in: the left side g_i(T) - g_i(T - N_j) falls from
    g_i(N_j) at T = N_j towards its ``limit`` (:func:`marginal_limit`), so a pure seller's
    row (K_i = 0) and a price P >= g_i(N_j) (no solution: never worth buying) are ``"zero"``
    (T = 0); a price P <= 0, or at or below the limit (the left side never falls to it), is
    ``"inf"`` (always worth buying); any other price has one root, ``"root"``."""
    if Ki == 0.0:
        return "zero"
    if P <= 0.0:
        return "inf"
    if P == INF or P >= g(Nj, Ki, Ni) - g(0.0, Ki, Ni):
        return "zero"
    if P <= limit:
        return "inf"
    return "root"


def threshold(g: Gain, Ki: float, Ni: float, Nj: float, P: float,
              limit: float = 0.0) -> tuple[float, float]:
    """Box 2: the threshold T_ij solving g_i(T) - g_i(T - N_j) = P_ij with T >= N_j, as a
    bracket (lo, hi) that holds the root to float resolution (bisection until no float lies
    between them); (0, 0) and (inf, inf) for the cases of :func:`threshold_kind`."""
    kind = threshold_kind(g, Ki, Ni, Nj, P, limit)
    if kind == "zero":
        return 0.0, 0.0
    if kind == "inf":
        return INF, INF
    return _root_bracket(lambda T: marginal(g, Ki, Ni, T, Nj) > P, Nj)


def _root_bracket(above, Nj: float) -> tuple[float, float]:
    """The root T >= N_j of Box 2's left side (falling with T) at a price, ``above(T)``
    telling whether the left side is still above the price at T: the bracket [N_j, 2 N_j]
    doubled until it holds the root, then halved until no float lies between its ends;
    (inf, inf) past 1e300."""
    lo, hi = Nj, 2.0 * Nj
    while above(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            return INF, INF
    while True:
        mid = lo + (hi - lo) / 2.0
        if not lo < mid < hi:
            return lo, hi
        if above(mid):
            lo = mid
        else:
            hi = mid


def sqrt_threshold(Ki: float, Ni: float, Nj: float, P: float) -> tuple[float, float]:
    """Box 2's threshold for the sqrt gain (Eq. 4) without cancellation: with a = N_i + T -
    N_j and b = N_i + T, g_i(T) - g_i(T - N_j) = sqrt(K_i) (1/sqrt(a) - 1/sqrt(b)) =
    sqrt(K_i) N_j / (sqrt(a) sqrt(b) (sqrt(a) + sqrt(b))), each term to a few ulps even where
    T >> N_j (where the difference of g_i's values cancels); its root T >= N_j for
    0 < P < g_i(N_j) as a bracket (lo, hi) holding it to float resolution, (inf, inf) past
    1e300."""
    rk = math.sqrt(Ki)

    def above(T):  # the left side > P
        a, b = Ni + T - Nj, Ni + T
        sa, sb = math.sqrt(a), math.sqrt(b)
        return rk * Nj / (sa * sb) / (sa + sb) > P  # no overflow below T = 1e300

    return _root_bracket(above, Nj)


def solves(g: Gain, Ki: float, Ni: float, Nj: float, P: float, T: float,
           rtol: float) -> bool:
    """Whether T solves Box 2's equation g_i(T) - g_i(T - N_j) = P to relative ``rtol``:
    the left side, which falls with T, is at least P at T (1 - rtol) and at most P at
    T (1 + rtol), each up to the float noise of evaluating it (16 ulps of its terms)."""
    if not (math.isfinite(T) and T >= Nj):
        return False

    def off(x):  # left side - P, and its float noise
        a, b = g(x, Ki, Ni), g(x - Nj, Ki, Ni)
        return a - b - P, 16.0 * 2.220446049250313e-16 * (abs(a) + abs(b) + abs(P))

    below, noise_below = off(max(T * (1.0 - rtol), Nj))
    above, noise_above = off(T * (1.0 + rtol))
    return below >= -noise_below and above <= noise_above


def published_threshold(g: Gain, Ki: float, Ni: float, Nj: float, P: float,
                        others: float, limit: float = 0.0) -> tuple[str, float, float]:
    """What the published code's numerics give (spec ipfl.md, "The published code's
    numerics"): its root finder starts at 3 N_j on a residual that is 0 below N_j, so when the
    true own-data-inclusive root x = N_i + T is at most 2 N_j it stops in the flat region and
    j is never bought; at a price of 0 it runs off to a huge value and j is always bought.
    Returns (what, lo, hi): ``"never"`` (no n >= 0 buys j: T <= N_j), ``"always"`` (any data
    the buyer can hold buys j: T > ``others``, the data of all the others), ``"root"`` with
    the exact root's bracket, or ``"either"`` (x within float noise of 2 N_j: never bought,
    or the root)."""
    if Ki == 0.0:
        return "never", 0.0, 0.0
    if P <= 0.0:
        return "always", INF, INF
    lo, hi = threshold(g, Ki, Ni, Nj, P, limit)
    if hi == 0.0:
        return "never", 0.0, 0.0
    if lo == INF:
        return "always", INF, INF
    edge = 2.0 * Nj - Ni
    if hi <= edge * (1.0 - 1e-12):
        return "never", lo, hi
    if lo <= edge * (1.0 + 1e-12):
        return "either", lo, hi
    return "root", lo, hi


def _order(i: int, T_row: Sequence[float]) -> list[int]:
    """Box 2's order of the other clients: T_ij descending, ties by the lower index."""
    return sorted((j for j in range(len(T_row)) if j != i), key=lambda j: (-T_row[j], j))


def _greedy_row(i: int, T_row: Sequence[float], N: Sequence[float], stop: bool) -> list[bool]:
    """Box 2's scan in :func:`_order`: take client k while n + N_k < T_ik; at the first
    that fails, STOP (``stop``) or skip it and go on."""
    row = [False] * len(T_row)
    n = 0.0
    for j in _order(i, T_row):
        if n + N[j] < T_row[j]:
            row[j] = True
            n = n + N[j]
        elif stop:
            break
    return row


def box2_row(i: int, T_row: Sequence[float], N: Sequence[float]) -> list[bool]:
    """Box 2 as printed: take the remaining client with the largest threshold while
    n + N_k < T_ik, and STOP at the first that fails."""
    return _greedy_row(i, T_row, N, stop=True)


def local_row(i: int, T_row: Sequence[float], N: Sequence[float]) -> list[bool]:
    """The local rule: Box 2's order, but a client that fails is skipped and the scan goes
    on (its result satisfies both conditions of Eq. 11)."""
    return _greedy_row(i, T_row, N, stop=False)


def share_all_row(i: int, N, c, K) -> list[bool]:
    """The FedAvg-like baseline: a client with a gain (K_i > 0) takes every other model on
    sale (finite reported cost), whatever the price; a pure seller takes none."""
    m = len(N)
    return [K[i] > 0.0 and j != i and c[j] != INF for j in range(m)]


def exact_row(i: int, g: Gain, Ki: float, Ni: float, P_row: Sequence[float],
              T_row: Sequence[float], N: Sequence[float]) -> dict | None:
    """The exact rule's optimum for buyer i (Eq. 10, a global minimiser of phi_i) with its
    documented reduction and tie order: sellers with T_ij = inf are in, T_ij = 0 out, the
    candidates (0 < T < inf) in Box 2's order (T descending, ties by the lower index) and
    every subset s of them enumerated, bit k of s = candidate k; the first minimiser in
    subset order wins.

    Returns None for a pure seller (K_i = 0: buys nothing) and, where more than
    :data:`ENUMERATION_MAX` candidates are not all integers, ``{"checked": False}``.
    Otherwise ``{"checked": True, "in": [...], "out": [...], "candidates": [...], "phi":
    [phi of every subset] or None, "best": the least phi}``: ``phi`` is None beyond
    :data:`ENUMERATION_MAX` candidates, where ``best`` comes from a dynamic programme over
    the integer data amounts (the least price of every reachable total), no tie order."""
    if Ki == 0.0:
        return None
    m = len(T_row)
    forced = [j for j in range(m) if j != i and T_row[j] == INF]
    out = [j for j in range(m) if j != i and T_row[j] == 0.0]
    cand = [j for j in _order(i, T_row) if 0.0 < T_row[j] < INF]
    n0 = math.fsum(N[j] for j in forced)
    base = math.fsum(P_row[j] for j in forced)
    if len(cand) <= ENUMERATION_MAX:
        values = []
        for s in range(1 << len(cand)):
            chosen = [cand[k] for k in range(len(cand)) if s >> k & 1]
            values.append(phi(g, Ki, Ni, [P_row[j] for j in chosen], [N[j] for j in chosen],
                              n0, base))
        return {"checked": True, "in": forced, "out": out, "candidates": cand, "phi": values,
                "best": min(values)}
    if not all(float(N[j]).is_integer() for j in cand):
        return {"checked": False, "in": forced, "out": out, "candidates": cand}
    # least total price of every reachable integer amount of candidate data (a 0/1 knapsack
    # over the amounts, one candidate at a time), then phi at every amount no larger amount
    # reaches as cheaply (g rises with the amount: those cannot be the least)
    least = np.full(int(math.fsum(N[j] for j in cand)) + 1, INF)
    least[0] = 0.0
    for j in cand:
        nj, pj = int(N[j]), P_row[j]
        least[nj:] = np.minimum(least[nj:], least[:-nj] + pj)  # the right side is a copy
    above = np.append(np.minimum.accumulate(least[::-1])[::-1][1:], INF)  # least beyond a
    best = min(base + float(least[a]) - g(n0 + float(a), Ki, Ni)
               for a in np.flatnonzero(least < above))
    return {"checked": True, "in": forced, "out": out, "candidates": cand, "phi": None,
            "best": best}


# ------------------------------------------------------------------------ Eqs. 12, 13


def paper_remittances(g: Gain, A, N, K, lam: float, D) -> list[list[float]]:
    """Eq. 12: r_ij = a_ij [G_i(a_i) - G_i(a_i - e_j) - lam (N_j/N_i) d_ij] with
    G_i(a_i) = g_i(sum_k a_ik N_k), reported N and K."""
    m = len(N)
    R = [[0.0] * m for _ in range(m)]
    for i in range(m):
        bought = [k for k in range(m) if A[i][k]]
        n = math.fsum(N[k] for k in bought)
        whole = g(n, K[i], N[i])
        for j in bought:
            without = g(n - N[j], K[i], N[i])  # a_i - e_j: the data bought less N_j
            R[i][j] = whole - without - _distance_term(lam, N[i], N[j], float(D[i][j]))
    return R


def payments(R) -> list[float]:
    """Eq. 13: p_i = sum_j r_ij - sum_j r_ji."""
    m = len(R)
    return [math.fsum([*(R[i][j] for j in range(m)), *(-R[j][i] for j in range(m))])
            for i in range(m)]


def cost_plus_remittance(A, c, markup: float = 0.25) -> list[list[float]]:
    """The cost-plus rule: each buyer pays each seller it bought from the seller's posted
    price, r_ij = a_ij (1 + markup) c_j (reported c)."""
    m = len(c)
    return [[(1.0 + markup) * c[j] if A[i][j] else 0.0 for j in range(m)] for i in range(m)]


def shapley_remittances(g: Gain, A, N, K, lam: float, D) -> list[list[float]]:
    """The Shapley split: buyer i shares its gain among the sellers S it bought from by their
    Shapley values in the game v(T) = g_i(sum_{l in T} N_l),
    Sh_j = sum_{T subset of S - {j}} |T|! (|S| - |T| - 1)! / |S|! [v(T + j) - v(T)],
    net of the model-difference term: r_ij = Sh_j - lam (N_j/N_i) d_ij (reported N, K)."""
    m = len(N)
    R = [[0.0] * m for _ in range(m)]
    for i in range(m):
        S = [k for k in range(m) if A[i][k]]
        s = len(S)
        if s == 0:
            continue
        value = [g(math.fsum(N[S[b]] for b in range(s) if mask >> b & 1), K[i], N[i])
                 for mask in range(1 << s)]
        for b, j in enumerate(S):
            terms = []
            for mask in range(1 << s):
                if mask >> b & 1:
                    continue
                t = bin(mask).count("1")
                weight = math.factorial(t) * math.factorial(s - t - 1) / math.factorial(s)
                terms.append(weight * (value[mask | 1 << b] - value[mask]))
            R[i][j] = math.fsum(terms) - _distance_term(lam, N[i], N[j], float(D[i][j]))
    return R


# ------------------------------------------------------------------------------ VCG


def _best_value(g: Gain, k: int, excluded: int, P_row, N, Ki: float, Nk: float):
    """max over S of [g_k(sum_{j in S} N_j) - sum_{j in S} P_kj], S among the sellers k can
    buy but ``excluded`` (-1: none): -min phi_k. Sellers at a price <= 0 are in some optimum
    and sellers at a price >= g_k(N_j) need not be (Box 2's threshold facts), so only the
    rest are enumerated. None when more than ENUMERATION_MAX remain."""
    if Ki == 0.0:
        return 0.0
    m = len(P_row)
    sellers = [j for j in range(m) if j != k and j != excluded and P_row[j] < INF]
    forced = [j for j in sellers if P_row[j] <= 0.0]
    cand = [j for j in sellers if 0.0 < P_row[j] < g(N[j], Ki, Nk) - g(0.0, Ki, Nk)]
    if len(cand) > ENUMERATION_MAX:
        return None
    best = -INF
    for s in range(1 << len(cand)):
        chosen = forced + [cand[b] for b in range(len(cand)) if s >> b & 1]
        value = g(math.fsum(N[j] for j in chosen), Ki, Nk) - math.fsum(P_row[j]
                                                                        for j in chosen)
        best = max(best, value)
    return best


def vcg_payments(g: Gain, A, P, N, c, K) -> list[float] | None:
    """VCG with the Clarke pivot, for the objective the exact selection maximises,
    W(A) = sum_k [g_k(a_k) - sum_j a_kj P_kj] (= -sum_k phi_k, Eq. 10):
    p_i = W*_{-i} - [W(A) - v_i(A)], v_i(A) = g_i(a_i) - c_i #{j : a_ji = 1} client i's own
    reported value, W*_{-i} the best objective without i (nobody buys from i, i buys
    nothing). Reported N, c, K; None where a buyer's search exceeds ENUMERATION_MAX."""
    m = len(N)

    def term(k):
        bought = [j for j in range(m) if A[k][j]]
        return g(math.fsum(N[j] for j in bought), K[k], N[k]) - math.fsum(P[k][j]
                                                                          for j in bought)

    W = math.fsum(term(k) for k in range(m))
    out = []
    for i in range(m):
        sold = sum(1 for k in range(m) if A[k][i])
        own = g(math.fsum(N[j] for j in range(m) if A[i][j]), K[i], N[i]) \
            - (c[i] * sold if sold else 0.0)
        parts = []
        for k in range(m):
            if k == i:
                continue
            best = _best_value(g, k, i, P[k], N, K[k], N[k])
            if best is None:
                return None
            parts.append(best)
        out.append(math.fsum(parts) - (W - own))
    return out


# ------------------------------------------------------------------------- Eqs. 3, 5


def gains(g: Gain, A, true_N, true_K) -> list[float]:
    """G_i(a_i) = g_i(sum_j a_ij N_j) with the TRUE data amounts and gain scale."""
    m = len(true_N)
    return [g(math.fsum(true_N[j] for j in range(m) if A[i][j]), true_K[i], true_N[i])
            for i in range(m)]


def sharing_costs(A, true_c) -> list[float]:
    """c_i #{j : a_ji = 1} with the TRUE cost; 0 for a client that sold nothing (a pure
    buyer's inf x 0 is 0)."""
    m = len(true_c)
    out = []
    for i in range(m):
        sold = sum(1 for k in range(m) if A[k][i])
        out.append(true_c[i] * sold if sold else 0.0)
    return out


def utilities(G: Sequence[float], C: Sequence[float], p: Sequence[float]) -> list[float]:
    """Eq. 3: U_i = G_i(a_i) - c_i #{j : a_ji = 1} - p_i."""
    return [G[i] - C[i] - p[i] for i in range(len(G))]


def welfare(G: Sequence[float], A, true_c) -> float:
    """Eq. 5: SW = sum_i [G_i(a_i) - sum_j a_ij c_j] (true values)."""
    m = len(G)
    return math.fsum(G[i] - math.fsum(true_c[j] for j in range(m) if A[i][j])
                     for i in range(m))


def baseline_utilities(g: Gain, W, true_N, true_c, true_K) -> list[float]:
    """The baselines' ledger (spec ipfl.md, "Money"; they pay nothing): client i gains from
    the data of every other client j it puts weight on (W_ij != 0) that sells at all (a
    finite true cost: a pure buyer never sells), and pays c_i for every other client that
    draws on it that way."""
    m = len(true_N)
    support = [[j != i and W[i][j] != 0 and true_c[j] != INF for j in range(m)]
               for i in range(m)]
    return [gain - cost for gain, cost in zip(gains(g, support, true_N, true_K),
                                              sharing_costs(support, true_c), strict=True)]


# ----------------------------------------------------------------- whole markets, for tests


def market_thresholds(market, D) -> list[list[float]]:
    """Box 2's thresholds of every pair of a :class:`mechanisms.ipfl.Market` at the paper's
    prices (Eq. 10), the lower end of each root's bracket (:func:`threshold`); the diagonal
    is 0."""
    g = gain_function(market.gain)
    N, c, K = (list(map(float, x)) for x in (market.N, market.c, market.K))
    m = len(N)
    T = [[0.0] * m for _ in range(m)]
    for i in range(m):
        for j in range(m):
            if i != j:
                P = paper_price(i, j, N, c, float(market.lam), D)
                T[i][j] = threshold(g, K[i], N[i], N[j], P,
                                    marginal_limit(market.gain, K[i], N[i], N[j]))[0]
    return T


def market_greedy(market, D, rule: str = "box2") -> list[list[bool]]:
    """The adjacency of Box 2 as printed (``rule="box2"``) or the local rule (``"local"``)
    on :func:`market_thresholds`."""
    T = market_thresholds(market, D)
    N = list(map(float, market.N))
    row = box2_row if rule == "box2" else local_row
    return [row(i, T[i], N) for i in range(len(N))]


# ---------------------------------------------------------------- distances, Eq. 8


def _minus(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def distance(metric: str, a: Sequence[float], b: Sequence[float],
             reference: Sequence[float]) -> float:
    """The model distance of the specification ("Distances"): ``"l2sq"``
    ||theta_i - theta_j||^2; ``"cosine"`` 1 - cos(theta_i - theta_0, theta_j - theta_0), a
    model equal to the reference theta_0 (no direction) at distance 1 from every other."""
    if metric == "l2sq":
        diff = _minus(a, b)
        return _dot(diff, diff)
    u, v = _minus(a, reference), _minus(b, reference)
    nu, nv = math.sqrt(_dot(u, u)), math.sqrt(_dot(v, v))
    if nu == 0.0 or nv == 0.0:
        return 1.0
    return 1.0 - _dot(u, v) / (nu * nv)


def distance_gradient(metric: str, a: Sequence[float], b: Sequence[float],
                      reference: Sequence[float]) -> list[float]:
    """grad_{theta_i} d(theta_i, theta_j) (spec, "Prox-centre"): l2sq 2 (theta_i - theta_j);
    cosine, with u = theta_i - theta_0 and v = theta_j - theta_0,
    -(v/|v| - cos(u, v) u/|u|)/|u|, zero where u or v vanishes."""
    if metric == "l2sq":
        return [2.0 * x for x in _minus(a, b)]
    u, v = _minus(a, reference), _minus(b, reference)
    nu, nv = math.sqrt(_dot(u, u)), math.sqrt(_dot(v, v))
    if nu == 0.0 or nv == 0.0:
        return [0.0] * len(u)
    cos = _dot(u, v) / (nu * nv)
    return [-(y / nv - cos * x / nu) / nu for x, y in zip(u, v, strict=True)]


def prox_centre(i: int, theta, A, N: Sequence[float], eta: float, metric: str,
                reference: Sequence[float]) -> list[float]:
    """Eq. 8: theta_bar_i = theta_i - (eta/N_i) sum_j a_ij N_j grad_{theta_i} d(theta_i,
    theta_j); a client with no neighbour keeps theta_i."""
    bought = [j for j in range(len(N)) if A[i][j]]
    if not bought:
        return list(theta[i])
    grads = [distance_gradient(metric, theta[i], theta[j], reference) for j in bought]
    return [theta[i][k] - eta / N[i] * math.fsum(N[j] * g[k] for j, g in zip(bought, grads,
                                                                             strict=True))
            for k in range(len(theta[i]))]


# ------------------------------------------------------------- the paper's scenarios

IPFL_SETTINGS = {"IPFL_K": 5e5, "IPFL_C": 1.0, "IPFL_ETA": 5.0}
"""The paper's settings (spec, "Settings used by the paper"): K = 5e5, C = 1, eta = 5."""


INCLUSIVE_MARKET = {"traders": 3, "buyers": 4, "sellers": 4, "attackers": 1}
"""The Fig. 5 market's blocks (spec, "Scenarios from the paper": 12 clients)."""


def role_draws(m: int, K: float, C: float, seed: int, fixed: bool) -> tuple[list, list]:
    """The draws behind every client's type (module doc of ``mechanisms.roles``): for each of
    the ``m`` clients whatever its role, K_i ~ U(K/2, K) for all of them first, then c_i ~
    U(C/2, C), from numpy's generator seeded ``seed`` (exactly K and C when ``fixed``)."""
    if fixed:
        return [float(K)] * m, [float(C)] * m
    g = np.random.default_rng(seed)
    k = g.uniform(K / 2.0, K, m).tolist()
    return k, g.uniform(C / 2.0, C, m).tolist()


def role_types(roles: Sequence[str], K: float, C: float, seed: int,
               fixed: bool) -> tuple[list, list]:
    """(K_i, c_i) per client from its role (spec, "Roles", Fig. 5) and :func:`role_draws`: a
    trader the drawn K_i and c_i, a buyer the drawn K_i and c_i = inf, a seller and an
    attacker 0 and 0."""
    k, c = role_draws(len(roles), K, C, seed, fixed)
    Ks = [k[i] if r in ("trader", "buyer") else 0.0 for i, r in enumerate(roles)]
    cs = [c[i] if r == "trader" else INF if r == "buyer" else 0.0 for i, r in enumerate(roles)]
    return Ks, cs


def role_types_conform(role: str, Ki: float, ci: float, K: float, C: float,
                       fixed: bool) -> bool:
    """The roles of the inclusive market (spec, "Roles", Fig. 5): a trader has K_i ~ U(K/2, K)
    and c_i ~ U(C/2, C) (exactly K and C when ``fixed``), a buyer the same K_i and c_i = inf
    (never sells), a seller K_i = 0 and c_i = 0, an attacker K_i = 0 and c_i = 0."""
    if role in ("seller", "attacker"):
        return Ki == 0.0 and ci == 0.0
    k_ok = Ki == K if fixed else K / 2.0 <= Ki <= K
    if role == "buyer":
        return k_ok and ci == INF
    return k_ok and (ci == C if fixed else C / 2.0 <= ci <= C)


def attack_conforms(kind: str, honest: Sequence[float], attacked: Sequence[float]) -> bool:
    """The attacks on an uploaded model (spec, "Attacks", Fig. 4): ``shuffle`` a permutation
    of the honest parameters, ``signflip`` their negation, ``same`` every parameter 1 (all
    ones), ``gaussian`` N(0, 1) noise (its values cannot be pinned: finite, the same size)."""
    if len(attacked) != len(honest):
        return False
    if kind == "shuffle":
        return sorted(attacked) == sorted(honest)
    if kind == "signflip":
        return list(attacked) == [-x for x in honest]
    if kind == "same":
        return all(x == 1.0 for x in attacked)
    return all(math.isfinite(x) for x in attacked)


ATTACKS = ("shuffle", "signflip", "same", "gaussian")
"""The attacks of Fig. 4 (spec, "Attacks"): shuffle, sign flip, same value, Gaussian noise."""


def attack_draws(kind: str, honest: Sequence[float], seed: int) -> list[float] | None:
    """The values of a seeded attack on ``honest`` (module doc of ``mechanisms.roles``, as
    :func:`role_draws`: numpy's generator seeded ``seed``): ``gaussian`` its
    standard_normal draws, one per parameter; ``shuffle`` its permutation of the honest
    parameters; None for the attacks that draw nothing (:func:`attack_conforms` pins them)."""
    g = np.random.default_rng(seed)
    if kind == "gaussian":
        return [float(x) for x in g.standard_normal(len(honest))]
    if kind == "shuffle":
        return [float(x) for x in g.permutation(np.array(honest, dtype=float))]
    return None


def free_rider(kind: str) -> bool:
    """Fig. 4's free riders (module doc of ``mechanisms.roles``): the ``same`` and
    ``gaussian`` attackers keep a trader's gain scale, report the sharing cost C at a true
    cost of 0 and skip training; ``shuffle`` and ``signflip`` corrupt a trained model, and
    no other name is an attack that rides free."""
    return kind == "same" or kind == "gaussian"


def random_placement(m: int, attackers: int, seed: int) -> list[str]:
    """``m`` traders of which ``attackers`` are attackers placed at random (Fig. 4): the
    clients numpy's generator seeded ``seed`` chooses, choice(m, attackers) without
    replacement (module doc of ``mechanisms.roles``, ``market_roles``)."""
    at = np.random.default_rng(seed).choice(m, size=attackers, replace=False).tolist()
    return ["attacker" if i in at else "trader" for i in range(m)]


def inclusive_roles(traders: int, buyers: int, sellers: int, attackers: int) -> list[str]:
    """The Fig. 5 market's roles in block order: traders, buyers, sellers, attackers."""
    return (["trader"] * traders + ["buyer"] * buyers + ["seller"] * sellers
            + ["attacker"] * attackers)
