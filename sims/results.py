"""Writing results: a tidy table plus a JSON sidecar with config, versions and seed."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["versions", "write_table"]


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
