"""iPFL: the model-sharing market of Zhang et al. (Nature Communications 2025).

Where each formula lives (paper equation -> code):

==========================  ===============================================
Eq. 3  utility U_i          :func:`mechanisms.ipfl.money.utilities`
Eq. 4  sqrt gain g_i        :class:`mechanisms.gains.SqrtGain`
Eq. 5  social welfare       :func:`mechanisms.ipfl.money.welfare`
Eq. 8  prox-centre          :func:`mechanisms.distances.prox_centres`
Eq. 10 buyer problem phi_i  :func:`mechanisms.ipfl.selection.phi`
Eq. 11 local optimality     :func:`mechanisms.ipfl.selection.eq11_violations`
Eq. 12 remittances r_ij     :func:`mechanisms.ipfl.money.remittances`
Eq. 13 payments p_i         :func:`mechanisms.ipfl.money.payments`
Box 2  thresholds           :func:`mechanisms.ipfl.thresholds.thresholds`
Box 2  greedy selection     :func:`mechanisms.ipfl.selection.box2` / ``local``
==========================  ===============================================

Eq. 10 prices P_ij           :func:`mechanisms.ipfl.market.paper_prices_arrays`
Eqs. 10, 12 lam (N_j/N_i) d_ij :func:`mechanisms.ipfl.market.model_difference`
bought data n_i = sum a_ij N_j :func:`mechanisms.ipfl.money.bought`

Each equation is written once, over arrays: every function above accepts a :class:`Market`
or a :class:`MarketArrays` (a batch of markets with leading dimensions).

A mechanism is data (:mod:`mechanisms.ipfl.rules`): ``clear(market, D, rule=..., payments=...,
prices=...)`` takes built-in names or your own functions. Reference payment rules beside the
paper's: VCG (Clarke pivot), a Shapley split, a cost-plus posted price.

Many markets at once: ``clear_batch(MarketArrays(...), D, rule=..., payments=...,
prices=...)`` runs the same steps and the same rule functions over arrays; a rule of your
own joins when it is written over arrays and marked :func:`over_arrays`.
"""

from ..distances import pairwise_distances, prox_centres
from ..errors import MarketInputError
from ..gains import CallableGain, Gain, LogGain, PowerGain, SqrtGain
from .clear import BULK_RULES, Outcome, OutcomeBatch, clear, clear_batch
from .market import Market, MarketArrays, model_difference, over_arrays, paper_prices_arrays
from .money import (
    baseline_utilities,
    bought,
    gains,
    payments,
    remittances,
    reported_values,
    sharing_costs,
    utilities,
    welfare,
)
from .rules import (
    PAYMENT_RULES,
    PRICE_RULES,
    SELECTION_RULES,
    VCG_ENUMERATION_MAX,
    cost_plus,
    cost_plus_prices,
    cost_plus_remittances,
    load_callable,
    no_payments,
    paper_prices,
    resolve,
    shapley_remittances,
    share_all,
    vcg_payments,
)
from .selection import (
    BB_NODES_FLOOR,
    BB_NODES_PER_CANDIDATE,
    EXACT_METHODS,
    NODE_LIMIT,
    RULES,
    ExactSelection,
    bb_node_bound,
    box2,
    eq11_margins,
    eq11_violations,
    exact,
    exact_enumeration,
    local,
    phi,
    phi_subsets,
)
from .thresholds import MODES, thresholds

__all__ = [
    "BB_NODES_FLOOR",
    "BB_NODES_PER_CANDIDATE",
    "BULK_RULES",
    "EXACT_METHODS",
    "MODES",
    "NODE_LIMIT",
    "PAYMENT_RULES",
    "PRICE_RULES",
    "RULES",
    "SELECTION_RULES",
    "VCG_ENUMERATION_MAX",
    "CallableGain",
    "ExactSelection",
    "Gain",
    "LogGain",
    "Market",
    "MarketArrays",
    "MarketInputError",
    "Outcome",
    "OutcomeBatch",
    "PowerGain",
    "SqrtGain",
    "baseline_utilities",
    "bb_node_bound",
    "bought",
    "box2",
    "clear",
    "clear_batch",
    "cost_plus",
    "cost_plus_prices",
    "cost_plus_remittances",
    "eq11_margins",
    "eq11_violations",
    "exact",
    "exact_enumeration",
    "gains",
    "load_callable",
    "local",
    "model_difference",
    "no_payments",
    "over_arrays",
    "pairwise_distances",
    "paper_prices",
    "paper_prices_arrays",
    "payments",
    "phi",
    "phi_subsets",
    "prox_centres",
    "remittances",
    "reported_values",
    "resolve",
    "shapley_remittances",
    "share_all",
    "sharing_costs",
    "thresholds",
    "utilities",
    "vcg_payments",
    "welfare",
]
