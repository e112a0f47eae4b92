"""CFL's split thresholds in the reproduction's settings: the update norms its criterion
compares, measured by the run itself, and the declared rule that carries the authors'
thresholds to them (issue 32, part 5).

CFL splits a cluster when the norm of its members' mean update is below eps1 and its largest
member update norm is above eps2 (:func:`learning.algorithms.cfl.split_due`). The authors'
thresholds (eps1 2.0, eps2 2.5: the iPFL authors' CFL, :data:`~learning.algorithms.cfl.AUTHORS_EPS`)
are absolute parameter-update norms; an update's norm grows with the local steps, the
learning rate and the model, so a setting smaller than the authors' (fewer local steps) may
never reach eps2, and CFL there is FedAvg with unweighted means.

The rule, fixed before any norm of these settings was measured:

1. Warm-up: one CFL run at the authors' thresholds, seed :data:`WARMUP_SEED` (not a seed any
   claim reads), in the setting's Fig. 2 configuration (data, sizes, partition).
2. If it splits, the authors' criterion already fires there: their thresholds stand.
3. Else both thresholds are multiplied by one factor so that eps2 becomes the median over
   the warm-up's rounds of the largest client update norm; eps1 / eps2 stays the authors'
   0.8 (:func:`learning.algorithms.cfl.scaled_thresholds`).

``python benchmarks/cfl_norms.py --setting S`` measures and prints it;
:data:`sims.settings.CFL_THRESHOLDS` holds its outcome, which the reproduction's CFL cells
run at (tests/test_cfl_thresholds.py reruns the warm-ups and checks them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pandas as pd

from .settings import CFL_THRESHOLDS, CFL_WARMUP_SEED, CLUSTER_CLIENTS, SETTINGS

__all__ = ["WARMUP_SEED", "WarmUp", "declared", "fig2_config", "measure", "warmup"]

WARMUP_SEED = CFL_WARMUP_SEED


def fig2_config(setting: str, partition: str, seed: int, **overrides):
    """The Fig. 2 cell configuration of ``setting`` (:data:`sims.settings.SETTINGS`) and
    ``partition`` (Cluster with :data:`CLUSTER_CLIENTS` clients), algorithm CFL."""
    from .scenarios import SCENARIOS

    params = {**SETTINGS[setting]["fig2"], "partition": partition}
    if partition == "cluster":
        params["clients"] = CLUSTER_CLIENTS
    cfg = SCENARIOS["fig2"].make_config({**params, **overrides}, seed)
    return replace(cfg, algorithm="cfl")


@dataclass(frozen=True)
class WarmUp:
    """A CFL run's record of its criterion: ``rounds`` (one row per round and cluster tested:
    round, members, mean_norm = ||mean dW||, max_norm = max ||dW_i||, split), whether it
    split, the thresholds it ran at and those the rule gives (``thresholds``), and its CPU
    seconds."""

    setting: str
    partition: str
    seed: int
    ran_at: tuple
    rounds: pd.DataFrame
    cpu_seconds: float

    @property
    def split(self) -> bool:
        return bool(self.rounds.split.any())

    @property
    def thresholds(self) -> tuple[float, float]:
        """The rule's (eps1, eps2): the thresholds it ran at where it split, else scaled to
        the median of its rounds' largest update norms."""
        from learning.algorithms.cfl import scaled_thresholds

        if self.split:
            return self.ran_at
        return scaled_thresholds(self.rounds.max_norm.to_numpy(), self.ran_at)


def measure(cfg) -> tuple[pd.DataFrame, float]:
    """(the criterion's record of a CFL run of ``cfg``, its CPU seconds): what the run
    itself recorded (``extras["cfl_rounds"]``)."""
    from learning.algorithms import run

    c0 = time.process_time()
    res = run(cfg)
    rows = pd.DataFrame(res.extras["cfl_rounds"])
    rows["size"] = rows.members.map(len)
    return rows, time.process_time() - c0


def warmup(setting: str, partition: str, seed: int = WARMUP_SEED, **overrides) -> WarmUp:
    """The rule's warm-up run (at the authors' thresholds, TrainConfig's defaults) in
    ``setting`` and ``partition``; ``overrides`` change the configuration (tests: sizes)."""
    cfg = fig2_config(setting, partition, seed, **overrides)
    rows, cpu = measure(cfg)
    return WarmUp(setting, partition, seed, (cfg.cfl_eps1, cfg.cfl_eps2), rows, cpu)


def declared(setting: str, partition: str) -> tuple[float, float] | None:
    """The (eps1, eps2) the reproduction's CFL cells of ``setting`` and ``partition`` run at
    (:data:`sims.settings.CFL_THRESHOLDS`), or None where none is declared (the authors')."""
    return CFL_THRESHOLDS.get((setting, partition))
