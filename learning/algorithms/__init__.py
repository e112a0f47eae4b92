"""The algorithms, one module each, registered in one table (:data:`REGISTRY`).

Each module defines ``rounds(session)``, a generator that sets the algorithm up and then yields
one :class:`learning.session.Round` per round, using only the public per-round API of
:class:`learning.session.Session`. :func:`learning.runner.run` drives it, evaluates every
round and assembles the tidy result. To add an algorithm here: write a module with
``rounds`` and add one row to the table below.

An algorithm of your own needs no edit here (:func:`get`): name it as "package.module:attr"
(an :class:`Algorithm`, or a ``rounds(session)`` generator function) or install it under the
entry-point group :data:`ENTRY_POINT_GROUP` (``[project.entry-points."fedmarket.algorithms"]
myalgo = "mypackage.myalgo:ALGORITHM"``); the name then works wherever an algorithm is named
(``TrainConfig.algorithm``, ``fedmarket train --algorithm``, sweep mechanisms of learning
scenarios, ``fedmarket reproduce --with-algorithms``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..config import ATTACKS, TrainConfig, TrainResult
from . import cfl, cpl, ditto, fedamp, fedavg, fedfomo, fedprox, ipfl, lia, local, pfedgraph
from .pfedgraph import project_simplex

__all__ = ["ALGORITHMS", "ATTACKS", "ENTRY_POINT_GROUP", "REGISTRY", "SCHEDULE", "UNPAID",
           "Algorithm", "TrainConfig", "TrainResult", "get", "plugins", "project_simplex", "run"]

SCHEDULE = ("train", "evaluate", "aggregate")  # each round; R rounds = R trainings, R ledgers
EVALUATES = ("trained", "aggregate")
# The families whose ledger has no payment: utility = gain - cost, the gain scaled by the
# client's K and the cost by its c, so a client with K = c = 0 (an attacker among traders,
# learning.session.ATTACKER_TYPES) has utility 0 in every round, whatever anyone submits.
UNPAID = ("none", "baseline")


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: its name, its round generator, and its ledger family.

    Every family's ledger satisfies utility = gain - cost - payment, per round and client:

    * "none" (Local): nothing shared; all four are 0.
    * "baseline" (FedAvg, FedProx, Ditto, pFedGraph, FedAMP, CFL, FedFomo, pFedLIA, Oracle):
      gain g_i(sum of N_j over the others in the support of the client's aggregation row),
      cost true c_i times the number of others whose row uses i's model, payment 0 (the spec's
      baseline utility; FedAvg-like algorithms use everyone: the full graph).
    * "market" (iPFL): Eqs. 12-13 on the cleared graph: gain G_i(a_i), cost true c_i times
      the clients that bought from i, payment p_i (sums to 0 each round).
    * "pricing" (CPL, expected values): payment -P_i q_i (the server pays), cost c_i q_i^2,
      gain -v_i bound(q) (the client's valuation of the model's convergence bound).
    ``loss`` is the mean cross-entropy on the global test set; ``acc_personalised`` is the
    per-class test accuracy weighted by the client's label distribution."""

    name: str
    rounds: Callable[..., Iterator]
    family: str
    summary: str
    evaluates: str = "trained"  # the models scored each round (see SCHEDULE)
    trainings: int = 1  # local trainings per round (Ditto: its personal and global model)

    @property
    def pays(self) -> bool:
        """Whether a client's utility can move with what the clients submit even at K = c = 0
        (a payment). False for the families in :data:`UNPAID`; True for the market, the
        pricing and a user's ("custom") algorithm, whose ledger nothing here constrains."""
        return self.family not in UNPAID

    def __post_init__(self):
        if self.evaluates not in EVALUATES:
            raise ValueError(f"evaluates is {self.evaluates!r}; choose one of {EVALUATES}")
        if self.trainings < 1:
            raise ValueError(f"trainings is {self.trainings}; must be >= 1")


REGISTRY: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("local", local.rounds, "none", "local training only"),
    Algorithm("fedavg", fedavg.rounds, "baseline", "FedAvg, one global model", "aggregate"),
    Algorithm("fedprox", fedprox.rounds, "baseline", "FedAvg with a proximal term",
              "aggregate"),
    Algorithm("ditto", ditto.rounds, "baseline", "global model + personal models toward it",
              trainings=2),
    Algorithm("pfedgraph", pfedgraph.rounds, "baseline", "similarity-graph aggregation"),
    Algorithm("fedamp", fedamp.rounds, "baseline", "attentive message passing"),
    Algorithm("cfl", cfl.rounds, "baseline", "clustered FL by update similarity"),
    Algorithm("fedfomo", fedfomo.rounds, "baseline", "first-order model weighting"),
    Algorithm("ipfl", ipfl.rounds, "market", "iPFL: market clearing, payments, prox-centres"),
    Algorithm("cpl", cpl.rounds, "pricing", "CPL: priced participation, unbiased FedAvg",
              "aggregate"),
    Algorithm("lia", lia.rounds, "baseline", "pFedLIA: influence clustering", "aggregate"),
    Algorithm("oracle", lia.oracle, "baseline", "FedAvg within the true clusters",
              "aggregate"),
]}
ALGORITHMS = tuple(REGISTRY)
ENTRY_POINT_GROUP = "fedmarket.algorithms"


def plugins() -> dict:
    """{name: entry point} of the algorithms installed under :data:`ENTRY_POINT_GROUP`."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def get(name: str) -> Algorithm:
    """The algorithm called ``name``: a built-in one (:data:`REGISTRY`), an installed entry
    point (:func:`plugins`) or "package.module:attr", where ``attr`` is an
    :class:`Algorithm` or a ``rounds(session)`` generator function (then an algorithm of
    family "custom", scored on its trained models, one training a round). Anything else is a
    :class:`~learning.config.TrainInputError` naming ``algorithm``."""
    from mechanisms.contain import describe, must_pass
    from mechanisms.errors import FedmarketError, RuleFailed

    from ..config import TrainInputError

    if not isinstance(name, str):
        raise TrainInputError("algorithm", f"is {name!r}; give an algorithm's name")
    if name in REGISTRY:
        return REGISTRY[name]
    found = plugins().get(name) if ":" not in name else None
    if ":" not in name and found is None:
        raise TrainInputError("algorithm", f"unknown {name!r}; choose one of {ALGORITHMS}, "
                                           f"'module:attr' or an entry point of group "
                                           f"{ENTRY_POINT_GROUP!r}")
    module, _, attr = (found.value if found is not None else name).partition(":")
    try:
        from mechanisms.lookup import import_named

        obj = import_named(f"{module.strip()}:{attr}", "algorithm")
        for part in attr.strip().split("."):
            obj = getattr(obj, part)
    except FedmarketError:  # refused: named by data the user did not vouch for
        raise
    except (ImportError, AttributeError, ValueError) as exc:
        raise TrainInputError("algorithm", f"cannot import {name!r}: {exc}") from exc
    except BaseException as exc:  # the module itself raised while importing (sys.exit too)
        if must_pass(exc):
            raise
        raise RuleFailed("algorithm", f"importing {name!r} raised {describe(exc)}") from exc
    if isinstance(obj, Algorithm):
        return obj
    if not callable(obj):
        raise TrainInputError("algorithm", f"{name!r} is neither an Algorithm nor a "
                                           "rounds(session) generator function")
    doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    return Algorithm(name, obj, "custom", doc[0] if doc else name)


def run(cfg: TrainConfig, progress=None, **kw) -> TrainResult:
    """See :func:`learning.runner.run` (``checkpoint=``, ``log=``)."""
    from ..runner import run as _run

    return _run(cfg, progress, **kw)
