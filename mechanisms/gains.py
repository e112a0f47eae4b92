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
buying), D <= 0 (or D at or below the limit, :meth:`Gain.marginal_limit`: K N_j / N_i for the linear
power gain) gives T = inf, anything else a unique root.
:meth:`Gain.thresholds` solves all pairs at once; the sqrt gain in closed form (Ferrari on the
spec's quartic, :meth:`SqrtGain.thresholds`), every other gain a vectorised bracket-and-bisect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .contain import call_rule
from .errors import MarketInputError, RuleFailed

__all__ = ["ROOT_CALLS_MAX", "CallableGain", "Gain", "LogGain", "PowerGain", "SqrtGain",
           "as_gain"]

_BISECT_RTOL = 4e-16
_RESOLVABLE = 2.0**50
ROOT_CALLS_MAX = 1 + 2 * (50 + 53)
"""The most calls of a gain's :meth:`Gain.value` that :meth:`Gain.thresholds` makes (the
generic root finder, for every pair at once): 1 for g(N_j); 2 (g(T) and g(T - N_j)) per test
of the growing bracket [T, 2T], at most 50 from T = N_j up to 2^50 N_j (past it the marginal
is not resolved: always worth buying); 2 per halving, at most 53 (a bracket [T, 2T] halved
to the relative width 4e-16 takes 52 halvings in exact arithmetic, one more where the
midpoints round)."""


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

        Paper convention: 0 = never worth buying, +inf = always worth buying. A price of
        g(N_j) or more (as :meth:`value` gives it) is 0, a price of 0 or less, or at or
        below :meth:`marginal_limit`, inf; anything else a root T >= N_j. The generic root
        finder calls :meth:`value` at most :data:`ROOT_CALLS_MAX` times a call, however
        many pairs it solves.
        """
        price, Nj, K, N = np.broadcast_arrays(
            *(np.asarray(a, dtype=np.float64) for a in (price, Nj, K, N))
        )
        T = np.zeros(price.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            first = self.value(Nj, K, N)  # g_i(N_j) - g_i(0): the largest marginal j can bring
            limit = self.marginal_limit(Nj, K, N)  # what the marginal falls towards
        T[price <= 0] = np.inf
        # at or below the limit the marginal never falls to the price: always worth buying
        # (decided here, not by the bracket below, where float noise of g(T) - g(T - N_j)
        # at large T would read as a root)
        below = (price > 0) & (price <= limit) & (price < first)
        T[below] = np.inf
        inner = (price > 0) & (price > limit) & (price < first)
        if inner.any():
            # a price so small (say 1e-300) that the root overflows float64 is a free model
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                roots = self._roots(price[inner], Nj[inner], K[inner], N[inner])
            T[inner] = np.where(np.isnan(roots), np.inf, roots)
        return T

    def marginal_limit(self, Nj, K, N):
        """The limit of g(T) - g(T - N_j) as T -> inf (N_j g'(inf)): 0 unless a subclass
        knows better (a gain of the user's own: 0, its bracket decides)."""
        return np.zeros(np.broadcast_shapes(np.shape(Nj), np.shape(K), np.shape(N)))

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
        # each root is halved until its own bracket is narrow, never further: a root does
        # not depend on which other pairs (of this market, of the other markets of a batch)
        # are solved beside it, so one market is the batch of one (issue 34)
        # the brackets still wide, compacted (idx: their places), halved together; a bracket
        # leaves once narrow and is written back (the same halvings as halving every wide
        # bracket of the whole array in place, without gathering them again each step)
        idx = np.flatnonzero(hi_f - lo_f > _BISECT_RTOL * hi_f)
        l, h = lo_f[idx], hi_f[idx]
        p_a, nj_a, k_a, n_a = p_f[idx], nj_f[idx], k_f[idx], n_f[idx]
        for _ in range(200):
            if not idx.size:
                break
            mid = 0.5 * (l + h)
            above = marginal(mid, nj_a, k_a, n_a) > p_a
            l = np.where(above, mid, l)
            h = np.where(above, h, mid)
            wide = h - l > _BISECT_RTOL * h
            if not wide.all():
                done = ~wide
                lo_f[idx[done]], hi_f[idx[done]] = l[done], h[done]
                idx, l, h = idx[wide], l[wide], h[wide]
                p_a, nj_a, k_a, n_a = p_a[wide], nj_a[wide], k_a[wide], n_a[wide]
        lo_f[idx], hi_f[idx] = l, h  # brackets still wide after 200 halvings (none seen)
        out[finite] = 0.5 * (lo_f + hi_f)
        return out

    def check(self, K, N) -> None:
        """Sanity check of the declared shape: g(0) = 0, increasing, concave; raises
        :class:`MarketInputError` naming ``gain`` when it fails. g(0) = 0 to 1e-9 of the
        largest |g| over the buyer's core amounts 0, N/4, ..., 16 N (at 1e-9 accepted).

        Checked for every buyer on a grid that does not follow N alone: the data amounts 0,
        N/4, ..., 16 N of the buyer's own market; multiples of N from 2^-16 to 2^50 (past
        2^50 N no threshold is resolved, :meth:`thresholds`); and, across that span, the
        absolute amounts 2^k (:data:`CHECK_SPAN`). So a gain curved at a scale of its
        own (``exp(x) - 1``, a sigmoid) is refused whether N is 1e-20 or 1e6, not only when
        N happens to sit near that scale. Neighbouring slopes are compared with a relative
        tolerance (1e-9) plus the rounding of the values (2^-40 of each); below 2^-16 N a
        generic gain's own rounding (g(x) a difference of numbers near g's scale) would
        drown the shape, so the grid stops there. Values that overflow float64 beyond
        16 N decide nothing; within 16 N they are refused.
        """
        K = np.asarray(K, dtype=np.float64)[:, None]
        N = np.asarray(N, dtype=np.float64)[:, None]
        core = N * _CHECK_CORE
        with np.errstate(all="ignore"):
            vals = np.asarray(self.value(core, K, N), dtype=np.float64)
        if vals.shape != core.shape or not np.isfinite(vals).all():
            raise MarketInputError(
                "gain", f"{self!r} must return finite values of shape {core.shape}"
            )
        scale = np.maximum(np.abs(vals).max(axis=1, keepdims=True), 1e-300)
        if (np.abs(vals[:, :1]) > 1e-9 * scale).any():
            raise MarketInputError("gain", f"{self!r} must satisfy g(0) = 0")
        # multiples of N, and absolute amounts 2^k (every other k) across the same span
        start = 2.0 * np.ceil((np.log2(N) + CHECK_SPAN[0]) / 2.0)
        absolute = 2.0 ** (start + np.arange(0, CHECK_SPAN[1] - CHECK_SPAN[0] + 1, 2.0))
        for grid in (N * CHECK_RELATIVE, absolute):
            with np.errstate(all="ignore"):
                vals = np.asarray(self.value(grid, K, N), dtype=np.float64)
            if vals.shape != grid.shape:
                raise MarketInputError(
                    "gain", f"{self!r} must return values of the shape of x ({grid.shape})"
                )
            _check_shape(self, grid, vals)


# the grid of Gain.check: multiples of N (0, the buyer's own 1/4 .. 16, and every other power
# of two from 2^-16 to 2^50), and absolute data amounts (every other power of two) across the
# same span, 2^-16 N to 2^50 N
CHECK_SPAN = (-16, 50)
_CHECK_CORE = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
CHECK_RELATIVE = np.unique(np.concatenate([_CHECK_CORE,
                                           2.0 ** np.arange(CHECK_SPAN[0], CHECK_SPAN[1] + 1, 2)]))
_CHECK_RTOL = 1e-9  # relative tolerance on neighbouring slopes
_CHECK_ROUND = 2.0**-40  # relative rounding allowed on each value (about 4,500 ulp)


def _check_shape(gain, x, g) -> None:
    """Increasing and concave over each row's increasing points ``x`` (values ``g``); a
    pair with a value that overflowed float64 (inf, NaN) decides nothing."""
    with np.errstate(all="ignore"):
        steps = np.diff(g, axis=1)
        noise = _CHECK_ROUND * np.maximum(np.abs(g[:, :-1]), np.abs(g[:, 1:]))  # per step
        if (steps < -(2 * noise + 1e-300)).any():
            raise MarketInputError("gain", f"{gain!r} must be increasing in the data amount")
        dx = np.diff(x, axis=1)
        slopes = steps / dx
        slack = 2 * noise / dx  # how far rounding can move each slope
        bend = np.diff(slopes, axis=1)
        allowed = (_CHECK_RTOL * np.maximum(np.abs(slopes[:, :-1]), np.abs(slopes[:, 1:]))
                   + slack[:, :-1] + slack[:, 1:] + 1e-300)
        bad = bend > allowed
    if bad.any():
        r, k = np.argwhere(bad)[0]
        raise MarketInputError("gain", f"{gain!r} must be concave in the data amount (its "
                                       f"slope rises from {slopes[r, k]:.6g} below "
                                       f"x = {x[r, k + 1]:.6g} to {slopes[r, k + 1]:.6g} "
                                       "above it)")


@dataclass(frozen=True)
class SqrtGain(Gain):
    """The paper's gain, Eq. 4: g_i(x) = sqrt(K_i/N_i) - sqrt(K_i/(N_i + x))."""

    name = "sqrt"

    def value(self, x, K, N):
        x, K, N = np.asarray(x), np.asarray(K), np.asarray(N)
        return np.sqrt(K / N) - np.sqrt(K / (N + x))

    def thresholds(self, price, Nj, K, N) -> np.ndarray:
        """Box 2 thresholds in closed form, every pair at once (no iteration).

        With x = N + T and t = sqrt(x) - sqrt(x - Nj) the Box 2 equation is the quartic
        price t^4 + 4 sqrt(K) t^3 - price Nj^2 = 0 (spec; proofs.ipfl_derivations). In
        v = sqrt(Nj) / t it reads v^4 - q v - 1 = 0 with q = 4 sqrt(K) / (price sqrt(Nj)),
        a depressed quartic solved by Ferrari: the resolvent cubic y^3 + y = q^2/8 has the
        one real root y = 2h / (w^2 + 1/3 + 1/(9 w^2)), h = q^2/16,
        w = (h + sqrt(h^2 + 1/27))^(1/3) (Cardano, written without cancellation), and
        v = (r + sqrt(2q/r - r^2)) / 2 with r = sqrt(2y); then x = Nj (v + 1/v)^2 / 4.
        For q > 1e9 (a price that small) the asymptote v = q^(1/3) + 1/(3q) is exact to
        float precision. Classification as
        for every gain: 0 where price >= g(Nj), inf where price <= 0 (and where the root
        overflows float64). Computed in place over the broadcast shape (no gathers).
        """
        price, Nj, K, N = (np.asarray(a, dtype=np.float64) for a in (price, Nj, K, N))
        given = np.broadcast_shapes(price.shape, Nj.shape, K.shape, N.shape)
        shape = given or (1,)  # plain numbers: one pair, shape () handed back
        T = np.empty(shape)
        if T.size == 0:
            return T
        ops = [a.reshape((1,) * (len(shape) - a.ndim) + a.shape) for a in (price, Nj, K, N)]
        # blocks along the first axis, a few hundred kB each, so the dozen passes below run
        # in cache and reuse the same few buffers (no page faults on fresh m x m arrays)
        step = max(1, _BLOCK // max(1, int(np.prod(shape[1:]))))
        with np.errstate(all="ignore"):
            for lo in range(0, shape[0], step):
                part = [a[lo:lo + step] if a.shape[0] > 1 else a for a in ops]
                out = T[lo:lo + step]
                _sqrt_block(*part, out)
        return T.reshape(given)


_P_BIG = 2.5e8  # q = 4 p > 1e9: v = q^(1/3) + 1/(3 q) to float precision
_BLOCK = 2**15  # elements per block of the closed form


def _sqrt_block(price, Nj, K, N, T) -> None:
    """:meth:`SqrtGain.thresholds` on one block, written into ``T``."""
    _sqrt_roots(price, Nj, K, N, T)
    first = np.add(N, Nj, out=np.empty(T.shape))  # g(Nj) = sqrt(K/N) - sqrt(K/(N + Nj))
    np.divide(K, first, out=first)
    np.sqrt(first, out=first)
    np.subtract(np.sqrt(K / N), first, out=first)
    inner = price < first
    inner &= price > 0
    T[np.isnan(T)] = np.inf  # a root past the float range: a free model
    # T = 0 outside ``inner``: an AND of the bits with 0 (+0.0) or all ones, branch-free
    # (a masked copy branches per element and costs more than a sqrt pass when the two
    # kinds of pair are mixed)
    keep = inner.astype(np.int64)
    np.negative(keep, out=keep)
    bits = T.view(np.int64)
    np.bitwise_and(bits, keep, out=bits)
    np.copyto(T, np.inf, where=price <= 0)


def _sqrt_roots(price, Nj, K, N, x) -> None:
    """T = x - N of :meth:`SqrtGain.thresholds` written into ``x`` (meaningful where
    0 < price < g(Nj)); in place, a few buffers of the block's size.

    Works with p = q/4 = sqrt(K) / (price sqrt(Nj)), so h = p^2. The cube root w is seeded
    in float32 (log and exp, relative error ~1e-7) and finished by one Halley step in
    float64 (cubic convergence: ~1e-21, below rounding). For q > 1e9 (prices below about
    1e-7 of sqrt(K/Nj)) the asymptote v = q^(1/3) + 1/(3 q) of v^4 = q v + 1 is exact to
    float precision (the next term is O(q^(-8/3)) relative), each factor's cube root taken
    apart (no overflow for subnormal prices).
    """
    shape = x.shape
    p = np.multiply(price, np.sqrt(Nj), out=np.empty(shape))
    np.divide(np.sqrt(K), p, out=p)  # p = q / 4
    v_big = big = None
    if np.fmax.reduce(p, axis=None) > _P_BIG:  # also where the division overflows
        big = ~(p <= _P_BIG)
        v0 = np.broadcast_to(np.cbrt(4.0 * np.sqrt(K)), shape)[big] / (
            np.broadcast_to(np.cbrt(price), shape)[big] *
            np.broadcast_to(np.cbrt(np.sqrt(Nj)), shape)[big])
        with np.errstate(all="ignore"):
            v_big = v0 + 1.0 / (3.0 * v0 * v0 * v0)
        np.minimum(p, _P_BIG, out=p)
    h = np.square(p)  # h = q^2 / 16
    s = np.square(h)
    s += 1.0 / 27.0
    np.sqrt(s, out=s)
    s += h  # s = h + sqrt(h^2 + 1/27) < 2e17 + 1: a float32 holds it
    w32 = s.astype(np.float32)
    np.log(w32, out=w32)
    w32 *= np.float32(1.0 / 3.0)
    np.exp(w32, out=w32)
    w = w32.astype(np.float64)  # w ~ s^(1/3) to ~1e-7
    a = np.square(w)
    a *= w  # w^3
    b = np.add(a, s, out=np.empty(shape))
    b += s  # w^3 + 2s
    a += a
    a += s  # 2 w^3 + s
    np.divide(b, a, out=b)
    w *= b  # Halley: w (w^3 + 2s) / (2 w^3 + s)
    np.square(w, out=a)  # z = w^2
    np.reciprocal(a, out=b)
    b *= 1.0 / 9.0
    a += b
    a += 1.0 / 3.0  # w^2 + 1/3 + 1/(9 w^2)
    np.divide(h, a, out=a)
    a *= 4.0  # r^2 = 2y = 4h / (w^2 + 1/3 + 1/(9 w^2)), y the resolvent's root
    r = np.sqrt(a, out=a)
    np.divide(p, r, out=b)
    b *= 8.0  # 2q / r
    b -= np.square(r, out=h)
    np.sqrt(b, out=b)
    b += r
    b *= 0.5  # v = (r + sqrt(2q/r - r^2)) / 2
    if big is not None:
        b[big] = v_big
    np.reciprocal(b, out=x)
    x += b
    np.square(x, out=x)
    x *= 0.25 * Nj  # x = Nj (v + 1/v)^2 / 4
    x -= N
    np.maximum(x, Nj, out=x)


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

    def marginal_limit(self, Nj, K, N):
        """K N_j / N for the linear gain (alpha = 1: its marginal is that constant), 0 for
        alpha < 1."""
        if float(self.alpha) == 1.0:
            return np.asarray(K) * np.asarray(Nj) / np.asarray(N)
        return super().marginal_limit(Nj, K, N)


@dataclass(frozen=True)
class CallableGain(Gain):
    """A user's own gain: ``fn(x, K, N)`` vectorised, increasing and concave, fn(0, K, N) = 0."""

    fn: Callable = None  # type: ignore[assignment]
    label: str = "custom"

    @property
    def name(self):  # type: ignore[override]
        return self.label

    def value(self, x, K, N):
        out = call_rule("gain", f"{self.label}(x, K, N)", self.fn, x, K, N)
        try:
            out = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise RuleFailed("gain", f"{self.label}(x, K, N) must return numbers: "
                                     f"{exc}") from exc
        if np.isnan(out).any():
            # NaN where every input is a number is the function's own fault: report it, never
            # map it to a threshold ("always buy")
            xs, Ks, Ns = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64)
                                               for a in (x, K, N)))
            if out.shape != xs.shape:
                raise RuleFailed("gain", f"{self.label}(x, K, N) returned NaN")
            bad = np.isnan(out) & ~np.isnan(xs) & ~np.isnan(Ks) & ~np.isnan(Ns)
            if bad.any():
                k = np.argwhere(bad)[0]
                k = tuple(int(i) for i in k)
                at = f"x={float(xs[k])!r}, K={float(Ks[k])!r}, N={float(Ns[k])!r}"
                raise RuleFailed("gain", f"{self.label}(x, K, N) returned NaN at {at}")
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
