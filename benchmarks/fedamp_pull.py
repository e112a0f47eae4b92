"""Why FedAMP scores as Local: how far its aggregation moves the clients' models.

FedAMP (HeurFedAMP, as the iPFL authors' code runs it) never replaces a client's model: each
client keeps training its own model, pulled toward its attentive cloud model u_i by the
proximal term (fedamp_lam / 2) ||theta - u_i||^2 (learning.algorithms.fedamp). This script runs
Local and FedAMP from the same seed side by side (same data, same initial models, same
batches), round by round, and prints per round: the attention's self weight and largest
weight on another client (the graph FedAMP builds), how far FedAMP's trained models are from
Local's relative to how far Local's moved from the initial model, and the difference of the
clients' personalised test accuracy (FedAMP minus Local). It does so for the configured
fedamp_lam (0.01, the authors' --fedamp_lam1 default) and larger ones, so that the effect of
the pull's strength is measured, not assumed.

Usage: python benchmarks/fedamp_pull.py [--dataset digits] [--partition cluster]
       [--clients 9] [--rounds 3] [--steps 50] [--lams 0.01 0.1 1 10] [--seed 0]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import torch
from _timing import pick

from learning.algorithms import get
from learning.config import TrainConfig
from learning.session import Session


def _flat(s: Session, params) -> np.ndarray:
    return s.flatten(params).double().numpy()


def compare(base: TrainConfig, lam: float) -> list[dict]:
    """Local and FedAMP (proximal weight ``lam``) in lockstep from ``base``'s seed: one dict
    per round."""
    sl = Session(replace(base, algorithm="local"))
    sa = Session(replace(base, algorithm="fedamp", fedamp_lam=lam))
    gl, ga = get("local").rounds(sl), get("fedamp").rounds(sa)
    theta0 = sl.theta0
    if not np.array_equal(theta0, sa.theta0):
        raise SystemExit("the two sessions start from different models: not comparable")
    rows = []
    for t in range(base.rounds):
        pl, _, _ = next(gl)
        pa, _, extra = next(ga)
        fl, fa = _flat(sl, pl), _flat(sa, pa)
        W = np.asarray(extra["graph"], dtype=float)
        off = W[~np.eye(len(W), dtype=bool)].reshape(len(W), -1)
        moved = np.linalg.norm(fl - theta0, axis=1)
        apart = np.linalg.norm(fa - fl, axis=1)
        acc_l, acc_a = sl.evaluate(pl)[0], sa.evaluate(pa)[0]
        rows.append({"lam": lam, "round": t, "self weight": float(np.diag(W).mean()),
                     "largest other weight": float(off.max(axis=1).mean()),
                     "|amp - local| / |local - theta0|": float((apart / moved).mean()),
                     "acc FedAMP - Local (mean)": float((acc_a - acc_l).mean()),
                     "max |acc diff|": float(np.abs(acc_a - acc_l).max())})
    return rows


def measure(*, dataset="digits", partition="cluster", clients=9, rounds=3, steps=50,
            lams=(0.01, 0.1, 1.0, 10.0), train_subsample=0, seed=0):
    """The comparison for each proximal weight in ``lams``: one DataFrame row per (lam,
    round); the rest of the configuration is TrainConfig's defaults (the published
    setup's SGD: batch 64, lr 0.01, momentum 0.9; HeurFedAMP sigma 10, self 0.3)."""
    import pandas as pd

    base = TrainConfig(algorithm="local", dataset=dataset, partition=partition,
                       clients=clients, rounds=rounds, steps=steps, seed=seed,
                       train_subsample=train_subsample)
    return pd.DataFrame([r for lam in lams for r in compare(base, lam)])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--partition", default="cluster")
    ap.add_argument("--clients", type=int, default=pick(9, 3))
    ap.add_argument("--rounds", type=int, default=pick(3, 2))
    ap.add_argument("--steps", type=int, default=pick(50, 2))
    ap.add_argument("--lams", type=float, nargs="+",
                    default=pick([0.01, 0.1, 1.0, 10.0], [0.1, 10.0]))
    ap.add_argument("--train-subsample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    import pandas as pd

    torch.set_num_threads(1)
    base = TrainConfig()
    print(f"{a.dataset}, {a.partition}, {a.clients} clients, {a.rounds} rounds of {a.steps} "
          f"steps (batch {base.batch}, lr {base.lr}, momentum {base.momentum}), seed {a.seed}; "
          f"FedAMP heuristic attention (sigma {base.fedamp_sigma}, self {base.fedamp_self})")
    df = measure(dataset=a.dataset, partition=a.partition, clients=a.clients, rounds=a.rounds,
                 steps=a.steps, lams=a.lams, train_subsample=a.train_subsample, seed=a.seed)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
