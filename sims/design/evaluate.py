"""Objectives measured in bulk: a payment rule (with the selection fixed) cleared on many
markets at once, with every client's best misreport searched in every type dimension.

Everything here goes through the mechanism's one bulk clearing, :func:`mechanisms.ipfl.clear_batch`
(the code ``ipfl.clear`` and the checker's batch engine run), and the checker's vectorised
misreport search and market sampler (:func:`proofs.batch.misreports_batch`,
:func:`proofs.batch.ipfl_sampler`); this module holds no equation of the mechanism. The
imports below are the one place that names that path.

**Markets.** :func:`draw_markets` draws from the checker's distribution of the regret
properties (``ipfl_sampler("thm2")``: types, distances, lam, market sizes and the liar, as
documented in :mod:`proofs.batch`); :func:`markets_from` takes one market of your own (every
client in turn is the liar). A :class:`Markets` is fixed once drawn, so every rule is
measured on the same markets (common random numbers).

**Measures** (per market, then summarised): the liar's regret per type dimension (N, c, K)
and direction (over, under) found by the checker's vectorised misreport search, in utility
units and relative to the rule's utility level (the mean over markets of the mean |U_j| of the
truthful outcome: "regret at most 1 % of utility");
individual rationality (the smallest utility, violated below -1e-9 x the checker's scale);
the operator's balance sum_i p_i (surplus > 0, deficit < 0); welfare sum_i (U_i + p_i)
(true values; payments cancel); participation (share of clients that trade).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms import ipfl
from mechanisms.ipfl import MarketArrays, clear_batch, over_arrays
from proofs.batch import ipfl_sampler, misreports_batch, misreports_joint_batch
from proofs.core import CheckerInputError
from proofs.regret import DIMENSIONS, DIRECTIONS, SEARCHES
from proofs.typespace import DEFAULT as DEFAULT_SPACE
from proofs.typespace import TypeSpace, as_type_space

from .errors import DesignInputError

__all__ = ["COMBOS", "REFERENCES", "Evaluation", "Markets", "Mechanism", "draw_markets",
           "evaluate", "markets_from", "misreports_batch", "over_arrays"]

COMBOS = tuple((d, s) for d in DIMENSIONS for s in DIRECTIONS)  # (dimension, direction)
TOL = 1e-9  # relative tolerance of the checker's iPFL properties
SCALE_FLOOR = 1e-9  # a market whose clients all have |U| = 0 gets this utility scale


@dataclass(frozen=True)
class Mechanism:
    """What is cleared: a selection rule, a payment rule and a price rule, each a built-in
    name of the bulk clearing or a function marked over_arrays."""

    name: str
    rule: str | Callable = "local"
    payments: str | Callable = "paper"
    prices: str | Callable = "paper"

    def settle(self, N, c, K, lam, D, true_N=None, true_c=None, true_K=None) -> dict:
        """Clear a batch with :func:`mechanisms.ipfl.clear_batch`; the dict of arrays
        :func:`proofs.batch.misreports_batch` reads (adjacency, payments, utilities)."""
        out = clear_batch(MarketArrays(N, c, K, lam, true_N, true_c, true_K), D, self.rule,
                          payments=self.payments, prices=self.prices,
                          allow_asymmetric_distances=True)  # the type space's D
        return {"A": out.adjacency, "p": out.payments, "U": out.utilities}


# the reference rules, each with the selection and prices it is meant for
REFERENCES = {
    "paper": Mechanism("paper", "local", "paper"),
    "vcg": Mechanism("vcg", "exact", "vcg"),
    "shapley": Mechanism("shapley", "local", "shapley"),
    "cost-plus": Mechanism("cost-plus", "local", "cost-plus", "cost-plus"),
    "share-all": Mechanism("share-all", "share-all", "none"),
}


@dataclass(frozen=True)
class Markets:
    """Fixed markets as arrays, grouped by size: each group a dict with N, c, K (B, m), lam
    (B,), D (B, m, m) and the liar ``client`` (B,). ``source`` says where they came from,
    ``type_space`` the space they were drawn from (:mod:`proofs.typespace`)."""

    groups: tuple
    source: str
    seed: int | None = None
    type_space: TypeSpace = DEFAULT_SPACE

    @property
    def size(self) -> int:
        return int(sum(g["N"].shape[0] for g in self.groups))

    def sizes(self) -> tuple[int, int]:
        ms = [g["N"].shape[1] for g in self.groups]
        return min(ms), max(ms)


def draw_markets(n: int, seed: int, *, key: str = "thm2", type_space=None) -> Markets:
    """``n`` markets from the checker's distribution of property ``key`` (the regret
    properties' by default), seeded, on ``type_space`` (a :class:`proofs.typespace.TypeSpace`,
    a dict or a TOML/JSON file; default the checker's distribution): the markets a rule is
    designed, measured and certified on."""
    if not (isinstance(n, int | np.integer) and n >= 1):
        raise DesignInputError("markets", f"is {n!r}; must be an integer >= 1")
    try:
        space = as_type_space(type_space)
    except CheckerInputError as exc:
        raise DesignInputError(exc.field, exc.message) from None
    sampler = ipfl_sampler(key, space)
    rng = np.random.default_rng(seed)
    groups = []
    for d in sampler.draw(rng, int(n)):
        a = sampler.arrays(d)
        if a["client"] is None:
            raise DesignInputError("key", f"{key!r} draws no liar; use a regret property")
        g = {k: np.array(a[k]) for k in ("N", "c", "K", "lam", "D", "client")}
        for v in g.values():
            v.setflags(write=False)
        groups.append(g)
    where = "checker distribution" if space.is_default else f"type space {space.name!r}"
    return Markets(tuple(groups), f"{where} ({key}), seed {seed}", seed, space)


def markets_from(market: ipfl.Market, D, source: str = "market file") -> Markets:
    """One market of your own, with every client in turn the liar (m copies)."""
    if not market.truthful:
        raise DesignInputError("market", "has true types differing from the reports; give "
                                         "the truthful market")
    m = market.m
    g = {"N": np.tile(market.N, (m, 1)), "c": np.tile(market.c, (m, 1)),
         "K": np.tile(market.K, (m, 1)), "lam": np.full(m, float(market.lam)),
         "D": np.tile(np.asarray(D, dtype=float), (m, 1, 1)), "client": np.arange(m)}
    for v in g.values():
        v.setflags(write=False)
    return Markets((g,), source)


@dataclass(frozen=True)
class Evaluation:
    """The measures of one mechanism on fixed markets: ``per_market`` (tidy, one row per
    market), ``summary`` (one dict of scalars), ``clearings`` (markets cleared, misreports
    included) and ``seconds``."""

    name: str
    per_market: pd.DataFrame
    summary: dict
    clearings: int
    seconds: float

    @property
    def throughput(self) -> float:
        """Markets cleared per second (truthful and misreported)."""
        return self.clearings / self.seconds if self.seconds > 0 else float("nan")


DEFAULT_SEARCH = "strong"  # the misreport search of every design measure (SEARCHES)


def _searches(search, joint_search) -> tuple[dict, dict]:
    """(single, joint) options of the misreport searches, from names of
    :data:`proofs.regret.SEARCHES` or option dicts (None: :data:`DEFAULT_SEARCH`)."""
    out = []
    for value, part in ((search, "single"), (joint_search, "joint")):
        if value is None:
            value = search if part == "joint" and isinstance(search, str) else DEFAULT_SEARCH
        if isinstance(value, str):
            if value not in SEARCHES:
                raise DesignInputError("search", f"is {value!r}; choose one of "
                                                 f"{tuple(SEARCHES)} or give its options")
            value = SEARCHES[value][part]
        if not isinstance(value, dict):
            raise DesignInputError("search", f"is a {type(value).__name__}; a name of "
                                             f"{tuple(SEARCHES)} or a dict of options")
        out.append(dict(value))
    return out[0], out[1]


def _rows(x, i):
    return x[np.arange(x.shape[0]), i]


def evaluate(mech: Mechanism | Callable, markets: Markets, *, combos=COMBOS,
             search: dict | None = None, name: str | None = None, joint=(),
             joint_search: dict | None = None) -> Evaluation:
    """Measure ``mech`` (a :class:`Mechanism`, or a payment rule over arrays, cleared with
    the local selection at the paper's prices) on ``markets``. ``combos``: the (dimension,
    direction) pairs searched; ``search``: a name of :data:`proofs.regret.SEARCHES` or
    options of :func:`proofs.regret.regret_arrays` (span, grid, starts, iters); default
    :data:`DEFAULT_SEARCH` ("strong": benchmarks/design_search_strength.py shows its figures
    move little when it is widened). ``joint``: pairs of dimensions misreported at once (e.g.
    :data:`proofs.regret.JOINT_PAIRS`), each searched both ways by
    :func:`proofs.regret.joint_regret_arrays` (``joint_search``: a name or options span,
    grid, iters; default the same named search's); per market ``regret_joint_{d1}{d2}``, at
    least the one-dimension regrets of its pair measured in the same call."""
    search, joint_search = _searches(search, joint_search)
    if not isinstance(mech, Mechanism):
        if not getattr(mech, "over_arrays", False):
            raise DesignInputError("payments", "a payment rule to evaluate in bulk must be "
                                               "marked over_arrays")
        mech = Mechanism(name or ipfl.rules.rule_name(mech), "local", mech)
    for combo in combos:
        if tuple(combo) not in COMBOS:
            raise DesignInputError("combos", f"{combo!r} not in {COMBOS}")
    for pair in joint:
        if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(DIMENSIONS):
            raise DesignInputError("joint", f"{pair!r}: two different dimensions of "
                                            f"{DIMENSIONS}")
    t0 = time.perf_counter()
    frames, clearings = [], 0
    for g in markets.groups:
        s = mech.settle(g["N"], g["c"], g["K"], g["lam"], g["D"])
        U, p, A = s["U"], s["p"], s["A"]
        B, m = U.shape
        clearings += B
        ustale = np.abs(U).mean(axis=1)
        tol = TOL * (1.0 + np.abs(U).max(axis=1) + np.abs(p).max(axis=1))
        trades = A.any(axis=2) | A.any(axis=1)
        cols = {"m": np.full(B, m), "utility_scale": ustale,
                "min_utility": U.min(axis=1),
                "ir_violated": U.min(axis=1) < -tol,
                "ir_violation": np.where(U.min(axis=1) < -tol, -U.min(axis=1), 0.0),
                "balance": p.sum(axis=1),
                "welfare": U.sum(axis=1) + p.sum(axis=1),
                "participation": trades.mean(axis=1)}
        for dim, way in combos:
            found, _ = misreports_batch(mech.settle, dict(g), dim, way, **search)
            clearings += B * (found.evaluations - 1)
            gain = found.lying_utility - found.honest_utility
            gain = np.where(np.isnan(gain), np.inf, gain)  # NaN is a failure
            regret = np.where(gain > tol, gain, 0.0)
            cols[f"regret_{dim}_{way}"] = regret
        for pair in joint:
            found, _ = misreports_joint_batch(mech.settle, dict(g), tuple(pair),
                                              **joint_search)
            clearings += B * (found.evaluations - 1)
            gain = found.lying_utility - found.honest_utility
            gain = np.where(np.isnan(gain), np.inf, gain)
            joint_regret = np.where(gain > tol, gain, 0.0)
            # a lie of one dimension is a joint lie too: the joint regret is at least the
            # one-dimension regrets of the pair measured above
            for dim in pair:
                for way in DIRECTIONS:
                    if f"regret_{dim}_{way}" in cols:
                        joint_regret = np.maximum(joint_regret, cols[f"regret_{dim}_{way}"])
            cols[f"regret_joint_{pair[0]}{pair[1]}"] = joint_regret
        frames.append(pd.DataFrame(cols))
    per = pd.concat(frames, ignore_index=True)
    seconds = time.perf_counter() - t0
    return Evaluation(mech.name, per, summarise(per, combos), clearings, seconds)


QUANTILES = (0.5, 0.9, 0.99)  # the regret quantiles every summary reports (q50, q90, q99)
STATISTICS = ("mean", "q50", "q90", "q99", "max")  # of regret over markets, in a summary


def _statistics(r: pd.Series, prefix: str, key: str, level: float, out: dict) -> None:
    """``out[f"{stat}_{prefix}{key}"]`` for every statistic of :data:`STATISTICS` (absolute)
    and ``out[f"{stat}_rel_{prefix}{key}"]`` (divided by the utility level)."""
    values = {"mean": float(r.mean()), "max": float(r.max())}
    for q in QUANTILES:
        values[f"q{round(100 * q)}"] = float(r.quantile(q, interpolation="higher"))
    for stat, v in values.items():
        out[f"{stat}_{prefix}{key}"] = v
        out[f"{stat}_rel_{prefix}{key}"] = v / level


def summarise(per: pd.DataFrame, combos=COMBOS) -> dict:
    """The scalars of a per-market table.

    Regret, for every searched (dimension, direction) ``{d}_{w}`` (e.g. ``K_under``): the
    statistics of :data:`STATISTICS` over markets, ``{stat}_regret_{d}_{w}`` in utility units
    and ``{stat}_rel_regret_{d}_{w}`` relative to the utility level (the mean over markets
    of the mean |U_j|), with ``stat`` one of mean, q50, q90, q99 (quantiles, the market at
    or above the level: never interpolated) and max; ``share_regret_{d}_{w}`` the share of
    markets where a profitable lie was found. Per dimension ``{d}`` (both directions
    searched), the same statistics of the per-market larger of the two:
    ``{stat}_regret_{d}``. Joint misreports (two dimensions at once, ``joint_{d1}{d2}``
    columns of :func:`evaluate` with ``joint=``): ``{stat}_regret_joint_{d1}{d2}``. Worst
    over the combos: ``worst_max_regret``, ``worst_{stat}_rel_regret``.

    IR: ``ir_rate`` (share of markets where some client ends below zero), its mean and
    largest size; budget: ``mean_balance`` (sum_i p_i: surplus > 0), ``deficit_rate`` (share
    of markets in deficit), ``surplus_rate``, ``mean_rel_deficit`` and
    ``mean_rel_imbalance``; ``mean_welfare`` (Eq. 5, true values) and ``participation``
    (share of clients that trade)."""
    level = max(float(per["utility_scale"].mean()), SCALE_FLOOR)
    out = {"markets": len(per), "utility_level": level}
    for dim, way in combos:
        r = per[f"regret_{dim}_{way}"]
        _statistics(r, "regret_", f"{dim}_{way}", level, out)
        out[f"share_regret_{dim}_{way}"] = float((r > 0).mean())
    for dim in DIMENSIONS:
        if all((dim, w) in combos for w in DIRECTIONS):
            both = np.maximum(per[f"regret_{dim}_over"], per[f"regret_{dim}_under"])
            _statistics(both, "regret_", dim, level, out)
    for col in per.columns:
        if col.startswith("regret_joint_"):
            _statistics(per[col], "regret_", col.removeprefix("regret_"), level, out)
    keys = [f"{d}_{w}" for d, w in combos]
    for stat in STATISTICS:
        out[f"worst_{stat}_rel_regret"] = max((out[f"{stat}_rel_regret_{k}"] for k in keys),
                                              default=0.0)
    out["worst_max_regret"] = max((out[f"max_regret_{k}"] for k in keys), default=0.0)
    out["ir_rate"] = float(per["ir_violated"].mean())
    out["ir_mean_violation"] = float(per["ir_violation"].mean())
    out["ir_max_violation"] = float(per["ir_violation"].max())
    out["ir_rel_violation"] = out["ir_mean_violation"] / level
    bal = per["balance"]
    out["mean_balance"] = float(bal.mean())
    out["deficit_rate"] = float((bal < -TOL * (1 + per["utility_scale"])).mean())
    out["surplus_rate"] = float((bal > TOL * (1 + per["utility_scale"])).mean())
    out["mean_rel_deficit"] = float(np.maximum(0.0, -bal).mean()) / level
    out["mean_rel_imbalance"] = float(np.abs(bal).mean()) / level
    out["mean_welfare"] = float(per["welfare"].mean())
    out["participation"] = float(per["participation"].mean())
    return out
