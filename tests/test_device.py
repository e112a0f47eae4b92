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
