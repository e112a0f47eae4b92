"""Sweeps that lose nothing: a grid of (scenario, mechanism, parameters, seed) cells, each
stored atomically in an on-disk SQLite store as it finishes.

* Rerunning a sweep skips finished cells; a sweep killed at any moment (kill -9 included) and
  restarted completes with no lost and no duplicated rows: a cell's rows and its "done" mark
  are one database row (key = the cell's hash), written by the one process that owns the
  store, and commits group the cells finished in the last ~0.2 s. A kill loses at most those
  uncommitted cells, which are not marked done and so are recomputed on resume.
* Executors: ``serial``, ``processes`` (a local process pool), ``ray`` (optional extra; point
  it at a cluster with ``ray_address``). Workers only compute; the parent writes.
* Every row carries the scenario, mechanism, cell key, config hash, seed entropy and package
  versions.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import pickle
import sqlite3
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.errors import FedmarketError, MarketInputError, as_int

from .results import _jsonable, versions
from .scenarios import SCENARIOS

__all__ = ["EXECUTORS", "Cell", "Store", "expand", "load_toml", "run_cell", "run_sweep"]

EXECUTORS = ("serial", "processes", "ray")


@dataclass(frozen=True)
class Cell:
    scenario: str
    mechanism: str
    params: tuple  # sorted (name, value) pairs
    seed: int

    @property
    def key(self) -> str:
        blob = json.dumps([self.scenario, self.mechanism, list(self.params), self.seed],
                          sort_keys=True, default=str)
        return hashlib.sha1(blob.encode()).hexdigest()[:16]

    def as_dict(self) -> dict:
        return {"scenario": self.scenario, "mechanism": self.mechanism,
                "params": dict(self.params), "seed": self.seed}


def expand(spec: dict) -> list[Cell]:
    """Cells of a sweep spec: {"scenarios": [{"name", "mechanisms", "params": {k: [values]},
    "seeds": [..]}], "seeds": default seeds}. Scalar params are one value."""
    cells = []
    default_seeds = spec.get("seeds", [0])
    for entry in spec.get("scenarios", []):
        name = entry.get("name")
        if name not in SCENARIOS:
            raise MarketInputError("scenario", f"unknown {name!r}; known: {sorted(SCENARIOS)}")
        sc = SCENARIOS[name]
        mechanisms = entry.get("mechanisms") or list(sc.mechanisms)
        grid = {k: (v if isinstance(v, list) else [v])
                for k, v in (entry.get("params") or {}).items()}
        sc.make_config({k: v[0] for k, v in grid.items()}, 0)  # names checked up front
        seeds = entry.get("seeds", default_seeds)
        keys = sorted(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            params = tuple(zip(keys, values, strict=True))
            for mech, seed in itertools.product(mechanisms, seeds):
                cells.append(Cell(name, str(mech), params, int(seed)))
    return cells


def load_toml(path) -> dict:
    """A sweep spec from TOML: [[scenarios]] tables with name, mechanisms, params, seeds."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise MarketInputError("spec", f"{path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise MarketInputError("spec", f"{path}: {exc}") from exc


def run_cell(cell: Cell) -> tuple[str, pd.DataFrame, float]:
    """Compute one cell (in any process); returns (key, rows, seconds)."""
    t0 = time.perf_counter()
    sc = SCENARIOS[cell.scenario]
    cfg = sc.make_config(dict(cell.params), cell.seed)
    df = sc.run(cfg, cell.mechanism, cell.seed).copy()
    config_blob = json.dumps(_jsonable(asdict(cfg)), sort_keys=True, default=str)
    df.insert(0, "scenario", cell.scenario)
    df.insert(1, "mechanism", cell.mechanism)
    df.insert(2, "seed", cell.seed)
    for k, v in cell.params:
        df[f"param_{k}"] = v
    df["cell"] = cell.key
    df["config_hash"] = hashlib.sha1(config_blob.encode()).hexdigest()[:12]
    df["seed_entropy"] = str(np.random.SeedSequence(cell.seed).entropy)
    return cell.key, df, time.perf_counter() - t0


class Store:
    """SQLite results store: one row per cell (its frame as JSON), written atomically."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "store.sqlite"
        self.db = sqlite3.connect(self.path)
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed cell survives the process being killed (kill -9); only a
        # power cut can lose the last commits, which a rerun then recomputes
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("""CREATE TABLE IF NOT EXISTS cells (
            key TEXT PRIMARY KEY, scenario TEXT, mechanism TEXT, params TEXT, seed INTEGER,
            seconds REAL, versions TEXT, finished REAL, rows BLOB)""")
        self.db.commit()
        self._last_commit = time.perf_counter()

    def done(self) -> set[str]:
        return {k for (k,) in self.db.execute("SELECT key FROM cells")}

    def put(self, cell: Cell, df: pd.DataFrame, seconds: float, vers: str,
            commit_every: float = 0.2) -> None:
        """Store a cell's rows and mark it done (one row: both or neither)."""
        self.db.execute(
            "INSERT OR IGNORE INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cell.key, cell.scenario, cell.mechanism, json.dumps(_jsonable(dict(cell.params))),
             cell.seed, seconds, vers, time.time(), pickle.dumps(df, protocol=5)))
        if time.perf_counter() - self._last_commit >= commit_every:
            self.flush()

    def flush(self) -> None:
        self.db.commit()
        self._last_commit = time.perf_counter()

    def frame(self, scenario: str | None = None) -> pd.DataFrame:
        q = "SELECT rows, versions FROM cells" + (" WHERE scenario = ?" if scenario else "")
        args = (scenario,) if scenario else ()
        parts = []
        for rows, vers in self.db.execute(q + " ORDER BY key", args):
            df = pickle.loads(rows)  # written by this module only
            df["versions"] = vers
            parts.append(df)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def cells(self) -> pd.DataFrame:
        return pd.read_sql("SELECT key, scenario, mechanism, params, seed, seconds FROM cells",
                           self.db)

    def close(self):
        self.db.commit()
        self.db.close()


def _versions_blob() -> str:
    v = versions()
    return ";".join(f"{k}={v[k]}" for k in ("fedmarket", "numpy", "scipy", "pandas") if v[k])


def limit_threads(threads: int) -> None:
    """Cap the math libraries' threads in this process (a sweep worker): the env variables
    for libraries not loaded yet, torch's setting if it is."""
    import os
    import sys

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def run_sweep(cells: Iterable[Cell], out, *, executor: str = "serial", workers: int = 2,
              ray_address: str | None = None, threads: int = 1,
              progress: Callable[[int, int], None] | None = None) -> dict:
    """Run every cell not yet in the store at ``out``; returns counts and timings. Each
    process worker is limited to ``threads`` math-library threads."""
    if executor not in EXECUTORS:
        raise MarketInputError("executor", f"unknown {executor!r}; choose one of {EXECUTORS}")
    as_int("workers", workers, lo=1, hi=1024)
    cells = list(cells)
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        raise MarketInputError("spec", "the sweep lists the same cell twice")
    store = Store(out)
    vers = _versions_blob()
    todo = [c for c in cells if c.key not in store.done()]
    by_key = {c.key: c for c in todo}
    skipped = len(cells) - len(todo)
    t0 = time.perf_counter()
    work = 0.0
    done = 0

    def finish(key, df, seconds):
        nonlocal work, done
        store.put(by_key[key], df, seconds, vers)
        work += seconds
        done += 1
        if progress is not None:
            progress(skipped + done, len(cells))

    if progress is not None:
        progress(skipped, len(cells))
    try:
        if executor == "serial" or not todo:
            for c in todo:
                finish(*run_cell(c))
        elif executor == "processes":
            from concurrent.futures import ProcessPoolExecutor, as_completed

            with ProcessPoolExecutor(max_workers=workers, initializer=limit_threads,
                                     initargs=(threads,)) as pool:
                futures = [pool.submit(run_cell, c) for c in todo]
                for f in as_completed(futures):
                    finish(*f.result())
        else:
            try:
                import ray
            except ImportError as exc:
                raise MarketInputError("executor", "the ray executor needs `pip install "
                                                   "fedmarket[ray]` (ray)") from exc
            if not ray.is_initialized():
                ray.init(address=ray_address, num_cpus=None if ray_address else workers,
                         include_dashboard=False, log_to_driver=False)
            remote = ray.remote(run_cell)
            pending = [remote.remote(c) for c in todo]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                try:
                    result = ray.get(ready[0])
                except ray.exceptions.RayTaskError as exc:  # a typed error reaches us as itself
                    if isinstance(exc.cause, FedmarketError):
                        raise exc.cause from None
                    raise
                finish(*result)
    finally:
        store.close()
    wall = time.perf_counter() - t0
    return {"cells": len(cells), "skipped": skipped, "ran": done, "wall_s": wall,
            "work_s": work}


PRESETS = {
    "demo": {
        "seeds": [0, 1],
        "scenarios": [
            {"name": "inclusive-market", "mechanisms": ["box2", "local", "exact"],
             "params": {"rounds": 20, "n_params": 5000}},
            {"name": "liars", "mechanisms": ["local"], "seeds": [0],
             "params": {"kind": "size", "factor": [0.1, 0.5, 10.0],
                        "thresholds": ["exact", "published"]}},
            {"name": "liars", "mechanisms": ["local"], "seeds": [0],
             "params": {"kind": "cost", "factor": [2.0, 5.0, 10.0],
                        "thresholds": ["exact", "published"]}},
            {"name": "attacks", "mechanisms": ["local"], "seeds": [0],
             "params": {"attack": ["shuffle", "signflip", "same", "gaussian"],
                        "metric": ["l2sq", "cosine"]}},
            {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform", "weighted"],
             "seeds": [0], "params": {"budget": [5.0, 10.0, 15.0, 25.0, 40.0]}},
            {"name": "ipfl-learning", "mechanisms": ["ipfl", "fedavg", "local"],
             "seeds": [0]},
        ],
    },
}
