"""Server strategies (Message API) that run fedmarket's mechanisms on a Flower federation.

Node ids are opaque: every client echoes its partition id (``pid``) in its reply metrics, and
all state (personal models, ledger, who quit) is indexed by partition id.

* :class:`IpflStrategy` - each round: collect every node's parameters and reported type
  (N, c, K) from its reply, clear the market with :func:`mechanisms.ipfl.clear` among the
  nodes that answered with a valid reply, compute each node's prox-centre (Eq. 8), and send
  every node its own centre and its bill in a fresh RecordDict. Round 1 is local training
  (Box 1's round 0); its uploads clear the first market.
  With ``allow_quit`` (off by default, as in the authors' runs), a node whose round utility is
  negative quits and is not contacted again. A node that times
  out, crashes, or sends NaN / wrong-shape parameters is dropped from that round's graph (and
  logged); the payments of the others still sum to zero.
* :class:`CplStrategy` - registers the nodes once (a query for N and the gradient norm), solves
  the pricing game with :mod:`mechanisms.cpl`, sends every node its own price and q, lets each
  node decide to participate by its own Bernoulli(q) draw (no answer = not participating) and
  aggregates with the unbiased 1/q weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import INFO, WARNING

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log

from mechanisms import cpl, ipfl

from ..algorithms.ipfl import market_round

__all__ = ["CplStrategy", "IpflStrategy", "flat_to_record", "record_to_flat"]


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


def _metrics(msg: Message) -> dict:
    rec = msg.content.get("metrics")
    return dict(rec) if rec is not None else {}


class IpflStrategy(Strategy):
    """iPFL on a Flower federation (see the module docstring)."""

    def __init__(self, *, lam: float, eta: float = 5.0, metric: str = "cosine",
                 rule: str = "local", reference: np.ndarray | None = None,
                 allow_quit: bool = False):
        self.lam, self.eta, self.metric, self.rule = float(lam), float(eta), metric, rule
        self.allow_quit = bool(allow_quit)
        self.reference = reference
        self.shapes: list[tuple] | None = None
        self.centres: dict[int, np.ndarray] = {}
        self.personal: dict[int, np.ndarray] = {}
        self.node_of: dict[int, int] = {}  # pid -> node id
        self.quit: set[int] = set()
        self.ledger: list[dict] = []
        self.rejected: list[tuple[int, int, str]] = []  # (round, node, reason)
        self.outcomes: dict[int, ipfl.Outcome] = {}
        self.inputs: dict[int, tuple] = {}  # round -> (pids, uploads, N, c, K): re-checkable

    def summary(self) -> None:
        log(INFO, "IpflStrategy: lam=%s eta=%s metric=%s rule=%s", self.lam, self.eta,
            self.metric, self.rule)

    # ----------------------------------------------------------------------------- train
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        if self.shapes is None:
            base, self.shapes = record_to_flat(arrays)
            if self.reference is None:
                self.reference = base
        pid_of = {n: p for p, n in self.node_of.items()}
        messages = []
        for node in grid.get_node_ids():
            pid = pid_of.get(node)
            if pid is not None and pid in self.quit:
                continue
            centre = self.centres.get(pid) if pid is not None else None
            record = arrays if centre is None else flat_to_record(centre, self.shapes)
            prox = 0.0 if centre is None else self.lam / self.eta
            bill = self._last(pid, "payment")
            cfg = ConfigRecord({"server-round": server_round, "prox": prox,
                                "train-call": server_round - 1, "bill": bill,
                                "utility": self._last(pid, "utility")})
            # a fresh RecordDict per node: every node gets its own centre and bill
            messages.append(Message(RecordDict({"arrays": record, "config": cfg}),
                                    dst_node_id=node, message_type=MessageType.TRAIN))
        return messages

    def _last(self, pid, key) -> float:
        for row in reversed(self.ledger):
            if row["pid"] == pid:
                return float(row[key])
        return 0.0

    def _valid(self, server_round, replies):
        good = {}
        for msg in replies:
            node = msg.metadata.src_node_id
            if msg.has_error():
                self.rejected.append((server_round, node, f"error: {msg.error.reason}"))
                continue
            try:
                m = _metrics(msg)
                pid = int(m["pid"])
                flat, _ = record_to_flat(msg.content["arrays"], self.shapes)
                N, c, K = float(m["N"]), float(m["c"]), float(m["K"])
                if not (np.isfinite(N) and N > 0 and c >= 0 and np.isfinite(K) and K >= 0):
                    raise ValueError(f"bad reported type N={N}, c={c}, K={K}")
            except (KeyError, ValueError, TypeError) as exc:
                self.rejected.append((server_round, node, str(exc)))
                log(WARNING, "round %s: reply of node %s rejected: %s", server_round, node, exc)
                continue
            self.node_of[pid] = node
            good[pid] = (flat, N, c, K, m)
        return good

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        good = self._valid(server_round, replies)
        pids = sorted(good)
        for pid in pids:
            self.personal[pid] = good[pid][0]
        if len(pids) < 2:  # nobody to trade with: everyone trains locally next round
            self.centres.clear()
            return None, MetricRecord({"participants": len(pids)})
        X = np.stack([good[p][0] for p in pids])
        N = np.array([good[p][1] for p in pids])
        c = np.array([good[p][2] for p in pids])
        K = np.array([good[p][3] for p in pids])
        market = ipfl.Market(N=N, c=c, K=K, lam=self.lam)
        out, centres = market_round(market, X, eta=self.eta, metric=self.metric,
                                    rule=self.rule, reference=self.reference)
        self.outcomes[server_round] = out
        self.inputs[server_round] = (pids, X, N, c, K)
        for k, pid in enumerate(pids):
            self.centres[pid] = centres[k]
            self.ledger.append({"round": server_round, "pid": pid,
                                "bought_from": [pids[j] for j in out.sellers_of(k)],
                                "payment": float(out.payments[k]),
                                "utility": float(out.utilities[k]),
                                "gain": float(out.gains[k])})
            if self.allow_quit and out.utilities[k] < -1e-9:
                self.quit.add(pid)
        return None, MetricRecord({"participants": len(pids),
                                   "budget-residual": out.budget_residual,
                                   "mean-utility": float(out.utilities.mean())})

    # ---------------------------------------------------------------------------- evaluate
    def configure_evaluate(self, server_round, arrays, config, grid):
        return []

    def aggregate_evaluate(self, server_round, replies):
        return None


class CplStrategy(Strategy):
    """CPL on a Flower federation (see the module docstring)."""

    def __init__(self, *, c: float = 5.0, v: dict | None = None, budget: float = 15.0,
                 alpha: float = 1.82, rounds: int = 10, q_min: float = 0.01,
                 pricing: str = "equilibrium"):
        self.c, self.v, self.budget, self.alpha = c, v or {}, budget, alpha
        self.rounds, self.q_min, self.pricing = rounds, q_min, pricing
        self.prices: dict[int, float] = {}
        self.q: dict[int, float] = {}
        self.a: dict[int, float] = {}
        self.node_of: dict[int, int] = {}
        self.shapes = None
        self.participation: list[dict] = []
        self.rejected: list[tuple[int, int, str]] = []

    def summary(self) -> None:
        log(INFO, "CplStrategy: budget=%s c=%s pricing=%s", self.budget, self.c, self.pricing)

    def register(self, grid: Grid, timeout: float = 600) -> cpl.Equilibrium:
        """Ask every node for its data amount and gradient norm; solve the pricing game."""
        msgs = [Message(RecordDict({"config": ConfigRecord({"ask": "type"})}), dst_node_id=n,
                        message_type=MessageType.QUERY) for n in grid.get_node_ids()]
        info = {}
        for reply in grid.send_and_receive(msgs, timeout=timeout):
            if reply.has_error():
                continue
            m = _metrics(reply)
            info[int(m["pid"])] = (float(m["N"]), float(m["G"]), reply.metadata.src_node_id)
        pids = sorted(info)
        N = np.array([info[p][0] for p in pids])
        G = np.array([info[p][1] for p in pids])
        v = np.array([float(self.v.get(p, 0.0)) for p in pids])
        game = cpl.Game(a=N, G=G, c=np.full(len(pids), self.c), v=v, budget=self.budget,
                        alpha=self.alpha, R=self.rounds, q_min=self.q_min)
        scheme = {"equilibrium": cpl.solve, "uniform": cpl.uniform_pricing,
                  "weighted": cpl.weighted_pricing}[self.pricing]
        eq = scheme(game)
        for k, p in enumerate(pids):
            self.prices[p], self.q[p], self.a[p] = float(eq.prices[k]), float(eq.q[k]), \
                float(game.a[k])
            self.node_of[p] = info[p][2]
        return eq

    def configure_train(self, server_round, arrays, config, grid):
        if self.shapes is None:
            _, self.shapes = record_to_flat(arrays)
        self._global = record_to_flat(arrays)[0]
        messages = []
        for pid, node in self.node_of.items():
            cfg = ConfigRecord({"server-round": server_round, "price": self.prices[pid],
                                "q": self.q[pid], "train-call": server_round - 1,
                                "prox": 0.0})
            messages.append(Message(RecordDict({"arrays": arrays, "config": cfg}),
                                    dst_node_id=node, message_type=MessageType.TRAIN))
        return messages

    def aggregate_train(self, server_round, replies):
        w = self._global
        uploads = {}
        for msg in replies:
            if msg.has_error() or not msg.has_content():
                continue
            m = _metrics(msg)
            pid = int(m.get("pid", -1))
            if pid not in self.q or not int(m.get("participated", 0)):
                continue
            try:
                flat, _ = record_to_flat(msg.content["arrays"], self.shapes)
            except (KeyError, ValueError) as exc:
                self.rejected.append((server_round, msg.metadata.src_node_id, str(exc)))
                continue
            uploads[pid] = flat
        pids = sorted(self.q)
        U = np.stack([uploads.get(p, w) for p in pids])
        new = cpl.unbiased_aggregate(w, U, [p in uploads for p in pids],
                                     [self.a[p] for p in pids], [self.q[p] for p in pids])
        joined = sorted(uploads)
        self.participation.append({"round": server_round, "participants": joined})
        return flat_to_record(new, self.shapes), MetricRecord({"participants": len(joined)})

    def configure_evaluate(self, server_round, arrays, config, grid):
        return []

    def aggregate_evaluate(self, server_round, replies):
        return None
