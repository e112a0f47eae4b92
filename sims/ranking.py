"""Rank mechanisms under the user's stated priorities (``fedmarket report --rank-by``).

Priorities are criteria of :data:`CRITERIA`, written one of two ways:

* lexicographic, ``"ir,deficit,welfare"``: fewest IR failures first; among equals, the
  smallest deficit; then the highest welfare (equal means equal within :data:`TIE`, relative
  to the criterion's largest magnitude, so that float rounding never decides);
* weighted, ``"welfare=2,ir=1"``: each criterion is scaled to [0, 1] over the mechanisms
  compared (1 the best of them, 0 the worst; every mechanism 1 when all are equal) and the
  score is the weighted mean; the highest score ranks first.

Each criterion is a mean over seeds of a per-seed number of
:func:`sims.comparison.market_per_seed` (``truthfulness`` is read from the verdict table;
the regret criteria from :func:`sims.comparison.regret_per_seed`: the largest regret a
misreport of N, c or K earns, in utility units, on markets the checker draws with the seed).
The CPL pricing rules are ranked the same way on their own criteria (:data:`CPL_CRITERIA`,
``Priorities.parse(text, family="cpl")``), one game per seed.
Each row also says how far it is ahead of the next one on the criterion that ordered them
(lexicographic: the first on which their means differ; weighted: the heaviest): the paired
difference over the seeds both ran (the same markets or games), its mean and 95 % interval,
whether that interval excludes zero ("separated") or not, and on how many of those seeds it
is ahead (a rule ahead in 8 of 10 games can have intervals that overlap).

>>> import pandas as pd
>>> per_seed = pd.DataFrame({"mechanism": ["a", "a", "b", "b"], "seed": [0, 1, 0, 1],
...                          "welfare": [10.0, 12.0, 11.0, 13.0], "ir_failures": [0, 0, 2, 0],
...                          "operator_balance": [0.0, 0.0, -1.0, 1.0]})
>>> rank(per_seed, Priorities.parse("welfare"))[["rank", "mechanism", "welfare"]]
   rank mechanism  welfare
0     1         b     12.0
1     2         a     11.0
>>> rank(per_seed, Priorities.parse("ir,welfare")).mechanism.tolist()
['a', 'b']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import SpecError
from .stats import ci95

__all__ = ["CPL_CRITERIA", "CPL_DEFAULT", "CRITERIA", "DEFAULT", "INCENTIVE_PROPERTIES",
           "JOINT_CRITERIA", "REGRET_CRITERIA", "TIE", "Criterion", "Priorities", "paired", "rank"]

TIE = 1e-9  # relative: values closer than this times the criterion's scale are equal


@dataclass(frozen=True)
class Criterion:
    """``column``: the per-seed column it is computed from (``transform`` applied per seed);
    ``better``: "higher" or "lower"."""

    column: str
    better: str
    text: str
    transform: str = ""  # "" | "deficit" (max(0, -x)) | "abs"


CRITERIA = {
    "welfare": Criterion("welfare", "higher", "social welfare (Eq. 5) summed over rounds"),
    "balance": Criterion("operator_balance", "higher",
                         "the operator's signed balance (a surplus above a deficit)"),
    "deficit": Criterion("operator_balance", "lower",
                         "the operator's deficit, max(0, -balance) (a surplus counts as 0)",
                         "deficit"),
    "imbalance": Criterion("operator_balance", "lower",
                           "|balance|: how far from budget balance, either way", "abs"),
    "ir": Criterion("ir_failures", "lower", "(round, client) pairs with a negative utility"),
    "worst_utility": Criterion("min_utility", "higher",
                               "the lowest utility of any client in any round"),
    "participation": Criterion("participation", "higher",
                               "share of clients trading, mean over rounds"),
    "payments": Criterion("total_payments", "lower", "money the clients paid"),
    "truthfulness": Criterion("truthfulness", "higher",
                              "incentive properties (Thm 2, truthfulness in c, K, N) the "
                              "checker says hold (needs the verdict tables)"),
    "regret": Criterion("regret", "lower",
                        "the largest regret (utility units) a client earns by misreporting "
                        "N, c or K, either way, on the checker's markets of the seed"),
    **{f"regret_{d}": Criterion(f"regret_{d}", "lower",
                                f"the largest regret (utility units) a client earns by "
                                f"misreporting {d}, either way, on the checker's markets of "
                                "the seed")
       for d in ("N", "c", "K")},
    "regret_joint": Criterion("regret_joint", "lower",
                              "the largest regret (utility units) a client earns by "
                              "misreporting two of N, c, K at once (needs --joint)"),
    **{f"regret_{a}{b}": Criterion(f"regret_{a}{b}", "lower",
                                   f"the largest regret (utility units) a client earns by "
                                   f"misreporting {a} and {b} at once (needs --joint)")
       for a, b in (("N", "c"), ("N", "K"), ("c", "K"))},
}
JOINT_CRITERIA = ("regret_joint", "regret_Nc", "regret_NK", "regret_cK")
REGRET_CRITERIA = ("regret", "regret_N", "regret_c", "regret_K", *JOINT_CRITERIA)
CPL_CRITERIA = {
    "bound": Criterion("objective_bound", "lower",
                       "the convergence bound sum K (1 - q)/q the prices buy"),
    "spent": Criterion("spent", "lower", "what the server pays, sum P_n q_n"),
    "client_utility": Criterion("client_utility_sum", "higher",
                                "the clients' total utility up to each client's constant "
                                "term (a negative sum is not an IR failure)"),
    "negative_prices": Criterion("negative_prices", "lower",
                                 "clients charged to take part (P_n < 0)"),
}
CPL_DEFAULT = "bound"  # the server's objective
INCENTIVE_PROPERTIES = ("thm2", "truthful_c_under", "truthful_K_over", "truthful_K_under",
                        "truthful_N_over", "truthful_N_under")
DEFAULT = "ir,deficit,regret,welfare"  # promises first (no client worse off, no deficit),
# then incentives (the largest profit from lying), then welfare
FAMILIES = {"ipfl": CRITERIA, "cpl": CPL_CRITERIA}


@dataclass(frozen=True)
class Priorities:
    """Criteria in order of importance; ``weights`` None: lexicographic, else weighted."""

    criteria: tuple[str, ...]
    weights: tuple[float, ...] | None = None
    family: str = "ipfl"  # "ipfl" (market mechanisms) or "cpl" (pricing rules)

    def __post_init__(self):
        field = "rank-by" if self.family == "ipfl" else "cpl-rank-by"
        if self.family not in FAMILIES:
            raise SpecError("family", f"is {self.family!r}; choose from {list(FAMILIES)}")
        known = FAMILIES[self.family]
        if not self.criteria:
            raise SpecError(field, f"names no criterion; choose from {', '.join(known)}")
        for c in self.criteria:
            if c not in known:
                raise SpecError(field, f"unknown criterion {c!r}; choose from "
                                       f"{', '.join(known)}")
        if len(set(self.criteria)) != len(self.criteria):
            raise SpecError("rank-by", f"names a criterion twice: {','.join(self.criteria)}")
        if self.weights is not None:
            if len(self.weights) != len(self.criteria):
                raise SpecError("rank-by", "needs one weight per criterion")
            for c, w in zip(self.criteria, self.weights, strict=True):
                if not (np.isfinite(w) and w > 0):
                    raise SpecError("rank-by", f"weight of {c} is {w}; must be a positive "
                                               "finite number")

    @property
    def table(self) -> dict:
        """The criteria this family ranks by (:data:`CRITERIA` or :data:`CPL_CRITERIA`)."""
        return FAMILIES[self.family]

    @classmethod
    def parse(cls, text: str, family: str = "ipfl") -> Priorities:
        """``"ir,deficit,welfare"`` (lexicographic) or ``"welfare=2,ir=1"`` (weighted);
        ``family`` "cpl" reads the CPL criteria (``"bound,negative_prices"``)."""
        field = "cpl-rank-by" if family == "cpl" else "rank-by"
        if not isinstance(text, str):
            raise SpecError(field, f"must be text such as "
                                   f"{CPL_DEFAULT if family == 'cpl' else DEFAULT!r}, got "
                                   f"{text!r}")
        items = [t.strip() for t in text.split(",") if t.strip()]
        weighted = ["=" in t for t in items]
        if any(weighted) and not all(weighted):
            raise SpecError(field, f"{text!r} mixes weights and an order: write "
                                       "'a,b,c' (lexicographic) or 'a=2,b=1' (weighted)")
        if not any(weighted):
            return cls(tuple(items), family=family)
        names, weights = [], []
        for t in items:
            name, _, w = t.partition("=")
            try:
                weights.append(float(w))
            except ValueError:
                raise SpecError(field, f"weight of {name.strip()} is {w!r}; must be a "
                                           "number") from None
            names.append(name.strip())
        return cls(tuple(names), tuple(weights), family=family)

    def describe(self) -> str:
        t = self.table
        if self.weights is None:
            return "lexicographic: " + ", then ".join(
                f"{c} ({t[c].better} is better)" for c in self.criteria)
        return "weighted: " + " + ".join(f"{w:g} x {c} ({t[c].better} is better)"
                                         for c, w in zip(self.criteria, self.weights,
                                                         strict=True))

    @property
    def needs_verdicts(self) -> bool:
        return "truthfulness" in self.criteria

    @property
    def needs_regret(self) -> bool:
        return any(c in REGRET_CRITERIA for c in self.criteria)

    @property
    def needs_joint(self) -> bool:
        """Ranks by a regret of two dimensions misreported at once (``--joint``)."""
        return any(c in JOINT_CRITERIA for c in self.criteria)


def _per_seed_values(per_seed: pd.DataFrame, name: str, table=CRITERIA) -> pd.Series:
    c = table[name]
    x = per_seed[c.column].astype(float)
    if c.transform == "deficit":
        return np.maximum(0.0, -x) + 0.0  # never -0
    if c.transform == "abs":
        return x.abs()
    return x


def _scale(values: pd.Series) -> float:
    v = np.abs(values.to_numpy(float))
    v = v[~np.isnan(v)]
    return max(1.0, float(v.max())) if v.size else 1.0


def rank(per_seed: pd.DataFrame, priorities: Priorities, *, keys=("mechanism",),
         verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per ``keys`` (a mechanism) in rank order: the rank, each criterion's mean over
    seeds, the weighted score (weighted priorities) and ``ahead_of_next``: the paired
    difference to the next row on the criterion that ordered them. ``per_seed``:
    :func:`sims.comparison.market_per_seed`'s rows (with
    :func:`sims.comparison.regret_per_seed`'s columns for the regret criteria; a NaN regret,
    not measured, ranks after every measured one), or :func:`sims.comparison.cpl_per_seed`'s
    for CPL priorities; ``verdicts``: :func:`sims.verdicts.ipfl_verdicts`' rows, needed by
    ``truthfulness``."""
    keys = list(keys)
    per_seed = per_seed.copy()
    if priorities.needs_verdicts:
        if verdicts is None or verdicts.empty:
            raise SpecError("rank-by", "truthfulness needs the verdict tables (a report with "
                                       "--verdict-examples above 0)")
        holds = verdicts[verdicts.property.isin(INCENTIVE_PROPERTIES)].assign(
            h=lambda v: v.verdict == "holds").groupby("mechanism").h.sum()
        per_seed["truthfulness"] = per_seed.mechanism.map(holds).fillna(0).astype(float)
    table_of = priorities.table
    for name in priorities.criteria:
        if table_of[name].column not in per_seed:
            what = ("the joint regret measures (a report with --joint and --regret-markets "
                    "above 0)" if name in JOINT_CRITERIA else
                    "the regret measures (a report with --regret-markets above 0)"
                    if name in REGRET_CRITERIA else f"the column {table_of[name].column!r}")
            raise SpecError("rank-by", f"{name} needs {what}")
        per_seed[f"_{name}"] = _per_seed_values(per_seed, name, table_of)
    cols = [f"_{n}" for n in priorities.criteria]
    means = per_seed.groupby(keys, observed=True, sort=True)[cols].mean()
    means.columns = list(priorities.criteria)
    table = means.reset_index()
    sign = {n: 1.0 if table_of[n].better == "higher" else -1.0 for n in priorities.criteria}
    if priorities.weights is None:
        # lexicographic; values within TIE of the criterion's scale compare equal
        sort_cols = []
        for n in priorities.criteria:
            q = np.round(sign[n] * table[n] / (TIE * _scale(table[n])))
            table[f"_q_{n}"] = q
            sort_cols.append(f"_q_{n}")
        table = table.sort_values(sort_cols + keys, ascending=[False] * len(sort_cols)
                                  + [True] * len(keys), kind="stable")
        table = table.drop(columns=sort_cols)
    else:
        score = np.zeros(len(table))
        for n, w in zip(priorities.criteria, priorities.weights, strict=True):
            v = sign[n] * table[n].to_numpy(float)
            lo, hi = np.nanmin(v, initial=np.inf), np.nanmax(v, initial=-np.inf)
            span = hi - lo
            norm = np.ones_like(v) if span <= TIE * _scale(table[n]) else (v - lo) / span
            score += w * np.nan_to_num(norm, nan=0.0)  # not measured: the worst
        table["score"] = score / sum(priorities.weights)
        table = table.sort_values(["score", *keys], ascending=[False] + [True] * len(keys),
                                  kind="stable")
    table = table.reset_index(drop=True)
    for n in priorities.criteria:  # float rounding reads 0 (a balanced budget's 1e-16)
        v = table[n].to_numpy(float)
        table[n] = np.where(np.abs(v) <= TIE * _scale(table[n]), 0.0, v)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    table["ahead_of_next"] = _ahead(per_seed, table, keys, priorities)
    return table


def _ahead(per_seed, table, keys, priorities: Priorities) -> list[str]:
    """Per row: the paired per-seed difference to the next row (this one minus the next, in
    the criterion's direction: positive = ahead) on the criterion that ordered them: the
    first on which their means differ (lexicographic), the heaviest (weighted)."""
    series = {}
    for k, g in per_seed.groupby(keys, observed=True, sort=True):
        series[k if isinstance(k, tuple) else (k,)] = g.set_index("seed")
    rows = [tuple(r[k] for k in keys) for _, r in table.iterrows()]
    out = []
    for i, (here, nxt) in enumerate(zip(rows, [*rows[1:], None], strict=True)):
        if nxt is None:
            out.append("last")
            continue
        if priorities.weights is None:
            name = next((n for n in priorities.criteria
                         if not abs(table[n].iloc[i] - table[n].iloc[i + 1])
                         <= TIE * _scale(table[n])), priorities.criteria[-1])
        else:
            name = priorities.criteria[int(np.argmax(priorities.weights))]
        sign = 1.0 if priorities.table[name].better == "higher" else -1.0
        a, b = series[here][f"_{name}"], series[nxt][f"_{name}"]
        d = (sign * (a - b)).dropna()
        m, lo, hi, n = ci95(d.to_numpy(float))
        tie = TIE * max(_scale(a), _scale(b))
        wins = int((d > tie).sum())
        if n == 0:
            out.append(f"{name}: no common seeds (not measured?)")
        elif np.all(np.abs(d) <= tie):
            out.append(f"{name}: equal on every seed")
        elif n == 1:
            out.append(f"{name} {m:+.4g} (1 seed)")
        else:
            verdict = "separated" if lo > 0 or hi < 0 else "not separated"
            out.append(f"{name} {m:+.4g} [{lo:+.4g}, {hi:+.4g}] ({verdict}; ahead on "
                       f"{wins} of {n} seeds)")
    return out


def paired(per_seed: pd.DataFrame, name: str, *, family: str = "ipfl",
           keys=("mechanism",)) -> pd.DataFrame:
    """Every pair of rules (a, b) compared seed by seed on criterion ``name``: one row per
    pair with the mean paired advantage of a over b (``mean_advantage_a``: a minus b in the
    criterion's direction, positive when a is better), its 95 % interval, whether it
    excludes zero, and on how many of the seeds both ran a is better, b is better, or they
    are equal (within :data:`TIE`). Overlapping
    intervals of the two rules' means can hide a rule that is better in 8 of 10 games;
    the paired difference does not."""
    table = FAMILIES[family]
    if name not in table:
        raise SpecError("criterion", f"unknown {name!r}; choose from {', '.join(table)}")
    keys = list(keys)
    values = per_seed.assign(_v=_per_seed_values(per_seed, name, table))
    sign = 1.0 if table[name].better == "higher" else -1.0
    series = {(k if isinstance(k, tuple) else (k,)): g.set_index("seed")["_v"]
              for k, g in values.groupby(keys, observed=True, sort=True)}
    rows = []
    names = list(series)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            d = (sign * (series[a] - series[b])).dropna()
            tie = TIE * max(_scale(series[a]), _scale(series[b]))
            m, lo, hi, n = ci95(d.to_numpy(float))
            rows.append({**{f"{k}_a": v for k, v in zip(keys, a, strict=True)},
                         **{f"{k}_b": v for k, v in zip(keys, b, strict=True)},
                         "criterion": name, "mean_advantage_a": m, "low": lo, "high": hi,
                         "separated": bool(n > 1 and (lo > 0 or hi < 0)),
                         "a_better": int((d > tie).sum()), "b_better": int((d < -tie).sum()),
                         "equal": int((d.abs() <= tie).sum()), "seeds": n})
    return pd.DataFrame(rows)
