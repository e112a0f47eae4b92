"""CPL pricing rules as data: ``rule(game) -> prices``, the budget-calibrated posted price,
per-client G_n in the benchmark, and the checker subject wrapping any rule."""

import numpy as np
import pytest

from mechanisms import cpl
from proofs import PROPERTIES, SUBJECTS, CplPricingRule, check
from sims.cpl_game import CplBenchmark

GAME = cpl.Game(a=[0.2, 0.3, 0.5], G=[1.0, 2.0, 4.0], c=[5, 5, 5], v=[1, 0, 3], budget=1.0)


def test_posted_pricing_spends_the_budget_with_the_given_shape():
    for shape in (np.ones(3), GAME.a, GAME.a * GAME.G):
        eq = cpl.posted_pricing(GAME, shape)
        assert eq.spent == pytest.approx(GAME.budget, rel=1e-12)
        ratio = eq.prices / shape
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
    np.testing.assert_allclose(cpl.uniform_pricing(GAME).prices,
                               cpl.posted_pricing(GAME, np.ones(3)).prices)
    with pytest.raises(ValueError, match="shape"):
        cpl.posted_pricing(GAME, [1.0, -1.0, 1.0])


def test_apply_pricing_evaluates_any_rule_and_names_bad_output():
    eq = cpl.apply_pricing(GAME, cpl.PRICING_RULES["gradient"], name="gradient")
    np.testing.assert_allclose(eq.q, cpl.best_response(GAME, eq.prices))
    assert eq.status == "optimal" and eq.method == "gradient"
    assert cpl.apply_pricing(GAME, lambda g: np.full(g.n, 50.0)).status == "over-budget"
    with pytest.raises(ValueError, match=r"^pricing: .*shape"):
        cpl.apply_pricing(GAME, lambda g: np.ones(2))
    with pytest.raises(ValueError, match=r"^pricing: .*NaN"):
        cpl.apply_pricing(GAME, lambda g: np.full(g.n, np.nan))


def test_benchmark_draws_a_g_per_client_and_a_gradient_rule_differs_from_uniform():
    bench = CplBenchmark()
    game = bench.game()
    assert np.unique(game.G).size == game.n  # one G_n per client
    flat = CplBenchmark(G_spread=0.0).game()
    np.testing.assert_array_equal(flat.G, 1.0)
    np.testing.assert_array_equal(flat.a, game.a)  # sizes and values do not move with G
    np.testing.assert_array_equal(flat.v, game.v)
    uni, grad = cpl.uniform_pricing(game), cpl.gradient_pricing(game)
    assert not np.allclose(grad.prices / grad.prices[0], uni.prices / uni.prices[0])
    assert grad.objective != pytest.approx(uni.objective)


def overspend(game):
    """Twice the uniform price: the clients' responses spend more than the budget."""
    return 2.0 * cpl.uniform_pricing(game).prices


def test_budget_property_rejects_an_overspending_rule_and_accepts_posted_prices():
    prop = PROPERTIES["cpl_budget_feasible"]
    bad = check(CplPricingRule("overspend", overspend), prop, max_examples=40, seed=0)
    assert bad.verdict == "counterexample" and bad.counterexample.rerun() > 0
    for name in ("cpl-uniform", "cpl-weighted", "cpl-gradient", "cpl-bisection"):
        assert check(SUBJECTS[name], prop, max_examples=40, seed=0).holds, name


def test_pricing_subject_by_module_path_and_typo():
    s = CplPricingRule("mine", "tests.test_cpl_pricing_rules:overspend")
    assert s.solve(GAME).status == "over-budget"
    with pytest.raises(ValueError, match=r"^pricing: unknown 'unifrom'"):
        CplPricingRule("typo", "unifrom")
