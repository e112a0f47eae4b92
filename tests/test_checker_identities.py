"""The properties the papers and theory imply beyond the stated theorems (issue 20, part 2):
the budget identity of Eqs. 3 and 5, Shapley's efficiency and symmetry, the greedy
selections' tie rule, CPL's threshold formula, and that a pure seller (K = 0) never buys
(spec, types). Each holds for the built-in subjects that
declare it (tests/test_contract.py) and rejects a known-bad variant here, with both engines.
"""

import dataclasses

import numpy as np
import pytest

from mechanisms import ipfl
from proofs import PROPERTIES, SUBJECTS, CplSolver, IpflMechanism, check

# The Hypothesis engine's searches for these known faults take 3-15 CPU s each: slow tier (the
# default tier keeps the batch engine on every fault, and test_contract's fast Hypothesis rows).
ENGINES = ["batch", pytest.param("hypothesis", marks=pytest.mark.slow)]
BUDGET = 300


class _NoSharingCost(IpflMechanism):
    """Eq. 3 without the sharing cost: U_i = G_i - p_i (the welfare still subtracts it)."""

    def settle(self, market, D, **kw):
        out = super().settle(market, D, **kw)
        return dataclasses.replace(out, utilities=np.asarray(out.gains) - out.payments)


def _shapley_scaled(market, A, D):
    """Shapley remittances paid at 90 %: the shares no longer add up to the coalition."""
    return 0.9 * ipfl.PAYMENT_RULES["shapley"](market, A, D)


def _shapley_favours_client_1(market, A, D):
    """Shapley remittances with 1 % of client 2's share moved to client 1 by every buyer of
    both: the sum is kept (efficiency holds), twins are paid differently."""
    R = np.array(ipfl.PAYMENT_RULES["shapley"](market, A, D), dtype=float)
    A = np.asarray(A, dtype=bool)
    if market.m >= 3:
        both = A[:, 1] & A[:, 2]
        moved = 0.01 * np.abs(R[:, 2]) + 1e-3
        R[:, 1] += np.where(both, moved, 0.0)
        R[:, 2] -= np.where(both, moved, 0.0)
    return R


def _local_ties_to_higher_index(market, D, T, P):
    """The local greedy scan with the clients relabelled in reverse: ties go to the higher
    index instead of the documented lower one."""
    rev = np.arange(market.m)[::-1]
    A = ipfl.local(np.asarray(T)[np.ix_(rev, rev)], np.asarray(market.N)[rev])
    return np.asarray(A)[np.ix_(rev, rev)]


def _local_pure_sellers_take_free_models(market, D, T, P):
    """The local scan with a pure seller's thresholds kept (the mutant pure_seller_buys): a
    pure seller offered a model at a price <= 0 takes it (T = inf)."""
    T = np.array(T, dtype=float)
    free = (np.asarray(market.K) == 0)[:, None] & (np.asarray(P) <= 0)
    np.fill_diagonal(free, False)
    T[free] = np.inf
    return ipfl.local(T, market.N)


class _HalfThreshold(CplSolver):
    """The bisection solver reporting v^t = 1/(2 lambda*) (the mutant cpl_threshold_half)."""

    def solve(self, game):
        eq = super().solve(game)
        if eq.multiplier is None or not eq.multiplier > 0:
            return eq
        return dataclasses.replace(eq, v_threshold=1.0 / (2.0 * eq.multiplier))


CASES = [
    pytest.param("budget_identity", _NoSharingCost("no-sharing-cost", "local"),
                 SUBJECTS["local"], id="budget-identity"),
    pytest.param("shapley_efficiency",
                 IpflMechanism("shapley-90", "local", payments=_shapley_scaled),
                 SUBJECTS["shapley"], id="shapley-efficiency"),
    pytest.param("shapley_symmetry",
                 IpflMechanism("shapley-favours-1", "local", payments=_shapley_favours_client_1),
                 SUBJECTS["shapley"], id="shapley-symmetry"),
    pytest.param("greedy_tie_rule",
                 IpflMechanism("ties-to-higher", _local_ties_to_higher_index),
                 SUBJECTS["local"], id="greedy-tie-rule"),
    pytest.param("pure_sellers_never_buy",
                 IpflMechanism("pure-sellers-buy", _local_pure_sellers_take_free_models),
                 SUBJECTS["local"], id="pure-sellers-never-buy"),
    # the local rule is Box 2 that never stops (the mutant box2_never_stops)
    pytest.param("box2_prefix", SUBJECTS["local"], SUBJECTS["box2"], id="box2-prefix"),
    pytest.param("cpl_threshold_formula", _HalfThreshold("half-threshold", "bisection"),
                 SUBJECTS["cpl-bisection"], id="cpl-threshold-formula"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("key", "bad", "good"), CASES)
def test_property_rejects_the_known_bad_variant(key, bad, good, engine):
    prop = PROPERTIES[key]
    rejected = check(bad, prop, max_examples=BUDGET, seed=0, engine=engine)
    assert rejected.verdict == "counterexample", (key, bad.name, rejected.verdict)
    assert rejected.counterexample.rerun() > 0
    accepted = check(good, prop, max_examples=BUDGET, seed=0, engine=engine)
    assert accepted.holds, (key, good.name, accepted.verdict, accepted.counterexample)
    assert accepted.discriminating > 0  # it could have failed, and did not


def test_the_symmetry_variant_keeps_efficiency():
    """The symmetry known-bad variant is not an efficiency failure in disguise."""
    bad = IpflMechanism("shapley-favours-1", "local", payments=_shapley_favours_client_1)
    assert check(bad, PROPERTIES["shapley_efficiency"], max_examples=100, seed=0,
                 engine="batch").holds


def test_a_nan_utility_breaks_the_budget_identity():
    class _NanUtility(IpflMechanism):
        def settle(self, market, D, **kw):
            out = super().settle(market, D, **kw)
            U = np.array(out.utilities, dtype=float)
            U[0] = np.nan
            return dataclasses.replace(out, utilities=U)

    r = check(_NanUtility("nan-utility", "local"), PROPERTIES["budget_identity"],
              max_examples=20, seed=0, engine="batch")
    assert r.verdict == "counterexample" and r.counterexample.violation == np.inf


@pytest.mark.parametrize(("subject", "key"), [
    ("local", "budget_identity"), ("vcg", "budget_identity"),
    ("shapley", "shapley_efficiency"), ("shapley", "shapley_symmetry"),
    ("box2", "greedy_tie_rule"), ("local", "greedy_tie_rule"),
    ("local", "pure_sellers_never_buy"), ("exact", "pure_sellers_never_buy"),
    ("box2", "box2_prefix"), ("local", "box2_prefix")])
def test_the_bulk_evaluation_gives_the_scalar_verdict_instance_by_instance(subject, key):
    """Each new property is one check (proofs.ipfl_properties): run by the batch engine on
    the whole batch cleared by ipfl.clear_batch, it reads the same on every drawn instance as
    on that market alone cleared by the subject's own settle (ipfl.clear)."""
    from proofs.batch import batch_rule, ipfl_sampler, vectorised
    from proofs.checker import evaluate_instance

    subj, prop = SUBJECTS[subject], PROPERTIES[key]
    bulk, sampler = vectorised(prop, subj), ipfl_sampler(key)
    assert bulk is not None and batch_rule(subj) is not None
    checked = 0
    for d in sampler.draw(np.random.default_rng(5), 150):
        out = bulk(d)
        viol, disc = out[0], out[2]
        for k, case in enumerate(sampler.cases(d)):
            amount, _, effective, discriminating = evaluate_instance(subj, prop, case)
            assert effective and (amount > 0) == (viol[k] > 0), (key, case)
            assert discriminating == bool(disc[k]), (key, case)
            checked += 1
    assert checked == 150
