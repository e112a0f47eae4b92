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
"""

from __future__ import annotations

import numpy as np
from flwr.app import ConfigRecord, MetricRecord, RecordDict

__all__ = ["CONFIG", "MODEL", "REPLY", "content", "metrics", "model_bytes", "model_from",
           "unpack"]

CONFIG, REPLY, MODEL = "config", "reply", "model"


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


def content(key: str, values: dict, model=None) -> RecordDict:
    """A message's content: one ConfigRecord under ``key`` holding ``values`` and, unless
    ``model`` is None, the model's bytes under :data:`MODEL`."""
    if MODEL in values:
        raise ValueError(f"{MODEL!r} is the model's key; a value may not use it")
    record = dict(values)
    if model is not None:
        record[MODEL] = model_bytes(model)
    return RecordDict({key: ConfigRecord(record)})


def unpack(message_content: RecordDict, key: str) -> tuple[dict, bytes | None]:
    """(the values, the model's bytes or None) of the record under ``key`` (({}, None)
    when there is none)."""
    record = message_content.get(key) if key in message_content else None
    values = dict(record) if record is not None else {}
    return values, values.pop(MODEL, None)


def metrics(values: dict) -> dict:
    """``values`` as metrics: numbers and lists of numbers only (flwr's MetricRecord checks
    them); TypeError naming the types otherwise."""
    return dict(MetricRecord(values))
