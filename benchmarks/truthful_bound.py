"""What the two-client theorem costs (docs/explanation-truthful-design.md): on markets drawn
from a type space, the share of the paper rule's welfare (and of the first best) that sits in
two-client one-way markets with a seller whose cost exceeds kappa, the trades every rule
truthful in the six directions, IR on the space and without deficit must give up; and the
welfare left for such a rule elsewhere (the first best there), as a share of the paper's.

The first best: every buyer takes the bundle that maximises g_i - sum of the sellers' costs
(the exact selection at prices c_j, no payments), the largest welfare (Eq. 5) any selection
reaches.

    python benchmarks/truthful_bound.py --markets 20000 --seed 1000 [--type-space FILE]
"""

from __future__ import annotations

import argparse

import numpy as np

from mechanisms import ipfl
from proofs.typespace import DEFAULT, load_type_space
from sims.design import REFERENCES, draw_markets
from sims.design.evaluate import Mechanism
from sims.design.families import posted_mechanism, truthful_posted_price


def kappa(space) -> float:
    """sqrt(K_lo) (1/sqrt(N_hi) - 1/sqrt(N_hi + N_lo)): the largest seller's cost at which a
    six-direction truthful, IR, no-deficit rule can trade in a two-client one-way market."""
    return float(np.sqrt(space.K.low) * (space.N.high ** -0.5
                                          - (space.N.high + space.N.low) ** -0.5))


@ipfl.over_arrays
def cost_prices(market, D):
    """Each model at its seller's cost: the exact selection then maximises welfare."""
    c = np.asarray(market.c, dtype=float)[..., None, :]
    return np.broadcast_to(c, np.shape(D)).copy()


FIRST_BEST = Mechanism("first best", "exact", "none", cost_prices)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markets", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--type-space", default=None)
    args = p.parse_args(argv)
    space = DEFAULT if args.type_space is None else load_type_space(args.type_space)
    k = kappa(space)
    mk = draw_markets(args.markets, args.seed, type_space=space)
    share = posted_mechanism({"base": truthful_posted_price(space)}, "all",
                             refuse_outside=space)
    rows = {"paper": REFERENCES["paper"], "first best": FIRST_BEST, "share at pi*": share}
    tot = dict.fromkeys(rows, 0.0)
    one_way = dict.fromkeys(rows, 0.0)
    costly = dict.fromkeys(rows, 0.0)
    n_one = n_two = 0
    for g in mk.groups:
        m = g["N"].shape[1]
        if m == 2:
            c, K = g["c"], g["K"]
            can12 = (K[:, 0] > 0) & np.isfinite(c[:, 1])
            can21 = (K[:, 1] > 0) & np.isfinite(c[:, 0])
            one = can12 ^ can21
            seller_c = np.where(can12, c[:, 1], c[:, 0])
            n_one += int(one.sum())
            n_two += len(one)
        for name, mech in rows.items():
            s = mech.settle(g["N"], g["c"], g["K"], g["lam"], g["D"])
            W = s["U"].sum(axis=1) + s["p"].sum(axis=1)
            tot[name] += W.sum()
            if m == 2:
                one_way[name] += W[one].sum()
                costly[name] += W[one & (seller_c > k)].sum()
    paper = tot["paper"]
    print(f"{mk.size} markets ({mk.source}); kappa = {k:.6g}; pi* = "
          f"{truthful_posted_price(space):.6g}")
    print(f"two-client markets: {n_two} ({n_two / mk.size:.1%}); one-way among them: {n_one} "
          f"({n_one / max(n_two, 1):.1%}; {n_one / mk.size:.1%} of all markets)")
    for name in rows:
        print(f"{name:14s} welfare {tot[name] / mk.size:8.3f} per market = "
              f"{tot[name] / paper:6.1%} of the paper's; in one-way two-client markets "
              f"{one_way[name] / paper:6.1%}, with a seller's cost > kappa "
              f"{costly[name] / paper:6.1%}")
    left = (tot["first best"] - costly["first best"]) / paper
    print(f"upper bound the theorem leaves for a six-direction truthful, IR, no-deficit rule "
          f"(first best everywhere else): {left:.1%} of the paper rule's welfare")


if __name__ == "__main__":
    main()
