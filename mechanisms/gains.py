"""Collaboration gain functions g_i (iPFL Definition 2, Eq. 4) and their thresholds (Box 2).

A gain maps the data amount x a buyer obtains from its neighbours to a value, for buyer
parameters (K_i, N_i). Every gain must be increasing and concave with g(0) = 0: the properties
the mechanism claims need nothing else. Three ship:

* :class:`SqrtGain` (the paper's Eq. 4): ``sqrt(K/N) - sqrt(K/(N + x))``,
* :class:`LogGain`: ``K * log(1 + x/N)``,
* :class:`PowerGain`: ``K * ((1 + x/N)**alpha - 1)`` with 0 < alpha <= 1,

and :class:`CallableGain` wraps a user's own vectorised ``fn(x, K, N)``.

Thresholds. For a buyer i and a seller j with price D_ij = c_j + lam (N_j/N_i) d_ij, the
threshold T_ij solves ``g_i(T) - g_i(T - N_j) = D_ij`` with T >= N_j (Box 2). The left side falls
from g_i(N_j) at T = N_j towards its limit at infinity, so D >= g_i(N_j) gives T = 0 (never worth
buying), D <= 0 (or D below the limit) gives T = inf, anything else a unique root.
:meth:`Gain.thresholds` solves all pairs at once; the sqrt gain uses Newton on the closed-form
quartic of the spec, every other gain a vectorised bracket-and-bisect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import MarketInputError

__all__ = ["CallableGain", "Gain", "LogGain", "PowerGain", "SqrtGain", "as_gain"]

_BISECT_RTOL = 4e-16
_RESOLVABLE = 2.0**50


class Gain:
    """Base class: subclasses implement :meth:`value`; they may override :meth:`_roots`."""

    name = "gain"

    def value(self, x, K, N):
        """g(x) for buyer parameters K, N (NumPy broadcasting over all three)."""
        raise NotImplementedError

    def __call__(self, x, K, N):
        return self.value(x, K, N)

    def thresholds(self, price, Nj, K, N) -> np.ndarray:
        """Box 2 thresholds T for broadcastable price, seller size Nj, buyer K and N.

        Paper convention: 0 = never worth buying, +inf = always worth buying.
        """
        price, Nj, K, N = np.broadcast_arrays(
            *(np.asarray(a, dtype=np.float64) for a in (price, Nj, K, N))
        )
        T = np.zeros(price.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            first = self.value(Nj, K, N)  # g_i(N_j) - g_i(0): the largest marginal j can bring
        T[price <= 0] = np.inf
        inner = (price > 0) & (price < first)
        if inner.any():
            # a price so small (say 1e-300) that the root overflows float64 is a free model
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                roots = self._roots(price[inner], Nj[inner], K[inner], N[inner])
            T[inner] = np.where(np.isnan(roots), np.inf, roots)
        return T

    def _roots(self, price, Nj, K, N) -> np.ndarray:
        """Generic root of g(T) - g(T - Nj) = price on T >= Nj, for 1-D arrays with
        0 < price < g(Nj). Vectorised geometric bracketing, then bisection."""

        def marginal(T, nj, k, n):
            return self.value(T, k, n) - self.value(T - nj, k, n)

        lo = Nj.copy()
        hi = 2.0 * Nj
        out = np.empty_like(price)
        todo = np.arange(price.size)
        while todo.size:  # grow hi until the marginal there is <= price
            above = marginal(hi[todo], Nj[todo], K[todo], N[todo]) > price[todo]
            if not above.any():
                break
            grow = todo[above]
            lo[grow] = hi[grow]
            hi[grow] *= 2.0
            todo = grow
            # Past 2^50 N_j the marginal g(T) - g(T - N_j) can no longer be resolved in
            # float64: a marginal still above the price there is taken as never falling to it
            # (T = inf, always worth buying; no market holds 2^50 times a client's data).
            over = hi[todo] > _RESOLVABLE * Nj[todo]
            if over.any():
                out[todo[over]] = np.inf
                lo[todo[over]] = hi[todo[over]] = np.inf
                todo = todo[~over]
        finite = np.isfinite(hi)
        lo_f, hi_f = lo[finite], hi[finite]
        p_f, nj_f, k_f, n_f = price[finite], Nj[finite], K[finite], N[finite]
        for _ in range(200):
            mid = 0.5 * (lo_f + hi_f)
            above = marginal(mid, nj_f, k_f, n_f) > p_f
            lo_f = np.where(above, mid, lo_f)
            hi_f = np.where(above, hi_f, mid)
            if np.all(hi_f - lo_f <= _BISECT_RTOL * hi_f):
                break
        out[finite] = 0.5 * (lo_f + hi_f)
        return out

    def check(self, K, N) -> None:
        """Cheap sanity check of the declared shape: g(0) = 0, increasing, concave.

        Evaluated for every buyer on a geometric grid of data amounts; raises
        :class:`MarketInputError` naming ``gain`` when it fails.
        """
        K = np.asarray(K, dtype=np.float64)[:, None]
        N = np.asarray(N, dtype=np.float64)[:, None]
        grid = N * np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
        with np.errstate(all="ignore"):
            vals = np.asarray(self.value(grid, K, N), dtype=np.float64)
        if vals.shape != grid.shape or not np.isfinite(vals).all():
            raise MarketInputError(
                "gain", f"{self!r} must return finite values of shape {grid.shape}"
            )
        scale = np.maximum(np.abs(vals).max(axis=1, keepdims=True), 1e-300)
        tol = 1e-9 * scale
        if (np.abs(vals[:, :1]) > tol).any():
            raise MarketInputError("gain", f"{self!r} must satisfy g(0) = 0")
        steps = np.diff(vals, axis=1)
        if (steps < -tol).any():
            raise MarketInputError("gain", f"{self!r} must be increasing in the data amount")
        slopes = steps / np.diff(grid, axis=1).clip(min=1e-300)
        bend = np.diff(slopes, axis=1)
        if (bend > 1e-9 * np.abs(slopes).max(axis=1, keepdims=True) + 1e-300).any():
            raise MarketInputError("gain", f"{self!r} must be concave in the data amount")


@dataclass(frozen=True)
class SqrtGain(Gain):
    """The paper's gain, Eq. 4: g_i(x) = sqrt(K_i/N_i) - sqrt(K_i/(N_i + x))."""

    name = "sqrt"

    def value(self, x, K, N):
        x, K, N = np.asarray(x), np.asarray(K), np.asarray(N)
        return np.sqrt(K / N) - np.sqrt(K / (N + x))

    def _roots(self, price, Nj, K, N):
        """Closed form of the spec: with x = N + T and t = sqrt(x) - sqrt(x - Nj),
        t solves price t^4 + 4 sqrt(K) t^3 - price Nj^2 = 0, and x = ((Nj/t + t)/2)^2.

        The quartic f is increasing and convex on t > 0, so Newton started right of the root
        falls monotonically onto it. The start is the smaller of two points right of the root:
        the cubic root ignoring the t^4 term, and t at T = Nj (where f > 0 because
        price < g(Nj)).
        """
        sk = np.sqrt(K)
        t_hi = np.sqrt(N + Nj) - np.sqrt(N)
        t = np.minimum(t_hi, np.cbrt(price * Nj * Nj / (4.0 * sk)))
        for _ in range(100):
            t2 = t * t
            f = price * t2 * t2 + 4.0 * sk * t2 * t - price * Nj * Nj
            fp = 4.0 * price * t2 * t + 12.0 * sk * t2
            step = f / fp
            t = t - step
            if np.all(np.abs(step) <= 1e-15 * t):
                break
        half = 0.5 * (Nj / t + t)
        return np.maximum(half * half - N, Nj)


@dataclass(frozen=True)
class LogGain(Gain):
    """g_i(x) = K_i log(1 + x/N_i)."""

    name = "log"

    def value(self, x, K, N):
        return np.asarray(K) * np.log1p(np.asarray(x) / np.asarray(N))


@dataclass(frozen=True)
class PowerGain(Gain):
    """g_i(x) = K_i ((1 + x/N_i)^alpha - 1), 0 < alpha <= 1 (alpha = 1 is linear)."""

    alpha: float = 0.5
    name = "power"

    def __post_init__(self):
        if not (0.0 < float(self.alpha) <= 1.0):
            raise MarketInputError("alpha", f"is {self.alpha!r}; must lie in (0, 1]")

    def value(self, x, K, N):
        return np.asarray(K) * ((1.0 + np.asarray(x) / np.asarray(N)) ** self.alpha - 1.0)


@dataclass(frozen=True)
class CallableGain(Gain):
    """A user's own gain: ``fn(x, K, N)`` vectorised, increasing and concave, fn(0, K, N) = 0."""

    fn: Callable = None  # type: ignore[assignment]
    label: str = "custom"

    @property
    def name(self):  # type: ignore[override]
        return self.label

    def value(self, x, K, N):
        try:
            out = np.asarray(self.fn(x, K, N), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise MarketInputError("gain", f"{self.label}(x, K, N) must return numbers: "
                                           f"{exc}") from exc
        if np.isnan(out).any():
            # NaN where every input is a number is the function's own fault: report it, never
            # map it to a threshold ("always buy")
            xs, Ks, Ns = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64)
                                               for a in (x, K, N)))
            if out.shape != xs.shape:
                raise MarketInputError("gain", f"{self.label}(x, K, N) returned NaN")
            bad = np.isnan(out) & ~np.isnan(xs) & ~np.isnan(Ks) & ~np.isnan(Ns)
            if bad.any():
                k = np.argwhere(bad)[0]
                k = tuple(int(i) for i in k)
                at = f"x={float(xs[k])!r}, K={float(Ks[k])!r}, N={float(Ns[k])!r}"
                raise MarketInputError("gain", f"{self.label}(x, K, N) returned NaN at {at}")
        return out


def as_gain(gain) -> Gain:
    """Accept a :class:`Gain`, one of the names "sqrt" | "log" | "power", or a callable."""
    if isinstance(gain, Gain):
        return gain
    if isinstance(gain, str):
        table = {"sqrt": SqrtGain(), "log": LogGain(), "power": PowerGain()}
        if gain not in table:
            raise MarketInputError("gain", f"unknown gain {gain!r}; choose one of {sorted(table)}")
        return table[gain]
    if callable(gain):
        return CallableGain(fn=gain, label=getattr(gain, "__name__", "custom"))
    raise MarketInputError("gain", f"must be a Gain, a name or a callable, got {gain!r}")
