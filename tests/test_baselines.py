"""The PFL baselines the iPFL paper compares against: each behaves as its paper says, and
differently from FedAvg (one model) and Local (no sharing) where it should."""

import numpy as np
import pytest
import torch

from learning.algorithms import REGISTRY, TrainConfig
from learning.algorithms.cfl import bipartition
from learning.algorithms.fedamp import attention
from learning.algorithms.fedfomo import weights
from learning.algorithms.pfedgraph import graph, project_simplex
from learning.session import Session

GROUPS = {"dataset": "digits", "partition": "pairs", "n_clusters": 3, "clients": 6,
          "steps": 15, "batch": 32, "lr": 0.05, "seed": 1}


def _rounds(algorithm, n, **kw):
    s = Session(TrainConfig(algorithm=algorithm, **{**GROUPS, **kw}))
    gen = REGISTRY[algorithm].rounds(s)
    out = [next(gen) for _ in range(n)]
    return s, out


def _flat(params):
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], dim=1).double()


def _spread(params):
    f = _flat(params)
    return float(torch.cdist(f, f).mean())


def _same_vs_other(W, groups):
    same = groups[:, None] == groups[None, :]
    off = ~np.eye(len(groups), dtype=bool)
    return W[same & off].mean(), W[~same].mean()


def test_pfedgraph_graph_is_the_qp_solution():
    cvxpy = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(0)
    for _ in range(5):
        n = 6
        p = rng.dirichlet(np.ones(n))
        cos = np.clip(rng.normal(0, 0.5, (n, n)), -1, 1)
        alpha = 0.8
        A = graph(p, cos, alpha)
        for i in range(n):  # min alpha ||x||^2 + (-cos_i - 2 alpha p)^T x on the simplex
            x = cvxpy.Variable(n)
            q = -cos[i] - 2 * alpha * p
            cvxpy.Problem(cvxpy.Minimize(alpha * cvxpy.sum_squares(x) + q @ x),
                          [x >= 0, cvxpy.sum(x) == 1]).solve()
            np.testing.assert_allclose(A[i], x.value, atol=1e-4)
        # the known-bad variant, the earlier Proj_simplex(p + 0.8 cos), is another graph
        assert not np.allclose(A, project_simplex(p[None, :] + 0.8 * cos), atol=1e-3)


def test_fedamp_attention_prefers_similar_clients():
    cos = np.array([[1, 0.9, -0.2], [0.9, 1, 0.0], [-0.2, 0.0, 1]])
    W = attention(cos, sigma=10.0, self_weight=0.3)
    np.testing.assert_allclose(W.sum(1), 1)
    np.testing.assert_allclose(np.diag(W), 0.3)
    assert W[0, 1] > W[0, 2] and W[1, 0] > W[1, 2]
    flat = attention(cos, sigma=0.0, self_weight=0.3)  # no attention: uniform over others
    assert flat[0, 1] == pytest.approx(flat[0, 2])


def test_fedamp_paper_attention_follows_the_attention_inducing_function():
    from learning.algorithms.fedamp import attention_paper

    d2 = np.array([[0, 1, 9, 100], [1, 0, 4, 100], [9, 4, 0, 100], [100, 100, 100, 0.0]])
    W = attention_paper(d2, alpha=0.7, sigma=5.0)
    np.testing.assert_allclose(W.sum(1), 1)
    assert (np.diag(W) >= 0.3 - 1e-12).all()
    # xi_ij = alpha_k A'(d2) with A(x) = 1 - exp(-x / sigma), alpha_k = 0.7 sigma / 3
    np.testing.assert_allclose(W[0, 1], 0.7 * 5.0 / 3 * np.exp(-1 / 5.0) / 5.0)
    assert W[0, 1] > W[0, 2] > W[0, 3]  # closer clients weigh more
    assert W[0, 3] < 1e-8 and W[3, 3] > 1 - 1e-8  # a far client (an attacker) is isolated
    # sigma = 0: the median squared distance; the known-bad variant, plain (not squared)
    # distances in A, gives other weights
    med = attention_paper(d2, alpha=0.7)
    np.testing.assert_allclose(med, attention_paper(d2, 0.7, float(np.median(d2[d2 > 0]))))
    assert not np.allclose(W, attention_paper(np.sqrt(d2), alpha=0.7, sigma=5.0))


def test_fedfomo_weights_keep_only_models_that_help():
    L_old = np.array([1.0, 1.0])
    L = np.array([[0.8, 0.5], [2.0, 0.9]])  # client 0: both help; client 1: only itself
    dist = np.ones((2, 2))
    W = weights(L_old, L, dist, np.ones((2, 2), bool))
    np.testing.assert_allclose(W[0], [0.2 / 0.7, 0.5 / 0.7])
    np.testing.assert_allclose(W[1], [0.0, 1.0])
    assert weights(L_old, L + 5, dist, np.ones((2, 2), bool)).sum() == 0  # none helps


def test_cfl_bipartition_separates_two_directions():
    u = np.array([[1, 0.1], [1, -0.1], [-1, 0.2], [-1, -0.2]], dtype=float)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    a, b = bipartition(u @ u.T)
    assert {tuple(a), tuple(b)} == {(0, 1), (2, 3)}


def _cfl_with_starts(n, **kw):
    """CFL for n rounds; also each training's starting models (what the clusters' update
    gave: CFL scores the trained models, before the update)."""
    s = Session(TrainConfig(algorithm="cfl", **{**GROUPS, **kw}))
    starts, train = [], s.train

    def recording(params, *a, **k):
        starts.append(_flat(params))
        return train(params, *a, **k)
    s.train = recording
    gen = REGISTRY["cfl"].rounds(s)
    out = [next(gen) for _ in range(n)]
    next(gen)  # round n's training starts from round n - 1's update
    return s, out, starts


def test_cfl_splits_into_clusters_and_differs_from_fedavg_and_local():
    s, out, starts = _cfl_with_starts(3, cfl_eps1=1e9, cfl_eps2=0.0)  # split when it can
    labels = out[-1].extra["clusters"]
    assert labels.max() >= 1  # more than one cluster
    assert s.extras["cfl_splits"] and len(s.extras["cfl_norms"]) == 4  # splits recorded
    f = starts[3]  # the models after round 2's update: one per cluster
    for k in np.unique(labels):
        members = np.flatnonzero(labels == k)
        assert torch.allclose(f[members], f[members[0]].expand(len(members), -1))
    assert torch.cdist(f, f).max() > 1e-6  # and the clusters differ
    # the known-bad variant: a split that never triggers is FedAvg's single model (unweighted)
    s0, never, starts0 = _cfl_with_starts(3, cfl_eps1=0.0)
    assert (never[-1].extra["clusters"] == 0).all() and s0.extras["cfl_splits"] == []
    assert torch.cdist(starts0[3], starts0[3]).max() < 1e-6
    # scored on the trained models, which differ from client to client
    assert _spread(never[-1].params) > 1e-6


@pytest.mark.parametrize(("algorithm", "kw"), [
    ("fedamp", {"fedamp_lam": 1.0}),
    ("fedamp", {"fedamp_lam": 1.0, "fedamp_attention": "paper"}),
    ("fedfomo", {}), ("pfedgraph", {}), ("ditto", {})])
def test_personalised_baselines_sit_between_fedavg_and_local(algorithm, kw):
    """(FedAMP at the authors' lam = 0.01 barely pulls: it is nearly Local, like iPFL at
    lambda = 0.001; the test uses lam = 1 to see the mechanism.)"""
    n = 3
    _, local = _rounds("local", n)
    _, fedavg = _rounds("fedavg", n)
    s, out = _rounds(algorithm, n, **kw)
    spread = _spread(out[-1].params)
    assert _spread(fedavg[-1].params) < 1e-6 < spread  # personal models, not one model
    assert spread < _spread(local[-1].params)  # but pulled together by sharing
    if algorithm in ("fedamp", "fedfomo", "pfedgraph"):
        W = out[-1].extra["graph"]
        same, other = _same_vs_other(W, np.asarray(s.cluster_of))
        assert same > other  # they share more within the true groups


def test_ditto_pulls_toward_the_round_start_global_with_its_own_lambda():
    _, weak = _rounds("ditto", 2, ditto_lam=0.01)
    _, strong = _rounds("ditto", 2, ditto_lam=1.0)
    assert _spread(strong[-1].params) < _spread(weak[-1].params)


def test_fig4_attackers_free_ride_at_a_random_client_and_persist():
    cfg = {**GROUPS, "algorithm": "ipfl", "attackers": 1}
    where = {Session(TrainConfig(**{**cfg, "seed": k}, attack="gaussian")).attackers[0]
             for k in range(8)}
    assert len(where) > 1  # a random client, not always the last
    s = Session(TrainConfig(**cfg, attack="gaussian"))
    a = s.attackers[0]
    # as the authors' attack_ratio clients: no gain, no cost (reported and true)
    assert s.free_riders[a] and s.market.true_c[a] == s.market.c[a] == s.market.K[a] == 0
    honest = [i for i in range(6) if i != a]
    assert (s.market.K[honest] > 0).all() and (s.market.c[honest] > 0).all()
    trained = s.train(s.params0)
    np.testing.assert_array_equal(_flat(trained)[a], _flat(s.params0)[a])  # no training
    sf = Session(TrainConfig(**cfg, attack="signflip"))
    b = sf.attackers[0]
    assert not sf.free_riders.any() and sf.market.true_c[b] == sf.market.K[b] == 0
    up = sf.uploads(sf.params0)
    kept = _flat(sf.persist(sf.params0, up))
    np.testing.assert_allclose(kept[b], -_flat(sf.params0)[b], atol=1e-6)  # persists
    others = [i for i in range(6) if i != b]
    np.testing.assert_allclose(kept[others], _flat(sf.params0)[others])


def test_fedfomo_as_the_authors_run_it(monkeypatch):
    """Issue 21's three FedFomo differences, removed: the distance is to the client's TRAINED
    model with 1e-6 added inside the norm; the client's own model is drawn like any other (not
    always a candidate); the ledger counts all M sampled models, helpful or not. Known-bad
    variants (the round-start model, no 1e-6, the helpful models only) are told apart."""
    import learning.algorithms.fedfomo as fomo

    s = Session(TrainConfig(algorithm="fedfomo", fedfomo_M=3, **GROUPS))
    trained, starts, dist_args, ledgers = [], [], [], []
    train, ledger = s.train, s.baseline_ledger
    s.train = lambda *a, **k: starts.append(a[0]) or trained.append(train(*a, **k)) \
        or trained[-1]
    s.baseline_ledger = lambda W: ledgers.append(np.asarray(W)) or ledger(W)
    real = fomo.distances
    monkeypatch.setattr(fomo, "distances",
                        lambda own, up: dist_args.append((own, up)) or real(own, up))
    gen = REGISTRY["fedfomo"].rounds(s)
    rounds = [next(gen) for _ in range(4)]
    self_drawn, unhelpful_counted = [], 0
    for t, (r, cand) in enumerate(zip(rounds, ledgers, strict=True)):
        own, up = dist_args[t]
        torch.testing.assert_close(own, _flat(trained[t]))  # the trained model
        # the known-bad variant, the round-start model, is another
        assert not torch.allclose(own, _flat(starts[t]))
        d = real(own, up)
        np.testing.assert_allclose(d, (own[:, None] - up[None] + 1e-6).norm(dim=2).numpy())
        assert not np.allclose(d, (own[:, None] - up[None]).norm(dim=2).numpy(), rtol=0,
                               atol=1e-9)  # the 1e-6 counts (the diagonal: 1e-6 sqrt(p))
        assert cand.dtype == bool and (cand.sum(axis=1) == 3).all()  # M = 3 sampled
        self_drawn += list(np.diag(cand))
        unhelpful_counted += int((cand & (r.extra["graph"] == 0)).sum())
    assert 0 < sum(self_drawn) < len(self_drawn)  # sometimes drawn, sometimes not
    assert unhelpful_counted > 0  # the ledger counts sampled models that did not help


def _fedamp_pull():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fedamp_pull.py"
    spec = importlib.util.spec_from_file_location("fedamp_pull", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # it imports benchmarks/_timing.py
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(path.parent))
    return mod


def fedamp_pull_faults(df) -> list[str]:
    """What the reproduction pages' FedAMP note (sims.claims.fedamp_note) says
    `python benchmarks/fedamp_pull.py` measures, checked on its rows (lam 0.01 and 1): the
    attention is not collapsed to self (self weight 0.3, another client weighted more in
    every round); at the configured fedamp_lam 0.01 FedAMP's models stay at most 3 % (of
    Local's distance from the initial model) from Local's and every client's accuracy within
    half a point; at fedamp_lam 1 they are a third or more away and 4 or more points less
    accurate (rounds after the first: round 0 trains without the pull). Measured at seed 0
    on the development host: largest other weight 0.353-0.408, lam 0.01 at most 1.6 % and
    0.3 points, lam 1 41-47 % and 5.5-8.9 points: the page states bounds with room for
    another machine's floating point, not the measured figures."""
    faults = []
    if not (np.isclose(df["self weight"], 0.3).all()
            and (df["largest other weight"] > df["self weight"]).all()):
        faults.append("attention")
    small, big = df[df.lam == 0.01], df[(df.lam == 1.0) & (df["round"] > 0)]
    if not (small["|amp - local| / |local - theta0|"] <= 0.03).all():
        faults.append("lam 0.01 moves the models")
    if not (small["max |acc diff|"] <= 0.005).all():
        faults.append("lam 0.01 changes the accuracy")
    if big.empty or not (big["|amp - local| / |local - theta0|"] >= 1 / 3).all():
        faults.append("lam 1 distance")
    if big.empty or not (big["acc FedAMP - Local (mean)"] <= -0.04).all():
        faults.append("lam 1 accuracy")
    return faults


@pytest.mark.slow
def test_fedamp_scores_as_local_because_its_pull_is_weak(monkeypatch):
    """The measurement behind the pages' FedAMP note, with the benchmark's default
    configuration (digits, cluster, 9 clients, 3 rounds of 50 steps, seed 0). Known-bad
    variant rejected by the same check: a FedAMP whose proximal pull is dropped (then even
    fedamp_lam 1 leaves the models where Local's are)."""
    pull = _fedamp_pull()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the benchmark runs (and cheaper on a shared machine)
    try:
        assert fedamp_pull_faults(pull.measure(lams=(0.01, 1.0))) == []
        train = Session.train
        monkeypatch.setattr(Session, "train",
                            lambda self, params, centre=None, prox=None, **kw:
                            train(self, params, **kw))
        bad = fedamp_pull_faults(pull.measure(lams=(1.0,), rounds=2))
    finally:
        torch.set_num_threads(threads)
    assert "lam 1 distance" in bad
