"""Input errors shared by every mechanism.

Every check raises :class:`MarketInputError` (a ``ValueError``) whose message names the field,
the offending value and what is allowed, and which carries the field name as ``.field`` so that
callers (and tests) can tell one bad input from another without parsing the message.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MarketInputError", "as_matrix", "as_vector"]


class MarketInputError(ValueError):
    """Bad input to a mechanism. ``field`` names the argument that is wrong."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


def _describe(values: np.ndarray, bad: np.ndarray) -> str:
    idx = np.argwhere(bad)[0]
    where = idx[0] if idx.size == 1 else tuple(int(k) for k in idx)
    return f"entry {where} is {float(values[tuple(idx)])!r}"


def as_vector(
    field: str,
    values,
    *,
    m: int | None = None,
    positive: bool = False,
    nonnegative: bool = False,
    allow_inf: bool = False,
) -> np.ndarray:
    """Validate a per-client vector and return it as float64.

    ``allow_inf`` admits +inf (e.g. c_i = inf for a pure buyer); NaN and -inf never pass.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MarketInputError(field, f"must be numeric, got {values!r}") from exc
    if arr.ndim != 1:
        raise MarketInputError(field, f"must be one-dimensional, got shape {arr.shape}")
    if m is not None and arr.shape[0] != m:
        raise MarketInputError(field, f"has length {arr.shape[0]}, expected {m} (one per client)")
    if arr.size == 0:
        raise MarketInputError(field, "is empty; a market needs at least one client")
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
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MarketInputError(field, f"must be numeric, got {values!r}") from exc
    if arr.shape != (m, m):
        raise MarketInputError(field, f"has shape {arr.shape}, expected ({m}, {m}) for {m} clients")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise MarketInputError(field, f"{_describe(arr, bad)}; must be finite (no NaN or inf)")
    diag = np.diagonal(arr)
    if (diag != 0).any():
        k = int(np.flatnonzero(diag != 0)[0])
        raise MarketInputError(field, f"diagonal entry ({k}, {k}) is {diag[k]!r}; must be 0")
    if not allow_negative and (arr < 0).any():
        raise MarketInputError(
            field,
            f"{_describe(arr, arr < 0)}; distances must be >= 0 (individual rationality needs "
            "d >= 0). Pass allow_negative_distances=True to accept them on purpose",
        )
    return arr
