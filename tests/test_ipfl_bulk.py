"""ipfl.clear_batch: many markets at once with the same code as ipfl.clear.

Every built-in (rule, payments, prices) combination cleared in bulk gives, market by market,
ipfl.clear's outcome (to 1e-9), with negative distances and with liars (true N, c, K apart
from the reports); rules of your own written over arrays join; the exact selection's search
methods are held to the bulk enumeration; code of your own cannot write into the arrays it
is handed.
"""

import functools

import numpy as np
import pytest

from mechanisms import ipfl
from mechanisms.ipfl import selection
from proofs.batch import IpflSampler, IpflSpec

# half of the drawn markets have an asymmetric D on purpose (proofs.typespace): the
# tests clear them as the checker does, with the opt-in (tests/test_input_shapes.py checks
# the refusal without it)
_clear = functools.partial(ipfl.clear, allow_asymmetric_distances=True)
_clear_batch = functools.partial(ipfl.clear_batch, allow_asymmetric_distances=True)

RULES = ["box2", "local", "exact", "share-all"]
PAYMENTS = ["paper", "vcg", "shapley", "cost-plus", "none"]
PRICES = ["paper", "cost-plus"]


def draw(spec: IpflSpec, n: int, seed: int, liar: bool):
    """Batches of markets (grouped by m) as (MarketArrays, D, negative distances?)."""
    sampler = IpflSampler(spec)
    rng = np.random.default_rng(seed)
    for d in sampler.draw(rng, n):
        a = sampler.arrays(d)
        N, c, K = a["N"], a["c"], a["K"]
        true = {}
        if liar:  # one client misreports N, c and K; the truth is kept for utilities
            b, i = np.arange(d.size), rng.integers(0, d.m, d.size)
            f = rng.choice([0.3, 0.7, 1.5, 4.0], size=(3, d.size))
            true = {"true_N": N, "true_c": c, "true_K": K}
            N, c, K = N.copy(), c.copy(), K.copy()
            N[b, i] *= f[0]
            c[b, i] *= f[1]
            K[b, i] *= f[2]
        yield ipfl.MarketArrays(N, c, K, a["lam"], **true), a["D"], spec.negative


def assert_same(bulk: ipfl.OutcomeBatch, k: int, out: ipfl.Outcome):
    assert np.array_equal(bulk.adjacency[k], out.adjacency)
    for name in ("prices", "thresholds", "payments", "gains", "sharing_costs", "utilities"):
        np.testing.assert_allclose(getattr(bulk, name)[k], getattr(out, name), rtol=1e-9,
                                   atol=1e-9, err_msg=name)
    assert (bulk.remittances is None) == (out.remittances is None)
    if out.remittances is not None:
        np.testing.assert_allclose(bulk.remittances[k], out.remittances, rtol=1e-9, atol=1e-9)
    assert bulk.welfare[k] == pytest.approx(out.welfare, rel=1e-9, abs=1e-9)


def clear_both(rule, payments, prices, spec, n, seed, liar):
    checked = 0
    for mk, D, negative in draw(spec, n, seed, liar):
        bulk = _clear_batch(mk, D, rule, payments=payments, prices=prices,
                                allow_negative_distances=negative)
        for k in range(len(D)):
            out = _clear(mk.market(k), D[k], rule, payments=payments, prices=prices,
                             allow_negative_distances=negative)
            assert_same(bulk, k, out)
            checked += 1
    return checked


@pytest.mark.parametrize("prices", PRICES)
@pytest.mark.parametrize("payments", PAYMENTS)
@pytest.mark.parametrize("rule", RULES)
def test_bulk_equals_scalar_for_every_builtin_combination(rule, payments, prices):
    assert clear_both(rule, payments, prices, IpflSpec(max_m=5), 40, 11, liar=False) == 40


@pytest.mark.parametrize("payments", PAYMENTS)
@pytest.mark.parametrize("rule", ["local", "exact"])
def test_bulk_equals_scalar_with_liars_and_negative_distances(rule, payments):
    for spec, liar in ((IpflSpec(negative=True, max_m=5), False), (IpflSpec(max_m=5), True),
                       (IpflSpec(negative=True, max_m=4), True)):
        assert clear_both(rule, payments, "cost-plus" if liar else "paper", spec, 40, 12,
                          liar) == 40


def test_cost_plus_pays_the_posted_price_with_the_papers_prices_in_both_paths():
    """The divergence the old batch copy had: cost-plus remittances are (1 + markup) c_j
    whatever the price rule, in bulk as in ipfl.clear."""
    for mk, D, _ in draw(IpflSpec(max_m=5), 60, 13, liar=False):
        bulk = _clear_batch(mk, D, "local", payments="cost-plus", prices="paper")
        posted = (1.0 + ipfl.rules.COST_PLUS_MARKUP) * np.where(np.isfinite(mk.c), mk.c, 0.0)
        want = np.where(bulk.adjacency, posted[:, None, :], 0.0)
        np.testing.assert_allclose(bulk.remittances, want, rtol=1e-12)
        for k in range(len(D)):
            out = _clear(mk.market(k), D[k], "local", payments="cost-plus")
            np.testing.assert_allclose(out.remittances, want[k], rtol=1e-12)


def test_the_checker_engines_agree_on_cost_plus_with_the_papers_prices():
    """cost-plus remittances with the paper's prices pay 1.25 c but buyers choose at c: a
    buyer can lose (the Hypothesis engine found U = -0.429). The batch engine, clearing
    with the same code, finds it too, in bulk."""
    from proofs import PROPERTIES, IpflMechanism, check

    mech = IpflMechanism("cp-paper", "local", payments="cost-plus")
    r = check(mech, PROPERTIES["individual_rationality"], max_examples=5000, seed=0,
              engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0


# ------------------------------------------------------------- rules of your own


@ipfl.over_arrays
def half_thresholds(market, D, T, P):
    """Buy j when its threshold beats twice the buyer's own data (over arrays)."""
    A = T > 2.0 * market.N[..., :, None]
    m = market.m
    A[..., np.arange(m), np.arange(m)] = False
    return A


@ipfl.over_arrays
def flat_prices(market, D):
    return np.broadcast_to(market.c[..., None, :] + 0.1 * D, D.shape)


@ipfl.over_arrays
def fee_payments(market, A, D):
    """Each buyer pays the operator 1 % of its gain (payments, not remittances)."""
    g = market.gain.value(ipfl.money.bought(A, market.N), market.K, market.N)
    return 0.01 * g


@pytest.mark.parametrize("payments", ["paper", fee_payments])
def test_rules_of_your_own_over_arrays_clear_in_bulk_as_in_clear(payments):
    for liar in (False, True):
        assert clear_both(half_thresholds, payments, flat_prices, IpflSpec(max_m=5), 40, 14,
                          liar) == 40


def test_clear_batch_refuses_a_rule_not_written_over_arrays():
    mk = ipfl.MarketArrays(N=[[100, 200]], c=[[1, 1]], K=[[1e4, 1e4]], lam=[0.0])

    def mine(market, A, D):
        return np.zeros(2)

    with pytest.raises(ipfl.MarketInputError, match=r"^payments: .*not marked over_arrays"):
        _clear_batch(mk, np.zeros((1, 2, 2)), payments=mine)


def test_market_arrays_validate_and_name_the_field():
    with pytest.raises(ipfl.MarketInputError, match=r"^N: entry"):
        ipfl.MarketArrays(N=[[100, -1]], c=[[0, 0]], K=[[1, 1]], lam=[0])
    with pytest.raises(ipfl.MarketInputError, match=r"^lam:"):
        ipfl.MarketArrays(N=[[100, 1]], c=[[0, 0]], K=[[1, 1]], lam=[np.nan])
    with pytest.raises(ipfl.MarketInputError, match=r"^D:"):
        mk = ipfl.MarketArrays(N=[[100, 1]], c=[[0, 0]], K=[[1, 1]], lam=[0])
        _clear_batch(mk, [[[0, -1], [1, 0]]])


# ------------------------------------------------------------- exact: search vs enumeration


@pytest.mark.parametrize("method", ["enumeration", "dp", "branch-and-bound"])
def test_the_exact_search_methods_reach_the_bulk_enumerations_optimum(method):
    """ipfl.clear's exact selection searches (the methods large markets need) are held to
    the bulk enumeration where both apply: the same phi_i for every buyer."""
    checked = 0
    for mk, D, _ in draw(IpflSpec(max_m=7), 200, 15, liar=False):
        P = mk.prices(D)
        T = ipfl.thresholds(mk, D, prices=P)
        A_bulk = selection.exact_enumeration(mk, P, T)
        phi_bulk = ipfl.phi(mk, P, A_bulk)
        for k in range(len(D)):
            one = mk.market(k)
            A = selection.exact(one, P[k], T[k], method).adjacency
            np.testing.assert_allclose(ipfl.phi(one, P[k], A), phi_bulk[k], rtol=1e-9,
                                       atol=1e-9)
            if method == "enumeration":
                assert np.array_equal(A, A_bulk[k])
            checked += 1
    assert checked == 200


# ------------------------------------------------------------- read-only inputs


def writes_everything(market, D, T, P):
    for arr in (D, T, P):
        arr[...] = 0.0
    return T > 0


def writes_A(market, A, D):
    A[...] = True
    return np.zeros(A.shape[:-1])


def writes_D(market, D):
    D[...] = 0.0
    return market.prices(D)


@pytest.mark.parametrize("where", ["rule", "payments", "prices"])
def test_code_of_your_own_cannot_write_into_the_arrays_it_is_handed(where):
    """A rule writing into D, T, P or A raises (read-only copies) in clear and in
    clear_batch; the caller's D and later outcomes are untouched."""
    mk = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 0.0], K=[5e4, 3e4, 0.0], lam=2.0)
    D = np.array([[0, .1, .3], [.1, 0, .2], [.3, .2, 0]])
    before = D.copy()
    fn = {"rule": writes_everything, "payments": writes_A, "prices": writes_D}[where]
    kwargs = {"rule": fn} if where == "rule" else {where: fn}
    with pytest.raises(ValueError, match="read-only"):
        _clear(mk, D, **kwargs)
    assert np.array_equal(D, before)
    batch = ipfl.MarketArrays.from_markets([mk, mk])
    DB = np.stack([D, D])
    before_b = DB.copy()
    with pytest.raises(ValueError, match="read-only"):
        _clear_batch(batch, DB, **kwargs)  # marked or not, it never gets writable arrays
    assert np.array_equal(DB, before_b)
    ref = _clear(mk, D)
    assert np.array_equal(ref.adjacency.astype(int), [[0, 1, 1], [1, 0, 1], [0, 0, 0]])


for _f in (writes_everything, writes_A, writes_D):
    ipfl.over_arrays(_f)


def test_market_arrays_and_outcomes_are_read_only():
    mk = ipfl.MarketArrays(N=[[100, 200]], c=[[1, 1]], K=[[1e4, 1e4]], lam=[0.0])
    out = _clear_batch(mk, np.zeros((1, 2, 2)))
    for arr in (mk.N, mk.c, mk.K, mk.lam, mk.true_N, out.adjacency, out.payments, out.D,
                out.prices, out.thresholds, out.utilities):
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0


def test_a_market_as_a_batch_of_one_equals_the_validated_batch():
    """MarketArrays.of (no second validation: the Market's arrays are checked by the same
    rules) holds what building the batch from the market's arrays holds, read-only, and
    refuses anything but a Market."""
    mk = ipfl.Market(N=[400.0, 500.0, 300.0], c=[0.5, np.inf, 0.0], K=[5e4, 0.0, 1e4],
                     lam=2.0, true_c=[0.6, np.inf, 0.0], true_N=[400.0, 450.0, 300.0])
    one = ipfl.MarketArrays.of(mk)
    ref = ipfl.MarketArrays(mk.N[None], mk.c[None], mk.K[None], [mk.lam], mk.true_N[None],
                            mk.true_c[None], mk.true_K[None], gain=mk.gain)
    assert one.shape == ref.shape == (1,) and one.gain == ref.gain
    for name in ("N", "c", "K", "lam", "true_N", "true_c", "true_K"):
        got, want = getattr(one, name), getattr(ref, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable, name
    with pytest.raises(ipfl.MarketInputError, match="market"):
        ipfl.MarketArrays.of(ref)
    # stacking one market is the batch of one too (a generated mutant reading markets[1]'s
    # gain survived the tests: no test stacked a single market)
    stacked = ipfl.MarketArrays.from_markets([mk])
    assert stacked.shape == (1,) and stacked.gain == mk.gain
    for name in ("N", "c", "K", "lam", "true_N", "true_c", "true_K"):
        np.testing.assert_array_equal(getattr(stacked, name), getattr(ref, name))


def test_paper_prices_over_arrays_broadcast_and_block_as_each_market_alone():
    """ipfl.paper_prices_arrays (Eq. 10 over arrays, computed a block of markets at a time):
    600 markets of 12 clients (more than one block of 2^15 / m^2 = 227), D one per market or
    one (m, m) shared by all, lam one per market or a number: each market's prices bit for
    bit those of the market alone. Generated mutants 1c43bff124 (operands sliced by their
    second axis: a per-market N went whole to every block) and ec298f2d10 (the shape from
    N.shape[:-2]: a shared D gave an (m, m) result) raised on these."""
    rng = np.random.default_rng(3)
    B, m = 600, 12
    N = rng.integers(20, 2000, (B, m)).astype(float)
    c = np.where(rng.random((B, m)) < 0.15, np.inf, rng.uniform(0.0, 5.0, (B, m)))
    lam = rng.uniform(0.0, 5.0, B)
    D = rng.uniform(0.0, 2.0, (B, m, m))
    for d, lam_ in ((D, lam), (D[0], lam), (D, 0.5), (D[0], 0.5)):
        P = ipfl.paper_prices_arrays(N, c, lam_, d)
        assert P.shape == (B, m, m)
        for b in range(0, B, 37):
            one = ipfl.paper_prices_arrays(N[b], c[b], lam_ if np.ndim(lam_) == 0 else lam_[b],
                                           d if d.ndim == 2 else d[b])
            assert P[b].tobytes() == one.tobytes()


def test_baseline_support_and_utilities_over_two_batch_dimensions():
    """ipfl.baseline_utilities and money.baseline_support over a MarketArrays of (2, 4)
    markets and W (2, 4, m, m): each market's answer is that of the market alone (the
    diagonal never in the support, a pure buyer never a seller). Generated mutant 40608b05f3
    (np.eye(W.shape[+1]): the second batch dimension taken for m) raised on it."""
    from mechanisms.ipfl.money import baseline_support

    rng = np.random.default_rng(4)
    m = 3
    N = rng.integers(20, 2000, (2, 4, m)).astype(float)
    c = np.where(rng.random((2, 4, m)) < 0.3, np.inf, rng.uniform(0.0, 5.0, (2, 4, m)))
    K = np.where(rng.random((2, 4, m)) < 0.2, 0.0, 10 ** rng.uniform(3, 6, (2, 4, m)))
    W = (rng.random((2, 4, m, m)) < 0.7).astype(float)
    batch = ipfl.MarketArrays(N, c, K, np.zeros((2, 4)))
    support, utilities = baseline_support(batch, W), ipfl.baseline_utilities(batch, W)
    assert support.shape == (2, 4, m, m) and utilities.shape == (2, 4, m)
    for a in range(2):
        for b in range(4):
            one = ipfl.Market(N=N[a, b], c=c[a, b], K=K[a, b], lam=0.0)
            np.testing.assert_array_equal(support[a, b], baseline_support(one, W[a, b]))
            np.testing.assert_array_equal(utilities[a, b],
                                          ipfl.baseline_utilities(one, W[a, b]))
    assert not support[..., np.arange(m), np.arange(m)].any()


# Markets of copies (issue 34): every client one of a few originals (the same N, c, K and
# distances), so a buyer sees identical sellers and two of its subsets of sellers tie
# exactly in phi (Eq. 10). Found among 2,865 such markets (seed 1): with the subsets' prices
# summed by a matrix product with the subset masks, buyer 9 took seller 5 alone and seller 2
# in any batch holding the market twice or more (a single row went through BLAS's
# matrix-vector kernel, whose sums break the tie; a block through its matrix kernel).
TIED_MARKETS = {
    "10 clients, 5 originals": dict(
        who=[0, 1, 2, 1, 0, 2, 3, 2, 1, 4],
        N=[1958.0, 538.0, 1108.0, 293.0, 1619.0],
        c=[4.04148979330472, 0.5301046219405486, 1.987225097959785, 2.1411000470300996,
           4.355077172876552],
        K=[701556.8032205397, 250013.96793307597, 586553.4575119097, 353417.0092546947,
           891935.0096294126],
        D=[[0.0, 0.265816285124866, 1.3398736435364285, 1.870969206468651, 0.7634856413685427],
           [0.265816285124866, 0.0, 0.5238193949468564, 1.0143439134623127, 1.241805681572022],
           [1.3398736435364285, 0.5238193949468564, 0.0, 0.7127214382483567,
            0.2664714768263159],
           [1.870969206468651, 1.0143439134623127, 0.7127214382483567, 0.0, 0.8815500399765372],
           [0.7634856413685427, 1.241805681572022, 0.2664714768263159, 0.8815500399765372,
            0.0]],
        lam=0.8658880148846487),
    "12 clients, 4 originals": dict(
        who=[0, 1, 2, 0, 3, 3, 3, 0, 0, 1, 3, 3],
        N=[1945.0, 1711.0, 1727.0, 376.0],
        c=[2.91976619120401, 2.9906541886305837, 0.9234813759513161, 0.13862940027658088],
        K=[302783.60864642914, 822731.0921444428, 571730.0948782776, 74098.47557073693],
        D=[[0.0, 1.3442065136046013, 1.7899813114640846, 0.9457131185422869],
           [1.3442065136046013, 0.0, 1.1993323269241327, 1.8937860299565148],
           [1.7899813114640846, 1.1993323269241327, 0.0, 1.9129310305804754],
           [0.9457131185422869, 1.8937860299565148, 1.9129310305804754, 0.0]],
        lam=1.1006029340425694),
}


def _tied_market(who, N, c, K, D, lam):
    w = np.array(who)
    D = np.array(D)[np.ix_(w, w)]
    return ipfl.Market(N=np.array(N)[w], c=np.array(c)[w], K=np.array(K)[w], lam=lam), D


@pytest.mark.parametrize("payments", ["paper", "vcg", "shapley"])
@pytest.mark.parametrize("key", list(TIED_MARKETS))
def test_a_market_of_tied_sellers_chooses_alike_alone_and_in_any_batch(key, payments):
    """One market is the batch of one where subsets tie exactly: the exact rule's choice
    (and every amount) of a market of copies is the same alone and as any row of a batch
    of 2, 3 or 7 (itself repeated, so that each buyer's row shares its enumeration block).
    With the subsets' sums by a matrix product (before issue 34's fix) these markets took
    another tied seller in every batch of two or more (4 adjacency entries per market)."""
    market, D = _tied_market(**TIED_MARKETS[key])
    one = ipfl.clear(market, D, "exact", payments=payments)
    phi = ipfl.phi(market, one.prices, one.adjacency)
    for size in (2, 3, 7):
        out = ipfl.clear_batch(ipfl.MarketArrays.from_markets([market] * size),
                               np.stack([D] * size), "exact", payments=payments)
        for k in range(size):
            np.testing.assert_array_equal(out.adjacency[k], one.adjacency)
            np.testing.assert_array_equal(out.payments[k], one.payments)
            np.testing.assert_array_equal(out.utilities[k], one.utilities)
    # the tie is real: some buyer has another optimum (a seller swapped for its twin)
    twins = [(i, a, b) for i in range(market.m) for a in np.flatnonzero(one.adjacency[i])
             for b in np.flatnonzero(~one.adjacency[i]) if a != i != b
             and market.N[a] == market.N[b] and one.prices[i, a] == one.prices[i, b]]
    assert twins, "no tied seller to swap"
    for i, a, b in twins:
        swapped = one.adjacency.copy()
        swapped[i, a], swapped[i, b] = False, True
        # the same prices and data summed in another order: equal up to rounding
        assert abs(ipfl.phi(market, one.prices, swapped)[i] - phi[i]) <= 4e-16 * abs(phi[i])
