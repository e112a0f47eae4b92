"""A ready Flower app: ServerApp and ClientApp running iPFL or CPL with learning/'s training.

``flwr run`` reads the ``[tool.flwr.app.config]`` of the app's pyproject (see
docs/howto-flower.md); every :class:`learning.algorithms.TrainConfig` field can be set there
(hyphens or underscores). :func:`make_apps` builds the pair for a given config in Python (used
with ``flwr.simulation.run_simulation``). The same apps run unchanged on a real deployment
(SuperLink + SuperNodes): clients identify themselves by the ``partition-id`` of their node
config.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from ..config import TrainConfig
from ..session import Session
from .strategies import CplStrategy, IpflStrategy, record_to_flat

__all__ = ["client_app", "make_apps", "server_app"]


def _config(context: Context, default: TrainConfig) -> TrainConfig:
    known = {f.name: f.type for f in fields(TrainConfig)}
    changes = {}
    for k, v in dict(context.run_config).items():
        name = str(k).replace("-", "_")
        if name in known:
            changes[name] = v
    return replace(default, **changes) if changes else default


@lru_cache(maxsize=4)
def _setup(cfg: TrainConfig) -> Session:
    """Data, partition, model and economics, exactly as the in-process learner builds them."""
    return Session(cfg)


def _client_train(msg: Message, context: Context, default: TrainConfig) -> Message:
    cfg = _config(context, default)
    r = _setup(cfg)
    pid = int(context.node_config["partition-id"])
    conf = dict(msg.content["config"])
    call = int(conf.get("train-call", 0))
    metrics = {"pid": pid, **r.client_type(pid)}
    if cfg.algorithm == "cpl":
        draw = np.random.default_rng([cfg.seed, pid, call]).random()
        if draw >= float(conf["q"]):  # the client's own Bernoulli(q) decision
            return Message(RecordDict({"metrics": MetricRecord({**metrics, "participated": 0})}),
                           reply_to=msg)
        metrics["participated"] = 1
    received, _ = record_to_flat(msg.content["arrays"])
    prox = float(conf.get("prox", 0.0))
    own = context.state.get("own")  # the client's own model from its last round
    if prox > 0 and own is not None:
        start, centre = record_to_flat(own)[0], received
    else:
        start, centre = received, received
    trained = r.train_client(pid, start, centre, prox, call)
    arrays = ArrayRecord([v[0].detach().numpy() for v in r.stack(trained[None]).values()])
    context.state["own"] = arrays
    return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord(metrics)}),
                   reply_to=msg)


def _client_query(msg: Message, context: Context, default: TrainConfig) -> Message:
    cfg = _config(context, default)
    r = _setup(cfg)
    pid = int(context.node_config["partition-id"])
    G = float(r.gradient_norms()[pid])
    return Message(RecordDict({"metrics": MetricRecord({"pid": pid, **r.client_type(pid),
                                                         "G": G})}), reply_to=msg)


def _server_main(grid: Grid, context: Context, default: TrainConfig, out: str | None):
    cfg = _config(context, default)
    out = dict(context.run_config).get("out", out)
    r = _setup(cfg)
    initial = ArrayRecord([v[0].detach().numpy() for v in r.params0.values()])
    if cfg.algorithm == "ipfl":
        strategy = IpflStrategy(lam=cfg.lam, eta=cfg.eta, metric=cfg.metric, rule=cfg.rule,
                                reference=r.theta0, allow_quit=cfg.allow_quit)
        t0 = time.perf_counter()
        strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds)
        seconds = time.perf_counter() - t0
        pids = sorted(strategy.personal)
        flat = np.stack([strategy.personal[p] for p in pids])
        summary = {"ledger": strategy.ledger, "rejected": strategy.rejected, "quit":
                   sorted(strategy.quit)}
    elif cfg.algorithm == "cpl":
        strategy = CplStrategy(c=cfg.cpl_c, v={i: float(x) for i, x in enumerate(r.cpl_v)},
                               budget=cfg.cpl_budget, alpha=cfg.cpl_alpha, rounds=cfg.rounds,
                               q_min=cfg.cpl_q_min, pricing=cfg.cpl_pricing)
        strategy.register(grid)
        t0 = time.perf_counter()
        result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds)
        seconds = time.perf_counter() - t0
        glob = record_to_flat(result.arrays)[0]
        pids = list(range(cfg.clients))
        flat = np.stack([glob] * cfg.clients)
        summary = {"participation": strategy.participation, "q": strategy.q,
                   "prices": strategy.prices}
    else:
        raise ValueError(f"algorithm: the Flower app runs 'ipfl' or 'cpl', not "
                         f"{cfg.algorithm!r}")
    pers, own, loss = r.evaluate(r.stack(flat), pids)
    summary.update({"pids": pids, "acc_personalised": pers.tolist(), "acc_own": own.tolist(),
                    "loss": loss.tolist(), "strategy_seconds": seconds})
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "flower_result.json").write_text(json.dumps(summary, default=float))
        np.save(Path(out, "flower_params.npy"), flat)
    return summary


def make_apps(cfg: TrainConfig, out: str | None = None) -> tuple[ServerApp, ClientApp]:
    """A (ServerApp, ClientApp) pair for ``cfg`` (``cfg.algorithm`` is "ipfl" or "cpl")."""
    server, client = ServerApp(), ClientApp()

    @server.main()
    def _main(grid: Grid, context: Context) -> None:
        _server_main(grid, context, cfg, out)

    @client.train()
    def _train(msg: Message, context: Context) -> Message:
        return _client_train(msg, context, cfg)

    @client.query()
    def _query(msg: Message, context: Context) -> Message:
        return _client_query(msg, context, cfg)

    return server, client


# the apps `flwr run` loads (configured by [tool.flwr.app.config])
server_app, client_app = make_apps(TrainConfig(algorithm="ipfl", dataset="digits", clients=4,
                                               rounds=2, steps=20, batch=32, lr=0.05,
                                               beta=0.5))
