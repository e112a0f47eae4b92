"""What every ``fedmarket`` sub-command shares: the help formatter, tables on the console,
and the one place that turns expected errors into one line on stderr."""

from __future__ import annotations

import argparse
import sys

from mechanisms.errors import MarketInputError

__all__ = ["Formatter", "Parser", "UsageError", "add_command", "add_quiet", "console",
           "print_table", "run_guarded"]


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


def run_guarded(func, args) -> int:
    """Run a command; an expected error becomes one line on stderr and exit status 2."""
    try:
        return func(args)
    except MarketInputError as exc:
        print(f"fedmarket: error: {exc}", file=sys.stderr)
        return 2
