"""Pairwise distances (one Gram matrix) and the Eq. 8 prox-centre, against plain loops."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mechanisms import ipfl
from mechanisms.distances import distance_gradients

models = st.integers(2, 6).flatmap(
    lambda m: arrays(np.float64, (m, 5), elements=st.floats(-3, 3, allow_nan=False))
)


def loop_distances(X, metric, ref):
    m = X.shape[0]
    D = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            if metric == "l2sq":
                D[i, j] = np.sum((X[i] - X[j]) ** 2)
            else:
                u, v = X[i] - ref, X[j] - ref
                nu, nv = np.linalg.norm(u), np.linalg.norm(v)
                D[i, j] = 1.0 if nu == 0 or nv == 0 else 1 - np.clip(u @ v / (nu * nv), -1, 1)
    return D


@pytest.mark.parametrize("metric", ["l2sq", "cosine"])
@given(X=models)
def test_gram_matches_loop(metric, X):
    ref = np.full(X.shape[1], 0.1)
    got = ipfl.pairwise_distances(X, metric, reference=ref)
    scale = 1.0 + np.sum(X**2)
    np.testing.assert_allclose(got, loop_distances(X, metric, ref), atol=1e-9 * scale)
    assert (got >= 0).all() and (np.diag(got) == 0).all()
    if metric == "cosine":
        assert (got <= 2).all()


@pytest.mark.parametrize("metric", ["l2sq", "cosine"])
def test_gradient_matches_finite_differences(metric):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 6))
    ref = rng.normal(size=6) * 0.1
    g = distance_gradients(X, [[0, 1]], metric, ref)[0]
    h = 1e-6
    fd = np.zeros(6)
    for k in range(6):
        Xp, Xm = X.copy(), X.copy()
        Xp[0, k] += h
        Xm[0, k] -= h
        dp = ipfl.pairwise_distances(Xp, metric, reference=ref)[0, 1]
        dm = ipfl.pairwise_distances(Xm, metric, reference=ref)[0, 1]
        fd[k] = (dp - dm) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("metric", ["l2sq", "cosine"])
def test_prox_centre_eq8(metric):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4, 3))
    A = np.array([[0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 1], [0, 1, 0, 0]], dtype=bool)
    N = np.array([100.0, 200.0, 300.0, 400.0])
    got = ipfl.prox_centres(X, A, N, eta=0.5, metric=metric)
    for i in range(4):
        step = sum(N[j] * distance_gradients(X, [[i, j]], metric)[0] for j in np.flatnonzero(A[i]))
        np.testing.assert_allclose(got[i], X[i] - 0.5 / N[i] * step, atol=1e-12)
    np.testing.assert_array_equal(got[1], X[1])  # no neighbour: theta_bar = theta


@pytest.mark.parametrize(
    ("theta", "field"),
    [
        (np.zeros(3), "theta"),
        (np.array([[0.0, np.nan]]), "theta"),
    ],
)
def test_bad_parameters(theta, field):
    with pytest.raises(ipfl.MarketInputError) as info:
        ipfl.pairwise_distances(theta)
    assert info.value.field == field


def test_bad_metric_and_reference():
    with pytest.raises(ipfl.MarketInputError, match="metric"):
        ipfl.pairwise_distances(np.zeros((2, 2)), "l1")
    with pytest.raises(ipfl.MarketInputError, match="reference"):
        ipfl.pairwise_distances(np.zeros((2, 2)), "cosine", reference=np.zeros(3))


@pytest.mark.parametrize("metric", ["angle", "l1", "Cosine"])
def test_distance_gradients_refuse_an_unknown_metric_naming_it(metric):
    """Names on either side of "cosine" in string order are refused (a generated mutant that
    compared metric > "cosine" accepted every name before it as cosine)."""
    X = np.arange(12.0).reshape(3, 4)
    with pytest.raises(ipfl.MarketInputError, match="metric"):
        distance_gradients(X, [[0, 1]], metric=metric)
