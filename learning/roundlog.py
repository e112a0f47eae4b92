"""Per-round logs of a training run in a standard format, written as each round ends.

A :class:`RoundLog` keeps, in its folder:

* ``rounds.csv`` (always): the run's rows as :func:`learning.runner.run` makes them, one per
  round and client (``acc_personalised_best``, which needs every round, is added only to
  the final frame), appended after every round, every number written so that it reads
  back exactly;
* ``config.json``: the run's config;
* TensorBoard event files (``torch.utils.tensorboard``), where the optional ``tensorboard``
  package is installed (``pip install fedmarket[tensorboard]``): per round (the step), the
  mean over clients of every numeric column, tag ``<column>/mean`` (a column measured only
  every ``evaluate_every`` rounds is logged in the rounds it is measured), and the sum of
  the clients' utilities, tag ``utility/sum``.

A run resumed from a checkpoint (:mod:`learning.checkpoint`) rewrites ``rounds.csv`` to the
restored rounds exactly (whole or not at all) and opens its event files with
``purge_step`` at the first round it computes, so that neither holds a round twice.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.files import replace_atomically

__all__ = ["RoundLog", "round_scalars", "tensorboard_available"]

FLOAT = "%.17g"  # every number read back exactly as the run had it


def tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package (which torch.utils.tensorboard needs) is there."""
    return importlib.util.find_spec("tensorboard") is not None


def round_scalars(frame: pd.DataFrame) -> dict:
    """{tag: value} of one round's rows: each numeric column's mean over clients (NaN
    columns, measured in other rounds, left out) and the utilities' sum."""
    out = {}
    for col in frame.columns:
        if col in ("round", "client") or not (pd.api.types.is_numeric_dtype(frame[col])
                                                or pd.api.types.is_bool_dtype(frame[col])):
            continue
        value = float(frame[col].astype(float).mean())
        if np.isfinite(value):
            out[f"{col}/mean"] = value
    if "utility" in frame:
        out["utility/sum"] = float(frame["utility"].sum())
    return out


class RoundLog:
    """The per-round log of one run in ``folder`` (see the module docstring);
    ``tensorboard``: True, False, or None (default: where the package is installed)."""

    def __init__(self, folder, tensorboard: bool | None = None):
        self.folder = Path(folder)
        self.tensorboard = tensorboard_available() if tensorboard is None else bool(tensorboard)
        self.csv = self.folder / "rounds.csv"
        self.writer = None
        self._header = True

    def begin(self, cfg, rows: list) -> None:
        """Start (or, with the ``rows`` restored from a checkpoint, resume) the log."""
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(dataclasses.asdict(cfg), indent=1, sort_keys=True, default=str)
        replace_atomically(self.folder / "config.json", lambda tmp: tmp.write_text(text))
        if rows:
            restored = pd.concat(rows, ignore_index=True)
            replace_atomically(self.csv, lambda tmp: restored.to_csv(
                tmp, index=False, float_format=FLOAT))
        else:
            replace_atomically(self.csv, lambda tmp: tmp.write_text(""))
        self._header = not rows
        if self.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.folder), purge_step=len(rows) or None)

    def round(self, t: int, frame: pd.DataFrame) -> None:
        """Round ``t``'s rows: appended to rounds.csv and, with TensorBoard, its scalars."""
        frame.to_csv(self.csv, mode="a", header=self._header, index=False,
                     float_format=FLOAT)
        self._header = False
        if self.writer is not None:
            for tag, value in round_scalars(frame).items():
                self.writer.add_scalar(tag, value, global_step=t)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
