"""``fedmarket reproduce``: run every testable claim of the seed papers for several seeds (a
resumable sweep; rerun to continue) and write docs/reproduction.md from the results."""

from __future__ import annotations

from .common import (
    add_command,
    add_progress,
    add_quiet,
    integer,
    progress_reporter,
    writable_file,
    writable_folder,
)

__all__ = ["add_parser", "run"]


def add_parser(sub, full: bool = False) -> None:
    from ..reproduce import SETTINGS
    from ..sweep import EXECUTORS

    p = add_command(sub, "reproduce", "reproduce the papers' claims over seeds and write "
                                      "docs/reproduction.md")
    p.add_argument("--setting", default="reduced", choices=sorted(SETTINGS),
                   help="reduced (fits 2 cores: Fig. 2 on Fashion-MNIST, the rest on "
                        "digits and again Fig. 4, 5 and Table 2 with training on "
                        "Fashion-MNIST), digits (every learning claim on digits), medium "
                        "(every learning claim on all 60,000 Fashion-MNIST images, 20 rounds "
                        "of 50 steps) or full (the paper's sizes; Fig. 4 and Table 2 with "
                        "training on CIFAR-10 from $FEDMARKET_CIFAR10)")
    p.add_argument("--seeds", type=integer, nargs="+", default=None,
                   help="run every claim at exactly these seeds (verdicts still by the "
                        "sequential rule, at the looks these seeds reach); default: the "
                        "sequential rule chooses, seeds 0-2 for every claim, then 0-4 and 0-9 "
                        "for the claims still undecided (sims.sequential)")
    p.add_argument("--scenarios", nargs="+", default=None,
                   help="only the cells of these scenarios (claims), e.g. fig2 liars "
                        "(default: all)")
    p.add_argument("--algorithms", nargs="+", default=None,
                   help="only the cells of these algorithms or mechanisms (default: all)")
    p.add_argument("--datasets", nargs="+", default=None,
                   help="only the learning cells that train on these data sets, e.g. digits "
                        "(the mechanism-level markets, which train nothing, are left out; "
                        "default: every cell)")
    p.add_argument("--with-algorithms", nargs="+", default=[], metavar="ALGORITHM",
                   help="algorithms of your own (module:attr or an installed entry point) "
                        "that Fig. 2's comparisons run beside the nine")
    for name, text in (("selection", "box2, local, exact, share-all"),
                       ("payments", "paper, vcg, shapley, cost-plus, none"),
                       ("prices", "paper, cost-plus")):
        p.add_argument(f"--{name}", default=None,
                       help=f"iPFL's {name} rule in every iPFL cell: {text} or module:function "
                            "(e.g. designed_rule:payments); default: each cell's own")
    p.add_argument("--out", default="results/reproduce", help="the results store folder")
    p.add_argument("--executor", default="processes", choices=EXECUTORS,
                   help="where cells run")
    p.add_argument("--workers", type=integer, default=2, help="worker processes")
    p.add_argument("--threads", type=integer, default=1, help="math threads per worker")
    p.add_argument("--docs", default=None,
                   help="write the reproduction page here (default: OUT/reproduction.md)")
    p.add_argument("--with-summary", default=None, metavar="FOLDER",
                   help="take the cells the store lacks from the summary in FOLDER (a "
                        "committed one, e.g. docs) instead of computing them, after checking "
                        "that every cell found in both agrees")
    p.add_argument("--reuse-stale", action="store_true",
                   help="keep finished cells computed by other code or defaults as they are")
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
    p.add_argument("--device", default="cpu",
                   help="where every learning cell trains and evaluates: cpu (default), cuda, "
                        "cuda:N, or auto (cuda when torch sees a CUDA device, else cpu); a "
                        "device other than cpu is part of each cell's configuration")
    p.add_argument("--no-checkpoints", dest="checkpoints", action="store_false",
                   help="write no per-round checkpoints (OUT/checkpoints): a killed learning "
                        "cell then restarts from its first round")
    p.add_argument("--no-run", dest="no_run", action="store_true",
                   help="only write the page: from the cells already in the store, or, "
                        "without a store, from the summary committed next to the page")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def _select(cells, args) -> list:
    """The cells after the filters (--scenarios, --algorithms), iPFL's rules and --device,
    each checked (a one-line error naming the option)."""
    from learning.config import TrainInputError
    from mechanisms.errors import MarketInputError

    from ..errors import SpecError
    from ..reproduce import dataset_of, with_device, with_rules

    for name, values, of in (("--scenarios", args.scenarios, lambda c: c.scenario),
                             ("--algorithms", args.algorithms, lambda c: c.mechanism),
                             ("--datasets", getattr(args, "datasets", None), dataset_of)):
        if values:
            known = sorted({of(c) for c in cells} - {None})
            unknown = sorted(set(values) - set(known))
            if unknown:
                raise SpecError(name, f"{', '.join(unknown)} not in this reproduction; "
                                      f"choose from {', '.join(known)}")
            cells = [c for c in cells if of(c) in values]
    if not cells:
        raise SpecError("--datasets" if getattr(args, "datasets", None) else "--algorithms",
                        "no cell of these scenarios runs these algorithms on these data sets")
    for name, value in _rules(args).items():
        try:
            cells = with_rules(cells, **{name: value})
        except MarketInputError as exc:
            raise SpecError(f"--{name}", exc.message) from None
    try:
        return with_device(cells, args.device)
    except TrainInputError as exc:
        raise SpecError("--device", exc.message) from None


def _rules(args) -> dict:
    return {"selection": args.selection, "payments": args.payments, "prices": args.prices}


def run(args) -> int:
    from pathlib import Path

    from mechanisms.errors import FedmarketError, MarketInputError

    from ..errors import SpecError
    from ..reproduce import display_path, sequential_cells, spec, write_reproduction
    from ..sequential import CONFIRM, LOOKS
    from ..sweep import expand, run_sweep
    from .sweep import cell_reporters

    for option, value in (("--workers", args.workers), ("--threads", args.threads)):
        if value < 1:  # refused before the cells are planned and the data sets found
            raise SpecError(option, f"is {value}; must be >= 1")
    sequential = args.seeds is None
    # sequential: every seed the rule may reach, a confirmation run's included
    seeds = tuple(range(LOOKS[-1] + CONFIRM)) if sequential else tuple(args.seeds)
    try:
        cells = expand(spec(args.setting, seeds, args.with_algorithms))
    except SpecError as exc:
        if not args.with_algorithms:
            raise
        raise SpecError("--with-algorithms", exc.message) from None
    cells = _select(cells, args)  # every cell the run may reach, checked up front
    if not args.no_run:  # data sets read from folders: found before any cell runs
        from learning.data import cifar10_folder, fashion_mnist_folder

        for name, find, shown in (("cifar10", cifar10_folder, "CIFAR-10"),
                                  ("fashion-mnist", fashion_mnist_folder, "Fashion-MNIST")):
            uses = sorted({c.scenario for c in cells if dict(c.params).get("dataset") == name})
            if not uses:
                continue
            try:  # no data_dir: reproduce finds them only where the loader's message says
                find()
            except MarketInputError as exc:
                raise SpecError("--setting", f"{args.setting} runs {', '.join(uses)} on "
                                             f"{shown}: {exc.message}") from None
    # every output checked before the first cell runs (a run takes hours)
    page = Path(args.docs) if args.docs else Path(args.out) / "reproduction.md"
    writable_folder("--out", args.out)
    if args.log_dir:
        writable_folder("--log-dir", args.log_dir)
    writable_file("--docs" if args.docs else "--out", page)
    rules = _rules(args)
    filtered = bool(args.scenarios or args.algorithms or args.datasets or any(rules.values())
                    or args.with_algorithms or args.device != "cpu")
    command = " ".join([
        "fedmarket reproduce", *(["--setting", args.setting] if args.setting != "reduced"
                                 else []),
        *([] if sequential else ["--seeds", *map(str, args.seeds)]),
        *(["--scenarios", *args.scenarios] if args.scenarios else []),
        *(["--algorithms", *args.algorithms] if args.algorithms else []),
        *(["--datasets", *args.datasets] if args.datasets else []),
        *(["--with-algorithms", *args.with_algorithms] if args.with_algorithms else []),
        *(x for k, v in rules.items() if v for x in (f"--{k}", v)),
        *(["--device", args.device] if args.device != "cpu" else []),
        *(["--with-summary", display_path(args.with_summary)] if args.with_summary else []),
        "--out", display_path(args.out), "--docs", display_path(page)])
    kw = {"executor": args.executor, "workers": args.workers, "threads": args.threads,
          "reuse_stale": args.reuse_stale, "recompute_stale": args.recompute_stale,
          "recompute_damaged": args.recompute_damaged, "log_dir": args.log_dir,
          "checkpoints": args.checkpoints}
    given = set()  # the cells the summary of --with-summary holds: taken, not computed
    if args.with_summary:
        from ..summary import read

        try:
            given = {k for f in read(args.with_summary).cells.values() for k in f["cell"]}
        except FedmarketError as exc:
            raise SpecError("--with-summary", exc.message) from None

    def todo(claims):  # the cells the run asks for now
        if not sequential:
            return cells
        now = sequential_cells(args.setting, claims, args.with_algorithms)
        now = {c.key for c in _select(now, args)} if filtered else {c.key for c in now}
        return [c for c in cells if c.key in now]

    def write(asked):
        return write_reproduction(args.out, page, setting=args.setting, seeds=seeds,
                                  cells=cells if (filtered or sequential) else None,
                                  expected=asked, command=command, base=args.with_summary)

    asked, ran, look = todo(None), set(), 0
    while True:
        if not args.no_run:
            look += 1
            with progress_reporter("reproduce cells" + (f" (step {look})" if sequential
                                                         else ""), quiet=args.quiet,
                                   every=args.progress_every) as progress:
                run = [c for c in asked if c.key not in given]
                stats = run_sweep(run, args.out, **kw, **cell_reporters(progress, len(run)))
            if not args.quiet:
                print(f"{stats['cells']} cells: {stats['ran']} run, {stats['skipped']} "
                      f"already done; {stats['wall_s']:.1f} s wall")
        ran |= {c.key for c in asked}
        write(asked)
        if not sequential or args.no_run:
            break
        from ..claims import claims as evaluate
        from ..summary import read

        done = read(page.parent)
        more = todo(evaluate(done.cells, done.configs))
        if {c.key for c in more} <= ran:
            break
        asked = [c for c in cells if c.key in ran | {c.key for c in more}]
    if not args.quiet:
        print(f"wrote {page}")
    return 0
