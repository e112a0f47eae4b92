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
and ``discriminating``. The budget (``max_examples``) counts DISCRIMINATING examples: both
engines draw until that many were checked, at most :data:`DRAW_FACTOR` times the budget.
"holds" needs the budget of discriminating examples without a counterexample; fewer reads
``"inconclusive"``; none at all, or fewer than :data:`VACUITY_THRESHOLD` of the drawn
examples effective, reads ``"vacuous"``: no evidence (a truthfulness check of a rule that
ignores the reports is vacuous, however many lies were tried). The Hypothesis engine counts
the examples it drew without targeting only (its targeted phase mutates the best-scoring,
i.e. checkable and discriminating, examples: a property checkable on 0.1 % of the draws
read "holds, 152 of 300 checked").

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
import datetime
import math
import numbers
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from mechanisms.contain import (
    Interrupt,
    Limit,
    TimeUp,
    can_interrupt,
    must_pass,
    rule_timed_out,
)
from mechanisms.errors import check_size

from .batch import check_batch, evaluate_in_bulk, sampler_for
from .core import (
    DRAW_FACTOR,
    FAMILIES,
    VACUITY_PROBE,
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
    is_builtin,
    probed_vacuous,
    subject_name,
    validate,
    verdict,
)
from .profiles import module_independent_draws
from .regret import SEARCHES
from .typespace import as_type_space

# the properties whose evaluation runs the misreport search (``check(..., search=)``)
REGRET_KEYS = ("thm2", "truthful_N_over", "truthful_N_under", "truthful_c_under",
               "truthful_K_over", "truthful_K_under")


def search_settings(search) -> tuple[str, dict | None]:
    """(name, options) of a misreport search given to :func:`check`: None is the search's
    own defaults ("former", options None), a name of :data:`proofs.regret.SEARCHES` its
    single-dimension options, a dict itself (name "custom")."""
    if search is None or search == "former":
        return "former", None
    if isinstance(search, str):
        if search not in SEARCHES:
            raise CheckerInputError("search", f"is {search!r}; choose one of "
                                              f"{tuple(SEARCHES)} or give a dict")
        return search, dict(SEARCHES[search]["single"])
    if isinstance(search, dict):
        bad = sorted(set(search) - {"span", "grid", "starts", "iters"})
        if bad:
            raise CheckerInputError("search", f"unknown option(s) {bad}; the search takes "
                                              "span, grid, starts, iters")
        return "custom", dict(search)
    raise CheckerInputError("search", f"is a {type(search).__name__}; a name of "
                                      f"{tuple(SEARCHES)} or a dict")

# FAMILIES ... verdict live in proofs.core (shared by both engines) and are re-exported here
__all__ = [
    "DRAW_FACTOR",
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
          time_limit: float | None = None, min_discriminating: int | None = None,
          progress: Callable[[int, int], None] | None = None,
          max_clients: int | None = None, min_effective: int | None = None,
          scan: bool = False, type_space=None, search=None) -> Report:
    """Search for an instance where ``prop`` fails for ``subject``.

    max_examples : the budget: discriminating examples to check (instances on which the
        property could have failed, ``prop.discriminates``); None takes the active
        Hypothesis profile's budget (``HYPOTHESIS_PROFILE``, see :mod:`proofs.profiles`).
        Both engines draw until that many were checked, at most :data:`DRAW_FACTOR` times
        as many draws (the Hypothesis engine counts its untargeted draws only, and tops its
        first search of ``max_examples`` draws up with further seeded searches).
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
        and once at its end: discriminating examples checked of ``max_examples``. Library
        code never prints; ``fedmarket prove`` shows it.
    min_discriminating : the evidence a "holds" needs: with fewer discriminating examples
        and no counterexample the verdict is "inconclusive" (none: "vacuous"). Default:
        ``max_examples``. ``min_effective`` is its former name (the rule now counts
        discriminating examples); give one or the other.
    type_space : the :class:`proofs.typespace.TypeSpace` the iPFL markets are drawn from (a
        TypeSpace, a dict or a TOML/JSON file; None: the checker's distribution,
        :data:`proofs.typespace.DEFAULT`). A verdict holds on that space ("IR on this type
        space"); the report's ``extra["type_space"]`` describes it. Batch engine only; CPL
        properties draw games, not markets, and ignore it.
    search : the misreport search of the regret properties: a name of
        :data:`proofs.regret.SEARCHES` ("former": the search's defaults, "strong", "wider")
        or a dict of :func:`proofs.regret.regret_arrays` options; None: "former". Recorded
        in ``extra["search"]``. Batch engine only.
    max_clients : the largest market to draw (both engines); None: the property's own range
        (``prop.clients``: 2-12 clients for the built-in iPFL properties). Refused for a
        property that does not say how many clients it draws. The report's ``clients`` and
        its preconditions column show the range drawn.
    scan : do not stop at the first counterexample (batch engine, properties with a numpy
        sampler): check the whole budget, so that ``largest_violation`` is the largest over
        every example checked and ``extra["failures"]`` counts the failing ones. Refused
        where the check would run on the Hypothesis engine (it stops at the first failure).
    """
    max_examples, tolerance = validate(subject, prop, max_examples, tolerance)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or not 0 <= seed < 2**63):
        raise CheckerInputError("seed", f"is {seed!r}; must be an integer in [0, 2**63), or "
                                        "None (random)")
    if deadline is not None and not isinstance(deadline, datetime.timedelta) and not (
            isinstance(deadline, numbers.Real) and not isinstance(deadline, bool)
            and math.isfinite(deadline) and deadline > 0):
        raise CheckerInputError("deadline", f"is {deadline!r}; must be milliseconds > 0, a "
                                            "datetime.timedelta, or None")
    if scan and not (engine == "batch" and sampler_for(prop, max_clients) is not None):
        raise CheckerInputError("scan", f"needs the batch engine and a property with a numpy "
                                        f"sampler ({prop.key!r}, engine {engine!r})")
    clients = _clients(prop, max_clients)
    if time_limit is not None and not (isinstance(time_limit, numbers.Real)
                                       and math.isfinite(time_limit) and time_limit > 0):
        raise CheckerInputError("time_limit", f"is {time_limit!r}; must be a finite number "
                                              "of seconds > 0, or None")
    if time_limit is not None and not can_interrupt() \
            and not (is_builtin(subject) and is_builtin(prop)):
        raise CheckerInputError("time_limit", f"is {time_limit!r}; here (not the main thread "
                                              "of a Unix process) it cannot stop a rule of "
                                              "your own: check from the main thread, or in a "
                                              "child process (prove --jobs)")
    if progress is not None and not callable(progress):
        raise CheckerInputError("progress", f"is {progress!r}; must be a function "
                                            "progress(done, budget), or None")
    if min_effective is not None:
        if min_discriminating is not None:
            raise CheckerInputError("min_effective", "is the former name of "
                                                     "min_discriminating; give one of them")
        min_discriminating, name = min_effective, "min_effective"
    else:
        name = "min_discriminating"
    if min_discriminating is not None and (isinstance(min_discriminating, bool) or not
                                           isinstance(min_discriminating, numbers.Integral)
                                           or min_discriminating < 0):
        raise CheckerInputError(name, f"is {min_discriminating!r}; must be an integer >= 0, "
                                      "or None")
    need = max_examples if min_discriminating is None else int(min_discriminating)
    space = as_type_space(type_space)
    search_name, search_opts = search_settings(search)
    if search_opts is not None and engine != "batch":
        raise CheckerInputError("search", f"is {search!r}; the Hypothesis engine runs the "
                                          "search's defaults ('former'): use engine='batch'")
    if engine == "batch" and sampler_for(prop, max_clients, space) is not None:
        report = check_batch(subject, prop, max_examples=max_examples, seed=seed,
                             tolerance=tolerance, time_limit=time_limit, progress=progress,
                             max_clients=max_clients, min_discriminating=need, scan=scan,
                             type_space=space, search=search_opts)
    elif not space.is_default and prop.family == "ipfl":
        raise CheckerInputError("type_space", f"{space.name!r}: only the batch engine draws "
                                              "from a type space of your own (engine='batch'; "
                                              f"{prop.key!r} has "
                                              + ("no numpy sampler)" if engine == "batch"
                                                 else "engine 'hypothesis')"))
    elif engine in ("batch", "hypothesis"):  # batch without a numpy sampler: Hypothesis
        report = _check_hypothesis(subject, prop, max_examples, seed, tolerance,
                                   deadline if engine == "hypothesis" else None,
                                   time_limit=time_limit, progress=progress,
                                   max_clients=max_clients, min_discriminating=need)
    else:
        raise CheckerInputError("engine", f"is {engine!r}; allowed: 'hypothesis', 'batch'")
    extra = report.extra
    if prop.family == "ipfl":
        extra = {**extra, "type_space": space.describe()}
        if prop.key in REGRET_KEYS:
            extra["search"] = search_name
            extra["search_span"] = float((search_opts or SEARCHES["former"]["single"])["span"])
    if report.verdict == "inconclusive" and report.discriminating < need:
        extra = {**extra, "min_discriminating": need}
    return dataclasses.replace(report, clients=clients, extra=extra)


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
    check_size("max_clients", 8.0 * int(max_clients) ** 2,
               f"one market of {max_clients} clients' (m, m) arrays", "lower max_clients")
    return (lo, int(max_clients))


class _Failed(AssertionError):
    pass


class _TimeUp(Interrupt):
    """The Hypothesis search's time limit has passed. A BaseException: Hypothesis lets it
    through (it stops the search instead of being shrunk as a failure), and so does a
    subject's own ``except Exception`` (an :class:`~mechanisms.contain.Interrupt`: the
    toolkit's wrappers of code of your own let it through too)."""


class _PropertyRaised(RuntimeError):
    """The property's own code (not the subject) raised on an instance."""

    def __init__(self, key: str, exc: BaseException):
        super().__init__(f"property {key!r} raised {type(exc).__name__}: {exc}")


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
                     max_clients=None, min_discriminating: int | None = None) -> Report:
    """The Hypothesis engine behind ``check(..., engine="hypothesis")`` (arguments validated
    there); ``check(..., engine="batch")`` runs it for a property without a numpy
    sampler."""
    return _check_hypothesis(subject, prop, max_examples, seed, tolerance, deadline,
                             time_limit=time_limit, progress=progress,
                             max_clients=max_clients, min_discriminating=min_discriminating)


def _round_seed(seed, k: int):
    """The seed of the k-th Hypothesis search of one check (k = 0: ``seed`` itself)."""
    if seed is None or k == 0:
        return seed
    return (int(seed) * 1_000_003 + k) % 2**63


def _check_hypothesis(subject, prop, max_examples, seed, tolerance, deadline, *,
                      time_limit: float | None = None, progress=None,
                      max_clients=None, min_discriminating: int | None = None) -> Report:
    """Seeded Hypothesis searches until ``max_examples`` discriminating examples of
    untargeted draws were checked: the first of ``max_examples`` draws (targeting halfway,
    as Hypothesis schedules it), then top-ups sized by the discriminating share seen so far,
    at most :data:`DRAW_FACTOR` x ``max_examples`` draws in all."""
    found: list = []
    errors: list = []
    broken: list = []  # the property's own code raised (not the subject's)
    tally = Tally()
    need = max_examples if min_discriminating is None else min_discriminating
    cap = DRAW_FACTOR * max_examples
    marking = _targeted_passes_marked()
    can_mark = marking.__enter__()
    phases = [Phase.explicit, Phase.generate, Phase.target, Phase.shrink]
    if not can_mark:  # pragma: no cover - targeting off rather than an inflated count
        phases.remove(Phase.target)
    strategy = prop.strategy(max_clients)

    def searcher(size, round_seed, first):
        # the phases are fixed (a profile without shrinking must not turn it off silently);
        # the budget comes from the argument, resolved from the active profile by check();
        # the top-ups draw the evidence without targeting (the first search targets)
        @settings(max_examples=size, deadline=deadline, database=None,
                  suppress_health_check=list(HealthCheck), derandomize=False,
                  phases=phases if first else [p for p in phases if p != Phase.target],
                  print_blob=False, report_multiple_bugs=False)
        @given(strategy)
        def search(instance):
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                raise _TimeUp
            targeted = _TARGETING[0]
            try:
                _search(instance, targeted)
            finally:
                report_progress(tally.evidence, max_examples)

        return search if round_seed is None else hypothesis_seed(round_seed)(search)

    def _search(instance, targeted):
        try:
            amount, score, effective, disc = evaluate_instance(subject, prop, instance)
        except SubjectError as exc:
            tally.record(True, True)
            errors.append((instance, exc))
            raise
        except BaseException as exc:
            if must_pass(exc):
                raise
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

    report_progress = Throttle(progress)
    stopped = "budget"
    t0 = time.perf_counter()
    error = error_instance = None
    verdict_ = None
    rounds = 0
    limit = Limit(time_limit)  # stops a rule of the user's own that does not return
    interrupted = None
    try:
        limit.__enter__()
        size = max_examples
        while True:
            before = tally.drawn
            try:
                with module_independent_draws():
                    searcher(size, _round_seed(seed, rounds), rounds == 0)()
            finally:
                rounds += 1
            wanted = max_examples - tally.evidence
            if wanted <= 0:
                break
            if probed_vacuous(tally, max_examples):
                stopped = "vacuous"
                break
            if tally.drawn >= cap:
                stopped = "draw cap"
                break
            if tally.drawn == before:  # the strategy has nothing new to draw
                stopped = "exhausted"
                break
            # the next search: the draws the discriminating share seen so far needs (at
            # least 1 in DRAW_FACTOR), at most as many as drawn so far (the first search's
            # small early examples understate the share), within the cap
            share = max(tally.evidence / max(tally.untargeted_drawn, 1), 1 / DRAW_FACTOR)
            size = max(1, min(math.ceil(wanted / share), max(tally.drawn, max_examples),
                              cap - tally.drawn))
            if tally.evidence == 0:  # probing: up to the draws that may call it vacuous
                size = min(size, max(max_examples, VACUITY_PROBE) - tally.untargeted_drawn)
    except (_TimeUp, TimeUp) as exc:  # stopped while searching, or while shrinking
        if isinstance(exc, TimeUp):
            if exc.limit is not limit:
                raise
            interrupted = str(rule_timed_out(exc, time_limit))
        stopped = "time limit"
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
        limit.__exit__(None, None, None)
        marking.__exit__(None, None, None)
    seconds = time.perf_counter() - t0
    report_progress(tally.evidence, max_examples, final=True)
    if verdict_ is None and interrupted is not None and tally.drawn == 0:
        verdict_, error = "error", interrupted  # not one example checked
    if verdict_ is None:
        verdict_ = verdict(False, tally, need)
    ce = None
    if verdict_ == "counterexample" and found:
        instance, amount = found[-1]
        ce = Counterexample(instance=instance, violation=amount, property=prop, subject=subject)
    extra = {"untargeted": (tally.untargeted_drawn, tally.untargeted_effective,
                            tally.untargeted_discriminating),
             "targeted": (tally.drawn - tally.untargeted_drawn,
                          tally.effective - tally.untargeted_effective,
                          tally.discriminating - tally.untargeted_discriminating),
             "stopped": stopped, "searches": rounds,
             **({"interrupted": interrupted} if interrupted is not None else {})}
    return Report(property=prop, subject=subject_name(subject), verdict=verdict_,
                  examples=tally.drawn, effective=tally.effective, seconds=seconds,
                  max_examples=max_examples, counterexample=ce, engine="hypothesis",
                  first_failure=tally.first_failure, error=error,
                  error_instance=error_instance, largest_violation=tally.largest,
                  discriminating=tally.evidence, extra=extra)


def check_exhaustive(subject, prop: Property, instances: Iterable, *,
                     tolerance: float = 0.0, bulk: bool = True) -> Report:
    """Evaluate ``prop`` on every instance of a finite grid (tiny markets); the first failure
    is the counterexample.

    A built-in iPFL property whose ``batch`` hook takes the subject evaluates the whole grid
    at once (:func:`proofs.batch.evaluate_in_bulk`: the batch engine's path, the subject
    cleared by :func:`mechanisms.ipfl.clear_batch`); where nothing fails there, the report
    counts what the loop below would count. Where anything fails (or there is no bulk
    path, or ``bulk=False``) the grid is evaluated one instance at a time through the
    subject itself, so the counterexample, the counts up to it and any error are the
    loop's."""
    _, tolerance = validate(subject, prop, 1, tolerance)
    t0 = time.perf_counter()
    instances = list(instances)
    found = evaluate_in_bulk(subject, prop, instances) if bulk else None
    if found is not None and (found[0] <= tolerance).all():
        viol, eff, disc = found
        tally = Tally()
        tally.add(len(instances), int(eff.sum()), int(disc.sum()))
        seen = viol[eff]
        seen = seen[np.isfinite(seen)]
        if seen.size:
            tally.note(float(seen.max()))
        return Report(property=prop, subject=subject_name(subject),
                      verdict=verdict(False, tally), examples=tally.drawn,
                      effective=tally.effective, seconds=time.perf_counter() - t0,
                      max_examples=tally.drawn, engine="exhaustive",
                      largest_violation=tally.largest, discriminating=tally.discriminating)
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
