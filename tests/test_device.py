"""``device``: where training and evaluation run (cpu default; cuda where present; auto)."""

import pandas as pd
import pytest
import torch

from learning.algorithms import TrainConfig, run
from learning.config import TrainInputError, torch_device

TINY = {"dataset": "digits", "clients": 4, "rounds": 2, "steps": 5, "batch": 16, "lr": 0.05,
        "beta": 0.5}
CUDA = torch.cuda.is_available()


def test_cpu_is_the_default_and_auto_takes_cpu_without_cuda():
    assert TrainConfig().device == "cpu" and torch_device("cpu") == torch.device("cpu")
    assert torch_device("auto") == torch.device("cuda" if CUDA else "cpu")


@pytest.mark.skipif(CUDA, reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_clear_error(capsys):
    from sims.cli import main

    for name in ("cuda", "cuda:0"):
        with pytest.raises(TrainInputError, match="sees no CUDA device") as e:
            TrainConfig(device=name)
        assert e.value.field == "device"
    assert main(["train", "--device", "cuda", "--rounds", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["tpu", "cuda:x", "cpu:0", "", 3])
def test_unknown_devices_are_refused_naming_the_field(name):
    with pytest.raises(TrainInputError) as e:
        TrainConfig(device=name)
    assert e.value.field == "device"


@pytest.mark.parametrize("algorithm", ["ipfl", "fedavg", "fedfomo"])
def test_the_device_path_gives_the_cpu_numbers(algorithm):
    """Training and evaluation through Session.on_device / on_cpu (auto: cpu here, cuda on
    a GPU machine, where the accuracies may differ in the last digits)."""
    cols = ["acc_personalised", "acc_own", "acc_val", "loss", "utility"]
    cpu = run(TrainConfig(algorithm=algorithm, **TINY)).frame[cols]
    auto = run(TrainConfig(algorithm=algorithm, device="auto", **TINY)).frame[cols]
    if CUDA:
        pd.testing.assert_frame_equal(cpu, auto, atol=1e-3, check_exact=False)
    else:
        pd.testing.assert_frame_equal(cpu, auto)


def test_device_cpu_keeps_stored_cells_current():
    from sims.scenarios import SCENARIOS
    from sims.sweep import hash_config

    cfg = SCENARIOS["fig2"].make_config({"partition": "niid"}, 0)
    assert hash_config(cfg) == hash_config(SCENARIOS["fig2"].make_config(
        {"partition": "niid", "device": "cpu"}, 0))
    assert hash_config(cfg) != hash_config(SCENARIOS["fig2"].make_config(
        {"partition": "niid", "device": "auto"}, 0))


@pytest.mark.skipif(CUDA, reason="this machine has CUDA")
def test_reproduce_and_sweep_refuse_cuda_without_cuda_in_one_line(capsys, tmp_path):
    """Before any cell runs: `reproduce --device cuda` names --device; a sweep spec's
    `device = "cuda"` names the spec's field."""
    from sims.cli import main

    assert main(["reproduce", "--device", "cuda", "--no-run", "--out",
                 str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedmarket: error: --device:") and "sees no CUDA device" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    spec = tmp_path / "s.toml"
    spec.write_text('seeds = [0]\n[[scenarios]]\nname = "ipfl-learning"\nmechanisms = '
                    '["fedavg"]\nparams = { rounds = 1, steps = 1, device = "cuda" }\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "s"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "scenarios[0].params.device" in err and "sees no CUDA device" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "s" / "store.sqlite").exists()


@pytest.mark.skipif(CUDA, reason="this machine has CUDA")
def test_the_full_setting_on_cuda_is_refused_before_anything_runs(capsys, tmp_path,
                                                                   monkeypatch):
    """`fedmarket reproduce --setting full --device cuda`, the GPU machine's one command, here
    without CUDA: one line naming --device, before any cell runs or any store is made (the
    sweep is never called); with --device auto the data sets it needs are checked next, before
    any cell runs too (CIFAR-10 absent: one line naming --setting)."""
    import sims.sweep
    from sims.cli import main

    calls = []
    monkeypatch.setattr(sims.sweep, "run_sweep", lambda *a, **k: calls.append(a))
    monkeypatch.setenv("FEDMARKET_CIFAR10", str(tmp_path / "no-cifar"))
    out = tmp_path / "full"
    assert main(["reproduce", "--setting", "full", "--device", "cuda", "--out", str(out),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedmarket: error: --device:") and "sees no CUDA device" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert calls == [] and not (out / "store.sqlite").exists()
    from learning.data import cifar10_folder
    from mechanisms.errors import MarketInputError

    try:
        cifar10_folder()
    except MarketInputError:
        pass
    else:
        pytest.skip("this machine has CIFAR-10")
    assert main(["reproduce", "--setting", "full", "--device", "auto", "--out", str(out),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedmarket: error: --setting: full runs") and "CIFAR-10" in err
    assert len(err.splitlines()) == 1
    assert calls == [] and not (out / "store.sqlite").exists()


def test_reproduce_device_reaches_every_learning_cell_and_cpu_keeps_the_keys(
        tmp_path, monkeypatch):
    """`reproduce --device auto` gives every learning cell device 'auto' (the mechanism-level
    cells none); the default, cpu, leaves the cells (and so the stored rows) as they were."""
    import sims.reproduce
    import sims.sweep
    from sims.cli import main
    from sims.scenarios import SCENARIOS
    from sims.sweep import expand

    seen = []

    def fake_sweep(cells, out, **kw):
        seen.append(list(cells))
        return {"cells": 0, "ran": 0, "skipped": 0, "wall_s": 0.0}
    monkeypatch.setattr(sims.sweep, "run_sweep", fake_sweep)
    monkeypatch.setattr(sims.reproduce, "write_reproduction", lambda *a, **k: None)
    args = ["reproduce", "--seeds", "0", "--scenarios", "fig4", "liars", "--out",
            str(tmp_path / "r"), "--quiet"]
    assert main([*args, "--device", "auto"]) == 0
    assert main(args) == 0
    auto, cpu = seen
    learning = [c for c in auto if SCENARIOS[c.scenario].kind == "learning"]
    assert learning and all(dict(c.params).get("device") == "auto" for c in learning)
    assert all("device" not in dict(c.params) for c in auto if c not in learning)
    assert [c.key for c in cpu] == [c.key for c in expand(sims.reproduce.spec("reduced", (0,)))
                                    if c.scenario in ("fig4", "liars")]
