"""The batch engine: same verdicts as the subject itself, every known counterexample found.

Its bulk clearing reproduces the built-in rules; these tests hold it to the scalar clearing
(:func:`mechanisms.ipfl.clear`) instance by instance, and hold the engine to every
counterexample the Hypothesis engine finds.
"""

import numpy as np
import pytest

from mechanisms import ipfl
from proofs import PROPERTIES, SUBJECTS, IpflMechanism, check
from proofs.batch import IpflSampler, IpflSpec, settle_batch


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
            out = ipfl.clear(mk, a["D"][k], rule, allow_negative_distances=spec.negative)
            assert np.array_equal(bulk["A"][k], out.adjacency)
            np.testing.assert_allclose(bulk["p"][k], out.payments, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(bulk["U"][k], out.utilities, rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked == 400


KNOWN = [
    ("box2", "local_optimality"), ("box2", "ir_negative_distances"),
    ("local", "ir_negative_distances"), ("exact", "ir_negative_distances"),
    ("local", "thm3_lam0"), ("exact", "thm3_lam0"), ("box2", "truthful_N"),
    ("local", "truthful_N"), ("exact", "truthful_N"), ("local", "permutation_ties"),
    ("local", "global_optimality"),
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
    r = check(SUBJECTS["local"], PROPERTIES["truthful_N"], max_examples=10_000, engine="batch")
    case = r.counterexample.instance
    assert case.market.m == 2 and (case.D == 0).all() and case.market.lam == 0.0


@pytest.mark.parametrize("key", ["budget_balance", "individual_rationality", "lemma1",
                                 "local_optimality", "thm3", "thm2", "permutation"])
def test_batch_engine_holds_where_declared(key):
    r = check(SUBJECTS["local"], PROPERTIES[key], max_examples=20_000, engine="batch")
    assert r.verdict == "holds" and r.effective == r.examples == 20_000
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


def test_batch_engine_is_reproducible():
    a = check(SUBJECTS["box2"], PROPERTIES["local_optimality"], max_examples=5000, seed=4,
              engine="batch")
    b = check(SUBJECTS["box2"], PROPERTIES["local_optimality"], max_examples=5000, seed=4,
              engine="batch")
    assert a.first_failure == b.first_failure
    assert a.counterexample.code() == b.counterexample.code()


def test_time_limit_stops_the_batch_engine_and_the_report_says_so():
    r = check(SUBJECTS["cpl-bisection"], PROPERTIES["cpl_threshold"], max_examples=10**6,
              engine="batch", time_limit=0.5)
    assert r.extra["stopped"] == "time limit" and r.examples < 10**6
    assert r.verdict == "holds" and r.effective >= 0.5 * r.examples
