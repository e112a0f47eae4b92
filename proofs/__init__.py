"""Machine-checked statements about the mechanisms.

* :func:`check` searches for a counterexample to a :class:`Property` for a subject and returns
  a :class:`Report` (drawn, effective and discriminating examples, verdict, engine);
  :func:`check_exhaustive` does the same over a finite grid.
* :func:`check_contract` / :func:`assert_contract`: every declaration of a subject, both ways.
* :mod:`proofs.profiles`: the dev / ci / nightly Hypothesis profiles (``HYPOTHESIS_PROFILE``).
* :data:`PROPERTIES` (iPFL and CPL, each with its exact preconditions) and :data:`SUBJECTS`
  (the built-in rules and solvers, each declaring what it claims).
* :class:`IpflMechanism` wraps a selection rule and a payment rule, yours or the paper's;
  :class:`LiaClustering` pFedLIA's scores and clustering.
* :mod:`proofs.strategies`: Hypothesis strategies for markets, distances, misreports, games.
* :mod:`proofs.cpl_derivations`, :mod:`proofs.ipfl_derivations`: sympy derivations.
* ``python -m proofs`` / ``fedmarket prove``: the theorem report.
"""

from . import profiles
from .checker import (
    DRAW_FACTOR,
    VACUITY_THRESHOLD,
    CheckerInputError,
    Counterexample,
    Property,
    Report,
    SubjectError,
    check,
    check_exhaustive,
)
from .contract import ContractResult, assert_contract, check_contract
from .registry import PROPERTIES, SUBJECTS, check_declared
from .subjects import CplPricingRule, CplSolver, IpflMechanism, LiaClustering, Settlement

__all__ = [
    "DRAW_FACTOR",
    "PROPERTIES",
    "SUBJECTS",
    "VACUITY_THRESHOLD",
    "CheckerInputError",
    "ContractResult",
    "Counterexample",
    "CplPricingRule",
    "CplSolver",
    "IpflMechanism",
    "LiaClustering",
    "Property",
    "Report",
    "Settlement",
    "SubjectError",
    "assert_contract",
    "check",
    "check_contract",
    "check_declared",
    "check_exhaustive",
    "profiles",
]
