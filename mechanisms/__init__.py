"""Incentive mechanisms for model-sharing markets: pure Python + NumPy (no torch here).

Subpackages: :mod:`mechanisms.ipfl` (Zhang et al. 2025). Shared pieces: gains, distances,
input errors.
"""

from .errors import MarketInputError

__all__ = ["MarketInputError"]
