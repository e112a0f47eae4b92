"""iPFL (Box 1): each round is local training (proximal toward the last prox-centres from
the second round on, Eq. 9), then uploads, distances, clearing, payments and the next
prox-centres (Eq. 8); the market clears after every training, the last included.

:func:`market_round` is the server's part of one round, shared with the Flower strategy
(:class:`learning.flower.strategies.IpflStrategy`).
"""

from __future__ import annotations

import time

import numpy as np

from mechanisms import ipfl
from mechanisms.lookup import guarded

from ..session import Round, Session

__all__ = ["market_round", "rounds", "rules"]


def market_round(market: ipfl.Market, uploads: np.ndarray, *, eta: float, metric: str,
                 rule, reference: np.ndarray | None, active=None, timings=None,
                 thresholds: str = "exact", payments="paper", prices="paper"):
    """Distances between ``uploads`` (m, p), clearing among the ``active`` clients (the others
    can neither buy nor sell), payments and prox-centres (Eq. 8). ``rule``, ``payments`` and
    ``prices`` are any rules :func:`mechanisms.ipfl.clear` takes (names, "module:function" or
    functions; :func:`rules` gives a config's).
    Returns (:class:`mechanisms.ipfl.Outcome`, centres (m, p))."""
    t0 = time.perf_counter()
    D = ipfl.pairwise_distances(uploads, metric, reference=reference)
    t1 = time.perf_counter()
    if active is not None:
        market = market.replace(K=np.where(active, market.K, 0.0),
                                c=np.where(active, market.c, np.inf))
    out = ipfl.clear(market, D, rule=rule, payments=payments, prices=prices,
                     thresholds=thresholds)
    t2 = time.perf_counter()
    centres = ipfl.prox_centres(uploads, out.adjacency, market.N, eta, metric,
                                reference=reference)
    if timings is not None:
        timings["distances"] += t1 - t0
        timings["clearing"] += t2 - t1
        timings["prox"] += time.perf_counter() - t2
    return out, centres


def rules(cfg) -> dict:
    """The config's selection, payment and price rules as :func:`market_round` takes them:
    a built-in name as it is, a "module:function" imported once and guarded (a rule of the
    user's own that raises is a :class:`mechanisms.errors.RuleFailed` naming it)."""
    out = {}
    for kind, spec in (("rule", cfg.rule), ("payments", cfg.payments),
                       ("prices", cfg.prices)):
        label, fn = ipfl.resolve(kind, spec)
        out[kind] = guarded(kind, label, fn) if ":" in spec else spec
    return out


def ledger(out: ipfl.Outcome) -> dict:
    # the sharing cost as the Outcome computed it (c_i times sales), never by subtraction
    # (gain - utility - payment leaves rounding residue such as -1.07e-14)
    return {"gain": out.gains, "cost": out.sharing_costs,
            "payment": out.payments, "utility": out.utilities,
            "n_bought": out.adjacency.sum(axis=1), "n_sold": out.adjacency.sum(axis=0)}


def rounds(s: Session):
    """Each round: local training (round 0 from the initial model, later rounds proximal
    toward the last clearing's prox-centres, Eq. 9), evaluation of the trained models, then
    the market on their uploads: distances, clearing, payments and the next prox-centres
    (Eq. 8). R rounds are R trainings and R clearings, the last included, as in the authors'
    code. With ``allow_quit``, a client whose round utility is negative quits after that
    round: it keeps its best model so far by its own validation accuracy (this round's
    trained model included) and no longer trades or trains."""
    cfg, m = s.cfg, s.clients
    st = s.carry(lambda: {"params": s.params0, "centres": None,
                          "active": np.ones(m, dtype=bool)})
    chosen = rules(cfg)
    while True:
        params, centres, active = st["params"], st["centres"], st["active"]
        trained = s.train(params, centre=None if centres is None else s.stack(centres),
                          prox=None if centres is None else np.full(m, cfg.lam / cfg.eta),
                          active=active)
        up_t = s.uploads(trained)
        params = s.persist(trained, up_t)
        out, centres = market_round(s.market, up_t.double().numpy(), eta=cfg.eta,
                                    metric=cfg.metric, reference=s.theta0,
                                    active=active, timings=s.timings,
                                    thresholds=cfg.thresholds, **chosen)
        trained_by = active.copy()
        if cfg.allow_quit:
            quit_now = active & (out.utilities < -1e-9)
            if quit_now.any():
                s.validate(trained, active)  # this round's models count toward the best
                params = s.keep_best(params, quit_now)
                active &= ~quit_now
        st.update(params=params, centres=centres, active=active)
        yield Round(trained, ledger(out), {"active": trained_by,
                                           "adjacency": out.adjacency})
