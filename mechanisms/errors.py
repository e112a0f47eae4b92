"""Errors shared by every layer, and the input checks of the mechanisms.

:class:`FedmarketError` is the root of every *expected* error (bad input, a refused problem
size, a broken results store): it carries the field it is about as ``.field`` and a message
naming the offending value and what is allowed, so callers (and tests) can tell one bad input
from another without parsing the message. Each layer has its own subclass:

* mechanisms: :class:`MarketInputError` (a ``ValueError``); :class:`ProblemTooLarge` when a
  method would need more memory or time than it may take; :class:`RuleFailed` when a rule of
  the user's own raises (:class:`RuleTimedOut`: was stopped at a time limit);
  :class:`SolverFailed` (a
  ``RuntimeError``) when a numerical solver ends without an answer it can vouch for;
* learning: ``learning.config.TrainInputError``;
* sims: ``sims.errors.SpecError`` (sweep specs, input files, command-line values) and
  ``sims.errors.StoreError`` (a results store that cannot be trusted).

:data:`MAX_BYTES` is the memory guard: 8 GiB, the largest array one call may allocate before
it refuses (:func:`check_size`, :class:`ProblemTooLarge`; the message names the need and the
guard in GiB).

Every one pickles (``field`` and ``message`` survive), so an error raised in a worker process
or a ray task reaches the parent as itself. The ``fedmarket`` command prints any of them as one
line; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FedmarketError", "MarketInputError", "ProblemTooLarge", "RuleFailed", "RuleTimedOut",
           "SolverFailed",
           "as_choice", "as_floats", "as_int", "as_matrix", "as_real", "as_seed", "as_vector",
           "check_sellers", "check_size", "check_symmetric"]

# the largest array one call may allocate (bytes) before it refuses: a guard, not a budget
MAX_BYTES = 8 * 2**30


class FedmarketError(Exception):
    """An expected error; ``field`` names what is wrong, ``message`` says why."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # pickle by (field, message), not by the formatted text
        return (type(self), (self.field, self.message))


class MarketInputError(FedmarketError, ValueError):
    """Bad input to a mechanism. ``field`` names the argument that is wrong."""


class ProblemTooLarge(MarketInputError):
    """A method refuses a problem it cannot finish within its memory or time guard."""


class RuleFailed(MarketInputError):
    """A rule of the user's own (a selection, payment, price or pricing rule) raised, or is
    not a rule at all (``"os:getcwd"``); ``field`` names the kind of rule and the message
    the rule and its own error (the original is chained as ``__cause__``)."""


class RuleTimedOut(RuleFailed):
    """A rule of the user's own was stopped at a time limit (``time_limit=`` of
    ``ipfl.clear``, ``cpl.apply_pricing``, ``proofs.check``): ``field`` names the kind of
    rule, the message the rule and the limit (:mod:`mechanisms.contain`)."""


class SolverFailed(FedmarketError, RuntimeError):
    """A numerical solver ended without an answer it can vouch for (an external solver's
    status, or no candidate within tolerance); ``field`` names the method."""


def check_size(field: str, nbytes: float, what: str, hint: str = "") -> None:
    """Refuse (ProblemTooLarge) before allocating ``nbytes`` when that exceeds MAX_BYTES."""
    if not nbytes <= MAX_BYTES:
        raise ProblemTooLarge(field, f"{what} would need {nbytes / 2**30:.3g} GiB, over the "
                                     f"{MAX_BYTES / 2**30:.0f} GiB guard" + (f"; {hint}"
                                                                           if hint else ""))


def as_int(field: str, value, *, lo: int | None = None, hi: int | None = None,
           error: type = MarketInputError) -> int:
    """An integer setting (bools and floats such as 2.5 or 3.0 are refused) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise error(field, f"is {value!r}; must be an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = (f">= {lo}" if hi is None else f"<= {hi}" if lo is None
                else f"in [{lo}, {hi}]")
        raise error(field, f"is {value!r}; must be {span}")
    return int(value)


def as_real(field: str, value, *, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, allow_inf: bool = False,
            error: type = MarketInputError) -> float:
    """A real setting: a number (not a string or bool), never NaN, finite unless
    ``allow_inf``, within [lo, hi] (``lo_open``: strictly above lo)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise error(field, f"is {value!r}; must be a number")
    v = float(value)
    if np.isnan(v) or (np.isinf(v) and not allow_inf):
        raise error(field, f"is {value!r}; must be finite")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise error(field, f"is {value!r}; must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and v > hi:
        raise error(field, f"is {value!r}; must be <= {hi}")
    return v


def as_choice(field: str, value, choices, error: type = MarketInputError):
    """One of ``choices`` (compared as given; the message lists them)."""
    if not isinstance(value, str | int) or value not in choices:
        raise error(field, f"is {value!r}; choose one of {tuple(choices)}")
    return value


def as_seed(field: str, value, error: type = MarketInputError) -> int:
    """A seed: an int in [0, 2**63) (numpy's SeedSequence refuses negatives)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise error(field, f"is {value!r}; a seed is an integer >= 0")
    if not 0 <= int(value) < 2**63:
        raise error(field, f"is {value!r}; a seed is an integer in [0, 2**63)")
    return int(value)


def _describe(values: np.ndarray, bad: np.ndarray) -> str:
    idx = np.argwhere(bad)[0]
    where = idx[0] if idx.size == 1 else tuple(int(k) for k in idx)
    return f"entry {where} is {float(values[tuple(idx)])!r}"


def as_floats(field: str, values) -> np.ndarray:
    """``values`` as float64; strings, booleans, complex numbers, dates and durations are
    refused, not converted ("100" or True would otherwise pass numpy's conversion as 100.0 or
    1.0, 1+2j as 1.0 with only a warning, and a datetime64 or timedelta64 as its count of
    days, seconds, ... since 1970 or of its unit, silently)."""
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise MarketInputError(field, f"must be numeric, got {_short(values)}") from exc
    kind = raw.dtype.kind
    if kind == "O":
        flat = raw.ravel()
        odd = [v for v in flat if isinstance(v, str | bytes | bool | np.bool_ | complex
                                             | np.complexfloating)]
        if odd:
            real = " real" if isinstance(odd[0], complex | np.complexfloating) else ""
            raise MarketInputError(field, f"holds {odd[0]!r}; must be{real} numbers")
    elif kind in "USVb":
        what = "booleans" if kind == "b" else "text"
        raise MarketInputError(field, f"must be numbers, got {what}: {_short(values)}")
    elif kind == "c":
        raise MarketInputError(field, f"must be real numbers, got complex: {_short(values)}")
    elif kind in "mM":  # numpy would read dates as days (or whatever unit) since 1970
        raise MarketInputError(field, f"must be numbers, got dates or durations "
                                      f"({raw.dtype}): {_short(values)}")
    try:
        return np.asarray(raw, dtype=np.float64)
    except OverflowError as exc:  # a Python int past the float range (10**400)
        raise MarketInputError(field, f"holds an integer too large for a float (over "
                                      f"~1.8e308): {_short(values)}") from exc
    except (TypeError, ValueError) as exc:
        raise MarketInputError(field, f"must be numeric, got {_short(values)}") from exc


def _short(value) -> str:
    """``repr(value)`` on one line (numpy breaks a long array's repr over lines), at most 80
    characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def check_sellers(field: str, A, c, label: str = "the rule") -> None:
    """Refuse a selection ``A`` ((..., m, m), a_ij = i buys j) that buys from a client that does
    not sell (c_j = inf, a pure buyer): its utilities and welfare would be -inf. The error
    names the first such pair."""
    A = np.asarray(A, dtype=bool)
    bad = A & np.isinf(np.asarray(c, dtype=np.float64))[..., None, :]  # leading batch dims
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0][-2:])
        raise MarketInputError(field, f"{label} has buyer {i} buy from client {j}, which does "
                                      f"not sell (c_{j} = inf); {int(bad.sum())} such pair"
                                      f"{'s' if bad.sum() > 1 else ''}")


def as_vector(
    field: str,
    values,
    *,
    m: int | None = None,
    positive: bool = False,
    nonnegative: bool = False,
    allow_inf: bool = False,
    shape_only: bool = False,
) -> np.ndarray:
    """Validate a per-client vector and return it as float64.

    ``allow_inf`` admits +inf (e.g. c_i = inf for a pure buyer); NaN and -inf never pass.
    ``shape_only``: numbers in one non-empty axis (of ``m`` entries), whatever their values
    (a caller with value rules of its own, such as ``cpl.Game``).
    """
    arr = as_floats(field, values)
    if arr.ndim != 1:
        raise MarketInputError(field, f"must be one-dimensional, got shape {arr.shape}")
    if m is not None and arr.shape[0] != m:
        raise MarketInputError(field, f"has length {arr.shape[0]}, expected {m} (one per client)")
    if arr.size == 0:
        raise MarketInputError(field, "is empty; a market needs at least one client")
    if shape_only:
        return arr
    nan = np.isnan(arr)
    if nan.any():
        raise MarketInputError(field, f"{_describe(arr, nan)}; NaN is not allowed")
    bad_inf = np.isinf(arr) if not allow_inf else np.isneginf(arr)
    if bad_inf.any():
        allowed = "finite values" if not allow_inf else "finite values or +inf"
        raise MarketInputError(field, f"{_describe(arr, bad_inf)}; allowed: {allowed}")
    if positive and (arr <= 0).any():
        raise MarketInputError(field, f"{_describe(arr, arr <= 0)}; must be > 0")
    if nonnegative and (arr < 0).any():
        raise MarketInputError(field, f"{_describe(arr, arr < 0)}; must be >= 0")
    return arr


def as_matrix(field: str, values, m: int, *, allow_negative: bool = False) -> np.ndarray:
    """Validate an (m, m) pairwise matrix with a zero diagonal (e.g. distances d_ij)."""
    arr = as_floats(field, values)
    if arr.shape != (m, m):
        raise MarketInputError(field, f"has shape {arr.shape}, expected ({m}, {m}) for {m} clients")
    # a finite sum proves every entry finite: one pass, no (m, m) mask unless it fails (a
    # sum past the float range, of finite entries, is no fault: no overflow warning)
    with np.errstate(over="ignore"):
        total = arr.sum()
    if not np.isfinite(total):
        bad = ~np.isfinite(arr)
        if bad.any():
            raise MarketInputError(field, f"{_describe(arr, bad)}; must be finite (no NaN or "
                                          "inf)")
    diag = np.diagonal(arr)
    if (diag != 0).any():
        k = int(np.flatnonzero(diag != 0)[0])
        raise MarketInputError(field, f"diagonal entry ({k}, {k}) is {float(diag[k])!r}; "
                                      "must be 0")
    if not allow_negative and arr.min(initial=0.0) < 0:
        raise MarketInputError(
            field,
            f"{_describe(arr, arr < 0)}; distances must be >= 0 (individual rationality needs "
            "d >= 0). Pass allow_negative_distances=True to accept them on purpose",
        )
    return arr


SYMMETRY_RTOL = 1e-9  # |d_ij - d_ji| allowed, relative to the matrix's largest |d| (rounding)


def check_symmetric(field: str, arr, hint: str = "") -> None:
    """Refuse distance matrices (..., m, m) that are not symmetric: d_ij and d_ji may differ
    by at most :data:`SYMMETRY_RTOL` times the largest |d| of their matrix (the rounding of
    a distance computed twice), else one MarketInputError naming ``field``, the first pair
    that differs (and, in a batch, its market) and ``hint`` (how to accept it on purpose).

    >>> check_symmetric("D", [[0, 1], [1, 0]])
    >>> check_symmetric("D", [[0, 0.3], [0.5, 0]])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mechanisms.errors.MarketInputError: D: is not symmetric: D[0, 1] = 0.3 but D[1, 0] = 0.5...
    """
    arr = np.asarray(arr, dtype=np.float64)
    gap = np.abs(arr - np.swapaxes(arr, -1, -2))
    scale = np.abs(arr).max(axis=(-2, -1), keepdims=True)
    bad = gap > SYMMETRY_RTOL * scale
    if bad.any():
        *batch, i, j = (int(k) for k in np.argwhere(bad)[0])
        at = f"[{', '.join(map(str, batch))}]" if batch else ""
        ij, ji = float(arr[(*batch, i, j)]), float(arr[(*batch, j, i)])
        raise MarketInputError(field, f"is not symmetric: {field}{at}[{i}, {j}] = {ij!r} but "
                                      f"{field}{at}[{j}, {i}] = {ji!r}"
                                      + (f"; {hint}" if hint else ""))
