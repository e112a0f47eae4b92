"""Names handed to :mod:`mechanisms` as a user's program hands them: fresh strings.

A name written as a literal in Python source (``"cosine"``, ``"exact"``) is interned: every
literal of it in every module is the same object, so code comparing names with ``is``
instead of ``==`` works on literals and fails on a name read from a file, a command line or
built at run time (``metric is "cosine"`` is False for ``"".join(["co", "sine"])``).
The checker passes every user-facing name it chooses (metric, selection / payment / price
rule, threshold mode, solver method, exact method, pivot, clustering mode, attack and
placement names; the subjects' own settings too, :mod:`proofs.subjects`) through
:func:`fresh`, so such a comparison is a counterexample wherever the name is used (issue 34:
the generated mutant ``metric == "cosine"`` -> ``metric is "cosine"`` survived 14 rows).
"""

from __future__ import annotations

__all__ = ["fresh"]


def fresh(name):
    """A copy of the str ``name``: equal to it, hashing alike, but not the same object (and
    not interned); anything else (a callable, None, a gain object) unchanged. Strings of
    fewer than two characters are returned as they are (CPython caches them; no name the
    mechanisms accept is that short)."""
    if type(name) is not str or len(name) < 2:
        return name
    out = "".join(list(name))
    assert out == name and out is not name  # a fresh object (join of 2+ parts builds one)
    return out
