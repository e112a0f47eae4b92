"""Salvage: copy the intact cells of a damaged results store into a new store
(``fedmarket salvage BROKEN --out NEW``).

A store that is cut short (a copy that stopped, a full disk during a copy) or has pages
overwritten with garbage cannot be opened by SQLite as a whole (:class:`sims.store.Store`
refuses it), but most of its cells usually sit on pages that are intact. This module reads
the file page by page, as the SQLite file format (https://www.sqlite.org/fileformat.html)
lays it out, without SQLite: every table leaf page's records, their overflow chains followed
page by page, and, if the store's write-ahead log (``store.sqlite-wal``) is beside it, the
newer pages it holds up to its last commit. A record is a cell when it has the twelve
columns of :data:`sims.store.COLUMNS`, its Parquet rows match their SHA-256 digest and read
as a table of plain columns (:func:`sims.store.decode_rows`); such a cell is copied to the
new store byte for byte (the same key, metadata, digest and rows). When a key turns up more
than once (a page a later write freed but did not clear), the latest ``finished`` wins.

Cells that are *lost* are named: every key found in a record whose rows are cut or fail their
digest (with its scenario, mechanism and seed when those are readable) or in the key index
(``sqlite_autoindex_cells_1``) but in no intact record. Cells on pages lost whole with their
index entries cannot be named from the file; a sweep with the same spec into the new store
computes every missing cell again, whatever its name.

Nothing is executed: values are parsed, the rows read as Parquet. The damaged store is read
only, never written.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import StoreError
from .results import write_atomic
from .store import COLUMNS, Store, decode_rows, digest

__all__ = ["Salvaged", "salvage"]

_HEADER = b"SQLite format 3\x00"
_PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512)
_KEY = re.compile(r"[0-9a-f]{16}")
_TABLE_LEAF, _INDEX_LEAF = 13, 10


@dataclass(frozen=True)
class Salvaged:
    """What :func:`salvage` did: ``recovered`` (keys copied, sorted), ``lost`` ((key,
    description) of the cells found damaged, sorted), the ``pages`` of the damaged file read
    and its ``page_size``; ``source`` and ``out`` the two store files."""

    source: Path
    out: Path
    recovered: tuple[str, ...]
    lost: tuple[tuple[str, str], ...]
    pages: int
    page_size: int

    def summary(self) -> str:
        """One line: how many cells came back, which were lost."""
        n = len(self.recovered) + len(self.lost)
        head = (f"salvaged {len(self.recovered)} of the {n} cells found in {self.source} into "
                f"{self.out}")
        if not self.lost:
            return head + "; none lost"
        shown = "; ".join(d for _, d in self.lost[:10])
        more = f"; and {len(self.lost) - 10} more" if len(self.lost) > 10 else ""
        return (f"{head}; {len(self.lost)} lost ({shown}{more}; all listed in "
                f"{self.out.parent / 'salvage.json'}): a sweep with the same spec into "
                f"{self.out.parent} computes them again")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``buf[i]``: (value, next offset); IndexError if cut."""
    v = 0
    for k in range(8):
        b = buf[i + k]
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, i + k + 1
    return (v << 8) | buf[i + 8], i + 9


def _values(payload: bytes, complete: bool) -> list | None:
    """A record's values in order; with an incomplete payload, those that are whole (a value
    cut short ends the list). None when the header itself cannot be read."""
    try:
        size, i = _varint(payload, 0)
        types = []
        while i < size:
            t, i = _varint(payload, i)
            types.append(t)
    except IndexError:
        return None
    if size > len(payload) or not types:
        return None
    out, j = [], size
    for t in types:
        if t in (0, 8, 9):
            out.append(None if t == 0 else t - 8)
            continue
        n = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8}.get(t)
        if n is None:
            if t in (10, 11):
                return out if not complete else None
            n = (t - 12) // 2
        if j + n > len(payload):
            return out
        raw = payload[j:j + n]
        j += n
        if t == 7:
            out.append(struct.unpack(">d", raw)[0])
        elif t <= 6:
            out.append(int.from_bytes(raw, "big", signed=True))
        elif t % 2 == 0:
            out.append(bytes(raw))
        else:
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                return out
    return out


class _File:
    """The pages of a store file (plus its WAL's committed pages, which replace them)."""

    def __init__(self, data: bytes, wal: bytes | None, page_size: int, reserved: int):
        self.size = page_size
        self.usable = page_size - reserved
        n = len(data) // page_size
        data = memoryview(data)  # pages are views: the file is not copied
        self.pages = {k + 1: data[k * page_size:(k + 1) * page_size] for k in range(n)}
        if wal:
            self._wal(wal)
        self.read = len(self.pages)

    def _wal(self, wal: bytes) -> None:
        if len(wal) < 32 or int.from_bytes(wal[8:12], "big") != self.size:
            return
        salt = wal[16:24]
        wal = memoryview(wal)
        frames, committed = {}, {}
        at = 32
        while at + 24 + self.size <= len(wal):
            head = wal[at:at + 24]
            if bytes(head[8:16]) != bytes(salt):
                break
            frames[int.from_bytes(head[:4], "big")] = wal[at + 24:at + 24 + self.size]
            if int.from_bytes(head[4:8], "big"):  # a commit frame: all before it count
                committed = dict(frames)
            at += 24 + self.size
        self.pages.update(committed)

    def payload(self, page: bytes, at: int, index: bool) -> tuple[bytes, bool] | None:
        """The payload of the cell at offset ``at`` of a leaf page: (bytes, complete)."""
        u = self.usable
        try:
            p, i = _varint(page, at)
            if not index:
                _, i = _varint(page, i)  # the rowid
        except IndexError:
            return None
        x = ((u - 12) * 64 // 255 - 23) if index else u - 35
        if p <= x:
            local = p
        else:
            m = (u - 12) * 32 // 255 - 23
            k = m + (p - m) % (u - 4)
            local = k if k <= x else m
        if i + local > len(page):
            return None
        out = bytearray(page[i:i + local])
        if local == p:
            return bytes(out), True
        nxt = int.from_bytes(page[i + local:i + local + 4], "big")
        seen = set()
        while len(out) < p:
            over = self.pages.get(nxt)
            if over is None or nxt in seen:
                return bytes(out), False
            seen.add(nxt)
            out += over[4:u][:p - len(out)]
            nxt = int.from_bytes(over[:4], "big")
        return bytes(out), True

    def records(self):
        """(kind, values, complete) of every cell of every leaf page: kind "table" or
        "index"."""
        for number, page in self.pages.items():
            h = 100 if number == 1 else 0
            if len(page) < h + 8 or page[h] not in (_TABLE_LEAF, _INDEX_LEAF):
                continue
            index = page[h] == _INDEX_LEAF
            ncells = int.from_bytes(page[h + 3:h + 5], "big")
            if ncells > self.size // 4:
                continue
            for c in range(ncells):
                ptr = int.from_bytes(page[h + 8 + 2 * c:h + 10 + 2 * c], "big")
                if not h + 8 <= ptr < self.usable:
                    continue
                got = self.payload(page, ptr, index)
                if got is None:
                    continue
                values = _values(*got)
                if values is not None:
                    yield ("index" if index else "table"), values, got[1]


def _describe(values: list) -> str:
    key = values[0]
    if len(values) >= 5 and all(isinstance(v, str) for v in values[1:3]) \
            and isinstance(values[4], int):
        return f"{key} ({values[1]} / {values[2]} / seed {values[4]})"
    return key


def _scan(data: bytes, wal: bytes | None, page_size: int, reserved: int):
    f = _File(data, wal, page_size, reserved)
    intact: dict[str, tuple] = {}
    seen: dict[str, str] = {}
    for kind, values, complete in f.records():
        if not values or not isinstance(values[0], str) or not _KEY.fullmatch(values[0]):
            continue
        key = values[0]
        if kind == "index":
            if len(values) == 2:
                seen.setdefault(key, key)
            continue
        if len(values) > 4 or key not in seen:
            seen[key] = _describe(values)
        if not complete or len(values) != len(COLUMNS):
            continue
        blob, dig = values[-1], values[-2]
        if not isinstance(blob, bytes) or digest(blob) != dig \
                or not isinstance(values[7], float | int):
            continue
        try:
            decode_rows(blob, f"cell {key}")
        except StoreError:
            continue
        if key not in intact or values[7] > intact[key][7]:
            intact[key] = tuple(values)
    return f, intact, seen


def salvage(broken, out) -> Salvaged:
    """Copy every intact cell of the store at ``broken`` (its folder, or the file) into a
    new store in the folder ``out`` (which must not hold one), and write ``out/salvage.json``
    naming the cells recovered and lost. A :class:`StoreError` (one line) when ``broken``
    holds no store or not one cell could be read from it, or ``out`` holds a store."""
    broken = Path(broken)
    source = broken / "store.sqlite" if broken.is_dir() else broken
    if not source.is_file():
        raise StoreError("broken", f"{broken} holds no sweep store (store.sqlite)")
    out = Path(out)
    if (out / "store.sqlite").exists():
        raise StoreError("out", f"{out} already holds a store; salvage into a new folder")
    if out.resolve() == source.parent.resolve():
        raise StoreError("out", "is the damaged store's own folder; give a new folder")
    try:
        data = source.read_bytes()
        wal_path = source.with_name(source.name + "-wal")
        wal = wal_path.read_bytes() if wal_path.is_file() else None
    except OSError as exc:
        raise StoreError("broken", f"{source} cannot be read: {exc.strerror or exc}") \
            from None
    sizes, reserved = _PAGE_SIZES, 0
    if data.startswith(_HEADER) and len(data) >= 100:
        size = int.from_bytes(data[16:18], "big")
        size = 65536 if size == 1 else size
        if size in _PAGE_SIZES:  # the header's page size first
            sizes, reserved = (size, *(s for s in _PAGE_SIZES if s != size)), data[20]
    best = None
    for size in sizes:  # a header lost or garbled: every page size SQLite allows, tried
        got = _scan(data, wal, size, reserved if size == sizes[0] else 0)
        if best is None or len(got[1]) > len(best[1]):
            best = got
        if best[1] and size == sizes[0] and sizes is not _PAGE_SIZES:
            break  # cells found at the header's page size: it was right
    f, intact, seen = best
    if not intact and not seen:
        raise StoreError("broken", f"{source}: no fedmarket cell could be read (not a "
                                   "results store, or every page holding cells is damaged)")
    lost = tuple(sorted((k, d) for k, d in seen.items() if k not in intact))
    store = Store(out, mode="w")
    try:
        for key in sorted(intact):
            store.put_stored(intact[key])
    finally:
        store.close()
    result = Salvaged(source, out / "store.sqlite", tuple(sorted(intact)), lost, f.read,
                      f.size)
    write_atomic(out / "salvage.json", lambda tmp: tmp.write_text(json.dumps({
        "source": str(source), "page_size": f.size, "pages_read": f.read,
        "recovered": list(result.recovered),
        "lost": [{"key": k, "cell": d} for k, d in lost]}, indent=1) + "\n"))
    return result
