"""Branch coverage of ``mechanisms/`` under the checker's standard run (issue 34, part 2).

Runs the standard run (``fedmarket prove --standard``: :data:`proofs.standard.STANDARD`)
under coverage.py with branch measurement, its worker processes and threads included
(coverage's ``concurrency = multiprocessing,thread``: every spawned worker measures itself;
``patch = _exit``: so does a forked child that ends with ``os._exit``, the process a rule of
your own runs in under a time limit; the data files are combined), then writes

* ``--json`` (default docs/coverage_standard.json): the command, the code version (a hash of
  ``mechanisms/``), the wall seconds, the totals and per-file figures (branches and
  statements, covered and all), and every uncovered branch (file, line, where it goes: a
  line, or -1 for leaving the function; its function and source text);
* ``--markdown`` (default docs/reference-proofs.md, between the ``coverage-standard``
  markers): the figures and every uncovered branch with the reason it is not reached, read
  from benchmarks/coverage_reasons.toml (keyed by file, function and source text, so a
  reason survives lines moving; a branch with no reason is listed as "no reason recorded",
  which tests/test_coverage_standard.py refuses).

``--examples N`` measures a reduced variant instead: the same rows, engine, seed, exhaustive
grid and worker processes at N discriminating examples per row (``fedmarket prove --engine
batch --examples N --seed 0 --exhaustive --jobs 2``); the page says which was measured.
``--no-run`` re-renders the page from the JSON (and the reasons) without measuring.

    python benchmarks/coverage_standard.py                  # the standard run (long)
    python benchmarks/coverage_standard.py --examples 2000  # the reduced variant
    python benchmarks/coverage_standard.py --no-run         # the page from the JSON
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCE = "mechanisms"
JSON = ROOT / "docs" / "coverage_standard.json"
PAGE = ROOT / "docs" / "reference-proofs.md"
REASONS = HERE / "coverage_reasons.toml"
MARKERS = ("<!-- coverage-standard:start -->", "<!-- coverage-standard:end -->")
NO_REASON = "no reason recorded"


def prove_args(examples: int | None) -> list[str]:
    """The ``fedmarket prove`` arguments of the measured run: the standard run, or its
    reduced variant at ``examples`` per row (the same rows and settings otherwise)."""
    if examples is None:
        return ["prove", "--standard"]
    from proofs.standard import STANDARD

    return ["prove", "--engine", STANDARD.engine, "--examples", str(int(examples)),
            "--seed", str(STANDARD.seed), *(["--exhaustive"] if STANDARD.exhaustive else []),
            "--jobs", str(STANDARD.jobs)]


def command(examples: int | None) -> str:
    """The command line that reproduces the figures."""
    tail = "" if examples is None else f" --examples {int(examples)}"
    return f"python benchmarks/coverage_standard.py{tail}"


def code_version(root: Path = ROOT) -> str:
    """SHA-256 (first 12 hex digits) of every .py file of mechanisms/, in path order."""
    h = hashlib.sha256()
    for path in sorted((root / SOURCE).rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


# patch = _exit: a process that ends with os._exit saves its data first -- the child each
# rule of your own runs in under a time limit (mechanisms.contain._in_child) ends so, and
# its side of that code would otherwise read as never run although the run runs it
RC = """[run]
branch = True
source = {source}
concurrency = multiprocessing,thread
parallel = True
patch = _exit
data_file = {data}
"""


def measure(examples: int | None, work: Path, log=sys.stderr) -> tuple[dict, float, str]:
    """Run the measured command under coverage in ``work``; returns (coverage's JSON report,
    wall seconds, the prove command)."""
    rc = work / "coveragerc"
    data = work / ".coverage"
    rc.write_text(RC.format(source=ROOT / SOURCE, data=data))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    args = prove_args(examples)
    run = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "sims.cli", *args,
           "--markdown", str(work / "report.md")]
    print("running:", shlex.join(run), file=log, flush=True)
    t0 = time.perf_counter()
    # Ctrl-C as at a terminal: a shell starting this in the background ignores SIGINT, and
    # the child would inherit that (prove --jobs then skips its Ctrl-C handling)
    got = subprocess.run(run, cwd=ROOT, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seconds = time.perf_counter() - t0
    if got.returncode not in (0, 1):  # 1: some row not as declared (still measured)
        raise SystemExit(f"the measured run failed (exit {got.returncode})")
    cov = [sys.executable, "-m", "coverage"]
    subprocess.run([*cov, "combine", f"--rcfile={rc}", "-q"], cwd=ROOT, env=env, check=True)
    out = work / "coverage.json"
    subprocess.run([*cov, "json", f"--rcfile={rc}", "-q", "-o", str(out)], cwd=ROOT,
                   env=env, check=True)
    return json.loads(out.read_text()), seconds, "fedmarket " + shlex.join(args)


def _functions(tree: ast.AST) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function and class."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                out.append((child.lineno, child.end_lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def where(root: Path, rel: str, line: int) -> tuple[str, str]:
    """(innermost function or class around ``line``, or "<module>"; the line's text)."""
    text = (root / rel).read_text()
    spans = _functions(ast.parse(text))
    inner = [s for s in spans if s[0] <= line <= s[1]]
    name = min(inner, key=lambda s: s[1] - s[0])[2] if inner else "<module>"
    lines = text.splitlines()
    return name, lines[line - 1].strip() if 0 < line <= len(lines) else ""


def summarise(report: dict, seconds: float, prove: str, examples: int | None,
              root: Path = ROOT) -> dict:
    """The committed figures from coverage's JSON report."""
    files, uncovered = {}, []
    tot = dict.fromkeys(("branches", "covered_branches", "statements", "covered_statements"),
                        0)
    for path, entry in sorted(report["files"].items()):
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix() \
            if Path(path).is_absolute() else Path(path).as_posix()
        s = entry["summary"]
        row = {"branches": s["num_branches"], "covered_branches": s["covered_branches"],
               "statements": s["num_statements"], "covered_statements": s["covered_lines"]}
        files[rel] = row
        for k in tot:
            tot[k] += row[k]
        for src, dst in entry.get("missing_branches", []):
            function, text = where(root, rel, src)
            uncovered.append({"file": rel, "line": src, "to": dst, "function": function,
                              "text": text})
    return {"command": command(examples), "prove": prove,
            "variant": "standard" if examples is None else f"reduced: {examples} per row",
            "code_version": code_version(root), "seconds": round(seconds, 1),
            "totals": tot, "files": files, "uncovered": uncovered}


def percent(covered: int, total: int) -> str:
    return "100.0 %" if total == 0 else f"{100.0 * covered / total:.1f} %"


def load_reasons(path: Path = REASONS) -> list[dict]:
    """The reasons table: ``[[reason]]`` entries with ``file``, optional ``function`` and
    ``text`` (the branch line's source text, stripped) and ``why``; the most specific match
    wins (file + function + text, then file + function, then file)."""
    if not path.exists():
        return []
    return tomllib.loads(path.read_text()).get("reason", [])


def reason_for(branch: dict, reasons: list[dict]) -> str:
    best, rank = NO_REASON, -1
    for r in reasons:
        if r.get("file") != branch["file"]:
            continue
        if "function" in r and r["function"] != branch["function"]:
            continue
        if "text" in r and r["text"] != branch["text"]:
            continue
        score = ("function" in r) + 2 * ("text" in r)
        if score > rank:
            best, rank = r["why"], score
    return best


def render(summary: dict, reasons: list[dict]) -> str:
    """The page block (between the markers) of a summary."""
    t = summary["totals"]
    both = t["covered_branches"] + t["covered_statements"]
    lines = [
        f"Measured by `{summary['command']}` ({summary['variant']}: `{summary['prove']}` "
        f"under coverage.py, its worker processes included; mechanisms/ code version "
        f"`{summary['code_version']}`; {summary['seconds']:,.0f} s wall under coverage on "
        "the shared 2-core host). The figures are in docs/coverage_standard.json.",
        "",
        f"**Branches: {t['covered_branches']} of {t['branches']} "
        f"({percent(t['covered_branches'], t['branches'])})**; statements "
        f"{t['covered_statements']} of {t['statements']} "
        f"({percent(t['covered_statements'], t['statements'])}); both together "
        f"{percent(both, t['branches'] + t['statements'])}.",
        "",
        "| file | branches | covered | % | statements | covered | % |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rel, f in summary["files"].items():
        lines.append(f"| {rel} | {f['branches']} | {f['covered_branches']} | "
                     f"{percent(f['covered_branches'], f['branches'])} | {f['statements']} | "
                     f"{f['covered_statements']} | "
                     f"{percent(f['covered_statements'], f['statements'])} |")
    lines += ["", f"Every uncovered branch ({len(summary['uncovered'])}; `line -> line`, "
              "`-> exit` when it leaves the function) and why the standard run does not "
              "take it:", "",
              "| branch | in | why |", "| --- | --- | --- |"]
    for b in summary["uncovered"]:
        to = "exit" if b["to"] < 0 else str(b["to"])
        why = reason_for(b, reasons).replace("|", "\\|")
        lines.append(f"| {b['file']}:{b['line']} -> {to} | `{b['function']}` | {why} |")
    return "\n".join(lines)


def write_page(page: Path, block: str) -> None:
    text = page.read_text()
    start, end = MARKERS
    if start not in text or end not in text:
        raise SystemExit(f"{page} has no {start} ... {end} block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{start}\n{block}\n{end}{tail}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=None,
                   help="measure the reduced variant at N per row (default: the standard run)")
    p.add_argument("--json", type=Path, default=JSON)
    p.add_argument("--markdown", type=Path, default=PAGE)
    p.add_argument("--no-run", action="store_true", help="re-render the page from --json")
    args = p.parse_args(argv)
    if not args.no_run:
        if args.examples is not None and args.examples < 1:
            p.error("--examples must be >= 1")
        sys.path.insert(0, str(ROOT))
        with tempfile.TemporaryDirectory(prefix="coverage-standard-") as tmp:
            report, seconds, prove = measure(args.examples, Path(tmp))
        summary = summarise(report, seconds, prove, args.examples)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    summary = json.loads(args.json.read_text())
    write_page(args.markdown, render(summary, load_reasons()))
    t = summary["totals"]
    print(f"branches {t['covered_branches']}/{t['branches']} "
          f"({percent(t['covered_branches'], t['branches'])}); "
          f"{len(summary['uncovered'])} uncovered; {summary['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
