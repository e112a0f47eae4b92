"""Real data, offline: Fashion-MNIST from IDX files, scikit-learn's bundled digits, and the
FedProx-style Synthetic(alpha, beta) generator for logistic regression.

Every loader returns a :class:`Dataset` of float32 features scaled to [0, 1] (images keep their
(1, H, W) shape) and int64 labels, split into train and test.
"""

from __future__ import annotations

import functools
import gzip
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mechanisms.errors import MarketInputError

__all__ = ["FASHION_MNIST_DIRS", "Dataset", "load", "load_digits", "load_fashion_mnist",
           "read_idx", "synthetic"]

FASHION_MNIST_DIRS = ("/usr/share/datasets/fashion-mnist",)
_FILES = {
    "train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True, eq=False)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int
    groups: np.ndarray | None = None  # for generated data: the client each train sample is from

    @property
    def input_shape(self) -> tuple:
        return tuple(self.x_train.shape[1:])


def read_idx(path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed) into a numpy array."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise MarketInputError("data_dir", f"{path} is not an IDX file (bad magic number)")
    dtype = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
             0x0E: ">f8"}.get(data[2])
    if dtype is None:
        raise MarketInputError("data_dir", f"{path}: unknown IDX type code {data[2]:#x}")
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(shape)):
        raise MarketInputError("data_dir", f"{path}: {arr.size} values for shape {shape}")
    return arr.reshape(shape)


def _find(directory: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (directory / name).exists():
            return directory / name
    return None


def load_fashion_mnist(data_dir=None) -> Dataset:
    """Fashion-MNIST (60k train, 10k test, 28x28) from IDX files.

    Looked up in ``data_dir``, else $FEDMARKET_FASHION_MNIST, else the Debian package's folder
    /usr/share/datasets/fashion-mnist (``apt-get install dataset-fashion-mnist``).
    """
    candidates = [Path(data_dir)] if data_dir else []
    if not data_dir and os.environ.get("FEDMARKET_FASHION_MNIST"):
        candidates.append(Path(os.environ["FEDMARKET_FASHION_MNIST"]))
    if not data_dir:
        candidates += [Path(d) for d in FASHION_MNIST_DIRS]
    for d in candidates:
        files = {k: _find(d, v) for k, v in _FILES.items()}
        if all(files.values()):
            arrays = {k: read_idx(p) for k, p in files.items()}
            def img(a):
                return (a.astype(np.float32) / 255.0)[:, None, :, :]
            return Dataset("fashion-mnist", img(arrays["train_x"]),
                           arrays["train_y"].astype(np.int64), img(arrays["test_x"]),
                           arrays["test_y"].astype(np.int64), 10)
    looked = ", ".join(str(d) for d in candidates)
    raise MarketInputError(
        "data_dir",
        f"Fashion-MNIST IDX files not found (looked in: {looked}). Install them with "
        "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or download the four "
        "*-ubyte(.gz) files and pass their folder as data_dir / --data-dir or set "
        "FEDMARKET_FASHION_MNIST.",
    )


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's bundled 8x8 digits (1,797 images), split train/test by a fixed seed."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = round(test_fraction * len(y))
    te, tr = order[:n_test], order[n_test:]
    return Dataset("digits", x[tr], y[tr], x[te], y[te], 10)


def synthetic(alpha: float = 1.0, beta: float = 1.0, clients: int = 40, *, dim: int = 60,
              classes: int = 10, rng=0, test_fraction: float = 0.2) -> Dataset:
    """FedProx's Synthetic(alpha, beta): client k has its own softmax model W_k ~ N(u_k, 1),
    u_k ~ N(0, alpha), and features x ~ N(v_k, Sigma) with v_k ~ N(B_k, 1), B_k ~ N(0, beta),
    Sigma = diag(j^-1.2); labels argmax(W_k x + b_k). Samples per client lognormal(4, 2) + 50.

    ``groups`` records each train sample's client, so :func:`learning.partition.by_group`
    recovers the natural partition.
    """
    if alpha < 0 or beta < 0:
        raise MarketInputError("alpha", "alpha and beta must be >= 0")
    g = np.random.default_rng(rng)
    sizes = (g.lognormal(4, 2, clients).astype(int) + 50).clip(max=20_000)
    sigma = np.arange(1, dim + 1) ** -1.2
    xs, ys, gs = [], [], []
    for k in range(clients):
        u = g.normal(0, np.sqrt(alpha))
        W = g.normal(u, 1, (classes, dim))
        b = g.normal(u, 1, classes)
        B = g.normal(0, np.sqrt(beta))
        v = g.normal(B, 1, dim)
        x = g.normal(v, np.sqrt(sigma), (sizes[k], dim))
        xs.append(x.astype(np.float32))
        ys.append(np.argmax(x @ W.T + b, axis=1))
        gs.append(np.full(sizes[k], k))
    x, y, grp = np.concatenate(xs), np.concatenate(ys).astype(np.int64), np.concatenate(gs)
    test = np.zeros(len(y), dtype=bool)
    for k in range(clients):  # a per-client test share, so every client is tested
        idx = np.flatnonzero(grp == k)
        test[g.choice(idx, max(1, int(test_fraction * len(idx))), replace=False)] = True
    return Dataset(f"synthetic({alpha},{beta})", x[~test], y[~test], x[test], y[test], classes,
                   groups=grp[~test])


@functools.lru_cache(maxsize=2)
def _fashion_mnist_cached(data_dir) -> Dataset:
    return load_fashion_mnist(data_dir)


def load(name: str, data_dir=None, seed: int = 0, clients: int = 40) -> Dataset:
    """By name: "fashion-mnist", "digits", or "synthetic" (Synthetic(1, 1)). Fashion-MNIST is
    read once per process and folder (a sweep's worker runs many cells on it); callers must
    not modify the arrays it returns."""
    if name == "fashion-mnist":
        return _fashion_mnist_cached(data_dir)
    if name == "digits":
        return load_digits(seed=seed)
    if name == "synthetic":
        return synthetic(1.0, 1.0, clients, rng=seed)
    raise MarketInputError("dataset", f"unknown {name!r}; choose fashion-mnist, digits, "
                                      "synthetic")
