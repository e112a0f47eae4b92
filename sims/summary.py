"""A reproduction's results that travel: a compact per-cell summary of a sweep store, small
enough to commit next to the page, from which the page, its tables and figures rebuild
(``fedmarket reproduce --no-run`` in a fresh checkout).

Three files next to the page (:data:`FILES`):

* ``reproduction_cells.csv``: one row per (cell, client) of every cell (a cell is one seed):
  the client's last-round accuracies (best over the rounds so far and last), its ledger
  summed over the rounds (gain, cost, payment, utility, models sold; mechanism-level earnings
  and payments), the mean number of others' models it used per round, the cell's swept
  parameters (``param_*``), seconds, code version, config hash and config id; cells without
  clients keep one row (Table 2 at the mechanism level: its totals, :func:`last_rounds`);
* ``reproduction_rounds.csv``: one row per (cell, round) of every cell with rounds (with
  training, and the mechanism-level markets of Fig. 5): the means over clients (``role``
  "all"; ``clients``: how many) of the personalised accuracy and its best so far (cells with
  training), the utility (and its running sum), the models used and the models sold; where
  a cell's clients have roles (Fig. 4, Fig. 5), the same means per (cell, role, round) too;
  Table 2's liars at the mechanism level: the liar's utility in each round of the truthful
  and the lying run, and their running sums; cells without rounds (CPL) have none;
* ``reproduction_cells.json``: the sidecar: the command, setting and seeds, the code
  versions and how many cells each computed, the cells expected and present per scenario,
  and the configuration of every config id (every field but the seed and the algorithm).

Everything the page says is computed from these files, also when the store is at hand (the
store is first summarised, then the summary read back), so the page from the store and from
the committed summary are the same text.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .results import write_atomic

__all__ = ["FILES", "Summary", "config_of", "last_rounds", "merge", "read", "summarise",
           "write"]

FILES = ("reproduction_cells.csv", "reproduction_rounds.csv", "reproduction_cells.json")
ADDITIVE = ("gain", "cost", "payment", "utility", "n_sold", "earned", "paid")
# (CFL's cfl_mean_norm and cfl_max_norm: the norms its split criterion compared that round, of
# the cluster each client was tested in; with one cluster, the mean is that cluster's)
ROUND_MEANS = ("acc_personalised", "acc_personalised_best", "utility", "n_bought", "n_sold",
               "cfl_mean_norm", "cfl_max_norm")
ALL = "all"  # a per-round row's role when it is the mean over every client of the cell
PER_ROUND_ONLY = ("cluster", "update_norm", "cfl_mean_norm", "cfl_max_norm", "active",
                  "participated", "round_welfare", "round_operator_balance")


class Summary:
    """The summary's frames by scenario (``cells``), per-round frames (``rounds``) and the
    sidecar (``meta``)."""

    def __init__(self, cells: dict, rounds: dict, meta: dict):
        self.cells, self.rounds, self.meta = cells, rounds, meta

    @property
    def configs(self) -> dict:
        return self.meta.get("configs", {})


def _config_id(cfg: dict) -> str:
    return hashlib.sha1(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:10]


def config_of(scenario: str, params: dict, seed: int, mechanism: str | None = None) -> dict:
    """The fields (but seed and algorithm) of a cell's full configuration, as the cell ran
    it: a market-level cell's ``mechanism`` puts its selection rule into a config that has
    one (:func:`sims.scenarios.market_rules`; Fig. 5's box2 cells ran rule box2, not the
    config's default)."""
    from .scenarios import SCENARIOS, market_rules
    from .sweep import config_fields

    sc = SCENARIOS[scenario]
    made = sc.make_config(params, seed)
    if mechanism is not None and sc.kind == "mechanism" and sc.custom_rules \
            and hasattr(made, "rule"):
        made = market_rules(made, mechanism)[0]
    cfg = json.loads(json.dumps(config_fields(made), default=str))
    return {k: v for k, v in cfg.items() if k not in ("seed", "algorithm")}


def _per_client(f: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, client): the last round's row with the ledger summed over rounds."""
    keys = ["cell", "client"]
    last = f[f["round"] == f.groupby("cell")["round"].transform("max")]
    last = last.set_index(keys).sort_index()
    by = f.groupby(keys)
    for col in ADDITIVE:
        if col in f:
            last[col] = by[col].sum()
    if "n_bought" in f:
        last["n_bought"] = by["n_bought"].mean()
    last["n_rounds"] = f.groupby("cell")["round"].nunique().reindex(
        last.index.get_level_values("cell")).to_numpy()
    # CFL's clusters (with its update norms); pFedLIA's clusters have no update norms.
    # cfl_min_mean_norm: the smallest norm of a cluster's mean update over the rounds (what
    # eps1 bounds; cells run before it was recorded have none)
    if "update_norm" in f and "cluster" in f and f["cluster"].notna().any():
        aggs = {"cfl_clusters": ("cluster", "max"), "cfl_max_update_norm": ("update_norm", "max")}
        if "cfl_mean_norm" in f:
            aggs["cfl_min_mean_norm"] = ("cfl_mean_norm", "min")
        per_cell = f.groupby("cell").agg(**aggs)
        per_cell["cfl_clusters"] += 1
        last = last.join(per_cell, on="cell")
    return last.drop(columns=[c for c in PER_ROUND_ONLY if c in last]).reset_index()


def _per_round(f: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, round) with the means over the cell's clients (role
    :data:`ALL`); where the cells' clients have more than one role (Fig. 4's attackers and
    traders, Fig. 5's attacker, buyers, sellers and traders), one more row per (cell, role,
    round) with the means over that role's clients. ``clients``: how many clients a row's
    means are over; ``utility_cum``: the row's mean utility summed over the rounds so far."""
    ident = ["scenario", "mechanism", "seed", "cell",
             *sorted(c for c in f if c.startswith("param_"))]
    cols = [c for c in ROUND_MEANS if c in f]
    first = f.groupby("cell")[ident[:3] + ident[4:]].first()
    groups = [(ALL, f)]
    if "role" in f and f["role"].nunique() > 1:
        groups += list(f.groupby("role", sort=True))
    parts = []
    for role, g in groups:
        by = g.groupby(["cell", "round"], sort=True)
        out = by[cols].mean()
        out["clients"] = by["client"].nunique()
        out = out.join(first, on="cell").reset_index()
        out["role"] = role
        if "utility" in out:
            out["utility_cum"] = out.groupby("cell")["utility"].cumsum()
        parts.append(out)
    out = pd.concat(parts, ignore_index=True)
    return out[[*ident, "role", "round", *cols, "clients",
                *(["utility_cum"] if "utility" in out else [])]]


def last_rounds(f: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of a frame without clients whose rows are its rounds, each with the
    cell's totals (Table 2's liars, :func:`sims.scenarios._liars`): the last round's row,
    without the round and the per-round values (``round_*`` columns), with ``n_rounds``; a
    frame without rounds (cells stored before they had them) as it is."""
    if "round" not in f:
        return f.copy()
    by = f.groupby("cell")["round"]
    last = f[f["round"] == by.transform("max")].copy()
    last["n_rounds"] = last["cell"].map(by.nunique())
    return last.drop(columns=["round", *(c for c in f if c.startswith("round_"))])


def _round_values(f: pd.DataFrame) -> pd.DataFrame:
    """The per-round values (``round_*`` columns, named without the prefix) of a frame
    without clients, one row per (cell, round), each with its running sum (``*_cum``)."""
    ident = ["scenario", "mechanism", "seed", "cell",
             *sorted(c for c in f if c.startswith("param_"))]
    cols = {c: c[len("round_"):] for c in f if c.startswith("round_")}
    out = f[[*ident, "round", *cols]].rename(columns=cols).sort_values(["cell", "round"])
    for c in cols.values():
        out[f"{c}_cum"] = out.groupby("cell")[c].cumsum()
    return out.reset_index(drop=True)


def summarise(frames: dict, index: pd.DataFrame, *, command: str, setting: str, seeds,
              expected: dict) -> Summary:
    """The summary of a store's ``frames`` (scenario -> frame) and cell ``index`` (the
    store's cells table); ``expected``: scenario -> number of cells the spec asks for."""
    cells, rounds, configs = {}, {}, {}
    code = index.set_index("key")["code"].to_dict()
    # the cell's wall seconds where the store kept them (an index without them: NaN)
    wall = index.set_index("key")["seconds"].to_dict() if "seconds" in index else {}
    # each cell's parameters as the store keeps them (JSON, their own types): a frame's
    # param_ column holding a parameter some cells lack reads an integer as a float (8.0)
    stored = index.set_index("key")["params"].to_dict() if "params" in index else {}
    for name, f in sorted(frames.items()):
        ids = {}
        for key, g in f.groupby("cell"):
            row = g.iloc[0]
            params = json.loads(stored[key]) if isinstance(stored.get(key), str) else {
                c[len("param_"):]: _plain(row[c]) for c in g
                if c.startswith("param_") and pd.notna(row[c])}
            cfg = config_of(name, params, int(row["seed"]), str(row["mechanism"]))
            ids[key] = _config_id(cfg)
            configs[ids[key]] = cfg
        if "client" in f and "round" in f:
            out = _per_client(f)
            if any(c in f for c in ROUND_MEANS):
                rounds[name] = _per_round(f)
        elif "round" in f:  # a row per round, the cell's totals on each (Table 2's liars)
            out = last_rounds(f)
            rounds[name] = _round_values(f)
        else:
            out = f.copy()
        out["code"] = out["cell"].map(code)
        out["config_id"] = out["cell"].map(ids)
        out["store_seconds"] = out["cell"].map(wall)  # the cell's wall seconds, as stored
        cells[name] = out.reset_index(drop=True)
    done = {s: int(index[index.scenario == s].shape[0]) for s in sorted(expected)}
    versions = index["code"].value_counts().sort_index()
    meta = {"command": command, "setting": setting, "seeds": list(seeds),
            "cells": len(index), "expected": dict(sorted(expected.items())),
            "done": done, "code_versions": {k: int(v) for k, v in versions.items()},
            "configs": dict(sorted(configs.items()))}
    return Summary(cells, rounds, meta)


# columns a cell computed again may differ in: where and when it ran, not what it computed
NOT_RESULTS = ("code", "config_id", "config_hash", "store_seconds")


def _results(df: pd.DataFrame) -> list[str]:
    return sorted(c for c in df if c not in NOT_RESULTS and not c.startswith("seconds"))


def _as_text(col: pd.Series) -> np.ndarray:
    """A column's entries as text for comparing, a missing entry (None, NaN, pandas' NA:
    a parameter the cell does not set) as "" whatever the column's dtype. (``astype(str)``
    keeps pandas' NA in a string column, and NA == NA is not True: two cells that both
    lack a parameter read as different.)"""
    return np.array(["" if pd.isna(v) else str(v) for v in col.astype(object)], dtype=object)


def merge(new: Summary, base: Summary, keys) -> Summary:
    """``new`` (a store's summary) with the cells of ``base`` (a committed summary, e.g. of
    an earlier run) whose key is in ``keys`` and that ``new`` lacks: their per-client and
    per-round rows, configurations and code versions. Every cell in both must agree on every
    result column of ``base`` (all but where and when it ran: :data:`NOT_RESULTS`, timings),
    to 1e-12 relative, else a StoreError names the first that differs; the sidecar records
    how many cells were compared and taken (``merged``)."""
    from .errors import StoreError

    keys = set(keys)
    cells, rounds = dict(new.cells), dict(new.rounds)
    have = {k for f in new.cells.values() for k in f["cell"]}
    compared, taken, codes, configs = 0, 0, {}, {}
    done = dict(new.meta.get("done", {}))
    for name, b in base.cells.items():
        b = b[b["cell"].isin(keys)]
        both = b[b["cell"].isin(have)]
        if not both.empty:
            n = new.cells.get(name, pd.DataFrame(columns=["cell"]))
            sort = [c for c in ("cell", "client", "round") if c in both]
            x = both.sort_values(sort).reset_index(drop=True)
            y = n[n["cell"].isin(set(both["cell"]))].sort_values(sort).reset_index(drop=True)
            cols = [c for c in _results(x) if c in y or x[c].notna().any()]
            for c in cols:
                a_, b_ = x[c], y[c] if c in y else pd.Series(np.nan, index=x.index)
                num = pd.api.types.is_numeric_dtype(a_) and pd.api.types.is_numeric_dtype(b_)
                same = (len(a_) == len(b_)) and (
                    np.allclose(a_.to_numpy(float), b_.to_numpy(float), rtol=1e-12, atol=0,
                                equal_nan=True) if num else
                    (_as_text(a_) == _as_text(b_)).all())
                if not same:
                    raise StoreError("summary", f"{name} cell {x['cell'].iloc[0]}: column "
                                                f"{c} differs between the store and the "
                                                "summary merged into it; the summary's cells "
                                                "are not what this code computes")
            compared += both["cell"].nunique()
        add = b[~b["cell"].isin(have)]
        if add.empty:
            continue
        taken += add["cell"].nunique()
        for code, k in add.drop_duplicates("cell")["code"].value_counts().items():
            codes[code] = codes.get(code, 0) + int(k)
        for cid in add["config_id"].dropna().unique():
            configs[cid] = base.configs[cid]
        cells[name] = pd.concat([cells.get(name), add], ignore_index=True) \
            if name in cells else add.reset_index(drop=True)
        if name in base.rounds:
            r = base.rounds[name]
            r = r[r["cell"].isin(set(add["cell"]))]
            rounds[name] = pd.concat([rounds[name], r], ignore_index=True) \
                if name in rounds else r.reset_index(drop=True)
        done[name] = done.get(name, 0) + add["cell"].nunique()
    meta = {**new.meta, "done": dict(sorted(done.items()))}
    versions = dict(meta.get("code_versions", {}))
    for code, k in codes.items():
        versions[code] = versions.get(code, 0) + k
    meta["code_versions"] = dict(sorted(versions.items()))
    meta["configs"] = dict(sorted({**configs, **meta.get("configs", {})}.items()))
    meta["cells"] = int(meta.get("cells", 0)) + taken
    meta["merged"] = {"compared": compared, "taken": taken}
    return Summary(cells, rounds, meta)


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def write(summary: Summary, folder) -> list[Path]:
    """Write the three files into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f for f in FILES]
    cells = pd.concat(summary.cells.values(), ignore_index=True) if summary.cells else \
        pd.DataFrame(columns=["scenario", "cell"])
    write_atomic(paths[0], lambda tmp: _tidy(cells).to_csv(tmp, index=False))
    rounds = pd.concat(summary.rounds.values(), ignore_index=True) if summary.rounds else \
        pd.DataFrame(columns=["scenario", "cell", "round"])
    write_atomic(paths[1], lambda tmp: _tidy(rounds).to_csv(tmp, index=False))
    meta = json.dumps(summary.meta, indent=1, sort_keys=True, default=str) + "\n"
    write_atomic(paths[2], lambda tmp: tmp.write_text(meta))
    return paths


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Identifying columns first, the rest sorted; rows in a fixed order."""
    first = [c for c in ("scenario", "mechanism", "seed", "cell", "client", "round") if c in df]
    rest = sorted(c for c in df if c not in first)
    order = [c for c in ("scenario", "cell", "client", "role", "round") if c in df]
    return df[first + rest].sort_values(order, kind="stable").reset_index(drop=True)


def read(folder) -> Summary:
    """The summary written by :func:`write` in ``folder``; frames split by scenario, each
    without the columns no row of it fills."""
    from .errors import StoreError

    folder = Path(folder)
    missing = [f for f in FILES if not (folder / f).is_file()]
    if missing:
        raise StoreError("summary", f"{folder} lacks {', '.join(missing)} (run `fedmarket "
                                      "reproduce` to compute the cells and write them)")
    meta = json.loads((folder / FILES[2]).read_text())
    cells = _split(pd.read_csv(folder / FILES[0], low_memory=False))
    rounds = _split(pd.read_csv(folder / FILES[1], low_memory=False))
    return Summary(cells, rounds, meta)


def _split(df: pd.DataFrame) -> dict:
    if df.empty:
        return {}
    return {s: g.dropna(axis=1, how="all").reset_index(drop=True)
            for s, g in df.groupby("scenario", sort=True)}
