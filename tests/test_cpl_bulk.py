"""CPL: one implementation for one game and for many (issue 20, part 1).

Every CPL formula (weights, K, spend, bound, inverse price, best responses, q(mu), the
threshold, the Stackelberg solve, the posted-price calibration, what a price vector buys) is
written once over leading batch dimensions; the one-game functions are the batch-of-one case.
Checked here game by game, bulk against one game, to 1e-9, over random games with the edge
cases drawn on purpose: unnormalised weights, K = 0 clients and all-K = 0 (degenerate) games,
v = 0 and v far above the threshold, q_max = q_min, one client, slack budgets, budgets at the
q_min floor, negative budgets (large v makes the spend negative).
"""

import numpy as np
import pytest

from mechanisms import cpl

RTOL = 1e-9


def random_game(rng, n):
    a = rng.lognormal(0, 1.5, n) * (1.0 if rng.random() < 0.5 else 37.0)  # unnormalised
    G = rng.choice([0.0, 0.5, 1.0, 3.0], n, p=[0.15, 0.3, 0.3, 0.25])
    if rng.random() < 0.08:
        G = np.zeros(n)  # degenerate: every K_n = 0
    c = rng.uniform(0.1, 10.0, n)
    v = rng.choice([0.0, 1.0], n) * rng.exponential(rng.choice([1.0, 1e3, 1e6]), n)
    q_min = float(rng.choice([0.001, 0.01, 0.1, 0.3]))
    q_max = rng.uniform(q_min, 1.0, n)
    q_max[rng.random(n) < 0.15] = q_min  # a client pinned: q_max = q_min
    q_max[rng.random(n) < 0.3] = 1.0
    alpha, R = float(rng.uniform(0.1, 3.0)), float(rng.choice([1.0, 50.0, 200.0]))
    g = cpl.Game(a=a, G=G, c=c, v=v, budget=0.0, alpha=alpha, R=R, q_min=q_min, q_max=q_max)
    lo = cpl.spend(g, np.full(n, q_min))
    hi = cpl.spend(g, g.q_max)
    kind = rng.random()
    if kind < 0.1:
        budget = lo  # exactly the floor spend
    elif kind < 0.25:
        budget = hi + abs(hi) * rng.uniform(0, 1) + 1e-3  # slack
    else:
        budget = lo + (hi - lo) * rng.uniform(0.001, 0.999)  # binding (may be negative)
    return g.replace(budget=float(budget))


def batches(seed, count):
    """``count`` random games per client count n = 1..8, as (GameBatch, [Game])."""
    rng = np.random.default_rng(seed)
    for n in range(1, 9):
        games = [random_game(rng, n) for _ in range(count)]
        yield cpl.GameBatch.from_games(games), games


def close(bulk, one, name):
    np.testing.assert_allclose(bulk, one, rtol=RTOL, atol=RTOL * (1 + np.max(np.abs(one))),
                               err_msg=name)


def assert_same(bulk: cpl.BatchEquilibrium, k: int, one: cpl.Equilibrium):
    for name in ("q", "prices"):
        close(getattr(bulk, name)[k], getattr(one, name), name)
    for name in ("objective", "spent", "budget_residual"):
        close(getattr(bulk, name)[k], getattr(one, name), name)
    if one.multiplier is None:  # not an equilibrium: NaN in bulk
        assert np.isnan(bulk.multiplier[k]) and np.isnan(bulk.v_threshold[k])
    else:
        assert bulk.multiplier[k] == pytest.approx(one.multiplier, rel=RTOL, abs=0)
        assert bulk.v_threshold[k] == pytest.approx(one.v_threshold, rel=RTOL, abs=0)
        assert bool(bulk.slack[k]) == (one.status == "slack")
        assert bool(bulk.degenerate[k]) == (one.status == "degenerate")


def test_the_random_games_reach_every_edge_case():
    seen = {"slack": 0, "degenerate": 0, "floor": 0, "negative budget": 0, "pinned": 0,
            "one client": 0, "v above threshold": 0, "binding": 0}
    for batch, _ in batches(0, 40):
        eq = cpl.solve_batch(batch)
        seen["slack"] += int(eq.slack.sum())
        seen["degenerate"] += int(eq.degenerate.sum())
        seen["binding"] += int((~eq.slack & ~eq.degenerate).sum())
        seen["negative budget"] += int((batch.budget < 0).sum())
        seen["pinned"] += int((batch.q_max == batch.q_min[:, None]).any(axis=1).sum())
        seen["one client"] += batch.size if batch.n == 1 else 0
        seen["v above threshold"] += int((batch.v > eq.v_threshold[:, None]).any(axis=1).sum())
        floor = batch.spend(np.broadcast_to(batch.q_min[:, None], batch.a.shape))
        seen["floor"] += int((floor == batch.budget).sum())
    assert min(seen.values()) > 0, seen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solve_batch_is_solve_game_by_game(seed):
    checked = 0
    for batch, games in batches(seed, 40):
        eq = cpl.solve_batch(batch)
        for k, g in enumerate(games):
            assert_same(eq, k, cpl.solve(g))
            checked += 1
    assert checked == 8 * 40


@pytest.mark.parametrize("responses", ["exact", "v0"])
def test_posted_pricing_batch_is_posted_pricing_game_by_game(responses):
    checked = 0
    for batch, games in batches(3, 25):
        for shape_of in (lambda x: np.ones_like(x.a), lambda x: x.a, lambda x: x.a * x.G):
            positive = batch.budget > 0
            ok = positive & (shape_of(batch) > 0).any(axis=1)
            idx = np.flatnonzero(ok)
            if not idx.size:
                continue
            sub = cpl.GameBatch(*(getattr(batch, f)[idx] for f in
                                  ("a", "G", "c", "v", "q_max", "budget", "alpha", "R",
                                   "q_min")))
            out = cpl.posted_pricing_batch(sub, shape_of(sub), responses=responses)
            for j, k in enumerate(idx):
                g = games[k]
                one = cpl.posted_pricing(g, shape_of(g), responses=responses)
                assert_same(out, j, one)
                assert out.scale[j] == pytest.approx(one.info["p"], rel=RTOL)
                checked += 1
    assert checked > 300


def test_priced_is_apply_pricing_game_by_game():
    rng = np.random.default_rng(4)
    for batch, games in batches(4, 30):
        P = rng.normal(0, 1, batch.a.shape) * rng.choice([1e-3, 1.0, 1e3], (batch.size, 1))
        out = cpl.priced(batch, P)
        for k, g in enumerate(games):
            one = cpl.apply_pricing(g, lambda game, row=P[k]: row)
            assert_same(out, k, one)
            assert (one.status == "over-budget") == (
                out.spent[k] > g.budget + 1e-9 * max(1.0, abs(g.budget)))


def test_every_formula_is_the_same_in_bulk_and_for_one_game():
    rng = np.random.default_rng(5)
    for batch, games in batches(5, 30):
        P = rng.normal(0, 2, batch.a.shape)
        q = rng.uniform(batch.q_min[:, None], batch.q_max)
        mu = rng.exponential(1e4, batch.size)
        multiplier = np.where(rng.random(batch.size) < 0.2, 0.0, 1 / mu)
        bulk = {"best_response": cpl.best_response(batch, P),
                "best_response_v0": cpl.best_response_v0(batch, P),
                "unconstrained_response": cpl.unconstrained_response(batch, P),
                "spend": cpl.spend(batch, q), "bound": cpl.bound(batch, q),
                "inverse_price": cpl.inverse_price(batch, q),
                "q_of_mu": cpl.q_of_mu(batch, mu), "v_threshold": cpl.v_threshold(multiplier)}
        for k, g in enumerate(games):
            np.testing.assert_array_equal(batch.a[k], g.a)  # the same normalised weights
            np.testing.assert_array_equal(batch.K[k], g.K)
            one = {"best_response": cpl.best_response(g, P[k]),
                   "best_response_v0": cpl.best_response_v0(g, P[k]),
                   "unconstrained_response": cpl.unconstrained_response(g, P[k]),
                   "spend": cpl.spend(g, q[k]), "bound": cpl.bound(g, q[k]),
                   "inverse_price": cpl.inverse_price(g, q[k]),
                   "q_of_mu": cpl.q_of_mu(g, mu[k]),
                   "v_threshold": cpl.v_threshold(multiplier[k])}
            for name, value in one.items():
                close(bulk[name][k], value, name)


def test_normalised_weights_one_or_many():
    a = np.array([[1.0, 3.0], [0.25, 0.75], [1e308, 1e308]])
    got = cpl.normalised_weights(a)
    np.testing.assert_allclose(got, [[0.25, 0.75], [0.25, 0.75], [0.5, 0.5]], rtol=1e-15)
    for k in range(3):
        np.testing.assert_array_equal(cpl.Game(a=a[k], G=[1, 1], c=[1, 1], v=[0, 0],
                                               budget=1.0).a, got[k])


def test_infeasible_budget_is_named_the_same_way():
    g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=-1e9)
    with pytest.raises(cpl.BudgetInfeasible, match="budget") as one:
        cpl.solve(g)
    with pytest.raises(cpl.BudgetInfeasible, match=r"game 1: is -1000000000\.0") as bulk:
        cpl.solve_batch(cpl.GameBatch.from_games([g.replace(budget=1.0), g]))
    assert str(bulk.value).endswith(str(one.value).split(": ", 1)[1])


def test_the_comparison_rejects_a_different_game():
    """Known-bad variant: the game-by-game comparison fails on another game's outcome."""
    batch, games = next(batches(6, 10))
    eq = cpl.solve_batch(batch)
    binding = np.flatnonzero(~eq.slack & ~eq.degenerate)
    k = int(binding[0])
    with pytest.raises(AssertionError):
        assert_same(eq, k, cpl.solve(games[k].replace(budget=games[k].budget * 1.01 + 1e-3)))
