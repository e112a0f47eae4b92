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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import differential_evolution

from .errors import DesignInputError
from .evaluate import Markets, draw_markets, evaluate
from .objective import Goal

__all__ = ["METHODS", "DesignResult", "SearchConfig", "design", "minimise"]

METHODS = ("feasibility", "lagrangian")


@dataclass(frozen=True)
class SearchConfig:
    """markets: training markets drawn from the checker's distribution (ignored when you pass
    markets of your own); seed: of those markets and of the search; generations and popsize:
    differential evolution's (population = popsize x parameters, at least 5); mutation: the
    range F is drawn from per trial; recombination: the crossover probability.

    method: how the constraints enter. "feasibility": Deb's rule (:meth:`Goal.score`: every
    rule meeting them beats every rule that does not). "lagrangian": the augmented Lagrangian
    (:meth:`Goal.lagrangian`) over ``stages`` stages of ``generations`` generations each, the
    population carried from stage to stage; after a stage, lambda_k += rho g_k(best) and rho
    is multiplied by ``rho_growth`` unless the best's total violation fell below a quarter
    of the previous stage's (the textbook update, Nocedal & Wright, Alg. 17.4)."""

    markets: int = 1000
    seed: int = 0
    generations: int = 20
    popsize: int = 5
    mutation: tuple = (0.5, 1.0)
    recombination: float = 0.7
    method: str = "feasibility"
    stages: int = 4
    rho: float = 10.0
    rho_growth: float = 10.0

    def __post_init__(self):
        if self.method not in METHODS:
            raise DesignInputError("method", f"is {self.method!r}; choose from {METHODS}")
        if not (isinstance(self.stages, int) and not isinstance(self.stages, bool)
                and self.stages >= 1):
            raise DesignInputError("stages", f"is {self.stages!r}; must be an integer >= 1")
        for name in ("rho", "rho_growth"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and 0 < v < float("inf")):
                raise DesignInputError(name, f"is {v!r}; must be a finite number > 0")
        if self.rho_growth < 1:
            raise DesignInputError("rho_growth", f"is {self.rho_growth!r}; must be >= 1")
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
           search: dict | str | None = None) -> DesignResult:
    """Search ``space`` for the parameters that minimise ``goal.score`` on the training
    markets (``markets``, or ``config.markets`` drawn from the checker's distribution with
    ``config.seed``). ``state``: a JSON file to resume from and write after each generation.
    ``progress(info)`` after each generation (info: generation, generations, best score,
    evaluations, seconds). ``search``: the misreport search (a name of
    :data:`proofs.regret.SEARCHES` or its options; default
    :data:`sims.design.evaluate.DEFAULT_SEARCH`)."""
    if markets is None:
        markets = draw_markets(config.markets, config.seed)
    measured: dict = {}  # theta -> summary: a rule is cleared once, whatever it is scored by

    def summary_of(theta):
        k = tuple(np.asarray(theta, dtype=float).tolist())
        if k not in measured:
            ev = evaluate(space.rule(theta), markets, combos=goal.combos, search=search,
                          joint=goal.joint_pairs)
            measured[k] = {"seconds": ev.seconds, "clearings": ev.clearings, **ev.summary}
        return measured[k]

    key = _state_key(space, goal, config, markets)
    if search is not None:
        key["search"] = search
    if config.method == "feasibility":
        def measure(theta):
            s = summary_of(theta)
            return goal.score(s), goal.feasible(s), s

        return minimise(space, measure, config, key=key, goal=goal.describe(),
                        source=markets.source, state=state, progress=progress)
    return _lagrangian(space, goal, config, summary_of, key, markets.source, state, progress)


def _scored_by(goal, summary_of, multipliers: dict, rho: float) -> Callable:
    """The measure of one stage: its rules scored by the augmented Lagrangian with these
    (fixed) multipliers and penalty weight."""
    def measure(theta):
        s = summary_of(theta)
        return goal.lagrangian(s, multipliers, rho), goal.feasible(s), s

    return measure


def _lagrangian(space, goal, config, summary_of, key, source, state, progress):
    """The augmented-Lagrangian search (:class:`SearchConfig`, method "lagrangian"): one
    :func:`minimise` per stage (its own state file ``<state>.stage<k>.json``, so a stopped
    search resumes in the stage it stopped in), then the best FEASIBLE rule of all stages by
    the goal's objective (else the last stage's best), scored by :meth:`Goal.score` as the
    feasibility search scores it, with the stages' multipliers in ``extra["stages"]``."""
    t0 = time.perf_counter()
    lam: dict = {}
    rho, previous, init = float(config.rho), None, None
    results, history = [], []
    for stage in range(config.stages):
        measure = _scored_by(goal, summary_of, dict(lam), rho)
        path = None if state is None else Path(state).with_suffix(f".stage{stage}.json")
        r = minimise(space, measure, replace(config, seed=config.seed + stage),
                     key={**key, "stage": stage, "multipliers": lam, "rho": rho},
                     goal=goal.describe(), source=source, state=path, init=init,
                     progress=None if progress is None else
                     (lambda info, stage=stage: progress({**info, "stage": stage + 1,
                                                         "stages": config.stages})))
        g = goal.violations(r.summary)
        total = float(sum(g.values()))
        history.append({"stage": stage + 1, "multipliers": dict(lam), "rho": rho,
                        "params": r.params, "objective": goal.objective(r.summary),
                        "violations": g, "feasible": r.feasible})
        for name, v in g.items():
            lam[name] = lam.get(name, 0.0) + rho * v
        if previous is not None and total > 0.25 * previous:
            rho *= config.rho_growth
        previous, init = total, r.extra["population"]
        results.append(r.archive.assign(stage=stage + 1))
    archive = pd.concat(results, ignore_index=True)
    names = list(space.names)
    archive["score"] = [goal.score(row) for row in archive.to_dict("records")]
    ok = archive[archive["feasible"]]
    pick = ok.loc[ok["score"].idxmin()] if len(ok) else \
        archive[archive["stage"] == config.stages].sort_values("score").iloc[0]
    theta = pick[names].to_numpy(dtype=float)
    summary = {k: v for k, v in pick.items()
               if k not in (*names, "score", "feasible", "stage", "seconds", "clearings")}
    return DesignResult(theta, dict(zip(names, theta.tolist(), strict=True)),
                        float(pick["score"]), bool(pick["feasible"]), summary, archive,
                        config, space.to_json(), goal.describe(), source,
                        config.stages * config.generations, len(archive),
                        time.perf_counter() - t0, "stages", {"stages": history})


def minimise(space, measure: Callable, config: SearchConfig, *, key: dict, goal: str,
             source: str, state: str | Path | None = None,
             progress: Callable[[dict], None] | None = None,
             init: np.ndarray | None = None) -> DesignResult:
    """The search behind :func:`design` for any measure: ``measure(theta) -> (score,
    feasible, summary dict)``, minimised over ``space``'s bounds by differential evolution
    (seeded by ``config.seed``). ``key`` identifies the search in the state file (a state
    written under another key is refused). ``init``: the starting population (free
    parameters; default: Latin hypercube with the space's named points). The final
    population is ``extra["population"]``."""
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
        if population is None:
            population = init if init is not None else _initial(space, free, bounds,
                                                                config, rng)
        res = differential_evolution(
            objective, bounds, rng=rng, maxiter=left, popsize=config.popsize,
            init=population,
            strategy=_best1bin(config.mutation, config.recombination), polish=False,
            tol=0.0, atol=0.0, callback=callback, updating="immediate")
        best_x, best = res.x, float(res.fun)
        final = np.asarray(res.population, dtype=float)
    else:
        stopped[0] = "resumed after the last generation"
        k = int(np.argmin(energies))
        best_x, best = population[k], float(energies[k])
        final = population
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
                        generation[0], len(rows), time.perf_counter() - t0, stopped[0],
                        {"population": final})
