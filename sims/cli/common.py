"""What every ``fedmarket`` sub-command shares: the help formatter, tables on the console,
and the one place that turns expected errors into one line on stderr."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mechanisms.errors import FedmarketError

from ..errors import SpecError

__all__ = ["Formatter", "Parser", "UsageError", "add_command", "add_quiet", "console",
           "print_table", "run_guarded", "writable_file", "writable_folder"]


class UsageError(Exception):
    """The command line itself is wrong (unknown option, bad choice, missing argument)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose misuse errors become one line (no usage block, no exit)."""

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


class Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default (flags and options without a default say so
    in their help); descriptions keep their line breaks."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def add_command(sub, name: str, help: str, description: str | None = None):
    """A sub-command parser whose options list their defaults."""
    return sub.add_parser(name, help=help, description=description or help,
                          formatter_class=Formatter)


def add_quiet(parser) -> None:
    parser.add_argument("--quiet", action="store_true", help="write files, print nothing")


def console():
    try:
        from rich.console import Console

        return Console(width=max(Console().width, 120))
    except ImportError:  # pragma: no cover - rich is in the sims extra
        return None


def print_table(df, title: str) -> None:
    con = console()
    if con is None:  # pragma: no cover
        print(title)
        print(df.to_string(index=False))
        return
    from rich.table import Table

    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col), justify="right" if df[col].dtype.kind in "fiu" else "left")
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append(f"{v:.6g}")
            elif isinstance(v, list):
                cells.append(",".join(map(str, v)) or "-")
            else:
                cells.append(str(v))
        table.add_row(*cells)
    con.print(table)


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def writable_folder(option: str, folder) -> Path:
    """Check, before any work and without creating anything, that ``folder`` is (or can be
    made) a writable directory; a SpecError naming ``option`` otherwise."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SpecError(option, f"{folder} exists and is not a folder")
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise SpecError(option, f"{folder} cannot be created: {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise SpecError(option, f"{folder} is not writable ({base} is read-only)")
    return folder


def writable_file(option: str, path) -> Path:
    """Check, before any work, that the file ``path`` can be written (its folder writable,
    the path itself not a folder nor a read-only file)."""
    path = Path(path)
    if path.is_dir():
        raise SpecError(option, f"{path} is a folder; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise SpecError(option, f"{path} is read-only")
    writable_folder(option, path.parent if str(path.parent) else Path("."))
    return path


def run_guarded(func, args) -> int:
    """Run a command; an expected error (bad input, a file that cannot be read or written, a
    broken store) becomes one line on stderr and exit status 2; Ctrl-C exits 130; anything
    else is a bug and keeps its traceback."""
    try:
        return func(args)
    except FedmarketError as exc:
        print(f"fedmarket: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeError) as exc:  # I/O the checks could not foresee (disk full...)
        print(f"fedmarket: error: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedmarket: interrupted", file=sys.stderr)
        return 130
