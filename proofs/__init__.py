"""Machine-checked statements about the mechanisms.

:mod:`proofs.strategies` holds the shared Hypothesis strategies for market instances (built
with their constraints, never filtered); the test suite and the property checker draw from it.
"""
