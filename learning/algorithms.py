"""Federated training with the mechanisms plugged in: one round loop, one function per
algorithm (Local, FedAvg, FedProx, Ditto, pFedGraph, iPFL, CPL).

Every algorithm reports, per round and client, accuracy, loss and the economic ledger (gain,
cost, payment, utility) into one tidy DataFrame. Baselines pay nothing; their utility is the
spec's (gain over the support of their aggregation row minus c_i times the number of others
that put weight on i).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch

from mechanisms import cpl, ipfl
from mechanisms.errors import MarketInputError

from . import data as data_mod
from . import models as models_mod
from .evaluate import evaluate
from .local import SGDConfig, sample_batches, train_lockstep, train_sequential
from .partition import partition

__all__ = ["ALGORITHMS", "ATTACKS", "TrainConfig", "TrainResult", "project_simplex", "run"]

ALGORITHMS = ("local", "fedavg", "fedprox", "ditto", "pfedgraph", "ipfl", "cpl", "lia",
              "oracle")
ATTACKS = ("none", "shuffle", "signflip", "same", "gaussian")


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
    seed: int = 0
    lockstep: bool = True

    def __post_init__(self):
        choices = {"algorithm": ALGORITHMS, "attack": ATTACKS, "roles": ("traders", "inclusive"),
                   "cpl_pricing": ("equilibrium", "uniform", "weighted", "full"),
                   "metric": ("l2sq", "cosine"), "rule": ipfl.RULES,
                   "lia_mode": ("central", "p2p")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise MarketInputError(name, f"is {getattr(self, name)!r}; choose one of "
                                             f"{allowed}")
        for name in ("clients", "rounds", "steps", "batch"):
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
        """Per client: final accuracies, cumulative ledger."""
        df = self.frame
        last = df[df["round"] == df["round"].max()].set_index("client")
        cum = df.groupby("client")[["gain", "cost", "payment", "utility"]].sum()
        out = last[["role", "acc_personalised", "acc_own", "loss"]].join(cum)
        return out.reset_index()

    def provenance(self) -> dict:
        return {"config": asdict(self.config), "seed_entropy": self.seed_entropy,
                "seconds": round(self.seconds, 3), "timings": self.timings}


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of v onto the probability simplex (closed form)."""
    v = np.atleast_2d(np.asarray(v, dtype=float))
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, v.shape[1] + 1)
    rho = (u - css / k > 0).sum(axis=1)
    theta = css[np.arange(v.shape[0]), rho - 1] / rho
    return np.maximum(v - theta[:, None], 0.0)


def _attack(kind: str, theta: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    if kind == "shuffle":
        return theta[torch.randperm(theta.numel(), generator=gen)]
    if kind == "signflip":
        return -theta
    if kind == "same":
        return torch.ones_like(theta)
    return torch.randn(theta.shape, generator=gen)


class _Run:
    def __init__(self, cfg: TrainConfig, progress=None):
        self.cfg, self.progress = cfg, progress
        ss = np.random.SeedSequence(cfg.seed)
        self.entropy = int(ss.entropy)
        _s_data, s_part, s_model, s_econ, s_batch, s_round = ss.spawn(6)
        self.batch_seed = s_batch
        self.train_calls = 0
        self.round_rng = np.random.default_rng(s_round)
        self.torch_gen = torch.Generator().manual_seed(int(s_round.generate_state(1)[0]))
        self.data = data_mod.load(cfg.dataset, cfg.data_dir, seed=cfg.seed, clients=cfg.clients)
        parts, self.cluster_of = partition(
            cfg.partition, self.data.y_train, cfg.clients, np.random.default_rng(s_part),
            beta=cfg.beta, s=cfg.skew_classes, n_clusters=cfg.n_clusters, beta_in=cfg.beta_in,
            groups=self.data.groups)
        # per-client train / validation / own-test split (80 / 10 / 10, at least 1 each)
        g = np.random.default_rng(s_part.spawn(1)[0])
        self.train_parts, self.val_parts, self.test_parts = [], [], []
        for p in parts:
            p = g.permutation(p)
            n_hold = max(1, len(p) // 10) if len(p) >= 3 else 0
            self.test_parts.append(np.sort(p[:n_hold]))
            self.val_parts.append(np.sort(p[n_hold:2 * n_hold]))
            self.train_parts.append(np.sort(p[2 * n_hold:]))
        self.N_true = np.array([len(p) for p in self.train_parts], dtype=float)
        classes = self.data.classes
        self.label_dist = np.stack([np.bincount(self.data.y_train[p], minlength=classes) / len(p)
                                    for p in self.train_parts])
        name = cfg.model
        if name == "auto":
            name = {"fashion-mnist": "simplecnn-mnist", "digits": "mlp"}.get(cfg.dataset,
                                                                              "logreg")
        torch.manual_seed(int(s_model.generate_state(1)[0]))
        self.model = models_mod.build(name, self.data.input_shape, classes)
        self.model_name = name
        self.params0 = models_mod.init_stacked(self.model, cfg.clients)
        self.theta0 = models_mod.flatten_params(self.params0)[0].double().numpy()
        self.X = torch.as_tensor(self.data.x_train)
        self.Y = torch.as_tensor(self.data.y_train)
        self.sgd = SGDConfig(cfg.steps, cfg.batch, cfg.lr, cfg.momentum, cfg.weight_decay)
        self._economics(np.random.default_rng(s_econ))
        self.timings = {"training": 0.0, "distances": 0.0, "clearing": 0.0, "prox": 0.0,
                        "evaluation": 0.0}
        self.extras: dict = {}

    # ------------------------------------------------------------------ setup
    def _economics(self, rng):
        cfg, m = self.cfg, self.cfg.clients
        if cfg.roles == "inclusive":
            roles = ["trader"] * 3 + ["buyer"] * 4 + ["seller"] * 4
            roles += ["attacker"] * (m - len(roles))
        else:
            roles = ["trader"] * m
            for a in range(cfg.attackers):
                roles[m - 1 - a] = "attacker"
        role = np.array(roles)
        K = np.where(np.isin(role, ["trader", "buyer"]), rng.uniform(cfg.K / 2, cfg.K, m), 0.0)
        c = np.where(role == "trader", rng.uniform(cfg.C / 2, cfg.C, m), 0.0)
        c = np.where(role == "buyer", np.inf, c)
        self.roles = tuple(roles)
        self.attackers = np.flatnonzero(role == "attacker")
        N_rep, c_rep = self.N_true.copy(), c.copy()
        if cfg.liar >= 0:
            N_rep[cfg.liar] *= cfg.liar_N
            c_rep[cfg.liar] *= cfg.liar_c
        self.N_rep = N_rep
        self.market = ipfl.Market(N=N_rep, c=c_rep, K=K, lam=cfg.lam, true_N=self.N_true,
                                  true_c=c)
        self.cpl_v = rng.exponential(cfg.cpl_v_mean, m) if cfg.cpl_v_mean > 0 else np.zeros(m)

    # ------------------------------------------------------------------ helpers
    def batch_rng(self, client: int, call: int) -> np.random.Generator:
        """Client ``client``'s batch stream for its ``call``-th local training: stateless, so
        a client running elsewhere (a Flower node) draws the same batches."""
        return np.random.default_rng(np.random.SeedSequence(
            self.batch_seed.entropy, spawn_key=(*self.batch_seed.spawn_key, client, call)))

    def train(self, params, centre=None, prox=None, active=None):
        t0 = time.perf_counter()
        call = self.train_calls
        self.train_calls += 1
        rngs = [self.batch_rng(i, call) for i in range(self.cfg.clients)]
        batches = sample_batches(self.train_parts, self.sgd, rngs)
        fn = train_lockstep if self.cfg.lockstep else train_sequential
        out = fn(self.model, params, self.X, self.Y, batches, self.sgd, centre, prox, active)
        self.timings["training"] += time.perf_counter() - t0
        return out

    def uploads(self, params) -> torch.Tensor:
        """What the server receives: the flattened models, attackers' replaced by attacks."""
        flat = models_mod.flatten_params(params).clone()
        if self.cfg.attack != "none":
            for a in self.attackers:
                flat[a] = _attack(self.cfg.attack, flat[a], self.torch_gen)
        return flat

    def broadcast(self, flat_row: torch.Tensor):
        m = self.cfg.clients
        return models_mod.unflatten_params(flat_row.unsqueeze(0).repeat(m, 1), self.params0)

    def baseline_ledger(self, W):
        u = ipfl.baseline_utilities(self.market, W)
        support = np.asarray(W) != 0
        np.fill_diagonal(support, False)
        gain = self.market.gain.value(support @ self.N_true, self.market.K, self.N_true)
        sold = support.sum(axis=0)
        cost = np.multiply(self.market.true_c, sold, out=np.zeros(len(sold)), where=sold > 0)
        return {"gain": gain, "cost": cost, "payment": np.zeros_like(u), "utility": u,
                "n_bought": support.sum(axis=1), "n_sold": sold}

    def fedavg_weights(self, mask=None):
        w = self.N_rep.copy() if mask is None else self.N_rep * mask
        return torch.as_tensor(w / w.sum(), dtype=torch.float32)


def _ledger_zero(m):
    z = np.zeros(m)
    return {"gain": z, "cost": z, "payment": z, "utility": z, "n_bought": z, "n_sold": z}


# ---------------------------------------------------------------------- algorithms
# Each is a generator: set up, then yield (params to evaluate, ledger, extra) once per round.


def _local(r: _Run):
    params = r.params0
    while True:
        params = r.train(params)
        yield params, _ledger_zero(r.cfg.clients), {}


def _fedavg(r: _Run, prox: float = 0.0):
    m = r.cfg.clients
    glob = models_mod.flatten_params(r.params0)[0]
    full = np.ones((m, m))
    while True:
        start = r.broadcast(glob)
        trained = r.train(start, centre=start if prox else None,
                          prox=np.full(m, prox) if prox else None)
        glob = r.fedavg_weights() @ r.uploads(trained)
        yield r.broadcast(glob), r.baseline_ledger(full), {}


def _ditto(r: _Run):
    m = r.cfg.clients
    glob = models_mod.flatten_params(r.params0)[0]
    personal = r.params0
    full = np.ones((m, m))
    while True:
        start = r.broadcast(glob)
        glob = r.fedavg_weights() @ r.uploads(r.train(start))
        centre = r.broadcast(glob)
        personal = r.train(personal, centre=centre, prox=np.full(m, r.cfg.prox_mu))
        yield personal, r.baseline_ledger(full), {}


def _pfedgraph(r: _Run):
    """pFedGraph: graph a_i = Proj_simplex(p + alpha * sim_i) (the closed form of its per-client
    QP), personalised aggregate theta_bar_i = sum_j a_ij theta_j, then local training from
    theta_bar_i. (The published method regularises with a cosine term; here an L2 proximal
    term to theta_bar_i of weight prox_mu.)"""
    m = r.cfg.clients
    params = r.train(r.params0)
    p = r.N_rep / r.N_rep.sum()
    while True:
        up = r.uploads(params).double().numpy()
        sim = 1.0 - ipfl.pairwise_distances(up, "cosine", reference=r.theta0)
        np.fill_diagonal(sim, 1.0)
        A = project_simplex(p[None, :] + r.cfg.pfedgraph_alpha * sim)
        agg = torch.as_tensor(A, dtype=torch.float32) @ torch.as_tensor(up, dtype=torch.float32)
        centre = models_mod.unflatten_params(agg, r.params0)
        params = r.train(centre, centre=centre, prox=np.full(m, r.cfg.prox_mu))
        yield params, r.baseline_ledger(A), {"graph": A}


def _ipfl(r: _Run):
    """Box 1: round 0 is local training; each later round uploads, distances, clearing,
    payments, prox-centres (Eq. 8) and proximal local training (Eq. 9). A client whose round
    utility is negative quits and keeps its best model so far (by own validation accuracy)."""
    cfg, m = r.cfg, r.cfg.clients
    params = r.train(r.params0)
    active = np.ones(m, dtype=bool)
    yield params, _ledger_zero(m), {"active": active.copy()}
    while True:
        t0 = time.perf_counter()
        up = r.uploads(params).double().numpy()
        D = ipfl.pairwise_distances(up, cfg.metric, reference=r.theta0)
        t1 = time.perf_counter()
        # quitting clients are kept out by index: their rows/columns cannot trade
        mk = r.market
        out = ipfl.clear(mk.replace(K=np.where(active, mk.K, 0.0),
                                    c=np.where(active, mk.c, np.inf)), D, rule=cfg.rule)
        t2 = time.perf_counter()
        centres = ipfl.prox_centres(up, out.adjacency, r.N_rep, cfg.eta, cfg.metric,
                                    reference=r.theta0)
        centre = models_mod.unflatten_params(torch.as_tensor(centres, dtype=torch.float32),
                                             r.params0)
        t3 = time.perf_counter()
        r.timings["distances"] += t1 - t0
        r.timings["clearing"] += t2 - t1
        r.timings["prox"] += t3 - t2
        ledger = {"gain": out.gains, "cost": out.gains - out.utilities - out.payments,
                  "payment": out.payments, "utility": out.utilities,
                  "n_bought": out.adjacency.sum(axis=1), "n_sold": out.adjacency.sum(axis=0)}
        quit_now = active & (out.utilities < -1e-9)
        active &= ~quit_now
        params = r.train(params, centre=centre, prox=np.full(m, cfg.lam / cfg.eta),
                         active=active)
        yield params, ledger, {"active": active.copy(), "adjacency": out.adjacency}


def _cpl(r: _Run):
    """CPL: participation q from the pricing game (equilibrium, uniform or weighted prices; or
    "full" q = 1), Bernoulli participation each round, unbiased aggregation. G_n is estimated
    from the gradient norms the clients report at the initial model."""
    cfg, m = r.cfg, r.cfg.clients
    glob = models_mod.flatten_params(r.params0)[0]
    G = _gradient_norms(r)
    a = r.N_rep / r.N_rep.sum()
    game = cpl.Game(a=a, G=G, c=np.full(m, cfg.cpl_c), v=r.cpl_v, budget=cfg.cpl_budget,
                    alpha=cfg.cpl_alpha, R=cfg.rounds, q_min=cfg.cpl_q_min)
    if cfg.cpl_pricing == "full":
        q = np.ones(m)
        prices = cpl.inverse_price(game, q)
    else:
        scheme = {"equilibrium": cpl.solve, "uniform": cpl.uniform_pricing,
                  "weighted": cpl.weighted_pricing}[cfg.cpl_pricing]
        eq = scheme(game)
        q, prices = np.array(eq.q), np.array(eq.prices)
    U_expected = cpl.client_utilities(game, prices, q)
    a_t = torch.as_tensor(a, dtype=torch.float32)
    q_t = torch.as_tensor(q, dtype=torch.float32)
    while True:
        S = r.round_rng.random(m) < q
        start = r.broadcast(glob)
        trained = r.train(start, active=S)
        up = r.uploads(trained)
        w = torch.as_tensor(S, dtype=torch.float32) * a_t / q_t
        glob = glob + w @ (up - glob)
        ledger = {"gain": np.zeros(m), "cost": cfg.cpl_c * q**2,
                  "payment": -prices * q, "utility": U_expected,
                  "n_bought": np.zeros(m), "n_sold": S.astype(float)}
        yield r.broadcast(glob), ledger, {"participated": S, "q": q}


@torch.no_grad()
def _gradient_norms(r: _Run) -> np.ndarray:
    from torch.func import functional_call, grad, vmap

    def loss(p, x, y):
        return torch.nn.functional.cross_entropy(functional_call(r.model, p, (x,)), y)

    idx = np.stack([r.batch_rng(i, 2**31 - 1).choice(p, size=r.cfg.batch)  # not a round
                    for i, p in enumerate(r.train_parts)])
    idx_t = torch.as_tensor(idx)
    with torch.enable_grad():
        g = vmap(grad(loss))(r.params0, r.X[idx_t], r.Y[idx_t])
    norms = torch.sqrt(sum((v.reshape(v.shape[0], -1) ** 2).sum(1) for v in g.values()))
    return norms.double().numpy().clip(min=1e-6)


def _clustered(r: _Run, oracle: bool):
    """pFedLIA (``oracle=False``): FedAvg warm-up, lazy influence scores, LIA clustering
    (mechanisms.lia), then FedAvg inside each cluster (re-clustering every ``lia_recluster``
    rounds if > 0). Oracle: the partition's ground-truth clusters from round 0."""
    from mechanisms import lia

    from .lia import influence_scores

    cfg, m = r.cfg, r.cfg.clients
    glob = models_mod.flatten_params(r.params0)[0]
    full = np.ones((m, m))
    warm = 0 if oracle else cfg.lia_warmup
    for _ in range(warm):
        glob = r.fedavg_weights() @ r.uploads(r.train(r.broadcast(glob)))
        yield r.broadcast(glob), r.baseline_ledger(full), {}

    def clusters(start_params):
        if oracle:
            if r.cluster_of is None:
                raise MarketInputError("partition", "oracle clustering needs a partition with "
                                                    "ground-truth groups (cluster, pairs)")
            return np.asarray(r.cluster_of), None
        rng = np.random.default_rng(r.round_rng.integers(2**63))
        t0 = time.perf_counter()
        I, _ = influence_scores(r.model, start_params, r.X, r.Y, r.train_parts, r.val_parts,
                                rng, k=cfg.lia_k, batch=cfg.batch, lr=cfg.lr)
        r.timings["influence"] = r.timings.get("influence", 0.0) + time.perf_counter() - t0
        sets = lia.cluster(I, "p2p")
        labels = lia.cluster(I, "central")
        return labels, (I, sets)

    labels, info = clusters(r.broadcast(glob))
    r.extras.update({"clusters": labels.tolist()})
    if info is not None:
        r.extras.update({"influence": info[0].tolist()})
    params = r.broadcast(glob)
    since = 0
    while True:
        if cfg.lia_mode == "p2p" and info is not None:
            member = info[1]
        else:
            member = labels[:, None] == labels[None, :]
        W = member * r.N_rep[None, :]
        W = W / W.sum(axis=1, keepdims=True)
        up = r.uploads(r.train(params))
        params = models_mod.unflatten_params(torch.as_tensor(W, dtype=torch.float32) @ up,
                                             r.params0)
        yield params, r.baseline_ledger(W), {"clusters": labels}
        since += 1
        if not oracle and cfg.lia_recluster and since % cfg.lia_recluster == 0:
            mean = torch.as_tensor(r.N_rep / r.N_rep.sum(), dtype=torch.float32) @ \
                models_mod.flatten_params(params)
            labels, info = clusters(r.broadcast(mean))


_DISPATCH = {"local": _local, "fedavg": _fedavg,
             "fedprox": lambda r: _fedavg(r, prox=r.cfg.prox_mu), "ditto": _ditto,
             "pfedgraph": _pfedgraph, "ipfl": _ipfl, "cpl": _cpl,
             "lia": lambda r: _clustered(r, oracle=False),
             "oracle": lambda r: _clustered(r, oracle=True)}


def run(cfg: TrainConfig, progress: Callable[[int, int], None] | None = None) -> TrainResult:
    """Train ``cfg.rounds`` rounds; ``progress(done, total)`` after each."""
    t0 = time.perf_counter()
    r = _Run(cfg, progress)
    gen = _DISPATCH[cfg.algorithm](r)
    rows = []
    best_val = np.full(cfg.clients, -1.0)
    for t in range(cfg.rounds):
        params, ledger, extra = next(gen)
        te = time.perf_counter()
        pers, own, loss = evaluate(r.model, params, r.data, r.label_dist, r.test_parts,
                                   r.X, r.Y)
        r.timings["evaluation"] += time.perf_counter() - te
        active = extra.get("active", np.ones(cfg.clients, bool))
        best_val = np.where(active, np.maximum(best_val, own), best_val)
        frame = pd.DataFrame({
            "algorithm": cfg.algorithm, "round": t, "client": np.arange(cfg.clients),
            "role": list(r.roles), "active": active,
            "acc_personalised": pers, "acc_own": own, "loss": loss,
            **{k: np.asarray(v, dtype=float) for k, v in ledger.items()},
        })
        if "participated" in extra:
            frame["participated"] = extra["participated"]
        rows.append(frame)
        if progress is not None:
            progress(t + 1, cfg.rounds)
    df = pd.concat(rows, ignore_index=True)
    return TrainResult(cfg, df, r.roles, r.entropy, time.perf_counter() - t0,
                       {k: round(v, 3) for k, v in r.timings.items()}, dict(r.extras))

