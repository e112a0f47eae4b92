"""Accuracy as the iPFL paper measures it, for all clients' models at once.

* personalised accuracy: per-class accuracy of client i's model on the global test set,
  weighted by client i's train label distribution;
* own accuracy: on client i's own held-out split.

Batched: the clients' models share one architecture and their parameters are stacked on a
leading client axis, so one ``torch.func.vmap`` of ``functional_call`` evaluates every client
at once (on the same test inputs, or each on its own split). ``batched=False`` loops over the
clients instead (the reference the batched path is tested equal to, and the fallback for a
model vmap cannot batch).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, vmap

__all__ = ["CHUNK", "accuracy_on_parts", "chunk_size", "evaluate", "loss_on_parts",
           "predict_all"]

# Activations (float32 elements) one batched pass may hold: all m models on a chunk of inputs
# at once, the chunk sized so that m x chunk x (the widest layer's output per input) stays
# near this (16 MB). benchmarks/bench_learning.py measures it: on one CPU thread the CNN on
# Fashion-MNIST evaluates 2.5x faster in chunks of 128 than of 2048, the digits MLP 10x
# faster in chunks of 2048 than of 128.
CHUNK = 2**22


def chunk_size(model, x, m: int, budget: int = CHUNK) -> int:
    """Inputs per batched pass of ``m`` models: a power of two in [16, 4096] with
    m x chunk x (widest layer output per input) nearest ``budget`` elements."""
    widest = [int(np.prod(x.shape[1:]))]

    def hook(_mod, _inp, out):
        if isinstance(out, torch.Tensor):
            widest.append(out[0].numel())

    leaves = [mod for mod in model.modules() if not list(mod.children())]
    handles = [mod.register_forward_hook(hook) for mod in leaves]
    try:
        with torch.no_grad():
            model(x[:1])
    finally:
        for h in handles:
            h.remove()
    c = budget // max(1, m * max(widest))
    return int(2 ** np.clip(np.round(np.log2(max(c, 1))), 4, 12))


def _row(params, i) -> dict:
    return {k: v[i] for k, v in params.items()}


def _logits_all(model, params, X, chunk, batched: bool):
    """Yields (start, logits (m, n_chunk, classes)) of every client's model on X."""
    f = vmap(lambda p, x: functional_call(model, p, (x,)), in_dims=(0, None))
    m = next(iter(params.values())).shape[0]
    chunk = chunk or chunk_size(model, X, m)
    for s in range(0, X.shape[0], chunk):
        x = X[s:s + chunk]
        if batched:
            yield s, f(params, x)
        else:
            yield s, torch.stack([functional_call(model, _row(params, i), (x,))
                                  for i in range(m)])


def _vmappable(fn):
    """Run ``fn(batched=True)``; fall back to ``fn(batched=False)`` when vmap cannot batch
    the model (data-dependent control flow, an operator without a batching rule)."""
    try:
        return fn(True)
    except (RuntimeError, NotImplementedError) as exc:
        if "vmap" not in str(exc) and "batch" not in str(exc).lower():
            raise
        return fn(False)


@torch.no_grad()
def predict_all(model, params, X, chunk: int | None = None, batched: bool = True) -> torch.Tensor:
    """(m, n) predicted classes of every client's model on the same inputs X."""
    def go(b):
        return torch.cat([lg.argmax(-1) for _, lg in _logits_all(model, params, X, chunk, b)],
                         dim=1)

    return _vmappable(go) if batched else go(False)


@torch.no_grad()
def evaluate(model, params, data, label_dist: np.ndarray, own_test: list[np.ndarray],
             X_train, Y_train, chunk: int | None = None, batched: bool = True):
    """Returns (personalised_acc (m,), own_acc (m,), loss (m,) on the global test set).
    ``chunk``: test inputs per batched pass (None: :func:`chunk_size`)."""
    X_te = torch.as_tensor(data.x_test, device=X_train.device)  # where the models run
    y_te = torch.as_tensor(data.y_test, device=X_train.device)
    m = next(iter(params.values())).shape[0]
    chunk = chunk or chunk_size(model, X_te, m)

    def go(b):
        losses, correct = [], []
        for s, logits in _logits_all(model, params, X_te, chunk, b):
            y = y_te[s:s + chunk]
            losses.append(torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), y.expand(logits.shape[0], -1), reduction="none"))
            correct.append(logits.argmax(-1) == y)
        return (torch.cat(losses, dim=1).mean(dim=1).cpu().numpy(),
                torch.cat(correct, dim=1).cpu().numpy())

    loss, hit = _vmappable(go) if batched else go(False)  # hit: (m, n_test)
    classes = label_dist.shape[1]
    y_np = data.y_test
    per_class = np.stack([hit[:, y_np == c].mean(axis=1) if (y_np == c).any()
                          else np.zeros(hit.shape[0]) for c in range(classes)], axis=1)
    personalised = (per_class * label_dist).sum(axis=1)
    own = accuracy_on_parts(model, params, X_train, Y_train, own_test, chunk, batched)
    return personalised, own, loss


@torch.no_grad()
def accuracy_on_parts(model, params, X, Y, parts: list[np.ndarray], chunk: int | None = None,
                      batched: bool = True) -> np.ndarray:
    """(m,) accuracy of client i's model on the samples ``parts[i]`` of (X, Y); NaN where a
    client has no such samples.

    Batched: block b holds samples [b chunk, (b + 1) chunk) of every part still that long;
    only those clients' models run on it (vmap over models and inputs together), shorter
    parts are padded and masked, so unequal parts cost little more than their samples."""
    return _on_parts(model, params, X, Y, parts, chunk, batched, "accuracy")


@torch.no_grad()
def loss_on_parts(model, params, X, Y, parts: list[np.ndarray], chunk: int | None = None,
                  batched: bool = True) -> np.ndarray:
    """(m,) mean cross-entropy of client i's model on ``parts[i]`` (as
    :func:`accuracy_on_parts`)."""
    return _on_parts(model, params, X, Y, parts, chunk, batched, "loss")


def _per_sample(logits, y, what):
    if what == "accuracy":
        return (logits.argmax(-1) == y).double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             y.reshape(-1), reduction="none"
                                             ).reshape(y.shape).double()


def _on_parts(model, params, X, Y, parts, chunk, batched, what) -> np.ndarray:
    sizes = np.array([len(p) for p in parts])
    total = np.zeros(len(parts))
    chunk = chunk or chunk_size(model, X, len(parts))

    def loop():
        for i, idx in enumerate(parts):
            if idx.size:
                out = functional_call(model, _row(params, i), (X[idx],))
                total[i] = float(_per_sample(out, Y[idx], what).sum())

    def blocks():
        f = vmap(lambda p, x: functional_call(model, p, (x,)))
        for s in range(0, int(sizes.max(initial=0)), chunk):
            who = np.flatnonzero(sizes > s)
            width = int(min(chunk, (sizes[who] - s).max()))
            idx = np.zeros((who.size, width), dtype=np.int64)
            mask = np.zeros((who.size, width), dtype=bool)
            for r, i in enumerate(who):
                take = parts[i][s:s + width]
                idx[r, :take.size], mask[r, :take.size] = take, True
            idx_t = torch.as_tensor(idx, device=X.device)
            sub = {k: v[torch.as_tensor(who, device=X.device)] for k, v in params.items()}
            per = _per_sample(f(sub, X[idx_t]), Y[idx_t], what) * torch.as_tensor(
                mask, device=X.device)
            total[who] += per.sum(dim=1).cpu().numpy()

    def go(b):
        total[:] = 0.0
        (blocks if b else loop)()

    _vmappable(go) if batched else go(False)
    out = np.full(len(parts), np.nan)
    np.divide(total, sizes, out=out, where=sizes > 0)
    return out
