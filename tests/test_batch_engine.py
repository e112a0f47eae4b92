"""The batch engine: same verdicts as the subject itself, every known counterexample found.

Its bulk clearing reproduces the built-in rules; these tests hold it to the scalar clearing
(:func:`mechanisms.ipfl.clear`) instance by instance, and hold the engine to every
counterexample the Hypothesis engine finds.
"""

import functools

import numpy as np
import pytest

from mechanisms import ipfl
from proofs import PROPERTIES, SUBJECTS, IpflMechanism, check
from proofs.batch import (
    CHEAP_DATA,
    CHEAP_DATA_SHARE,
    GAINS,
    IPFL_SPECS,
    LARGE_LIE,
    IpflSampler,
    IpflSpec,
    over_arrays,
    sampler_for,
    settle_batch,
)

# half of the drawn markets have an asymmetric D on purpose (proofs.typespace): the
# tests clear them as the checker does, with the opt-in (tests/test_input_shapes.py checks
# the refusal without it)
_clear = functools.partial(ipfl.clear, allow_asymmetric_distances=True)
_clear_batch = functools.partial(ipfl.clear_batch, allow_asymmetric_distances=True)


@pytest.mark.parametrize("rule", ["box2", "local", "exact"])
@pytest.mark.parametrize("spec", [IpflSpec(), IpflSpec(negative=True),
                                  IpflSpec(positive=True, liar="any")], ids=str)
def test_bulk_clearing_matches_the_scalar_clearing(rule, spec):
    sampler = IpflSampler(spec)
    rng = np.random.default_rng(1)
    checked = 0
    for d in sampler.draw(rng, 400):
        a = sampler.arrays(d)
        true_N = a["N"]
        N = a["N"] if a["client"] is None else a["N"].copy()
        if a["client"] is not None:  # a liar reports N * factor; the truth is kept
            N[np.arange(d.size), a["client"]] *= a["factor"]
        bulk = settle_batch(rule, N, a["c"], a["K"], a["lam"], a["D"], true_N=true_N)
        for k in range(d.size):
            mk = ipfl.Market(N=N[k], c=a["c"][k], K=a["K"][k], lam=float(a["lam"][k]),
                             true_N=true_N[k])
            out = _clear(mk, a["D"][k], rule, allow_negative_distances=spec.negative)
            assert np.array_equal(bulk["A"][k], out.adjacency)
            np.testing.assert_allclose(bulk["p"][k], out.payments, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(bulk["U"][k], out.utilities, rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked == 400


@pytest.mark.parametrize(("rule", "money"), [("exact", "vcg"), ("local", "shapley"),
                                           ("box2", "vcg"), ("exact", "shapley")])
@pytest.mark.parametrize("spec", [IpflSpec(), IpflSpec(negative=True),
                                  IpflSpec(liar="who", max_m=4)], ids=str)
def test_bulk_reference_payments_match_the_scalar_rules(rule, money, spec):
    """vcg and shapley in bulk (subset enumeration over arrays) pay what
    mechanisms.ipfl.rules.vcg_payments / shapley_remittances pay, market by market."""
    sampler = IpflSampler(spec)
    rng = np.random.default_rng(2)
    checked = 0
    for d in sampler.draw(rng, 300):
        a = sampler.arrays(d)
        c, K = a["c"], a["K"]
        if a["client"] is not None:  # a liar understates K: money on reports, utility on truth
            K = K.copy()
            K[np.arange(d.size), a["client"]] *= 0.3
        bulk = settle_batch(rule, a["N"], c, K, a["lam"], a["D"], money=money, true_K=a["K"])
        for k in range(d.size):
            mk = ipfl.Market(N=a["N"][k], c=c[k], K=K[k], lam=float(a["lam"][k]),
                             true_K=a["K"][k])
            out = _clear(mk, a["D"][k], rule, payments=money,
                             allow_negative_distances=spec.negative)
            assert np.array_equal(bulk["A"][k], out.adjacency)
            np.testing.assert_allclose(bulk["p"][k], out.payments, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(bulk["U"][k], out.utilities, rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked == 300


@pytest.mark.parametrize("subject", ["box2", "local", "exact"])
def test_bulk_global_optimality_matches_the_scalar_property(subject):
    """The bulk Eq. 10 gap equals proofs.ipfl_properties.global_optimality, instance by
    instance (zero and nonzero alike)."""
    from proofs.batch import vectorised

    prop = PROPERTIES["global_optimality"]
    fn = vectorised(prop, SUBJECTS[subject])
    assert fn is not None
    sampler = IpflSampler(IPFL_SPECS["global_optimality"])
    rng = np.random.default_rng(3)
    nonzero = 0
    for d in sampler.draw(rng, 400):
        bulk = fn(d)
        for k, case in enumerate(sampler.cases(d)):
            want = prop.amount(SUBJECTS[subject], case)
            assert bulk[k] == pytest.approx(want, rel=1e-9, abs=1e-9)
            nonzero += want > 0
    assert (nonzero > 0) == (subject != "exact")  # the greedy rules miss the optimum


KNOWN = [
    ("box2", "local_optimality"), ("box2", "ir_negative_distances"),
    ("local", "ir_negative_distances"), ("exact", "ir_negative_distances"),
    ("local", "thm3_lam0"), ("exact", "thm3_lam0"), ("local", "truthful_N_over"),
    ("local", "permutation_ties"), ("local", "global_optimality"), ("vcg", "budget_balance"),
    ("cost-plus", "thm2"), ("share-all", "individual_rationality"),
    ("cpl-bisection", "cpl_threshold_all"), ("cpl-bisection", "cpl_beats_baselines_any"),
]


@pytest.mark.parametrize(("subject", "key"), KNOWN, ids=[f"{s}-{k}" for s, k in KNOWN])
def test_batch_engine_finds_every_known_counterexample(subject, key):
    assert SUBJECTS[subject].declares[key] is False
    r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=20_000, seed=0, engine="batch")
    assert r.verdict == "counterexample" and r.engine == "batch"
    assert r.counterexample.rerun() > 0
    assert r.first_failure <= r.examples


def test_batch_counterexamples_are_small():
    r = check(SUBJECTS["local"], PROPERTIES["ir_negative_distances"], max_examples=10_000,
              engine="batch")
    case = r.counterexample.instance
    assert case.market.m == 2 and (case.D < 0).any()  # two clients suffice


@pytest.mark.parametrize("key", ["budget_balance", "individual_rationality", "lemma1",
                                 "local_optimality", "thm3", "no_deficit", "permutation"])
def test_batch_engine_holds_where_declared(key):
    r = check(SUBJECTS["local"], PROPERTIES[key], max_examples=20_000, engine="batch")
    # the budget counts discriminating examples (the property could have failed there)
    assert r.verdict == "holds" and r.discriminating == 20_000
    assert r.examples >= r.effective >= r.discriminating
    assert r.extra["mode"] == "batch (vectorised)"


def flat_fee(market, A, D):
    G1 = market.gain.value(market.N[None, :], market.K[:, None], market.N[:, None])
    return np.where(A, G1, 0.0)


def test_batch_engine_rejects_a_broken_user_rule():
    r = check(IpflMechanism("flat-fee", "local", remittances=flat_fee),
              PROPERTIES["individual_rationality"], max_examples=2000, engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (per instance)"
    assert r.counterexample.rerun() > 0


def test_a_property_without_a_sampler_falls_back_to_hypothesis_and_says_so():
    from proofs import Property

    base = PROPERTIES["budget_balance"]
    mine = Property("mine", "mine", "-", "-", "-", "ipfl", base.instances, base.violation)
    r = check(SUBJECTS["local"], mine, max_examples=30, engine="batch")
    assert r.engine == "hypothesis" and r.verdict == "holds"


@pytest.mark.parametrize("key", sorted(IPFL_SPECS))
def test_numpy_draws_have_the_strategies_shape(key):
    """The batch sampler of a property draws instances shaped like its Hypothesis strategy
    (client count range, who lies, misreport factor, permutation), so both engines check
    the same statement. Derandomised in every profile: both engines reach both ends of the
    client-count range (Hypothesis by a search for each end, numpy by its size law)."""
    from hypothesis import HealthCheck, Phase, find, given, settings

    spec = IPFL_SPECS[key]
    # the range the reports show is the range both engines draw
    assert PROPERTIES[key].clients == (spec.min_m, spec.max_m)
    seen = []
    fixed = settings(max_examples=25, database=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))

    @fixed
    @given(PROPERTIES[key].instances())
    def collect(case):
        seen.append(case)

    collect()
    sampler = IpflSampler(spec)
    drawn = [c for d in sampler.draw(np.random.default_rng(0), 200) for c in sampler.cases(d)]
    tiers = {m for m, _ in spec.tiers}
    gains = [GAINS[g] for g in spec.gains]
    for group in (seen, drawn):
        assert spec.min_m <= min(c.market.m for c in group)
        # beyond max_m only the size tiers, and only the batch engine draws them
        assert all(c.market.m <= spec.max_m or (group is drawn and c.market.m in tiers)
                   for c in group)
        assert all(c.market.gain in gains and c.thresholds in spec.modes for c in group)
        assert {c.client is None for c in group} == {spec.liar is None}
        assert {c.factor is None for c in group} == {spec.liar not in ("over", "any")}
        assert {c.perm is None for c in group} == {not spec.perm}
        negative = any((c.D < 0).any() for c in group)
        assert negative == spec.negative or (not negative and group is seen)
    # both ends of the range: numpy gives every count in it a positive probability, and the
    # Hypothesis strategy draws a market of exactly min_m and of exactly max_m clients
    ms, p = sampler.sizes()
    assert list(ms) == list(range(spec.min_m, spec.max_m + 1)) and (p > 0).all()
    search = settings(fixed, max_examples=1000, phases=[Phase.generate])  # no shrinking
    for end in (spec.min_m, spec.max_m):
        assert find(PROPERTIES[key].instances(), lambda c, end=end: c.market.m == end,
                    settings=search).market.m == end


def test_every_gain_kind_threshold_mode_and_size_tier_is_drawn():
    """The configurations the public API accepts are drawn (issue 34, part 2): every gain
    kind and both threshold modes where a property's spec asks for them, each in about its
    share of the instances; the size tier at about its probability, only on the checker's
    own type space and never beyond a --max-clients."""
    from proofs.typespace import DEFAULT, TypeSpace

    spec = IpflSpec(gains=tuple(GAINS), modes=ipfl.MODES, tiers=((24, 0.02),))
    sampler = IpflSampler(spec)
    groups = sampler.draw(np.random.default_rng(0), 20_000)
    count = {}
    for d in groups:
        count[d.gain, d.mode] = count.get((d.gain, d.mode), 0) + d.size
        a = sampler.arrays(d)
        assert a["gain"] is GAINS[d.gain] and a["thresholds"] == d.mode
    assert set(count) == {(g, t) for g in GAINS for t in ipfl.MODES}
    assert all(abs(k / 20_000 - 1 / 8) < 0.02 for k in count.values()), count
    big = sum(d.size for d in groups if d.m == 24)
    assert 300 < big < 500  # 2 % of 20,000
    assert {d.m for d in groups} - {24} <= set(range(2, 13))
    mine = TypeSpace(name="mine", clients=(2, 12))
    assert mine != DEFAULT and IpflSampler(spec, mine).tiers == ()
    assert sampler_for(PROPERTIES["one_path"]).tiers == IPFL_SPECS["one_path"].tiers != ()
    assert sampler_for(PROPERTIES["one_path"], max_clients=12).tiers == ()
    # both engines: the Hypothesis strategy draws every gain kind and mode as well, and a
    # case's code rebuilds both
    from hypothesis import HealthCheck, given, settings

    seen = set()

    @settings(max_examples=200, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(PROPERTIES["one_path"].instances())
    def collect(case):
        seen.add((next(g for g in GAINS if GAINS[g] == case.market.gain), case.thresholds))
        if case.thresholds != "exact" or case.market.gain != GAINS["sqrt"]:
            ns = {"np": np, "ipfl": ipfl, "IpflCase": type(case)}
            exec(case.code(), ns)
            assert ns["case"].market.gain == case.market.gain
            assert ns["case"].thresholds == case.thresholds

    collect()
    assert seen == {(g, t) for g in GAINS for t in ipfl.MODES}


def test_batch_engine_is_reproducible():
    a = check(SUBJECTS["box2"], PROPERTIES["local_optimality"], max_examples=5000, seed=4,
              engine="batch")
    b = check(SUBJECTS["box2"], PROPERTIES["local_optimality"], max_examples=5000, seed=4,
              engine="batch")
    assert a.first_failure == b.first_failure
    assert a.counterexample.code() == b.counterexample.code()


def test_batch_engine_draws_until_the_target_of_discriminating_examples():
    """max_examples is the discriminating count to reach, exactly: the threshold theorem
    skips games with no interior client (about 5 %), Thm 2's regret search discriminates
    only where some lie changed the liar's utility (about a third); a property that could
    fail on every market draws exactly the target."""
    r = check(SUBJECTS["cpl-bisection"], PROPERTIES["cpl_threshold"], max_examples=5000,
              engine="batch")
    assert r.verdict == "holds" and r.discriminating == 5000 < r.examples <= 10_000
    r = check(SUBJECTS["local"], PROPERTIES["thm2"], max_examples=500, engine="batch")
    assert r.verdict == "holds" and r.discriminating == 500
    assert 2 * 500 < r.effective == r.examples < 4 * 500
    r = check(SUBJECTS["local"], PROPERTIES["individual_rationality"], max_examples=5000,
              engine="batch")
    assert r.discriminating == r.effective == r.examples == 5000


def _mine(check_on):
    from proofs import Property
    from proofs.batch import ipfl_sampler

    base = PROPERTIES["budget_balance"]
    return Property("mine", "mine", "-", "-", "-", "ipfl", base.instances, check_on,
                    sample=lambda: ipfl_sampler("budget_balance"))


def test_batch_engine_reads_a_mostly_unchecked_property_vacuous():
    """A property checked on about 1 draw in 5 (three-client markets only: P(m) ~ m^-3 over
    2-12 clients) reaches its target of discriminating examples among about 5 x as many
    draws, but fewer than half of the draws were checked: the strategy, not the property,
    decided what was tested, and the verdict reads vacuous."""
    base = PROPERTIES["budget_balance"]
    mine = _mine(lambda subject, case: base.violation(subject, case)
                 if case.market.m == 3 else None)
    r = check(SUBJECTS["local"], mine, max_examples=300, engine="batch")
    assert r.engine == "batch" and r.extra["mode"] == "batch (per instance)"
    assert r.discriminating == r.effective == 300 and r.effective < 0.5 * r.examples
    assert r.verdict == "vacuous" and r.extra["stopped"] == "budget"


def test_batch_engine_stops_a_rarely_discriminating_property_at_the_draw_cap():
    """Checked on every draw, but able to fail only on three-client markets with lam above
    4.5 (1 draw in 50 or so): the target is out of reach within DRAW_FACTOR x the budget
    of draws, and the verdict reads inconclusive, never holds."""
    from proofs import DRAW_FACTOR

    def rare(subject, case):
        amount = PROPERTIES["budget_balance"].amount(subject, case)
        return amount, amount, case.market.m == 3 and case.market.lam > 4.5

    r = check(SUBJECTS["local"], _mine(rare), max_examples=100, engine="batch")
    assert r.examples == DRAW_FACTOR * 100 and r.extra["stopped"] == "draw cap"
    assert 0 < r.discriminating < 100 and r.effective == r.examples
    assert r.verdict == "inconclusive"


def test_time_limit_stops_the_batch_engine_and_the_report_says_so():
    r = check(SUBJECTS["cpl-bisection"], PROPERTIES["cpl_threshold"], max_examples=10**6,
              engine="batch", time_limit=0.5)
    assert r.extra["stopped"] == "time limit" and r.examples < 10**6
    # fewer effective examples than the budget: thin evidence reads "inconclusive"
    assert r.verdict == "inconclusive" and r.effective >= 0.5 * r.examples


# --------------------------------------------------------- your own rules, over arrays


@over_arrays
def flat_fee_over_arrays(market, A, D):
    """flat_fee written over arrays: works on one market and on a whole batch."""
    G1 = market.gain.value(market.N[..., None, :], market.K[..., :, None],
                           market.N[..., :, None])
    return np.where(A, G1, 0.0)


@over_arrays
def my_local(market, D, T, P):
    return ipfl.local(T, market.N)


def test_a_rule_over_arrays_is_checked_in_bulk_and_rejected():
    mech = IpflMechanism("flat-fee", "local", remittances=flat_fee_over_arrays)
    r = check(mech, PROPERTIES["individual_rationality"], max_examples=20_000, engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0  # confirmed on the subject, one market at a time
    h = check(mech, PROPERTIES["individual_rationality"], max_examples=200)
    assert h.verdict == "counterexample"  # the same function under the Hypothesis engine


def test_a_correct_rule_over_arrays_holds_in_bulk():
    mech = IpflMechanism("mine", my_local)
    for key in ("budget_balance", "individual_rationality", "local_optimality", "lemma1"):
        r = check(mech, PROPERTIES[key], max_examples=20_000, engine="batch")
        assert r.verdict == "holds" and r.extra["mode"] == "batch (vectorised)", key


@over_arrays
def nan_rule(market, D, T, P):
    return np.full(T.shape, np.nan)


def test_a_rule_over_arrays_that_breaks_is_an_error_of_the_rule():
    r = check(IpflMechanism("nan", nan_rule), PROPERTIES["budget_balance"],
              max_examples=1000, engine="batch")
    assert r.verdict == "error" and "nan_rule" in r.error and r.error_instance is not None


# ------------------------------------------------------------- regret (misreport) rows


@pytest.mark.parametrize("rule", ["box2", "local", "exact"])
def test_regret_rows_are_searched_in_bulk_and_find_the_known_lies(rule):
    for key in ("truthful_K_under", "truthful_N_over"):
        assert SUBJECTS[rule].declares[key] is False
        r = check(SUBJECTS[rule], PROPERTIES[key], max_examples=20_000, engine="batch")
        assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)", key
        assert r.counterexample.rerun() > 0
    r = check(SUBJECTS[rule], PROPERTIES["thm2"], max_examples=3000, engine="batch")
    assert r.verdict == "holds" and r.discriminating == 3000 < r.effective
    assert r.extra["mode"] == "batch (vectorised)"


@over_arrays
def cost_plus_over_arrays(market, A, D):
    """Each buyer pays a seller twice its reported cost per sale: overstating c pays."""
    c = np.where(np.isfinite(market.c), market.c, 0.0)
    return np.where(A, 2.0 * c[..., None, :], 0.0)


def test_a_regret_search_in_bulk_rejects_a_rule_that_rewards_overstating_c():
    mech = IpflMechanism("cost-plus-arrays", "local", remittances=cost_plus_over_arrays)
    r = check(mech, PROPERTIES["thm2"], max_examples=5000, engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0


@pytest.mark.parametrize("rule", ["box2", "exact"])
def test_the_bulk_regret_search_finds_every_lie_the_scalar_search_finds(rule):
    """On a sample, every profitable misreport the scalar search (grid + bounded Brent,
    market by market) finds, the vectorised search finds too, with a regret at least as
    large up to the refinement's resolution."""
    from proofs.batch import batch_rule, ipfl_sampler, misreports_batch
    from proofs.regret import regret_search

    sampler, settle = ipfl_sampler("thm2"), batch_rule(SUBJECTS[rule])
    rng = np.random.default_rng(5)
    found = 0
    for dim, way in (("N", "over"), ("K", "under"), ("N", "under")):
        for d in sampler.draw(rng, 40):
            a = sampler.arrays(d)
            bulk, _ = misreports_batch(settle, a, dim, way)
            for k, case in enumerate(sampler.cases(d)):
                one = regret_search(SUBJECTS[rule].settle, case.market, case.D, case.client,
                                    dim, way, grid=8, starts=2, maxiter=10)
                tol = 1e-9 * (1.0 + abs(one.honest_utility))
                if one.regret > tol:
                    found += 1
                    assert bulk.regret[k] > tol
                    assert bulk.regret[k] >= 0.5 * one.regret
    assert found >= 5  # the sample holds profitable lies to compare


@pytest.mark.parametrize("name", ["cost-plus", "share-all", "vcg", "shapley"])
def test_reference_rules_cleared_in_bulk_match_the_scalar_clearing(name):
    """cost-plus (posted price and remittances), share-all (take every model, no money), vcg
    (Clarke pivot on the exact selection) and shapley (the Shapley split) are cleared in bulk;
    instance by instance they give the subject's own outcome."""
    from proofs.batch import batch_rule

    settle = batch_rule(SUBJECTS[name])
    assert settle is not None
    sampler = IpflSampler(IpflSpec(liar="any"))
    checked = 0
    for d in sampler.draw(np.random.default_rng(3), 300):
        a = sampler.arrays(d)
        c = a["c"].copy()
        c[np.arange(d.size), a["client"]] *= a["factor"]  # a liar: reported c, true c kept
        bulk = settle(a["N"], c, a["K"], a["lam"], a["D"], true_c=a["c"])
        for k in range(d.size):
            mk = ipfl.Market(N=a["N"][k], c=c[k], K=a["K"][k], lam=float(a["lam"][k]),
                             true_c=a["c"][k])
            out = SUBJECTS[name].settle(mk, a["D"][k])
            assert np.array_equal(bulk["A"][k], out.adjacency)
            np.testing.assert_allclose(bulk["p"][k], out.payments, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(bulk["U"][k], out.utilities, rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked == 300


def test_cost_plus_is_rejected_on_thm2_in_bulk():
    r = check(SUBJECTS["cost-plus"], PROPERTIES["thm2"], max_examples=20_000, engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0


# ------------------------------------------------- the batch engine checks the mechanism


def test_a_mutant_in_eq13_is_seen_by_the_batch_engine(monkeypatch):
    """The batch engine clears with mechanisms.ipfl's own code: payments off by 1e-6 in the
    one Eq. 13 function break budget balance in bulk (and on the scalar re-check)."""
    from mechanisms.ipfl import money

    honest = money.payments
    monkeypatch.setattr(money, "payments", lambda R: honest(R) + 1e-6)
    r = check(SUBJECTS["local"], PROPERTIES["budget_balance"], max_examples=2000, seed=0,
              engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0


def test_a_mutant_in_eq3_is_seen_by_the_batch_engine(monkeypatch):
    """Utilities off by 1e-6 in the one Eq. 3 function: individual rationality fails."""
    from mechanisms.ipfl import money

    honest = money.utilities
    monkeypatch.setattr(money, "utilities",
                        lambda market, A, p, **kw: honest(market, A, p, **kw) - 1e-6)
    r = check(SUBJECTS["local"], PROPERTIES["individual_rationality"], max_examples=2000,
              seed=0, engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0


def test_the_cheap_tier_reaches_the_greedy_rescan(monkeypatch):
    """The cheap tier (issue 34, part 2): 100-client markets with c and lam x CHEAP, where
    buyers have more than GREEDY_TOP = 64 sellers worth buying, so the greedy scans rows
    again with 8 x 64 sellers (measured: 19 of 20 such markets, seed 0; 0 of 20 markets of
    72-128 clients at the default prices); local_optimality and one_path draw it."""
    from mechanisms.ipfl import selection
    from proofs.batch import CHEAP

    rescans = []
    real = selection._greedy_top

    def spy(T, N, stop, top):
        A, final = real(T, N, stop, top)
        if top == selection.GREEDY_TOP:
            rescans.append(bool((~final).any()))
        return A, final

    monkeypatch.setattr(selection, "_greedy_top", spy)
    sampler = IpflSampler(IpflSpec(tiers=((100, 1.0),), cheap=(100,)))
    cases = [c for d in sampler.draw(np.random.default_rng(0), 20) for c in sampler.cases(d)]
    assert {c.market.m for c in cases} == {100}
    for c in cases:
        assert np.nanmax(np.where(np.isinf(c.market.c), np.nan, c.market.c)) <= 5 * CHEAP
        _clear(c.market, c.D, "local")
    assert sum(rescans) >= 15
    for key in ("local_optimality", "one_path"):
        assert (100, 0.0005) in IPFL_SPECS[key].tiers and IPFL_SPECS[key].cheap == (100,)


def test_a_greedy_that_never_rescans_breaks_local_optimality_on_the_cheap_tier(monkeypatch):
    """Known-bad: the greedy keeps the scan of each row's top 64 sellers (no rescan); on the
    cheap tier's markets the local rule then leaves sellers worth buying (Eq. 11)."""
    from mechanisms.ipfl import selection

    real = selection._greedy_top
    monkeypatch.setattr(selection, "_greedy_top",
                        lambda T, N, stop, top: (real(T, N, stop, top)[0],
                                                 np.ones(T.shape[:-1], bool)))
    sampler = IpflSampler(IpflSpec(tiers=((100, 1.0),), cheap=(100,)))
    cases = [c for d in sampler.draw(np.random.default_rng(0), 5) for c in sampler.cases(d)]
    prop, local = PROPERTIES["local_optimality"], SUBJECTS["local"]
    assert any(prop.amount(local, c) > 0 for c in cases)
    monkeypatch.setattr(selection, "_greedy_top", real)
    assert all(prop.amount(local, c) == 0 for c in cases)


# ------------------------------------------------------------- strata (issue 34, part 3)


def test_lemma1_draws_its_strata_and_keeps_the_plain_draw():
    """lemma1's draws (proofs.batch._LEMMA1): 45 in 100 in the priced-liar stratum and 40 in
    100 in the large-lie stratum, where the liar has a finite cost whenever a client of the
    market has one (and in large-lie a factor log-uniform up to LARGE_LIE); the rest plain,
    where a pure buyer (c = inf) is the liar as often as the plain law says and no factor
    exceeds 20; the sqrt gain 7 times in 10, each generic gain 1 in 10. Fails if a stratum
    drew a pure buyer as the liar, the large lies were not drawn, or the plain draw or a
    gain kind was dropped."""
    spec = IPFL_SPECS["lemma1"]
    assert dict(spec.strata) == {"priced-liar": 0.45, "large-lie": 0.4}
    assert spec.gains == GAINS_ORDER
    sampler = IpflSampler(spec)
    counts = {"": 0, "priced-liar": 0, "large-lie": 0}
    gains = dict.fromkeys(GAINS_ORDER, 0)
    unpriced = dict.fromkeys(counts, 0)
    large = dict.fromkeys(counts, 0)
    for d in sampler.draw(np.random.default_rng(0), 8000):
        a = sampler.arrays(d)
        rows = np.arange(d.size)
        liar_c = a["c"][rows, a["client"]]
        some_priced = np.isfinite(a["c"]).any(axis=1)
        counts[d.stratum] += d.size
        gains[d.gain] += d.size
        unpriced[d.stratum] += int((~np.isfinite(liar_c) & some_priced).sum())
        large[d.stratum] += int((a["factor"] > 20.0).sum())
        assert (a["factor"] > 1.0).all() and (a["factor"] <= LARGE_LIE * (1 + 1e-12)).all()
    assert unpriced["priced-liar"] == 0 and unpriced["large-lie"] == 0
    assert unpriced[""] > 0.15 * counts[""]  # a pure buyer lies in the plain draw (1/4)
    assert abs(counts["priced-liar"] / 8000 - 0.45) < 0.03
    assert abs(counts["large-lie"] / 8000 - 0.4) < 0.03
    assert large[""] == 0 and large["priced-liar"] == 0
    # log-uniform on (1, 1e6]: about 78 % above 20 (less the atoms at the lower end)
    assert large["large-lie"] > 0.6 * counts["large-lie"]
    assert abs(gains["sqrt"] / 8000 - 0.7) < 0.03
    assert all(abs(gains[g] / 8000 - 0.1) < 0.03 for g in GAINS_ORDER[1:])


GAINS_ORDER = tuple(GAINS)


@over_arrays
def buys_dear_models(market, D, T, P):
    """The local rule, plus every model priced above 20 (a fault: overstating c can then
    win a buyer, against Lemma 1)."""
    return ipfl.local(T, market.N) | (np.isfinite(P) & (P > 20.0))


def test_lemma1_with_its_strata_still_finds_a_planted_fault():
    r = check(IpflMechanism("dear", buys_dear_models), PROPERTIES["lemma1"],
              max_examples=2000, seed=0, engine="batch")
    assert r.verdict == "counterexample" and r.extra["mode"] == "batch (vectorised)"
    assert r.counterexample.rerun() > 0
    # and on the plain draw alone (the strata removed), as before
    plain = IpflSampler(IpflSpec(liar="over", gains=GAINS_ORDER))
    found = 0
    for d in plain.draw(np.random.default_rng(0), 2000):
        out = PROPERTIES["lemma1"].batch(IpflMechanism("dear", buys_dear_models))(
            plain.bulk_input(d))
        found += int((np.asarray(out[0]) > 0).sum())
    assert found > 0


@over_arrays
def buys_very_dear_models(market, D, T, P):
    """The local rule, plus every model priced above 10^4: a fault that only a lie far
    beyond the plain draw's factors (at most 20) can show, since no truthful price of the
    default type space exceeds 5 + 5 x 100 x 2 = 1,005."""
    return ipfl.local(T, market.N) | (np.isfinite(P) & (P > 1e4))


def test_lemma1_large_lie_stratum_finds_a_fault_of_large_lies():
    """The large-lie stratum is what finds a rule that buys only very dear models; with
    the strata removed (the plain draw) the same budget finds nothing."""
    rule = IpflMechanism("very dear", buys_very_dear_models)
    r = check(rule, PROPERTIES["lemma1"], max_examples=2000, seed=0, engine="batch")
    assert r.verdict == "counterexample" and r.counterexample.rerun() > 0
    plain = IpflSampler(IpflSpec(liar="over", gains=GAINS_ORDER))
    hook = PROPERTIES["lemma1"].batch(rule)
    found = 0
    for d in plain.draw(np.random.default_rng(0), 8000):
        found += int((np.asarray(hook(plain.bulk_input(d))[0]) > 0).sum())
    assert found == 0


def test_lemma1_draws_fewer_markets_for_its_budget_than_the_plain_draw():
    """The figure docs/reference-proofs.md ("Strata") prints for the strata: box2, seed 0,
    5,000 discriminating examples from 19,169 draws (26.1 %; with the former strata, the
    priced-liar stratum 3 in 4 and the sqrt gain half the time: 33,091, 15.1 %)."""
    r = check(SUBJECTS["box2"], PROPERTIES["lemma1"], max_examples=5000, seed=0,
              engine="batch")
    assert r.verdict == "holds" and r.discriminating == 5000 and r.examples == 19_169


@pytest.mark.slow
def test_lemma1_on_the_plain_draw_measures_what_the_page_says(monkeypatch):
    """The plain draw's figures of docs/reference-proofs.md ("Strata"): box2, seed 0, 5,000
    discriminating from 75,791 draws (6.6 %); on 40,000 plain draws (seed 1) the shares by
    gain kind (sqrt 24.7 %, log 0.7 %, power 0.9 %, linear 0.4 %) and a pure-buyer liar in
    22 % of them, never discriminating."""
    plain = IpflSpec(liar="over", gains=GAINS_ORDER)
    monkeypatch.setitem(IPFL_SPECS, "lemma1", plain)
    r = check(SUBJECTS["box2"], PROPERTIES["lemma1"], max_examples=5000, seed=0,
              engine="batch")
    assert r.verdict == "holds" and r.examples == 75_791
    sampler = IpflSampler(plain)
    hook = PROPERTIES["lemma1"].batch(SUBJECTS["box2"])
    drawn = dict.fromkeys(GAINS_ORDER, 0)
    disc = dict.fromkeys(GAINS_ORDER, 0)
    pure = pure_disc = 0
    for d in sampler.draw(np.random.default_rng(1), 40_000):
        a = sampler.arrays(d)
        hit = np.asarray(hook(a)[2])
        drawn[d.gain] += d.size
        disc[d.gain] += int(hit.sum())
        liar_pure = ~np.isfinite(a["c"][np.arange(d.size), a["client"]])
        pure += int(liar_pure.sum())
        pure_disc += int((hit & liar_pure).sum())
    shares = {g: round(100 * disc[g] / drawn[g], 1) for g in GAINS_ORDER}
    assert shares == {"sqrt": 24.7, "log": 0.7, "power": 0.9, "linear": 0.4}
    assert round(100 * pure / 40_000) == 22 and pure_disc == 0


# -------------------------------------------------- the exhaustive grid in bulk (issue 34)

SMALL_GRID = {"m": 3, "N": (100.0, 400.0), "c": (0.5, float("inf")), "K": (0.0, 5e4),
              "lam": (2.0,), "d": (0.1, 1.0)}  # 4,096 markets, the standard grid's lam 2


def _fields(r):
    return (r.verdict, r.examples, r.effective, r.discriminating, r.largest_violation,
            r.first_failure, r.error, r.counterexample is None)


@over_arrays
def never_buys_from_client_0(market, D, T, P):
    """The local rule without any purchase from client 0: a fault of local optimality on
    the grid (a buyer skips a model worth buying)."""
    A = np.array(ipfl.local(T, market.N))
    A[..., :, 0] = False
    return A


@pytest.mark.parametrize("subject, key", [
    ("box2", "budget_balance"), ("exact", "local_optimality"),
    ("vcg", "budget_balance"),  # declared to fail: found on the grid, then the loop's
    ("share-all", "individual_rationality"),
])
def test_exhaustive_grid_in_bulk_reports_what_the_loop_reports(subject, key):
    """check_exhaustive evaluates a grid of a built-in pair at once (proofs.batch.
    evaluate_in_bulk); its report (verdict, counts, largest violation, first failure,
    counterexample) is the instance-by-instance loop's (bulk=False), holding or failing."""
    from proofs.checker import check_exhaustive
    from proofs.ipfl_properties import tiny_markets

    got = check_exhaustive(SUBJECTS[subject], PROPERTIES[key], tiny_markets(**SMALL_GRID))
    loop = check_exhaustive(SUBJECTS[subject], PROPERTIES[key], tiny_markets(**SMALL_GRID),
                            bulk=False)
    assert _fields(got) == _fields(loop)


def test_exhaustive_grid_in_bulk_finds_a_planted_fault_and_agrees_instance_by_instance():
    """The bulk evaluation's violations are each instance's own (proofs.core.
    evaluate_instance through the subject), a planted fault's included; the grid's report
    then names the loop's counterexample."""
    from proofs.batch import evaluate_in_bulk
    from proofs.checker import check_exhaustive
    from proofs.core import evaluate_instance
    from proofs.ipfl_properties import tiny_markets

    bad = IpflMechanism("skips 0", never_buys_from_client_0)
    prop = PROPERTIES["local_optimality"]
    cases = list(tiny_markets(**SMALL_GRID))[::16]
    viol, eff, disc = evaluate_in_bulk(bad, prop, cases)
    one = [evaluate_instance(bad, prop, c) for c in cases]
    assert np.array_equal(viol, [o[0] for o in one]) and (viol > 0).any()
    assert np.array_equal(eff, [o[2] for o in one]) and np.array_equal(disc, [o[3] for o in one])
    r = check_exhaustive(bad, prop, tiny_markets(**SMALL_GRID))
    assert r.verdict == "counterexample" and r.counterexample.rerun() > 0
    assert _fields(r) == _fields(check_exhaustive(bad, prop, tiny_markets(**SMALL_GRID),
                                                  bulk=False))


def test_evaluate_in_bulk_refuses_cases_that_are_not_one_batch():
    """Markets of different sizes, a liar, or a market that is not truthful: None (the
    grid is then evaluated one by one)."""
    from proofs.batch import evaluate_in_bulk
    from proofs.ipfl_properties import IpflCase, tiny_markets

    prop = PROPERTIES["budget_balance"]
    three = list(tiny_markets(**SMALL_GRID))[:4]
    two = list(tiny_markets(**{**SMALL_GRID, "m": 2}))[:4]
    assert evaluate_in_bulk(SUBJECTS["box2"], prop, three) is not None
    assert evaluate_in_bulk(SUBJECTS["box2"], prop, three + two) is None
    liar = IpflCase(three[0].market, three[0].D, client=0, factor=2.0)
    assert evaluate_in_bulk(SUBJECTS["box2"], prop, [*three, liar]) is None
    lying = three[0].market.replace(c=three[0].market.c * 2, true_c=three[0].market.c)
    assert evaluate_in_bulk(SUBJECTS["box2"], prop, [IpflCase(lying, three[0].D)]) is None

# ----------------------------------------------------- the cheap-data markets (issue 34)


def _big_branch(a) -> int:
    """Seller-buyer pairs of the drawn sqrt-gain markets ``a`` (IpflSampler.arrays) whose
    closed form takes the large-q branch (mechanisms.gains._P_BIG: q/4 = sqrt(K_i) /
    (D_ij sqrt(N_j)) > 2.5e8, finite)."""
    P = ipfl.paper_prices_arrays(a["N"], a["c"], a["lam"], a["D"])
    with np.errstate(all="ignore"):
        p = np.sqrt(a["K"])[:, :, None] / (P * np.sqrt(a["N"])[:, None, :])
    return int((np.isfinite(p) & (p > 2.5e8)).sum())


def test_the_cheap_data_markets_scale_the_sqrt_markets_prices_within_the_type_space():
    """IpflSpec.cheap_data (CHEAP_DATA_SHARE = 5 % of the draws of the rows that declare it):
    a sqrt-gain market has c and lam x 10^u, u uniform on [-12, 0], so its prices reach the
    closed form's large-q branch the plain draw never reaches; a generic gain's market is
    the plain one; every c stays in the type space's [0, 5]; no group of its own (the draws
    split as without it). Fails if the markets are dropped, a generic gain's market scaled,
    or the large-q branch unreached."""
    assert CHEAP_DATA_SHARE == 0.05 and CHEAP_DATA == (-12.0, 0.0)
    for key in ("individual_rationality", "local_optimality", "one_market", "one_path"):
        assert IPFL_SPECS[key].cheap_data == CHEAP_DATA_SHARE, key
    sampler = IpflSampler(IpflSpec(gains=GAINS_ORDER, cheap_data=0.5))
    plain = IpflSampler(IpflSpec(gains=GAINS_ORDER))
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    drawn = scaled = big_plain = big_cheap = 0
    ratios = []
    for d, e in zip(sampler.draw(rng_a, 4000), plain.draw(rng_b, 4000), strict=True):
        assert d.size == e.size and d.gain == e.gain  # the same groups, the same draws
        a, base = sampler.arrays(d), plain.arrays(e)
        c = a["c"][np.isfinite(a["c"])]
        assert ((c >= 0) & (c <= 5)).all()
        lam0 = base["lam"] > 0
        ratio = np.ones_like(base["lam"])
        ratio[lam0] = a["lam"][lam0] / base["lam"][lam0]
        with np.errstate(invalid="ignore", divide="ignore"):
            c_ratio = np.where(np.isfinite(base["c"]) & (base["c"] > 0), a["c"] / base["c"], 1.0)
        cheap = (ratio < 1) | (c_ratio < 1).any(axis=1)  # lam = 0 or c = 0: seen in the other
        if d.gain != "sqrt":
            assert not cheap.any()
            continue
        drawn += int(lam0.sum())  # lam = 0 (an atom) shows no scaling: the share over lam > 0
        scaled += int((cheap & lam0).sum())
        ratios.extend(np.log10(ratio[cheap & lam0]).tolist())
        keep = ~cheap
        big_plain += _big_branch({k: a[k][keep] for k in ("N", "c", "K", "lam", "D")})
        big_cheap += _big_branch({k: a[k][cheap] for k in ("N", "c", "K", "lam", "D")})
    assert abs(scaled / drawn - 0.5) < 0.05
    assert big_plain == 0 and big_cheap > 100
    assert min(ratios) >= -12 and max(ratios) <= 0 and np.ptp(ratios) > 10


def _big_fault(monkeypatch):
    """A fault only in the sqrt closed form's large-q branch: its thresholds 1e-6 too high."""
    from mechanisms import gains

    real = gains._sqrt_roots

    def faulty(price, Nj, K, N, x):
        real(price, Nj, K, N, x)
        with np.errstate(all="ignore"):
            p = np.sqrt(K) / (price * np.sqrt(Nj))
        x[np.isfinite(p) & (p > gains._P_BIG)] *= 1 + 1e-6

    monkeypatch.setattr(gains, "_sqrt_roots", faulty)


@pytest.mark.slow
def test_conforms_finds_a_fault_of_the_large_q_branch_only_with_the_cheap_data_markets(
        monkeypatch):
    """Generated mutants 0384171072 and 203e0b0528 (the branch's v0 + 1/(3 v0^3) miswritten)
    survived every row: the plain draw never reaches the branch. With the markets, conforms
    finds a fault planted there (local, seed 0, 20,000 markets). Since 50d748e conforms also
    places tiny prices on every batch (proofs.conformance's tiny-price gaps), so the plain
    draw's first batch finds it too; without those placed prices, the plain draw alone does
    not (4,000 markets): the markets and the placed prices each reach the branch."""
    from proofs import conformance

    _big_fault(monkeypatch)
    r = check(SUBJECTS["local"], PROPERTIES["conforms"], max_examples=20_000, seed=0,
              engine="batch")
    assert r.verdict == "counterexample" and r.counterexample.rerun() > 0
    sampler = IpflSampler(IpflSpec(liar="any", gains=GAINS_ORDER, modes=ipfl.MODES))
    hook = PROPERTIES["conforms"].batch(SUBJECTS["local"])
    first = next(iter(sampler.draw(np.random.default_rng(0), 4000)))
    assert (np.asarray(hook(sampler.bulk_input(first))[0]) > 0).any()
    monkeypatch.setattr(conformance, "_tiny_price_gaps", lambda gaps, N, K: None)
    for d in sampler.draw(np.random.default_rng(0), 4000):
        assert (np.asarray(hook(sampler.bulk_input(d))[0]) <= 0).all()
