"""CIFAR-10 from the standard python batches in a folder the user names: read from a small
fixture in the same format, generated here (no download), and trained on."""

import pickle

import numpy as np
import pytest

from learning import data, models
from learning.algorithms import TrainConfig, run
from mechanisms.errors import MarketInputError


def test_cifar10_from_a_user_folder(tmp_path, cifar_batches):
    written = cifar_batches(tmp_path / "cifar-10-batches-py")
    d = data.load_cifar10(tmp_path)  # the parent folder of cifar-10-batches-py works too
    assert d.x_train.shape == (40, 3, 32, 32) and d.x_test.shape == (12, 3, 32, 32)
    assert d.x_train.dtype == np.float32 and 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0
    # channel-major: the first 1,024 bytes of a row are the red plane of the first image
    x0 = written["data_batch_1"][0][0]
    np.testing.assert_allclose(d.x_train[0, 0].ravel(), x0[:1024] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(d.x_train[0, 2].ravel(), x0[2048:] / 255.0, rtol=1e-6)
    assert d.y_train.tolist() == [v for i in range(1, 6) for v in written[f"data_batch_{i}"][1]]
    assert data.load_cifar10(tmp_path / "cifar-10-batches-py").y_test.size == 12


def test_missing_or_bad_cifar10_is_a_clear_error(tmp_path, cifar_batches):
    with pytest.raises(MarketInputError, match=r"cifar-10-python\.tar\.gz") as e:
        data.load_cifar10(tmp_path)
    assert e.value.field == "data_dir"
    cifar_batches(tmp_path)
    with open(tmp_path / "test_batch", "wb") as f:  # a pickle that calls something else
        pickle.dump({b"data": print, b"labels": []}, f)
    with pytest.raises(MarketInputError, match="not a CIFAR-10 python batch"):
        data.load_cifar10(tmp_path)
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(MarketInputError, match="3072"):
        data.load_cifar10(tmp_path)


def test_simplecnn_cifar_trains_on_the_fixture(tmp_path, cifar_batches):
    cifar_batches(tmp_path, n_train=20)
    m = models.build("simplecnn-cifar", (3, 32, 32), 10)
    assert models.n_params(m) == 62006
    with pytest.raises(MarketInputError, match="3x32x32"):
        models.build("simplecnn-cifar", (1, 28, 28), 10)
    res = run(TrainConfig(algorithm="ipfl", dataset="cifar10", data_dir=str(tmp_path),
                          partition="iid", clients=2, rounds=2, steps=2, batch=8,
                          normalise=True))
    assert np.isfinite(res.frame[["acc_personalised", "utility"]].to_numpy()).all()
    assert res.frame["round"].nunique() == 2


def test_train_preset_published_and_explicit_options_win(tmp_path):
    import json

    from sims.cli import main

    def config(folder):
        side = json.loads(next(folder.glob("local*.json")).read_text())
        return side.get("config") or side.get("provenance", {}).get("config")

    argv = ["train", "--algorithm", "local", "--dataset", "digits", "--clients", "4",
            "--rounds", "1", "--steps", "2", "--batch", "8", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "p"), "--preset", "published",
                 "--skew-classes", "3", "--no-holdout"]) == 0
    cfg = config(tmp_path / "p")
    assert cfg["rule"] == "box2" and cfg["normalise"] is True  # the preset's
    assert cfg["skew_classes"] == 3  # given explicitly: not the preset's 5
    assert main([*argv, "--out", str(tmp_path / "c")]) == 0
    plain = config(tmp_path / "c")
    assert plain["rule"] == "local" and plain["normalise"] is False  # corrected by default
