"""CFL, clustered federated learning (Sattler, Mueller and Samek, IEEE TNNLS 2021).

All clients start in one cluster. Each round every client trains from its cluster's model and
uploads its update dW_i; a cluster with more than two members whose mean update is small
(||mean dW|| < eps1: the cluster's FedAvg is near a stationary point) while some member's update
is large (max ||dW_i|| > eps2: the members disagree) is split in two by complete-linkage
clustering of the cosine similarities of the updates (the optimal bipartition of the paper,
computed as the authors' code does). Each cluster's model then moves by its members' mean
update. eps1 = 2.0, eps2 = 2.5 as in the authors' iPFL code (``cfl_eps1``, ``cfl_eps2``).

The split criterion is :func:`split_due` (one implementation, also what the tests and the
threshold scaling read). Each round is scored on the trained models, before the clusters'
update (as the authors do). The run records what its criterion compared, every round and
cluster: ``extras["cfl_rounds"]`` (round, members, the norm of the members' mean update,
their largest update norm, split or not), every split (``extras["cfl_splits"]``: round and the
two groups) and each round's largest update norm (``extras["cfl_norms"]``); per client, the
frame's ``update_norm`` (its own ||dW_i||), ``cfl_mean_norm`` and ``cfl_max_norm`` (those of
the cluster it was tested in that round, before any split). A run without a split is FedAvg
with unweighted means, and the page says so. :func:`scaled_thresholds` is the declared rule
that carries the authors' thresholds to the update norms of another setting.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from ..config import TrainConfig, TrainInputError
from ..session import Round, Session

__all__ = ["AUTHORS_EPS", "bipartition", "rounds", "scaled_thresholds", "split_due"]

# (eps1, eps2) of the iPFL authors' CFL (19dx/iPFL utils/algorithms/cfl_utils.py): TrainConfig's
# defaults; the CFL authors' own notebook (felisat/clustered-federated-learning) uses 0.4 and 1.6
AUTHORS_EPS = (TrainConfig.cfl_eps1, TrainConfig.cfl_eps2)


def bipartition(similarity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the two groups of complete-linkage clustering on 1 - similarity."""
    d = np.clip(1.0 - np.asarray(similarity, dtype=float), 0.0, None)
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0.0)
    labels = fcluster(linkage(squareform(d, checks=False), method="complete"), 2,
                      criterion="maxclust")
    return np.flatnonzero(labels == 1), np.flatnonzero(labels == 2)


def split_due(dW, eps1: float, eps2: float) -> tuple[bool, float, float]:
    """CFL's split criterion for one cluster, whose members' updates are the rows of ``dW``:
    (split, ||mean_i dW_i||, max_i ||dW_i||). A cluster splits when the norm of its mean
    update is below ``eps1`` (near a stationary point of the members' joint objective), its
    largest member update norm is above ``eps2`` (some member is far from its own) and it
    has more than two members (Sattler et al., Algorithm 1; the authors' code).

    >>> split_due(np.array([[3.0, 0.0], [-3.0, 0.0], [0.0, 0.1]]), 2.0, 2.5)[0]
    True
    >>> split_due(np.array([[3.0, 0.0], [3.0, 0.0], [0.0, 0.1]]), 2.0, 2.5)[0]  # mean large
    False
    """
    dW = torch.as_tensor(np.asarray(dW) if not torch.is_tensor(dW) else dW).double()
    mean_norm = float(dW.mean(dim=0).norm())
    max_norm = float(dW.norm(dim=1).max())
    return (mean_norm < eps1 and max_norm > eps2 and dW.shape[0] > 2), mean_norm, max_norm


def scaled_thresholds(max_norms, eps=AUTHORS_EPS) -> tuple[float, float]:
    """The declared rule (fixed before any setting's norms were measured) that carries the
    authors' thresholds ``eps`` = (eps1, eps2) to a setting whose update norms differ: both
    are multiplied by one factor, so that eps2 becomes the median over a warm-up run's rounds
    of the largest client update norm (``max_norms``, one per round, of a run at the
    authors' thresholds that never split), and eps1 / eps2 stays the authors' ratio.

    >>> scaled_thresholds([0.5, 1.0, 3.0])
    (0.8, 1.0)
    """
    norms = np.asarray(max_norms, dtype=float)
    if norms.size == 0 or not np.isfinite(norms).all() or (norms <= 0).any():
        raise TrainInputError("max_norms", f"is {norms.tolist()}; need one or more positive, "
                                           "finite norms")
    eps1, eps2 = eps
    scale = float(np.median(norms)) / eps2
    return eps1 * scale, eps2 * scale


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
        mean_of, max_of = np.zeros(m), np.zeros(m)
        t = len(s.extras.get("cfl_norms", []))
        for idc in clusters:
            due, mean_norm, max_norm = split_due(dW[idc], cfg.cfl_eps1, cfg.cfl_eps2)
            mean_of[idc], max_of[idc] = mean_norm, max_norm
            s.extras.setdefault("cfl_rounds", []).append(
                {"round": t, "members": idc.tolist(), "mean_norm": mean_norm,
                 "max_norm": max_norm, "split": due})
            if due:
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
        s.extras.setdefault("cfl_splits", []).extend({"round": t, "groups": g} for g in splits)
        s.extras.setdefault("cfl_norms", []).append(dW.norm(dim=1).max().item())
        yield Round(trained, s.baseline_ledger(W), {"clusters": labels,
                                                    "update_norm": dW.norm(dim=1).numpy(),
                                                    "cfl_mean_norm": mean_of,
                                                    "cfl_max_norm": max_of})
