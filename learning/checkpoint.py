"""Per-round checkpoints of a training run, so that a run killed at any moment (kill -9
included) resumes after its last finished round with the same numbers as a run never stopped.

An algorithm's ``rounds(session)`` generator holds its state in local variables, which no
file can capture; every built-in algorithm therefore keeps what it carries from one round to
the next in :meth:`learning.session.Session.carry`'s dict and yields as the last step of its
loop. After each round :func:`learning.runner.run` writes, whole or not at all
(:func:`mechanisms.files.replace_atomically`), one file holding the rows of the rounds so
far and :meth:`Session.snapshot <learning.session.Session.snapshot>`: the algorithm's carry
(models, aggregation and optimiser state, its own generators), the training-call count that
picks every client's batch stream, the state of the session's generators and torch's, the
best models by validation accuracy, timings and extras. Resuming builds the session from the
config again (data, partition, initial model: the same from the same seed), restores the
snapshot and lets the generator enter its loop at the top.

An algorithm of the user's own that never calls ``session.carry`` cannot be checkpointed:
its run writes no checkpoint (:attr:`learning.config.TrainResult.checkpointed` is False)
and a killed run of it starts again from round 0.

A checkpoint is used only by the run it was written for: the same config (every field) and
the same ``tag`` (a sweep's tag is the cell's config hash and code version). Another run's
is ignored and overwritten at the first round.

The file (format 2) is a safetensors file, so that loading one runs no code (torch.load of
a pickle can): every tensor and numpy array of the state is one named tensor, and the rest
-- the structure, numbers, strings, the generators' states, the rows' string columns -- is
JSON in the file's metadata (``"fedmarket-checkpoint"``). A carry may hold None, booleans,
integers, floats, strings, lists, tuples, dicts, torch tensors, numpy arrays and scalars,
numpy generators and pandas frames of plain columns; anything else is refused when the
checkpoint is written (:class:`CheckpointError` naming where it sits). A file that is not
such a checkpoint -- damaged, crafted, or a torch pickle of fedmarket before issue 33 -- is
refused when read with a :class:`CheckpointError` naming it: delete it and the run starts
again from round 0.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mechanisms.errors import FedmarketError
from mechanisms.files import replace_atomically

__all__ = ["FORMAT", "Checkpoint", "CheckpointError", "Saved"]

FORMAT = 2
_MAGIC = "fedmarket-checkpoint"  # the metadata key holding the JSON tree
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
_FRAME_TEXT = ("object", "str", "string")  # dtypes of the text columns a frame may hold


class CheckpointError(FedmarketError):
    """A checkpoint that cannot be written (state that is not data) or read (not a
    checkpoint of this format); ``field`` is "checkpoint"."""


@dataclass(frozen=True)
class Saved:
    """A checkpoint as read: ``rounds`` finished, their ``rows`` (one frame a round), the
    ``seconds`` they took and the session's :meth:`~learning.session.Session.snapshot`."""

    rounds: int
    rows: list
    seconds: float
    session: dict


class _Pack:
    """The state as (JSON tree, named tensors). Every container and non-JSON value is a
    ``{"$": kind, ...}`` object; lists are JSON arrays."""

    def __init__(self):
        import torch

        self.torch = torch
        self.tensors: dict = {}
        self.seen: dict[int, str] = {}  # a tensor met twice is stored once (aliasing kept)
        self.alive: list = []
        self.storages: set[int] = set()  # the memory of the tensors stored so far

    def tensor(self, obj, t, kind: str) -> dict:
        """``obj`` (a tensor or array of the state) stored as the tensor ``t``, once. The
        file is written before the state changes, so ``t`` is copied only where safetensors
        needs it: off the CPU, not contiguous, or sharing memory with a tensor already
        stored (a view of another)."""
        name = self.seen.get(id(obj))
        if name is None:
            name = self.seen[id(obj)] = f"t{len(self.tensors)}"
            t = t.detach().cpu().contiguous()
            where = t.untyped_storage().data_ptr()
            if where in self.storages:
                t = t.clone()
            self.storages.add(t.untyped_storage().data_ptr())
            self.tensors[name] = t
            self.alive.append(obj)  # its id is not reused while the state is packed
        return {"$": kind, "name": name}

    def __call__(self, obj, where: str):
        torch = self.torch
        if obj is None or isinstance(obj, bool | str):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj) if np.isfinite(obj) else {"$": "float", "value": repr(obj)}
        if isinstance(obj, list):
            return [self(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, tuple):
            return {"$": "tuple", "items": [self(v, f"{where}[{i}]") for i, v in
                                            enumerate(obj)]}
        if isinstance(obj, dict):
            return {"$": "dict", "keys": [self(k, f"{where} key") for k in obj],
                    "values": [self(v, f"{where}[{k!r}]") for k, v in obj.items()]}
        if type(obj) in (torch.Tensor, torch.nn.Parameter):
            out = self.tensor(obj, obj, "tensor")
            if isinstance(obj, torch.nn.Parameter):
                out["parameter"] = True
            if obj.requires_grad:
                out["requires_grad"] = True
            return out
        if type(obj) is np.ndarray and obj.dtype.kind in "biufc":
            try:
                arr = torch.from_numpy(np.array(obj, order="C", copy=True))
            except TypeError as exc:
                raise self.refused(obj, where, f" ({exc})") from None
            return self.tensor(obj, arr, "ndarray")
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return {"$": "scalar", "dtype": obj.dtype.str, "value": self(obj.item(), where)}
        if type(obj) is np.random.Generator:
            bg = obj.bit_generator
            ss = getattr(bg, "seed_seq", None)
            seq = None
            if type(ss) is np.random.SeedSequence:
                seq = self({"entropy": ss.entropy, "spawn_key": ss.spawn_key,
                            "pool_size": ss.pool_size,
                            "n_children_spawned": ss.n_children_spawned}, where)
            if type(bg).__name__ not in _BIT_GENERATORS:
                raise self.refused(obj, where, f" (bit generator {type(bg).__name__})")
            return {"$": "generator", "bit_generator": type(bg).__name__,
                    "state": self(bg.state, f"{where}.state"), "seed_seq": seq}
        if type(obj).__name__ == "DataFrame" and type(obj).__module__.startswith("pandas"):
            return self.frame(obj, where)
        raise self.refused(obj, where)

    def frame(self, df, where: str) -> dict:
        import pandas as pd

        if not df.index.equals(pd.RangeIndex(len(df))) or not df.columns.is_unique:
            raise CheckpointError("checkpoint", f"{where}: a frame in a checkpoint needs the "
                                                "default index and unique column names")
        data, dtypes = [], []
        for name in df.columns:
            col = df[name]
            if col.dtype.kind in "biuf" and isinstance(col.dtype, np.dtype):
                data.append(self(col.to_numpy(), f"{where}[{name!r}]"))
            elif str(col.dtype) in _FRAME_TEXT and all(
                    v is None or isinstance(v, str) or (isinstance(v, float) and np.isnan(v))
                    for v in col):
                data.append([None if not isinstance(v, str) else v for v in col])
            else:
                raise self.refused(col, f"{where}[{name!r}]", f" of dtype {col.dtype}")
            dtypes.append(str(col.dtype))
        return {"$": "frame", "columns": [self(c, where) for c in df.columns],
                "dtypes": dtypes, "data": data, "length": len(df)}

    @staticmethod
    def refused(obj, where: str, more: str = "") -> CheckpointError:
        return CheckpointError("checkpoint", f"{where} holds a {type(obj).__name__}{more}, "
                                             "which a checkpoint cannot store as data "
                                             "(tensors, numpy arrays and generators, numbers, "
                                             "strings, None, lists, tuples, dicts and frames "
                                             "of such columns only): keep data only in "
                                             "Session.carry, or run without checkpoints "
                                             "(--no-checkpoints)")


class _Unpack:
    """The state back from (JSON tree, tensors); anything not written by :class:`_Pack` is
    a ValueError (the caller names the file)."""

    def __init__(self, tensors):
        import torch

        self.torch = torch
        self.tensors = tensors
        self.made: dict = {}

    def tensor(self, name):
        if not isinstance(name, str) or name not in self.tensors:
            raise ValueError(f"names a tensor {name!r} the file does not hold")
        if name not in self.made:
            self.made[name] = self.tensors[name]
        return self.made[name]

    def __call__(self, obj):
        if obj is None or isinstance(obj, bool | str | int | float):
            return obj
        if isinstance(obj, list):
            return [self(v) for v in obj]
        if not isinstance(obj, dict):
            raise ValueError(f"holds a {type(obj).__name__}")
        kind = obj.get("$")
        if kind == "float":
            if obj.get("value") not in ("nan", "inf", "-inf"):
                raise ValueError(f"holds the float {obj.get('value')!r}")
            return float(obj["value"])
        if kind == "tuple":
            return tuple(self(v) for v in self.field(obj, "items"))
        if kind == "dict":
            keys, values = self.field(obj, "keys"), self.field(obj, "values")
            if len(keys) != len(values):
                raise ValueError("holds a dict of more keys than values")
            return {self(k): self(v) for k, v in zip(keys, values, strict=True)}
        if kind == "tensor":
            t = self.tensor(obj.get("name"))
            if obj.get("parameter"):
                return self.torch.nn.Parameter(t, requires_grad=bool(obj.get("requires_grad")))
            return t.requires_grad_(True) if obj.get("requires_grad") else t
        if kind == "ndarray":
            return self.tensor(obj.get("name")).numpy()
        if kind == "scalar":
            dtype = np.dtype(self.field(obj, "dtype", str))
            if dtype.kind not in "biuf":
                raise ValueError(f"holds a scalar of dtype {dtype}")
            return dtype.type(self(obj.get("value")))
        if kind == "generator":
            name = obj.get("bit_generator")
            if name not in _BIT_GENERATORS:
                raise ValueError(f"holds a generator {name!r}")
            seq = self(obj.get("seed_seq"))
            seq = None if seq is None else np.random.SeedSequence(**seq)
            bg = getattr(np.random, name)(seq)
            bg.state = self(obj.get("state"))
            return np.random.Generator(bg)
        if kind == "frame":
            return self.frame(obj)
        raise ValueError(f"holds an object of kind {kind!r}")

    def frame(self, obj):
        import pandas as pd

        columns, dtypes = self.field(obj, "columns"), self.field(obj, "dtypes")
        data, n = self.field(obj, "data"), obj.get("length")
        if not len(columns) == len(dtypes) == len(data) or not isinstance(n, int):
            raise ValueError("holds a frame whose columns do not match")
        out = {}
        for name, dtype, col in zip(columns, dtypes, data, strict=True):
            name = self(name)
            if dtype in _FRAME_TEXT:
                if not isinstance(col, list) or not all(v is None or isinstance(v, str)
                                                        for v in col):
                    raise ValueError(f"holds a text column {name!r} of other values")
                values = pd.array(col, dtype=dtype) if dtype != "object" else \
                    np.array(col, dtype=object)
            else:
                values = self(col)
                if not isinstance(values, np.ndarray) or values.dtype.str != \
                        np.dtype(dtype).str:
                    raise ValueError(f"holds a column {name!r} that is not {dtype}")
            if len(values) != n:
                raise ValueError(f"holds a column {name!r} of another length")
            out[name] = values
        return pd.DataFrame(out, index=pd.RangeIndex(n))

    @staticmethod
    def field(obj, key, kind=list):
        """``obj[key]``, which must be a ``kind``."""
        v = obj.get(key)
        if not isinstance(v, kind):
            raise ValueError(f"holds a {obj.get('$')} without its {key}")
        return v


@dataclass(frozen=True)
class Checkpoint:
    """Where a run keeps its checkpoint (one file, replaced after every ``every``-th round
    and after the last) and the ``tag`` it must carry to be resumed from."""

    path: Path
    tag: str = ""
    every: int = 1

    def __post_init__(self):
        from .config import TrainInputError

        object.__setattr__(self, "path", Path(self.path))
        if not isinstance(self.every, int) or isinstance(self.every, bool) or self.every < 1:
            raise TrainInputError("checkpoint_every", f"is {self.every!r}; must be an integer "
                                                      ">= 1")

    def _refused(self, why: str) -> CheckpointError:
        return CheckpointError("checkpoint", f"{self.path} {why}; delete it and the run "
                                             "starts again from round 0")

    def _header(self) -> dict:
        """The file's JSON tree, read without its tensors (CheckpointError if it is not a
        checkpoint of this format)."""
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(self.path, framework="numpy") as f:  # the header: no torch
                meta = f.metadata() or {}
                names = set(f.keys())
        except (SafetensorError, OSError, ValueError) as exc:
            try:
                with open(self.path, "rb") as fh:
                    head = fh.read(4)
            except OSError as exc2:
                raise self._refused(f"cannot be read ({exc2.strerror or exc2})") from None
            if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":  # zip (torch.save), pickle
                raise self._refused("is a torch pickle (a checkpoint of fedmarket before "
                                    "issue 33, or not fedmarket's), which is never loaded: "
                                    "a pickle can run code") from None
            raise self._refused(f"is not a safetensors file ({' '.join(str(exc).split())})") \
                from None
        try:
            tree = json.loads(meta[_MAGIC])
        except (KeyError, TypeError, ValueError):
            raise self._refused("is a safetensors file but not a fedmarket checkpoint") \
                from None
        if not isinstance(tree, dict) or tree.get("format") != FORMAT:
            got = tree.get("format") if isinstance(tree, dict) else None
            raise self._refused(f"is a checkpoint of format {got!r}; this version reads "
                                f"format {FORMAT}")
        for key, kind in (("rounds", int), ("seconds", float | int), ("tag", str)):
            if not isinstance(tree.get(key), kind) or isinstance(tree.get(key), bool):
                raise self._refused(f"holds no valid {key!r}")
        tree["_names"] = names
        return tree

    def saved_rounds(self) -> int:
        """The rounds the checkpoint file holds (0 without one), read from its header
        alone; a file that is not a checkpoint of this format is a CheckpointError."""
        if not self.path.is_file():
            return 0
        return self._header()["rounds"]

    def load(self, cfg) -> Saved | None:
        """The checkpoint of this run (config and tag equal), or None: none yet, or another
        run's (then the run starts from round 0 and overwrites it). A file that is not a
        checkpoint of this format is a CheckpointError naming it; nothing in it runs."""
        from safetensors import SafetensorError, safe_open

        if not self.path.is_file():
            return None
        tree = self._header()
        if tree["tag"] != self.tag:
            return None
        try:
            with safe_open(self.path, framework="pt") as f:
                tensors = {name: f.get_tensor(name) for name in tree["_names"]}
            unpack = _Unpack(tensors)  # all of it checked, whoever's run it was
            config = unpack(tree.get("config"))
            rows, session = unpack(tree.get("rows")), unpack(tree.get("session"))
        except (SafetensorError, OSError) as exc:
            raise self._refused(f"cannot be read ({' '.join(str(exc).split())})") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise self._refused(f"is not a valid checkpoint: it {exc}") from None
        if not isinstance(rows, list) or not isinstance(session, dict):
            raise self._refused("is not a valid checkpoint: no rows or session")
        if config != _config(cfg):
            return None
        return Saved(tree["rounds"], rows, float(tree["seconds"]), session)

    def save(self, cfg, rounds: int, rows: list, seconds: float, session: dict) -> None:
        """Replace the checkpoint with the state after ``rounds`` rounds (atomically). State
        that is not data is a CheckpointError naming where it sits."""
        from safetensors.torch import save

        pack = _Pack()
        tree = {"format": FORMAT, "tag": self.tag, "rounds": int(rounds),
                "seconds": float(seconds), "config": pack(_config(cfg), "config"),
                "rows": pack(rows, "rows"), "session": pack(session, "session")}
        blob = save(pack.tensors, metadata={_MAGIC: json.dumps(tree, allow_nan=False)})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(self.path, lambda tmp: tmp.write_bytes(blob))

    def due(self, done: int, total: int) -> bool:
        """Whether to write after ``done`` of ``total`` rounds."""
        return done % self.every == 0 or done == total

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _config(cfg) -> dict:
    return dataclasses.asdict(cfg)
