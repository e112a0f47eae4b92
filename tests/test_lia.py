"""LIA clustering (mechanisms.lia): exact 1-D 2-means, beneficial sets, merge rules, ARI."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms import lia
from mechanisms.errors import MarketInputError


@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=9))
def test_two_means_is_exact(values):
    """Against brute force over every 2-partition."""
    v = np.array(values)
    high, _, _ = lia.two_means_1d(v)

    def sse(mask):
        return sum(((v[g] - v[g].mean()) ** 2).sum() for g in (mask, ~mask) if g.any())

    best = min(sse(np.array(bits, bool)) for bits in itertools.product([0, 1], repeat=v.size)
               if 0 < sum(bits) < v.size) if np.unique(v).size > 1 else 0.0
    assert sse(high) <= best + 1e-9 * (1 + best)
    if np.unique(v).size > 1:
        assert v[high].min() >= v[~high].max()  # the high group sits above the low one


def block_influence(groups, rng, noise=0.05):
    g = np.asarray(groups)
    I = np.where(g[:, None] == g[None, :], 1.0, -0.5) + rng.normal(0, noise, (g.size, g.size))
    return I


@given(st.lists(st.integers(0, 3), min_size=4, max_size=16), st.integers(0, 1000))
def test_central_recovers_planted_groups(groups, seed):
    I = block_influence(groups, np.random.default_rng(seed))
    labels = lia.cluster(I, "central")
    if len(set(groups)) > 1:
        assert lia.adjusted_rand_index(labels, groups) == pytest.approx(1.0)


def test_no_split_rule_and_p2p():
    I = np.full((4, 4), 0.3)
    assert lia.beneficial_sets(I).all()  # a flat row has no real split: everyone helps
    assert (lia.cluster(I) == 0).all()
    I2 = np.array([[1, 1, -1], [1, 1, 1], [-1, 1, 1]], float)
    sets = lia.cluster(I2, "p2p")
    assert sets.dtype == bool and sets.shape == (3, 3) and sets[1].all()
    # central keeps mutual edges only: 0-1 and 1-2 are mutual, 0-2 is not, one component
    assert len(set(lia.cluster(I2, "central"))) == 1


def test_one_way_edges_do_not_merge():
    I = np.array([[1.0, 1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])
    assert len(set(lia.cluster(I))) == 3  # 1 helps 0 but 0 does not help 1


@pytest.mark.parametrize("bad", [np.zeros((2, 3)), np.array([[0.0, np.nan], [0, 0]]),
                                 np.zeros((0, 0))])
def test_bad_influence_matrix(bad):
    with pytest.raises(MarketInputError) as e:
        lia.cluster(bad)
    assert e.value.field == "I"


def test_ari_known_values():
    assert lia.adjusted_rand_index([0, 0, 1, 1], [1, 1, 0, 0]) == 1.0
    assert lia.adjusted_rand_index([0, 0, 0, 0], [0, 1, 2, 3]) == pytest.approx(0.0)
    assert lia.adjusted_rand_index([0, 0, 1, 1, 2, 2], [0, 0, 1, 2, 2, 2]) < 1.0


# ------------------------------------------------------------------ learning side (torch)


def _digits_setup(m=8, seed=0):
    import torch

    from learning import data, models, partition

    d = data.load_digits()
    parts, groups = partition.pairs(d.y_train, m, 4, seed)
    val = [p[: max(1, len(p) // 5)] for p in parts]
    train = [p[len(v):] for p, v in zip(parts, val, strict=True)]
    torch.manual_seed(seed)
    model = models.build("mlp", d.input_shape, 10)
    theta0 = models.init_stacked(model, m)
    return model, theta0, torch.as_tensor(d.x_train), torch.as_tensor(d.y_train), train, val, \
        groups


def test_batched_scores_equal_per_pair():
    from learning.lia import influence_batched, influence_per_pair, partial_models

    model, theta0, X, Y, train, val, _ = _digits_setup()
    thetas, steps = partial_models(model, theta0, X, Y, train, np.random.default_rng(0), k=5,
                                   lr=0.5)
    assert steps == 5
    A = influence_batched(model, theta0, thetas, X, Y, val)
    B = influence_per_pair(model, theta0, thetas, X, Y, val)
    np.testing.assert_allclose(A, B, rtol=1e-5, atol=1e-6)


def test_pfedlia_recovers_the_pairs_groups():
    from learning.algorithms import TrainConfig, run

    res = run(TrainConfig(algorithm="lia", dataset="digits", partition="pairs", n_clusters=4,
                          clients=12, rounds=4, steps=20, batch=32, lr=0.05, lia_warmup=2))
    assert lia.adjusted_rand_index(res.extras["clusters"], np.arange(12) % 4) == 1.0
    assert np.asarray(res.extras["influence"]).shape == (12, 12)
    assert (res.frame.payment == 0).all()  # LIA pays nothing


def test_oracle_needs_ground_truth_groups():
    from learning.algorithms import TrainConfig, run

    with pytest.raises(MarketInputError, match="ground-truth"):
        run(TrainConfig(algorithm="oracle", dataset="digits", partition="niid", beta=0.5,
                        clients=4, rounds=1, steps=2))
