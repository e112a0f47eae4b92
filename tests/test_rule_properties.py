"""The checker's containment properties (issue 34, part 2: proofs.rule_properties):
``contains_rules`` (ipfl.clear) and ``cpl_contains_rules`` (cpl.apply_pricing). Every slot
and behaviour is contained on fixed instances (here), the checker holds them on built-in
subjects, and it rejects known-bad containment: no copies for a rule, errors let through,
output checks skipped, time limits ignored."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import mechanisms.contain as contain
from proofs import PROPERTIES, SUBJECTS, check
from proofs import input_properties as ip
from proofs import rule_properties as rp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ipfl_clear = importlib.import_module("mechanisms.ipfl.clear")  # the module (ipfl.clear: a function)


def _bases(family, k=2):
    smp = ip.ipfl_base_sampler() if family == "ipfl" else ip.cpl_base_sampler()
    return [c for d in smp.draw(np.random.default_rng(0), k) for c in smp.cases(d)]


@pytest.mark.parametrize("family, subject", [("ipfl", "local"), ("ipfl", "vcg"),
                                             ("cpl", "cpl-bisection"), ("cpl", "cpl-gradient")])
def test_every_slot_and_behaviour_is_contained(family, subject):
    subj = SUBJECTS[subject]
    for base in _bases(family):
        for slot in rp.SLOTS[family]:
            for behaviour in rp.BEHAVIOURS:
                case = rp.RuleCase(base, slot, behaviour, family)
                assert rp.contained_violation(subj, case) in (0.0, None), (slot, behaviour)


def test_every_subject_declares_its_family_s_property():
    for subject in SUBJECTS.values():
        if subject.family in ("ipfl", "cpl"):
            key = "contains_rules" if subject.family == "ipfl" else "cpl_contains_rules"
            assert subject.declares[key] is True, subject.name


@pytest.mark.parametrize("key, subject", [("contains_rules", "box2"),
                                          ("cpl_contains_rules", "cpl-uniform")])
def test_the_checker_holds_them(key, subject):
    r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=60, seed=0, engine="batch")
    assert r.verdict == "holds" and r.discriminating >= 60


def _caught(key, subject, n=300):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=n, seed=0, engine="batch")
    assert r.verdict == "counterexample", r.verdict
    return r


def test_a_rule_handed_the_caller_s_arrays_is_caught(monkeypatch):
    monkeypatch.setattr(contain, "handed", lambda value: value)
    r = _caught("contains_rules", "local")
    assert r.counterexample.instance.behaviour == "writes"


def test_a_rule_handed_the_caller_s_game_is_caught(monkeypatch):
    monkeypatch.setattr(contain, "handed", lambda value: value)
    assert _caught("cpl_contains_rules", "cpl-uniform").counterexample.instance.behaviour \
        == "writes"


def test_errors_let_through_are_caught(monkeypatch):
    monkeypatch.setattr(contain.contained, "__exit__", lambda self, *exc: False)
    behaviour = _caught("contains_rules", "local").counterexample.instance.behaviour
    assert behaviour in ("raises", "exits", "base_exception")


def test_unchecked_output_is_caught(monkeypatch):
    monkeypatch.setattr(ipfl_clear, "_check_output",
                        lambda kind, label, value, shapes: np.asarray(value, dtype=float))
    _caught("contains_rules", "local")


def _no_limit(monkeypatch):
    monkeypatch.setattr(ipfl_clear, "within", lambda seconds, fn, *a, **kw: fn(*a, **kw))


def test_an_ignored_time_limit_fails_the_sleeping_rule(monkeypatch):
    _no_limit(monkeypatch)
    base = _bases("ipfl", 1)[0]
    case = rp.RuleCase(base, "payments", "sleeps", "ipfl")
    assert rp.contained_violation(SUBJECTS["local"], case) == 1.0  # it slept 1 s, answered


@pytest.mark.slow  # about 20 s of wall time asleep (the shrinker reruns the sleeping rule)
def test_an_ignored_time_limit_is_caught(monkeypatch):
    _no_limit(monkeypatch)
    assert _caught("contains_rules", "local").counterexample.instance.behaviour == "sleeps"
