"""Lazy influence scores for pFedLIA (spec lia.md, "Score").

From a joint model theta_0 (after FedAvg warm-up), every client j takes k local epochs over one
fixed random batch of its own data (lazy), or trains to convergence (exact, for comparison),
giving theta_j. The influence of j on i is I(i, j) = L(theta_0; Z_i) - L(theta_j; Z_i), mean
loss on i's validation set Z_i. All m models are evaluated on all m validation sets in one
batched pass (vmap over models, one concatenated validation tensor), not m^2 Python calls,
and the scores come from those per-sample losses by :func:`mechanisms.lia.influence`;
:func:`influence_per_pair` is the per-pair reference.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, vmap

from mechanisms import lia

from .local import SGDConfig, train_lockstep

__all__ = ["influence_batched", "influence_per_pair", "influence_scores", "partial_models"]


def partial_models(model, theta0, X, Y, parts, rng, *, k: int = 5, batch: int = 64,
                   lr: float = 0.01, exact: bool = False, max_steps: int = 2000,
                   tol: float = 1e-4):
    """theta_j for every client, all clients in lockstep.

    Lazy: k epochs over one fixed random batch (k SGD steps on the same batch).
    Exact: full-batch-free SGD over the client's data until the training loss of every client
    changes by less than ``tol`` over 100 steps, or ``max_steps``.
    Returns (stacked params, SGD steps taken).
    """
    cfg = SGDConfig(steps=k, batch=batch, lr=lr, momentum=0.0, weight_decay=0.0)
    if not exact:
        fixed = np.stack([rng.choice(p, size=batch, replace=len(p) < batch) for p in parts])
        batches = np.repeat(fixed[None], k, axis=0)
        return train_lockstep(model, theta0, X, Y, batches, cfg), k
    params, steps, prev = theta0, 0, None
    chunk = SGDConfig(steps=100, batch=batch, lr=lr, momentum=0.0, weight_decay=0.0)
    while steps < max_steps:
        b = np.stack([rng.choice(p, size=(100, batch), replace=True) for p in parts], axis=1)
        params = train_lockstep(model, params, X, Y, b, chunk)
        steps += 100
        loss = _client_losses(model, params, X, Y, parts)
        if prev is not None and np.max(np.abs(loss - prev)) < tol:
            break
        prev = loss
    return params, steps


@torch.no_grad()
def _client_losses(model, params, X, Y, parts):
    f = vmap(lambda p, x, y: torch.nn.functional.cross_entropy(
        functional_call(model, p, (x,)), y), in_dims=(0, 0, 0))
    size = min(len(p) for p in parts)
    idx = torch.as_tensor(np.stack([p[:size] for p in parts]))
    return f(params, X[idx], Y[idx]).numpy()


@torch.no_grad()
def influence_batched(model, theta0, thetas, X, Y, val_parts) -> np.ndarray:
    """I(i, j) for all pairs: every model on the concatenated validation sets at once."""
    owner = np.concatenate([np.full(len(p), i) for i, p in enumerate(val_parts)])
    idx = torch.as_tensor(np.concatenate(val_parts))
    Xv, Yv = X[idx], Y[idx]
    m = len(val_parts)
    f = vmap(lambda p, x: functional_call(model, p, (x,)), in_dims=(0, None))
    logits = f(thetas, Xv)  # (m models, n_val, classes)
    per = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), Yv.expand(m, -1), reduction="none").double().numpy()
    base = torch.nn.functional.cross_entropy(
        functional_call(model, {k: v[0] for k, v in theta0.items()}, (Xv,)), Yv,
        reduction="none").double().numpy()
    return lia.influence(base, per, owner)


@torch.no_grad()
def influence_per_pair(model, theta0, thetas, X, Y, val_parts) -> np.ndarray:
    """The same scores, one (model, validation set) evaluation at a time (reference)."""
    m = len(val_parts)
    I = np.zeros((m, m))
    base = {k: v[0] for k, v in theta0.items()}
    for i, p in enumerate(val_parts):
        idx = torch.as_tensor(p)
        L0 = float(torch.nn.functional.cross_entropy(functional_call(model, base, (X[idx],)),
                                                     Y[idx]))
        for j in range(m):
            pj = {k: v[j] for k, v in thetas.items()}
            Lj = float(torch.nn.functional.cross_entropy(functional_call(model, pj, (X[idx],)),
                                                         Y[idx]))
            I[i, j] = L0 - Lj
    return I


def influence_scores(model, theta0, X, Y, train_parts, val_parts, rng, **kwargs):
    """Lazy (default) or exact (``exact=True``) influence matrix; returns (I, steps)."""
    thetas, steps = partial_models(model, theta0, X, Y, train_parts, rng, **kwargs)
    return influence_batched(model, theta0, thetas, X, Y, val_parts), steps
