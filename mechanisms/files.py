"""Files written whole or not at all: the one atomic-write routine every layer uses (the
results and pages of :mod:`sims.results`, the per-round checkpoints of
:mod:`learning.checkpoint`); and numpy array files read as data only."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["read_arrays", "replace_atomically"]


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


def read_arrays(path, error: Callable[[str], Exception]):
    """The array of a ``.npy`` file, or the {name: array} of a ``.npz``, read as data only:
    never unpickled (an array of Python objects, which a crafted file may hold to run code
    when loaded, is refused). A file that cannot be read so raises ``error(message)``, the
    message one line naming the file.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> np.savez(folder / "ok.npz", x=np.arange(3))
    >>> read_arrays(folder / "ok.npz", ValueError)["x"].tolist()
    [0, 1, 2]
    >>> np.save(folder / "objects.npy", np.array([print]), allow_pickle=True)
    >>> read_arrays(folder / "objects.npy", ValueError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../objects.npy is not a file of numeric arrays (Object arrays cannot be ...)
    """
    import zipfile

    path = Path(path)
    try:
        got = np.load(path, allow_pickle=False)
        if isinstance(got, np.lib.npyio.NpzFile):
            with got:
                return {k: got[k] for k in got.files}
        return got
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise error(f"{path} is not a file of numeric arrays ({' '.join(str(exc).split())})") \
            from None
