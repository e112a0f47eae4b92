"""Hypothesis profiles shipped with the package: ``dev``, ``ci`` and ``nightly``.

Importing :mod:`proofs` registers them, so ``HYPOTHESIS_PROFILE=ci`` means the same thing in
this repository's tests and in yours. :func:`proofs.check` takes its example budget from the
active profile unless it is given one:

* ``dev`` (default): 60 examples, fast feedback while editing.
* ``ci``: 150 examples, derandomised (same examples on every run), no deadline.
* ``nightly``: 2,000 examples per Hypothesis test; ``make nightly`` additionally runs the
  theorem report with the batch engine at 10^6 effective examples per declared property.

``HYPOTHESIS_PROFILE`` names the active one; an unknown name is an error, never ignored.
In your own ``conftest.py``: ``from proofs.profiles import load_profile; load_profile()``.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "ProfileError", "active_profile", "load_profile",
           "module_independent_draws", "register_profiles"]

PROFILES: dict[str, dict] = {
    "dev": {"max_examples": 60, "deadline": None},
    "ci": {"max_examples": 150, "deadline": None, "derandomize": True, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow]},
    "nightly": {"max_examples": 2000, "deadline": None},
}
DEFAULT = "dev"
ENV = "HYPOTHESIS_PROFILE"


class ProfileError(ValueError):
    """``HYPOTHESIS_PROFILE`` names a profile nobody registered."""


def register_profiles() -> None:
    """Register dev / ci / nightly with Hypothesis (idempotent)."""
    for name, kwargs in PROFILES.items():
        settings.register_profile(name, **kwargs)


def active_profile() -> str:
    """The profile ``HYPOTHESIS_PROFILE`` names (default ``dev``); unknown names raise."""
    name = os.environ.get(ENV, DEFAULT) or DEFAULT
    try:
        settings.get_profile(name)
    except Exception as exc:  # hypothesis raises InvalidArgument
        raise ProfileError(f"{ENV}: unknown profile {name!r}; registered: "
                           f"{sorted(PROFILES)} (or one you registered yourself)") from exc
    return name


def load_profile() -> str:
    """Load the active profile into Hypothesis (for a conftest.py); returns its name."""
    name = active_profile()
    settings.load_profile(name)
    return name


def budget() -> int:
    """The active profile's ``max_examples``."""
    return int(settings.get_profile(active_profile()).max_examples)


@contextmanager
def module_independent_draws():
    """Make seeded Hypothesis draws independent of what else the process imported.

    Hypothesis (since 6.131) draws, with a small probability, constants collected from the
    source of every *local* module imported so far (here: mechanisms, proofs, sims,
    learning, and the user's own modules). A seeded search then draws different instances
    depending on what the process had imported before -- a search run inside a test suite
    differed from the same call in a fresh process (first failure 3 vs 9). For the duration
    of one search the checker offers Hypothesis no local constants (its global constants --
    0, 1, -1, the ends of float ranges... -- stay in use). A version of Hypothesis without
    the feature is left alone. :func:`proofs.check` searches inside it; the repository's
    tests run every test inside it (tests/conftest.py), so a test draws the same examples
    alone and in any combination of files (under ``ci``: derandomised).
    """
    try:
        from hypothesis.internal.conjecture import providers

        getter, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
        none = providers.Constants()
    except (ImportError, AttributeError):  # pragma: no cover - older/newer Hypothesis
        yield
        return
    providers._get_local_constants = lambda: none
    cache.cache.clear()  # it caches the permitted local constants per draw kind
    try:
        yield
    finally:
        providers._get_local_constants = getter
        cache.cache.clear()


register_profiles()
