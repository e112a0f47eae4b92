"""Nothing loaded from disk executes (issue 33, part 2): a results store, a checkpoint or a
CIFAR-10 batch crafted to run a shell command (a pickle whose ``__reduce__`` calls
``os.system('touch MARKER')``) is refused in one line, and the marker file never appears.
The payload itself is live: unpickled, it does create the marker (the known-bad reader)."""

import hashlib
import json
import os
import pickle
import shlex
import sqlite3

import numpy as np
import pandas as pd
import pytest

from sims.cli import main
from sims.errors import StoreError
from sims.store import COLUMNS, PICKLED_COLUMNS, Store, decode_rows, digest, encode_rows
from sims.sweep import expand, run_sweep

FAST = {"seeds": [0], "scenarios": [
    {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform"],
     "params": {"clients": 4, "budget": [5.0]}}]}


class _Touch:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def payload(marker) -> bytes:
    """A pickle that runs ``touch MARKER`` when loaded."""
    return pickle.dumps(_Touch(marker))


def test_the_payload_runs_when_unpickled(tmp_path):
    """The known-bad reader: plain unpickling runs the command, so a marker absent after the
    tests below means the payload was never run, not that it could not run."""
    marker = tmp_path / "MARKER"
    pickle.loads(payload(marker))
    assert marker.exists()


def _one_line_naming(capsys, *words) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for w in words:
        assert w in err[0], err[0]
    return err[0]


def _reproduce_cell():
    from sims.reproduce import spec

    return expand(spec("reduced", (0,)))[0]


def _store_with_row(folder, columns, blob, dig, cell):
    folder.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(folder / "store.sqlite")
    db.execute(f"CREATE TABLE cells ({', '.join(columns)}, PRIMARY KEY (key))")
    db.execute(f"INSERT INTO cells VALUES ({', '.join('?' * len(columns))})",
               (cell.key, cell.scenario, cell.mechanism, json.dumps(dict(cell.params)),
                cell.seed, 1.0, "fedmarket=0.1.0", 0.0, "h", "c", dig, blob))
    db.commit()
    db.close()


def test_a_pickled_store_of_the_earlier_format_is_refused_unread(tmp_path, capsys):
    """A store of format 1 (rows pickled, an unkeyed SHA-1 beside them): report, reproduce
    --no-run and a resumed sweep refuse it in one line saying how to compute it again; the
    pickle is never loaded."""
    marker = tmp_path / "MARKER"
    blob = payload(marker)
    out = tmp_path / "old"
    _store_with_row(out, PICKLED_COLUMNS, blob, hashlib.sha1(blob).hexdigest(),
                    _reproduce_cell())
    assert main(["report", str(out), "--out", str(tmp_path / "rep"),
                 "--verdict-examples", "0"]) == 2
    _one_line_naming(capsys, "store.sqlite", "pickled", "compute the cells again")
    assert main(["reproduce", "--no-run", "--seeds", "0", "--out", str(out), "--docs",
                 str(tmp_path / "page.md")]) == 2
    _one_line_naming(capsys, "store.sqlite", "pickled")
    (tmp_path / "fast.toml").write_text(
        'seeds = [0]\n[[scenarios]]\nname = "cpl-pricing"\nmechanisms = ["bisection"]\n')
    assert main(["sweep", str(tmp_path / "fast.toml"), "--out", str(out), "--quiet"]) == 2
    _one_line_naming(capsys, "store.sqlite", "pickled")
    with pytest.raises(StoreError, match="pickled"):
        Store(out, mode="r")
    assert not marker.exists()


def test_a_crafted_row_with_a_matching_digest_is_refused_unread(tmp_path, capsys):
    """Anyone can recompute the digest (it is a checksum, not a signature): a row holding a
    pickle under a correct SHA-256 is refused as not Parquet, naming the cell, by the report,
    reproduce --no-run and the API; it never runs."""
    marker = tmp_path / "MARKER"
    blob = payload(marker)
    cell = _reproduce_cell()
    out = tmp_path / "crafted"
    _store_with_row(out, COLUMNS, blob, digest(blob), cell)
    store = Store(out, mode="r")
    assert store.verify() == 1  # the digest matches: only reading the rows can tell
    with pytest.raises(StoreError, match=f"cell {cell.key} .* is not a Parquet table"):
        store.frame()
    store.close()
    assert main(["report", str(out), "--out", str(tmp_path / "rep"),
                 "--verdict-examples", "0"]) == 2
    _one_line_naming(capsys, cell.key, "not a Parquet table")
    assert main(["reproduce", "--no-run", "--seeds", "0", "--out", str(out), "--docs",
                 str(tmp_path / "page.md")]) == 2
    _one_line_naming(capsys, cell.key, "not a Parquet table")
    assert not marker.exists()


def test_stored_rows_are_parquet_of_plain_columns_only(tmp_path):
    """What a store holds: every dtype a scenario writes comes back exactly (values, dtypes,
    index); a column of another kind is refused when written and when read, naming it."""
    df = pd.DataFrame({"scenario": ["a", "b", "c"], "seed": np.arange(3),
                       "utility": [1.5, np.nan, -np.inf], "loss": np.float32([1, 2, 3]),
                       "active": [True, False, True], "n_sold": [0.0, 1.0, 2.0]})
    back = decode_rows(encode_rows(df))
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert back.index.equals(pd.RangeIndex(3))
    with pytest.raises(StoreError, match="'blobs'"):
        encode_rows(df.assign(blobs=[b"x", b"y", b"z"]))
    import pyarrow as pa
    import pyarrow.parquet as pq

    for column in (pa.array([b"x"]), pa.array([[1, 2]]), pa.array([{"a": 1}])):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"odd": column}), sink)
        with pytest.raises(StoreError, match="'odd'"):
            decode_rows(sink.getvalue().to_pybytes())
    with pytest.raises(StoreError, match="not a Parquet table"):
        decode_rows(b"PAR1 and then nothing")
    # the store writes exactly these bytes, under their SHA-256
    run_sweep(expand(FAST), tmp_path / "s")
    db = sqlite3.connect(tmp_path / "s" / "store.sqlite")
    for dig, blob in db.execute("SELECT digest, parquet FROM cells"):
        assert blob[:4] == b"PAR1" and dig == hashlib.sha256(blob).hexdigest()
    db.close()


LEARNING_SPEC = ('seeds = [0]\n[[scenarios]]\nname = "ipfl-learning"\nmechanisms = '
                 '["fedavg"]\nparams = { rounds = 2, steps = 1, clients = 4 }\n')


def _learning_cell(tmp_path):
    from sims.sweep import load_toml

    spec = tmp_path / "learn.toml"
    spec.write_text(LEARNING_SPEC)
    return spec, expand(load_toml(spec))[0]


def test_the_torch_payload_runs_when_loaded_unsafely(tmp_path):
    """The known-bad reader: torch.load(weights_only=False) of the crafted checkpoint runs
    the command (what a resumed sweep did before issue 33)."""
    import torch

    marker = tmp_path / "MARKER"
    torch.save({"format": 1, "session": _Touch(marker)}, tmp_path / "ck.pt")
    torch.load(tmp_path / "ck.pt", weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("name", [".pt", ".safetensors"],
                         ids=["old-name", "current-name"])
def test_a_crafted_torch_checkpoint_is_refused_before_any_cell(tmp_path, capsys, name):
    """A torch pickle that runs a command, left as a cell's checkpoint (under the name
    fedmarket used before issue 33, or the current one): the resumed sweep refuses it in one
    line naming the file, before any cell runs; nothing is stored and the payload never
    runs. Through the API, loading it is a CheckpointError."""
    import torch

    from learning.checkpoint import Checkpoint, CheckpointError
    from sims.scenarios import SCENARIOS

    marker = tmp_path / "MARKER"
    spec, cell = _learning_cell(tmp_path)
    path = tmp_path / "out" / "checkpoints" / f"{cell.key}{name}"
    path.parent.mkdir(parents=True)
    torch.save({"format": 1, "session": _Touch(marker)}, path)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    _one_line_naming(capsys, str(path), "torch pickle", "delete it")
    assert not (tmp_path / "out" / "store.sqlite").exists() or \
        Store(tmp_path / "out", mode="r", allow_empty=True).done() == {}
    cfg = SCENARIOS[cell.scenario].make_config(dict(cell.params), cell.seed)
    with pytest.raises(CheckpointError, match="torch pickle") as info:
        Checkpoint(path).load(cfg)
    assert info.value.field == "checkpoint" and "\n" not in str(info.value)
    assert not marker.exists()


def test_a_crafted_safetensors_checkpoint_is_refused(tmp_path):
    """A safetensors file is data, but its JSON tree is checked too: an unknown kind of
    object, a generator that is not numpy's, a tensor the file lacks, another format: each
    is a one-line CheckpointError naming the file (nothing is looked up by name but the five
    numpy bit generators)."""
    from safetensors.numpy import save

    from learning.algorithms import TrainConfig
    from learning.checkpoint import Checkpoint, CheckpointError

    cfg = TrainConfig(algorithm="local", dataset="digits", clients=2, rounds=1, steps=1)
    path = tmp_path / "ck.safetensors"

    def tree(session, **kw):
        return {"format": 2, "tag": "", "rounds": 1, "seconds": 0.0,
                "config": {"$": "dict", "keys": [], "values": []}, "rows": [],
                "session": session, **kw}

    good = Checkpoint(path)
    good.save(cfg, 1, [], 0.0, {"g": np.random.default_rng(3), "x": np.arange(3)})
    saved = good.load(cfg)
    assert saved.rounds == 1 and saved.session["x"].tolist() == [0, 1, 2]
    assert saved.session["g"].random() == np.random.default_rng(3).random()
    for bad, why in [
        (tree({"$": "pickle", "data": "gASV"}), "kind 'pickle'"),
        (tree({"$": "generator", "bit_generator": "os.system", "state": {}}),
         "generator 'os.system'"),
        (tree({"$": "tensor", "name": "t9"}), "tensor 't9'"),
        (tree([], format=1), "format 1"),
        ({"format": 2}, "no valid 'rounds'"),
    ]:
        path.write_bytes(save({"t0": np.zeros(1)},
                              metadata={"fedmarket-checkpoint": json.dumps(bad)}))
        with pytest.raises(CheckpointError, match=why) as info:
            Checkpoint(path).load(cfg)
        assert str(path) in str(info.value) and "\n" not in str(info.value)
    path.write_bytes(save({"t0": np.zeros(1)}))  # safetensors, but no fedmarket tree
    with pytest.raises(CheckpointError, match="not a fedmarket checkpoint"):
        Checkpoint(path).load(cfg)


def test_a_carry_that_is_not_data_is_refused_when_saved(tmp_path):
    """What cannot be stored as data (an object, a function) is refused when the
    checkpoint is written, naming where it sits; frames keep their dtypes exactly."""
    from learning.algorithms import TrainConfig
    from learning.checkpoint import Checkpoint, CheckpointError

    cfg = TrainConfig(algorithm="local", dataset="digits", clients=2, rounds=1, steps=1)
    ck = Checkpoint(tmp_path / "ck.safetensors")
    with pytest.raises(CheckpointError, match=r"session\['carry'\]\['f'\] holds a function"):
        ck.save(cfg, 1, [], 0.0, {"carry": {"f": lambda: 0}})
    assert not ck.path.exists()
    frame = pd.DataFrame({"algorithm": "local", "round": 0, "client": np.arange(3),
                          "role": ["a", "b", "c"], "active": [True, False, True],
                          "loss": np.float32([1, 2, np.nan]), "utility": [1.0, -np.inf, 0]})
    ck.save(cfg, 1, [frame, frame.assign(round=1)], 2.5, {"t": (1, None, 2.5)})
    saved = ck.load(cfg)
    pd.testing.assert_frame_equal(saved.rows[0], frame, check_exact=True)
    assert saved.rows[1]["round"].tolist() == [1, 1, 1]
    assert saved.session == {"t": (1, None, 2.5)} and saved.seconds == 2.5


def test_a_crafted_cifar_batch_is_refused_unrun(tmp_path, cifar_batches, capsys):
    """CIFAR-10's python batches are pickles by the format's own design: read with an
    unpickler that refuses every callable but numpy's array reconstruction, so the payload
    is refused in one line naming the file; an array of objects is refused too."""
    from learning import data
    from mechanisms.errors import MarketInputError

    marker = tmp_path / "MARKER"
    folder = tmp_path / "cifar"
    cifar_batches(folder)
    (folder / "test_batch").write_bytes(payload(marker))
    with pytest.raises(MarketInputError, match="system is not allowed") as info:
        data.load_cifar10(folder)
    assert str(folder / "test_batch") in str(info.value) and "\n" not in str(info.value)
    assert main(["train", "--dataset", "cifar10", "--data-dir", str(folder), "--rounds", "1",
                 "--clients", "2", "--steps", "1"]) == 2
    _one_line_naming(capsys, str(folder / "test_batch"), "system is not allowed")
    with open(folder / "test_batch", "wb") as f:
        pickle.dump({b"data": np.array([1, 2], dtype=object), b"labels": []}, f)
    with pytest.raises(MarketInputError, match="numeric arrays"):
        data.load_cifar10(folder)
    assert not marker.exists()


def test_a_crafted_flower_run_folder_is_refused_unrun(tmp_path, capsys):
    """`fedmarket recheck` of a Flower run folder whose arrays are pickled objects (numpy's
    own format can carry a pickle): refused in one line naming the file, never unpickled
    (numpy's default already refused them, but with a traceback)."""
    marker = tmp_path / "MARKER"
    run = tmp_path / "run"
    (run / "rounds").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"algorithm": "ipfl"}))
    np.save(run / "reference.npy", np.array([_Touch(marker)], dtype=object),
            allow_pickle=True)
    assert main(["recheck", str(run)]) == 2
    _one_line_naming(capsys, "reference.npy", "not a file of numeric arrays")
    (run / "reference.npy").unlink()
    (run / "rounds" / "round-001.json").write_text(json.dumps({"round": 1,
                                                               "upload_digests": {}}))
    np.savez(run / "rounds" / "round-001.npz", w=np.array([_Touch(marker)], dtype=object))
    assert main(["recheck", str(run)]) == 2
    _one_line_naming(capsys, "round-001.npz", "not a file of numeric arrays")
    assert not marker.exists()
    np.load(run / "rounds" / "round-001.npz", allow_pickle=True)["w"]  # the known-bad reader
    assert marker.exists()


def test_a_checkpoint_whose_header_length_starts_like_a_pickle_loads(tmp_path):
    """A safetensors file opens with its header's length (8 bytes, little-endian): one in
    32 lengths starts with the byte 0x80 that opens a pickle. Such a checkpoint is read as
    what it is (a reader that sniffed the first byte first refused it)."""
    from learning.algorithms import TrainConfig
    from learning.checkpoint import Checkpoint

    cfg = TrainConfig(algorithm="local", dataset="digits", clients=2, rounds=1, steps=1)
    ck = Checkpoint(tmp_path / "ck.safetensors")
    ck.save(cfg, 1, [], 0.0, {"pad": ""})
    near = (0x80 - ck.path.read_bytes()[0]) % 256  # about this many more header bytes
    for k in range(max(near - 8, 0), near + 8):  # (a string's char adds one)
        ck.save(cfg, 1, [], 0.0, {"pad": "x" * k})
        if ck.path.read_bytes()[:1] == b"\x80":
            break
    assert ck.path.read_bytes()[:1] == b"\x80"
    assert ck.load(cfg).session == {"pad": "x" * k} and ck.saved_rounds() == 1


def test_every_old_checkpoint_is_counted_in_the_one_line(tmp_path):
    """Several cells' checkpoints of the earlier format: one refusal counts them all and
    says how to remove them, so the user deletes them once, not one rerun per file."""
    from learning.checkpoint import CheckpointError
    from sims.sweep import check_checkpoints, load_toml

    spec = tmp_path / "two.toml"
    spec.write_text(LEARNING_SPEC.replace('["fedavg"]', '["fedavg", "local"]'))
    cells = expand(load_toml(spec))
    for c in cells:
        (tmp_path / f"{c.key}.pt").write_bytes(b"PK\x03\x04 a torch zip")
    with pytest.raises(CheckpointError, match="and 1 more are torch pickles") as info:
        check_checkpoints(tmp_path, cells)
    assert f"rm {tmp_path}/*.pt" in str(info.value) and "\n" not in str(info.value)
    for p in tmp_path.glob("*.pt"):
        p.unlink()
    check_checkpoints(tmp_path, cells)  # none left: nothing to refuse
