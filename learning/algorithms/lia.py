"""pFedLIA (spec lia.md): FedAvg warm-up, lazy influence scores, LIA clustering
(:mod:`mechanisms.lia`), then FedAvg inside each cluster (re-clustering every
``lia_recluster`` rounds if > 0). ``oracle``: the partition's ground-truth clusters from
round 0."""

from __future__ import annotations

import time

import numpy as np

from mechanisms import lia
from mechanisms.errors import MarketInputError

from ..lia import influence_scores
from ..session import Round, Session

__all__ = ["oracle", "rounds"]


def rounds(s: Session, oracle: bool = False):
    cfg, m = s.cfg, s.clients
    glob = s.flatten(s.params0)[0]
    full = np.ones((m, m))
    warm = 0 if oracle else cfg.lia_warmup
    for _ in range(warm):
        glob = s.aggregate(s.uploads(s.train(s.broadcast(glob))), s.fedavg_weights())
        yield Round(s.broadcast(glob), s.baseline_ledger(full), {})

    def clusters(start_params):
        if oracle:
            if s.cluster_of is None:
                raise MarketInputError("partition", "oracle clustering needs a partition with "
                                                    "ground-truth groups (cluster, pairs)")
            return np.asarray(s.cluster_of), None
        rng = np.random.default_rng(s.round_rng.integers(2**63))
        t0 = time.perf_counter()
        # the influence scores run on the CPU (start_params live there; X, Y may not)
        I, _ = influence_scores(s.model, start_params, s.X.cpu(), s.Y.cpu(), s.train_parts,
                                s.val_parts,
                                rng, k=cfg.lia_k, batch=cfg.batch, lr=cfg.lr)
        s.timings["influence"] = s.timings.get("influence", 0.0) + time.perf_counter() - t0
        return lia.cluster(I, "central"), (I, lia.cluster(I, "p2p"))

    labels, info = clusters(s.broadcast(glob))
    s.extras.update({"clusters": labels.tolist(),
                     "true_clusters": None if s.cluster_of is None
                     else np.asarray(s.cluster_of).tolist()})
    if info is not None:
        s.extras.update({"influence": info[0].tolist()})
    params = s.broadcast(glob)
    since = 0
    while True:
        if cfg.lia_mode == "p2p" and info is not None:
            member = info[1]
        else:
            member = labels[:, None] == labels[None, :]
        W = member * s.N_rep[None, :]
        W = W / W.sum(axis=1, keepdims=True)
        params = s.stack(s.aggregate(s.uploads(s.train(params)), W))
        yield Round(params, s.baseline_ledger(W), {"clusters": labels})
        since += 1
        if not oracle and cfg.lia_recluster and since % cfg.lia_recluster == 0:
            mean = s.aggregate(s.flatten(params), s.fedavg_weights())
            labels, info = clusters(s.broadcast(mean))


def oracle(s: Session):
    return rounds(s, oracle=True)
