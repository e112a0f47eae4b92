"""What a Flower node owns: its data and its private type.

A SuperNode's node config (``flower-supernode --node-config "..."``) names

* ``partition-id`` - the client's own id in the federation, in [0, clients);
* its data: ``data-path`` (an ``.npz`` with ``x_train``, ``y_train`` and optionally a
  reference test set ``x_test``, ``y_test``), or, for demos, nothing: the node then takes
  partition ``partition-id`` of the run's named data set (``dataset`` and ``partition`` of the
  run config; ``partitioner = "flwr-datasets"`` draws it with Flower Datasets instead of
  fedmarket's own partitions, see :mod:`learning.flower.datasets`);
* optionally ``worker``: the socket of a warm node worker (:mod:`learning.flower.worker`),
  ``torch-threads`` (default 1), ``cache-dir`` (keeps a demo partition on disk), ``seed``
  (the node's own batch stream; default the run's);
* its type: N is counted from its data; ``c``, ``K`` and ``v`` (CPL's valuation) are its own
  and reported to the server. ``N`` in the node config overrides the *reported* N (a liar),
  ``true-c`` and ``true-K`` are the true cost and gain scale behind a reported ``c`` and ``K``.
  A demo node that names no c, K, v reports the draw the in-process learner gives its client
  id (a liar's report when the run config names one: ``liar``, ``liar-N``, ``liar-c``).

Nothing here is sent to the server except :meth:`NodeState.report`. A liar (a node whose
report differs from its truth) also tells the server its true values, for the experiment's
accounting only: the market is cleared and priced on the reports alone, and the utilities in
the ledger are the realised ones (true N in the gain, true K its scale, true c the cost), as
in :class:`mechanisms.ipfl.Market`. Everything a node loads is
cached per process (a warm ClientApp trains without rebuilding anything), and a demo partition
can also be cached on disk (``cache-dir``) for deployments, where every message starts a fresh
ClientApp process.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from mechanisms.errors import MarketInputError
from mechanisms.files import read_arrays

__all__ = ["NodeConfigError", "NodeSpec", "NodeState", "node_state"]


class NodeConfigError(MarketInputError):
    """A SuperNode's node config is wrong (names the key, the value and what is allowed)."""


@dataclass(frozen=True)
class NodeSpec:
    """A node's config, validated. Keys are the node config's, hyphens as underscores."""

    partition_id: int
    num_partitions: int
    data_path: str | None = None
    N: float | None = None
    c: float | None = None
    K: float | None = None
    v: float | None = None
    true_c: float | None = None
    true_K: float | None = None
    seed: int | None = None
    torch_threads: int = 1
    cache_dir: str | None = None
    partitioner: str = "fedmarket"
    worker: str | None = None  # a warm node worker's socket (learning.flower.worker)

    def __post_init__(self):
        if not 0 <= self.partition_id < self.num_partitions:
            raise NodeConfigError("partition-id", f"is {self.partition_id}; must lie in "
                                                  f"[0, {self.num_partitions}) (num-partitions)")
        if self.N is not None and not (np.isfinite(self.N) and self.N > 0):
            raise NodeConfigError("N", f"is {self.N!r}; a reported N must be finite and > 0")
        for name in ("c", "true_c"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise NodeConfigError(name.replace("_", "-"), f"is {value!r}; must be >= 0")
        for name in ("K", "v", "true_K"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value >= 0):
                raise NodeConfigError(name.replace("_", "-"), f"is {value!r}; must be finite "
                                                              "and >= 0")
        if self.torch_threads < 1:
            raise NodeConfigError("torch-threads", f"is {self.torch_threads}; must be >= 1")
        if self.partitioner not in ("fedmarket", "flwr-datasets"):
            raise NodeConfigError("partitioner", f"is {self.partitioner!r}; choose "
                                                 "'fedmarket' or 'flwr-datasets'")

    @classmethod
    def from_config(cls, node_config, clients: int) -> NodeSpec:
        """From a Flower node config; ``clients`` (the run's) is the default num-partitions
        and must equal it when given."""
        known = {f.name: f for f in fields(cls)}
        values = {}
        for key, value in dict(node_config).items():
            name = str(key).replace("-", "_")
            if name not in known:
                allowed = ", ".join(sorted(k.replace("_", "-") for k in known))
                raise NodeConfigError(str(key), f"is not a node config key; known: {allowed}")
            values[name] = value
        if "partition_id" not in values:
            raise NodeConfigError("partition-id", "is missing from the node config; start the "
                                                  "SuperNode with --node-config "
                                                  "\"partition-id=0 ...\"")
        try:
            values["partition_id"] = int(values["partition_id"])
            values["num_partitions"] = int(values.get("num_partitions", clients))
            for name in ("N", "c", "K", "v", "true_c", "true_K"):
                if name in values:
                    values[name] = float(values[name])
            for name in ("seed", "torch_threads"):
                if name in values:
                    values[name] = int(values[name])
        except (TypeError, ValueError) as exc:
            raise NodeConfigError("node-config", f"{exc}") from None
        if values["num_partitions"] != clients:
            raise NodeConfigError("num-partitions", f"is {values['num_partitions']}; the run "
                                                    f"has clients={clients}")
        return cls(**values)


@dataclass(frozen=True, eq=False)
class NodeState:
    """A node's data (train part, validation part, own held-out test part, optional reference
    test set) and its type."""

    spec: NodeSpec
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_own_test: np.ndarray
    y_own_test: np.ndarray
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    classes: int
    c: float
    K: float
    v: float
    true_c: float
    true_K: float
    N_reported: float | None = None  # a demo liar's reported N (the node config's N wins)

    @property
    def N_true(self) -> int:
        """N, counted from the node's own training data."""
        return len(self.y_train)

    @property
    def N_report(self) -> float:
        if self.spec.N is not None:
            return float(self.spec.N)
        return float(self.N_reported if self.N_reported is not None else self.N_true)

    def truth(self) -> dict:
        """The true values behind a liar's report (``true_N``, ``true_c``, ``true_K``; only
        those that differ from the report): the experiment's accounting, never the market's
        input."""
        pairs = (("N", self.N_report, float(self.N_true)), ("c", self.c, self.true_c),
                 ("K", self.K, self.true_K))
        return {f"true_{k}": true for k, said, true in pairs if said != true}

    def report(self) -> dict:
        """The only thing the server learns: the client's id, its reported type and, from a
        liar, its truth (:meth:`truth`)."""
        return {"pid": self.spec.partition_id, "N": self.N_report, "c": self.c, "K": self.K,
                "v": self.v, "shape": [int(k) for k in self.x_train.shape[1:]],
                "classes": self.classes, **self.truth()}

    @property
    def label_dist(self) -> np.ndarray:
        return np.bincount(self.y_train, minlength=self.classes) / max(len(self.y_train), 1)


_CACHE: dict = {}
_CACHE_FORMAT = 2  # bumped when a cached demo partition's keys change (2: validation, liars)


def node_state(spec: NodeSpec, cfg) -> NodeState:
    """The node's data and type for run config ``cfg`` (a TrainConfig), loaded once per
    process."""
    key = (spec, cfg)
    if key not in _CACHE:
        _CACHE.clear()  # one federation per process at a time
        _CACHE[key] = _load(spec, cfg)
    return _CACHE[key]


def _load(spec: NodeSpec, cfg) -> NodeState:
    if spec.data_path is not None:
        parts = _own_data(spec, cfg)
    else:
        parts = _demo_cached(spec, cfg)
    c = spec.c if spec.c is not None else parts.pop("c", None)
    K = spec.K if spec.K is not None else parts.pop("K", None)
    v = spec.v if spec.v is not None else parts.pop("v", 0.0)
    true_c = spec.true_c if spec.true_c is not None else parts.pop("true_c", c)
    true_K = spec.true_K if spec.true_K is not None else parts.pop("true_K", K)
    N_reported = parts.pop("N", None)
    for name, value in (("c", c), ("K", K)):
        if value is None:
            raise NodeConfigError(name, f"is missing: a node with its own data (data-path) "
                                        f"reports its own {name}; add {name}=... to its "
                                        f"node config")
    for k in ("c", "K", "v", "true_c", "true_K"):
        parts.pop(k, None)
    return NodeState(spec=spec, c=float(c), K=float(K), v=float(v), true_c=float(true_c),
                     true_K=float(true_K),
                     N_reported=None if N_reported is None else float(N_reported),
                     **parts)


def _own_data(spec: NodeSpec, cfg) -> dict:
    path = Path(spec.data_path)
    if not path.is_file():
        raise NodeConfigError("data-path", f"{str(path)!r} is not a file")
    z = read_arrays(path, lambda message: NodeConfigError("data-path", message))
    if not isinstance(z, dict):
        raise NodeConfigError("data-path", f"{path} holds one array; give a .npz of x_train, "
                                           "y_train (and optionally x_test, y_test)")
    missing = {"x_train", "y_train"} - set(z)
    if missing:
        raise NodeConfigError("data-path", f"{path} lacks {sorted(missing)}; it needs "
                                           "x_train, y_train (and optionally x_test, "
                                           "y_test)")
    x, y = z["x_train"].astype(np.float32), z["y_train"].astype(np.int64)
    x_test = z["x_test"].astype(np.float32) if "x_test" in z else None
    y_test = z["y_test"].astype(np.int64) if "y_test" in z else None
    if len(y) < 3 or len(x) != len(y):
        raise NodeConfigError("data-path", f"{path}: x_train and y_train need the same length "
                                           f">= 3, got {len(x)} and {len(y)}")
    from .adapter import holdout

    seed = spec.seed if spec.seed is not None else cfg.seed
    train, val, own = holdout(np.arange(len(y)), np.random.default_rng([seed,
                                                                         spec.partition_id]))
    classes = int(max(y.max(), -1 if y_test is None else y_test.max())) + 1
    return {"x_train": x[train], "y_train": y[train], "x_val": x[val], "y_val": y[val],
            "x_own_test": x[own],
            "y_own_test": y[own], "x_test": x_test, "y_test": y_test, "classes": classes}


def _demo_cached(spec: NodeSpec, cfg) -> dict:
    if spec.cache_dir is None:
        return _demo(spec, cfg)
    name = hashlib.sha256(json.dumps([_CACHE_FORMAT, asdict(spec), asdict(cfg)], sort_keys=True,
                                     default=str).encode()).hexdigest()[:20]
    path = Path(spec.cache_dir, f"node-{spec.partition_id}-{name}.npz")
    if path.is_file():
        out = read_arrays(path, lambda message: NodeConfigError("cache-dir", message))
        out["classes"] = int(out["classes"])
        for k in ("c", "K", "v", "true_c", "true_K", "N"):
            out[k] = float(out[k])
        return out
    out = _demo(spec, cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **out)
    tmp.replace(path)
    return out


def _demo(spec: NodeSpec, cfg) -> dict:
    from .adapter import demo_partition

    return demo_partition(cfg, spec.partition_id, spec.partitioner)
