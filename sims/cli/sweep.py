"""``fedmarket sweep``: a resumable grid of scenario cells in an on-disk store."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from ..errors import SpecError
from ..sweep import EXECUTORS, MAX_CELLS, PRESETS
from .common import (
    Running,
    add_command,
    add_progress,
    add_quiet,
    integer,
    progress_reporter,
    user_modules,
    writable_folder,
)

__all__ = ["add_parser", "cell_reporters", "run"]


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "sweep", "run a resumable grid of scenario cells")
    p.add_argument("spec", nargs="?", default=None, help="TOML sweep spec (or give --preset)")
    p.add_argument("--preset", default=None, choices=sorted(PRESETS),
                   help="a built-in sweep instead of a spec file (default: none)")
    p.add_argument("--out", default="results/sweep", help="the results store folder")
    p.add_argument("--executor", default="serial", choices=EXECUTORS,
                   help="where cells run")
    p.add_argument("--workers", type=integer, default=2,
                   help="worker processes (processes and local ray executors)")
    p.add_argument("--ray-address", dest="ray_address", default=None,
                   help="address of a running ray cluster (default: start a local one)")
    p.add_argument("--reuse-stale", action="store_true",
                   help="keep finished cells computed by other code or under other defaults "
                        "(refused otherwise)")
    p.add_argument("--recompute-damaged", action="store_true",
                   help="delete the cells whose rows fail their checksum and compute them "
                        "again (refused otherwise, the store untouched)")
    p.add_argument("--log-dir", default=None,
                   help="per-round logs of every learning cell run, under LOG_DIR/scenario/"
                        "mechanism/seed<S>-<cell>: rounds.csv (always) and TensorBoard event "
                        "files where the tensorboard package is installed (pip install "
                        "fedmarket[tensorboard])")
    p.add_argument("--recompute-stale", action="store_true",
                   help="compute such stale cells again, replacing their rows")
    p.add_argument("--no-checkpoints", dest="checkpoints", action="store_false",
                   help="write no per-round checkpoints (OUT/checkpoints): a killed learning "
                        "cell then restarts from its first round")
    p.add_argument("--report", action="store_true", help="write the report afterwards")
    p.add_argument("--rank-by", dest="rank_by", default=None, metavar="PRIORITIES",
                   help="with --report: how the report ranks the market mechanisms (see "
                        "`fedmarket report --help`; default: "
                        "'ir,deficit,regret,welfare')")
    p.add_argument("--cpl-rank-by", dest="cpl_rank_by", default=None, metavar="PRIORITIES",
                   help="with --report: how the report ranks the CPL pricing rules (default "
                        "'bound')")
    p.add_argument("--regret-markets", dest="regret_markets", type=integer, default=None,
                   metavar="N",
                   help="with --report: markets per seed on which each market mechanism's "
                        "regret is measured (default 300; 0: none)")
    p.add_argument("--joint", action="store_true", default=None,
                   help="with --report: also the regret of two type dimensions misreported "
                        "at once (see `fedmarket report --help`)")
    p.add_argument("--max-cells", dest="max_cells", type=integer, default=MAX_CELLS,
                   help="refuse a grid of more cells than this (counted before any is "
                        "built; building alone takes about 0.2 ms a cell)")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="at most this many seconds per cell: a cell past it (a slow rule of "
                        "your own, a long training) is stopped, named in one line and not "
                        "stored, and the sweep goes on (exit status 1); default: no limit")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..report import write_report
    from ..sweep import expand, load_toml, run_sweep

    if (args.spec is None) == (args.preset is None):
        raise SpecError("spec", "give a TOML spec file or --preset (not both)")
    spec = PRESETS[args.preset] if args.preset else load_toml(args.spec)
    if args.spec is not None:  # custom rules in the spec may live beside it
        user_modules(Path(args.spec).resolve().parent)
    report_opts = {k: getattr(args, k) for k in ("rank_by", "cpl_rank_by", "regret_markets",
                                                 "joint")
                   if getattr(args, k) is not None}
    if report_opts:  # checked before any cell runs
        from ..ranking import Priorities

        if not args.report:
            flag = "--" + next(iter(report_opts)).replace("_", "-")
            raise SpecError(flag, "ranks the report's mechanisms; add --report"
                            if flag not in ("--regret-markets", "--joint") else
                            "is a report option; add --report")
        from ..ranking import DEFAULT

        rank = Priorities.parse(args.rank_by if args.rank_by is not None else DEFAULT)
        if args.cpl_rank_by is not None:
            Priorities.parse(args.cpl_rank_by, family="cpl")
        if args.regret_markets is not None and args.regret_markets < 0:
            raise SpecError("--regret-markets", f"is {args.regret_markets}; an integer >= 0")
        if rank.needs_regret and args.regret_markets == 0:
            raise SpecError("--rank-by", f"{rank.describe()} ranks by regret: give "
                                         "--regret-markets above 0 (or another --rank-by)")
        if args.joint and args.regret_markets == 0:
            raise SpecError("--joint", "measures regret: give --regret-markets above 0")
        if rank.needs_joint and not args.joint:
            raise SpecError("--rank-by", f"{rank.describe()} ranks by the regret of two "
                                         "dimensions at once: give --joint")
    if args.workers < 1:
        raise SpecError("--workers", f"is {args.workers}; must be >= 1")
    if args.max_cells < 1:
        raise SpecError("--max-cells", f"is {args.max_cells}; must be >= 1")
    if args.time_limit is not None and not 0 < args.time_limit < math.inf:
        raise SpecError("--time-limit", f"is {args.time_limit}; must be a finite number of "
                                        "seconds > 0")

    def counted(n):  # the count comes first: building a large grid takes a while
        if not args.quiet:
            print(f"sweep: {n:,} cells in the grid", flush=True)

    cells = expand(spec, max_cells=args.max_cells, counted=counted)
    writable_folder("--out", args.out)
    if args.log_dir:
        writable_folder("--log-dir", args.log_dir)
    with progress_reporter("sweep cells", quiet=args.quiet,
                           every=args.progress_every) as progress:
        stats = run_sweep(cells, args.out, executor=args.executor, workers=args.workers,
                          ray_address=args.ray_address, reuse_stale=args.reuse_stale,
                          recompute_stale=args.recompute_stale,
                          recompute_damaged=args.recompute_damaged,
                          **cell_reporters(progress, len(cells)),
                          time_limit=args.time_limit, log_dir=args.log_dir,
                          checkpoints=args.checkpoints)
    for message in stats["timed_out"]:  # even with --quiet: these cells are not stored
        print(f"fedmarket: cell {message}", file=sys.stderr)
    if not args.quiet:
        kept = (f" ({stats['stale_reused']} stale, kept)" if stats["stale_reused"] else
                f" ({stats['stale_recomputed']} stale, recomputed)"
                if stats["stale_recomputed"] else "")
        late = (f", {len(stats['timed_out'])} stopped at the time limit (not stored)"
                if stats["timed_out"] else "")
        print(f"{stats['cells']} cells: {stats['ran']} run{late}, {stats['skipped']} already "
              f"done{kept}; "
              + (f"{stats['damaged_deleted']} damaged cells deleted and recomputed; "
                 if stats["damaged_deleted"] else "") +
              f"{stats['wall_s']:.1f} s wall, {stats['work_s']:.1f} s of cell work "
              f"({args.executor})")
    if args.report:
        from mechanisms.lookup import named_modules

        # the store may hold cells of earlier runs: trusted are the modules this spec names
        own = named_modules([c.mechanism for c in cells]
                            + [v for c in cells for _, v in c.params])
        md, page = write_report(args.out, **report_opts, rules_from=own)
        if not args.quiet:
            print(f"report: {md} and {page}")
    return 1 if stats["timed_out"] else 0


def cell_reporters(progress, cells: int) -> dict:
    """``run_sweep``'s ``progress`` and ``cell_progress`` from a :func:`progress_reporter`
    callback (None: none): cells done of all, noted with how far the running cells are
    (``running: CELL: 7/20 rounds (31 s)``), so that a long cell -- a slow rule of your own,
    a training run -- shows a change every --progress-every seconds, not a silent wait."""
    if progress is None:
        return {"progress": None, "cell_progress": None}
    from ..sweep import describe_cell

    running = Running("rounds")
    state = [0, cells]

    def cells_done(done, total):
        state[:] = [done, total]
        progress(done, total, running.note())

    def cell_step(st):
        name = describe_cell(st.cell)
        if st.over:
            running.end(name)
        else:
            running.step(name, st.done, st.total, unit=st.unit, seconds=st.seconds)
        progress(*state, running.note())

    return {"progress": cells_done, "cell_progress": cell_step}
