"""LIA benchmarks: ratios measured side by side in one run (not a timed test).

1. Lazy influence (k = 5 epochs on one batch) vs exact influence (train to convergence) on the
   same 32 clients: time ratio and agreement (ARI) of the two clusterings, and of each with the
   ground truth.
2. Batched (all models on all validation sets in one vmap pass) vs per-pair evaluation of the
   m^2 scores at m = 32.

Usage: python benchmarks/bench_lia.py
       FEDMARKET_BENCH_TINY=1 python benchmarks/bench_lia.py   (every section, tiny sizes)
"""

from __future__ import annotations

import time

import numpy as np
import torch
from _timing import pick

from learning import data, models, partition
from learning.lia import influence_batched, influence_per_pair, partial_models
from mechanisms import lia
from mechanisms.errors import MarketInputError


def main(m: int = pick(32, 8)):
    try:
        d = data.load_fashion_mnist()
        name = "fashion-mnist"
    except MarketInputError:
        d, name = data.load_digits(), "digits"
    parts, groups = partition.pairs(d.y_train, m, 4, 0)
    val = [p[: max(1, len(p) // 10)] for p in parts]
    train = [p[len(v):] for p, v in zip(parts, val, strict=True)]
    X, Y = torch.as_tensor(d.x_train), torch.as_tensor(d.y_train)
    torch.manual_seed(0)
    model = models.build("mlp", d.input_shape, 10)
    theta0 = models.init_stacked(model, m)
    print(f"{name}, {m} clients in 4 groups (class pairs), MLP from a common initial model")

    t = time.perf_counter()
    lazy, k = partial_models(model, theta0, X, Y, train, np.random.default_rng(1), k=5, lr=0.1)
    I_lazy = influence_batched(model, theta0, lazy, X, Y, val)
    t_lazy = time.perf_counter() - t
    t = time.perf_counter()
    exact, steps = partial_models(model, theta0, X, Y, train, np.random.default_rng(1),
                                  lr=0.1, exact=True, max_steps=pick(3000, 20),
                                  tol=1e-3)
    I_exact = influence_batched(model, theta0, exact, X, Y, val)
    t_exact = time.perf_counter() - t
    c_lazy, c_exact = lia.cluster(I_lazy), lia.cluster(I_exact)
    print("\n1. lazy vs exact influence")
    print(f"   lazy  ({k} steps)      {t_lazy:8.3f} s, clusters {len(set(c_lazy))}, "
          f"ARI vs truth {lia.adjusted_rand_index(c_lazy, groups):.3f}")
    print(f"   exact ({steps} steps)  {t_exact:8.3f} s, clusters {len(set(c_exact))}, "
          f"ARI vs truth {lia.adjusted_rand_index(c_exact, groups):.3f}")
    print(f"   speed-up {t_exact / t_lazy:.0f}x; ARI(lazy, exact) = "
          f"{lia.adjusted_rand_index(c_lazy, c_exact):.3f}")

    print(f"\n2. evaluating the {m * m} scores")
    best = {}
    for label, fn in (("batched", influence_batched), ("per-pair", influence_per_pair)):
        fn(model, theta0, lazy, X, Y, val)
        ts = []
        for _ in range(pick(3, 1)):
            t = time.perf_counter()
            fn(model, theta0, lazy, X, Y, val)
            ts.append(time.perf_counter() - t)
        best[label] = min(ts)
        print(f"   {label:9s} {best[label]:.4f} s")
    print(f"   batched is {best['per-pair'] / best['batched']:.1f}x faster")


if __name__ == "__main__":
    main()
