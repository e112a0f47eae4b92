"""The round loop: build a :class:`~learning.session.Session`, drive the algorithm's round
generator from :data:`learning.algorithms.REGISTRY`, evaluate every round and return one tidy
DataFrame (one row per round and client) with accuracy, loss and the economic ledger."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from .algorithms import REGISTRY
from .config import TrainConfig, TrainResult
from .session import Session

__all__ = ["run"]


def run(cfg: TrainConfig, progress: Callable[[int, int], None] | None = None) -> TrainResult:
    """Train ``cfg.rounds`` rounds; ``progress(done, total)`` after each."""
    t0 = time.perf_counter()
    s = Session(cfg)
    gen = REGISTRY[cfg.algorithm].rounds(s)
    rows = []
    for t in range(cfg.rounds):
        params, ledger, extra = next(gen)
        pers, own, loss = s.evaluate(params)
        active = extra.get("active", np.ones(cfg.clients, bool))
        frame = pd.DataFrame({
            "algorithm": cfg.algorithm, "round": t, "client": np.arange(cfg.clients),
            "role": list(s.roles), "active": active,
            "acc_personalised": pers, "acc_own": own, "loss": loss,
            **{k: np.asarray(v, dtype=float) for k, v in ledger.items()},
        })
        if "participated" in extra:
            frame["participated"] = extra["participated"]
        rows.append(frame)
        if progress is not None:
            progress(t + 1, cfg.rounds)
    df = pd.concat(rows, ignore_index=True)
    return TrainResult(cfg, df, s.roles, s.entropy, time.perf_counter() - t0,
                       {k: round(v, 3) for k, v in s.timings.items()}, dict(s.extras))
