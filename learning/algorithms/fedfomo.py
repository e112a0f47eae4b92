"""FedFomo, first-order model optimisation (Zhang et al., ICLR 2021), as the iPFL authors'
code runs it.

Each round every client trains its model, is evaluated on it, and then receives M distinct
models sampled by its affinity row P_i (uniform at first; the client's own model can be drawn
like any other). It weights each received model n by how much it lowers the loss on the
client's own validation split relative to the client's model at the start of the round, per
unit of parameter distance to the client's trained model:
    w_n = max(0, L_i(theta_i^old) - L_i(theta_n)) / ||theta_i - theta_n + 1e-6||
(the 1e-6 added to every coordinate inside the norm, as in the authors' code), normalised;
theta_i = sum_n w_n theta_n; P_i += w. If no received model helps, the client goes back to
its round-start model. The ledger counts every model a client received (the authors' graph:
all M sampled, helpful or not). M = 6 (``fedfomo_M``). Declared difference: the authors
measure the loss on the training split; here the validation split, as in the paper.
"""

from __future__ import annotations

import numpy as np
import torch

from ..session import Round, Session

__all__ = ["distances", "rounds", "weights"]


def distances(trained: torch.Tensor, up: torch.Tensor) -> np.ndarray:
    """(m, m) ||theta_i - theta_n + 1e-6||: client i's trained model against upload n."""
    return (trained[:, None, :] - up[None, :, :] + 1e-6).norm(dim=2).numpy()


def weights(L_old: np.ndarray, L: np.ndarray, dist: np.ndarray, candidate: np.ndarray):
    """(m, m) normalised FedFomo weights; L_old (m,) loss of each client's round-start model
    on its own validation split, L[i, n] loss of model n on client i's split, dist[i, n] from
    :func:`distances`, candidate[i, n] whether i received n."""
    gain = np.maximum(L_old[:, None] - L, 0.0) / dist
    w = np.where(candidate, gain, 0.0)
    tot = w.sum(axis=1, keepdims=True)
    return np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)


def rounds(s: Session):
    m = s.clients
    M = min(s.cfg.fedfomo_M, m)
    st = s.carry(lambda: {"P": np.ones((m, m)),
                          "rng": np.random.default_rng(s.round_rng.integers(2**63)),
                          "params": s.params0})
    P, rng = st["P"], st["rng"]  # updated in place
    while True:
        old = s.flatten(st["params"]).double()
        trained = s.train(st["params"])
        own = s.flatten(trained).double()
        up = s.uploads(trained).double()
        candidate = np.zeros((m, m), dtype=bool)
        for i in range(m):
            candidate[i, rng.choice(m, size=M, replace=False, p=P[i] / P[i].sum())] = True
        L_old = s.own_validation_losses(old)
        L = s.validation_losses(up).T  # (client i, model n)
        W = weights(L_old, L, distances(own, up), candidate)
        P += W
        helped = W.sum(axis=1) > 0
        new = torch.where(torch.as_tensor(helped)[:, None],
                          torch.as_tensor(W, dtype=torch.float64) @ up, old)
        st["params"] = s.persist(s.stack(new.float()), up.float())
        yield Round(trained, s.baseline_ledger(candidate), {"graph": W})
