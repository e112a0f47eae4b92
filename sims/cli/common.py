"""What every ``fedmarket`` sub-command shares: the help formatter, tables on the console,
and the one place that turns expected errors into one line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from mechanisms.errors import FedmarketError

from ..errors import SpecError

__all__ = ["INT_LIMIT", "PROGRESS_EVERY", "Formatter", "Parser", "ProgressLines", "Running",
           "UsageError",
           "add_command", "add_progress", "add_quiet", "console", "integer", "print_table",
           "progress_reporter", "run_guarded", "user_modules", "writable_file", "writable_folder"]

PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal


INT_LIMIT = 2**63  # integer options lie in [-2**63, 2**63): a seed's range, numpy's int64


def integer(text: str) -> int:
    """argparse ``type`` of the integer options: refuses a number past the 64-bit range in
    one line (a 400-digit ``--rounds`` would otherwise fail deep inside numpy)."""
    shown = text if len(text) <= 24 else f"{text[:12]}...({len(text)} characters)"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer value: {shown!r}") from None
    if not -INT_LIMIT <= value < INT_LIMIT:
        raise argparse.ArgumentTypeError(f"{shown} is out of range; integers here lie in "
                                         "[-2**63, 2**63)")
    return value


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


def add_progress(parser) -> None:
    parser.add_argument("--progress-every", type=float, default=PROGRESS_EVERY,
                        metavar="SECONDS",
                        help="when stderr is not a terminal (a log file, CI), a progress "
                             "line at most this often, and at every 5 %% done (0: every step)")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressLines:
    """``progress(done, total)`` written as one line on ``stream`` from time to time: none
    in the first ``every`` seconds (a short run stays silent), then a line when ``every``
    seconds have passed since the last one, or when another 5 % is done (but not more than
    once a second unless ``every`` is smaller). A line says what is done, the time so far
    and the time left at the rate of this run (work done before it started, like a resumed
    sweep's finished cells, does not count toward the rate). A run that printed lines ends
    with a last one.

    ``progress(done, total, note)``: ``note`` says what is under way (a long cell's round, a
    row's examples) and ends the line; a new note counts as progress, so that a long first
    step still gets a line every ``every`` seconds (``note=""`` clears it).
    """

    def __init__(self, label: str, stream=None, every: float = PROGRESS_EVERY,
                 clock=time.monotonic):
        if not every >= 0:  # also refuses NaN
            raise SpecError("--progress-every", f"is {every}; must be >= 0 seconds")
        self.label, self.stream, self.every, self.clock = label, stream, float(every), clock
        self.t0 = clock()
        self.first = None  # done at the first call, and when it came
        self.t_first = self.last_t = self.t0
        self.last_done = 0
        self.done = self.total = 0
        self.lines = 0
        self.note = self.last_note = ""

    def __call__(self, done: int, total: int, note: str | None = None) -> None:
        now = self.clock()
        if self.first is None:
            self.first = self.last_done = done
            self.t_first = self.last_t = now
        self.done, self.total = done, total
        if note is not None:
            self.note = note
        since = now - self.last_t
        step = total > 0 and (done - self.last_done) >= 0.05 * total
        moved = done > self.first or bool(self.note and self.note != self.last_note)
        if moved and now - self.t0 >= self.every and (
                since >= self.every or (step and since >= min(1.0, self.every))):
            self._line(now)

    def _line(self, now: float) -> None:
        elapsed = now - self.t0
        ran = self.done - (self.first or 0)
        pct = f" ({100.0 * self.done / self.total:.0f} %)" if self.total else ""
        text = f"{self.label}: {self.done}/{self.total}{pct}, {_duration(elapsed)} elapsed"
        if ran >= 0.01 * self.total and 0 < ran and self.done < self.total:
            rate = (now - self.t_first) / ran
            text += f", about {_duration(rate * (self.total - self.done))} left"
        if self.note:
            text += f"; {self.note}"
        print(text, file=self.stream or sys.stderr, flush=True)
        self.lines += 1
        self.last_t, self.last_done, self.last_note = now, self.done, self.note

    def close(self) -> None:
        if self.lines and self.last_done != self.done:
            self.note = ""
            self._line(self.clock())


class Running:
    """What is under way inside a long run, for a progress line's note: each running item
    (a sweep cell, a theorem row) with its steps done of its total and its seconds so far.
    ``step(name, done, total)`` as an item reports, ``end(name)`` when it is over (a late
    step of an ended item is ignored); ``note()`` is the text: ``running: NAME: 3/20 UNIT
    (12 s)``, the two latest items and how many more."""

    def __init__(self, unit: str, clock=time.monotonic, shown: int = 2):
        self.unit, self.clock, self.shown = unit, clock, shown
        self.items: dict = {}  # name -> (done, total, start, unit)
        self.ended: set = set()

    def step(self, name: str, done: int, total: int, unit: str | None = None,
             seconds: float | None = None) -> None:
        """``unit``: what this item counts (default: the one given at construction);
        ``seconds``: its time so far as measured where it runs (default: since its first
        step here)."""
        if name in self.ended:
            return
        start = self.items.pop(name, (0, 0, self.clock(), None))[2]
        if seconds is not None:
            start = self.clock() - seconds
        self.items[name] = (done, total, start, unit or self.unit)  # the latest last

    def end(self, name: str) -> None:
        self.items.pop(name, None)
        self.ended.add(name)

    def note(self) -> str:
        if not self.items:
            return ""
        now = self.clock()
        latest = list(self.items.items())[::-1][:self.shown]
        text = "running: " + "; ".join(
            f"{name}: " + (f"{done:,}/{total:,} {unit}" if total else "started")
            + f" ({_duration(now - start)})" for name, (done, total, start, unit) in latest)
        more = len(self.items) - len(latest)
        return text + (f" and {more} more" if more else "")


@contextlib.contextmanager
def progress_reporter(label: str, *, quiet: bool = False, every: float = PROGRESS_EVERY):
    """A ``progress(done, total)`` callback for a library call: nothing with ``quiet``; a
    transient bar on stderr when it is a terminal; otherwise :class:`ProgressLines`."""
    if not every >= 0:  # also refuses NaN
        raise SpecError("--progress-every", f"is {every}; must be >= 0 seconds")
    if quiet:
        yield None
        return
    if not sys.stderr.isatty():
        lines = ProgressLines(label, every=every)
        try:
            yield lines
        finally:
            lines.close()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done, total, note=None):
            if note is None:
                bar.update(task, completed=done, total=total)
            else:
                bar.update(task, completed=done, total=total,
                           description=f"{label}; {note}" if note else label)

        yield update


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


def user_modules(folder) -> None:
    """Let ``module:function`` rules be found in ``folder`` (first on ``sys.path``, as
    ``python -m`` does for the current folder): the one lookup rule of every command."""
    folder = str(Path(folder).resolve())
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)


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
