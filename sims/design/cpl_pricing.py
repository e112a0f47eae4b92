"""CPL pricing families: posted prices P_n = p x shape_n with the shape a product of powers of
the clients' public features,

    shape_n = a_n^alpha x G_n^beta x c_n^gamma

(a_n the data weight, G_n the gradient bound, c_n the cost), the scale p calibrated so that
the clients' exact best responses spend the budget (:func:`mechanisms.cpl.posted_pricing_batch`).
The built-in posted prices are points: uniform (0, 0, 0), weighted (1, 0, 0), gradient
(1, 1, 0). The measure is the server's objective (the convergence bound, lower is better)
relative to the Stackelberg equilibrium's (the larger of the two bounds as the scale) on the
same game (:func:`mechanisms.cpl.solve_batch`,
which no posted price can beat), on the checker's games of ``cpl_beats_baselines``
(:func:`proofs.batch.cpl_sampler`): how close a simple posted rule gets to the optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms import cpl
from proofs.batch import cpl_sampler

from .errors import DesignInputError
from .search import DesignResult, SearchConfig, minimise

__all__ = ["PostedShapeSpace", "design_pricing", "draw_games", "evaluate_pricing"]


@dataclass(frozen=True)
class PostedShapeSpace:
    """Exponents (alpha, beta, gamma) of a_n, G_n, c_n in the posted shape, each in
    ``bounds``."""

    bounds: tuple = ((-1.0, 2.0), (-1.0, 2.0), (-1.0, 1.0))
    names = ("alpha_a", "beta_G", "gamma_c")
    kind = "cpl-posted"

    def __post_init__(self):
        if len(self.bounds) != 3 or any(not lo <= hi for lo, hi in self.bounds):
            raise DesignInputError("bounds", f"is {self.bounds!r}; three (lo, hi), lo <= hi")

    @property
    def lower(self):
        return np.array([b[0] for b in self.bounds], dtype=float)

    @property
    def upper(self):
        return np.array([b[1] for b in self.bounds], dtype=float)

    def named_points(self) -> dict:
        pts = {"uniform": [0, 0, 0], "weighted": [1, 0, 0], "gradient": [1, 1, 0]}
        return {k: np.array(v, float) for k, v in pts.items()
                if np.all(np.array(v) >= self.lower) and np.all(np.array(v) <= self.upper)}

    def rule(self, theta, name: str = "posted"):
        """``shape(games) -> (B, n)`` for a :class:`mechanisms.cpl.GameBatch`."""
        t = np.asarray(theta, dtype=float)
        if t.shape != (3,) or not np.isfinite(t).all():
            raise DesignInputError("theta", f"is {theta!r}; three finite exponents")

        def shape(g):
            return g.a ** t[0] * g.G ** t[1] * g.c ** t[2]

        shape.__name__ = name
        return shape

    def to_json(self) -> dict:
        return {"kind": self.kind, "bounds": [list(b) for b in self.bounds]}


def draw_games(n: int, seed: int, key: str = "cpl_beats_baselines") -> list:
    """``n`` games (GameBatch per client count) from the checker's distribution of ``key``."""
    if not (isinstance(n, int) and n >= 1):
        raise DesignInputError("games", f"is {n!r}; must be an integer >= 1")
    sampler = cpl_sampler(key)
    return [sampler.games(d) for d in sampler.draw(np.random.default_rng(seed), n)]


def evaluate_pricing(shape, games) -> dict:
    """Mean, median and max relative excess of the posted price's objective over the
    equilibrium's, (posted - SE) / max(|posted|, |SE|) (0 when both are 0: a game whose
    equilibrium bound is 0 has no finite ratio), the share of clients lifted off the q_min floor,
    and the largest relative overspend (the calibration's residual; NaN counts as a
    failure)."""
    gaps, lifted, over = [], [], []
    for g in games:
        eq = cpl.solve_batch(g)
        post = cpl.posted_pricing_batch(g, shape(g))
        scale = np.maximum(np.abs(post.objective), np.abs(eq.objective))
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = np.where(scale > 0, (post.objective - eq.objective) / scale, 0.0)
        gaps.append(np.where(np.isnan(gap), np.inf, gap))
        lifted.append((post.q > g.q_min[:, None] * (1 + 1e-9)).mean(axis=1))
        over.append((post.spent - g.budget) / np.maximum(1.0, np.abs(g.budget)))
    gap, lift, ov = (np.concatenate(x) for x in (gaps, lifted, over))
    return {"games": int(gap.size), "mean_gap": float(gap.mean()),
            "median_gap": float(np.median(gap)), "max_gap": float(gap.max()),
            "participation": float(lift.mean()), "max_overspend": float(ov.max())}


def design_pricing(space: PostedShapeSpace, config: SearchConfig | None = None, *,
                   games=None, statistic: str = "mean_gap", state=None,
                   progress=None) -> DesignResult:
    """The posted shape that minimises ``statistic`` (mean_gap, median_gap or max_gap) on
    training games (``config.markets`` games with ``config.seed`` unless given)."""
    if statistic not in ("mean_gap", "median_gap", "max_gap"):
        raise DesignInputError("statistic", f"is {statistic!r}; mean_gap, median_gap, max_gap")
    config = SearchConfig() if config is None else config
    games = draw_games(config.markets, config.seed) if games is None else games

    def measure(theta):
        s = evaluate_pricing(space.rule(theta), games)
        return s[statistic], s["max_overspend"] <= 1e-6, s

    key = {"space": space.to_json(), "statistic": statistic, "config": repr(config),
           "games": sum(g.size for g in games)}
    return minimise(space, measure, config, key=key, goal=f"minimise {statistic} to the SE",
                    source=f"checker's CPL games (cpl_beats_baselines), seed {config.seed}",
                    state=state, progress=progress)
