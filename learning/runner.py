"""The round loop: build a :class:`~learning.session.Session`, drive the algorithm's round
generator from :data:`learning.algorithms.REGISTRY`, evaluate and return one tidy DataFrame
(one row per round and client) with accuracy, loss and the economic ledger.

Columns: ``acc_personalised`` (this round's model on the global test set, per-class accuracy
weighted by the client's label distribution), ``acc_personalised_best`` (the best of those
over the rounds so far: what the iPFL authors report), ``acc_own`` (on the client's own
held-out split), ``acc_val`` (on its validation split, measured every round; it picks a
quitter's model), ``loss`` (global test set), the ledger (gain, cost, payment, utility,
n_bought, n_sold) and ``active`` (false once a client quit). With ``evaluate_every = k`` the
test columns are measured every k-th round and in the last round, NaN in the others."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from mechanisms.contain import contained
from mechanisms.errors import RuleFailed

from .algorithms import REGISTRY, get
from .checkpoint import Checkpoint
from .config import TrainConfig, TrainResult
from .session import LEDGER, Session

__all__ = ["run"]


def _next_round(gen, name: str, t: int):
    """The next (params, ledger, extra) of an algorithm of the user's own: its own error, a
    generator that stops early or yields something else is a RuleFailed naming it."""
    try:
        with contained("algorithm", name, passing=(StopIteration,)):
            out = next(gen)
    except StopIteration:
        raise RuleFailed("algorithm", f"{name} stopped after {t} rounds; rounds(session) "
                                      "must yield one Round per round") from None
    if not (isinstance(out, tuple) and len(out) == 3 and isinstance(out[1], dict)
            and isinstance(out[2], dict)):
        raise RuleFailed("algorithm", f"{name} yielded {type(out).__name__}, not a "
                                      "learning.session.Round(params, ledger, extra)")
    missing = [k for k in LEDGER if k not in out[1]]
    if missing:
        raise RuleFailed("algorithm", f"{name}'s ledger lacks {missing} (see "
                                      "Session.zero_ledger and Session.baseline_ledger)")
    return out


def run(cfg: TrainConfig, progress: Callable[[int, int], None] | None = None, *,
        checkpoint: Checkpoint | None = None, log=None) -> TrainResult:
    """Train ``cfg.rounds`` rounds; ``progress(done, total)`` after each (and, resumed, once
    with the rounds restored).

    ``checkpoint`` (:class:`learning.checkpoint.Checkpoint`): resume from it if it holds this
    run, and write it after every round; the numbers are those of a run never stopped. The
    file stays when the run ends (the caller removes it once the results are safe).
    ``log`` (:class:`learning.roundlog.RoundLog`): each round's rows as they come."""
    t0, c0 = time.perf_counter(), time.process_time()
    s = Session(cfg)
    custom = cfg.algorithm not in REGISTRY  # an algorithm of the user's own (get)
    rows = []
    before = 0.0  # seconds of the rounds restored from the checkpoint
    saved = checkpoint.load(cfg) if checkpoint is not None else None
    if saved is not None:
        s.restore(saved.session)
        rows, before = list(saved.rows), saved.seconds
    # CPU seconds of the processes that ran this cell (all their threads), the rounds restored
    # from a checkpoint included: the cost a reproduction's page reports per setting
    cpu_before = s.timings.get("cpu", 0.0)

    def cpu_so_far() -> None:
        s.timings["cpu"] = cpu_before + time.process_time() - c0

    start = len(rows)
    if log is not None:
        log.begin(cfg, rows)
    if start and progress is not None:
        progress(start, cfg.rounds)
    try:
        alg = get(cfg.algorithm)
        gen = alg.rounds(s)
        nan = np.full(cfg.clients, np.nan)
        for t in range(start, cfg.rounds):
            params, ledger, extra = _next_round(gen, cfg.algorithm, t) if custom else next(gen)
            if not alg.pays and np.any(np.asarray(ledger["payment"], dtype=float) != 0.0):
                raise RuleFailed("algorithm", f"{cfg.algorithm} is declared without payments "
                                              f"(family {alg.family!r}) but its round {t} "
                                              "ledger pays; declare another family")
            active = extra.get("active", np.ones(cfg.clients, bool))
            val = s.validate(params, active)
            if t % cfg.evaluate_every == 0 or t == cfg.rounds - 1:
                pers, own, loss = s.evaluate(params)
            else:
                pers, own, loss = nan, nan, nan
            frame = pd.DataFrame({
                "algorithm": cfg.algorithm, "round": t, "client": np.arange(cfg.clients),
                "role": list(s.roles), "active": active,
                "acc_personalised": pers, "acc_own": own, "acc_val": val, "loss": loss,
                **{k: np.asarray(v, dtype=float) for k, v in ledger.items()},
            })
            if "participated" in extra:
                frame["participated"] = extra["participated"]
            if "clusters" in extra:  # CFL's and pFedLIA's cluster of each client this round
                frame["cluster"] = np.asarray(extra["clusters"], dtype=int)
            if "update_norm" in extra:  # CFL: ||dW_i||, which its split rule compares with eps2
                frame["update_norm"] = np.asarray(extra["update_norm"], dtype=float)
            for key in ("cfl_mean_norm", "cfl_max_norm"):  # CFL: what its criterion compared
                if key in extra:  # (the client's cluster's mean-update and largest norms)
                    frame[key] = np.asarray(extra[key], dtype=float)
            rows.append(frame)
            if log is not None:
                log.round(t, frame)
            if checkpoint is not None and s.carried is not None \
                    and checkpoint.due(t + 1, cfg.rounds):
                cpu_so_far()
                checkpoint.save(cfg, t + 1, rows, before + time.perf_counter() - t0, s.snapshot())
            if progress is not None:
                progress(t + 1, cfg.rounds)
    finally:
        if log is not None:
            log.close()
    df = pd.concat(rows, ignore_index=True)
    if custom and not np.isfinite(df[[c for c in LEDGER if c in df]].to_numpy()).all():
        raise RuleFailed("algorithm", f"{cfg.algorithm} put NaN or inf in its ledger")
    # the authors' figure: each client's best personalised test accuracy over the rounds so far
    df["acc_personalised_best"] = df.groupby("client")["acc_personalised"].cummax()
    df["acc_personalised_best"] = df.groupby("client")["acc_personalised_best"].ffill()
    cpu_so_far()
    return TrainResult(cfg, df, s.roles, s.entropy, before + time.perf_counter() - t0,
                       {k: round(v, 3) for k, v in s.timings.items()}, dict(s.extras),
                       resumed_from=start, checkpointed=s.carried is not None)
