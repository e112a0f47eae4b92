"""Flower integration: strategies against a fake Grid with real Message/RecordDict replies
(no Ray), and the full simulation against the in-process learner."""

import json

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import Context, Message, RecordDict  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from learning.algorithms import TrainConfig, run  # noqa: E402
from learning.flower.app import _client_query, _client_train, _setup, make_apps  # noqa: E402
from learning.flower.strategies import CplStrategy, IpflStrategy, flat_to_record  # noqa: E402
from mechanisms import ipfl  # noqa: E402

CFG = TrainConfig(algorithm="ipfl", dataset="digits", clients=4, rounds=3, steps=10, batch=16,
                  lr=0.05, beta=0.5)


@pytest.fixture(autouse=True)
def _server_identity():
    old = (TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id)
    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0
    yield
    TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id = old


class FakeGrid:
    """Nodes 101, 102, ... run the real ClientApp logic in-process; ``faults`` can make a node
    stay silent or send NaN parameters in a given round."""

    def __init__(self, cfg, faults=None):
        self.cfg, self.faults = cfg, faults or {}
        self.contexts = {100 + p + 1: Context(run_id=1, node_id=100 + p + 1, node_config={
            "partition-id": p, "num-partitions": cfg.clients}, state=RecordDict(),
            run_config={}) for p in range(cfg.clients)}
        self.sent = []

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, timeout=None):
        replies = []
        for msg in messages:
            self.sent.append(msg)
            node = msg.metadata.dst_node_id
            ctx = self.contexts[node]
            rnd = int(dict(msg.content["config"]).get("server-round", 0)) \
                if "config" in msg.content else 0
            fault = self.faults.get((node, rnd))
            if fault == "silent":
                continue
            if msg.metadata.message_type == "query":
                reply = _client_query(msg, ctx, self.cfg)
            else:
                reply = _client_train(msg, ctx, self.cfg)
            if fault == "nan":
                arrays = reply.content["arrays"].to_numpy_ndarrays()
                arrays[0] = np.full_like(arrays[0], np.nan)
                reply = Message(RecordDict({"arrays": flwr.app.ArrayRecord(arrays),
                                            "metrics": reply.content["metrics"]}), reply_to=msg)
            replies.append(reply)
        return replies


def _initial(cfg):
    r = _setup(cfg)
    return r, flwr.app.ArrayRecord([v[0].detach().numpy() for v in r.params0.values()])


def test_ipfl_strategy_equals_the_in_process_learner():
    r, initial = _initial(CFG)
    strategy = IpflStrategy(lam=CFG.lam, eta=CFG.eta, metric=CFG.metric, reference=r.theta0)
    grid = FakeGrid(CFG)
    strategy.start(grid=grid, initial_arrays=initial, num_rounds=CFG.rounds)
    ref = run(CFG)
    for t in (1, 2):  # the markets the in-process learner also cleared
        got = sorted((row["pid"], row["payment"]) for row in strategy.ledger
                     if row["round"] == t)
        want = ref.frame[ref.frame["round"] == t].payment.to_numpy()
        np.testing.assert_allclose([p for _, p in got], want, rtol=1e-5, atol=1e-6)
    from learning import models

    flat = np.stack([strategy.personal[p] for p in range(4)])
    # the last training round's models equal the learner's final models
    last = models.flatten_params(_final_params(CFG)).double().numpy()
    np.testing.assert_allclose(flat, last, rtol=1e-4, atol=1e-5)


def _final_params(cfg):
    from learning.algorithms import REGISTRY
    from learning.session import Session

    gen = REGISTRY["ipfl"].rounds(Session(cfg))
    for _ in range(cfg.rounds):
        params, _, _ = next(gen)
    return params


def test_each_node_gets_its_own_record_and_centre():
    r, initial = _initial(CFG)
    strategy = IpflStrategy(lam=CFG.lam, eta=CFG.eta, reference=r.theta0)
    grid = FakeGrid(CFG)
    strategy.start(grid=grid, initial_arrays=initial, num_rounds=2)
    round2 = [m for m in grid.sent if dict(m.content["config"])["server-round"] == 2]
    assert len(round2) == 4
    contents = [m.content for m in round2]
    assert len({id(c) for c in contents}) == 4  # a fresh RecordDict per node
    firsts = [c["arrays"].to_numpy_ndarrays()[0] for c in contents]
    assert not np.allclose(firsts[0], firsts[1])  # different prox-centres
    bills = [dict(c["config"])["bill"] for c in contents]
    assert abs(sum(bills)) < 1e-9 and any(abs(b) > 0 for b in bills)


def test_silent_and_nan_nodes_are_dropped_and_the_ledger_balances():
    r, initial = _initial(CFG)
    faults = {(104, 2): "nan", (103, 3): "silent"}
    strategy = IpflStrategy(lam=CFG.lam, eta=CFG.eta, reference=r.theta0)
    strategy.start(grid=FakeGrid(CFG, faults), initial_arrays=initial, num_rounds=3)
    assert any(rnd == 2 and node == 104 and "NaN" in why for rnd, node, why in
               strategy.rejected)
    for t in (1, 2, 3):
        rows = [row for row in strategy.ledger if row["round"] == t]
        assert abs(sum(row["payment"] for row in rows)) < 1e-9
    assert {row["pid"] for row in strategy.ledger if row["round"] == 2} == {0, 1, 2}
    assert {row["pid"] for row in strategy.ledger if row["round"] == 3} == {0, 1, 3}
    # the round-2 outcome is mechanisms.ipfl's on the valid nodes' inputs
    out = strategy.outcomes[2]
    pids, X, N, c, K = strategy.inputs[2]
    assert pids == [0, 1, 2]
    np.testing.assert_array_equal(N, r.market.N[:3])  # the reported types, echoed by pid
    expect = ipfl.clear(ipfl.Market(N=N, c=c, K=K, lam=CFG.lam),
                        ipfl.pairwise_distances(X, CFG.metric, reference=r.theta0))
    np.testing.assert_array_equal(out.adjacency, expect.adjacency)
    np.testing.assert_allclose(out.payments, expect.payments, atol=1e-12)


def test_cpl_strategy_prices_participation_and_unbiased_step():
    cfg = TrainConfig(algorithm="cpl", dataset="digits", clients=4, rounds=2, steps=5,
                      batch=16, lr=0.05, beta=0.5, cpl_budget=5.0)
    r, initial = _initial(cfg)
    strategy = CplStrategy(c=cfg.cpl_c, v={i: float(x) for i, x in enumerate(r.cpl_v)},
                           budget=cfg.cpl_budget, rounds=cfg.rounds)
    grid = FakeGrid(cfg)
    eq = strategy.register(grid)
    assert eq.status in ("optimal", "slack") and len(strategy.q) == 4
    result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=2)
    pid_of = {n: p for p, n in strategy.node_of.items()}
    for m in grid.sent:
        if m.metadata.message_type == "train":  # each node gets its own price and q
            conf = dict(m.content["config"])
            pid = pid_of[m.metadata.dst_node_id]
            assert conf["price"] == strategy.prices[pid] and conf["q"] == strategy.q[pid]
    assert len(set(strategy.prices.values())) == 4
    assert result.arrays is not None
    for row in strategy.participation:  # the clients' own Bernoulli(q) decisions
        for pid in range(4):
            draw = np.random.default_rng([cfg.seed, pid, row["round"] - 1]).random()
            assert (pid in row["participants"]) == (draw < strategy.q[pid])


def test_flat_record_round_trip():
    shapes = [(2, 3), (4,)]
    flat = np.arange(10, dtype=float)
    rec = flat_to_record(flat, shapes)
    from learning.flower.strategies import record_to_flat

    back, got = record_to_flat(rec, shapes)
    np.testing.assert_array_equal(back, flat)
    assert got == shapes
    with pytest.raises(ValueError, match="shapes"):
        record_to_flat(rec, [(3, 2), (4,)])


@pytest.mark.slow
def test_flower_simulation_matches_the_in_process_learner(tmp_path):
    """End to end on the Ray backend: 4 clients, 2 rounds, digits."""
    from flwr.simulation import run_simulation

    cfg = TrainConfig(algorithm="ipfl", dataset="digits", clients=4, rounds=2, steps=10,
                      batch=16, lr=0.05, beta=0.5)
    server, client = make_apps(cfg, out=str(tmp_path))
    run_simulation(server, client, num_supernodes=4,
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": 2}})
    res = json.loads((tmp_path / "flower_result.json").read_text())
    ref = run(cfg)
    last = ref.frame[ref.frame["round"] == cfg.rounds - 1]
    np.testing.assert_allclose(res["acc_personalised"], last.acc_personalised, atol=1e-6)
    got = [row["payment"] for row in res["ledger"] if row["round"] == 1]
    np.testing.assert_allclose(got, ref.frame[ref.frame["round"] == 1].payment, atol=1e-5)
