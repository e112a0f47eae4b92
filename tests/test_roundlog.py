"""Per-round logs (learning.roundlog, --log-dir): rounds.csv holds exactly the run's rows,
round by round, and the TensorBoard events exactly each round's means over clients; a run
resumed from a checkpoint logs no round twice."""

import pandas as pd
import pytest

from learning.algorithms import TrainConfig, run
from learning.checkpoint import Checkpoint
from learning.roundlog import RoundLog, round_scalars

CFG = TrainConfig(algorithm="ipfl", dataset="digits", clients=5, rounds=4, steps=3, batch=8,
                  beta=0.5, lam=2.0, evaluate_every=2)


def logged_rows(folder) -> pd.DataFrame:
    return pd.read_csv(folder / "rounds.csv")


def events(folder) -> dict:
    """{tag: [(step, value)]} of the TensorBoard event files in ``folder``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def expected_events(frame) -> dict:
    out: dict = {}
    for t, g in frame.drop(columns="acc_personalised_best").groupby("round"):
        for tag, v in round_scalars(g.reset_index(drop=True)).items():
            out.setdefault(tag, []).append((t, v))
    return out


def assert_log_matches(folder, res):
    rows = logged_rows(folder)
    want = res.frame.drop(columns="acc_personalised_best")
    pd.testing.assert_frame_equal(rows, want, check_dtype=False, check_exact=True)
    got, exp = events(folder), expected_events(res.frame)
    assert set(got) == set(exp)
    for tag, pts in exp.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in pts], tag  # every round once
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in pts], rel=1e-6), tag


def test_log_holds_the_runs_rows_and_means(tmp_path):
    pytest.importorskip("tensorboard")
    res = run(CFG, log=RoundLog(tmp_path, tensorboard=True))
    assert_log_matches(tmp_path, res)
    exp = expected_events(res.frame)
    assert [s for s, _ in exp["acc_personalised/mean"]] == [0, 2, 3]  # measured rounds only
    assert len(exp["acc_val/mean"]) == CFG.rounds and "utility/sum" in exp


def test_known_bad_log_is_caught(tmp_path):
    """The check above rejects a log that lost a round or logged one twice."""
    pytest.importorskip("tensorboard")
    res = run(CFG, log=RoundLog(tmp_path, tensorboard=True))
    rows = logged_rows(tmp_path)
    twice = pd.concat([rows, rows[rows["round"] == 1]])
    twice.to_csv(tmp_path / "rounds.csv", index=False)
    with pytest.raises(AssertionError):
        assert_log_matches(tmp_path, res)


def test_resumed_run_logs_every_round_once(tmp_path):
    pytest.importorskip("tensorboard")

    class Stop(Exception):
        pass

    def stop(done, total):
        if done == 3:
            raise Stop

    ck = Checkpoint(tmp_path / "ck.pt")
    with pytest.raises(Stop):
        run(CFG, stop, checkpoint=ck, log=RoundLog(tmp_path / "log", tensorboard=True))
    # as after a kill between the log and the checkpoint: the log holds a round more
    rows = logged_rows(tmp_path / "log")
    rows[rows["round"] == 2].assign(round=3).to_csv(tmp_path / "log" / "rounds.csv",
                                                    mode="a", header=False, index=False)
    assert ck.saved_rounds() == 3
    res = run(CFG, checkpoint=ck, log=RoundLog(tmp_path / "log", tensorboard=True))
    assert res.resumed_from == 3
    assert_log_matches(tmp_path / "log", res)


def test_csv_only_without_tensorboard(tmp_path):
    res = run(CFG, log=RoundLog(tmp_path, tensorboard=False))
    assert not list(tmp_path.glob("events.*"))
    pd.testing.assert_frame_equal(logged_rows(tmp_path),
                                  res.frame.drop(columns="acc_personalised_best"),
                                  check_dtype=False, check_exact=True)
    assert (tmp_path / "config.json").is_file()


def test_sweep_log_dir(tmp_path):
    """A sweep's --log-dir: one folder per learning cell, holding the cell's stored rows."""
    from sims.sweep import Store, expand, log_path, run_sweep

    cells = expand({"seeds": [0], "scenarios": [
        {"name": "ipfl-learning", "mechanisms": ["local"], "params": {"rounds": 2}}]})
    run_sweep(cells, tmp_path / "s", log_dir=tmp_path / "logs")
    st = Store(tmp_path / "s", mode="r")
    stored = st.frame()
    st.close()
    rows = logged_rows(log_path(tmp_path / "logs", cells[0]))
    assert rows["round"].tolist() == stored["round"].tolist()
    assert rows.acc_val.tolist() == stored.acc_val.tolist()


def test_train_log_dir(tmp_path, monkeypatch):
    """fedmarket train --log-dir: one folder per algorithm, its rows those of the run's table;
    a --log-dir that is a file is one line (exit 2), before any training."""
    from sims.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["train", "--dataset", "digits", "--clients", "4", "--rounds", "2", "--steps", "2",
            "--algorithm", "local", "fedavg", "--out", "t", "--log-dir", "logs", "--quiet"]
    assert main(argv) == 0
    for alg in ("local", "fedavg"):
        table = pd.read_parquet(tmp_path / "t" / f"{alg}.parquet")
        rows = logged_rows(tmp_path / "logs" / alg)
        assert rows.acc_val.tolist() == table.acc_val.tolist()
    (tmp_path / "afile").write_text("")
    assert main([*argv[:-3], "--log-dir", "afile", "--quiet"]) == 2
