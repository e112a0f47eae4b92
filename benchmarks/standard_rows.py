"""Where the standard run's time goes (issue 34, part 3): every row of
``fedmarket prove --standard`` (proofs.standard.STANDARD) checked in this one process at its
budget divided by ``--scale``, with this process's CPU seconds per row, the draws and the
discriminating share, and the row's CPU seconds at its full budget projected linearly
(``cpu x scale``: the draws and the checks grow with the budget; the exhaustive companion,
which does not, is timed apart and not scaled).

    python benchmarks/standard_rows.py --scale 20 --json results/standard_rows.json

CPU time (``time.process_time`` plus the ended child processes' user + sys, e.g. a rule run
under a time limit in a forked child), not wall: robust to the other jobs of a shared host. The
projection is an estimate; ``fedmarket prove --standard`` itself gives the real figures.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from _timing import pick

from proofs import PROPERTIES, SUBJECTS
from proofs.checker import check_exhaustive
from proofs.contract import contract_check
from proofs.ipfl_properties import tiny_markets
from proofs.report import EXHAUSTIVE, TINY_GRID
from proofs.standard import STANDARD


def rows(subjects=None, properties=None):
    """The standard run's rows (subject, property), in its order."""
    return [(s, k) for s in (subjects or SUBJECTS) for k in SUBJECTS[s].declares
            if not properties or k in properties]


def _children() -> float:
    """User + sys CPU seconds of this process's ended (waited-for) child processes."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(sname: str, key: str, scale: float, exhaustive: bool = True) -> dict:
    """One row at ``STANDARD.budget // scale`` (at least 1)."""
    subject, prop = SUBJECTS[sname], PROPERTIES[key]
    budget = STANDARD.budget(sname, key)
    small = max(1, round(budget / scale))
    c0, w0, k0 = time.process_time(), time.perf_counter(), _children()
    res = contract_check(subject, prop, subject.declares[key], max_examples=small,
                         seed=STANDARD.seed, engine=STANDARD.engine)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    cpu += _children() - k0  # the row's child processes (a rule run under a time limit)
    r = res.report
    grid = 0.0
    if exhaustive and STANDARD.exhaustive and key in EXHAUSTIVE:
        c1 = time.process_time()
        check_exhaustive(subject, prop, tiny_markets(**TINY_GRID))
        grid = time.process_time() - c1
    # a row that stops early (a counterexample) costs what it cost, at any budget
    full = cpu * scale if r.verdict != "counterexample" else cpu
    return {"subject": sname, "property": key, "budget": budget, "checked_at": small,
            "verdict": r.verdict, "as_declared": res.as_declared, "drawn": r.examples,
            "discriminating": r.discriminating,
            "share": r.discriminating / r.examples if r.examples else 0.0,
            "cpu": cpu, "wall": wall, "grid_cpu": grid, "projected_cpu": full + grid}


def table(out: list[dict], top: int | None = None) -> str:
    lines = ["| subject | property | budget | checked | verdict | drawn | disc. share | "
             "CPU s | projected CPU s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(out, key=lambda r: -r["projected_cpu"])[:top]:
        lines.append(f"| {r['subject']} | `{r['property']}` | {r['budget']:,} | "
                     f"{r['checked_at']:,} | {r['verdict']} | {r['drawn']:,} | "
                     f"{100 * r['share']:.1f} % | {r['cpu'] + r['grid_cpu']:.2f} | "
                     f"{r['projected_cpu']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=pick(20.0, 2000.0),
                    help="check each row at its standard budget / SCALE (default 20)")
    ap.add_argument("--subject", action="append", default=None)
    ap.add_argument("--property", action="append", default=None)
    ap.add_argument("--no-exhaustive", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here (JSON)")
    ap.add_argument("--top", type=int, default=None, help="print only the N costliest rows")
    args = ap.parse_args(argv)
    if not args.scale >= 1:
        raise SystemExit(f"--scale: is {args.scale}; must be >= 1")
    out = []
    for sname, key in rows(args.subject, args.property):
        out.append(measure(sname, key, args.scale, not args.no_exhaustive))
        r = out[-1]
        print(f"{sname:14s} {key:26s} {r['verdict']:15s} share {100 * r['share']:5.1f} % "
              f"cpu {r['cpu'] + r['grid_cpu']:7.2f} s  projected {r['projected_cpu']:8.1f} s",
              flush=True)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"scale": args.scale, "rows": out}, indent=1))
    total = sum(r["projected_cpu"] for r in out)
    print(table(out, args.top))
    print(f"projected CPU of the standard run's rows: {total:,.0f} s "
          f"({total / STANDARD.jobs / 60:.1f} min on {STANDARD.jobs} idle cores, "
          f"perfectly shared; scale {args.scale:g})")


if __name__ == "__main__":
    main()
