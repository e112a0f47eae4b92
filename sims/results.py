"""Reading input files and writing results: a tidy table plus a JSON sidecar with config,
versions and seed."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms.files import replace_atomically

from .errors import SpecError, StoreError

__all__ = ["jsonable", "latex_table", "read_text", "versions", "write_atomic", "write_table"]


def read_text(field: str, path) -> str:
    """The UTF-8 text of an input file; a SpecError naming ``field`` when it is missing, a
    folder, unreadable or not UTF-8."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SpecError(field, f"{path} does not exist") from exc
    except IsADirectoryError as exc:
        raise SpecError(field, f"{path} is a folder; give a file") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(field, f"{path} is not UTF-8 text ({exc.reason} at byte "
                               f"{exc.start})") from exc
    except OSError as exc:
        raise SpecError(field, f"{path} cannot be read: {exc.strerror or exc}") from exc


def write_atomic(path, write: Callable[[Path], object], field: str = "out") -> Path:
    """Write a file whole or not at all: ``write(tmp)`` fills a temporary file beside
    ``path`` (same suffix, so writers that infer the format still do), which then replaces
    ``path`` in one rename. A failure (a full disk) removes the temporary file, leaves any
    earlier ``path`` as it was, and is a one-line :class:`StoreError` naming ``field``."""
    try:
        return replace_atomically(path, write)
    except OSError as exc:
        raise StoreError(field, f"cannot write {path}: {exc.strerror or exc} (nothing "
                                "half-written is left)") from None


def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("fedmarket", "numpy", "scipy", "pandas", "networkx", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)
    return obj


def write_table(df: pd.DataFrame, path: Path, provenance: dict) -> tuple[Path, Path]:
    """Write ``df`` at ``path`` (".csv", or ".parquet" with a CSV fallback when pyarrow is
    missing) and a JSON sidecar beside it; returns (table path, sidecar path)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            path = path.with_suffix(".csv")
    if path.suffix == ".parquet":
        write_atomic(path, lambda tmp: df.to_parquet(tmp, index=False))
    else:
        write_atomic(path, lambda tmp: df.to_csv(tmp, index=False))
    side = path.with_suffix(".json")
    meta = {"table": path.name, "rows": len(df), "columns": list(df.columns),
            "versions": versions(), **provenance}
    text = json.dumps(jsonable(meta), indent=2) + "\n"
    write_atomic(side, lambda tmp: tmp.write_text(text))
    return path, side


def latex_table(df: pd.DataFrame, *, caption: str | None = None,
                label: str | None = None) -> str:
    """``df`` as a LaTeX table (booktabs rules; text escaped, so "ir_rate" and "50 %" print
    as written; numbers to 6 significant digits): paste it into a paper with
    ``\\usepackage{booktabs}``."""
    return df.to_latex(index=False, escape=True, float_format=lambda v: f"{v:.6g}",
                       caption=caption, label=label, na_rep="--")
