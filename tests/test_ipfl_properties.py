"""Budget balance (Eq. 13) and individual rationality (Thm 1) on random markets, all rules,
each with the known-bad variant the same check must reject."""

import numpy as np
import pytest
from hypothesis import find, given, settings

from mechanisms import ipfl
from proofs.strategies import ipfl_instances

RULES = list(ipfl.RULES)


def budget_imbalance(payments) -> float:
    p = np.asarray(payments)
    return float(abs(p.sum()) / max(1.0, np.abs(p).sum()))


def ir_violation(utilities, scale) -> float:
    """Most negative utility beyond float noise (0 when IR holds)."""
    return float(max(0.0, -(np.asarray(utilities) + 1e-9 * scale).min()))


@pytest.mark.parametrize("rule", RULES)
@given(inst=ipfl_instances(max_m=7))
def test_budget_balance(rule, inst):
    market, D = inst
    out = ipfl.clear(market, D, rule=rule)
    assert budget_imbalance(out.payments) < 1e-12
    assert np.isfinite(out.payments).all() and np.isfinite(out.utilities).all()


@pytest.mark.parametrize("rule", RULES)
@given(inst=ipfl_instances(max_m=7))
def test_individual_rationality_with_true_reports(rule, inst):
    """Thm 1: U_i >= 0 when reports are true and d >= 0 (preconditions built into the draw)."""
    market, D = inst
    out = ipfl.clear(market, D, rule=rule)
    assert ir_violation(out.utilities, 1.0 + np.abs(out.gains).max()) == 0.0
    # every remittance covers the seller's cost: the final marginal stays above the price
    i, j = np.nonzero(out.adjacency)
    assert (out.remittances[i, j] >= market.c[j] - 1e-9 * (1 + out.gains[i])).all()


@pytest.mark.parametrize("rule", RULES)
def test_ir_needs_nonnegative_distances(rule):
    """Known-bad variant (dropped precondition): with negative distances the checker finds
    a client with U_i < 0; one neighbour alone gives U_i = lam (N_j/N_i) d_ij < 0."""

    def violates(inst):
        market, D = inst
        out = ipfl.clear(market, D, rule=rule, allow_negative_distances=True)
        return ir_violation(out.utilities, 1.0 + np.abs(out.gains).max()) > 0

    _market, D = find(
        ipfl_instances(negative_distances=True, max_m=4),
        violates,
        settings=settings(max_examples=2000, database=None, derandomize=True),
    )
    assert (np.asarray(D) < 0).any()


def _flat_fee_utilities(market, D, rule):
    """Known-bad payment rule: each buyer pays the seller its stand-alone value g_i(N_j)."""
    out = ipfl.clear(market, D, rule=rule)
    A = out.adjacency
    R = np.where(A, market.gain.value(market.N[None, :], market.K[:, None], market.N[:, None]), 0)
    p = R.sum(axis=1) - R.sum(axis=0)
    return ipfl.utilities(market, A, p), out


def test_ir_check_rejects_a_flat_fee_rule():
    def violates(inst):
        market, D = inst
        U, out = _flat_fee_utilities(market, D, "local")
        return ir_violation(U, 1.0 + np.abs(out.gains).max()) > 0

    find(ipfl_instances(max_m=5), violates,
         settings=settings(max_examples=500, database=None, derandomize=True))


def test_budget_check_rejects_a_fee_skimming_rule():
    """Known-bad variant: a server that keeps 10% of every remittance is not budget balanced."""

    def imbalanced(inst):
        market, D = inst
        out = ipfl.clear(market, D)
        p = out.remittances.sum(axis=1) - 0.9 * out.remittances.sum(axis=0)
        return budget_imbalance(p) >= 1e-12

    find(ipfl_instances(max_m=5), imbalanced,
         settings=settings(max_examples=500, database=None, derandomize=True))
