"""Server strategies (Message API) that run fedmarket's mechanisms on a Flower federation.

The server knows only what nodes report. A :class:`Registry` asks every node that connects
for its partition id (the client's own id) and its reported type (N, c, K, v, and the shape of
its data); it refuses partition ids outside the federation and a second live node claiming an
id already held (re-evaluated every round: the claim wins once the holder is silent or
unavailable), and it lets a node that rejoins (a new Flower node id, same partition id) take
its place again. Replies are matched to the messages they answer, never to their sender (flwr
answers for a dead node from the SuperLink). Every refused, failed, silent or unavailable node
is logged at WARNING by the ServerApp with the client's own id and the reason, and recorded
in ``rejected``; a silent or unavailable one is not sent work nor waited for again until it
answers.

* :class:`IpflStrategy` - each round: collect every node's parameters, clear the market with
  :func:`mechanisms.ipfl.clear` on the reported types of the nodes that answered with a valid
  reply, compute each node's prox-centre (Eq. 8), and send every node its own centre and bill
  in a message of its own. Round 1 is local training (Box 1's round 0); its uploads clear the
  first market. With ``allow_quit`` (off by default, as in the authors' runs), a node whose
  round utility is negative quits and is not contacted again; it keeps its best model so far
  by its own validation accuracy (each node reports ``acc-val`` with its upload; the server
  keeps each node's best upload), as the in-process learner's quitters do. The payments of
  the nodes that took part sum to zero every round.
* :class:`CplStrategy` - asks the registered nodes for their gradient norm at the initial
  model, solves the pricing game with :mod:`mechanisms.cpl` on the reports, sends every node
  its own price and q, lets each node decide to participate by its own Bernoulli(q) draw (no
  answer = not participating) and aggregates with the unbiased weights a_n / q_n.

Both take an optional ``recorder`` (``recorder(round, record, uploads)``) that receives each
round's inputs and outcome (see :mod:`learning.flower.provenance`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from logging import INFO, WARNING

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log

from mechanisms import cpl, ipfl, paper

from .wire import CONFIG, REPLY, content, model_from, unpack
from .wire import metrics as _numbers

__all__ = ["PULL_BACKOFF", "CplStrategy", "IpflStrategy", "Member", "PollingGrid", "Registry",
           "digest", "evaluation_of", "flat_to_record", "metrics_of", "model_of", "pull_replies",
           "record_to_flat", "short_reason"]

TYPE_KEYS = ("N", "c", "K", "v")


def record_to_flat(record: ArrayRecord, shapes: list[tuple] | None = None):
    """Flatten an ArrayRecord into one float64 vector (and the arrays' shapes)."""
    arrays = record.to_numpy_ndarrays()
    got = [tuple(a.shape) for a in arrays]
    if shapes is not None and got != shapes:
        raise ValueError(f"array shapes {got} differ from the model's {shapes}")
    flat = np.concatenate([a.astype(np.float64).ravel() for a in arrays]) if arrays else \
        np.zeros(0)
    if not np.isfinite(flat).all():
        raise ValueError("parameters contain NaN or inf")
    return flat, got


def flat_to_record(flat: np.ndarray, shapes: list[tuple]) -> ArrayRecord:
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s)) if s else 1
        out.append(flat[at:at + n].reshape(s).astype(np.float32))
        at += n
    return ArrayRecord(out)


def digest(flat: np.ndarray) -> str:
    """sha256 of a parameter vector as float64 bytes (what provenance records per upload)."""
    return hashlib.sha256(np.ascontiguousarray(flat, dtype=np.float64).tobytes()).hexdigest()


def metrics_of(msg: Message) -> dict:
    """A node's reply's metrics ({} without content); TypeError when one is not a number
    (:func:`learning.flower.wire.metrics`)."""
    return _numbers(unpack(msg.content, REPLY)[0]) if msg.has_content() else {}


def model_of(msg: Message, size: int) -> np.ndarray:
    """The model a node's reply uploads, float64, checked to hold ``size`` finite parameters
    (:func:`learning.flower.wire.model_from`); ValueError when it holds none."""
    data = unpack(msg.content, REPLY)[1] if msg.has_content() else None
    if data is None:
        raise ValueError("the reply carries no model")
    return model_from(data, size)


def evaluation_of(metrics: dict) -> dict:
    """The evaluation of a final model in a node's metrics: acc_own and loss, and
    acc_personalised where the node has the reference test set; ValueError naming a missing
    one."""
    for k in ("acc_own", "loss"):
        if k not in metrics:
            raise ValueError(f"the reply lacks {k!r}")
    return {k: float(metrics[k]) for k in ("acc_own", "loss", "acc_personalised")
            if k in metrics}


# how often a pull asks the SuperLink again for an object of a reply it does not hold yet
# (first wait, longest wait; s). flwr's Grid: 1 s, then 2 s, 4 s ... up to 10 s
PULL_BACKOFF = (0.02, 0.2)


def _http_grid(grid) -> bool:
    """Whether ``grid`` is flwr 1.42's deployment Grid (the Runtime API over HTTP), whose
    replies :meth:`PollingGrid.pull_messages` pulls itself."""
    try:
        from flwr.superlink.grid.http_grid import HttpGrid
    except ImportError:  # pragma: no cover - another flwr layout: flwr's own pull
        return False
    return isinstance(grid, HttpGrid) and hasattr(type(grid), "_runtime_client")


def pull_replies(grid, message_ids, backoff: tuple[float, float] = PULL_BACKOFF):
    """The replies to ``message_ids`` that the SuperLink holds, pulled from flwr's deployment
    Grid ``grid`` with flwr's own functions, as ``HttpGrid.pull_messages`` pulls them (the
    messages, then each one's objects, then a receipt), with one difference: an object the
    SuperLink does not hold yet is asked for again after ``backoff[0]`` s, doubling up to
    ``backoff[1]``, not after 1 s, 2 s, 4 s.

    Why: the SuperLink hands a reply out as soon as the SuperNode has pushed the message,
    before its objects (``flwr/superlink/servicer/runtime/runtime_handlers.py``,
    ``pull_messages``; one request each), so a server that polls every 0.1 s mostly finds a
    reply whose objects are still arriving; flwr's Grid then waited 1 s or more per round
    (measured: 1.4 s median on the loaded 2-core host). A reply whose objects never arrive
    becomes flwr's MESSAGE_UNAVAILABLE error reply, as in flwr."""
    from flwr.app import Metadata
    from flwr.app.error import Error
    from flwr.app.message import make_message
    from flwr.proto.message_pb2 import ConfirmMessageReceivedRequest
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest
    from flwr.supercore.constant import SYSTEM_MESSAGE_TYPE
    from flwr.supercore.date import now
    from flwr.supercore.inflatable.inflatable_object import iterate_object_tree
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_pull_object_fn_protobuf,
    )
    from flwr.supercore.inflatable.inflatable_utils import (
        ObjectPullError,
        inflate_object_from_contents,
        pull_objects,
    )

    client = grid._runtime_client  # flwr's connection of this ServerApp (its token)
    run_id = grid.run.run_id
    res = client.PullMessages(PullAppMessagesRequest(message_ids=list(message_ids)))
    out: list[Message] = []
    for proto, tree in zip(res.messages_list, res.message_object_trees, strict=True):
        msg_id = proto.metadata.message_id
        try:
            contents = pull_objects(
                [t.object_id for t in iterate_object_tree(tree)],
                make_pull_object_fn_protobuf(client.PullObject, grid.node, run_id),
                initial_backoff=backoff[0], backoff_cap=backoff[1])
        except ObjectPullError as exc:  # flwr's error reply for it
            out.append(make_message(
                metadata=Metadata(run_id=run_id, message_id="", src_node_id=grid.node.node_id,
                                  dst_node_id=grid.node.node_id,
                                  message_type=SYSTEM_MESSAGE_TYPE, group_id="", ttl=0,
                                  reply_to_message_id=proto.metadata.reply_to_message_id,
                                  created_at=now().timestamp()),
                error=Error(code=ErrorCode.MESSAGE_UNAVAILABLE,
                            reason=f"Reply message objects are unavailable. {exc}")))
            continue
        client.ConfirmMessageReceived(ConfirmMessageReceivedRequest(
            node=grid.node, run_id=run_id, message_object_id=msg_id))
        message = inflate_object_from_contents(msg_id, contents)
        message.metadata.__dict__["_message_id"] = msg_id  # as flwr's Grid sets it
        out.append(message)
    return out


class PollingGrid:
    """A Grid whose ``send_and_receive`` polls for replies every ``interval`` seconds (flwr
    1.42's deployment Grid sleeps 3 s between polls, a floor under every round), and whose
    ``pull_messages`` asks again for a reply's missing objects within
    :data:`PULL_BACKOFF` (:func:`pull_replies`; flwr's Grid waits 1 s, then 2 s ...)."""

    def __init__(self, grid: Grid, interval: float = 0.1):
        self.grid, self.interval = grid, float(interval)
        self.http = _http_grid(grid)

    def __getattr__(self, name):
        return getattr(self.grid, name)

    def get_node_ids(self):
        return self.grid.get_node_ids()

    def push_messages(self, messages):
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids):
        if self.http:
            return pull_replies(self.grid, message_ids)
        return self.grid.pull_messages(message_ids)

    def send_and_receive(self, messages, *, timeout: float | None = None):
        """Push ``messages`` and pull replies until each was answered or ``timeout`` seconds
        from the call passed (pushing included; at least one pull)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = set(self.grid.push_messages(messages))
        got: list[Message] = []
        first = True
        while pending and (first or deadline is None or time.monotonic() < deadline):
            first = False
            replies = list(self.pull_messages(pending))
            got.extend(replies)
            pending.difference_update(r.metadata.reply_to_message_id for r in replies)
            if pending and not replies:
                time.sleep(self.interval)
        return got


def _fixed_membership(grid) -> bool:
    """Whether ``grid`` (or the grid it wraps) is flwr's in-memory simulation grid, whose nodes
    all exist from the start (no node can join later)."""
    inner = getattr(grid, "grid", grid)
    try:
        from flwr.superlink.grid import InMemoryGrid
    except ImportError:  # pragma: no cover - another flwr layout
        return False
    return isinstance(inner, InMemoryGrid)


# ------------------------------------------------------------------------------ registry
@dataclass
class Member:
    """A registered client: its own id (partition id), its current Flower node, its report."""

    pid: int
    node: int
    report: dict
    joined: int  # the round it (re)joined in


def short_reason(reason: str, limit: int = 300) -> str:
    """flwr's error reason in one line: a ClientApp's exception message without the
    traceback Ray or flwr wraps it in (the last line, after its last ``Message:``)."""
    lines = [line.strip() for line in str(reason).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if "Message: " in last:
        last = last.rsplit("Message: ", 1)[1].removesuffix("'>")
    return last if len(last) <= limit else last[:limit - 3] + "..."


def _check_report(m: dict) -> dict:
    try:
        rep = {k: float(m[k]) for k in TYPE_KEYS}
    except KeyError as exc:
        raise ValueError(f"report lacks {exc.args[0]!r}") from None
    if not (np.isfinite(rep["N"]) and rep["N"] > 0):
        raise ValueError(f"reported N={rep['N']}; must be finite and > 0")
    if not rep["c"] >= 0:  # inf marks a pure buyer
        raise ValueError(f"reported c={rep['c']}; must be >= 0")
    for k in ("K", "v"):
        if not (np.isfinite(rep[k]) and rep[k] >= 0):
            raise ValueError(f"reported {k}={rep[k]}; must be finite and >= 0")
    for k in ("N", "c", "K"):  # a liar's truth, for the accounting only
        if f"true_{k}" in m:
            true = float(m[f"true_{k}"])
            if not (true >= 0 and (k == "c" or np.isfinite(true))) or (k == "N" and true == 0):
                raise ValueError(f"true_{k}={true} is not a valid {k}")
            rep[f"true_{k}"] = true
    if "G" in m:  # CPL: the gradient norm at the initial model, checked when pricing
        rep["G"] = m["G"]
    rep["shape"] = json.dumps([int(k) for k in m.get("shape", [])])
    rep["classes"] = int(m.get("classes", 0))
    return rep


@dataclass
class Registry:
    """Who is in the federation, by partition id (see the module docstring).

    A member whose node was silent past a timeout, or that flwr reports unavailable
    (NODE_UNAVAILABLE), is *suspect*: it is not sent work nor waited for again until it
    answers a registration query (one is sent each round, never waited for), and a new node
    may take its partition id. A refused claim is kept and re-evaluated every round without
    asking the node again (a second node for a partition id gets it once the holder is
    suspect or gone)."""

    clients: int
    timeout: float = 60.0
    members: dict[int, Member] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)  # node id -> reason (not re-asked)
    rejected: list[dict] = field(default_factory=list)
    closed: str | None = None  # when set, new partition ids are refused with this reason
    suspect: dict[int, str] = field(default_factory=dict)  # pid -> why it is not waited for
    claims: dict[int, dict] = field(default_factory=dict)  # refused node -> its registration
    pings: dict[str, tuple[int, int]] = field(default_factory=dict)  # msg id -> (pid, node)
    asking: dict[str, int] = field(default_factory=dict)  # registration query id -> node

    def reject(self, server_round: int, pid, node, reason: str) -> None:
        self.rejected.append({"round": int(server_round), "pid": None if pid is None else
                              int(pid), "node": int(node), "reason": reason})
        who = f"client {pid}" if pid is not None else "a client"
        log(WARNING, "round %s: %s (node %s) rejected: %s", server_round, who, node, reason)

    def lost(self, server_round: int, pid: int, node: int, reason: str) -> None:
        """Member ``pid`` on ``node`` did not answer (``reason``): logged, recorded, and not
        waited for again until it answers."""
        self.reject(server_round, pid, node, f"{reason}; not waited for again until it "
                                             f"answers")
        member = self.members.get(pid)
        if member is not None and member.node == node:
            self.suspect[pid] = reason

    def collect(self, server_round: int, sent: dict[int, Message], replies, what: str,
                timeout: float) -> dict[int, Message]:
        """Match ``replies`` to the messages ``sent`` (pid -> pushed message) by the id of the
        message each answers, never by sender: flwr's own error replies (a node unavailable,
        a message expired) come from the SuperLink. Returns pid -> reply; a node flwr reports
        unavailable or that did not answer in time is logged with the client's own id and
        becomes suspect (:meth:`lost`); a stray reply is logged."""
        ids = {m.metadata.message_id: pid for pid, m in sent.items() if m.metadata.message_id}
        got: dict[int, Message] = {}
        for msg in replies:
            pid = ids.get(msg.metadata.reply_to_message_id)
            if pid is None or pid in got:
                self.reject(server_round, None, msg.metadata.src_node_id,
                            "reply to a message it was not sent")
                continue
            if msg.has_error() and msg.error.code == ErrorCode.NODE_UNAVAILABLE:
                self.lost(server_round, pid, sent[pid].metadata.dst_node_id,
                          f"NODE_UNAVAILABLE at {what}: flwr reports that the node stopped "
                          f"sending heartbeats")
                got[pid] = None
                continue
            got[pid] = msg
        for pid, m in sent.items():
            if pid not in got:
                self.lost(server_round, pid, m.metadata.dst_node_id,
                          f"silent: no reply at {what} within the timeout ({timeout:g} s)")
        return {p: m for p, m in got.items() if m is not None}

    def pid_of(self, node: int) -> int | None:
        for m in self.members.values():
            if m.node == node:
                return m.pid
        return None

    def live(self, grid: Grid) -> list[int]:
        """The members whose node flwr lists and that are not suspect."""
        nodes = set(grid.get_node_ids())
        return sorted(p for p, m in self.members.items()
                      if m.node in nodes and p not in self.suspect)

    def refresh(self, grid: Grid, server_round: int, enough: int | None = None,
                timeout: float | None = None) -> list[int]:
        """Ask every node not seen yet for its id and type, and every suspect member if it is
        back; re-evaluate the refused claims. Returns the pids that (re)joined. Waits for the
        new nodes' replies up to ``timeout`` (default: the registry's), or until ``enough``
        clients are live (a node that died before answering does not hold the others up);
        never for a suspect's. With ``timeout=0`` nothing is waited for: a reply that comes
        later is taken at the next call.

        In a simulation (flwr's in-memory grid, :func:`_fixed_membership`) the timeout runs
        from the backend's first reply: every node exists and the backend answers every
        message (a ClientApp that fails answers with an error; flwr refuses at once
        resources no actor fits), so the wait before its first reply is the backend's
        start-up (Ray and its actors importing torch: 70 s at load 6-7 on a 2-core host,
        over 120 s at load 15-18), which says nothing about the nodes; counting it made a
        simulation fail its registration on a loaded host with no node at fault."""
        timeout = self.timeout if timeout is None else float(timeout)
        live = list(grid.get_node_ids())
        joined = self._reconsider(live, server_round)
        held = {m.node for m in self.members.values()}
        self.asking = {mid: n for mid, n in self.asking.items() if n in live}
        asked_before = set(self.asking.values())
        new = [n for n in live if n not in held and n not in self.refused
               and n not in asked_before]
        pinged = {pid for pid, _ in self.pings.values()}
        ping = [(p, self.members[p].node) for p in sorted(self.suspect)
                if p in self.members and p not in pinged and self.members[p].node in live]
        msgs = [self._query(n, server_round) for n in new]
        msgs += [self._query(n, server_round) for _, n in ping]
        pushed = list(grid.push_messages(msgs)) if msgs else []
        now = {mid: n for mid, n in zip(pushed[:len(new)], new, strict=True) if mid}
        self.asking.update(now)
        for mid, (pid, node) in zip(pushed[len(new):], ping, strict=True):
            if mid:
                self.pings[mid] = (pid, node)
        waiting = set(now)  # only this call's queries are waited for
        deadline = time.monotonic() + timeout
        # a simulation's backend starting up: the clock starts with its first reply
        starting = timeout > 0 and bool(waiting) and _fixed_membership(grid)
        first = True
        while first or (waiting and (starting or time.monotonic() < deadline)):
            first = False
            ids = set(self.asking) | set(self.pings)
            replies = list(grid.pull_messages(ids)) if ids else []
            if replies and starting:
                starting, deadline = False, time.monotonic() + timeout
            for reply in replies:
                mid = reply.metadata.reply_to_message_id
                if mid in self.pings:
                    pid = self._pinged(reply, *self.pings.pop(mid), live, server_round)
                elif mid in self.asking:
                    waiting.discard(mid)
                    pid = self._register(reply, self.asking.pop(mid), live, server_round)
                else:
                    continue
                if pid is not None:
                    joined.append(pid)
            if enough is not None and len(self.live(grid)) >= enough:
                return joined
            if waiting and not replies:
                time.sleep(0.1)
        for mid in sorted(waiting, key=lambda m: now[m]) if timeout > 0 else ():
            self.reject(server_round, None, now[mid], f"no registration reply within "
                                                      f"{timeout:g} s; it joins when it "
                                                      f"answers")
        return joined

    @staticmethod
    def _query(node: int, server_round: int) -> Message:
        return Message(content(CONFIG, {"ask": "type", "server-round": server_round}),
                       dst_node_id=node, message_type=MessageType.QUERY)

    def _pinged(self, reply: Message, pid: int, node: int, live, server_round: int):
        """A suspect member's answer to its registration query: it is back when it answers as
        itself and still holds its partition id."""
        member = self.members.get(pid)
        if member is None or member.node != node:  # its partition id was taken meanwhile
            return self._register(reply, node, live, server_round) if not reply.has_error() \
                else None
        if reply.has_error():
            return None  # still suspect; asked again next round
        try:
            said = int(metrics_of(reply)["pid"])
        except (KeyError, TypeError, ValueError):
            said = None
        if said != pid:
            return None
        reason = self.suspect.pop(pid, None)
        log(INFO, "round %s: client %s (node %s) answers again (was: %s)", server_round, pid,
            node, reason)
        return pid

    def _reconsider(self, live: list[int], server_round: int) -> list[int]:
        """Re-evaluate every refused claim of a node flwr still lists (nothing is sent)."""
        joined = []
        for node, claim in list(self.claims.items()):
            if node not in live:
                continue
            pid = claim["pid"]
            if self._refusal(pid, node, live) is None:
                del self.claims[node]
                self.refused.pop(node, None)
                self._admit(pid, node, claim["report"], server_round)
                joined.append(pid)
        return joined

    def _register(self, reply: Message, node: int, live: list[int], server_round: int):
        if reply.has_error():
            reason = short_reason(reply.error.reason)
            self.reject(server_round, None, node, f"registration failed: {reason}")
            self.refused[node] = reason
            return None
        try:
            m = metrics_of(reply)
            pid = int(m["pid"])
        except (KeyError, TypeError, ValueError):
            reason = "registration reply carries no partition id (or metrics that are not numbers)"
            self.reject(server_round, None, node, reason)
            self.refused[node] = reason
            return None
        try:
            rep = _check_report(m)
        except ValueError as exc:
            rep, reason = None, str(exc)
        else:
            reason = self._refusal(pid, node, live)
        if reason is not None:
            self.reject(server_round, pid, node, reason)
            self.refused[node] = reason
            if rep is not None:  # a valid report refused for now: re-evaluated every round
                self.claims[node] = {"pid": pid, "report": rep}
            return None
        self._admit(pid, node, rep, server_round)
        return pid

    def _admit(self, pid: int, node: int, rep: dict, server_round: int) -> None:
        old = self.members.get(pid)
        if old is not None and old.node != node:
            why = self.suspect.get(pid) or "its node is gone"
            log(INFO, "round %s: client %s rejoined (node %s, was node %s: %s)", server_round,
                pid, node, old.node, why)
            if self.closed:  # the game is set: a rejoining node keeps its priced report
                rep = {**old.report, "shape": rep["shape"], "classes": rep["classes"]}
            # the old node is out (flwr may list it for a while): never asked or waited for
            self.refused[old.node] = f"client {pid} was taken over by node {node}"
        self.suspect.pop(pid, None)
        self.members[pid] = Member(pid, node, rep, server_round)

    def _refusal(self, pid: int, node: int, live: list[int]) -> str | None:
        if not 0 <= pid < self.clients:
            return (f"partition-id {pid} is outside the federation: the run has clients="
                    f"{self.clients}, so partition-id must lie in [0, {self.clients})")
        old = self.members.get(pid)
        if (old is not None and old.node in live and old.node != node
                and pid not in self.suspect):
            return f"partition-id {pid} is already held by node {old.node}"
        if old is None and self.closed:
            return self.closed
        return None

    def wait(self, grid: Grid, server_round: int, wanted: int, deadline: float,
             poll: float = 0.5, progress: Callable[[str], None] | None = None) -> None:
        """Register nodes until ``wanted`` are in or ``deadline`` (time.monotonic) passes.
        Returns at once when no node can still come: in a simulation (flwr's in-memory grid,
        whose nodes are registered in one go) once every node answered and the set of nodes
        stayed the same for one ``poll``. ``progress(line)``
        hears, every 15 s, how many are in and why the others are not."""
        told, before = time.monotonic(), None
        while True:
            self.refresh(grid, server_round, enough=wanted)
            have = self.live(grid)
            if len(have) >= wanted or time.monotonic() >= deadline:
                return
            nodes = set(grid.get_node_ids())
            # a simulation registers its nodes in one go, as the ServerApp starts: the same
            # non-empty set twice, every node answered, and none can come any more
            if _fixed_membership(grid) and nodes and nodes == before and not self.asking:
                return
            before = nodes
            if progress is not None and time.monotonic() - told >= 15:
                told = time.monotonic()
                progress(f"waiting for {wanted - len(have)} more of {wanted} clients "
                         f"(registered: {have}; refused: "
                         f"{sorted(set(self.refused.values()))})")
            time.sleep(poll)

    def reports(self, pids) -> dict[str, np.ndarray]:
        return {k: np.array([self.members[p].report[k] for p in pids]) for k in TYPE_KEYS}

    def truths(self, pids) -> dict[str, np.ndarray]:
        """The true N, c, K of ``pids`` for the accounting: a liar's stated truth, everyone
        else's report."""
        return {k: np.array([self.members[p].report.get(f"true_{k}", self.members[p].report[k])
                             for p in pids]) for k in ("N", "c", "K")}


class _Base(Strategy):
    def __init__(self, registry: Registry, recorder: Callable | None, timeout: float):
        self.registry, self.recorder, self.timeout = registry, recorder, float(timeout)
        self.shapes: list[tuple] | None = None
        self.sent: dict[int, dict[int, int]] = {}  # round -> {pid: node}
        self.messages: dict[int, dict[int, Message]] = {}  # round -> {pid: message sent}
        self.pushed_at: dict[int, float] = {}  # round -> when its messages were handed over
        self.waited: dict[int, float] = {}  # round -> seconds from then to aggregation
        self.silent: dict[int, set[int]] = {}  # round -> pids sent a message that never answered
        self.times: dict[int, dict] = {}  # round -> its time stamps (see round_times)
        self._began: dict[int, float] = {}  # round -> time.monotonic() as it began

    @property
    def round_times(self) -> list[dict]:
        """One dict per round, in order, stamped by the ServerApp: ``start`` and ``end`` (wall
        clock, ``time.time()``: the round's configure_train began; its outcome was recorded),
        ``seconds`` (the round's duration on the monotonic clock), ``reply_wait_seconds``
        (from handing its messages over to taking the replies) and ``joined`` (the clients
        that (re)joined as it began). What a round costs, including any registration it
        did: :func:`learning.flower.provenance.slow_rounds` finds the rounds that took much
        longer than others."""
        return [dict(self.times[t]) for t in sorted(self.times)]

    def _begin(self, server_round: int) -> None:
        self._began[server_round] = time.monotonic()
        self.times[server_round] = {"round": int(server_round), "start": time.time(),
                                    "end": None, "seconds": None,
                                    "reply_wait_seconds": None, "joined": []}

    def _refresh(self, grid: Grid, server_round: int) -> None:
        """Register newcomers and suspects that answered, without waiting for any (a round
        never waits for a registration); who (re)joined goes into the round's time stamps."""
        joined = self.registry.refresh(grid, server_round, timeout=0)
        if server_round in self.times:
            self.times[server_round]["joined"] = sorted(set(joined))

    def _end(self, server_round: int) -> dict | None:
        entry = self.times.get(server_round)
        if entry is not None:
            entry.update(end=time.time(), reply_wait_seconds=self.waited.get(server_round),
                         seconds=time.monotonic() - self._began[server_round])
        return entry

    @property
    def rejected(self) -> list[dict]:
        return self.registry.rejected

    @property
    def size(self) -> int:
        """The model's parameter count: what every upload must hold."""
        return sum(int(np.prod(s)) for s in self.shapes)

    def _send(self, server_round: int, messages: dict[int, Message]) -> list[Message]:
        """Remember what this round sends to whom (pid -> message); the messages to push."""
        self.sent[server_round] = {p: m.metadata.dst_node_id for p, m in messages.items()}
        self.messages[server_round] = dict(messages)
        self.pushed_at[server_round] = time.monotonic()
        return list(messages.values())

    def _replies(self, server_round: int, replies: Iterable[Message],
                 timeout: float | None = None):
        """(pid, message) of each reply to a message this round sent, matched by the id of the
        message it answers (:meth:`Registry.collect`); the nodes that did not answer are
        logged, recorded as silent and not waited for again until they answer."""
        got = self.registry.collect(server_round, self.messages.get(server_round, {}),
                                    replies, "training" if server_round else "pricing",
                                    self.timeout if timeout is None else timeout)
        self.silent[server_round] = set(self.sent.get(server_round, {})) - set(got)
        if server_round in self.pushed_at:
            self.waited[server_round] = time.monotonic() - self.pushed_at[server_round]
        return got

    def _record(self, server_round: int, record: dict, uploads: dict | None = None) -> None:
        stamps = self._end(server_round)  # the round's outcome is in: it ends here
        if self.recorder is not None:
            record["rejected"] = [r for r in self.registry.rejected
                                  if r["round"] == server_round]
            record["reply_wait_seconds"] = self.waited.get(server_round)
            if stamps is not None:
                record.update({k: stamps[k] for k in ("start", "end", "seconds", "joined")})
            self.recorder(server_round, record, uploads or {})

    def configure_evaluate(self, server_round, arrays, config, grid):
        return []

    def aggregate_evaluate(self, server_round, replies):
        return None


class IpflStrategy(_Base):
    """iPFL on a Flower federation (see the module docstring)."""

    def __init__(self, *, registry: Registry, lam: float, eta: float = paper.IPFL_ETA,
                 metric: str = "cosine", rule: str = "local",
                 reference: np.ndarray | None = None, recorder: Callable | None = None,
                 timeout: float = 3600, allow_quit: bool = False, rounds: int | None = None):
        super().__init__(registry, recorder, timeout)
        self.lam, self.eta, self.metric, self.rule = float(lam), float(eta), metric, rule
        self.allow_quit = bool(allow_quit)
        # the run's last round: its train message asks each node to evaluate its upload too
        # (a node's final model is its last upload), which saves the final evaluation round
        self.rounds = rounds
        self.evaluated: dict[int, dict] = {}  # pid -> evaluation of its final model
        self.reference = reference
        self.centres: dict[int, np.ndarray] = {}
        self.personal: dict[int, np.ndarray] = {}
        self.quit: set[int] = set()
        self.best: dict[int, tuple[float, np.ndarray, int]] = {}  # pid -> (val acc, model, round)
        self.kept: dict[int, dict] = {}  # quitter -> its model's round and val accuracy
        self.ledger: list[dict] = []
        self.outcomes: dict[int, ipfl.Outcome] = {}
        self.inputs: dict[int, tuple] = {}  # round -> (pids, uploads, N, c, K)

    def summary(self) -> None:
        log(INFO, "IpflStrategy: lam=%s eta=%s metric=%s rule=%s", self.lam, self.eta,
            self.metric, self.rule)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._begin(server_round)
        base, shapes = record_to_flat(arrays)
        if self.shapes is None:
            self.shapes = shapes
            if self.reference is None:
                self.reference = base
        if server_round > 1:
            self._refresh(grid, server_round)  # newcomers don't block
        messages = {}
        for pid in self.registry.live(grid):
            if pid in self.quit:
                continue
            node = self.registry.members[pid].node
            centre = self.centres.get(pid)
            prox = 0.0 if centre is None else self.lam / self.eta
            cfg = {"server-round": server_round, "prox": prox, "train-call": server_round - 1,
                   "bill": self._last(pid, "payment"), "utility": self._last(pid, "utility")}
            if server_round == self.rounds:
                cfg["evaluate"] = 1
            # a fresh message per node: every node gets its own centre and bill
            messages[pid] = Message(content(CONFIG, cfg, model=base if centre is None
                                            else centre),
                                    dst_node_id=node, message_type=MessageType.TRAIN)
        return self._send(server_round, messages)

    def _last(self, pid, key) -> float:
        for row in reversed(self.ledger):
            if row["pid"] == pid:
                return float(row[key])
        return 0.0

    def _valid(self, server_round, replies) -> dict[int, np.ndarray]:
        good = {}
        for pid, msg in self._replies(server_round, replies).items():
            node = self.sent[server_round][pid]
            if msg.has_error():
                self.registry.reject(server_round, pid, node,
                                     f"error: {short_reason(msg.error.reason)}")
                continue
            try:
                metrics = metrics_of(msg)
                said = int(metrics["pid"])
                if said != pid:
                    raise ValueError(f"replied as partition-id {said}, registered as {pid}")
                good[pid] = model_of(msg, self.size)
            except (KeyError, ValueError, TypeError) as exc:
                self.registry.reject(server_round, pid, node, f"invalid reply: {exc}")
                continue
            # the node's best model by its own validation accuracy (a quitter keeps it); a
            # reply without one counts as -1, so such a node keeps its first upload
            val = float(metrics.get("acc-val", -1.0))
            val = -1.0 if not np.isfinite(val) else val
            if pid not in self.best or val > self.best[pid][0]:
                self.best[pid] = (val, good[pid], server_round)
        return good

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        good = self._valid(server_round, replies)
        pids = sorted(good)
        for pid in pids:
            self.personal[pid] = good[pid]
        if server_round == self.rounds:
            self._take_evaluations(replies, good)
        self.centres = {}
        record = {"algorithm": "ipfl", "round": server_round, "participants": pids,
                  "sent": sorted(self.sent.get(server_round, {})),
                  "lam": self.lam, "eta": self.eta, "metric": self.metric, "rule": self.rule,
                  "upload_digests": {str(p): digest(good[p]) for p in pids}}
        if len(pids) < 2:  # nobody to trade with: everyone trains locally next round
            record["reports"] = {k: v.tolist() for k, v in self.registry.reports(pids).items()}
            self._record(server_round, record, {p: good[p] for p in pids})
            return None, MetricRecord({"participants": len(pids)})
        X = np.stack([good[p] for p in pids])
        rep = self.registry.reports(pids)
        true = self.registry.truths(pids)
        N, c, K = rep["N"], rep["c"], rep["K"]
        from ..algorithms.ipfl import market_round

        # selection and payments on the reports; utilities with the truth (liars)
        market = ipfl.Market(N=N, c=c, K=K, lam=self.lam, true_N=true["N"], true_c=true["c"],
                             true_K=true["K"])
        out, centres = market_round(market, X, eta=self.eta, metric=self.metric,
                                    rule=self.rule, reference=self.reference)
        self.outcomes[server_round] = out
        self.inputs[server_round] = (pids, X, N, c, K)
        D = ipfl.pairwise_distances(X, self.metric, reference=self.reference)  # recorded
        quitters: list[int] = []
        for k, pid in enumerate(pids):
            self.centres[pid] = centres[k]
            self.ledger.append({"round": server_round, "pid": pid,
                                "bought_from": [pids[j] for j in out.sellers_of(k)],
                                "payment": float(out.payments[k]),
                                "utility": float(out.utilities[k]),
                                "gain": float(out.gains[k])})
            if self.allow_quit and out.utilities[k] < -1e-9:
                self.quit.add(pid)
                quitters.append(pid)
                val, model, kept_round = self.best[pid]
                self.personal[pid] = model  # its best model so far, not its last
                self.kept[pid] = {"round": kept_round, "acc_val": val,
                                  "quit_round": server_round}
                log(INFO, "round %s: client %s quits (round utility %.4g < 0) and keeps its "
                    "model of round %s (validation accuracy %.4g)", server_round, pid,
                    out.utilities[k], kept_round, val)
        record.update({
            "reports": {k: v.tolist() for k, v in rep.items()},
            "truth": {k: v.tolist() for k, v in true.items()},
            "distances": D.tolist(),
            "outcome": {"adjacency": out.adjacency.astype(int).tolist(),
                        "payments": out.payments.tolist(),
                        "utilities": out.utilities.tolist(), "gains": out.gains.tolist(),
                        "budget_residual": float(out.budget_residual)},
            "centre_digests": {str(p): digest(self.centres[p]) for p in pids},
            "quit": {str(p): self.kept[p] for p in quitters},
        })
        self._record(server_round, record, {p: good[p] for p in pids})
        return None, MetricRecord({"participants": len(pids),
                                   "budget-residual": out.budget_residual,
                                   "mean-utility": float(out.utilities.mean())})

    def _take_evaluations(self, replies: list[Message], good: dict) -> None:
        """The evaluations that came with the last round's valid uploads, for the nodes whose
        final model is that upload (a quitter keeping an earlier one is evaluated apart)."""
        for reply in replies:
            if reply.has_error():
                continue
            try:
                metrics = metrics_of(reply)
                pid = int(metrics.get("pid", -1))
                got = evaluation_of(metrics)
            except (TypeError, ValueError):  # none came: the node is sent an evaluation
                continue
            if pid in good and self.personal.get(pid) is good[pid]:
                self.evaluated[pid] = got


class CplStrategy(_Base):
    """CPL on a Flower federation (see the module docstring)."""

    def __init__(self, *, registry: Registry, c: float = paper.CPL_C,
                 budget: float = paper.CPL_BUDGET, alpha: float = paper.CPL_ALPHA,
                 rounds: int = 10, q_min: float = paper.CPL_Q_MIN,
                 pricing: str = "equilibrium", recorder: Callable | None = None,
                 timeout: float = 3600):
        super().__init__(registry, recorder, timeout)
        self.c, self.budget, self.alpha = c, budget, alpha
        self.rounds, self.q_min, self.pricing = rounds, q_min, pricing
        self.prices: dict[int, float] = {}
        self.q: dict[int, float] = {}
        self.a: dict[int, float] = {}
        self.G: dict[int, float] = {}
        self.participation: list[dict] = []
        self.game: cpl.Game | None = None

    def summary(self) -> None:
        log(INFO, "CplStrategy: budget=%s c=%s pricing=%s", self.budget, self.c, self.pricing)

    def price(self, grid: Grid, initial: ArrayRecord):
        """Every registered node's gradient norm at ``initial``: the one it reported when it
        registered (a node computes it at the run's initial model, which it builds exactly as
        the server does), or, from a node whose report has none, asked for now; then solve
        the pricing game on the reports (data amounts, gradient norms, valuations)."""
        pids = self.registry.live(grid)
        said = {p: self.registry.members[p].report["G"] for p in pids
                if "G" in self.registry.members[p].report}
        ask = [p for p in pids if p not in said]
        got = {}
        if ask:
            theta0 = record_to_flat(initial)[0]
            msgs = self._send(0, {p: Message(content(CONFIG, {"ask": "grad-norm"},
                                                     model=theta0),
                                             dst_node_id=self.registry.members[p].node,
                                             message_type=MessageType.QUERY) for p in ask})
            got = self._replies(0, grid.send_and_receive(msgs, timeout=self.registry.timeout),
                                self.registry.timeout)
        for pid in sorted({*said, *got}):
            try:
                if pid in got:
                    if got[pid].has_error():
                        raise ValueError(f"error: {short_reason(got[pid].error.reason)}")
                    said[pid] = metrics_of(got[pid])["G"]
                G = float(said[pid])
                if not (np.isfinite(G) and G > 0):
                    raise ValueError(f"reported G={G}; must be finite and > 0")
                self.G[pid] = G
            except (KeyError, TypeError, ValueError) as exc:
                self.registry.reject(0, pid, self.registry.members[pid].node, str(exc))
        pids = sorted(self.G)
        if not pids:
            raise RuntimeError("CPL: no node reported a gradient norm; nothing to price")
        rep = self.registry.reports(pids)
        a = rep["N"] / rep["N"].sum()
        self.game = cpl.Game(a=a, G=np.array([self.G[p] for p in pids]),
                             c=np.full(len(pids), self.c), v=rep["v"], budget=self.budget,
                             alpha=self.alpha, R=self.rounds, q_min=self.q_min)
        from ..algorithms.cpl import prices_and_q

        prices, q = prices_and_q(self.game, self.pricing)
        for k, p in enumerate(pids):
            self.prices[p], self.q[p], self.a[p] = float(prices[k]), float(q[k]), float(a[k])
        # the game is set: a node that rejoins keeps its price, a new partition id is refused
        self.registry.closed = "joined after the CPL prices were set"
        self.pricing_record = {"pids": pids, "reports": {k: v.tolist() for k, v in
                                                         rep.items()},
                               "G": [self.G[p] for p in pids], "c": self.c,
                               "G_asked": [p for p in pids if p in ask],  # not at registration
                               "budget": self.budget, "alpha": self.alpha,
                               "rounds": self.rounds, "q_min": self.q_min,
                               "pricing": self.pricing,
                               "prices": [self.prices[p] for p in pids],
                               "q": [self.q[p] for p in pids]}
        return self.pricing_record

    def configure_train(self, server_round, arrays, config, grid):
        self._begin(server_round)
        if self.shapes is None:
            _, self.shapes = record_to_flat(arrays)
        self._global = record_to_flat(arrays)[0]
        if server_round > 1:
            self._refresh(grid, server_round)  # newcomers don't block
        messages = {}
        for pid in self.registry.live(grid):
            if pid not in self.q:
                continue
            node = self.registry.members[pid].node
            cfg = {"server-round": server_round, "price": self.prices[pid], "q": self.q[pid],
                   "train-call": server_round - 1, "prox": 0.0}
            messages[pid] = Message(content(CONFIG, cfg, model=self._global),
                                    dst_node_id=node, message_type=MessageType.TRAIN)
        return self._send(server_round, messages)

    def aggregate_train(self, server_round, replies):
        w = self._global
        joined, uploads = [], {}
        for pid, msg in sorted(self._replies(server_round, replies).items()):
            node = self.sent[server_round][pid]
            if msg.has_error():
                self.registry.reject(server_round, pid, node,
                                     f"error: {short_reason(msg.error.reason)}")
                continue
            try:
                if not int(metrics_of(msg).get("participated", 0)):
                    continue
                flat = model_of(msg, self.size)
            except (KeyError, TypeError, ValueError) as exc:
                self.registry.reject(server_round, pid, node, f"invalid reply: {exc}")
                continue
            joined.append(pid)
            uploads[pid] = flat
        priced = sorted(self.q)  # absent clients' rows are ignored (weight 0)
        new = cpl.unbiased_aggregate(w, np.stack([uploads.get(p, w) for p in priced]),
                                     [p in uploads for p in priced],
                                     [self.a[p] for p in priced], [self.q[p] for p in priced])
        self.participation.append({"round": server_round, "participants": joined})
        self._record(server_round, {
            "algorithm": "cpl", "round": server_round,
            "sent": sorted(self.sent.get(server_round, {})), "participants": joined,
            "priced": priced, "a": [self.a[p] for p in priced],
            "q": [self.q[p] for p in priced],
            "upload_digests": {str(p): digest(uploads[p]) for p in joined},
            "global_before": digest(w), "global_after": digest(new.astype(np.float32))},
            {**uploads, "global_before": w})
        return flat_to_record(new, self.shapes), MetricRecord({"participants": len(joined)})
