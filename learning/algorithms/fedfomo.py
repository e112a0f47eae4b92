"""FedFomo, first-order model optimisation (Zhang et al., ICLR 2021).

Each round every client trains its model, then receives M of the others' models, sampled by
its affinity row P_i (uniform at first), and weights each received model n by how much it
lowers the loss on the client's own validation split relative to the client's model at the
start of the round, per unit of parameter distance:
    w_n = max(0, L_i(theta_i^old) - L_i(theta_n)) / ||theta_n - theta_i^old||,
normalised; theta_i = theta_i^old + sum_n w_n (theta_n - theta_i^old); P_i += w. The client's
own trained model is always a candidate (so a client keeps its own progress when no one else
helps). If no candidate helps, the client keeps its round-start model, as in the paper and
the authors' code. M = 6 (``fedfomo_M``). The authors' code measures the loss on the training
split; here the validation split, as in the paper.
"""

from __future__ import annotations

import numpy as np
import torch

from ..session import Round, Session

__all__ = ["rounds", "weights"]


def weights(L_old: np.ndarray, L: np.ndarray, dist: np.ndarray, candidate: np.ndarray):
    """(m, m) normalised FedFomo weights; L_old (m,) loss of each client's round-start model
    on its own validation split, L[i, n] loss of model n on client i's split, dist[i, n] =
    ||theta_n - theta_i^old||, candidate[i, n] whether i received n."""
    gain = np.maximum(L_old[:, None] - L, 0.0) / np.maximum(dist, 1e-12)
    w = np.where(candidate, gain, 0.0)
    tot = w.sum(axis=1, keepdims=True)
    return np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)


def rounds(s: Session):
    m = s.clients
    M = min(s.cfg.fedfomo_M, m)
    P = np.ones((m, m))
    rng = np.random.default_rng(s.round_rng.integers(2**63))
    params = s.params0
    while True:
        old = s.flatten(params).double()
        up = s.uploads(s.train(params)).double()
        candidate = np.eye(m, dtype=bool)
        for i in range(m):
            pick = rng.choice(m, size=M, replace=False, p=P[i] / P[i].sum())
            candidate[i, pick] = True
        L_old = s.own_validation_losses(old)
        L = s.validation_losses(up).T  # (client i, model n)
        dist = (up[None, :, :] - old[:, None, :]).norm(dim=2).numpy()
        W = weights(L_old, L, dist, candidate)
        P += W
        helped = W.sum(axis=1) > 0
        # rows of W sum to 1 where some model helped: old_i + sum_n w_n (up_n - old_i)
        new = torch.where(torch.as_tensor(helped)[:, None],
                          torch.as_tensor(W, dtype=torch.float64) @ up, old)
        params = s.persist(s.stack(new.float()), up.float())
        yield Round(params, s.baseline_ledger(W + np.diag(~helped)), {"graph": W})
