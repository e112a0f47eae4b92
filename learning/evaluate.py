"""Accuracy as the iPFL paper measures it, for all clients' models at once.

* personalised accuracy: per-class accuracy of client i's model on the global test set,
  weighted by client i's train label distribution;
* own accuracy: on client i's own held-out split.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, vmap

__all__ = ["CHUNK", "accuracy_on_parts", "evaluate", "predict_all"]

# Test inputs per batched pass: all m models on CHUNK inputs at once. Small chunks keep the
# (m, CHUNK, ...) activations in cache; benchmarks/bench_learning.py measures the choice.
CHUNK = 128


@torch.no_grad()
def predict_all(model, params, X, chunk: int = CHUNK) -> torch.Tensor:
    """(m, n) predicted classes of every client's model on the same inputs X (batched)."""
    f = vmap(lambda p, x: functional_call(model, p, (x,)), in_dims=(0, None))
    preds = [f(params, X[s:s + chunk]).argmax(-1) for s in range(0, X.shape[0], chunk)]
    return torch.cat(preds, dim=1)


@torch.no_grad()
def evaluate(model, params, data, label_dist: np.ndarray, own_test: list[np.ndarray],
             X_train, Y_train, chunk: int = CHUNK):
    """Returns (personalised_acc (m,), own_acc (m,), loss (m,) on the global test set)."""
    X_te = torch.as_tensor(data.x_test)
    y_te = torch.as_tensor(data.y_test)
    f = vmap(lambda p, x: functional_call(model, p, (x,)), in_dims=(0, None))
    losses, correct = [], []
    for s in range(0, X_te.shape[0], chunk):
        logits = f(params, X_te[s:s + chunk])
        y = y_te[s:s + chunk]
        losses.append(torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), y.expand(logits.shape[0], -1), reduction="none"))
        correct.append(logits.argmax(-1) == y)
    loss = torch.cat(losses, dim=1).mean(dim=1).numpy()
    hit = torch.cat(correct, dim=1).numpy()  # (m, n_test)
    classes = label_dist.shape[1]
    y_np = data.y_test
    per_class = np.stack([hit[:, y_np == c].mean(axis=1) if (y_np == c).any()
                          else np.zeros(hit.shape[0]) for c in range(classes)], axis=1)
    personalised = (per_class * label_dist).sum(axis=1)
    own = accuracy_on_parts(model, params, X_train, Y_train, own_test)
    return personalised, own, loss


@torch.no_grad()
def accuracy_on_parts(model, params, X, Y, parts: list[np.ndarray]) -> np.ndarray:
    """(m,) accuracy of client i's model on the samples ``parts[i]`` of (X, Y); NaN where a
    client has no such samples."""
    out = np.empty(len(parts))
    for i, idx in enumerate(parts):
        if idx.size == 0:
            out[i] = np.nan
            continue
        pr = functional_call(model, {k: v[i] for k, v in params.items()}, (X[idx],))
        out[i] = float((pr.argmax(-1) == Y[idx]).float().mean())
    return out
