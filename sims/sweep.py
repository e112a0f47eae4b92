"""Sweeps that lose nothing: a grid of (scenario, mechanism, parameters, seed) cells, each
stored atomically in an on-disk SQLite store as it finishes.

* Rerunning a sweep skips finished cells; a sweep killed at any moment (kill -9 included) and
  restarted completes with no lost and no duplicated rows: a cell's rows and its "done" mark
  are one database row (key = the cell's hash), written by the one process that owns the
  store, and commits group the cells finished in the last ~0.2 s. A kill loses at most those
  uncommitted cells, which are not marked done and so are recomputed on resume.
* A learning cell checkpoints after every round (``out/checkpoints``,
  :mod:`learning.checkpoint`): killed, it resumes after its last finished round with the
  numbers of a run never stopped; an algorithm of the user's own that keeps no
  ``Session.carry`` restarts its cell instead (declared in :mod:`learning.checkpoint`).
* Executors: ``serial``, ``processes`` (a local process pool), ``ray`` (optional extra; point
  it at a cluster with ``ray_address``). Workers only compute; the parent writes.
* Every row carries the scenario, mechanism, cell key, config hash, seed entropy and package
  versions.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import itertools
import json
import math
import os
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.contain import Interrupt, Limit, TimeUp, describe, must_pass
from mechanisms.errors import (
    FedmarketError,
    MarketInputError,
    RuleFailed,
    as_int,
    as_real,
    as_seed,
)
from mechanisms.processes import ctrl_c_between_steps, die_with_parent, stop_pool

from .errors import CellFailed, CellTimedOut, SpecError, StoreError
from .results import jsonable, read_text, versions
from .scenarios import SCENARIOS
from .store import Store

__all__ = ["ADDED_FIELDS", "EXECUTORS", "MAX_CELLS", "Cell", "CellStep", "Store",
           "check_checkpoints", "checkpoint_path", "config_fields", "config_hash",
           "describe_cell", "expand", "hash_config", "load_toml", "log_path", "run_cell",
           "run_sweep"]

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


SPEC_KEYS = ("seeds", "scenarios")
ENTRY_KEYS = ("name", "mechanisms", "params", "seeds")


def _keys(where: str, table, allowed) -> None:
    if not isinstance(table, dict):
        raise SpecError(where, f"must be a table, got {table!r}")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        hint = ""
        for u in unknown:
            close = difflib.get_close_matches(u, allowed, n=1)
            if close:
                hint = f" (did you mean {close[0]!r}?)"
                break
        raise SpecError(where + "." + unknown[0] if where != "spec" else unknown[0],
                        f"unknown key{'s' if len(unknown) > 1 else ''} {unknown}{hint}; "
                        f"allowed: {list(allowed)}")


def _seeds(where: str, value) -> list[int]:
    if not isinstance(value, list):  # `seeds = 5`: seed 5, or five seeds? ask, not guess
        raise SpecError(where, f"is {value!r}; give a list: seeds = [{value!r}] for that one "
                               "seed, seeds = [0, 1, 2] for several")
    values = value
    if not values:
        raise SpecError(where, "is empty; list at least one seed")
    seeds = []
    for k, v in enumerate(values):
        try:
            seeds.append(as_seed(f"{where}[{k}]", v))
        except MarketInputError as exc:
            raise SpecError(exc.field, exc.message) from None
    if len(set(seeds)) != len(seeds):
        raise SpecError(where, f"lists a seed twice: {values}")
    return seeds


MAX_CELLS = 100_000  # a grid larger than this is refused unless asked (expand(max_cells=))


def expand(spec: dict, *, max_cells: int | None = MAX_CELLS,
           counted: Callable[[int], None] | None = None) -> list[Cell]:
    """Cells of a sweep spec: {"scenarios": [{"name", "mechanisms", "params": {k: [values]},
    "seeds": [..]}], "seeds": default seeds}. Scalar params are one value.

    Strict: an unknown key at any level, an empty spec, an unknown scenario or mechanism, a
    bad seed or a parameter value its config refuses raises :class:`SpecError` naming the
    key (e.g. ``scenarios[1].params.rounds``) before any cell runs; every cell's config is
    built here once (about 0.2 ms a cell).

    Bounded: the cells are counted before any is built; ``counted(n)`` hears the count, and
    a grid of more than ``max_cells`` cells (default :data:`MAX_CELLS`; None: no limit) is
    refused with a SpecError saying how many it holds."""
    _keys("spec", spec, SPEC_KEYS)
    entries = spec.get("scenarios")
    if not entries:
        raise SpecError("scenarios", "the spec lists no scenarios; add [[scenarios]] tables "
                                     f"(known: {sorted(SCENARIOS)})")
    if not isinstance(entries, list):
        raise SpecError("scenarios", "must be a list of tables ([[scenarios]])")
    if max_cells is not None:
        as_int("max_cells", max_cells, lo=1, error=SpecError)
    default_seeds = _seeds("seeds", spec.get("seeds", [0]))
    plans = [_plan(idx, entry, default_seeds) for idx, entry in enumerate(entries)]
    total = sum(len(mechs) * len(seeds) * math.prod(len(v) for v in grid.values())
                for _, _, mechs, grid, seeds in plans)
    if max_cells is not None and total > max_cells:
        raise SpecError("spec", f"the grid holds {total:,} cells, over the limit of "
                                f"{max_cells:,}; shrink it, or raise the limit (fedmarket "
                                f"sweep --max-cells {total}) if you mean it (building the "
                                "cells alone takes about 0.2 ms each)")
    if counted is not None:
        counted(total)
    cells = []
    for where, name, mechanisms, grid, seeds in plans:
        sc = SCENARIOS[name]
        keys = sorted(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            cell_params = tuple(zip(keys, values, strict=True))
            try:
                sc.make_config(dict(cell_params), seeds[0])
            except MarketInputError as exc:
                field = exc.field if exc.field in grid else None
                raise SpecError(f"{where}.params" + (f".{field}" if field else ""),
                                exc.message if field else str(exc)) from None
            except TypeError as exc:  # a dataclass refusing a value of the wrong kind
                raise SpecError(f"{where}.params", str(exc)) from None
            for mech, seed in itertools.product(mechanisms, seeds):
                cells.append(Cell(name, str(mech), cell_params, int(seed)))
    return cells


def _plan(idx: int, entry, default_seeds) -> tuple:
    """(where, scenario name, mechanisms, params grid, seeds) of one [[scenarios]] table,
    checked; no cell built yet."""
    where = f"scenarios[{idx}]"
    _keys(where, entry, ENTRY_KEYS)
    name = entry.get("name")
    if name not in SCENARIOS:
        raise SpecError(f"{where}.name", f"unknown scenario {name!r}; known: "
                                         f"{sorted(SCENARIOS)}")
    sc = SCENARIOS[name]
    mechanisms = entry.get("mechanisms", list(sc.mechanisms))
    if not isinstance(mechanisms, list) or not mechanisms:
        raise SpecError(f"{where}.mechanisms", f"must be a non-empty list, got "
                                               f"{mechanisms!r}")
    names = []
    for k, mech in enumerate(mechanisms):
        try:
            names.append(sc.check_mechanism(mech))
        except MarketInputError as exc:
            parts = ("selection", "payments", "prices", "pricing")
            sub = f".{exc.field}" if isinstance(mech, dict) or exc.field in parts else ""
            raise SpecError(f"{where}.mechanisms[{k}]{sub}", exc.message) from None
    if len(set(names)) != len(names):
        raise SpecError(f"{where}.mechanisms", f"lists a mechanism twice: {names}")
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise SpecError(f"{where}.params", f"must be a table, got {params!r}")
    grid = {}
    for k, v in params.items():
        grid[k] = v if isinstance(v, list) else [v]
        if not grid[k]:
            raise SpecError(f"{where}.params.{k}", "is an empty list; give a value")
    seeds = _seeds(f"{where}.seeds", entry["seeds"]) if "seeds" in entry else default_seeds
    return where, name, names, grid, seeds


def load_toml(path) -> dict:
    """A sweep spec from TOML: [[scenarios]] tables with name, mechanisms, params, seeds."""
    text = read_text("spec", path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError("spec", f"{path}: {exc}") from exc
    except RecursionError:  # thousands of nested brackets
        raise SpecError("spec", f"{path} nests arrays or tables too deeply to read") from None


def describe_cell(cell: Cell) -> str:
    """``scenario / mechanism / seed S (k=v, ...)``: how errors and messages name a cell."""
    params = ", ".join(f"{k}={v!r}" for k, v in cell.params)
    return f"{cell.scenario} / {cell.mechanism} / seed {cell.seed}" + (
        f" ({params})" if params else "")


@dataclass(frozen=True)
class CellStep:
    """How far a running cell is: ``done`` of ``total`` steps (``unit``: rounds, line-search
    points; 0 of 0 as it starts) after ``seconds``; ``over`` when it has ended (finished,
    failed or stopped at its time limit)."""

    cell: Cell
    done: int
    total: int
    unit: str
    seconds: float
    over: bool = False


class _TimeUp(Interrupt):
    """A cell's time limit has passed (seen at a step). An Interrupt (a BaseException): the
    toolkit's and a user rule's own ``except Exception`` let it through to
    :func:`run_cell`."""


def checkpoint_path(folder, cell: Cell) -> Path:
    """Where a learning cell's per-round checkpoint lives in a checkpoint folder (a
    safetensors file, :mod:`learning.checkpoint`)."""
    return Path(folder) / f"{cell.key}.safetensors"


def check_checkpoints(folder, cells) -> None:
    """Refuse, before any cell runs, a checkpoint in ``folder`` of one of these cells that is
    not one this version reads (a CheckpointError naming the file): a damaged or crafted
    file, or ``<key>.pt``, a torch pickle of fedmarket before issue 33, which is never loaded.
    Only headers are read."""
    from learning.checkpoint import Checkpoint, CheckpointError

    cells = [c for c in cells if SCENARIOS[c.scenario].kind == "learning"]
    old = [p for c in cells if (p := Path(folder) / f"{c.key}.pt").exists()]
    if old:
        n = len(old)
        which = f"{old[0]} and {n - 1} more are torch pickles" if n > 1 else \
            f"{old[0]} is a torch pickle"
        them, compute = ("them", "cells compute") if n > 1 else ("it", "cell computes")
        raise CheckpointError("checkpoint", f"{which} (checkpoints of fedmarket before issue "
                                            "33, or not fedmarket's), which are never loaded: "
                                            f"a pickle can run code; delete {them} (rm "
                                            f"{Path(folder)}/*.pt) and the {compute} again "
                                            "from round 0")
    for cell in cells:
        Checkpoint(checkpoint_path(folder, cell)).saved_rounds()


def log_path(folder, cell: Cell) -> Path:
    """A learning cell's per-round log folder under ``folder``:
    ``scenario/mechanism/seed<S>-<key>`` (characters other than letters, digits, ``-_.``
    in a mechanism's name written as ``_``)."""
    mech = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in cell.mechanism)
    return Path(folder) / cell.scenario / mech / f"seed{cell.seed}-{cell.key}"


def run_cell(cell: Cell, *, progress: Callable[[CellStep], None] | None = None,
             time_limit: float | None = None, checkpoints=None,
             log_dir=None) -> tuple[str, pd.DataFrame, float]:
    """Compute one cell (in any process); returns (key, rows, seconds). A typed input error
    passes as itself; a rule of the user's own that raises (or anything else unexpected) is a
    :class:`CellFailed` naming the cell and the error.

    ``progress(CellStep)`` as the cell starts and after each of its steps (a market's or a
    training's rounds). ``time_limit`` (seconds): the cell stops once it has passed --
    checked at every step, and by SIGALRM where the cell runs in a main thread, which ends
    even one long call of a user's rule -- with a :class:`CellTimedOut` naming the cell and
    how far it got.

    A learning cell with ``checkpoints`` (a folder) resumes from its checkpoint there
    (:func:`checkpoint_path`, :mod:`learning.checkpoint`), if one of this config and code
    is there, and writes one after every round: a cell killed or stopped at its time limit
    loses only the round it was in. The file stays; the sweep removes it once the cell is
    stored. With ``log_dir`` it writes its per-round log (:mod:`learning.roundlog`) under
    :func:`log_path`."""
    t0 = time.perf_counter()
    if time_limit is not None:
        as_real("time_limit", time_limit, lo=0, lo_open=True)
    sc = SCENARIOS[cell.scenario]
    cfg = sc.make_config(dict(cell.params), cell.seed)
    at = [0, 0]

    def step(done, total):
        at[:] = [int(done), int(total)]
        seconds = time.perf_counter() - t0
        if progress is not None:
            progress(CellStep(cell, at[0], at[1], sc.steps, seconds))
        if time_limit is not None and seconds > time_limit:
            raise _TimeUp

    kw = {}
    if sc.kind == "learning" and checkpoints is not None:
        from learning.checkpoint import Checkpoint

        kw["checkpoint"] = Checkpoint(checkpoint_path(checkpoints, cell),
                                      tag=f"{hash_config(cfg)}:{code_version()}")
    if sc.kind == "learning" and log_dir is not None:
        from learning.roundlog import RoundLog

        kw["log"] = RoundLog(log_path(log_dir, cell))
    # SIGALRM stops the cell wherever it is (a sleep or a Python loop of a user's rule; a
    # call into C ends first) in the main thread of a Unix process (serial sweeps,
    # process-pool workers); elsewhere the limit is checked at the cell's steps only
    # (mechanisms.contain.Limit: a timer set before keeps its handler and its time)
    limit = Limit(time_limit, anywhere=True)
    try:
        with limit:
            step(0, 0)
            df = sc.run(cfg, cell.mechanism, cell.seed, progress=step, **kw).copy()
    except (_TimeUp, TimeUp) as exc:
        if isinstance(exc, TimeUp) and exc.limit is not limit:
            raise
        so_far = f"after {at[0]} of {at[1]} {sc.steps}" if at[1] else "before its first step"
        kept = ("; its checkpoint is kept: a rerun resumes it there" if "checkpoint" in kw
                and kw["checkpoint"].path.is_file() else "")
        if isinstance(exc, TimeUp) and exc.where is not None:  # the rule that was running
            kind = "selection" if exc.where[0] == "rule" else exc.where[0]
            kept += f"; stopped in the {kind} rule {exc.where[1]}"
        raise CellTimedOut("cell", f"{describe_cell(cell)}: stopped at its time limit of "
                                   f"{time_limit:g} s {so_far}; not stored (a larger time "
                                   f"limit computes it on a rerun){kept}") from None
    except RuleFailed as exc:
        raise CellFailed("cell", f"{describe_cell(cell)}: {exc}") from exc
    except FedmarketError:
        raise
    except BaseException as exc:  # sys.exit of code of your own too; not Ctrl-C
        if must_pass(exc):
            raise
        raise CellFailed("cell", f"{describe_cell(cell)}: {describe(exc)}") from exc
    df.insert(0, "scenario", cell.scenario)
    df.insert(1, "mechanism", cell.mechanism)
    df.insert(2, "seed", cell.seed)
    for k, v in cell.params:
        df[f"param_{k}"] = v
    df["cell"] = cell.key
    df["config_hash"] = hash_config(cfg)
    df["seed_entropy"] = str(np.random.SeedSequence(cell.seed).entropy)
    return cell.key, df, time.perf_counter() - t0


# Config fields added after stores were written, at the value that does what the code did
# before they existed: a config holding such a value hashes as it did before the field
# (stored cells stay current); any other value is a new config.
ADDED_FIELDS = {"payments": "paper", "prices": "paper", "device": "cpu"}


def config_fields(cfg) -> dict:
    """A config's fields as a dict, but the :data:`ADDED_FIELDS` at their old behaviour's
    value (what is hashed and recorded of a cell's config)."""
    return {k: v for k, v in asdict(cfg).items()
            if not (k in ADDED_FIELDS and v == ADDED_FIELDS[k])}


def hash_config(cfg) -> str:
    """Hash of a full config (every default included): a changed default changes it, so
    stored rows computed under the old default are recognised as stale
    (:func:`config_fields`: an added field at its old behaviour's value is left out)."""
    blob = json.dumps(jsonable(config_fields(cfg)), sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def config_hash(cell: Cell) -> str:
    """:func:`hash_config` of the cell's full config."""
    return hash_config(SCENARIOS[cell.scenario].make_config(dict(cell.params), cell.seed))


@functools.cache
def code_version() -> str:
    """The package version plus a fingerprint of the code that computes cells (the sources
    of mechanisms, learning and sims): an edit anywhere marks stored cells stale."""
    import learning
    import mechanisms

    h = hashlib.sha1()
    for root in (Path(mechanisms.__file__).parent, Path(learning.__file__).parent,
                 Path(__file__).parent):
        for f in sorted(root.rglob("*.py")):
            h.update(str(f.relative_to(root.parent)).encode())
            h.update(f.read_bytes())
    return f"{versions()['fedmarket']}+{h.hexdigest()[:12]}"


class _FolderLock:
    """An exclusive flock on ``folder/store.lock`` (released by the OS if the holder dies)."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / "store.lock"

    def __enter__(self):
        import fcntl

        self.fh = open(self.path, "a+")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fh.seek(0)
            holder = self.fh.read().strip() or "?"
            self.fh.close()
            raise StoreError("out", f"another sweep (pid {holder}) is writing to "
                                    f"{self.path.parent}; wait for it or use another "
                                    "folder") from None
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(str(os.getpid()))
        self.fh.flush()
        return self

    def __exit__(self, *exc):
        import fcntl

        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()


_STEPS = None  # in a process-pool worker: the queue its cells' CellSteps go to


def _worker_init(parent: int, threads: int, steps=None) -> None:
    """A process-pool worker: exit when its parent dies (kill -9 included), so that a killed
    sweep leaves no orphans, cap its threads, and send its cells' steps to ``steps``."""
    global _STEPS
    die_with_parent(parent)
    limit_threads(threads)
    _STEPS = steps


def _run_cell_in_worker(cell: Cell, time_limit: float | None, checkpoints=None, log_dir=None):
    """:func:`run_cell` in a pool worker, its steps sent to the parent (by key: a Cell need
    not travel back)."""
    send = None
    if _STEPS is not None:
        def send(st):
            _STEPS.put((st.cell.key, st.done, st.total, st.unit, st.seconds))
    return run_cell(cell, progress=send, time_limit=time_limit, checkpoints=checkpoints,
                    log_dir=log_dir)


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
              ray_address: str | None = None, threads: int = 1, reuse_stale: bool = False,
              recompute_stale: bool = False, recompute_damaged: bool = False,
              progress: Callable[[int, int], None] | None = None,
              cell_progress: Callable[[CellStep], None] | None = None,
              time_limit: float | None = None, checkpoints: bool = True,
              log_dir=None) -> dict:
    """Run every cell not yet in the store at ``out``; returns counts and timings. Each
    process worker is limited to ``threads`` math-library threads.

    Learning cells write a per-round checkpoint to ``out/checkpoints`` (unless
    ``checkpoints`` is False) and a killed sweep resumes each running cell after its last
    finished round, with the numbers of a run never stopped (:func:`run_cell`); a cell's
    checkpoint is deleted once its rows are committed. ``log_dir``: every learning cell's
    per-round log goes under it (:func:`log_path`).

    Progress: ``progress(done, total)`` in cells as each is stored; ``cell_progress(step)``
    (a :class:`CellStep`) as a running cell starts, after each of its steps (rounds) and
    when it ends -- from the process pool's workers too (within 0.2 s); a ray executor
    reports whole cells only.

    ``time_limit`` (seconds per cell, see :func:`run_cell`): a cell that runs past it is
    stopped and not stored, and the sweep goes on with the others; the returned
    ``timed_out`` lists one message per such cell, naming it. Nothing bounds a cell without.

    The store is locked for the sweep (a second sweep on the folder is refused) and checked
    on resume: every row's digest, and every finished cell's config hash and code version
    against this run's. Cells computed by other code or under other defaults are *stale*:
    refused (StoreError) unless ``reuse_stale`` keeps them as they are or ``recompute_stale``
    computes them again (replacing their rows). Cells whose rows fail their digest are
    *damaged*: refused unless ``recompute_damaged`` deletes just those rows (and computes
    again the ones this sweep lists). These checks read the store read-only: a refused run
    leaves the file byte for byte as it was.

    Writing (a full disk included) fails with a one-line StoreError; the cells committed
    before stay intact and a rerun resumes."""
    if reuse_stale and recompute_stale:
        raise MarketInputError("recompute_stale", "give reuse_stale or recompute_stale, not "
                                                  "both")
    if executor not in EXECUTORS:
        raise MarketInputError("executor", f"unknown {executor!r}; choose one of {EXECUTORS}")
    as_int("workers", workers, lo=1, hi=1024)
    if time_limit is not None:
        as_real("time_limit", time_limit, lo=0, lo_open=True)
    for name, fn in (("progress", progress), ("cell_progress", cell_progress)):
        if fn is not None and not callable(fn):
            raise MarketInputError(name, f"is {fn!r}; must be a function, or None")
    try:
        cells = list(cells)
    except TypeError:
        raise MarketInputError("cells", f"is {cells!r}; must be a list of cells "
                                        "(sims.sweep.expand)") from None
    odd = [c for c in cells if not isinstance(c, Cell)]
    if odd:
        raise MarketInputError("cells", f"holds {odd[0]!r}; must hold cells "
                                        "(sims.sweep.expand)")
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        raise MarketInputError("spec", "the sweep lists the same cell twice")
    as_int("threads", threads, lo=1, hi=1024)
    folder = Path(out)
    if (folder / "store.sqlite").exists():  # a corrupt or foreign store: refused untouched
        Store(folder, mode="r", allow_empty=True).close()  # (empty: another sweep's, new)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError("out", f"cannot create {folder}: {exc.strerror or exc}") from None
    with _FolderLock(folder):
        return _run_locked(cells, out, executor, workers, ray_address, threads,
                           "reuse" if reuse_stale else "recompute" if recompute_stale
                           else "refuse", bool(recompute_damaged), progress, cell_progress,
                           time_limit, folder / "checkpoints" if checkpoints else None,
                           None if log_dir is None else str(log_dir))


def _run_locked(cells, out, executor, workers, ray_address, threads, on_stale, fix_damaged,
                progress, cell_progress, time_limit, ckpts, log_dir):
    vers, code = _versions_blob(), code_version()
    hashes = {c.key: config_hash(c) for c in cells}
    damaged, finished = [], {}
    if (Path(out) / "store.sqlite").exists():  # every check read-only: a refusal writes nothing
        ro = Store(out, mode="r", allow_empty=True)
        try:
            damaged, n = ro.damaged()
            finished = ro.done()
        finally:
            ro.close()
        if damaged and not fix_damaged:
            raise StoreError("store", f"{len(damaged)} of {n} cells in {out} fail their "
                                      f"checksum (first: {damaged[0]}); the store is damaged: "
                                      "pass --recompute-damaged to delete and recompute just "
                                      "those cells, or use another folder")
        for key in damaged:
            finished.pop(key, None)
    stale = [c for c in cells if c.key in finished
             and finished[c.key] != (hashes[c.key], code)]
    if stale and on_stale == "refuse":
        raise StoreError("out", f"{len(stale)} finished cells in {out} were computed by other "
                                f"code or under other defaults (first: {stale[0].scenario} "
                                f"{stale[0].mechanism} seed {stale[0].seed}); pass "
                                "--reuse-stale to keep them, --recompute-stale to compute "
                                "them again, or use another folder")
    redo = {c.key for c in stale} if on_stale == "recompute" else set()
    todo = [c for c in cells if c.key not in finished or c.key in redo]
    if ckpts is not None:  # before the store opens for writing: a refusal changes nothing
        check_checkpoints(ckpts, todo)
    store = Store(out)
    try:
        if damaged:
            store.forget(damaged)
    except BaseException:
        store.close()
        raise
    by_key = {c.key: c for c in todo}
    skipped = len(cells) - len(todo)
    t0 = time.perf_counter()
    work = 0.0
    done = 0
    timed_out: list[str] = []
    last_step: dict[str, CellStep] = {}

    def finish(key, df, seconds):
        nonlocal work, done
        store.put(by_key[key], df, seconds, vers, hashes[key], code)
        if ckpts is not None and checkpoint_path(ckpts, by_key[key]).is_file():
            store.flush()  # the rows are safe before their checkpoint goes
            checkpoint_path(ckpts, by_key[key]).unlink(missing_ok=True)
        work += seconds
        done += 1
        ended(key)
        if progress is not None:
            progress(skipped + done, len(cells))

    def stepped(st: CellStep):
        last_step[st.cell.key] = st
        if cell_progress is not None:
            cell_progress(st)

    def ended(key):
        st = last_step.pop(key, None)
        if cell_progress is not None:
            cell_progress(dataclasses.replace(st, over=True) if st is not None else
                          CellStep(by_key[key], 0, 0, SCENARIOS[by_key[key].scenario].steps,
                                   0.0, over=True))

    def stopped(exc: CellTimedOut, key: str):
        timed_out.append(exc.message)
        ended(key)
        if progress is not None:
            progress(skipped + done, len(cells))

    if progress is not None:
        progress(skipped, len(cells))
    try:
        if executor == "serial" or not todo:
            for c in todo:
                try:
                    result = run_cell(c, progress=stepped, time_limit=time_limit,
                                      checkpoints=ckpts, log_dir=log_dir)
                except CellTimedOut as exc:
                    stopped(exc, c.key)
                    continue
                finish(*result)
        elif executor == "processes":
            import multiprocessing
            from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

            steps = multiprocessing.SimpleQueue() if cell_progress is not None else None

            def drain():
                while steps is not None and not steps.empty():
                    key, d, t, unit, sec = steps.get()
                    if key in by_key and key not in gone:
                        stepped(CellStep(by_key[key], d, t, unit, sec))

            gone: set[str] = set()  # cells ended: a late step of theirs is dropped
            with ProcessPoolExecutor(max_workers=workers, initializer=_worker_init,
                                     initargs=(os.getpid(), threads, steps)) as pool, \
                    ctrl_c_between_steps() as interrupted:
                try:
                    futures = {pool.submit(_run_cell_in_worker, c, time_limit, ckpts,
                                           log_dir): c.key for c in todo}
                    pending = set(futures)
                    while pending:
                        if interrupted():
                            raise KeyboardInterrupt
                        finished, pending = wait(pending, timeout=0.2,
                                                 return_when=FIRST_COMPLETED)
                        drain()
                        for f in finished:
                            gone.add(futures[f])
                            try:
                                result = f.result()
                            except CellTimedOut as exc:
                                stopped(exc, futures[f])
                                continue
                            finish(*result)
                except BaseException:  # an error or Ctrl-C: stop now, not after every cell
                    stop_pool(pool)
                    raise
        else:
            try:
                import ray
            except ImportError as exc:
                raise MarketInputError("executor", "the ray executor needs `pip install "
                                                   "fedmarket[ray]` (ray)") from exc
            if not ray.is_initialized():
                import logging

                # ray's own INFO/WARNING lines ("Started a local Ray instance") would break
                # the one-line answer on stderr; its errors still show
                ray.init(address=ray_address, num_cpus=None if ray_address else workers,
                         include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            remote = ray.remote(run_cell)
            refs = {remote.remote(c, time_limit=time_limit, checkpoints=ckpts,
                                  log_dir=log_dir): c.key for c in todo}
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                try:
                    result = ray.get(ready[0])
                except ray.exceptions.RayTaskError as exc:  # a typed error reaches us as itself
                    if isinstance(exc.cause, CellTimedOut):
                        stopped(exc.cause, refs[ready[0]])
                        continue
                    if isinstance(exc.cause, FedmarketError):
                        raise exc.cause from None
                    raise
                finish(*result)
    except CellFailed as exc:  # keep what finished; say so
        raise CellFailed(exc.field, f"{exc.message} ({skipped + done} of {len(cells)} cells "
                                    "are stored; rerun to resume once it is fixed)") from exc
    finally:
        store.close()
    wall = time.perf_counter() - t0
    return {"cells": len(cells), "skipped": skipped, "ran": done,
            "stale_reused": len(stale) - len(redo), "stale_recomputed": len(redo),
            "damaged_deleted": len(damaged), "timed_out": timed_out,
            "wall_s": wall, "work_s": work}


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
            # learning: 20 clients with few samples each and the same task (iid), a sharing
            # cost C = 4 per buyer: FedAvg uses all 19 others' models (most accurate, but
            # its sharing costs exceed its gain: negative utility); iPFL buys only the models
            # worth their price (positive utility, a small accuracy gain over Local)
            {"name": "ipfl-learning", "mechanisms": ["ipfl", "fedavg", "local"],
             "seeds": [0, 1],
             "params": {"partition": "iid", "clients": 20, "rounds": 4, "steps": 10,
                        "batch": 16, "lr": 0.05, "K": 2e4, "C": 4.0, "lam": 2.0}},
        ],
    },
}
