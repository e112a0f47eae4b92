"""Sweeps: grid expansion, resume, kill -9 and resume, determinism across executors, TOML
specs with a user's own rule, and the report."""

import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from mechanisms.errors import MarketInputError
from sims.cli import main
from sims.sweep import Store, expand, run_sweep

SPEC = {"seeds": [0, 1], "scenarios": [
    {"name": "inclusive-market", "mechanisms": ["box2", "local"],
     "params": {"rounds": 2, "n_params": 200, "attack": ["gaussian", "same"]}},
    {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform"], "seeds": [0],
     "params": {"clients": 8, "budget": [5.0, 10.0]}},
]}


def _sorted(df):
    cols = [c for c in df.columns if c != "versions"]
    return df[cols].sort_values(["cell", *[c for c in ("round", "client") if c in df]]) \
        .reset_index(drop=True)


def test_expand_counts_and_checks():
    cells = expand(SPEC)
    assert len(cells) == 2 * 2 * 2 + 2 * 2  # mechanisms x attacks x seeds + schemes x budgets
    assert len({c.key for c in cells}) == len(cells)
    with pytest.raises(MarketInputError, match="scenario"):
        expand({"scenarios": [{"name": "nope"}]})
    with pytest.raises(MarketInputError, match="no parameter"):
        expand({"scenarios": [{"name": "liars", "params": {"colour": 1}}]})


def test_resume_skips_finished_cells(tmp_path):
    cells = expand(SPEC)
    first = run_sweep(cells[:5], tmp_path)
    again = run_sweep(cells, tmp_path)
    assert first["ran"] == 5 and again["skipped"] == 5 and again["ran"] == len(cells) - 5
    store = Store(tmp_path)
    keys = store.cells().key
    assert keys.is_unique and len(keys) == len(cells)
    store.close()


def test_the_first_cell_is_committed_at_once_then_commits_are_batched(tmp_path):
    # what a crash keeps must not depend on the host's speed: the first cell is committed
    # at once (another connection sees it), later ones only when commit_every has passed
    import sqlite3

    cells = expand(SPEC)
    run_sweep(cells[:3], tmp_path / "src")
    src = Store(tmp_path / "src", mode="r")
    rows = src.frame()
    src.close()
    store = Store(tmp_path / "w")

    def visible():
        db = sqlite3.connect(store.path)
        try:
            return db.execute("SELECT count(*) FROM cells").fetchone()[0]
        finally:
            db.close()

    for i, cell in enumerate(cells[:3]):
        df = rows[rows.cell == cell.key].drop(columns="versions")
        store.put(cell, df, 0.0, "v", "h", "c", commit_every=3600.0)
        assert visible() == 1, i  # the first at once; the next two wait for the interval
    store.flush()
    assert visible() == 3
    store.close()


def test_serial_and_processes_give_identical_rows(tmp_path):
    cells = expand(SPEC)
    run_sweep(cells, tmp_path / "s", executor="serial")
    run_sweep(cells, tmp_path / "p", executor="processes", workers=2)
    a, b = Store(tmp_path / "s"), Store(tmp_path / "p")
    pd.testing.assert_frame_equal(_sorted(a.frame()), _sorted(b.frame()))
    a.close()
    b.close()


@pytest.mark.serial
def test_kill_9_and_resume_loses_and_duplicates_nothing(tmp_path):
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(textwrap.dedent("""
        seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
        [[scenarios]]
        name = "inclusive-market"
        mechanisms = ["box2", "local", "exact"]
        params = { rounds = 3, n_params = 3000 }
    """))
    out = tmp_path / "store"
    cmd = [sys.executable, "-m", "sims.cli", "sweep", str(spec_file), "--out", str(out),
           "--quiet"]
    proc = subprocess.Popen(cmd)
    deadline = time.time() + 120
    n_before = 0
    while time.time() < deadline:  # wait until some, but not all, cells are stored
        time.sleep(0.05)
        if (out / "store.sqlite").exists():
            try:  # read-only: a writer's lock must not hide the cells already committed
                s = Store(out, mode="r")
                n_before = len(s.done())
                s.close()
            except Exception:  # the database may be mid-creation
                continue
            if n_before >= 3:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 3 <= n_before < 60, n_before
    subprocess.run(cmd, check=True)
    s = Store(out)
    cells = s.cells()
    assert len(cells) == 60 and cells.key.is_unique
    resumed = s.frame()
    s.close()
    clean = tmp_path / "clean"
    run_sweep(expand({"seeds": list(range(20)), "scenarios": [
        {"name": "inclusive-market", "mechanisms": ["box2", "local", "exact"],
         "params": {"rounds": 3, "n_params": 3000}}]}), clean)
    c = Store(clean)
    pd.testing.assert_frame_equal(_sorted(resumed), _sorted(c.frame()))
    c.close()


@pytest.mark.slow
def test_toml_with_a_users_rule_and_report(tmp_path, capsys):
    (tmp_path / "myrules.py").write_text(textwrap.dedent("""
        import numpy as np
        def top_one(market, D, T, P):
            # buy only the single best seller, if it is worth it
            A = np.zeros(T.shape, dtype=bool)
            best = T.argmax(axis=1)
            ok = T[np.arange(len(best)), best] > market.N[best]
            A[np.arange(len(best))[ok], best[ok]] = True
            return A
    """))
    spec = tmp_path / "mine.toml"
    spec.write_text(textwrap.dedent("""
        seeds = [0]
        [[scenarios]]
        name = "inclusive-market"
        mechanisms = ["local", "myrules:top_one"]
        params = { rounds = 3, n_params = 500 }
    """))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--report"]) == 0
    s = Store(out)
    df = s.frame()
    s.close()
    assert set(df.mechanism) == {"local", "myrules:top_one"}
    mine = df[df.mechanism == "myrules:top_one"]
    assert (mine.n_bought <= 1).all()
    text = (out / "report.md").read_text()
    assert "Inclusive market" in text and "myrules:top_one" in text
    assert (out / "transaction_graph_local.png").exists() and (out / "report.html").exists()
    assert (out / "transaction_graph_myrules_top_one.png").exists()  # one per mechanism
    assert "Property verdicts per mechanism" in text and "utility_by_role.png" in text
    verdicts = pd.read_csv(out / "inclusive_verdicts.csv").set_index("mechanism")
    assert verdicts.loc["local", "truthful_K_under"].startswith("fails (regret")
    assert verdicts.loc["local", "budget_balance"] == ("holds (10,000 discriminating of 10,000 "
                                                        "effective, batch)")
    # the user's rule is cleared market by market: each cell says what it reached
    assert all(v.startswith(("holds", "inconclusive", "fails", "vacuous"))
               for v in verdicts.loc["myrules:top_one"])
    assert {"config_hash", "seed_entropy", "cell"} <= set(df.columns)


def test_bad_sweep_inputs(tmp_path, capsys):
    assert main(["sweep", "--out", str(tmp_path)]) == 2
    assert main(["sweep", "--preset", "huge", "--out", str(tmp_path)]) == 2
    assert main(["report", str(tmp_path / "nothing")]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[[scenarios]]\nname = 'inclusive-market'\nmechanisms = ['nomodule:fn']\n"
                   "params = { rounds = 1, n_params = 100 }\n")
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "mechanism" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.serial
def test_ray_executor_on_a_local_instance(tmp_path):
    """The same sweep on a local Ray instance gives the same rows as the serial executor."""
    ray = pytest.importorskip("ray")
    cells = expand(SPEC)
    try:
        run_sweep(cells, tmp_path / "ray", executor="ray", workers=2)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    run_sweep(cells, tmp_path / "serial")
    a, b = Store(tmp_path / "ray"), Store(tmp_path / "serial")
    pd.testing.assert_frame_equal(_sorted(a.frame()), _sorted(b.frame()))
    a.close()
    b.close()


@pytest.mark.serial
def test_ctrl_c_during_a_process_pool_is_taken_between_steps():
    """While a pool runs, SIGINT only sets a flag that the pool loop turns into
    KeyboardInterrupt at a safe point (an interrupt raised inside concurrent.futures' own
    bookkeeping can leave its locks held and the shutdown waiting forever); the previous
    handler comes back afterwards. Known-bad: the same signal outside it raises at once."""
    import os
    import signal as sig

    from mechanisms.processes import ctrl_c_between_steps

    # Ctrl-C as a terminal gives it (a background job, CI's included, starts with SIGINT
    # ignored, and then the pool keeps ignoring it: checked last)
    outer = sig.signal(sig.SIGINT, sig.default_int_handler)
    try:
        with ctrl_c_between_steps() as interrupted:
            assert not interrupted()
            os.kill(os.getpid(), sig.SIGINT)
            time.sleep(0.05)  # the handler runs between bytecodes: nothing raised here
            assert interrupted()
        assert sig.getsignal(sig.SIGINT) is sig.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig.SIGINT)
            time.sleep(0.05)
        sig.signal(sig.SIGINT, sig.SIG_IGN)
        with ctrl_c_between_steps() as interrupted:
            os.kill(os.getpid(), sig.SIGINT)
            time.sleep(0.05)
            assert not interrupted()  # still ignored
        assert sig.getsignal(sig.SIGINT) == sig.SIG_IGN
    finally:
        sig.signal(sig.SIGINT, outer)
