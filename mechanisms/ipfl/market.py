"""The iPFL market: client types and prices (spec "Types and parameters"; Eq. 10 prices).

:class:`Market` is one market; :class:`MarketArrays` holds a batch of markets as arrays with
leading batch dimensions (what :func:`mechanisms.ipfl.clear_batch` clears and what a rule
marked :func:`over_arrays` receives). Both have the same attributes (N, c, K, lam, true_N,
true_c, true_K, gain), so every rule written over arrays serves both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import MarketInputError, as_floats, as_matrix, as_real, as_vector, check_symmetric
from ..gains import Gain, LogGain, PowerGain, SqrtGain, as_gain

# how an asymmetric D is accepted on purpose (the refusal's last words)
ASYMMETRY_HINT = ("pass allow_asymmetric_distances=True (fedmarket clear: "
                  "--allow-asymmetric-distances) if row i is buyer i's own distance, e.g. a "
                  "divergence")

__all__ = ["Market", "MarketArrays", "model_difference", "over_arrays", "paper_prices_arrays",
           "read_only"]

_PROVEN = (SqrtGain, LogGain, PowerGain)


def _check_scale(N: np.ndarray, K: np.ndarray, gain: Gain, which: str = "") -> None:
    """Refuse a market whose numbers overflow float64 where the mechanism needs them: the
    data of every market summed over its clients (the most a buyer can buy, N_-i = sum_j N_j
    - N_i), and each buyer's gain at that most, g_i(N_-i) (the sqrt gain's sqrt(K/N), the
    power gain's (N_-i/N_i)^alpha). Both finite, every gain, price and payment of the market
    is a finite number (a subnormal N or K/N past 1.8e308 made NaN utilities or a payment
    rule blamed for them). ``which`` is "" for the reports, "true_" for the true values.
    ``N``, ``K``: (..., m), already validated one by one."""
    with np.errstate(all="ignore"):
        total = N.sum(axis=-1, keepdims=True)
        if not np.isfinite(total).all():
            k = tuple(int(x) for x in np.argwhere(~np.isfinite(total))[0][:-1])
            raise MarketInputError(which + "N", f"sums to inf over the clients of market {k}: "
                                   "the total data must be finite in float64; scale N down")
        if gain.__class__ not in _PROVEN:
            return  # a gain of your own: its values are checked where they are computed
        most = np.maximum(total - N, 0.0)
        g = np.asarray(gain.value(most, K, N), dtype=np.float64)
    bad = ~np.isfinite(g)
    if bad.any():
        k = tuple(int(x) for x in np.argwhere(bad)[0])
        n, kk = float(N[k]), float(K[k])
        x = float(most[k])
        with np.errstate(all="ignore"):
            ratio = np.isfinite(x / n)
        if not ratio:  # the others' data over its own: past float64 whatever K is
            raise MarketInputError(which + "N", f"client {k[-1]}: the others' data ({x!r}) over "
                                   f"its own (N={n!r}) overflows float64; the gain of data it "
                                   "can buy cannot be computed; scale N")
        name = which + ("K" if abs(np.log10(max(kk, 1e-300))) > abs(np.log10(n)) else "N")
        raise MarketInputError(name, f"client {k[-1]} (N={n!r}, K={kk!r}): the {gain!r} gain "
                               "overflows float64 at the data it can buy (K/N too large); "
                               "scale N and K so that K/N stays below about 1e300")


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def read_only(a, dtype=None, *, copy: bool = True) -> np.ndarray:
    """A read-only copy of ``a``: what the toolkit hands to code of your own (a rule that
    writes into it raises numpy's "assignment destination is read-only" instead of silently
    changing the caller's arrays or the outcome). ``copy=False`` freezes an array the
    toolkit just made and nobody else holds."""
    a = np.array(a, dtype=dtype, copy=copy or None)
    a.setflags(write=False)
    return a


def model_difference(Nj, Ni, d, lam, out=None) -> np.ndarray:
    """The model-difference term lam (N_j/N_i) d_ij of Eqs. 10 and 12, elementwise over
    broadcastable arrays (the one copy: the prices of Eq. 10, the remittances of Eq. 12
    and the reference rules that net it out read it here); d_ij = 0 or lam = 0 adds
    nothing (never inf * 0). ``out``: an array of the broadcast shape to write into.

    >>> model_difference(200.0, 100.0, 0.5, 3.0).item()
    3.0
    """
    with np.errstate(over="ignore", invalid="ignore"):  # past the float range: inf
        out = np.divide(Nj, Ni, out=out)
        out *= d
        out *= lam
    nan = np.isnan(out)  # inf * 0 only: d_ij = 0 or lam = 0 adds nothing
    if nan.any():
        out[nan] = 0.0
    return out


def paper_prices_arrays(N, c, lam, D) -> np.ndarray:
    """Eq. 10 prices P_ij = c_j + lam (N_j/N_i) d_ij over arrays: ``N``, ``c`` (..., m),
    ``lam`` (...,) or a number, ``D`` (..., m, m), broadcast against each other (one D for
    a batch of markets, one lam for all). The diagonal is +inf (nobody buys its own
    model); c_j = inf gives +inf; d_ij = 0 or lam = 0 adds nothing (never inf * 0)."""
    N = np.asarray(N, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)[..., None, None]
    D = np.asarray(D, dtype=np.float64)
    shape = np.broadcast_shapes(D.shape, N.shape[:-1] + (N.shape[-1],) * 2)
    P = np.empty(shape)
    ops = [a.reshape((1,) * (len(shape) - a.ndim) + a.shape)
           for a in (N[..., None, :], N[..., :, None], D, lam, c[..., None, :])]
    # blocks along the first axis, a few hundred kB each: the passes below run in cache
    step = max(1, 2**15 // max(1, int(np.prod(shape[1:]))))
    for lo in range(0, shape[0], step):
        Nj, Ni, d, lam_, cj = (a[lo:lo + step] if a.shape[0] > 1 else a for a in ops)
        out = model_difference(Nj, Ni, d, lam_, out=P[lo:lo + step])
        out += cj  # D and lam are finite, so inf cost stays inf
    m = N.shape[-1]
    P[..., np.arange(m), np.arange(m)] = np.inf
    return P


def over_arrays(fn):
    """Mark a rule of your own as written over arrays, so bulk clearing
    (:func:`mechanisms.ipfl.clear_batch`, and the property checker's batch engine) may call
    it on a whole batch of markets at once.

    The function must accept leading batch dimensions: ``market.N``, ``market.c``,
    ``market.K`` are (..., m), ``market.lam`` (...,), and ``D``, thresholds, prices and the
    adjacency ``A`` (..., m, m); write ``N[..., None, :]`` rather than ``N[None, :]``. It
    must return the same shapes with the leading dimensions (adjacency (..., m, m);
    remittances (..., m, m) or payments (..., m); prices (..., m, m)). Called by
    :func:`mechanisms.ipfl.clear` on one market it sees plain (m,) arrays, so the same
    function serves both. Every array it receives is read-only.

    >>> @over_arrays
    ... def flat_fee(market, A, D):
    ...     return np.where(A, 0.1, 0.0)
    >>> flat_fee.over_arrays
    True
    """
    fn.over_arrays = True
    return fn


@dataclass(frozen=True, eq=False)
class Market:
    """Reported types of m clients, with optional true types for liars.

    Parameters
    ----------
    N : reported data amounts, N_i > 0 and finite.
    c : reported sharing costs, c_i >= 0; ``inf`` marks a pure buyer (never sells).
    K : gain scales, K_i >= 0; 0 marks a pure seller (never buys).
    lam : weight of the model difference, lambda >= 0 (default 0: prices are the costs).
    true_N, true_c, true_K : the truth when it differs from the report (liars). Selection and
        payments use the reported N, c and K; realised utilities use the true ones (true N in
        the gain, true K as the gain's scale, true c in the sharing cost). Default: truthful.
    gain : an increasing concave gain with g(0) = 0 (default: the paper's sqrt gain, Eq. 4).

    >>> m = Market(N=[400, 500], c=[0.5, 1.0], K=[5e4, 3e4], lam=2.0)
    >>> m.m, m.truthful
    (2, True)
    """

    N: np.ndarray
    c: np.ndarray
    K: np.ndarray
    lam: float = 0.0
    true_N: np.ndarray | None = None
    true_c: np.ndarray | None = None
    true_K: np.ndarray | None = None
    gain: Gain = field(default_factory=lambda: as_gain("sqrt"))

    def __post_init__(self):
        N = as_vector("N", self.N, positive=True)
        m = N.shape[0]
        c = as_vector("c", self.c, m=m, nonnegative=True, allow_inf=True)
        K = as_vector("K", self.K, m=m, nonnegative=True)
        lam = as_real("lam", self.lam, lo=0)
        true_N = N if self.true_N is None else as_vector("true_N", self.true_N, m=m, positive=True)
        true_c = (
            c
            if self.true_c is None
            else as_vector("true_c", self.true_c, m=m, nonnegative=True, allow_inf=True)
        )
        true_K = K if self.true_K is None else as_vector("true_K", self.true_K, m=m,
                                                          nonnegative=True)
        gain = as_gain(self.gain)
        if type(gain) not in _PROVEN:  # the built-in gains are increasing and concave
            gain.check(K, N)
        _check_scale(N, K, gain)
        if true_N is not N or true_K is not K:
            _check_scale(true_N, true_K, gain, "true_")
        for name, value in (("N", N), ("c", c), ("K", K), ("true_N", true_N), ("true_c", true_c),
                            ("true_K", true_K)):
            object.__setattr__(self, name, _frozen(value))
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "gain", gain)

    @property
    def m(self) -> int:
        """Number of clients."""
        return int(self.N.shape[0])

    @property
    def truthful(self) -> bool:
        """True when every reported N, c and K equals the truth."""
        return bool(np.array_equal(self.N, self.true_N) and np.array_equal(self.c, self.true_c)
                    and np.array_equal(self.K, self.true_K))

    def replace(self, **changes) -> Market:
        """A copy with some fields changed (e.g. one client's reported cost)."""
        known = ("N", "c", "K", "lam", "gain", "true_N", "true_c", "true_K")
        unknown = sorted(set(changes) - set(known))
        if unknown:
            raise MarketInputError(unknown[0], f"is not a field of a Market; the fields are "
                                               f"{known}")
        fields = {k: getattr(self, k) for k in ("N", "c", "K", "lam", "gain")}
        fields["true_N"] = None if np.array_equal(self.N, self.true_N) else self.true_N
        fields["true_c"] = None if np.array_equal(self.c, self.true_c) else self.true_c
        fields["true_K"] = None if np.array_equal(self.K, self.true_K) else self.true_K
        fields.update(changes)
        return Market(**fields)

    def check_distances(self, D, *, allow_negative: bool = False,
                        allow_asymmetric: bool = False) -> np.ndarray:
        """Validate a distance matrix for this market: shape, finite, zero diagonal, sign,
        then symmetry (d_ij = d_ji up to rounding, :func:`mechanisms.errors.check_symmetric`)
        unless ``allow_asymmetric``: row i is buyer i's (d_ij = d(theta_i, theta_j) in i's
        objective), so a divergence, d_ij != d_ji, is valid on purpose; refused by default
        because an asymmetric D is far more often a mistake (a transposed or half-filled
        matrix) than a divergence."""
        arr = as_matrix("D", D, self.m, allow_negative=allow_negative)
        if not allow_asymmetric:
            check_symmetric("D", arr, hint=ASYMMETRY_HINT)
        return arr

    def prices(self, D) -> np.ndarray:
        """Price of seller j for buyer i: P_ij = c_j + lam (N_j/N_i) d_ij (reported values).

        The diagonal is +inf (nobody buys its own model); c_j = inf gives +inf.
        (:func:`paper_prices_arrays`, the one copy of Eq. 10's prices.)
        """
        return paper_prices_arrays(self.N, self.c, self.lam, D)


@dataclass(frozen=True, eq=False)
class MarketArrays:
    """A batch of iPFL markets with the same number of clients m, as arrays with leading
    batch dimensions: ``N``, ``c``, ``K`` (and the truths ``true_N``, ``true_c``,
    ``true_K``, default: the reports) (..., m); ``lam`` (...,). Every array is stored as a
    read-only float64 copy. Validated like :class:`Market` (N > 0, c >= 0 or inf, K >= 0,
    lam >= 0, all but c finite); errors name the field.

    >>> mk = MarketArrays(N=[[400, 500], [100, 100]], c=[[0.5, 1.0], [0, 0]],
    ...                   K=[[5e4, 3e4], [1e4, 1e4]], lam=[2.0, 0.0])
    >>> mk.shape, mk.m, mk.market(1).N.tolist()
    ((2,), 2, [100.0, 100.0])
    """

    N: np.ndarray
    c: np.ndarray
    K: np.ndarray
    lam: np.ndarray
    true_N: np.ndarray | None = None
    true_c: np.ndarray | None = None
    true_K: np.ndarray | None = None
    gain: Gain = field(default_factory=lambda: as_gain("sqrt"))

    def __post_init__(self):
        N = as_floats("N", self.N)
        if N.ndim < 1:
            raise MarketInputError("N", f"has shape {N.shape}; must be (..., m)")
        if N.shape[-1] == 0:
            raise MarketInputError("N", f"has shape {N.shape}: no clients; a market needs at "
                                        "least one")
        shape = N.shape

        def field_(name, value, default, *, lo_open=False, allow_inf=False):
            if value is None:
                return default
            arr = as_floats(name, value)
            try:
                arr = np.broadcast_to(arr, shape)
            except ValueError as exc:
                raise MarketInputError(name, f"has shape {arr.shape}, expected {shape}") \
                    from exc
            bad = np.isnan(arr) | (arr <= 0 if lo_open else arr < 0)
            if not allow_inf:
                bad |= np.isinf(arr)
            if bad.any():
                k = tuple(int(x) for x in np.argwhere(bad)[0])
                want = "> 0" if lo_open else ">= 0"
                fin = "" if allow_inf else " and finite"
                raise MarketInputError(name, f"entry {k} is {arr[k]!r}; must be {want}{fin}")
            return arr

        N = field_("N", N, None, lo_open=True)
        c = field_("c", self.c, None, allow_inf=True)
        K = field_("K", self.K, None)
        lam = as_floats("lam", self.lam)
        try:
            lam = np.broadcast_to(lam, shape[:-1])
        except ValueError as exc:
            raise MarketInputError("lam", f"has shape {lam.shape}, expected {shape[:-1]}") \
                from exc
        if not (np.isfinite(lam) & (lam >= 0)).all():
            raise MarketInputError("lam", "must be finite and >= 0")
        values = {"N": N, "c": c, "K": K, "lam": lam,
                  "true_N": field_("true_N", self.true_N, N, lo_open=True),
                  "true_c": field_("true_c", self.true_c, c, allow_inf=True),
                  "true_K": field_("true_K", self.true_K, K)}
        truthful = values["true_N"] is N and values["true_K"] is K  # the defaults
        for name, value in values.items():
            object.__setattr__(self, name, _frozen(value))
        gain = as_gain(self.gain)
        if type(gain) not in _PROVEN:  # the built-in gains are increasing and concave
            gain.check(self.K.ravel(), self.N.ravel())
        _check_scale(self.N, self.K, gain)
        if not truthful:
            _check_scale(self.true_N, self.true_K, gain, "true_")
        object.__setattr__(self, "gain", gain)

    @classmethod
    def of(cls, market: Market) -> MarketArrays:
        """``market`` as a batch of one (shape (1,)), viewing its read-only arrays: a
        :class:`Market` is validated by the same rules, so nothing is checked again (a
        fraction of the cost of building the batch from the arrays).

        >>> mk = Market(N=[400, 500], c=[0.5, 1.0], K=[5e4, 3e4], lam=2.0)
        >>> one = MarketArrays.of(mk)
        >>> one.shape, one.lam.tolist(), one.market(0).c.tolist()
        ((1,), [2.0], [0.5, 1.0])
        """
        if not isinstance(market, Market):
            raise MarketInputError("market", f"is a {type(market).__name__}; must be a Market")
        out = object.__new__(cls)
        for name in ("N", "c", "K", "true_N", "true_c", "true_K"):
            object.__setattr__(out, name, getattr(market, name)[None])  # read-only views
        object.__setattr__(out, "lam", _frozen(np.array([market.lam])))
        object.__setattr__(out, "gain", market.gain)
        return out

    @classmethod
    def from_markets(cls, markets) -> MarketArrays:
        """Stack markets with the same m and the same gain into one batch (B,)."""
        markets = list(markets)
        if not markets:
            raise MarketInputError("markets", "is empty")
        if len({mk.m for mk in markets}) > 1:
            raise MarketInputError("markets", "must all have the same number of clients")
        gain = markets[0].gain
        if any(mk.gain != gain for mk in markets):
            raise MarketInputError("markets", "must all have the same gain")
        stack = {k: np.stack([getattr(mk, k) for mk in markets])
                 for k in ("N", "c", "K", "true_N", "true_c", "true_K")}
        return cls(lam=np.array([mk.lam for mk in markets]), gain=gain, **stack)

    @property
    def m(self) -> int:
        """Number of clients per market."""
        return int(self.N.shape[-1])

    @property
    def shape(self) -> tuple:
        """The leading batch dimensions."""
        return self.N.shape[:-1]

    def market(self, index) -> Market:
        """One market of the batch as a :class:`Market` (``index`` into the batch shape)."""
        index = index if isinstance(index, tuple) else (index,)
        return Market(N=self.N[index], c=self.c[index], K=self.K[index],
                      lam=float(self.lam[index]), true_N=self.true_N[index],
                      true_c=self.true_c[index], true_K=self.true_K[index], gain=self.gain)

    def prices(self, D) -> np.ndarray:
        """Eq. 10 prices of every market (:func:`paper_prices_arrays`)."""
        return paper_prices_arrays(self.N, self.c, self.lam, D)

    def check_distances(self, D, *, allow_negative: bool = False,
                        allow_asymmetric: bool = False) -> np.ndarray:
        """Validate a batch of distance matrices (..., m, m): shape, finite, zero diagonal,
        sign, then symmetry unless ``allow_asymmetric`` (see :meth:`Market.check_distances`;
        the error names the market of the batch and the pair)."""
        arr = as_floats("D", D)
        want = (*self.shape, self.m, self.m)
        if arr.shape != want:
            raise MarketInputError("D", f"has shape {arr.shape}, expected {want}")
        if not np.isfinite(arr).all():
            raise MarketInputError("D", "holds NaN or inf; must be finite")
        if (np.diagonal(arr, axis1=-2, axis2=-1) != 0).any():
            raise MarketInputError("D", "has a nonzero diagonal entry; must be 0")
        if not allow_negative and (arr < 0).any():
            raise MarketInputError("D", "holds a negative distance; distances must be >= 0 "
                                        "(pass allow_negative_distances=True on purpose)")
        if not allow_asymmetric:
            check_symmetric("D", arr, hint=ASYMMETRY_HINT)
        return arr
