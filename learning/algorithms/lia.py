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
    """FedAvg warm-up rounds, the clustering (lazily, when the first round after the warm-up
    is asked for), then FedAvg inside each cluster; re-clustering, if asked, when the round
    after every ``lia_recluster``-th is asked for. What it carries between rounds is in
    :meth:`~learning.session.Session.carry` (checkpointable)."""
    cfg, m = s.cfg, s.clients
    full = np.ones((m, m))
    warm = 0 if oracle else cfg.lia_warmup
    st = s.carry(lambda: {"glob": s.flatten(s.params0)[0], "warm": 0, "labels": None,
                          "info": None, "params": None, "since": 0, "recluster": False})

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

    while True:
        if st["warm"] < warm:
            st["glob"] = s.aggregate(s.uploads(s.train(s.broadcast(st["glob"]))),
                                     s.fedavg_weights())
            st["warm"] += 1
            yield Round(s.broadcast(st["glob"]), s.baseline_ledger(full), {})
            continue
        if st["labels"] is None:
            st["labels"], st["info"] = clusters(s.broadcast(st["glob"]))
            s.extras.update({"clusters": st["labels"].tolist(),
                             "true_clusters": None if s.cluster_of is None
                             else np.asarray(s.cluster_of).tolist()})
            if st["info"] is not None:
                s.extras.update({"influence": st["info"][0].tolist()})
            st["params"] = s.broadcast(st["glob"])
        elif st["recluster"]:
            mean = s.aggregate(s.flatten(st["params"]), s.fedavg_weights())
            st["labels"], st["info"] = clusters(s.broadcast(mean))
            st["recluster"] = False
        labels, info = st["labels"], st["info"]
        if cfg.lia_mode == "p2p" and info is not None:
            member = info[1]
        else:
            member = labels[:, None] == labels[None, :]
        W = member * s.N_rep[None, :]
        W = W / W.sum(axis=1, keepdims=True)
        st["params"] = s.stack(s.aggregate(s.uploads(s.train(st["params"])), W))
        st["since"] += 1
        st["recluster"] = bool(not oracle and cfg.lia_recluster
                               and st["since"] % cfg.lia_recluster == 0)
        yield Round(st["params"], s.baseline_ledger(W), {"clusters": labels})


def oracle(s: Session):
    return rounds(s, oracle=True)
