"""The theorem report's rows checked in worker processes (``run_report(jobs=...)``,
``fedmarket prove --jobs``): the same rows, counts, verdicts and counterexamples as serially."""

from __future__ import annotations

import dataclasses
import operator
import os
import pickle
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from proofs import PROPERTIES, SUBJECTS, CheckerInputError, SubjectError
from proofs.report import (
    ALLOCATOR_VARIABLES,
    THREAD_VARIABLES,
    WAITING_JOBS,
    header,
    in_parallel,
    run_report,
)
from sims.cli import main

# iPFL (paper and vcg payments) and CPL rows, claims and known failures (counterexamples as
# IpflCase and CplCase instances), an exhaustive companion row, and rows that mostly wait
# (Property.waits: in workers of their own beside the others); a few seconds of checking
SMALL = dict(subjects=["local", "vcg", "cpl-bisection"],
             properties=["lemma1", "global_optimality", "truthful_N_over",
                         "ir_negative_distances", "cpl_threshold", "cpl_threshold_all",
                         "contains_rules", "cpl_contains_rules"],
             examples=150, seed=3, engine="batch", exhaustive=True)


def _fields(report) -> dict:
    out = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    out.pop("seconds")  # only times may differ (also the shrinker's, in extra)
    out["extra"] = {k: v for k, v in out["extra"].items() if not k.endswith("seconds")}
    ce = out.pop("counterexample")
    out["counterexample"] = None if ce is None else (ce.code(), ce.violation, ce.engine)
    return out


@pytest.mark.slow
def test_parallel_rows_are_the_serial_rows():
    serial = run_report(**SMALL)
    done = []
    parallel = run_report(**SMALL, jobs=2, progress=lambda s, k: done.append((s, k)))

    def same(report):
        out = _fields(report)
        if report.property.waits:  # its drawn count holds a host's timing, serially too:
            # a starts_program draw whose 0.1 s limit passed before the rule's child had
            # started its program is not checked (proofs.rule_properties); measured
            # serially, cpl-bisection at 300: 334 drawn, then 333
            out.pop("examples")
        return out

    assert [same(r) | {"ok": ok} for r, ok in parallel] == \
        [same(r) | {"ok": ok} for r, ok in serial]
    assert {r.property.key for r, _ in serial if r.property.waits} == \
        {"contains_rules", "cpl_contains_rules"}  # rows that wait, beside the others
    head = header(150, 3, "batch", None, True, parallel, jobs=2, wall_seconds=1.0)
    assert f"with 2 worker processes plus {WAITING_JOBS} for the rows that mostly wait" in head
    rows = [(s, k) for s in SMALL["subjects"] for k in SUBJECTS[s].declares
            if k in SMALL["properties"]]
    assert sorted(done) == sorted(rows)  # one call per row, as it finished
    # the rows' examples reach this process from the workers as they are checked
    heard = []
    run_report(**{**SMALL, "exhaustive": False}, jobs=2,
               row_progress=lambda s, k, d, b: heard.append((s, k, d, b)))
    assert {(s, k) for s, k, _, _ in heard} == set(rows)
    assert all(b >= SMALL["examples"] and 0 <= d <= b for _, _, d, b in heard)  # (budget x
    # FALSIFY_FACTOR for a property declared not to hold)
    assert len(serial) > len(rows)  # exhaustive companions included
    verdicts = {r.verdict for r, _ in serial}
    assert {"holds", "counterexample"} <= verdicts
    # the reports came back naming the registry's own objects
    for r, _ in parallel:
        assert r.property is PROPERTIES[r.property.key]
        if r.counterexample is not None:
            assert r.counterexample.subject is SUBJECTS[r.subject]
            assert r.counterexample.rerun() > 0  # and the instance still breaks it


def test_reports_and_errors_pickle_as_themselves():
    [(report, _)] = run_report(subjects=["box2"], properties=["local_optimality"],
                               examples=300, engine="batch")
    assert report.counterexample is not None
    clone = pickle.loads(pickle.dumps(report))
    assert _fields(clone) == _fields(report)
    mine = dataclasses.replace(SUBJECTS["local"])  # not the registry's: pickles by fields
    assert pickle.loads(pickle.dumps(mine)) is not SUBJECTS["local"]
    err = pickle.loads(pickle.dumps(CheckerInputError("jobs", "is 0")))
    assert (type(err), err.field, str(err)) == (CheckerInputError, "jobs", "jobs: is 0")
    err = pickle.loads(pickle.dumps(SubjectError("mine", "settle", ValueError("nan"))))
    assert (err.subject, err.method, str(err)) == ("mine", "settle",
                                                   "mine.settle raised ValueError: nan")


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2"])
def test_jobs_must_be_a_positive_integer(jobs):
    with pytest.raises(CheckerInputError, match="jobs"):
        run_report(subjects=["local"], properties=["budget_balance"], jobs=jobs)


def test_a_row_error_reaches_the_caller_as_serially():
    kw = dict(subjects=["local"], properties=["budget_balance", "no_deficit"],
              engine="batch", time_limit=-1.0)  # refused inside the check, in the worker
    errors = []
    for jobs in (1, 2):
        with pytest.raises(CheckerInputError) as info:
            run_report(**kw, jobs=jobs)
        errors.append((type(info.value), info.value.field, str(info.value)))
    assert errors[0] == errors[1] and errors[0][1] == "time_limit"


@pytest.mark.timeout(60)
def test_a_dying_worker_raises_instead_of_hanging():
    with pytest.raises(BrokenProcessPool):
        in_parallel(os._exit, [(3,), (3,), (3,)], 2, lambda i, got: None)


@pytest.mark.timeout(60)
def test_an_error_stops_the_rows_still_running():
    """A row can run for hours: the first error ends the others instead of waiting."""
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="invalid literal"):
        in_parallel(operator.call, [(time.sleep, 300), (int, "x"), (time.sleep, 300)], 2,
                    lambda i, got: None)
    assert time.perf_counter() - t0 < 300 / 6  # not the sleeping rows' 300 s


def test_workers_start_single_threaded_and_the_caller_keeps_its_settings(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    got = {}
    in_parallel(os.getenv, [(v,) for v in THREAD_VARIABLES], 2,
                lambda i, value: got.update({THREAD_VARIABLES[i]: value}))
    assert got == dict.fromkeys(THREAD_VARIABLES, "1")
    assert os.environ["OMP_NUM_THREADS"] == "4" and "OPENBLAS_NUM_THREADS" not in os.environ


def test_workers_keep_freed_memory_and_a_callers_setting_wins(monkeypatch):
    """The workers start with glibc's allocator told to keep freed memory (a standard run
    spent a tenth of its CPU faulting fresh pages in), the caller's value first, and the
    caller's environment is left as it was."""
    names = sorted(ALLOCATOR_VARIABLES)
    monkeypatch.delenv(names[0], raising=False)
    monkeypatch.setenv(names[1], "12345")
    got = {}
    in_parallel(os.getenv, [(v,) for v in names], 2,
                lambda i, value: got.update({names[i]: value}))
    assert got == {names[0]: ALLOCATOR_VARIABLES[names[0]], names[1]: "12345"}
    assert names[0] not in os.environ and os.environ[names[1]] == "12345"
    assert all(int(v) >= 32 << 20 for v in ALLOCATOR_VARIABLES.values())


def test_cli_jobs_progress_and_header(tmp_path, capsys):
    """--jobs 2: progress lines count rows done of all; the header states the summed row
    seconds and the wall time, and its command line reproduces the run."""
    md = tmp_path / "t.md"
    args = ["prove", "--subject", "local", "--property", "budget_balance", "--property",
            "individual_rationality", "--engine", "batch", "--examples", "500", "--jobs", "2",
            "--progress-every", "0", "--markdown", str(md)]
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("prove checks: 2/2 (100 %), ")
    head = md.read_text().split("\n\n")[1]
    assert "`fedmarket prove --engine batch --examples 500 --seed 0 --jobs 2 --markdown" in head
    assert "s of checking summed over the rows, " in head
    assert "s wall time with 2 worker processes" in head


STAMP = """
import os, time


def stamp(seconds):
    start = time.time()
    time.sleep(seconds)
    return os.getpid(), start, time.time()
"""


def _most_at_once(spans) -> int:
    """The most of the (start, end) spans running at one moment."""
    return max(sum(s <= start < e for s, e in spans) for start, _ in spans)


@pytest.mark.timeout(120)
def test_waiting_tasks_run_beside_the_computing_ones(tmp_path, monkeypatch):
    """Tasks marked waiting run in workers of their own beside the ``jobs`` computing ones:
    never more than ``jobs`` of the others at once, the waiting ones alongside, results by
    index as without them. The tasks sleep (a fake row's wait); their spans say what ran
    when, so no timing is asserted."""
    (tmp_path / "fedmarket_stamp.py").write_text(STAMP)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers inherit sys.path
    from fedmarket_stamp import stamp

    tasks = [(0.8,), (0.1,), (0.8,), (0.1,), (0.8,), (0.1,), (0.1,)]
    waiting = {1, 3, 5, 6}  # the short ones, as the contains_rules rows would be marked
    got = {}
    in_parallel(stamp, tasks, 1, lambda i, out: got.update({i: out}), waiting=waiting,
                waiting_jobs=2)
    assert sorted(got) == list(range(len(tasks)))
    computing = [got[i][1:] for i in range(len(tasks)) if i not in waiting]
    everything = [got[i][1:] for i in range(len(tasks))]
    assert _most_at_once(computing) == 1  # jobs=1: one computing task at a time
    assert 2 <= _most_at_once(everything) <= 3  # waiting ones beside it, in 2 more workers
    assert len({got[i][0] for i in got}) <= 3
    # the waiting tasks were done before the computing ones (2.4 s one after another), not
    # queued behind them
    assert max(got[i][2] for i in waiting) < max(got[i][2] for i in got if i not in waiting)


@pytest.mark.parametrize("bad", [{"waiting": [7]}, {"waiting": [-1]},
                                 {"waiting_jobs": -1}, {"waiting_jobs": True}])
def test_waiting_tasks_must_be_tasks(bad):
    field = next(iter(bad))
    with pytest.raises(CheckerInputError, match=field):
        in_parallel(os.getpid, [(), ()], 2, lambda i, got: None, **bad)


def test_run_report_hands_the_rows_that_wait_to_their_own_workers(monkeypatch):
    """run_report picks the waiting rows by the property's declaration (Property.waits),
    not by name: contains_rules and cpl_contains_rules wait, the others compute."""
    import proofs.report as report

    seen = {}

    def spy(fn, tasks, jobs, done, step=None, waiting=(), waiting_jobs=0):
        seen.update(keys=[t[1] for t in tasks], jobs=jobs, waiting=set(waiting),
                    waiting_jobs=waiting_jobs)
        for i in range(len(tasks)):  # the rows themselves are not the point here
            done(i, [])

    monkeypatch.setattr(report, "in_parallel", spy)
    run_report(subjects=["local", "cpl-uniform"], properties=[
        "budget_balance", "contains_rules", "cpl_contains_rules", "cpl_budget_feasible"],
        examples=10, engine="batch", jobs=2)
    keys = seen["keys"]
    assert {keys[i] for i in seen["waiting"]} == {"contains_rules", "cpl_contains_rules"}
    assert {k for k in keys if PROPERTIES[k].waits} == {"contains_rules", "cpl_contains_rules"}
    assert "budget_balance" in keys and (seen["jobs"], seen["waiting_jobs"]) == \
        (2, report.WAITING_JOBS)
    # a property declared otherwise is scheduled otherwise
    monkeypatch.setitem(PROPERTIES, "budget_balance",
                        dataclasses.replace(PROPERTIES["budget_balance"], waits=True))
    run_report(subjects=["local"], properties=["budget_balance", "individual_rationality"],
               examples=10, engine="batch", jobs=2)
    assert {seen["keys"][i] for i in seen["waiting"]} == {"budget_balance"}


def test_waits_must_be_a_bool():
    with pytest.raises(CheckerInputError, match="waits"):
        dataclasses.replace(PROPERTIES["budget_balance"], waits="yes")
