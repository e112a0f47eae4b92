"""The frontier over every registered family, measured on the SAME held-out markets, written
as a CSV with its JSON sidecar, a figure, and (``--page``) the generated section of
docs/reference-design.md:

    python benchmarks/design_frontier.py --markets 2000 --seed 1000 \\
        --csv docs/design_frontier.csv --figure docs/img/design_frontier.png \\
        --page docs/reference-design.md

Every registered family (``sims.design.frontier.register_family``: the paper's rule, the
clipped midpoint split, VCG, the Shapley split, cost-plus, share-all, and every family a
module registers when ``sims.design`` imports it) is measured with all six misreports; the
designed rule files named with ``--rule`` join as the family "searched". The floor of the
same markets (``regret_floor``) goes into the sidecar. The page's section is rebuilt from the
CSV and sidecar as written (``sims.design.frontier.frontier_markdown``), so
tests/test_design_frontier.py can check that the committed page shows the committed numbers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import matplotlib
import pandas as pd
from _timing import pick

import sims.design  # noqa: F401 -- imports the modules that register their families
from proofs.regret import SEARCHES
from sims.design import draw_markets
from sims.design.evaluate import DEFAULT_SEARCH
from sims.design.frontier import (
    floor_summary,
    frontier_markdown,
    frontier_table,
    plot_frontier,
    register_family,
    replace_page_section,
)
from sims.results import versions, write_atomic, write_table

COST_MAX, SCALE_MIN = 5.0, 1e3  # the checker's drawn costs and gain scales (proofs.batch)


def _rule_files(paths):
    """name -> mechanism of designed rule files (a Mechanism where the loader returns one,
    else a payment rule with the paper's selection)."""
    from sims.design import load_rule

    out = {}
    for path in paths:
        rule = load_rule(path)
        out[getattr(rule, "name", None) or rule.__name__] = rule
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markets", type=int, default=pick(2000, 20), help="held-out markets")
    p.add_argument("--seed", type=int, default=1000, help="their seed (not a training seed)")
    p.add_argument("--rule", action="append", default=[], type=Path,
                   help="a designed rule file to place (family 'searched'); repeatable")
    p.add_argument("--csv", type=Path, default=Path("results/design_frontier.csv"))
    p.add_argument("--figure", type=Path, default=Path("results/design_frontier.png"))
    p.add_argument("--search", default=DEFAULT_SEARCH, choices=list(SEARCHES),
                   help="the misreport search (proofs.regret.SEARCHES; recorded in the sidecar, "
                        "and the test measures with the sidecar's)")
    p.add_argument("--page", type=Path, default=None,
                   help="rewrite the frontier section of this page (its markers kept)")
    args = p.parse_args(argv)
    t0, c0 = time.perf_counter(), time.process_time()
    if args.rule:
        rules = _rule_files(args.rule)
        register_family("searched", lambda: rules, replace=True)
    markets = draw_markets(args.markets, args.seed)
    table = frontier_table(None, [], markets, search=args.search, progress=lambda k, n: print(
        f"{k}/{n} rules measured ({time.perf_counter() - t0:.0f} s)", file=sys.stderr,
        flush=True))
    floor = floor_summary(markets, cost_max=COST_MAX, scale_min=SCALE_MIN)
    matplotlib.use("Agg")
    axes = plot_frontier(table)
    axes[0].figure.suptitle(f"{markets.size} held-out markets (seed {args.seed}), "
                            f"m = {markets.sizes()[0]}..{markets.sizes()[1]}", fontsize=9)
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.figure, lambda tmp: axes[0].figure.savefig(tmp, dpi=110), "--figure")
    command = "python benchmarks/design_frontier.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    figure = (Path("img") / args.figure.name).as_posix() if args.page is not None \
        else str(args.figure)
    provenance = {"command": command, "markets": markets.source, "seed": args.seed,
                  "size": markets.size, "search": args.search,
                  "search_options": SEARCHES[args.search],
                  "clients": list(markets.sizes()), "floor": floor, "figure": figure,
                  "rules": [str(r) for r in args.rule], "commit": commit,
                  "seconds": time.perf_counter() - t0,
                  "cpu_seconds": time.process_time() - c0, "versions": versions()}
    csv, side = write_table(table, args.csv, provenance)
    if args.page is not None:
        import json

        section = frontier_markdown(pd.read_csv(csv), json.loads(side.read_text()))
        page = args.page.read_text()
        write_atomic(args.page, lambda tmp: tmp.write_text(replace_page_section(page,
                                                                                 section)),
                     "--page")
    cols = ["family", "rule", "welfare_share", "largest_regret_N", "largest_regret_c",
            "largest_regret_K", "ir_rate", "deficit_rate", "admissible", "on_frontier"]
    print(table[cols].round(4).to_string(index=False))
    print(f"floor: {floor}")
    print(f"wall {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s")


if __name__ == "__main__":
    main()
