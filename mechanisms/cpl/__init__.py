"""CPL: participation pricing for unbiased FL (Luo et al., ICDCS 2023), spec cpl.md.

Where each formula lives:

=========================================  ==============================================
unbiased aggregation w + sum a/q (w_n - w)  :func:`mechanisms.cpl.aggregation.unbiased_aggregate`
bound (Thm 1) sum K (1 - q)/q               :func:`mechanisms.cpl.game.bound`
client utility U_n                          :func:`mechanisms.cpl.game.client_utilities`
best response (cubic FOC)                   :func:`mechanisms.cpl.response.best_response`
inverse price P(q) = 2 c q - v K / q^2      :func:`mechanisms.cpl.game.inverse_price`
budget sum P q                              :func:`mechanisms.cpl.game.spend`
aggregation weights a, normalised          :func:`mechanisms.cpl.game.normalised_weights`
KKT q(mu), Problem P1'                      :func:`mechanisms.cpl.batch.q_of_mu`
threshold v^t = 1/(3 lambda*)               :func:`mechanisms.cpl.batch.v_threshold`
the Stackelberg solve (one or many games)   :func:`mechanisms.cpl.batch.solve_batch`
solvers (one game)                          :func:`mechanisms.cpl.equilibrium.solve`
what prices buy (one or many games)         :func:`mechanisms.cpl.batch.priced`
baselines                                   :func:`uniform_pricing`, :func:`weighted_pricing`
budget-calibrated posted price              :func:`posted_pricing`
posted price: least budget off the floor    :func:`mechanisms.cpl.batch.posted_floor_spend`
any pricing rule ``rule(game) -> prices``   :func:`apply_pricing`, :func:`apply_pricing_batch`
posted-price shapes                         :data:`mechanisms.cpl.batch.POSTED_SHAPES`
=========================================  ==============================================

Every formula is written once over leading batch dimensions: it takes a :class:`Game` or a
:class:`GameBatch` of B games, and the one-game functions (:func:`solve` with the
``"bisection"`` method, :func:`posted_pricing`, :func:`apply_pricing`) run the batch code on
a batch of one.

A pricing rule is data: a function of the game returning the price vector. Evaluate yours
with :func:`apply_pricing`; :data:`PRICING_RULES` holds the built-in posted prices.
"""

from .aggregation import unbiased_aggregate
from .batch import (
    ONE_SIDED_ROOT_STEPS,
    POSTED_SHAPES,
    ROOT_BISECTION_EVERY,
    ROOT_HALVING_SLACK,
    BatchEquilibrium,
    apply_pricing_batch,
    over_budget,
    posted_floor_spend,
    posted_pricing_batch,
    priced,
    solve_batch,
    v_threshold,
)
from .equilibrium import (
    LINESEARCH_BUDGET_RTOL,
    METHODS,
    PRICING_RULES,
    WORK_FIELDS,
    BudgetInfeasible,
    Equilibrium,
    SolverFailed,
    apply_pricing,
    check_solve,
    gradient_pricing,
    posted_pricing,
    q_of_mu,
    solve,
    spend_scale,
    uniform_pricing,
    weighted_pricing,
)
from .game import (
    Game,
    GameBatch,
    bound,
    bound_coefficient,
    client_utilities,
    inverse_price,
    normalised_weights,
    spend,
)
from .response import best_response, best_response_v0, unconstrained_response

__all__ = [
    "LINESEARCH_BUDGET_RTOL",
    "METHODS",
    "ONE_SIDED_ROOT_STEPS",
    "POSTED_SHAPES",
    "PRICING_RULES",
    "ROOT_BISECTION_EVERY",
    "ROOT_HALVING_SLACK",
    "WORK_FIELDS",
    "BatchEquilibrium",
    "BudgetInfeasible",
    "Equilibrium",
    "Game",
    "GameBatch",
    "SolverFailed",
    "apply_pricing",
    "apply_pricing_batch",
    "best_response",
    "best_response_v0",
    "bound",
    "bound_coefficient",
    "check_solve",
    "client_utilities",
    "gradient_pricing",
    "inverse_price",
    "normalised_weights",
    "over_budget",
    "posted_floor_spend",
    "posted_pricing",
    "posted_pricing_batch",
    "priced",
    "q_of_mu",
    "solve",
    "solve_batch",
    "spend",
    "spend_scale",
    "unbiased_aggregate",
    "unconstrained_response",
    "uniform_pricing",
    "v_threshold",
    "weighted_pricing",
]
