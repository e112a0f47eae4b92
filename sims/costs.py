"""What a reproduction costs, in CPU-hours, from its cells' own timings.

Each learning cell records the CPU seconds of the process that ran it (``seconds_cpu``, all
its threads, the rounds resumed from a checkpoint included; :func:`learning.runner.run`) and
the wall seconds its training and its evaluation took (``seconds_training``,
``seconds_evaluation``); a mechanism-level cell records its wall seconds in the store
(``store_seconds``), an upper bound of its CPU time on a shared host.

* :func:`measured`: per scenario, the cells of a summary, their CPU-hours (the cells with a
  CPU clock) and their wall hours as stored;
* :func:`clock_of`: the clock a summary's cells can be priced by: "cpu" where every timed
  learning cell carries its CPU seconds, else "wall" (cells computed before learning.runner
  recorded ``seconds_cpu``: their own timings are wall seconds, an upper bound of a
  one-thread cell's CPU time);
* :func:`rates`: per (data set, algorithm), the seconds of one local SGD step of one client
  (the cell's training share of its clock, over rounds x clients x steps) and of one test
  image evaluated by one client's model (its evaluation share, over evaluations x clients x
  test images), on the CPU clock (the cell's CPU seconds times its wall training share) or on
  the wall clock (its wall training seconds);
* :func:`cpu_per_seed`: what one seed of a claim's cells cost on the CPU clock (the median
  over its seeds whose every cell carries one of the sum of their CPU seconds), the price of
  a confirmation run (:data:`sims.sequential.CONFIRM_CPU_HOURS`);
* :func:`estimate`: a setting's cells (:func:`sims.settings.spec`, one seed) priced at those
  rates: rounds x clients x steps x the step rate + evaluations x clients x test images x the
  evaluation rate; a cell whose (data set, algorithm) was not measured is priced at the
  Fashion-MNIST rate of its algorithm (CIFAR-10: its model is larger, so the estimate is low)
  and counted as such.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["CLOCKS", "TEST_IMAGES", "clock_of", "cpu_per_seed", "estimate", "measured", "rates"]

CLOCKS = ("cpu", "wall")

# test images a client's model is scored on when a config takes the whole test set (digits:
# the fifth of its 1,797 images that learning.data.load_digits holds out)
TEST_IMAGES = {"fashion-mnist": 10_000, "cifar10": 10_000, "digits": 359}


def _cells(frames: dict) -> pd.DataFrame:
    """One row per cell of a summary's frames, with its timings and scenario."""
    out = []
    for name, df in frames.items():
        if "cell" not in df or df.empty:
            continue
        cols = [c for c in ("mechanism", "config_id", "seconds", "seconds_cpu",
                            "seconds_training", "seconds_evaluation", "store_seconds",
                            "n_rounds") if c in df]
        out.append(df.groupby("cell")[cols].first().assign(scenario=name))
    return pd.concat(out).reset_index() if out else pd.DataFrame(
        columns=["cell", "scenario", "mechanism"])


def measured(frames: dict) -> pd.DataFrame:
    """Per scenario: cells; those with a wall time (the cell's own ``seconds``, else the
    store's ``store_seconds``) and their wall hours; those with a CPU clock (learning cells
    run by a learning.runner that records it) and their CPU-hours."""
    c = _cells(frames)
    rows = []
    for name, g in c.groupby("scenario", sort=True):
        nan = pd.Series(np.nan, g.index)
        cpu = g["seconds_cpu"] if "seconds_cpu" in g else nan
        wall = (g["seconds"] if "seconds" in g else nan).fillna(
            g["store_seconds"] if "store_seconds" in g else nan)
        rows.append({"scenario": name, "cells": len(g),
                     "cells with a wall time": int(wall.notna().sum()),
                     "wall hours": float(wall.sum()) / 3600.0,
                     "cells with a CPU clock": int(cpu.notna().sum()),
                     "CPU-hours": float(cpu.sum()) / 3600.0})
    return pd.DataFrame(rows)


def cpu_per_seed(df: pd.DataFrame) -> float | None:
    """The CPU seconds one seed of ``df``'s cells took: per seed, the sum of its cells' CPU
    clocks (``seconds_cpu``), over the seeds whose every cell carries one; the median of
    those sums. None where no seed has every cell on the CPU clock (cells of before the
    clock was recorded, or mechanism-level cells, which carry none).

    >>> cpu_per_seed(pd.DataFrame({"cell": ["a", "a", "b", "c"], "seed": [0, 0, 0, 1],
    ...                            "seconds_cpu": [2.0, 2.0, 3.0, 7.0]}))
    6.0
    """
    if df is None or df.empty or not {"cell", "seed", "seconds_cpu"} <= set(df.columns):
        return None
    cells = df.groupby("cell")[["seed", "seconds_cpu"]].first()
    by_seed = cells.groupby("seed").seconds_cpu
    whole = by_seed.apply(lambda x: bool(x.notna().all()))
    sums = by_seed.sum()[whole]
    return float(sums.median()) if len(sums) else None


def clock_of(frames: dict) -> str | None:
    """"cpu" where every timed learning cell of the summary carries its CPU seconds, "wall"
    where some carry only their wall seconds (a summary mixing cells of before and after
    learning.runner recorded the CPU clock: the wall clock is the one every cell carries, and
    CPU rates would leave the algorithms of the older cells unpriced), None without timed
    learning cells."""
    c = _cells(frames)
    if "seconds_training" not in c or not c.seconds_training.notna().any():
        return None
    timed = c[c.seconds_training.notna()]
    if "seconds_cpu" in timed and timed.seconds_cpu.notna().all():
        return "cpu"
    return "wall"


def _evaluations(cfg: dict) -> int:
    rounds, every = int(cfg["rounds"]), int(cfg.get("evaluate_every", 1))
    return math.ceil(rounds / every) + (0 if (rounds - 1) % every == 0 else 1)


def _test_images(cfg: dict) -> int | None:
    sub = int(cfg.get("test_subsample") or 0)
    return sub or TEST_IMAGES.get(cfg["dataset"])


def rates(frames: dict, configs: dict, clock: str = "cpu") -> pd.DataFrame:
    """Per (dataset, mechanism): seconds per client-step of training and per client-test
    image of evaluation on ``clock`` (:data:`CLOCKS`), means over the learning cells timed on
    it (``configs``: the summary's config id -> fields)."""
    if clock not in CLOCKS:
        from .errors import SpecError

        raise SpecError("clock", f"is {clock!r}; choose one of {CLOCKS}")
    empty = pd.DataFrame(columns=["dataset", "mechanism", "step", "image", "cells"])
    c = _cells(frames)
    need = "seconds_cpu" if clock == "cpu" else "seconds_training"
    if need not in c or "seconds_training" not in c:
        return empty
    c = c[c[need].notna() & (c.seconds > 0)]
    rows = []
    for r in c.itertuples(index=False):
        cfg = configs.get(r.config_id, {})
        images = _test_images(cfg) if "dataset" in cfg else None
        if "steps" not in cfg or not images:
            continue
        scale = r.seconds_cpu / r.seconds if clock == "cpu" else 1.0
        train, evalu = r.seconds_training * scale, r.seconds_evaluation * scale
        rows.append({"dataset": cfg["dataset"], "mechanism": r.mechanism,
                     "step": train / (cfg["rounds"] * cfg["clients"] * cfg["steps"]),
                     "image": evalu / (_evaluations(cfg) * cfg["clients"] * images)})
    if not rows:
        return empty
    df = pd.DataFrame(rows)
    return (df.groupby(["dataset", "mechanism"]).agg(step=("step", "mean"),
                                                     image=("image", "mean"),
                                                     cells=("step", "size")).reset_index())


def estimate(setting: str, frames: dict, configs: dict, seeds: int = 1,
             clock: str = "cpu") -> dict:
    """The hours on ``clock`` of ``seeds`` seeds of every learning cell of ``setting`` priced
    at the measured :func:`rates`: {"hours", "cells", "priced" (cells priced at their own data
    set's rate), "proxy" (at Fashion-MNIST's), "unpriced" (no rate for the algorithm)}."""
    from .scenarios import SCENARIOS
    from .settings import spec
    from .summary import config_of
    from .sweep import expand

    r = rates(frames, configs, clock).set_index(["dataset", "mechanism"])
    hours, counts = 0.0, {"priced": 0, "proxy": 0, "unpriced": 0}
    cells = [c for c in expand(spec(setting, tuple(range(seeds))))
             if SCENARIOS[c.scenario].kind == "learning"]
    for c in cells:
        cfg = config_of(c.scenario, dict(c.params), c.seed, c.mechanism)
        key = (cfg["dataset"], c.mechanism)
        if key in r.index:
            counts["priced"] += 1
        elif ("fashion-mnist", c.mechanism) in r.index:
            key = ("fashion-mnist", c.mechanism)
            counts["proxy"] += 1
        else:
            counts["unpriced"] += 1
            continue
        images = _test_images(cfg) or 0
        sec = (r.loc[key, "step"] * cfg["rounds"] * cfg["clients"] * cfg["steps"]
               + r.loc[key, "image"] * _evaluations(cfg) * cfg["clients"] * images)
        hours += float(sec) / 3600.0
    return {"hours": hours, "cells": len(cells), **counts}
