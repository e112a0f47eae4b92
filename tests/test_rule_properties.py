"""The checker's containment properties (issue 34, part 2: proofs.rule_properties):
``contains_rules`` (ipfl.clear) and ``cpl_contains_rules`` (cpl.apply_pricing). Every slot
and behaviour is contained on fixed instances (here), the checker holds them on built-in
subjects, and it rejects known-bad containment: no copies for a rule, errors let through,
output checks skipped, time limits ignored."""

from __future__ import annotations

import importlib
import sys
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
    monkeypatch.setattr(contain, "_running", [])  # never popped here: a list of its own
    behaviour = _caught("contains_rules", "local").counterexample.instance.behaviour
    assert behaviour in ("raises", "exits", "base_exception", "raises_limited",
                         "ends_process_limited")  # (the child's ProcessEnded escapes too)


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
    # any rule that sleeps past the call's own limit (under a foreign timer or starting a
    # program too, or nested_clear's inner rule past its clearing's) answers instead of
    # being stopped; one that ends its process, run in this one (no limit: no child),
    # answers too
    assert _caught("contains_rules", "local").counterexample.instance.behaviour in (
        "sleeps", "foreign_timer_rings", "foreign_timer_ignored", "starts_program",
        "nested_clear", "nested_late", "foreign_handler_idle", "foreign_ring_pending",
        "ends_process_limited")


# ------------------------------------------- the behaviours added for issue 34, part 2
# each new behaviour against a planted fault of the containment it checks: the same check
# that holds on the toolkit (test_every_slot_and_behaviour_is_contained) fails on the fault


def _violation(behaviour, slot="payments", family="ipfl", subject="local", pure=False):
    bases = _bases(family, 4)
    if pure:  # a market with a pure buyer (c = inf)
        bases = [b for b in bases if np.isinf(b.market.c).any()]
    return rp.contained_violation(SUBJECTS[subject], rp.RuleCase(bases[0], slot, behaviour,
                                                                 family))


def test_a_guard_that_refuses_trusted_names_fails_trusted_from_data(monkeypatch):
    import mechanisms.lookup as lookup

    assert _violation("trusted_from_data") == 0.0
    monkeypatch.setattr(lookup, "_module_names", lambda trusted: frozenset())
    assert _violation("trusted_from_data") == 1.0


def test_a_lost_foreign_timer_fails_both_foreign_behaviours(monkeypatch):
    class Forgetful(dict):  # the limit forgets the handler and timer it found
        def update(self, *a, **kw):
            pass

    assert _violation("foreign_timer_kept") == 0.0
    assert _violation("foreign_timer_rings") == 0.0
    assert _violation("foreign_timer_ignored") == 0.0
    monkeypatch.setattr(contain, "_foreign", Forgetful())
    assert _violation("foreign_timer_kept") == 1.0
    assert _violation("foreign_timer_ignored") == 1.0  # SIG_DFL after the call, not SIG_IGN
    assert _violation("foreign_timer_rings", family="cpl", slot="pricing",
                      subject="cpl-uniform") == 1.0


def test_a_limit_taken_in_another_thread_fails_threaded_limited(monkeypatch):
    assert _violation("threaded") == 0.0 and _violation("threaded_limited") == 0.0
    monkeypatch.setattr(contain, "can_interrupt", lambda: True)  # signal.signal then raises
    assert _violation("threaded_limited") == 1.0


def test_an_outer_limit_ignored_fails_nested_limited(monkeypatch):
    import signal
    import time

    def arm_innermost():  # only the innermost limit's deadline is set
        lim = contain._limits[-1]
        left = 0.05 if lim.expired else lim.deadline - time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3))

    assert _violation("nested_limited", slot="prices") == 0.0
    monkeypatch.setattr(contain, "_arm", arm_innermost)
    assert _violation("nested_limited", slot="prices") == 1.0  # it slept 1 s, answered


def test_a_rule_under_a_limit_run_in_this_process_fails_ends_process(monkeypatch):
    assert _violation("ends_process_limited") == 0.0
    assert _violation("raises_limited") == 0.0
    monkeypatch.setattr(contain, "_in_child", lambda fn, args: fn(*args))
    assert _violation("ends_process_limited") == 1.0  # not in a child: it answers instead


def test_a_rule_buying_from_a_pure_buyer_let_through_is_caught(monkeypatch):
    assert _violation("sells_pure_buyer", slot="rule", pure=True) == 0.0
    assert _violation("zero_one", slot="rule") == 0.0
    monkeypatch.setattr(ipfl_clear, "check_sellers", lambda *a, **kw: None)
    assert _violation("sells_pure_buyer", slot="rule", pure=True) == 1.0


def test_names_refused_before_a_call_and_untrusted_agree(monkeypatch):
    for behaviour in ("malformed_name", "not_callable", "from_data"):
        assert _violation(behaviour) == 0.0, behaviour
    monkeypatch.setattr(rp, "untrusted", lambda specs, trusted=(): [])  # lists nothing
    assert _violation("from_data") == 1.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal: prctl")
def test_a_program_a_stopped_rule_started_left_running_is_caught(monkeypatch):
    import os

    # a limit of 0.5 s here, not the draw's 0.1 (rp.PROGRAM_LIMIT): on a loaded machine (a
    # fresh clone's make test beside other jobs) 0.05 s passed before the rule's child had
    # started its program and written its pid, and each planted fault below must be seen
    monkeypatch.setattr(rp, "PROGRAM_LIMIT", 0.5)
    assert _violation("starts_program") == 0.0

    def no_group(pid, sig):
        raise OSError("no process group")

    monkeypatch.setattr(os, "killpg", no_group)  # only the rule's own process is killed
    assert _violation("starts_program") == 0.0  # its program still dies with it (prctl)
    monkeypatch.setattr(rp, "kill_with_parent", lambda: None)  # and no death signal either
    assert _violation("starts_program") == 1.0
    # a program that never runs (its preexec ends it: kill_with_parent made in another
    # process than the one starting the program does so) leaves nothing to see: a violation
    monkeypatch.setattr(rp, "kill_with_parent", lambda: lambda: os._exit(1))
    assert _violation("starts_program") == 1.0


def test_a_limit_that_stops_the_toolkit_s_own_steps_fails_late(monkeypatch):
    class Anywhere(contain.Limit):  # every limit stops whatever runs (a sweep cell's kind)
        def __init__(self, seconds, *, anywhere=False):
            super().__init__(seconds, anywhere=True)

    def violations():
        return [rp.contained_violation(SUBJECTS["exact"], rp.RuleCase(b, "payments", "late",
                                                                      "ipfl"))
                for b in _bases("ipfl", 12)]

    assert set(violations()) <= {0.0, None}
    monkeypatch.setattr(contain, "Limit", Anywhere)
    assert 1.0 in violations()  # stopped in the toolkit's steps: an error naming time_limit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal: prctl")
def test_a_rule_stopped_before_it_started_its_program_is_not_checked(monkeypatch):
    """A starts_program draw whose limit passes before the rule's child has started its
    program saw nothing to contain: not checked (None), never "holds" (it read 0 before, on
    a loaded host, whatever the toolkit did with programs)."""
    import time

    # the program's start outlasts the limit: its preexec function sleeps 10 s before exec
    monkeypatch.setattr(rp, "kill_with_parent", lambda: lambda: time.sleep(10))
    t0 = time.monotonic()
    assert _violation("starts_program") is None
    assert time.monotonic() - t0 < 5  # stopped at its limit, not after the program's start


@pytest.mark.parametrize("behaviour, fault", [
    ("import_raises", "escapes"),  # the module's ValueError escapes as it is
    ("import_interrupted", "converted"),  # Ctrl-C during the import turned into RuleFailed
])
def test_a_module_raising_on_import_is_contained_as_stated(monkeypatch, behaviour, fault):
    from mechanisms import lookup

    subj = SUBJECTS["local"]
    base = _bases("ipfl", k=1)[0]
    cases = [rp.RuleCase(base, slot, behaviour, "ipfl") for slot in rp.SLOTS["ipfl"]]
    assert all(rp.contained_violation(subj, case) == 0.0 for case in cases)
    if fault == "escapes":
        def load(spec, field="rule"):
            name = spec.partition(":")[2]
            return getattr(lookup.import_named(spec, field), name)

        monkeypatch.setattr(lookup, "load_callable", load)
    else:
        monkeypatch.setattr(lookup, "must_pass", lambda exc: False)
    assert all(rp.contained_violation(subj, case) == 1.0 for case in cases)
