"""CPL: participation q from the pricing game (equilibrium, uniform or weighted prices; or
"full" q = 1), Bernoulli participation each round, unbiased aggregation
(:func:`mechanisms.cpl.unbiased_aggregate`). G_n is estimated from the gradient norms the
clients report at the initial model."""

from __future__ import annotations

import numpy as np

from mechanisms import cpl

from ..session import Round, Session

__all__ = ["game", "prices_and_q", "rounds"]


def game(s: Session) -> cpl.Game:
    cfg, m = s.cfg, s.clients
    return cpl.Game(a=s.N_rep / s.N_rep.sum(), G=s.gradient_norms(), c=np.full(m, cfg.cpl_c),
                    v=s.cpl_v, budget=cfg.cpl_budget, alpha=cfg.cpl_alpha, R=cfg.rounds,
                    q_min=cfg.cpl_q_min)


def prices_and_q(g: cpl.Game, pricing: str):
    """(prices, q) of a pricing scheme: equilibrium, uniform, weighted, or full (q = 1)."""
    if pricing == "full":
        q = np.ones(g.n)
        return cpl.inverse_price(g, q), q
    schemes = {"equilibrium": cpl.solve, "uniform": cpl.uniform_pricing,
               "weighted": cpl.weighted_pricing}
    if pricing not in schemes:  # e.g. a run folder's pricing.json, re-checked
        from mechanisms.errors import MarketInputError

        raise MarketInputError("pricing", f"unknown {pricing!r}; choose one of "
                                          f"{('full', *schemes)}")
    eq = schemes[pricing](g)
    return np.array(eq.prices), np.array(eq.q)


def rounds(s: Session):
    cfg, m = s.cfg, s.clients
    st = s.carry(lambda: {"glob": s.flatten(s.params0)[0]})
    g = game(s)
    prices, q = prices_and_q(g, cfg.cpl_pricing)
    U_expected = cpl.client_utilities(g, prices, q)
    # the CPL ledger (expected, per round): payment -P q (the server pays the client), cost
    # c q^2, and "gain" the client's valuation of the model, -v bound(q), so that
    # utility = gain - cost - payment = P q - c q^2 - v bound(q)
    cost = cfg.cpl_c * q**2
    payment = -prices * q
    gain = U_expected + cost + payment
    while True:
        S = s.round_rng.random(m) < q
        trained = s.train(s.broadcast(st["glob"]), active=S)
        st["glob"] = glob = s.unbiased_step(st["glob"], s.uploads(trained), S, q)
        ledger = {"gain": gain, "cost": cost, "payment": payment, "utility": U_expected,
                  "n_bought": np.zeros(m), "n_sold": S.astype(float)}
        yield Round(s.broadcast(glob), ledger, {"participated": S, "q": q})
