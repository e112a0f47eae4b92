"""The property checker: properties as objects, subjects that declare them, and reports.

A :class:`Property` has a name, the statement, the paper reference, the exact preconditions, a
Hypothesis strategy of instances that satisfy those preconditions (built in, not filtered) and
a ``violation(subject, instance)`` function that returns

* ``0`` when the property holds on the instance, a positive amount when it fails (the amount
  also steers the search through ``hypothesis.target``); NaN counts as a failure, never a pass;
* or a pair ``(violation, score)`` when another number should steer the search;
* or a triple ``(violation, score, discriminating)``: ``discriminating`` False says the
  instance could not have failed the property whatever the subject's answer (the misreport
  changed nothing, the interesting branch of the precondition was not hit);
* or ``None`` when the instance does not meet the preconditions and nothing was checked.

**Evidence.** Every drawn example records whether it was *effective* -- the violation
function returned a number (preconditions met) AND called the subject (the checker hands the
property a tracking wrapper of the subject and counts its method calls) -- and whether it was
*discriminating*: effective, and the property could have failed there (a failing instance
always is). A :class:`Report` carries the three counts, ``examples`` (drawn), ``effective``
and ``discriminating``; when no counterexample turned up and fewer than
:data:`VACUITY_THRESHOLD` of the drawn examples were effective, the verdict is ``"vacuous"``,
not ``"holds"``. The Hypothesis engine counts that share over the examples it drew without
targeting (its targeted phase mutates the best-scoring, i.e. checkable, examples, which
would inflate the share). The discriminating count is reported beside it (the vacuity rule
does not read it yet: see docs/reference-proofs.md, "What effective means").

**Errors.** An exception raised inside the subject (your rule, or the checker's validation of
its output: shape, finite values, 0/1 adjacency) is an error *of the rule*: the verdict is
``"error"`` with the message and the (shrunk) instance, never a counterexample.

Subjects declare what they claim (``subject.declares``: property key -> True/False). The
contract suite (:func:`proofs.check_contract`) checks every declaration both ways: a property
declared True must hold, one declared False must be broken by a counterexample the checker
finds itself.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager

from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from .batch import check_batch, sampler_for
from .core import (
    FAMILIES,
    VACUITY_THRESHOLD,
    VERDICTS,
    CheckerInputError,
    Counterexample,
    Property,
    Report,
    SubjectError,
    Tally,
    Throttle,
    evaluate_instance,
    evaluate_once,
    excess,
    subject_name,
    validate,
    verdict,
)

# FAMILIES ... verdict live in proofs.core (shared by both engines) and are re-exported here
__all__ = [
    "FAMILIES",
    "VACUITY_THRESHOLD",
    "VERDICTS",
    "CheckerInputError",
    "Counterexample",
    "Property",
    "Report",
    "SubjectError",
    "Tally",
    "Throttle",
    "check",
    "check_exhaustive",
    "check_hypothesis",
    "evaluate_instance",
    "evaluate_once",
    "excess",
    "subject_name",
    "verdict",
]

def check(subject, prop: Property, *, max_examples: int | None = None, seed: int | None = 0,
          tolerance: float = 0.0, deadline=None, engine: str = "hypothesis",
          time_limit: float | None = None, min_effective: int | None = None,
          progress: Callable[[int, int], None] | None = None,
          max_clients: int | None = None) -> Report:
    """Search for an instance where ``prop`` fails for ``subject``.

    max_examples : instances to draw; None takes the active Hypothesis profile's budget
        (``HYPOTHESIS_PROFILE``, see :mod:`proofs.profiles`). The batch engine draws until
        that many were effective (checked), at most ``max_examples / VACUITY_THRESHOLD``.
    seed : fixes the randomness (None: random); the example database is off, so the same call
        gives the same report in any process.
    tolerance : a violation counts only above it (finite, >= 0).
    engine : "hypothesis" (targeted search, shrinking) or "batch" (numpy draws evaluated in
        bulk, violations re-checked and shrunk; see :mod:`proofs.batch`). A property without
        a numpy sampler falls back to Hypothesis, and the report's ``engine`` says so.
    time_limit : stop drawing after this many seconds (either engine); the report counts
        what was checked, ``extra["stopped"]`` says "time limit", and a search stopped short
        of its budget without a counterexample reads "inconclusive", never "holds". The
        limit is checked between examples: one call of the subject is not interrupted.
    progress : ``progress(done, budget)`` as the search goes, at most ten times a second
        and once at its end: examples drawn of ``max_examples`` (Hypothesis engine),
        effective examples of ``max_examples`` (batch engine). Library code never prints;
        ``fedmarket prove`` shows it.
    min_effective : the evidence a "holds" needs: with fewer effective examples and no
        counterexample the verdict is "inconclusive". Default: ``max_examples`` for the batch
        engine (it draws until that many were effective, so only a time limit stops it
        short), none for the Hypothesis engine (its drawn examples include some outside the
        preconditions; the vacuity rule applies).
    max_clients : the largest market to draw (both engines); None: the property's own range
        (``prop.clients``: 2-12 clients for the built-in iPFL properties). Refused for a
        property that does not say how many clients it draws. The report's ``clients`` and
        its preconditions column show the range drawn.
    """
    max_examples, tolerance = validate(subject, prop, max_examples, tolerance)
    clients = _clients(prop, max_clients)
    if time_limit is not None and not (isinstance(time_limit, numbers.Real)
                                       and math.isfinite(time_limit) and time_limit > 0):
        raise CheckerInputError("time_limit", f"is {time_limit!r}; must be a finite number "
                                              "of seconds > 0, or None")
    if progress is not None and not callable(progress):
        raise CheckerInputError("progress", f"is {progress!r}; must be a function "
                                            "progress(done, budget), or None")
    if min_effective is not None and (isinstance(min_effective, bool) or not isinstance(
            min_effective, numbers.Integral) or min_effective < 0):
        raise CheckerInputError("min_effective", f"is {min_effective!r}; must be an integer "
                                                 ">= 0, or None")
    if engine == "batch" and sampler_for(prop, max_clients) is None:  # no numpy sampler
        report = _check_hypothesis(subject, prop, max_examples, seed, tolerance, None,
                                   time_limit=time_limit, progress=progress,
                                   max_clients=max_clients)
        need = min_effective
    elif engine == "batch":
        report = check_batch(subject, prop, max_examples=max_examples, seed=seed,
                             tolerance=tolerance, time_limit=time_limit, progress=progress,
                             max_clients=max_clients)
        need = max_examples if min_effective is None else min_effective
    elif engine == "hypothesis":
        report = _check_hypothesis(subject, prop, max_examples, seed, tolerance, deadline,
                                   time_limit=time_limit, progress=progress,
                                   max_clients=max_clients)
        need = min_effective
    else:
        raise CheckerInputError("engine", f"is {engine!r}; allowed: 'hypothesis', 'batch'")
    report = dataclasses.replace(report, clients=clients)
    if report.verdict == "holds" and need is not None and report.effective < need:
        report = dataclasses.replace(report, verdict="inconclusive",
                                     extra={**report.extra, "min_effective": int(need)})
    return report


def _clients(prop: Property, max_clients) -> tuple[int, int] | None:
    """The (fewest, most) clients a check of ``prop`` draws, ``max_clients`` validated."""
    if max_clients is None:
        return prop.clients
    if prop.clients is None:
        raise CheckerInputError("max_clients", f"is {max_clients!r}, but property "
                                               f"{prop.key!r} does not say how many clients "
                                               "it draws (its Property has clients=None)")
    lo = prop.clients[0]
    if (isinstance(max_clients, bool) or not isinstance(max_clients, numbers.Integral)
            or max_clients < lo):
        raise CheckerInputError("max_clients", f"is {max_clients!r}; must be an integer >= "
                                               f"{lo} (the fewest clients {prop.key!r} "
                                               "draws), or None")
    return (lo, int(max_clients))


class _Failed(AssertionError):
    pass


class _TimeUp(BaseException):
    """The Hypothesis search's time limit has passed. A BaseException: Hypothesis lets it
    through (it stops the search instead of being shrunk as a failure), and so does a
    subject's own ``except Exception``."""


class _PropertyRaised(RuntimeError):
    """The property's own code (not the subject) raised on an instance."""

    def __init__(self, key: str, exc: BaseException):
        super().__init__(f"property {key!r} raised {type(exc).__name__}: {exc}")


@contextmanager
def _module_independent_draws():
    """Make a seeded Hypothesis search independent of what else the process imported.

    Hypothesis (since 6.131) draws, with a small probability, constants collected from the
    source of every *local* module imported so far (here: mechanisms, proofs, sims,
    learning, and the user's own modules). A seeded search then draws different instances
    depending on what the process had imported before -- a search run inside a test suite
    differed from the same call in a fresh process (first failure 3 vs 9). For the duration
    of one search the checker offers Hypothesis no local constants (its global constants --
    0, 1, -1, the ends of float ranges... -- stay in use). A version of Hypothesis without
    the feature is left alone.
    """
    try:
        from hypothesis.internal.conjecture import providers

        getter, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
        none = providers.Constants()
    except (ImportError, AttributeError):  # pragma: no cover - older/newer Hypothesis
        yield
        return
    providers._get_local_constants = lambda: none
    cache.cache.clear()  # it caches the permitted local constants per draw kind
    try:
        yield
    finally:
        providers._get_local_constants = getter
        cache.cache.clear()


_TARGETING = [False]  # True while Hypothesis runs a targeted (optimisation) pass


@contextmanager
def _targeted_passes_marked():
    """Mark the examples Hypothesis draws in its targeted passes (``_TARGETING``), so that
    the vacuity rule counts the untargeted draws only: the optimiser mutates the
    best-scoring examples, i.e. checkable ones, and a property checkable on 0.1 % of the
    draws read "holds, 152 of 300 checked". Yields whether the marking is in place (False
    with a Hypothesis whose runner has no such pass: the caller then turns targeting off)."""
    try:
        from hypothesis.internal.conjecture.engine import ConjectureRunner

        original = ConjectureRunner._run_optimise_pass
    except (ImportError, AttributeError):  # pragma: no cover - other Hypothesis versions
        yield False
        return

    def marked(self, *args, **kwargs):
        _TARGETING[0] = True
        try:
            return original(self, *args, **kwargs)
        finally:
            _TARGETING[0] = False

    ConjectureRunner._run_optimise_pass = marked
    try:
        yield True
    finally:
        ConjectureRunner._run_optimise_pass = original
        _TARGETING[0] = False


_SCORE_CAP = 1e300  # Hypothesis' target() accepts finite scores only


def _steer(score: float) -> float:
    """A finite search score (an infinite violation -- a NaN counted as a failure -- steers
    as the largest score instead of making Hypothesis raise InvalidArgument)."""
    if math.isnan(score):
        return 0.0
    return max(-_SCORE_CAP, min(_SCORE_CAP, score))


def check_hypothesis(subject, prop, max_examples, seed, tolerance, deadline, *,
                     time_limit: float | None = None, progress=None,
                     max_clients=None) -> Report:
    """The Hypothesis engine behind ``check(..., engine="hypothesis")`` (arguments validated
    there); ``check(..., engine="batch")`` runs it for a property without a numpy
    sampler."""
    return _check_hypothesis(subject, prop, max_examples, seed, tolerance, deadline,
                             time_limit=time_limit, progress=progress,
                             max_clients=max_clients)


def _check_hypothesis(subject, prop, max_examples, seed, tolerance, deadline, *,
                      time_limit: float | None = None, progress=None,
                      max_clients=None) -> Report:
    found: list = []
    errors: list = []
    broken: list = []  # the property's own code raised (not the subject's)
    tally = Tally()
    marking = _targeted_passes_marked()
    can_mark = marking.__enter__()
    phases = [Phase.explicit, Phase.generate, Phase.target, Phase.shrink]
    if not can_mark:  # pragma: no cover - targeting off rather than an inflated share
        phases.remove(Phase.target)

    # the phases are fixed (a profile without shrinking must not turn it off silently);
    # the budget comes from the argument, resolved from the active profile by check()
    @settings(max_examples=max_examples, deadline=deadline, database=None,
              suppress_health_check=list(HealthCheck), derandomize=False,
              phases=phases, print_blob=False, report_multiple_bugs=False)
    @given(prop.strategy(max_clients))
    def search(instance):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            raise _TimeUp
        targeted = _TARGETING[0]
        try:
            _search(instance, targeted)
        finally:
            report_progress(tally.drawn, max_examples)

    def _search(instance, targeted):
        try:
            amount, score, effective, disc = evaluate_instance(subject, prop, instance)
        except SubjectError as exc:
            tally.record(True, True)
            errors.append((instance, exc))
            raise
        except Exception as exc:
            tally.record(True, True)
            broken.append((instance, exc))
            raise _PropertyRaised(prop.key, exc) from exc
        if amount is None:
            tally.record(False, False, targeted=targeted)
            return
        target(_steer(score), label="score")
        tally.note(amount)
        failed = amount > tolerance
        tally.record(effective, failed, disc, targeted=targeted)
        if failed:
            found.append((instance, amount))  # the last one is Hypothesis' shrunk instance
            raise _Failed(f"{prop.key} violated by {amount}")

    if seed is not None:
        search = hypothesis_seed(seed)(search)
    report_progress = Throttle(progress)
    stopped = "budget"
    t0 = time.perf_counter()
    error = error_instance = None
    try:
        with _module_independent_draws():
            search()
        verdict_ = None
    except _TimeUp:  # stopped while searching, or while shrinking what it had found
        stopped, verdict_ = "time limit", None
        if found:
            verdict_ = "counterexample"
        elif errors or broken:
            verdict_ = "error"
            error_instance, exc = (errors or broken)[-1]
            error = str(exc if errors else _PropertyRaised(prop.key, exc))
    except _Failed:
        verdict_ = "counterexample"
    except SubjectError as exc:
        verdict_, error = "error", str(exc)
        error_instance = errors[-1][0] if errors else None
    except _PropertyRaised as exc:
        verdict_, error = "error", str(exc)
        error_instance = broken[-1][0] if broken else None
    except Unsatisfiable:
        verdict_ = "unsatisfiable"
    except Exception as exc:  # Hypothesis itself refused: still a verdict, never a crash
        verdict_, error = "error", f"the Hypothesis engine raised {type(exc).__name__}: {exc}"
    finally:
        marking.__exit__(None, None, None)
    seconds = time.perf_counter() - t0
    report_progress(tally.drawn, max_examples, final=True)
    if verdict_ is None:
        verdict_ = verdict(False, tally)
        if stopped == "time limit" and (verdict_ == "holds" or tally.drawn == 0) \
                and tally.drawn < max_examples:
            verdict_ = "inconclusive"  # thin evidence: the search was cut short
    ce = None
    if verdict_ == "counterexample" and found:
        instance, amount = found[-1]
        ce = Counterexample(instance=instance, violation=amount, property=prop, subject=subject)
    extra = {"untargeted": (tally.untargeted_drawn, tally.untargeted_effective),
             "stopped": stopped}
    return Report(property=prop, subject=subject_name(subject), verdict=verdict_,
                  examples=tally.drawn, effective=tally.effective, seconds=seconds,
                  max_examples=max_examples, counterexample=ce, engine="hypothesis",
                  first_failure=tally.first_failure, error=error,
                  error_instance=error_instance, largest_violation=tally.largest,
                  discriminating=tally.discriminating, extra=extra)


def check_exhaustive(subject, prop: Property, instances: Iterable, *,
                     tolerance: float = 0.0) -> Report:
    """Evaluate ``prop`` on every instance of a finite grid (tiny markets); the first failure
    is the counterexample."""
    _, tolerance = validate(subject, prop, 1, tolerance)
    t0 = time.perf_counter()
    tally = Tally()
    for instance in instances:
        try:
            amount, _, effective, disc = evaluate_instance(subject, prop, instance)
        except Exception as exc:
            tally.record(True, True)
            msg = str(exc) if isinstance(exc, SubjectError) else str(_PropertyRaised(prop.key,
                                                                                     exc))
            return Report(property=prop, subject=subject_name(subject), verdict="error",
                          examples=tally.drawn, effective=tally.effective,
                          seconds=time.perf_counter() - t0, max_examples=tally.drawn,
                          engine="exhaustive", first_failure=tally.first_failure,
                          error=msg, error_instance=instance, discriminating=tally.discriminating)
        failed = amount is not None and amount > tolerance
        tally.note(amount)
        tally.record(amount is not None and effective, failed, disc)
        if failed:
            ce = Counterexample(instance=instance, violation=amount, property=prop,
                                subject=subject, engine="exhaustive")
            return Report(property=prop, subject=subject_name(subject), verdict="counterexample",
                          examples=tally.drawn, effective=tally.effective,
                          seconds=time.perf_counter() - t0, max_examples=tally.drawn,
                          counterexample=ce, engine="exhaustive",
                          first_failure=tally.first_failure, largest_violation=tally.largest,
                          discriminating=tally.discriminating)
    return Report(property=prop, subject=subject_name(subject), verdict=verdict(False, tally),
                  examples=tally.drawn, effective=tally.effective,
                  seconds=time.perf_counter() - t0, max_examples=tally.drawn,
                  engine="exhaustive", largest_violation=tally.largest,
                  discriminating=tally.discriminating)
