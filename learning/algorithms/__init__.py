"""The algorithms, one module each, registered in one table (:data:`REGISTRY`).

Each module defines ``rounds(session)``, a generator that sets the algorithm up and then yields
one :class:`learning.session.Round` per round, using only the public per-round API of
:class:`learning.session.Session`. :func:`learning.runner.run` drives it, evaluates every
round and assembles the tidy result. To add an algorithm: write a module with ``rounds`` and
add one row to the table below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..config import ATTACKS, TrainConfig, TrainResult
from . import cfl, cpl, ditto, fedamp, fedavg, fedfomo, fedprox, ipfl, lia, local, pfedgraph
from .pfedgraph import project_simplex

__all__ = ["ALGORITHMS", "ATTACKS", "REGISTRY", "Algorithm", "TrainConfig", "TrainResult",
           "project_simplex", "run"]


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: its name, its round generator, and its ledger family
    ("none": nothing shared, "baseline": utility from the aggregation graph, no payments,
    "market": iPFL's clearing and payments, "pricing": CPL's prices)."""

    name: str
    rounds: Callable[..., Iterator]
    family: str
    summary: str


REGISTRY: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("local", local.rounds, "none", "local training only"),
    Algorithm("fedavg", fedavg.rounds, "baseline", "FedAvg, one global model"),
    Algorithm("fedprox", fedprox.rounds, "baseline", "FedAvg with a proximal term"),
    Algorithm("ditto", ditto.rounds, "baseline", "global model + personal models toward it"),
    Algorithm("pfedgraph", pfedgraph.rounds, "baseline", "similarity-graph aggregation"),
    Algorithm("fedamp", fedamp.rounds, "baseline", "attentive message passing"),
    Algorithm("cfl", cfl.rounds, "baseline", "clustered FL by update similarity"),
    Algorithm("fedfomo", fedfomo.rounds, "baseline", "first-order model weighting"),
    Algorithm("ipfl", ipfl.rounds, "market", "iPFL: market clearing, payments, prox-centres"),
    Algorithm("cpl", cpl.rounds, "pricing", "CPL: priced participation, unbiased FedAvg"),
    Algorithm("lia", lia.rounds, "baseline", "pFedLIA: influence clustering"),
    Algorithm("oracle", lia.oracle, "baseline", "FedAvg within the true clusters"),
]}
ALGORITHMS = tuple(REGISTRY)


def run(cfg: TrainConfig, progress=None) -> TrainResult:
    """See :func:`learning.runner.run`."""
    from ..runner import run as _run

    return _run(cfg, progress)
