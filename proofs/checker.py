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
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from . import profiles

__all__ = [
    "FAMILIES",
    "VACUITY_THRESHOLD",
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

FAMILIES = ("ipfl", "cpl")
VERDICTS = ("holds", "counterexample", "inconclusive", "vacuous", "unsatisfiable", "error")

# A "holds" verdict claims the evidence of its examples. Below half of the drawn examples
# checked, the strategy spends most of the budget outside the preconditions: the drawn count
# overstates the evidence more than twofold and the instances actually checked are a filtered
# (unknown) distribution rather than the documented one. The built-in strategies build their
# preconditions in, so their shares sit near 1 (tests/test_contract.py asserts none is
# vacuous); 0.5 leaves room for preconditions that can only be tested on the instance (a
# CPL baseline on the q_min floor) and still flags the 25 % share such a property once had.
VACUITY_THRESHOLD = 0.5


class CheckerInputError(ValueError):
    """Bad argument to the checker. ``field`` names the argument."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # pickles as itself (a row checked in a worker process raises it)
        return (type(self), (self.field, self.message))


class SubjectError(RuntimeError):
    """The subject (a rule, a solver) raised while the checker evaluated it."""

    def __init__(self, subject: str, method: str, exc: BaseException):
        self.subject, self.method, self.original = subject, method, exc
        super().__init__(f"{subject}.{method} raised {type(exc).__name__}: {exc}")

    def __reduce__(self):  # pickles as itself (a row checked in a worker process raises it)
        return (type(self), (self.subject, self.method, self.original))


def excess(amount: float, tolerance: float = 0.0) -> float:
    """``max(0, amount - tolerance)`` that keeps NaN a failure (``inf``) instead of 0."""
    out = float(amount) - float(tolerance)
    return math.inf if math.isnan(out) else max(0.0, out)


class _Tracked:
    """Stands in for the subject inside a property: counts calls of its public methods and
    turns any exception they raise into a :class:`SubjectError`."""

    def __init__(self, subject):
        object.__setattr__(self, "_subject", subject)
        object.__setattr__(self, "calls", 0)

    @property
    def __class__(self):  # isinstance(tracked, IpflMechanism) stays true
        return type(self._subject)

    def __getattr__(self, name):
        attr = getattr(self._subject, name)
        if name.startswith("_") or not callable(attr) or isinstance(attr, type):
            return attr

        def call(*args, **kwargs):
            object.__setattr__(self, "calls", self.calls + 1)
            try:
                return attr(*args, **kwargs)
            except SubjectError:
                raise
            except Exception as exc:
                raise SubjectError(_name(self._subject), name, exc) from exc

        return call

    def __repr__(self):
        return repr(self._subject)


@dataclass(frozen=True)
class Property:
    """A checkable statement.

    key, name, statement, reference, preconditions : what it says, in the paper's words.
    family : "ipfl" (subjects are :class:`proofs.IpflMechanism`) or "cpl" (:class:`CplSolver`).
    instances : ``() -> hypothesis strategy`` of instances meeting the preconditions.
    violation : ``(subject, instance) -> float | (float, score) | None`` (see module doc).
    note : why a precondition-dropped variant fails, or other context.
    sample : optional ``(rng, size) -> list of instances``: numpy draws from the same
        distribution as ``instances`` (the batch engine's source).
    batch : optional ``(subject, batch) -> (violations, effective)`` arrays over a batch
        drawn by ``sample`` (vectorised evaluation; see :mod:`proofs.batch`).
    needs : optional kind of subject the property reads (``subject.kind``), e.g. "solver"
        for the CPL properties about the equilibrium's multiplier; any other kind is refused
        before checking.
    clients : optional ``(fewest, most)`` clients per market that ``instances`` (and
        ``sample``) draw by default; reports show the range beside the preconditions. A
        property that gives it takes ``check(..., max_clients=k)``: then ``instances`` is
        called as ``instances(max_clients=k)`` (the built-in properties draw 2-12 iPFL
        clients, 1-12 CPL clients: :data:`proofs.strategies.MAX_CLIENTS`).
    """

    key: str
    name: str
    statement: str
    reference: str
    preconditions: str
    family: str  # "ipfl" | "cpl": which subjects it applies to
    instances: Callable[[], st.SearchStrategy]
    violation: Callable[[Any, Any], Any]
    note: str = ""
    sample: Callable | None = None
    batch: Callable | None = None
    needs: str | None = None
    clients: tuple[int, int] | None = None

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key:
            raise CheckerInputError("key", f"is {self.key!r}; must be a non-empty string")
        if self.family not in FAMILIES:
            raise CheckerInputError("family", f"is {self.family!r}; allowed: {FAMILIES}")
        for name in ("instances", "violation"):
            if not callable(getattr(self, name)):
                raise CheckerInputError(name, f"must be callable, got "
                                              f"{type(getattr(self, name)).__name__}")
        for name in ("sample", "batch"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise CheckerInputError(name, "must be callable or None")
        if self.clients is not None:
            ok = (isinstance(self.clients, tuple) and len(self.clients) == 2
                  and all(isinstance(k, numbers.Integral) and not isinstance(k, bool)
                          for k in self.clients) and 1 <= self.clients[0] <= self.clients[1])
            if not ok:
                raise CheckerInputError("clients", f"is {self.clients!r}; must be a pair of "
                                                   "integers (fewest, most) with 1 <= fewest "
                                                   "<= most, or None")

    def strategy(self, max_clients: int | None = None):
        """The Hypothesis strategy of instances (up to ``max_clients`` clients if given)."""
        if max_clients is None:
            return self.instances()
        return self.instances(max_clients=max_clients)

    def __repr__(self):
        return f"Property({self.key!r})"

    def __reduce_ex__(self, protocol):
        # a built-in property travels by its key: its callables are lambdas, which do not
        # pickle, and the key rebuilds the very object (so Counterexample.code() still names
        # it PROPERTIES[key]); your own property pickles field by field
        from .registry import PROPERTIES, registered

        if PROPERTIES.get(self.key) is self:
            return registered, ("property", self.key)
        return super().__reduce_ex__(protocol)

    def evaluate(self, subject, instance) -> tuple[float, float, bool] | None:
        """(violation, search score, discriminating), or None when the instance was not
        checked. NaN violations become ``inf``: a NaN is a failure, never a pass; a failing
        instance is always discriminating."""
        out = self.violation(subject, instance)
        if out is None:
            return None
        discriminating = True
        if isinstance(out, tuple):
            if len(out) == 3:
                amount, score, discriminating = out
            elif len(out) == 2:
                amount, score = out
            else:
                raise CheckerInputError("violation", f"{self.key}: returned a tuple of "
                                                     f"{len(out)}; allowed: a number, "
                                                     "(violation, score) or (violation, "
                                                     "score, discriminating)")
        else:
            amount = score = out
        for what, x in (("violation", amount), ("score", score)):
            if isinstance(x, bool) or not isinstance(x, numbers.Real):  # numpy.bool_ too
                raise CheckerInputError("violation", f"{self.key}: returned {x!r} as its "
                                                     f"{what}; must be a real number")
        amount, score = float(amount), float(score)
        if math.isnan(amount):
            amount = math.inf
        if math.isnan(score):
            score = 0.0
        return amount, score, bool(discriminating) or amount > 0

    def amount(self, subject, instance) -> float:
        """How badly the property fails on ``instance`` (0: it holds; NaN if not checked)."""
        out = self.evaluate(subject, instance)
        return math.nan if out is None else out[0]


def _property_code(prop: Property) -> tuple[str, str]:
    from .registry import PROPERTIES

    if PROPERTIES.get(prop.key) is prop:
        return "from proofs import PROPERTIES", f"PROPERTIES[{prop.key!r}]"
    return "", f"...  # your Property {prop.key!r}"


def _subject_code(subject) -> tuple[str, str]:
    from .registry import SUBJECTS

    name = _name(subject)
    if SUBJECTS.get(name) is subject:
        return "from proofs import SUBJECTS", f"SUBJECTS[{name!r}]"
    if hasattr(subject, "code"):
        out = subject.code()
        if out is not None:
            return out
    return "", f"...  # your subject {name!r}"


@dataclass(frozen=True)
class Counterexample:
    """A (minimal) instance on which ``property`` fails for ``subject``."""

    instance: Any
    violation: float
    property: Property
    subject: Any
    engine: str = "hypothesis"

    def instance_code(self) -> str:
        """Python that rebuilds the instance as ``case`` (``instance.code()`` if it has one)."""
        if hasattr(self.instance, "code"):
            return self.instance.code()
        return f"case = {self.instance!r}"

    def code(self) -> str:
        """A pasteable pytest regression test: imports, the instance, and an assertion that
        the property still fails on it (names of your own subject/property are left as
        ``...`` placeholders when they cannot be imported)."""
        imports = ["import numpy as np", "", "from mechanisms import cpl, ipfl"]
        cls = type(self.instance)
        if hasattr(self.instance, "code") and cls.__module__.startswith("proofs"):
            imports.append(f"from {cls.__module__} import {cls.__name__}")
        pimp, pexpr = _property_code(self.property)
        simp, sexpr = _subject_code(self.subject)
        for imp in (pimp, simp):
            if imp and imp not in imports:
                imports.append(imp)
        sname = "".join(ch if ch.isalnum() else "_" for ch in _name(self.subject))
        body = "\n".join("    " + line if line.strip() else "" for line in
                         self.instance_code().splitlines())
        return (
            "\n".join(imports) + "\n\n\n"
            f"def test_{self.property.key}_{sname}_counterexample():\n"
            f"    # found by proofs.check (engine {self.engine!r}); violation "
            f"{self.violation!r}\n"
            f"{body}\n"
            f"    prop = {pexpr}\n"
            f"    subject = {sexpr}\n"
            f"    assert prop.amount(subject, case) > 0\n"
        )

    def rerun(self) -> float:
        """Evaluate the property on the instance again; > 0 means it still fails. An
        exception of the subject is raised as a :class:`SubjectError` naming it."""
        return self.property.amount(_Tracked(self.subject), self.instance)


@dataclass(frozen=True)
class Report:
    """What one check found, and how much evidence it rests on.

    verdict : "holds", "counterexample", "inconclusive" (no counterexample, but fewer
        effective examples than the declared budget ``min_effective``: the batch engine
        stopped by its time limit, say), "vacuous" (fewer than VACUITY_THRESHOLD of the
        drawn examples effective), "unsatisfiable" or "error" (the subject raised).
    examples : instances drawn (up to the first failure; shrinking excluded).
    effective : of those, instances on which the property evaluated the subject.
    discriminating : of the effective, instances on which the property could have failed
        (the misreport changed the outcome, the interesting branch of the precondition was
        hit; see the module doc).
    first_failure : 1-based index, among the drawn, of the first failing instance (None if
        none); it moves with the budget and the seed.
    engine : "hypothesis", "batch" or "exhaustive": which engine produced the verdict.
    largest_violation : the largest finite violation the property measured on any checked
        instance, shrinking included (None if none was measured). For the incentive
        properties it is the largest regret found: the true utility a misreport gained. It
        is a lower bound on the worst case, not the worst case.
    clients : (fewest, most) clients per market the search drew from (None: the property
        does not say); ``row()`` shows it in the preconditions.
    """

    property: Property
    subject: str
    verdict: str
    examples: int
    seconds: float
    max_examples: int
    counterexample: Counterexample | None = None
    engine: str = "hypothesis"
    effective: int = 0
    first_failure: int | None = None
    error: str | None = None
    error_instance: Any = None
    extra: dict = field(default_factory=dict)
    largest_violation: float | None = None
    discriminating: int | None = None  # None: as effective (a report built without it)
    clients: tuple[int, int] | None = None  # (fewest, most) clients per drawn market

    def __post_init__(self):
        if self.discriminating is None:
            object.__setattr__(self, "discriminating", self.effective)

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    @property
    def exhaustive(self) -> bool:
        return self.engine == "exhaustive"

    @property
    def effective_share(self) -> float:
        return self.effective / self.examples if self.examples else 0.0

    @property
    def effective_per_second(self) -> float:
        return self.effective / self.seconds if self.seconds > 0 else math.inf

    @property
    def preconditions(self) -> str:
        """The property's preconditions and the market sizes drawn ("...; 2-12 clients")."""
        text = self.property.preconditions
        if self.clients is None:
            return text
        lo, hi = self.clients
        return f"{text}; {lo}-{hi} clients" if lo < hi else f"{text}; {lo} clients"

    def row(self) -> dict:
        return {
            "property": self.property.name,
            "key": self.property.key,
            "reference": self.property.reference,
            "preconditions": self.preconditions,
            "subject": self.subject,
            "verdict": self.verdict,
            "drawn": self.examples,
            "effective": self.effective,
            "discriminating": self.discriminating,
            "engine": self.engine,
            "seconds": round(self.seconds, 2),
            "first_failure": self.first_failure,
            "largest_violation": self.largest_violation,
            "counterexample": None if self.counterexample is None
            else self.counterexample.code(),
            "error": self.error,
        }


def subject_name(subject) -> str:
    """How reports name a subject: its ``name``, else its repr."""
    return getattr(subject, "name", repr(subject))


_name = subject_name  # kept name


def _validate(subject, prop, max_examples, tolerance) -> tuple[int, float]:
    if not isinstance(prop, Property):
        raise CheckerInputError("prop", f"must be a proofs.Property, got {type(prop).__name__}")
    family = getattr(subject, "family", None)
    if family != prop.family:
        raise CheckerInputError(
            "subject", f"{_name(subject)!r} is a {family!r} subject but property "
                       f"{prop.key!r} is about {prop.family!r} subjects")
    kind = getattr(subject, "kind", None)
    if prop.needs is not None and kind is not None and kind != prop.needs:
        raise CheckerInputError(
            "prop", f"{prop.key!r} applies to {prop.needs} subjects only "
                    f"({prop.note or 'it reads what only they compute'}); "
                    f"{_name(subject)!r} is a {kind}")
    if max_examples is None:
        max_examples = profiles.budget()
    if (isinstance(max_examples, bool) or not isinstance(max_examples, numbers.Integral)
            or max_examples < 1):
        raise CheckerInputError("max_examples", f"is {max_examples!r}; must be an integer "
                                                ">= 1 (None: the active profile's budget)")
    try:
        tol = float(tolerance)
    except (TypeError, ValueError) as exc:
        raise CheckerInputError("tolerance", f"is {tolerance!r}; must be a number") from exc
    if not math.isfinite(tol) or tol < 0:
        raise CheckerInputError("tolerance", f"is {tolerance!r}; must be finite and >= 0")
    return int(max_examples), tol


class Tally:
    """Drawn, effective and discriminating counts up to the first failure (both engines
    keep one); the drawn and effective counts of untargeted draws are kept apart (the
    vacuity rule reads them, see :func:`verdict`)."""

    def __init__(self):
        self.drawn = 0
        self.effective = 0
        self.discriminating = 0
        self.untargeted_drawn = 0
        self.untargeted_effective = 0
        self.first_failure: int | None = None
        self.largest: float | None = None

    def note(self, amount) -> None:
        """Keep the largest finite violation measured (shrinking included)."""
        if amount is not None and math.isfinite(amount) and (
                self.largest is None or amount > self.largest):
            self.largest = float(amount)

    def record(self, effective: bool, failed: bool, discriminating: bool | None = None,
               targeted: bool = False):
        if self.first_failure is not None:
            return  # shrinking
        discriminating = effective if discriminating is None else (effective
                                                                   and discriminating)
        self.drawn += 1
        self.effective += int(effective)
        self.discriminating += int(discriminating)
        if not targeted:
            self.untargeted_drawn += 1
            self.untargeted_effective += int(effective)
        if failed:
            self.first_failure = self.drawn

    def add(self, drawn: int, effective: int, discriminating: int) -> None:
        """Counts of a batch evaluated at once (never targeted)."""
        self.drawn += drawn
        self.effective += effective
        self.discriminating += discriminating
        self.untargeted_drawn += drawn
        self.untargeted_effective += effective


_Tally = Tally  # kept name


def evaluate_instance(subject, prop: Property, instance) -> tuple[float | None, float, bool,
                                                                   bool]:
    """(violation or None, score, effective, discriminating) of one instance; raises
    SubjectError. ``effective``: preconditions met and the subject evaluated;
    ``discriminating``: effective, and the property could have failed there."""
    tracked = _Tracked(subject)
    out = prop.evaluate(tracked, instance)
    if out is None:
        return None, 0.0, False, False
    effective = tracked.calls > 0
    return out[0], out[1], effective, effective and out[2]


def evaluate_once(subject, prop: Property, instance) -> tuple[float | None, float, bool]:
    """(violation or None, score, effective) of one instance; raises SubjectError."""
    amount, score, effective, _ = evaluate_instance(subject, prop, instance)
    return amount, score, effective


def verdict(found_failure: bool, tally: Tally, min_effective: int | None = None) -> str:
    """"counterexample", else "vacuous" when fewer than :data:`VACUITY_THRESHOLD` of the
    untargeted draws were effective (none at all: vacuous), else "inconclusive" when fewer
    than ``min_effective`` examples were effective (thin evidence never reads "holds"),
    else "holds"."""
    if found_failure:
        return "counterexample"
    drawn, effective = tally.untargeted_drawn, tally.untargeted_effective
    if drawn == 0:  # every draw targeted (cannot happen in practice): count them all
        drawn, effective = tally.drawn, tally.effective
    if tally.effective == 0 or effective < VACUITY_THRESHOLD * drawn:
        return "vacuous"
    if min_effective is not None and tally.effective < min_effective:
        return "inconclusive"
    return "holds"


_verdict = verdict  # kept name


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
    max_examples, tolerance = _validate(subject, prop, max_examples, tolerance)
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
    if engine == "batch":
        from .batch import check_batch

        report = check_batch(subject, prop, max_examples=max_examples, seed=seed,
                             tolerance=tolerance, time_limit=time_limit, progress=progress,
                             max_clients=max_clients)
        need = min_effective
        if need is None and report.engine == "batch":  # not a Hypothesis fallback
            need = max_examples
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


class Throttle:
    """``progress(done, budget)`` passed on at most every ``every`` seconds (and always with
    ``final=True``): a callback per example would cost more than the example."""

    def __init__(self, progress, every: float = 0.1, clock=time.perf_counter):
        self.progress, self.every, self.clock = progress, every, clock
        self.last = -math.inf

    def __call__(self, done: int, budget: int, final: bool = False) -> None:
        if self.progress is None:
            return
        now = self.clock()
        if final or now - self.last >= self.every:
            self.last = now
            self.progress(done, budget)


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
    there); the batch engine falls back to it for a property without a numpy sampler."""
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
    return Report(property=prop, subject=_name(subject), verdict=verdict_,
                  examples=tally.drawn, effective=tally.effective, seconds=seconds,
                  max_examples=max_examples, counterexample=ce, engine="hypothesis",
                  first_failure=tally.first_failure, error=error,
                  error_instance=error_instance, largest_violation=tally.largest,
                  discriminating=tally.discriminating, extra=extra)


def check_exhaustive(subject, prop: Property, instances: Iterable, *,
                     tolerance: float = 0.0) -> Report:
    """Evaluate ``prop`` on every instance of a finite grid (tiny markets); the first failure
    is the counterexample."""
    _, tolerance = _validate(subject, prop, 1, tolerance)
    t0 = time.perf_counter()
    tally = Tally()
    for instance in instances:
        try:
            amount, _, effective, disc = evaluate_instance(subject, prop, instance)
        except Exception as exc:
            tally.record(True, True)
            msg = str(exc) if isinstance(exc, SubjectError) else str(_PropertyRaised(prop.key,
                                                                                     exc))
            return Report(property=prop, subject=_name(subject), verdict="error",
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
            return Report(property=prop, subject=_name(subject), verdict="counterexample",
                          examples=tally.drawn, effective=tally.effective,
                          seconds=time.perf_counter() - t0, max_examples=tally.drawn,
                          counterexample=ce, engine="exhaustive",
                          first_failure=tally.first_failure, largest_violation=tally.largest,
                          discriminating=tally.discriminating)
    return Report(property=prop, subject=_name(subject), verdict=verdict(False, tally),
                  examples=tally.drawn, effective=tally.effective,
                  seconds=time.perf_counter() - t0, max_examples=tally.drawn,
                  engine="exhaustive", largest_violation=tally.largest,
                  discriminating=tally.discriminating)
