"""FedAMP, attentive message passing (Huang et al., AAAI 2021).

Each round the server builds for every client i a personalised cloud model
u_i = sum_j xi_ij theta_j whose weights attend to similar clients, and the client trains
min F_i(theta) + (lam / 2) ||theta - u_i||^2 from its own model. The weights follow the
authors' iPFL code: xi_ij proportional to exp(sigma * cos_ij) over the others (cos_ij the
cosine similarity of the clients' updates from the initial model), scaled to 1 - self, and
xi_ii = self (sigma = 10, self = 0.3, lam = 0.01; ``fedamp_sigma``, ``fedamp_self``,
``fedamp_lam``). The paper's attention is the derivative of 1 - exp(-||w_i - w_j||^2 / sigma)
with a step alpha_k; the authors' cosine softmax is what their Fig. 2 numbers used. Round 0 is
plain local training.
"""

from __future__ import annotations

import numpy as np

from mechanisms import ipfl

from ..session import Round, Session

__all__ = ["attention", "rounds"]


def attention(cos: np.ndarray, sigma: float, self_weight: float) -> np.ndarray:
    """Row-stochastic weights: exp(sigma * cos) over the others scaled to 1 - self_weight,
    self_weight on the diagonal."""
    cos = np.asarray(cos, dtype=float)
    w = np.exp(sigma * (cos - cos.max(axis=1, keepdims=True)))
    np.fill_diagonal(w, 0.0)
    w = (1.0 - self_weight) * w / w.sum(axis=1, keepdims=True)
    np.fill_diagonal(w, self_weight)
    return w


def rounds(s: Session):
    cfg, m = s.cfg, s.clients
    params = s.train(s.params0)
    while True:
        up = s.uploads(params)
        params = s.persist(params, up)
        cos = 1.0 - ipfl.pairwise_distances(up.double().numpy(), "cosine", reference=s.theta0)
        W = attention(cos, cfg.fedamp_sigma, cfg.fedamp_self)
        u = s.stack(s.aggregate(up, W))
        params = s.train(params, centre=u, prox=np.full(m, cfg.fedamp_lam))
        yield Round(params, s.baseline_ledger(W), {"graph": W})
