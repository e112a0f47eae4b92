"""The search: scipy's differential evolution over a rule space, seeded and resumable.

Every candidate is cleared on the SAME training markets (common random numbers), so the
objective is a deterministic function of the parameters. The search state (population, its
scores, the random generator's state, the generation and every evaluation so far) is written
to a JSON state file after each generation; a search started with the same state file and
the same settings continues where it stopped and ends where an uninterrupted one ends
(tests/test_design.py checks it). Progress goes to a callback, never to the terminal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import differential_evolution

from .errors import DesignInputError
from .evaluate import Markets, draw_markets, evaluate
from .objective import Goal

__all__ = ["DesignResult", "SearchConfig", "design", "minimise"]


@dataclass(frozen=True)
class SearchConfig:
    """markets: training markets drawn from the checker's distribution (ignored when you pass
    markets of your own); seed: of those markets and of the search; generations and popsize:
    differential evolution's (population = popsize x parameters, at least 5); mutation: the
    range F is drawn from per trial; recombination: the crossover probability."""

    markets: int = 1000
    seed: int = 0
    generations: int = 20
    popsize: int = 5
    mutation: tuple = (0.5, 1.0)
    recombination: float = 0.7

    def __post_init__(self):
        for name in ("markets", "generations", "popsize"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise DesignInputError(name, f"is {v!r}; must be an integer >= 1")
        lo, hi = self.mutation
        if not (0 < lo <= hi <= 2):
            raise DesignInputError("mutation", f"is {self.mutation!r}; need 0 < lo <= hi <= 2")
        if not (0 <= self.recombination <= 1):
            raise DesignInputError("recombination", f"is {self.recombination!r}; in [0, 1]")
        if not (isinstance(self.seed, int) and self.seed >= 0):
            raise DesignInputError("seed", f"is {self.seed!r}; must be an integer >= 0")


@dataclass(frozen=True)
class DesignResult:
    """What a search returns: the best parameters (``theta``, by name in ``params``), their
    score and training summary, every evaluation (``archive``: one row per candidate, its
    parameters, score, feasibility and the measures), how it was computed (``config``,
    ``space``, ``goal``, ``markets``), ``generations`` run, ``evaluations`` and ``seconds``."""

    theta: np.ndarray
    params: dict
    score: float
    feasible: bool
    summary: dict
    archive: pd.DataFrame
    config: SearchConfig
    space: dict
    goal: str
    markets: str
    generations: int
    evaluations: int
    seconds: float
    stopped: str = "generations"
    extra: dict = field(default_factory=dict)


def _state_key(space, goal: Goal, config: SearchConfig, markets: Markets) -> dict:
    return {"space": space.to_json(), "goal": repr(goal), "config": asdict(config),
            "markets": markets.source}


def _best1bin(mutation, recombination):
    """DE's best1bin (best member + F (x_r1 - x_r2), binomial crossover), with F drawn per
    trial from ``mutation``, as a function of the population and the generator alone: scipy's
    built-in strategies keep a shuffled index inside the solver, which a state file cannot
    restore, so a resumed search would not continue the interrupted one."""
    lo_f, hi_f = mutation

    def strategy(candidate, population, rng=None):
        S, n = population.shape
        pick = rng.choice(S - 1, 2, replace=False)
        r1, r2 = np.where(pick >= candidate, pick + 1, pick)
        F = rng.uniform(lo_f, hi_f)
        mutant = population[0] + F * (population[r1] - population[r2])  # [0]: the best
        cross = rng.random(n) < recombination
        cross[rng.integers(n)] = True
        return np.where(cross, mutant, population[candidate])

    return strategy


def _initial(space, free, bounds, config, rng) -> np.ndarray:
    """Latin hypercube over the free parameters, its first rows replaced by the space's named
    points (the paper's rule, cost-plus, ...): the search starts from the known rules."""
    from scipy.stats import qmc

    n = max(5, config.popsize * int(free.sum()))
    lo, hi = np.array(bounds).T
    pop = qmc.scale(qmc.LatinHypercube(d=int(free.sum()), rng=rng).random(n), lo, hi)
    for k, point in enumerate(list(space.named_points().values())[: n - 1]):
        pop[k] = point[free]
    return pop


def design(space, goal: Goal, config: SearchConfig = SearchConfig(), *,
           markets: Markets | None = None, state: str | Path | None = None,
           progress: Callable[[dict], None] | None = None,
           search: dict | None = None) -> DesignResult:
    """Search ``space`` for the parameters that minimise ``goal.score`` on the training
    markets (``markets``, or ``config.markets`` drawn from the checker's distribution with
    ``config.seed``). ``state``: a JSON file to resume from and write after each generation.
    ``progress(info)`` after each generation (info: generation, generations, best score,
    evaluations, seconds). ``search``: options of the misreport search."""
    if markets is None:
        markets = draw_markets(config.markets, config.seed)

    def measure(theta):
        ev = evaluate(space.rule(theta), markets, combos=goal.combos, search=search)
        return goal.score(ev.summary), goal.feasible(ev.summary), {
            "seconds": ev.seconds, "clearings": ev.clearings, **ev.summary}

    return minimise(space, measure, config, key=_state_key(space, goal, config, markets),
                    goal=goal.describe(), source=markets.source, state=state,
                    progress=progress)


def minimise(space, measure: Callable, config: SearchConfig, *, key: dict, goal: str,
             source: str, state: str | Path | None = None,
             progress: Callable[[dict], None] | None = None) -> DesignResult:
    """The search behind :func:`design` for any measure: ``measure(theta) -> (score,
    feasible, summary dict)``, minimised over ``space``'s bounds by differential evolution
    (seeded by ``config.seed``). ``key`` identifies the search in the state file (a state
    written under another key is refused)."""
    t0 = time.perf_counter()
    lo, hi = space.lower, space.upper
    free = hi > lo
    if not free.any():
        raise DesignInputError("bounds", "every parameter is fixed (lo == hi); nothing to search")
    rows: list[dict] = []
    done, population, energies = 0, None, None
    rng = np.random.default_rng(config.seed)
    state = Path(state) if state is not None else None
    if state is not None and state.exists():
        try:
            saved = json.loads(state.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DesignInputError("state", f"{state}: {exc}") from exc
        if saved.get("key") != json.loads(json.dumps(key)):
            raise DesignInputError("state", f"{state} was written by a different search "
                                            "(space, goal, settings or markets differ); "
                                            "remove it or pick another state file")
        done, rows = int(saved["generation"]), list(saved["archive"])
        population = np.array(saved["population"], dtype=float)
        energies = np.array(saved["energies"], dtype=float)
        rng.bit_generator.state = saved["rng"]
    cache = {tuple(r["theta"]): r["score"] for r in rows}

    def full(x):
        theta = lo.copy()
        theta[free] = x
        return theta

    def objective(x):
        theta = full(np.asarray(x, dtype=float))
        k = tuple(theta.tolist())
        if k in cache:  # a resumed search re-scores its population without clearing again
            return cache[k]
        score, feasible, summary = measure(theta)
        score = float(score)
        if not np.isfinite(score):
            score = 1e300  # NaN or inf measures: the worst score, never a pass
        cache[k] = score
        rows.append({"theta": theta.tolist(), "score": score, "feasible": bool(feasible),
                     **summary})
        return score

    generation = [done]
    stopped = ["generations"]

    def callback(intermediate_result):
        generation[0] += 1
        if state is not None:
            tmp = state.with_suffix(state.suffix + ".tmp")
            tmp.write_text(json.dumps({
                "key": key, "generation": generation[0],
                "population": np.asarray(intermediate_result.population).tolist(),
                "energies": np.asarray(intermediate_result.population_energies).tolist(),
                "rng": rng.bit_generator.state, "archive": rows}, default=float))
            tmp.replace(state)
        if progress is not None:
            progress({"generation": generation[0], "generations": config.generations,
                      "best_score": float(intermediate_result.fun), "evaluations": len(rows),
                      "seconds": time.perf_counter() - t0})
        return False

    left = config.generations - done
    bounds = list(zip(lo[free], hi[free], strict=True))
    if left > 0:
        init = population if population is not None else _initial(space, free, bounds,
                                                                   config, rng)
        res = differential_evolution(
            objective, bounds, rng=rng, maxiter=left, popsize=config.popsize, init=init,
            strategy=_best1bin(config.mutation, config.recombination), polish=False,
            tol=0.0, atol=0.0, callback=callback, updating="immediate")
        best_x, best = res.x, float(res.fun)
    else:
        stopped[0] = "resumed after the last generation"
        k = int(np.argmin(energies))
        best_x, best = population[k], float(energies[k])
    theta = full(np.asarray(best_x, dtype=float))
    archive = pd.DataFrame(rows)
    match = archive[archive["theta"].apply(lambda t: np.allclose(t, theta, rtol=0, atol=0))]
    if len(match):
        summary = match.iloc[-1].drop(["theta", "score", "feasible"]).to_dict()
        feasible = bool(match.iloc[-1]["feasible"])
    else:
        _, feasible, summary = measure(theta)
    theta_cols = pd.DataFrame(archive["theta"].tolist(), columns=list(space.names))
    archive = pd.concat([theta_cols, archive.drop(columns="theta")], axis=1)
    summary.pop("seconds", None)
    summary.pop("clearings", None)
    return DesignResult(theta, dict(zip(space.names, theta.tolist(), strict=True)), best,
                        feasible, summary, archive, config, space.to_json(), goal, source,
                        generation[0], len(rows), time.perf_counter() - t0, stopped[0])
