"""Rule spaces: parametric families of iPFL payment rules with the selection fixed.

**The linear family.** Every trade (buyer i bought seller j's model, a_ij = 1) carries a few
per-pair features computed from the REPORTED types:

==============  ==============================================================
``marginal``    G_i(a_i) - G_i(a_i - e_j): the buyer's marginal gain (Eq. 12)
``average``     G_i(a_i) / |a_i|: an equal split of the buyer's gain
``cost``        c_j: the seller's sharing cost
``distance``    -lam (N_j/N_i) d_ij: the model-difference term of Eqs. 10 and 12
``fee``         1: a flat amount per trade (utility units)
==============  ==============================================================

The buyer pays ``w_buyer . f_ij`` per trade and the seller receives ``w_seller . f_ij``; the
operator covers (or keeps) the difference. Client i's payment (what it hands the operator) is

    p_i = sum_j a_ij (w_buyer . f_ij) - sum_k a_ki (w_seller . f_ki)

With ``balanced=True`` the two weight vectors are one (``w_buyer = w_seller``): the rule is a
remittance rule r_ij = w . f_ij, budget balanced by construction (Eq. 13).

**The clipped family** (``clip=True``, balanced): r_ij = min(max(w . f_ij, c_j),
marginal_ij), each remittance clipped to [the seller's cost, the buyer's marginal gain], on
the reported types. It is individually rational and budget balanced BY CONSTRUCTION, not
by fitting: a seller receives at least c_j per buyer (its sharing cost), and a buyer pays at
most sum_j marginal_ij <= G_i(a_i) (the gain is concave with g(0) = 0, so the marginals of
the bought models add up to at most the whole gain); under truthful reports U_i >= 0. The
interval is not empty on a trade the paper's local rule makes (Eq. 11: marginal_ij >= P_ij
>= c_j); where a selection of your own makes it empty the remittance is the marginal. The
paper's rule (its remittance lies in the interval) and the cost rule are points of it.

Points of the family (checked against the shipped rules by tests/test_design.py):

* the paper's rule (Eq. 12): marginal 1, distance 1;
* cost-plus remittances at the paper's prices: cost 1.25;
* no payments (``"none"``): all weights 0;
* the seller's cost paid (``"cost"``: cost 1, cost-plus with markup 0) and the Eq. 10 price
  paid (``"price"``: cost 1, distance -1: the buyer pays c_j + lam (N_j/N_i) d_ij, all of it
  to the seller);
* "cost paid, marginal received" (unbalanced): the buyer pays the seller's cost c_j, the
  seller receives Eq. 12's remittance; the operator pays the difference (a deficit wherever
  the marginal exceeds the price, as Eq. 11 makes it).

The reference rules with a selection of their own (VCG on the exact selection, the Shapley
split, cost-plus with its own prices, share-all) are evaluated directly beside the family
(:data:`sims.design.evaluate.REFERENCES`).

**Your own space.** ``UserSpace("mymod:make_rule", bounds=...)``: ``make_rule(theta)`` takes a
parameter vector and returns a payment rule written over arrays (marked
:func:`mechanisms.ipfl.over_arrays`), which the design search evaluates through the same bulk
clearing as the checker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mechanisms import ipfl
from mechanisms.contain import call_rule

from .errors import DesignInputError
from .evaluate import over_arrays

__all__ = [
    "FEATURES",
    "LinearSpace",
    "UserSpace",
    "check_weights",
    "linear_rule",
    "load_rule",
    "load_space",
    "save_rule",
    "space_modules",
    "theta_vector",
]

FEATURES = ("marginal", "average", "cost", "distance", "fee")
DEFAULT_BOUNDS = {"marginal": (0.0, 1.5), "average": (0.0, 1.5), "cost": (0.0, 2.0),
                   "distance": (-1.5, 1.5), "fee": (0.0, 0.0)}


def pair_features(market, A, D, keys=FEATURES) -> dict[str, np.ndarray]:
    """The per-pair features ``keys`` (..., m, m) of the trades in ``A`` (0 off the trades),
    from the reported types; ``market`` is an :class:`mechanisms.ipfl.Market` or a batch of
    markets over arrays (leading dimensions)."""
    A = np.asarray(A, dtype=bool)
    N, c, K = (np.asarray(x, dtype=float) for x in (market.N, market.c, market.K))
    D = np.asarray(D, dtype=float)
    out = {}
    if "marginal" in keys or "average" in keys:
        n = np.einsum("...ij,...j->...i", A.astype(float), N)  # data bought by each buyer
        g = market.gain.value
        with np.errstate(invalid="ignore", divide="ignore"):
            total = g(n, K, N)
            if "marginal" in keys:
                rest = np.where(A, n[..., :, None] - N[..., None, :], 0.0)
                out["marginal"] = total[..., :, None] - g(rest, K[..., :, None],
                                                          N[..., :, None])
        if "average" in keys:
            k = A.sum(axis=-1)
            out["average"] = np.where(k > 0, total / np.maximum(k, 1), 0.0)[..., :, None]
    if "cost" in keys:
        out["cost"] = np.where(np.isfinite(c), c, 0.0)[..., None, :]
    if "distance" in keys:
        lam = np.asarray(market.lam, dtype=float)[..., None, None]
        out["distance"] = -lam * (N[..., None, :] / N[..., :, None]) * D
    if "fee" in keys:
        out["fee"] = np.ones(A.shape)
    return {key: np.where(A, np.broadcast_to(out[key], A.shape), 0.0) for key in keys}


def linear_rule(buyer: dict[str, float], seller: dict[str, float] | None = None,
                name: str = "linear", *, clip: bool = False) -> Callable:
    """The payment rule of the linear family with these weights (``seller`` None: balanced,
    the same weights, returned as remittances). Written over arrays, so the checker and the
    design search clear it in bulk; called on one market it returns (m, m) remittances
    (balanced) or (m,) payments. ``clip`` (balanced only): each remittance clipped to
    [c_j, marginal_ij] (module docstring: IR and budget balance by construction).

    >>> paper = linear_rule({"marginal": 1.0, "distance": 1.0})
    >>> mk = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 0.0], K=[5e4, 3e4, 0.0], lam=2.0)
    >>> D = np.array([[0, .1, .3], [.1, 0, .2], [.3, .2, 0]])
    >>> a = ipfl.clear(mk, D, "local", payments=paper).payments
    >>> b = ipfl.clear(mk, D, "local", payments="paper").payments
    >>> bool(np.allclose(a, b, rtol=1e-12, atol=1e-12))
    True
    """
    wb = check_weights("buyer", buyer)
    ws = None if seller is None else check_weights("seller", seller)
    if clip and ws is not None:
        raise DesignInputError("clip", "clips remittances: balanced rules only (seller None)")

    used = tuple(k for k in FEATURES if wb.get(k, 0.0) != 0.0
                 or (ws is not None and ws.get(k, 0.0) != 0.0)
                 or (clip and k in ("marginal", "cost")))

    def payments(market, A, D):
        f = pair_features(market, A, D, used)
        out_b = sum(w * f[k] for k, w in wb.items() if w != 0.0)
        if clip:  # [c_j, marginal_ij] on the trades (0 off them: both bounds are 0 there)
            return np.minimum(np.maximum(out_b + np.zeros(np.shape(A)), f["cost"]),
                              f["marginal"])
        if ws is None:
            return out_b + np.zeros(np.shape(A))
        out_s = sum(w * f[k] for k, w in ws.items() if w != 0.0)
        out_b = out_b + np.zeros(np.shape(A))
        out_s = out_s + np.zeros(np.shape(A))
        return out_b.sum(axis=-1) - out_s.sum(axis=-2)

    payments.__name__ = payments.__qualname__ = name
    payments.weights = {"buyer": dict(wb), "seller": dict(ws if ws is not None else wb),
                        "balanced": ws is None, "clip": bool(clip)}
    return over_arrays(payments)


def check_weights(side: str, w, allowed=FEATURES) -> dict[str, float]:
    """``w`` (name -> number) as finite floats, every name in ``allowed``; a
    DesignInputError naming ``side.name`` otherwise."""
    if not isinstance(w, dict):
        raise DesignInputError(side, f"weights must be a dict name -> number, got "
                                     f"{type(w).__name__}")
    out = {}
    for key, value in w.items():
        if key not in allowed:
            raise DesignInputError(f"{side}.{key}", f"unknown; choose from {tuple(allowed)}")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise DesignInputError(f"{side}.{key}", f"is {value!r}; must be a number") from None
        if not np.isfinite(x):
            raise DesignInputError(f"{side}.{key}", f"is {x}; must be finite")
        out[key] = x
    return out


@dataclass(frozen=True)
class LinearSpace:
    """The linear family (module docstring). ``features``: the ones the search may weight;
    ``bounds``: feature -> (lo, hi) per weight; ``balanced``: one weight vector (budget
    balanced by construction) or two (buyer's and seller's; the operator covers the gap)."""

    features: tuple[str, ...] = ("marginal", "average", "cost", "distance")
    balanced: bool = True
    bounds: dict = field(default_factory=lambda: dict(DEFAULT_BOUNDS))
    clip: bool = False
    kind = "linear"

    def __post_init__(self):
        if self.clip and not self.balanced:
            raise DesignInputError("clip", "clips remittances: needs balanced=True")
        if not self.features:
            raise DesignInputError("features", "is empty; name at least one feature")
        for f in self.features:
            if f not in FEATURES:
                raise DesignInputError("features", f"unknown {f!r}; choose from {FEATURES}")
            lo, hi = self.bounds.get(f, (None, None))
            if lo is None or not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise DesignInputError(f"bounds.{f}", f"is {(lo, hi)!r}; need finite lo <= hi")

    @property
    def names(self) -> tuple[str, ...]:
        if self.balanced:
            return tuple(self.features)
        return (*(f"buyer.{f}" for f in self.features),
                *(f"seller.{f}" for f in self.features))

    @property
    def lower(self) -> np.ndarray:
        lo = [self.bounds[f][0] for f in self.features]
        return np.array(lo if self.balanced else lo * 2, dtype=float)

    @property
    def upper(self) -> np.ndarray:
        hi = [self.bounds[f][1] for f in self.features]
        return np.array(hi if self.balanced else hi * 2, dtype=float)

    def rule(self, theta, name: str = "linear") -> Callable:
        theta = theta_vector(theta, len(self.names))
        k = len(self.features)
        buyer = dict(zip(self.features, theta[:k].tolist(), strict=True))
        seller = None if self.balanced else dict(zip(self.features, theta[k:].tolist(),
                                                     strict=True))
        return linear_rule(buyer, seller, name, clip=self.clip)

    def point(self, **weights: float) -> np.ndarray:
        """The parameter vector of named weights (``buyer``/``seller`` dicts when unbalanced);
        features left out are 0."""
        if self.balanced:
            bad = set(weights) - set(self.features)
            if bad:
                raise DesignInputError("weights", f"{sorted(bad)} not in {self.features}")
            return np.array([float(weights.get(f, 0.0)) for f in self.features])
        b, s = weights.get("buyer", {}), weights.get("seller", {})
        return np.array([float(b.get(f, 0.0)) for f in self.features]
                        + [float(s.get(f, 0.0)) for f in self.features])

    def named_points(self) -> dict[str, np.ndarray]:
        """The rules of the module docstring that lie in this space (within its features and
        bounds): the search starts from them."""
        pts = {"paper": {"marginal": 1.0, "distance": 1.0}, "cost-plus": {"cost": 1.25},
               "cost": {"cost": 1.0}, "price": {"cost": 1.0, "distance": -1.0}, "none": {}}
        unbalanced = {"cost paid, marginal received": {
            "buyer": {"cost": 1.0}, "seller": {"marginal": 1.0, "distance": 1.0}}}
        out = {}
        for name, w in pts.items():
            if set(w) <= set(self.features):
                out[name] = self.point(**w) if self.balanced else \
                    self.point(buyer=w, seller=w)
        if not self.balanced:
            for name, w in unbalanced.items():
                if set(w["buyer"]) | set(w["seller"]) <= set(self.features):
                    out[name] = self.point(**w)
        return {k: v for k, v in out.items()
                if np.all(v >= self.lower - 1e-12) and np.all(v <= self.upper + 1e-12)}

    def to_json(self) -> dict:
        return {"kind": "linear", "features": list(self.features), "balanced": self.balanced,
                "bounds": {f: list(self.bounds[f]) for f in self.features},
                **({"clip": True} if self.clip else {})}


@dataclass(frozen=True)
class UserSpace:
    """A space of your own: ``spec`` is "module:function", ``function(theta) -> payment rule``
    (marked :func:`mechanisms.ipfl.over_arrays`); ``bounds`` one (lo, hi) per parameter."""

    spec: str
    bounds: tuple = ()
    names_: tuple = ()
    kind = "user"

    def __post_init__(self):
        self.factory  # noqa: B018 -- import now: a typo fails here
        if not self.bounds:
            raise DesignInputError("bounds", f"{self.spec}: give one (lo, hi) per parameter")
        for k, (lo, hi) in enumerate(self.bounds):
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise DesignInputError(f"bounds[{k}]", f"is {(lo, hi)!r}; need finite lo <= hi")

    @property
    def factory(self) -> Callable:
        return ipfl.load_callable(self.spec, "space")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.names_) or tuple(f"theta[{k}]" for k in range(len(self.bounds)))

    @property
    def lower(self) -> np.ndarray:
        return np.array([b[0] for b in self.bounds], dtype=float)

    @property
    def upper(self) -> np.ndarray:
        return np.array([b[1] for b in self.bounds], dtype=float)

    def named_points(self) -> dict[str, np.ndarray]:
        return {}

    def rule(self, theta, name: str = "user") -> Callable:
        theta = theta_vector(theta, len(self.bounds))
        fn = call_rule("space", self.spec, self.factory, theta)  # contained, on a copy
        if not callable(fn) or not getattr(fn, "over_arrays", False):
            raise DesignInputError("space", f"{self.spec} must return a payment rule marked "
                                            "over_arrays (mechanisms.ipfl.over_arrays)")
        return fn

    def to_json(self) -> dict:
        return {"kind": "user", "spec": self.spec, "bounds": [list(b) for b in self.bounds],
                "names": list(self.names)}


def theta_vector(theta, n: int) -> np.ndarray:
    """``theta`` as ``n`` finite floats (a DesignInputError naming theta otherwise)."""
    t = np.array(theta, dtype=float).ravel()
    if t.size != n:
        raise DesignInputError("theta", f"has {t.size} entries; the space has {n}")
    if not np.isfinite(t).all():
        raise DesignInputError("theta", f"is {t.tolist()}; must be finite")
    return t


SPACE_KINDS = ("linear", "user", "posted", "reserve", "reduction")
# The families that change who trades (sims.design.families, imported with the package)
# register their loaders here, kind -> load(obj): this module need not import them.
FAMILY_LOADERS: dict[str, Callable] = {}


def load_space(obj):
    """A space from its JSON description (:meth:`LinearSpace.to_json`; the families of
    :mod:`sims.design.families`: posted, reserve, reduction)."""
    if not isinstance(obj, dict) or obj.get("kind") not in SPACE_KINDS:
        raise DesignInputError("space", f"needs kind one of {SPACE_KINDS}, got {obj!r:.80}")
    if obj["kind"] not in ("linear", "user"):
        return FAMILY_LOADERS[obj["kind"]](obj)
    if obj["kind"] == "linear":
        return LinearSpace(tuple(obj.get("features", FEATURES[:4])),
                           bool(obj.get("balanced", True)),
                           {k: tuple(v) for k, v in obj.get("bounds", DEFAULT_BOUNDS).items()},
                           bool(obj.get("clip", False)))
    return UserSpace(obj["spec"], tuple(tuple(b) for b in obj["bounds"]),
                     tuple(obj.get("names", ())))


def save_rule(path, space, theta, *, name: str, extra: dict | None = None) -> Path:
    """Write a designed rule as a parameter file (JSON) and a one-line module beside it, so
    ``"<stem>:payments"`` names it anywhere a rule is taken ("module:function": ipfl.clear,
    sweeps, the checker) once the folder is on ``sys.path``; :func:`load_rule` reads the
    JSON directly."""
    path = Path(path)
    if path.suffix != ".json":
        raise DesignInputError("path", f"{path}: a rule file ends in .json")
    if not path.stem.isidentifier():
        raise DesignInputError("path", f"{path.stem!r} must be a Python identifier (it is "
                                       "also the module name)")
    theta = theta_vector(theta, len(space.names))
    doc = {"name": name, "space": space.to_json(),
           "theta": dict(zip(space.names, theta.tolist(), strict=True)), **(extra or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    from ..results import write_atomic  # whole files or none (a full disk is one line)

    text = json.dumps(doc, indent=2, default=float) + "\n"
    write_atomic(path, lambda tmp: tmp.write_text(text), "path")
    # the space's own modules, named in code: importing this module is trusting them
    trust = space_modules(doc["space"])
    load = ("load_rule(Path(__file__).with_suffix('.json')"
            + (f", rules_from={trust!r})" if trust else ")"))
    if space.kind in ("linear", "user"):
        module = (f'"""The designed payment rule {name!r} (parameters in {path.name})."""\n'
                  "from pathlib import Path\n\nfrom sims.design import load_rule\n\n"
                  f"payments = {load}\n")
    else:  # a mechanism: selection, prices and payments
        module = (f'"""The designed mechanism {name!r} (parameters in {path.name}):\n'
                  'its selection rule, prices and payments."""\n'
                  "from pathlib import Path\n\nfrom sims.design import load_rule\n\n"
                  f"mechanism = {load}\n"
                  "rule, prices, payments = mechanism.rule, mechanism.prices, "
                  "mechanism.payments\n")
    write_atomic(path.with_suffix(".py"), lambda tmp: tmp.write_text(module), "path")
    return path


def space_modules(obj) -> list[str]:
    """The modules the spaces of the user's own inside a space's JSON (:meth:`to_json`, a
    family's base included) name: what a rule file of that space asks to import.

    >>> space_modules({"kind": "posted", "base": {"kind": "user", "spec": "mine.sp:make"}})
    ['mine.sp']
    """
    from mechanisms.lookup import named_modules

    specs: list[str] = []

    def walk(o):
        if isinstance(o, dict):
            if o.get("kind") == "user" and isinstance(o.get("spec"), str):
                specs.append(o["spec"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(obj)
    return named_modules(specs)


def load_rule(path, rules_from=()):
    """What :func:`save_rule` saved, named as saved: the payment rule (over arrays) of a
    linear or user space, the :class:`sims.design.evaluate.Mechanism` (selection, prices,
    payments) of a family that changes who trades (:mod:`sims.design.families`).

    A rule file is data: the ``"module:function"`` of a space of your own in it is imported
    only if you trust its module, naming it in ``rules_from`` (``--rules-from MODULE`` on the
    command line); any other is refused unimported, in one line naming ``space``
    (:class:`mechanisms.lookup.UntrustedName`; :func:`mechanisms.lookup.names_from_data`,
    the guard of every name read from data). The module :func:`save_rule` writes beside the
    file names the space's module itself (it is code, which you import by choice)."""
    from mechanisms.lookup import names_from_data

    path = Path(path)
    with names_from_data(f"the rule file {path}", rules_from):
        return _load_rule(path)


def _load_rule(path: Path):
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DesignInputError("rule_file", f"{path}: {exc}") from exc
    if not isinstance(doc, dict) or not {"name", "space", "theta"} <= set(doc):
        raise DesignInputError("rule_file", f"{path}: needs keys name, space, theta")
    space = load_space(doc["space"])
    theta = doc["theta"]
    missing = [n for n in space.names if n not in theta]
    if missing:
        raise DesignInputError("theta", f"{path}: missing {missing}")
    rule = space.rule([theta[n] for n in space.names], name=str(doc["name"]))
    # how a counterexample's code imports it: the module save_rule wrote beside the file
    # (its folder on sys.path), else nothing importable (never a name the module lacks)
    parts = {"payments": rule} if callable(rule) else \
        {k: getattr(rule, k) for k in ("rule", "prices", "payments")
         if callable(getattr(rule, k))}
    for attr, fn in parts.items():
        if path.with_suffix(".py").is_file() and path.stem.isidentifier():
            fn.__module__, fn.__qualname__ = path.stem, attr
        else:
            fn.__qualname__ = f"load_rule.<locals>.{fn.__name__}"
    return rule


