"""Selection rules: exact is a global optimum, local satisfies Eq. 11, Box 2 sometimes does not."""

import functools
import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mechanisms import ipfl
from proofs.oracle.ipfl import market_greedy
from proofs.strategies import ipfl_instances

# half of the drawn markets have an asymmetric D on purpose (proofs.typespace): the
# tests clear them as the checker does, with the opt-in (tests/test_input_shapes.py checks
# the refusal without it)
_clear = functools.partial(ipfl.clear, allow_asymmetric_distances=True)
_clear_batch = functools.partial(ipfl.clear_batch, allow_asymmetric_distances=True)


def brute_force_phi(market, P):
    """min over all subsets of phi_i, by enumeration of every a_i (tiny m only)."""
    m = market.m
    best = np.full(m, np.inf)
    for bits in itertools.product([0, 1], repeat=m):
        a = np.array(bits, dtype=bool)
        for i in range(m):
            if a[i] or market.K[i] == 0:
                continue
            if np.isinf(P[i, a]).any():
                continue
            A = np.zeros((m, m), dtype=bool)
            A[i] = a
            best[i] = min(best[i], ipfl.phi(market, P, A)[i])
    best[market.K == 0] = 0.0
    return best


@given(ipfl_instances(max_m=6))
def test_exact_is_global_optimum(inst):
    market, D = inst
    out = _clear(market, D, rule="exact")
    got = ipfl.phi(market, out.prices, out.adjacency)
    np.testing.assert_allclose(got, brute_force_phi(market, out.prices), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("method", ["enumeration", "dp", "branch-and-bound"])
@given(inst=ipfl_instances(min_m=3, max_m=9, pure_roles=False))
def test_exact_methods_agree(method, inst):
    market, D = inst
    ref = _clear(market, D, rule="exact", exact_method="enumeration")
    out = _clear(market, D, rule="exact", exact_method=method)
    np.testing.assert_allclose(
        ipfl.phi(market, out.prices, out.adjacency),
        ipfl.phi(market, ref.prices, ref.adjacency),
        rtol=1e-9,
        atol=1e-9,
    )
    assert set(out.exact_methods) <= {method, "none"}


@given(ipfl_instances(max_m=8))
def test_local_satisfies_eq11_and_never_beats_exact(inst):
    market, D = inst
    loc = _clear(market, D, rule="local")
    assert len(ipfl.eq11_violations(market, loc.prices, loc.adjacency)) == 0
    ex = _clear(market, D, rule="exact")
    assert (
        ipfl.phi(market, ex.prices, ex.adjacency)
        <= ipfl.phi(market, loc.prices, loc.adjacency) + 1e-9
    ).all()


@given(ipfl_instances(max_m=6))
@example(
    (
        ipfl.Market(N=[400, 500, 600, 450, 550], K=[5e4, 3e4, 0, 8e4, 2e4],
                    c=[0.5, 1, 0, 2, 0.3], lam=2.0),
        np.array([[0, .1, .3, .5, .2], [.1, 0, .25, .4, .15], [.3, .25, 0, .35, .3],
                  [.5, .4, .35, 0, .45], [.2, .15, .3, .45, 0]]),
    )
)
@example(  # a near-tie Hypothesis found: lam = 2.2e-16 makes seller 1's price 2 ulps below
    # seller 0's twin; the bulk thresholds round equal (the lower index wins), the scalar
    # reference tells them apart: either purchase gives buyer 2 the same phi to rounding
    (
        ipfl.Market(N=[86, 86, 20], c=[2, 2, 0], K=[1e3, 1e3, 1e3], lam=2.220446049250313e-16),
        np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]),
    )
)
def test_greedy_rules_match_scalar_reference(inst):
    """The bulk greedy buys what the scalar reference buys; where they differ, only between
    options whose phi (Eq. 10) is equal to rounding (thresholds a few ulps apart ordered
    either way), never a purchase that changes any buyer's objective."""
    market, D = inst
    for rule in ("box2", "local"):
        got = _clear(market, D, rule=rule)
        want = np.array(market_greedy(market, D, rule), dtype=bool)
        if np.array_equal(got.adjacency, want):
            continue
        mine, theirs = (ipfl.phi(market, got.prices, a) for a in (got.adjacency, want))
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-9, err_msg=rule)
        assert (got.adjacency.sum(axis=1) == want.sum(axis=1)).all(), rule


def test_exact_beats_greedy_somewhere():
    """A market where the greedy order is strictly suboptimal, solved by hand.

    Buyer 0 (N = 100, K = 1e6) faces seller 1 (N = 1000, price 25) and seller 2
    (N = 900, price 24.5). Greedy takes the higher threshold first and cannot add the other;
    the optimum is whichever single seller gives the lower phi, or both.
    """
    rng = np.random.default_rng(3)
    found = False
    for _ in range(3000):
        m = 4
        N = rng.integers(20, 2000, m)
        mk = ipfl.Market(N=N, c=rng.uniform(0, 5, m), K=rng.uniform(1e3, 1e6, m),
                         lam=rng.uniform(0, 5))
        D = rng.uniform(0, 2, (m, m))
        np.fill_diagonal(D, 0)
        loc, ex = _clear(mk, D, rule="local"), _clear(mk, D, rule="exact")
        gap = ipfl.phi(mk, loc.prices, loc.adjacency) - ipfl.phi(mk, ex.prices, ex.adjacency)
        if (gap > 1e-6).any():
            found = True
            assert ex.welfare != loc.welfare
            break
    assert found, "no instance where local search is strictly suboptimal"


@pytest.mark.slow
@given(st.integers(0, 2**32 - 1))
@settings(max_examples=10)
def test_exact_dp_at_m_100(seed):
    """The exact rule at m = 100 (beyond enumeration) agrees between DP and branch-and-bound."""
    rng = np.random.default_rng(seed)
    m = 100
    mk = ipfl.Market(N=rng.integers(100, 1000, m), c=rng.uniform(0.5, 3, m),
                     K=rng.uniform(1e4, 2e5, m), lam=1.0)
    D = rng.uniform(0, 1, (m, m))
    np.fill_diagonal(D, 0)
    dp = _clear(mk, D, rule="exact", exact_method="dp")
    loc = _clear(mk, D, rule="local")
    assert set(dp.exact_methods) <= {"dp", "none"}
    phi_dp = ipfl.phi(mk, dp.prices, dp.adjacency)
    assert (phi_dp <= ipfl.phi(mk, loc.prices, loc.adjacency) + 1e-9).all()


def _dense_market(m, seed=0):
    rng = np.random.default_rng(seed)
    N = rng.uniform(100, 1000, m)
    X = rng.normal(size=(m, 3))
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(D, 0)
    return ipfl.Market(N=N, c=rng.uniform(0, 1, m), K=rng.uniform(1e4, 1e5, m), lam=1e-3), D


def test_branch_and_bound_has_no_depth_limit_and_proves_optimality():
    # 400 candidates per buyer: the recursive search died at ~1,000; this one is iterative
    market, D = _dense_market(400)
    out = _clear(market, D, rule="exact")
    assert out.exact_methods == {"branch-and-bound": 400} and out.exact_gap == 0.0
    loc = _clear(market, D, rule="local")
    assert (ipfl.phi(market, out.prices, out.adjacency)
            <= ipfl.phi(market, loc.prices, loc.adjacency) + 1e-12).all()


@given(ipfl_instances(min_m=4, max_m=9, pure_roles=False), st.integers(1, 4))
def test_branch_and_bound_stopped_early_reports_a_true_gap(inst, limit):
    market, D = inst
    ref = _clear(market, D, rule="exact", exact_method="enumeration")
    out = _clear(market, D, rule="exact", exact_method="branch-and-bound",
                     exact_node_limit=limit)
    found = ipfl.phi(market, out.prices, out.adjacency).sum()
    best = ipfl.phi(market, ref.prices, ref.adjacency).sum()
    assert out.exact_gap >= 0
    # the gap is proven: the optimum lies within it (a wrong bound would break this)
    assert found - out.exact_gap <= best + 1e-9 * max(1.0, abs(best))


@given(ipfl_instances(min_m=4, max_m=9, pure_roles=False))
def test_time_limit_zero_keeps_local_and_reports_a_true_gap(inst):
    # a time budget already spent: no buyer is searched, each keeps the local rule's choice
    # and the gap proven by the relaxation bound of its whole sub-problem
    market, D = inst
    ref = _clear(market, D, rule="exact", exact_method="enumeration")
    out = _clear(market, D, rule="exact", exact_time_limit=0.0)
    loc = _clear(market, D, rule="local")
    np.testing.assert_array_equal(out.adjacency, loc.adjacency)
    assert set(out.exact_methods) <= {"time-limit", "none"}
    assert out.exact_stopped == ("time-limit" if "time-limit" in out.exact_methods else "")
    found = ipfl.phi(market, out.prices, out.adjacency).sum()
    best = ipfl.phi(market, ref.prices, ref.adjacency).sum()
    assert out.exact_gap >= 0
    assert found - out.exact_gap <= best + 1e-9 * max(1.0, abs(best))


def test_time_limit_stops_inside_a_search_with_a_proven_gap(monkeypatch):
    """A clock that ticks one second per look: the budget runs out in the middle of the
    branch-and-bound of the first buyers; those report their open nodes' gap, the rest the
    root relaxation's; the optimum lies within the summed gap, and a bound that claimed
    optimality (gap 0) would not (the known-bad variant)."""
    from mechanisms.ipfl import selection

    market, D = _dense_market(40)  # the local rule is not optimal here
    ref = _clear(market, D, rule="exact")
    assert ref.exact_gap == 0.0 and ref.exact_stopped == ""
    ticks = iter(range(10**9))
    monkeypatch.setattr(selection.time, "monotonic", lambda: float(next(ticks)))
    out = _clear(market, D, rule="exact", exact_time_limit=40.0)
    monkeypatch.undo()
    assert out.exact_stopped == "time-limit"
    assert out.exact_methods.get("branch-and-bound", 0) >= 1
    assert out.exact_methods.get("time-limit", 0) >= 1
    found = ipfl.phi(market, out.prices, out.adjacency).sum()
    best = ipfl.phi(market, ref.prices, ref.adjacency).sum()
    # stopping early cost something here, so a claimed gap of 0 would be wrong ...
    assert found > best
    assert found - out.exact_gap <= best + 1e-9 * abs(best)  # ... and the gap covers it
    assert out.options["exact_time_limit"] == 40.0


def test_node_limit_reports_which_limit_stopped_it():
    market, D = _dense_market(60)
    out = _clear(market, D, rule="exact", exact_node_limit=1)
    assert out.exact_stopped == "node-limit" and out.exact_gap > 0


def test_progress_reaches_every_buyer_under_a_time_limit():
    market, D = _dense_market(30)
    calls = []
    _clear(market, D, rule="exact", exact_time_limit=0.0,
               progress=lambda d, t: calls.append((d, t)))
    buyers = int((market.K > 0).sum())
    assert calls[0] == (0, buyers) and calls[-1] == (buyers, buyers)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


@pytest.mark.parametrize("rule", ["box2", "local"])
@pytest.mark.parametrize("top", [1, 2, 3, 8])
def test_greedy_scan_of_the_top_thresholds_equals_the_full_scan(rule, top, monkeypatch):
    """The greedy orders only each row's top thresholds and proves the rest cannot pass;
    with any such top (rows not proven widen it) it buys what the scan over the full sort
    buys: random markets at m = 40 with ties (copied clients), infinite thresholds (free
    models) and pure sellers, one at a time and as a batch."""
    from mechanisms.ipfl import selection

    rng = np.random.default_rng(top)
    Ts, Ns = [], []
    for _ in range(30):
        m = 40
        N = rng.integers(20, 400, m).astype(float)
        N[1] = N[2]
        c = np.where(rng.random(m) < 0.1, 0.0, rng.uniform(0.0, 2.0, m))
        K = np.where(rng.random(m) < 0.1, 0.0, rng.uniform(1e3, 1e6, m))
        mk = ipfl.Market(N=N, c=c, K=K, lam=float(rng.uniform(0, 3)))
        D = rng.uniform(0, 1, (m, m))
        D = np.where(rng.random((m, m)) < 0.1, 0.0, D)
        np.fill_diagonal(D, 0.0)
        D[1], D[:, 1] = D[2], D[:, 2]
        D[1, 1] = D[1, 2] = D[2, 1] = 0.0
        Ts.append(ipfl.thresholds(mk, D))
        Ns.append(N)
    T, N = np.stack(Ts), np.stack(Ns)
    assert np.isinf(T).any() and (T == 0).any()
    fn = getattr(ipfl, rule)
    monkeypatch.setattr(selection, "GREEDY_TOP", 40)  # the full sort
    full = fn(T, N)
    monkeypatch.setattr(selection, "GREEDY_TOP", top)
    assert np.array_equal(fn(T, N), full)
    for k in range(len(T)):
        assert np.array_equal(fn(T[k], N[k]), full[k])


@pytest.mark.parametrize("rule", ["box2", "local"])
def test_a_seller_is_bought_only_strictly_below_its_threshold(rule):
    """Spec (Box 2): adding j on top of n is beneficial iff n + N_j < T_ij, strictly. At
    n + N_j = T_ij the marginal gain equals the price (the definition of T_ij): the buyer is
    indifferent, and the documented rule does not buy. Thresholds drawn from markets never
    land exactly there (a null set; no property of the paper can see the difference), so it
    is pinned here on exact thresholds: buyer 0 takes seller 1 (0 + 100 < 300) and not
    seller 2 (100 + 100 = 200); buyer 1 takes seller 0 (100 < 100.5) and seller 2 is not
    worth buying (T = 0); buyer 2 buys nothing (all T = 0). Known-bad: `<=` buys seller 2
    for buyer 0; a scan that takes its first seller regardless buys for buyer 2."""
    N = np.array([100.0, 100.0, 100.0])
    T = np.array([[0.0, 300.0, 200.0],
                  [100.5, 0.0, 0.0],
                  [0.0, 0.0, 0.0]])
    want = np.array([[False, True, False], [True, False, False], [False, False, False]])
    fn = getattr(ipfl, rule)
    np.testing.assert_array_equal(fn(T, N), want)
    np.testing.assert_array_equal(fn(T[None], N[None])[0], want)  # in bulk too
    # the known-bad variant: buying at equality (n + N_j <= T_ij) is a different graph
    le = T.copy()
    le[0, 2] = np.nextafter(200.0, np.inf)
    assert fn(le, N)[0, 2]


def _one_buyer_market(sizes):
    """Buyer 0 (a pure buyer, N 1e6, K 1e12, sqrt gain) and one pure seller per entry of
    ``sizes`` (price 1 each, lam 0): every seller is a candidate of buyer 0's search."""
    k = len(sizes)
    mk = ipfl.Market(N=np.concatenate(([1e6], np.asarray(sizes, dtype=float))),
                     c=np.concatenate(([np.inf], np.ones(k))),
                     K=np.concatenate(([1e12], np.zeros(k))), lam=0.0)
    D = np.zeros((k + 1, k + 1))
    return mk, mk.prices(D), ipfl.thresholds(mk, D)


@pytest.mark.parametrize("k, width, method", [(20, 2_500_000, "dp"),
                                              (19, 2_631_579, "branch-and-bound")])
def test_the_dynamic_programme_runs_up_to_50_million_cells(k, width, method):
    """exact (method "auto") picks the dynamic programme for more than ENUMERATION_MAX = 16
    integer candidates while candidates x (total data / gcd) <= DP_MAX_CELLS = 50,000,000
    (selection.py), branch-and-bound beyond; ``methods`` reports the choice per buyer. At
    the bound exactly (20 x 2,500,000) and one cell past it (19 x 2,631,579 = 50,000,001;
    sizes of gcd 1). Generated mutant cf3db46be1 (the bound 50,000,001) ran the dynamic
    programme past it."""
    sizes = np.full(k, width // k, dtype=np.int64)
    sizes[-1] += width - sizes.sum()
    sizes[0], sizes[1] = sizes[0] + 1, sizes[1] - 1
    assert sizes.sum() == width and np.gcd.reduce(sizes) == 1
    mk, P, T = _one_buyer_market(sizes)
    assert ((T[0] > 0) & np.isfinite(T[0])).sum() == k
    out = ipfl.exact(mk, P, T, node_limit=1)  # the search stopped at once: fast either way
    assert out.methods[0] == method and set(out.methods[1:]) == {"none"}


def _root_bound_reference(cost, size, n0, g):
    """The relaxation bound of a whole sub-problem as selection._relaxation_bound's
    docstring states it, written out in plain Python: the candidates in order of price per
    unit of data (stable), those whose first unit of increment beats their price kept; t
    the data bought fractionally cheapest first, C(t) its cost (piecewise linear), on a grid
    of 4 points per candidate plus the end; f = C - g(n0 + t); the bound is the least of
    C(0) - g(n0 + t_1) (the first interval, g <= g(v)), f at the end, and on every later
    interval [t_k, t_k+1] f(t_k) and f(t_k) + (C slope - the previous interval's g slope)
    (t_k+1 - t_k)."""
    order = sorted(range(len(cost)), key=lambda j: cost[j] / size[j])
    items = [j for j in order if g(n0 + size[j]) - g(n0) - cost[j] > 0]
    if not items:
        return -g(n0)
    t, C, start, spent = [], [], 0.0, 0.0
    for j in items:
        for u in (0.0, 0.25, 0.5, 0.75):
            t.append(start + size[j] * u)
            C.append(spent + cost[j] * u)
        start, spent = start + size[j], spent + cost[j]
    t.append(start)
    C.append(spent)
    gv = [g(n0 + x) for x in t]
    f = [C[k] - gv[k] for k in range(len(t))]
    lows = [C[0] - gv[1], f[-1]]
    for k in range(1, len(t) - 1):
        slope_c = (C[k + 1] - C[k]) / (t[k + 1] - t[k])
        slope_g = (gv[k] - gv[k - 1]) / (t[k] - t[k - 1])
        lows += [f[k], f[k] + (slope_c - slope_g) * (t[k + 1] - t[k])]
    return min(lows)


def test_the_gap_of_an_unsearched_buyer_is_the_documented_relaxation_bound():
    """exact with its time budget spent (time_limit 0): each buyer keeps the local rule's
    choice, and its proven gap is phi_i(that choice) minus the relaxation bound of its
    whole sub-problem (``ExactSelection.gaps``), here against the bound written out from its
    documentation (:func:`_root_bound_reference`) on 12 markets of 12 clients with the
    four gains. A looser bound still proves a gap (the other tests only check that gaps
    cover the optimum); generated mutants 8d8bf1f17d (the C slope floored), c99edaac2f (the
    last grid point's cost cstart / cost) and ae8f7fe559 (a grid of zeros: an infinite gap)
    loosen it."""
    rng = np.random.default_rng(7)
    gains = [ipfl.SqrtGain(), ipfl.LogGain(), ipfl.PowerGain(0.5), ipfl.PowerGain(1.0)]
    checked = 0
    for r in range(12):
        m = 12
        mk = ipfl.Market(N=rng.integers(20, 2000, m).astype(float),
                         c=np.where(rng.random(m) < 0.15, np.inf, rng.uniform(0.0, 5.0, m)),
                         K=np.where(rng.random(m) < 0.15, 0.0, 10 ** rng.uniform(3, 6, m)),
                         lam=float(rng.uniform(0, 5)), gain=gains[r % 4])
        D = rng.uniform(0, 2, (m, m))
        np.fill_diagonal(D, 0.0)
        P, T = mk.prices(D), ipfl.thresholds(mk, D)
        out = ipfl.exact(mk, P, T, time_limit=0.0)
        local = ipfl.local(T, mk.N)
        for i in np.flatnonzero(out.methods == "time-limit"):
            cand = np.flatnonzero((T[i] > 0) & np.isfinite(T[i]))
            n0 = float(mk.N[np.isinf(T[i])].sum())
            cost, size = P[i, cand], mk.N[cand]

            def g(x, i=i, mk=mk):
                return float(mk.gain.value(x, mk.K[i], mk.N[i]))

            chosen = local[i, cand]
            phi_local = float(cost[chosen].sum()) - g(n0 + float(size[chosen].sum()))
            want = max(0.0, phi_local - _root_bound_reference(cost, size, n0, g))
            assert out.gaps[i] == pytest.approx(want, rel=1e-9, abs=1e-9 * abs(phi_local))
            checked += 1
    assert checked >= 60  # 70 buyers


def test_branch_and_bound_prunes_a_30_seller_search_within_50_nodes():
    """A buyer with 28 candidates (real sizes) whose local choice is not optimal:
    branch-and-bound (items by price per unit of data, dominance, the relaxation bound)
    proves its optimum within 50 nodes (11 at this writing; 2^28 subsets without pruning):
    at node_limit=50 it reports ``stopped`` "" and gap 0, below the local choice's phi.
    Generated mutants that weaken the pruning search on: ce04a3e2a5 (pruning against
    best * tol, about 0, instead of best - tol) and ae8f7fe559 (a grid of zeros: the bound
    -inf) stop at the node limit."""
    rng = np.random.default_rng(0)
    k = 30
    sizes = rng.uniform(50, 500, k)
    mk = ipfl.Market(N=np.concatenate(([300.0], sizes)),
                     c=np.concatenate(([np.inf], rng.uniform(0.5, 3.0, k))),
                     K=np.concatenate(([2e5], np.zeros(k))), lam=1.0)
    D = np.zeros((k + 1, k + 1))
    D[0, 1:] = rng.uniform(0, 1, k)
    P, T = mk.prices(D), ipfl.thresholds(mk, D)
    assert ((T[0] > 0) & np.isfinite(T[0])).sum() == 28
    out = ipfl.exact(mk, P, T, "branch-and-bound", node_limit=50)
    assert out.stopped == "" and out.gaps[0] == 0.0 and out.methods[0] == "branch-and-bound"
    phi_local = ipfl.phi(mk, P, ipfl.local(T, mk.N))[0]
    # the search mattered: the local choice is not optimal here (0.15 below it)
    assert phi_local - ipfl.phi(mk, P, out.adjacency)[0] > 1e-6 * (1.0 + abs(phi_local))


def test_the_exact_selection_is_sealed_and_leaves_the_callers_arrays_alone():
    """ipfl.exact's ExactSelection was a NamedTuple with writeable arrays (adjacency,
    methods, gaps): a caller writing into them changed the answer (and, through
    ipfl.clear's exact_methods and exact_gap before they were copied, an outcome). Now a
    frozen dataclass whose arrays are read-only -- the arrays exact made, frozen where they
    are (no copy) -- for one market and a batch; built from arrays of the caller's, it
    freezes copies and leaves the caller's writeable."""
    import dataclasses

    from mechanisms.ipfl.selection import ExactSelection
    from proofs.seal import unsealed

    mk = ipfl.Market(N=[100.0, 200.0, 300.0], c=[0.1, 0.2, 0.3], K=[1e4, 2e4, 3e4], lam=0.1)
    D = np.ones((3, 3)) - np.eye(3)
    P = mk.prices(D)
    T = ipfl.thresholds(mk, D, prices=P)
    for out in (ipfl.exact(mk, P, T),
                ipfl.exact(ipfl.MarketArrays.of(mk), P[None], T[None], node_limit=1)):
        assert unsealed(out) == 0
        for name in ("adjacency", "methods", "gaps"):
            arr = getattr(out, name)
            assert not arr.flags.writeable, name
            with pytest.raises(ValueError, match="read-only"):
                arr[(0,) * arr.ndim] = arr[(0,) * arr.ndim]
        with pytest.raises(dataclasses.FrozenInstanceError):
            out.stopped = "node-limit"
    mine = [np.zeros((2, 2), bool), np.array(["none", "none"], dtype=object), np.zeros(2)]
    made = ExactSelection(*mine)
    assert unsealed(made) == 0 and all(x.flags.writeable for x in mine)
    assert not any(np.shares_memory(x, y) for x, y in
                   zip(mine, (made.adjacency, made.methods, made.gaps), strict=True))


def _enumeration_guard(k):
    """The enumeration's size estimate in ``exact`` (selection.py), in bytes."""
    return 9.0 * k * 2.0**k


@pytest.mark.parametrize("k", [16, 17, 18])
def test_the_enumeration_peak_stays_within_what_its_guard_counts(k):
    """A buyer of k candidates enumerated (method forced) allocates at most what the size
    guard counts, 9 k 2^k bytes (the guard refuses past 8 GiB, mechanisms.errors.MAX_BYTES),
    measured by tracemalloc over the whole ``exact`` call; in fact four float64 rows of 2^k
    (the subsets' prices, data, gains and objective), so at most 40 x 2^k bytes. The
    enumeration took the chosen subset's row of an int64 (2^k, k) table of s >> j before:
    9 k 2^k bytes and more at its peak (16 k 2^k where numpy cannot reuse the shift's
    temporary), 12.5 GiB at k = 25 against a guard that let it through."""
    import tracemalloc
    mk, P, T = _one_buyer_market(np.full(k, 150_000))
    assert ((T[0] > 0) & np.isfinite(T[0])).sum() == k
    tracemalloc.start()
    try:
        out = ipfl.exact(mk, P, T, "enumeration")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.methods[0] == "enumeration"
    assert peak <= 40 * 2**k <= _enumeration_guard(k), (peak, 2**k)


@pytest.mark.parametrize("k, accepted", [(25, True), (26, False)])
def test_the_enumeration_guard_refuses_from_26_candidates(k, accepted, monkeypatch):
    """The forced enumeration of 25 candidates passes the size guard (7.03 GiB counted) and
    26 are refused (14.6 GiB, over the 8 GiB guard) before anything is allocated: the
    enumeration itself is replaced by a stub that records it was reached."""
    from mechanisms.errors import MAX_BYTES, ProblemTooLarge
    from mechanisms.ipfl import selection

    assert (_enumeration_guard(k) <= MAX_BYTES) == accepted
    reached = []
    monkeypatch.setattr(selection, "_enumerate_rows", lambda r, kk, *a: reached.append(kk))
    mk, P, T = _one_buyer_market(np.full(k, 150_000))
    assert ((T[0] > 0) & np.isfinite(T[0])).sum() == k
    if accepted:
        ipfl.exact(mk, P, T, "enumeration")
        assert reached == [k]
    else:
        with pytest.raises(ProblemTooLarge, match=r"14\.6 GiB, over the 8 GiB guard") as info:
            ipfl.exact(mk, P, T, "enumeration")
        assert info.value.field == "exact_method" and reached == []
