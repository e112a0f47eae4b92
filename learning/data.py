"""Real data, offline: Fashion-MNIST from IDX files, CIFAR-10 from its standard python batches,
scikit-learn's bundled digits, and the FedProx-style Synthetic(alpha, beta) generator for
logistic regression. Nothing is downloaded at run time.

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

__all__ = ["CIFAR10_DIRS", "FASHION_MNIST_DIRS", "Dataset", "cifar10_folder",
           "fashion_mnist_folder", "load",
           "load_cifar10",
           "load_digits", "load_fashion_mnist", "read_cifar_batch", "read_idx", "synthetic"]

CIFAR10_DIRS = ("/usr/share/datasets/cifar-10",)
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))

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
    """Fashion-MNIST (60k train, 10k test, 28x28) from IDX files, in the folder
    :func:`fashion_mnist_folder` finds."""
    d = fashion_mnist_folder(data_dir)
    arrays = {k: read_idx(_find(d, v)) for k, v in _FILES.items()}

    def img(a):
        return (a.astype(np.float32) / 255.0)[:, None, :, :]
    return Dataset("fashion-mnist", img(arrays["train_x"]), arrays["train_y"].astype(np.int64),
                   img(arrays["test_x"]), arrays["test_y"].astype(np.int64), 10)


def fashion_mnist_folder(data_dir=None) -> Path:
    """The folder holding Fashion-MNIST's four IDX files (optionally gzipped): ``data_dir``,
    else $FEDMARKET_FASHION_MNIST, else the Debian package's folder
    /usr/share/datasets/fashion-mnist (``apt-get install dataset-fashion-mnist``); none of them
    is a MarketInputError naming ``data_dir`` (checked without reading the files). Its message
    names no command-line option (each command names its own): only the environment variable,
    and only when ``data_dir`` was not given (which the variable cannot override)."""
    candidates = [Path(data_dir)] if data_dir else []
    if not data_dir and os.environ.get("FEDMARKET_FASHION_MNIST"):
        candidates.append(Path(os.environ["FEDMARKET_FASHION_MNIST"]))
    if not data_dir:
        candidates += [Path(d) for d in FASHION_MNIST_DIRS]
    for d in candidates:
        if all(_find(d, v) for v in _FILES.values()):
            return d
    looked = ", ".join(str(d) for d in candidates)
    where = (f" into {data_dir}" if data_dir else
             ", and set FEDMARKET_FASHION_MNIST to their folder if it is not the package's")
    raise MarketInputError(
        "data_dir",
        f"Fashion-MNIST IDX files not found (looked in: {looked}). Install them with "
        "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or download the four "
        f"*-ubyte(.gz) files{where}.",
    )


_CIFAR_ALLOWED = frozenset({("numpy.core.multiarray", "_reconstruct"),
                            ("numpy._core.multiarray", "_reconstruct"),
                            ("numpy", "ndarray"), ("numpy", "dtype"),
                            ("_codecs", "encode")})  # bytes in protocol-2 pickles


def _unpickle_batch(f):
    """Unpickle a CIFAR-10 batch (CIFAR's own python format is a pickle) allowing only what
    the format holds: a file that names any callable but numpy's array reconstruction is
    refused before it is called, and what comes out must be a dict of bytes, str, numbers,
    lists of them and numpy arrays of numbers (not of objects)."""
    import pickle

    class Restricted(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in _CIFAR_ALLOWED:
                return super().find_class(module, name)
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")

    d = Restricted(f, encoding="bytes").load()
    if not isinstance(d, dict):
        raise pickle.UnpicklingError(f"holds a {type(d).__name__}, not a dict")
    for key, value in d.items():
        if not isinstance(key, bytes | str) or not _plain(value):
            raise pickle.UnpicklingError(f"{key!r} holds something other than bytes, text, "
                                         "numbers, lists of them or numeric arrays")
    return d


def _plain(value) -> bool:
    """bytes, str, a number, a list of them, or a numpy array of numbers."""
    if isinstance(value, list):
        return all(_plain(v) and not isinstance(v, list | np.ndarray) for v in value)
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    return isinstance(value, bytes | str | int | float) or (
        isinstance(value, np.generic) and value.dtype.kind in "biuf")


def read_cifar_batch(path) -> tuple[np.ndarray, np.ndarray]:
    """(images (n, 3, 32, 32) uint8, labels (n,) int64) of one CIFAR-10 python batch: a pickled
    dict with b"data" (n, 3072) uint8 in channel-major order and b"labels"."""
    import pickle

    path = Path(path)
    try:
        with open(path, "rb") as f:
            d = _unpickle_batch(f)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as exc:
        raise MarketInputError("data_dir", f"{path}: not a CIFAR-10 python batch ({exc})") \
            from None
    if not isinstance(d, dict) or b"data" not in d or b"labels" not in d:
        raise MarketInputError("data_dir", f"{path}: a CIFAR-10 batch is a dict with b'data' "
                                           "and b'labels'")
    x = np.asarray(d[b"data"], dtype=np.uint8)
    y = np.asarray(d[b"labels"], dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != 3072 or x.shape[0] != y.size:
        raise MarketInputError("data_dir", f"{path}: data of shape {x.shape} for {y.size} "
                                           "labels; a CIFAR-10 batch holds (n, 3072)")
    if y.size and (y.min() < 0 or y.max() > 9):
        raise MarketInputError("data_dir", f"{path}: labels outside 0..9")
    return x.reshape(-1, 3, 32, 32), y


def load_cifar10(data_dir=None) -> Dataset:
    """CIFAR-10 (50k train, 10k test, 3x32x32) from the standard python batches
    (``data_batch_1`` ... ``data_batch_5`` and ``test_batch``, as in cifar-10-python.tar.gz),
    in the folder :func:`cifar10_folder` finds. Images scaled to [0, 1]."""
    d = cifar10_folder(data_dir)
    parts = [read_cifar_batch(d / f) for f in CIFAR10_TRAIN]
    x_test, y_test = read_cifar_batch(d / "test_batch")
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    return Dataset("cifar10", (x.astype(np.float32) / 255.0), y,
                   (x_test.astype(np.float32) / 255.0), y_test, 10)


def cifar10_folder(data_dir=None) -> Path:
    """The folder holding CIFAR-10's python batches: ``data_dir`` or its
    ``cifar-10-batches-py`` folder, else $FEDMARKET_CIFAR10 (or its subfolder), else
    /usr/share/datasets/cifar-10; none of them is a MarketInputError naming ``data_dir``
    (checked without reading the batches). Its message names no command-line option, as
    :func:`fashion_mnist_folder`'s."""
    roots = [Path(data_dir)] if data_dir else []
    if not data_dir and os.environ.get("FEDMARKET_CIFAR10"):
        roots.append(Path(os.environ["FEDMARKET_CIFAR10"]))
    if not data_dir:
        roots += [Path(d) for d in CIFAR10_DIRS]
    candidates = [d for r in roots for d in (r, r / "cifar-10-batches-py")]
    for d in candidates:
        if all((d / f).is_file() for f in (*CIFAR10_TRAIN, "test_batch")):
            return d
    looked = ", ".join(str(d) for d in candidates)
    raise MarketInputError(
        "data_dir",
        f"CIFAR-10 python batches not found (looked in: {looked}). Download "
        "cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html and unpack it"
        + (f" into {data_dir}" if data_dir else
           ", then set FEDMARKET_CIFAR10 to its cifar-10-batches-py folder (or that folder's "
           "parent)") + ".")


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


@functools.lru_cache(maxsize=2)
def _cifar10_cached(data_dir) -> Dataset:
    return load_cifar10(data_dir)


def load(name: str, data_dir=None, seed: int = 0, clients: int = 40) -> Dataset:
    """By name: "fashion-mnist", "cifar10", "digits", or "synthetic" (Synthetic(1, 1)).
    Fashion-MNIST and CIFAR-10 are read once per process and folder (a sweep's worker runs
    many cells on them); callers must not modify the arrays they return."""
    if name == "fashion-mnist":
        return _fashion_mnist_cached(data_dir)
    if name == "cifar10":
        return _cifar10_cached(data_dir)
    if name == "digits":
        return load_digits(seed=seed)
    if name == "synthetic":
        return synthetic(1.0, 1.0, clients, rng=seed)
    raise MarketInputError("dataset", f"unknown {name!r}; choose fashion-mnist, cifar10, "
                                      "digits, synthetic")
