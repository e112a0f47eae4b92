"""The property checker: properties as objects, subjects that declare them, and reports.

A :class:`Property` has a name, the statement, the paper reference, the exact preconditions, a
Hypothesis strategy of instances that satisfy those preconditions (built in, not filtered) and
a ``violation(subject, instance)`` function: 0 when the property holds on the instance, a
positive amount when it fails (the amount also steers the search through
``hypothesis.target``). :func:`check` runs the search and returns a :class:`Report`:
"holds" (no counterexample in the budget) or "counterexample" with the shrunk instance,
printable as code that re-runs it.

Subjects declare what they claim (``subject.declares``: property key -> True/False). The
contract suite checks every declaration both ways: a property declared True must hold, one
declared False must be broken by a counterexample the checker finds itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

__all__ = ["Counterexample", "Property", "Report", "check", "check_exhaustive"]


@dataclass(frozen=True)
class Property:
    key: str
    name: str
    statement: str
    reference: str
    preconditions: str
    family: str  # "ipfl" | "cpl": which subjects it applies to
    instances: Callable[[], st.SearchStrategy]
    violation: Callable[[Any, Any], float]
    note: str = ""

    def __repr__(self):
        return f"Property({self.key!r})"

    def evaluate(self, subject, instance) -> tuple[float, float]:
        """(violation, search score): ``violation`` may return the pair itself (a score such
        as the liar's gain steers the search even while the property holds)."""
        out = self.violation(subject, instance)
        if isinstance(out, tuple):
            return float(out[0]), float(out[1])
        return float(out), float(out)

    def amount(self, subject, instance) -> float:
        """How badly the property fails on ``instance`` (0: it holds)."""
        return self.evaluate(subject, instance)[0]


@dataclass(frozen=True)
class Counterexample:
    instance: Any
    violation: float
    property: Property
    subject: Any

    def code(self) -> str:
        """Python that rebuilds the instance (``instance.code()`` where it has one)."""
        return self.instance.code() if hasattr(self.instance, "code") else repr(self.instance)

    def rerun(self) -> float:
        """Evaluate the property on the instance again; > 0 means it still fails."""
        return self.property.amount(self.subject, self.instance)


@dataclass(frozen=True)
class Report:
    property: Property
    subject: str
    verdict: str  # "holds" | "counterexample" | "unsatisfiable"
    examples: int  # instances evaluated before the verdict (shrinking excluded)
    seconds: float
    max_examples: int
    counterexample: Counterexample | None = None
    exhaustive: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    def row(self) -> dict:
        return {
            "property": self.property.name,
            "reference": self.property.reference,
            "preconditions": self.property.preconditions,
            "subject": self.subject,
            "verdict": self.verdict,
            "examples": self.examples,
            "search": "exhaustive" if self.exhaustive else "hypothesis",
            "counterexample": None if self.counterexample is None
            else self.counterexample.code(),
        }


def _name(subject) -> str:
    return getattr(subject, "name", repr(subject))


def check(subject, prop: Property, *, max_examples: int = 200, seed: int | None = 0,
          tolerance: float = 0.0, deadline=None) -> Report:
    """Search for an instance where ``prop`` fails for ``subject``.

    ``seed`` fixes Hypothesis' randomness (None: random); the example database is off, so the
    same call gives the same report in any process.
    """
    found: list = []
    count = {"n": 0, "first_fail": None}

    @settings(max_examples=max_examples, deadline=deadline, database=None,
              suppress_health_check=list(HealthCheck),
              print_blob=False, report_multiple_bugs=False)
    @given(prop.instances())
    def search(instance):
        count["n"] += 1
        amount, score = prop.evaluate(subject, instance)
        target(score, label="score")
        if amount > tolerance:
            if count["first_fail"] is None:
                count["first_fail"] = count["n"]
            found.append((instance, amount))  # the last one is Hypothesis' shrunk instance
            raise AssertionError(f"{prop.key} violated by {amount}")

    if seed is not None:
        search = hypothesis_seed(seed)(search)
    t0 = time.perf_counter()
    try:
        search()
        verdict = "holds"
    except AssertionError:
        verdict = "counterexample"
    except Unsatisfiable:
        verdict = "unsatisfiable"
    seconds = time.perf_counter() - t0
    ce = None
    if verdict == "counterexample" and found:
        instance, amount = found[-1]
        ce = Counterexample(instance=instance, violation=amount, property=prop, subject=subject)
    examples = count["first_fail"] if count["first_fail"] is not None else count["n"]
    return Report(property=prop, subject=_name(subject), verdict=verdict, examples=examples,
                  seconds=seconds, max_examples=max_examples, counterexample=ce)


def check_exhaustive(subject, prop: Property, instances: Iterable, *,
                     tolerance: float = 0.0) -> Report:
    """Evaluate ``prop`` on every instance of a finite grid (tiny markets); the first failure
    is the counterexample."""
    t0 = time.perf_counter()
    n = 0
    for instance in instances:
        n += 1
        amount = prop.amount(subject, instance)
        if amount > tolerance:
            ce = Counterexample(instance=instance, violation=amount, property=prop,
                                subject=subject)
            return Report(property=prop, subject=_name(subject), verdict="counterexample",
                          examples=n, seconds=time.perf_counter() - t0, max_examples=n,
                          counterexample=ce, exhaustive=True)
    return Report(property=prop, subject=_name(subject), verdict="holds", examples=n,
                  seconds=time.perf_counter() - t0, max_examples=n, exhaustive=True)
