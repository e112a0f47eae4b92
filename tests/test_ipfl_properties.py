"""Known-bad variants: the checker must reject broken rules an economist might prototype.

(The paper's rules are checked property by property in tests/test_contract.py.)
"""

import numpy as np
import pytest

from mechanisms import ipfl
from proofs import PROPERTIES, IpflMechanism, check


def flat_fee(market, A, D):
    """Each buyer pays every seller the seller's stand-alone value g_i(N_j)."""
    G1 = market.gain.value(market.N[None, :], market.K[:, None], market.N[:, None])
    return np.where(A, G1, 0.0)


def fee_skimming(market, A, D):
    """Eq. 12 remittances, but the server keeps 10% of what sellers receive."""
    R = ipfl.remittances(market, A, D)
    return R.sum(axis=1) - 0.9 * R.sum(axis=0)


def take_everything(market, D, T, P):
    """Buy every model on offer whatever its price (ignores thresholds)."""
    A = np.isfinite(P) & (market.K[:, None] > 0)
    np.fill_diagonal(A, False)
    return A


@pytest.mark.parametrize(
    ("mechanism", "key"),
    [
        pytest.param(IpflMechanism("flat-fee", "local", remittances=flat_fee),
                     "individual_rationality", id="flat-fee-breaks-IR"),
        pytest.param(IpflMechanism("skim", "local", payments=fee_skimming),
                     "budget_balance", id="skimming-breaks-budget-balance"),
        pytest.param(IpflMechanism("greedy-all", take_everything),
                     "individual_rationality", id="buy-all-breaks-IR"),
        pytest.param(IpflMechanism("greedy-all", take_everything),
                     "local_optimality", id="buy-all-breaks-eq11"),
    ],
)
def test_checker_rejects_broken_rules(mechanism, key):
    report = check(mechanism, PROPERTIES[key], max_examples=300, seed=0)
    assert report.verdict == "counterexample"
    assert report.counterexample.rerun() > 0


def test_user_rule_equal_to_the_paper_passes():
    """The same checks accept a user rule that reimplements the paper's (no false alarms)."""

    def my_local(market, D, T, P):
        return ipfl.local(T, market.N)

    mine = IpflMechanism("mine", my_local)
    for key in ("budget_balance", "individual_rationality", "local_optimality"):
        assert check(mine, PROPERTIES[key], max_examples=100, seed=0).holds


def test_bad_user_rule_output_is_named():
    bad = IpflMechanism("bad", lambda market, D, T, P: np.ones((2, 2), bool))
    mk = ipfl.Market(N=[1, 1, 1], c=[0, 0, 0], K=[1, 1, 1])
    with pytest.raises(ipfl.MarketInputError, match="rule"):
        bad.settle(mk, np.zeros((3, 3)))
