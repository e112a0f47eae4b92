"""Box 2 thresholds: vectorised solvers against the scalar reference and the defining equation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms import ipfl
from mechanisms.ipfl.reference import reference_thresholds
from proofs.strategies import ipfl_instances

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
    avoids the subtraction; the scalar reference and the generic solver cannot)."""
    P = market.prices(D)
    with np.errstate(invalid="ignore"):
        top = market.gain.value(np.where(np.isfinite(T), T, 0.0), market.K[:, None],
                                market.N[:, None])
    return ~((P > 0) & (P < 1e-7 * np.abs(top)))


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


def test_wrong_solver_is_caught():
    """Known-bad variant: a threshold solver off by 1% fails the same residual check."""
    mk = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 0.2], K=[5e4, 3e4, 1e4], lam=2.0)
    D = np.array([[0, 0.1, 0.3], [0.1, 0, 0.2], [0.3, 0.2, 0]])
    T = ipfl.thresholds(mk, D) * 1.01
    ok = np.isfinite(T) & (T > 0)
    with pytest.raises(AssertionError):
        _close(np.where(ok, T, 0), np.where(ok, reference_thresholds(mk, D), 0))
