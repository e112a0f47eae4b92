"""What the two-client theorems cost (docs/explanation-truthful-design.md): on markets drawn
from a type space, the welfare a rule truthful in the six directions, IR on the space and
without deficit can keep at most, as a share of the paper rule's welfare.

In two-client markets the theorems allow a trade i -> j alone only if c_j <= kappa, and both
trades only if c_1 + c_2 <= kappa2 (kappa2 = sqrt(K_lo) min over the box of h(N_1, N_2) +
h(N_2, N_1)); the bound keeps the best allowed allocation of every two-client market (its
welfare on the true types), and the first best in every other market (each buyer's
welfare-maximising bundle at its sellers' costs: the exact selection at prices c_j, no
payments). It prints the classes' shares and the bound, beside the paper rule, the first
best and the share-at-pi* rule (docs/designed/truthful.json).

    python benchmarks/truthful_bound.py --markets 20000 --seed 1000 [--type-space FILE] \\
        [--csv docs/truthful_bound.csv]

docs/reference-design.md's table is :func:`bound_table` of the committed CSV
(tests/test_reference_design_page.py checks it).
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import pick

from mechanisms import ipfl
from proofs.typespace import DEFAULT, load_type_space
from sims.design import REFERENCES, draw_markets
from sims.design.evaluate import Mechanism
from sims.design.families import posted_mechanism, truthful_posted_price, two_client_bounds


@ipfl.over_arrays
def cost_prices(market, D):
    """Each model at its seller's cost: the exact selection then maximises welfare."""
    c = np.asarray(market.c, dtype=float)[..., None, :]
    return np.broadcast_to(c, np.shape(D)).copy()


FIRST_BEST = Mechanism("first best", "exact", "none", cost_prices)


def two_client_bound(g, k1: float, k2: float) -> np.ndarray:
    """Per two-client market of group ``g``: the largest welfare of an allocation the
    theorems allow (none; i -> j alone if c_j <= k1; both if c_1 + c_2 <= k2), true types."""
    N, c, K = g["N"], g["c"], g["K"]
    gain = ipfl.SqrtGain()  # the value of the other's model: g_i(N_j) on the true types
    v01 = np.where(K[:, 0] > 0, gain.value(N[:, 1], K[:, 0], N[:, 0]), 0.0)
    v10 = np.where(K[:, 1] > 0, gain.value(N[:, 0], K[:, 1], N[:, 1]), 0.0)
    can01 = (K[:, 0] > 0) & np.isfinite(c[:, 1])
    can10 = (K[:, 1] > 0) & np.isfinite(c[:, 0])
    c0 = np.where(np.isfinite(c[:, 0]), c[:, 0], np.inf)
    c1 = np.where(np.isfinite(c[:, 1]), c[:, 1], np.inf)
    w01 = np.where(can01 & (c1 <= k1), v01 - c1, 0.0)
    w10 = np.where(can10 & (c0 <= k1), v10 - c0, 0.0)
    both = np.where(can01 & can10 & (c0 + c1 <= k2), v01 - c1 + v10 - c0, 0.0)
    return np.maximum.reduce([np.zeros(len(c0)), w01, w10, both])


LABELS = {"markets": "markets (share of all)", "paper": "paper rule",
          "first best": "first best",
          "share at pi*": "share at pi* (`docs/designed/truthful.json`)",
          "bound": "**bound** for any such rule"}
CLASSES = {"one-way two-client": "one-way two-client", "two-way two-client":
           "two-way two-client", "other": "every other market"}


def bound_table(df) -> str:
    """The page's table from the CSV :func:`main` writes (``--csv``): each row's share of
    the paper rule's total welfare by class of market, and the classes' shares of the
    markets."""
    v = df.set_index(["row", "class"]).share
    lines = ["| share of the paper rule's welfare | "
             + " | ".join(CLASSES.values()) + " | total |", "|---|---|---|---|---|"]
    for row, label in LABELS.items():
        cells = [f"{100 * v[(row, k)]:.1f} %" for k in CLASSES]
        total = "" if row == "markets" else f"{100 * v[(row, 'total')]:.1f} %"
        if row == "bound":
            total = f"**{total}**"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {total} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markets", type=int, default=pick(20000, 50))
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--type-space", default=None)
    p.add_argument("--csv", default=None,
                   help="write the table: one row per (row, class) with its share, and the "
                        "constants kappa, kappa2, pi* (docs/truthful_bound.csv)")
    args = p.parse_args(argv)
    space = DEFAULT if args.type_space is None else load_type_space(args.type_space)
    k1, k2 = two_client_bounds(space)
    mk = draw_markets(args.markets, args.seed, type_space=space)
    share = posted_mechanism({"base": truthful_posted_price(space)}, "all",
                             refuse_outside=space)
    rules = {"paper": REFERENCES["paper"], "first best": FIRST_BEST, "share at pi*": share}
    classes = ("one-way two-client", "two-way two-client", "other")
    W = {(r, k): 0.0 for r in [*rules, "bound"] for k in classes}
    count = dict.fromkeys(classes, 0)
    for g in mk.groups:
        m = g["N"].shape[1]
        if m == 2:
            can01 = (g["K"][:, 0] > 0) & np.isfinite(g["c"][:, 1])
            can10 = (g["K"][:, 1] > 0) & np.isfinite(g["c"][:, 0])
            masks = {"one-way two-client": can01 ^ can10, "two-way two-client": can01 & can10,
                     "other": ~(can01 | can10)}
            bound = two_client_bound(g, k1, k2)
        else:
            masks = {"other": np.ones(len(g["lam"]), bool)}
            bound = None
        for name, mech in rules.items():
            s = mech.settle(g["N"], g["c"], g["K"], g["lam"], g["D"])
            welfare = s["U"].sum(axis=1) + s["p"].sum(axis=1)
            for k, msk in masks.items():
                W[(name, k)] += welfare[msk].sum()
                if name == "first best":
                    W[("bound", k)] += (welfare if bound is None or k == "other"
                                        else bound)[msk].sum()
        for k, msk in masks.items():
            count[k] += int(msk.sum())
    paper = sum(W[("paper", k)] for k in classes)
    print(f"{mk.size} markets ({mk.source}); kappa = {k1:.6g} (one trade), kappa2 = {k2:.6g} "
          f"(both trades), pi* = {truthful_posted_price(space):.6g}")
    print("shares of the paper rule's total welfare, by class of market (share of markets):")
    print(f"{'':14s}" + "".join(f"{k:>22s}" for k in classes) + f"{'total':>10s}")
    print(f"{'markets':14s}" + "".join(f"{count[k] / mk.size:>22.1%}" for k in classes))
    for name in [*rules, "bound"]:
        tot = sum(W[(name, k)] for k in classes)
        print(f"{name:14s}" + "".join(f"{W[(name, k)] / paper:>22.1%}" for k in classes)
              + f"{tot / paper:>10.1%}")
    if args.csv:
        import pandas as pd

        rows = [{"row": "markets", "class": k, "share": count[k] / mk.size} for k in classes]
        for name in [*rules, "bound"]:
            rows += [{"row": name, "class": k, "share": W[(name, k)] / paper}
                     for k in classes]
            rows.append({"row": name, "class": "total",
                         "share": sum(W[(name, k)] for k in classes) / paper})
        rows += [{"row": c, "class": "", "share": v} for c, v in (
            ("kappa", k1), ("kappa2", k2), ("pi*", truthful_posted_price(space)),
            ("size", mk.size), ("seed", args.seed))]
        pd.DataFrame(rows).to_csv(args.csv, index=False)
    print("bound: the most welfare a rule truthful in the six directions, IR and without "
          "deficit on the space can keep (two-client markets: the theorems; elsewhere: the "
          "first best)")


if __name__ == "__main__":
    main()
