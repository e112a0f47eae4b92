"""The vectorised CPL solver and posted prices agree with the scalar ones, game by game."""

import numpy as np
import pytest

from mechanisms import cpl
from mechanisms.errors import MarketInputError
from proofs.batch import CPL_SPECS, cpl_sampler

RTOL = 1e-9  # relative agreement of q and prices with the scalar functions


def _batches(key, size, seed=0):
    sampler = cpl_sampler(key)
    for d in sampler.draw(np.random.default_rng(seed), size):
        yield sampler.games(d), [c.game for c in sampler.cases(d)]


@pytest.mark.parametrize("key", ["cpl_se_identities", "cpl_beats_baselines"])
def test_solve_batch_agrees_with_the_scalar_bisection(key):
    checked = 0
    for batch, games in _batches(key, 400):
        eq = cpl.solve_batch(batch)
        for k, g in enumerate(games):
            one = cpl.solve(g)
            assert eq.slack[k] == (one.status == "slack")
            np.testing.assert_allclose(eq.q[k], one.q, rtol=RTOL)
            scale = np.abs(one.prices).max()
            np.testing.assert_allclose(eq.prices[k], one.prices, rtol=0, atol=RTOL * scale)
            assert eq.objective[k] == pytest.approx(one.objective, rel=RTOL)
            if one.status != "slack":
                assert eq.multiplier[k] == pytest.approx(one.multiplier, rel=RTOL)
                assert eq.budget_residual[k] < 1e-9
            checked += 1
    assert checked == 400


@pytest.mark.parametrize(("shape", "scalar"), [("uniform", cpl.uniform_pricing),
                                               ("weighted", cpl.weighted_pricing),
                                               ("gradient", cpl.gradient_pricing)])
def test_posted_pricing_batch_agrees_with_the_scalar_calibration(shape, scalar):
    for batch, games in _batches("cpl_budget_feasible", 200, seed=1):
        s = {"uniform": np.ones_like(batch.a), "weighted": batch.a,
             "gradient": batch.a * batch.G}[shape]
        out = cpl.posted_pricing_batch(batch, s)
        for k, g in enumerate(games):
            one = scalar(g)
            np.testing.assert_allclose(out.prices[k], one.prices, rtol=RTOL)
            np.testing.assert_allclose(out.q[k], one.q, rtol=RTOL)


def test_game_batch_round_trips_and_rejects_mixed_sizes():
    g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=1.0)
    batch = cpl.GameBatch.from_games([g, g.replace(budget=2.0)])
    assert batch.size == 2 and batch.n == 3 and batch.game(1).budget == 2.0
    np.testing.assert_array_equal(batch.game(0).K, g.K)
    # K_n = alpha a_n^2 G_n^2 / R, row by row (the batch's own K, not the games' it rebuilds)
    np.testing.assert_allclose(batch.K[1], [g.alpha * a**2 * G**2 / g.R
                                            for a, G in zip(g.a, g.G, strict=True)], rtol=1e-15)
    with pytest.raises(MarketInputError, match="same number of clients"):
        cpl.GameBatch.from_games([g, cpl.Game(a=[1.0], G=[1], c=[1], v=[0], budget=1.0)])
    with pytest.raises(cpl.BudgetInfeasible, match="game 0"):
        cpl.solve_batch(cpl.GameBatch.from_games([g.replace(budget=-1e9)]))


_FIELDS = ("a", "G", "c", "v", "q_max", "budget", "alpha", "R", "q_min")


@pytest.mark.parametrize("field, bad, got", [
    *(pytest.param(f, lambda x: x[:, :1], (2, 1), id=f"{f}-(B,1)")
      for f in ("G", "c", "v", "q_max")),
    *(pytest.param(f, lambda x: x[:, None], (2, 1), id=f"{f}-(B,1)")
      for f in ("budget", "alpha", "R", "q_min")),
    pytest.param("q_max", lambda x: x[:1], (1, 2), id="q_max-(1,n)"),
    pytest.param("budget", lambda x: x[0], (), id="budget-scalar"),
    pytest.param("a", lambda x: x[0], (2,), id="a-(n,)"),
    pytest.param("a", lambda x: x[:, :0], (2, 0), id="a-no-clients"),
])
def test_a_game_batch_from_arrays_refuses_a_shape_that_broadcasts(field, bad, got):
    """A GameBatch built from arrays took a q_max of shape (B, 1) for two clients (read as
    one bound per game) and any other field that broadcasts: each is refused in one line
    naming the field, the shape got and the shape expected."""
    g = cpl.Game(a=[0.4, 0.6], G=[1, 2], c=[5, 5], v=[1, 0], budget=1.0, q_max=[0.9, 0.7])
    good = cpl.GameBatch.from_games([g, g.replace(budget=2.0)])
    arrays = {f: getattr(good, f) for f in _FIELDS}
    rebuilt = cpl.GameBatch(**arrays)  # the right shapes pass, as float arrays
    np.testing.assert_array_equal(cpl.solve_batch(rebuilt).q, cpl.solve_batch(good).q)
    arrays[field] = bad(arrays[field])
    with pytest.raises(MarketInputError) as err:
        cpl.GameBatch(**arrays)
    assert err.value.field == field and "\n" not in str(err.value)
    want = "(B, n)" if field == "a" else str((2, 2) if field in ("G", "c", "v", "q_max")
                                              else (2,))
    assert f"has shape {got}, expected {want}" in str(err.value)


def test_a_game_batch_of_one_client_takes_its_columns():
    """n = 1: (B, 1) is the per-client shape, not a fault."""
    g = cpl.Game(a=[1.0], G=[2.0], c=[5.0], v=[1.0], budget=1.0, q_max=0.8)
    good = cpl.GameBatch.from_games([g, g.replace(budget=0.5)])
    rebuilt = cpl.GameBatch(**{f: getattr(good, f).tolist() for f in _FIELDS})
    assert rebuilt.q_max.shape == (2, 1) and rebuilt.q_max.dtype == np.float64
    np.testing.assert_array_equal(cpl.solve_batch(rebuilt).q, cpl.solve_batch(good).q)


# cpl_one_path has no bulk form (the conic solvers take one game at a time)
@pytest.mark.parametrize("key", sorted(set(CPL_SPECS) - {"cpl_one_path"}))
def test_bulk_cpl_properties_give_the_scalar_verdict_instance_by_instance(key):
    """Each CPL property is one check (proofs.cpl_properties): on the whole batch solved by
    the bulk code (cpl.solve_batch, posted_pricing_batch) it gives, on every draw, the same
    violation and effective flag as on that game alone solved by the subject's own solve."""
    from proofs import PROPERTIES, SUBJECTS
    from proofs.batch import vectorised
    from proofs.checker import evaluate_instance

    subjects = ["cpl-bisection"] + (["cpl-uniform", "cpl-weighted", "cpl-gradient"]
                                    if key == "cpl_budget_feasible" else [])
    sampler = cpl_sampler(key)
    for name in subjects:
        bulk = vectorised(PROPERTIES[key], SUBJECTS[name])
        assert bulk is not None
        for d in sampler.draw(np.random.default_rng(2), 120):
            viol, eff, *disc = bulk(d)
            for k, case in enumerate(sampler.cases(d)):
                amount, _, effective, discriminating = evaluate_instance(
                    SUBJECTS[name], PROPERTIES[key], case)
                effective = amount is not None and effective
                assert bool(eff[k]) == effective, (name, k)
                if disc and effective:  # the same discriminating instances in bulk
                    assert (bool(disc[0][k]) or viol[k] > 0) == discriminating, (name, k)
                if effective:
                    assert (viol[k] > 0) == (amount > 0), (name, k, viol[k], amount)


def test_the_cpl_precondition_counterexamples_are_found_in_bulk():
    from proofs import PROPERTIES, SUBJECTS, check

    for key in ("cpl_threshold_all", "cpl_beats_baselines_any"):
        r = check(SUBJECTS["cpl-bisection"], PROPERTIES[key], max_examples=20_000,
                  engine="batch")
        assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)", key
        assert r.counterexample.rerun() > 0
    r = check(SUBJECTS["cpl-bisection"], PROPERTIES["cpl_threshold"], max_examples=5000,
              engine="batch")
    assert r.verdict == "holds" and r.extra["mode"] == "batch (vectorised)"
    assert r.effective < r.examples  # slack games are drawn, and not counted as checked


def test_a_posted_price_refuses_a_batch_naming_the_game_without_a_budget():
    """The refusal names the first game with B <= 0, not an earlier game with a small budget
    (a generated mutant that looked for B <= 1 named game 0 here and survived every test)."""
    g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=0.5)
    batch = cpl.GameBatch.from_games([g, g.replace(budget=2.0), g.replace(budget=0.0)])
    with pytest.raises(MarketInputError, match=r"^budget: game 2: 0\.0; a posted price"):
        cpl.posted_pricing_batch(batch, np.ones_like(batch.a))


def test_a_polish_bracket_spending_b_at_both_ends_solves_without_warnings():
    """The third client, pinned at q_min = q_max, pays about 490; the two interior clients'
    spend changes across the polish's first bracket (mu* +- 64 ulps) are lost in that sum, so
    both ends spend B exactly and the bracket has nothing left to do. The answer spends B,
    without a warning (generated mutant a1580fa7d8, `//` for `&` between the bracket's sign
    tests: bit-identical answers, but a division by False there warns; before this game only
    a Hypothesis draw found it)."""
    import warnings

    g = cpl.Game(a=[1 / 3] * 3, G=[1.0, 1.0, 1.0], c=[1.0, 1.0, 1.0], v=[0.0, 0.0, 4431.0],
                 budget=-490.2933333333333, alpha=1.0, R=10.0, q_min=0.1,
                 q_max=[1.0, 1.0, 0.1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eq = cpl.solve(g)
    assert eq.status == "optimal" and eq.spent == g.budget and eq.budget_residual == 0.0
    assert eq.q[2] == 0.1 and (eq.q[:2] > 0.1).all()


def test_the_posted_price_calibration_takes_few_evaluations(monkeypatch):
    """posted_pricing_batch calibrates p with the Illinois regula falsi (a bisection step
    every 4th): each of 102 calibrations of drawn games (three shapes) takes at most 40 calls
    of the clients' responses, the start and the bracket's growth included (20 at most
    measured). Generated mutant 2a0d4eba51 (the upper end's Illinois halving dropped: plain
    regula falsi there, answers within the same few ulps) takes up to 68, and 1.7x the CPU
    in cpl.solve_batch."""
    import mechanisms.cpl.batch as cbatch

    calls = []
    exact = cbatch.RESPONSES["exact"]

    def counting(games, P):
        calls[-1] += 1
        return exact(games, P)

    monkeypatch.setitem(cbatch.RESPONSES, "exact", counting)
    smp = cpl_sampler("cpl_budget_feasible")
    for d in smp.draw(np.random.default_rng(0), 60):
        g = smp.games(d)
        for k in np.flatnonzero(g.budget > 0)[:3]:
            one = cpl.GameBatch.from_games([g.game(int(k))])
            for name in ("uniform", "weighted", "gradient"):
                calls.append(0)
                cpl.posted_pricing_batch(one, cpl.POSTED_SHAPES[name](one))
    assert len(calls) == 102 and 0 < max(calls) <= 40, (len(calls), max(calls))
