"""One federation's state and the public per-round API that every algorithm, the runner
(:func:`learning.runner.run`) and the Flower apps (:mod:`learning.flower`) share.

A :class:`Session` builds, from a :class:`~learning.config.TrainConfig`, the data, the
partition (train / validation / own-test split per client), the model and its initial
parameters, the roles and economic types (:mod:`mechanisms.roles`) and the market
(:class:`mechanisms.ipfl.Market`). Its methods are the steps a round is made of:

=====================================  ==================================================
``train(params, centre, prox, active)``  one local-training call of every client at once
                                         (stacked params in, stacked params out); call
                                         number k draws client i's batches from stream
                                         ``batch_rng(i, k)``
``train_client(pid, start, centre,``     the same local training for ONE client, on flat
``prox, call)``                          numpy vectors (what a Flower ClientApp runs); with
                                         the same ``call`` it gives the same numbers as
                                         ``train``
``uploads(params)``                      (m, p) what the server receives: attackers'
                                         uploads replaced by their attack
``stack(flat)`` / ``flatten(params)``    (m, p) tensor <-> stacked parameter dict
``persist(params, up)``                  attackers keep their attacked upload as their
                                         own model (persistent attack)
``broadcast(flat_row)``                  one model to every client
``aggregate(flat, weights)``             sum_j w_ij theta_j (row-stochastic weights)
``unbiased_step(glob, up, S, q)``        CPL's unbiased aggregation
                                         (:func:`mechanisms.cpl.unbiased_aggregate`)
``gradient_norms()``                     (m,) gradient norm at the initial model (CPL's G_n)
``client_type(pid)``                     the type a client reports: {"N", "c", "K"}
``evaluate(params, pids=None)``          personalised and own-test accuracy, test loss
``validate(params, active)``             (m,) validation accuracy; remembers every active
                                         client's best model by it
``validation_losses(flat)``              (k, m) loss of k models on every validation split
``own_validation_losses(flat)``          (m,) loss of each client's model on its own split
``keep_best(params, who)``               the clients ``who`` get back their best model
                                         by validation accuracy (a quitter's model)
``baseline_ledger(W)`` / ``zero_ledger()``  the ledger of a non-market algorithm
``carry(initial)``                       the dict an algorithm keeps its round-to-round
                                         state in (checkpointed with the session)
``snapshot()`` / ``restore(state)``      everything a run carries between rounds, and back
=====================================  ==================================================

Every algorithm (:mod:`learning.algorithms`) is a generator ``rounds(session)`` that yields one
:class:`Round` (params to evaluate, ledger, extra) per round. An algorithm that keeps what it
carries from one round to the next in :meth:`Session.carry`'s dict, and yields as the last step
of its loop, can be checkpointed after any round and resumed with the same numbers
(:mod:`learning.checkpoint`); every built-in one does.
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np
import torch
from torch.func import functional_call, vmap

from mechanisms import cpl, ipfl
from mechanisms import roles as roles_mod
from mechanisms.ipfl.money import baseline_support

from . import data as data_mod
from . import models as models_mod
from .config import TrainConfig, torch_device
from .evaluate import accuracy_on_parts, chunk_size, evaluate, loss_on_parts
from .local import SGDConfig, sample_batches, train_lockstep, train_sequential
from .partition import partition

__all__ = ["ATTACKER_TYPES", "LEDGER", "Round", "Session", "on_cpu"]

LEDGER = ("gain", "cost", "payment", "utility", "n_bought", "n_sold")
# (K, c) of an attacker among traders (Fig. 4), reported and true, under every attack: the
# authors' attack clients gain nothing from a model and bear no cost; their utility is their
# net payment (0 under an algorithm without payments, learning.algorithms.UNPAID).
ATTACKER_TYPES = (0.0, 0.0)


def on_cpu(params) -> dict:
    """Stacked params on the CPU (the same tensors when already there)."""
    return {k: v.cpu() for k, v in params.items()}


class Round(NamedTuple):
    """What an algorithm yields each round: the stacked parameters each client is evaluated
    with, its ledger (arrays keyed by :data:`LEDGER`) and extra per-round information."""

    params: dict
    ledger: dict
    extra: dict


class Session:
    """Data, partition, model, roles and market of one run (see the module docstring)."""

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.clients = m = cfg.clients
        ss = np.random.SeedSequence(cfg.seed)
        self.entropy = int(ss.entropy)
        _s_data, s_part, s_model, s_econ, s_batch, s_round = ss.spawn(6)
        self.batch_seed = s_batch
        self.train_calls = 0
        self.round_rng = np.random.default_rng(s_round)
        self.data = self._prepare(data_mod.load(cfg.dataset, cfg.data_dir, seed=cfg.seed,
                                                clients=m), _s_data)
        parts, self.cluster_of = partition(
            cfg.partition, self.data.y_train, m, np.random.default_rng(s_part),
            beta=cfg.beta, s=cfg.skew_classes, n_clusters=cfg.n_clusters, beta_in=cfg.beta_in,
            groups=self.data.groups, cap=cfg.partition_cap)
        # per-client train / validation / own-test split (80 / 10 / 10, at least 1 each)
        g = np.random.default_rng(s_part.spawn(1)[0])
        self.train_parts, self.val_parts, self.test_parts = [], [], []
        for p in parts:
            p = g.permutation(p)
            n_hold = max(1, len(p) // 10) if len(p) >= 3 else 0
            self.test_parts.append(np.sort(p[:n_hold]))
            self.val_parts.append(np.sort(p[n_hold:2 * n_hold]))
            self.train_parts.append(np.sort(p[2 * n_hold:] if cfg.holdout else p))
        self.N_true = np.array([len(p) for p in self.train_parts], dtype=float)
        classes = self.data.classes
        self.label_dist = np.stack([np.bincount(self.data.y_train[p], minlength=classes) / len(p)
                                    for p in self.train_parts])
        name = cfg.model
        if name == "auto":
            name = models_mod.auto(cfg.dataset)
        torch.manual_seed(int(s_model.generate_state(1)[0]))
        self.model = models_mod.build(name, self.data.input_shape, classes)
        self.model_name = name
        self.params0 = models_mod.init_stacked(self.model, m)
        self.theta0 = models_mod.flatten_params(self.params0)[0].double().numpy()
        # training and evaluation run on cfg.device; the algorithms' tensors stay on the CPU
        # (every method below takes and returns CPU tensors)
        self.device = torch_device(cfg.device)
        self.model.to(self.device)
        self.X = torch.as_tensor(self.data.x_train).to(self.device)
        self.Y = torch.as_tensor(self.data.y_train).to(self.device)
        self.sgd = SGDConfig(cfg.steps, cfg.batch, cfg.lr, cfg.momentum, cfg.weight_decay)
        self._economics(np.random.default_rng(s_econ))
        self.timings = {"training": 0.0, "distances": 0.0, "clearing": 0.0, "prox": 0.0,
                        "evaluation": 0.0}
        self.extras: dict = {}
        self.best_val = np.full(m, -np.inf)
        self.best_params = self.params0
        self.carried: dict | None = None  # the algorithm's state (carry), once it asks
        self._restored: dict | None = None

    def _prepare(self, data, stream):
        """Input standardisation (``normalise``: Fashion-MNIST as the authors' transforms,
        (x - 0.5) / 0.5; other data sets by the full training set's per-channel mean and std)
        and the global test and training subsamples (``test_subsample``, ``train_subsample``)."""
        cfg = self.cfg
        changes = {}
        if cfg.normalise:
            axes = (0, *range(2, data.x_train.ndim))
            if cfg.dataset == "fashion-mnist":
                mean, std = 0.5, 0.5
            else:
                mean = data.x_train.mean(axis=axes, keepdims=True)
                std = data.x_train.std(axis=axes, keepdims=True) + 1e-8
            changes["x_train"] = ((data.x_train - mean) / std).astype(np.float32)
            changes["x_test"] = ((data.x_test - mean) / std).astype(np.float32)
        g = np.random.default_rng(stream)
        if 0 < cfg.test_subsample < data.y_test.size:
            pick = np.sort(g.choice(data.y_test.size, cfg.test_subsample, replace=False))
            changes["x_test"] = changes.get("x_test", data.x_test)[pick]
            changes["y_test"] = data.y_test[pick]
        if 0 < cfg.train_subsample < data.y_train.size:  # a uniform draw, classes as drawn
            pick = np.sort(g.choice(data.y_train.size, cfg.train_subsample, replace=False))
            changes["x_train"] = changes.get("x_train", data.x_train)[pick]
            changes["y_train"] = data.y_train[pick]
            if data.groups is not None:
                changes["groups"] = data.groups[pick]
        return dataclasses.replace(data, **changes) if changes else data

    def _economics(self, rng):
        """Roles and types (mechanisms.roles). In the inclusive market (Fig. 5) attackers have
        K = c = 0. Among traders (Fig. 4) an attacker is a client whose uploads are attacked,
        with gain scale K = 0 and cost c = 0, reported and true, under every attack (the
        authors' ``attack_ratio`` clients): its utility is its net payment. A ``same`` or
        ``gaussian`` attacker also does not train (its upload replaces its model anyway)."""
        cfg, m = self.cfg, self.clients
        if cfg.roles == "inclusive":
            roles = roles_mod.inclusive_roles(3, 4, 4, m - 11)
            K, c = roles_mod.draw_types(roles, cfg.K, cfg.C, rng)
        else:
            K, c = roles_mod.draw_types(["trader"] * m, cfg.K, cfg.C, rng,
                                        fixed=cfg.fixed_types)
        self.cpl_v = rng.exponential(cfg.cpl_v_mean, m) if cfg.cpl_v_mean > 0 else np.zeros(m)
        self.attack_rng = np.random.default_rng(rng.integers(2**63))
        if cfg.roles != "inclusive":
            roles = roles_mod.market_roles(m, attackers=cfg.attackers,
                                           placement=cfg.attacker_placement,
                                           rng=self.attack_rng)
        self.roles = tuple(roles)
        is_attacker = np.array(roles) == "attacker"
        self.attackers = np.flatnonzero(is_attacker)
        free = cfg.attack != "none" and roles_mod.attacker_is_free_rider(cfg.attack)
        self.free_riders = is_attacker & free & (cfg.roles != "inclusive")
        self.trains = ~self.free_riders
        if cfg.roles != "inclusive":
            K = np.where(is_attacker, ATTACKER_TYPES[0], K)
            c = np.where(is_attacker, ATTACKER_TYPES[1], c)
        N_rep, c_rep = self.N_true.copy(), c.copy()
        c_true = c.copy()
        if cfg.liar >= 0:
            N_rep[cfg.liar] *= cfg.liar_N
            c_rep[cfg.liar] *= cfg.liar_c
        self.N_rep = N_rep
        self.market = ipfl.Market(N=N_rep, c=c_rep, K=K, lam=cfg.lam, true_N=self.N_true,
                                  true_c=c_true)

    # ------------------------------------------------------------------ training
    def batch_rng(self, client: int, call: int) -> np.random.Generator:
        """Client ``client``'s batch stream for its ``call``-th local training: stateless, so
        a client running elsewhere (a Flower node) draws the same batches."""
        return np.random.default_rng(np.random.SeedSequence(
            self.batch_seed.entropy, spawn_key=(*self.batch_seed.spawn_key, client, call)))

    def train(self, params, centre=None, prox=None, active=None, cos_weight=None):
        """Local training of every client (stacked params); ``centre`` stacked prox-centres,
        ``prox`` (m,) weights of (prox / 2) ||theta - centre||^2, ``active`` (m,) bool (free
        riders never train), ``cos_weight`` (m,) weights of -cos(theta, centre)."""
        t0 = time.perf_counter()
        if not self.trains.all():
            active = self.trains if active is None else np.asarray(active) & self.trains
        call = self.train_calls
        self.train_calls += 1
        rngs = [self.batch_rng(i, call) for i in range(self.clients)]
        batches = sample_batches(self.train_parts, self.sgd, rngs, self.cfg.sampling)
        fn = train_lockstep if self.cfg.lockstep else train_sequential
        out = fn(self.model, self.on_device(params), self.X, self.Y, batches, self.sgd,
                 None if centre is None else self.on_device(centre), prox, active, cos_weight)
        self.timings["training"] += time.perf_counter() - t0
        return on_cpu(out)

    def on_device(self, params) -> dict:
        """Stacked params on the session's device (the same tensors on the CPU)."""
        return {k: v.to(self.device) for k, v in params.items()}

    def train_client(self, pid: int, start: np.ndarray, centre: np.ndarray | None = None,
                     prox: float = 0.0, call: int = 0) -> np.ndarray:
        """Client ``pid``'s local training from the flat model ``start`` toward ``centre``
        with weight ``prox``, its ``call``-th training; returns the trained flat model."""
        params = self._one(start)
        centre_p = params if centre is None else self._one(centre)
        batches = sample_batches([self.train_parts[pid]], self.sgd, [self.batch_rng(pid, call)],
                                 self.cfg.sampling)
        out = train_lockstep(self.model, self.on_device(params), self.X, self.Y, batches,
                             self.sgd, self.on_device(centre_p), np.array([float(prox)]))
        return models_mod.flatten_params(on_cpu(out))[0].double().numpy()

    def _one(self, flat) -> dict:
        return models_mod.unflatten_params(torch.as_tensor(flat, dtype=torch.float32)[None],
                                           self.params0)

    # ------------------------------------------------------------------ server side
    def flatten(self, params) -> torch.Tensor:
        return models_mod.flatten_params(params)

    def stack(self, flat) -> dict:
        """(m, p) flat models (tensor or array) -> stacked parameter dict."""
        return models_mod.unflatten_params(torch.as_tensor(flat, dtype=torch.float32),
                                           self.params0)

    def uploads(self, params) -> torch.Tensor:
        """What the server receives: the flattened models, attackers' replaced by attacks."""
        flat = models_mod.flatten_params(params).clone()
        if self.cfg.attack != "none":
            for a in self.attackers:
                flat[a] = torch.as_tensor(
                    roles_mod.attack(self.cfg.attack, flat[a].double().numpy(),
                                     self.attack_rng), dtype=flat.dtype)
        return flat

    def persist(self, params, up: torch.Tensor) -> dict:
        """``params`` with each attacker's model replaced by its attacked upload, so that the
        attack persists in the attacker's own model (Fig. 4)."""
        if self.cfg.attack == "none" or self.attackers.size == 0:
            return params
        who = np.zeros(self.clients, dtype=bool)
        who[self.attackers] = True
        return self.replace_rows(params, self.stack(up), who)

    def broadcast(self, flat_row: torch.Tensor) -> dict:
        return self.stack(torch.as_tensor(flat_row).unsqueeze(0).repeat(self.clients, 1))

    def aggregate(self, flat: torch.Tensor, weights) -> torch.Tensor:
        """Rows sum_j W_ij theta_j of the row-stochastic ``weights`` (one row: one model)."""
        return torch.as_tensor(np.asarray(weights), dtype=torch.float32) @ flat

    def fedavg_weights(self, mask=None) -> np.ndarray:
        """N_j / sum N over the clients in ``mask`` (reported data amounts)."""
        w = self.N_rep.copy() if mask is None else self.N_rep * mask
        return w / w.sum()

    def unbiased_step(self, glob: torch.Tensor, up: torch.Tensor, participated, q):
        """CPL's unbiased aggregation w + sum_{n in S} a_n / q_n (w_n - w)."""
        a = self.N_rep / self.N_rep.sum()
        new = cpl.unbiased_aggregate(glob.double().numpy(), up.double().numpy(),
                                     participated, a, q)
        return torch.as_tensor(new, dtype=torch.float32)

    @torch.no_grad()
    def gradient_norms(self) -> np.ndarray:
        """(m,) norm of each client's gradient at the initial model on one batch of its data
        (drawn from a stream no training call uses): CPL's G_n."""
        from torch.func import grad

        def loss(p, x, y):
            return torch.nn.functional.cross_entropy(functional_call(self.model, p, (x,)), y)

        idx = np.stack([self.batch_rng(i, 2**31 - 1).choice(p, size=self.cfg.batch)
                        for i, p in enumerate(self.train_parts)])
        dev = self.X.device  # (a Flower node calls this with its own model, params and data)
        idx_t = torch.as_tensor(idx, device=dev)
        params = {k: v.to(dev) for k, v in self.params0.items()}
        with torch.enable_grad():
            g = vmap(grad(loss))(params, self.X[idx_t], self.Y[idx_t])
        norms = torch.sqrt(sum((v.reshape(v.shape[0], -1) ** 2).sum(1) for v in g.values()))
        return norms.double().cpu().numpy().clip(min=1e-6)

    def client_type(self, pid: int) -> dict:
        """The type client ``pid`` reports to a market: data amount N, cost c, gain scale K."""
        return {"N": float(self.N_rep[pid]), "c": float(self.market.c[pid]),
                "K": float(self.market.K[pid])}

    def evaluate(self, params, pids=None):
        """(personalised accuracy, own-test accuracy, global test loss), each (len(pids),);
        ``params`` stacked in the order of ``pids`` (default: all clients)."""
        t0 = time.perf_counter()
        pids = list(range(self.clients)) if pids is None else list(pids)
        out = evaluate(self.model, self.on_device(params), self.data, self.label_dist[pids],
                       [self.test_parts[p] for p in pids], self.X, self.Y)
        self.timings["evaluation"] += time.perf_counter() - t0
        return out

    def validate(self, params, active=None) -> np.ndarray:
        """(m,) accuracy of each client's model on its own validation split; each ``active``
        client's best model by this accuracy is kept (:meth:`keep_best`)."""
        t0 = time.perf_counter()
        val = accuracy_on_parts(self.model, self.on_device(params), self.X, self.Y,
                                self.val_parts)
        better = np.nan_to_num(val, nan=-1.0) > self.best_val
        if active is not None:
            better &= np.asarray(active, dtype=bool)
        if better.any():
            self.best_val = np.where(better, np.nan_to_num(val, nan=-1.0), self.best_val)
            self.best_params = self.replace_rows(self.best_params, params, better)
        self.timings["evaluation"] += time.perf_counter() - t0
        return val

    @torch.no_grad()
    def validation_losses(self, flat) -> np.ndarray:
        """(k, m) mean cross-entropy of each of the k flat models on each client's validation
        split (all models on all splits, batched over models, in chunks of inputs)."""
        models = self.on_device(self.stack(flat))
        owner = np.concatenate([np.full(len(p), i) for i, p in enumerate(self.val_parts)])
        idx = torch.as_tensor(np.concatenate(self.val_parts), device=self.device)
        k = next(iter(models.values())).shape[0]
        chunk = chunk_size(self.model, self.X, k)
        f = vmap(lambda p, x: functional_call(self.model, p, (x,)), in_dims=(0, None))
        per = []
        for s in range(0, idx.numel(), chunk):
            i = idx[s:s + chunk]
            logits = f(models, self.X[i])
            per.append(torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), self.Y[i].expand(k, -1), reduction="none"))
        per = torch.cat(per, dim=1).double().cpu().numpy()
        counts = np.maximum(np.bincount(owner, minlength=self.clients), 1)
        return np.stack([np.bincount(owner, weights=row, minlength=self.clients) / counts
                         for row in per])

    def own_validation_losses(self, flat) -> np.ndarray:
        """(m,) mean cross-entropy of client i's flat model on its own validation split (the
        diagonal of :meth:`validation_losses`, at 1/m of its cost)."""
        return loss_on_parts(self.model, self.on_device(self.stack(flat)), self.X, self.Y,
                             self.val_parts)

    def keep_best(self, params, who) -> dict:
        """``params`` with the rows of the clients ``who`` (bool mask) replaced by their best
        model by validation accuracy so far."""
        return self.replace_rows(params, self.best_params, who)

    @staticmethod
    def replace_rows(params, source, who) -> dict:
        mask = torch.as_tensor(np.asarray(who, dtype=bool))
        return {k: torch.where(mask.view(-1, *([1] * (v.dim() - 1))), source[k], v)
                for k, v in params.items()}

    # ------------------------------------------------------------------ checkpoints
    def carry(self, initial) -> dict:
        """The dict in which an algorithm keeps what it carries from one round to the next
        (models, optimiser and aggregation state, its own random generators): ``initial()``
        (called only on a fresh start, so a setup that draws from :attr:`round_rng` draws
        once) or, in a run resumed from a checkpoint, the dict as it was after the last
        checkpointed round. The algorithm updates the dict in place before each yield and
        yields as the last step of its loop: resumed, it enters the loop at the top."""
        if self._restored is not None:
            self.carried, self._restored = self._restored, None
        else:
            self.carried = dict(initial())
        return self.carried

    def snapshot(self) -> dict:
        """Everything this session carries between rounds, for a checkpoint: the algorithm's
        carry, the training-call count (which picks every client's batch stream), the state
        of the round and attack generators and of torch's, the best models by validation
        accuracy, timings and extras. Taken while the algorithm waits at its yield."""
        state = {"carry": self.carried, "train_calls": self.train_calls,
                 "round_rng": self.round_rng.bit_generator.state,
                 "attack_rng": self.attack_rng.bit_generator.state,
                 "torch_rng": torch.get_rng_state(),
                 "best_val": self.best_val, "best_params": self.best_params,
                 "timings": self.timings, "extras": self.extras}
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return state

    def restore(self, state: dict) -> None:
        """Back to a :meth:`snapshot` (before the algorithm's generator starts: its
        :meth:`carry` then returns the snapshot's dict)."""
        self._restored = state["carry"]
        self.train_calls = state["train_calls"]
        self.round_rng.bit_generator.state = state["round_rng"]
        self.attack_rng.bit_generator.state = state["attack_rng"]
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        self.best_val = state["best_val"]
        self.best_params = state["best_params"]
        self.timings = state["timings"]
        self.extras = state["extras"]

    # ------------------------------------------------------------------ ledgers
    def zero_ledger(self) -> dict:
        z = np.zeros(self.clients)
        return dict.fromkeys(LEDGER, z)

    def baseline_ledger(self, W) -> dict:
        """A non-market algorithm's ledger: gain over the support of its aggregation rows W,
        cost c_i per other client whose row puts weight on i, no payment."""
        u = ipfl.baseline_utilities(self.market, W)
        support = baseline_support(self.market, W)
        gain = self.market.gain.value(support @ self.N_true, self.market.K, self.N_true)
        sold = support.sum(axis=0)
        cost = np.multiply(self.market.true_c, sold, out=np.zeros(len(sold)), where=sold > 0)
        return {"gain": gain, "cost": cost, "payment": np.zeros_like(u), "utility": u,
                "n_bought": support.sum(axis=1), "n_sold": sold}
