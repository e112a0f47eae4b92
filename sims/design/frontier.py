"""The frontier: welfare against the largest regret per type dimension, one point per rule,
with the rules that break IR or run a deficit marked as such; as a tidy table and a figure.

**Families by registration.** The rules placed on the frontier are the search's candidates
(``fedmarket design``) and every rule of every registered family
(:func:`register_family`): the paper's rule, the clipped family's midpoint split, VCG, the
Shapley split, cost-plus and share-all register here; a module that adds a family of rules
(posted prices, trade reduction, joint rules ...) calls :func:`register_family` when it is
imported, and the frontier picks it up.

**Measures** (:func:`frontier_table`, on the SAME markets for every rule): per type dimension
(N, c, K) the largest regret found over the markets and both directions, in UTILITY UNITS
(``largest_regret_<dim>``) and RELATIVE to the rule's utility level (``largest_rel_regret_
<dim>``: 1 = 100 % of the level), the mean (expected) regret and every other regret
statistic :func:`sims.design.evaluate.evaluate` reports; welfare as a share of the paper
rule's on the same markets (``welfare_share``); the share of markets where IR breaks
(``ir_rate``) and where the operator runs a deficit (``deficit_rate``). A rule is
``admissible`` when it breaks IR in no market and runs no deficit in any; only admissible
rules can be ``on_frontier`` (Pareto: no other admissible rule has at most its largest
regret in every dimension and at least its welfare, and better somewhere). A rule that is
not admissible is drawn with a cross (IR broken) or a triangle (deficit) and labelled with
its rates, never as a frontier point.

:func:`corner` states, for a corner of the trade-off (for example "IR, no deficit, zero
regret"), whether a measured rule reaches it, and if not, the closest one found; the goal's
regret there is relative (a share of the utility level) and is written so.
Within the linear family the selection is fixed, so under truthful reports every member has
the same welfare; only rules with selections of their own move it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.ipfl import MarketArrays
from proofs.regret import JOINT_PAIRS

from .errors import DesignInputError
from .evaluate import REFERENCES, Markets, Mechanism, evaluate
from .objective import Goal

__all__ = [
    "DIMENSIONS",
    "LINE_COMBOS",
    "PAGE_BEGIN",
    "PAGE_END",
    "corner",
    "floor_summary",
    "frontier_markdown",
    "frontier_table",
    "line_table",
    "page_section",
    "pareto",
    "plot_frontier",
    "plot_line",
    "register_family",
    "registered_rules",
    "regret_floor",
    "replace_page_section",
    "split_points",
    "status",
    "unregister_family",
    "write_frontier",
]

DIMENSIONS = ("N", "c", "K")
_KEEP = ("worst_max_regret", "worst_max_rel_regret", "worst_mean_rel_regret", "ir_rate",
         "ir_max_violation", "mean_balance", "mean_rel_deficit", "deficit_rate",
         "mean_welfare", "participation", "utility_level")


_EPS = 1e-9

_FAMILIES: dict[str, Callable[[], Mapping]] = {}


def register_family(family: str, rules: Callable[[], Mapping] | Mapping, *,
                    replace: bool = False) -> None:
    """Place the rules of ``family`` on every frontier: ``rules`` maps a rule's name to a
    :class:`~sims.design.evaluate.Mechanism` (its own selection, payments and prices) or
    to a payment rule marked over_arrays (cleared with the paper's selection and prices),
    or is a function returning such a mapping (called when a frontier is measured, so a
    family is built only when used). Registering a family twice is an error unless
    ``replace``."""
    if not isinstance(family, str) or not family.strip():
        raise DesignInputError("family", f"is {family!r}; name the family")
    if family in _FAMILIES and not replace:
        raise DesignInputError("family", f"{family!r} is registered already (replace=True "
                                         "to replace it)")
    if not (callable(rules) or isinstance(rules, Mapping)):
        raise DesignInputError(f"{family}.rules", "must be a mapping name -> rule, or a "
                                                  "function returning one")
    _FAMILIES[family] = rules if callable(rules) else (lambda rules=dict(rules): rules)


def unregister_family(family: str) -> None:
    """Take ``family`` off every frontier (an unknown name is an error)."""
    if family not in _FAMILIES:
        raise DesignInputError("family", f"{family!r} is not registered; registered: "
                                         f"{list(_FAMILIES)}")
    del _FAMILIES[family]


def registered_rules(families=None) -> list[tuple[str, str, Mechanism]]:
    """(family, rule name, mechanism) of every registered family (or of ``families``, by
    name, in that order), in registration order."""
    names = list(_FAMILIES) if families is None else list(families)
    out = []
    for fam in names:
        if fam not in _FAMILIES:
            raise DesignInputError("families", f"unknown family {fam!r}; registered: "
                                               f"{list(_FAMILIES)}")
        for name, rule in _FAMILIES[fam]().items():
            out.append((fam, str(name), _as_mechanism(name, rule, f"{fam}.{name}")))
    return out


def _as_mechanism(name, rule, field: str) -> Mechanism:
    if isinstance(rule, Mechanism):
        return rule
    if callable(rule) and getattr(rule, "over_arrays", False):
        return Mechanism(str(name), "local", rule)
    raise DesignInputError(field, "must be a Mechanism or a payment rule marked over_arrays "
                                  "(mechanisms.ipfl.over_arrays)")


def _midpoint():
    from .space import LinearSpace

    space = LinearSpace(("marginal", "cost"), clip=True)
    return {"midpoint": space.rule(space.point(marginal=0.5, cost=0.5), name="midpoint")}


register_family("paper", {"paper": REFERENCES["paper"]})
register_family("clipped split", _midpoint)  # r = (marginal + c_j)/2: IR and balanced
register_family("VCG", {"vcg": REFERENCES["vcg"]})
register_family("Shapley split", {"shapley": REFERENCES["shapley"]})
register_family("cost-plus", {"cost-plus": REFERENCES["cost-plus"]})
register_family("share-all", {"share-all": REFERENCES["share-all"]})


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


def frontier_table(space, thetas, markets: Markets, *, goal: Goal | None = None,
                   references=None, families=None, names=None, search: dict | None = None,
                   joint=(), progress=None) -> pd.DataFrame:
    """Measure each parameter vector of ``thetas`` (rules of ``space``; none: ``space``
    may be None) and every rule of the registered families (``families``: their names, all
    by default; or ``references``, a mapping name -> rule, instead) on ``markets``, all six
    (dimension, direction) misreports; one row per rule: its family, name, kind ("searched"
    / "reference"), parameters (JSON), the regret statistics of
    :func:`~sims.design.evaluate.evaluate` per dimension and direction, the largest regret
    per dimension (absolute and relative), IR and deficit shares, welfare and its share of
    the paper rule's, ``admissible``, ``on_frontier``, and with a ``goal`` its relative
    regret statistic (``goal_rel_regret``) and whether the rule meets its constraints.
    ``joint``: pairs of dimensions misreported at once (``True``:
    :data:`proofs.regret.JOINT_PAIRS`), searched by :func:`~sims.design.evaluate.evaluate`;
    per pair ``largest_regret_joint_{d1}{d2}`` (and its relative twin) beside the other
    statistics of ``{stat}_regret_joint_{d1}{d2}``, and ``largest_regret_joint``, the largest
    over the pairs (each at least its pair's one-dimension regrets)."""
    joint = _joint_pairs(joint)
    rows = []
    thetas = [np.asarray(t, dtype=float) for t in thetas]
    names = list(names) if names is not None else [f"candidate {k}" for k in range(len(thetas))]
    jobs = [("searched", n, "searched", space.rule(t, name=n), t)
            for n, t in zip(names, thetas, strict=True)]
    if references is not None:
        if families is not None:
            raise DesignInputError("families", "give families or references, not both")
        refs = [(n, n, _as_mechanism(n, r, f"references.{n}"))
                for n, r in references.items()]
    else:
        refs = registered_rules(families)
    jobs += [(fam, n, "reference", mech, None) for fam, n, mech in refs]
    seen = [j[1] for j in jobs]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise DesignInputError("names", f"{twice} name more than one rule; rename them")
    paper_welfare = None
    for k, (family, name, kind, mech, theta) in enumerate(jobs):
        ev = evaluate(mech, markets, search=search, name=name, joint=joint)
        s = ev.summary
        row = {"family": family, "rule": name, "kind": kind,
               "params": "" if theta is None else json.dumps(
                   dict(zip(space.names, np.round(theta, 6).tolist(), strict=True))),
               **{key: v for key, v in s.items() if "regret" in key},
               **{key: s[key] for key in _KEEP},
               "seconds": ev.seconds, "clearings": ev.clearings}
        for d in DIMENSIONS:  # per dimension: the per-market larger of the two directions
            row[f"largest_regret_{d}"] = s[f"max_regret_{d}"]
            row[f"largest_rel_regret_{d}"] = s[f"max_rel_regret_{d}"]
        for a, b in joint:
            row[f"largest_regret_joint_{a}{b}"] = s[f"max_regret_joint_{a}{b}"]
            row[f"largest_rel_regret_joint_{a}{b}"] = s[f"max_rel_regret_joint_{a}{b}"]
        if joint:
            row["largest_regret_joint"] = max(s[f"max_regret_joint_{a}{b}"] for a, b in joint)
        if goal is not None:
            row["goal_rel_regret"] = goal.regret(s)
            row["feasible"] = goal.feasible(s)
        if mech is REFERENCES["paper"] or name == "paper":
            paper_welfare = s["mean_welfare"]
        rows.append(row)
        if progress is not None:
            progress(k + 1, len(jobs))
    if paper_welfare is None:  # the denominator of the welfare share, on the same markets
        paper_welfare = evaluate(REFERENCES["paper"], markets, combos=(("c", "over"),),
                                 search=search).summary["mean_welfare"]
    df = pd.DataFrame(rows)
    df["welfare_share"] = df["mean_welfare"] / paper_welfare
    df["admissible"] = (df["ir_rate"] == 0) & (df["deficit_rate"] == 0)
    front = np.zeros(len(df), bool)
    ok = df["admissible"].to_numpy()
    if ok.any():
        cols = [f"largest_regret_{d}" for d in DIMENSIONS]
        values = np.column_stack([df.loc[ok, cols].to_numpy(float),
                                  -df.loc[ok, "welfare_share"].to_numpy(float)])
        front[ok] = pareto(values)
    df["on_frontier"] = front
    return df


def _joint_pairs(joint) -> tuple:
    """``joint`` as a tuple of (d1, d2) pairs: ``True`` every pair of
    :data:`proofs.regret.JOINT_PAIRS`, ``False``/``()`` none (evaluate checks the pairs)."""
    if joint is True:
        return tuple(JOINT_PAIRS)
    if joint is False or joint is None:
        return ()
    if isinstance(joint, str):
        raise DesignInputError("joint", f"is {joint!r}; True, or pairs of dimensions such as "
                                        f"{JOINT_PAIRS}")
    return tuple(tuple(p) for p in joint)


def _pct(x: float) -> str:
    """A share as a percentage: "1 %", "9.18 %", "1,183 %" (never in e-notation)."""
    v = 100 * x
    return f"{v:,.0f} %" if abs(v) >= 1000 else f"{v:.3g} %"


def corner(table: pd.DataFrame, *, ir: bool = True, max_deficit: float = 0.0,
           regret: float = 0.0) -> str:
    """Is the corner "IR (when asked), mean relative deficit <= max_deficit, relative regret
    <= regret" reached by a measured rule? ``regret`` and the table's ``goal_rel_regret``
    are RELATIVE (a share of the rule's utility level: 0.01 = 1 %); the largest regret in
    utility units (``worst_max_regret``) is given beside it. If not reached, name the
    closest (the least regret among the rules meeting the other two, and the least deficit
    among those meeting the regret)."""
    if "goal_rel_regret" not in table:
        raise DesignInputError("table", "has no goal_rel_regret: measure it with a goal")
    ok_ir = table["ir_rate"] == 0 if ir else np.ones(len(table), bool)
    budget = table["mean_rel_deficit"] <= max_deficit + _EPS  # balanced rules: float noise
    low = table["goal_rel_regret"] <= regret + _EPS
    want = (f"{'IR, ' if ir else ''}mean deficit <= {_pct(max_deficit)} of the utility "
            f"level, relative regret <= {_pct(regret)} of the utility level")

    def sizes(r) -> str:
        out = f"relative regret {_pct(r['goal_rel_regret'])} of the utility level"
        if "worst_max_regret" in r:
            out += f"; largest regret {r['worst_max_regret']:.4g} utility units"
        return out

    hit = table[ok_ir & budget & low]
    if len(hit):
        best = hit.sort_values("goal_rel_regret").iloc[0]
        return f"reached ({want}): {best['rule']} ({sizes(best)})"
    parts = [f"not reached by any measured rule ({want})"]
    near = table[ok_ir & budget]
    if len(near):
        b = near.sort_values("goal_rel_regret").iloc[0]
        parts.append(f"least regret within the budget: {b['rule']} ({sizes(b)})")
    near = table[ok_ir & low]
    if len(near):
        b = near.sort_values("mean_rel_deficit").iloc[0]
        parts.append(f"least deficit within the regret: {b['rule']} (mean deficit "
                     f"{_pct(b['mean_rel_deficit'])} of the utility level)")
    return "; ".join(parts)


def status(row) -> str:
    """"" for an admissible rule, else "IR broken in x %", "deficit in y %" or both."""
    notes = []
    if row["ir_rate"] > 0:
        notes.append(f"IR broken in {100 * row['ir_rate']:.3g} %")
    if row["deficit_rate"] > 0:
        notes.append(f"deficit in {100 * row['deficit_rate']:.3g} %")
    return ", ".join(notes)


def plot_frontier(table: pd.DataFrame, axes=None, *, dims=DIMENSIONS,
                  label_searched: bool = False):
    """Welfare (share of the paper rule's) against the largest regret found per type
    dimension (utility units), a panel per dimension of ``dims``, one point per rule:
    coloured by family; a circle when the rule is admissible (IR everywhere, no deficit),
    a cross when it breaks IR, a triangle when it runs a deficit (labelled with the shares
    of markets); admissible frontier rules ringed. Returns the Axes (one per dimension)."""
    from ..plots import pyplot
    plt = pyplot()

    dims = tuple(dims)
    own = axes is None
    if own:
        _, axes = plt.subplots(1, len(dims), figsize=(4.4 * len(dims), 4.8), sharey=True,
                               squeeze=False, layout="constrained")
        axes = axes[0]
    axes = np.atleast_1d(axes)
    if len(axes) != len(dims):
        raise DesignInputError("axes", f"{len(axes)} given for {len(dims)} dimensions")
    fams = list(dict.fromkeys(table["family"]))
    palette = plt.get_cmap("tab10" if len(fams) <= 10 else "tab20").colors
    colours = dict(zip(fams, palette * 3, strict=False))  # distinct up to 20 families
    for ax, d in zip(axes, dims, strict=True):
        x, y = table[f"largest_regret_{d}"], table["welfare_share"]
        for k, row in enumerate(table.to_dict("records")):
            ir, deficit = row["ir_rate"] > 0, row["deficit_rate"] > 0
            marker = "X" if ir else "^" if deficit else "o"
            searched = row["kind"] == "searched" and row["rule"] != "designed"
            ax.scatter(x.iloc[k], y.iloc[k], marker=marker, s=18 if searched else 46,
                       color=colours[row["family"]], zorder=3,
                       edgecolors="k" if ir or deficit else "none", linewidths=0.6)
        front = table[table["on_frontier"]]
        ax.scatter(front[f"largest_regret_{d}"], front["welfare_share"], s=150,
                   facecolors="none", edgecolors="k", zorder=2)
        shown = table if label_searched else table[(table["kind"] != "searched")
                                                   | (table["rule"] == "designed")]
        pts = list(zip(shown[f"largest_regret_{d}"], shown["welfare_share"], strict=True))
        for row, dy, xy in zip(shown.to_dict("records"), _stagger(pts, near=0.06), pts,
                               strict=True):
            note = status(row)
            ax.annotate(row["rule"] + (f" ({note})" if note else ""), xy,
                        textcoords="offset points", xytext=(5, dy), fontsize=7)
        ax.set_xlabel(f"largest regret found in {d}, either way (utility units)")
        ax.set_title(f"misreports of {d}", fontsize=9)
        ax.axhline(1.0, color="0.8", lw=0.8, zorder=0)
    axes[0].set_ylabel("mean welfare / the paper rule's")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker="o", color=colours[f], label=f) for f in fams]
    handles += [Line2D([], [], ls="", marker="o", mfc="none", mec="k", ms=11,
                       label="frontier (admissible rules only)"),
                Line2D([], [], ls="", marker="X", color="0.5", mec="k",
                       label="breaks IR in some markets"),
                Line2D([], [], ls="", marker="^", color="0.5", mec="k",
                       label="runs a deficit in some markets")]
    if own:  # below the panels, clear of the points
        axes[0].figure.legend(handles=handles, fontsize=7, loc="outside lower center",
                              ncol=min(5, len(handles)))
    else:
        axes[-1].legend(handles=handles, fontsize=7, loc="best")
    return axes


PAGE_BEGIN = "<!-- frontier: generated by benchmarks/design_frontier.py; do not edit -->"
PAGE_END = "<!-- frontier: end -->"


def _num(x) -> str:
    try:  # the sidecar's JSON holds NaN as "nan" (sims.results.jsonable)
        x = float(x)
    except (TypeError, ValueError):
        return "--"
    if not np.isfinite(x):
        return "--"
    return "0" if x == 0 else f"{x:.4g}"


def _share(x) -> str:
    return "0" if x == 0 else f"{100 * x:.3g} %"


def _search_words(provenance: dict) -> str:
    name = provenance.get("search")
    if name is None:
        return "the misreport search of `sims.design.evaluate`"
    return (f"the `{name}` misreport search of `proofs.regret.SEARCHES`, as "
            "`sims.design.evaluate` runs it")


def frontier_markdown(table: pd.DataFrame, provenance: dict) -> str:
    """The page's frontier section from a frontier table and its sidecar (``provenance``:
    ``command``, ``markets`` (the source), ``size``, ``clients``, ``floor`` (the
    :func:`regret_floor` summary of the same markets), ``figure``): what
    ``benchmarks/design_frontier.py --page`` writes between :data:`PAGE_BEGIN` and
    :data:`PAGE_END`, and what tests/test_design_frontier.py rebuilds from the committed
    CSV and sidecar to check the page. Every number printed comes from them."""
    lo, hi = provenance["clients"]
    lines = [PAGE_BEGIN, "",
             f"    {provenance['command']}", "",
             f"{provenance['size']:,} held-out markets ({provenance['markets']}; {lo}-{hi} "
             "clients), the same for every rule, every registered family "
             "(`sims.design.frontier.register_family`). Regret: the largest (and the mean "
             "over markets) a misreport of N, c or K earns the drawn liar, either way, in "
             "utility units (" + _search_words(provenance) + ": a lower bound on the true "
             "regret); welfare: mean over markets, as a share of the paper "
             "rule's on the same markets; IR broken / deficit: the share of markets where "
             "some client ends below zero / the operator pays. Admissible = IR in every "
             "market and no deficit in any; only admissible rules can be on the frontier "
             "(Pareto over the three largest regrets and welfare). q90: the regret 90 % of "
             "the markets stay at or below (a market's own value); the largest is a sample "
             "statistic that grows with the number of markets, the mean and q90 do not.", "",
             "| family | rule | welfare share | largest regret N | c | K | q90 regret N | c "
             "| K | mean regret N | c | K | IR broken | deficit | admissible | frontier |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        lines.append(
            f"| {r['family']} | {r['rule']} | {r['welfare_share']:.4f} | "
            + " | ".join(_num(r[f"largest_regret_{d}"]) for d in DIMENSIONS) + " | "
            + " | ".join(_num(r[f"q90_regret_{d}"]) for d in DIMENSIONS) + " | "
            + " | ".join(_num(r[f"mean_regret_{d}"]) for d in DIMENSIONS) + " | "
            + f"{_share(r['ir_rate'])} | {_share(r['deficit_rate'])} | "
            + f"{'yes' if r['admissible'] else 'no'} | {'**yes**' if r['on_frontier'] else ''} |")
    f = provenance["floor"]
    lines += ["", f"![the frontier]({provenance['figure']})", "",
              f"**The floor on these markets** (`regret_floor`, IR demanded for every type): "
              f"{f['single_trade']:,} of the {provenance['size']:,} markets make exactly one "
              f"trade under the paper's selection; the closed form's premises fail in "
              f"{f['premise_failures']} of them (the seller's in {f['seller_failures']}, the "
              f"buyer's in {f['buyer_failures']}), where it reaches {_num(f['worst_closed'])} "
              f"and the floor from the critical reports is {_num(f['worst_floor'])}. The "
              f"largest floor is **{_num(f['largest'])}** (the closed form said "
              f"{_num(f['largest_closed'])}). With IR demanded only on the drawn costs "
              f"(<= {_num(f['cost_max'])}) and gain scales (>= {_num(f['scale_min'])}), the "
              f"largest floor is **{_num(f['largest_on_support'])}**.",
              "", PAGE_END]
    return "\n".join(lines) + "\n"


def floor_summary(markets: Markets, *, cost_max: float, scale_min: float) -> dict:
    """The numbers :func:`frontier_markdown` prints about the floor on ``markets``."""
    f = regret_floor(markets)
    one = f[f["single_trade"]]
    bad = one[~(one["premise_seller"] & one["premise_buyer"])]
    worst = bad.loc[bad["floor_premise"].idxmax()] if len(bad) else None
    bounded = regret_floor(markets, cost_max=cost_max, scale_min=scale_min)
    return {"single_trade": len(one), "premise_failures": len(bad),
            "seller_failures": int((~one["premise_seller"]).sum()),
            "buyer_failures": int((~one["premise_buyer"]).sum()),
            "worst_closed": float(worst["floor_premise"]) if worst is not None else np.nan,
            "worst_floor": float(worst["floor"]) if worst is not None else np.nan,
            "largest": float(one["floor"].max()), "largest_closed":
                float(one["floor_premise"].max()),
            "cost_max": float(cost_max), "scale_min": float(scale_min),
            "largest_on_support": float(bounded.loc[bounded["single_trade"], "floor"].max())}


def replace_page_section(page: str, section: str) -> str:
    """``page`` with the text between :data:`PAGE_BEGIN` and :data:`PAGE_END` (markers
    included) replaced by ``section``; a page without both markers is refused."""
    a, b = page.find(PAGE_BEGIN), page.find(PAGE_END)
    if a < 0 or b < a:
        raise DesignInputError("page", "has no frontier section (the markers "
                                       f"{PAGE_BEGIN!r} ... {PAGE_END!r})")
    return page[:a] + section.rstrip("\n") + page[b + len(PAGE_END):]


def page_section(page: str) -> str:
    """The frontier section of ``page`` (markers included), as :func:`frontier_markdown`
    writes it."""
    a, b = page.find(PAGE_BEGIN), page.find(PAGE_END)
    if a < 0 or b < a:
        raise DesignInputError("page", "has no frontier section")
    return page[a:b + len(PAGE_END)] + "\n"


def write_frontier(table: pd.DataFrame, folder, provenance: dict) -> tuple[Path, Path]:
    """frontier.csv and its JSON sidecar (provenance: settings, seeds, versions), and the
    same table as LaTeX (frontier.tex, booktabs) for a paper."""
    from ..results import latex_table, write_atomic, write_table

    out = write_table(table, Path(folder) / "frontier.csv", provenance)
    text = latex_table(table, caption="The frontier (fedmarket design): regret in utility "
                                      "units unless named rel (a share of the utility level)",
                       label="tab:frontier")
    write_atomic(Path(folder) / "frontier.tex", lambda tmp: tmp.write_text(text))
    return out


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


def _stagger(points, step: float = 11.0, near: float = 0.03) -> list[float]:
    """Vertical label offsets (points): a label whose point lies within ``near`` (a share)
    of the data's span of an earlier one's is moved one line down per such neighbour
    (rules coincide)."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    span = np.ptp(pts, axis=0) if len(pts) else np.ones(2)
    span = np.where(span > 0, span, 1.0)
    out = []
    for k in range(len(pts)):
        close = np.all(np.abs(pts[:k] - pts[k]) <= near * span, axis=1).sum()
        out.append(4.0 - step * float(close))
    return out


def plot_line(table: pd.DataFrame, ax=None, *, floor: float | None = None):
    """Largest K regret against largest c regret: the two split lines of the clipped family
    (IR and budget balanced), other family rules as dots, reference rules as squares
    labelled with their IR breaks and deficits; ``floor`` (:func:`regret_floor`'s largest)
    shades the region no IR rule without deficit reaches. Returns the Axes."""
    if ax is None:
        from ..plots import pyplot
        plt = pyplot()

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
    ax.set_xlabel("largest regret from misreporting c, either way (utility units)")
    ax.set_ylabel("largest regret from misreporting K, either way (utility units)")
    ax.legend(fontsize=7, loc="lower right")
    return ax


FLOOR_GRID = 33  # costs / gain scales tried between the truth and the premise's end
FLOOR_STEPS = 52  # bisection steps to the critical report (2^-52: float resolution)


def regret_floor(markets: Markets, *, cost_max: float | None = None,
                 scale_min: float | None = None, grid: int = FLOOR_GRID,
                 steps: int = FLOOR_STEPS) -> pd.DataFrame:
    """A lower bound on the largest c-or-K regret of EVERY individually rational rule
    without deficit that keeps the paper's selection (local rule, Eq. 10 prices), per market
    in which that selection makes exactly one trade (i buys j's model), from the critical
    reports of that market:

        floor = max(0, c* - v*) / 2

    * c* (the seller's critical cost): the largest cost j can report (everyone else
      truthful) at which the selection still sells j's model (to anyone);
    * v* (the buyer's critical value): the least gain G_i({j}) i can have, reporting its
      gain scale K lower (everyone else truthful), at which the selection still has i buy
      exactly {j}.

    Why (not machine-checked; the premises are what this function measures): with b the
    buyer's payment and a the seller's receipt at the truthful reports, no deficit and the
    others' IR give a <= b (a client that does not trade can only receive). The seller,
    reporting any c' at which it still sells, is owed at least c' per buyer by IR at that
    (truthful-looking) profile, so its true profit from the lie is at least c' - a; the
    buyer, reporting any K' at which it buys exactly {j}, pays at most G_i({j}; K') by IR
    there, so its profit is at least b - G_i({j}; K'). The two add up to at least
    c* - v*: one is at least half of it.

    **Premises** of the closed form (m - c_j - 2 lam (N_j/N_i) d_ij) / 2 (``floor_premise``),
    checked per market: the seller is still bought from for every cost up to c_hi = m -
    lam (N_j/N_i) d_ij (where i's price reaches its marginal m, Eq. 11), and the buyer still
    buys exactly {j} until its marginal falls to its price P_ij = c_j + lam (N_j/N_i) d_ij.
    Where a raised cost moves j behind another seller in i's scan, i buys that one
    instead and c* < c_hi (``premise_seller`` False): the closed form then overstates the
    floor, and the floor here is the one of the actual critical reports.

    **Where IR is demanded.** The argument uses IR at the misreported profiles: seller costs
    up to c* and buyer gain scales down to the one where G_i({j}) meets the price, far
    outside the checker's drawn types (costs in [0, 5], K in [1e3, 1e6]; c_hi reaches
    about 190). ``cost_max`` / ``scale_min``: demand IR only for costs up to ``cost_max``
    and gain scales from ``scale_min`` (a declared type space): the critical reports are
    then searched within them, and the floor speaks only of rules IR there (a smaller
    floor). ``None``: no bound (IR for every type).

    How: the selection (:data:`~sims.design.evaluate.REFERENCES`' paper rule, the bulk
    clearing) on ``grid`` reports from the truth to the premise's end (costs evenly, gain
    scales log-evenly), then ``steps`` bisection steps at the first change (c*: the last
    cost still selling before the first that does not; v*: below the least gain scale that
    still buys exactly {j}). Every report used is one at which the premise was observed, so
    the floor is a valid bound even where the search misses a report farther out.

    One row per market: ``m``, ``single_trade``, ``buyer``, ``seller``, the critical
    ``c_star`` and ``v_star`` beside the premise's ``c_hi`` and ``price``, ``premise_seller``
    (sold up to the end of the costs searched: c_hi, or ``cost_max`` where lower) and
    ``premise_buyer`` (buys exactly {j} down to the end of the gain scales searched),
    ``floor_premise`` (the closed form) and ``floor`` (NaN where the selection does not
    make exactly one trade)."""
    from .space import pair_features

    if not (isinstance(grid, int) and grid >= 2 and isinstance(steps, int) and steps >= 0):
        raise DesignInputError("grid", f"is {grid!r} (steps {steps!r}); need grid >= 2, "
                                       "steps >= 0")
    for name, v in (("cost_max", cost_max), ("scale_min", scale_min)):
        if v is not None and not (isinstance(v, int | float) and 0 <= v < np.inf):
            raise DesignInputError(name, f"is {v!r}; a finite number >= 0, or None")
    mech = REFERENCES["paper"]
    rows = []
    for g in markets.groups:
        A = mech.settle(g["N"], g["c"], g["K"], g["lam"], g["D"])["A"]
        B, m = g["N"].shape
        one = A.sum(axis=(1, 2)) == 1
        flat = A.reshape(B, -1).argmax(axis=1)
        buyer, seller = flat // m, flat % m
        mk = MarketArrays(g["N"], g["c"], g["K"], g["lam"])
        f = pair_features(mk, A, g["D"], ("marginal", "cost", "distance"))
        rows_b = np.arange(B)
        marginal = f["marginal"][rows_b, buyer, seller]
        c_j = f["cost"][rows_b, buyer, seller]
        dist = f["distance"][rows_b, buyer, seller]  # -lam (N_j/N_i) d_ij
        c_hi, price = marginal + dist, c_j - dist
        frame = {"m": np.full(B, m), "single_trade": one,
                 "buyer": np.where(one, buyer, -1), "seller": np.where(one, seller, -1),
                 "c_hi": np.where(one, c_hi, np.nan), "price": np.where(one, price, np.nan),
                 "c_star": np.full(B, np.nan), "v_star": np.full(B, np.nan),
                 "premise_seller": np.zeros(B, bool), "premise_buyer": np.zeros(B, bool)}
        if one.any():
            k = np.flatnonzero(one)
            sub = {key: np.asarray(g[key])[k] for key in ("N", "c", "K", "lam", "D")}
            top = c_hi[k] if cost_max is None else np.minimum(c_hi[k], cost_max)
            c_star = _critical_cost(mech, sub, seller[k], top, grid, steps)
            v_star, v_end = _critical_value(mech, sub, buyer[k], seller[k], price[k],
                                            scale_min, grid, steps)
            frame["c_star"][k], frame["v_star"][k] = c_star, v_star
            tol = 1e-9 * (1.0 + np.abs(c_hi[k]))
            frame["premise_seller"][k] = c_star >= np.maximum(top, c_j[k]) - tol
            frame["premise_buyer"][k] = v_star <= np.maximum(v_end, price[k]) + tol
        closed = np.maximum(c_hi - price, 0.0) / 2
        frame["floor_premise"] = np.where(one, closed, np.nan)
        frame["floor"] = np.where(one, np.maximum(frame["c_star"] - frame["v_star"], 0.0) / 2,
                                  np.nan)
        rows.append(pd.DataFrame(frame))
    return pd.concat(rows, ignore_index=True)


def _sells(mech, sub, seller, cost) -> np.ndarray:
    """(B, k) bool: is ``seller``'s model bought by anyone when it reports ``cost`` (B, k)
    (everyone else truthful)?"""
    B, k = cost.shape
    rows = np.arange(B)
    c = np.repeat(sub["c"][:, None, :], k, axis=1)
    c[rows[:, None], np.arange(k)[None, :], seller[:, None]] = cost
    m = c.shape[-1]
    A = mech.settle(np.repeat(sub["N"], k, axis=0), c.reshape(-1, m),
                    np.repeat(sub["K"], k, axis=0), np.repeat(sub["lam"], k, axis=0),
                    np.repeat(sub["D"], k, axis=0))["A"].reshape(B, k, m, m)
    return A[rows, :, :, seller].any(axis=-1)


def _buys_only(mech, sub, buyer, seller, scale) -> tuple[np.ndarray, np.ndarray]:
    """(B, k) bool: does ``buyer`` reporting gain scale ``scale`` (B, k) buy exactly
    {``seller``} (everyone else truthful)? And its gain G_i({j}) at that scale."""
    from .space import pair_features

    B, k = scale.shape
    rows = np.arange(B)
    K = np.repeat(sub["K"][:, None, :], k, axis=1)
    K[rows[:, None], np.arange(k)[None, :], buyer[:, None]] = scale
    m = K.shape[-1]
    N, lam, D = (np.repeat(sub[x], k, axis=0) for x in ("N", "lam", "D"))
    A = mech.settle(N, np.repeat(sub["c"], k, axis=0), K.reshape(-1, m), lam, D)["A"]
    A = A.reshape(B, k, m, m)
    want = np.zeros((B, m), bool)
    want[rows, seller] = True
    ok = (A[rows, :, buyer, :] == want[:, None, :]).all(axis=-1)
    only = np.zeros((B * k, m, m), bool)
    only.reshape(B, k, m, m)[rows, :, buyer, seller] = True
    gain = pair_features(MarketArrays(N, np.repeat(sub["c"], k, axis=0), K.reshape(-1, m),
                                      lam), only, D, ("marginal",))["marginal"]
    return ok, gain.reshape(B, k, m, m)[rows, :, buyer, seller]


def _critical_cost(mech, sub, seller, c_hi, grid, steps) -> np.ndarray:
    """c*: the largest cost the seller is seen to sell at, up to c_hi: the last such report
    on an even grid from its true cost before the first that does not sell, refined by
    bisection at that first change (its true cost where c_hi is below it)."""
    rows = np.arange(len(seller))
    lo0 = sub["c"][rows, seller]
    c_hi = np.maximum(c_hi, lo0)
    t = np.linspace(0.0, 1.0, grid)
    costs = lo0[:, None] + (c_hi - lo0)[:, None] * t[None, :]
    sells = _sells(mech, sub, seller, costs)
    sells[:, 0] = True  # the truth sells (the market's one trade)
    first_off = np.where(sells.all(axis=1), grid, np.argmin(sells, axis=1))
    lo = costs[rows, first_off - 1]
    hi = np.where(first_off < grid, costs[rows, np.minimum(first_off, grid - 1)], c_hi)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        ok = _sells(mech, sub, seller, mid[:, None])[:, 0]
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return lo


def _critical_value(mech, sub, buyer, seller, price, scale_min, grid, steps):
    """(v*, the gain at the range's end): v* is the least G_i({j}) at which the buyer is
    seen to buy exactly {j}: gain scales log-evenly from its true K down to where G_i({j})
    reaches the price (below it the local selection never buys j) or to ``scale_min``; the
    least that buys exactly {j}, refined by bisection towards the next lower grid point."""
    rows = np.arange(len(seller))
    K0 = sub["K"][rows, buyer]
    _, g0 = _buys_only(mech, sub, buyer, seller, K0[:, None])
    g0 = g0[:, 0]
    # G_i({j}) grows with K; the scale at which it equals the price, by bisection in log K
    lo_k, hi_k = np.log(K0) - 60.0, np.log(K0)
    for _ in range(steps + 8):
        mid = 0.5 * (lo_k + hi_k)
        _, gm = _buys_only(mech, sub, buyer, seller, np.exp(mid)[:, None])
        above = gm[:, 0] > price
        lo_k, hi_k = np.where(above, lo_k, mid), np.where(above, mid, hi_k)
    if scale_min is not None:
        lo_k = np.minimum(np.maximum(lo_k, np.log(max(scale_min, 1e-300))), np.log(K0))
    t = np.linspace(1.0, 0.0, grid)  # from the truth (t = 1) down to the price (t = 0)
    logs = lo_k[:, None] + (np.log(K0) - lo_k)[:, None] * t[None, :]
    ok, gains = _buys_only(mech, sub, buyer, seller, np.exp(logs))
    ok[:, 0] = True  # the truth buys exactly {j}
    gains[:, 0] = g0
    last = grid - 1 - np.argmax(ok[:, ::-1], axis=1)  # the lowest scale seen to buy {j}
    best_log, best = logs[rows, last], gains[rows, last]
    below = logs[rows, np.minimum(last + 1, grid - 1)]
    a, b = below, best_log  # b buys exactly {j}; a (the next lower) does not, or is the end
    for _ in range(steps):
        mid = 0.5 * (a + b)
        okm, gm = _buys_only(mech, sub, buyer, seller, np.exp(mid)[:, None])
        take = okm[:, 0] & (gm[:, 0] < best)
        best = np.where(take, gm[:, 0], best)
        a, b = np.where(okm[:, 0], a, mid), np.where(okm[:, 0], mid, b)
    return best, gains[:, -1]
