"""One path (issue 34, part 1): every public entry point is the batch-of-one case of the bulk
code, and where mechanisms/ keeps more than one algorithm (the greedy's top-thresholds scan,
exact's enumeration / dynamic programme / branch-and-bound, VCG's pivot by enumeration or by
search) the declared property ``one_path`` holds them to each other and rejects a broken one.
"""

import functools

import numpy as np
import pytest

from mechanisms import cpl, ipfl
from mechanisms.ipfl import rules, selection
from proofs import PROPERTIES, SUBJECTS, check
from proofs.standard import STANDARD

# half of the drawn markets have an asymmetric D on purpose (proofs.typespace): the
# tests clear them as the checker does, with the opt-in (tests/test_input_shapes.py checks
# the refusal without it)
_clear = functools.partial(ipfl.clear, allow_asymmetric_distances=True)
_clear_batch = functools.partial(ipfl.clear_batch, allow_asymmetric_distances=True)

ENGINES = ["batch", "hypothesis"]


def _market(seed, m=7):
    rng = np.random.default_rng(seed)
    mk = ipfl.Market(N=rng.integers(20, 2000, m), c=rng.uniform(0, 1, m),
                     K=rng.uniform(1e4, 1e6, m), lam=float(rng.uniform(0, 1)))
    D = rng.uniform(0, 1, (m, m))
    np.fill_diagonal(D, 0.0)
    return mk, D


@pytest.mark.parametrize("rule,payments", [("local", "paper"), ("box2", "shapley"),
                                           ("exact", "vcg"), ("exact", "paper"),
                                           ("share-all", "none"), ("local", "cost-plus")])
def test_clear_is_the_batch_of_one_of_clear_batch(rule, payments):
    """ipfl.clear and row k of ipfl.clear_batch are the same numbers, bit for bit (one
    code runs both)."""
    markets = [_market(s) for s in range(5)]
    batch = ipfl.MarketArrays.from_markets([mk for mk, _ in markets])
    D = np.stack([d for _, d in markets])
    many = _clear_batch(batch, D, rule, payments=payments)
    for k, (mk, d) in enumerate(markets):
        one = _clear(mk, d, rule, payments=payments)
        assert np.array_equal(one.adjacency, many.adjacency[k])
        assert np.array_equal(one.payments, many.payments[k])
        assert np.array_equal(one.utilities, many.utilities[k])


def test_exact_in_bulk_reports_its_methods_and_gaps_per_buyer():
    """A batch mixing buyers with few candidates (enumerated together) and with many (the
    dynamic programme): the methods and gaps come back per buyer, as one market's."""
    small = [_market(s, 6) for s in range(3)]
    out = _clear_batch(ipfl.MarketArrays.from_markets([mk for mk, _ in small]),
                           np.stack([d for _, d in small]), "exact")
    assert out.exact_methods.shape == (3, 6) and out.exact_gap.shape == (3, 6)
    assert set(out.exact_methods.ravel()) <= {"enumeration", "none"}
    big, D = _market(0, 24)
    big = big.replace(c=np.full(24, 1e-3), lam=0.0)
    one = _clear(big, D, "exact")
    assert one.exact_methods.get("dp", 0) > 0 and one.exact_gap == 0.0


def test_vcg_pivots_agree_and_auto_picks_by_size():
    mk, D = _market(3, 8)
    A = _clear(mk, D, "exact").adjacency
    p = {pivot: ipfl.vcg_payments(mk, A, D, pivot=pivot)
         for pivot in ("auto", "enumeration", "search")}
    np.testing.assert_allclose(p["enumeration"], p["search"], rtol=1e-9, atol=1e-9)
    assert np.array_equal(p["auto"], p["enumeration"])
    big, Db = _market(4, rules.VCG_ENUMERATION_MAX + 1)
    Ab = _clear(big, Db, "exact").adjacency
    assert np.array_equal(ipfl.vcg_payments(big, Ab, Db),
                          ipfl.vcg_payments(big, Ab, Db, pivot="search"))
    with pytest.raises(ipfl.MarketInputError, match=r"^pivot:"):
        ipfl.vcg_payments(big, Ab, Db, pivot="enumeration")
    with pytest.raises(ipfl.MarketInputError, match=r"^pivot:"):
        ipfl.vcg_payments(mk, A, D, pivot="guess")


@pytest.mark.parametrize("name", sorted(cpl.PRICING_RULES))
def test_a_built_in_pricing_rule_is_one_code_for_one_game_and_many(name):
    games = [cpl.Game(a=[0.2, 0.3, 0.5], G=[1, 2, 3], c=[5, 5, 5], v=[1, 0, 3], budget=b)
             for b in (0.5, 1.0, 2.0)]
    many, over = cpl.apply_pricing_batch(cpl.GameBatch.from_games(games),
                                         cpl.PRICING_RULES[name])
    assert not over.any()
    posted = {"uniform": cpl.uniform_pricing, "weighted": cpl.weighted_pricing,
              "gradient": cpl.gradient_pricing}[name]
    for k, g in enumerate(games):
        one = cpl.apply_pricing(g, name)
        assert np.array_equal(one.prices, many.prices[k])
        assert np.array_equal(posted(g).prices, one.prices)
        shape = cpl.POSTED_SHAPES[name](g)
        np.testing.assert_allclose(one.prices / shape, one.prices[0] / shape[0], rtol=1e-12)


def test_apply_pricing_batch_refuses_a_rule_not_written_over_arrays():
    g = cpl.GameBatch.from_games([cpl.Game(a=[0.5, 0.5], G=[1, 1], c=[5, 5], v=[0, 0],
                                           budget=1.0)])
    with pytest.raises(ipfl.MarketInputError, match=r"^pricing: .*over_arrays"):
        cpl.apply_pricing_batch(g, lambda game: np.ones(2))


# ------------------------------------------------------- the declared property and its bads


def _claims_final(real):
    def broken(T, N, stop, top):  # every row "proven final" after the top thresholds
        A, final = real(T, N, stop, top)
        return A, np.ones_like(final)
    return broken


def _empty_dp(cost, size, n0, gfun):
    return np.zeros(cost.size, dtype=bool)


def _pivot_off(real):
    def broken(market, P, T):
        return real(market, P, T) + 1e-3
    return broken


def _padding_chosen(real):
    def broken(cost, size, n0, K, N, gain, valid=None):  # the valid mask ignored
        return real(cost, size, n0, K, N, gain)
    return broken


@pytest.mark.parametrize("subject,target,make", [
    ("local", "_greedy_top", _claims_final),
    ("box2", "_greedy_top", _claims_final),
    ("exact", "_dp", lambda real: _empty_dp),
    ("exact", "best_subsets", _padding_chosen),
    ("vcg", "_best_without_search", _pivot_off),
])
@pytest.mark.parametrize("engine", ENGINES)
def test_one_path_rejects_a_broken_alternative(subject, target, make, engine, monkeypatch):
    module = rules if target == "_best_without_search" else selection
    monkeypatch.setattr(module, target, make(getattr(module, target)))
    # the batch engine at the row's budget in the standard run (exact's: 20,000): the
    # search stops at the first failure, found within 300 draws
    budget = STANDARD.budget(subject, "one_path") if engine == "batch" else 300
    r = check(SUBJECTS[subject], PROPERTIES["one_path"], max_examples=budget, engine=engine)
    assert r.verdict == "counterexample", r.row()
    assert r.first_failure <= 300


@pytest.mark.parametrize("subject", ["local", "exact", "vcg"])
def test_one_path_holds_on_the_built_in_subjects(subject):
    r = check(SUBJECTS[subject], PROPERTIES["one_path"], max_examples=300, engine="batch")
    assert r.verdict == "holds" and r.discriminating == 300


def test_one_path_has_nothing_to_compare_on_share_all():
    r = check(SUBJECTS["share-all"], PROPERTIES["one_path"], max_examples=100,
              engine="batch")
    assert r.verdict == "vacuous" and r.discriminating == 0 and r.effective == r.examples
