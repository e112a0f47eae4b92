"""What a fedmarket Flower message carries: ONE ConfigRecord, the model inside it as bytes.

flwr 1.42 moves a message as a tree of objects, each one HTTP request per hop (ServerApp ->
SuperLink -> SuperNode -> ClientApp and back). A message whose content is one ConfigRecord is
3 objects (the message, its record dict, the record); the same content with the model in an
ArrayRecord of one flat array is 6 (the array record, the array and its chunk on top of the
message, record dict and config record), 12 with one array per layer.

* server -> node: ``config`` (:data:`CONFIG`), the instructions (round, prox weight, bill,
  price, q, ask ...) and, where a model travels, the model under :data:`MODEL`;
* node -> server: ``reply`` (:data:`REPLY`), the metrics (numbers only) and, with a training
  upload, the model under :data:`MODEL`.

The model is the flat parameter vector (:func:`learning.models.flatten_params`'s order) as
little-endian float32 bytes: what the former ArrayRecord of one float32 array held, so the
numbers are the same. :func:`model_from` checks what arrives (whole float32 values, the
federation's parameter count, finite). Imports flwr's records and numpy only: a forwarding
ClientApp loads nothing else.

A model over :data:`PART` bytes (flwr's own chunk size for an array, 5 MiB: 1,310,720
parameters) travels in parts of at most :data:`PART` bytes: the first in the message's record
(with :data:`PARTS`, their number), part i (i >= 2) in a ConfigRecord of its own under
``model-i``, so that no object, and no HTTP request carrying one, is larger than flwr's own
(flwr 1.42 itself sets no limit on an object's size on its HTTP transport; a proxy in front of
a SuperLink may). A model of n > :data:`PART` bytes is 2 + ceil(n / PART) objects.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ConfigRecord, MetricRecord, RecordDict
from flwr.common.constant import FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE

__all__ = ["CONFIG", "MODEL", "PART", "PARTS", "REPLY", "content", "metrics", "model_bytes",
           "model_from", "unpack"]

CONFIG, REPLY, MODEL, PARTS = "config", "reply", "model", "model-parts"
PART = FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE  # bytes of a model's part (flwr's chunk of an array)


def _part_key(i: int) -> str:
    return f"{MODEL}-{i}"


def model_bytes(flat) -> bytes:
    """The flat parameter vector ``flat`` as little-endian float32 bytes.

    >>> model_from(model_bytes([0.5, -2.0, 3.0]))
    array([ 0.5, -2. ,  3. ])
    """
    a = np.asarray(flat)
    if a.ndim != 1:
        raise ValueError(f"model: a flat parameter vector is 1-d, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def model_from(data, size: int | None = None) -> np.ndarray:
    """The parameter vector in ``data`` (bytes of :func:`model_bytes`) as a new float64
    array; ValueError naming the model when it is not bytes, not whole float32 values, not
    ``size`` parameters (None: any) or not finite.

    >>> model_from(model_bytes([1.0, 2.0]), size=3)
    Traceback (most recent call last):
    ...
    ValueError: model: 2 parameters received; the federation's model has 3
    """
    if not isinstance(data, bytes):
        raise ValueError(f"model: received a {type(data).__name__}, not bytes")
    if len(data) % 4:
        raise ValueError(f"model: {len(data)} bytes are not whole float32 values")
    flat = np.frombuffer(data, dtype="<f4").astype(np.float64)
    if size is not None and flat.size != size:
        raise ValueError(f"model: {flat.size} parameters received; the federation's model "
                         f"has {size}")
    if not np.isfinite(flat).all():
        raise ValueError("model: received parameters contain NaN or inf")
    return flat


def content(key: str, values: dict, model=None, part: int = PART) -> RecordDict:
    """A message's content: one ConfigRecord under ``key`` holding ``values`` and, unless
    ``model`` is None, the model's bytes under :data:`MODEL`; a model over ``part`` bytes in
    parts (the module doc).

    >>> c = content(CONFIG, {"round": 1}, model=[1.0, 2.0, 3.0], part=8)
    >>> sorted(c), c[CONFIG][PARTS]
    (['config', 'model-2'], 2)
    >>> unpack(c, CONFIG)[0], model_from(unpack(c, CONFIG)[1])
    ({'round': 1}, array([1., 2., 3.]))
    """
    for name in (MODEL, PARTS):
        if name in values:
            raise ValueError(f"{name!r} is the model's key; a value may not use it")
    if part < 4 or part % 4:
        raise ValueError(f"part: is {part!r}; must be a positive multiple of 4 bytes")
    record, rest = dict(values), {}
    if model is not None:
        data = model_bytes(model)
        record[MODEL] = data[:part]
        if len(data) > part:
            chunks = [data[i:i + part] for i in range(part, len(data), part)]
            record[PARTS] = 1 + len(chunks)
            rest = {_part_key(i): ConfigRecord({MODEL: c}) for i, c in enumerate(chunks, 2)}
    return RecordDict({key: ConfigRecord(record), **rest})


def unpack(message_content: RecordDict, key: str) -> tuple[dict, bytes | None]:
    """(the values, the model's bytes or None) of the record under ``key`` (({}, None)
    when there is none), a model in parts joined; ValueError naming the model when a part
    announced is missing or not bytes."""
    record = message_content.get(key) if key in message_content else None
    values = dict(record) if record is not None else {}
    data, parts = values.pop(MODEL, None), values.pop(PARTS, None)
    if parts is None:
        return values, data
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2 or \
            not isinstance(data, bytes):
        raise ValueError(f"model: {parts!r} parts announced with a first part of "
                         f"{type(data).__name__}; a model in parts has 2 or more, the first "
                         f"in bytes")
    chunks = [data]
    for i in range(2, parts + 1):
        rec = message_content.get(_part_key(i)) if _part_key(i) in message_content else None
        chunk = rec.get(MODEL) if rec is not None else None
        if not isinstance(chunk, bytes):
            raise ValueError(f"model: part {i} of {parts} is missing")
        chunks.append(chunk)
    return values, b"".join(chunks)


def metrics(values: dict) -> dict:
    """``values`` as metrics: numbers and lists of numbers only (flwr's MetricRecord checks
    them); TypeError naming the types otherwise."""
    return dict(MetricRecord(values))
