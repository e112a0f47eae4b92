"""Flower simulation vs the in-process learner on the same work (iPFL, digits, 4 clients).

Times R = 2 and R = 4 rounds of each; the per-round cost is the slope, the fixed cost (Ray and
SuperLink start-up, app loading) the intercept. Usage: python benchmarks/bench_flower.py
"""

from __future__ import annotations

import json
import tempfile
import time

from learning.algorithms import TrainConfig, run


def flower(cfg):
    """(total wall time, time inside the strategy's rounds)."""
    from flwr.simulation import run_simulation

    from learning.flower.app import make_apps

    out = tempfile.mkdtemp()
    server, client = make_apps(cfg, out=out)
    t = time.perf_counter()
    run_simulation(server, client, num_supernodes=cfg.clients,
                   backend_config={"client_resources": {"num_cpus": 1},
                                   "init_args": {"num_cpus": 2}})
    total = time.perf_counter() - t
    with open(f"{out}/flower_result.json") as fh:
        return total, json.load(fh)["strategy_seconds"]


def inproc(cfg):
    t = time.perf_counter()
    run(cfg)
    return time.perf_counter() - t


def main():
    base = TrainConfig(algorithm="ipfl", dataset="digits", clients=4, steps=50, batch=32,
                       lr=0.05, beta=0.5)
    inproc(TrainConfig(**{**base.__dict__, "rounds": 1}))  # warm-up: imports, vmap, data
    rounds = 6
    cfg = TrainConfig(**{**base.__dict__, "rounds": rounds})
    t_in = min(inproc(cfg), inproc(cfg))
    total, inside = flower(cfg)
    per_i, per_f = t_in / rounds, inside / rounds
    print(f"iPFL, digits, 4 clients, 50 local steps per round, {rounds} rounds")
    print(f"   in-process learner: {t_in:.2f} s, {per_i:.3f} s per round")
    print(f"   Flower simulation: {total:.2f} s in all, {inside:.2f} s inside the strategy's "
          f"rounds: {per_f:.3f} s per round")
    print(f"   per round, Flower / in-process = {per_f / per_i:.1f}x; outside the rounds "
          f"(Ray, SuperLink, app loading, shutdown) {total - inside:.1f} s")
    print("   not split further here. Candidates: each client trains alone (no lockstep), "
          "every round ships parameters through the SuperLink as Messages, and the grid polls "
          "for replies; the training itself is the in-process figure above")


if __name__ == "__main__":
    main()
