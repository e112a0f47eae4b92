"""pFedGraph (Ye et al., ICML 2023): a collaboration graph, personalised aggregates
theta_bar_i = sum_j a_ij theta_j, and local training from theta_bar_i with a similarity term.

Row i of the graph solves client i's QP
    min_a  alpha ||a||^2 - sum_j a_j (2 alpha p_j + cos_ij)   over the simplex,
whose solution is the Euclidean projection a_i = Proj_simplex(p + cos_i / (2 alpha)), with
p_j = N_j / sum N and cos_ij the cosine similarity of the clients' updates from the initial
model (alpha = ``pfedgraph_alpha``, 0.8). Local training minimises
L_i(theta) - lam * cos(theta, theta_bar_i) (lam = ``pfedgraph_lam``, 0.01; the authors' iPFL
code adds +lam * cos, i.e. ``pfedgraph_lam = -0.01``, which the ``published`` preset uses).
"""

from __future__ import annotations

import numpy as np

from mechanisms import ipfl

from ..session import Round, Session

__all__ = ["graph", "project_simplex", "rounds"]


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of v onto the probability simplex (closed form)."""
    v = np.atleast_2d(np.asarray(v, dtype=float))
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, v.shape[1] + 1)
    rho = (u - css / k > 0).sum(axis=1)
    theta = css[np.arange(v.shape[0]), rho - 1] / rho
    return np.maximum(v - theta[:, None], 0.0)


def graph(p: np.ndarray, cos: np.ndarray, alpha: float) -> np.ndarray:
    """The graph rows Proj_simplex(p + cos_i / (2 alpha))."""
    return project_simplex(np.asarray(p)[None, :] + np.asarray(cos) / (2.0 * alpha))


def rounds(s: Session):
    """Each round: local training (round 0 from the initial model without the similarity term,
    later rounds from theta_bar_i with it), evaluation of the trained models, then the graph
    and the next aggregates theta_bar_i."""
    m = s.clients
    p = s.N_rep / s.N_rep.sum()
    st = s.carry(lambda: {"centre": None})
    while True:
        centre = st["centre"]
        if centre is None:
            trained = s.train(s.params0)
        else:
            trained = s.train(centre, centre=centre, cos_weight=np.full(m, s.cfg.pfedgraph_lam))
        up = s.uploads(trained)
        cos = 1.0 - ipfl.pairwise_distances(up.double().numpy(), "cosine", reference=s.theta0)
        np.fill_diagonal(cos, 1.0)
        A = graph(p, cos, s.cfg.pfedgraph_alpha)
        st["centre"] = s.stack(s.aggregate(up, A))
        yield Round(trained, s.baseline_ledger(A), {"graph": A})
