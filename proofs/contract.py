"""The contract check: every property a subject declares, checked both ways.

Declared True (claimed): the verdict must be "holds" (a counterexample, an error, thin
evidence or a vacuous search all break the contract). Declared False (known not to hold): the
checker must find a counterexample by itself, and the shrunk instance must fail again when
re-run. Declared ``"vacuous"`` (:data:`VACUOUS`: the property cannot fail on this subject,
e.g. a truthfulness check of a rule that ignores the reports -- true of the rule, but no
evidence): the verdict must be "vacuous" with no discriminating example drawn, so a rule
that starts reading the reports breaks the declaration.

Use it in your own test suite::

    from proofs import IpflMechanism, assert_contract
    mine = IpflMechanism("mine", my_rule, declares={"budget_balance": True})
    def test_my_rule_keeps_its_promises():
        assert_contract(mine, extra={my_property: True})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import profiles
from .checker import check
from .core import CATALOGUE, FAMILIES, CheckerInputError, Property, Report, SubjectError

__all__ = ["FALSIFY_FACTOR", "VACUOUS", "ContractResult", "assert_contract", "check_contract",
           "declaration", "resolve"]

# The third declaration: the property holds trivially, whatever the subject does with the
# instance -- no drawn example could have failed it (0 discriminating), so the check is no
# evidence either way and reads "vacuous", never "holds".
VACUOUS = "vacuous"

# A property declared NOT to hold is a search target, not evidence: its search stops at the
# first failure, so it may draw up to this many times the budget (time is spent only until the
# counterexample turns up; the report still says where).
FALSIFY_FACTOR = 10


@dataclass(frozen=True)
class ContractResult:
    report: Report
    declared: bool | str  # True, False or VACUOUS

    @property
    def as_declared(self) -> bool:
        if self.declared == VACUOUS:
            return (self.report.verdict == "vacuous" and self.report.discriminating == 0
                    and self.report.counterexample is None)
        if self.declared:
            return self.report.verdict == "holds"
        ce = self.report.counterexample
        if self.report.verdict != "counterexample" or ce is None:
            return False
        try:
            return ce.rerun() > 0
        except SubjectError:  # the subject raises on its own counterexample: not as declared
            return False

    def describe(self) -> str:
        r = self.report
        what = ("declared vacuous" if self.declared == VACUOUS
                else "claimed" if self.declared else "declared not to hold")
        s = (f"{r.subject}/{r.property.key} ({what}): {r.verdict}, {r.effective} of "
             f"{r.examples} drawn examples checked ({r.discriminating} discriminating), "
             f"engine {r.engine}")
        if r.error:
            s += f"\n  error: {r.error}"
        if r.counterexample is not None and self.declared:
            s += "\n" + r.counterexample.code()
        return s


def declaration(key, value, where: str = "declares") -> bool | str:
    """A declaration's value: True (claimed), False (known not to hold) or :data:`VACUOUS`
    (cannot fail on this subject), nothing else (``bool('no')`` is True and ``bool(None)``
    False: a typo would flip the claim)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str) and value == VACUOUS:
        return VACUOUS
    raise CheckerInputError(where, f"{key}: declared must be True (claimed), False (known "
                                   f"not to hold) or {VACUOUS!r} (cannot fail: no example "
                                   f"discriminates), got {value!r}")


def _declared(where: str, key, value) -> bool | str:
    return declaration(key, value, where)


def resolve(subject, extra=None) -> list[tuple[Property, bool]]:
    """(property, declared) for every declaration of ``subject`` plus ``extra``.

    ``extra``: a mapping ``Property -> bool`` or pairs ``(Property, bool)``; a key in
    ``subject.declares`` that is not a built-in property must come with its Property here.
    ``subject`` must be a checker subject (:class:`~proofs.IpflMechanism`,
    :class:`~proofs.CplSolver`, :class:`~proofs.CplPricingRule`) whose ``declares`` is a
    mapping ``property key -> True | False | "vacuous"``; a subject that declares nothing (and no
    ``extra``) is a mistake, not a pass: :class:`CheckerInputError` for each.
    """
    PROPERTIES = CATALOGUE["property"]  # the built-ins (proofs.registry fills it)
    if getattr(subject, "family", None) not in FAMILIES or \
            not hasattr(subject, "declares"):
        raise CheckerInputError("subject", f"is {_short(subject)} ({type(subject).__name__});"
                                           " give a checker subject: proofs.IpflMechanism, "
                                           "proofs.CplSolver, proofs.CplPricingRule or "
                                           "proofs.LiaClustering")
    declares = subject.declares
    if not isinstance(declares, Mapping):
        raise CheckerInputError("declares", f"is {_short(declares)} "
                                            f"({type(declares).__name__}); give a mapping "
                                            "property key -> True | False, e.g. "
                                            "{'budget_balance': True}")
    pairs: list[tuple[Property, bool]] = []
    if extra is not None and not isinstance(extra, Mapping | list | tuple):
        raise CheckerInputError("extra", f"is {_short(extra)}; give a mapping Property -> "
                                         "True | False or (Property, bool) pairs")
    items = extra.items() if isinstance(extra, Mapping) else (extra or ())
    given = {}
    for item in items:
        if not isinstance(extra, Mapping) and (not isinstance(item, tuple | list)
                                               or len(item) != 2):
            raise CheckerInputError("extra", f"holds {_short(item)}; give (Property, bool) "
                                             "pairs")
        prop, declared = item
        if not isinstance(prop, Property):
            raise CheckerInputError("extra", f"keys must be proofs.Property objects, got "
                                             f"{type(prop).__name__}")
        given[prop.key] = (prop, _declared("extra", prop.key, declared))
    for key, declared in declares.items():
        if key in given:
            continue
        if key not in PROPERTIES:
            raise CheckerInputError("declares", f"unknown property {key!r}; pass your own "
                                                "Property in extra=")
        pairs.append((PROPERTIES[key], _declared("declares", key, declared)))
    pairs.extend(given.values())
    if not pairs:
        raise CheckerInputError("declares", f"subject {getattr(subject, 'name', '?')!r} "
                                            "declares no property, so there is nothing to "
                                            "check (an empty contract is not a pass); give "
                                            "declares={key: True | False} or extra=")
    return pairs


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_contract(subject, extra=None, *, max_examples: int | None = None, seed: int = 0,
                   engine: str = "hypothesis", tolerance: float = 0.0) -> list[ContractResult]:
    """Check every declared property of ``subject`` (and ``extra``); one result each.

    ``max_examples`` None follows the active Hypothesis profile (see :mod:`proofs.profiles`).
    """
    return [contract_check(subject, prop, declared, max_examples=max_examples, seed=seed,
                           engine=engine, tolerance=tolerance)
            for prop, declared in resolve(subject, extra)]


def contract_check(subject, prop: Property, declared: bool | str, *, max_examples=None,
                   **kwargs) -> ContractResult:
    """One declaration: a claim (or a vacuous declaration) gets the budget (default: the
    active profile's); a property declared not to hold gets FALSIFY_FACTOR times it to find
    its counterexample."""
    declared = declaration(prop.key, declared)
    budget = profiles.budget() if max_examples is None else max_examples
    if declared is False and isinstance(budget, int):
        budget *= FALSIFY_FACTOR
    return ContractResult(check(subject, prop, max_examples=budget, **kwargs), declared)


def assert_contract(subject, extra=None, **kwargs) -> list[ContractResult]:
    """pytest helper: :func:`check_contract`, raising AssertionError listing every breach."""
    results = check_contract(subject, extra, **kwargs)
    bad = [r for r in results if not r.as_declared]
    if bad:
        raise AssertionError(f"{len(bad)} of {len(results)} declarations broken:\n"
                             + "\n".join(r.describe() for r in bad))
    return results
