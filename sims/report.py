"""``fedmarket report RESULTS``: tables (Markdown + CSV) and figures (PNG) from a sweep store,
as report.md and report.html."""

from __future__ import annotations

import html
import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.errors import FedmarketError

from .errors import SpecError, StoreError
from .ranking import CPL_DEFAULT, DEFAULT, Priorities, paired, rank
from .results import latex_table, write_atomic
from .scenarios import SCENARIOS
from .sweep import Store

__all__ = ["untrusted_rules", "write_report"]


def _md_table(df: pd.DataFrame) -> str:
    df = df.copy()
    for c in df.columns:
        if df[c].dtype.kind == "f":
            df[c] = df[c].map(lambda v: f"{v:.6g}")
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(map(str, r)) + " |" for r in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])


class _Doc:
    def __init__(self, folder: Path):
        self.folder = folder
        self.md: list[str] = []
        self.html: list[str] = []

    def heading(self, text, level=2):
        self.md += ["", "#" * level + " " + text, ""]
        self.html.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def para(self, text):
        self.md += [text, ""]
        self.html.append(f"<p>{html.escape(text)}</p>")

    def table(self, df: pd.DataFrame, name: str, *, shown: int | None = None,
              columns: list | None = None):
        """The whole table as ``name``.csv and ``name``.tex (LaTeX, booktabs: for a paper);
        on the page its first ``shown`` rows (all by default) and ``columns`` (all by
        default)."""
        write_atomic(self.folder / f"{name}.csv", lambda tmp: df.to_csv(tmp, index=False))
        latex = latex_table(df, caption=f"{name} (fedmarket report)", label=f"tab:{name}")
        write_atomic(self.folder / f"{name}.tex", lambda tmp: tmp.write_text(latex))
        part = df if shown is None else df.head(shown)
        part = part if columns is None else part[columns]
        more = "" if len(part) == len(df) and part.shape[1] == df.shape[1] else (
            f"; {len(part)} of {len(df)} rows shown" if len(part) < len(df) else
            "; every column in the file")
        self.md += [_md_table(part), "", f"(table: `{name}.csv`{more})", ""]
        self.html.append(part.to_html(index=False, float_format=lambda v: f"{v:.6g}"))
        if more:
            self.html.append(f"<p>(table: {html.escape(name)}.csv{html.escape(more)})</p>")

    def data(self, df: pd.DataFrame, name: str, provenance: dict) -> Path:
        """A tidy table as CSV with its JSON sidecar (provenance), named in the text but not
        printed."""
        from .results import write_table

        path, _ = write_table(df, self.folder / f"{name}.csv", provenance)
        return path

    def figure(self, fig, name: str, caption: str):
        """Saved as SVG (vector, for papers) and PNG (for the HTML page)."""
        path = self.folder / f"{name}.png"
        fig.tight_layout()
        write_atomic(self.folder / f"{name}.svg", fig.savefig)
        write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=150))
        from .plots import pyplot
        plt = pyplot()

        plt.close(fig)
        self.md += [f"![{caption}]({path.name})", ""]
        self.html.append(f'<figure><img src="{path.name}" width="640">'
                         f"<figcaption>{html.escape(caption)}</figcaption></figure>")


MARKET_NOTE = (
    "Each cell (mechanism, seed) is one market run for its rounds; every number is computed "
    "per seed, then given as the mean and Student's t 95 % interval over seeds (the same "
    "markets for every mechanism). Signs are kept: the operator's balance is sum_i p_i, "
    "positive a surplus it keeps, negative a deficit it pays. ")


IR_SHOWN = 12  # IR failures printed on the page (worst first); the CSV holds them all


def _rerun(df: pd.DataFrame, scenario: str) -> dict:
    """cell key -> the cell as JSON (scenario, mechanism, params, seed): what
    ``sims.sweep.run_cell(Cell(scenario, mechanism, tuple(sorted(params.items())), seed))``
    recomputes."""
    out = {}
    for key, g in df.groupby("cell", sort=True):
        r = g.iloc[0]
        params = {c[len("param_"):]: (v.item() if hasattr(v, "item") else v)
                  for c in g.columns if c.startswith("param_") and pd.notna(v := r[c])}
        out[key] = json.dumps({"scenario": scenario, "mechanism": r.mechanism,
                               "params": dict(sorted(params.items())), "seed": int(r.seed)})
    return out


def _ranking(doc: _Doc, per_seed: pd.DataFrame, keys: list, priorities: Priorities,
             verdicts: pd.DataFrame | None, name: str = "inclusive_ranking",
             option: str = "--rank-by", default: str = DEFAULT, within: list | None = None):
    """The rules ranked under ``priorities`` within each setting of ``within`` (default: the
    swept parameters, ``keys[1:]``)."""
    doc.heading("Ranking under your priorities", level=4)
    stated = f"your {option}" if priorities != Priorities.parse(
        default, family=priorities.family) else (
        f"the default {default!r}; state yours with {option}")
    doc.para(f"Priorities ({stated}): {priorities.describe()}. "
             + " ".join(f"{c}: {priorities.table[c].text}." for c in priorities.criteria)
             + " Each value is a mean over seeds; 'ahead_of_next' is the paired difference "
               "to the next rule over the same seeds on the criterion that ordered them, "
               "with its 95 % interval ('separated' when it excludes zero) and on how many "
               "of the seeds it is ahead.")
    others = keys[1:] if within is None else within
    parts = []
    for k, g in (per_seed.groupby(others, observed=True) if others else [((), per_seed)]):
        k = k if isinstance(k, tuple) else (k,)
        r = rank(g, priorities, keys=keys, verdicts=verdicts)
        parts.append(r)
    doc.table(pd.concat(parts, ignore_index=True), name)


def _inclusive(doc: _Doc, df: pd.DataFrame, verdict_examples: int = 0,
               priorities: Priorities | None = None, regret_markets: int = 0,
               joint: bool = False):
    from .plots import pyplot
    plt = pyplot()

    from .comparison import (
        IR_TOL,
        JOINT_REGRET_METRICS,
        MARKET_METRICS,
        REGRET_METRICS,
        ROLE_METRICS,
        client_totals,
        intervals,
        ir_failures,
        market_per_seed,
        readable,
        regret_per_seed,
        roles_per_seed,
    )
    from .inclusive import InclusiveMarket, run_inclusive_market
    from .plots import plot_transaction_graph, plot_utility_boxes
    from .scenarios import market_rules
    from .verdicts import ipfl_verdicts

    doc.heading("Inclusive market (Fig. 5)")
    raw = df
    mechs = sorted(df.mechanism.unique())
    verdicts = ipfl_verdicts(mechs, examples=verdict_examples) if verdict_examples else None
    keys = ["mechanism", *swept(df)]
    df = place(df, keys[1:])
    prov = _provenance(raw, "inclusive-market")
    doc.heading("Which rule? Welfare, money, participation, individual rationality", level=3)
    doc.para(MARKET_NOTE + " ".join(f"{k}: {v}." for k, v in MARKET_METRICS.items()))
    try:
        per_seed = market_per_seed(df, keys)
    except KeyError as exc:
        per_seed = None
        doc.para(f"Not compared: {exc.args[0]}.")
    metrics = list(MARKET_METRICS)
    legend = {}  # the regret metrics measured, with their legend
    if per_seed is not None and regret_markets:
        reg = regret_per_seed(mechs, sorted(int(x) for x in per_seed.seed.unique()),
                              markets=regret_markets, joint=joint)
        per_seed = per_seed.merge(reg.drop(columns="regret_note"), on=["mechanism", "seed"],
                                  how="left")
        legend = {**REGRET_METRICS, **(JOINT_REGRET_METRICS if joint else {})}
        metrics += list(legend)
        doc.para("Incentives beside the market's numbers: "
                 + " ".join(f"{k}: {v}." for k, v in legend.items())
                 + f" ({regret_markets} markets per seed, 2-5 clients, the checker's "
                   "distribution of the regret properties, not the simulated market; the "
                   "misreport search of sims.design.evaluate, a lower bound on the true "
                   "regret.)")
        for r in reg[reg.regret_note != ""].drop_duplicates("mechanism").itertuples():
            doc.para(f"Regret of {r.mechanism}: {r.regret_note}.")
    if per_seed is not None:
        summary = intervals(per_seed, keys, metrics, bounds={
            "participation": (0.0, 1.0), **{k: (0.0, np.inf) for k in legend}})
        doc.table(readable(summary, keys), "inclusive_comparison")
        a = doc.data(per_seed, "inclusive_comparison_seeds", prov)
        b = doc.data(summary, "inclusive_comparison_intervals", prov)
        doc.para(f"One row per cell: `{a.name}`; the intervals as numbers: `{b.name}`.")
        _ranking(doc, per_seed, keys, priorities or Priorities.parse(DEFAULT), verdicts)
    fails = ir_failures(df, keys)
    doc.heading("Individual rationality failures", level=4)
    if fails.empty:
        doc.para("No client of any mechanism had a negative utility in any round "
                 f"(tolerance {IR_TOL:g} x max(1, |gain|)).")
    else:
        fails["rerun"] = fails.cell.map(_rerun(raw, "inclusive-market"))
        doc.para(f"{len(fails)} (mechanism, seed, client) with a negative utility in some "
                 "round, worst first: in how many rounds, the worst round and the utility "
                 "there (the shortfall), and the cumulative utility. 'rerun' is the cell: "
                 "`sims.sweep.run_cell(Cell(scenario, mechanism, tuple(sorted("
                 "params.items())), seed))` recomputes it.")
        doc.table(fails, "inclusive_ir_failures", shown=IR_SHOWN,
                  columns=[c for c in fails.columns if c not in ("cell", "rerun")])
    roles = roles_per_seed(df, keys)
    doc.heading("By role", level=3)
    doc.table(readable(intervals(roles, keys, list(ROLE_METRICS)), keys), "inclusive_summary")
    per = client_totals(df, keys)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(mechs)))
    plot_utility_boxes(per, ax=ax)
    doc.figure(fig, "utility_boxplot", "Per-client cumulative utility, by mechanism "
                                       "(every client of every seed)")
    fig, ax = plt.subplots(figsize=(8, 4))
    roles = [r for r in ("trader", "buyer", "seller", "attacker") if r in set(per.role)]
    width = 0.8 / len(mechs)
    for k, m in enumerate(mechs):
        means = per[per.mechanism == m].groupby("role").utility.mean()
        ax.bar(np.arange(len(roles)) + k * width, [means.get(r, np.nan) for r in roles],
               width, label=m)
    ax.set_xticks(np.arange(len(roles)) + 0.4 - width / 2, roles)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylabel("mean cumulative utility")
    ax.legend(frameon=False, fontsize=8)
    doc.figure(fig, "utility_by_role", "Mean cumulative utility by role, for each mechanism")
    first = raw[(raw.seed == raw.seed.min())]
    rounds = int(first["round"].max()) + 1
    params = {c[len("param_"):]: first[c].iloc[0] for c in first.columns
              if c.startswith("param_")}
    cfg = InclusiveMarket(**{**params, "rounds": rounds, "seed": int(first.seed.iloc[0])})
    for mech in mechs:
        try:
            mcfg, rules = market_rules(cfg, mech)
        except FedmarketError as exc:  # a rule of your own not importable here
            doc.para(f"Transaction graph of {mech}: not drawn ({exc}).")
            continue
        res = run_inclusive_market(mcfg, **rules)
        fig, ax = plt.subplots(figsize=(7, 6))
        plot_transaction_graph(res.flows, res.roles, ax=ax, title=f"Money flows: {mech}")
        note = "" if res.flows.any() or not res.rounds.payment.any() else (
            "; this rule pays the operator, so no client-to-client flows")
        slug = "".join(ch if ch.isalnum() else "_" for ch in mech)
        doc.figure(fig, f"transaction_graph_{slug}", f"Money flows over {rounds} rounds "
                                                  f"({mech}, seed {cfg.seed}){note}")
    if verdicts is not None:
        _verdicts(doc, verdicts, "inclusive_verdicts", verdict_examples)


def _verdicts(doc: _Doc, table: pd.DataFrame, name: str, examples: int):
    """A mechanism x property table of verdicts, then the details of each counterexample."""

    def cell(r):
        if r.verdict != "counterexample":
            if r.verdict == "not checked":
                return "not checked"
            return (f"{r.verdict} ({r.discriminating:,} discriminating of {r.effective:,} "
                    f"effective, {r.engine})")
        if isinstance(r.regret, float) and r.regret == r.regret:
            return f"fails (regret {r.regret:.3g})"
        return f"fails ({r.detail})" if r.detail else "fails"

    doc.heading("Property verdicts per mechanism", level=3)
    from .verdicts import TIME_LIMIT

    doc.para(f"The property checker on markets it draws itself (batch engine, {examples:,} "
             "discriminating examples per property -- markets on which the property could "
             f"have failed, e.g. a lie that changed the outcome --, at most {TIME_LIMIT:g} s "
             "each, seed 0), not on the simulated market: 'holds' = no counterexample found "
             "on the full budget; 'inconclusive' = fewer discriminating examples than the "
             "budget (a rule of your own not written over arrays is cleared market by market "
             "and may stop at the time limit; a property that discriminates on fewer than 1 "
             "draw in 20 stops at the draw cap); 'vacuous' = no drawn market could have "
             "failed it (a truthfulness property of a rule that ignores the reports): no "
             "evidence either way; 'fails' = the checker found one (budget: deficit or "
             "surplus and the operator's signed balance sum_i p_i on the counterexample, "
             "negative a deficit; incentives: the largest regret the full misreport search of "
             "proofs.regret finds on the counterexample, the figure the details describe; a "
             "lower bound on the worst case). 'not checked' rows say why in the details.")
    wide = table.assign(v=[cell(r) for r in table.itertuples()]).pivot(
        index="mechanism", columns="property", values="v")
    wide = wide[[k for k in dict.fromkeys(table.property)]].reset_index()
    doc.table(wide, name)
    ces = table[table.verdict.isin(["counterexample", "not checked"])][
        ["mechanism", "property", "examples", "regret", "detail"]]
    if not ces.empty:
        doc.table(ces, f"{name}_details")


SEEDS_NOTE = ("One row per cell (mechanism, setting, seed) in the store; here the mean and "
              "Student's t 95 % interval over seeds per mechanism and setting.")


def _over_seeds(doc: _Doc, df: pd.DataFrame, keys: list, metrics: list, name: str,
                scenario: str):
    """A scenario whose rows are one per cell: the metrics' mean and 95 % interval over seeds
    per ``keys`` (and every other swept parameter), the cells themselves as a CSV."""
    from .comparison import intervals, readable

    others = [c for c in swept(df) if c[len("param_"):] not in keys]
    df = place(df, others)
    keys = ["mechanism", *[k for k in keys if k in df], *others]
    doc.table(readable(intervals(df, keys, metrics), keys), name)
    cells = df[[*keys, "seed", *(["cell"] if "cell" in df else []), *metrics]]
    path = doc.data(cells.sort_values([*keys, "seed"]), f"{name}_seeds",
                    _provenance(df, scenario))
    doc.para(f"{SEEDS_NOTE} The cells: `{path.name}`.")


def _liars(doc: _Doc, df: pd.DataFrame):
    from .summary import last_rounds

    df = last_rounds(df)  # the cells' totals (their rows are rounds)
    doc.heading("Liars (Table 2)")
    doc.para("The liar's TRUE cumulative utility when lying vs honest, with exact thresholds "
             "and with the published code's numerics side by side.")
    _over_seeds(doc, df, ["kind", "factor", "thresholds"],
                ["liar_utility_honest", "liar_utility_lying", "liar_gain", "liar_buyers",
                 "honest_min_utility"], "liars", "liars")


def _attacks(doc: _Doc, df: pd.DataFrame):
    doc.heading("Attacks (Fig. 4, mechanism level)")
    # the distance metric's column is named apart from the summary's 'metric' column
    _over_seeds(doc, df.rename(columns={"metric": "distance"}), ["distance", "attack"],
                ["attacker_earned", "attacker_buyers", "honest_min_utility",
                 "honest_mean_utility"], "attacks", "attacks")


CPL_NOTE = (
    "Each cell (pricing rule, budget, seed) is one game, solved or priced on its own; its "
    "numbers are computed per seed, then given as the mean and Student's t 95 % interval "
    "over seeds (rules are compared on the same games: the same seeds at each budget). "
    "objective_bound: the convergence bound sum K (1 - q)/q the server minimises (lower is "
    "better); spent: sum P_n q_n; client_utility_sum: the clients' total utility "
    "U_n = P_n q_n - c_n q_n^2 - v_n sum_m K_m (1 - q_m)/q_m WITHOUT each client's constant "
    "term (its value of the model, which the game does not know), so a negative sum is no "
    "IR failure: compare it across rules, not with 0; negative_prices: clients charged to "
    "take part.")


def _provenance(df: pd.DataFrame, scenario: str) -> dict:
    """Where a report table's numbers come from: the store's cells and their settings."""
    out = {"scenario": scenario, "command": "fedmarket report",
           "seeds": sorted(int(s) for s in df.seed.unique())}
    if "cell" in df:
        cells = df.groupby("cell", sort=True).first()
        out["cells"] = {k: {"mechanism": r.mechanism, "seed": int(r.seed),
                            **({"config_hash": r.config_hash} if "config_hash" in df else {}),
                            **({"seed_entropy": str(r.seed_entropy)}
                               if "seed_entropy" in df else {})}
                        for k, r in cells.iterrows()}
    if "versions" in df:
        out["code_versions"] = sorted(map(str, df.versions.unique()))
    return out


def _cpl(doc: _Doc, df: pd.DataFrame, verdict_examples: int = 0,
         priorities: Priorities | None = None):
    from .plots import pyplot
    plt = pyplot()

    from .comparison import CPL_BOUNDS, CPL_METRICS, cpl_per_seed, intervals, readable
    from .plots import plot_budget_sweep

    doc.heading("CPL pricing")
    doc.para(CPL_NOTE)
    others = [c for c in swept(df) if c != "param_budget"]
    df = place(df, others)
    keys = ["mechanism", *others, "budget"]
    per_seed = cpl_per_seed(df, keys)
    summary = intervals(per_seed, keys, list(CPL_METRICS), bounds=CPL_BOUNDS)
    doc.table(readable(summary, keys).sort_values(["budget", *others, "mechanism"]),
              "cpl_pricing")
    prov = _provenance(df, "cpl-pricing")
    seeds_path = doc.data(per_seed, "cpl_pricing_seeds", prov)
    summary_path = doc.data(summary, "cpl_pricing_intervals", prov)
    doc.para(f"One row per cell: `{seeds_path.name}`; the intervals as numbers: "
             f"`{summary_path.name}` (each with a JSON sidecar: cells, config hashes, seeds, "
             "versions).")
    priorities = priorities or Priorities.parse(CPL_DEFAULT, family="cpl")
    within = [*others, "budget"]
    _ranking(doc, per_seed, keys, priorities, None, name="cpl_ranking",
             option="--cpl-rank-by", default=CPL_DEFAULT, within=within)
    deciding = priorities.criteria[0] if priorities.weights is None else \
        priorities.criteria[int(np.argmax(priorities.weights))]
    pairs = []
    for k, g in per_seed.groupby(within, observed=True):
        k = k if isinstance(k, tuple) else (k,)
        pr = paired(g, deciding, family="cpl")
        for c, v in zip(within, k, strict=True):
            pr.insert(0, c, v)
        pairs.append(pr)
    doc.heading("Paired differences, game by game", level=4)
    doc.para(f"Every two pricing rules compared on the same games (seeds) at each budget, on "
             f"{deciding}: the mean of the per-game advantage of a over b (positive when a "
             "is better), its 95 % interval, and in how many games each is better. The "
             "intervals of the two means above can overlap where one rule is better in "
             "most games; this table says so.")
    doc.table(pd.concat(pairs, ignore_index=True), "cpl_paired")
    if per_seed.budget.nunique() > 1:
        bound = summary[summary.metric == "objective_bound"]
        for k, part in (bound.groupby(others, observed=True) if others else [((), bound)]):
            k = k if isinstance(k, tuple) else (k,)
            label = ", ".join(f"{c[len('param_'):]}={v}" for c, v in zip(others, k,
                                                                          strict=True))
            fig, ax = plt.subplots(figsize=(6, 4))
            plot_budget_sweep(part.rename(columns={"mechanism": "scheme",
                                                   "mean": "objective_bound"}), ax=ax)
            seeds = int(part.seeds.max())
            what = "; ".join(filter(None, [label, f"mean and 95 % interval over {seeds} seeds"]))
            ax.set_title(f"CPL: bound vs budget ({what})", fontsize=9)
            slug = "_".join(str(v).replace(" ", "-") for v in k)
            doc.figure(fig, "cpl_budget_sweep" + (f"_{slug}" if slug else ""),
                       f"Bound against budget for each pricing rule ({what})")
    eq = df[df.mechanism == "bisection"]
    if not eq.empty:  # one game: the largest budget, the first seed and setting
        b = eq.budget.max()
        part = eq[eq.budget == b]
        part = part[part.seed == part.seed.min()]
        part = part[part.cell == part.cell.iloc[0]] if "cell" in part else part
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        axes[0].scatter(part.v, part.price, s=14)
        vt = part.v_threshold.iloc[0]
        if np.isfinite(vt):
            axes[0].axvline(vt, ls="--", color="#DD8452", label=f"v^t = {vt:.4g}")
            axes[0].legend(frameon=False)
        axes[0].set_xlabel("v_n")
        axes[0].set_ylabel("price P_n")
        axes[1].scatter(part.a, part.q, s=14, c="#55A868")
        axes[1].set_xscale("log")
        axes[1].set_xlabel("a_n")
        axes[1].set_ylabel("q_n")
        doc.figure(fig, "cpl_prices", f"Equilibrium prices and participation (B = {b:g}, "
                                      f"seed {int(part.seed.iloc[0])})")
    if verdict_examples:
        from .verdicts import cpl_verdicts

        _verdicts(doc, cpl_verdicts(sorted(df.mechanism.unique()), examples=verdict_examples),
                  "cpl_verdicts", verdict_examples)


LEARNING_NOTE = (
    "Statistics are over seeds: each seed's mean over clients is one sample; the interval is "
    "Student's t 95 % interval; 'client spread' is the standard deviation over clients, shown "
    "apart. 'best acc' is each client's best personalised accuracy over the rounds (what the "
    "iPFL authors report), 'last-round acc' the last round's. Utility is cumulative per "
    "client with the ledger of the algorithm's family (learning.algorithms.Algorithm): "
    "baselines pay nothing and gain from every model they aggregate, so FedAvg-like "
    "algorithms, which aggregate everyone, get the full-graph utility; iPFL buys only the "
    "models worth their price and pays for them.")


NOT_SET = "not set"  # a cell that lacks a swept parameter (it plays no part in it)


def swept(df: pd.DataFrame) -> list[str]:
    """The swept parameters (``param_*`` columns) of a scenario's rows: more than one value,
    or a value in some cells and none in others (Local has no lambda in a lambda sweep)."""
    out = []
    for c in sorted(c for c in df.columns if c.startswith("param_")):
        values = df[c].dropna().unique()
        if len(values) > 1 or (len(values) == 1 and df[c].isna().any()):
            out.append(c)
    return out


def _label(v) -> str:
    return NOT_SET if pd.isna(v) else f"{v:g}" if isinstance(v, float) else str(v)


def place(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``df`` with each swept parameter in ``keys`` as an ordered categorical of labels
    (numbers in numeric order, then :data:`NOT_SET` for the cells that lack it), so that
    grouping keeps every cell (a NaN key would drop it) and tables read in order."""
    df = df.copy()
    for c in keys:
        values = list(df[c].dropna().unique())
        try:
            values = sorted(values)
        except TypeError:  # mixed kinds: their order of appearance
            pass
        order = list(dict.fromkeys([_label(v) for v in values]
                                   + ([NOT_SET] if df[c].isna().any() else [])))
        df[c] = pd.Categorical(df[c].map(_label), categories=order, ordered=True)
    return df


def _setting(df: pd.DataFrame, keys: list[str]) -> str:
    fixed = [c for c in df.columns if c.startswith("param_") and c not in keys
             and df[c].notna().all()]
    return ", ".join(f"{c[len('param_'):]}={df[c].iloc[0]}" for c in fixed)


def _against(doc: _Doc, runs: pd.DataFrame, key: str, keys: list[str], title: str,
             name: str):
    """Best accuracy and utility per client (mean and 95 % interval over seeds) against the
    swept parameter ``key``, a line per mechanism (and value of the other swept parameters);
    a mechanism whose cells lack ``key`` is a horizontal band across the plot."""
    from .plots import pyplot
    plt = pyplot()

    from .stats import ACC, ci95

    param = key[len("param_"):]
    cats = [c for c in pd.Categorical(runs[key]).categories if c != NOT_SET]
    numbers = pd.to_numeric(pd.Series(cats), errors="coerce")
    numeric = bool(len(cats)) and numbers.notna().all()
    xs = dict(zip(cats, numbers if numeric else range(len(cats)), strict=True))
    others = [k for k in keys if k != key]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, label, bounds in ((axes[0], "acc_best", "best personalised accuracy", ACC),
                                      (axes[1], "utility", "cumulative utility per client",
                                       None)):
        for k, g in runs.groupby(["mechanism", *others], observed=True):
            k = k if isinstance(k, tuple) else (k,)
            line = ", ".join([str(k[0]), *(f"{o[len('param_'):]}={v}"
                                           for o, v in zip(others, k[1:], strict=True))])
            at = g[g[key] != NOT_SET]
            if not at.empty:
                pts = [(xs[v], *ci95(h[metric], bounds)[:3]) for v, h in
                       at.groupby(key, observed=True)]
                x, m, lo, hi = map(np.asarray, zip(*pts, strict=True))
                drawn, = ax.plot(x, m, "o-", label=line)
                ok = np.isfinite(lo)
                if ok.sum() > 1:
                    ax.fill_between(x[ok], lo[ok], hi[ok], color=drawn.get_color(), alpha=0.15)
            unset = g[g[key] == NOT_SET]
            if not unset.empty:  # the parameter plays no part: a reference band
                m, lo, hi, _ = ci95(unset[metric], bounds)
                ax.axhline(m, ls="--", lw=1, color="grey" if at.empty else None,
                           label=f"{line} (no {param})")
                if np.isfinite(lo):
                    ax.axhspan(lo, hi, color="grey", alpha=0.1)
        if numeric:
            vals = np.asarray(list(xs.values()), dtype=float)
            if (vals > 0).all() and vals.max() / vals.min() >= 100:
                ax.set_xscale("log")
        else:
            ax.set_xticks(list(xs.values()), cats)
        ax.set_xlabel(param)
        ax.set_ylabel(f"{label} (95 % CI over seeds)")
        ax.legend(frameon=False, fontsize=7)
    fig.suptitle(f"{title}: against {param}", fontsize=9)
    with_it = int((runs[key] != NOT_SET).sum())
    doc.figure(fig, f"{name}_against_{param}",
               f"Best accuracy and utility against {param} ({with_it} runs with {param}; "
               f"{len(runs) - with_it} without it, dashed)")


def _learning(doc: _Doc, df: pd.DataFrame, title: str, name: str):
    from .plots import pyplot
    plt = pyplot()

    from .claims import per_run, seed_table
    from .plots import plot_accuracy_by_round
    from .results import write_table
    from .stats import ci95

    doc.heading(title)
    doc.para(LEARNING_NOTE)
    # every swept parameter is a grouping key (rows never merge different settings); the
    # cells that lack one are kept and labelled NOT_SET, never dropped
    keys = swept(df)
    raw, df = df, place(df, keys)
    rounds_path, _ = write_table(raw, doc.folder / f"{name}_rounds.parquet",
                                 {"scenario": name, "rows": "one per round and client"})
    doc.para(f"Per-round results: `{rounds_path.name}`. Fixed parameters: "
             f"{_setting(df, keys) or 'the scenario defaults'}; rounds: "
             f"{int(df['round'].max()) + 1}; seeds: {df.seed.nunique()}.")
    runs = per_run(df, ["mechanism", *keys])
    defaults = {f.name: f.default for f in fields(SCENARIOS[name].config)} \
        if name in SCENARIOS else {}
    for c in keys:
        unset = sorted(raw.loc[raw[c].isna(), "mechanism"].unique())
        if unset:
            p = c[len("param_"):]
            ran = f" ran at the scenario's default ({p} = {defaults[p]})" if p in defaults \
                else " did not set it"
            doc.para(f"Cells without {p} ({', '.join(unset)}){ran}; they are kept, as "
                     f"'{NOT_SET}' in the table and as dashed lines in the figure against "
                     f"{p}.")
    table = seed_table(runs, ["mechanism", *keys])
    if "ari" in df:
        ari = df.groupby(["mechanism", *keys, "seed"]).ari.first().groupby(
            ["mechanism", *keys]).agg(
                lambda v: "{:.3f} [{:.3f}, {:.3f}]".format(*ci95(v, (-1.0, 1.0))[:3]))
        table = table.merge(ari.rename("ARI vs true groups").reset_index(), how="left")
    doc.table(table, name)
    for c in keys:
        _against(doc, runs, c, keys, title, name)
    groups = runs.groupby(keys, observed=True) if keys else [((), runs)]
    for k, g in groups:
        k = k if isinstance(k, tuple) else (k,)
        label = ", ".join(f"{c[len('param_'):]}={v}" for c, v in zip(keys, k, strict=True))
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        ax = axes[0]
        for mech, r in g.groupby("mechanism"):
            am, alo, ahi, _ = ci95(r.acc_best)
            um, ulo, uhi, _ = ci95(r.utility)
            yerr = None if not np.isfinite(alo) else [[am - max(alo, 0.0)], [min(ahi, 1.0) - am]]
            xerr = None if not np.isfinite(ulo) else [[um - ulo], [uhi - um]]
            ax.errorbar(um, am, xerr=xerr, yerr=yerr, fmt="o", capsize=3, label=mech)
            ax.annotate(mech, (um, am), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_ylim(max(0.0, ax.get_ylim()[0]), min(1.0, ax.get_ylim()[1]))
        ax.set_xlabel("cumulative utility per client")
        ax.set_ylabel("best personalised accuracy (95 % CI over seeds)")
        ax.legend(frameon=False, fontsize=7)
        sub = df
        for c, v in zip(keys, k, strict=True):
            sub = sub[sub[c] == v]
        plot_accuracy_by_round(sub, ax=axes[1])
        fig.suptitle(f"{title}" + (f" ({label})" if label else "") + f"; {_setting(df, keys)}",
                     fontsize=9)
        slug = "_".join(str(v).replace(" ", "-") for v in k) if k else "all"
        doc.figure(fig, f"{name}_{slug}", f"Accuracy against utility, and by round "
                                          f"({label or 'all'})")


def write_report(folder, out=None, *, verdict_examples: int = 10_000,
                 rank_by: str | Priorities = DEFAULT,
                 cpl_rank_by: str | Priorities = CPL_DEFAULT,
                 regret_markets: int | None = None, joint: bool = False,
                 rules_from=()) -> tuple[Path, Path]:
    """report.md and report.html (plus tables and figures) of the store in ``folder``,
    written to ``out`` (default: the store's folder). The store is opened read-only; an
    empty, corrupt or foreign store is a StoreError and nothing is written.

    The mechanism names in the store are data: a rule of your own ("module:function") is
    imported (for its verdicts, regret and transaction graph) only if you name its module in
    ``rules_from`` (``--rules-from``), found on ``sys.path`` as usual; any other is never
    imported, and its rows say "not checked" with the reason
    (:func:`mechanisms.lookup.names_from_data`; :func:`untrusted_rules` lists them).

    ``verdict_examples``: markets the property checker draws per (mechanism, property) for
    the verdict tables of the iPFL and CPL sections (0: no verdict tables).
    ``rank_by``: the priorities the market mechanisms are ranked under
    (:class:`sims.ranking.Priorities` or its text, e.g. ``"ir,deficit,regret,welfare"`` or
    ``"welfare=2,ir=1"``); ``cpl_rank_by`` those of the CPL pricing rules (``"bound"``);
    checked before anything is read. ``regret_markets``: markets per seed on which each
    market mechanism's regret is measured (:func:`sims.comparison.regret_per_seed`; 0: not
    measured, and no regret criterion may be ranked by; default
    :data:`sims.comparison.REGRET_MARKETS`). ``joint``: also the regret of two dimensions
    misreported at once (regret_Nc, regret_NK, regret_cK, regret_joint: columns of the
    comparison table and criteria of ``rank_by``)."""
    from .comparison import REGRET_MARKETS

    priorities = rank_by if isinstance(rank_by, Priorities) else Priorities.parse(rank_by)
    cpl_priorities = cpl_rank_by if isinstance(cpl_rank_by, Priorities) else \
        Priorities.parse(cpl_rank_by, family="cpl")
    if priorities.family != "ipfl" or cpl_priorities.family != "cpl":
        raise SpecError("rank-by", "rank_by takes the market criteria, cpl_rank_by the CPL "
                                   "ones")
    if priorities.needs_verdicts and not verdict_examples:
        raise SpecError("rank-by", "truthfulness needs the verdict tables; give "
                                   "verdict_examples (--verdict-examples) above 0")
    regret_markets = REGRET_MARKETS if regret_markets is None else regret_markets
    if isinstance(regret_markets, bool) or not isinstance(regret_markets, int) \
            or regret_markets < 0:
        raise SpecError("regret-markets", f"is {regret_markets!r}; an integer >= 0")
    if priorities.needs_regret and not regret_markets:
        raise SpecError("rank-by", f"{', '.join(priorities.criteria)} ranks by regret, which "
                                   "needs regret_markets (--regret-markets) above 0")
    if not isinstance(joint, bool):
        raise SpecError("joint", f"is {joint!r}; True or False")
    if joint and not regret_markets:
        raise SpecError("joint", "measures regret: needs regret_markets (--regret-markets) "
                                 "above 0")
    if priorities.needs_joint and not joint:
        raise SpecError("rank-by", f"{', '.join(priorities.criteria)} ranks by the regret of "
                                   "two dimensions at once, which needs joint=True (--joint)")
    import matplotlib

    from mechanisms.lookup import names_from_data

    matplotlib.use("Agg")
    folder = Path(folder)
    out = folder if out is None else Path(out)
    with names_from_data(f"the store in {folder}", rules_from):
        store = Store(folder, mode="r")
        doc = _write(store, folder, out, verdict_examples, priorities, cpl_priorities,
                     regret_markets, joint)
    md = write_atomic(out / "report.md", lambda tmp: tmp.write_text("\n".join(doc.md) + "\n"))
    text = ("<!doctype html><html><head><meta charset='utf-8'><title>fedmarket report"
            "</title></head><body>" + "\n".join(doc.html) + "</body></html>\n")
    page = write_atomic(out / "report.html", lambda tmp: tmp.write_text(text))
    return md, page


def untrusted_rules(folder, rules_from=()) -> list[str]:
    """The rules of your own ("module:function") the store in ``folder`` names whose module
    is not in ``rules_from``: those :func:`write_report` will not import."""
    from mechanisms.lookup import untrusted

    store = Store(folder, mode="r")
    try:
        cells = store.cells()
    finally:
        store.close()
    names = list(cells.mechanism.astype(str))
    for params in cells.params:
        try:
            params = json.loads(params)
        except (TypeError, ValueError):
            continue
        if isinstance(params, dict):
            names += [v for v in params.values() if isinstance(v, str)]
    return untrusted(names, rules_from)


def _write(store, folder, out, verdict_examples, priorities, cpl_priorities,
           regret_markets, joint) -> _Doc:
    try:
        cells = store.cells()
        if cells.empty:
            raise StoreError("results", f"{folder} holds no finished cells; nothing to "
                                        "report")
        store.verify()
        out.mkdir(parents=True, exist_ok=True)
        doc = _Doc(out)
        doc.md.append("# fedmarket comparison report")
        doc.html.append("<h1>fedmarket comparison report</h1>")
        doc.para(f"{len(cells)} cells; scenarios: "
                 + ", ".join(f"{k} ({v})" for k, v in cells.scenario.value_counts().items()))
        handlers = {"inclusive-market": _inclusive, "liars": _liars, "attacks": _attacks,
                    "cpl-pricing": _cpl}
        for scenario in cells.scenario.unique():
            df = store.frame(scenario)
            if scenario == "inclusive-market":
                _inclusive(doc, df, verdict_examples, priorities, regret_markets, joint)
            elif scenario == "cpl-pricing":
                _cpl(doc, df, verdict_examples, cpl_priorities)
            elif scenario in handlers:
                handlers[scenario](doc, df)
            elif SCENARIOS[scenario].kind == "learning":
                _learning(doc, df, f"Learning: {SCENARIOS[scenario].description}", scenario)
    finally:
        store.close()
    return doc
