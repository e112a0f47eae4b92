"""The theorem report: every declared property of every subject, checked, as a table."""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import numbers
import os
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any

import pandas as pd

from mechanisms.processes import ctrl_c_between_steps, pool_worker, stop_pool, to_parent

from .checker import DRAW_FACTOR, CheckerInputError, Report, check_exhaustive
from .contract import FALSIFY_FACTOR, VACUOUS, contract_check
from .ipfl_properties import tiny_markets
from .registry import PROPERTIES, SUBJECTS

__all__ = ["TINY_GRID", "WAITING_JOBS", "check_row", "frame", "header", "in_parallel",
           "markdown", "run_report", "single_threaded_children"]

# the grid of the exhaustive pass: 3 clients, every combination of these types and distances
TINY_GRID = {"m": 3, "N": (100.0, 400.0), "c": (0.5, float("inf")), "K": (0.0, 5e4),
             "lam": (0.0, 2.0), "d": (0.1, 1.0)}
# properties whose instance is a plain (market, D) pair can be checked on the grid
EXHAUSTIVE = ("budget_balance", "individual_rationality", "local_optimality",
              "global_optimality")
WAITING_JOBS = 2
"""Worker processes for the rows whose property mostly waits (:attr:`proofs.Property.waits`:
rules of your own sleeping past their time limits), beside the ``jobs`` computing ones of
:func:`run_report`: ``jobs=2`` is 2 computing workers plus these, so that the computing rows
keep both cores busy while those rows wait. A waiting row takes a computing worker's place
only once no computing row is left to start."""


def run_report(*, examples: int = 200, seed: int = 0, subjects: Iterable[str] | None = None,
               properties: Iterable[str] | None = None, exhaustive: bool = False,
               engine: str = "hypothesis", time_limit: float | None = None, jobs: int = 1,
               progress: Callable[[str, str], None] | None = None,
               row_progress: Callable[[str, str, int, int], None] | None = None,
               max_clients: int | None = None,
               standard=None, type_space=None,
               search=None) -> list[tuple[Report, bool]]:
    """Check every declared (subject, property); returns [(report, as_declared)].

    ``engine`` "hypothesis" or "batch"; ``time_limit`` caps each row's seconds, with either
    engine (the row then reports what it checked and reads "inconclusive" rather than
    "holds" when cut short).
    A subject or property listed twice is checked once. ``jobs`` > 1 checks the rows in that
    many worker processes (started fresh, single-threaded math libraries), and the rows of a
    property that mostly waits (:attr:`proofs.Property.waits`) in :data:`WAITING_JOBS` more
    beside them; the rows come back in the
    same order with the same counts and verdicts as with ``jobs=1`` (each row is seeded by
    ``seed``; only ``seconds`` differ, and what a ``time_limit`` cuts off; a waiting row's
    ``drawn`` holds the host's timing, serially too: ``contains_rules`` does not count a
    draw whose limit passed before its rule had started a program). A row's error is
    raised here as it is serially. ``progress(subject, property)`` is called as each row
    (with its exhaustive companion) is done, in the order they finish;
    ``row_progress(subject, property, done, budget)`` as a row's search goes (examples done
    of its budget, see :func:`proofs.check`; from the worker processes too); ``max_clients``: the
    largest market every row draws (default: each property's own, 2-12 clients; see
    :func:`proofs.check`). ``standard``: a :class:`proofs.standard.StandardRun` whose
    per-row budgets and time limits replace ``examples`` and ``time_limit`` row by row
    (``fedmarket prove --standard``). ``type_space``: the iPFL markets' type space
    (:func:`proofs.check`; default the checker's distribution); ``search``: the regret
    properties' misreport search (:func:`proofs.check`)."""
    if isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or jobs < 1:
        raise CheckerInputError("jobs", f"is {jobs!r}; must be an integer >= 1")
    wanted = set(properties) if properties else None
    def row_budget(sname, key):
        if standard is None:
            return examples, time_limit
        return standard.budget(sname, key), standard.limit(sname, key)

    tasks = [(sname, key, *row_budget(sname, key), seed, engine, exhaustive, max_clients,
              type_space, search)
             for sname in dict.fromkeys(subjects or SUBJECTS) for key in SUBJECTS[sname].declares
             if wanted is None or key in wanted]
    rows: list = [None] * len(tasks)

    def done(i, got):
        rows[i] = got
        if progress is not None:
            progress(tasks[i][0], tasks[i][1])

    step = None
    if row_progress is not None:
        def step(i, done_, budget):
            row_progress(tasks[i][0], tasks[i][1], done_, budget)

    if jobs == 1 or len(tasks) < 2:
        for i, task in enumerate(tasks):
            hear = None if step is None else functools.partial(step, i)
            done(i, check_row(*task, progress=hear))
    else:
        waiting = [i for i, task in enumerate(tasks) if PROPERTIES[task[1]].waits]
        in_parallel(check_row, tasks, jobs, done, step=step, waiting=waiting,
                    waiting_jobs=WAITING_JOBS)
    return [row for got in rows for row in got]


def check_row(sname: str, key: str, examples: int, time_limit: float | None, seed: int,
              engine: str, exhaustive: bool, max_clients: int | None = None,
              type_space=None, search=None,
              progress: Callable[[int, int], None] | None = None) -> list[tuple[Report, bool]]:
    """One row of the report, by names (what a worker process receives): the check of
    property ``key`` of subject ``sname`` as declared, plus its exhaustive companion.
    ``progress(done, budget)``: the search's examples, see :func:`proofs.check`."""
    subject, prop = SUBJECTS[sname], PROPERTIES[key]
    declared = subject.declares[key]
    kw = {} if max_clients is None else {"max_clients": max_clients}
    if type_space is not None:
        kw["type_space"] = type_space
    if search is not None:
        kw["search"] = search
    result = contract_check(subject, prop, declared, max_examples=examples, seed=seed,
                            engine=engine, time_limit=time_limit, progress=progress, **kw)
    out = [(result.report, result.as_declared)]
    if exhaustive and key in EXHAUSTIVE:
        # a claimed property must hold on every grid market; a property known to fail may
        # still hold on the small grid (its counterexamples can need more clients)
        rep = check_exhaustive(subject, prop, tiny_markets(**TINY_GRID))
        rep = dataclasses.replace(rep, clients=(TINY_GRID["m"], TINY_GRID["m"]))
        out.append((rep, rep.holds if declared is True else True))
    return out


# the math libraries' thread counts, read when each library loads (torch: at import)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


# glibc's allocator, read when a process starts: blocks below 64 MiB come from the heap and up
# to 256 MiB freed stays there for the next array, instead of each large numpy temporary
# being mapped afresh and its pages faulted in and zeroed by the kernel (vcg/truthful_c_under
# at the standard run, nice 15: 4.2-5.7 million page faults and 6-9.5 s of its 54-57 CPU s in
# the kernel; 52,000 faults, 0.2 s with these). Other C libraries ignore them; a value the
# caller set is kept.
ALLOCATOR_VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20),
                       "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


@contextmanager
def single_threaded_children():
    """Worker processes started inside this block run their math libraries on one thread
    each (``jobs`` workers on ``jobs`` cores, not jobs x cores threads), and glibc keeps
    their freed memory for reuse (:data:`ALLOCATOR_VARIABLES`, unless the caller set them):
    the variables are set in this process's environment, which a fresh (spawned) process
    inherits before it loads numpy or torch, and restored afterwards."""
    saved = {var: os.environ.get(var) for var in (*THREAD_VARIABLES, *ALLOCATOR_VARIABLES)}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    for var, value in ALLOCATOR_VARIABLES.items():
        os.environ.setdefault(var, value)
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def _reporting(fn: Callable, i: int, *task):
    """``fn(*task, progress=...)`` in a worker, its progress sent to the parent's queue."""
    queue = to_parent()
    return fn(*task, progress=lambda *step: queue.put((i, *step)))


def in_parallel(fn: Callable, tasks: list[tuple], jobs: int,
                done: Callable[[int, Any], None],
                step: Callable[..., None] | None = None,
                waiting: Collection[int] = (), waiting_jobs: int = 0) -> None:
    """``done(i, fn(*tasks[i]))`` for every task, computed in ``jobs`` fresh worker processes
    (spawned, not forked: the caller may hold threads or torch), called as each finishes.
    With ``step``, each task runs as ``fn(*task, progress=...)`` and its progress calls
    reach ``step(i, *args)`` here, in this process, as they happen (within 0.2 s).

    ``waiting``: the indices of tasks that mostly wait (sleep) rather than compute; they run
    in ``waiting_jobs`` more workers beside the ``jobs`` computing ones (at most ``jobs``
    of the others run at once), and in any free worker once no other task is left to
    start. The tasks start in their order within each kind.

    The first error a task raises is raised here, after the tasks not yet started are
    cancelled and the running ones stopped (a row can take hours); a worker that dies
    (killed, out of memory) raises ``BrokenProcessPool`` here instead of hanging. The workers
    die with this process (kill -9, SIGTERM, SIGINT: :mod:`mechanisms.processes`)."""
    waiting = set(waiting)
    if not waiting <= set(range(len(tasks))):
        raise CheckerInputError("waiting", f"holds {sorted(waiting - set(range(len(tasks))))}"
                                           f"; must be indices of the {len(tasks)} tasks")
    if isinstance(waiting_jobs, bool) or not isinstance(waiting_jobs, numbers.Integral) \
            or waiting_jobs < 0:
        raise CheckerInputError("waiting_jobs", f"is {waiting_jobs!r}; must be an integer "
                                                ">= 0")
    computing = [i for i in range(len(tasks)) if i not in waiting]
    sleepers = sorted(waiting)
    # every task submitted finds a free worker: never more than the pool holds at once
    size = min(jobs + (waiting_jobs if sleepers else 0), len(tasks))
    ctx = multiprocessing.get_context("spawn")
    steps = ctx.SimpleQueue() if step is not None else None

    def drain():
        while steps is not None and not steps.empty():
            step(*steps.get())

    with single_threaded_children(), \
            ProcessPoolExecutor(max_workers=size, mp_context=ctx,
                                initializer=pool_worker,
                                initargs=(os.getpid(), steps)) as pool, \
            ctrl_c_between_steps() as interrupted:
        futures: dict = {}  # future -> its task's index
        pending: set = set()

        def submit(i):
            future = pool.submit(fn, *tasks[i]) if step is None else \
                pool.submit(_reporting, fn, i, *tasks[i])
            futures[future] = i
            pending.add(future)

        def start():
            """Computing tasks up to ``jobs`` at once, waiting ones in the workers left."""
            busy = sum(futures[f] not in waiting for f in pending)
            while computing and busy < jobs and len(pending) < size:
                submit(computing.pop(0))
                busy += 1
            while sleepers and len(pending) < size:
                submit(sleepers.pop(0))

        try:
            start()
            while pending:
                if interrupted():
                    raise KeyboardInterrupt
                finished, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                pending -= finished
                drain()
                for future in finished:
                    done(futures[future], future.result())
                start()
        except BaseException:
            stop_pool(pool)
            raise


def _declared(report):
    """What the report's subject declares about its property (None: a subject of your own
    or nothing declared)."""
    subject = SUBJECTS.get(report.subject)
    return None if subject is None else subject.declares.get(report.property.key)


def frame(results) -> pd.DataFrame:
    rows = []
    for report, ok in results:
        row = report.row()
        declared = _declared(report)
        row["declared"] = {True: "holds", False: "fails", VACUOUS: "vacuous",
                           None: "-"}[declared]
        row["as_declared"] = ok
        if report.engine == "batch" and report.extra.get("mode") == "batch (per instance)":
            row["engine"] = "batch, per instance"
        rows.append(row)
    cols = ["property", "reference", "preconditions", "subject", "declared", "verdict",
            "as_declared", "engine", "drawn", "effective", "discriminating", "seconds",
            "counterexample"]
    return pd.DataFrame(rows)[cols]


def header(examples: int, seed: int, engine: str, time_limit, exhaustive: bool,
           results, *, jobs: int = 1, wall_seconds: float | None = None,
           max_clients: int | None = None, standard=None, type_space=None,
           search=None, subjects=None, properties=None, scan: bool = False,
           path=None) -> str:
    """The report's preamble: how it was made, and whether every claim got its budget.

    ``jobs``: the computing worker processes of the run (``--jobs``; the rows of a property
    that mostly waits ran in :data:`WAITING_JOBS` more); ``wall_seconds``: the run's
    elapsed time (the rows' own seconds add up to more than it when they ran in parallel);
    ``standard``: the :class:`proofs.standard.StandardRun` the report ran (its command and
    settings replace the others). ``subjects``, ``properties``, ``scan`` and ``path`` (the
    markdown file written; default docs/reference-theorems.md): the rest of the command line,
    so that the command printed reproduces the file."""
    if standard is not None:
        cmd = standard.command()
        if jobs != standard.jobs:
            cmd += f" --jobs {jobs}"
    else:
        cmd = f"fedmarket prove --engine {engine} --examples {examples} --seed {seed}"
        if time_limit is not None:
            cmd += f" --time-limit {time_limit:g}"
        if exhaustive:
            cmd += " --exhaustive"
        if max_clients is not None:
            cmd += f" --max-clients {max_clients}"
        if jobs > 1:
            cmd += f" --jobs {jobs}"
    from .typespace import as_type_space

    space = as_type_space(type_space)
    if not space.is_default:
        cmd += f" --type-space <{space.name}>"
    if search not in (None, "former"):
        cmd += f" --search {search}"
    cmd += f" --markdown {path if path is not None else 'docs/reference-theorems.md'}"
    for name in subjects or ():
        cmd += f" --subject {name}"
    for key in properties or ():
        cmd += f" --property {key}"
    if scan:
        cmd += " --scan"
    claims = [r for r, _ in results if r.engine != "exhaustive"
              and r.verdict in ("holds", "inconclusive", "vacuous") and _declared(r) != VACUOUS]
    short = [r for r in claims if r.discriminating < (r.max_examples or examples)]
    total = sum(r.seconds for r, _ in results)
    took = f"{total:.0f} s of checking summed over the rows"
    if wall_seconds is not None:
        waits = jobs > 1 and any(r.property.waits for r, _ in results)
        took += (f", {wall_seconds:.0f} s wall time with "
                 + (f"{jobs} worker processes" if jobs > 1 else "one process")
                 + (f" plus {WAITING_JOBS} for the rows that mostly wait" if waits else ""))
    lines = [
        "# Theorem report", "",
        f"Generated by `{cmd}` ({took}, on the machine that ran it).", "",
        (f"The standard run ({standard.describe()}). " if standard is not None else
         f"Target: {examples:,} examples per declared property, engine `{engine}` "
         f"(seed {seed}){', plus the exhaustive tiny-market grid' if exhaustive else ''}. ")
        + "`drawn` counts instances drawn (up to the first failure for a property declared "
        f"not to hold, whose search may draw up to {FALSIFY_FACTOR}x the target), "
        "`effective` those on which the property evaluated the subject, `discriminating` "
        "those of them on which the property could have failed (the misreport changed the "
        "outcome, the interesting branch of the precondition was hit; "
        "docs/reference-proofs.md lists the definition of each property): the evidence. "
        "Each engine draws until a row has its target of discriminating examples, at most "
        f"{DRAW_FACTOR}x the target; a claim reads \"holds\" only with the target reached, "
        "\"inconclusive\" with fewer, \"vacuous\" with none (or with effective < 0.5 x "
        "drawn). A row declared \"vacuous\" is a property that cannot fail on the subject "
        "(share-all ignores the reports, so no lie changes anything): true of the rule, no "
        "evidence; the contract asserts that no draw discriminates. The preconditions "
        "column ends with the market sizes drawn (\"2-12 clients\"). `engine` says which "
        "engine produced the row (\"batch\": numpy draws cleared and evaluated in bulk; "
        "\"batch, per instance\": numpy draws evaluated one instance at a time, for "
        "pairs the bulk clearing does not cover: other solvers, rules of your own not "
        "written over arrays).", "",
    ]
    lines += [f"The iPFL markets are drawn from the {space.describe()}: every iPFL "
              "verdict holds on that type space (\"IR on this type space\"), not beyond "
              "it.", ""]
    if engine == "batch":
        lines += ["`drawn` exceeds the target where some draws missed the preconditions or "
                  "could not have failed the property.", ""]
    if short and standard is not None:
        lines += [f"**{len(short)} of {len(claims)} claims were checked on fewer "
                  "discriminating examples than their budget**: their rows give the real "
                  "counts.", ""]
    elif short and time_limit is not None:
        lines += [f"**{len(short)} of {len(claims)} claims were checked on fewer than "
                  f"{examples:,} discriminating examples** (per-row time limit {time_limit:g} s on "
                  "this shared 2-core machine); their rows give the real counts. The full run "
                  f"is one command away: `fedmarket prove --engine {engine} --examples "
                  f"{examples}` without `--time-limit` (`make nightly`).", ""]
    elif short:
        lines += [f"**{len(short)} of {len(claims)} claims were checked on fewer than "
                  f"{examples:,} discriminating examples**: their rows give the real counts.",
                  ""]
    return "\n".join(lines) + "\n"


def markdown(results) -> str:
    df = frame(results)
    lines = ["| property | reference | preconditions | subject | declared | verdict | engine "
             "| drawn | effective | discriminating | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples(index=False):
        lines.append(f"| {r.property} | {r.reference} | {r.preconditions} | {r.subject} | "
                     f"{r.declared} | {r.verdict}{'' if r.as_declared else ' (NOT AS DECLARED)'}"
                     f" | {r.engine} | {r.drawn} | {r.effective} | {r.discriminating} "
                     f"| {r.seconds} |")
    if (df.engine == "exhaustive").any():
        lines += ["", "Exhaustive rows check every 3-client market of the grid "
                  f"{TINY_GRID}. A property known to fail can still hold on that grid when its "
                  "counterexamples need more clients (Box 2 breaks Eq. 11 only for a buyer "
                  "with at least three candidate sellers)."]
    ces = [r for r in df.itertuples(index=False) if isinstance(r.counterexample, str)]
    if ces:
        lines += ["", "## Counterexamples (minimal instances found by the checker)", "",
                  "Each is a pytest regression test: paste it into a test file and it passes "
                  "while the property still fails on the instance.", ""]
        for r in ces:
            lines += [f"### {r.property} — {r.subject} ({r.engine})", "", "```text",
                      r.counterexample, "```", ""]
    return "\n".join(lines) + "\n"
