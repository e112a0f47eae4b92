"""Pairwise model distances d(theta_i, theta_j) and their gradients (iPFL spec, "Distances";
Eq. 8 prox-centre).

All pairs come from one Gram matrix (a single GEMM), never from a double loop:

* ``l2sq``:   d_ij = ||theta_i - theta_j||^2 = |theta_i|^2 + |theta_j|^2 - 2 <theta_i, theta_j>
* ``cosine``: d_ij = 1 - cos(theta_i - theta_0, theta_j - theta_0), theta_0 a reference model
  (the initial model in the published code); range [0, 2].
"""

from __future__ import annotations

import numpy as np

from .errors import MarketInputError, as_vector

__all__ = ["METRICS", "distance_gradients", "pairwise_distances", "prox_centres"]

METRICS = ("l2sq", "cosine")


def _params(theta, reference=None) -> np.ndarray:
    try:
        X = np.asarray(theta, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MarketInputError("theta", f"must be numeric, got {type(theta).__name__}") from exc
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise MarketInputError("theta", f"must be (m clients, p parameters), got shape {X.shape}")
    if not np.isfinite(X).all():
        bad = np.argwhere(~np.isfinite(X))[0]
        raise MarketInputError("theta", f"entry {tuple(int(b) for b in bad)} is not finite")
    if reference is not None:
        ref = np.asarray(reference, dtype=np.float64)
        if ref.shape != (X.shape[1],):
            raise MarketInputError(
                "reference", f"has shape {ref.shape}, expected ({X.shape[1]},) like one model"
            )
        if not np.isfinite(ref).all():
            raise MarketInputError("reference", "must be finite")
        with np.errstate(over="ignore", invalid="ignore"):
            X = X - ref
        if not np.isfinite(X).all():
            raise MarketInputError("reference", "theta - reference overflows float64; "
                                                "rescale the parameters")
    return X


def _pow2(x):
    """The power of two at or just above |x| (1 for 0): an exact scale factor."""
    e = np.frexp(np.asarray(x, dtype=np.float64))[1]
    return np.where(np.asarray(x) > 0, np.ldexp(1.0, e), 1.0)


def pairwise_distances(theta, metric: str = "l2sq", reference=None) -> np.ndarray:
    """All m x m distances between the rows of ``theta`` from one Gram matrix.

    >>> import numpy as np
    >>> pairwise_distances(np.array([[0.0, 0.0], [3.0, 4.0]]))
    array([[ 0., 25.],
           [25.,  0.]])

    ``cosine`` measures the angle between deltas from ``reference`` (zeros when omitted); a
    model equal to the reference has no direction and is put at distance 1 (orthogonal) from
    every other model.
    """
    if metric not in METRICS:
        raise MarketInputError("metric", f"unknown metric {metric!r}; choose one of {METRICS}")
    X = _params(theta, reference if metric == "cosine" else None)
    if metric == "l2sq":
        # one scale for all rows (distances keep their ratios): the Gram matrix of X / s
        # neither overflows (1e200) nor underflows (1e-300); D = s^2 D' at the end
        s = _pow2(float(np.max(np.abs(X))))
        Xs = X / s
        G = Xs @ Xs.T
        sq = np.diagonal(G).copy()
        D = sq[:, None] + sq[None, :] - 2.0 * G
        np.maximum(D, 0.0, out=D)  # rounding of near-identical rows
        with np.errstate(over="ignore"):
            D *= s  # powers of two: the scaling itself rounds nothing
            D *= s
        if not np.isfinite(D).all():
            raise MarketInputError("theta", f"squared distances overflow float64 (entries of "
                                            f"magnitude ~{s:.1e}); rescale the parameters")
    else:
        # cosine ignores each row's scale: divide every row by its largest entry first
        Xs = X / _pow2(np.max(np.abs(X), axis=1))[:, None]
        G = Xs @ Xs.T
        norm = np.sqrt(np.diagonal(G))
        inv = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0)
        cos = G * inv[:, None] * inv[None, :]
        np.clip(cos, -1.0, 1.0, out=cos)
        D = 1.0 - cos
    np.fill_diagonal(D, 0.0)
    return D


def _pairs(neighbours, m: int) -> np.ndarray:
    """``neighbours`` as (k, 2) client indices in [0, m): integers (not booleans, not
    fractions), else a MarketInputError naming ``neighbours``."""
    raw = np.asarray(neighbours)
    if raw.size == 0:
        return np.zeros((0, 2), dtype=np.intp)
    if raw.dtype.kind not in "iu":
        raise MarketInputError("neighbours", f"must be integer client indices, got dtype "
                                             f"{raw.dtype}")
    if raw.shape[-1] != 2 or raw.ndim > 2:
        raise MarketInputError("neighbours", f"must be (k, 2) pairs (i, j), got shape "
                                             f"{raw.shape}")
    pairs = raw.reshape(-1, 2).astype(np.intp)
    bad = (pairs < 0) | (pairs >= m)
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=1))[0])
        raise MarketInputError("neighbours", f"pair {k} is {tuple(pairs[k].tolist())}; "
                                             f"indices must lie in [0, {m})")
    return pairs


def distance_gradients(theta, neighbours, metric: str = "l2sq", reference=None) -> np.ndarray:
    """grad_{theta_i} d(theta_i, theta_j) for the pairs (i, j) of ``neighbours`` (k x 2 ints).

    l2sq: 2 (theta_i - theta_j). cosine with u = theta_i - theta_0, v = theta_j - theta_0:
    -(v/|v| - cos(u, v) u/|u|)/|u| (zero where u or v vanishes).
    """
    X = _params(theta, reference if metric == "cosine" else None)
    pairs = _pairs(neighbours, X.shape[0])
    u, v = X[pairs[:, 0]], X[pairs[:, 1]]
    if metric == "l2sq":
        return 2.0 * (u - v)
    if metric != "cosine":
        raise MarketInputError("metric", f"unknown metric {metric!r}; choose one of {METRICS}")
    nu = np.linalg.norm(u, axis=1, keepdims=True)  # numpy's norm is scaled: no overflow
    nv = np.linalg.norm(v, axis=1, keepdims=True)
    ok = (nu > 0) & (nv > 0)
    nu_s, nv_s = np.where(ok, nu, 1.0), np.where(ok, nv, 1.0)
    cos = np.sum(u * v, axis=1, keepdims=True) / (nu_s * nv_s)
    grad = -(v / nv_s - cos * u / nu_s) / nu_s
    return np.where(ok, grad, 0.0)


def prox_centres(theta, adjacency, N, eta: float, metric: str = "l2sq", reference=None):
    """Eq. 8: theta_bar_i = theta_i - (eta/N_i) sum_j a_ij N_j grad_{theta_i} d(theta_i, theta_j).

    A client with no neighbour keeps theta_bar_i = theta_i.
    """
    X = _params(theta)
    A = np.asarray(adjacency, dtype=bool)
    if A.shape != (X.shape[0], X.shape[0]):
        raise MarketInputError("adjacency", f"has shape {A.shape}, expected {(X.shape[0],) * 2}")
    N = as_vector("N", N, m=X.shape[0], positive=True)
    if not (np.isfinite(eta) and eta > 0):
        raise MarketInputError("eta", f"is {eta!r}; must be finite and > 0")
    if metric == "l2sq":  # sum_j a_ij N_j 2 (theta_i - theta_j) as two matrix products
        W = A * N[None, :]
        step = 2.0 * (W.sum(axis=1)[:, None] * X - W @ X)
    else:
        pairs = np.argwhere(A)
        grads = distance_gradients(X, pairs, metric, reference) * N[pairs[:, 1]][:, None]
        step = np.zeros_like(X)
        np.add.at(step, pairs[:, 0], grads)
    return X - (eta / N)[:, None] * step
