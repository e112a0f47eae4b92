"""The one place where the Flower app meets the in-process learner (:class:`learning.session.
Session`, its public per-round API).

A demo node takes its partition and drawn type from a Session of the run's config; a node with
its own data has no Session, so its batch stream and gradient-norm sample come from the
Session's own methods applied to its local data. Either way a Flower node computes exactly
what the in-process learner computes for its client id (same partition, initial model, batches
and gradient-norm sample): the tests compare the two. Imports are lazy (torch is loaded only
when a node trains).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

__all__ = ["batch_rng", "demo_partition", "gradient_norm", "holdout", "initial_model",
           "model_name"]

# the streams the in-process learner spawns from its seed, in order
_STREAMS = ("data", "part", "model", "econ", "batch", "round")


def _stream(seed: int, name: str) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed).spawn(len(_STREAMS))[_STREAMS.index(name)]


def model_name(cfg, dataset: str | None = None) -> str:
    if cfg.model != "auto":
        return cfg.model
    return {"fashion-mnist": "simplecnn-mnist", "digits": "mlp"}.get(dataset or cfg.dataset,
                                                                     "logreg")


def holdout(indices: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, validation, own test) of one client's samples: 80 / 10 / 10, at least 1 each
    (the in-process learner's split)."""
    p = np.random.default_rng(rng).permutation(indices)
    n_hold = max(1, len(p) // 10) if len(p) >= 3 else 0
    return np.sort(p[2 * n_hold:]), np.sort(p[n_hold:2 * n_hold]), np.sort(p[:n_hold])


def demo_partition(cfg, pid: int, partitioner: str = "fedmarket") -> dict:
    """Client ``pid``'s share of the run's named data set (train, validation, own test split)
    and the type the in-process learner draws for it (c, K, v; its true c and K)."""
    from ..session import Session

    r = Session(cfg)
    d = r.data
    if partitioner == "flwr-datasets":
        from .datasets import flwr_partition

        part = flwr_partition(cfg, d.y_train, pid)
        train, val, own = holdout(part, np.random.default_rng([cfg.seed, pid]))
    else:
        train, val, own = r.train_parts[pid], r.val_parts[pid], r.test_parts[pid]
    mk = r.market
    return {"x_train": d.x_train[train], "y_train": d.y_train[train],
            "x_val": d.x_train[val], "y_val": d.y_train[val],
            "x_own_test": d.x_train[own], "y_own_test": d.y_train[own],
            "x_test": d.x_test, "y_test": d.y_test, "classes": int(d.classes),
            # the run's liar reports N x liar_N (of its own partition's N)
            "N": float(len(train)) * (cfg.liar_N if pid == cfg.liar else 1.0),
            "c": r.client_type(pid)["c"],
            "K": r.client_type(pid)["K"], "v": float(r.cpl_v[pid]),
            "true_c": float(mk.true_c[pid]), "true_K": float(mk.true_K[pid])}


def initial_model(cfg, input_shape: tuple, classes: int):
    """(module, stacked params of one client, flat float64 vector) of the run's initial model,
    seeded as the in-process learner seeds it."""
    import torch

    from .. import models

    torch.manual_seed(int(_stream(cfg.seed, "model").generate_state(1)[0]))
    model = models.build(model_name(cfg), tuple(input_shape), int(classes))
    params = models.init_stacked(model, 1)
    return model, params, models.flatten_params(params)[0].double().numpy()


def batch_rng(seed: int, pid: int, call: int) -> np.random.Generator:
    """Client ``pid``'s batch stream for its ``call``-th local training."""
    from ..session import Session

    return Session.batch_rng(SimpleNamespace(batch_seed=_stream(seed, "batch")), pid, call)


def gradient_norm(cfg, seed: int, pid: int, model, params, X, Y) -> float:
    """The norm of the client's loss gradient at ``params`` on one batch of its own data
    (CPL's G_n estimate, the in-process learner's sample)."""
    from ..session import Session

    local = SimpleNamespace(model=model, params0=params, X=X, Y=Y,
                            cfg=SimpleNamespace(batch=cfg.batch),
                            train_parts=[np.arange(len(Y))],
                            batch_rng=lambda _i, call: batch_rng(seed, pid, call))
    return float(Session.gradient_norms(local)[0])
