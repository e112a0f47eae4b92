"""The papers' settings, one copy: every configuration that defaults to a paper's value
(``learning.config.TrainConfig``, ``sims.inclusive.InclusiveMarket``,
``sims.cpl_game.CplBenchmark``, :class:`mechanisms.cpl.Game`) takes it from here.

iPFL (Zhang et al. 2025, spec ipfl.md): gain scale K = 5e5, sharing cost C = 1, eta = 5.
CPL (spec cpl.md, "Experimental settings"): c_n = 5, v_n ~ Exp(mean 100), B = 15,
alpha = 1.82 (MNIST), R = 200, q_min = 0.01, q_max = 1.

>>> IPFL_K, CPL_BUDGET, CPL_ALPHA
(500000.0, 15.0, 1.82)
"""

from __future__ import annotations

__all__ = ["CPL_ALPHA", "CPL_BUDGET", "CPL_C", "CPL_Q_MAX", "CPL_Q_MIN", "CPL_R",
           "CPL_V_MEAN", "IPFL_C", "IPFL_ETA", "IPFL_K"]

IPFL_K = 5e5
IPFL_C = 1.0
IPFL_ETA = 5.0

CPL_C = 5.0
CPL_V_MEAN = 100.0
CPL_BUDGET = 15.0
CPL_ALPHA = 1.82
CPL_R = 200
CPL_Q_MIN = 0.01
CPL_Q_MAX = 1.0
