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
the same ``tag`` (a sweep's tag is the cell's config hash and code version). Any other, or
one that cannot be read, is ignored and overwritten at the first round.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from mechanisms.files import replace_atomically

__all__ = ["FORMAT", "Checkpoint", "Saved"]

FORMAT = 1


@dataclass(frozen=True)
class Saved:
    """A checkpoint as read: ``rounds`` finished, their ``rows`` (one frame a round), the
    ``seconds`` they took and the session's :meth:`~learning.session.Session.snapshot`."""

    rounds: int
    rows: list
    seconds: float
    session: dict


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

    def load(self, cfg) -> Saved | None:
        """The checkpoint of this run (config and tag equal), or None: none yet, another
        run's, or unreadable (then the run starts from round 0)."""
        import torch

        if not self.path.is_file():
            return None
        try:
            blob = torch.load(self.path, map_location="cpu", weights_only=False)
        except Exception:  # a checkpoint of other code or a damaged file: start afresh
            return None
        if not isinstance(blob, dict) or blob.get("format") != FORMAT \
                or blob.get("config") != dataclasses.asdict(cfg) or blob.get("tag") != self.tag:
            return None
        return Saved(blob["rounds"], blob["rows"], blob["seconds"], blob["session"])

    def save(self, cfg, rounds: int, rows: list, seconds: float, session: dict) -> None:
        """Replace the checkpoint with the state after ``rounds`` rounds (atomically)."""
        import torch

        blob = {"format": FORMAT, "config": dataclasses.asdict(cfg), "tag": self.tag,
                "rounds": rounds, "rows": rows, "seconds": seconds, "session": session}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(self.path, lambda tmp: torch.save(blob, tmp))

    def due(self, done: int, total: int) -> bool:
        """Whether to write after ``done`` of ``total`` rounds."""
        return done % self.every == 0 or done == total

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
