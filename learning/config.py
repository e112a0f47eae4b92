"""The configuration of a training run and its result (:func:`learning.runner.run`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from mechanisms import ipfl, roles
from mechanisms.errors import MarketInputError

__all__ = ["ATTACKS", "TrainConfig", "TrainResult"]

ATTACKS = ("none", *roles.ATTACKS)


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a run, with the paper's values as defaults where it gives them."""

    algorithm: str = "ipfl"
    dataset: str = "digits"
    data_dir: str | None = None
    partition: str = "niid"
    beta: float = 0.1
    beta_in: float = 10.0
    n_clusters: int = 3
    skew_classes: int = 2
    clients: int = 10
    rounds: int = 10
    model: str = "auto"
    steps: int = 200
    batch: int = 64
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 1e-5
    # iPFL economics (spec: K = 5e5, C = 1, eta = 5; lambda 0.001 for Fashion-MNIST NIID)
    K: float = 5e5
    C: float = 1.0
    lam: float = 0.001
    eta: float = 5.0
    metric: str = "cosine"
    rule: str = "local"
    roles: str = "traders"  # or "inclusive": 3 traders, 4 buyers, 4 sellers, rest attackers
    attack: str = "none"
    attackers: int = 0
    liar: int = -1  # client id of a liar (-1: none)
    liar_N: float = 1.0  # reported N = true N x liar_N
    liar_c: float = 1.0  # reported c = true c x liar_c
    # baselines
    prox_mu: float = 0.01  # FedProx and Ditto proximal weight
    pfedgraph_alpha: float = 0.8
    # CPL (spec cpl.md benchmark: c = 5, v ~ Exp(100), B = 15, alpha = 1.82, q_min = 0.01)
    cpl_pricing: str = "equilibrium"  # | "uniform" | "weighted" | "full"
    cpl_budget: float = 15.0
    cpl_c: float = 5.0
    cpl_v_mean: float = 100.0
    cpl_alpha: float = 1.82
    cpl_q_min: float = 0.01
    # pFedLIA (spec lia.md): FedAvg warm-up rounds, k lazy epochs, re-cluster every R rounds
    lia_warmup: int = 5
    lia_k: int = 5
    lia_recluster: int = 0
    lia_mode: str = "central"
    # quitting is opt-in (off in the authors' runs); a quitter keeps its best model so far by
    # its own validation accuracy
    allow_quit: bool = False
    # evaluate on the test sets every k rounds (and always in the last round); validation
    # accuracy, which picks a quitter's model, is measured every round
    evaluate_every: int = 1
    seed: int = 0
    lockstep: bool = True

    def __post_init__(self):
        from .algorithms import ALGORITHMS

        choices = {"algorithm": ALGORITHMS, "attack": ATTACKS, "roles": ("traders", "inclusive"),
                   "cpl_pricing": ("equilibrium", "uniform", "weighted", "full"),
                   "metric": ("l2sq", "cosine"), "rule": ipfl.RULES,
                   "lia_mode": ("central", "p2p")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise MarketInputError(name, f"is {getattr(self, name)!r}; choose one of "
                                             f"{allowed}")
        for name in ("clients", "rounds", "steps", "batch", "evaluate_every"):
            if int(getattr(self, name)) < 1:
                raise MarketInputError(name, f"is {getattr(self, name)!r}; must be >= 1")
        for name in ("lr", "eta", "liar_N"):
            if not float(getattr(self, name)) > 0:
                raise MarketInputError(name, f"is {getattr(self, name)!r}; must be > 0")
        for name in ("K", "C", "lam", "prox_mu", "momentum", "weight_decay", "liar_c"):
            if not float(getattr(self, name)) >= 0:
                raise MarketInputError(name, f"is {getattr(self, name)!r}; must be >= 0")
        if not 0 <= self.attackers < self.clients:
            raise MarketInputError("attackers", f"is {self.attackers}; must lie in "
                                                f"[0, clients)")
        if self.attack != "none" and self.attackers == 0 and self.roles != "inclusive":
            raise MarketInputError("attackers", "an attack needs attackers >= 1")
        if self.roles == "inclusive" and self.clients < 12:
            raise MarketInputError("clients", "the inclusive market needs >= 12 clients")
        if not -1 <= self.liar < self.clients:
            raise MarketInputError("liar", f"is {self.liar}; must be -1 or a client id")


@dataclass(frozen=True, eq=False)
class TrainResult:
    config: TrainConfig
    frame: pd.DataFrame
    roles: tuple
    seed_entropy: int
    seconds: float
    timings: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)  # e.g. LIA's influence matrix and clusters

    def final(self) -> pd.DataFrame:
        """Per client: last-round accuracies (``acc_personalised``, ``acc_own``), the best
        personalised accuracy over the rounds as the iPFL authors report it
        (``acc_personalised_best``), and the cumulative ledger."""
        df = self.frame
        last = df[df["round"] == df["round"].max()].set_index("client")
        cum = df.groupby("client")[["gain", "cost", "payment", "utility"]].sum()
        out = last[["role", "acc_personalised", "acc_personalised_best", "acc_own",
                    "loss"]].join(cum)
        return out.reset_index()

    def provenance(self) -> dict:
        return {"config": asdict(self.config), "seed_entropy": self.seed_entropy,
                "seconds": round(self.seconds, 3), "timings": self.timings}
