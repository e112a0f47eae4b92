"""The frontier: the trade-off between regret, the operator's deficit and welfare, as a tidy
table (one row per rule) and a figure, with the reference rules placed on it.

:func:`frontier_table` measures the search's candidates and the reference rules on the SAME
markets and marks the rows no other row beats on all four of (regret, deficit, -welfare,
IR violation rate) (Pareto). :func:`corner` states, for a corner of the trade-off (for
example "IR, no deficit, zero regret"), whether a measured rule reaches it, and if not,
the closest one found.
Within the linear family the selection is fixed, so under truthful reports every member has
the same welfare; only the reference rules (their own selections) move it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.ipfl import MarketArrays

from .evaluate import REFERENCES, Markets, evaluate
from .objective import Goal

__all__ = ["LINE_COMBOS", "corner", "frontier_table", "line_table", "pareto", "plot_frontier",
           "plot_line", "regret_floor", "split_points", "write_frontier"]

_KEEP = ("worst_max_regret", "worst_max_rel_regret", "worst_mean_rel_regret", "ir_rate",
         "mean_balance", "mean_rel_deficit", "deficit_rate", "mean_welfare", "participation",
         "utility_level")


_EPS = 1e-9


def pareto(values: np.ndarray) -> np.ndarray:
    """(n,) bool: rows of ``values`` (n, k) (lower is better in every column) that no other
    row weakly beats everywhere and strictly somewhere.

    >>> pareto(np.array([[1, 1], [2, 0], [2, 2]])).tolist()
    [True, True, False]
    """
    v = np.asarray(values, dtype=float)
    le = (v[:, None, :] <= v[None, :, :]).all(axis=2)
    lt = (v[:, None, :] < v[None, :, :]).any(axis=2)
    dominated = (le & lt).any(axis=0)  # some row j beats row i: le[j, i] & lt[j, i]
    return ~dominated


def frontier_table(space, thetas, markets: Markets, *, goal: Goal, references=REFERENCES,
                   names=None, search: dict | None = None, progress=None) -> pd.DataFrame:
    """Measure each parameter vector of ``thetas`` (rules of ``space``) and each reference
    rule on ``markets``; one row per rule: its name, kind ("searched" / "reference"), its
    parameters (JSON), the regret per dimension and direction, IR, balance, deficit,
    welfare, whether it meets ``goal``'s constraints, and ``on_frontier``."""
    rows = []
    thetas = [np.asarray(t, dtype=float) for t in thetas]
    names = list(names) if names is not None else [f"candidate {k}" for k in range(len(thetas))]
    jobs = [(n, "searched", space.rule(t, name=n), t) for n, t in zip(names, thetas,
                                                                        strict=True)]
    jobs += [(n, "reference", mech, None) for n, mech in references.items()]
    for k, (name, kind, mech, theta) in enumerate(jobs):
        ev = evaluate(mech, markets, search=search, name=name)
        row = {"rule": name, "kind": kind,
               "params": "" if theta is None else json.dumps(
                   dict(zip(space.names, np.round(theta, 6).tolist(), strict=True))),
               **{f"max_regret_{d}_{w}": ev.summary[f"max_regret_{d}_{w}"]
                  for d, w in goal.combos},
               **{key: ev.summary[key] for key in _KEEP},
               "regret": goal.regret(ev.summary), "feasible": goal.feasible(ev.summary),
               "seconds": ev.seconds, "clearings": ev.clearings}
        rows.append(row)
        if progress is not None:
            progress(k + 1, len(jobs))
    df = pd.DataFrame(rows)
    df["on_frontier"] = pareto(np.column_stack([df["regret"], df["mean_rel_deficit"],
                                                -df["mean_welfare"], df["ir_rate"]]))
    return df


def corner(table: pd.DataFrame, *, ir: bool = True, max_deficit: float = 0.0,
           regret: float = 0.0) -> str:
    """Is the corner "IR (when asked), mean relative deficit <= max_deficit, regret <=
    regret" reached by a measured rule? If not, name the closest (the least regret among the
    rules meeting the other two, and the least deficit among those meeting the regret)."""
    ok_ir = table["ir_rate"] == 0 if ir else np.ones(len(table), bool)
    budget = table["mean_rel_deficit"] <= max_deficit + _EPS  # balanced rules: float noise
    low = table["regret"] <= regret + _EPS
    want = (f"{'IR, ' if ir else ''}deficit <= {100 * max_deficit:g}% of utility, regret <= "
            f"{100 * regret:g}%")
    hit = table[ok_ir & budget & low]
    if len(hit):
        best = hit.sort_values("regret").iloc[0]
        return f"reached ({want}): {best['rule']} (regret {best['regret']:.4g})"
    parts = [f"not reached by any measured rule ({want})"]
    near = table[ok_ir & budget]
    if len(near):
        b = near.sort_values("regret").iloc[0]
        parts.append(f"least regret within the budget: {b['rule']} (regret {b['regret']:.4g})")
    near = table[ok_ir & low]
    if len(near):
        b = near.sort_values("mean_rel_deficit").iloc[0]
        parts.append(f"least deficit within the regret: {b['rule']} (deficit "
                     f"{100 * b['mean_rel_deficit']:.4g}% of utility)")
    return "; ".join(parts)


def plot_frontier(table: pd.DataFrame, ax=None, *, label_references: bool = True):
    """Regret (relative, the goal's statistic) against the operator's mean relative deficit,
    coloured by welfare; frontier rows ringed, reference rules labelled. Returns the Axes."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 4.2))
    searched = table[table["kind"] == "searched"]
    refs = table[table["kind"] == "reference"]
    sc = ax.scatter(100 * searched["mean_rel_deficit"], 100 * searched["regret"],
                    c=searched["mean_welfare"], cmap="viridis", s=18, label="searched")
    ax.scatter(100 * refs["mean_rel_deficit"], 100 * refs["regret"], marker="s", s=40,
               c="#C44E52", label="reference rules")
    front = table[table["on_frontier"]]
    ax.scatter(100 * front["mean_rel_deficit"], 100 * front["regret"], s=90,
               facecolors="none", edgecolors="k", label="frontier")
    if label_references:
        xy = list(zip(100 * refs["mean_rel_deficit"], 100 * refs["regret"], strict=True))
        for k, (row, dy) in enumerate(zip(refs.itertuples(), _stagger(xy), strict=True)):
            ax.annotate(row.rule, xy[k], textcoords="offset points", xytext=(6, dy),
                        fontsize=8)
    ax.set_xlabel("operator's mean deficit (% of the utility level)")
    ax.set_ylabel("regret (% of the utility level)")
    ax.figure.colorbar(sc, ax=ax, label="mean welfare")
    ax.legend(fontsize=8)
    return ax


def write_frontier(table: pd.DataFrame, folder, provenance: dict) -> tuple[Path, Path]:
    """frontier.csv and its JSON sidecar (provenance: settings, seeds, versions)."""
    from ..results import write_table

    return write_table(table, Path(folder) / "frontier.csv", provenance)


# -- the regret line of the IR, budget-balanced family ------------------------------------

LINE_COMBOS = (("c", "over"), ("c", "under"), ("K", "over"), ("K", "under"))


def split_points(steps: int = 11) -> dict[str, dict]:
    """Weights of the clipped family's two one-parameter lines, s = 0 .. 1 in ``steps``:
    the COST split r_ij = c_j + s (marginal_ij - c_j) (s = 0: the seller is paid its cost;
    s = 1: the buyer pays its whole marginal) and the PRICE split r_ij = P_ij + s
    (r^paper_ij - P_ij) between the buyer's threshold price P_ij = c_j + lam (N_j/N_i) d_ij
    (Eq. 10: the least marginal at which it still buys) and the seller's threshold, the
    paper's remittance (Eq. 12: the largest cost at which it is still bought from). Each
    is clipped to [c_j, marginal_ij], so every point is IR and budget balanced."""
    out = {}
    for s in np.linspace(0.0, 1.0, steps):
        s = float(round(s, 10))
        out[f"cost split s={s:g}"] = {"marginal": s, "cost": 1.0 - s}
        out[f"price split s={s:g}"] = {"marginal": s, "cost": 1.0 - s,
                                       "distance": 2.0 * s - 1.0}
    return out


def line_table(markets: Markets, rules: dict, *, references=REFERENCES,
               search: dict | None = None, progress=None) -> pd.DataFrame:
    """One row per rule (``rules``: name -> payment rule over arrays; then ``references``)
    measured on ``markets`` for the c and K misreports both ways: the largest regret found
    in c and in K (either direction), their maximum, IR rate, mean balance, deficit share
    and mean relative deficit, welfare."""
    jobs = [(n, "family", r) for n, r in rules.items()]
    jobs += [(n, "reference", m) for n, m in references.items()]
    rows = []
    for k, (name, kind, mech) in enumerate(jobs):
        s = evaluate(mech, markets, combos=LINE_COMBOS, search=search, name=name).summary
        c = max(s["max_regret_c_over"], s["max_regret_c_under"])
        K = max(s["max_regret_K_over"], s["max_regret_K_under"])
        rows.append({"rule": name, "kind": kind, "max_regret_c": c, "max_regret_K": K,
                     "max_regret_cK": max(c, K),
                     **{f"max_regret_{d}_{w}": s[f"max_regret_{d}_{w}"]
                        for d, w in LINE_COMBOS},
                     "ir_rate": s["ir_rate"], "mean_balance": s["mean_balance"],
                     "deficit_rate": s["deficit_rate"],
                     "mean_rel_deficit": s["mean_rel_deficit"],
                     "mean_welfare": s["mean_welfare"], "utility_level": s["utility_level"]})
        if progress is not None:
            progress(k + 1, len(jobs))
    return pd.DataFrame(rows)


def _stagger(points, step: float = 11.0) -> list[float]:
    """Vertical label offsets (points): a label whose point lies within 3 % of the data's
    span of an earlier one's is moved one line down per such neighbour (rules coincide)."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    span = np.ptp(pts, axis=0) if len(pts) else np.ones(2)
    span = np.where(span > 0, span, 1.0)
    out = []
    for k in range(len(pts)):
        near = np.all(np.abs(pts[:k] - pts[k]) <= 0.03 * span, axis=1).sum()
        out.append(4.0 - step * float(near))
    return out


def plot_line(table: pd.DataFrame, ax=None, *, floor: float | None = None):
    """Largest K regret against largest c regret: the two split lines of the clipped family
    (IR and budget balanced), other family rules as dots, reference rules as squares
    labelled with their IR breaks and deficits; ``floor`` (:func:`regret_floor`'s largest)
    shades the region no IR rule without deficit reaches. Returns the Axes."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.4, 4.6))
    if floor is not None and np.isfinite(floor):
        ax.fill_between([0, floor], 0, floor, color="0.85", zorder=0,
                        label=f"below the floor {floor:.1f}: no IR rule without deficit")
    fam = table[table["kind"] == "family"]
    for prefix, colour in (("cost split", "#4C72B0"), ("price split", "#55A868")):
        line = fam[fam["rule"].str.startswith(prefix)]
        ax.plot(line["max_regret_c"], line["max_regret_K"], "o-", ms=3, c=colour,
                label=f"{prefix} s = 0..1 (IR, balanced)")
    other = fam[~fam["rule"].str.contains("split")]
    ax.scatter(other["max_regret_c"], other["max_regret_K"], marker="*", s=120, c="#8172B2",
               zorder=3, label="searched (IR, balanced)")
    for row in other.itertuples():
        ax.annotate(row.rule, (row.max_regret_c, row.max_regret_K), textcoords="offset points",
                    xytext=(5, -10), fontsize=8)
    refs = table[table["kind"] == "reference"]
    ax.scatter(refs["max_regret_c"], refs["max_regret_K"], marker="s", s=40, c="#C44E52",
               zorder=3, label="reference rules")
    stagger = _stagger(list(zip(refs["max_regret_c"], refs["max_regret_K"], strict=True)))
    for row, dy in zip(refs.itertuples(), stagger, strict=True):
        notes = []
        if row.deficit_rate > 0:
            notes.append(f"deficit in {100 * row.deficit_rate:.0f}%")
        if row.ir_rate > 0:
            notes.append(f"IR broken in {100 * row.ir_rate:.0f}%")
        label = row.rule + (f" ({', '.join(notes)})" if notes else "")
        ax.annotate(label, (row.max_regret_c, row.max_regret_K), textcoords="offset points",
                    xytext=(6, dy), fontsize=8)
    ax.set_xlabel("largest regret from misreporting c (either way)")
    ax.set_ylabel("largest regret from misreporting K (either way)")
    ax.legend(fontsize=7, loc="lower right")
    return ax


def regret_floor(markets: Markets) -> pd.DataFrame:
    """A lower bound on the largest c-or-K regret of EVERY individually rational rule
    without deficit that keeps the paper's selection (local rule, Eq. 10 prices), per market
    in which that selection makes exactly one trade (i buys j's model):

        floor = (marginal_ij - c_j - 2 lam (N_j/N_i) d_ij) / 2

    Why (a two-line argument, not machine-checked): the trade happens while marginal_ij >=
    P_ij = c_j + lam (N_j/N_i) d_ij (Eq. 11). The buyer, understating K until its marginal
    is P_ij, still buys, and by IR at that (truthful) profile pays at most P_ij there; the
    seller, overstating c up to c_hi = marginal_ij - lam (N_j/N_i) d_ij, is still bought
    from, and by IR there receives at least c_hi. With b the buyer's payment and a <= b the
    seller's receipt at the true reports (no deficit: other clients can only receive), the
    two profits are at least b - P_ij and c_hi - a, which add up to at least c_hi - P_ij:
    one of them is at least half of it. One row per market: ``m``, ``single_trade`` and
    ``floor`` (NaN where the selection does not make exactly one trade)."""
    from .space import pair_features

    mech = REFERENCES["paper"]
    rows = []
    for g in markets.groups:
        A = mech.settle(g["N"], g["c"], g["K"], g["lam"], g["D"])["A"]
        mk = MarketArrays(g["N"], g["c"], g["K"], g["lam"])
        f = pair_features(mk, A, g["D"], ("marginal", "cost", "distance"))
        surplus = np.where(A, f["marginal"] - f["cost"] + 2.0 * f["distance"], -np.inf)
        one = A.sum(axis=(1, 2)) == 1
        best = surplus.reshape(len(surplus), -1).max(axis=1)
        rows.append(pd.DataFrame({"m": A.shape[-1], "single_trade": one,
                                  "floor": np.where(one, np.maximum(best, 0.0) / 2, np.nan)}))
    return pd.concat(rows, ignore_index=True)
