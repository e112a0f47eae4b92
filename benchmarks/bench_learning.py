"""Learner benchmarks: ratios measured side by side in one run (not a timed test).

1. Lockstep (torch.func.vmap over the client axis) vs sequential client training, same work:
   MLP on digits at m = 100 clients, simplecnn-mnist at m = 32.
2. Rounds per second and peak memory (max RSS of a fresh process) for m = 10, 100, 1000
   (digits MLP, 20 local steps of batch 32).
3. One iPFL round split into local training, distances, clearing and prox-centres
   (Fashion-MNIST simplecnn when installed, else digits).
4. Evaluation: batched (vmap over the clients' stacked models; chunks of test inputs sized
   automatically, 128 and 2048) vs a loop over clients, on the reduced reproduction's
   Fashion-MNIST setting.
5. What a reproduction costs: CPU seconds per algorithm-round of all nine Fig. 2 algorithms
   on Fashion-MNIST with simplecnn-mnist (the reduced reproduction's setting), lockstep vs
   sequential training side by side, and the evaluation share of a round. Sections 4 and 5
   time this one-thread process's CPU (time.process_time), which other jobs on a shared
   machine do not inflate; on an idle machine it equals the wall time. ``--costs FILE``
   runs only this part and writes it as JSON, which docs/reproduction.md shows
   (``fedmarket reproduce --no-run`` reads ``reproduction_costs.json`` next to the page).

6. ``--devices D [D ...]`` (only this part): wall seconds per round and rounds per second of
   the reduced reproduction's Fig. 2 iPFL cell (Fashion-MNIST, simplecnn-mnist, published
   setup; digits where Fashion-MNIST is not installed) with training and evaluation on each
   device (``TrainConfig.device``: cpu, cuda, cuda:N, auto), the best of the rounds after the
   first, and its accuracy, which should agree across devices to a few decimals. A device
   this machine lacks is one line saying so. On a GPU machine:
   python benchmarks/bench_learning.py --devices cpu cuda

Usage: python benchmarks/bench_learning.py
       python benchmarks/bench_learning.py --costs docs/reproduction_costs.json
       (FEDMARKET_BENCH_TINY=1, with any of these: every section at tiny sizes)
       python benchmarks/bench_learning.py --devices cpu cuda [--rounds 3]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import torch
from _timing import best_of, pick, tiny

from learning import models
from learning.local import SGDConfig, sample_batches, train_lockstep, train_sequential

TRAIN_SAMPLES, TRAIN_REPEAT = pick(4000, 200), pick(2, 1)  # section 1 (tiny: a sliver)


def timed_training(name, shape, m, steps, batch, n=TRAIN_SAMPLES, repeat=TRAIN_REPEAT):
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

    cfg = TrainConfig(algorithm="fedavg", dataset="digits", clients=m, rounds=3,
                      steps=pick(20, 2), batch=32, partition="iid")
    res = run(cfg)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rounds_per_s": cfg.rounds / res.timings["training"], "rss_mb": rss,
                      "training_s": res.timings["training"]}))


def main():
    print("1. lockstep vs sequential client training (same batches, same updates)")
    for name, shape, m, steps, batch in pick([("mlp", (1, 8, 8), 100, 20, 32),
                                              ("simplecnn-mnist", (1, 28, 28), 32, 10, 64)],
                                             [("mlp", (1, 8, 8), 4, 2, 8),
                                              ("simplecnn-mnist", (1, 28, 28), 2, 1, 8)]):
        t = timed_training(name, shape, m, steps, batch)
        print(f"   {name:16s} m = {m:4d}: lockstep {t['lockstep']:.3f} s, sequential "
              f"{t['sequential']:.3f} s -> {t['sequential'] / t['lockstep']:.1f}x")

    print("\n2. FedAvg rounds (digits MLP, 20 steps x batch 32): speed and peak memory")
    for m in pick((10, 100, 1000), (2, 4)):
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
        cfg = TrainConfig(algorithm="ipfl", dataset="fashion-mnist", clients=pick(10, 4),
                          rounds=3, steps=pick(50, 2), beta=0.1,
                          train_subsample=pick(0, 400), test_subsample=pick(0, 100))
    except MarketInputError:
        cfg = TrainConfig(algorithm="ipfl", dataset="digits", clients=pick(10, 4), rounds=3,
                          steps=pick(50, 2), beta=0.5)
    res = run(cfg)
    tm = res.timings
    mech = tm["distances"] + tm["clearing"] + tm["prox"]
    total = mech + tm["training"]
    print(f"   {cfg.dataset}, {cfg.clients} clients, {cfg.steps} local steps, "
          f"{cfg.rounds} rounds (2 market rounds)")
    for k in ("training", "distances", "clearing", "prox"):
        print(f"   {k:10s} {tm[k]:8.4f} s  ({100 * tm[k] / total:5.2f}%)")
    print(f"   mechanism share of a round: {100 * mech / total:.2f}%")

    try:
        load_fashion_mnist()
    except MarketInputError:
        if not tiny():  # a tiny run goes on with digits: every line runs
            print("\n4.-5. skipped: Fashion-MNIST is not installed")
            return
        TINY_SETTING.update(dataset="digits", train_subsample=0, test_subsample=0)
    print("\n4. evaluation of 10 clients (Fashion-MNIST simplecnn, 1,000 test inputs and each "
          "client's own split), CPU seconds, best of 3")
    print_evaluation(*evaluation()[1:])
    print("   the digits MLP (360 test inputs):")
    print_evaluation(*evaluation(dataset="digits", train_subsample=0, test_subsample=0)[1:])
    print("\n5. seconds per algorithm-round, lockstep vs sequential (reduced reproduction's "
          "Fashion-MNIST setting)")
    print_costs(costs(pick(3, 2)))


# a tiny run's sections 4 and 5: the same code on a sliver of the data (2 rounds: the rate is
# taken from the rounds after the first)
TINY_SETTING = {"train_subsample": 400, "test_subsample": 100, "clients": 4, "steps": 1}


def _fashion_config(**kw):
    from learning.config import preset
    from sims.reproduce import FASHION

    return preset("published", **{**FASHION, **pick({}, TINY_SETTING), **kw})


def evaluation(**config):
    """Batched vs looped evaluation of 10 clients' models (section 4), CPU seconds; the
    reduced reproduction's Fashion-MNIST setting unless ``config`` says otherwise."""
    from learning.evaluate import accuracy_on_parts, evaluate
    from learning.session import Session

    s = Session(_fashion_config(**config))
    torch.manual_seed(0)
    P = {k: v + 0.05 * torch.randn_like(v) for k, v in s.params0.items()}
    args = (s.model, P, s.data, s.label_dist, s.test_parts, s.X, s.Y)
    out = {}
    for label, kw in (("vmap, chunk auto", {}), ("vmap, chunk 128", {"chunk": 128}),
                      ("vmap, chunk 2048", {"chunk": 2048}),
                      ("loop over clients", {"batched": False})):
        evaluate(*args, **kw)  # warm-up
        out[label] = best_of(lambda kw=kw: evaluate(*args, **kw), clock=time.process_time)[0]
    val = {}
    for label, b in (("vmap", True), ("loop", False)):
        val[label] = best_of(lambda b=b: accuracy_on_parts(s.model, P, s.X, s.Y, s.val_parts,
                                                           batched=b),
                             clock=time.process_time)[0]
    return s, out, val


def costs(rounds: int = 3) -> list[dict]:
    """CPU seconds per round of each Fig. 2 algorithm, lockstep and sequential (section 5):
    the best of the rounds after the first (which warms up), and the evaluation share.
    CPU time of this one-thread process, so that other jobs on a shared machine do not
    inflate it (on an idle machine it equals the wall time)."""
    from learning.runner import run
    from learning.session import Session
    from sims.scenarios import NINE

    rows = []
    for alg in NINE:
        row = {"algorithm": alg}
        for mode, lock in (("lockstep", True), ("sequential", False)):
            cfg = _fashion_config(algorithm=alg, rounds=rounds, lockstep=lock,
                                  evaluate_every=1)
            stamps = []
            run(cfg, progress=lambda d, t, st=stamps: st.append(time.process_time()))
            per = np.diff(stamps).min()  # the rounds after the first
            row[f"{mode} s/round"] = round(float(per), 3)
            if lock:
                sess = Session(cfg)  # one round's evaluation: test sets and validation
                ev = best_of(lambda s=sess: (s.evaluate(s.params0), s.validate(s.params0)),
                             clock=time.process_time)[0]
                row["evaluation share"] = round(ev / per, 3)
        row["sequential / lockstep"] = round(row["sequential s/round"]
                                             / row["lockstep s/round"], 2)
        rows.append(row)
    return rows


def device_rates(devices, rounds: int = 3, **config) -> list[dict]:
    """Section 6: per device, wall seconds per round (the best of the rounds after the first,
    which warms up; wall time, since a GPU's work is not this process's CPU time), rounds
    per second and the last round's mean personalised accuracy; ``config`` overrides the
    reduced reproduction's Fig. 2 setting. A device this machine lacks: its row says so."""
    from learning.config import TrainInputError, torch_device
    from learning.data import load_fashion_mnist
    from learning.runner import run
    from mechanisms.errors import MarketInputError

    try:
        load_fashion_mnist()
        base = {}
    except MarketInputError:
        base = {"dataset": "digits", "train_subsample": 0, "test_subsample": 0}
    rows = []
    for dev in devices:
        try:
            torch_device(dev)
        except TrainInputError as exc:
            rows.append({"device": dev, "unavailable": str(exc)})
            continue
        cfg = _fashion_config(**{"algorithm": "ipfl", "rounds": rounds, "evaluate_every": 1,
                                 **base, **config, "device": dev})
        stamps = []
        res = run(cfg, progress=lambda d, t, st=stamps: st.append(time.perf_counter()))
        per = float(np.diff(stamps).min())
        last = res.frame[res.frame["round"] == rounds - 1]
        rows.append({"device": dev, "dataset": cfg.dataset, "s/round": round(per, 3),
                     "rounds/s": round(1.0 / per, 2),
                     "accuracy": round(float(last.acc_personalised.mean()), 4)})
    return rows


def print_devices(rows):
    for r in rows:
        if "unavailable" in r:
            print(f"   {r['device']:8s} unavailable: {r['unavailable']}")
        else:
            print(f"   {r['device']:8s} {r['dataset']}: {r['s/round']:.3f} s/round "
                  f"({r['rounds/s']:.2f} rounds/s), last-round accuracy {r['accuracy']:.4f}")


def print_evaluation(ev, val):
    for label, t in ev.items():
        print(f"   {label:18s} {t:7.3f} s  ({ev['loop over clients'] / t:4.1f}x the loop)")
    print(f"   validation splits: vmap {val['vmap']:.3f} s, loop {val['loop']:.3f} s "
          f"({val['loop'] / val['vmap']:.1f}x)")


def print_costs(rows):
    print("   algorithm   lockstep s/round  sequential s/round  seq/lock  evaluation share")
    for r in rows:
        print(f"   {r['algorithm']:10s} {r['lockstep s/round']:12.2f} "
              f"{r['sequential s/round']:17.2f} {r['sequential / lockstep']:11.2f}x "
              f"{r['evaluation share']:12.0%}")


def write_costs(path):
    import os
    from pathlib import Path

    from sims.reproduce import FASHION

    _, ev, val = evaluation()
    print_evaluation(ev, val)
    rows = costs(pick(3, 2))
    print_costs(rows)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({
        "command": f"python benchmarks/bench_learning.py --costs {path}",
        "setting": {**FASHION, "model": "simplecnn-mnist", "setup": "published"},
        "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows,
        "evaluation_s": {k: round(v, 4) for k, v in ev.items()},
        "validation_s": {k: round(v, 4) for k, v in val.items()}}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--costs":
        write_costs(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--devices":
        import argparse

        ap = argparse.ArgumentParser(description="rounds per second on each device")
        ap.add_argument("--devices", nargs="+", required=True)
        ap.add_argument("--rounds", type=int, default=3)
        a = ap.parse_args()
        a.rounds = pick(a.rounds, 2)
        if a.rounds < 2:  # the first round warms up: a rate needs a round after it
            ap.error(f"--rounds is {a.rounds}; give at least 2")
        print("6. the reduced reproduction's Fig. 2 iPFL cell on each device (wall time)")
        print_devices(device_rates(a.devices, a.rounds, **pick({}, TINY_SETTING)))
    else:
        main()
