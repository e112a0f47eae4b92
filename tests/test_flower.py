"""Flower integration: the ServerApp against a fake Grid whose nodes run the real ClientApp
code in-process (real Message/RecordDict replies, no Ray), the nodes' own data and types, the
registry and faults, provenance and its offline re-check, and the simulation end to end."""

import json
import logging
import time
from dataclasses import replace
from uuid import uuid4

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from learning.algorithms import TrainConfig, run  # noqa: E402
from learning.flower.app import (  # noqa: E402
    FlowerConfig,
    _client_evaluate,
    _client_query,
    _client_train,
    _server_main,
    make_apps,
)
from learning.flower.node import NodeConfigError, NodeSpec, node_state  # noqa: E402
from learning.flower.provenance import recheck, slow_rounds  # noqa: E402
from learning.flower.strategies import flat_to_record, record_to_flat  # noqa: E402
from learning.flower.wire import CONFIG, MODEL, REPLY, content, model_from, unpack  # noqa: E402
from mechanisms.errors import MarketInputError  # noqa: E402

CFG = TrainConfig(algorithm="ipfl", dataset="digits", clients=4, rounds=3, steps=10, batch=16,
                  lr=0.05, beta=0.5)
CPL = TrainConfig(algorithm="cpl", dataset="digits", clients=4, rounds=2, steps=5, batch=16,
                  lr=0.05, beta=0.5, cpl_budget=5.0)


@pytest.fixture(autouse=True)
def _server_identity():
    old = (TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id)
    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0
    yield
    TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id = old


HANDLERS = {"query": _client_query, "train": _client_train, "evaluate": _client_evaluate}


class FakeGrid:
    """Nodes 101, 102, ... (partition ids 0, 1, ...) run the real ClientApp code in-process.

    ``faults[(node, round)]`` makes a node "silent", send "nan" parameters, a model one
    parameter "short", a metric that is "text", or raise ("error");
    ``leave[round]`` kills nodes as that round's training starts (after they were sent their
    message) and ``join[round]`` adds ``{node id: node config}`` before that round (a rejoin
    when the partition id is known). ``slow[node] = k``: the node's answer to a registration
    query comes only once the training of k more rounds has been sent (a restarted node still
    loading); ``released`` lists (node, round whose training went out first)."""

    def __init__(self, cfg, faults=None, extra=None, leave=None, join=None, hang=None,
                 slow=None):
        self.cfg, self.faults = cfg, faults or {}
        self.slow, self.held, self.released = slow or {}, [], []
        self.leave, self.join = leave or {}, join or {}
        self.hang, self.hung = hang or {}, set()  # from round r on: listed, never answers
        configs = {100 + p + 1: {"partition-id": p, "num-partitions": cfg.clients}
                   for p in range(cfg.clients)}
        configs.update(extra or {})
        self.contexts = {n: self._context(n, c) for n, c in configs.items()}
        self.sent, self.round, self.replies = [], 0, {}

    @staticmethod
    def _context(node, config):
        return Context(run_id=1, node_id=node, node_config=config, state=RecordDict(),
                       run_config={})

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, timeout=None):
        return list(self.pull_messages(self.push_messages(messages)))

    def push_messages(self, messages):
        ids, messages = [], list(messages)
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = str(uuid4())
            ids.append(msg.metadata.message_id)
            self.sent.append(msg)
            reply = self._answer(msg)
            node = msg.metadata.dst_node_id
            if reply is not None and msg.metadata.message_type == "query" \
                    and node in self.slow:
                self.held.append((self.round + self.slow[node], node, msg.metadata.message_id,
                                  reply))
            elif reply is not None:
                self.replies[msg.metadata.message_id] = reply
        if messages and messages[0].metadata.message_type == "train":
            for n, c in self.join.get(self.round + 1, {}).items():
                self.contexts[n] = self._context(n, c)
            for held in [h for h in self.held if h[0] <= self.round]:
                self.held.remove(held)
                self.released.append((held[1], self.round))
                self.replies[held[2]] = held[3]
        return ids

    def pull_messages(self, ids):  # in the order the messages were pushed
        ids = set(ids)
        return [self.replies.pop(i) for i in list(self.replies) if i in ids]

    def _answer(self, msg):
        node = msg.metadata.dst_node_id
        conf = dict(msg.content["config"]) if "config" in msg.content else {}
        rnd = int(conf.get("server-round", 0))
        if msg.metadata.message_type == "train" and rnd != self.round:
            self.round = rnd
            for n in self.leave.get(rnd, ()):
                self.contexts.pop(n, None)
            self.hung |= set(self.hang.get(rnd, ()))
        if node not in self.contexts or node in self.hung:
            return None  # a node that left or hangs: no reply
        fault = self.faults.get((node, rnd)) if msg.metadata.message_type == "train" else None
        if fault == "silent":
            return None
        if fault == "unavailable":  # what the SuperLink answers for a node it declared dead
            reply = Message(Error(code=5, reason="Error: Node Unavailable"), reply_to=msg)
            reply.metadata.__dict__["_src_node_id"] = 1
            return reply
        try:
            if fault == "error":
                raise RuntimeError("disk full")
            reply = HANDLERS[msg.metadata.message_type](msg, self.contexts[node], self.cfg)
        except Exception as exc:  # what flwr's ClientApp runner does
            return Message(Error(code=0, reason=f"{type(exc)}:<'{exc}'>"), reply_to=msg)
        if fault in ("nan", "short", "text"):  # a malformed upload
            values, data = unpack(reply.content, REPLY)
            model = np.frombuffer(data, dtype="<f4")
            if fault == "nan":
                model = np.full_like(model, np.nan)
            elif fault == "short":
                model = model[:-1]
            else:
                values["acc-val"] = "high"
            reply = Message(RecordDict({REPLY: ConfigRecord({**values,
                                                             MODEL: model.tobytes()})}),
                            reply_to=msg)
        return reply


def _serve(grid, cfg, tmp_path=None, **run_config):
    ctx = Context(run_id=7, node_id=0, node_config={}, state=RecordDict(),
                  run_config={"registration-timeout": 5, "round-timeout": 5, **run_config})
    return _server_main(grid, ctx, cfg, str(tmp_path) if tmp_path else "")


def test_ipfl_equals_the_in_process_learner(tmp_path):
    res = _serve(FakeGrid(CFG), CFG, tmp_path)
    ref = run(CFG)
    for t in range(1, CFG.rounds + 1):  # Flower round t clears in-process round t - 1's uploads
        got = sorted((row["pid"], row["payment"]) for row in res["ledger"] if row["round"] == t)
        want = ref.frame[ref.frame["round"] == t - 1].payment.to_numpy()
        np.testing.assert_allclose([p for _, p in got], want, rtol=1e-5, atol=1e-6)
    # the last training round's models are the learner's final models: same accuracies
    last = ref.frame[ref.frame["round"] == CFG.rounds - 1]
    np.testing.assert_allclose(res["acc_personalised"], last.acc_personalised, atol=1e-6)
    np.testing.assert_allclose(res["acc_own"], last.acc_own, atol=1e-6)
    assert res["rejected"] == []


def test_the_server_knows_only_reports():
    """A node's type comes from its own node config; N is counted from its data."""
    extra = {104: {"partition-id": 3, "num-partitions": 4, "c": 0.25, "K": 1234.0, "N": 99.0}}
    grid = FakeGrid(CFG, extra=extra)  # pid 3's node is configured
    from learning.flower.strategies import Registry

    reg = Registry(4)
    reg.refresh(grid, 0)
    rep = reg.members[3].report
    assert (rep["N"], rep["c"], rep["K"]) == (99.0, 0.25, 1234.0)  # a liar's reported N
    honest = node_state(NodeSpec.from_config({"partition-id": 0}, 4), CFG)
    assert reg.members[0].report["N"] == honest.N_true == len(honest.y_train)
    assert node_state(NodeSpec.from_config(extra[104], 4), CFG).N_true != 99


def test_each_node_gets_its_own_record_and_centre():
    grid = FakeGrid(CFG)
    _serve(grid, CFG)
    round2 = [m for m in grid.sent if m.metadata.message_type == "train"
              and dict(m.content["config"])["server-round"] == 2]
    assert len(round2) == 4
    contents = [m.content for m in round2]
    assert len({id(c) for c in contents}) == 4  # a fresh RecordDict per node
    firsts = [model_from(unpack(c, CONFIG)[1]) for c in contents]
    assert not np.allclose(firsts[0], firsts[1])  # different prox-centres
    bills = [dict(c["config"])["bill"] for c in contents]
    assert abs(sum(bills)) < 1e-9 and any(abs(b) > 0 for b in bills)


def test_faults_are_logged_with_the_clients_own_id_and_the_ledger_balances(tmp_path, caplog):
    faults = {(104, 2): "nan", (103, 3): "silent", (102, 3): "error"}
    with caplog.at_level(logging.WARNING, logger="flwr"):
        res = _serve(FakeGrid(CFG, faults), CFG, tmp_path)
    why = {(r["round"], r["pid"]): r["reason"] for r in res["rejected"]}
    assert "NaN" in why[(2, 3)] and "silent" in why[(3, 2)] and "disk full" in why[(3, 1)]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for rnd, pid in ((2, 3), (3, 2), (3, 1)):
        assert any(f"round {rnd}: client {pid} (node {101 + pid}) rejected" in w
                   for w in warned), warned
    for t in (1, 2, 3):
        rows = [row for row in res["ledger"] if row["round"] == t]
        assert abs(sum(row["payment"] for row in rows)) < 1e-9
    assert {row["pid"] for row in res["ledger"] if row["round"] == 2} == {0, 1, 2}
    assert {row["pid"] for row in res["ledger"] if row["round"] == 3} == {0, 3}
    assert recheck(res["run_dir"])["ok"].all()


def test_duplicate_and_foreign_partition_ids_are_refused(caplog):
    extra = {201: {"partition-id": 1, "num-partitions": 4},  # a second node claiming pid 1
             202: {"partition-id": 9, "num-partitions": 4}}  # outside the federation
    grid = FakeGrid(CFG, extra=extra)
    with caplog.at_level(logging.WARNING, logger="flwr"):
        res = _serve(grid, CFG)
    why = {r["node"]: r["reason"] for r in res["rejected"]}
    assert "partition-id 1 is already held by node 102" in why[201]
    assert "partition-id: is 9; must lie in [0, 4)" in why[202]
    assert res["members"] == {"0": 101, "1": 102, "2": 103, "3": 104}
    # refused nodes are never contacted again (only their one registration query)
    assert sum(m.metadata.dst_node_id == 201 for m in grid.sent) == 1


def test_a_node_that_rejoins_takes_its_place_again():
    grid = FakeGrid(CFG, leave={2: [103]},
                    join={3: {203: {"partition-id": 2, "num-partitions": 4}}})
    res = _serve(grid, CFG)
    assert {row["pid"] for row in res["ledger"] if row["round"] == 2} == {0, 1, 3}
    assert {row["pid"] for row in res["ledger"] if row["round"] == 3} == {0, 1, 2, 3}
    assert res["members"]["2"] == 203
    assert [(r["round"], r["pid"]) for r in res["rejected"]] == [(2, 2)]  # killed mid-round


def test_an_unavailable_node_is_named_by_its_own_id_not_the_superlinks(tmp_path, caplog):
    """flwr answers for a node it declared dead from node 1 (the SuperLink): the reply is
    matched to the message it answers, the WARNING names the client and its node, and the
    client is not sent work again until it answers (here: at once, so it trades in round 3)."""
    with caplog.at_level(logging.WARNING, logger="flwr"):
        res = _serve(FakeGrid(CFG, {(103, 2): "unavailable"}), CFG, tmp_path)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["round 2: client 2 (node 103) rejected: NODE_UNAVAILABLE at training: "
                      "flwr reports that the node stopped sending heartbeats; not waited for "
                      "again until it answers"], warned
    assert {row["pid"] for row in res["ledger"] if row["round"] == 2} == {0, 1, 3}
    assert {row["pid"] for row in res["ledger"] if row["round"] == 3} == {0, 1, 2, 3}
    assert recheck(res["run_dir"])["ok"].all()


def test_unavailable_at_cpl_pricing_and_at_evaluation_names_the_client(tmp_path, caplog):
    """Replies are matched to the messages they answer at CPL's gradient-norm query and at the
    final evaluation too: flwr's NODE_UNAVAILABLE replies (sent from node 1, the SuperLink,
    where matching by sender would name node 1) name the client and its own node."""
    grid = FakeGrid(CPL)
    _without_G(grid)  # every node is asked for its gradient norm: pricing sends messages
    answer, from_link = grid._answer, []

    def unavailable(msg):
        conf = dict(msg.content["config"]) if "config" in msg.content else {}
        node, kind = msg.metadata.dst_node_id, msg.metadata.message_type
        if (node, kind, conf.get("ask")) in ((103, "query", "grad-norm"),
                                             (104, "evaluate", None)):
            reply = Message(Error(code=5, reason="Error: Node Unavailable"), reply_to=msg)
            reply.metadata.__dict__["_src_node_id"] = 1
            from_link.append(reply.metadata.src_node_id)
            return reply
        return answer(msg)

    grid._answer = unavailable
    with caplog.at_level(logging.WARNING, logger="flwr"):
        res = _serve(grid, CPL, tmp_path)
    assert from_link == [1, 1]  # both error replies came from the SuperLink
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    lost = "flwr reports that the node stopped sending heartbeats; not waited for again " \
           "until it answers"
    assert warned == [f"round 0: client 2 (node 103) rejected: NODE_UNAVAILABLE at pricing: "
                      f"{lost}",
                      f"round {CPL.rounds + 1}: client 3 (node 104) rejected: "
                      f"NODE_UNAVAILABLE at evaluation: {lost}"], warned
    assert sorted(res["q"]) == ["0", "1", "3"] and res["pids"] == [0, 1]


def test_replies_are_matched_to_the_messages_they_answer_not_to_their_sender(caplog):
    """Known-bad variant of the matching: a reply whose sender is a member but that answers no
    message of this round is a stray, not that member's reply."""
    from learning.flower.strategies import Registry

    reg = Registry(4)
    grid = FakeGrid(CFG)
    reg.refresh(grid, 0)
    sent = {p: Message(RecordDict({}), dst_node_id=101 + p, message_type="query")
            for p in range(2)}
    list(grid.push_messages(list(sent.values())))
    stray = Message(RecordDict({}), dst_node_id=101, message_type="query")
    list(grid.push_messages([stray]))
    from_node_101 = grid._answer(stray)  # a real reply from node 101, to another message
    with caplog.at_level(logging.WARNING, logger="flwr"):
        got = reg.collect(1, sent, [from_node_101], "training", 5.0)
    assert got == {}  # neither client 0 nor client 1 answered
    why = [r["reason"] for r in reg.rejected]
    assert why[0] == "reply to a message it was not sent" and len(why) == 3
    assert sorted(reg.suspect) == [0, 1]


@pytest.mark.parametrize("cfg", [CFG, replace(CPL, rounds=3)], ids=["ipfl", "cpl"])
def test_a_dead_node_still_listed_is_replaced_by_its_restart_in_the_next_round(tmp_path, cfg,
                                                                                caplog):
    """Node 103 (client 2) hangs from round 2 on but flwr still lists it (its heartbeat window);
    its restart, node 203, connects before round 2 and is refused while 103 holds the id. After
    103 is silent in round 2, the refusal is re-evaluated: 203 takes client 2's place and
    trades in round 3; 103 is not sent work again."""
    grid = FakeGrid(cfg, hang={2: [103]},
                    join={2: {203: {"partition-id": 2, "num-partitions": 4}}})
    with caplog.at_level(logging.INFO, logger="flwr"):
        res = _serve(grid, cfg, tmp_path, **{"save-uploads": True})
    why = [(r["round"], r["pid"], r["node"], r["reason"].split(":")[0]) for r in res["rejected"]]
    assert why == [(2, 2, 203, "partition-id 2 is already held by node 103"), (2, 2, 103, "silent")]
    assert res["members"]["2"] == 203
    trains = [(dict(m.content["config"])["server-round"], m.metadata.dst_node_id)
              for m in grid.sent if m.metadata.message_type == "train"]
    assert (2, 103) in trains and (3, 203) in trains
    assert not any(n == 103 for r, n in trains if r == 3)
    assert not any(m.metadata.dst_node_id == 103 and m.metadata.message_type == "evaluate"
                   for m in grid.sent)
    assert "client 2 rejoined (node 203, was node 103: silent" in caplog.text
    if cfg.algorithm == "ipfl":
        assert {row["pid"] for row in res["ledger"] if row["round"] == 3} == {0, 1, 2, 3}
    else:  # it is asked again (its own Bernoulli(q) draw decides whether it uploads)
        q = float(res["q"]["2"])
        draw = np.random.default_rng([cfg.seed, 2, 2]).random()
        assert (2 in res["participation"][2]["participants"]) == (draw < q)
    assert res["pids"] == [0, 1, 2, 3]
    assert recheck(res["run_dir"])["ok"].all()


@pytest.mark.parametrize("cfg", [replace(CFG, rounds=5), replace(CPL, rounds=5)],
                         ids=["ipfl", "cpl"])
def test_a_newcomer_registers_without_holding_a_round_up(tmp_path, cfg):
    """Client 2's node (103) leaves in round 2; its restart, node 203, connects before round 3
    but answers its registration query only after two more rounds' training went out (a
    restarted node loading its data and model). Rounds 3 and 4 are not held up: they go out
    and end with the other three clients while that query is unanswered, and no registration
    timeout passes (none is logged; the known-bad variant, a round that waits for its
    newcomers, logs one in round 3); node 203 is served from round 5, the first round that
    starts after its answer came, in client 2's place."""
    grid = FakeGrid(cfg, leave={2: [103]}, slow={203: 2},
                    join={3: {203: {"partition-id": 2, "num-partitions": 4}}})
    res = _serve(grid, cfg, tmp_path)
    kinds = [(m.metadata.message_type, m.metadata.dst_node_id,
              dict(m.content["config"]).get("server-round") if "config" in m.content else None)
             for m in grid.sent]
    asked = kinds.index(("query", 203, 3))  # asked as round 3 starts, before its training
    assert asked < kinds.index(("train", 101, 3))
    assert grid.released == [(203, 4)]  # answered once round 4's training had gone out
    trains = {r: sorted(n for k, n, rr in kinds if k == "train" and rr == r)
              for r in range(1, 6)}
    assert trains[3] == trains[4] == [101, 102, 104]  # rounds 3, 4: without it, not held up
    assert trains[5] == [101, 102, 104, 203]  # served in the next round that starts
    assert not any("registration" in r["reason"] for r in res["rejected"]), res["rejected"]
    assert [(r["round"], r["pid"]) for r in res["rejected"]] == [(2, 2)]  # 103 left
    assert res["members"]["2"] == 203 and res["pids"] == [0, 1, 2, 3]
    if cfg.algorithm == "ipfl":
        assert [sorted({row["pid"] for row in res["ledger"] if row["round"] == t})
                for t in (3, 4, 5)] == [[0, 1, 3], [0, 1, 3], [0, 1, 2, 3]]
    assert recheck(res["run_dir"])["ok"].all()
    # the ServerApp's time stamps: client 2 rejoined as round 5 began, and no round after
    # round 2 (which waited its 5 s timeout for 103) took much longer than rounds 1, 3 and 4
    times = res["round_times"]
    assert [e["joined"] for e in times] == [[], [], [], [], [2]]
    assert slow_rounds(times, [1, 3, 4], FAKE_MARGIN, [3, 4, 5]) == {}, times


# how much longer than the median undisturbed round a round on the fake grid may take (s):
# measured, its rounds took 0.3-0.6 s (load average 4), the timeouts of _serve are 5 s
FAKE_MARGIN = 2.5


def test_a_round_that_waits_for_its_newcomer_is_found_slow(tmp_path, monkeypatch):
    """Known-bad variant of the test above: registration that blocks the round (every
    refresh waits up to the registration timeout for the nodes it asks, as before issue 22).
    Round 3 then waits 5 s for node 203's answer, and the same check finds it (measured:
    5.45 s against 0.30-0.57 s)."""
    from learning.flower.strategies import Registry

    refresh = Registry.refresh

    def blocking(self, grid, server_round, enough=None, timeout=None):
        return refresh(self, grid, server_round, enough, None)  # the registry's timeout

    monkeypatch.setattr(Registry, "refresh", blocking)
    cfg = replace(CFG, rounds=3)
    grid = FakeGrid(cfg, leave={2: [103]}, slow={203: 2},
                    join={3: {203: {"partition-id": 2, "num-partitions": 4}}})
    res = _serve(grid, cfg, tmp_path)
    assert ["registration" in r["reason"] for r in res["rejected"]] == [False, True]
    slow = slow_rounds(res["round_times"], [1], FAKE_MARGIN, [3])
    assert list(slow) == [3] and slow[3] >= 5.0, res["round_times"]


# round durations (s) of a real loopback deployment (tests/test_flower_deploy.py's killed node,
# load average 4-5): round 2 waited the 28 s round timeout for the killed node; its restart
# rejoined as round 5 began
MEASURED = [3.60, 28.12, 3.54, 3.63, 3.55, 3.72, 3.71, 3.88]


def test_slow_rounds_finds_a_round_held_up_by_a_registration():
    times = [{"round": t, "seconds": s} for t, s in enumerate(MEASURED, 1)]
    quiet, after_kill = [1, 3, 4, 6, 7, 8], [3, 4, 5, 6, 7, 8]
    assert slow_rounds(times, quiet, 10.0, after_kill) == {}
    # known-bad: the rejoin's round waited for the registration until the round timeout
    # (28 s) or the registration timeout (240 s) of that deployment
    for held in (28.0, 240.0):
        bad = [dict(e, seconds=e["seconds"] + held) if e["round"] == 5 else e for e in times]
        assert slow_rounds(bad, quiet, 10.0, after_kill) == {5: 3.55 + held}
    assert slow_rounds(times, quiet, 10.0) == {2: 28.12}  # default: every other round
    assert slow_rounds(times, quiet, 25.0) == {}
    # a round without a finite duration, or missing, counts as slow
    unfinished = [dict(e, seconds=None) if e["round"] == 4 else e for e in times]
    assert list(slow_rounds(unfinished, [1, 3], 10.0, [4])) == [4]
    assert list(slow_rounds(times[:4], [1, 3], 10.0, [4, 9])) == [9]
    for args, field in [((times, [], 10.0), "baseline"), ((times, [9], 10.0), "baseline"),
                        ((unfinished, [4], 10.0), "baseline"),
                        ((times, [1], float("nan")), "margin"), ((times, [1], -1.0), "margin"),
                        (([{"seconds": 1.0}], [1], 1.0), "round_times")]:
        with pytest.raises(MarketInputError) as err:
            slow_rounds(*args)
        assert err.value.field == field


def test_cpl_prices_participation_rejoin_and_recheck(tmp_path, caplog):
    cfg = replace(CPL, rounds=3)
    grid = FakeGrid(cfg, leave={2: [102]},
                    join={3: {202: {"partition-id": 1, "num-partitions": 4},
                              203: {"partition-id": 3, "num-partitions": 4}}})
    with caplog.at_level(logging.WARNING, logger="flwr"):
        res = _serve(grid, cfg, tmp_path, **{"save-uploads": True})
    q = {int(p): v for p, v in res["q"].items()}
    prices = {int(p): v for p, v in res["prices"].items()}
    assert len(set(prices.values())) == 4
    for m in grid.sent:
        if m.metadata.message_type == "train":  # each node gets its own price and q
            conf = dict(m.content["config"])
            assert conf["q"] in q.values()
    for row in res["participation"]:  # the clients' own Bernoulli(q) decisions
        for pid in range(4):
            draw = np.random.default_rng([CPL.seed, pid, row["round"] - 1]).random()
            assert (pid in row["participants"]) == (draw < q[pid])
    assert res["members"]["1"] == 202  # rejoined and asked again in round 3
    assert any(m.metadata.dst_node_id == 202 and m.metadata.message_type == "train"
               for m in grid.sent)
    # pid 3 is still live on node 104: the newcomer claiming it is refused and logged
    assert any(r["node"] == 203 and "already held" in r["reason"] for r in res["rejected"])
    checks = recheck(res["run_dir"])
    assert checks["ok"].all() and {"cpl pricing", "cpl aggregate"} <= set(checks["check"])


def _asks(grid) -> list:
    return [dict(m.content["config"]).get("ask", "type") if "config" in m.content else "type"
            for m in grid.sent if m.metadata.message_type == "query"]


def test_cpl_gradient_norms_come_with_the_registration(tmp_path):
    """A CPL node reports its gradient norm at the run's initial model when it registers: no
    grad-norm query is sent. A node whose report has none (the known-bad variant, as an
    older app's) is asked as before, and gets the same G: the node builds the initial model
    exactly as the server does."""
    grid = FakeGrid(CPL)
    _serve(grid, CPL, tmp_path / "folded")
    assert _asks(grid) and "grad-norm" not in _asks(grid)
    folded = json.loads((tmp_path / "folded" / "run-7" / "pricing.json").read_text())
    assert folded["G_asked"] == []

    old = FakeGrid(CPL)
    _without_G(old)
    _serve(old, CPL, tmp_path / "asked")
    assert _asks(old).count("grad-norm") == 4
    asked = json.loads((tmp_path / "asked" / "run-7" / "pricing.json").read_text())
    assert asked["G_asked"] == [0, 1, 2, 3]
    np.testing.assert_allclose(asked["G"], folded["G"], rtol=1e-12)
    assert asked["prices"] == folded["prices"] and asked["q"] == folded["q"]


def test_ipfl_final_evaluation_comes_with_the_last_rounds_uploads():
    """iPFL: a node's final model is its last upload, so the last round's train message asks
    the node to evaluate it too and no evaluation message is sent. Replies without that
    evaluation (the known-bad variant, as an older app's) get the evaluation round as before,
    with the same numbers."""
    grid = FakeGrid(CFG)
    res = _serve(grid, CFG)
    assert "evaluate" not in {m.metadata.message_type for m in grid.sent}
    last = [m for m in grid.sent if m.metadata.message_type == "train"
            and dict(m.content["config"])["server-round"] == CFG.rounds]
    assert len(last) == 4 and all(dict(m.content["config"])["evaluate"] == 1 for m in last)

    old = FakeGrid(CFG)
    answer = old._answer
    folded = ("acc_own", "loss", "acc_personalised")

    def without_evaluation(msg):
        reply = answer(msg)
        if reply is not None and msg.metadata.message_type == "train" and \
                not reply.has_error():
            metrics, model = unpack(reply.content, REPLY)
            metrics = {k: v for k, v in metrics.items() if k not in folded}
            reply = Message(RecordDict({REPLY: ConfigRecord({**metrics, MODEL: model})}),
                            reply_to=msg)
        return reply

    old._answer = without_evaluation
    ref = _serve(old, CFG)
    assert sum(m.metadata.message_type == "evaluate" for m in old.sent) == 4
    assert res["pids"] == ref["pids"] == [0, 1, 2, 3]
    for key in folded:
        np.testing.assert_array_equal(res[key],
                                      ref[key])


def test_recheck_catches_a_tampered_round(tmp_path):
    res = _serve(FakeGrid(CFG), CFG, tmp_path, **{"save-uploads": True})
    checks = recheck(res["run_dir"])
    assert checks["ok"].all()
    assert {"ipfl clearing", "payments sum to zero", "upload digests",
            "distances from uploads"} <= set(checks["check"])
    path = next((tmp_path / "run-7" / "rounds").glob("round-0002.json"))
    rec = json.loads(path.read_text())
    rec["outcome"]["payments"][0] += 1e-3
    rec["distances"][0][1] *= 1.01
    path.write_text(json.dumps(rec))
    bad = recheck(res["run_dir"], 2).set_index("check")
    assert not bad["ok"]["ipfl clearing"] and not bad["ok"]["payments sum to zero"]
    assert not bad["ok"]["distances from uploads"]
    # the tampered D is no longer symmetric: the clearing refuses it, and the check says so
    assert "D: is not symmetric: D[0, 1]" in bad["detail"]["ipfl clearing"]
    rec["distances"][0][1] = rec["distances"][1][0]  # symmetric again: cleared and compared
    path.write_text(json.dumps(rec))
    bad = recheck(res["run_dir"], 2).set_index("check")
    assert not bad["ok"]["ipfl clearing"]  # the payments still differ
    assert "trades among" in bad["detail"]["ipfl clearing"]


def test_node_with_its_own_data_file(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "node.npz"
    np.savez(path, x_train=rng.random((50, 1, 8, 8)), y_train=rng.integers(0, 10, 50))
    spec = NodeSpec.from_config({"partition-id": 2, "data-path": str(path), "c": 0.5,
                                 "K": 1e4}, 4)
    state = node_state(spec, CFG)
    assert state.N_true == 40 and len(state.y_own_test) == 5  # 80 / 10 / 10
    assert state.report()["N"] == 40.0 and state.report()["c"] == 0.5
    assert len(state.y_val) == 5 and "true_c" not in state.report()  # truthful: no truth sent
    liar = node_state(NodeSpec.from_config({"partition-id": 2, "data-path": str(path),
                                            "c": 0.5, "true-c": 2.0, "K": 1e4,
                                            "true-K": 3e4, "N": 400}, 4), CFG)
    assert liar.truth() == {"true_N": 40.0, "true_c": 2.0, "true_K": 3e4}
    assert {k: liar.report()[k] for k in ("N", "c", "K")} == {"N": 400.0, "c": 0.5, "K": 1e4}
    with pytest.raises(NodeConfigError, match="c: is missing"):
        node_state(NodeSpec.from_config({"partition-id": 2, "data-path": str(path)}, 4), CFG)
    with pytest.raises(NodeConfigError, match="data-path"):
        node_state(NodeSpec.from_config({"partition-id": 2, "data-path": "/nope.npz",
                                         "c": 1, "K": 1}, 4), CFG)


@pytest.mark.parametrize("config, field", [
    pytest.param({}, "partition-id", id="no-pid"),
    pytest.param({"partition-id": 4}, "partition-id", id="pid-too-large"),
    pytest.param({"partition-id": 0, "num-partitions": 3}, "num-partitions", id="m-differs"),
    pytest.param({"partition-id": 0, "c": -1.0}, "c", id="negative-c"),
    pytest.param({"partition-id": 0, "N": float("nan")}, "N", id="nan-N"),
    pytest.param({"partition-id": 0, "true-K": -1.0}, "true-K", id="negative-true-K"),
    pytest.param({"partition-id": 0, "partitioner": "hf"}, "partitioner", id="partitioner"),
    pytest.param({"partition-id": 0, "parition-id": 1}, "parition-id", id="unknown-key"),
])
def test_bad_node_configs_name_the_key(config, field):
    with pytest.raises(NodeConfigError) as info:
        NodeSpec.from_config(config, 4)
    assert info.value.field == field


def test_bad_flower_config():
    with pytest.raises(MarketInputError, match="round-timeout"):
        FlowerConfig.from_run_config({"round-timeout": 0})
    with pytest.raises(MarketInputError, match="save-uploads"):
        FlowerConfig.from_run_config({"save-uploads": "maybe"})
    assert FlowerConfig.from_run_config({"save-uploads": "false"}).save_uploads is False


def test_flower_datasets_partitions_offline():
    pytest.importorskip("flwr_datasets")
    from learning.flower.datasets import flwr_partition

    y = np.random.default_rng(0).integers(0, 10, 600)
    for kind in ("iid", "niid", "skew"):
        cfg = TrainConfig(clients=4, partition=kind, beta=0.5, skew_classes=2)
        parts = [flwr_partition(cfg, y, p) for p in range(4)]
        joined = np.concatenate(parts)
        assert len(np.unique(joined)) == len(joined)  # disjoint
        if kind == "skew":
            assert all(len(np.unique(y[p])) <= 2 for p in parts)
    with pytest.raises(NodeConfigError, match="no 'cluster' partition"):
        flwr_partition(TrainConfig(clients=4, partition="cluster"), y, 0)
    spec = NodeSpec.from_config({"partition-id": 1, "partitioner": "flwr-datasets"}, 4)
    state = node_state(spec, CFG)
    assert state.N_true > 0 and state.x_test is not None


def _recorded(grid) -> list:
    """The replies ``grid``'s nodes give, appended as they are made."""
    replies, answer = [], grid._answer
    grid._answer = lambda msg: replies.append(answer(msg)) or replies[-1]
    return replies


def _without_G(grid) -> None:
    """``grid``'s nodes register without a gradient norm (as an older app's did)."""
    answer = grid._answer

    def strip(msg):
        reply = answer(msg)
        ask = dict(msg.content["config"]).get("ask", "type") if "config" in msg.content \
            else "type"
        if reply is not None and msg.metadata.message_type == "query" and ask == "type":
            metrics = {k: v for k, v in unpack(reply.content, REPLY)[0].items() if k != "G"}
            reply = Message(content(REPLY, metrics), reply_to=msg)
        return reply

    grid._answer = strip


def test_every_message_is_three_objects_with_the_model_as_bytes_in_its_one_record():
    """Every message either way is ONE ConfigRecord, 3 objects (message, record dict,
    record; flwr moves each with its own request per hop): iPFL's registration and training
    (each node its own centre; the last round's replies carry the final evaluation) and CPL's
    registration, gradient-norm query (a node that reported none), training and final
    evaluation. Where a model travels it is the federation's p parameters as float32 bytes.
    The known-bad variants hold more: the former layout (the model as an ArrayRecord of one
    flat array beside the config) 6, one array per layer 12."""
    from flwr.app import MessageType
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    from learning.flower.adapter import initial_model

    _, params, theta0 = initial_model(CFG, (64,), 10)
    p = theta0.size
    ipfl = FakeGrid(CFG)
    cpl = FakeGrid(CPL)
    _without_G(cpl)
    replies = [_recorded(ipfl), _recorded(cpl)]
    _serve(ipfl, CFG)
    _serve(cpl, CPL)
    sent = ipfl.sent + cpl.sent
    back = [m for got in replies for m in got if m is not None]
    assert {m.metadata.message_type for m in sent} == {"query", "train", "evaluate"}
    assert "grad-norm" in _asks(cpl) and back and not any(m.has_error() for m in back)
    models = 0
    for m, key in [(m, CONFIG) for m in sent] + [(m, REPLY) for m in back]:
        assert len(get_all_nested_objects(m)) == 3, m.content
        assert list(m.content.keys()) == [key]
        data = unpack(m.content, key)[1]
        if data is not None:
            models += 1
            assert len(data) == 4 * p and model_from(data, p).shape == (p,)
    # every train and evaluate message, the grad-norm queries and every training upload
    assert models == sum(m.metadata.message_type != "query" for m in sent) + \
        _asks(cpl).count("grad-norm") + sum(1 for m in back if "acc-val" in
                                            unpack(m.content, REPLY)[0])
    flat = Message(RecordDict({"arrays": ArrayRecord([theta0.astype(np.float32)]),
                               "config": ConfigRecord({})}),
                   dst_node_id=101, message_type=MessageType.TRAIN)
    assert len(get_all_nested_objects(flat)) == 6
    layers = Message(RecordDict({"arrays": ArrayRecord([v[0].detach().numpy()
                                                        for v in params.values()]),
                                 "config": ConfigRecord({})}),
                     dst_node_id=101, message_type=MessageType.TRAIN)
    assert len(get_all_nested_objects(layers)) == 12


def test_a_malformed_upload_is_refused_naming_what_is_wrong(tmp_path, caplog):
    """A model one parameter short and a metric that is not a number are refused with the
    reason, the client's own id, and the round clears among the others."""
    faults = {(104, 2): "short", (103, 2): "text"}
    with caplog.at_level(logging.WARNING, logger="flwr"):
        res = _serve(FakeGrid(CFG, faults), CFG, tmp_path)
    why = {(r["round"], r["pid"]): r["reason"] for r in res["rejected"]}
    assert "parameters received; the federation's model has" in why[(2, 3)], why
    assert "invalid reply" in why[(2, 2)] and "str" in why[(2, 2)], why
    assert {row["pid"] for row in res["ledger"] if row["round"] == 2} == {0, 1}
    assert {row["pid"] for row in res["ledger"] if row["round"] == 3} == {0, 1, 2, 3}
    assert recheck(res["run_dir"])["ok"].all()


def test_the_wire_format_checks_what_arrives():
    flat = np.array([0.5, -1.0, 3.25])
    np.testing.assert_array_equal(model_from(content(CONFIG, {"a": 1}, model=flat)
                                             [CONFIG][MODEL], 3), flat)
    for bad, match in ((b"\0" * 5, "not whole float32"), ("abc", "not bytes"),
                       (np.array([np.nan], "<f4").tobytes(), "NaN"),
                       (np.zeros(2, "<f4").tobytes(), "2 parameters received")):
        with pytest.raises(ValueError, match=match):
            model_from(bad, 3 if match.startswith("2") else None)
    with pytest.raises(ValueError, match="the model's key"):
        content(CONFIG, {MODEL: 1})
    assert unpack(RecordDict({}), REPLY) == ({}, None)


class _SlowSuperLink:
    """The Runtime API of a SuperLink that hands out a reply whose objects are still being
    uploaded (as flwr 1.42's does): each object is unavailable at its first request."""

    def __init__(self, reply):
        from flwr.app.message import remove_content_from_message
        from flwr.common.serde import message_to_proto
        from flwr.supercore.inflatable.inflatable_object import (
            get_all_nested_objects,
            get_object_tree,
        )

        reply.metadata.__dict__["_message_id"] = reply.object_id
        self.objects = {k: o.deflate() for k, o in get_all_nested_objects(reply).items()}
        self.tree, self.asked, self.confirmed = get_object_tree(reply), [], []
        self.proto = message_to_proto(remove_content_from_message(reply))

    def PullMessages(self, request):  # flwr's method names
        from flwr.proto.runtime_pb2 import PullAppMessagesResponse

        return PullAppMessagesResponse(messages_list=[self.proto],
                                       message_object_trees=[self.tree])

    def PullObject(self, request):
        from flwr.proto.message_pb2 import PullObjectResponse

        first = request.object_id not in self.asked
        self.asked.append(request.object_id)
        return PullObjectResponse(object_found=True, object_available=not first,
                                  object_content=b"" if first else
                                  self.objects[request.object_id])

    def ConfirmMessageReceived(self, request):
        self.confirmed.append(request.message_object_id)


def _pull_a_reply_still_uploading(fast: bool) -> float:
    """Seconds the ServerApp's grid (ours when ``fast``, else flwr 1.42's HttpGrid) takes to
    pull a reply whose objects are each unavailable at their first request; the reply is the
    one sent, its receipt confirmed, every object asked for twice."""
    from flwr.app import MetricRecord
    from flwr.supercore.run import Run
    from flwr.superlink.grid.http_grid import HttpGrid

    from learning.flower.strategies import PollingGrid

    sent = Message(RecordDict({}), dst_node_id=101, message_type="train")
    sent.metadata.__dict__["_message_id"] = sent.object_id
    reply = Message(RecordDict({"metrics": MetricRecord({"pid": 3, "acc": 0.5})}),
                    reply_to=sent)
    link = _SlowSuperLink(reply)
    grid = HttpGrid(token="t")
    grid._client = link  # flwr's own connection, replaced by the fake SuperLink
    grid.set_run(Run.create_empty(7))
    polling = PollingGrid(grid)
    assert polling.http  # flwr 1.42's deployment Grid is recognised
    t0 = time.perf_counter()
    got = list((polling if fast else grid).pull_messages([sent.metadata.message_id]))
    took = time.perf_counter() - t0
    assert [dict(m.content["metrics"]) for m in got] == [{"pid": 3, "acc": 0.5}]
    assert got[0].metadata.reply_to_message_id == sent.metadata.message_id
    assert link.confirmed == [reply.metadata.message_id]
    assert len(link.asked) == 2 * len(link.objects)  # every object asked for twice
    return took


@pytest.mark.serial  # timed against a baseline measured beside it
def test_a_reply_still_uploading_is_asked_for_again_within_a_fraction_of_a_second():
    """The SuperLink hands a reply out before its objects have all arrived; the ServerApp's
    grid asks again for a missing object after 0.02 s (doubling up to 0.2 s), not after flwr's
    1 s, 2 s, 4 s. Side by side in this test, so that load slows both: flwr's own pull (the
    known-bad variant, the baseline) takes at least 0.8 s here (1 s less the 20 % jitter: its
    sleeps, which load cannot shorten), ours, best of 3, less than half of it."""
    flwr = _pull_a_reply_still_uploading(fast=False)
    ours = min(_pull_a_reply_still_uploading(fast=True) for _ in range(3))
    assert flwr >= 0.75, flwr
    assert ours < flwr / 2, (ours, flwr)


def test_flat_record_round_trip():
    shapes = [(2, 3), (4,)]
    flat = np.arange(10, dtype=float)
    back, got = record_to_flat(flat_to_record(flat, shapes), shapes)
    np.testing.assert_array_equal(back, flat)
    assert got == shapes
    with pytest.raises(ValueError, match="shapes"):
        record_to_flat(flat_to_record(flat, shapes), [(3, 2), (4,)])


@pytest.mark.serial
@pytest.mark.slow
def test_flower_simulation_matches_the_in_process_learner(tmp_path, monkeypatch):
    """End to end on the Ray backend: 4 clients, 2 rounds, digits."""
    from flwr.simulation import run_simulation

    # Ray starts its workers 15 niceness steps below this process (its worker_niceness): on
    # a loaded host they waited behind every other job (benchmarks/bench_flower.py saw 2 s
    # of CPU in 3 minutes at load 10); at this process's priority they take their share
    monkeypatch.setenv("RAY_worker_niceness", "0")

    cfg = TrainConfig(algorithm="ipfl", dataset="digits", clients=4, rounds=2, steps=10,
                      batch=16, lr=0.05, beta=0.5)
    got = []
    server, client = make_apps(cfg, out=str(tmp_path), on_result=got.append)
    run_simulation(server, client, num_supernodes=4,
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": 2}})
    res = got[0]
    ref = run(cfg)
    last = ref.frame[ref.frame["round"] == cfg.rounds - 1]
    np.testing.assert_allclose(res["acc_personalised"], last.acc_personalised, atol=1e-6)
    paid = [row["payment"] for row in res["ledger"] if row["round"] == 1]
    # Flower round 1 clears the first uploads: in-process round 0
    np.testing.assert_allclose(paid, ref.frame[ref.frame["round"] == 0].payment, atol=1e-5)
    assert recheck(res["run_dir"])["ok"].all()


def test_fedmarket_recheck_command(tmp_path, capsys):
    from sims.cli import main

    res = _serve(FakeGrid(CFG), CFG, tmp_path)
    assert main(["recheck", res["run_dir"], "--csv", str(tmp_path / "c.csv")]) == 0
    assert "checks passed" in capsys.readouterr().out
    path = tmp_path / "run-7" / "rounds" / "round-0001.json"
    rec = json.loads(path.read_text())
    rec["outcome"]["adjacency"][0][1] = 1 - rec["outcome"]["adjacency"][0][1]
    path.write_text(json.dumps(rec))
    assert main(["recheck", res["run_dir"], "--round", "1"]) == 1
    assert main(["recheck", str(tmp_path)]) == 2
    assert "not a Flower run folder" in capsys.readouterr().err


def test_too_few_nodes_fail_loudly_instead_of_trading_among_fewer():
    grid = FakeGrid(CFG)
    for n in (103, 104):
        del grid.contexts[n]
    with pytest.raises(RuntimeError, match=r"only 2 of the 4 clients .*num-supernodes=4"):
        _serve(grid, CFG, **{"registration-timeout": 0.1})
    res = _serve(grid, CFG, **{"min-nodes": 2})  # explicitly fewer: trades among two
    assert {row["pid"] for row in res["ledger"]} == {0, 1}


def test_an_error_reason_is_the_clientapps_message_in_one_line():
    from learning.flower.strategies import short_reason

    ray = ("<class 'ray.exceptions.RayTaskError(ClientAppException)'>:<'ray::ClientAppActor"
           ".run()\n  File \"app.py\", line 1\nNodeConfigError: num-partitions: is 2\n\n"
           "flwr.clientapp.client_app.ClientAppException: \nException ClientAppException "
           "occurred. Message: num-partitions: is 2; the run has clients=4'>")
    assert short_reason(ray) == "num-partitions: is 2; the run has clients=4"
    assert short_reason("<class 'RuntimeError'>:<'disk full'>") == \
        "<class 'RuntimeError'>:<'disk full'>"
    assert len(short_reason("x" * 1000)) == 300


def test_too_few_nodes_in_a_simulation_are_reported_at_once_not_after_the_timeout():
    """flwr's in-memory (simulation) grid has all its nodes from the start: once every node
    answered, waiting longer cannot help. A deployment grid (FakeGrid) waits."""
    from flwr.superlink.grid import InMemoryGrid

    class SimulationGrid(FakeGrid, InMemoryGrid):  # FakeGrid's behaviour, flwr's type
        pass

    for cls, timeout in ((SimulationGrid, 60.0), (FakeGrid, 2.0)):
        grid = cls(CFG)
        for n in (103, 104):
            del grid.contexts[n]
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=r"only 2 of the 4 clients") as err:
            _serve(grid, CFG, **{"registration-timeout": timeout})
        took = time.monotonic() - t0
        if cls is SimulationGrid:
            # not the 60 s timeout: the simulation's nodes are known at once
            assert took < timeout / 3 and "every node of the simulation answered" in str(
                err.value)
        else:
            assert took >= timeout and "within the registration timeout (2 s)" in str(err.value)


def test_a_simulation_s_registration_timeout_runs_from_its_backend_s_first_reply():
    """A simulation's backend may take minutes to start on a loaded host (Ray, its actors'
    imports) before it answers anything: the registration timeout counts from its first
    reply, so all four nodes register after a start-up three times the timeout. A
    deployment grid with the same silence is waited for up to its timeout only (its nodes
    may never come)."""
    from flwr.superlink.grid import InMemoryGrid

    START = 1.5  # s the backend answers nothing; the registration timeout is a third of it

    class Starting:  # silent for START s from the first pull (FakeGrid answers on push)
        began = None

        def pull_messages(self, ids):
            self.began = self.began or time.monotonic()
            if time.monotonic() - self.began < START:
                return []
            return super().pull_messages(ids)

    class SimulationGrid(Starting, FakeGrid, InMemoryGrid):
        pass

    class DeploymentGrid(Starting, FakeGrid):
        pass

    grid = SimulationGrid(CFG)
    res = _serve(grid, CFG, **{"registration-timeout": START / 3})
    assert sorted(res["pids"]) == [0, 1, 2, 3] and res["rejected"] == []
    assert time.monotonic() - grid.began >= START
    grid = DeploymentGrid(CFG)
    with pytest.raises(RuntimeError, match=r"only 0 of the 4 clients needed registered "
                                           r"within the registration timeout"):
        _serve(grid, CFG, **{"registration-timeout": START / 3})


def test_a_warm_worker_computes_what_the_clientapp_computes(tmp_path):
    import threading

    from learning.flower.worker import call, serve

    sock = str(tmp_path / "n0.sock")
    thread = threading.Thread(target=serve, args=(sock,), daemon=True)
    thread.start()
    extra = {101: {"partition-id": 0, "num-partitions": 4, "worker": sock}}
    deadline = time.monotonic() + 120  # the socket is bound before any import (loaded hosts)
    while not (tmp_path / "n0.sock").exists():  # no sleep: catch the path's first instant
        assert thread.is_alive() and time.monotonic() < deadline, "the worker never listened"
    from multiprocessing.connection import Client

    # the path exists only once the socket listens (a connection at once is never refused;
    # CI of d5584aa met a bound, not yet listening socket); a caller that leaves is ignored
    Client(sock, family="AF_UNIX").close()
    warm = _serve(FakeGrid(CFG, extra=extra), CFG)
    cold = _serve(FakeGrid(CFG), CFG)
    assert warm["ledger"] == cold["ledger"] and warm["acc_own"] == cold["acc_own"]
    with pytest.raises(RuntimeError, match=r"node worker: .*unknown ask"):
        call(sock, {"op": "query", "run_config": {}, "node_config": extra[101],
                    "default": CFG, "conf": {"ask": "weather"}, "arrays": None, "own": None})
    with pytest.raises(RuntimeError, match="not reachable"):
        call(str(tmp_path / "none.sock"), {})


def _howto_commands():
    """The commands docs/howto-flower.md shows in its indented blocks (continuations joined)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "howto-flower.md").read_text()
    lines, out = text.replace("\\\n", " ").splitlines(), []
    for line in lines:
        cmd = line.strip()
        if line.startswith("    ") and cmd.split(" ")[0] in ("flower-superlink",
                                                            "flower-supernode", "flwr"):
            out.append(cmd.split("#")[0].strip())
    return text, out


@pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")  # flwr's pathspec
def test_the_app_bundle_holds_the_apps_code_only():
    """What travels to the nodes with each run (the FAB that `flwr run` builds): pyproject.toml
    and every module of learning/ and mechanisms/ (the ClientApp's imports; the layers keep
    proofs/ and sims/ out of them), nothing else. Known-bad: without `fab-include` the bundle
    takes the docs, benchmarks, sims and proofs too."""
    import io
    import re
    import zipfile
    from pathlib import Path

    from flwr.cli.build import build_fab_from_files
    from flwr.cli.utils import collect_files

    repo = Path(__file__).resolve().parents[1]
    files = dict(collect_files(repo))

    def bundle(pyproject: str) -> set[str]:
        fab = build_fab_from_files({**files, "pyproject.toml": pyproject.encode()})[0]
        return set(zipfile.ZipFile(io.BytesIO(fab)).namelist()) - {".info/CONTENT"}

    text = (repo / "pyproject.toml").read_text()
    code = {p.relative_to(repo).as_posix() for pkg in ("learning", "mechanisms")
            for p in (repo / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    assert "learning/flower/app.py" in code and "mechanisms/ipfl/market.py" in code
    assert bundle(text) == {"pyproject.toml"} | code
    everything = bundle(re.sub(r"^fab-include = .*\n", "", text, flags=re.M))
    assert {n.split("/")[0] for n in everything - code} >= {"docs", "sims", "proofs"}


@pytest.mark.slow
def test_howto_commands_use_flags_the_installed_flwr_has():
    import re
    import shutil
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    from flwr.cli.constant import SuperLinkConnectionTomlKey

    text, commands = _howto_commands()
    assert {c.split()[0] for c in commands} == {"flower-superlink", "flower-supernode", "flwr"}
    bin_dir = Path(sys.executable).parent
    helps = {}
    for cmd in commands:
        words = cmd.split()
        prog = words[:2] if words[0] == "flwr" else words[:1]
        key = " ".join(prog)
        if key not in helps:
            exe = shutil.which(prog[0], path=str(bin_dir)) or prog[0]
            helps[key] = subprocess.run([exe, *prog[1:], "--help"], capture_output=True,
                                        text=True, timeout=60).stdout
        for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", cmd):
            assert flag in helps[key], f"{key} has no {flag} (docs: {cmd})"
    # the Flower configuration snippets are valid SuperLink connections
    allowed = {v for k, v in vars(SuperLinkConnectionTomlKey).items() if k.isupper()}
    tables, block = [], []
    for line in [*text.splitlines(), "end"]:
        if line.startswith("    ") or not line.strip():
            block.append(line.strip())
            continue
        toml = [x for x in block if x.startswith("[") or re.match(r"^[\w-]+ = ", x)]
        if any(x.startswith("[superlink") for x in toml):
            tables.append(tomllib.loads("\n".join(toml)))
        block = []
    assert len(tables) == 2
    for table in tables:
        for name, conn in table["superlink"].items():
            if isinstance(conn, dict):
                assert set(conn) <= allowed and "address" in conn, name


def test_the_local_superlink_the_howto_describes_is_flwrs():
    """The howto's ports, environment variables and log path of the local SuperLink that
    `flwr run` starts are the installed flwr's."""
    import inspect

    from flwr.cli import constant, local_superlink

    text, _ = _howto_commands()
    source = inspect.getsource(constant)
    for var, port in (("FLWR_LOCAL_SUPERLINK_HTTP_API_PORT", "39091"),
                      ("FLWR_LOCAL_CONTROL_API_PORT", "39093")):
        assert f'"{var}", "{port}"' in source.replace("\n", "").replace("    ", "")
        assert var in text and port in text
    paths = inspect.getsource(local_superlink._get_local_superlink_paths)
    assert '"local-superlink"' in paths and '"superlink.log"' in paths
    assert '"local-superlink/superlink.log"' in text
    assert "--log-file" in inspect.getsource(local_superlink._start_local_superlink)


def test_the_fixed_waits_the_docs_quantify_are_where_they_say(monkeypatch):
    from pathlib import Path

    from learning.flower import loopback

    floors = loopback.flwr_floors()
    text = (Path(__file__).resolve().parents[1] / "docs" / "howto-flower.md").read_text()
    assert len(floors) == 3
    for f in floors:
        assert f["where"] is not None and f["where"] in text, f
    # a wait this flwr does not have is reported as absent, not placed somewhere
    monkeypatch.setattr(loopback, "FLWR_FLOORS", (("flwr.supernode.start_client_internal",
                                                   "time.sleep(42)", "no such wait", 42.0),))
    assert loopback.flwr_floors()[0]["where"] is None


# what the line of the installed flwr 1.42 that docs/howto-flower.md cites holds
FLWR_LINES = {
    "flwr/supernode/start_client_internal.py:263": "time.sleep(3)",
    "flwr/supernode/start_client_internal.py:470": "time.sleep(0.5)",
    "flwr/supernode/start_client_internal.py:506": "time.sleep(0.5)",
    "flwr/supernode/start_client_internal.py:388": "task_id = state.create_task(",
    "flwr/supernode/start_client_internal.py:415": "obj_contents = pull_objects(",
    "flwr/supercore/constant.py:48": "PULL_INITIAL_BACKOFF = 1",
    "flwr/supernode/servicer/runtime/runtime_handlers.py:121": "fab=fab_to_proto(fab),",
    "flwr/supercore/superexec/run_superexec.py:51": "_DEFAULT_TASK_POLL_INTERVAL_SECONDS = 1.0",
    "flwr/supernode/cli/__init__.py:18": "from .flower_supernode import flower_supernode",
}


def _flwr_line(ref: str) -> str:
    import re
    from pathlib import Path

    import flwr

    path, line = re.fullmatch(r"flwr/(.+):(\d+)", ref).groups()
    lines = (Path(flwr.__file__).parent / path).read_text().splitlines()
    return lines[int(line) - 1].split("  #")[0].strip() if int(line) <= len(lines) else ""


def test_every_flwr_line_the_howto_cites_holds_what_it_says():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "howto-flower.md").read_text()
    cited = set(re.findall(r"flwr/[\w/]+\.py:\d+", text))
    assert cited == set(FLWR_LINES)
    for ref, code in FLWR_LINES.items():
        assert _flwr_line(ref) == code, ref
    # known bad: a line off by one
    assert _flwr_line("flwr/supernode/start_client_internal.py:264") != FLWR_LINES[
        "flwr/supernode/start_client_internal.py:263"]


def _liar(**changes):
    # client 1 reports 3x its data (seed 2): the others' utilities turn negative in some rounds
    return replace(CFG, seed=2, liar=1, liar_N=3.0, liar_c=0.2, **changes)


def test_a_liars_accounting_uses_its_truth_and_the_market_only_its_report(tmp_path):
    from mechanisms import ipfl

    cfg = _liar()
    res = _serve(FakeGrid(cfg), cfg, tmp_path)
    ref = run(cfg)
    for t in (1, 2, 3):  # payments on the report, utilities with the truth: as in process
        rows = sorted((r["pid"], r["payment"], r["utility"]) for r in res["ledger"]
                      if r["round"] == t)
        want = ref.frame[ref.frame["round"] == t - 1]  # Flower round t: in-process t - 1
        np.testing.assert_allclose([r[1] for r in rows], want.payment, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose([r[2] for r in rows], want.utility, rtol=1e-5, atol=1e-6)
    run_dir = tmp_path / "run-7"
    config = json.loads((run_dir / "config.json").read_text())
    told = {r["pid"]: {k for k in r["report"] if k.startswith("true_")}
            for r in config["registrations"]}
    assert told == {0: set(), 1: {"true_N", "true_c"}, 2: set(), 3: set()}
    # known-bad accounting: utilities from the liar's report alone differ from the ledger's
    rec = json.loads((run_dir / "rounds" / "round-0001.json").read_text())
    r = rec["reports"]
    naive = ipfl.clear(ipfl.Market(N=r["N"], c=r["c"], K=r["K"], lam=rec["lam"]),
                       np.asarray(rec["distances"]), rule=rec["rule"])
    np.testing.assert_allclose(naive.payments, rec["outcome"]["payments"], rtol=1e-12)
    assert abs(naive.utilities[1] - rec["outcome"]["utilities"][1]) > 1e-3
    checks = recheck(run_dir)
    assert checks["ok"].all() and (checks["check"] == "ipfl utilities").sum() == cfg.rounds
    # a tampered truth fails the utilities check and nothing else
    rec["truth"]["N"][1] *= 2
    (run_dir / "rounds" / "round-0001.json").write_text(json.dumps(rec))
    bad = recheck(run_dir, 1)
    assert set(bad[~bad["ok"]]["check"]) == {"ipfl utilities"}


def test_a_quitter_keeps_its_best_model_by_validation_accuracy(tmp_path):
    cfg = _liar(rounds=4, allow_quit=True)
    res = _serve(FakeGrid(cfg), cfg, tmp_path)
    ref = run(cfg)
    f = ref.frame
    quitters = sorted(f[(f["round"] == cfg.rounds - 1) & ~f["active"]].client)
    # a client that quits at the last market (Flower round R, in-process round R - 1) is
    # inactive in neither run's frame
    kept = {int(p): k for p, k in res["kept"].items()}
    assert [p for p in res["quit"] if kept[p]["quit_round"] < cfg.rounds] == quitters
    # some quitter's best model is not its last one, so keeping the last would fail below
    assert any(kept[p]["round"] < kept[p]["quit_round"] for p in quitters)
    for p in quitters:  # the best of its uploads (in-process rounds before it quit) by its
        # own validation accuracy: Flower round t uploads what in-process round t - 1 trains
        vals = f[(f.client == p) & (f["round"] < kept[p]["quit_round"])].acc_val.to_numpy()
        assert kept[p]["acc_val"] == pytest.approx(vals.max(), abs=1e-9)
        assert kept[p]["round"] == 1 + int(np.argmax(vals))
    last = f[f["round"] == cfg.rounds - 1]
    np.testing.assert_allclose(res["acc_own"], last.acc_own, atol=1e-6)
    np.testing.assert_allclose(res["acc_personalised"], last.acc_personalised, atol=1e-6)

