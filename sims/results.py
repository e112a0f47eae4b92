"""Reading input files and writing results: a tidy table plus a JSON sidecar with config,
versions and seed."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import SpecError

__all__ = ["read_text", "versions", "write_table"]


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


def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("fedmarket", "numpy", "scipy", "pandas", "networkx", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
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
            df.to_parquet(path, index=False)
        except ImportError:
            path = path.with_suffix(".csv")
            df.to_csv(path, index=False)
    else:
        df.to_csv(path, index=False)
    side = path.with_suffix(".json")
    meta = {"table": path.name, "rows": len(df), "columns": list(df.columns),
            "versions": versions(), **provenance}
    side.write_text(json.dumps(_jsonable(meta), indent=2) + "\n")
    return path, side
