"""The design module's error: a bad space, parameter, constraint or file (a ValueError that
names the field)."""

from __future__ import annotations

from ..errors import SpecError

__all__ = ["DesignInputError"]


class DesignInputError(SpecError):
    """A design space, parameter vector, constraint, market file or rule file is wrong."""
