"""The paper's inclusive market (Fig. 5) at the mechanism level.

12 clients in four roles (spec, "Scenarios from the paper"):

=========  =================  ==================  =================================
role       gain scale K       sharing cost c      parameters uploaded
=========  =================  ==================  =================================
trader     U(K/2, K)          U(C/2, C)           its cluster's model + noise
buyer      U(K/2, K)          +inf (never sells)  its cluster's model + noise
seller     0 (never buys)     0                   its cluster's model + noise
attacker   0                  0                   an attack on an honest model
=========  =================  ==================  =================================

No model is trained here: each round every honest client uploads synthetic parameters, a
shared round model plus its cluster's offset plus its own noise, so clients of a cluster are
close to each other. The attacker uploads an attack of the spec (Gaussian N(0, 1) by default,
or shuffle / sign flip / all ones of an honest upload). The market is cleared every round with
:func:`mechanisms.ipfl.clear`; money and utilities accumulate. ``learning/`` replaces the
synthetic parameters with trained models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from mechanisms import ipfl, paper
from mechanisms import roles as roles_mod
from mechanisms.errors import MarketInputError, as_int, as_real, as_seed, check_size
from mechanisms.roles import ATTACKS

__all__ = ["ATTACKS", "InclusiveMarket", "InclusiveResult", "run_inclusive_market"]


@dataclass(frozen=True)
class InclusiveMarket:
    """Configuration of the Fig. 5 market; every default is the paper's where it has one.

    K, C, lam: the paper's CIFAR-10 cluster setting (K = 5e5, C = 1, lambda = 2).
    n_params: 44,426, the size of the paper's simplecnn-mnist model.
    cluster_scale, noise_scale: expected squared L2 distance contributed by a cluster offset
    and by a client's own noise (so two clients of one cluster sit about 2 * noise_scale apart,
    of different clusters about 2 * (cluster_scale + noise_scale)).
    """

    traders: int = 3
    buyers: int = 4
    sellers: int = 4
    attackers: int = 1
    rounds: int = 20
    K: float = paper.IPFL_K
    C: float = paper.IPFL_C
    lam: float = 2.0
    n_min: int = 300
    n_max: int = 700
    clusters: int = 3
    n_params: int = 44_426
    cluster_scale: float = 1.0
    noise_scale: float = 0.25
    attack: str = "gaussian"
    metric: str = "l2sq"
    rule: str = "local"
    thresholds: str = "exact"
    liar: int = -1  # client id of a liar (-1: none); the liar reports N x liar_N, c x liar_c
    liar_N: float = 1.0
    liar_c: float = 1.0
    seed: int = 0

    def __post_init__(self):
        for name in ("traders", "buyers", "sellers", "attackers"):
            as_int(name, getattr(self, name), lo=0, hi=100_000)
        if self.m < 2:
            raise MarketInputError("traders", "a market needs at least two clients in all")
        for name in ("rounds", "clusters", "n_params", "n_min", "n_max"):
            as_int(name, getattr(self, name), lo=1)
        as_int("liar", self.liar, lo=-1)
        as_seed("seed", self.seed)
        if self.n_max < self.n_min:
            raise MarketInputError("n_max", f"is {self.n_max}; must be >= n_min ({self.n_min})")
        for name in ("K", "C", "lam", "cluster_scale", "noise_scale"):
            as_real(name, getattr(self, name), lo=0)
        as_real("liar_N", self.liar_N, lo=0, lo_open=True)
        as_real("liar_c", self.liar_c, lo=0)
        check_size("n_params", 8.0 * self.n_params * (self.m + self.clusters + 1),
                   "the synthetic uploads of one round", "lower n_params")
        if self.attack not in ATTACKS:
            raise MarketInputError("attack", f"unknown {self.attack!r}; choose one of {ATTACKS}")
        if self.rule not in ipfl.RULES:
            raise MarketInputError("rule", f"unknown {self.rule!r}; choose one of {ipfl.RULES}")
        if self.thresholds not in ipfl.MODES:
            raise MarketInputError(
                "thresholds", f"unknown {self.thresholds!r}; choose one of {ipfl.MODES}"
            )
        if not -1 <= self.liar < self.m:
            raise MarketInputError("liar", f"is {self.liar}; must be -1 or a client id")
        if self.metric not in ("l2sq", "cosine"):
            raise MarketInputError("metric", f"unknown {self.metric!r}; use 'l2sq' or 'cosine'")

    @property
    def m(self) -> int:
        return self.traders + self.buyers + self.sellers + self.attackers

    def roles(self) -> list[str]:
        return list(roles_mod.inclusive_roles(self.traders, self.buyers, self.sellers,
                                              self.attackers))


@dataclass(frozen=True, eq=False)
class InclusiveResult:
    """Rounds (tidy: one row per round and client; ``round_welfare`` and
    ``round_operator_balance`` are the round's :attr:`mechanisms.ipfl.Outcome.welfare` and
    :attr:`~mechanisms.ipfl.Outcome.budget_surplus`, the same on each row of the round),
    cumulative flows and provenance."""

    config: InclusiveMarket
    market: ipfl.Market
    roles: tuple[str, ...]
    rounds: pd.DataFrame
    flows: np.ndarray  # (m, m) cumulative money client i paid client j
    bought: np.ndarray  # (m, m) rounds in which i bought j
    seed_entropy: int
    provenance: dict = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """One row per client: role, bought from, sold to, paid, earned, utility (cumulative)."""
        per = self.rounds.groupby("client").agg(
            paid=("paid", "sum"), earned=("earned", "sum"), utility=("utility", "sum")
        )
        ids = np.arange(len(self.roles))
        return pd.DataFrame(
            {
                "client": ids,
                "role": list(self.roles),
                "bought_from": [np.flatnonzero(self.bought[i]).tolist() for i in ids],
                "sold_to": [np.flatnonzero(self.bought[:, i]).tolist() for i in ids],
                "paid": per["paid"].to_numpy(),
                "earned": per["earned"].to_numpy(),
                "utility": per["utility"].to_numpy(),
            }
        )




def run_inclusive_market(
    config: InclusiveMarket | None = None,
    *,
    rule: Callable | None = None,
    payments: str | Callable = "paper",
    prices: str | Callable = "paper",
    progress: Callable[[int, int], None] | None = None,
) -> InclusiveResult:
    """Run the Fig. 5 market for ``config.rounds`` rounds; ``progress(done, total)`` per round.

    ``rule``: optionally a selection rule of your own, ``rule(market, D, thresholds, prices)
    -> adjacency``, used instead of ``config.rule``. ``payments`` and ``prices``: the payment
    and price rules (names or functions, see :func:`mechanisms.ipfl.clear`). Every mechanism
    goes through the same :func:`mechanisms.ipfl.clear`, so gains, payments and utilities are
    defined the same way for built-in and custom rules. A rule that returns payments directly
    has no client-to-client flows (``flows`` stays zero; money goes to/from the operator).

    The same seed gives the same numbers in any process: one SeedSequence is spawned into a
    stream for the types and one per round for the uploads.
    """
    cfg = config or InclusiveMarket()
    ss = np.random.SeedSequence(cfg.seed)
    types_ss, *round_ss = ss.spawn(cfg.rounds + 1)
    rng = np.random.default_rng(types_ss)
    roles = cfg.roles()
    m = cfg.m
    role = np.array(roles)
    N = rng.integers(cfg.n_min, cfg.n_max + 1, m).astype(float)
    K, c = roles_mod.draw_types(roles, cfg.K, cfg.C, rng)
    N_rep, c_rep = N.copy(), c.copy()
    if cfg.liar >= 0:
        N_rep[cfg.liar] *= cfg.liar_N
        c_rep[cfg.liar] *= cfg.liar_c
    market = ipfl.Market(N=N_rep, c=c_rep, K=K, lam=cfg.lam, true_N=N, true_c=c)
    cluster = rng.integers(0, cfg.clusters, m)
    p = cfg.n_params
    offsets = rng.standard_normal((cfg.clusters, p)) * np.sqrt(cfg.cluster_scale / p)
    theta0 = rng.standard_normal(p) * 0.05  # the initial model (reference for cosine)

    flows = np.zeros((m, m))
    bought = np.zeros((m, m), dtype=int)
    frames = []
    for t in range(cfg.rounds):
        r = np.random.default_rng(round_ss[t])
        shared = theta0 + r.standard_normal(p) * 0.05
        theta = shared + offsets[cluster] + r.standard_normal((m, p)) * np.sqrt(cfg.noise_scale / p)
        for a in np.flatnonzero(role == "attacker"):
            theta[a] = roles_mod.attack(cfg.attack, theta[(a + 1) % m], r)
        D = ipfl.pairwise_distances(theta, cfg.metric, reference=theta0)
        out = ipfl.clear(market, D, rule=cfg.rule if rule is None else rule,
                         payments=payments, prices=prices, thresholds=cfg.thresholds)
        frame = out.to_frame()
        if out.remittances is not None:
            flows += out.remittances
        bought += out.adjacency
        frame.insert(0, "round", t)
        frame.insert(2, "role", roles)
        # the round's totals as the clearing computed them (Eq. 5; sum_i p_i, signed), on
        # each of its rows: take one per round, never a sum over clients
        frame["round_welfare"] = out.welfare
        frame["round_operator_balance"] = out.budget_surplus
        frames.append(frame)
        if progress is not None:
            progress(t + 1, cfg.rounds)
    rounds = pd.concat(frames, ignore_index=True)
    return InclusiveResult(
        config=cfg,
        market=market,
        roles=tuple(roles),
        rounds=rounds,
        flows=flows,
        bought=bought,
        seed_entropy=int(ss.entropy),
        provenance={"config": asdict(cfg), "seed_entropy": int(ss.entropy), "m": m,
                    "rule": out.rule, "payments": out.payment_rule, "prices": out.price_rule},
    )
