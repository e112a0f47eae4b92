"""Demo partitions drawn with Flower Datasets (``flwr-datasets``) on the in-memory data set.

Which partitions come from where:

=============  ==============================================  ==================================
``partition``  Flower Datasets (``partitioner="flwr-datasets"``)  fedmarket (default)
=============  ==============================================  ==================================
iid            ``IidPartitioner``                               :func:`learning.partition.iid`
niid           ``DirichletPartitioner(alpha=beta)``             :func:`learning.partition.niid`
skew           ``PathologicalPartitioner(s classes)``           :func:`learning.partition.skew`
cluster        none (Dirichlet across clusters, then inside)    :func:`learning.partition.cluster`
pairs          none (the LIA paper's class pairs)               :func:`learning.partition.pairs`
natural        none (generated data's own groups)               :func:`learning.partition.by_group`
=============  ==============================================  ==================================

fedmarket's own partitions stay the default: they are what the in-process learner draws, so a
Flower run on them equals the in-process run bit for bit. Flower Datasets draws different
(equally valid) partitions from the same seed. It works offline on a local data set: the
labels are wrapped in an in-memory ``datasets.Dataset``; nothing is downloaded.
"""

from __future__ import annotations

import numpy as np

from .node import NodeConfigError

__all__ = ["FLWR_PARTITIONS", "flwr_partition"]

FLWR_PARTITIONS = ("iid", "niid", "skew")


def flwr_partition(cfg, labels: np.ndarray, pid: int) -> np.ndarray:
    """Indices (into ``labels``) of client ``pid``'s partition under ``cfg.partition``."""
    if cfg.partition not in FLWR_PARTITIONS:
        raise NodeConfigError("partitioner", f"Flower Datasets has no {cfg.partition!r} "
                                             f"partition (it has {FLWR_PARTITIONS}); use "
                                             "partitioner='fedmarket'")
    try:
        from datasets import Dataset
        from flwr_datasets import partitioner as fp
    except ImportError:
        raise NodeConfigError("partitioner", "'flwr-datasets' needs the flwr-datasets package "
                                             "(pip install fedmarket[flower])") from None
    m = cfg.clients
    if cfg.partition == "iid":
        part = fp.IidPartitioner(num_partitions=m)
    elif cfg.partition == "niid":
        part = fp.DirichletPartitioner(num_partitions=m, partition_by="label", alpha=cfg.beta,
                                       min_partition_size=10, seed=cfg.seed)
    else:
        part = fp.PathologicalPartitioner(num_partitions=m, partition_by="label",
                                          num_classes_per_partition=cfg.skew_classes,
                                          class_assignment_mode="first-deterministic",
                                          seed=cfg.seed)
    y = np.asarray(labels)
    part.dataset = Dataset.from_dict({"idx": np.arange(len(y)), "label": y})
    return np.sort(np.asarray(part.load_partition(pid)["idx"], dtype=np.int64))
