"""pFedGraph (Ye et al. 2023): a collaboration graph whose row i is the solution of client i's
QP, personalised aggregates theta_bar_i = sum_j a_ij theta_j, local training from theta_bar_i.
"""

from __future__ import annotations

import numpy as np

from mechanisms import ipfl

from ..session import Round, Session

__all__ = ["project_simplex", "rounds"]


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of v onto the probability simplex (closed form)."""
    v = np.atleast_2d(np.asarray(v, dtype=float))
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, v.shape[1] + 1)
    rho = (u - css / k > 0).sum(axis=1)
    theta = css[np.arange(v.shape[0]), rho - 1] / rho
    return np.maximum(v - theta[:, None], 0.0)


def rounds(s: Session):
    """Graph a_i = Proj_simplex(p + alpha * sim_i), then local training from theta_bar_i with
    an L2 proximal term of weight prox_mu (the published method regularises with a cosine
    term)."""
    m = s.clients
    params = s.train(s.params0)
    p = s.N_rep / s.N_rep.sum()
    while True:
        up = s.uploads(params)
        sim = 1.0 - ipfl.pairwise_distances(up.double().numpy(), "cosine", reference=s.theta0)
        np.fill_diagonal(sim, 1.0)
        A = project_simplex(p[None, :] + s.cfg.pfedgraph_alpha * sim)
        centre = s.stack(s.aggregate(up, A))
        params = s.train(centre, centre=centre, prox=np.full(m, s.cfg.prox_mu))
        yield Round(params, s.baseline_ledger(A), {"graph": A})
