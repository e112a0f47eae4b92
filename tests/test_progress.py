"""Progress of long runs: library calls take a callback; the CLI shows a bar on a terminal and
one line every so often on a log file (stderr not a terminal), nothing with --quiet."""

import io
import json
import re

import pytest

from sims.cli import main
from sims.cli.common import ProgressLines
from sims.errors import SpecError


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _lines(every, steps, total=100, first=0):
    """Feed ``(time, done)`` steps to a ProgressLines on a fake clock; its output lines."""
    clock, out = Clock(), io.StringIO()
    p = ProgressLines("cells", stream=out, every=every, clock=clock)
    p(first, total)
    for t, done in steps:
        clock.t = 100.0 + t
        p(done, total)
    p.close()
    return out.getvalue().splitlines()


def test_a_line_every_n_seconds_with_elapsed_and_time_left():
    # one cell every 4 s: lines at 12 s, 24 s, ... (every 10 s at most; 1 % per 4 s)
    lines = _lines(10.0, [(4.0 * k, k) for k in range(1, 8)])
    assert lines == ["cells: 3/100 (3 %), 12 s elapsed, about 6 min 28 s left",
                     "cells: 6/100 (6 %), 24 s elapsed, about 6 min 16 s left",
                     "cells: 7/100 (7 %), 28 s elapsed, about 6 min 12 s left"]  # the last


def test_after_the_first_line_one_at_every_5_percent_but_at_most_once_a_second():
    # 1 cell per 0.5 s: silent for 10 s, then a line at every 5 % (2.5 s), under every = 10 s
    lines = _lines(10.0, [(0.5 * k, k) for k in range(1, 36)])
    assert [ln.split(",")[0] for ln in lines] == [
        "cells: 20/100 (20 %)", "cells: 25/100 (25 %)", "cells: 30/100 (30 %)",
        "cells: 35/100 (35 %)"]
    # 1 cell per 0.01 s: 5 % in 0.05 s, but one line a second at most
    fast = _lines(10.0, [(0.01 * k, k) for k in range(1, 1301)], total=2000)
    assert [ln.split(",")[0] for ln in fast] == ["cells: 1000/2000 (50 %)",
                                                "cells: 1100/2000 (55 %)",
                                                "cells: 1200/2000 (60 %)",
                                                "cells: 1300/2000 (65 %)"]
    assert fast[0] == "cells: 1000/2000 (50 %), 10 s elapsed, about 10 s left"


def test_a_short_run_prints_nothing_and_resumed_work_does_not_count_toward_the_rate():
    assert _lines(10.0, [(0.05 * k, k) for k in range(1, 101)]) == []  # 5 s in all
    # 90 of 100 cells already done (a resumed sweep): the rate is of this run's 10 s per cell
    lines = _lines(10.0, [(10.0, 91), (20.0, 92)], first=90)
    assert lines[0] == "cells: 91/100 (91 %), 10 s elapsed, about 1 min 30 s left"
    assert lines[-1] == "cells: 92/100 (92 %), 20 s elapsed, about 1 min 20 s left"


@pytest.mark.parametrize("every", [-1.0, float("nan")])
def test_bad_interval_is_refused(every):
    with pytest.raises(SpecError, match="--progress-every"):
        ProgressLines("cells", every=every)


SPEC = """
seeds = [0, 1, 2]
[[scenarios]]
name = "cpl-pricing"
mechanisms = ["uniform", "bisection"]
params = {clients = 4}
"""


def test_sweep_prints_progress_lines_when_stderr_is_not_a_terminal(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "a"), "--progress-every",
                 "0"]) == 0
    err = capsys.readouterr().err.splitlines()
    # with every = 0 s, a line as each cell starts (the cell under way) and as it is stored
    assert re.match(r"sweep cells: 0/6 \(0 %\), \d+ s elapsed; running: cpl-pricing / "
                    r"uniform / seed 0 \(clients=4\): started \(", err[0]), err
    assert err[-1].startswith("sweep cells: 6/6 (100 %), ")
    done = [int(ln.split()[2].split("/")[0]) for ln in err]
    assert done == sorted(done) and set(done) == {0, 1, 2, 3, 4, 5, 6}
    assert main(["sweep", str(spec), "--out", str(tmp_path / "b"), "--progress-every", "0",
                 "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""


def test_clear_reports_the_time_limit_and_the_proven_gap(tmp_path, capsys):
    import numpy as np

    rng = np.random.default_rng(0)
    m = 40
    X = rng.normal(size=(m, 3))
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(D, 0)
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"N": rng.uniform(100, 1000, m).tolist(),
                             "c": rng.uniform(0, 1, m).tolist(),
                             "K": rng.uniform(1e4, 1e5, m).tolist(), "lam": 1e-3,
                             "D": D.tolist()}))
    assert main(["clear", str(f), "--rule", "exact", "--exact-time-limit", "0"]) == 0
    out = capsys.readouterr().out
    assert "exact selection stopped early (--exact-time-limit)" in out
    gap = float(out.split("at most ")[1].split()[0])
    assert gap > 0 and "'time-limit': 40" in out
    assert main(["clear", str(f), "--rule", "exact", "--exact-node-limit", "1"]) == 0
    assert "stopped early (--exact-node-limit)" in capsys.readouterr().out
    assert main(["clear", str(f), "--rule", "exact"]) == 0
    assert "exact selection: proven optimal for every buyer" in capsys.readouterr().out
    assert main(["clear", str(f), "--rule", "exact", "--exact-time-limit", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exact_time_limit" in err


def test_line_search_reports_each_grid_point():
    from mechanisms import cpl
    from sims.cpl_game import CplBenchmark

    calls = []
    eq = cpl.solve(CplBenchmark(clients=6).game(), "cvxpy-linesearch", points=5,
                   progress=lambda d, t: calls.append((d, t)))
    assert eq.info["grid_points"] == 5
    assert calls == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_cpl_command_shows_line_search_progress(tmp_path, capsys):
    assert main(["cpl", "--clients", "6", "--points", "5", "--out", str(tmp_path / "c"),
                 "--progress-every", "0", "--quiet"]) == 0
    assert capsys.readouterr().err == ""  # --quiet: nothing
    assert main(["cpl", "--clients", "6", "--points", "5", "--out", str(tmp_path / "d"),
                 "--progress-every", "0"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in err] == [
        f"cpl line search: grid points: {k}/5 ({20 * k} %)" for k in range(1, 6)]


def test_prove_prints_progress_lines_when_stderr_is_not_a_terminal(capsys):
    """A long theorem report (the nightly runs for hours) says how far it is in a log file."""
    args = ["prove", "--subject", "local", "--property", "budget_balance", "--property",
            "individual_rationality", "--engine", "batch", "--examples", "2000",
            "--progress-every", "0"]
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("prove checks: 2/2 (100 %), ")
    done = [int(ln.split()[2].split("/")[0]) for ln in err]
    assert done == sorted(done) and set(done) == {0, 1, 2}
    # the examples of the row under way (at the start of each row and when it ends)
    assert any(ln.startswith("prove checks: 0/2 (0 %), ") and
               "; running: budget_balance on local: " in ln and ln.endswith(")")
               for ln in err), err
    assert any("; running: individual_rationality on local: 2,000/2,000 examples (" in ln
               for ln in err), err
    assert main([*args, "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""
