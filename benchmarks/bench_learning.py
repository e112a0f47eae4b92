"""Learner benchmarks: ratios measured side by side in one run (not a timed test).

1. Lockstep (torch.func.vmap over the client axis) vs sequential client training, same work:
   MLP on digits at m = 100 clients, simplecnn-mnist at m = 32.
2. Rounds per second and peak memory (max RSS of a fresh process) for m = 10, 100, 1000
   (digits MLP, 20 local steps of batch 32).
3. One iPFL round split into local training, distances, clearing and prox-centres
   (Fashion-MNIST simplecnn when installed, else digits).

Usage: python benchmarks/bench_learning.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import torch

from learning import models
from learning.local import SGDConfig, sample_batches, train_lockstep, train_sequential


def timed_training(name, shape, m, steps, batch, n=4000, repeat=2):
    torch.manual_seed(0)
    X = torch.rand(n, *shape)
    Y = torch.randint(0, 10, (n,))
    parts = [np.arange(k, n, m) for k in range(m)]
    model = models.build(name, shape, 10)
    P = models.init_stacked(model, m)
    cfg = SGDConfig(steps=steps, batch=batch, lr=0.01)
    b = sample_batches(parts, cfg, [np.random.default_rng(k) for k in range(m)])
    out = {}
    for label, fn in (("lockstep", train_lockstep), ("sequential", train_sequential)):
        fn(model, P, X, Y, b[:1], cfg)  # warm-up
        best = np.inf
        for _ in range(repeat):
            t = time.perf_counter()
            fn(model, P, X, Y, b, cfg)
            best = min(best, time.perf_counter() - t)
        out[label] = best
    return out


def child(m):
    import resource

    from learning.algorithms import TrainConfig, run

    cfg = TrainConfig(algorithm="fedavg", dataset="digits", clients=m, rounds=3, steps=20,
                      batch=32, partition="iid")
    res = run(cfg)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rounds_per_s": cfg.rounds / res.timings["training"], "rss_mb": rss,
                      "training_s": res.timings["training"]}))


def main():
    print("1. lockstep vs sequential client training (same batches, same updates)")
    for name, shape, m, steps, batch in [("mlp", (1, 8, 8), 100, 20, 32),
                                         ("simplecnn-mnist", (1, 28, 28), 32, 10, 64)]:
        t = timed_training(name, shape, m, steps, batch)
        print(f"   {name:16s} m = {m:4d}: lockstep {t['lockstep']:.3f} s, sequential "
              f"{t['sequential']:.3f} s -> {t['sequential'] / t['lockstep']:.1f}x")

    print("\n2. FedAvg rounds (digits MLP, 20 steps x batch 32): speed and peak memory")
    for m in (10, 100, 1000):
        out = subprocess.run([sys.executable, __file__, "--child", str(m)], capture_output=True,
                             text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"   m = {m:5d}: {r['rounds_per_s']:.2f} rounds/s of training, "
              f"peak RSS {r['rss_mb']:.0f} MB")

    print("\n3. one iPFL round, split")
    from learning.algorithms import TrainConfig, run
    from learning.data import load_fashion_mnist
    from mechanisms.errors import MarketInputError

    try:
        load_fashion_mnist()
        cfg = TrainConfig(algorithm="ipfl", dataset="fashion-mnist", clients=10, rounds=3,
                          steps=50, beta=0.1)
    except MarketInputError:
        cfg = TrainConfig(algorithm="ipfl", dataset="digits", clients=10, rounds=3, steps=50,
                          beta=0.5)
    res = run(cfg)
    tm = res.timings
    mech = tm["distances"] + tm["clearing"] + tm["prox"]
    total = mech + tm["training"]
    print(f"   {cfg.dataset}, {cfg.clients} clients, {cfg.steps} local steps, "
          f"{cfg.rounds} rounds (2 market rounds)")
    for k in ("training", "distances", "clearing", "prox"):
        print(f"   {k:10s} {tm[k]:8.4f} s  ({100 * tm[k] / total:5.2f}%)")
    print(f"   mechanism share of a round: {100 * mech / total:.2f}%")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        main()
