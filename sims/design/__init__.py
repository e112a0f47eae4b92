"""Automated mechanism design for the iPFL market: search a space of payment rules (the
selection fixed) for the best trade-off between regret, budget and welfare, measured in bulk
through the checker's clearing, and certify what the search returns on held-out markets.

* :mod:`sims.design.space`: the linear family of payment rules (the paper's rule, cost-plus
  and no payments are points of it) and spaces of your own ("module:function");
* :mod:`sims.design.families`: families that change who trades (posted prices, reserve
  prices, trade reduction), on declared type spaces (:mod:`proofs.typespace`);
* :mod:`sims.design.evaluate`: markets (the checker's distribution or a file) and the
  measures (regret per type dimension and direction, IR, balance, welfare, participation);
* :mod:`sims.design.objective`: goals as phrases ("IR, budget balance, regret <= 1%");
* :mod:`sims.design.search`: seeded, resumable differential evolution (:func:`design`);
* :mod:`sims.design.frontier`: the regret / deficit / welfare table and figure;
* :mod:`sims.design.certify`: the checker's verdicts on held-out markets;
* :mod:`sims.design.cpl_pricing`: CPL posted-price shapes against the equilibrium;
* :mod:`sims.design.neural`: a small torch family trained RegretNet-style (imported on
  demand: it loads torch).
"""

from .errors import DesignInputError
from .evaluate import (
    COMBOS,
    REFERENCES,
    Evaluation,
    Markets,
    Mechanism,
    draw_markets,
    evaluate,
    markets_from,
)
from .families import PostedSpace, ReductionSpace, ReserveSpace
from .space import FEATURES, LinearSpace, UserSpace, linear_rule, load_rule, load_space, save_rule

__all__ = ["COMBOS", "FEATURES", "REFERENCES", "DesignInputError", "Evaluation",
           "LinearSpace", "Markets", "Mechanism", "PostedSpace", "ReductionSpace",
           "ReserveSpace", "UserSpace", "draw_markets", "evaluate", "linear_rule",
           "load_rule", "load_space", "markets_from", "save_rule"]
