"""Facts about CPL's building blocks that involve no solver: library tests, not declarations
of a subject (the checker only counts what the subject it checks computes).

Each has a known-bad variant the same check must reject.
"""

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mechanisms import cpl
from proofs.strategies import cpl_games

_unit = st.floats(0.05, 1.0, allow_nan=False)


def exact_mean(aggregate, w, U, a, q):
    """E[aggregate] over every participation subset, weighted by its probability."""
    mean = np.zeros_like(w)
    for bits in itertools.product([False, True], repeat=len(q)):
        S = np.array(bits)
        mean += float(np.prod(np.where(S, q, 1 - q))) * aggregate(w, U, S, a, q)
    return mean


def naive_average(w, U, S, a, q):
    """Known-bad: the plain a-weighted average of whoever showed up (biased)."""
    if not S.any():
        return w
    return (a[S] / a[S].sum()) @ U[S]


@st.composite
def aggregation_cases(draw):
    n = draw(st.integers(1, 6))
    a = np.array(draw(st.lists(_unit, min_size=n, max_size=n)))
    a = a / a.sum()  # weights of the clients' data: they sum to one
    q = np.array(draw(st.lists(_unit, min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.floats(-5, 5), min_size=2, max_size=2)))
    U = np.array(draw(st.lists(st.floats(-5, 5), min_size=2 * n, max_size=2 * n))).reshape(n, 2)
    return a, q, w, U


@given(aggregation_cases())
def test_aggregation_is_exactly_unbiased(case):
    a, q, w, U = case
    mean = exact_mean(cpl.unbiased_aggregate, w, U, a, q)
    np.testing.assert_allclose(mean, a @ U, atol=1e-9 * (1 + np.abs(U).max()))


def test_naive_average_is_biased():
    a, q = np.array([0.5, 0.5]), np.array([0.2, 0.9])
    w, U = np.zeros(1), np.array([[1.0], [0.0]])
    assert abs(exact_mean(naive_average, w, U, a, q) - a @ U)[0] > 0.1


@given(cpl_games(budget="any"), st.lists(st.floats(0, 1), min_size=12, max_size=12),
       st.lists(st.floats(0, 1), min_size=12, max_size=12))
def test_bound_decreases_in_participation(game, u, w):
    q = game.q_min + np.array(u[:game.n]) * (game.q_max - game.q_min)
    q2 = q + np.array(w[:game.n]) * (game.q_max - q)
    b, b2 = cpl.bound(game, q), cpl.bound(game, q2)
    assert b2 <= b + 1e-12 * (1 + abs(b))


def test_bound_monotonicity_check_rejects_an_increasing_objective():
    g = cpl.Game(a=[0.5, 0.5], G=[1, 1], c=[1, 1], v=[0, 0], budget=1.0, q_min=0.1)
    q, q2 = np.array([0.2, 0.2]), np.array([0.5, 0.2])

    def wrong(game, q):  # K q / (1 - q): increasing in q
        return float(np.sum(game.K * q / (1 - q)))

    assert wrong(g, q2) > wrong(g, q) + 1e-12
    assert cpl.bound(g, q2) < cpl.bound(g, q)
