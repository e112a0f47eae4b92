"""The checker's shared core: what both engines (:mod:`proofs.checker`'s Hypothesis engine,
:mod:`proofs.batch`) build a verdict from -- properties, the tracking wrapper that counts
the subject's calls, the tally of drawn / effective / discriminating examples, the verdict
rule, reports and counterexamples -- and the catalogue of built-in properties and subjects
(filled by :mod:`proofs.registry`; read here to name and pickle the built-ins).

It imports no other module of :mod:`proofs` but :mod:`proofs.profiles`, so no engine
imports another (issue 20, part 8). The module doc of :mod:`proofs.checker` describes the
evidence rules.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from mechanisms.contain import contained, must_pass

from . import profiles

__all__ = [
    "CATALOGUE",
    "DRAW_FACTOR",
    "FAMILIES",
    "VACUITY_PROBE",
    "VACUITY_THRESHOLD",
    "VERDICTS",
    "CheckerInputError",
    "Counterexample",
    "Property",
    "Report",
    "SubjectError",
    "Tally",
    "Throttle",
    "evaluate_instance",
    "evaluate_once",
    "excess",
    "is_builtin",
    "probed_vacuous",
    "registered",
    "subject_name",
    "validate",
    "verdict",
]

FAMILIES = ("ipfl", "cpl", "lia")
VERDICTS = ("holds", "counterexample", "inconclusive", "vacuous", "unsatisfiable", "error")

# A "holds" verdict claims the evidence of its examples. Below half of the drawn examples
# checked, the strategy spends most of the budget outside the preconditions: the drawn count
# overstates the evidence more than twofold and the instances actually checked are a filtered
# (unknown) distribution rather than the documented one. The built-in strategies build their
# preconditions in, so their shares sit near 1 (tests/test_contract.py asserts none is
# vacuous); 0.5 leaves room for preconditions that can only be tested on the instance (a
# CPL baseline on the q_min floor) and still flags the 25 % share such a property once had.
VACUITY_THRESHOLD = 0.5

# Both engines draw until the budget of DISCRIMINATING examples was checked (instances on
# which the property could have failed), at most DRAW_FACTOR times the budget of draws. The
# built-in claims discriminate on 21 % (the greedy tie rule) to 100 % of their draws (batch
# engine, seed 0); a property discriminating on fewer than 1 draw in 20 stops at the cap and
# reads "inconclusive" (none at all: "vacuous") -- its strategy should be rebuilt to reach
# the branch it tests, not searched 100 times longer.
DRAW_FACTOR = 20
# ... and a search that found no discriminating example in its first max(budget,
# VACUITY_PROBE) draws stops there, "vacuous": at a share of 1 in DRAW_FACTOR, the least that
# can reach the budget within the cap, 100 draws hold none with probability 0.6 %.
VACUITY_PROBE = 100


def probed_vacuous(tally, max_examples: int) -> bool:
    """Whether a search may stop as vacuous: no discriminating example in at least
    max(``max_examples``, :data:`VACUITY_PROBE`) untargeted draws."""
    return tally.evidence == 0 and tally.untargeted_drawn >= max(max_examples, VACUITY_PROBE)


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
            except BaseException as exc:  # sys.exit and the like too; not Ctrl-C, a limit
                if must_pass(exc):
                    raise
                raise SubjectError(subject_name(self._subject), name, exc) from exc

        return call

    def __repr__(self):
        return repr(self._subject)


@dataclass(frozen=True)
class Property:
    """A checkable statement.

    key, name, statement, reference, preconditions : what it says, in the paper's words.
    family : "ipfl" (subjects are :class:`proofs.IpflMechanism`), "cpl" (:class:`CplSolver`,
        :class:`CplPricingRule`) or "lia" (:class:`LiaClustering`).
    instances : ``() -> hypothesis strategy`` of instances meeting the preconditions.
    violation : ``(subject, instance) -> float | (float, score) | None`` (see module doc).
    note : why a precondition-dropped variant fails, or other context.
    sample : optional ``(rng, size) -> list of instances``: numpy draws from the same
        distribution as ``instances`` (the batch engine's source).
    batch : optional bulk evaluation of a built-in property, ``subject -> evaluate`` (None
        when that subject is evaluated one instance at a time), ``evaluate`` taking what the
        batch engine's sampler builds from a batch of draws (a :class:`mechanisms.cpl.
        GameBatch` for the CPL properties) and returning (violations, effective[,
        discriminating]) arrays (see :mod:`proofs.batch`).
    needs : optional kind of subject the property reads (``subject.kind``), e.g. "solver"
        for the CPL properties about the equilibrium's multiplier; any other kind is refused
        before checking.
    clients : optional ``(fewest, most)`` clients per market that ``instances`` (and
        ``sample``) draw by default; reports show the range beside the preconditions. A
        property that gives it takes ``check(..., max_clients=k)``: then ``instances`` is
        called as ``instances(max_clients=k)`` (the built-in properties draw 2-12 iPFL
        clients, 1-12 CPL clients: :data:`proofs.strategies.MAX_CLIENTS`).
    discriminates : which effective examples could have failed the property, in words (what
        its ``violation`` says with its third value); "" says every effective example (the
        violation returns no discriminating flag). Every built-in property states it.
    waits : True for a property whose checks spend most of their wall time waiting, not
        computing (rules of your own that sleep past their time limits, child processes
        started and stopped): :func:`proofs.report.run_report` with ``jobs`` > 1 checks its
        rows in worker processes of their own beside the ``jobs`` computing ones
        (:data:`proofs.report.WAITING_JOBS`), so that the cores are not left idle while
        they wait. Only where the rows run; never what they check.
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
    discriminates: str = ""
    waits: bool = False

    def __post_init__(self):
        if not isinstance(self.waits, bool):
            raise CheckerInputError("waits", f"is {self.waits!r}; must be True or False")
        if not isinstance(self.discriminates, str):
            raise CheckerInputError("discriminates", f"is {self.discriminates!r}; must be a "
                                                     "string")
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
        if is_builtin(self):
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
    if is_builtin(prop):
        return "from proofs import PROPERTIES", f"PROPERTIES[{prop.key!r}]"
    return "", f"...  # your Property {prop.key!r}"


def _subject_code(subject) -> tuple[str, str]:
    name = subject_name(subject)
    if is_builtin(subject):
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
        sname = "".join(ch if ch.isalnum() else "_" for ch in subject_name(self.subject))
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

    verdict : "holds" (no counterexample on at least the budget of discriminating
        examples), "counterexample", "inconclusive" (no counterexample, but fewer
        discriminating examples than the budget ``min_discriminating``: the engine hit its
        time limit or its draw cap, :data:`DRAW_FACTOR` x the budget), "vacuous" (no
        drawn example could have failed -- none discriminating, e.g. a truthfulness check
        of a rule that ignores the reports -- or fewer than VACUITY_THRESHOLD of the drawn
        examples effective), "unsatisfiable" or "error" (the subject raised).
    examples : instances drawn (up to the first failure; shrinking excluded).
    effective : of those, instances on which the property evaluated the subject.
    discriminating : of the effective, instances on which the property could have failed
        (the misreport changed the outcome, the interesting branch of the precondition was
        hit: ``property.discriminates`` says which); the evidence the verdict counts. The
        Hypothesis engine counts its untargeted draws only (``extra["targeted"]`` gives the
        drawn / effective / discriminating counts of its targeted passes).
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
        span = (self.extra or {}).get("search_span")
        if span is not None and span != 100:  # the misreports the search reached
            f = f"10^{round(math.log10(span))}" if math.log10(span).is_integer() \
                else f"{span:g}"
            text = text.replace("x 1 to 100", f"x 1 to {f}").replace("x 1/100 to 1",
                                                                     f"x 1/{f} to 1")
        if self.clients is None:
            return text
        lo, hi = self.clients
        return f"{text}; {lo}-{hi} clients" if lo < hi else f"{text}; {lo} clients"

    def _repr_html_(self) -> str:
        """A notebook shows the report as a one-row table (the counterexample's pasteable
        test below it)."""
        import html

        row = {k: v for k, v in self.row().items() if k != "counterexample"}
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                        f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                        for k, v in row.items() if v is not None)
        ce = self.row()["counterexample"]
        code = "" if ce is None else f"<pre>{html.escape(ce)}</pre>"
        return f"<table>{cells}</table>{code}"

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


def validate(subject, prop, max_examples, tolerance) -> tuple[int, float]:
    """The checked ``(max_examples, tolerance)`` of a check, after the subject and the
    property were found to fit (family, the kind of subject the property reads);
    :class:`CheckerInputError` naming the argument otherwise."""
    if not isinstance(prop, Property):
        raise CheckerInputError("prop", f"must be a proofs.Property, got {type(prop).__name__}")
    family = getattr(subject, "family", None)
    if family is None:
        raise CheckerInputError("subject", f"is {subject!r} (a {type(subject).__name__}); "
                                           "must be a subject: an IpflMechanism, CplSolver, "
                                           "CplPricingRule or LiaClustering (proofs.SUBJECTS "
                                           "holds the built-in ones)")
    if family != prop.family:
        raise CheckerInputError(
            "subject", f"{subject_name(subject)!r} is a {family!r} subject but property "
                       f"{prop.key!r} is about {prop.family!r} subjects")
    kind = getattr(subject, "kind", None)
    if prop.needs is not None and kind is not None and kind != prop.needs:
        raise CheckerInputError(
            "prop", f"{prop.key!r} applies to {prop.needs} subjects only "
                    f"({prop.note or 'it reads what only they compute'}); "
                    f"{subject_name(subject)!r} is a {kind}")
    if max_examples is None:
        max_examples = profiles.budget()
    if (isinstance(max_examples, bool) or not isinstance(max_examples, numbers.Integral)
            or max_examples < 1):
        raise CheckerInputError("max_examples", f"is {max_examples!r}; must be an integer "
                                                ">= 1 (None: the active profile's budget)")
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real):
        raise CheckerInputError("tolerance", f"is {tolerance!r}; must be a number")
    tol = float(tolerance)
    if not math.isfinite(tol) or tol < 0:
        raise CheckerInputError("tolerance", f"is {tolerance!r}; must be finite and >= 0")
    return int(max_examples), tol


class Tally:
    """Drawn, effective and discriminating counts up to the first failure (both engines
    keep one); the counts of untargeted draws are kept apart: the vacuity rule reads them
    (see :func:`verdict`), since the Hypothesis engine's targeted passes mutate the
    best-scoring examples -- checkable, discriminating ones."""

    def __init__(self):
        self.drawn = 0
        self.effective = 0
        self.discriminating = 0
        self.untargeted_drawn = 0
        self.untargeted_effective = 0
        self.untargeted_discriminating = 0
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
            self.untargeted_discriminating += int(discriminating)
        if failed:
            self.first_failure = self.drawn

    def add(self, drawn: int, effective: int, discriminating: int) -> None:
        """Counts of a batch evaluated at once (never targeted)."""
        self.drawn += drawn
        self.effective += effective
        self.discriminating += discriminating
        self.untargeted_drawn += drawn
        self.untargeted_effective += effective
        self.untargeted_discriminating += discriminating

    @property
    def evidence(self) -> int:
        """The discriminating examples the verdict counts: those of untargeted draws (all of
        them when every draw was targeted, which does not happen in practice)."""
        return self.untargeted_discriminating if self.untargeted_drawn else self.discriminating


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


def evaluate_instance(subject, prop: Property, instance) -> tuple[float | None, float, bool,
                                                                   bool]:
    """(violation or None, score, effective, discriminating) of one instance; raises
    SubjectError. ``effective``: preconditions met and the subject evaluated;
    ``discriminating``: effective, and the property could have failed there."""
    tracked = _Tracked(subject)
    if is_builtin(prop):
        out = prop.evaluate(tracked, instance)
    else:  # your own property's code: contained like a rule (mechanisms.contain)
        with contained("property", f"property {prop.key!r}", passing=(SubjectError,)):
            out = prop.evaluate(tracked, instance)
    if out is None:
        return None, 0.0, False, False
    effective = tracked.calls > 0
    return out[0], out[1], effective, effective and out[2]


def evaluate_once(subject, prop: Property, instance) -> tuple[float | None, float, bool]:
    """(violation or None, score, effective) of one instance; raises SubjectError."""
    amount, score, effective, _ = evaluate_instance(subject, prop, instance)
    return amount, score, effective


def verdict(found_failure: bool, tally: Tally, min_discriminating: int | None = None) -> str:
    """"counterexample"; else "vacuous" when no drawn example could have failed (no
    discriminating one) or fewer than :data:`VACUITY_THRESHOLD` of the untargeted draws were
    effective; else "inconclusive" when fewer than ``min_discriminating`` discriminating
    examples of untargeted draws were checked (thin evidence never reads "holds"); else
    "holds". Nothing drawn at all (a time limit before the first example) is
    "inconclusive"."""
    if found_failure:
        return "counterexample"
    if tally.drawn == 0:
        return "inconclusive"
    drawn, effective = tally.untargeted_drawn, tally.untargeted_effective
    if drawn == 0:  # every draw targeted (cannot happen in practice): count them all
        drawn, effective = tally.drawn, tally.effective
    if tally.effective == 0 or effective < VACUITY_THRESHOLD * drawn or tally.evidence == 0:
        return "vacuous"
    if min_discriminating is not None and tally.evidence < min_discriminating:
        return "inconclusive"
    return "holds"


# The built-in properties and subjects, by name: filled by proofs.registry (which imports
# every property module); read here so that a report, a counterexample's code and a pickle
# name the very objects of the registry without importing it.
CATALOGUE: dict[str, dict] = {"property": {}, "subject": {}}


def is_builtin(obj) -> bool:
    """Whether ``obj`` is the registered property (by key) or subject (by name) itself."""
    if isinstance(obj, Property):
        return CATALOGUE["property"].get(obj.key) is obj
    return CATALOGUE["subject"].get(getattr(obj, "name", None)) is obj


def registered(kind: str, name: str):
    """The built-in ``"property"`` or ``"subject"`` of that name: how both pickle (a report
    checked in a worker process comes back naming the very objects of the registry)."""
    table = CATALOGUE.get(kind)
    if table is None:
        raise CheckerInputError("kind", f"is {kind!r}; allowed: 'property', 'subject'")
    if name not in table:
        raise CheckerInputError(kind, f"unknown {name!r}; choose from {list(table)}")
    return table[name]
