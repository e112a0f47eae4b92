"""CFL, clustered federated learning (Sattler, Mueller and Samek, IEEE TNNLS 2021).

All clients start in one cluster. Each round every client trains from its cluster's model and
uploads its update dW_i; a cluster with more than two members whose mean update is small
(||mean dW|| < eps1: the cluster's FedAvg is near a stationary point) while some member's update
is large (max ||dW_i|| > eps2: the members disagree) is split in two by complete-linkage
clustering of the cosine similarities of the updates (the optimal bipartition of the paper,
computed as the authors' code does). Each cluster's model then moves by its members' mean
update. eps1 = 2.0, eps2 = 2.5 as in the authors' iPFL code (``cfl_eps1``, ``cfl_eps2``).

Each round is scored on the trained models, before the clusters' update (as the authors do).
The run records every split (``extras["cfl_splits"]``: round and the two groups) and each
round's largest update norm (``extras["cfl_norms"]``; the frame's ``update_norm`` column per
client): a run without a split is FedAvg with unweighted means, and the page says so.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from ..session import Round, Session

__all__ = ["bipartition", "rounds"]


def bipartition(similarity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the two groups of complete-linkage clustering on 1 - similarity."""
    d = np.clip(1.0 - np.asarray(similarity, dtype=float), 0.0, None)
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0.0)
    labels = fcluster(linkage(squareform(d, checks=False), method="complete"), 2,
                      criterion="maxclust")
    return np.flatnonzero(labels == 1), np.flatnonzero(labels == 2)


def rounds(s: Session):
    cfg, m = s.cfg, s.clients
    st = s.carry(lambda: {"clusters": [np.arange(m)], "params": s.params0})
    while True:
        clusters, params = st["clusters"], st["params"]
        start = s.flatten(params).double()
        trained = s.train(params)
        dW = s.uploads(trained).double() - start
        unit = dW / (dW.norm(dim=1, keepdim=True) + 1e-12)
        sim = (unit @ unit.T).numpy()
        new, splits = [], []
        for idc in clusters:
            norms = dW[idc].norm(dim=1)
            mean_norm = float(dW[idc].mean(dim=0).norm())
            if mean_norm < cfg.cfl_eps1 and float(norms.max()) > cfg.cfl_eps2 and len(idc) > 2:
                a, b = bipartition(sim[np.ix_(idc, idc)])
                new += [idc[a], idc[b]]
                splits.append([idc[a].tolist(), idc[b].tolist()])
            else:
                new.append(idc)
        st["clusters"] = clusters = new
        W = np.zeros((m, m))
        labels = np.zeros(m, dtype=int)
        for k, idc in enumerate(clusters):
            W[np.ix_(idc, idc)] = 1.0 / len(idc)
            labels[idc] = k
        st["params"] = s.stack((start + torch.as_tensor(W) @ dW).float())
        s.extras.setdefault("cfl_splits", []).extend(
            {"round": len(s.extras.get("cfl_norms", [])), "groups": g} for g in splits)
        s.extras.setdefault("cfl_norms", []).append(dW.norm(dim=1).max().item())
        yield Round(trained, s.baseline_ledger(W), {"clusters": labels,
                                                    "update_norm": dW.norm(dim=1).numpy()})
