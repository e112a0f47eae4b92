"""A small neural family of payment rules, trained RegretNet-style (Duetting et al., ICML 2019):
minimise the measured ex-post regret of every drawn liar, with misreports found in an inner
loop, under an individual-rationality penalty.

**The rule.** Per trade (buyer i bought seller j's model) the remittance is

    r_ij = w . f_ij + s_ij MLP(f_ij / s_ij),    s_ij = sum_k |f_ij,k| (a per-pair scale)

over the features of :func:`sims.design.space.pair_features` (marginal, average, cost,
distance, fee), computed by that one function; ``w`` starts at the paper's rule (Eq. 12) and
the MLP's last layer at zero, so training starts from the paper's rule. Remittances: budget
balanced by construction (Eq. 13). :meth:`NeuralRule.rule` freezes a trained network into a
numpy payment rule marked over_arrays, so the checker and the frontier clear it in bulk
like any other rule.

**Training** (declared differences from RegretNet): the selection is the paper's local rule
(discrete), so a misreport cannot be found by gradient ascent; the inner loop is the
checker's vectorised misreport search (:func:`proofs.batch.misreports_batch`) with the
current network, per type dimension and direction. Given the outcomes (truthful and
misreported adjacency, cleared by the bulk path), the liar's utilities are differentiable in
the network's weights (the payments are; the values are fixed by the outcome), and the loss

    mean over markets and (dimension, direction) of relu(U_liar(lie) - U_liar(truth))
    + ir_weight x mean relu(-U_i)

(in units of the utility level) is minimised with Adam. Seeded (``torch.manual_seed`` on a
private generator for the initial weights; the markets from the checker's sampler).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from mechanisms.gains import SqrtGain

from .errors import DesignInputError
from .evaluate import COMBOS, Markets, Mechanism, draw_markets, misreports_batch, over_arrays
from .space import FEATURES, pair_features

__all__ = ["NeuralConfig", "NeuralRule", "train"]

_GAIN = SqrtGain()


@dataclass(frozen=True)
class NeuralConfig:
    hidden: int = 16
    steps: int = 30
    lr: float = 0.02
    markets: int = 256
    seed: int = 0
    ir_weight: float = 10.0
    combos: tuple = COMBOS

    def __post_init__(self):
        for name in ("hidden", "steps", "markets"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise DesignInputError(name, f"is {v!r}; must be an integer >= 1")
        if not (self.lr > 0 and self.ir_weight >= 0):
            raise DesignInputError("lr", "lr must be > 0 and ir_weight >= 0")


class NeuralRule(torch.nn.Module):
    """w . f + s MLP(f / s) per trade (module docstring)."""

    def __init__(self, hidden: int = 16, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.linear = torch.nn.Linear(len(FEATURES), 1, bias=False, dtype=torch.float64)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(len(FEATURES), hidden, dtype=torch.float64), torch.nn.Tanh(),
            torch.nn.Linear(hidden, 1, dtype=torch.float64))
        with torch.no_grad():
            paper = torch.zeros(1, len(FEATURES), dtype=torch.float64)
            paper[0, FEATURES.index("marginal")] = 1.0
            paper[0, FEATURES.index("distance")] = 1.0
            self.linear.weight.copy_(paper)
            for layer in (self.mlp[0], self.mlp[2]):
                bound = 1.0 / np.sqrt(layer.in_features)
                layer.weight.copy_(torch.empty_like(layer.weight).uniform_(
                    -bound, bound, generator=gen))
                layer.bias.zero_()
            self.mlp[2].weight.zero_()  # starts as the paper's rule

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        s = f.abs().sum(-1, keepdim=True) + 1e-12
        return (self.linear(f) + s * self.mlp(f / s)).squeeze(-1)

    def payments(self, feats: dict, A) -> torch.Tensor:
        """(..., m) payments p_i = sum_j r_ij - sum_j r_ji of the trades in ``A``."""
        f = torch.from_numpy(np.stack([feats[k] for k in FEATURES], axis=-1))
        R = self(f) * torch.from_numpy(np.array(A, dtype=float))
        return R.sum(-1) - R.sum(-2)

    def rule(self, name: str = "neural"):
        """The network frozen into a numpy payment rule over arrays (remittances)."""
        state = {k: v.detach().clone() for k, v in self.state_dict().items()}
        frozen = NeuralRule(self.mlp[0].out_features)
        frozen.load_state_dict(state)

        def payments(market, A, D):
            feats = pair_features(market, A, D)
            f = torch.from_numpy(np.stack([feats[k] for k in FEATURES], axis=-1))
            with torch.no_grad():
                R = frozen(f).numpy()
            return np.where(np.asarray(A, dtype=bool), R, 0.0)

        payments.__name__ = payments.__qualname__ = name
        return over_arrays(payments)


def _market(N, c, K, lam):
    return SimpleNamespace(N=N, c=c, K=K, lam=lam, gain=_GAIN)


def train(config: NeuralConfig | None = None, *, markets: Markets | None = None,
          progress=None) -> tuple[NeuralRule, pd.DataFrame]:
    """Train a :class:`NeuralRule` on ``markets`` (default ``config.markets`` drawn from the
    checker's distribution with ``config.seed``); returns the network and a history (one row
    per step: loss, mean regret, IR penalty, seconds). ``progress(step, steps)``."""
    config = NeuralConfig() if config is None else config
    markets = draw_markets(config.markets, config.seed) if markets is None else markets
    model = NeuralRule(config.hidden, config.seed)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    rows, t0 = [], time.perf_counter()
    for step in range(config.steps):
        mech = Mechanism("neural", "local", model.rule())
        regrets, irs, level = [], [], []
        for g in markets.groups:
            honest = mech.settle(g["N"], g["c"], g["K"], g["lam"], g["D"])
            value = honest["U"] + honest["p"]  # true values of the truthful outcome
            p_h = model.payments(pair_features(_market(g["N"], g["c"], g["K"], g["lam"]),
                                               honest["A"], g["D"]), honest["A"])
            U_h = torch.from_numpy(np.array(value)) - p_h
            irs.append(torch.relu(-U_h).mean(-1))
            level.append(np.abs(honest["U"]).mean(axis=1))
            rows_i = np.arange(g["N"].shape[0])
            liar = np.array(g["client"])  # writable: torch indexes with it
            for dim, way in config.combos:
                found, _ = misreports_batch(mech.settle, dict(g), dim, way)
                rep = {d: np.array(g[d]) for d in ("N", "c", "K")}
                rep[dim][rows_i, liar] = found.report
                lied = mech.settle(rep["N"], rep["c"], rep["K"], g["lam"], g["D"],
                                   true_N=g["N"], true_c=g["c"], true_K=g["K"])
                v_m = torch.from_numpy(np.array((lied["U"] + lied["p"])[rows_i, liar]))
                p_m = model.payments(pair_features(_market(rep["N"], rep["c"], rep["K"],
                                                           g["lam"]), lied["A"], g["D"]),
                                     lied["A"])[rows_i, liar]
                regrets.append(torch.relu(v_m - p_m - U_h[rows_i, liar]))
        scale = max(float(np.concatenate(level).mean()), 1e-9)
        regret = torch.cat(regrets).mean() / scale
        ir = torch.cat(irs).mean() / scale
        loss = regret + config.ir_weight * ir
        opt.zero_grad()
        loss.backward()
        opt.step()
        rows.append({"step": step + 1, "loss": loss.item(), "mean_rel_regret": regret.item(),
                     "ir_penalty": ir.item(), "seconds": time.perf_counter() - t0})
        if progress is not None:
            progress(step + 1, config.steps)
    return model, pd.DataFrame(rows)
