"""The batch engine: markets and games drawn in bulk with numpy, cleared and evaluated
vectorised across the batch, violations shrunk to a minimal instance.

``proofs.check(subject, prop, engine="batch")`` lands here.

**Draws.** Every instance is built from a vector of uniform numbers in [0, 1], one record per
client (so a client can be deleted while shrinking), one per pair of clients (distances) and a
few globals. The transform maps them onto exactly the ranges and constraints of the Hypothesis
strategies in :mod:`proofs.strategies` (same supports, same built-in preconditions, same role
mix: trader 1/2, pure buyer 1/4, pure seller 1/4); each coordinate is set to its simplest value
(the lower end: N = 20, c = 0, K = 1e3, lam = 0, d = 0, v = 0...) with probability
:data:`ATOM` -- Hypothesis likewise favours the ends of its ranges, where counterexamples
tend to live. The documented distribution, per property, is :data:`IPFL_SPECS` /
:func:`cpl_sampler`.

**Evaluation.** Every property is one check written over a batch (:mod:`proofs.ipfl_properties`,
:mod:`proofs.cpl_properties`); for a subject whose code runs in bulk (iPFL rules all built-in
or marked :func:`mechanisms.ipfl.over_arrays`, cleared by :func:`mechanisms.ipfl.clear_batch`;
the CPL bisection solver and built-in posted prices) the property's ``batch`` hook evaluates
the whole batch at once with it, the same check and the same mechanism code that one
instance runs (there through the subject's own ``settle`` / ``solve``), so the evidence is
about the code users run. Every other (subject, property) pair is evaluated instance by
instance on the same numpy draws. This module holds no equation.

**Shrinking.** The first violating instance is re-checked with the scalar property (the
subject itself), then shrunk: delete clients, then set each coordinate to a simpler value,
keeping every change after which the property still fails on an effective instance.
Preconditions are built into the transform, so every shrunk instance still meets them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mechanisms import cpl, ipfl
from mechanisms.contain import Limit, TimeUp, must_pass, rule_timed_out
from mechanisms.errors import MAX_BYTES

from . import ipfl_properties as P
from .core import (
    DRAW_FACTOR,
    VACUITY_PROBE,
    CheckerInputError,
    Counterexample,
    Report,
    SubjectError,
    Tally,
    Throttle,
    evaluate_instance,
    evaluate_once,
    is_builtin,
    probed_vacuous,
)
from .core import subject_name as _name
from .core import verdict as verdict_of
from .ipfl_properties import (
    BULK_PAYMENTS,
    BULK_PRICES,
    BULK_RULES,
    GAINS,
    IpflCase,
    batch_rule,
    misreports_batch,
    misreports_joint_batch,
    settle_batch,
)
from .strategies import CPL_FLOOR_RTOL, MAX_CLIENTS, CplCase, edge_budgets
from .typespace import DEFAULT as DEFAULT_SPACE
from .typespace import TypeSpace

__all__ = [
    "ATOM",
    "BULK_PAYMENTS",
    "BULK_PRICES",
    "BULK_RULES",
    "CHEAP_DATA",
    "CHEAP_DATA_SHARE",
    "GAINS",
    "IPFL_SPECS",
    "LARGE_LIE",
    "SIZE_POWER",
    "IpflCase",
    "MarketArrays",
    "batch_rule",
    "check_batch",
    "cpl_sampler",
    "evaluate_in_bulk",
    "ipfl_sampler",
    "misreports_batch",
    "misreports_joint_batch",
    "over_arrays",
    "settle_batch",
    "vectorised",
]

ATOM = 0.1  # probability that a coordinate takes its simplest value
# iPFL markets of m = 2..12 clients are drawn with P(m) ~ m^-3: every size is drawn (about
# 11 % of the markets have 5 or more clients, 0.3 % have 12), small ones most often. Clearing
# a market costs ~m^2 (thresholds, the greedy scan), a regret example clears ~30 of them and
# the exact selection enumerates more: drawn uniformly over 2..12, rows took several times
# the time of the former 2-4 (regret) or 2-7 clients (on the loaded shared host: local/thm2
# 29.7 s for 10^4 examples, 2-4 clients about 10 s; exact/individual_rationality 30.2 s vs
# 1.9 s); with m^-3 a market costs about what one of uniform 2..4 clients did.
SIZE_POWER = 3.0
CHUNK = 4096  # instances drawn and evaluated per step


# ----------------------------------------------------------------------------- draws


@dataclass
class Draws:
    """Uniform parameters of ``B`` instances with ``m`` clients each.

    client (B, m, F) per-client records; pair (B, m, m) per-pair; glob (B, G) globals."""

    client: np.ndarray
    pair: np.ndarray
    glob: np.ndarray
    gain: str = "sqrt"  # iPFL: the gain kind of every instance (a key of GAINS)
    mode: str = "exact"  # iPFL: the threshold mode of every instance
    stratum: str = ""  # iPFL: the stratum of every instance ("": the plain draw; STRATA)

    @property
    def size(self) -> int:
        return self.client.shape[0]

    @property
    def m(self) -> int:
        return self.client.shape[1]

    def one(self, k: int) -> Draws:
        return self.part(slice(k, k + 1))

    def part(self, rows) -> Draws:
        """The instances ``rows`` (a slice or index array) of the batch."""
        return Draws(self.client[rows], self.pair[rows], self.glob[rows], self.gain,
                     self.mode, self.stratum)

    def without(self, i: int) -> Draws:
        keep = np.delete(np.arange(self.m), i)
        return Draws(self.client[:, keep], self.pair[:, keep][:, :, keep], self.glob,
                     self.gain, self.mode, self.stratum)


def _uniform(rng, shape, atom: float = ATOM):
    u = rng.random(shape)
    return np.where(rng.random(shape) < atom, 0.0, u)


class Sampler:
    """Draws -> instances for one property; ``simple`` lists, per field, the simpler values
    the shrinker tries."""

    n_client = 0
    n_glob = 0
    min_m = 2
    max_m = 7
    size_power = 0.0  # P(m clients) proportional to m ** -size_power (0: uniform)
    atom = ATOM  # probability that a coordinate takes its simplest value
    tiers: tuple = ()  # ((m, probability), ...): size tiers beyond min_m..max_m

    def sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """(client counts, their probabilities): min_m..max_m, P(m) ~ m ** -size_power."""
        ms = np.arange(self.min_m, self.max_m + 1)
        w = ms.astype(float) ** -self.size_power
        return ms, w / w.sum()

    def draw(self, rng, size: int) -> list[Draws]:
        """``size`` instances grouped by client count (in draw order within a group). With
        ``tiers`` ((m, p), ...), an instance has m clients with probability p each (the
        size tiers: markets far larger than the law's, where size-dependent branches live),
        else a size of the law."""
        if self.size_power:
            sizes, p = self.sizes()
            ms = rng.choice(sizes, size=size, p=p)
        else:
            ms = rng.integers(self.min_m, self.max_m + 1, size=size)
        if self.tiers:  # one more uniform per instance, only where tiers are drawn
            u = rng.random(size)
            edge = 0.0
            for m, p in self.tiers:
                ms = np.where((u >= edge) & (u < edge + p), m, ms)
                edge += p
        out = []
        for m in np.unique(ms).tolist():
            k = int((ms == m).sum())
            a = self.atom
            out.append(Draws(_uniform(rng, (k, m, self.n_client), a),
                             _uniform(rng, (k, m, m), a), _uniform(rng, (k, self.n_glob), a)))
        return out

    def cases(self, d: Draws) -> list:
        raise NotImplementedError

    def bulk_input(self, d: Draws):
        """What a property's ``batch`` hook evaluates: the whole batch ``d`` as arrays."""
        raise NotImplementedError

    def simple(self) -> dict:
        return {}


@dataclass(frozen=True)
class IpflSpec:
    """The preconditions of one iPFL property's strategy (mirrors ipfl_properties._cases)."""

    negative: bool = False
    positive: bool = False
    lam_min: float = 0.0
    liar: str | None = None  # None | "who" | "over" | "any"
    perm: bool = False
    ties: bool = False
    max_m: int = MAX_CLIENTS
    min_m: int = 2
    size_power: float = SIZE_POWER  # P(m clients) ~ m ** -size_power (Sampler.sizes)
    gains: tuple = ("sqrt",)  # the gain kinds drawn (keys of GAINS), equally likely
    modes: tuple = ("exact",)  # the threshold modes drawn (ipfl.MODES), equally likely
    tiers: tuple = ()  # ((m, probability), ...): size tiers (Sampler.draw; default space)
    cheap: tuple = ()  # sizes (of the tiers) whose markets are drawn with data nearly free
    gain_weights: tuple = ()  # the probability of each of ``gains`` (default: equal)
    strata: tuple = ()  # ((name, probability), ...): strata of STRATA; the rest: plain
    cheap_data: float = 0.0  # the probability of a cheap-data market (CHEAP_DATA; sqrt gain)


# client fields: N, c, K, role, liar key, perm key; globals: lam, symmetric, factor kind, factor
_N, _C, _K, _ROLE, _WHO, _PERM = range(6)
_LAM, _SYM, _FKIND, _FVAL = range(4)
_OVER = (2.0, 5.0, 10.0)
_ANY = (0.1, 0.5, 2.0, 5.0, 10.0)


class IpflSampler(Sampler):
    """The markets of one iPFL property (its :class:`IpflSpec`) on a type space
    (:class:`proofs.typespace.TypeSpace`; default the checker's distribution): the space sets
    the ranges and laws of N, c, K, lam and D, the role mix, the market sizes and the atoms;
    the property's spec keeps what it draws on purpose (negative or positive distances, lam
    >= lam_min, its own size range when narrower)."""

    n_client = 6
    n_glob = 4

    def __init__(self, spec: IpflSpec, type_space: TypeSpace | None = None,
                 search: dict | None = None):
        ts = DEFAULT_SPACE if type_space is None else type_space
        self.spec, self.type_space, self.search = spec, ts, search
        lo, hi = ts.clients
        self.min_m = max(spec.min_m, lo)
        self.max_m = hi if spec.max_m == MAX_CLIENTS else min(spec.max_m, hi)
        if self.min_m > self.max_m:
            raise CheckerInputError("type_space", f"{ts.name!r} draws {lo}-{hi} clients; "
                                                  f"this property needs {spec.min_m}-"
                                                  f"{spec.max_m}")
        self.size_power = ts.size_power if spec.size_power == SIZE_POWER else spec.size_power
        self.atom = ts.atom
        # the size tiers extend the checker's own distribution only (a type space of your
        # own draws exactly its client range)
        self.tiers = tuple(spec.tiers) if ts == DEFAULT_SPACE else ()

    def draw(self, rng, size: int) -> list[Draws]:
        """:meth:`Sampler.draw`, each group split by the gain kind and threshold mode drawn
        for each instance (one more uniform per instance each, only where the spec draws
        more than one; the gain kinds with ``spec.gain_weights`` where given, else equally
        likely) and by the stratum (one more uniform per instance, only where the spec
        has ``strata``: stratum k with its probability, the plain draw with the rest)."""
        groups = super().draw(rng, size)
        kinds, modes, strata = self.spec.gains, self.spec.modes, self.spec.strata
        if len(kinds) == 1 and len(modes) == 1 and not strata:
            for d in groups:
                d.gain, d.mode = kinds[0], modes[0]
            return groups
        gw = np.cumsum(self.spec.gain_weights or np.full(len(kinds), 1.0 / len(kinds)))
        sw = np.cumsum([p for _, p in strata])
        names = ["", *(name for name, _ in strata)]
        out = []
        for d in groups:
            u = rng.random((d.size, 3 if strata else 2))
            g = np.minimum(np.searchsorted(gw, u[:, 0], side="right"), len(kinds) - 1) \
                if self.spec.gain_weights else \
                np.minimum((u[:, 0] * len(kinds)).astype(int), len(kinds) - 1)
            t = np.minimum((u[:, 1] * len(modes)).astype(int), len(modes) - 1)
            # stratum k + 1 where u falls in its share of [0, 1), 0 (plain) beyond them
            z = (np.searchsorted(sw, u[:, 2], side="right") + 1) % (len(strata) + 1) \
                if strata else np.zeros(d.size, int)
            for gi in range(len(kinds)):
                for ti in range(len(modes)):
                    for zi in range(len(names)):
                        rows = np.flatnonzero((g == gi) & (t == ti) & (z == zi))
                        if rows.size:
                            part = d.part(rows)
                            part.gain, part.mode, part.stratum = kinds[gi], modes[ti], \
                                names[zi]
                            out.append(part)
        return out

    def arrays(self, d: Draws) -> dict:
        """The instances of ``d`` as arrays (N, c, K (B, m); lam (B,); D (B, m, m); client
        (B,) or None; factor (B,) or None; perm (B, m) or None)."""
        sp, ts, u, g = self.spec, self.type_space, d.client, d.glob
        m = d.m
        if sp.perm and not sp.ties:  # distinct N: residue i mod m for client i
            n_lo, n_hi = int(ts.N.low), int(ts.N.high)
            span = (n_hi - n_lo - m) // m
            if not ts.N.integer or span < 0:
                raise CheckerInputError("type_space", f"{ts.name!r}: the permutation "
                                                      "properties draw distinct integer N "
                                                      f"({m} clients need {m} values)")
            step = np.floor(u[..., _N] * (span + 1))
            N = n_lo + np.minimum(step, span) * m + np.arange(m)
        else:
            N = ts.N.value(u[..., _N])
        c = ts.c.value(u[..., _C])
        K = ts.K.value(u[..., _K])
        role = ts.role(u[..., _ROLE])
        if m in sp.cheap and ts == DEFAULT_SPACE:  # the cheap tier: c and lam x CHEAP
            c = c * CHEAP
        cheap = None
        if sp.cheap_data > 0 and d.gain == "sqrt":  # CHEAP_DATA: c and lam x 10^u
            # w: the symmetry uniform's second bit onward (2 u_sym mod 1, uniform, independent
            # of u_sym < 1/2); w >= 1 - p picks the market (never the simplest draw, w = 0),
            # (w - 1 + p) / p (uniform) its exponent
            w = (2.0 * g[:, _SYM]) % 1.0
            lo_e, hi_e = CHEAP_DATA
            at = (w - (1.0 - sp.cheap_data)) / sp.cheap_data
            cheap = np.where(at >= 0, 10.0 ** (lo_e + at * (hi_e - lo_e)), 1.0)
            c = c * cheap[:, None]
        c = np.where(role == 1, np.inf, c)  # pure buyer
        K = np.where(role == 2, 0.0, K)  # pure seller
        if ts.lam.low < sp.lam_min:  # drawn >= lam_min on purpose: uniform on [lam_min, high]
            lam = sp.lam_min + g[:, _LAM] * (max(ts.lam.high, sp.lam_min) - sp.lam_min)
        else:
            lam = ts.lam.value(g[:, _LAM])
        if m in sp.cheap and ts == DEFAULT_SPACE:
            lam = lam * CHEAP
        if cheap is not None:
            lam = lam * cheap
        low = -1.0 if sp.negative else (max(1e-3, ts.D.low) if sp.positive else ts.D.low)
        D = low + d.pair * (ts.D.high - low)
        sym = g[:, _SYM] < 0.5
        up = np.triu(D, 1)
        D = np.where(sym[:, None, None], up + np.swapaxes(up, 1, 2), D)
        D[:, np.arange(m), np.arange(m)] = 0.0
        if sp.ties and m >= 3:  # client 1 an exact copy of client 2
            N[:, 1], c[:, 1], K[:, 1] = N[:, 2], c[:, 2], K[:, 2]
            D[:, 1, :], D[:, :, 1] = D[:, 2, :], D[:, :, 2]
            D[:, 1, 2] = D[:, 2, 1] = 1e-3 if sp.positive else 0.0
            D[:, np.arange(m), np.arange(m)] = 0.0
        client = factor = perm = None
        if sp.liar is not None:
            who = u[..., _WHO]
            if d.stratum in ("priced-liar", "large-lie"):  # among the finite costs, if any
                who = np.where(np.isfinite(c), who, who - 2.0)
            client = np.argmax(who, axis=1)
        if sp.liar in ("over", "any"):
            table = np.array(_OVER if sp.liar == "over" else _ANY)
            lo, hi = (1.0 + 1e-6, 20.0) if sp.liar == "over" else (0.05, 20.0)
            pick = table[np.minimum((g[:, _FVAL] * len(table)).astype(int), len(table) - 1)]
            factor = np.where(g[:, _FKIND] < 0.5, pick, lo + g[:, _FVAL] * (hi - lo))
            if d.stratum == "large-lie":  # log-uniform on [lo, LARGE_LIE]
                factor = np.exp(math.log(lo) + g[:, _FVAL] * (math.log(LARGE_LIE) - math.log(lo)))
        if sp.perm:
            perm = np.argsort(u[..., _PERM], axis=1, kind="stable")
        return {"N": N, "c": c, "K": K, "lam": lam, "D": D, "client": client,
                "factor": factor, "perm": perm, "search": self.search,
                "gain": GAINS[d.gain], "thresholds": d.mode}

    def bulk_input(self, d: Draws) -> dict:
        return self.arrays(d)

    def cases(self, d: Draws) -> list:
        a = self.arrays(d)
        out = []
        for k in range(d.size):
            market = ipfl.Market(N=a["N"][k], c=a["c"][k], K=a["K"][k], lam=float(a["lam"][k]),
                                 gain=a["gain"])
            out.append(IpflCase(
                market, a["D"][k],
                None if a["client"] is None else int(a["client"][k]),
                None if a["factor"] is None else float(a["factor"][k]),
                None if a["perm"] is None else a["perm"][k], self.search,
                a["thresholds"]))
        return out

    def simple(self) -> dict:
        ts = self.type_space
        low = -1.0 if self.spec.negative else (max(1e-3, ts.D.low) if self.spec.positive
                                               else ts.D.low)
        zero_d = (0.0 - low) / (ts.D.high - low) if low < 0 else 0.0
        return {"client": [0.0], "pair": [zero_d, 0.0] if low < 0 else [0.0],
                "glob": [0.0, 0.5]}


_REGRET = IpflSpec(liar="who")  # the regret-search properties' cases

_EVERY = {"gains": P.EVERY_GAIN, "modes": P.EVERY_MODE}  # every gain kind, every mode
_GAINS = {"gains": P.EVERY_GAIN}  # every gain kind, exact thresholds
# the size tier: 24 clients, where buyers have more than ENUMERATION_MAX = 16 candidates
# and the exact rule's dynamic programme runs (in 14 of 20 such markets, seed 0; in none of
# 2-12 clients). Markets of 72-128 clients never needed the greedy's rescan beyond
# GREEDY_TOP = 64 (0 of 20 each: a quarter of the sellers are pure buyers, T = 0); one_path
# runs the rescan with top=1 on every market instead.
_TIER = ((24, 0.002),)
# ... and a cheap tier: 100 clients with c and lam x CHEAP (data nearly free: prices near 0,
# so a buyer with a large K has far more than GREEDY_TOP = 64 sellers worth buying and the
# greedy scans its rows again with 8 x 64 sellers; measured in tests/test_batch_engine.py)
CHEAP = 1e-3
# The cheap-data markets (IpflSpec.cheap_data: the probability of one; CHEAP_DATA_SHARE for
# every iPFL row whose statement holds on any market): a sqrt-gain market's prices made
# cheap, c and lam x 10^u, u uniform on CHEAP_DATA = [-12, 0] (every c still in the type
# space's [0, 5]): prices far below the gains, where the sqrt closed form takes its large-q
# branch (q = 4 sqrt(K)/(D sqrt(N_j)) > 1e9, mechanisms.gains._sqrt_roots) and thresholds
# are huge; the plain draw reaches neither. Drawn instance by instance from a uniform the
# plain draw already has (its symmetry uniform's second bit onward), not as a stratum of
# STRATA: a stratum is a group of its own, and the batch engine's cost grows with the
# groups (docs/reference-proofs.md). The sqrt gain's markets only: its thresholds have a
# closed form at every scale, while a generic gain's are resolved to 2^50 N_j
# (Gain.thresholds: the marginal g(T) - g(T - N_j) drowns in rounding beyond), so its
# markets stay plain.
CHEAP_DATA = (-12.0, 0.0)
CHEAP_DATA_SHARE = 0.05
_CHEAP_TIER = {"tiers": ((24, 0.002), (100, 0.0005)), "cheap": (100,)}

# The strata a property's draws may hold (IpflSpec.strata: each with its probability; the
# rest of the draws are the plain ones, so every instance of the plain distribution can still
# be drawn). A stratum changes how the draws map onto instances, never the preconditions.
STRATA = {
    "priced-liar": "the liar is drawn among the clients with a finite cost c (the largest "
                   "of their liar-choice uniforms; in a market without one, among all): a "
                   "pure buyer's c = inf is still inf when overstated, so its lie changes "
                   "nothing the mechanism reads",
    "large-lie": "as priced-liar, and the liar's factor drawn log-uniform on [its lower end, "
                 "LARGE_LIE = 1e6] instead of the plain draw's table and uniform range (up to "
                 "20 for an overstatement): the generic gains' buyers value data far above "
                 "its price on the default type space (K >= 1e3), so a lie of 20 x the cost "
                 "rarely changes who buys from the liar",
}
LARGE_LIE = 1e6  # the largest factor of the large-lie stratum
# lemma1 (issue 34, part 3: a row's budget in discriminating examples, measured shares):
# 6.6 % of its draws discriminated (box2, seed 0: 1,539,296 drawn for 100,000), by gain kind
# sqrt 24.7 %, log 0.7 %, power 0.9 %, linear 0.4 % (the generic gains' buyers buy nearly
# every model on the default type space, whatever the lie), and never with a pure buyer as
# the liar (22 % of the draws). Drawn with the sqrt gain 7 times in 10 (each generic gain 1
# in 10), 45 % of the liars priced, 40 % priced with a large lie (the generic gains' share
# then 7-10 %, not 1 %), 15 % plain; every gain kind and every liar of the plain draw stay
# drawn. For 5,000 discriminating (box2, seed 0): 19,169 draws (26.1 %), and on as many
# draws of seed 1 518 discriminating with a generic gain; with the sqrt gain half the time
# and 3 in 4 liars priced (before): 33,091 (15.1 %) and 109
_LEMMA1 = {"gain_weights": (0.7, 0.1, 0.1, 0.1),
           "strata": (("priced-liar", 0.45), ("large-lie", 0.4))}

IPFL_SPECS: dict[str, IpflSpec] = {
    "budget_balance": IpflSpec(**_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "no_deficit": IpflSpec(**_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "individual_rationality": IpflSpec(**_GAINS, cheap_data=CHEAP_DATA_SHARE),
    "ir_negative_distances": IpflSpec(negative=True, cheap_data=CHEAP_DATA_SHARE),
    "local_optimality": IpflSpec(**_CHEAP_TIER, **_GAINS, cheap_data=CHEAP_DATA_SHARE),
    "global_optimality": IpflSpec(max_m=P.GLOBAL_MAX_CLIENTS, **_GAINS,
                                  cheap_data=CHEAP_DATA_SHARE),
    "lemma1": IpflSpec(liar="over", **_GAINS, **_LEMMA1),
    "thm2": _REGRET,
    "thm3": IpflSpec(positive=True, lam_min=0.01, liar="who"),
    "thm3_lam0": IpflSpec(positive=True, liar="who"),
    "permutation": IpflSpec(perm=True, **_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "permutation_ties": IpflSpec(perm=True, ties=True, cheap_data=CHEAP_DATA_SHARE),
    **{f"truthful_{key}": _REGRET for key in ("N_over", "N_under", "c_under", "K_over",
                                              "K_under")},
    "budget_identity": IpflSpec(**_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "shapley_efficiency": IpflSpec(**_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "shapley_symmetry": IpflSpec(ties=True, min_m=3, **_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "greedy_tie_rule": IpflSpec(ties=True, min_m=3, cheap_data=CHEAP_DATA_SHARE),
    "pure_sellers_never_buy": IpflSpec(**_EVERY, cheap_data=CHEAP_DATA_SHARE),
    # uniform sizes: a prefix breaks (the local rule) in 0 % of 3-client markets, ~5 % of
    # 6-client and ~25 % of 12-client ones (box2 vs local on 5,000 draws each, seed 0)
    "box2_prefix": IpflSpec(min_m=3, size_power=0.0, cheap_data=CHEAP_DATA_SHARE),
    "one_path": IpflSpec(**_CHEAP_TIER, **_EVERY, cheap_data=CHEAP_DATA_SHARE),
    "one_market": IpflSpec(**_CHEAP_TIER, **_EVERY, cheap_data=CHEAP_DATA_SHARE),
    # one_path's draws: the 100-client tier gives buyers of 60-90 candidates
    "work_bound": IpflSpec(**_CHEAP_TIER, **_EVERY, cheap_data=CHEAP_DATA_SHARE),
}


def ipfl_sampler(key: str, type_space: TypeSpace | None = None,
                 search: dict | None = None) -> IpflSampler:
    """The sampler of iPFL property ``key`` on ``type_space`` (default: the checker's);
    ``search``: the misreport search's settings its cases carry (default: the search's
    own)."""
    return IpflSampler(IPFL_SPECS[key], type_space, search)


# CPL: client fields a, G, c, v-is-zero, v, q_max; globals q_min, per-client, q_max, alpha, R,
# frac, binding coin
class CplSampler(Sampler):
    """The games of :func:`proofs.strategies.cpl_games` with the same keyword arguments
    (its docstring documents the distribution, the budget's included)."""

    n_client = 6
    n_glob = 7

    def __init__(self, *, min_n=1, max_n=12, large_v=False, budget="binding",
                 positive_budget=False, baselines_off_floor=False, edge=False):
        self.min_m, self.max_m = min_n, max_n
        self.large_v, self.budget, self.positive_budget = large_v, budget, positive_budget
        self.baselines_off_floor, self.edge = baselines_off_floor, edge

    def _q_max_units(self, d: Draws):
        """q_max's lower end and the uniforms behind it (per client, common). With
        ``baselines_off_floor`` the lower end is q_min (1 + CPL_FLOOR_RTOL) and the uniforms
        are read from the top, so q_max > that end (u < 1; the simplest value is q_max = 1):
        a box [q_min, q_min] holds its client on the floor at any price (as the strategy)."""
        uq, gq = d.client[..., 5], d.glob[:, 2]
        q_min = np.array([0.01, 0.05, 0.1])[np.minimum((d.glob[:, 0] * 3).astype(int), 2)]
        if self.baselines_off_floor:
            return q_min * (1 + CPL_FLOOR_RTOL), 1.0 - uq, 1.0 - gq
        return q_min, uq, gq

    def bulk_input(self, d: Draws) -> cpl.GameBatch:
        return self.games(d)

    def games(self, d: Draws) -> cpl.GameBatch:
        """The games of ``d`` as one :class:`mechanisms.cpl.GameBatch` (the same games as
        :meth:`cases`, built with array operations)."""
        u, g = d.client, d.glob
        B, n = d.size, d.m
        a = 0.05 + 0.95 * u[..., 0]
        G = 0.5 + 19.5 * u[..., 1]
        c = 0.1 + 9.9 * u[..., 2]
        v_hi = 1e6 if self.large_v else 100.0
        v = np.where(u[..., 3] < 0.5, 0.0, u[..., 4] * v_hi)
        q_min = np.array([0.01, 0.05, 0.1])[np.minimum((g[:, 0] * 3).astype(int), 2)]
        q_lo, uq, gq = self._q_max_units(d)
        q_max = np.where((g[:, 1] < 0.5)[:, None], q_lo[:, None] + uq * (1.0 - q_lo[:, None]),
                         (q_lo + gq * (1.0 - q_lo))[:, None])
        alpha = 0.1 + 2.9 * g[:, 3]
        R = (10 + np.minimum((g[:, 4] * 491).astype(int), 490)).astype(float)
        games = cpl.GameBatch(a, G, c, v, q_max, np.zeros(B), alpha, R, q_min)
        if self.positive_budget:
            cost = np.sum(2.0 * c * q_max**2, axis=1)
            value = np.sum(v * games.K / q_max, axis=1)
            shrink = value >= 0.5 * cost
            with np.errstate(invalid="ignore", divide="ignore"):
                v = np.where(shrink[:, None], v * (0.5 * cost / value)[:, None], v)
            games = cpl.GameBatch(a, G, c, v, q_max, np.zeros(B), alpha, R, q_min)
        lo = games.spend(np.broadcast_to(q_min[:, None], (B, n)))
        hi = games.spend(q_max)
        if self.positive_budget:
            lo = np.maximum(lo, 0.0)
        if self.baselines_off_floor:
            off = q_min * (1 + CPL_FLOOR_RTOL)
            lo = np.maximum.reduce([lo, *(cpl.posted_floor_spend(
                games, cpl.POSTED_SHAPES[name](games), off) for name in ("uniform", "weighted"))])
        frac = 0.01 + 0.98 * g[:, 5]
        binding = np.full(B, self.budget == "binding") | ((self.budget == "any")
                                                          & (g[:, 6] < 0.5))
        inside = binding & (hi - lo > 1e-9 * np.maximum(1.0, np.abs(hi)))
        top = np.maximum(hi, lo)
        budget = np.where(inside, lo + frac * (hi - lo), top + frac * (np.abs(top) + 1.0))
        if self.edge:
            budget = edge_budgets(budget, inside & ((2.0 * g[:, 6]) % 1.0 < 0.5), g[:, 5], lo,
                                  hi)
        return cpl.GameBatch(a, G, c, v, q_max, budget, alpha, R, q_min)

    def cases(self, d: Draws) -> list:
        u, g = d.client, d.glob
        q_lo, uq, gq = self._q_max_units(d)
        out = []
        for k in range(d.size):
            uk, gk = u[k], g[k]
            n = d.m
            a = 0.05 + 0.95 * uk[:, 0]
            G = 0.5 + 19.5 * uk[:, 1]
            c = 0.1 + 9.9 * uk[:, 2]
            v_hi = 1e6 if self.large_v else 100.0
            v = np.where(uk[:, 3] < 0.5, 0.0, uk[:, 4] * v_hi)
            q_min = (0.01, 0.05, 0.1)[min(int(gk[0] * 3), 2)]
            if gk[1] < 0.5:
                q_max = q_lo[k] + uq[k] * (1.0 - q_lo[k])
            else:
                q_max = q_lo[k] + gq[k] * (1.0 - q_lo[k])
            game = cpl.Game(a=a, G=G, c=c, v=v, budget=0.0, alpha=0.1 + 2.9 * gk[3],
                            R=int(10 + min(int(gk[4] * 491), 490)), q_min=q_min, q_max=q_max)
            if self.positive_budget:
                qm = np.asarray(game.q_max)
                cost = float(np.sum(2.0 * game.c * qm**2))
                value = float(np.sum(game.v * game.K / qm))
                if value >= 0.5 * cost:
                    game = game.replace(v=np.asarray(game.v) * (0.5 * cost / value))
            lo = cpl.spend(game, np.full(n, q_min))
            hi = cpl.spend(game, game.q_max)
            if self.positive_budget:
                lo = max(lo, 0.0)
            if self.baselines_off_floor:
                batch = cpl.GameBatch.from_games([game])
                lo = max(lo, *(float(cpl.posted_floor_spend(batch, shape, q_lo[k])[0])
                               for shape in (cpl.POSTED_SHAPES[name](game)
                                             for name in ("uniform", "weighted"))))
            frac = 0.01 + 0.98 * gk[5]
            binding = self.budget == "binding" or (self.budget == "any" and gk[6] < 0.5)
            inside = binding and hi - lo > 1e-9 * max(1.0, abs(hi))
            if inside:
                B = lo + frac * (hi - lo)
            else:
                top = max(hi, lo)
                B = top + frac * (abs(top) + 1.0)
            if self.edge:
                B = float(edge_budgets(B, inside and (2.0 * gk[6]) % 1.0 < 0.5, gk[5], lo, hi))
            out.append(CplCase(game.replace(budget=B)))
        return out

    def simple(self) -> dict:
        return {"client": [0.0, 0.5], "pair": [0.0], "glob": [0.0, 0.5]}


CPL_SPECS = {
    "cpl_se_identities": {"large_v": True, "budget": "any"},
    "cpl_threshold": {"large_v": True},
    "cpl_threshold_all": {"large_v": True},
    "cpl_beats_baselines": {"positive_budget": True, "baselines_off_floor": True},
    "cpl_beats_baselines_any": {"positive_budget": True},
    "cpl_budget_feasible": {"positive_budget": True, "budget": "any"},
    "cpl_threshold_formula": {"large_v": True},
    "cpl_one_path": {"budget": "any"},
    "cpl_one_game": {"large_v": True, "budget": "any", "positive_budget": True},
    "cpl_work_bound": {"large_v": True, "budget": "any", "positive_budget": True,
                       "edge": True},
}


def cpl_sampler(key: str) -> CplSampler:
    return CplSampler(**CPL_SPECS[key])


def sampler_for(prop, max_clients: int | None = None,
                type_space: TypeSpace | None = None,
                search: dict | None = None) -> Sampler | None:
    """The built-in sampler of a registered property, or the property's own ``sample``;
    ``max_clients`` (validated by :func:`proofs.check`) raises its largest market;
    ``type_space`` (iPFL properties) the space the markets are drawn from; ``search`` the
    misreport search's settings (regret properties)."""
    if prop.sample is not None:
        sampler = prop.sample()
    elif not is_builtin(prop):
        return None
    elif prop.key in IPFL_SPECS:
        sampler = ipfl_sampler(prop.key, type_space, search)
    elif prop.key in CPL_SPECS:
        sampler = cpl_sampler(prop.key)
    else:
        return None
    if max_clients is not None and isinstance(sampler, Sampler):
        sampler.max_m = int(max_clients)
        sampler.tiers = ()  # the largest market asked for is the largest drawn
    return sampler


# ------------------------------------------------------------------ batched clearing
#
# No equation lives here: the markets of a batch are cleared by mechanisms.ipfl.clear_batch
# (proofs.ipfl_properties.settle_batch), and every property evaluates itself in bulk through
# its Property.batch hook (the iPFL ones in proofs.ipfl_properties, the CPL ones in
# proofs.cpl_properties), the same function its one-instance check runs on a batch of one.

over_arrays = ipfl.over_arrays  # kept importable from here (documented as proofs.batch's)
MarketArrays = ipfl.MarketArrays


def vectorised(prop, subject, sampler: Sampler | None = None) -> Callable | None:
    """A function ``draws -> violations`` (or ``(violations, effective[, discriminating])``)
    when the pair can be evaluated in bulk: a built-in property whose ``batch`` hook takes
    the subject (its rules can be run on a whole batch). ``sampler``: the one the draws come
    from (default: the property's own on the default type space)."""
    if not is_builtin(prop) or prop.batch is None:
        return None
    bulk = prop.batch(subject)
    if bulk is None:
        return None
    sampler = sampler_for(prop) if sampler is None else sampler
    if sampler is None:
        return None
    return lambda d: bulk(sampler.bulk_input(d))


def evaluate_in_bulk(subject, prop, cases: list) -> tuple | None:
    """(violations, effective, discriminating) arrays of the iPFL instances ``cases``,
    evaluated at once by the property's ``batch`` hook (what the batch engine runs on its
    draws: the same check, the subject cleared by :func:`mechanisms.ipfl.clear_batch`, of
    which one market is the batch of one), in their order, with the engine's conventions
    (an instance not effective has violation 0; a failing one discriminates). None when the
    pair has no bulk path or the cases are not one batch of truthful markets (sizes, gains
    or threshold modes differ, or a case has a liar, a factor, a permutation or a search of
    its own), or when the hook raised: the caller then evaluates them one by one."""
    if not cases or not is_builtin(prop) or prop.batch is None \
            or not all(type(c) is IpflCase for c in cases):
        return None
    bulk = prop.batch(subject)
    if bulk is None:
        return None
    first = cases[0].market
    for c in cases:
        mk = c.market
        if mk.m != first.m or mk.gain != first.gain or c.thresholds != cases[0].thresholds \
                or c.client is not None or c.factor is not None or c.perm is not None \
                or c.search is not None or not mk.truthful:
            return None
    out_v, out_e, out_d = [], [], []
    for lo in range(0, len(cases), CHUNK):
        part = cases[lo:lo + CHUNK]
        a = {"N": np.stack([c.market.N for c in part]).astype(float),
             "c": np.stack([c.market.c for c in part]).astype(float),
             "K": np.stack([c.market.K for c in part]).astype(float),
             "lam": np.array([float(c.market.lam) for c in part]),
             "D": np.stack([np.asarray(c.D, dtype=float) for c in part]),
             "client": None, "factor": None, "perm": None, "search": None,
             "gain": first.gain, "thresholds": cases[0].thresholds}
        try:
            out = bulk(a)
        except Exception:  # a rule raised: the caller finds the instance one by one
            return None
        if not isinstance(out, tuple):
            out = (out,)
        viol = np.asarray(out[0], dtype=float)
        eff = np.asarray(out[1], dtype=bool) if len(out) > 1 else np.ones(len(part), bool)
        disc = np.asarray(out[2], dtype=bool) if len(out) > 2 else np.ones(len(part), bool)
        viol = np.where(eff, viol, 0.0)
        out_v.append(viol)
        out_e.append(eff)
        out_d.append(eff & (disc | ~(viol <= 0)))
    return np.concatenate(out_v), np.concatenate(out_e), np.concatenate(out_d)


# ------------------------------------------------------------------------ shrinking


def _fails(subject, prop, sampler, d: Draws, tolerance) -> float | None:
    try:
        case = sampler.cases(d)[0]
        amount, _, effective = evaluate_once(subject, prop, case)
    except BaseException as exc:  # the subject raised, or the draw is not a valid instance
        if must_pass(exc):
            raise
        return None
    if amount is None or not effective or not amount > tolerance:
        return None
    return amount


def shrink(subject, prop, sampler: Sampler, d: Draws, tolerance: float, *,
           budget: int = 3000, time_limit: float | None = None) -> tuple[Draws, int]:
    """Greedy shrinking of one failing draw: delete clients, then simplify coordinates.
    ``time_limit`` (seconds): a rule of the user's own still running when it passes is
    stopped, and the simplest failing draw found so far is kept."""
    best = [d, 0]
    limit = Limit(time_limit)
    try:
        with limit:
            _shrink(subject, prop, sampler, d, tolerance, budget, best)
    except TimeUp as exc:
        if exc.limit is not limit:
            raise
    return best[0], best[1]


def _shrink(subject, prop, sampler, d, tolerance, budget, best) -> None:
    """:func:`shrink`'s search; ``best`` holds [the simplest failing draw, calls] so far."""
    calls = 0
    simple = sampler.simple()
    improved = True
    while improved and calls < budget:
        improved = False
        i = 0
        while d.m > sampler.min_m and i < d.m and calls < budget:
            cand = d.without(i)
            calls += 1
            best[1] = calls
            if _fails(subject, prop, sampler, cand, tolerance) is not None:
                d, improved = cand, True
                best[0] = d
            else:
                i += 1
        for field_name in ("glob", "client", "pair"):
            arr = getattr(d, field_name)
            for pos in np.ndindex(arr.shape[1:]):
                cur = float(arr[(0, *pos)])
                prefs = simple.get(field_name, [0.0])
                if cur in prefs:  # only values simpler than the current one
                    tries = prefs[:prefs.index(cur)]
                else:
                    tries = prefs + [r for r in (round(cur, 1), round(cur, 2)) if r != cur]
                for v in tries:
                    if calls >= budget:
                        break
                    new = arr.copy()
                    new[(0, *pos)] = v
                    cand = Draws(**{**d.__dict__, field_name: new})
                    calls += 1
                    best[1] = calls
                    if _fails(subject, prop, sampler, cand, tolerance) is not None:
                        d, arr, improved = cand, new, True
                        best[0] = d
                        break
    best[1] = calls


# --------------------------------------------------------------------------- engine


def _limited(time_limit, fn, *args):
    """``fn(*args)`` (a recheck of a failing instance) with a rule of the user's own stopped
    at ``time_limit``: then :data:`_STOPPED`."""
    limit = Limit(time_limit)
    try:
        with limit:
            return fn(*args)
    except TimeUp as exc:
        if exc.limit is not limit:
            raise
        return _STOPPED


_STOPPED = object()  # a recheck stopped at the time limit


def check_batch(subject, prop, *, max_examples: int, seed: int | None, tolerance: float,
                chunk: int = CHUNK, time_limit: float | None = None,
                bulk: bool = True, progress=None,
                max_clients: int | None = None,
                min_discriminating: int | None = None, scan: bool = False,
                type_space: TypeSpace | None = None, search: dict | None = None) -> Report:
    """The batch engine behind ``check(..., engine="batch")`` (arguments validated there).

    ``bulk=False`` evaluates the numpy draws one instance at a time even where the pair
    could be evaluated in bulk (benchmarks/bench_checker.py compares the two). A block whose
    bulk evaluation raises is evaluated one instance at a time (to find the instance a rule
    raised on); when every instance of it evaluates alone without raising, the row is an
    "error": the bulk and one-instance paths disagree (a MemoryError excepted).

    ``max_examples`` is the number of DISCRIMINATING examples to reach: instances are drawn
    until that many were checked on which the property could have failed (preconditions
    met, subject evaluated, ``prop.discriminates``), but at most :data:`DRAW_FACTOR` x
    ``max_examples``; "holds" needs ``min_discriminating`` of them (default
    ``max_examples``), fewer read "inconclusive", none "vacuous". A property that
    discriminates on every draw draws exactly ``max_examples``.

    ``time_limit`` (seconds): stop drawing once it has passed; the report then counts what
    was drawn and checked (``extra["stopped"]`` says why), never the requested budget.

    ``progress(discriminating, max_examples)`` hears the discriminating count between
    chunks (at most ten times a second, and at the end).

    ``scan``: do not stop at the first counterexample: check the whole budget, so that
    ``largest_violation`` is the largest violation over every example checked and
    ``extra["failures"]`` counts the failing examples (of ``discriminating``); the
    counterexample is still the first found, shrunk.

    A property without a numpy sampler (:func:`sampler_for` None) is refused here;
    :func:`proofs.check` runs the Hypothesis engine for it instead (the report's ``engine``
    then says "hypothesis"; the time limit and progress go with it)."""
    sampler = sampler_for(prop, max_clients, type_space, search)
    if sampler is None:
        raise CheckerInputError("prop", f"{prop.key!r} has no numpy sampler; "
                                        "proofs.check(engine='batch') checks it with the "
                                        "Hypothesis engine")
    report_progress = Throttle(progress)
    if getattr(sampler, "tiers", ()) and getattr(subject, "money", None) in P.SIZE_LIMITED:
        sampler.tiers = ()  # exponential in the market's size: its own guards decide
    m_hi = getattr(sampler, "max_m", None)
    if isinstance(m_hi, int) and m_hi > 0:  # a chunk of large markets within the memory guard
        m_hi = max([m_hi, *(m for m, _ in getattr(sampler, "tiers", ()))])
        chunk = max(1, min(chunk, int(MAX_BYTES // (8 * m_hi**2))))
    bulk = vectorised(prop, subject, sampler) if bulk else None
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    tally = Tally()
    fail = None
    fail_amount = math.nan
    failures, fail_at = 0, None
    error = error_instance = None
    mode = "batch (vectorised)" if bulk is not None else "batch (per instance)"
    stopped = "budget"
    cap = DRAW_FACTOR * max_examples  # drawn: beyond it, "inconclusive" (or "vacuous")
    limit = Limit(time_limit)  # stops a rule of the user's own that does not return
    interrupted = None
    try:
        with limit:
            while tally.discriminating < max_examples and (fail is None or scan) and error is None:
                report_progress(tally.discriminating, max_examples)
                drawn = tally.drawn
                if drawn >= cap:
                    stopped = "draw cap"
                    break
                if probed_vacuous(tally, max_examples):
                    stopped = "vacuous"
                    break
                if time_limit is not None and time.perf_counter() - t0 > time_limit:
                    stopped = "time limit"
                    break
                step = chunk if bulk is not None else min(chunk, 256)
                # the draws the discriminating examples still wanted need at the share seen so far
                # (at least 1 in DRAW_FACTOR; all of them at first): a property that discriminates
                # on every draw draws exactly max_examples
                share = (max(tally.discriminating / drawn, 1 / DRAW_FACTOR) if drawn else 1.0)
                wanted = math.ceil((max_examples - tally.discriminating) / share)
                if drawn and tally.discriminating == 0:  # probing, up to the vacuity probe
                    wanted = max(max_examples, VACUITY_PROBE) - drawn
                for d in sampler.draw(rng, min(step, wanted, cap - drawn)):
                    viol = bulk_raised = None
                    if bulk is not None:
                        try:
                            out = bulk(d)
                            if not isinstance(out, tuple):
                                out = (out,)
                            viol = np.asarray(out[0], dtype=float)
                            eff = (np.asarray(out[1], dtype=bool) if len(out) > 1
                                   else np.ones(d.size, bool))
                            disc = (np.asarray(out[2], dtype=bool) if len(out) > 2
                                    else np.ones(d.size, bool))
                        except Exception as exc:  # a rule raised: find the instance one by one
                            viol, bulk_raised = None, exc
                    if viol is not None:
                        viol = np.where(eff, viol, 0.0)
                        bad = np.flatnonzero(~(viol <= tolerance))
                        disc = eff & (disc | ~(viol <= 0))  # a failing instance discriminates
                        upto = int(bad[0]) + 1 if bad.size and not scan else d.size
                        # up to the instance that completes the budget: the count is exact
                        reach = np.flatnonzero(np.cumsum(disc[:upto])
                                               >= max_examples - tally.discriminating)
                        if reach.size:
                            upto = int(reach[0]) + 1
                        seen = viol[:upto][eff[:upto]]
                        seen = seen[np.isfinite(seen)]
                        if seen.size:
                            tally.note(float(seen.max()))
                        drawn_before = tally.drawn
                        tally.add(upto, int(eff[:upto].sum()), int(disc[:upto].sum()))
                        bad = bad[bad < upto]
                        failures += int(bad.size)
                        if bad.size and fail is None:
                            fail = d.one(int(bad[0]))
                            fail_amount = viol[int(bad[0])]
                            fail_at = drawn_before + int(bad[0]) + 1
                        if bad.size and not scan:
                            break
                        if tally.discriminating >= max_examples:
                            break
                        continue
                    cases = sampler.cases(d)
                    for k, case in enumerate(cases):
                        try:
                            amount, _, eff, disc = evaluate_instance(subject, prop, case)
                        except BaseException as exc:
                            if must_pass(exc):
                                raise
                            tally.add(1, 1, 1)
                            error, error_instance = str(exc), case
                            if not isinstance(exc, SubjectError):
                                error = (f"property {prop.key!r} raised {type(exc).__name__}: "
                                         f"{exc}")
                            break
                        ok = amount is not None and eff
                        tally.add(1, int(ok), int(ok and disc))
                        tally.note(amount)
                        if amount is not None and amount > tolerance:
                            failures += 1
                            if fail is None:
                                fail, fail_amount, fail_at = d.one(k), amount, tally.drawn
                            if not scan:
                                break
                        if tally.discriminating >= max_examples:
                            break
                    else:
                        if bulk_raised is not None and not isinstance(bulk_raised, MemoryError):
                            # every instance of the block evaluated alone and none raised:
                            # the bulk evaluation raised where the one-instance path does not
                            # (one market is the batch of one), a failure, never a silent
                            # fall-back (generated mutant 1d4bd7c383: eq11_margins indexing
                            # the batch axis for m raised on every batch of more than m
                            # markets, and local_optimality held one instance at a time)
                            error_instance = cases[0] if cases else None
                            error = (f"property {prop.key!r} raised "
                                     f"{type(bulk_raised).__name__} on a batch of {d.size} "
                                     f"instances ({bulk_raised}) but on none of them alone: "
                                     "the bulk and one-instance paths disagree")
                    if (fail is not None and not scan) or error is not None \
                            or tally.discriminating >= max_examples:
                        break
    except TimeUp as exc:
        if exc.limit is not limit:
            raise
        stopped, interrupted = "time limit", str(rule_timed_out(exc, time_limit))
    report_progress(tally.discriminating, max_examples, final=True)
    first_failure = (tally.drawn if error is not None else fail_at) \
        if (fail is not None or error is not None) else None
    ce = None
    extra = {"mode": mode, "stopped": stopped}
    if scan:
        extra["failures"] = failures
    if interrupted is not None:
        extra["interrupted"] = interrupted
        if tally.drawn == 0 and fail is None and error is None:  # not one example checked
            error = interrupted
    if error is not None:
        verdict = "error"
    elif fail is not None:
        amount = _limited(time_limit, _fails, subject, prop, sampler, fail, tolerance)
        verdict = "counterexample"
        if amount is _STOPPED:  # a rule of your own hung on the recheck: not shrunk
            extra["shrink"] = "stopped at the time limit"
            tally.note(float(fail_amount))
            ce = Counterexample(instance=sampler.cases(fail)[0], violation=float(fail_amount),
                                property=prop, subject=subject, engine="batch")
        elif amount is None:
            # the subject cleared in bulk failed the property where the same instance
            # cleared on its own did not: the bulk and one-market paths of the subject
            # disagree, a failure of the subject (not of the checker); reported on the
            # unshrunk instance with the bulk figure (rerun() evaluates the one-market path)
            case = sampler.cases(fail)[0]
            bulk_amount = float(fail_amount)
            extra["inconsistent"] = (f"{_name(subject)} failed {prop.key} by {bulk_amount!r} "
                                     "when cleared in bulk but not when this instance was "
                                     "cleared on its own")
            tally.note(bulk_amount)
            ce = Counterexample(instance=case, violation=bulk_amount, property=prop,
                                subject=subject, engine="batch")
        else:
            t1 = time.perf_counter()
            small, calls = shrink(subject, prop, sampler, fail, tolerance,
                                  time_limit=time_limit)
            extra.update(shrink_seconds=time.perf_counter() - t1, shrink_calls=calls)
            case = sampler.cases(small)[0]
            amount = _limited(time_limit, prop.amount, subject, case)
            if amount is _STOPPED:
                extra["shrink"] = "stopped at the time limit"
                case, amount = sampler.cases(fail)[0], float(fail_amount)
            tally.note(amount)
            ce = Counterexample(instance=case, violation=amount, property=prop,
                                subject=subject, engine="batch")
    else:
        verdict = verdict_of(False, tally, max_examples if min_discriminating is None
                             else min_discriminating)
    return Report(property=prop, subject=_name(subject), verdict=verdict,
                  examples=tally.drawn, effective=tally.effective,
                  discriminating=tally.discriminating,
                  seconds=time.perf_counter() - t0, max_examples=max_examples,
                  counterexample=ce, engine="batch", first_failure=first_failure, error=error,
                  error_instance=error_instance, extra=extra, largest_violation=tally.largest)
