"""Sealed results and untouched inputs (issue 34; the conventions' frozen results).

What a public entry point of mechanisms/ returns is sealed: a frozen dataclass (assigning a
field raises :class:`dataclasses.FrozenInstanceError`) whose arrays are read-only, its
nested results (an outcome's market, a market's gain) sealed too; and what the caller hands
it stays the caller's: the same values, still writeable (the toolkit freezes its own
copies, never the caller's arrays). ``one_market`` and ``cpl_one_game`` count each breach as
a violation on every drawn market and game.

>>> import numpy as np
>>> from mechanisms import ipfl
>>> N = np.array([400.0, 500.0])
>>> market = ipfl.Market(N=N, c=[0.5, 1.0], K=[5e4, 3e4], lam=2.0)
>>> unsealed(market), handed_back({"N": np.array(N)}, {"N": N})
(0, 0)
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["handed_back", "unsealed"]


def unsealed(obj, depth: int = 2) -> int:
    """Breaches of ``obj``'s seal: 1 if a field can be assigned (tried with the field's own
    value, so nothing changes either way), 1 for each writeable array field, and those of
    each nested dataclass field, ``depth`` levels down. Not a dataclass: 1."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return 1
    found = 0
    names = [f.name for f in dataclasses.fields(obj)]
    if names:
        try:
            setattr(obj, names[0], getattr(obj, names[0]))
            found += 1
        except dataclasses.FrozenInstanceError:
            pass
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, np.ndarray):
            found += bool(value.flags.writeable)
        elif depth > 0 and dataclasses.is_dataclass(value) and not isinstance(value, type):
            found += unsealed(value, depth - 1)
    return found


def handed_back(before: dict, after: dict) -> int:
    """Inputs the toolkit changed: for each name, 1 if the caller's array ``after[name]``
    no longer equals its copy ``before[name]`` (NaN equal to NaN) or is no longer
    writeable."""
    return sum(int(not np.array_equal(before[k], after[k], equal_nan=True)
                   or not after[k].flags.writeable) for k in before)
