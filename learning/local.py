"""Local SGD for all clients at once.

Clients' parameters are stacked tensors (leading axis = client). One step of every client is a
single ``torch.func.vmap`` of the gradient of

    L_i(theta) + (prox / 2) ||theta - centre_i||^2  [ - cos_weight * cos(theta, centre_i) ]

over the client axis (lockstep), followed by SGD with momentum and weight decay applied to the
stacked tensors. :func:`train_sequential` does the same work client by client and is kept as the
reference: for the same batches it gives the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

__all__ = ["SGDConfig", "sample_batches", "train_lockstep", "train_sequential"]


@dataclass(frozen=True)
class SGDConfig:
    steps: int = 200
    batch: int = 64
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 1e-5


def sample_batches(parts: list[np.ndarray], cfg: SGDConfig, rngs,
                   sampling: str = "replacement") -> np.ndarray:
    """(steps, m, batch) indices into the training set, each client from its own stream:
    uniformly with replacement (``"replacement"``), or through shuffled passes over its data
    as a shuffling DataLoader does (``"epochs"``: each pass a fresh permutation, batches
    running on across passes)."""
    if sampling == "replacement":
        return np.stack([r.choice(p, size=(cfg.steps, cfg.batch), replace=True)
                         for p, r in zip(parts, rngs, strict=True)], axis=1)
    need = cfg.steps * cfg.batch
    out = []
    for p, r in zip(parts, rngs, strict=True):
        passes = -(-need // max(len(p), 1))
        out.append(np.concatenate([r.permutation(p) for _ in range(passes)])[:need]
                   .reshape(cfg.steps, cfg.batch))
    return np.stack(out, axis=1)


def _loss_fn(model, cosine: bool = False):
    def loss(params, x, y, centre, prox, cos_w):
        logits = functional_call(model, params, (x,))
        value = torch.nn.functional.cross_entropy(logits, y)
        sq = sum(((params[k] - centre[k]) ** 2).sum() for k in params)
        value = value + 0.5 * prox * sq
        if cosine:  # pFedGraph's similarity term: pull theta toward the direction of centre
            dot = sum((params[k] * centre[k]).sum() for k in params)
            n1 = torch.sqrt(sum((params[k] ** 2).sum() for k in params))
            n2 = torch.sqrt(sum((centre[k] ** 2).sum() for k in params))
            value = value - cos_w * dot / (n1 * n2 + 1e-8)
        return value

    return loss


def _sgd(params, grads, buf, cfg: SGDConfig):
    for k in params:
        g = grads[k] + cfg.weight_decay * params[k]
        buf[k].mul_(cfg.momentum).add_(g)
        params[k] = params[k] - cfg.lr * buf[k]
    return params


def train_lockstep(model, params, X, Y, batches, cfg: SGDConfig, centre=None, prox=None,
                   active=None, cos_weight=None):
    """Train the stacked ``params`` in place of copies; returns the new stacked params.

    X, Y: the whole training set as tensors; ``batches`` from :func:`sample_batches`.
    centre: stacked prox centres (default: none); prox: (m,) coefficients (0 = no term).
    active: (m,) bool, clients that train this round (others keep their parameters).
    cos_weight: (m,) weights of the term -w cos(theta, centre) (default: none).
    """
    m = next(iter(params.values())).shape[0]
    dev = X.device  # the params, X and Y on one device; everything made here goes there
    params = {k: v.clone() for k, v in params.items()}
    centre = centre if centre is not None else {k: v.detach().clone() for k, v in params.items()}
    prox_t = torch.zeros(m, device=dev) if prox is None else torch.as_tensor(
        prox, dtype=torch.float32, device=dev)
    cos_t = torch.zeros(m, device=dev) if cos_weight is None else torch.as_tensor(
        cos_weight, dtype=torch.float32, device=dev)
    grad_all = vmap(grad(_loss_fn(model, cos_weight is not None)), in_dims=(0, 0, 0, 0, 0, 0))
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    mask = None if active is None else torch.as_tensor(active, dtype=torch.bool, device=dev)
    idx_all = torch.as_tensor(batches, device=dev)
    for step in range(batches.shape[0]):
        idx = idx_all[step]
        g = grad_all(params, X[idx], Y[idx], centre, prox_t, cos_t)
        new = _sgd(dict(params), g, buf, cfg)
        if mask is not None:  # inactive clients keep their parameters
            new = {k: torch.where(mask.view(*([-1] + [1] * (v.dim() - 1))), v, params[k])
                   for k, v in new.items()}
        params = new
    return params


def train_sequential(model, params, X, Y, batches, cfg: SGDConfig, centre=None, prox=None,
                     active=None, cos_weight=None):
    """The reference path: one client after the other, same batches, same update."""
    m = next(iter(params.values())).shape[0]
    centre = centre if centre is not None else {k: v.detach().clone() for k, v in params.items()}
    prox_v = np.zeros(m) if prox is None else np.asarray(prox, dtype=float)
    cos_v = np.zeros(m) if cos_weight is None else np.asarray(cos_weight, dtype=float)
    g_one = grad(_loss_fn(model, cos_weight is not None))
    out = {k: v.clone() for k, v in params.items()}
    for i in range(m):
        if active is not None and not active[i]:
            continue
        p = {k: v[i].clone() for k, v in params.items()}
        c = {k: v[i] for k, v in centre.items()}
        buf = {k: torch.zeros_like(v) for k, v in p.items()}
        pr = torch.tensor(float(prox_v[i]), device=X.device)
        cw = torch.tensor(float(cos_v[i]), device=X.device)
        for step in range(batches.shape[0]):
            idx = torch.as_tensor(batches[step, i], device=X.device)
            g = g_one(p, X[idx], Y[idx], c, pr, cw)
            p = _sgd(p, g, buf, cfg)
        for k in out:
            out[k][i] = p[k]
    return out
