"""The results store of a sweep: one SQLite file, ``OUT/store.sqlite``, one row per finished
cell, written atomically (see :mod:`sims.sweep` for how sweeps use it).

Format 2 (this version): a table ``cells`` with the columns of :data:`COLUMNS`. ``key``
(16 hex digits) names the cell; ``scenario``, ``mechanism``, ``params`` (JSON), ``seed``
describe it; ``seconds``, ``versions``, ``finished`` (Unix time), ``config_hash`` and
``code`` say how it was computed; ``parquet`` holds the cell's rows as one Parquet file
(bytes: any Parquet reader opens it) and ``digest`` is that blob's SHA-256 in hex.

Nothing in a store executes. The digest is a checksum against damage (a flipped bit, a cut
file), not a signature: anyone can recompute it, and needs nothing more, since reading a cell
only parses Parquet and accepts nothing but columns of booleans, integers, floats and strings
(:func:`decode_rows`). A blob that is not such a table is refused with a :class:`StoreError`
naming the cell. Stores of format 1 (fedmarket before issue 33: a ``rows`` column of pickled
frames) are refused without reading a row: a pickle can run code, so its cells must be
computed again (the message says how).

A damaged store (a cut file, a page of garbage) is refused in one line naming what SQLite
found; :mod:`sims.salvage` (``fedmarket salvage``) copies its intact cells to a new store.
"""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import time
import urllib.parse
from pathlib import Path

import pandas as pd

from mechanisms.errors import MarketInputError

from .errors import StoreError
from .results import jsonable

__all__ = ["COLUMNS", "FORMAT", "Store", "decode_rows", "digest", "encode_rows",
           "one_line"]

FORMAT = 2
COLUMNS = ("key", "scenario", "mechanism", "params", "seed", "seconds", "versions",
           "finished", "config_hash", "code", "digest", "parquet")
# format 1: the same, but ``rows`` held the frame pickled (never read now)
PICKLED_COLUMNS = (*COLUMNS[:-1], "rows")
_PROBLEMS = 100  # the problems SQLite's quick_check lists at most (one is shown)


def digest(blob: bytes) -> str:
    """The checksum stored beside a cell's rows: SHA-256 of the Parquet bytes, in hex.

    >>> digest(b"")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(blob).hexdigest()


def one_line(text) -> str:
    r"""An error text (SQLite's, pyarrow's) as one line: whitespace runs become one space.

    >>> one_line("*** in database main ***\nPage 3: btreeInitPage() returns error code 11")
    '*** in database main *** Page 3: btreeInitPage() returns error code 11'
    """
    return " ".join(str(text).split())


def _arrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise StoreError("store", "the results store keeps cells as Parquet, which needs "
                                  "pyarrow: pip install fedmarket[sims]") from None
    return pyarrow, pyarrow.parquet


def _allowed(t) -> bool:
    pa, _ = _arrow()
    return (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t))


def encode_rows(df: pd.DataFrame, where: str = "rows") -> bytes:
    """A cell's rows as Parquet bytes (the index kept: a RangeIndex as metadata). Refused
    (StoreError naming ``where`` and the column) unless every column is booleans,
    integers, floats or strings, which is all a store holds.

    >>> df = pd.DataFrame({"mechanism": ["local", "vcg"], "seed": [0, 1],
    ...                    "utility": [1.5, float("nan")], "active": [True, False]})
    >>> blob = encode_rows(df)
    >>> blob[:4], decode_rows(blob).equals(df)
    (b'PAR1', True)
    >>> encode_rows(pd.DataFrame({"f": [print]}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sims.errors.StoreError: rows: cannot be stored as a table (...)
    """
    pa, pq = _arrow()
    try:  # one thread: a small table, and a sweep's workers are busy already
        table = pa.Table.from_pandas(df, preserve_index=None, nthreads=1)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise StoreError(where, f"cannot be stored as a table ({one_line(exc)})") from None
    for field in table.schema:
        if not _allowed(field.type):
            raise StoreError(where, f"column {field.name!r} is of type {field.type}; a store "
                                    "holds booleans, integers, floats and strings only")
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def decode_rows(blob, where: str = "rows") -> pd.DataFrame:
    """The frame of :func:`encode_rows`' bytes. Anything else -- not Parquet, a column of
    another type (nested, binary, a date, an extension type) -- is a StoreError naming
    ``where``; nothing in the blob is run, only parsed."""
    pa, pq = _arrow()
    if not isinstance(blob, bytes):
        raise StoreError(where, f"holds {type(blob).__name__}, not Parquet bytes")
    try:  # one thread: 1-10 ms a cell where threads made it 10-20 ms (a report reads many)
        table = pq.read_table(pa.BufferReader(blob), use_threads=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise StoreError(where, f"is not a Parquet table ({one_line(exc)})") from None
    for field in table.schema:
        if not _allowed(field.type):
            raise StoreError(where, f"column {field.name!r} is of type {field.type}; a store "
                                    "holds booleans, integers, floats and strings only")
    try:
        return table.to_pandas(use_threads=False)
    except (pa.ArrowException, OSError, ValueError, TypeError, KeyError) as exc:
        raise StoreError(where, f"is not a readable Parquet table ({one_line(exc)})") \
            from None


class Store:
    """SQLite results store: one row per cell (its rows as Parquet, with a SHA-256 digest),
    written atomically.

    ``mode="w"`` (sweeps) creates the folder and store; ``mode="r"`` (reports) opens an
    existing store read-only and never writes to it. Opening checks the file is an intact
    fedmarket store of this format (SQLite quick_check, schema); :meth:`verify` checks every
    row's digest. Anything wrong is a one-line :class:`StoreError`.
    """

    def __init__(self, folder, mode: str = "w", *, allow_empty: bool = False):
        if mode not in ("r", "w"):
            raise MarketInputError("mode", f"is {mode!r}; choose 'r' or 'w'")
        self.folder = Path(folder)
        self.path = self.folder / "store.sqlite"
        self.mode = mode
        self.allow_empty = allow_empty  # "r": a database with no table yet (one a sweep is
        self.empty = False              # creating, or left mid-creation) reads as no cells
        if mode == "r" and not self.path.is_file():
            raise StoreError("results", f"{self.folder} holds no sweep store (store.sqlite)")
        try:
            if mode == "r":
                self.db = self._connect_read_only()
            else:
                self.folder.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(self.path)
            self._check_schema()
        except sqlite3.OperationalError as exc:
            if mode == "w":  # a full disk, a file that cannot grow: not a damaged store
                raise self._write_failed(exc) from None
            raise StoreError("store", f"{self.path} cannot be read ({one_line(exc)})") \
                from None
        except sqlite3.DatabaseError as exc:
            raise StoreError("store", f"{self.path} is not an intact fedmarket store "
                                      f"({one_line(exc)}); {self._salvage_hint()}") from None
        self._last_commit = time.perf_counter()
        self._committed_a_cell = False  # the first cell is committed at once (see put)

    def _salvage_hint(self) -> str:
        return (f"`fedmarket salvage {self.folder} --out NEW` copies its intact cells to a "
                "new store")

    def _write_failed(self, exc) -> StoreError:
        return StoreError("out", f"cannot write to {self.path}: {one_line(exc)} (is the disk "
                                 "full?); the cells committed before stay intact: make room "
                                 "and rerun to resume")

    def _connect_read_only(self):
        uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}"
        try:
            db = sqlite3.connect(uri + "?mode=ro", uri=True)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:  # a read-only folder cannot hold WAL's -shm file
            return sqlite3.connect(uri + "?immutable=1", uri=True)

    def _check_schema(self):
        rows = [str(p) for (p,) in self.db.execute(f"PRAGMA quick_check({_PROBLEMS})")]
        if rows != ["ok"]:  # a problem a line, several lines a row, under a "***" heading
            problems = [one_line(x) for r in rows for x in r.splitlines()
                        if x.strip() and not x.startswith("***")] or [one_line(rows[0])]
            n = len(problems) - 1
            more = (f" and {'at least ' if len(problems) >= _PROBLEMS else ''}{n} more "
                    f"problem{'s' if n > 1 else ''}" if n else "")
            raise StoreError("store", f"{self.path} is corrupt (SQLite: {problems[0]}{more}); "
                                      f"{self._salvage_hint()}")
        tables = {t for (t,) in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "cells" not in tables:
            if self.mode == "r" and self.allow_empty and not tables:
                self.empty = True
                return
            if self.mode == "r":
                raise StoreError("store", f"{self.path} holds no cells table: not a "
                                          "fedmarket store")
            if tables:
                raise StoreError("store", f"{self.path} is some other database (tables "
                                          f"{sorted(tables)}); use another folder")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"CREATE TABLE cells ({', '.join(COLUMNS)}, PRIMARY KEY (key))")
            self.db.commit()
        columns = tuple(r[1] for r in self.db.execute("PRAGMA table_info(cells)"))
        if columns == PICKLED_COLUMNS:
            raise StoreError("store", f"{self.path} was written by an earlier fedmarket that "
                                      "kept each cell's rows pickled, which this version "
                                      "never reads (a pickle can run code): compute the "
                                      "cells again into another folder (`fedmarket sweep "
                                      "SPEC --out NEW`, or `fedmarket reproduce --out NEW`)")
        if columns != COLUMNS:
            raise StoreError("store", f"{self.path} was written by another fedmarket "
                                      f"version (columns {columns}); use another folder")
        if self.mode == "w":
            # WAL + NORMAL: a committed cell survives the process being killed (kill -9);
            # only a power cut can lose the last commits, which a rerun then recomputes.
            # WAL also lets a report read while the sweep writes. (Set on every opening:
            # close() leaves a finished store in rollback mode.)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")

    def damaged(self) -> tuple[list[str], int]:
        """(keys of the rows that fail their digest, number of rows)."""
        bad, n = [], 0
        if self.empty:
            return bad, n
        for key, dig, blob in self.db.execute("SELECT key, digest, parquet FROM cells"):
            n += 1
            if not isinstance(blob, bytes) or digest(blob) != dig:
                bad.append(key)
        return bad, n

    def verify(self) -> int:
        """Check every stored row against its digest; returns the number of rows."""
        bad, n = self.damaged()
        if bad:
            raise StoreError("store", f"{len(bad)} of {n} cells in {self.path} fail their "
                                      f"checksum (first: {bad[0]}); the store is damaged "
                                      "(a sweep recomputes just those cells with "
                                      "--recompute-damaged)")
        return n

    def forget(self, keys) -> None:
        """Delete these cells' rows (damaged ones, to be computed again)."""
        try:
            self.db.executemany("DELETE FROM cells WHERE key = ?", [(k,) for k in keys])
            self.db.commit()
        except sqlite3.OperationalError as exc:
            raise self._write_failed(exc) from None

    def done(self) -> dict[str, tuple[str, str]]:
        """{key: (config_hash, code)} of the finished cells."""
        if self.empty:
            return {}
        return {k: (h, c) for k, h, c in self.db.execute(
            "SELECT key, config_hash, code FROM cells")}

    def put(self, cell, df: pd.DataFrame, seconds: float, vers: str, chash: str,
            code: str, commit_every: float = 0.2) -> None:
        """Store a cell's rows (``cell``: a :class:`sims.sweep.Cell`) and mark it done (one
        row: both or neither).

        Commits the first cell at once, then at most every ``commit_every`` seconds (one
        commit per cell would cost more than a fast cell). Committing the first cell at once
        makes what a crash keeps independent of the host's speed: a sweep that fails after
        its first cell (a full disk, kill -9) always keeps at least that cell.
        """
        blob = encode_rows(df, f"cell {cell.key}")
        self.put_stored((cell.key, cell.scenario, cell.mechanism,
                         json.dumps(jsonable(dict(cell.params))), cell.seed, seconds, vers,
                         time.time(), chash, code, digest(blob), blob),
                        commit_every=commit_every)

    def put_stored(self, row: tuple, commit_every: float = 0.2) -> None:
        """Store a row exactly as a store holds it (the values of :data:`COLUMNS` in order;
        :mod:`sims.salvage` copies cells so). Its blob must match its digest."""
        if len(row) != len(COLUMNS) or not isinstance(row[-1], bytes) \
                or digest(row[-1]) != row[-2]:
            raise StoreError("row", f"cell {row[0] if row else '?'}: not a store row whose "
                                    "rows match their digest")
        try:
            self.db.execute(
                f"INSERT OR REPLACE INTO cells VALUES ({', '.join('?' * len(COLUMNS))})", row)
        except sqlite3.OperationalError as exc:
            raise self._write_failed(exc) from None
        if (not self._committed_a_cell
                or time.perf_counter() - self._last_commit >= commit_every):
            self.flush()
            self._committed_a_cell = True

    def flush(self) -> None:
        try:
            self.db.commit()
        except sqlite3.OperationalError as exc:
            raise self._write_failed(exc) from None
        self._last_commit = time.perf_counter()

    def frame(self, scenario: str | None = None) -> pd.DataFrame:
        """The rows of every cell (of ``scenario``), cells ordered by key, with their
        package ``versions``; a cell failing its digest or not a table of plain columns is
        a StoreError naming it."""
        q = "SELECT key, digest, parquet, versions FROM cells" + (
            " WHERE scenario = ?" if scenario else "")
        args = (scenario,) if scenario else ()
        parts = []
        for key, dig, blob, vers in self.db.execute(q + " ORDER BY key", args):
            if not isinstance(blob, bytes) or digest(blob) != dig:
                raise StoreError("store", f"cell {key} in {self.path} fails its checksum")
            df = decode_rows(blob, f"cell {key} in {self.path}")
            df["versions"] = vers
            parts.append(df)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def cells(self) -> pd.DataFrame:
        return pd.read_sql("SELECT key, scenario, mechanism, params, seed, seconds, "
                           "config_hash, code FROM cells", self.db)

    def close(self):
        if self.mode == "w":
            try:
                self.db.commit()
            except sqlite3.OperationalError as exc:  # a full disk: the last commit is lost,
                try:  # what was committed before stays (WAL), and a rerun recomputes the rest
                    self.db.rollback()
                finally:
                    self.db.close()
                raise self._write_failed(exc) from None
            try:  # fold the WAL into the file: a finished store is one self-contained file
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                # and leave WAL mode, so that a read-only opening (a report) needs no -shm
                # and -wal files beside it (fails harmlessly while a reader has it open)
                self.db.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.DatabaseError:
                pass
        self.db.close()
