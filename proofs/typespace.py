"""Type spaces: the declared bounds and distributions of the iPFL types (N, c, K), of lam and of
the distances D, from which markets are drawn and on which a property is claimed ("IR on
this type space").

A :class:`TypeSpace` is a frozen description; :data:`DEFAULT` is the checker's distribution
(the batch engine's draws, :mod:`proofs.batch`, and :func:`proofs.strategies.ipfl_markets`):

=========  ==========================================================================
N          integers 20..2000, uniform
c          uniform on [0, 5]; a pure buyer (role "buyer") has c = inf
K          uniform on [1e3, 1e6]; a pure seller (role "seller") has K = 0
lam        uniform on [0, 5]
D          d_ij uniform on [0, 2] (symmetric or not, half and half; zero diagonal)
roles      trader 1/2, pure buyer 1/4, pure seller 1/4
clients    2..12, P(m) ~ m^-3
atom       each coordinate takes its lower end with probability 0.1 (N = 20, c = 0, ...)
=========  ==========================================================================

A type space of your own: ``TypeSpace(N=Dim(100, 1000, integer=True), K=Dim(1e4, 1e6,
dist="loguniform"), ...)`` in Python, or a TOML file (:func:`load_type_space`)::

    name = "large clients"
    [N]
    low = 500
    high = 2000
    integer = true
    [K]
    low = 1e4
    high = 1e6
    dist = "loguniform"
    [roles]
    trader = 0.5
    buyer = 0.25
    seller = 0.25

(missing tables keep the default). Every draw of the batch engine maps one uniform number per
coordinate through :meth:`Dim.value`, so a type space changes the ranges and laws of the draws
without changing how many numbers are drawn: the same seed draws the same markets whenever
the space is the same. Properties that draw on purpose outside the space (negative distances
for ``ir_negative_distances``, lam >= 0.01 for Thm 3) keep their own ranges for those
coordinates.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from .core import CheckerInputError

__all__ = ["DEFAULT", "DISTRIBUTIONS", "ROLES", "Dim", "TypeSpace", "as_type_space",
           "load_type_space"]

DISTRIBUTIONS = ("uniform", "loguniform")
ROLES = ("trader", "buyer", "seller")


@dataclass(frozen=True)
class Dim:
    """One coordinate's support [low, high] and law: ``uniform`` or ``loguniform`` (low > 0),
    ``integer`` (integers low..high, uniform over them; low and high integers)."""

    low: float
    high: float
    dist: str = "uniform"
    integer: bool = False

    def __post_init__(self):
        for name in ("low", "high"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise CheckerInputError(name, f"is {v!r}; must be a finite number")
        if not self.low <= self.high:
            raise CheckerInputError("high", f"is {self.high!r}, below low {self.low!r}")
        if self.dist not in DISTRIBUTIONS:
            raise CheckerInputError("dist", f"is {self.dist!r}; choose one of {DISTRIBUTIONS}")
        if self.dist == "loguniform" and not self.low > 0:
            raise CheckerInputError("low", f"is {self.low!r}; a loguniform law needs low > 0")
        if self.integer and (self.low != int(self.low) or self.high != int(self.high)
                             or self.dist != "uniform"):
            raise CheckerInputError("integer", "needs integer low and high and the uniform "
                                               "law")

    def value(self, u) -> np.ndarray:
        """The values of uniform numbers ``u`` in [0, 1] (0: the lower end)."""
        u = np.asarray(u, dtype=float)
        lo, hi = float(self.low), float(self.high)
        if self.integer:
            n = int(hi - lo)
            return lo + np.floor(u * (n + 1)).clip(max=n)
        if self.dist == "loguniform":
            return lo * (hi / lo) ** u
        return lo + u * (hi - lo)

    def describe(self) -> str:
        text = f"{self.low:g}..{self.high:g}" if self.integer else \
            f"[{self.low:g}, {self.high:g}]"
        return text + (" integers" if self.integer else "") + \
            (" loguniform" if self.dist == "loguniform" else "")


# the checker's distribution, coordinate by coordinate (Dim is frozen: shared safely)
_N = Dim(20, 2000, integer=True)
_C = Dim(0.0, 5.0)
_K = Dim(1e3, 1e6)
_LAM = Dim(0.0, 5.0)
_D = Dim(0.0, 2.0)


@dataclass(frozen=True)
class TypeSpace:
    """The bounds and laws of the drawn markets (module docstring). ``roles``: probabilities
    of (trader, pure buyer, pure seller), summing to 1; ``clients``: (fewest, most) clients;
    ``size_power``: P(m) ~ m^-size_power; ``atom``: the probability that a coordinate takes
    its lower end."""

    name: str = "default"
    N: Dim = _N
    c: Dim = _C
    K: Dim = _K
    lam: Dim = _LAM
    D: Dim = _D
    roles: tuple = (0.5, 0.25, 0.25)
    clients: tuple = (2, 12)
    size_power: float = 3.0
    atom: float = 0.1

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise CheckerInputError("name", f"is {self.name!r}; a non-empty string")
        for key in ("N", "c", "K", "lam", "D"):
            if not isinstance(getattr(self, key), Dim):
                raise CheckerInputError(key, f"is {getattr(self, key)!r}; must be a Dim")
        if self.N.low <= 0:
            raise CheckerInputError("N.low", f"is {self.N.low!r}; data amounts are > 0")
        for key in ("c", "K", "lam", "D"):
            if getattr(self, key).low < 0:
                raise CheckerInputError(f"{key}.low", f"is {getattr(self, key).low!r}; "
                                                      "must be >= 0")
        r = tuple(float(x) for x in self.roles)
        if len(r) != 3 or min(r) < 0 or abs(sum(r) - 1.0) > 1e-9:
            raise CheckerInputError("roles", f"is {self.roles!r}; three probabilities "
                                             f"{ROLES} summing to 1")
        object.__setattr__(self, "roles", r)
        lo, hi = self.clients
        if not (isinstance(lo, int) and isinstance(hi, int) and 2 <= lo <= hi):
            raise CheckerInputError("clients", f"is {self.clients!r}; integers 2 <= fewest "
                                               "<= most")
        if not (math.isfinite(self.size_power) and self.size_power >= 0):
            raise CheckerInputError("size_power", f"is {self.size_power!r}; must be >= 0")
        if not 0 <= self.atom < 1:
            raise CheckerInputError("atom", f"is {self.atom!r}; a probability in [0, 1)")

    # ----------------------------------------------------------------- reading it

    def role(self, u) -> np.ndarray:
        """The role of uniform numbers ``u``: 0 trader, 1 pure buyer, 2 pure seller (the
        intervals [0, p_t), [p_t, p_t + p_b), the rest: u = 0 is a trader)."""
        t, b, _ = self.roles
        u = np.asarray(u, dtype=float)
        return np.where(u < t, 0, np.where(u < t + b, 1, 2))

    def contains(self, N, c, K, *, integer: bool = True) -> np.ndarray:
        """Elementwise: is the report (N, c, K) in the space (inside the bounds, an integer N
        where N is integer, c = inf only where pure buyers occur, K = 0 only where pure
        sellers do)? Arrays of any (common) shape. ``integer=False``: inside the bounds
        (the space's convex hull: a fractional N between the bounds counts as inside)."""
        N, c, K = (np.asarray(x, dtype=float) for x in (N, c, K))
        ok = (N >= self.N.low) & (N <= self.N.high)
        if self.N.integer and integer:
            ok &= N == np.floor(N)
        ok &= ((c >= self.c.low) & (c <= self.c.high)) | (np.isinf(c) & (self.roles[1] > 0))
        ok &= ((K >= self.K.low) & (K <= self.K.high)) | ((K == 0) & (self.roles[2] > 0))
        return ok

    def describe(self) -> str:
        """One line: the bounds and laws ("IR on this type space" prints it)."""
        t, b, s = self.roles
        lo, hi = self.clients
        return (f"type space {self.name!r}: N {self.N.describe()}, c {self.c.describe()}, "
                f"K {self.K.describe()}, lam {self.lam.describe()}, d {self.D.describe()}; "
                f"roles trader {t:g} / buyer {b:g} / seller {s:g}; {lo}-{hi} clients "
                f"(P(m) ~ m^-{self.size_power:g}); atoms {self.atom:g}")

    @property
    def is_default(self) -> bool:
        return self == DEFAULT

    def to_dict(self) -> dict:
        """A JSON/TOML-ready description (:func:`as_type_space` reads it back)."""
        out = asdict(self)
        out["roles"] = dict(zip(ROLES, self.roles, strict=True))
        out["clients"] = list(self.clients)
        return out


DEFAULT = TypeSpace()


def _from_dict(doc: dict, where: str) -> TypeSpace:
    if not isinstance(doc, dict):
        raise CheckerInputError("type_space", f"{where}: must be a table, got "
                                              f"{type(doc).__name__}")
    known = {f.name for f in fields(TypeSpace)}
    bad = sorted(set(doc) - known)
    if bad:
        raise CheckerInputError("type_space", f"{where}: unknown key(s) {bad}; known: "
                                              f"{sorted(known)}")
    kw: dict = {}
    for key, value in doc.items():
        if key in ("N", "c", "K", "lam", "D"):
            if not isinstance(value, dict):
                raise CheckerInputError(f"type_space.{key}", f"{where}: must be a table with "
                                                             "low, high[, dist, integer]")
            extra = sorted(set(value) - {"low", "high", "dist", "integer"})
            if extra:
                raise CheckerInputError(f"type_space.{key}", f"{where}: unknown key(s) "
                                                             f"{extra}")
            base = getattr(DEFAULT, key)
            merged = {**asdict(base), **value}
            try:
                kw[key] = Dim(**merged)
            except CheckerInputError as exc:
                raise CheckerInputError(f"type_space.{key}.{exc.field}", exc.message) from None
        elif key == "roles":
            if isinstance(value, dict):
                extra = sorted(set(value) - set(ROLES))
                if extra:
                    raise CheckerInputError("type_space.roles", f"{where}: unknown role(s) "
                                                                f"{extra}; roles are {ROLES}")
                kw["roles"] = tuple(float(value.get(r, 0.0)) for r in ROLES)
            else:
                kw["roles"] = tuple(value)
        elif key == "clients":
            kw["clients"] = tuple(value)
        else:
            kw[key] = value
    try:
        return TypeSpace(**kw)
    except CheckerInputError as exc:
        raise CheckerInputError(f"type_space.{exc.field}", f"{where}: {exc.message}") from None


def load_type_space(path) -> TypeSpace:
    """A type space from a TOML file (module docstring) or a JSON file (``to_dict``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CheckerInputError("type_space", f"{path}: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".json":
            import json

            doc = json.loads(text)
        else:
            doc = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise CheckerInputError("type_space", f"{path}: {exc}") from None
    return _from_dict(doc, str(path))


def as_type_space(spec) -> TypeSpace:
    """A :class:`TypeSpace` from itself, None (:data:`DEFAULT`), a dict (``to_dict``) or a
    path to a TOML / JSON file."""
    if spec is None:
        return DEFAULT
    if isinstance(spec, TypeSpace):
        return spec
    if isinstance(spec, dict):
        return _from_dict(spec, "type space")
    if isinstance(spec, str | Path):
        return load_type_space(spec)
    raise CheckerInputError("type_space", f"is a {type(spec).__name__}; give a TypeSpace, a "
                                          "dict or a TOML/JSON file")
