"""CPL posted-shape family: its points are the built-in posted prices, the equilibrium is
never beaten on the checker's games (and a posted price given more budget does beat it: the
check can fail), and a tiny search runs."""

import dataclasses

import numpy as np
import pytest

from mechanisms import cpl
from sims.design import DesignInputError
from sims.design.cpl_pricing import (
    PostedShapeSpace,
    design_pricing,
    draw_games,
    evaluate_pricing,
)
from sims.design.search import SearchConfig


@pytest.fixture(scope="module")
def games():
    return draw_games(150, seed=4)


def test_points_are_the_builtin_posted_prices(games):
    space = PostedShapeSpace()
    pts = space.named_points()
    g = games[0]
    np.testing.assert_array_equal(space.rule(pts["uniform"])(g), np.ones_like(g.a))
    np.testing.assert_array_equal(space.rule(pts["weighted"])(g), g.a)
    np.testing.assert_allclose(space.rule(pts["gradient"])(g), g.a * g.G, rtol=1e-15)
    ours = cpl.posted_pricing_batch(g, space.rule(pts["weighted"])(g))
    k = 0
    ref = cpl.apply_pricing(g.game(k), cpl.PRICING_RULES["weighted"])
    np.testing.assert_allclose(ours.prices[k], ref.prices, rtol=1e-8)


def test_equilibrium_never_beaten_and_the_check_can_fail(games):
    space = PostedShapeSpace()
    rng = np.random.default_rng(0)
    for theta in [*space.named_points().values(), *rng.uniform(space.lower, space.upper,
                                                               (3, 3))]:
        s = evaluate_pricing(space.rule(theta), games)
        assert s["games"] == sum(g.size for g in games)
        assert np.isfinite(s["mean_gap"]) and s["mean_gap"] >= -1e-9
        assert s["max_overspend"] <= 1e-9
    # known-bad: the posted price spends twice the equilibrium's budget -> it "beats" the SE
    richer = [dataclasses.replace(g, budget=2 * g.budget) for g in games]

    def unfair(g):
        return g.a

    gaps = []
    for g, r in zip(games, richer, strict=True):
        eq, post = cpl.solve_batch(g), cpl.posted_pricing_batch(r, unfair(r))
        gaps.append(post.objective - eq.objective)
    assert np.concatenate(gaps).min() < 0


def test_tiny_search(games):
    space = PostedShapeSpace()
    r = design_pricing(space, SearchConfig(generations=1, popsize=2, seed=0), games=games)
    assert r.feasible and r.evaluations >= 6 and set(r.params) == set(space.names)
    uniform = evaluate_pricing(space.rule(space.named_points()["uniform"]), games)
    assert r.score <= uniform["mean_gap"]  # uniform is in the starting population
    with pytest.raises(DesignInputError, match="statistic"):
        design_pricing(space, games=games, statistic="best")
    with pytest.raises(DesignInputError, match="theta"):
        space.rule([1.0, np.nan, 0.0])
