"""Is the misreport search strong enough? (issue 31, part 4.) The same rules on the same
held-out markets, their regret measured with searches of growing strength; the figures of a
strong enough search do not move when it is widened.

Each search is (span, grid, starts, iters) of :func:`proofs.regret.regret_arrays`; the joint
searches (two dimensions at once) are (span, grid, iters) of
:func:`proofs.regret.joint_regret_arrays`. For every rule, direction and statistic (mean, q90,
q99, max over markets) it prints the figure under each search and the largest relative
change between the last two (the strongest pair); with ``--csv`` it writes the long table.

    python benchmarks/design_search_strength.py --markets 1000 --seed 1000 \\
        --csv docs/design_search_strength.csv
    python benchmarks/design_search_strength.py --markets 300 --seed 1000 --joint \\
        --csv docs/design_search_strength_joint.csv

The figures docs/reference-design.md prints are written from such a CSV by
:func:`strength_paragraph` (one-dimension searches) and :func:`joint_table` /
:func:`joint_paragraph` (``--joint``); ``--markdown`` prints them, and
tests/test_reference_design_page.py checks that the page shows what the committed CSVs give.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _timing import pick

from proofs.regret import JOINT_PAIRS, SEARCHES
from proofs.typespace import DEFAULT
from sims.design import REFERENCES, draw_markets, evaluate
from sims.design.families import posted_mechanism, truthful_posted_price
from sims.design.space import LinearSpace

STATS = ("mean", "q90", "q99", "max")


def rules() -> dict:
    clipped = LinearSpace(("marginal", "cost"), clip=True)
    return {
        "paper": REFERENCES["paper"],
        "midpoint (clipped split 1/2)": clipped.rule(clipped.point(marginal=0.5, cost=0.5)),
        "posted 4, exact": posted_mechanism({"base": 4.0}, "exact"),
        "posted 2.5 + lam d, local": posted_mechanism({"base": 2.5, "distance": 1.0}, "local"),
        "issue: 2.5 + lam (N_j/N_i) d, exact": posted_mechanism({"base": 2.5, "ratio": 1.0},
                                                               "exact"),
        "share at pi*": posted_mechanism({"base": truthful_posted_price(DEFAULT)}, "all"),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markets", type=int, default=pick(2000, 20))
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--searches", nargs="+", default=list(SEARCHES),
                   help=f"named searches, weakest first (of {list(SEARCHES)})")
    p.add_argument("--joint", action="store_true", help="also the joint misreports")
    p.add_argument("--csv", default=None)
    p.add_argument("--markdown", action="store_true",
                   help="print the page's figures (strength_paragraph; with --joint "
                        "joint_table and joint_paragraph)")
    args = p.parse_args(argv)
    mk = draw_markets(args.markets, seed=args.seed)
    print(f"{mk.size} markets ({mk.source}); searches: "
          + "; ".join(f"{s} {SEARCHES[s]['single']}" for s in args.searches))
    rows = []
    for name, mech in rules().items():
        for s in args.searches:
            t0 = time.process_time()
            ev = evaluate(mech, mk, search=SEARCHES[s]["single"],
                          joint=JOINT_PAIRS if args.joint else (),
                          joint_search=SEARCHES[s]["joint"], name=name)
            secs = time.process_time() - t0
            keys = [k.removeprefix("max_regret_") for k in ev.summary
                    if k.startswith("max_regret_")]
            for key in keys:
                for stat in STATS:
                    rows.append({"rule": name, "search": s, "direction": key, "statistic": stat,
                                 "value": ev.summary[f"{stat}_regret_{key}"]})
            print(f"  {name:38s} {s:7s} {ev.clearings:>10,d} clearings {secs:7.1f} s CPU",
                  flush=True)
    df = pd.DataFrame(rows)
    if args.csv:
        df.to_csv(args.csv, index=False)
    wide = df.pivot_table(index=["rule", "direction", "statistic"], columns="search",
                          values="value", sort=False)[args.searches]
    a, b = args.searches[-2], args.searches[-1]
    scale = np.maximum(np.abs(wide[a]), np.abs(wide[b]))
    wide["change"] = np.where(scale > 0, (wide[b] - wide[a]) / np.where(scale > 0, scale, 1), 0)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 1000)
    print(wide.round(3).to_string())
    worst = wide["change"].abs().groupby(level="statistic").max()
    print(f"\nlargest relative change {a} -> {b} by statistic (over every rule and direction):")
    print(worst.round(4).to_string())
    if args.markdown:
        print("\n" + strength_paragraph(df))
        if args.joint:
            print("\n" + joint_table(df) + "\n" + joint_paragraph(df))


def changes(df: pd.DataFrame, a: str, b: str, keys=None) -> pd.DataFrame:
    """One row per (rule, direction, statistic): the figure under searches ``a`` and ``b``
    and the relative change (b - a) / max(|a|, |b|) (0 where both are 0); ``keys`` keeps
    only those directions (e.g. the joint ones)."""
    wide = df.pivot_table(index=["rule", "direction", "statistic"], columns="search",
                          values="value", sort=False)
    if keys is not None:
        wide = wide[wide.index.get_level_values("direction").isin(keys)]
    scale = np.maximum(np.abs(wide[a]), np.abs(wide[b]))
    change = np.where(scale > 0, (wide[b] - wide[a]) / np.where(scale > 0, scale, 1), 0.0)
    return pd.DataFrame({"a": wide[a], "b": wide[b], "change": change}).reset_index()


def _pct(x: float) -> str:
    return f"{100 * x:.2g} %"


def _moves(ch: pd.DataFrame, stats=("max", "mean", "q99", "q90")) -> str:
    worst = ch.assign(size=ch.change.abs()).groupby("statistic")["size"].max()
    return ", ".join(f"{_pct(worst[s])} ({s})" for s in stats)


WORDS = {"over": "overstating", "under": "understating"}


def _what(row) -> str:
    d = row.direction
    if d.startswith("joint_"):
        a, b = d.removeprefix("joint_")
        return f"{row.rule}'s {row.statistic} regret from lying about {a} and {b} at once"
    dim, _, way = d.partition("_")
    return (f"{row.rule}'s {row.statistic} regret from {WORDS[way]} {dim}" if way else
            f"{row.rule}'s {row.statistic} regret from misreporting {dim}")


def strength_paragraph(df: pd.DataFrame) -> str:
    """The page's paragraph on the one-dimension searches, from the benchmark's CSV: how
    far the figures move from strong to wider (per statistic, over every rule and
    direction), and from former to strong, with the figures that moved most."""
    top = changes(df, "strong", "wider")
    big = top.loc[top.change.abs().idxmax()]
    low = changes(df, "former", "strong")
    pick = low.set_index(["rule", "direction", "statistic"]).sort_index()
    paper = pick.loc[("paper", "N_under")]
    mid = pick.loc[("midpoint (clipped split 1/2)", "c_over", "max")]
    return (f"From strong to wider, no figure moves by more than {_moves(top)} of its value: "
            f"the largest is the {_what(big)} ({big.a:.4g} -> {big.b:.4g}). From former to "
            f"strong they moved by up to {_moves(low)}: the paper rule's regret from "
            f"understating N, mean {paper.loc['mean', 'a']:.3g} -> "
            f"{paper.loc['mean', 'b']:.3g}, largest {paper.loc['max', 'a']:.4g} -> "
            f"{paper.loc['max', 'b']:.4g}; the midpoint's largest regret from overstating c "
            f"{mid.a:.3g} -> {mid.b:.3g}.")


def _cell(mean: float, top: float) -> str:
    return "0" if mean == 0 and top == 0 else f"{mean:.3g} / {top:.4g}"


def joint_table(df: pd.DataFrame, search: str = "strong") -> str:
    """The page's table: per rule, mean / largest regret (utility units) per dimension
    (either way) and per pair of dimensions lied about at once, under ``search``."""
    v = df[df.search == search].set_index(["rule", "direction", "statistic"]).value
    cols = [("N", "N"), ("c", "c"), ("K", "K"), ("joint_Nc", "N and c"),
            ("joint_NK", "N and K"), ("joint_cK", "c and K")]
    lines = ["| rule | " + " | ".join(t for _, t in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for rule in dict.fromkeys(df.rule):
        lines.append(f"| {rule} | " + " | ".join(
            _cell(v[(rule, d, "mean")], v[(rule, d, "max")]) for d, _ in cols) + " |")
    return "\n".join(lines) + "\n"


def joint_paragraph(df: pd.DataFrame) -> str:
    """The page's paragraph under :func:`joint_table`: the joint mean regrets against the
    one-dimension ones for the paper rule (N and K) and the midpoint (N and c), and how far
    the joint figures move from the strong to the wider search."""
    v = df[df.search == "strong"].set_index(["rule", "direction", "statistic"]).value
    mid = "midpoint (clipped split 1/2)"
    ch = changes(df, "strong", "wider", keys=[f"joint_{a}{b}" for a, b in JOINT_PAIRS])
    q90 = ch[ch.statistic == "q90"]
    big = q90.loc[q90.change.abs().idxmax()]
    return (f"Mean regret lying in two dimensions at once against each alone: the paper "
            f"rule, N and K {v[('paper', 'joint_NK', 'mean')]:.3g} against "
            f"{v[('paper', 'N', 'mean')]:.3g} and {v[('paper', 'K', 'mean')]:.3g}; the "
            f"midpoint, N and c {v[(mid, 'joint_Nc', 'mean')]:.3g} against "
            f"{v[(mid, 'N', 'mean')]:.3g} and {v[(mid, 'c', 'mean')]:.3g}. From the strong "
            f"to the wider joint search no joint figure moves by more than "
            f"{_moves(ch, ('max', 'mean', 'q90', 'q99'))}; the largest q90 move is the "
            f"{_what(big)} ({big.a:.4g} -> {big.b:.4g}).")


if __name__ == "__main__":
    main()
