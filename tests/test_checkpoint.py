"""Per-round checkpoints (learning.checkpoint): a run stopped after round k and resumed from
its checkpoint gives, round for round, exactly the numbers of a run never stopped -- for
every algorithm in the registry, in settings that exercise each one's carried state (an
attacker's generator, a quitter's best model, FedFomo's sampler, pFedLIA's re-clustering).
Known-bad: a restore that forgets the training-call count, or the generators' states, gives
other numbers, and the same comparison catches it."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from learning.algorithms import REGISTRY, TrainConfig, run
from learning.checkpoint import Checkpoint, CheckpointError
from learning.session import Session

ROUNDS, STOP = 5, 2
BASE = {"dataset": "digits", "clients": 6, "rounds": ROUNDS, "steps": 3, "batch": 8,
        "beta": 0.5, "lam": 2.0, "evaluate_every": 2, "attack": "gaussian", "attackers": 1}
EXTRA = {"lia": {"partition": "pairs", "n_clusters": 2, "lia_warmup": 1, "lia_k": 1,
                 "lia_recluster": 2, "attack": "none", "attackers": 0},
         "oracle": {"partition": "pairs", "n_clusters": 2, "attack": "none", "attackers": 0},
         "fedfomo": {"fedfomo_M": 3},  # 3 of 6: its sampler matters
         # client 1 hides its cost, sells at a loss and quits after round 0
         "ipfl": {"allow_quit": True, "liar": 1, "liar_c": 0.0, "K": 1.0, "C": 5.0,
                  "lam": 0.001, "clients": 5, "steps": 10, "batch": 16, "lr": 0.05}}


class Stop(Exception):
    pass


def stop_after(k):
    def progress(done, total):
        if done == k:
            raise Stop
    return progress


def config(name):
    return TrainConfig(algorithm=name, **{**BASE, **EXTRA.get(name, {})})


def stopped_and_resumed(cfg, path, stop=STOP, tag=""):
    ck = Checkpoint(path, tag=tag)
    with pytest.raises(Stop):
        run(cfg, stop_after(stop), checkpoint=ck)
    assert path.is_file()
    seen = []
    res = run(cfg, lambda d, t: seen.append(d), checkpoint=ck)
    return res, seen


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_resumed_run_equals_uninterrupted(name, tmp_path):
    cfg = config(name)
    whole = run(cfg)
    res, seen = stopped_and_resumed(cfg, tmp_path / "ck.pt")
    assert res.resumed_from == STOP and res.checkpointed
    assert seen == list(range(STOP, ROUNDS + 1))  # restored rounds once, then one per round
    pd.testing.assert_frame_equal(res.frame, whole.frame, check_exact=True)
    assert res.extras == whole.extras


def test_quitter_and_attacker_state_are_exercised():
    """The settings above do what they are there for: in iPFL's run someone quits (the best
    model and the active set are carried), and an attacker's generator is drawn from."""
    df = run(config("ipfl")).frame
    assert not df[df["round"] == ROUNDS - 1].active.all()
    assert df[df["round"] == 0].active.all()
    assert (df.role == "attacker").any()


@pytest.mark.parametrize(("name", "forget"), [("fedfomo", "train_calls"),
                                             ("cpl", "round_rng"),
                                             ("fedfomo", "attack_rng"),
                                             ("fedfomo", "carried generator")])
def test_known_bad_restore_is_caught(name, forget, tmp_path, monkeypatch):
    """A restore that forgets one part of the state gives other numbers: the batch streams
    (training-call count), CPL's participation draws (round generator), the attacker's noise
    (attack generator), FedFomo's sampler (a generator in its carry)."""
    cfg = config(name)
    whole = run(cfg)
    restore = Session.restore

    def forgetful(self, state):
        state = {**state, "carry": dict(state["carry"])}
        if forget == "carried generator":
            state["carry"]["rng"] = np.random.default_rng(0)
        else:
            state[forget] = {"train_calls": self.train_calls,
                             "round_rng": self.round_rng.bit_generator.state,
                             "attack_rng": self.attack_rng.bit_generator.state}[forget]
        restore(self, state)

    monkeypatch.setattr(Session, "restore", forgetful)
    res, _ = stopped_and_resumed(cfg, tmp_path / "ck.pt")
    assert res.resumed_from == STOP
    cols = ["acc_val", "utility", "n_bought"]
    assert not res.frame[cols].equals(whole.frame[cols])


def test_checkpoint_of_another_run_is_ignored(tmp_path):
    """Another config or another tag: the checkpoint is not resumed from (the run starts at
    round 0 and overwrites it). A file that is no checkpoint at all is refused."""
    cfg = config("local")
    path = tmp_path / "ck.pt"
    with pytest.raises(Stop):
        run(cfg, stop_after(STOP), checkpoint=Checkpoint(path, tag="a"))
    assert run(cfg, checkpoint=Checkpoint(path, tag="b")).resumed_from == 0
    with pytest.raises(Stop):
        run(cfg, stop_after(STOP), checkpoint=Checkpoint(path))
    other = dataclasses.replace(cfg, lr=0.02)
    assert run(other, checkpoint=Checkpoint(path)).resumed_from == 0
    # a file that is not a checkpoint is refused, naming it (it could be crafted); once
    # deleted, the run starts from round 0
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a safetensors file") as info:
        run(cfg, checkpoint=Checkpoint(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    path.unlink()
    assert run(cfg, checkpoint=Checkpoint(path)).resumed_from == 0


def test_algorithm_without_carry_restarts_declared(tmp_path, user_module):
    """An algorithm of the user's own that keeps its state in its generator writes no
    checkpoint: a stopped run of it starts again from round 0, and its result says so."""
    user_module("noncarry", "from learning.session import Round\n"
                "def rounds(s):\n"
                "    params = s.params0\n"
                "    while True:\n"
                "        params = s.train(params)\n"
                "        yield Round(params, s.zero_ledger(), {})\n")
    cfg = dataclasses.replace(config("local"), algorithm="noncarry:rounds")
    path = tmp_path / "ck.pt"
    with pytest.raises(Stop):
        run(cfg, stop_after(STOP), checkpoint=Checkpoint(path))
    assert not path.exists()
    res = run(cfg, checkpoint=Checkpoint(path))
    assert res.resumed_from == 0 and not res.checkpointed


def test_checkpoint_every_is_checked():
    from learning.config import TrainInputError

    with pytest.raises(TrainInputError, match="checkpoint_every"):
        Checkpoint("x.pt", every=0)


KILL_SPEC = {"seeds": [0], "scenarios": [
    {"name": "ipfl-learning", "mechanisms": ["ipfl"],
     "params": {"rounds": 12, "steps": 20, "evaluate_every": 3}}]}


def _checkpointed_rounds(path) -> int:
    return Checkpoint(path).saved_rounds()  # 0 while there is none (replaced atomically)


def _no_timing(df):
    return df.drop(columns=[c for c in df if c.startswith("seconds")])


@pytest.mark.serial
@pytest.mark.slow
def test_sweep_killed_mid_cell_resumes_there(tmp_path):
    """kill -9 of a sweep in the middle of a learning cell: the rerun resumes the cell after
    its last checkpointed round (its first step reports those rounds done) and stores the
    rows of an uninterrupted sweep; the checkpoint is gone once the cell is stored."""
    import signal
    import subprocess
    import sys
    import time

    from sims.sweep import Store, checkpoint_path, expand, run_sweep

    spec_file = tmp_path / "spec.toml"
    spec_file.write_text('seeds = [0]\n[[scenarios]]\nname = "ipfl-learning"\n'
                         'mechanisms = ["ipfl"]\n'
                         'params = { rounds = 12, steps = 20, evaluate_every = 3 }\n')
    cells = expand(KILL_SPEC)
    out = tmp_path / "store"
    ck = checkpoint_path(out / "checkpoints", cells[0])
    proc = subprocess.Popen([sys.executable, "-m", "sims.cli", "sweep", str(spec_file),
                             "--out", str(out), "--quiet"])
    deadline = time.time() + 300
    while time.time() < deadline and _checkpointed_rounds(ck) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = _checkpointed_rounds(ck)
    assert 2 <= killed_at < 12, killed_at  # killed mid-cell, after 2 rounds or more
    steps = []
    run_sweep(cells, out, cell_progress=steps.append)
    done = [st.done for st in steps if not st.over]
    assert done[:2] == [0, killed_at] and done[-1] == 12  # resumed, not restarted
    assert not ck.exists()
    run_sweep(cells, tmp_path / "clean", checkpoints=False)
    a, b = Store(out, mode="r"), Store(tmp_path / "clean", mode="r")
    try:
        pd.testing.assert_frame_equal(_no_timing(a.frame()), _no_timing(b.frame()),
                                      check_exact=True)
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_no_checkpoints_flag_writes_none(tmp_path, monkeypatch):
    """`fedmarket sweep --no-checkpoints` (and reproduce's) saves no checkpoint; without the
    flag the same sweep saves one a round (the known-bad: a flag that is not passed on)."""
    import sims.sweep
    from sims.cli import main

    saved = []
    save = Checkpoint.save

    def counting(self, *a, **k):
        saved.append(self.path)
        return save(self, *a, **k)
    monkeypatch.setattr(Checkpoint, "save", counting)
    spec = tmp_path / "s.toml"
    spec.write_text('seeds = [0]\n[[scenarios]]\nname = "ipfl-learning"\nmechanisms = '
                    '["fedavg"]\nparams = { rounds = 2, steps = 1, clients = 4 }\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "off"), "--quiet",
                 "--no-checkpoints"]) == 0
    assert saved == []
    assert main(["sweep", str(spec), "--out", str(tmp_path / "on"), "--quiet"]) == 0
    assert len(saved) == 2  # one a round
    # reproduce passes the flag on to its sweep
    got = []

    def fake_sweep(cells, out, **kw):
        got.append(kw["checkpoints"])
        return {"cells": 0, "ran": 0, "skipped": 0, "wall_s": 0.0}
    monkeypatch.setattr(sims.sweep, "run_sweep", fake_sweep)
    import sims.reproduce

    monkeypatch.setattr(sims.reproduce, "write_reproduction", lambda *a, **k: None)
    args = ["reproduce", "--seeds", "0", "--scenarios", "liars", "--out",
            str(tmp_path / "r"), "--quiet"]
    assert main([*args, "--no-checkpoints"]) == 0 and main(args) == 0
    assert got == [False, True]


def test_the_safetensors_checkpoint_keeps_what_the_state_holds(tmp_path):
    """The checkpoint format keeps every kind of value a carry holds, exactly: views of one
    tensor (stored apart, since safetensors refuses shared memory), one tensor named twice
    (still one object), empty tensors and arrays, requires_grad, a Parameter, numpy
    scalars, a generator mid-stream (with its seed sequence: spawn gives the same children),
    tuples, dicts with non-string keys, non-finite floats."""
    import torch

    cfg = config("local")
    base = torch.arange(10.0)
    g = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(1,)))
    g.random(5)
    state = {"base": base, "same": base, "view": base[2:5], "t": base.view(2, 5).t(),
             "empty": torch.zeros(0, 3), "none": np.zeros(0),
             "grad": torch.ones(2, requires_grad=True),
             "param": torch.nn.Parameter(torch.ones(2)), "f32": np.float32(0.1),
             "i64": np.int64(-3), "g": g, "tuple": (1, "a", None), 0: {1: [np.inf, -np.nan]},
             "bits": np.arange(4, dtype=np.uint32)}
    ck = Checkpoint(tmp_path / "ck.safetensors")
    ck.save(cfg, 3, [], 1.5, state)
    back = ck.load(cfg).session
    assert back["same"] is back["base"] and torch.equal(back["base"], base)
    assert torch.equal(back["view"], base[2:5]) and torch.equal(back["t"], base.view(2, 5).t())
    assert back["empty"].shape == (0, 3) and back["none"].shape == (0,)
    assert back["grad"].requires_grad and isinstance(back["param"], torch.nn.Parameter)
    assert type(back["f32"]) is np.float32 and back["f32"] == np.float32(0.1)
    assert type(back["i64"]) is np.int64 and back["i64"] == -3
    assert back["g"].random() == g.random()
    assert [c.random() for c in back["g"].spawn(2)] == [c.random() for c in g.spawn(2)]
    assert back["tuple"] == (1, "a", None) and back["bits"].dtype == np.uint32
    assert back[0][1][0] == np.inf and np.isnan(back[0][1][1])
