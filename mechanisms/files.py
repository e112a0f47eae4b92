"""Files written whole or not at all: the one atomic-write routine every layer uses (the
results and pages of :mod:`sims.results`, the per-round checkpoints of
:mod:`learning.checkpoint`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_atomically"]


def replace_atomically(path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` fills a temporary file beside ``path`` (same suffix, so writers that
    infer the format still do), which then replaces ``path`` in one rename: a reader, or a
    process killed at any moment (kill -9 included), sees the old file or the new one, never
    half of one. Any failure removes the temporary file, leaves ``path`` as it was and is
    raised as it came (an ``OSError`` for a full disk)."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
