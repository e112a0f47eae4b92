"""The node's side of a round, on plain data (no flwr objects): what a ClientApp computes.

:func:`work` takes a request (the operation, the run and node configs, the message's config
and arrays, the node's own model from its last round) and returns the reply's arrays, metrics
and the node's new own model. The ClientApp (:mod:`learning.flower.app`) calls it in its own
process, or forwards the request to a warm node worker (:mod:`learning.flower.worker`) that
keeps torch, the node's data and its model loaded between messages.

Everything a node builds is cached per process: its data and type (:func:`node_state`), its
model and tensors; torch runs ``torch-threads`` threads (node config, default 1).
"""

from __future__ import annotations

from dataclasses import fields, replace
from functools import lru_cache

import numpy as np

__all__ = ["DEFAULT_CONFIG", "config_fields", "default_config", "train_config", "work"]

# the app's own defaults (a small demo), overridden by the run config
DEFAULT_CONFIG = dict(algorithm="ipfl", dataset="digits", clients=4, rounds=2, steps=20,
                      batch=32, lr=0.05, beta=0.5)

_MODELS: dict = {}


def config_fields(cls, run_config) -> dict:
    """The entries of a Flower run config that name fields of the dataclass ``cls``
    (``round-timeout`` or ``round_timeout``), keyed by field name."""
    known = {f.name for f in fields(cls)}
    pairs = ((str(k).replace("-", "_"), v) for k, v in dict(run_config).items())
    return {name: v for name, v in pairs if name in known}


@lru_cache(maxsize=1)
def default_config():
    """The app's default TrainConfig (:data:`DEFAULT_CONFIG`)."""
    from ..config import TrainConfig

    return TrainConfig(**DEFAULT_CONFIG)


def train_config(run_config: dict, default=None):
    """The run's TrainConfig: ``default`` (None: :func:`default_config`) with the run
    config's fields (hyphens or underscores) applied."""
    from ..config import TrainConfig

    if default is None:
        default = default_config()
    changes = config_fields(TrainConfig, run_config)
    return replace(default, **changes) if changes else default


def _flatten(arrays) -> np.ndarray:
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])
    if not np.isfinite(flat).all():
        raise ValueError("received parameters contain NaN or inf")
    return flat


def _node(request):
    """(cfg, node state, model, params template, X, Y), built once per process."""
    from .node import NodeSpec, node_state

    cfg = train_config(request["run_config"], request["default"])
    spec = NodeSpec.from_config(request["node_config"], cfg.clients)
    state = node_state(spec, cfg)
    key = (spec, cfg)
    if key not in _MODELS:
        import torch

        from .adapter import initial_model

        torch.set_num_threads(spec.torch_threads)
        model, params, _ = initial_model(cfg, state.x_train.shape[1:], state.classes)
        X, Y = torch.as_tensor(state.x_train), torch.as_tensor(state.y_train)
        _warm_up(cfg, model, params, X, Y)
        _MODELS.clear()
        _MODELS[key] = (model, params, X, Y)
    return (cfg, state, *_MODELS[key])


def _warm_up(cfg, model, params, X, Y) -> None:
    """One throwaway training step on a copy (no random stream touched), so that the first
    real round does not pay for torch's first-call set-up."""
    from ..local import SGDConfig, train_lockstep

    sgd = SGDConfig(1, cfg.batch, cfg.lr, cfg.momentum, cfg.weight_decay)
    idx = np.arange(min(cfg.batch, len(Y)))[None, None, :]
    train_lockstep(model, params, X, Y, idx, sgd, params, np.array([0.0]))


def _seed(cfg, state) -> int:
    return state.spec.seed if state.spec.seed is not None else cfg.seed


def _flat(params) -> np.ndarray:
    """One client's parameters as one flat float32 vector (the order of
    :func:`learning.models.flatten_params`, which :func:`_params` undoes)."""
    from ..models import flatten_params

    return flatten_params(params)[0].detach().numpy()


def _params(flat, template):
    import torch

    from ..models import unflatten_params

    return unflatten_params(torch.as_tensor(flat, dtype=torch.float32)[None], template)


def _train(request) -> dict:
    cfg, state, model, template, X, Y = _node(request)
    pid = state.spec.partition_id
    conf = request["conf"]
    call = int(conf.get("train-call", 0))
    metrics = {"pid": pid}
    if "q" in conf:  # CPL: the client's own Bernoulli(q) decision
        draw = np.random.default_rng([_seed(cfg, state), pid, call]).random()
        if draw >= float(conf["q"]):
            return {"metrics": {**metrics, "participated": 0}}
        metrics["participated"] = 1
    from ..local import SGDConfig, sample_batches, train_lockstep
    from .adapter import batch_rng

    received = _flatten(request["arrays"])
    prox = float(conf.get("prox", 0.0))
    own = request.get("own")  # the client's own model from its last round
    start = _flatten(own) if prox > 0 and own is not None else received
    sgd = SGDConfig(cfg.steps, cfg.batch, cfg.lr, cfg.momentum, cfg.weight_decay)
    batches = sample_batches([np.arange(len(Y))], sgd, [batch_rng(_seed(cfg, state), pid, call)])
    trained = train_lockstep(model, _params(start, template), X, Y, batches, sgd,
                             _params(received, template), np.array([prox]))
    arrays = [_flat(trained)]  # the model as one flat array (fewer objects per message)
    metrics["acc-val"] = _validate(model, trained, state)
    if conf.get("evaluate"):  # the run's last round: the final evaluation of this upload
        metrics.update(_evaluation(state, model, trained))
    return {"arrays": arrays, "metrics": metrics, "own": arrays}


def _validate(model, params, state) -> float:
    """Accuracy of the freshly trained model on the node's own validation split (what the
    in-process learner's ``Session.validate`` computes; -1 without a validation split): the
    server keeps each node's best upload by it, which a node that quits keeps."""
    if len(state.y_val) == 0:
        return -1.0
    import torch

    from ..evaluate import accuracy_on_parts

    acc = accuracy_on_parts(model, params, torch.as_tensor(state.x_val),
                            torch.as_tensor(state.y_val), [np.arange(len(state.y_val))])[0]
    return float(np.nan_to_num(acc, nan=-1.0))


def _query(request) -> dict:
    cfg, state, model, template, X, Y = _node(request)
    ask = str(request["conf"].get("ask", "type"))
    if ask == "type":
        report = state.report()
        if cfg.algorithm == "cpl":  # CPL's G at the run's initial model, built here alike
            report["G"] = _gradient_norm(cfg, state, model, template, [_flat(template)], X, Y)
        return {"metrics": report}
    if ask == "grad-norm":
        G = _gradient_norm(cfg, state, model, template, request["arrays"], X, Y)
        return {"metrics": {"pid": state.spec.partition_id, "G": G}}
    raise ValueError(f"query: unknown ask {ask!r}; the app asks 'type' or 'grad-norm'")


def _gradient_norm(cfg, state, model, template, arrays, X, Y) -> float:
    from .adapter import gradient_norm

    return gradient_norm(cfg, _seed(cfg, state), state.spec.partition_id, model,
                         _params(_flatten(arrays), template), X, Y)


def _evaluate(request) -> dict:
    _, state, model, template, _, _ = _node(request)
    params = _params(_flatten(request["arrays"]), template)
    return {"metrics": {"pid": state.spec.partition_id, **_evaluation(state, model, params)}}


def _evaluation(state, model, params) -> dict:
    """acc_own, loss and (with a reference test set) acc_personalised of ``params``."""
    from types import SimpleNamespace

    import torch

    from ..evaluate import evaluate

    has_ref = state.x_test is not None
    ref = SimpleNamespace(x_test=state.x_test if has_ref else state.x_own_test,
                          y_test=state.y_test if has_ref else state.y_own_test)
    pers, own, loss = evaluate(model, params, ref, state.label_dist[None],
                               [np.arange(len(state.y_own_test))],
                               torch.as_tensor(state.x_own_test),
                               torch.as_tensor(state.y_own_test))
    metrics = {"acc_own": float(own[0]), "loss": float(loss[0])}
    if has_ref:
        metrics["acc_personalised"] = float(pers[0])
    return metrics


OPS = {"train": _train, "query": _query, "evaluate": _evaluate}


def work(request: dict) -> dict:
    """One message's work: ``request`` has op ("train", "query", "evaluate"), run_config,
    node_config, default (a TrainConfig, or None for the app's default), conf (the message's
    config), arrays (list of arrays or None) and own (the node's model from its last round,
    or None). Returns a dict with metrics, and optionally arrays and own."""
    return OPS[request["op"]](request)
