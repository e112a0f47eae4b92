"""Known-bad variants: the checker must reject broken rules an economist might prototype.

(The paper's rules are checked property by property in tests/test_contract.py.)
"""

import numpy as np
import pytest

from mechanisms import ipfl
from proofs import PROPERTIES, SUBJECTS, CheckerInputError, IpflMechanism, check


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


# ------------------------------------------------- broken mechanisms are never certified


def nan_payments(market, A, D):
    return np.full(market.m, np.nan)


def nan_rule(market, D, T, P):
    return np.full((market.m, market.m), np.nan)


def asserting_rule(market, D, T, P):
    assert market.m < 3, "my own sanity check"
    return ipfl.local(T, market.N)


@pytest.mark.parametrize("key", ["budget_balance", "individual_rationality"])
def test_nan_payments_are_an_error_of_the_rule(key):
    r = check(IpflMechanism("nan-pay", "local", payments=nan_payments), PROPERTIES[key],
              max_examples=20)
    assert r.verdict == "error" and not r.holds
    assert "nan-pay" in r.error and "nan_payments" in r.error and "finite" in r.error


def test_nan_adjacency_is_an_error_naming_the_rule():
    r = check(IpflMechanism("nan-rule", nan_rule), PROPERTIES["budget_balance"], max_examples=20)
    assert r.verdict == "error" and "nan-rule" in r.error and "0/1" in r.error


def test_a_users_own_exception_is_an_error_not_a_counterexample():
    r = check(IpflMechanism("strict", asserting_rule), PROPERTIES["budget_balance"],
              max_examples=100)
    assert r.verdict == "error" and r.counterexample is None
    assert "AssertionError" in r.error and "my own sanity check" in r.error
    assert r.error_instance is not None and r.error_instance.market.m == 3  # shrunk


def test_nan_violation_is_a_failure():
    from proofs import Property

    base = PROPERTIES["budget_balance"]

    def nan_violation(subject, case):
        subject.settle(case.market, case.D)
        return float("nan")

    prop = Property("nan", "nan", "-", "-", "-", "ipfl", base.instances, nan_violation)
    r = check(SUBJECTS["local"], prop, max_examples=10)
    assert r.verdict == "counterexample"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"tolerance": float("nan")}, "tolerance"), ({"tolerance": -1.0}, "tolerance"),
     ({"tolerance": float("inf")}, "tolerance"), ({"max_examples": 0}, "max_examples"),
     ({"max_examples": 2.5}, "max_examples"), ({"max_examples": True}, "max_examples"),
     ({"engine": "quantum"}, "engine")],
)
def test_bad_checker_arguments(kwargs, field):
    with pytest.raises(CheckerInputError, match=field):
        check(SUBJECTS["local"], PROPERTIES["budget_balance"], **kwargs)


def test_subject_and_property_family_must_match():
    with pytest.raises(CheckerInputError, match="subject"):
        check(SUBJECTS["local"], PROPERTIES["cpl_threshold"], max_examples=5)
    with pytest.raises(CheckerInputError, match="subject"):
        check(SUBJECTS["cpl-bisection"], PROPERTIES["budget_balance"], max_examples=5)


def test_budget_follows_the_active_profile(monkeypatch):
    from proofs import profiles

    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    r = check(SUBJECTS["local"], PROPERTIES["budget_balance"])
    budget = profiles.PROFILES["ci"]["max_examples"]
    # the first search draws the budget; top-ups follow until as many untargeted draws
    # were discriminating (every one, for budget balance)
    assert r.discriminating >= budget and r.examples >= budget
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "no-such-profile")
    with pytest.raises(profiles.ProfileError, match="no-such-profile"):
        check(SUBJECTS["local"], PROPERTIES["budget_balance"])


def test_counterexample_code_is_a_runnable_regression_test():
    r = check(SUBJECTS["local"], PROPERTIES["truthful_N_over"], max_examples=100)
    code = r.counterexample.code()
    ns: dict = {}
    exec(code, ns)  # the point of the test
    tests = [v for k, v in ns.items() if k.startswith("test_")]
    assert len(tests) == 1
    tests[0]()  # passes: the property still fails on the instance
    assert "assert prop.amount(subject, case) > 0" in code
