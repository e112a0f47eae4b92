"""Salvage (issue 33, part 4): the intact cells of a store cut short or with a page of
garbage come back, byte for byte, into a new store with one command; the lost ones are
counted and named; every refusal is one line.

Which cells a damage must lose is found here without the salvage's page reader: from
SQLite's own page accounting of the intact store (its dbstat table lists every leaf and
overflow page of the cells table by b-tree path; in b-tree order the cells are the rows in
rowid order), so a cell is lost exactly when one of its pages is."""

import json
import os
import random
import shutil
import sqlite3

import pytest

from sims.cli import main
from sims.errors import StoreError
from sims.salvage import salvage
from sims.store import COLUMNS, Store
from sims.sweep import expand, run_sweep

SPEC = {"seeds": [0, 1, 2], "scenarios": [
    {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform"],
     "params": {"clients": 6, "budget": [5.0, 10.0, 15.0, 20.0]}}]}
PAGE = 4096
# the same bytes every run, so the same damage (the first byte no kind of b-tree page)
GARBAGE = b"\xff" + random.Random(0).randbytes(PAGE - 1)


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    """A finished store of 24 cells (each cell's rows span a few overflow pages)."""
    out = tmp_path_factory.mktemp("salvage") / "intact"
    run_sweep(expand(SPEC), out)
    return out


def _pages(folder) -> dict[str, tuple[int, set[int]]]:
    """{key: (its leaf page, every page holding its record and rows)} of an intact store,
    from SQLite's dbstat (pages numbered from 1)."""
    db = sqlite3.connect(folder / "store.sqlite")
    try:
        stat = db.execute("SELECT path, pageno, pagetype, ncell FROM dbstat "
                          "WHERE name = 'cells' ORDER BY path").fetchall()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        keys = [k for (k,) in db.execute("SELECT key FROM cells ORDER BY rowid")]
        db.close()
    leaves = {path: page for path, page, kind, _ in stat if kind == "leaf"}
    cells = {(path, c): (page, {page}) for path, page, kind, n in stat if kind == "leaf"
             for c in range(n)}
    for path, page, kind, _ in stat:
        if kind == "overflow":  # "/000/003+000001": cell 3 of leaf /000/, its 2nd page
            leaf, cell = path.rsplit("/", 1)
            cells[(leaf + "/", int(cell.split("+")[0]))][1].add(page)
    assert len(cells) == len(keys) and set(leaves.values()) == {v[0] for v in cells.values()}
    return dict(zip(keys, (cells[k] for k in sorted(cells)), strict=True))


def _rows(folder) -> dict:
    db = sqlite3.connect(folder / "store.sqlite")
    try:
        return {r[0]: r for r in db.execute(f"SELECT {', '.join(COLUMNS)} FROM cells")}
    finally:
        db.close()


def _damaged_copy(intact, tmp_path, damage) -> tuple:
    broken = tmp_path / "broken"
    shutil.copytree(intact, broken)
    with open(broken / "store.sqlite", "r+b") as fh:
        damage(fh)
    return broken, (broken / "store.sqlite").read_bytes()


def _check_salvaged(intact, new, result, must_lose) -> None:
    """Every cell of the intact store is recovered byte for byte (every column) or named as
    lost; exactly ``must_lose`` are lost."""
    before, after = _rows(intact), _rows(new)
    assert set(result.recovered) == set(after)
    assert {k for k, _ in result.lost} == must_lose
    assert set(after) | must_lose == set(before) and not set(after) & must_lose
    for key, row in after.items():
        assert row == before[key], key  # key, metadata, finished, digest and Parquet bytes
    report = json.loads((new / "salvage.json").read_text())
    assert report["recovered"] == sorted(after)
    assert [x["key"] for x in report["lost"]] == sorted(must_lose)
    store = Store(new, mode="r")
    assert store.verify() == len(after)
    store.close()


def test_an_intact_store_is_copied_whole(intact, tmp_path):
    result = salvage(intact, tmp_path / "copy")
    _check_salvaged(intact, tmp_path / "copy", result, set())
    a, b = Store(intact, mode="r"), Store(tmp_path / "copy", mode="r")
    assert a.frame().equals(b.frame())
    a.close()
    b.close()
    assert result.summary().endswith("none lost")


def test_a_page_of_garbage_loses_only_the_cells_on_it(intact, tmp_path, capsys):
    """An overflow page of one cell's rows overwritten: that cell alone is lost, named with
    its scenario, mechanism and seed; the report's refusal is one line (it printed 12 before
    issue 33) naming the salvage; a sweep with the same spec into the new store computes
    just the lost cell, with the numbers of the intact store."""
    pages = _pages(intact)
    key, row = sorted(_rows(intact).items())[5]
    page = max(pages[key][1] - {pages[key][0]}) - 1  # an overflow page (0-based here)
    assert [k for k, (_, p) in pages.items() if page + 1 in p] == [key]
    broken, _ = _damaged_copy(intact, tmp_path, lambda fh: (fh.seek(page * PAGE),
                                                             fh.write(GARBAGE)))
    db = sqlite3.connect(broken / "store.sqlite")  # SQLite's own answer: several lines
    said = "\n".join(r for (r,) in db.execute("PRAGMA quick_check"))
    db.close()
    assert len(said.splitlines()) > 1, said  # which the refusal printed as it came
    assert main(["report", str(broken), "--out", str(tmp_path / "rep"),
                 "--verdict-examples", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is corrupt (SQLite: " in err[0], err
    assert "***" not in err[0] and "fedmarket salvage" in err[0], err
    assert main(["salvage", str(broken), "--out", str(tmp_path / "new")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"salvaged {len(expand(SPEC)) - 1} of the 24 cells" in err[0]
    assert f"{key} (cpl-pricing / {row[2]} / seed {row[4]})" in err[0], err
    result = salvage(broken, tmp_path / "again")
    _check_salvaged(intact, tmp_path / "again", result, {key})
    stats = run_sweep(expand(SPEC), tmp_path / "new")
    assert stats["ran"] == 1 and stats["skipped"] == 23
    a, b = Store(intact, mode="r"), Store(tmp_path / "new", mode="r")
    assert a.frame().drop(columns="seconds", errors="ignore").equals(
        b.frame().drop(columns="seconds", errors="ignore"))
    a.close()
    b.close()


def test_a_leaf_page_of_garbage_loses_its_cells_named_by_the_key_index(intact, tmp_path,
                                                                       monkeypatch):
    """A table leaf page overwritten: the cells whose records it held are lost; they are
    named from the key index, the rest recovered. Known-bad: a salvage that does not read
    the index leaves them unnamed, and the same check fails."""
    pages = _pages(intact)
    page = max(leaf for leaf, _ in pages.values())
    on_it = {k for k, (leaf, _) in pages.items() if leaf == page}
    assert 1 < len(on_it) < len(pages)
    broken, _ = _damaged_copy(intact, tmp_path, lambda fh: (fh.seek((page - 1) * PAGE),
                                                             fh.write(GARBAGE)))
    result = salvage(broken, tmp_path / "new")
    _check_salvaged(intact, tmp_path / "new", result, on_it)
    import sims.salvage

    monkeypatch.setattr(sims.salvage, "_INDEX_LEAF", -1)  # index pages never read
    blind = salvage(broken, tmp_path / "blind")
    assert not blind.lost
    with pytest.raises(AssertionError):
        _check_salvaged(intact, tmp_path / "blind", blind, on_it)


def test_a_garbage_root_page_hides_every_cell_from_sqlite_but_not_from_salvage(
        intact, tmp_path, capsys):
    """The table's root page (the b-tree's top) overwritten: SQLite reaches no cell (the
    refusal is one line); salvage reads the leaves directly and gets every cell back."""
    db = sqlite3.connect(intact / "store.sqlite")
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'cells'").fetchone()[0]
    db.close()
    broken, _ = _damaged_copy(intact, tmp_path, lambda fh: (fh.seek((root - 1) * PAGE),
                                                             fh.write(GARBAGE)))
    assert main(["sweep", "--out", str(broken), "--quiet", "--preset", "demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fedmarket salvage" in err[0], err
    result = salvage(broken, tmp_path / "new")
    _check_salvaged(intact, tmp_path / "new", result, set())


@pytest.mark.parametrize("damage", [lambda fh: fh.write(GARBAGE),
                                    lambda fh: (fh.seek(16), fh.write(b"\x04\x00"))],
                         ids=["page-1-garbage", "page-size-1024"])
def test_a_lost_file_header_still_gives_every_cell(intact, tmp_path, damage):
    """Page 1 (the file header, with the page size, and the table list) overwritten, or
    just its page size changed: the page size is found by trying each SQLite allows, and
    every cell comes back."""
    broken, _ = _damaged_copy(intact, tmp_path, damage)
    result = salvage(broken, tmp_path / "new")
    assert result.page_size == PAGE
    _check_salvaged(intact, tmp_path / "new", result, set())


@pytest.mark.parametrize("fraction", [0.4, 0.75])
def test_a_truncated_store_gives_back_the_cells_before_the_cut(intact, tmp_path, fraction):
    """The file cut short: a cell comes back when its record and all of its rows lie
    before the cut, and is named as lost otherwise."""
    pages = _pages(intact)
    size = (intact / "store.sqlite").stat().st_size
    cut = int(size * fraction)
    broken, _ = _damaged_copy(intact, tmp_path, lambda fh: fh.truncate(cut))
    survives = {k for k, (_, p) in pages.items() if max(p) * PAGE <= cut}
    assert survives and len(survives) < len(pages)
    result = salvage(broken, tmp_path / "new")
    _check_salvaged(intact, tmp_path / "new", result, set(_rows(intact)) - survives)


def test_the_write_ahead_log_of_a_killed_sweep_is_read(tmp_path):
    """A store copied while a sweep held it open (its committed cells still in
    store.sqlite-wal, as after kill -9): salvage reads the log's committed pages too."""
    out = tmp_path / "live"
    cells = expand(SPEC)[:6]
    run_sweep(cells, tmp_path / "ref")
    ref = Store(tmp_path / "ref", mode="r")
    store = Store(out)
    for row in _rows(tmp_path / "ref").values():
        store.put_stored(row)
    store.flush()
    ref.close()
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    for name in ("store.sqlite", "store.sqlite-wal"):
        shutil.copy(out / name, frozen / name)
    store.close()
    assert (frozen / "store.sqlite-wal").stat().st_size > 0
    no_wal = tmp_path / "no-wal"
    no_wal.mkdir()
    shutil.copy(frozen / "store.sqlite", no_wal / "store.sqlite")
    with pytest.raises(StoreError):  # without the log the file holds no cell
        salvage(no_wal, tmp_path / "n0")
    result = salvage(frozen, tmp_path / "new")
    _check_salvaged(tmp_path / "ref", tmp_path / "new", result, set())


def test_salvage_refusals_are_one_line(intact, tmp_path, capsys):
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "store.sqlite").write_bytes(os.urandom(3 * PAGE))
    cases = [
        (["salvage", str(tmp_path / "nothing"), "--out", str(tmp_path / "o1")], "no sweep store"),
        (["salvage", str(garbage), "--out", str(tmp_path / "o2")], "no fedmarket cell"),
        (["salvage", str(intact), "--out", str(intact)], "already holds a store"),
        (["salvage", str(intact)], "--out"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (argv, err)
    assert not (tmp_path / "o2").exists()
