"""Mutation score on mutants nobody picked (issue 34, part 5).

The mutants are generated mechanically over every module of ``mechanisms/`` by cosmic-ray's
operators (the ``mutation`` extra): binary operators (arithmetic and bitwise), unary
operators, comparisons, numeric constants (+1, -1), booleans (True/False, and/or, ``not``
added) and, from this file, :class:`DropSliceBound` (a slice loses one bound). cosmic-ray's
control-flow operators (decorator, exception, loop, break/continue, variable) are not used.
A uniform random sample is scored (or all of them): the ``--sample`` mutants whose SHA-256 of
``"seed:key"`` is smallest, ``key`` naming the mutant by its file, definition, operator and
source line (not by line number), so the sample keeps its members when unrelated code moves.

Each mutant is applied to a copy of the tree (under $TMPDIR, one per worker, the file restored
after each mutant) and scored by two engines, each stopping at its first failure:

* ``checker``: the checker's standard run (``--checker``, default ``fedmarket prove
  --standard``), one row at a time (``--subject S --property K`` added). Only the rows whose
  run executes the mutated code are run (coverage.py, one context per row, measured once on
  the unmutated tree; forked child processes are followed, their lines recorded under the
  row that forked them, except a child killed before it saves: :func:`measure`): a row that
  never executes a line cannot tell the mutant from the original (same seed, same draws).
  They run in cost order (the unmutated row's seconds), rows a cheap ``--triage`` command
  (default: the batch engine at 200 examples) flags first: triage only reorders, every
  verdict is the standard command's. A mutant is killed when a row's run is not as
  declared (exit status 1, 2 or a traceback) or runs past its time (10 x the unmutated
  row's seconds + 60 s: "timeout") or out of memory (a MemoryError under the cap
  :data:`MEMORY_CAP` on each process's data segment: "memory"; the rows and tests of the
  unmutated tree all run under it too). The triage stops at its first
  failing row (a mutant it catches costs the cheap rows up to there, not all of them).
* ``tests``: the test suite (``--tests``: pytest's selection, default the default tier, ``-m
  "not slow"``), only the tests that execute the mutated code in the test process (coverage,
  one context per test function), fastest first, ``pytest -x``.

A mutant no row (test) executes survives that engine with the reason "not executed" (each
checker result names its map, ``"map"``: "children", or "parent" for a baseline measured
before children were followed, in the driver's process only, which missed what only a
forked child runs: mechanisms/contain.py's rule children, a pool worker); a
mutant whose code does not compile is "incompetent" and counted apart. A mutant with an
argument of equivalence (benchmarks/equivalent_mutants.toml, read as each mutant starts) is
not run by the checker ("skipped": a survivor costs its rows' whole budget, for a hot-path
mutant about a standard run); the tests still run on it, and if they kill it the argument is
set aside and the checker's skip counts as a survival. Every result is
appended to ``--out`` (JSON lines) as it finishes; a rerun skips what the file holds for the
same code version (mechanisms/, proofs/, sims/, learning/, tests/, pyproject.toml) and
command (resumable); ``--jobs N`` scores N mutants at a time. ``--markdown``
writes the score into docs/reference-proofs.md (between the ``generated-mutation``
markers) and the results it is made from into docs/mutation_generated.json; each survivor
that cannot be killed carries its argument of equivalence from
benchmarks/equivalent_mutants.toml.

    python benchmarks/generated_mutation.py --count               # the population
    python benchmarks/generated_mutation.py --sample 400 --seed 0 # score (make mutation)
    python benchmarks/generated_mutation.py --no-run --markdown docs/reference-proofs.md

``--children`` brings a stored baseline measured in the driver's process only up to date
without its hour of CPU: the rows that start child processes (whose map executed a line of
mechanisms/ that starts one, or any line of mechanisms/processes.py: the contains_rules
rows, local/runs_in_a_worker; or the rows named) run again following their children, their
lines are merged into the stored map (kept beside it as ``*.parent.json``; a row whose
verdict differs stops it), and the checker's "not executed" decided on the old map are
scored again (``--sample`` and ``--seed`` as the run's)::

    python benchmarks/generated_mutation.py --sample 400 --seed 1 --children
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import math
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import mutation as named  # noqa: E402  (the named mutants' harness: the tree copy, the commit)

SOURCE = "mechanisms"
CHECKER = "fedmarket prove --standard"
TRIAGE = "fedmarket prove --engine batch --examples 200"
TESTS = "-m 'not slow'"
SAMPLE = 400
SEED = 0
OUT = ROOT / "results" / "mutation-generated.jsonl"
BASELINES = ROOT / "results" / "mutation-generated"
COMMITTED = ROOT / "docs" / "mutation_generated.json"
EQUIVALENTS = HERE / "equivalent_mutants.toml"
MARKERS = ("<!-- generated-mutation:start -->", "<!-- generated-mutation:end -->")

# the operator classes scored, by name prefix: cosmic-ray's, and this file's slice operator
CLASSES = {
    "arithmetic": ("core/ReplaceBinaryOperator_", "core/ReplaceUnaryOperator_"),
    "comparison": ("core/ReplaceComparisonOperator_",),
    "constant": ("core/NumberReplacer",),
    "boolean": ("core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
                "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd", "core/AddNot"),
    "slice": ("fedmarket/DropSliceBound",),
}
SLICE = "fedmarket/DropSliceBound"
ROW_TIME = (10.0, 60.0)  # a row's time limit: 10 x its unmutated seconds + 60 s
# the data segment (RLIMIT_DATA) each process of a run may hold, children included: a
# mutant building a huge number (4a06c9bfb6, 2**16 ** m, grew to 9.3 GB in 7 minutes) gets a
# MemoryError ("memory") instead of exhausting the machine
MEMORY_CAP = 4 * 2**30
TESTS_TIME = (3.0, 120.0)  # the tests' limit: 3 x their unmutated seconds + 120 s


def operator_class(name: str) -> str:
    for cls, prefixes in CLASSES.items():
        if name.startswith(prefixes):
            return cls
    raise KeyError(name)


# ------------------------------------------------------------------------------ operators


def _slice_bounds(node) -> list:
    """The bounds of a parso ``subscript`` node (``a:b:c``): the start and stop expressions and
    the step's ``sliceop`` node, those present."""
    if node.type != "subscript":
        return []
    return [c for c in node.children if not (c.type == "operator" and c.value == ":")
            and (c.type != "sliceop" or len(c.children) > 1)]


_OPERATORS: dict = {}


def operators() -> dict:
    """name -> operator instance, every operator of :data:`CLASSES` (cosmic-ray's core
    operators, and :class:`DropSliceBound`)."""
    if _OPERATORS:
        return _OPERATORS
    from cosmic_ray.operators.operator import Example, Operator
    from cosmic_ray.plugins import get_operator, operator_names

    class DropSliceBound(Operator):
        """A slice loses one bound: ``x[a:b:c]`` -> ``x[:b:c]``, ``x[a::c]``, ``x[a:b]``."""

        def mutation_positions(self, node):
            for bound in _slice_bounds(node):
                yield bound.start_pos, bound.end_pos

        def mutate(self, node, index):
            drop = _slice_bounds(node)[index]
            node.children = [c for c in node.children if c is not drop]
            return node

        @classmethod
        def examples(cls):
            return (Example("x[1:n]\n", "x[:n]\n"), Example("x[1:n]\n", "x[1:]\n", 1),
                    Example("x[..., ::-1]\n", "x[..., :]\n"))

    for name in operator_names():
        if name.startswith(tuple(p for ps in CLASSES.values() for p in ps)):
            _OPERATORS[name] = get_operator(name)()
    _OPERATORS[SLICE] = DropSliceBound()
    return _OPERATORS


# ------------------------------------------------------------------------------- mutants


@dataclass(frozen=True)
class Generated:
    """One generated mutant: ``operator``'s ``occurrence``-th position in ``path`` (as
    cosmic-ray counts them), at ``line``:``col`` to ``end_line``:``end_col``."""

    key: str  # path|definition|operator|source line|n: stable while its line stays
    id: str  # the key's SHA-1, 10 hex digits
    path: str
    operator: str
    occurrence: int
    line: int
    col: int
    end_line: int
    end_col: int
    definition: str  # the innermost def or class around it ("<module>": none)
    first: int  # the first line of the statement around it
    # where it runs: "body" (a function's body: the lines of its statement), "signature" (a
    # def's defaults or decorators, run at import for the calls of the function: its body's
    # lines), "module" (at import, for every user of the module: every row), "annotation"
    # (never evaluated: the module has ``from __future__ import annotations``)
    where: str
    span: tuple[int, int]  # the lines whose runs run it (where "body" and "signature")

    @property
    def kind(self) -> str:
        return operator_class(self.operator)


def _scopes(tree: ast.Module) -> list[tuple[int, int, str, int | None]]:
    """(first line, last line, qualified name, first body line or None for a class) of every
    def and class."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                body = (None if isinstance(child, ast.ClassDef) else child.body[0].lineno)
                out.append((first, child.end_lineno, name, body))
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def _statements(tree: ast.Module) -> list[tuple[int, int]]:
    return [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def _annotations(tree: ast.Module) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) positions of every annotation of a module whose annotations are never
    evaluated (``from __future__ import annotations``, PEP 563); none otherwise."""
    lazy = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
               and any(a.name == "annotations" for a in n.names) for n in tree.body)
    if not lazy:
        return []
    found = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            found += [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                                             a.vararg, a.kwarg) if x is not None]
            found.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            found.append(n.annotation)
    return [((x.lineno, x.col_offset), (x.end_lineno, x.end_col_offset))
            for x in found if x is not None]


def mutants(root: Path = ROOT, files=None) -> list[Generated]:
    """Every mutant of :data:`CLASSES` in ``files`` (default: every module of mechanisms/),
    in cosmic-ray's order (file, operator, occurrence)."""
    from cosmic_ray.ast import ast_nodes, get_ast

    files = sorted((root / SOURCE).rglob("*.py")) if files is None else files
    out = []
    for file in files:
        rel = Path(file).resolve().relative_to(root.resolve()).as_posix()
        text = Path(file).read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        scopes, stmts, notes = _scopes(tree), _statements(tree), _annotations(tree)
        nodes = list(ast_nodes(get_ast(text)))
        seen: dict = {}
        for name, op in operators().items():
            occurrence = 0
            for node in nodes:
                for (line, col), (end_line, end_col) in op.mutation_positions(node):
                    around = [s for s in scopes if s[0] <= line <= s[1]]
                    inner = max(around, key=lambda s: s[0]) if around else None
                    definition = inner[2] if inner else "<module>"
                    funcs = [s for s in around if s[3] is not None and line >= s[3]]
                    heads = [s for s in around if s[3] is not None and line < s[3]]
                    st = [s for s in stmts if s[0] <= line <= s[1]]
                    first = max(st)[0] if st else line
                    if any(a <= (line, col) < b for a, b in notes):
                        where, span = "annotation", (line, end_line)
                    elif funcs:
                        where, span = "body", (first, end_line)
                    elif heads:  # defaults, decorators: for the calls of that def
                        head = max(heads, key=lambda s: s[0])
                        where, span = "signature", (head[3], head[1])
                    else:
                        where, span = "module", (first, end_line)
                    base = f"{rel}|{definition}|{name}|{lines[line - 1].strip()}"
                    n = seen[base] = seen.get(base, -1) + 1
                    key = f"{base}|{n}"
                    out.append(Generated(key, hashlib.sha1(key.encode()).hexdigest()[:10], rel,
                                         name, occurrence, line, col, end_line, end_col,
                                         definition, first, where, span))
                    occurrence += 1
    return out


def sample(population: list[Generated], size: int | None, seed: int) -> list[Generated]:
    """The ``size`` mutants with the smallest SHA-256 of ``f"{seed}:{key}"`` (all of them:
    ``size`` None or >= the population): a uniform random sample without replacement."""
    chosen = (sorted(population, key=lambda m: rank(m, seed))[:size] if size is not None
              else list(population))
    return sorted(chosen, key=lambda m: (m.path, m.line, m.col, m.key))


def scored_prefix(chosen: list[Generated], ranked: list[str] | None, done: dict,
                  engines, size: int | None,
                  after_checker: bool = False) -> tuple[list[Generated], int]:
    """(the longest prefix, in rank order, of the planned sample ``ranked`` (ids) whose every
    mutant ``done`` holds scored by every engine or as incompetent, the planned size): a
    run cut short (mutants are scored in rank order) is shown as the sample of that size,
    which it is. With ``after_checker`` (--tests-after-checker) a mutant the checker killed
    needs no tests result. Without ``ranked`` (results written before it was recorded):
    ``chosen``."""
    if not ranked:
        return chosen, len(chosen)
    ranked = ranked[:size]
    by_id = {m.id: m for m in chosen}
    n = 0
    for i in ranked:
        r = done.get(i, {})
        need = [e for e in engines if not (
            after_checker and e == "tests" and r.get("checker", {}).get("status") in KILLS)]
        if i not in by_id or not ("incompetent" in r or all(e in r for e in need)):
            break
        n += 1
    keep = set(ranked[:n])
    return [m for m in chosen if m.id in keep], len(ranked)


def rank(m: Generated, seed: int) -> str:
    """A mutant's rank in the sample of ``seed``: the sample of size k is the k smallest."""
    return hashlib.sha256(f"{seed}:{m.key}".encode()).hexdigest()


def mutate(text: str, m: Generated) -> str | None:
    """``text`` (the source of ``m.path``) with mutant ``m`` applied (None: no such
    position)."""
    from cosmic_ray.mutating import MutationVisitor

    return MutationVisitor.mutate_code(text, operators()[m.operator], m.occurrence)


def diff_line(text: str, mutated: str, m: Generated) -> tuple[str, str]:
    """The mutated statement's lines before and after (stripped, joined)."""
    a, b = text.splitlines(), mutated.splitlines()
    extra = len(b) - len(a)
    return (" ".join(x.strip() for x in a[m.first - 1:m.end_line]),
            " ".join(x.strip() for x in b[m.first - 1:m.end_line + extra]))


# ------------------------------------------------------------------- the driver in a copy


def _rows_of(command: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(argv of ``fedmarket``, every (subject, property) row the command checks)."""
    argv = shlex.split(command)
    if not argv or argv[0] != "fedmarket" or argv[1:2] != ["prove"]:
        raise SystemExit(f"--checker must be a 'fedmarket prove ...' command: {command!r}")
    if any(a in ("--subject", "--property", "--markdown") for a in argv):
        raise SystemExit("--checker: the rows are chosen here; drop --subject, --property, "
                         "--markdown")
    from proofs.registry import SUBJECTS

    return argv[1:], [(s, k) for s, subj in SUBJECTS.items() for k in subj.declares]


def measure(data_file: Path | str, source: str = SOURCE, children: bool = True):
    """A started coverage.py measurement of the package ``source`` into ``data_file``, for
    one context per row (``cov.switch_context(row)``); with ``children``, forked child
    processes are followed: what a child runs is recorded under the row that was current
    when it forked, in a data file of its own (``data_file.<host>.pid<N>.<random>``;
    :func:`gather_children` and :func:`_contexts` merge them).

    How (coverage 7.18): the child keeps the parent's collector, so it goes on tracing
    every frame on the stack (the forking function's own child branch included) under the
    same context, and coverage's data object, finding a new pid, starts a new data file
    (``[run] parallel``); the child's data is saved when it ends by ``os._exit`` (``[run]
    patch = ["_exit"]``: the way mechanisms/contain.py's rule children and multiprocessing's
    forked workers end), by SIGTERM (``[run] sigterm``: a pool worker ended by
    :func:`mechanisms.processes.stop_pool`), or by a normal exit (an ``atexit`` hook).
    coverage's ``patch = ["fork"]`` is *not* used: it starts a new Coverage in the child
    (``coverage.control._after_fork_in_child``), whose collector has the configured static
    context only -- the row's dynamic context is lost (the child's lines read as import-time
    code, run by every row) -- and traces only frames entered after the fork, so the lines
    of the forking function after ``os.fork()`` are lost (both seen with coverage 7.18.0).

    Still missed: a child killed by SIGKILL (a rule's child stopped at its time limit,
    killed with its process group; a child killed with its parent, PR_SET_PDEATHSIG) or by
    any other signal before it saves; a program a child starts (``exec``: a new process
    image, not measured); processes started by ``spawn`` (a spawned pool: the standard run
    checks each row in this process, no pool); and the tests' baseline (pytest-cov in the
    test process) follows no children at all."""
    import atexit

    import coverage

    cov = coverage.Coverage(data_file=str(data_file), source_pkgs=[source],
                            config_file=False)
    if children:
        cov.set_option("run:parallel", True)
        cov.set_option("run:patch", ["_exit"])
        cov.set_option("run:sigterm", True)
        parent = os.getpid()

        def child_exits():  # a forked child ending without os._exit (the parent saves itself)
            if os.getpid() != parent:
                cov.save()

        atexit.register(child_exits)
    cov.start()
    return cov


def _data_files(data_file: Path) -> list[Path]:
    """The data files of a measurement into ``data_file``: itself, its parallel files (this
    process's and its children's, ``data_file.*``) and the children's merged
    (``data_file-children``), SQLite's journals left out."""
    data_file = Path(data_file)
    out = [f for f in sorted(data_file.parent.glob(data_file.name + "*"))
           if f.name == data_file.name or f.name[len(data_file.name)] in ".-"]
    return [f for f in out if not f.name.endswith(("-journal", "-wal", "-shm"))]


def gather_children(cov, data_file: Path) -> tuple[int, int]:
    """Merge the data files that forked children of this process have written (every
    parallel file of ``data_file`` but this process's own) into ``data_file-children`` and
    delete them (a row of contains_rules forks about a thousand children; a data file is
    about 50 kB). Returns (merged, unreadable): a file a child was killed while writing
    cannot be read and is dropped."""
    import coverage

    data_file = Path(data_file)
    own = Path(cov.get_data().data_filename()).name
    target = data_file.parent / (data_file.name + "-children")
    files = [f for f in _data_files(data_file)
             if f.name not in (own, target.name) and f.name != data_file.name]
    if not files:
        return 0, 0
    merged = coverage.CoverageData(basename=str(target))
    merged.read()
    done = bad = 0
    for f in files:
        try:
            d = coverage.CoverageData(basename=str(f))
            d.read()
            merged.update(d)
            done += 1
        except coverage.CoverageException:
            bad += 1
        f.unlink(missing_ok=True)
    return done, bad


def drive(spec: dict) -> int:
    """Run rows of a ``fedmarket prove`` command one at a time in this process (the tree's
    own code), a JSON line each: ``{"start": row}`` before it, then its exit status,
    verdicts and seconds; with ``spec["coverage"]``, under coverage.py with one context per
    row (imports before any row: the empty context), forked children followed
    (:func:`measure`) unless ``spec["children"]`` is false; the line then says how many
    children's data files were merged (``"children"``) and how many could not be read."""
    import importlib

    out = sys.stdout
    cov = None
    children = spec.get("children", True)
    if spec.get("coverage"):
        cov = measure(spec["coverage"], SOURCE, children)
    for file in sorted(Path(SOURCE).rglob("*.py")):  # import-time code: every row's
        importlib.import_module(".".join(file.with_suffix("").parts).removesuffix(".__init__"))
    import proofs.report
    from sims import cli

    real = proofs.report.run_report
    got: list = []

    def spy(**kw):  # what the command checked (it imports run_report when it runs)
        got.append(real(**kw))
        return got[-1]

    proofs.report.run_report = spy
    argv, _ = _rows_of(spec["command"])
    try:
        for row in spec["rows"]:
            s, k = row.split("/", 1)
            print(json.dumps({"start": row}), file=out, flush=True)
            if cov is not None:
                cov.switch_context(row)
            got.clear()
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):
                try:
                    rc = cli.main([*argv, "--subject", s, "--property", k, "--quiet"])
                except BaseException as exc:  # a traceback: the run fails
                    rc = f"{type(exc).__name__}: {exc}"[:300]
            seconds = time.perf_counter() - t0
            reports = got[0] if got else []
            line = {"row": row, "rc": rc, "seconds": round(seconds, 3),
                    "verdicts": [r.verdict for r, _ in reports],
                    "as_declared": [bool(ok) for _, ok in reports],
                    "errors": [r.error[:300] for r, _ in reports if r.error]}
            if cov is not None and children:  # after the row's seconds: not counted there
                line["children"], line["unreadable"] = gather_children(cov, spec["coverage"])
            print(json.dumps(line), file=out, flush=True)
            if rc != 0 and spec.get("stop", True):
                break
    finally:
        if cov is not None:
            cov.stop()
            cov.save()
    return 0


# --------------------------------------------------------------------------- the runs


def env_for(copy: Path) -> dict:
    """The environment of a run in the copy: its code first, no bytecode written (a mutant
    of the same size as the original, written in the same second, would otherwise run the
    original's cached bytecode), one thread per math library, the ci Hypothesis profile
    (derandomised: the same examples for every mutant)."""
    return dict(named.mutant_env(copy), PYTHONDONTWRITEBYTECODE="1", HYPOTHESIS_PROFILE="ci")


def tree_version() -> str:
    """The commit the mutants are made from (HEAD, short), with "+" and the SHA-1 of the
    changes to tracked files when the working tree differs from it: results and baselines
    are valid for one version only."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout

    head = git("rev-parse", "--short=7", "HEAD").decode().strip()
    changes = git("diff", "HEAD", "--no-ext-diff", "--binary")
    return head + (f"+{hashlib.sha1(changes).hexdigest()[:7]}" if changes else "")


# what the verdicts depend on: results are reused while these are unchanged (the harness and
# the pages may change)
CODE = ("mechanisms", "proofs", "sims", "learning", "tests", "pyproject.toml")


def code_version() -> str:
    """The SHA-1 (10 hex digits) of :data:`CODE` as the working tree has them: their trees at
    HEAD and any change to them since."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout

    trees = git("rev-parse", *(f"HEAD:{p}" for p in CODE))
    changes = git("diff", "HEAD", "--no-ext-diff", "--binary", "--", *CODE)
    return hashlib.sha1(trees + changes).hexdigest()[:10]


def _dies_with_us(cap: int | None = None):
    """A ``preexec_fn``: the run gets SIGKILL when this process dies (imported here, not at
    the top: the driver, this file run in a copy, must import mechanisms/ under coverage),
    and its data segment is capped at ``cap`` bytes (default :data:`MEMORY_CAP`; every
    process it starts inherits the cap): past it an allocation fails, a MemoryError."""
    import resource

    from mechanisms.processes import kill_with_parent

    dies = kill_with_parent()
    cap = MEMORY_CAP if cap is None else cap

    def preexec():  # in the forked child, before exec
        if dies is not None:
            dies()
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))

    return preexec


def _out_of_memory(line: dict) -> bool:
    """Whether a row (the driver's line) ran out of memory: the run raised MemoryError, or a
    report's error names one (the checker turns what a subject or property raises into the
    verdict "error", "... raised MemoryError: ..."): past :data:`MEMORY_CAP`, or more than
    any machine has."""
    rc = line.get("rc")
    return ((isinstance(rc, str) and rc.startswith("MemoryError"))
            or any("MemoryError" in e for e in line.get("errors") or ()))


def _kill(proc) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_rows(copy: Path, command: str, rows: list[str], limits: dict | None = None, *,
             coverage: Path | None = None, stop: bool = True,
             children: bool = True) -> list[dict]:
    """The driver's lines for ``rows`` of ``command`` in ``copy``; a row past its time
    (``limits[row]`` seconds) is ended and reads ``{"row": row, "rc": "timeout"}``. With
    ``coverage`` (a data file), measured there (:func:`measure`; ``children``: forked
    children followed)."""
    spec = {"command": command, "rows": rows, "stop": stop,
            "coverage": str(coverage) if coverage else None, "children": children}
    cmd = [sys.executable, str(copy / "benchmarks" / Path(__file__).name), "--drive",
           json.dumps(spec)]
    proc = subprocess.Popen(cmd, cwd=copy, env=env_for(copy), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_dies_with_us())
    lines, current, started, err = [], None, time.monotonic(), []
    timed_out = False
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    pending = {out_fd: b"", err_fd: b""}
    sel = selectors.DefaultSelector()
    sel.register(out_fd, selectors.EVENT_READ)
    sel.register(err_fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            limit = (limits or {}).get(current) if current else None
            wait = None if limit is None else max(0.0, started + limit - time.monotonic())
            if proc.poll() is not None:  # ended: what it wrote, unless a child holds the pipe
                wait = 1.0 if wait is None else min(wait, 1.0)
            events = sel.select(timeout=wait)
            if not events:
                if proc.poll() is not None:
                    break
                if limit is not None:
                    _kill(proc)
                    timed_out = True
                    lines.append({"row": current, "rc": "timeout", "seconds": limit})
                    break
                continue
            for key, _ in events:
                # raw reads, split here: a buffered readline per event would leave lines
                # read ahead unseen when the driver ends (a row's verdict lost)
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                *complete, pending[key.fd] = (pending[key.fd] + chunk).split(b"\n")
                for raw in complete:
                    line = raw.decode(errors="replace")
                    if key.fd == err_fd:
                        err = [*err[-20:], line.rstrip()]
                        continue
                    if not line.strip():
                        continue
                    msg = json.loads(line)
                    if "start" in msg:
                        current, started = msg["start"], time.monotonic()
                    else:
                        lines.append(msg)
                        current = None
    finally:
        if proc.poll() is None:
            _kill(proc)
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    if not timed_out and proc.returncode != 0 and (not lines or lines[-1].get("rc") == 0):
        # the driver itself ended (a mutant that breaks an import; killed by a signal, the
        # system's out-of-memory killer's SIGKILL too, in the middle of a row): the run fails
        lines.append({"row": current or "<import>", "rc": f"exit {proc.returncode}",
                      "error": err[-3:]})
    return lines


def _contexts(data_file: Path, copy: Path) -> dict[str, dict[int, list[str]]]:
    """path (relative to the copy) -> line -> the contexts that executed it, over every data
    file of the measurement (:func:`_data_files`: the driver's, its forked children's); a
    file that cannot be read (a child killed while writing it) is left out."""
    import coverage

    got: dict = {}
    for path in _data_files(data_file):
        data = coverage.CoverageData(basename=str(path))
        try:
            data.read()
            files = {f: data.contexts_by_lineno(f) for f in data.measured_files()}
        except coverage.CoverageException:
            continue
        for f, lines in files.items():
            rel = Path(f).resolve().relative_to(copy.resolve()).as_posix()
            into = got.setdefault(rel, {})
            for n, cs in lines.items():
                into.setdefault(int(n), set()).update(cs)
    return {rel: {n: sorted(cs) for n, cs in lines.items()} for rel, lines in got.items()}


def _compact(cov: dict, names: list[str]) -> dict:
    """The coverage map with contexts as indices into ``names`` ("" -> -1)."""
    index = {n: i for i, n in enumerate(names)}
    return {p: {str(n): sorted({index.get(c, -1) for c in cs}) for n, cs in lines.items()}
            for p, lines in cov.items()}


def checker_baseline(copy: Path, command: str, triage: str | None, work: Path) -> dict:
    """Every row of ``command`` on the unmutated tree, under coverage (one context per
    row): its seconds and verdicts, the lines it executes; ``triage``'s verdicts beside."""
    _, rows = _rows_of(command)
    names = [f"{s}/{k}" for s, k in rows]
    data = work / "checker.coverage"
    got = {x["row"]: x for x in run_rows(copy, command, names, coverage=data, stop=False)}
    broken = [f"{n}: {got[n].get('rc') if n in got else 'not run'}" for n in names
              if n not in got or got[n]["rc"] not in (0, 1)]
    if broken:  # a row that raises unmutated: the tree or its environment is broken
        raise SystemExit(f"the checker's baseline (the unmutated tree): {len(broken)} rows did "
                         f"not run: {'; '.join(broken[:5])}; nothing cached")
    memory = [n for n in names if _out_of_memory(got[n])]
    if memory:  # the unmutated tree needs more than the cap: every mutant would fail there
        raise SystemExit(f"the checker's baseline (the unmutated tree): {len(memory)} rows ran "
                         f"out of memory under the {MEMORY_CAP / 2**30:g} GiB cap (MEMORY_CAP): "
                         f"{', '.join(memory[:3])}; nothing cached")
    base = {"command": command, "rows": names,
            "seconds": [got[n]["seconds"] for n in names],
            "passes": [got[n]["rc"] == 0 for n in names],
            "lines": _compact(_contexts(data, copy), names), "map": CHILDREN,
            "unreadable": sum(got[n].get("unreadable", 0) for n in names)}
    if triage:
        t = {x["row"]: x for x in run_rows(copy, triage, names, stop=False)}
        base["triage"] = triage
        base["triage_passes"] = [t[n]["rc"] == 0 for n in names]
    return base


# the map's version (a baseline's "map", a checker result's "map"): "children", forked
# children followed (:func:`measure`); "parent" (a baseline without the key, before this
# existed): the driver's process only, so a line run only in a forked child was "not
# executed" (a rule's child under a time limit, mechanisms/contain.py; a pool worker)
CHILDREN = "children"
# where the toolkit starts child processes: calls of these names in mechanisms/ (os.fork in
# mechanisms/contain.py), and every line of mechanisms/processes.py (the module every pool
# and child process goes through: a row that runs it starts processes, e.g. the pool of
# local/runs_in_a_worker, started in proofs/, outside the map)
CHILD_CALLS = ("fork", "forkpty", "Popen", "ProcessPoolExecutor", "Process", "Pool",
               "spawnv", "spawnve", "posix_spawn")
CHILD_MODULES = ("mechanisms/processes.py",)


def child_sites(root: Path = ROOT) -> dict[str, set[int]]:
    """path -> the lines of mechanisms/ that start or manage child processes (see
    :data:`CHILD_CALLS`, :data:`CHILD_MODULES`)."""
    out: dict = {}
    for file in sorted((root / SOURCE).rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        tree = ast.parse(file.read_text())
        if rel in CHILD_MODULES:
            out[rel] = {n for a, b in _statements(tree) for n in range(a, b + 1)}
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name in CHILD_CALLS:
                    out.setdefault(rel, set()).update(range(node.lineno, node.end_lineno + 1))
    return out


def child_rows(base: dict, root: Path = ROOT) -> list[str]:
    """The rows of a checker baseline whose map executed a line of :func:`child_sites` (in
    the row, not at import): the rows that start child processes."""
    found: set = set()
    for path, lines in child_sites(root).items():
        for n in lines:
            found.update(i for i in base["lines"].get(path, {}).get(str(n), ()) if i >= 0)
    return [base["rows"][i] for i in sorted(found)]


def _ranges(lines) -> str:
    """1, 2, 3, 7 -> "1-3, 7"."""
    out, lines = [], sorted(lines)
    for n in lines:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def follow_children(copy: Path, base: dict, rows: list[str], work: Path) -> tuple[dict, dict]:
    """``base`` (a checker baseline, maybe of the driver's process only) with ``rows`` run
    again in ``copy`` under coverage that follows forked children (:func:`measure`) and
    their lines merged into its map: (the new baseline, what changed). A row whose verdict
    differs from the baseline's (a row timing itself under the children's extra cost)
    stops it, nothing merged. The rows' seconds stay the baseline's."""
    unknown = [r for r in rows if r not in base["rows"]]
    if unknown:
        raise SystemExit(f"--children: no such row in the baseline: {', '.join(unknown)}")
    data = work / "children.coverage"
    t0 = time.perf_counter()
    got = {x["row"]: x for x in run_rows(copy, base["command"], rows, coverage=data,
                                         stop=False, children=True)}
    at = {n: i for i, n in enumerate(base["rows"])}
    differ = [f"{r}: {got[r].get('rc') if r in got else 'not run'} (baseline: "
              f"{'passes' if base['passes'][at[r]] else 'fails'})" for r in rows
              if r not in got or got[r]["rc"] not in (0, 1)
              or (got[r]["rc"] == 0) != base["passes"][at[r]]]
    if differ:
        raise SystemExit(f"--children: {len(differ)} rows ran otherwise than in the baseline: "
                         f"{'; '.join(differ[:5])}; nothing merged")
    lines = {p: {n: dict.fromkeys(cs) for n, cs in ls.items()}
             for p, ls in base["lines"].items()}
    added: dict = {}  # path -> lines no row of the baseline had executed
    pairs = 0
    for path, ls in _contexts(data, copy).items():
        for n, cs in ls.items():
            # the rows' own contexts; "" (import) is the baseline's already
            new = [at[c] for c in cs if c in at and c in got]
            into = lines.setdefault(path, {}).setdefault(str(n), {})
            fresh = [i for i in new if i not in into]
            if fresh and not into:
                added.setdefault(path, set()).add(n)
            pairs += len(fresh)
            into.update(dict.fromkeys(fresh))
    new_base = {**base, "lines": {p: {n: sorted(cs) for n, cs in ls.items() if cs}
                                  for p, ls in lines.items()}, "map": CHILDREN}
    if base.get("map") != CHILDREN:
        new_base["children_rows"] = sorted(set(base.get("children_rows", [])) | set(rows))
    change = {"rows": rows, "seconds": round(time.perf_counter() - t0, 1),
              "children": sum(got[r].get("children", 0) for r in rows),
              "unreadable": sum(got[r].get("unreadable", 0) for r in rows),
              "row_lines_added": pairs, "lines_added": sum(len(v) for v in added.values()),
              "added": {p: _ranges(v) for p, v in sorted(added.items())}}
    return new_base, change


def _node(classname: str, name: str) -> str:
    """A JUnit test case (classname "tests.test_x" or "tests.test_x.TestC", name
    "test_y[p]") as a pytest node id ("tests/test_x.py::TestC::test_y[p]")."""
    parts = classname.split(".")
    at = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
    path = "/".join(parts[:at + 1]) + ".py"
    return "::".join([path, *parts[at + 1:], name])


def tests_baseline(copy: Path, selection: str, work: Path) -> dict:
    """The test selection on the unmutated tree under coverage (pytest-cov, one context per
    test): each test's seconds and outcome, the lines it executes in the test process."""
    import xml.etree.ElementTree as ET

    rc = work / "tests.coveragerc"
    data = work / "tests.coverage"
    rc.write_text(f"[run]\ndata_file = {data}\n")
    junit = work / "tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           f"--junitxml={junit}", f"--cov={SOURCE}", "--cov-context=test", "--cov-report=",
           f"--cov-config={rc}", *shlex.split(selection)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=copy, env=env_for(copy), capture_output=True, text=True,
                       preexec_fn=_dies_with_us())
    if r.returncode not in (0, 1):  # 2-5: interrupted, internal error, usage, no tests
        raise SystemExit("the tests' baseline (the unmutated tree) did not run: pytest exit "
                         f"{r.returncode}: {' | '.join(r.stdout.strip().splitlines()[-3:])}; "
                         "nothing cached")
    seconds, failed, memory = {}, set(), []
    for case in ET.parse(junit).getroot().iter("testcase"):
        node = _node(case.get("classname", ""), case.get("name", ""))
        seconds[node] = seconds.get(node, 0.0) + float(case.get("time") or 0.0)
        bad = [x for x in (case.find("failure"), case.find("error")) if x is not None]
        if bad:
            failed.add(node)
        if any("MemoryError" in (x.get("message") or "") for x in bad):
            memory.append(node)
    if memory:  # the unmutated tree needs more than the cap: every mutant would fail there
        raise SystemExit(f"the tests' baseline (the unmutated tree): {len(memory)} tests ran "
                         f"out of memory under the {MEMORY_CAP / 2**30:g} GiB cap (MEMORY_CAP): "
                         f"{', '.join(memory[:3])}; nothing cached")
    cov = _contexts(data, copy)
    names = sorted(seconds)
    mapped = {p: {n: [c.rsplit("|", 1)[0] for c in cs] for n, cs in lines.items()}
              for p, lines in cov.items()}
    return {"selection": selection, "tests": names, "seconds": [seconds[n] for n in names],
            "passes": [n not in failed for n in names], "rc": r.returncode,
            "wall": round(time.perf_counter() - t0, 1), "lines": _compact(mapped, names),
            "summary": r.stdout.strip().splitlines()[-1:]}


def users(base: dict, m: Generated) -> list[int]:
    """The rows (tests) of a baseline that run mutant ``m``, cheapest first (see
    :class:`Generated`.where): those that executed a line of ``m.span``; code run at import
    (``where`` "module", or a line executed under the empty context): every row that ran
    anything of mechanisms/ (if any ran it at all); an annotation: none."""
    if m.where == "annotation":
        return []
    lines = base["lines"].get(m.path, {})
    got = set()
    for n in range(m.span[0], m.span[1] + 1):
        got.update(lines.get(str(n), ()))
    if got and (m.where == "module" or -1 in got):
        got = {i for f in base["lines"].values() for cs in f.values() for i in cs}
    got.discard(-1)
    ok = [i for i in got if base["passes"][i]]
    return sorted(ok, key=lambda i: (base["seconds"][i], i))


def score_checker(copy: Path, base: dict, m: Generated) -> dict:
    """The checker engine on the mutant applied in ``copy`` (see the module doc); the result
    names the map that chose its rows (``"map"``: :data:`CHILDREN` or "parent")."""
    return {**_score_checker(copy, base, m), "map": base.get("map", "parent")}


def _score_checker(copy: Path, base: dict, m: Generated) -> dict:
    t0 = time.perf_counter()
    order = users(base, m)
    if not order:
        return {"status": "not executed", "rows": 0, "of": 0, "seconds": 0.0,
                **({"why": "annotation"} if m.where == "annotation" else {})}
    names = [base["rows"][i] for i in order]
    flagged = []
    if base.get("triage"):
        # cheapest rows first, up to the first the cheap run fails (then the standard run
        # starts there); a mutant no cheap row catches has had every row run cheaply
        tri = run_rows(copy, base["triage"], names, stop=True,
                       limits={n: ROW_TIME[0] * base["seconds"][i] + ROW_TIME[1]
                               for n, i in zip(names, order, strict=True)})
        at = {n: i for i, n in enumerate(base["rows"])}
        # a mutant that breaks an import fails the whole triage run ("<import>", no row of
        # the baseline): nothing to reorder; the checker's own run then fails the same way
        flagged = [x["row"] for x in tri if x["rc"] != 0 and x["row"] in at
                   and base["triage_passes"][at[x["row"]]]]
    names = flagged + [n for n in names if n not in flagged]
    limits = {n: ROW_TIME[0] * base["seconds"][base["rows"].index(n)] + ROW_TIME[1]
              for n in names}
    got = run_rows(copy, base["command"], names, limits)
    out = {"rows": len(got), "of": len(names), "flagged": len(flagged)}
    bad = [x for x in got if x.get("rc") != 0]
    if bad:
        x = bad[0]
        status = ("timeout" if x["rc"] == "timeout" else
                  "memory" if _out_of_memory(x) else "killed")
        out.update(status=status, by=x["row"], rc=x["rc"], verdicts=x.get("verdicts"),
                   error=x.get("error"))
        if status == "killed" and x["row"] in limits:
            # a kill counts once it happens again: the row run alone a second time on the
            # mutant (a row with a time limit of its own can fail once under load: the
            # contains_rules rows' rules sleeping past 0.05 s); otherwise an error to retry
            again = run_rows(copy, base["command"], [x["row"]],
                             {x["row"]: limits[x["row"]]})
            if not any(y.get("rc") not in (0, None) for y in again):
                out.update(status="error", why="kill not reproduced")
    else:
        out["status"] = "survived"
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def score_tests(copy: Path, base: dict, m: Generated) -> dict:
    """The tests engine on the mutant applied in ``copy``."""
    order = users(base, m)
    if not order:
        return {"status": "not executed", "tests": 0, "seconds": 0.0,
                **({"why": "annotation"} if m.where == "annotation" else {})}
    ids = [base["tests"][i] for i in order]
    limit = TESTS_TIME[0] * sum(base["seconds"][i] for i in order) + TESTS_TIME[1]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p",
           "no:randomly", *ids]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=copy, env=env_for(copy), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=_dies_with_us())
    try:
        text, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return {"status": "timeout", "tests": len(ids), "seconds": round(limit, 1)}
    seconds = round(time.perf_counter() - t0, 1)
    summary = [ln.split(" ", 1)[1] for ln in text.splitlines()
               if ln.startswith(("FAILED ", "ERROR "))]
    failed = [ln.split(" - ")[0] for ln in summary]
    status = {0: "survived", 1: "killed", 2: "killed"}.get(proc.returncode, "error")
    if status == "killed" and summary and " - MemoryError" in summary[0]:
        status = "memory"  # the first failure: a MemoryError (past MEMORY_CAP)
    if status == "error" and (any(ln.lstrip("_ ").startswith("ERROR collecting ")
                                  for ln in text.splitlines())
                              or "while loading conftest" in text):
        # a test module the unmutated tree collects fails to import: pytest reports the
        # collection error, then "found no collectors" for the node ids (exit 4); or the
        # conftest itself fails to import (exit 4 before any test: no test can pass)
        status = "killed"
    out = {"status": status, "tests": len(ids), "seconds": seconds, "rc": proc.returncode}
    if failed:
        out["by"] = failed[0]
        if status == "killed" and not _fails_again(copy, failed[0], limit):
            # not reproduced (a test timing itself under load): an error to retry
            out.update(status="error", why="kill not reproduced")
    elif status == "killed" and "while loading conftest" in text:
        out["by"] = "tests/conftest.py (import)"
    if status == "error":
        out["error"] = text.strip().splitlines()[-3:]
    return out


def _fails_again(copy: Path, test: str, limit: float) -> bool:
    """Whether ``test`` (a node id) fails again, run alone on the mutant in ``copy``: a kill
    of the tests engine counts once it happens twice."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p",
           "no:randomly", test]
    proc = subprocess.Popen(cmd, cwd=copy, env=env_for(copy), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_dies_with_us())
    try:
        return proc.wait(timeout=limit) != 0
    except subprocess.TimeoutExpired:
        _kill(proc)
        return True


def incompetent(text: str, mutated: str | None, path: str) -> str | None:
    """Why a mutant is no mutant at all (None: it is one): no mutation at that position, code
    that does not compile, or the same syntax tree as the original (a float literal + 1
    that rounds to itself, 1e100 -> 1e+100)."""
    if mutated is None or mutated == text:
        return "no mutation at this position"
    try:
        with warnings.catch_warnings():  # "is" with a literal: a mutant's, not ours
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(mutated, path, "exec")
    except (SyntaxError, ValueError) as exc:
        return f"does not compile: {exc}"
    if ast.dump(ast.parse(mutated)) == ast.dump(ast.parse(text)):
        return "no change: the same syntax tree"
    return None


_COPIES: dict = {}


def _copy_for(parent: str) -> Path:
    """This process's copy of the tree (made once, under ``parent``)."""
    if os.getpid() not in _COPIES:
        copy = Path(tempfile.mkdtemp(prefix="copy-", dir=parent))
        named.copy_tree(copy)
        _COPIES[os.getpid()] = copy
    return _COPIES[os.getpid()]


def score(m: Generated, engines: tuple[str, ...], bases: dict, parent: str,
          after_checker: bool = False) -> dict:
    """Apply ``m`` to this process's copy, run ``engines`` on it, restore the file; with
    ``after_checker``, the tests only if the checker (run first) did not kill it."""
    copy = _copy_for(parent)
    path = copy / m.path
    text = path.read_text()
    out = {"id": m.id}
    mutated = mutate(text, m)
    why = incompetent(text, mutated, m.path)
    if mutated is not None:
        out["before"], out["after"] = diff_line(text, mutated, m)
    if why:
        return {**out, "incompetent": why}
    path.write_text(mutated)
    argued = m.key in equivalents()  # read now: arguments written during a run count
    try:
        for engine in engines:
            if (engine == "tests" and after_checker
                    and out.get("checker", {}).get("status") in KILLS):
                continue
            if engine == "checker" and argued:
                # its argument stands in for the checker's run (a survivor's full budget,
                # up to a standard run's CPU); the tests still run on it, and a kill there
                # sets the argument aside (summarise), leaving the checker a survivor
                out[engine] = {"status": "skipped", "why": "argued equivalent", "rows": 0,
                               "of": 0, "seconds": 0.0}
                continue
            fn = score_checker if engine == "checker" else score_tests
            out[engine] = fn(copy, bases[engine], m)
    finally:
        path.write_text(text)
    return out


# ------------------------------------------------------------------------- the results


def interval(k: int, n: int) -> tuple[float, float]:
    """The 95 % Clopper-Pearson (exact) interval of k successes in n (scipy)."""
    from scipy.stats import binomtest

    if n == 0:
        return (math.nan, math.nan)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """key -> the argument that the mutant is equivalent (benchmarks/equivalent_mutants.toml)."""
    if not path.exists():
        return {}
    doc = tomllib.loads(path.read_text())
    out: dict[str, str] = {}
    for e in doc.get("equivalent", []):
        if e["key"] in out:  # a second argument would silently replace the first
            raise ValueError(f"{path.name}: the key {e['key']!r} is argued twice")
        out[e["key"]] = " ".join(e["argument"].split())
    return out


def shown_keys(path: Path = COMMITTED) -> dict[str, set[str]]:
    """code version -> the keys of the mutants that the committed results (``path``:
    docs/mutation_generated.json, what the page shows) hold; {} without them."""
    if not path.exists():
        return {}
    summary = json.loads(path.read_text())
    return {summary["code"]: {r["key"] for r in summary["mutants"]}}


def unfounded(args, generated: set[str], shown: dict[str, set[str]]) -> list[str]:
    """The keys of ``args`` (arguments of equivalence) that name no mutant, each with why:
    a key must name a mutant generated from today's source (``generated``), or one that the
    results of a code version the page shows hold (``shown``: :func:`shown_keys`). An
    argument follows its source line: when the line changes, its mutant is no longer
    generated, but the argument stays valid for the results of the code versions that had
    the line, so it stays while the page shows such results, and lapses with them (a key of
    neither, such as a typo, is refused).

    >>> unfounded({"a|f|op|x = 1|0": "..."}, {"a|f|op|x = 1|0"}, {})
    []
    >>> unfounded({"a|f|op|x = 2|0": "..."}, set(), {"73ff4fae23": {"a|f|op|x = 2|0"}})
    []
    >>> unfounded({"a|f|op|x = 3|0": "..."}, set(), {"73ff4fae23": {"a|f|op|x = 2|0"}})
    ... # doctest: +ELLIPSIS
    ["a|f|op|x = 3|0: not generated from today's source, ... (shown: code 73ff4fae23)"]
    """
    known = set(generated).union(*shown.values())
    versions = ", ".join(f"code {v}" for v in sorted(shown)) or "none"
    return [f"{key}: not generated from today's source, and no results the page shows hold "
            f"it (shown: {versions})" for key in args if key not in known]


KILLS = ("killed", "timeout", "memory")
UNRUN = ("not executed", "skipped")  # the mutated code never ran / an argued equivalent
# the argument of every mutant inside an annotation (Generated.where == "annotation")
ANNOTATION = ("an annotation of a module with 'from __future__ import annotations' is kept as "
              "a string and never evaluated (PEP 563); nothing in the tree evaluates "
              "annotations (no typing.get_type_hints, no inspect eval_str: "
              "tests/test_generated_mutation.py checks), so no run can tell it apart")


def tally(summary: dict) -> dict:
    """Counts of a summary (see :func:`summarise`): per engine and both together, killed of
    the non-equivalent competent mutants, with the interval."""
    rows = summary["mutants"]
    eq = equivalents_in(summary)
    scored = [r for r in rows if "incompetent" not in r and r["key"] not in eq]
    out = {"sampled": len(rows), "incompetent": sum("incompetent" in r for r in rows),
           "equivalent": len([r for r in rows if r["key"] in eq and "incompetent" not in r]),
           "scored": len(scored)}
    for engine in ("checker", "tests", "both"):
        def killed(r, engine=engine):
            if engine == "both":
                return killed(r, "checker") or killed(r, "tests")
            return r.get(engine, {}).get("status") in KILLS

        done = [r for r in scored if engine == "both" or engine in r]
        k = sum(killed(r) for r in done)
        lo, hi = interval(k, len(done))
        unrun = sum(not killed(r) and all(r.get(x, {}).get("status") in UNRUN
                                          for x in ((engine,) if engine != "both"
                                                    else ("checker", "tests")))
                    for r in done)
        out[engine] = {"killed": k, "of": len(done), "unrun": unrun, "low": lo, "high": hi}
    # the tests run only where the checker did not kill (--tests-after-checker): none of the
    # checker's kills has a tests result, and some has none
    out["tests_after_checker"] = (
        any(r.get("checker", {}).get("status") in KILLS and "tests" not in r for r in scored)
        and not any(r.get("checker", {}).get("status") in KILLS and "tests" in r
                    for r in scored))
    return out


def equivalents_in(summary: dict) -> dict:
    return summary.get("equivalents", {})


FIELDS = ("key", "id", "path", "line", "operator", "kind", "definition")


def describe(m: Generated) -> dict:
    """What a result line says of its mutant (the page needs nothing else of it)."""
    return {"key": m.key, "id": m.id, "path": m.path, "line": m.line,
            "operator": m.operator, "kind": m.kind, "definition": m.definition}


def summarise(rows: list[dict], meta: dict) -> dict:
    """What the page is made from: the run's settings (``meta``: its command, commit,
    population), one row per sampled mutant with its results, and the equivalence
    arguments of the survivors."""
    keep = (*FIELDS, "before", "after", "incompetent", "checker", "tests")
    rows = [{k: r[k] for k in keep if k in r} for r in rows]
    eq = equivalents()
    eq.update({r["key"]: ANNOTATION for r in rows
               if r.get("checker", r.get("tests", {})).get("why") == "annotation"})
    survivors = {r["key"] for r in rows if not any(
        r.get(e, {}).get("status") in KILLS for e in ("checker", "tests"))}
    return {**meta, "mutants": rows,
            "equivalents": {k: v for k, v in eq.items() if k in survivors}}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def render(summary: dict) -> str:
    """The page block of a summary (docs/reference-proofs.md, between the markers)."""
    t = tally(summary)
    lines = [MARKERS[0],
             f"Generated by `{summary['command']}` from `{summary['results']}` at commit "
             f"{summary['commit']}: {summary['sampled']} of {summary['population']:,} "
             f"mutants of `{SOURCE}/` (seed {summary['seed']}; by operator class: "
             + ", ".join(f"{k} {v:,}" for k, v in sorted(summary["by_class"].items()))
             + f"). Checker: `{summary['checker']}`"
             + (f" (rows ordered by `{summary['triage']}`)" if summary.get("triage") else "")
             + f"; tests: `pytest {summary['tests']}`. {t['incompetent']} incompetent (no "
             f"mutation, not compiling, or the same syntax tree), {t['equivalent']} "
             f"equivalent (argued below); the score is over the other {t['scored']}, with "
             "its 95 % Clopper-Pearson interval."
             + ("" if summary.get("planned", summary["sampled"]) <= summary["sampled"] else
                f" Partial: the run of the {summary['planned']}-mutant sample was stopped "
                f"after {summary['sampled']}; mutants are scored in rank order, so these are "
                f"the {summary['sampled']}-mutant sample of seed {summary['seed']} (the "
                "smallest ranks), a uniform sample itself, and the command above scores "
                "exactly them."), "",
             "| engine | killed | survived (ran it) | not executed or skipped | of | score "
             "| 95 % interval |", "|---|---|---|---|---|---|---|"]
    for engine in ("checker", "tests", "both"):
        e = t[engine]
        run = ("standard run" if summary["checker"] == CHECKER
               else f"`{summary['checker']}`, not the standard run")
        name = {"checker": f"checker ({run})",
                "tests": "tests" + (" (run only on the checker's survivors)"
                                    if t["tests_after_checker"] else ""),
                "both": "checker or tests"}[engine]
        score = _pct(e["killed"] / e["of"]) if e["of"] else "-"
        ci = f"{_pct(e['low'])} - {_pct(e['high'])}" if e["of"] else "-"
        lines.append(f"| {name} | {e['killed']} | {e['of'] - e['killed'] - e['unrun']} | "
                     f"{e['unrun']} | {e['of']} | {score} | {ci} |")
    eq = equivalents_in(summary)
    parent_only = [r["id"] for r in summary["mutants"] if "incompetent" not in r
                   and r["key"] not in eq and _unseen_in_children(r.get("checker"))]
    if parent_only:
        lines += ["", f"{len(parent_only)} of the checker's \"not executed\" "
                  f"({', '.join(parent_only)}) were decided on a coverage map of the driver's "
                  "process only: a line run only in a forked child (a rule's child under a "
                  "time limit, mechanisms/contain.py; a pool worker) was not seen there "
                  "(`--children` measures the rows that start children again and scores "
                  "them again)."]
    lines += ["", "Survivors of both engines (an equivalent one with its argument, else a fault "
              "nothing catches yet):", "", *survivors(summary, ("checker", "tests"), eq), "",
              "Killed by the tests only (the checker's run misses them):", "",
              *survivors(summary, ("checker",), eq, killed_by="tests")]
    lines.append(MARKERS[1])
    return "\n".join(lines) + "\n"


def _cell(r: dict, engine: str) -> str:
    x = r.get(engine)
    if x is None:
        return "not run"
    if x["status"] in KILLS:
        return f"{x['status']} by {x['by']}" if x.get("by") else x["status"]
    if x.get("why"):
        return f"{x['status']} ({x['why']})"
    if x["status"] == "survived":
        n = x.get("rows", x.get("tests"))
        return f"survived {n} {'rows' if 'rows' in x else 'tests'}"
    return x["status"]


def survivors(summary: dict, engines: tuple[str, ...], eq: dict,
              killed_by: str | None = None) -> list[str]:
    """A markdown table of the sampled mutants that ``engines`` all let survive (and that
    ``killed_by`` kills, if given), competent ones only."""
    out = ["| mutant | where | before | after | checker | tests | equivalent because |",
           "|---|---|---|---|---|---|---|"]
    for r in summary["mutants"]:
        if "incompetent" in r or any(r.get(e, {}).get("status") in KILLS for e in engines):
            continue
        if killed_by and r.get(killed_by, {}).get("status") not in KILLS:
            continue
        because = eq.get(r["key"], "-" if killed_by else "not argued: a fault nothing "
                                                         "catches")
        out.append(f"| {r['id']} {r['operator'].split('/')[1]} | {r['path']}:{r['line']} "
                   f"`{r['definition']}` | `{_md(r.get('before', ''))}` | "
                   f"`{_md(r.get('after', ''))}` | {_cell(r, 'checker')} | "
                   f"{_cell(r, 'tests')} | {_md(because)} |")
    return out


def shown(path: Path) -> str:
    """A path as the page names it: relative to the tree when inside it."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def write_page(page: Path, block: str) -> None:
    text = page.read_text()
    start, end = MARKERS
    if start in text and end in text:
        text = text[:text.index(start)] + block.rstrip("\n") + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block
    page.write_text(text)


def to_score(held: dict, engines, retry=(), after_checker: bool = False) -> tuple[str, ...]:
    """The engines of ``engines`` a mutant still needs, given its results so far (``held``:
    engine -> result): those without a result, and those whose result's status is in
    ``retry`` (``--retry error``: a result the harness, not the mutant, made). With
    ``after_checker`` (``--tests-after-checker``) the tests are needed only once the checker
    has a result that is not a kill, or runs first in the same call (:func:`score`).

    >>> to_score({"checker": {"status": "killed"}, "tests": {"status": "error"}},
    ...          ("checker", "tests"), ("error",))
    ('tests',)
    >>> to_score({"checker": {"status": "killed"}}, ("tests",), after_checker=True)
    ()
    >>> to_score({}, ("tests",), after_checker=True)  # the checker has not run yet
    ()
    >>> to_score({"checker": {"status": "survived"}}, ("tests",), after_checker=True)
    ('tests',)
    """
    need = tuple(e for e in engines
                 if e not in held or held[e].get("status") in tuple(retry))
    if after_checker and "tests" in need and "checker" not in need:
        status = held.get("checker", {}).get("status")
        if status is None or status in KILLS:
            need = tuple(e for e in need if e != "tests")
    return need


def load(out: Path, code: str, commands: dict) -> tuple[dict[str, dict], dict]:
    """(id -> merged result, population) of ``out``'s lines made from code version ``code``
    (:func:`code_version`; lines without one: their commit) with these commands (an engine's
    result counts only under its own command). The population carries the commit (the most
    frequent among the lines)."""
    done: dict = {}
    population: dict = {}
    commits: dict = {}
    if not out.exists():
        return done, population
    for line in out.read_text().splitlines():
        r = json.loads(line)
        if r.get("code", r.get("commit")) != code:
            continue
        commits[r.get("commit")] = commits.get(r.get("commit"), 0) + 1
        if "population" in r:
            ranked = {**population.get("ranked", {}), **r.get("ranked", {})}
            population = {k: r[k] for k in ("population", "by_class")}
            if ranked:
                population["ranked"] = ranked
            continue
        prev = done.setdefault(r["id"], {})
        for k in (*FIELDS, "before", "after", "incompetent"):
            if k in r:
                prev[k] = r[k]
        for engine, command in commands.items():
            if engine in r and r.get("commands", {}).get(engine) == command:
                prev[engine] = r[engine]
    if commits:
        population["commit"] = max(commits, key=lambda c: (commits[c], str(c)))
    return done, population


def baseline_path(kind: str, code: str, key: str) -> Path:
    """Where the baseline of this code version and command is kept."""
    name = hashlib.sha1(f"{kind}|{code}|{key}".encode()).hexdigest()[:12]
    return BASELINES / f"{kind}-{name}.json"


def baseline(kind: str, code: str, key: str, make) -> dict:
    """A baseline of this code version and command, computed once
    (results/mutation-generated/)."""
    path = baseline_path(kind, code, key)
    if path.exists():
        return json.loads(path.read_text())
    got = make()
    BASELINES.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(got))
    return got


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checker", default=CHECKER, help="the checker's standard run")
    p.add_argument("--triage", default=TRIAGE, help="a cheap command that orders the rows "
                   "('': none)")
    p.add_argument("--tests", default=TESTS, help="pytest's selection of the tests")
    p.add_argument("--engines", nargs="*", default=["checker", "tests"],
                   choices=["checker", "tests"])
    p.add_argument("--sample", type=int, default=SAMPLE, help="mutants (0: all of them)")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--only", nargs="*", default=None, help="these mutant ids only")
    p.add_argument("--jobs", type=int, default=1, help="mutants scored at a time")
    p.add_argument("--retry", nargs="*", default=(), metavar="STATUS",
                   help="score again the engines whose result has one of these statuses "
                        "(e.g. error: a result the harness, not the mutant, made)")
    p.add_argument("--tests-after-checker", action="store_true",
                   help="the tests only on the mutants the checker did not kill (enough for "
                        "the checker-or-tests score; the tests' own row then covers those)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--count", action="store_true", help="print the population and stop")
    p.add_argument("--no-run", action="store_true", help="score nothing: page from --out")
    p.add_argument("--code", default=None, help="with --no-run: the code version whose "
                   "results to show (default: this tree's; see code_version)")
    p.add_argument("--markdown", type=Path, default=None)
    p.add_argument("--survivors", type=Path, default=None,
                   help="write the survivors of each engine (a markdown list) here")
    p.add_argument("--children", nargs="*", default=None, metavar="ROW",
                   help="before scoring: run again, under coverage that follows forked "
                        "children, the rows of the stored checker baseline (this code "
                        "version and command) that start child processes (those whose map "
                        "executed a child-starting line: child_rows), or these ROWs; merge "
                        "their lines into its map (the baseline records map 'children'), "
                        "and score again by the checker the mutants it had found 'not "
                        "executed' on a map of the driver's process only")
    p.add_argument("--drive", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.drive:
        return drive(json.loads(args.drive))
    if args.count:
        population = mutants()
        print(json.dumps({"mutants": len(population), "by_class": _by_class(population)}))
        return 0
    commit = tree_version()
    code = args.code if args.no_run and args.code else code_version()
    commands = {"checker": args.checker + (f" [triage: {args.triage}]" if args.triage else ""),
                "tests": args.tests}
    done, pop = load(args.out, code, commands)
    if args.children is not None:
        if args.no_run or "checker" not in args.engines:
            raise SystemExit("--children re-measures the checker's baseline: not with "
                             "--no-run, and the checker among --engines")
        rebaseline_children(code, commands["checker"], args.children)
    if args.no_run:  # the sample as the results hold it (the smallest ranks among them)
        chosen = [Generated(**{f: r[f] for f in FIELDS if f != "kind"},
                            **dict.fromkeys(("occurrence", "col", "end_line", "end_col",
                                             "first"), 0), where="body", span=(0, 0))
                  for r in done.values() if "key" in r]
        chosen = sample(chosen, args.sample or None, args.seed)
        chosen, planned = scored_prefix(chosen, pop.get("ranked", {}).get(str(args.seed)),
                                        done, args.engines, args.sample or None,
                                        args.tests_after_checker)
    else:
        population = mutants()
        chosen = sample(population, args.sample or None, args.seed)
        planned = len(chosen)
        # the sample in rank order: a page of a run cut short shows its longest scored prefix
        pop = {"population": len(population), "by_class": _by_class(population),
               "ranked": {str(args.seed): [m.id for m in sorted(
                   chosen, key=lambda m: rank(m, args.seed))]}}
    if args.only:
        chosen = [m for m in chosen if m.id in set(args.only)]
    # scored in rank order: the mutants scored so far are (up to the few in flight) the
    # sample of that size, so a run cut short leaves a uniform sample (--sample k shows it)
    # --children: the checker's "not executed" decided on the driver's map only, again
    again = set() if args.children is None else {
        m.id for m in chosen if _unseen_in_children(done.get(m.id, {}).get("checker"))}

    def needs(m):
        need = to_score(done.get(m.id, {}), args.engines, args.retry,
                        args.tests_after_checker)
        return ("checker", *need) if m.id in again and "checker" not in need else need

    todo = sorted((m for m in chosen if "incompetent" not in done.get(m.id, {})
                   and needs(m)), key=lambda m: rank(m, args.seed))
    if todo and not args.no_run:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write(json.dumps({**pop, "commit": commit, "code": code}) + "\n")
        with tempfile.TemporaryDirectory(prefix="fedmarket-generated-") as parent:
            copy = _copy_for(parent)
            work = Path(parent)
            bases = {}
            if "checker" in args.engines:
                bases["checker"] = baseline("checker", code, commands["checker"],
                                            lambda: checker_baseline(copy, args.checker,
                                                                     args.triage or None,
                                                                     work))
            if "tests" in args.engines:
                bases["tests"] = baseline("tests", code, args.tests,
                                          lambda: tests_baseline(copy, args.tests, work))
            tasks = [(m, needs(m), bases, parent, args.tests_after_checker) for m in todo]

            def record(i, r):
                r = {**describe(tasks[i][0]), **r, "commit": commit, "code": code,
                     "commands": commands}
                with args.out.open("a") as f:
                    f.write(json.dumps(r) + "\n")
                print(json.dumps(r), flush=True)

            if args.jobs == 1:
                for i, task in enumerate(tasks):
                    record(i, score(*task))
            else:
                from proofs.report import in_parallel

                in_parallel(score, tasks, args.jobs, record)
            shutil.rmtree(copy, ignore_errors=True)
        done, pop = load(args.out, code, commands)
    size = len(chosen) if len(chosen) < planned else args.sample
    meta = {"command": "python benchmarks/generated_mutation.py"
            + ("" if size == SAMPLE else f" --sample {size}")
            + ("" if args.seed == SEED else f" --seed {args.seed}")
            + ("" if args.checker == CHECKER else f" --checker {shlex.quote(args.checker)}")
            + ("" if args.triage == TRIAGE else f" --triage {shlex.quote(args.triage)}")
            + ("" if args.tests == TESTS else f" --tests {shlex.quote(args.tests)}"),
            "commit": pop.get("commit", commit), "code": code, "seed": args.seed,
            "sampled": len(chosen), "planned": planned,
            "checker": args.checker, "triage": args.triage, "tests": args.tests,
            "results": shown(args.out),
            **{k: v for k, v in pop.items() if k != "ranked"}}
    rows = [{**describe(m), **done.get(m.id, {})} for m in chosen]
    summary = summarise(rows, meta)
    if tally(summary)["tests_after_checker"] and "--tests-after" not in summary["command"]:
        summary["command"] += " --tests-after-checker"
    print(json.dumps(tally(summary)))
    if args.survivors is not None:
        eq = equivalents_in(summary)
        text = [f"# Survivors of the generated mutants at {meta['commit']}", "",
                f"`{meta['command']}`: {json.dumps(tally(summary))}", ""]
        for engine in ("checker", "tests"):
            text += [f"## Survivors of the {engine}", "",
                     *survivors(summary, (engine,), eq), ""]
        args.survivors.write_text("\n".join(text))
    if args.markdown is not None:
        COMMITTED.write_text(json.dumps(summary, indent=1) + "\n")
        write_page(args.markdown, render(summary))
    return 0


def _unseen_in_children(result: dict | None) -> bool:
    """Whether a checker result is "not executed" on a map of the driver's process only
    (an annotation aside): a line only a forked child runs could not have been seen."""
    return (result is not None and result.get("status") == "not executed"
            and result.get("why") != "annotation" and result.get("map", "parent") != CHILDREN)


def rebaseline_children(code: str, command: str, rows: list[str]) -> dict | None:
    """``--children``: the stored checker baseline of ``code`` and ``command`` with the rows
    that start children (:func:`child_rows`; or ``rows``) measured again following forked
    children (:func:`follow_children`), written back in place (the first map of the driver's
    process only kept beside it, ``*.parent.json``). Prints and returns what changed (None:
    nothing run, the map follows children already)."""
    path = baseline_path("checker", code, command)
    if not path.exists():
        raise SystemExit(f"--children: no stored checker baseline of this code version and "
                         f"command ({shown(path)}); a fresh one follows children already")
    base = json.loads(path.read_text())
    if not rows and base.get("map") == CHILDREN:
        print(json.dumps({"children": f"{shown(path)} follows children already"}))
        return None
    rows = rows or child_rows(base, ROOT)
    with tempfile.TemporaryDirectory(prefix="fedmarket-children-") as parent:
        copy = Path(tempfile.mkdtemp(prefix="copy-", dir=parent))
        named.copy_tree(copy)
        new, change = follow_children(copy, base, rows, Path(parent))
    keep = path.with_suffix(".parent.json")
    if base.get("map") != CHILDREN and not keep.exists():
        keep.write_text(path.read_text())
    path.write_text(json.dumps(new))
    change["baseline"] = shown(path)
    print(json.dumps({"children": change}), flush=True)
    return change


def _by_class(population: list[Generated]) -> dict[str, int]:
    by: dict = {}
    for m in population:
        by[m.kind] = by.get(m.kind, 0) + 1
    return by


if __name__ == "__main__":
    sys.exit(main())
