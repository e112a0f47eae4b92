"""Families that change WHO trades as well as the money (issue 31, part 2): posted prices,
reserve prices, trade reduction, and their combinations with the linear payment family.

Every member is a :class:`sims.design.evaluate.Mechanism` (a selection rule, a payment rule
and a price rule, all written over arrays), so the design search, the frontier and the
checker clear it through the one bulk clearing (:func:`mechanisms.ipfl.clear_batch`) and
``ipfl.clear`` clears it market by market with the same functions.

**Posted prices** (``kind = "posted"``). Every trade (i buys j) has a price

    pi_ij = base + distance lam d_ij + ratio lam (N_j/N_i) d_ij + others cbar_ij

with ``cbar_ij`` the mean reported cost of the clients other than i and j that sell (0 if
none). ``base`` and ``distance`` depend on no report (lam and the distances are computed from
the uploaded models, not reported); ``ratio`` reads both parties' reported data (the issue's
rule 2.5 + lam (N_j/N_i) d_ij is base 2.5, ratio 1); ``others`` reads third parties' reports.
A seller offers its model to i only if pi_ij >= c_j (its reported cost); the buyer pays pi_ij
+ ``fee`` per model bought, the seller receives pi_ij, the operator keeps the fees. The
selection is made AT THESE PRICES (the buyer's selection price is what it pays):

* ``exact``: each buyer buys a bundle maximising its reported g_i - sum of prices (Eq. 10
  with the posted prices), every subset enumerated;
* ``local``: the paper's greedy (Box 2 thresholds at the posted prices, failures skipped);
* ``all``: each buyer takes every model on offer (the FedAvg-like share-all, restricted to
  the sellers whose cost the price covers).

Why these can be truthful (docs/explanation-truthful-design.md): with a price that reads no
report of the trading pair, a seller's cost decides only whether it offers (a posted price:
Myerson's characterisation), and a buyer's own reports only its choice at fixed prices, which
the exact selection makes optimal for it. What a seller's reported N does is the remaining
question: buyers value its model by it.

**Reserve prices** (``kind = "reserve"``): a linear (or clipped) payment rule of
:mod:`sims.design.space` on the paper's local selection, with a seller reserve
(``seller_reserve``: sellers whose reported cost exceeds it do not sell) and a buyer reserve
(``buyer_reserve``: the selection price of every trade is at least it, so a buyer buys only
models whose marginal gain reaches it).

**Trade reduction** (``kind = "reduction"``): McAfee's double auction adapted to pairwise
trades. For each seller j, its candidate buyers (every client with K > 0) are ranked by
the stand-alone value v_ij = g_i(N_j) of j's model; the lowest-valued candidate is excluded
and sets the price q_j = ``share`` x its value; every other candidate buys j's model at q_j if
q_j >= c_j (the seller's reported cost), none if not. A seller with one candidate sells
nothing (the reduced trade). Buyers pay q_j to j: budget balanced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mechanisms import ipfl
from mechanisms.ipfl import over_arrays
from proofs.typespace import TypeSpace, as_type_space

from .errors import DesignInputError
from .evaluate import Mechanism
from .space import FAMILY_LOADERS, LinearSpace, check_weights, theta_vector

__all__ = ["POSTED_FEATURES", "SELECTIONS", "PostedSpace", "ReductionSpace", "ReserveSpace",
           "posted_mechanism", "posted_prices", "reduction_mechanism", "reserve_mechanism",
           "share_available", "truthful_posted_price", "two_client_bounds"]

SELECTIONS = ("exact", "local", "all")
POSTED_FEATURES = ("base", "distance", "ratio", "others", "fee")
POSTED_BOUNDS = {"base": (0.0, 5.0), "distance": (0.0, 2.0), "ratio": (0.0, 2.0),
                 "others": (0.0, 2.0), "fee": (0.0, 1.0)}


def posted_prices(market, D, weights: dict) -> np.ndarray:
    """pi_ij (..., m, m) of the posted-price family (module docstring) for ``weights``
    (base, distance, ratio, others; missing: 0), over arrays."""
    N = np.asarray(market.N, dtype=float)
    c = np.asarray(market.c, dtype=float)
    D = np.asarray(D, dtype=float)
    lam = np.asarray(market.lam, dtype=float)[..., None, None]
    pi = np.full(D.shape, float(weights.get("base", 0.0)))
    if weights.get("distance", 0.0):
        pi = pi + weights["distance"] * lam * D
    if weights.get("ratio", 0.0):
        pi = pi + weights["ratio"] * lam * (N[..., None, :] / N[..., :, None]) * D
    if weights.get("others", 0.0):
        m = N.shape[-1]
        sells = np.isfinite(c)
        cf = np.where(sells, c, 0.0)
        total, count = cf.sum(axis=-1)[..., None, None], sells.sum(axis=-1)[..., None, None]
        # leave i and j out (both rows and columns): what the pair itself reports never counts
        own = cf[..., :, None] + cf[..., None, :]
        n_own = sells[..., :, None].astype(int) + sells[..., None, :]
        eye = np.eye(m, dtype=bool)
        own = np.where(eye, cf[..., :, None], own)
        n_own = np.where(eye, sells[..., :, None].astype(int), n_own)
        rest = count - n_own
        cbar = np.where(rest > 0, (total - own) / np.maximum(rest, 1), 0.0)
        pi = pi + weights["others"] * cbar
    return pi


@over_arrays
def share_available(market, D, thresholds, prices) -> np.ndarray:
    """Selection ``all``: every client with a gain (K_i > 0) takes every model offered to it
    (a finite price), whatever it costs."""
    K = np.asarray(market.K)
    A = (K[..., :, None] > 0) & np.isfinite(np.asarray(prices))
    m = K.shape[-1]
    A[..., np.arange(m), np.arange(m)] = False
    return A


def posted_mechanism(weights: dict, selection: str = "exact", name: str = "posted",
                     fee: float | None = None, refuse_outside=None) -> Mechanism:
    """The posted-price mechanism with these weights (module docstring): its prices (the
    selection price pi_ij + fee where the seller offers, +inf where it does not), its
    selection and its payments (p_i = what i pays for its models, fees included, minus what
    it receives for its own). ``refuse_outside``: a type space (:mod:`proofs.typespace`);
    a client whose report lies outside its bounds neither sells nor buys (the mechanism's
    message space is the type space)."""
    w = check_weights("weights", weights, POSTED_FEATURES)
    fee = float(w.pop("fee", 0.0) if fee is None else fee)
    if selection not in SELECTIONS:
        raise DesignInputError("selection", f"is {selection!r}; choose from {SELECTIONS}")
    space = None if refuse_outside is None else as_type_space(refuse_outside)

    def offered(market, D):
        pi = posted_prices(market, D, w)
        c = np.asarray(market.c, dtype=float)
        ok = c[..., None, :] <= pi
        if space is not None:
            inside = space.contains(market.N, c, market.K, integer=False)
            ok = ok & inside[..., :, None] & inside[..., None, :]
        return pi, ok

    @over_arrays
    def prices(market, D):
        pi, ok = offered(market, D)
        return np.where(ok, pi + fee, np.inf)

    @over_arrays
    def payments(market, A, D):
        pi = posted_prices(market, D, w)  # A holds only offered trades (their prices finite)
        A = np.asarray(A, dtype=bool)
        received = np.where(A, pi, 0.0)
        if fee == 0.0:
            return received  # remittances: budget balanced (Eq. 13)
        return (received + np.where(A, fee, 0.0)).sum(axis=-1) - received.sum(axis=-2)

    for fn, part in ((prices, "prices"), (payments, "payments")):
        fn.__name__ = fn.__qualname__ = f"{name}_{part}"
    rule = share_available if selection == "all" else selection
    return Mechanism(name, rule, payments, prices)


def truthful_posted_price(type_space, clients: int | None = None) -> float:
    """The largest price at which the ``all`` selection is individually rational on
    ``type_space`` for every buyer type: a buyer that takes k models (each of at least
    N_lo data) gains at least g(k N_lo) at its least eager type (K = K_lo, N = N_hi, the sqrt
    gain), so k x price <= sqrt(K_lo) (1/sqrt(N_hi) - 1/sqrt(N_hi + k N_lo)) for every k up
    to ``clients`` - 1 (default the space's most clients); the bound falls with k (the gain
    is concave), so the largest k binds. docs/explanation-truthful-design.md: at this price
    the rule is truthful in N, c and K both ways, IR on the type space and balanced."""
    k = (type_space.clients[1] if clients is None else int(clients)) - 1
    if k < 1:
        raise DesignInputError("clients", f"is {clients!r}; a market has >= 2 clients")
    gain = ipfl.SqrtGain().value(k * type_space.N.low, type_space.K.low, type_space.N.high)
    return float(gain / k)


def two_client_bounds(type_space, points: int = 2001) -> tuple[float, float]:
    """(kappa, kappa2) of docs/explanation-truthful-design.md on ``type_space`` (the sqrt
    gain): in a two-client market, a rule truthful in the six directions, IR on the space and
    without deficit makes a single trade only if the seller's cost is at most kappa =
    sqrt(K_lo) h(N_hi, N_lo), and both trades only if the two costs add up to at most kappa2 =
    sqrt(K_lo) min over [N_lo, N_hi]^2 of h(N_1, N_2) + h(N_2, N_1) (a grid of ``points``
    per side), with h(N, x) = 1/sqrt(N) - 1/sqrt(N + x)."""
    gain = ipfl.SqrtGain()  # g(x; K, N) = sqrt(K) h(N, x): the least eager type has K_lo

    def g(n, x):
        return gain.value(x, type_space.K.low, n)

    lo, hi = float(type_space.N.low), float(type_space.N.high)
    grid = np.linspace(lo, hi, points)
    a, b = np.meshgrid(grid, grid)
    return float(g(hi, lo)), float((g(a, b) + g(b, a)).min())


def reserve_mechanism(base: Callable, seller_reserve: float, buyer_reserve: float,
                      name: str = "reserve") -> Mechanism:
    """``base`` (a payment rule over arrays, e.g. a linear or clipped rule) on the paper's
    local selection at the paper's prices, with reserve prices: a seller whose reported cost
    exceeds ``seller_reserve`` does not sell; every trade's selection price is at least
    ``buyer_reserve``."""
    rs, rb = float(seller_reserve), float(buyer_reserve)

    @over_arrays
    def prices(market, D):
        P = ipfl.paper_prices(market, D)
        c = np.asarray(market.c, dtype=float)[..., None, :]
        return np.where(c <= rs, np.maximum(P, rb), np.inf)

    prices.__name__ = prices.__qualname__ = f"{name}_prices"
    return Mechanism(name, "local", base, prices)


def _standalone(market) -> np.ndarray:
    """v_ij = g_i(N_j) (..., m, m): buyer i's reported gain from j's model alone."""
    N = np.asarray(market.N, dtype=float)
    K = np.asarray(market.K, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return market.gain.value(np.broadcast_to(N[..., None, :], N.shape + N.shape[-1:]),
                                 K[..., :, None], N[..., :, None])


def reduction_mechanism(share: float = 1.0, name: str = "reduction") -> Mechanism:
    """Trade reduction (module docstring) with price q_j = ``share`` x the excluded
    candidate's stand-alone value."""
    s = float(share)

    def plan(market):
        K, c = np.asarray(market.K, dtype=float), np.asarray(market.c, dtype=float)
        m = K.shape[-1]
        cand = (K[..., :, None] > 0) & np.isfinite(c)[..., None, :] & ~np.eye(m, dtype=bool)
        V = np.where(cand, _standalone(market), np.inf)
        low = np.argmin(V, axis=-2)  # the excluded candidate of each seller (first on ties)
        q = s * np.where(cand.any(axis=-2), V.min(axis=-2), 0.0)
        enough = cand.sum(axis=-2) >= 2
        excluded = np.arange(m)[:, None] == low[..., None, :]
        A = cand & ~excluded & (enough & (q >= c))[..., None, :]
        return A, q

    @over_arrays
    def rule(market, D, thresholds, prices):
        return plan(market)[0]

    @over_arrays
    def payments(market, A, D):
        _, q = plan(market)
        return np.where(np.asarray(A, dtype=bool), q[..., None, :], 0.0)

    for fn, part in ((rule, "rule"), (payments, "payments")):
        fn.__name__ = fn.__qualname__ = f"{name}_{part}"
    return Mechanism(name, rule, payments, "paper")


def _bounds(kind: str, names, bounds: dict, defaults: dict) -> dict:
    out = {}
    for n in names:
        lo, hi = bounds.get(n, defaults.get(n, (None, None)))
        if lo is None or not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            raise DesignInputError(f"bounds.{n}", f"{kind}: is {(lo, hi)!r}; need finite "
                                                  "lo <= hi")
        out[n] = (float(lo), float(hi))
    return out


@dataclass(frozen=True)
class PostedSpace:
    """The posted-price family (module docstring): ``features`` the weights searched (of
    base, distance, ratio, others, fee), ``bounds`` feature -> (lo, hi), ``selection``
    exact | local | all."""

    features: tuple = ("base", "distance")
    selection: str = "exact"
    bounds: dict = field(default_factory=dict)
    refuse_outside: TypeSpace | None = None
    kind = "posted"

    def __post_init__(self):
        if not self.features:
            raise DesignInputError("features", "is empty; name at least one of "
                                               f"{POSTED_FEATURES}")
        for f in self.features:
            if f not in POSTED_FEATURES:
                raise DesignInputError("features", f"unknown {f!r}; the posted family's are "
                                                   f"{POSTED_FEATURES}")
        if self.selection not in SELECTIONS:
            raise DesignInputError("selection", f"is {self.selection!r}; choose from "
                                                f"{SELECTIONS}")
        if self.refuse_outside is not None:
            object.__setattr__(self, "refuse_outside", as_type_space(self.refuse_outside))
        object.__setattr__(self, "bounds", _bounds("posted", self.features, self.bounds,
                                                   POSTED_BOUNDS))

    @property
    def names(self) -> tuple:
        return tuple(self.features)

    @property
    def lower(self) -> np.ndarray:
        return np.array([self.bounds[f][0] for f in self.features])

    @property
    def upper(self) -> np.ndarray:
        return np.array([self.bounds[f][1] for f in self.features])

    def point(self, **weights) -> np.ndarray:
        bad = set(weights) - set(self.features)
        if bad:
            raise DesignInputError("weights", f"{sorted(bad)} not in {self.features}")
        return np.array([float(weights.get(f, 0.0)) for f in self.features])

    def named_points(self) -> dict:
        pts = {"issue posted (2.5)": {"base": 2.5, "distance": 1.0},
               "posted at the top cost (5)": {"base": 5.0}}
        return {k: self.point(**v) for k, v in pts.items() if set(v) <= set(self.features)
                and np.all(self.point(**v) >= self.lower) and np.all(self.point(**v)
                                                                    <= self.upper)}

    def mechanism(self, theta, name: str = "posted") -> Mechanism:
        t = theta_vector(theta, len(self.names))
        return posted_mechanism(dict(zip(self.features, t.tolist(), strict=True)),
                                self.selection, name, refuse_outside=self.refuse_outside)

    def rule(self, theta, name: str = "posted") -> Mechanism:
        return self.mechanism(theta, name)

    def to_json(self) -> dict:
        out = {"kind": "posted", "features": list(self.features), "selection": self.selection,
               "bounds": {f: list(self.bounds[f]) for f in self.features}}
        if self.refuse_outside is not None:
            out["refuse_outside"] = self.refuse_outside.to_dict()
        return out


RESERVE_BOUNDS = {"seller_reserve": (0.0, 5.0), "buyer_reserve": (0.0, 5.0)}


@dataclass(frozen=True)
class ReserveSpace:
    """Reserve prices on a linear or clipped payment family (module docstring): the base
    family's weights, then ``seller_reserve`` and ``buyer_reserve``."""

    base: LinearSpace = field(default_factory=lambda: LinearSpace(
        ("marginal", "cost", "distance"), clip=True))
    bounds: dict = field(default_factory=dict)
    kind = "reserve"

    def __post_init__(self):
        if not isinstance(self.base, LinearSpace) or not self.base.balanced:
            raise DesignInputError("base", "reserve prices combine with a balanced linear "
                                           "or clipped family")
        object.__setattr__(self, "bounds", _bounds("reserve", RESERVE_BOUNDS, self.bounds,
                                                   RESERVE_BOUNDS))

    @property
    def names(self) -> tuple:
        return (*self.base.names, *RESERVE_BOUNDS)

    @property
    def lower(self) -> np.ndarray:
        return np.concatenate([self.base.lower, [self.bounds[k][0] for k in RESERVE_BOUNDS]])

    @property
    def upper(self) -> np.ndarray:
        return np.concatenate([self.base.upper, [self.bounds[k][1] for k in RESERVE_BOUNDS]])

    def named_points(self) -> dict:
        out = {}
        for name, p in self.base.named_points().items():
            full = np.concatenate([p, [self.bounds["seller_reserve"][1],
                                       self.bounds["buyer_reserve"][0]]])
            out[f"{name}, no reserve"] = full
        return out

    def mechanism(self, theta, name: str = "reserve") -> Mechanism:
        t = theta_vector(theta, len(self.names))
        k = len(self.base.names)
        return reserve_mechanism(self.base.rule(t[:k], name=f"{name}_payments"),
                                 t[k], t[k + 1], name)

    def rule(self, theta, name: str = "reserve") -> Mechanism:
        return self.mechanism(theta, name)

    def to_json(self) -> dict:
        return {"kind": "reserve", "base": self.base.to_json(),
                "bounds": {k: list(v) for k, v in self.bounds.items()}}


@dataclass(frozen=True)
class ReductionSpace:
    """Trade reduction (module docstring): one parameter, ``share`` (the price as a share of
    the excluded candidate's stand-alone value)."""

    bounds: dict = field(default_factory=lambda: {"share": (0.0, 1.0)})
    kind = "reduction"

    def __post_init__(self):
        object.__setattr__(self, "bounds", _bounds("reduction", ("share",), self.bounds,
                                                   {"share": (0.0, 1.0)}))

    names = ("share",)

    @property
    def lower(self) -> np.ndarray:
        return np.array([self.bounds["share"][0]])

    @property
    def upper(self) -> np.ndarray:
        return np.array([self.bounds["share"][1]])

    def named_points(self) -> dict:
        return {"McAfee (share 1)": np.array([1.0])} if self.upper[0] >= 1.0 else {}

    def mechanism(self, theta, name: str = "reduction") -> Mechanism:
        t = theta_vector(theta, 1)
        return reduction_mechanism(float(t[0]), name)

    def rule(self, theta, name: str = "reduction") -> Mechanism:
        return self.mechanism(theta, name)

    def to_json(self) -> dict:
        return {"kind": "reduction", "bounds": {"share": list(self.bounds["share"])}}


MECHANISM_KINDS = {"posted": PostedSpace, "reserve": ReserveSpace, "reduction": ReductionSpace}


def load_family(obj: dict):
    """A family from its JSON description (``to_json``)."""
    from .space import load_space

    kind = obj.get("kind")
    if kind == "posted":
        outside = obj.get("refuse_outside")
        return PostedSpace(tuple(obj.get("features", ("base", "distance"))),
                           obj.get("selection", "exact"),
                           {k: tuple(v) for k, v in obj.get("bounds", {}).items()},
                           None if outside is None else as_type_space(outside))
    if kind == "reserve":
        base = load_space(obj.get("base", {"kind": "linear"}))
        return ReserveSpace(base, {k: tuple(v) for k, v in obj.get("bounds", {}).items()})
    if kind == "reduction":
        return ReductionSpace({k: tuple(v) for k, v in obj.get("bounds", {}).items()})
    raise DesignInputError("space", f"needs kind one of {tuple(MECHANISM_KINDS)}, got "
                                    f"{kind!r}")


FAMILY_LOADERS.update(dict.fromkeys(MECHANISM_KINDS, load_family))  # space.load_space's


def _register():
    """The families on every frontier (:func:`sims.design.frontier.register_family`): a few
    named members each, measured beside the search's candidates."""
    from proofs.typespace import DEFAULT

    from .frontier import register_family

    register_family("posted prices", lambda: {
        "posted 4, exact": posted_mechanism({"base": 4.0}, "exact", "posted 4, exact"),
        "posted 2.5 + lam d, exact": posted_mechanism({"base": 2.5, "distance": 1.0}, "exact",
                                                      "posted 2.5 + lam d, exact"),
        "issue: 2.5 + lam (N_j/N_i) d, exact": posted_mechanism(
            {"base": 2.5, "ratio": 1.0}, "exact", "issue: 2.5 + lam (N_j/N_i) d, exact")})
    register_family("truthful share", lambda: {
        "share at pi*": posted_mechanism({"base": truthful_posted_price(DEFAULT)}, "all",
                                         "share at pi*", refuse_outside=DEFAULT)})
    register_family("trade reduction", lambda: {"McAfee (share 1)": reduction_mechanism(1.0)})
    register_family("reserve", lambda: {
        "midpoint, seller reserve 3": ReserveSpace(LinearSpace(("marginal", "cost"), clip=True))
        .mechanism([0.5, 0.5, 3.0, 0.0], "midpoint, seller reserve 3")})


_register()
