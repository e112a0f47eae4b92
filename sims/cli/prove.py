"""``fedmarket prove``: check every declared property (the theorem report)."""

from __future__ import annotations

import functools
import math
import sys
import time
from pathlib import Path

from mechanisms.errors import MarketInputError, as_seed

from ..results import write_atomic
from .common import (
    Running,
    add_command,
    add_progress,
    add_quiet,
    integer,
    print_table,
    progress_reporter,
    writable_file,
)

__all__ = ["MAX_EXAMPLES", "add_parser", "beside_estimates", "run"]

MAX_EXAMPLES = 10**9  # --examples per check: 10^6 is the nightly run's


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "prove", "check every declared property (the theorem report)")
    p.add_argument("--standard", action="store_true",
                   help="the standard run (proofs.standard.STANDARD: batch engine, seed 0, "
                        "every row to its own budget, the exhaustive grid, 2 processes); "
                        "--subject, --property, --jobs and --markdown may narrow it, the "
                        "other settings are its own")
    p.add_argument("--examples", type=integer, default=None,
                   help="discriminating examples per check (markets on which the property "
                        "could have failed; more are drawn, at most 20x; default 200)")
    p.add_argument("--engine", choices=("hypothesis", "batch"), default=None,
                   help="hypothesis (targeted search, the default) or batch (numpy draws in "
                        "bulk)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="at most this many seconds per row, either engine (a row cut "
                        "short reports what it checked and reads 'inconclusive', not "
                        "'holds'; checked between examples)")
    p.add_argument("--seed", type=integer, default=None,
                   help="random seed of the example search (default 0)")
    p.add_argument("--max-clients", type=integer, default=None, metavar="K",
                   help="draw markets of up to K clients (default: each property's own "
                        "range, 2-12 clients; shown in the preconditions column)")
    p.add_argument("--subject", action="append",
                   help="only this subject (repeatable; default: every built-in subject); "
                        "'module:name' checks your own: an IpflMechanism / CplPricingRule "
                        "object, or a rule function (game) -> prices, (market, A, D) -> "
                        "payments or (market, D, thresholds, prices) -> adjacency; or a "
                        "rule file of 'fedmarket design' (designed_rule.json: checked for "
                        "IR, budget, the six regret directions, beside the search's "
                        "estimates; --seed must differ from its training seed)")
    p.add_argument("--rules-from", dest="rules_from", nargs="+", default=[], metavar="MODULE",
                   help="trust these modules (and the packages below them) to supply the "
                        "space of your own a rule file (.json) names: a rule file is data, "
                        "and a 'module:function' in it is imported only from a module you "
                        "name here (refused otherwise, naming 'space')")
    p.add_argument("--property", action="append",
                   help="only this property (repeatable; default: every property)")
    p.add_argument("--type-space", type=Path, default=None, metavar="FILE",
                   help="draw the iPFL markets from this type space (TOML or JSON: bounds "
                        "and laws of N, c, K, lam, D, roles, clients; see "
                        "proofs.typespace) instead of the checker's distribution; batch "
                        "engine; every verdict is printed with it")
    p.add_argument("--search", choices=("former", "strong", "wider"), default=None,
                   help="the misreport search of the regret properties (proofs.regret."
                        "SEARCHES; default former: span 100, 8 grid points, 2 refinements; "
                        "a rule file of 'fedmarket design': strong, the design's own); "
                        "batch engine")
    p.add_argument("--exhaustive", action="store_true",
                   help="also check every 3-client market of a small type grid")
    p.add_argument("--jobs", type=integer, default=None, metavar="N",
                   help="check the rows in N worker processes (one row each at a time, "
                        "single-threaded; same rows and verdicts as 1, only seconds differ); "
                        "at most one per core helps (default 1; --standard: 2). With N > 1 "
                        "the rows of a property that mostly waits (proofs.Property.waits, "
                        "e.g. contains_rules: rules sleeping past their time limits) run in "
                        "proofs.report.WAITING_JOBS more workers beside the N")
    p.add_argument("--scan", action="store_true",
                   help="subjects of your own: do not stop at the first counterexample; "
                        "check the whole budget so that largest_violation is the largest "
                        "found and 'failures' counts the failing examples (batch engine; "
                        "rule files of 'fedmarket design' are always scanned)")
    p.add_argument("--markdown", type=Path, default=None,
                   help="write the report here (default: print only)")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from proofs.checker import CheckerInputError

    try:
        return _run(args)
    except CheckerInputError as exc:  # raised by the checker (in a worker, too): one line
        raise MarketInputError(exc.field, exc.message) from None


# what --standard fixes itself, and the defaults of a run without it
_STANDARD_FIXES = {"examples": "--examples", "engine": "--engine", "seed": "--seed",
                   "time_limit": "--time-limit", "max_clients": "--max-clients",
                   "exhaustive": "--exhaustive"}
_DEFAULTS = {"examples": 200, "engine": "hypothesis", "seed": 0, "jobs": 1}


def _settings(args):
    """Fill in the run's settings: the standard run's (``--standard``, which refuses the
    options it fixes itself) or the defaults; returns the StandardRun or None."""
    if not getattr(args, "standard", False):
        for name, value in _DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
        return None
    from proofs.standard import STANDARD

    for name, flag in _STANDARD_FIXES.items():
        if getattr(args, name) not in (None, False):
            raise MarketInputError(flag, f"--standard fixes {flag} itself "
                                         f"({STANDARD.describe()}); drop one of the two")
    args.examples, args.engine, args.seed = STANDARD.examples, STANDARD.engine, STANDARD.seed
    args.time_limit, args.exhaustive = STANDARD.time_limit, STANDARD.exhaustive
    if args.jobs is None:
        args.jobs = STANDARD.jobs
    return STANDARD


def _run(args) -> int:
    from proofs.registry import PROPERTIES, SUBJECTS
    from proofs.report import frame, header, markdown, run_report
    from proofs.subjects import subject_from
    from sims.design.certify import CERTIFIED_PROPERTIES

    standard = _settings(args)
    own = {}  # subjects of your own, by their "module:name" (or rule file)
    designed = {}  # rule files of `fedmarket design`: name -> the file's JSON
    for name in args.subject or []:
        if name not in SUBJECTS and name.endswith(".json"):
            own[name], designed[name] = _rule_file(name, args.seed, args.rules_from)
        elif name not in SUBJECTS and ":" in name:
            own[name] = subject_from(name)
        elif name not in SUBJECTS:
            raise MarketInputError("subject", f"unknown {name!r}; choose from {list(SUBJECTS)} "
                                              "or give your own as 'module:name' or a "
                                              "designed rule file (.json)")
    for key in args.property or []:
        if key not in PROPERTIES:
            raise MarketInputError("property", f"unknown {key!r}; choose from "
                                               f"{list(PROPERTIES)}")
    # a subject or property named twice is checked and reported once
    named = list(dict.fromkeys(args.subject or []))  # as given, for the report's command
    args.subject = list(dict.fromkeys(args.subject)) if args.subject else None
    if args.subject:
        args.subject = [s for s in args.subject if s not in own] or ([] if own else None)
    args.property = list(dict.fromkeys(args.property)) if args.property else None
    as_seed("seed", args.seed)
    if not 1 <= args.examples <= MAX_EXAMPLES:
        raise MarketInputError("examples", f"is {args.examples}; must lie in [1, "
                                           f"{MAX_EXAMPLES:,}] per check")
    if args.scan and (args.engine != "batch" or not own):
        raise MarketInputError("--scan", "scans the rows of subjects of your own with the "
                                         "batch engine: give --engine batch and --subject "
                                         "module:name or a rule file")
    if args.jobs < 1:
        raise MarketInputError("--jobs", f"is {args.jobs}; must be an integer >= 1 (worker "
                                         "processes)")
    if args.time_limit is not None and not 0 < args.time_limit < math.inf:
        raise MarketInputError("time-limit", f"is {args.time_limit}; must be a finite number "
                                             "of seconds > 0")
    if args.max_clients is not None and args.max_clients < 2:
        raise MarketInputError("max-clients", f"is {args.max_clients}; must be an integer "
                                              ">= 2 (clients per market)")
    from proofs.typespace import DEFAULT, load_type_space

    space = DEFAULT if args.type_space is None else load_type_space(args.type_space)
    if not space.is_default and args.engine != "batch":
        raise MarketInputError("--type-space", "needs --engine batch (the Hypothesis engine "
                                               "draws the default type space)")
    opts = {"engine": args.engine, "time_limit": args.time_limit,
            "max_clients": args.max_clients}
    args.space = space
    if not space.is_default:
        opts["type_space"] = space
    if args.search is not None and args.search != "former":
        if args.engine != "batch":
            raise MarketInputError("--search", "needs --engine batch (the Hypothesis engine "
                                               "runs the former search)")
        opts["search"] = args.search
    chosen = list(SUBJECTS) if args.subject is None else args.subject
    own_rows = [(subj, key) for name, subj in own.items()
                for key in (CERTIFIED_PROPERTIES if name in designed
                            else _own_keys(subj, PROPERTIES))
                if key in (args.property or [key])]
    for key in args.property or []:
        if not any(key in SUBJECTS[s].declares for s in chosen) \
                and not any(k == key for _, k in own_rows):
            owners = [s for s in SUBJECTS if key in SUBJECTS[s].declares]
            raise MarketInputError("property", f"no chosen subject ({', '.join(chosen)}) "
                                               f"declares {key!r}; subjects that do: {owners}")
    if args.markdown:
        writable_file("--markdown", args.markdown)
    kw = dict(examples=args.examples, seed=args.seed, subjects=args.subject,
              properties=args.property, exhaustive=args.exhaustive, jobs=args.jobs,
              standard=standard, **opts)
    total = sum(key in (args.property or [key]) for s in chosen
                for key in SUBJECTS[s].declares) + len(own_rows)
    finished = []
    t0 = time.perf_counter()
    # rows done of all, plus the examples of the rows under way (a Hypothesis row of 10^6
    # examples runs for hours): a bar on a terminal, a line now and then in a log file
    with progress_reporter("prove checks", quiet=args.quiet,
                           every=args.progress_every) as progress:
        running = Running("examples")

        def step(sname, key):
            finished.append((sname, key))
            running.end(f"{key} on {sname}")
            if progress is not None:
                progress(len(finished), total, running.note())

        def examples(sname, key, done, budget):
            running.step(f"{key} on {sname}", done, budget)
            if progress is not None:
                progress(len(finished), total, running.note())

        if progress is not None:
            progress(0, total)
        hear = None if progress is None else examples
        results = (run_report(**kw, progress=step, row_progress=hear) if chosen else [])
        scanned = ({s.name for s in own.values()} if args.scan else set()) | (
            {own[n].name for n in designed} if args.engine == "batch" else set())
        results += _check_own(own_rows, args, step, hear, scanned, designed)
    wall = time.perf_counter() - t0
    df = frame(results)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        text = header(args.examples, args.seed, args.engine, args.time_limit, args.exhaustive,
                      results, jobs=args.jobs, wall_seconds=wall,
                      max_clients=args.max_clients, standard=standard,
                      type_space=space, search=args.search, subjects=named,
                      properties=args.property, scan=args.scan,
                      path=args.markdown) + markdown(results)
        write_atomic(args.markdown, lambda tmp: tmp.write_text(text), "--markdown")
    for report, _ in results:  # a rule that raised: its own error, one line (--quiet too)
        if report.verdict == "error":
            print(f"fedmarket: row {report.property.key} on {report.subject}: error: "
                  f"{' '.join(str(report.error).split())}", file=sys.stderr)
    if not args.quiet:
        shown = df.drop(columns=["counterexample", "as_declared", "preconditions", "seconds"])
        shown = shown.assign(largest_violation=[r.largest_violation for r, _ in results])
        if any("failures" in r.extra for r, _ in results):
            shown["failures"] = [r.extra.get("failures") for r, _ in results]
        print_table(shown, "Theorem report: the standard run" if standard is not None else
                    f"Theorem report: {args.examples} examples per property, "
                    f"engine {args.engine}")
        print(f"iPFL verdicts on the {space.describe()}; misreport search "
              f"{args.search or 'former'}")
        print(verdict_line(df))
        for r in df[df.counterexample.map(lambda v: isinstance(v, str))].itertuples():
            print(f"\n# counterexample: {r.property} ({r.subject})\n{r.counterexample}")
        for name, doc in designed.items():
            how = args.search or ("strong" if args.engine == "batch" else "former")
            if args.type_space is None and doc.get("type_space") is not None:
                from proofs.typespace import as_type_space

                print(f"{name}: checked on its own {as_type_space(doc['type_space']).describe()}"
                      f"; misreport search {how}")
            print_table(beside_estimates(results, name, doc, args.seed),
                        f"{name}: the checker's verdicts (seed {args.seed}) beside the "
                        f"search's own estimates on its training markets "
                        f"({doc.get('training', 'unknown')})")
    return 0 if df.as_declared.all() else 1


def verdict_line(df) -> str:
    """The run's one-line verdict: how many checks are as declared, and, for rows of
    subjects that declare nothing (a rule of your own, a rule file), how many found a
    counterexample: those rows have no claim to break, so 'as declared' says nothing."""
    bad = df[~df.as_declared]
    line = (f"{len(df) - len(bad)} of {len(df)} checks as declared"
            + ("" if bad.empty else f"; NOT as declared: {bad.property.tolist()}"))
    free = df[df.declared == "-"]
    if len(free):
        counts = free.verdict.value_counts()
        found = int(counts.get("counterexample", 0))
        rest = ", ".join(f"{n} {v}" for v, n in counts.items() if v != "counterexample")
        line += (f"; {len(free)} of them check claims nobody declared: {found} found a "
                 f"counterexample" + (f", {rest}" if rest else ""))
    return line


def _rule_file(path: str, seed: int, rules_from=()):
    """(subject, document) of a rule file of ``fedmarket design``; refused when ``seed`` is
    the seed of the file's training markets (a rule is certified on held-out markets)."""
    from sims.design.certify import rule_file_subject

    if not Path(path).is_file():
        raise MarketInputError("subject", f"{path!r}: no such rule file (a designed rule is "
                                          "the designed_rule.json of 'fedmarket design')")
    subject, doc = rule_file_subject(path, rules_from)
    if doc.get("training_seed") is not None and doc["training_seed"] == seed:
        raise MarketInputError("seed", f"is {seed}, the seed of {path}'s training markets; "
                                       "certify on held-out markets: pass another --seed")
    return subject, doc


def beside_estimates(results, name: str, doc: dict, seed: int):
    """One row per property checked on the rule file ``name``: the checker's verdict,
    effective and discriminating examples and largest violation (held-out seed ``seed``)
    beside the search's own estimate of the same quantity on its training markets
    (``doc['estimates']``)."""
    import pandas as pd

    from sims.design.certify import estimate

    rows = []
    for report, _ in results:
        if report.subject != name:
            continue
        key = report.property.key
        est = doc.get("estimates") or {}
        rows.append({"property": key, "verdict": report.verdict,
                     "effective": report.effective, "discriminating": report.discriminating,
                     "failures": report.extra.get("failures"),
                     "largest_violation": report.largest_violation,
                     "search_estimate": estimate(key, est) if est else None,
                     "seed": seed, "training_seed": doc.get("training_seed")})
    return pd.DataFrame(rows)


def _own_keys(subject, properties) -> list[str]:
    """What to check of a subject of your own: its declarations, else every property of its
    family that applies to its kind (a pricing rule is not a solver)."""
    if subject.declares:
        return list(subject.declares)
    kind = getattr(subject, "kind", None)
    return [k for k, p in properties.items() if p.family == subject.family
            and (p.needs is None or kind is None or p.needs == kind)]


def _check_own(rows, args, done, examples=None, scanned=frozenset(),
               designed=None) -> list:
    """(report, as_declared) of each (subject of your own, property): a declared property
    as the contract checks it; an undeclared one is reported with its verdict (no claim to
    break), but a rule that raised on it (verdict "error") fails the run: an error is no
    verdict. Checked in this process (your module need not import in a worker). Subjects
    named in ``scanned`` are checked over their whole budget where the batch engine can
    (:func:`proofs.check`'s ``scan``: the largest violation found, the failures counted).
    A rule file of ``fedmarket design`` (``designed``: name -> its JSON) is checked on the
    type space it was designed on, unless ``--type-space`` names another."""
    from proofs import PROPERTIES, check
    from proofs.batch import sampler_for
    from proofs.contract import contract_check

    out = []
    for subject, key in rows:
        prop = PROPERTIES[key]
        kw = {"time_limit": args.time_limit, "progress": None if examples is None else
              functools.partial(examples, subject.name, key)}
        if args.max_clients is not None:
            kw["max_clients"] = args.max_clients
        doc = (designed or {}).get(subject.name)
        if args.search not in (None, "former"):
            kw["search"] = args.search
        elif args.search is None and doc is not None and args.engine == "batch":
            kw["search"] = "strong"  # a designed rule is certified with the design's search
        doc = doc or {}
        if args.type_space is None and doc.get("type_space") is not None:
            kw["type_space"] = doc["type_space"]
        elif not args.space.is_default:
            kw["type_space"] = args.space
        if key in subject.declares:
            got = contract_check(subject, prop, subject.declares[key],
                                 max_examples=args.examples, seed=args.seed,
                                 engine=args.engine, **kw)
            out.append((got.report, got.as_declared))
        else:
            if subject.name in scanned and args.engine == "batch" \
                    and sampler_for(prop, args.max_clients) is not None:
                kw["scan"] = True
            report = check(subject, prop, max_examples=args.examples, seed=args.seed,
                           engine=args.engine, **kw)
            out.append((report, report.verdict != "error"))  # a raise is no verdict
        done(subject.name, key)
    return out
