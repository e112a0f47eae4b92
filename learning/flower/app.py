"""A ready Flower app: ServerApp and ClientApp running iPFL or CPL with learning/'s training.

The ClientApp unpacks each message and does the node's work (:mod:`learning.flower.client`)
in its own process, or forwards it to the node's warm worker (:mod:`learning.flower.worker`)
when the node config names one.

``flwr run`` reads the ``[tool.flwr.app.config]`` of the app's pyproject (see
docs/howto-flower.md): every :class:`learning.config.TrainConfig` field (hyphens or
underscores) plus the Flower settings of :class:`FlowerConfig`. Each SuperNode names its own
data and type in its node config (:mod:`learning.flower.node`); the server learns only the
nodes' reports. :func:`make_apps` builds the pair for a given config in Python (used with
``flwr.simulation.run_simulation``).

Imports are lazy: loading this module imports flwr's app types only, and a node loads torch,
its data and its model once per process.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from logging import INFO

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MessageType
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.supercore import log

from mechanisms.errors import MarketInputError

__all__ = ["FlowerConfig", "client_app", "make_apps", "server_app"]


def _bool(name, value) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise MarketInputError(name, f"is {value!r}; must be true or false")


@dataclass(frozen=True)
class FlowerConfig:
    """The ServerApp's own settings (run config keys, hyphens as underscores).

    round_timeout: seconds a round waits for replies; a node silent past it is left out of the
    round (logged). registration_timeout: seconds to wait for ``min_nodes`` nodes to register
    (0 = all ``clients``) before the first round; in a simulation counted from the backend's
    first reply, not its start-up (:meth:`Registry.refresh`). out: the folder under which
    each run writes ``run-<run id>/`` ("" = write nothing). save_uploads: keep every
    round's uploads (not only their digests) so that the distances too can be re-checked."""

    round_timeout: float = 120.0
    registration_timeout: float = 120.0
    min_nodes: int = 0
    out: str = "results/flower"
    save_uploads: bool = False

    def __post_init__(self):
        for name in ("round_timeout", "registration_timeout"):
            if not float(getattr(self, name)) > 0:
                raise MarketInputError(name.replace("_", "-"), f"is {getattr(self, name)!r}; "
                                                               "must be > 0 seconds")
        if int(self.min_nodes) < 0:
            raise MarketInputError("min-nodes", f"is {self.min_nodes}; must be >= 0")

    @classmethod
    def from_run_config(cls, run_config, out: str | None = None) -> FlowerConfig:
        from .client import config_fields

        values = config_fields(cls, run_config)
        if out is not None and "out" not in values:
            values["out"] = out
        if "save_uploads" in values:
            values["save_uploads"] = _bool("save-uploads", values["save_uploads"])
        for name in ("round_timeout", "registration_timeout"):
            if name in values:
                values[name] = float(values[name])
        if "min_nodes" in values:
            values["min_nodes"] = int(values["min_nodes"])
        return cls(**values)


def _train_config(context: Context, default):
    from .client import train_config

    return train_config(context.run_config, default)


# ------------------------------------------------------------------------------ node side
def _client(op: str, msg: Message, context: Context, default) -> Message:
    """Unpack the message, do the node's work here or in its warm worker, pack the reply.

    With a worker this process imports nothing beyond flwr: Flower 1.42 starts it afresh for
    every message and loads the app from the run's unpacked FAB, uncompiled, so importing
    fedmarket's config here (scipy, pandas) cost seconds per message on a busy host."""
    from .wire import CONFIG, REPLY, content, model_from, unpack

    conf, model = unpack(msg.content, CONFIG)
    own = context.state.get("own")
    request = {"op": op, "run_config": dict(context.run_config),
               "node_config": dict(context.node_config), "default": default, "conf": conf,
               "arrays": None if model is None else [model_from(model)],
               "own": own.to_numpy_ndarrays() if own is not None else None}
    address = request["node_config"].get("worker")
    if address:
        from .worker import call

        reply = call(str(address), request)
    else:
        from .client import work

        reply = work(request)
    if reply.get("own") is not None:
        context.state["own"] = ArrayRecord(reply["own"])
    arrays = reply.get("arrays")
    flat = None if arrays is None else \
        np.concatenate([np.asarray(a, dtype=np.float32).ravel() for a in arrays])
    return Message(content(REPLY, reply["metrics"], model=flat), reply_to=msg)


def _client_train(msg: Message, context: Context, default) -> Message:
    return _client("train", msg, context, default)


def _client_query(msg: Message, context: Context, default) -> Message:
    return _client("query", msg, context, default)


def _client_evaluate(msg: Message, context: Context, default) -> Message:
    return _client("evaluate", msg, context, default)


# ------------------------------------------------------------------------------ server side
def _evaluate_round(grid, registry, models: dict, timeout: float, server_round: int,
                    done: dict | None = None) -> dict:
    """Each final model's evaluation by its node: ``done`` (pid -> metrics) those that came
    with the last round's replies; the others are sent an evaluation message."""
    from .strategies import evaluation_of, metrics_of, short_reason
    from .wire import CONFIG, content

    done = dict(done or {})
    models = {p: m for p, m in models.items() if p not in done}
    if not models:
        return done
    sent = {p: Message(content(CONFIG, {}, model=models[p]),
                       dst_node_id=registry.members[p].node, message_type=MessageType.EVALUATE)
            for p in registry.live(grid) if p in models}
    replies = grid.send_and_receive(list(sent.values()), timeout=timeout)
    out = done
    for p, reply in registry.collect(server_round, sent, replies, "evaluation",
                                     timeout).items():
        node = registry.members[p].node
        if reply.has_error():
            registry.reject(server_round, p, node,
                            f"evaluation error: {short_reason(reply.error.reason)}")
            continue
        try:
            out[p] = evaluation_of(metrics_of(reply))
        except (TypeError, ValueError) as exc:
            registry.reject(server_round, p, node, f"invalid evaluation reply: {exc}")
    return out


def _server_main(grid: Grid, context: Context, default, out: str | None):
    import flwr
    import numpy as np

    from .adapter import initial_model
    from .provenance import RunRecorder
    from .strategies import (
        CplStrategy,
        IpflStrategy,
        PollingGrid,
        Registry,
        record_to_flat,
    )

    grid = PollingGrid(grid)  # replies are picked up within 0.1 s, not 3 s
    cfg = _train_config(context, default)
    if cfg.algorithm not in ("ipfl", "cpl"):
        raise MarketInputError("algorithm", f"the Flower app runs 'ipfl' or 'cpl', not "
                                            f"{cfg.algorithm!r}")
    for name in ("payments", "prices"):  # IpflStrategy clears with the paper's money
        if getattr(cfg, name) != "paper":
            raise MarketInputError(name, f"is {getattr(cfg, name)!r}; the Flower app runs "
                                         "the paper's payments and prices")
    fc = FlowerConfig.from_run_config(context.run_config, out)
    registry = Registry(cfg.clients, timeout=fc.registration_timeout)
    wanted = fc.min_nodes or cfg.clients
    t0 = time.monotonic()
    registry.wait(grid, 0, wanted, t0 + fc.registration_timeout,
                  progress=lambda line: log(INFO, "registration: %s", line))
    pids = registry.live(grid)
    if len(pids) < wanted:
        waited = time.monotonic() - t0
        when = (f"within the registration timeout ({fc.registration_timeout:g} s)"
                if waited >= fc.registration_timeout else
                f"and every node of the simulation answered (after {waited:.2g} s)")
        raise RuntimeError(
            f"only {len(pids)} of the {wanted} clients needed registered {when} "
            f"(partition ids {pids}; refused: "
            f"{sorted(set(registry.refused.values()))}). Start the missing SuperNodes; in "
            f"simulation run `flwr run . --federation-config \"num-supernodes={cfg.clients}\"`"
            f"; or set min-nodes to trade among fewer")
    # the model's input shape: the one most registered nodes report; others are refused
    shapes = [(registry.members[p].report["shape"], registry.members[p].report["classes"])
              for p in pids]
    shape, classes = max(set(shapes), key=shapes.count)
    for p in pids:
        rep = registry.members[p].report
        if (rep["shape"], rep["classes"]) != (shape, classes):
            member = registry.members.pop(p)
            registry.refused[member.node] = "data shape"
            registry.reject(0, p, member.node, f"data of shape {rep['shape']} with "
                                               f"{rep['classes']} classes; the federation's "
                                               f"is {shape} with {classes}")
    _, _, theta0 = initial_model(cfg, tuple(json.loads(shape)), classes)
    # the strategies hold the model as one flat float32 array; it travels as that array's
    # bytes inside each message's one ConfigRecord (3 objects per message; over 5 MiB in parts
    # of a record each: learning.flower.wire)
    initial = ArrayRecord([theta0.astype(np.float32)])
    recorder = RunRecorder(fc.out, context.run_id, fc.save_uploads) if fc.out else None
    if recorder is not None:
        recorder.start({"run_id": context.run_id, "train_config": asdict(cfg),
                        "flower_config": asdict(fc), "run_config": dict(context.run_config),
                        "flwr": flwr.__version__, "registrations": [
                            {"pid": m.pid, "node": m.node, "report": m.report}
                            for m in registry.members.values()],
                        "rejected": list(registry.rejected)}, theta0)
    summary = {"run_id": context.run_id, "algorithm": cfg.algorithm}
    if cfg.algorithm == "ipfl":
        strategy = IpflStrategy(registry=registry, lam=cfg.lam, eta=cfg.eta, metric=cfg.metric,
                                rule=cfg.rule, reference=theta0, recorder=recorder,
                                timeout=fc.round_timeout, allow_quit=cfg.allow_quit,
                                rounds=cfg.rounds)
        t0 = time.perf_counter()
        strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds,
                       timeout=fc.round_timeout)
        seconds = time.perf_counter() - t0
        finals = flats = dict(strategy.personal)
        summary.update({"ledger": strategy.ledger, "quit": sorted(strategy.quit),
                        "kept": {str(p): v for p, v in sorted(strategy.kept.items())}})
    else:
        strategy = CplStrategy(registry=registry, c=cfg.cpl_c, budget=cfg.cpl_budget,
                               alpha=cfg.cpl_alpha, rounds=cfg.rounds, q_min=cfg.cpl_q_min,
                               pricing=cfg.cpl_pricing, recorder=recorder,
                               timeout=fc.round_timeout)
        pricing = strategy.price(grid, initial)
        if recorder is not None:
            recorder.pricing(pricing)
        t0 = time.perf_counter()
        result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds,
                                timeout=fc.round_timeout)
        seconds = time.perf_counter() - t0
        arrays = result.arrays if result.arrays is not None else initial
        glob = record_to_flat(arrays)[0]
        finals = {p: glob for p in strategy.q}
        flats = {"global": glob}
        summary.update({"participation": strategy.participation,
                        "q": {str(p): v for p, v in strategy.q.items()},
                        "prices": {str(p): v for p, v in strategy.prices.items()}})
    # suspect nodes (silent or unavailable, dead most likely) are not waited for again
    done = {p: m for p, m in getattr(strategy, "evaluated", {}).items() if p in finals}
    evals = _evaluate_round(grid, registry, finals, fc.round_timeout, cfg.rounds + 1, done)
    summary.update({
        "pids": sorted(evals), "strategy_seconds": seconds,
        "round_times": strategy.round_times,
        "acc_personalised": [evals[p].get("acc_personalised", float("nan"))
                             for p in sorted(evals)],
        "acc_own": [evals[p]["acc_own"] for p in sorted(evals)],
        "loss": [evals[p]["loss"] for p in sorted(evals)],
        "rejected": registry.rejected,
        "members": {str(p): m.node for p, m in registry.members.items()}})
    if recorder is not None:
        recorder.finish(summary, {str(k): v for k, v in flats.items()})
        summary["run_dir"] = str(recorder.dir)
    return summary


def make_apps(cfg=None, out: str | None = None, on_result=None):
    """A (ServerApp, ClientApp) pair for ``cfg`` (a TrainConfig; ``cfg.algorithm`` is "ipfl"
    or "cpl"; None: the app's default, overridden by the run config). ``out`` overrides the
    run config's output folder; ``on_result(summary)`` receives the ServerApp's summary (useful
    in an in-process simulation)."""
    server, client = ServerApp(), ClientApp()

    def config():  # None: the app's default (built where the work is done, see client.py)
        return cfg

    @server.main()
    def _main(grid: Grid, context: Context) -> None:
        summary = _server_main(grid, context, config(), out)
        if on_result is not None:
            on_result(summary)

    @client.train()
    def _train(msg: Message, context: Context) -> Message:
        return _client_train(msg, context, config())

    @client.query()
    def _query(msg: Message, context: Context) -> Message:
        return _client_query(msg, context, config())

    @client.evaluate()
    def _evaluate(msg: Message, context: Context) -> Message:
        return _client_evaluate(msg, context, config())

    return server, client


# the apps `flwr run` loads (configured by [tool.flwr.app.config]); loading them is cheap
server_app, client_app = make_apps()
