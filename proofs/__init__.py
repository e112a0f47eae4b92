"""Machine-checked statements about the mechanisms.

* :func:`check` searches for a counterexample to a :class:`Property` for a subject and returns
  a :class:`Report`; :func:`check_exhaustive` does the same over a finite grid.
* :data:`PROPERTIES` (iPFL and CPL, each with its exact preconditions) and :data:`SUBJECTS`
  (the built-in rules and solvers, each declaring what it claims).
* :class:`IpflMechanism` wraps a selection rule and a payment rule, yours or the paper's.
* :mod:`proofs.strategies`: Hypothesis strategies for markets, distances, misreports, games.
* :mod:`proofs.cpl_derivations`, :mod:`proofs.ipfl_derivations`: sympy derivations.
* ``python -m proofs`` / ``fedmarket prove``: the theorem report.
"""

from .checker import Counterexample, Property, Report, check, check_exhaustive
from .registry import PROPERTIES, SUBJECTS, check_declared
from .subjects import CplSolver, IpflMechanism, Settlement

__all__ = [
    "PROPERTIES",
    "SUBJECTS",
    "Counterexample",
    "CplSolver",
    "IpflMechanism",
    "Property",
    "Report",
    "Settlement",
    "check",
    "check_declared",
    "check_exhaustive",
]
