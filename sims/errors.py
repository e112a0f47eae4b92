"""The errors of the simulation layer (see :mod:`mechanisms.errors` for the family).

* :class:`SpecError`: a sweep spec, an input file or a command-line value is wrong (the field
  names the key or option, e.g. ``scenarios[1].params.rounds`` or ``--out``);
* :class:`StoreError`: a results store is corrupt, locked by another sweep, written by other
  code, or not writable;
* :class:`CellFailed`: a sweep cell failed for a reason that is not a typed input error (a
  rule of the user's own raised): the message names the cell (scenario, mechanism, seed,
  parameters) and the error;
* :class:`CellTimedOut`: a sweep cell ran past its time limit (``run_sweep(time_limit=)``,
  ``fedmarket sweep --time-limit``): the message names the cell and how far it got.
"""

from __future__ import annotations

from mechanisms.errors import FedmarketError, MarketInputError

__all__ = ["CellFailed", "CellTimedOut", "SpecError", "StoreError"]


class SpecError(MarketInputError):
    """A sweep spec, input file or command-line value is wrong."""


class StoreError(FedmarketError):
    """A results store that cannot be trusted or used as asked."""


class CellFailed(FedmarketError):
    """A sweep cell raised something other than a typed input error (``field`` "cell")."""


class CellTimedOut(CellFailed):
    """A sweep cell stopped at its time limit (``field`` "cell"); nothing of it is stored."""
