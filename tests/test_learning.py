"""The federated learner: data, partitions, models, lockstep training, algorithms."""

import gzip
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

from learning import data, models, partition
from learning.algorithms import ALGORITHMS, TrainConfig, project_simplex, run
from learning.local import SGDConfig, sample_batches, train_lockstep, train_sequential
from mechanisms.errors import MarketInputError

# ------------------------------------------------------------------------------ data


def _write_idx(path, arr, gz):
    header = bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    raw = header + arr.astype(np.uint8).tobytes()
    (gzip.open if gz else open)(path, "wb").write(raw)


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trip(tmp_path, gz):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    p = tmp_path / ("x.idx" + (".gz" if gz else ""))
    _write_idx(p, arr, gz)
    np.testing.assert_array_equal(data.read_idx(p), arr)


def test_fashion_mnist_from_a_user_folder(tmp_path):
    rng = np.random.default_rng(0)
    _write_idx(tmp_path / "train-images-idx3-ubyte", rng.integers(0, 256, (50, 28, 28)), False)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", rng.integers(0, 10, 50), False)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (20, 28, 28)), True)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", rng.integers(0, 10, 20), True)
    d = data.load_fashion_mnist(tmp_path)
    assert d.x_train.shape == (50, 1, 28, 28) and d.x_test.shape == (20, 1, 28, 28)
    assert d.x_train.max() <= 1.0 and d.y_train.dtype == np.int64


def test_missing_fashion_mnist_says_how_to_get_it(tmp_path):
    with pytest.raises(MarketInputError, match="apt-get install dataset-fashion-mnist") as e:
        data.load_fashion_mnist(tmp_path)
    assert e.value.field == "data_dir"


def test_real_fashion_mnist_when_installed():
    try:
        d = data.load_fashion_mnist()
    except MarketInputError:
        pytest.skip("dataset-fashion-mnist not installed here")
    assert d.x_train.shape == (60000, 1, 28, 28) and d.x_test.shape == (10000, 1, 28, 28)
    assert np.bincount(d.y_train).tolist() == [6000] * 10


def test_synthetic_is_reproducible_and_grouped():
    a, b = data.synthetic(1, 1, 8, rng=3), data.synthetic(1, 1, 8, rng=3)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert a.x_train.shape[1] == 60 and set(np.unique(a.groups)) == set(range(8))


# ------------------------------------------------------------------------------ partitions

LABELS = np.repeat(np.arange(10), 300)


def _covers(parts, n):
    allidx = np.concatenate(parts)
    return allidx.size == n and np.unique(allidx).size == n


def _label_share(parts, y):
    return np.array([np.bincount(y[p], minlength=10) / len(p) for p in parts])


def test_niid_statistics():
    small = partition.niid(LABELS, 10, 0.1, 0)
    large = partition.niid(LABELS, 10, 100.0, 0)
    assert _covers(small, LABELS.size) and min(map(len, small)) >= 10
    # concentration: with beta = 0.1 a client's top class dominates, with beta = 100 it does not
    assert _label_share(small, LABELS).max(axis=1).mean() > 0.5
    assert _label_share(large, LABELS).max(axis=1).mean() < 0.2


def test_cluster_statistics():
    parts, owner = partition.cluster(LABELS, 9, 3, 0.1, 0, beta_in=10.0)
    assert _covers(parts, LABELS.size)
    share = _label_share(parts, LABELS)
    tv = 0.5 * np.abs(share[:, None] - share[None]).sum(-1)
    same = owner[:, None] == owner[None]
    off = ~np.eye(9, dtype=bool)
    assert tv[same & off].mean() < tv[~same].mean()


def test_skew_gives_s_classes_each():
    parts = partition.skew(LABELS, 10, 2, 0)
    assert all(np.unique(LABELS[p]).size == 2 for p in parts)
    assert _covers(parts, LABELS.size)


def test_partition_terminates_with_a_clear_error():
    with pytest.raises(partition.PartitionError, match="tries"):
        partition.niid(LABELS[:120], 10, 0.01, 0, min_size=12, max_tries=20)


# ------------------------------------------------------------------------------ models, SGD


def test_simplecnn_has_44426_parameters():
    assert models.n_params(models.build("simplecnn-mnist", (1, 28, 28), 10)) == 44_426


@pytest.mark.parametrize("name, shape", [("mlp", (1, 8, 8)), ("simplecnn-mnist", (1, 28, 28)),
                                          ("logreg", (60,))])
def test_lockstep_equals_sequential(name, shape):
    torch.manual_seed(0)
    m, n = 4, 200
    X = torch.rand(n, *shape)
    Y = torch.randint(0, 10, (n,))
    parts = [np.arange(k, n, m) for k in range(m)]
    model = models.build(name, shape, 10)
    P = models.init_stacked(model, m)
    cfg = SGDConfig(steps=5, batch=8, lr=0.05)
    b = sample_batches(parts, cfg, [np.random.default_rng(k) for k in range(m)])
    centre = {k: v + 0.1 for k, v in P.items()}
    prox = np.array([0.0, 0.5, 1.0, 2.0])
    active = np.array([True, True, False, True])
    A = train_lockstep(model, P, X, Y, b, cfg, centre, prox, active)
    B = train_sequential(model, P, X, Y, b, cfg, centre, prox, active)
    for k in A:
        torch.testing.assert_close(A[k], B[k], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(A[k][2], P[k][2])  # inactive client untouched


def test_project_simplex():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(20, 6))
    W = project_simplex(V)
    assert np.allclose(W.sum(axis=1), 1) and (W >= 0).all()
    # optimality: no feasible point on a random segment is closer
    for v, w in zip(V, W, strict=True):
        other = rng.dirichlet(np.ones(6))
        assert np.sum((v - w) ** 2) <= np.sum((v - other) ** 2) + 1e-12


# ------------------------------------------------------------------------------ algorithms

SMALL = {"dataset": "digits", "clients": 5, "rounds": 2, "steps": 10, "batch": 16, "lr": 0.05,
         "beta": 0.5}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_runs_and_reports(algorithm):
    extra = {"partition": "pairs", "n_clusters": 2, "lia_warmup": 1} \
        if algorithm in ("lia", "oracle") else {}
    res = run(TrainConfig(algorithm=algorithm, **{**SMALL, **extra}))
    df = res.frame
    assert len(df) == 2 * 5
    cols = ["acc_personalised", "acc_own", "loss", "gain", "cost", "payment", "utility"]
    assert np.isfinite(df[cols].to_numpy()).all()
    assert df.acc_personalised.between(0, 1).all()
    last = df[df["round"] == 1]
    assert last.acc_personalised.mean() > 0.3  # better than the 0.1 of chance on digits


def test_ipfl_ledger_balances_and_is_rational():
    res = run(TrainConfig(algorithm="ipfl", **{**SMALL, "rounds": 3}))
    per_round = res.frame.groupby("round").payment.sum()
    assert per_round.abs().max() < 1e-9
    assert (res.frame.utility >= -1e-9).all()


def test_cpl_participation_follows_q():
    base = {"algorithm": "cpl", "dataset": "synthetic", "clients": 10, "rounds": 3,
            "steps": 5, "partition": "natural"}
    full = run(TrainConfig(**base, cpl_pricing="full")).frame
    assert full.participated.all()  # q = 1: everyone every round
    eq = run(TrainConfig(**base, cpl_budget=5.0, cpl_v_mean=0.0)).frame
    assert 0 < eq.participated.mean() < 1  # equilibrium q < 1: some clients sit out


@pytest.mark.slow
def test_same_seed_same_numbers_in_another_process():
    code = ("from learning.algorithms import TrainConfig, run;"
            "r = run(TrainConfig(algorithm='ipfl', dataset='digits', clients=4, rounds=2,"
            " steps=5, batch=8, beta=0.5, seed=11));"
            "print(repr(float(r.frame.acc_personalised.sum())),"
            " repr(float(r.frame.utility.sum())))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    r = run(TrainConfig(algorithm="ipfl", dataset="digits", clients=4, rounds=2, steps=5,
                        batch=8, beta=0.5, seed=11))
    assert float(out[0]) == float(r.frame.acc_personalised.sum())
    assert float(out[1]) == float(r.frame.utility.sum())


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"algorithm": "fedsgd"}, "algorithm"), ({"clients": 0}, "clients"),
    ({"attack": "gaussian"}, "attackers"), ({"liar": 99}, "liar"), ({"lr": 0}, "lr"),
])
def test_bad_train_config(kwargs, field):
    with pytest.raises(MarketInputError) as e:
        TrainConfig(**kwargs)
    assert e.value.field == field


QUITTER = {**SMALL, "algorithm": "ipfl", "rounds": 4, "steps": 10, "liar": 1, "liar_c": 0.0,
           "K": 1.0, "C": 5.0}  # client 1 hides its cost, sells, and loses money


def test_quitting_is_opt_in_and_a_quitter_keeps_its_best_model_by_validation():
    stay = run(TrainConfig(**QUITTER)).frame
    assert stay.active.all() and (stay.utility < -1e-9).any()  # it loses, but stays
    df = run(TrainConfig(**QUITTER, allow_quit=True)).frame
    quitters = df[~df.active].client.unique()
    assert len(quitters) >= 1
    for i in quitters:
        own = df[df.client == i].sort_values("round")
        first_out = own[~own.active]["round"].min()
        before = own[own["round"] < first_out]
        after = own[own["round"] >= first_out]
        # frozen at the model with the best validation accuracy among its active rounds
        assert np.allclose(after.acc_val, before.acc_val.max())
        best_round = before["round"].iloc[int(np.argmax(before.acc_val.to_numpy()))]
        assert np.allclose(after.acc_personalised,
                           own[own["round"] == best_round].acc_personalised.iloc[0])


def test_best_over_rounds_and_last_round_accuracy():
    res = run(TrainConfig(algorithm="fedavg", **{**SMALL, "rounds": 4}, evaluate_every=2))
    df = res.frame
    assert df[df["round"].isin([1])].acc_personalised.isna().all()  # not evaluated
    assert df[df["round"].isin([0, 2, 3])].acc_personalised.notna().all()  # last always
    best = df.groupby("client").acc_personalised.max()
    fin = res.final().set_index("client")
    np.testing.assert_allclose(fin.acc_personalised_best, best)
    np.testing.assert_allclose(fin.acc_personalised,
                               df[df["round"] == 3].set_index("client").acc_personalised)
    assert (fin.acc_personalised_best >= fin.acc_personalised).all()
    assert df.acc_val.notna().all()  # validation every round


# ------------------------------------------------------------------------------ published setup


def test_capped_niid_keeps_clients_near_n_over_m():
    y = np.repeat(np.arange(10), 600)
    free = partition.niid(y, 10, 0.1, 3)
    capped = partition.niid(y, 10, 0.1, 3, cap=True)
    assert max(map(len, capped)) < max(map(len, free))
    # a client only passes N/m by the one class it got while still below the cap
    assert max(map(len, capped)) <= y.size / 10 + 600
    assert _covers(capped, y.size)


def test_epoch_sampling_visits_every_sample_once_per_pass():
    parts = [np.arange(10), np.arange(10, 16)]
    cfg = SGDConfig(steps=5, batch=4)
    b = sample_batches(parts, cfg, [np.random.default_rng(k) for k in range(2)], "epochs")
    assert b.shape == (5, 2, 4)
    first = b[:, 0].ravel()
    assert sorted(first[:10]) == list(range(10)) and sorted(first[10:20]) == list(range(10))
    assert sorted(b[:, 1].ravel()[:6]) == list(range(10, 16))


def test_published_preset_switches_on_the_authors_pipeline():
    from learning.config import PUBLISHED_DIFFERENCES, preset
    from learning.session import Session

    pub = preset("published", **{**SMALL, "algorithm": "ipfl"})
    for name, value, why in PUBLISHED_DIFFERENCES:
        assert getattr(pub, name) == value and why
        assert getattr(TrainConfig(), name) != value  # each one IS a difference
    s = Session(pub)
    assert abs(float(s.data.x_train.mean())) < 1e-3  # standardised inputs
    assert sum(len(p) for p in s.train_parts) == s.data.y_train.size  # whole partition
    assert len(set(s.market.K)) == 1 and len(set(s.market.c)) == 1  # fixed K and C
    with pytest.raises(MarketInputError):
        preset("authors")
    res = run(pub)
    assert res.frame.payment.groupby(res.frame["round"]).sum().abs().max() < 1e-9


@pytest.mark.parametrize("algorithm", ["local", "fedavg", "cfl", "ipfl", "cpl"])
def test_ledger_adds_up_in_every_family(algorithm):
    from learning.algorithms import REGISTRY

    res = run(TrainConfig(algorithm=algorithm, **{**SMALL, "rounds": 3}))
    df = res.frame
    np.testing.assert_allclose(df.utility, df.gain - df.cost - df.payment, atol=1e-9)
    family = REGISTRY[algorithm].family
    if family in ("baseline", "market"):  # cost: true c times the clients that use i's model
        from learning.session import Session

        c = Session(res.config).market.true_c
        np.testing.assert_allclose(df.cost, c[df.client] * df.n_sold, atol=1e-9)
    if family == "market":
        assert df.groupby("round").payment.sum().abs().max() < 1e-9
    if family == "none":
        assert (df[["gain", "cost", "payment", "utility"]] == 0).all().all()


@pytest.mark.parametrize("name, shape", [("mlp", (1, 8, 8)), ("simplecnn-mnist", (1, 28, 28))])
def test_batched_evaluation_equals_the_loop_over_clients(name, shape):
    from learning import evaluate as ev
    from learning.data import Dataset

    torch.manual_seed(0)
    g = np.random.default_rng(0)
    m, n = 5, 300
    model = models.build(name, shape, 10)
    P = models.init_stacked(model, m)
    P = {k: v + 0.3 * torch.randn_like(v) for k, v in P.items()}  # clients differ
    X = torch.rand(n, *shape)
    Y = torch.randint(0, 10, (n,))
    d = Dataset("t", X.numpy(), Y.numpy(), X[:130].numpy(), Y[:130].numpy(), 10)
    # unequal parts (one empty, one longer than a chunk) as the corrected partitions give
    parts = [np.sort(g.choice(n, k, replace=False)) for k in (0, 7, 40, 150, 299)]
    dist = g.dirichlet(np.ones(10), m)
    got = ev.evaluate(model, P, d, dist, parts, X, Y, chunk=64, batched=True)
    ref = ev.evaluate(model, P, d, dist, parts, X, Y, chunk=64, batched=False)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])  # NaN for the empty part in both
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-5)
    assert np.isnan(got[1][0]) and len(set(np.round(got[0], 6))) > 1
    # the check tells models apart: client 4's model on client 3's part is another number
    swapped = {k: v[[0, 1, 2, 4, 3]] for k, v in P.items()}
    bad = ev.accuracy_on_parts(model, swapped, X, Y, parts, chunk=64)
    assert not np.array_equal(bad, ref[1])
    assert (ev.predict_all(model, P, X[:130]) == ev.predict_all(model, P, X[:130],
                                                                batched=False)).all()


def test_evaluation_falls_back_to_the_loop_for_a_model_vmap_cannot_batch():
    from learning import evaluate as ev

    class Branchy(torch.nn.Module):  # data-dependent control flow: vmap refuses it
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x) if x.sum() > 0 else -self.fc(x)

    model = Branchy()
    P = models.init_stacked(model, 3)
    X, Y = torch.rand(20, 4), torch.randint(0, 3, (20,))
    parts = [np.arange(0, 5), np.arange(5, 20), np.arange(0, 20)]
    with pytest.raises(RuntimeError, match=r"vmap|data-dependent"):
        torch.func.vmap(lambda p, x: torch.func.functional_call(model, p, (x,)))(P, X[None]
                                                                                 .repeat(3, 1, 1))
    np.testing.assert_array_equal(ev.accuracy_on_parts(model, P, X, Y, parts),
                                  ev.accuracy_on_parts(model, P, X, Y, parts, batched=False))


def test_own_validation_losses_are_the_diagonal_of_all_pairs():
    from learning.evaluate import loss_on_parts
    from learning.session import Session

    s = Session(TrainConfig(algorithm="fedfomo", clients=4, rounds=1, steps=2, batch=8,
                            partition="iid"))
    torch.manual_seed(1)
    flat = s.flatten({k: v + 0.2 * torch.randn_like(v) for k, v in s.params0.items()})
    full = s.validation_losses(flat)
    np.testing.assert_allclose(s.own_validation_losses(flat), np.diag(full), rtol=1e-5)
    assert not np.allclose(full, np.diag(full)[None, :])  # models differ on each split
    P = s.stack(flat)
    np.testing.assert_allclose(loss_on_parts(s.model, P, s.X, s.Y, s.val_parts, chunk=16),
                               loss_on_parts(s.model, P, s.X, s.Y, s.val_parts,
                                             batched=False), rtol=1e-5)
