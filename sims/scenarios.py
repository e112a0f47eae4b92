"""The scenario registry: each scenario is a frozen config (every default visible) and a
function that runs one cell (config, mechanism, seed) into a tidy DataFrame.

Mechanism-only scenarios take seconds (synthetic model parameters); learning scenarios train
on real data (minutes). A mechanism is a name the scenario knows, or, for the iPFL market
scenarios, any mechanism: a table ``{selection = "local", payments = "mymod:rule", prices =
"paper"}`` (each a built-in name or "module:function", see :func:`mechanisms.ipfl.clear`), the
same written ``"local+mymod:rule+paper"``, or "module:function" alone (a selection rule of your
own). For ``cpl-pricing``: a solver, a posted price of :data:`mechanisms.cpl.PRICING_RULES`,
"module:function" or ``{pricing = "mymod:rule"}`` (``rule(game) -> prices``). Every part is
imported and checked when the spec is read, before any cell runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd

from mechanisms import cpl, ipfl
from mechanisms.distances import METRICS
from mechanisms.errors import MarketInputError, as_choice, as_int, as_real, as_seed
from mechanisms.roles import ATTACKS

from .cpl_game import CplBenchmark
from .inclusive import InclusiveMarket, run_inclusive_market

__all__ = [
    "SCENARIOS",
    "Scenario",
    "cpl_pricing_rule",
    "ipfl_mechanism_name",
    "load_rule",
    "market_rules",
    "parse_ipfl_mechanism",
]


@dataclass(frozen=True)
class Scenario:
    """A scenario; ``config_factory`` returns its config class (called on first use, so that
    a learning scenario loads torch only when a cell of it runs)."""

    name: str
    kind: str  # "mechanism" | "learning"
    config_factory: Callable[[], type]
    mechanisms: tuple
    run: Callable[..., pd.DataFrame]  # run(config, mechanism, seed, progress=None)
    description: str
    # every mechanism name a cell may use (default: ``mechanisms``), read on first use
    accepts: Callable[[], tuple] | None = None
    custom_rules: bool = False  # any iPFL mechanism (selection + payments + prices) allowed
    pricing_rules: bool = False  # any CPL pricing rule allowed
    steps: str = "rounds"  # what run's progress(done, total) counts inside a cell

    def check_mechanism(self, mechanism) -> str:
        """The mechanism's canonical name if this scenario runs it; MarketInputError (naming
        the key: mechanism, selection, payments, prices or pricing) otherwise. Rules of your
        own are imported here, before any cell runs."""
        if self.custom_rules and (isinstance(mechanism, dict) or (
                isinstance(mechanism, str) and (":" in mechanism or "+" in mechanism))):
            return ipfl_mechanism_name(*parse_ipfl_mechanism(mechanism))
        if self.pricing_rules and (isinstance(mechanism, dict) or (
                isinstance(mechanism, str) and ":" in mechanism)):
            if isinstance(mechanism, dict):
                _table_keys(mechanism, ("pricing",))
                mechanism = mechanism.get("pricing")
                if not isinstance(mechanism, str):
                    raise MarketInputError("pricing", f"must be a name, got {mechanism!r}")
            cpl_pricing_rule(mechanism)
            return mechanism
        if not isinstance(mechanism, str):
            raise MarketInputError("mechanism", f"{mechanism!r} is not a name")
        known = self.accepts() if self.accepts is not None else self.mechanisms
        if self.kind == "learning" and mechanism not in known:
            from learning.algorithms import REGISTRY, get, plugins

            if mechanism not in REGISTRY and (":" in mechanism or mechanism in plugins()):
                try:  # an algorithm of your own, imported and checked here
                    get(mechanism)
                except MarketInputError as exc:
                    raise MarketInputError("mechanism", exc.message) from None
                return mechanism
        if mechanism not in known:
            extra = " or 'module:function'" if self.custom_rules else ""
            if self.kind == "learning":
                extra = " or an algorithm of your own ('module:attr' or an entry point)"
            raise MarketInputError("mechanism", f"unknown {mechanism!r} for scenario "
                                                f"{self.name!r}; choose one of {tuple(known)}"
                                                + extra)
        return mechanism

    @property
    def config(self) -> type:
        """The frozen config dataclass; its field defaults are the scenario's defaults."""
        return self.config_factory()

    def make_config(self, params: dict, seed: int):
        known = {f.name for f in fields(self.config)}
        unknown = set(params) - known - {"seed"}
        if unknown:
            raise MarketInputError("params", f"scenario {self.name!r} has no parameter(s) "
                                             f"{sorted(unknown)}; known: "
                                             f"{sorted(known - {'seed'})}")
        if "seed" in params:
            raise MarketInputError("params", "'seed' is not a parameter; list seeds in "
                                             "'seeds'")
        cfg = self.config(**params)
        return replace(cfg, seed=seed) if "seed" in known else cfg


IPFL_PARTS = ("selection", "payments", "prices")


def _table_keys(table: dict, allowed: tuple) -> None:
    for key in table:
        if key not in allowed:
            raise MarketInputError(str(key), f"unknown key in a mechanism table; allowed: "
                                             f"{allowed}")


def parse_ipfl_mechanism(mechanism) -> tuple[str, str, str]:
    """(selection, payments, prices) of an iPFL mechanism given as a table, as
    "selection+payments+prices" (trailing parts default to "paper") or as "module:function"
    (a selection rule); each part is resolved (imported) and checked here."""
    if isinstance(mechanism, dict):
        _table_keys(mechanism, IPFL_PARTS)
        parts = [mechanism.get("selection", "local"), mechanism.get("payments", "paper"),
                 mechanism.get("prices", "paper")]
    elif isinstance(mechanism, str):
        parts = mechanism.split("+")
        if len(parts) > 3 or not all(parts):
            raise MarketInputError("mechanism", f"{mechanism!r}: write selection[+payments"
                                                "[+prices]]")
        parts += ["paper"] * (3 - len(parts))
    else:
        raise MarketInputError("mechanism", f"{mechanism!r} is not a name or a table")
    for part, value in zip(IPFL_PARTS, parts, strict=True):
        if not isinstance(value, str):
            raise MarketInputError(part, f"must be a name or 'module:function', got {value!r}")
        try:
            ipfl.resolve("rule" if part == "selection" else part, value)
        except MarketInputError as exc:
            raise MarketInputError(part, exc.message) from None
    return tuple(parts)


def ipfl_mechanism_name(selection: str, payments: str = "paper", prices: str = "paper") -> str:
    """The canonical name: "selection+payments+prices" without trailing "paper" parts."""
    parts = [selection, payments, prices]
    while len(parts) > 1 and parts[-1] == "paper":
        parts.pop()
    return "+".join(parts)


def load_rule(spec: str) -> Callable:
    """Import "package.module:function" (a user's rule); errors name ``mechanism``."""
    return ipfl.load_callable(spec, "mechanism")


def cpl_pricing_rule(name: str) -> Callable:
    """A CPL pricing rule ``rule(game) -> prices`` by name: a built-in posted price of
    :data:`mechanisms.cpl.PRICING_RULES` or "module:function"."""
    if ":" in name:
        return ipfl.load_callable(name, "pricing")
    if name not in cpl.PRICING_RULES:
        raise MarketInputError("pricing", f"unknown CPL pricing {name!r}; choose one of "
                               f"{(*cpl.METHODS, *cpl.PRICING_RULES)} or 'module:function'")
    return cpl.PRICING_RULES[name]


def market_rules(cfg: InclusiveMarket, mechanism: str):
    """(config, rule keywords for :func:`run_inclusive_market`) of a mechanism name."""
    selection, payments, prices = parse_ipfl_mechanism(mechanism)
    rule = None
    if selection in ipfl.RULES:
        cfg = replace(cfg, rule=selection)
    else:
        rule = ipfl.resolve("rule", selection)[1]
    return cfg, {"rule": rule, "payments": payments, "prices": prices}


def _inclusive(cfg: InclusiveMarket, mechanism: str, seed: int,
               progress=None) -> pd.DataFrame:
    cfg, rules = market_rules(cfg, mechanism)
    res = run_inclusive_market(cfg, **rules, progress=progress)
    return res.rounds


@dataclass(frozen=True)
class LiarScenario:
    """Table 2: one trader misreports its data amount or cost; its TRUE cumulative utility
    against the honest run, with exact and published thresholds side by side."""

    kind: str = "size"  # "size" | "cost"
    factor: float = 10.0
    thresholds: str = "exact"
    rounds: int = 10
    n_params: int = 2000
    liar: int = 1  # trader 1: a trader that sells in the default market
    seed: int = 0

    def __post_init__(self):
        as_choice("kind", self.kind, ("size", "cost"))
        as_real("factor", self.factor, lo=0, lo_open=True)
        as_choice("thresholds", self.thresholds, ipfl.MODES)
        as_int("rounds", self.rounds, lo=1)
        as_int("n_params", self.n_params, lo=1)
        as_int("liar", self.liar, lo=0)
        as_seed("seed", self.seed)


def _liars(cfg: LiarScenario, mechanism: str, seed: int, progress=None) -> pd.DataFrame:
    """One row per round: the liar's utility in that round of the truthful run and of the
    lying run (``round_liar_utility_honest``, ``round_liar_utility_lying``), and on every row
    the cell's totals over the rounds (the liar's utilities, its gain, its buyers, the honest
    clients' smallest utility and total change): take one row per cell for those
    (:func:`sims.summary.last_rounds`)."""
    base = InclusiveMarket(rounds=cfg.rounds, n_params=cfg.n_params, seed=seed,
                           thresholds=cfg.thresholds)
    base, rules = market_rules(base, mechanism)
    lie = replace(base, liar=cfg.liar, liar_N=cfg.factor if cfg.kind == "size" else 1.0,
                  liar_c=cfg.factor if cfg.kind == "cost" else 1.0)
    # progress: the honest run's rounds, then the lying run's (2 x rounds in all)
    steps = 2 * cfg.rounds
    honest_run = run_inclusive_market(base, **rules, progress=None if progress is None else (
        lambda done, _total: progress(done, steps)))
    lied_run = run_inclusive_market(lie, **rules, progress=None if progress is None else (
        lambda done, _total: progress(cfg.rounds + done, steps)))
    honest, lied = honest_run.summary(), lied_run.summary()
    honest_ids = [i for i in range(len(lied)) if i != cfg.liar and lied.role[i] != "attacker"]
    others = lied.loc[honest_ids]
    totals = {
        "kind": cfg.kind, "factor": cfg.factor, "thresholds": cfg.thresholds,
        "liar_utility_honest": honest.utility[cfg.liar],
        "liar_utility_lying": lied.utility[cfg.liar],
        "liar_gain": lied.utility[cfg.liar] - honest.utility[cfg.liar],
        "liar_buyers": len(lied.sold_to[cfg.liar]),
        "honest_min_utility": others.utility.min(),
        "honest_total_change": others.utility.sum() - honest.loc[honest_ids].utility.sum(),
    }

    def per_round(run):
        r = run.rounds
        return r[r.client == cfg.liar].set_index("round").utility

    h, lied_u = per_round(honest_run), per_round(lied_run)
    return pd.DataFrame([{"round": t, **totals, "round_liar_utility_honest": h[t],
                          "round_liar_utility_lying": lied_u[t]} for t in range(cfg.rounds)])


@dataclass(frozen=True)
class AttackScenario:
    """Fig. 4 at the mechanism level: the attacker's earnings and buyers under each attack."""

    attack: str = "gaussian"
    metric: str = "l2sq"
    rounds: int = 10
    n_params: int = 2000
    seed: int = 0

    def __post_init__(self):
        as_choice("attack", self.attack, ATTACKS)
        as_choice("metric", self.metric, METRICS)
        as_int("rounds", self.rounds, lo=1)
        as_int("n_params", self.n_params, lo=1)
        as_seed("seed", self.seed)


def _attacks(cfg: AttackScenario, mechanism: str, seed: int, progress=None) -> pd.DataFrame:
    mk = InclusiveMarket(rounds=cfg.rounds, n_params=cfg.n_params, attack=cfg.attack,
                         metric=cfg.metric, seed=seed)
    mk, rules = market_rules(mk, mechanism)
    res = run_inclusive_market(mk, **rules, progress=progress)
    s = res.summary()
    att = s[s.role == "attacker"]
    honest = s[s.role != "attacker"]
    return pd.DataFrame([{"attack": cfg.attack, "metric": cfg.metric,
                          "attacker_earned": float(att.earned.sum()),
                          "attacker_buyers": int(sum(len(x) for x in att.sold_to)),
                          "honest_min_utility": float(honest.utility.min()),
                          "honest_mean_utility": float(honest.utility.mean())}])


def _cpl_pricing(cfg: CplBenchmark, mechanism: str, seed: int,
                 progress=None) -> pd.DataFrame:
    game = cfg.game()
    if mechanism == "cvxpy-linesearch" and progress is not None:  # steps: its grid points
        eq = cpl.solve(game, mechanism, progress=progress)
    elif mechanism in cpl.METHODS:
        eq = cpl.solve(game, mechanism)
    else:
        eq = cpl.apply_pricing(game, cpl_pricing_rule(mechanism), name=mechanism)
    return pd.DataFrame({"client": np.arange(game.n), "a": game.a, "G": game.G, "v": game.v,
                         "q": eq.q,
                         "price": eq.prices, "utility": eq.utilities, "budget": cfg.budget,
                         "objective_bound": eq.objective, "spent": eq.spent,
                         "status": eq.status,
                         "v_threshold": eq.v_threshold if eq.v_threshold is not None
                         else np.nan})


def _learning(cfg, mechanism: str, seed: int, progress=None, **kw) -> pd.DataFrame:
    """One training run (``kw``: the runner's ``checkpoint`` and ``log``)."""
    from learning.algorithms import run

    res = run(replace(cfg, algorithm=mechanism, seed=seed), progress=progress, **kw)
    df = res.frame.copy()
    if "clusters" in res.extras and res.extras.get("true_clusters") is not None:
        from mechanisms import lia

        df["ari"] = lia.adjusted_rand_index(res.extras["clusters"],
                                            res.extras["true_clusters"])
    df["seconds"] = res.seconds
    for k, v in res.timings.items():
        df[f"seconds_{k}"] = v
    return df


def _learning_config(preset: str = "corrected", **defaults) -> Callable[[], type]:
    """A factory of a TrainConfig subclass whose defaults are this scenario's: the ``preset``
    (learning.config.PRESETS: "corrected" or "published") and then ``defaults`` (torch loads
    when the factory is first called)."""

    @functools.cache
    def factory():
        from learning.algorithms import TrainConfig
        from learning.config import PRESETS

        merged = {**PRESETS[preset], **defaults}
        return dataclass(frozen=True)(type("Config", (TrainConfig,), {
            "__annotations__": {k: type(v) for k, v in merged.items()}, **merged}))

    return factory


# The reduced setting that fits this 2-core machine (docs/reproduction.md says what differs
# from the paper's: digits and an MLP instead of Fashion-MNIST/CIFAR-10 and their CNNs, 20
# rounds instead of 50, 50 local steps instead of 200). `fedmarket reproduce --setting full`
# runs the paper's sizes on Fashion-MNIST.
REDUCED = {"dataset": "digits", "clients": 10, "rounds": 20, "steps": 50, "batch": 64,
           "lr": 0.01}
NINE = ("local", "fedavg", "fedprox", "ditto", "fedamp", "cfl", "fedfomo", "pfedgraph", "ipfl")


def _algorithms() -> tuple:
    from learning.algorithms import ALGORITHMS

    return ALGORITHMS


def _registry():
    def fixed(cls):
        return lambda: cls

    return {s.name: s for s in [
        Scenario("inclusive-market", "mechanism", fixed(InclusiveMarket),
                 ("box2", "local", "exact"),
                 _inclusive, "Fig. 5: 3 traders, 4 buyers, 4 sellers, 1 attacker; per round "
                 "and client money and utility", lambda: ipfl.SELECTION_RULES,
                 custom_rules=True),
        Scenario("liars", "mechanism", fixed(LiarScenario), ("local",), _liars,
                 "Table 2: size x 0.1/0.5/10 and cost x 2/5/10, exact vs published thresholds",
                 lambda: ipfl.RULES, custom_rules=True),
        Scenario("attacks", "mechanism", fixed(AttackScenario), ("local",), _attacks,
                 "Fig. 4 at the mechanism level: the four attacks on uploaded parameters",
                 lambda: ipfl.RULES, custom_rules=True),
        Scenario("cpl-pricing", "mechanism", fixed(CplBenchmark),
                 ("bisection", "uniform", "weighted"), _cpl_pricing,
                 "CPL: equilibrium vs posted prices (budget as a parameter)",
                 lambda: (*cpl.METHODS, *cpl.PRICING_RULES), pricing_rules=True,
                 steps="line-search points"),
        Scenario("ipfl-learning", "learning",
                 _learning_config(dataset="digits", clients=6, rounds=4, steps=20, batch=32,
                                  lr=0.05, beta=0.5),
                 ("ipfl", "fedavg", "local", "ditto", "pfedgraph"), _learning,
                 "Fig. 2 on digits: accuracy and utility per algorithm", _algorithms),
        Scenario("fig2", "learning", _learning_config("published", **REDUCED), NINE,
                 _learning, "Fig. 2: accuracy and utility of iPFL and eight baselines "
                 "(published setup; partition as a parameter)"),
        Scenario("fig2-corrected", "learning", _learning_config("corrected", **REDUCED), NINE,
                 _learning, "Fig. 2 under our corrected defaults"),
        Scenario("fig4", "learning",
                 _learning_config("published", **{**REDUCED, "clients": 9,
                                                  "partition": "cluster", "lam": 2.0,
                                                  "attackers": 1}),
                 ("ipfl", "ditto", "pfedgraph", "cfl", "fedamp"), _learning,
                 "Fig. 4: one attacker among 9 clients (cluster partition); attack as a "
                 "parameter, 'none' = before the attack"),
        Scenario("fig5-learning", "learning",
                 _learning_config("published", **{**REDUCED, "clients": 12,
                                                  "partition": "cluster", "lam": 2.0,
                                                  "roles": "inclusive",
                                                  "attack": "gaussian"}),
                 ("ipfl",), _learning, "Fig. 5 with training: the inclusive market with its "
                 "attacker active"),
        Scenario("liars-learning", "learning",
                 _learning_config("published", **{**REDUCED, "lam": 2.0, "liar": 0}),
                 ("ipfl",), _learning, "Table 2 with training: client 0 reports its cost "
                 "x liar_c or its data x liar_N (1 = truthful); its true utility"),
        Scenario("ipfl-lambda", "learning", _learning_config("published", **REDUCED),
                 ("ipfl", "local"), _learning, "iPFL against Local as lambda grows"),
        Scenario("lia-vs-oracle", "learning",
                 _learning_config(dataset="digits", partition="pairs", n_clusters=4,
                                  clients=12, rounds=5, steps=20, batch=32, lr=0.05,
                                  lia_warmup=2),
                 ("lia", "oracle", "fedavg", "local"), _learning,
                 "LIA's synthetic check on digits: clusters (ARI) and accuracy", _algorithms),
    ]}


SCENARIOS = _registry()
