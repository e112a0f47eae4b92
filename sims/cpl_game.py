"""The CPL benchmark game (spec cpl.md, "Experimental settings") and comparisons.

The authors' benchmark: N = 40 clients, samples per client lognormal(4, 2) + 50, c_n = 5,
v_n ~ Exp(mean 100), B = 15, alpha = 1.82 (MNIST), R = 200, q_min = 0.01, q_max = 1. The
gradient-norm bounds G_n are estimated from training in the paper (one per client); with no
training here they are drawn per client, lognormal with mean ``G`` and spread ``G_spread``
(``G_spread = 0``: the same G for every client).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from mechanisms import cpl, paper
from mechanisms.errors import MarketInputError, as_int, as_real, as_seed

__all__ = ["CplBenchmark", "budget_sweep", "compare_pricing"]


@dataclass(frozen=True)
class CplBenchmark:
    clients: int = 40
    size_mu: float = 4.0
    size_sigma: float = 2.0
    size_offset: float = 50.0
    c: float = paper.CPL_C
    v_mean: float = paper.CPL_V_MEAN
    G: float = 1.0
    G_spread: float = 0.5
    budget: float = paper.CPL_BUDGET
    alpha: float = paper.CPL_ALPHA
    R: int = paper.CPL_R
    q_min: float = paper.CPL_Q_MIN
    q_max: float = paper.CPL_Q_MAX
    seed: int = 0

    def __post_init__(self):
        as_int("clients", self.clients, lo=1, hi=10_000_000)
        as_int("R", self.R, lo=1)
        as_seed("seed", self.seed)
        for name in ("c", "v_mean", "G", "G_spread", "size_sigma", "size_offset"):
            as_real(name, getattr(self, name), lo=0)
        as_real("size_mu", self.size_mu)
        for name in ("budget", "alpha", "q_min", "q_max"):
            as_real(name, getattr(self, name))  # finite here; the Game checks the ranges

    def game(self) -> cpl.Game:
        rng = np.random.default_rng(np.random.SeedSequence(self.seed))
        d = rng.lognormal(self.size_mu, self.size_sigma, self.clients) + self.size_offset
        v = rng.exponential(self.v_mean, self.clients) if self.v_mean > 0 else np.zeros(
            self.clients)
        # per-client gradient bounds G_n = G exp(s z - s^2/2) (mean G, lognormal spread s),
        # drawn from their own stream so that sizes and values do not move with s
        z = np.random.default_rng(np.random.SeedSequence(self.seed).spawn(1)[0]).standard_normal(
            self.clients)
        G = self.G * np.exp(self.G_spread * z - 0.5 * self.G_spread**2)
        return cpl.Game(a=d, G=G, c=np.full(self.clients, self.c),
                        v=v, budget=self.budget, alpha=self.alpha, R=self.R,
                        q_min=self.q_min, q_max=self.q_max)

    def provenance(self) -> dict:
        return {"config": asdict(self), "seed_entropy": int(np.random.SeedSequence(
            self.seed).entropy)}


SCHEMES: dict[str, Callable] = {
    "bisection": lambda g, pts, progress=None: cpl.solve(g, "bisection"),
    "cvxpy": lambda g, pts, progress=None: cpl.solve(g, "cvxpy"),
    "cvxpy-linesearch": lambda g, pts, progress=None: cpl.solve(
        g, "cvxpy-linesearch", points=pts, progress=progress),
    "uniform": lambda g, pts, progress=None: cpl.uniform_pricing(g),
    "weighted": lambda g, pts, progress=None: cpl.weighted_pricing(g),
    "gradient": lambda g, pts, progress=None: cpl.gradient_pricing(g),
}


def compare_pricing(game: cpl.Game, *, points: int = 400, schemes=None,
                    progress: Callable[[str, int, int], None] | None = None):
    """Solve ``game`` with every scheme; returns (table, {name: Equilibrium}).

    The cvxpy methods' guards (size, line-search grid) are checked before the first scheme
    runs. ``progress(scheme, done, total)``: (scheme, 0, 1) as each scheme starts, and per
    grid point of the line search (one cvxpy solve each, the long part at large n).
    """
    schemes = list(schemes or SCHEMES)
    for name in schemes:
        if name not in SCHEMES:
            raise MarketInputError("schemes", f"unknown {name!r}; choose from "
                                              f"{list(SCHEMES)}")
        if name in cpl.METHODS:
            cpl.check_solve(game, name, **({"points": points} if name == "cvxpy-linesearch"
                                           else {}))
    rows, results = [], {}
    for name in schemes:
        if progress is not None:
            progress(name, 0, 1)
        t0 = time.perf_counter()
        eq = SCHEMES[name](game, points, progress=None if progress is None else (
            lambda d, t, name=name: progress(name, d, t)))
        wall = time.perf_counter() - t0
        results[name] = eq
        rows.append({
            "scheme": name,
            "objective_bound": eq.objective,
            "spent": eq.spent,
            "negative_prices": eq.n_negative_prices,
            "client_utility_sum": float(eq.utilities.sum()),
            "status": eq.status,
            "seconds": wall,
        })
    return pd.DataFrame(rows), results


def budget_sweep(game: cpl.Game, budgets, schemes=("bisection", "uniform", "weighted")):
    """Objective bound against the budget B for each scheme (tidy: one row per B, scheme)."""
    rows = []
    for B in np.asarray(budgets, dtype=float):
        g = game.replace(budget=float(B))
        for name in schemes:
            try:
                eq = SCHEMES[name](g, 0)
            except cpl.BudgetInfeasible:
                continue
            rows.append({"budget": float(B), "scheme": name, "objective_bound": eq.objective,
                         "client_utility_sum": float(eq.utilities.sum())})
    return pd.DataFrame(rows)
