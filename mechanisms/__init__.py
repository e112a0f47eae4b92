"""Incentive mechanisms for model-sharing markets: pure Python + NumPy (no torch here).

Subpackages: :mod:`mechanisms.ipfl` (Zhang et al. 2025), :mod:`mechanisms.cpl`. Shared pieces:
gains, distances, the papers' settings (:mod:`mechanisms.paper`),
input errors.
"""

from .errors import MarketInputError

__all__ = ["MarketInputError"]
