"""FedAMP, attentive message passing (Huang et al., AAAI 2021).

Each round the server builds for every client i a personalised cloud model
u_i = sum_j xi_ij theta_j whose weights attend to similar clients, and the client trains
min F_i(theta) + (lam / 2) ||theta - u_i||^2 from its own model. Round 0 trains without the
proximal term (no u_i yet). Two attentions (``fedamp_attention``):

* ``"paper"``: FedAMP's own. With the attention-inducing function A(x) = 1 - exp(-x / sigma)
  (increasing and concave), the server's step U = W - alpha_k grad sum_{i<j} A(||w_i - w_j||^2)
  gives xi_ij = alpha_k A'(||w_i - w_j||^2) = (alpha_k / sigma) exp(-||w_i - w_j||^2 / sigma)
  for j != i and xi_ii = 1 - sum_{j != i} xi_ij (the paper's Eq. for u_i^k, the factor 2 of
  the gradient absorbed in alpha_k). Close clients weigh more; a far one (an attacker) tends
  to 0. The paper tunes sigma and alpha_k per data set; here sigma = ``fedamp_dsigma`` or, at
  0, the round's median squared distance between uploads (the median heuristic of kernel
  bandwidths), and alpha_k = ``fedamp_alpha`` * sigma / (m - 1), so that every xi_ii >=
  1 - fedamp_alpha >= 0. The client's proximal weight is ``fedamp_lam`` (the paper's
  lam / alpha_k; kept as one number so both attentions train alike).
* ``"heuristic"`` (default): HeurFedAMP, the paper's heuristic variant, as the iPFL authors'
  code runs it: xi_ij proportional to exp(sigma * cos_ij) over the others (cos_ij the cosine
  similarity of the clients' updates from the initial model), scaled to 1 - self, and
  xi_ii = self (sigma = 10, self = 0.3, lam = 0.01; ``fedamp_sigma``, ``fedamp_self``,
  ``fedamp_lam``). Their Fig. 2 numbers used it.
"""

from __future__ import annotations

import numpy as np

from mechanisms import ipfl

from ..session import Round, Session

__all__ = ["attention", "attention_paper", "rounds"]


def attention(cos: np.ndarray, sigma: float, self_weight: float) -> np.ndarray:
    """Row-stochastic weights: exp(sigma * cos) over the others scaled to 1 - self_weight,
    self_weight on the diagonal."""
    cos = np.asarray(cos, dtype=float)
    w = np.exp(sigma * (cos - cos.max(axis=1, keepdims=True)))
    np.fill_diagonal(w, 0.0)
    w = (1.0 - self_weight) * w / w.sum(axis=1, keepdims=True)
    np.fill_diagonal(w, self_weight)
    return w


def attention_paper(d2: np.ndarray, alpha: float, sigma: float = 0.0) -> np.ndarray:
    """FedAMP's weights from the (m, m) squared distances ``d2`` between the clients' models:
    xi_ij = alpha_k / sigma exp(-d2_ij / sigma) (j != i), xi_ii = 1 - sum of the others, with
    alpha_k = alpha sigma / (m - 1); sigma = 0 takes the median off-diagonal d2."""
    d2 = np.asarray(d2, dtype=float)
    m = d2.shape[0]
    if m == 1:
        return np.ones((1, 1))
    off = ~np.eye(m, dtype=bool)
    if sigma <= 0:
        sigma = float(np.median(d2[off]))
        if sigma <= 0:  # every model equal: nothing to attend to
            return np.full((m, m), 1.0 / m)
    w = np.where(off, alpha / (m - 1) * np.exp(-d2 / sigma), 0.0)
    np.fill_diagonal(w, 1.0 - w.sum(axis=1))
    return w


def rounds(s: Session):
    """Each round: local training (round 0 plain, later rounds proximal toward u_i), evaluation
    of the trained models, then the attention weights and the next cloud models u_i."""
    cfg, m = s.cfg, s.clients
    st = s.carry(lambda: {"params": s.params0, "u": None})
    while True:
        u = st["u"]
        trained = s.train(st["params"], centre=u,
                          prox=None if u is None else np.full(m, cfg.fedamp_lam))
        up = s.uploads(trained)
        st["params"] = s.persist(trained, up)
        if cfg.fedamp_attention == "paper":
            W = attention_paper(ipfl.pairwise_distances(up.double().numpy(), "l2sq"),
                                cfg.fedamp_alpha, cfg.fedamp_dsigma)
        else:
            cos = 1.0 - ipfl.pairwise_distances(up.double().numpy(), "cosine",
                                                reference=s.theta0)
            W = attention(cos, cfg.fedamp_sigma, cfg.fedamp_self)
        st["u"] = s.stack(s.aggregate(up, W))
        yield Round(trained, s.baseline_ledger(W), {"graph": W})
