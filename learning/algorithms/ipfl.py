"""iPFL (Box 1): round 0 is local training; each later round uploads, distances, clearing,
payments, prox-centres (Eq. 8) and proximal local training (Eq. 9).

:func:`market_round` is the server's part of one round, shared with the Flower strategy
(:class:`learning.flower.strategies.IpflStrategy`).
"""

from __future__ import annotations

import time

import numpy as np

from mechanisms import ipfl

from ..session import Round, Session

__all__ = ["market_round", "rounds"]


def market_round(market: ipfl.Market, uploads: np.ndarray, *, eta: float, metric: str,
                 rule: str, reference: np.ndarray | None, active=None, timings=None,
                 thresholds: str = "exact"):
    """Distances between ``uploads`` (m, p), clearing among the ``active`` clients (the others
    can neither buy nor sell), payments and prox-centres (Eq. 8).
    Returns (:class:`mechanisms.ipfl.Outcome`, centres (m, p))."""
    t0 = time.perf_counter()
    D = ipfl.pairwise_distances(uploads, metric, reference=reference)
    t1 = time.perf_counter()
    if active is not None:
        market = market.replace(K=np.where(active, market.K, 0.0),
                                c=np.where(active, market.c, np.inf))
    out = ipfl.clear(market, D, rule=rule, thresholds=thresholds)
    t2 = time.perf_counter()
    centres = ipfl.prox_centres(uploads, out.adjacency, market.N, eta, metric,
                                reference=reference)
    if timings is not None:
        timings["distances"] += t1 - t0
        timings["clearing"] += t2 - t1
        timings["prox"] += time.perf_counter() - t2
    return out, centres


def ledger(out: ipfl.Outcome) -> dict:
    # the sharing cost as the Outcome computed it (c_i times sales), never by subtraction
    # (gain - utility - payment leaves rounding residue such as -1.07e-14)
    return {"gain": out.gains, "cost": out.sharing_costs,
            "payment": out.payments, "utility": out.utilities,
            "n_bought": out.adjacency.sum(axis=1), "n_sold": out.adjacency.sum(axis=0)}


def rounds(s: Session):
    """With ``allow_quit``, a client whose round utility is negative quits: it keeps its best
    model so far by its own validation accuracy and no longer trades or trains."""
    cfg, m = s.cfg, s.clients
    params = s.train(s.params0)
    active = np.ones(m, dtype=bool)
    yield Round(params, s.zero_ledger(), {"active": active.copy()})
    while True:
        up_t = s.uploads(params)
        params = s.persist(params, up_t)
        up = up_t.double().numpy()
        out, centres = market_round(s.market, up, eta=cfg.eta, metric=cfg.metric,
                                    rule=cfg.rule, reference=s.theta0, active=active,
                                    timings=s.timings, thresholds=cfg.thresholds)
        if cfg.allow_quit:
            quit_now = active & (out.utilities < -1e-9)
            if quit_now.any():
                params = s.keep_best(params, quit_now)
                active &= ~quit_now
        params = s.train(params, centre=s.stack(centres), prox=np.full(m, cfg.lam / cfg.eta),
                         active=active)
        yield Round(params, ledger(out), {"active": active.copy(),
                                          "adjacency": out.adjacency})
