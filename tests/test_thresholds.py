"""Box 2 thresholds: vectorised solvers against the reference oracle (proofs.oracle.ipfl: a
bisection per pair on the defining equation) and the defining equation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms import ipfl
from proofs.oracle.ipfl import market_thresholds
from proofs.strategies import ipfl_instances


def reference_thresholds(market, D) -> np.ndarray:
    return np.array(market_thresholds(market, D))

GAINS = [
    pytest.param(ipfl.SqrtGain(), id="sqrt"),
    pytest.param(ipfl.LogGain(), id="log"),
    pytest.param(ipfl.PowerGain(0.3), id="power-0.3"),
    pytest.param(ipfl.CallableGain(lambda x, K, N: K * np.arctan(x / N), "arctan"), id="custom"),
]


def _conditioned(market, D, T):
    """Pairs whose root the defining equation can resolve: g(T) - g(T - N_j) is a difference
    of two nearly equal numbers and loses about eps |g(T)|, so a root is determined to a
    relative ~eps |g(T)| / price. Keep pairs where that is below ~1e-9 (the sqrt closed form
    avoids the subtraction; the scalar reference and the generic solver cannot).

    Also left out: a free model's price (c_j = 0) from a distance in the subnormal range
    (0 < |d_ij| < 2.2e-308). Eq. 10's lam (N_j/N_i) d_ij then sits at the float floor and
    the order of the two products decides whether it rounds to 0: d = 5e-324, lam = 2,
    N_j/N_i = 1/2 gives 0 in mechanisms.ipfl (a free model, T = inf) and 5e-324 in the
    scalar reference (a finite root) -- two prices, not two solvers. Hypothesis drew it
    once other files' modules had added 5e-324 to its constants (tests/conftest.py)."""
    P = market.prices(D)
    with np.errstate(invalid="ignore"):
        top = market.gain.value(np.where(np.isfinite(T), T, 0.0), market.K[:, None],
                                market.N[:, None])
    D = np.asarray(D, dtype=float)
    floor = (market.c[None, :] == 0) & (D != 0) & (np.abs(D) < np.finfo(float).tiny)
    return ~((P > 0) & (P < 1e-7 * np.abs(top))) & ~floor


def _close(T, R, keep=True):
    T, R = np.where(keep, T, 0.0), np.where(keep, R, 0.0)
    both_inf = np.isinf(T) & np.isinf(R)
    np.testing.assert_array_equal(np.isinf(T), np.isinf(R))
    np.testing.assert_allclose(np.where(both_inf, 0, T), np.where(both_inf, 0, R), rtol=1e-6)


@pytest.mark.parametrize("gain", GAINS)
@given(data=st.data())
def test_vectorised_matches_scalar_reference(gain, data):
    market, D = data.draw(ipfl_instances(gain=gain, integer_N=False, max_m=5))
    R = reference_thresholds(market, D)
    _close(ipfl.thresholds(market, D), R, _conditioned(market, D, R))


def test_a_price_at_the_float_floor_is_left_out_of_the_comparison():
    """The instance Hypothesis found in a combined run: the vectorised Eq. 10 price of pair
    (1, 0) rounds to 0 (T = inf), the reference's to 5e-324 (finite T); without leaving the
    pair out the comparison fails (the known-bad variant), with it the rest still agrees."""
    market = ipfl.Market(N=[20.0, 40.0], c=[0.0, 0.0], K=[1000.0, 1000.0], lam=2.0)
    D = np.array([[0.0, 5e-324], [5e-324, 0.0]])
    T, R = ipfl.thresholds(market, D), reference_thresholds(market, D)
    assert market.prices(D)[1, 0] == 0.0 and np.isinf(T[1, 0]) and np.isfinite(R[1, 0])
    with pytest.raises(AssertionError):
        _close(T, R)
    keep = _conditioned(market, D, R)
    assert keep.tolist() == [[True, False], [False, True]]
    _close(T, R, keep)


@pytest.mark.parametrize("gain", GAINS)
@given(data=st.data())
def test_roots_solve_the_box2_equation(gain, data):
    market, D = data.draw(ipfl_instances(gain=gain, pure_roles=False))
    T = ipfl.thresholds(market, D)
    P = market.prices(D)
    i, j = np.nonzero(np.isfinite(T) & (T > 0))
    g = market.gain.value
    K, N = market.K, market.N
    top = g(T[i, j], K[i], N[i])
    lhs = top - g(T[i, j] - N[j], K[i], N[i])
    # the subtraction loses ~|g(T)| * eps: that much slack, and no more, is allowed
    slack = 1e-7 * P[i, j] + 64 * np.finfo(float).eps * np.abs(top)
    assert (np.abs(lhs - P[i, j]) <= slack).all()
    assert (T[i, j] >= N[j]).all()
    # classification: zero exactly when the first unit of j is not worth its price
    first = g(N[None, :], K[:, None], N[:, None])
    off = ~np.eye(market.m, dtype=bool)
    assert ((T == 0) & off == (P >= first) & off).all()


@pytest.mark.parametrize("price", [1e-3, 1e-9, 1e-13])
def test_sqrt_closed_form_for_tiny_prices(price):
    """For a tiny price the root follows the asymptote x^1.5 = sqrt(K) N_j / (2 price),
    x = N_i + T, to relative O(N_j/x); the closed form keeps it even where evaluating the
    defining equation is lost in rounding (price 1e-13)."""
    mk = ipfl.Market(N=[5000, 50], c=[30.0, price], K=[1e6, 1e6], lam=0.0)
    T = ipfl.thresholds(mk, np.zeros((2, 2)))
    x = 5000 + T[0, 1]
    asymptote = (1e3 * 50 / (2 * price)) ** (2 / 3)
    assert x == pytest.approx(asymptote, rel=20 * 50 / x + 1e-12)


def test_linear_gain_below_its_slope_is_always_worth_buying():
    mk = ipfl.Market(N=[100, 100], c=[0.5, 0.5], K=[1.0, 1.0], gain=ipfl.PowerGain(1.0))
    # marginal of 100 samples is K * 100/100 = 1 forever: a price of 0.5 is always worth it
    assert np.isinf(ipfl.thresholds(mk, np.zeros((2, 2)))[0, 1])


def test_linear_gain_just_below_its_slope_is_always_worth_buying():
    """Found by the checker's draws of the linear gain (issue 34, part 2): the price 2.4 of
    a 2-sample model for a buyer of N = 814, K = 1,000 lies 2.3 % below the constant
    marginal K N_j / N_i = 2.457; the bracket's g(T) - g(T - N_j) is float noise by
    T ~ 5e14 and read as a root there. Below the limit T is inf, decided before any
    bracket (Gain.marginal_limit)."""
    mk = ipfl.Market(N=[2.0, 814.0], c=[2.4, 0.0], K=[1000.0, 1000.0],
                     gain=ipfl.PowerGain(1.0))
    T = ipfl.thresholds(mk, np.zeros((2, 2)))
    assert np.isinf(T[1, 0]) and np.isinf(T[0, 1])
    # above the slope it is never worth it (P >= g(N_j): T = 0)
    above = mk.replace(c=[2.5, 0.0])
    assert ipfl.thresholds(above, np.zeros((2, 2)))[1, 0] == 0.0
    assert ipfl.PowerGain(0.5).marginal_limit(2.0, 1e3, 814.0) == 0.0


def test_wrong_solver_is_caught():
    """Known-bad variant: a threshold solver off by 1% fails the same residual check."""
    mk = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 0.2], K=[5e4, 3e4, 1e4], lam=2.0)
    D = np.array([[0, 0.1, 0.3], [0.1, 0, 0.2], [0.3, 0.2, 0]])
    T = ipfl.thresholds(mk, D) * 1.01
    ok = np.isfinite(T) & (T > 0)
    with pytest.raises(AssertionError):
        _close(np.where(ok, T, 0), np.where(ok, reference_thresholds(mk, D), 0))


def _newton_thresholds(price, Nj, K, N):
    """The root finder the sqrt gain used before its closed form (kept here as the test's
    reference): Newton on P t^4 + 4 sqrt(K) t^3 - P Nj^2 = 0 from the right of the root,
    for 0 < price < g(Nj); 0 and inf by the same classification as every gain."""
    g = ipfl.SqrtGain().value
    first = g(Nj, K, N)
    inner = (price > 0) & (price < first)
    p = np.where(inner, price, 1.0)
    sk = np.sqrt(K)
    t = np.minimum(np.sqrt(N + Nj) - np.sqrt(N), np.cbrt(p * Nj * Nj / (4.0 * sk)))
    with np.errstate(all="ignore"):
        for _ in range(200):
            t2 = t * t
            step = (p * t2 * t2 + 4.0 * sk * t2 * t - p * Nj * Nj) / (
                4.0 * p * t2 * t + 12.0 * sk * t2)
            t = t - np.where(inner, step, 0.0)
            if np.all(~inner | (np.abs(step) <= 1e-15 * t)):
                break
        half = 0.5 * (Nj / t + t)
        root = np.maximum(half * half - N, Nj)
    root = np.where(np.isnan(root), np.inf, root)
    return np.where(price <= 0, np.inf, np.where(inner, root, 0.0))


def _random_pairs(n, seed):
    """Pairs over many orders of magnitude, with the edge cases: P = 0, P huge, P tiny
    (down to subnormal), P at and next to g(Nj), N_j huge next to N_i and the reverse."""
    rng = np.random.default_rng(seed)
    N = np.exp(rng.uniform(0, np.log(1e9), n))
    Nj = np.exp(rng.uniform(0, np.log(1e9), n))
    K = np.exp(rng.uniform(np.log(1e-3), np.log(1e12), n))
    first = ipfl.SqrtGain().value(Nj, K, N)
    P = first * np.exp(rng.uniform(np.log(1e-30), np.log(2.0), n))
    k = n // 10
    P[:k] = 0.0
    P[k:2 * k] = 1e300
    P[2 * k:3 * k] = 5e-324 * rng.integers(1, 100, k)
    P[3 * k:4 * k] = first[3 * k:4 * k]
    P[4 * k:5 * k] = np.nextafter(first[4 * k:5 * k], 0)
    Nj[5 * k:6 * k] *= 1e6  # N_j large
    N[6 * k:7 * k] *= 1e6
    return P, Nj, K, N


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sqrt_closed_form_agrees_with_the_newton_root_finder(seed):
    """The closed form (Ferrari) against the Newton iteration it replaced, on 200,000 random
    pairs with edge cases: same classification (0, finite, inf) everywhere, and the finite
    roots agree to the conditioning of T = x - N_i (a relative 64 eps (1 + N_i/T)). Where
    Newton overflowed (a subnormal price: its t^4 term underflows) the closed form still
    gives the finite root, astronomically large (x^1.5 ~ sqrt(K) N_j / (2 P))."""
    P, Nj, K, N = _random_pairs(200_000, seed)
    T = ipfl.SqrtGain().thresholds(P, Nj, K, N)
    R = _newton_thresholds(P, Nj, K, N)
    np.testing.assert_array_equal(T == 0, R == 0)
    # subnormal prices: Newton's P t^4 and P N_j^2 lose bits (even overflow); the root is on
    # its asymptote x^1.5 = sqrt(K) N_j / (2 P) to a relative N_j / x, so hold T to that
    sub = (P > 0) & (P < 1e-300)
    assert (np.isfinite(T[sub]) & (T[sub] > 1e100)).all()
    log_asymptote = (2 / 3) * (0.5 * np.log(K[sub]) + np.log(Nj[sub] / 2) - np.log(P[sub]))
    np.testing.assert_allclose(np.log(T[sub]), log_asymptote, rtol=1e-14)
    R[sub] = T[sub]
    np.testing.assert_array_equal(np.isinf(T), np.isinf(R))
    fin = np.isfinite(R) & (R > 0)
    assert fin.sum() > 100_000
    tol = 64 * np.finfo(float).eps * (1.0 + N[fin] / R[fin])
    assert (np.abs(T[fin] - R[fin]) <= tol * R[fin]).all()
    # the edge cases as the convention says
    k = 20_000
    assert np.isinf(T[:k]).all()  # P = 0: always worth buying
    assert (T[k:2 * k] == 0).all()  # a huge price: never
    assert (T[3 * k:4 * k] == 0).all()  # P = g(Nj): the first unit is not worth its price
    # (the defining equation's residual is checked on markets above: at these extremes,
    # x = N_i + T itself rounds away what the residual would measure, for both solvers)


def test_a_closed_form_off_by_a_little_is_caught():
    """Known-bad variant: roots off by a relative 1e-9 fail the same agreement check."""
    P, Nj, K, N = _random_pairs(20_000, 3)
    T = ipfl.SqrtGain().thresholds(P, Nj, K, N) * (1 + 1e-9)
    R = _newton_thresholds(P, Nj, K, N)
    fin = np.isfinite(R) & (R > 0)
    tol = 64 * np.finfo(float).eps * (1.0 + N[fin] / R[fin])
    assert not (np.abs(T[fin] - R[fin]) <= tol * R[fin]).all()


def test_a_pure_seller_never_buys_even_a_free_model():
    """Spec (types): K_i = 0 is a pure seller, which never buys. Its zero gain makes every
    positive price 'not worth buying' (T = 0) by itself, but a price of 0 (c_j = 0 and
    lam d_ij = 0) would give T = inf ('always worth buying'): the pure seller's row is 0
    whatever the prices, and clearing leaves its row of the graph empty."""
    market = ipfl.Market(N=[100.0, 200.0, 300.0], c=[0.0, 0.0, 1.0], K=[0.0, 5e4, 5e4],
                         lam=0.0)
    D = np.full((3, 3), 0.5)
    np.fill_diagonal(D, 0.0)
    T = ipfl.thresholds(market, D)
    np.testing.assert_array_equal(T[0], 0.0)
    assert np.isinf(T[2, 1])  # the same free model is always worth buying for a buyer
    for rule in ("box2", "local", "exact"):
        assert not ipfl.clear(market, D, rule=rule).adjacency[0].any(), rule


def test_a_linear_gain_priced_at_its_own_value_is_never_worth_buying():
    """Box 2's convention for every gain: T = 0 where price >= g(N_j), T = inf where the
    marginal never falls to the price. A linear gain's marginal is the constant
    g(N_j) = K((1 + N_j/N) - 1), while its limit K N_j / N may round to either side of it:
    priced exactly at g(N_j) it is never worth buying, whichever way the two round, and
    one ulp below both always (generated mutant 0cc30e3e40 joined the always-worth-buying test
    to the price < g(N_j) test with `|`: T = inf at g(N_j) wherever the limit rounds at or
    above it)."""
    from mechanisms.gains import PowerGain

    gain = PowerGain(1.0)
    rng = np.random.default_rng(7)
    Nj, K, N = (10.0 ** rng.uniform(-3, 6, 2000) for _ in range(3))
    first = gain.value(Nj, K, N)
    limit = gain.marginal_limit(Nj, K, N)
    assert (first <= limit).sum() > 100 and (first > limit).sum() > 100  # both roundings met
    assert (gain.thresholds(first, Nj, K, N) == 0.0).all()
    below = np.nextafter(limit, 0.0)  # under the limit too: always worth buying
    ok = below < first
    assert ok.sum() > 1000 and (gain.thresholds(below, Nj, K, N)[ok] == np.inf).all()


def test_the_sqrt_closed_form_does_not_depend_on_its_block_size(monkeypatch):
    """SqrtGain.thresholds runs its closed form in blocks of rows (gains._BLOCK elements) for
    the cache; every operation in a block is elementwise (the large-q test only gates work
    its mask then applies per element), so the values are the same bit for bit whatever the
    block (benchmarks/equivalent_mutants.toml argues mutants e2fd1aeeac and d0431e5db0,
    which change only the block, from this)."""
    import mechanisms.gains as gains

    rng = np.random.default_rng(3)
    gain = ipfl.SqrtGain()
    for B, m in [(200, 12), (3, 100), (2000, 2), (1, 131)]:
        price = 10.0 ** rng.uniform(-14, 2, (B, m, m)) * rng.choice([1, 1, 1, -1, 0], (B, m, m))
        Nj = 10.0 ** rng.uniform(-3, 6, (B, 1, m))
        K = 10.0 ** rng.uniform(-3, 8, (B, m, 1))
        N = 10.0 ** rng.uniform(-3, 6, (B, m, 1))
        want = gain.thresholds(price, Nj, K, N)
        for block in (1, 15, 1000, 2**20):
            monkeypatch.setattr(gains, "_BLOCK", block)
            got = gain.thresholds(price, Nj, K, N)
            assert (got.view(np.int64) == want.view(np.int64)).all(), (B, m, block)
        monkeypatch.undo()


def test_a_generic_root_is_halved_only_until_its_bracket_is_narrow():
    """Gain._roots halves each root's bracket [T, 2T] until it is 4e-16 of its top (about 51
    halvings), never further: a threshold of a gain of your own costs two calls of it per
    doubling of the bracket and per halving, 129 calls in all here, not 200 halvings
    (generated mutant eea2923e5f compared the width with 4e-16 - h: every bracket halved to
    its last bit, 200 times)."""
    from mechanisms.gains import CallableGain

    calls = []

    def log_gain(x, K, N):
        calls.append(np.shape(x))
        return np.asarray(K) * np.log1p(np.asarray(x) / np.asarray(N))

    gain = CallableGain(log_gain, label="log")
    calls.clear()  # the shape check's calls at construction
    T = gain.thresholds(np.array([0.3, 2.0, 7.5]), 100.0, 1000.0, 50.0)
    assert np.isfinite(T).all() and (T > 0).all()
    assert 100 <= len(calls) <= 160, len(calls)
