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


def test_ari_of_no_items_is_the_undefined_convention():
    """Two empty labelings are two 1-D labelings of the same length: no pairs, the index
    undefined, 1.0 as for one item (the oracle's convention, scikit-learn's). Before, numpy
    raised a ValueError (the max of an empty array), not an answer nor a refusal."""
    assert lia.adjusted_rand_index([], []) == 1.0
    assert lia.adjusted_rand_index([3], [7]) == 1.0


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


# A row whose scores form an evenly spaced ladder has exactly tied 2-means splits, which the
# last bit of a score decides; three validation samples per client make the means inexact.
# With the means as a product with the (n, m) matrix of 1 / |Z_i| (BLAS: the matrix-vector
# kernel for one instance, the matrix kernel for a batch), this instance's client 1 had set
# {0, 1} alone and {1} inside a batch, its clusters [0, 0, 1] alone and [0, 1, 2] in a batch.
_LADDER_BASE = [1.5104203820623272, 1.3294890887318167, 0.7244902449376432,
                2.2151276900659447, 2.533506718979857, 0.759871726190762, 0.5778342415735301,
                1.6051460821061923, 0.5309192089854339]
_LADDER_LOSSES = [
    [0.6312322556417469, 0.4503009623112364, -0.15469788148293706, 1.0359395636453643,
     1.3543185925592767, -0.4193164002298183, -0.30135388484705017, 0.7259579556856119,
     -0.34826891743514643],
    [0.03123225564174681, -0.1496990376887637, -0.7546978814829371, 0.7359395636453643,
     1.0543185925592766, -0.7193164002298184, -0.6013538848470502, 0.4259579556856119,
     -0.6482689174351465],
    [0.33123225564174685, 0.15030096231123635, -0.4546978814829371, 1.3359395636453644,
     1.6543185925592767, -0.11931640022981826, -0.9013538848470503, 0.12595795568561186,
     -0.9482689174351465]]


def _ladders(count, seed=5):
    """Instances whose every row of scores is a ladder a + d (0, 1, ..., m-1) in a random
    order (exact 2-means ties), three samples per client."""
    rng = np.random.default_rng(seed)
    out = [(np.array(_LADDER_BASE), np.array(_LADDER_LOSSES), np.repeat(np.arange(3), 3))]
    for _ in range(count):
        m = int(rng.integers(3, 7))
        owner = np.repeat(np.arange(m), 3)
        base = rng.uniform(0.1, 3, 3 * m)
        step, low = rng.choice([0.1, 0.2, 0.3, 0.6, 0.7]), rng.uniform(-1, 1)
        effect = np.array([low + step * rng.permutation(m) for _ in range(m)])  # (i, j)
        out.append((base, base[None, :] - effect.T[:, owner], owner))
    return out


def test_an_instance_answers_alike_alone_and_in_any_batch():
    """influence, beneficial_sets and cluster (both modes) give an instance the same bits
    alone as at the first, a middle and the last place of batches of 2, 7 and 64 (the other
    places: other ladders of its size). 40 ladders: with the means as a matrix product, 32 of
    their 41 instances' scores, 10 of their sets and 6 clusterings differed in a batch of two."""
    cases = _ladders(40)
    rng = np.random.default_rng(0)
    for k, (base, losses, owner) in enumerate(cases):
        alone = lia.influence(base, losses, owner)
        sets, ids = lia.beneficial_sets(alone), lia.cluster(alone)
        same = [j for j, c in enumerate(cases) if c[1].shape == losses.shape]
        for size in (2, 7, 64):
            for place in sorted({0, size // 2, size - 1}):
                pick = rng.choice(same, size=size)
                pick[place] = k
                batch = lia.influence(np.stack([cases[j][0] for j in pick]),
                                      np.stack([cases[j][1] for j in pick]), owner)
                assert np.array_equal(batch[place], alone), (k, size, place)
                assert np.array_equal(lia.beneficial_sets(batch)[place], sets), (k, size)
                assert np.array_equal(lia.cluster(batch)[place], ids), (k, size)
                assert np.array_equal(lia.cluster(batch, mode="p2p")[place], sets), (k, size)


def test_uneven_interleaved_samples_answer_alike_alone_and_in_a_batch():
    """Clients' validation samples interleaved, 4 to 6 each, client 0 one: every instance's
    scores are the per-client mean differences (to 1e-12) and the same bits alone as in its
    batch of 21. With the means as a matrix product, 62 of these 84 instances differed."""
    rng = np.random.default_rng(3)
    differ = 0
    for m, n in ((4, 13), (6, 30), (9, 37), (12, 61)):
        owner = 1 + np.arange(n) % (m - 1)  # clients 1..m-1 interleaved, uneven counts
        owner[n // 2] = 0  # client 0: one sample
        base, losses = rng.uniform(0, 3, (21, n)), rng.uniform(0, 3, (21, m, n))
        batch = lia.influence(base, losses, owner)
        for k in range(21):
            alone = lia.influence(base[k], losses[k], owner)
            mean = np.array([[base[k][owner == i].mean() - losses[k][j][owner == i].mean()
                              for j in range(m)] for i in range(m)])
            np.testing.assert_allclose(alone, mean, rtol=0, atol=1e-12)
            differ += not np.array_equal(alone, batch[k])
    assert differ == 0
