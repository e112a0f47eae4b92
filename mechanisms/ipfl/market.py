"""The iPFL market: client types and prices (spec "Types and parameters"; Eq. 10 prices)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import as_matrix, as_real, as_vector
from ..gains import Gain, LogGain, PowerGain, SqrtGain, as_gain

__all__ = ["Market"]

_PROVEN = (SqrtGain, LogGain, PowerGain)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Market:
    """Reported types of m clients, with optional true types for liars.

    Parameters
    ----------
    N : reported data amounts, N_i > 0 and finite.
    c : reported sharing costs, c_i >= 0; ``inf`` marks a pure buyer (never sells).
    K : gain scales, K_i >= 0; 0 marks a pure seller (never buys).
    lam : weight of the model difference, lambda >= 0.
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
        fields = {k: getattr(self, k) for k in ("N", "c", "K", "lam", "gain")}
        fields["true_N"] = None if np.array_equal(self.N, self.true_N) else self.true_N
        fields["true_c"] = None if np.array_equal(self.c, self.true_c) else self.true_c
        fields["true_K"] = None if np.array_equal(self.K, self.true_K) else self.true_K
        fields.update(changes)
        return Market(**fields)

    def check_distances(self, D, *, allow_negative: bool = False) -> np.ndarray:
        """Validate a distance matrix for this market (shape, finite, zero diagonal, sign)."""
        return as_matrix("D", D, self.m, allow_negative=allow_negative)

    def prices(self, D) -> np.ndarray:
        """Price of seller j for buyer i: P_ij = c_j + lam (N_j/N_i) d_ij (reported values).

        The diagonal is +inf (nobody buys its own model); c_j = inf gives +inf.
        """
        D = np.asarray(D, dtype=np.float64)
        ratio = self.N[None, :] / self.N[:, None]
        with np.errstate(over="ignore", invalid="ignore"):  # past the float range: inf price
            share = np.where((D == 0) | (self.lam == 0), 0.0, self.lam * ratio * D)
        P = self.c[None, :] + share  # D and lam are finite, so inf cost stays inf
        np.fill_diagonal(P, np.inf)
        return P
