"""Flower simulation vs the in-process learner on the same work (iPFL, digits, 4 clients).

Times R = 2 and R = 4 rounds of each; the per-round cost is the slope, the fixed cost (Ray and
SuperLink start-up, app loading) the intercept. Usage: python benchmarks/bench_flower.py
"""

from __future__ import annotations

import tempfile
import time

from learning.algorithms import TrainConfig, run


def flower(cfg):
    from flwr.simulation import run_simulation

    from learning.flower.app import make_apps

    server, client = make_apps(cfg, out=tempfile.mkdtemp())
    t = time.perf_counter()
    run_simulation(server, client, num_supernodes=cfg.clients,
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": 2}})
    return time.perf_counter() - t


def inproc(cfg):
    t = time.perf_counter()
    run(cfg)
    return time.perf_counter() - t


def main():
    base = TrainConfig(algorithm="ipfl", dataset="digits", clients=4, steps=50, batch=32,
                       lr=0.05, beta=0.5)
    rows = {}
    for rounds in (2, 4):
        cfg = TrainConfig(**{**base.__dict__, "rounds": rounds})
        rows[rounds] = (inproc(cfg), flower(cfg))
    (i2, f2), (i4, f4) = rows[2], rows[4]
    per_i, per_f = (i4 - i2) / 2, (f4 - f2) / 2
    print("iPFL, digits, 4 clients, 50 local steps per round")
    print(f"   in-process: {i2:.2f} s (2 rounds), {i4:.2f} s (4 rounds): {per_i:.3f} s per round")
    print(f"   Flower sim: {f2:.2f} s (2 rounds), {f4:.2f} s (4 rounds): {per_f:.3f} s per round")
    print(f"   per round, Flower / in-process = {per_f / max(per_i, 1e-9):.1f}x; fixed start-up "
          f"of the simulation {f2 - 2 * per_f:.1f} s")
    print("   where it goes: each client trains alone (no lockstep across clients), every round"
          " ships parameters through the SuperLink as Messages, and each ClientApp call "
          "rebuilds its context in a Ray actor")


if __name__ == "__main__":
    main()
