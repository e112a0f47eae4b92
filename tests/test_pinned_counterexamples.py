"""Counterexamples the checker found, pinned with @example so they run on every build.

Each test runs only its pinned instances (the explicit phase) and asserts the property still
FAILS there, next to the contract suite that asserts it holds under its preconditions.
"""

import numpy as np
from hypothesis import Phase, example, given, settings

from mechanisms import cpl, ipfl
from proofs import PROPERTIES, SUBJECTS
from proofs.cpl_properties import CplCase
from proofs.ipfl_properties import IpflCase

pinned = settings(phases=[Phase.explicit], database=None)


def _z(m):
    return np.zeros((m, m))


def broken(key, subject, case):
    return PROPERTIES[key].amount(SUBJECTS[subject], case) > 0


# Box 2 stops at the first failure and leaves out seller 3, which still fits (Eq. 11).
@pinned
@example(IpflCase(ipfl.Market(N=[100, 1000, 2000, 100], c=[0, 4, 0.5, 0.5], K=[1e6, 0, 0, 0],
                              lam=0.0), _z(4)))
@given(PROPERTIES["local_optimality"].instances())
def test_box2_breaks_eq11(case):
    assert broken("local_optimality", "box2", case)
    assert not broken("local_optimality", "local", case)


# Negative distance: one neighbour alone gives U = lam (N_j/N_i) d_ij < 0.
@pinned
@example(IpflCase(ipfl.Market(N=[20, 26], c=[0, 0], K=[1e3, 1e3], lam=3.0),
                  np.array([[0.0, -1.0], [0.0, 0.0]])))
@given(PROPERTIES["ir_negative_distances"].instances())
def test_ir_fails_with_negative_distances(case):
    for rule in ("box2", "local", "exact"):
        assert broken("ir_negative_distances", rule, case)


# Reporting more data: bought at a higher marginal, the liar's true utility rises (the regret
# search finds the factor itself).
@pinned
@example(IpflCase(ipfl.Market(N=[20, 20], c=[0, 0], K=[1e3, 1e3], lam=0.0), _z(2), 0))
@given(PROPERTIES["truthful_N_over"].instances())
def test_overreporting_n_pays(case):
    for rule in ("box2", "local", "exact", "vcg", "shapley"):
        assert broken("truthful_N_over", rule, case)


# Understating the gain scale: a buyer pays its reported marginal gains, so reporting a
# smaller K buys the same models for less (the paper's rule pays this liar; VCG does not).
@pinned
@example(IpflCase(ipfl.Market(N=[20, 20], c=[0, 0], K=[1e3, 1e3], lam=0.0), _z(2), 0))
@given(PROPERTIES["truthful_K_under"].instances())
def test_understating_k_pays_under_the_paper_rule(case):
    for rule in ("box2", "local", "exact", "shapley"):
        assert broken("truthful_K_under", rule, case)
    assert not broken("truthful_K_under", "vcg", case)


# Overreporting 10x pushes an honest buyer below zero (its true gain is below what it paid).
@pinned
@example(IpflCase(ipfl.Market(N=[500, 500, 500], c=[0.5] * 3, K=[5e4] * 3, lam=1.0),
                  np.full((3, 3), 0.05) - 0.05 * np.eye(3), 2, 10.0))
@given(PROPERTIES["lemma1"].instances())
def test_overreporting_n_hurts_honest_buyers(case):
    mk, i = case.market, case.client
    N_hat = mk.N.copy()
    N_hat[i] *= case.factor
    U = ipfl.clear(mk.replace(N=N_hat, true_N=mk.N), case.D).utilities
    honest = np.delete(U, i)
    assert (honest < 0).any()


# lam = 0: the price of a huge client is its cost alone, so it is still bought (Thm 3).
@pinned
@example(IpflCase(ipfl.Market(N=[20, 20], c=[0, 0], K=[1e3, 1e3], lam=0.0),
                  np.array([[0.0, 1.0], [1.0, 0.0]]), 0))
@given(PROPERTIES["thm3_lam0"].instances())
def test_thm3_needs_positive_lambda(case):
    assert broken("thm3_lam0", "local", case)


# Two identical sellers: which one is bought depends on the labels.
@pinned
@example(IpflCase(ipfl.Market(N=[20, 20, 20], c=[0, 1, 1], K=[1e3] * 3, lam=0.0), _z(3),
                  perm=np.array([0, 2, 1])))
@given(PROPERTIES["permutation_ties"].instances())
def test_ties_break_permutation_equivariance(case):
    assert broken("permutation_ties", "local", case)


# The greedy rules are not global optima of Eq. 10.
@pinned
@example(IpflCase(ipfl.Market(N=[20, 20, 20, 87], c=[0, 0, 0, 0], K=[1e3, 62901, 1e3, 1e3],
                              lam=2.0),
                  np.array([[0, 1, 0, 0], [1, 0, 0, 2], [0, 0, 0, 0], [0, 2, 0, 0]], float)))
@given(PROPERTIES["global_optimality"].instances())
def test_local_rule_is_not_globally_optimal(case):
    assert broken("global_optimality", "local", case)
    assert not broken("global_optimality", "exact", case)


# CPL: a client pinned at q_max with v_n < v^t pays (negative price).
@pinned
@example(CplCase(cpl.Game(a=[1, 1, 1], G=[1.0, 1.0, 2.0], c=[1.0, 1.0, 0.5], v=[0, 76, 23],
                          budget=-7.741666666666667, alpha=1.0, R=10, q_min=0.1)))
@given(PROPERTIES["cpl_threshold_all"].instances())
def test_threshold_theorem_fails_for_clipped_clients(case):
    assert broken("cpl_threshold_all", "cpl-bisection", case)
    assert not broken("cpl_threshold", "cpl-bisection", case)


# CPL: a baseline that pushes a client onto the q_min floor beats P1' at the same budget.
@pinned
@example(CplCase(cpl.Game(a=[0.4, 0.4, 0.2], G=[1, 1, 1], c=[1, 1, 1], v=[0, 0, 0],
                          budget=0.0375, alpha=1.0, R=10, q_min=0.05, q_max=0.25)))
@given(PROPERTIES["cpl_beats_baselines_any"].instances())
def test_floor_lets_a_baseline_win(case):
    assert broken("cpl_beats_baselines_any", "cpl-bisection", case)
    assert not broken("cpl_beats_baselines", "cpl-bisection", case)
