"""``fedmarket report``: a Markdown + HTML report of a sweep store."""

from __future__ import annotations

import sys

from ..ranking import CPL_CRITERIA, CPL_DEFAULT, CRITERIA, DEFAULT
from .common import add_command, integer, writable_folder

__all__ = ["MAX_VERDICT_EXAMPLES", "add_parser", "run"]

MAX_VERDICT_EXAMPLES = 100_000  # per mechanism and property: a report is not a theorem run


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "report", "Markdown + HTML report of a sweep store")
    p.add_argument("results", help="the folder given to `fedmarket sweep --out`")
    p.add_argument("--out", default=None,
                   help="where to write the report (default: the results folder)")
    p.add_argument("--verdict-examples", dest="verdict_examples", type=integer, default=10_000,
                   help="effective examples the property checker (batch engine) needs per "
                        "mechanism and property for the verdict tables; fewer read "
                        "'inconclusive' (default 10000; 0: no verdict tables; at most "
                        "100,000)")
    p.add_argument("--rank-by", dest="rank_by", default=DEFAULT, metavar="PRIORITIES",
                   help="how to rank the market mechanisms: criteria in order "
                        f"(default {DEFAULT!r}: fewest IR failures first, then the smallest "
                        "deficit, then the smallest largest regret from misreporting N, c or "
                        "K, then the highest welfare) or weighted ('welfare=2,regret_K=1'; "
                        "each criterion scaled to [0, 1] over the rules compared); criteria: "
                        + ", ".join(CRITERIA))
    p.add_argument("--cpl-rank-by", dest="cpl_rank_by", default=CPL_DEFAULT,
                   metavar="PRIORITIES",
                   help=f"how to rank the CPL pricing rules, the same way (default "
                        f"{CPL_DEFAULT!r}: the smallest bound); criteria: "
                        + ", ".join(CPL_CRITERIA))
    p.add_argument("--regret-markets", dest="regret_markets", type=integer, default=None,
                   metavar="N",
                   help="markets per seed (the checker's distribution) on which each market "
                        "mechanism's largest regret per type dimension is measured, for the "
                        "comparison table and the regret criteria (default 300; 0: none)")
    p.add_argument("--joint", action="store_true",
                   help="also measure the regret of two type dimensions misreported at once "
                        "(N and c, N and K, c and K, each either way): columns and criteria "
                        "regret_Nc, regret_NK, regret_cK and regret_joint (their largest); "
                        "slower: a two-dimensional search per pair")
    p.add_argument("--rules-from", dest="rules_from", nargs="+", default=[], metavar="MODULE",
                   help="modules whose rules (module:function) the store names that you "
                        "trust: imported from the current folder or sys.path for their "
                        "verdicts, regret and graphs. The store is data: a rule it names "
                        "from any other module is never imported (default: none)")
    p.set_defaults(func=run, user_modules=False)


def run(args) -> int:
    from ..report import untrusted_rules, write_report
    from ..sweep import Store

    if not 0 <= args.verdict_examples <= MAX_VERDICT_EXAMPLES:
        from mechanisms.errors import MarketInputError

        raise MarketInputError("verdict-examples", f"is {args.verdict_examples}; must lie in "
                                                   f"[0, {MAX_VERDICT_EXAMPLES:,}] (markets "
                                                   "per mechanism and property)")
    from ..errors import SpecError
    from ..ranking import Priorities

    priorities = Priorities.parse(args.rank_by)
    cpl_priorities = Priorities.parse(args.cpl_rank_by, family="cpl")
    if priorities.needs_verdicts and args.verdict_examples == 0:
        raise SpecError("rank-by", "truthfulness needs the verdict tables; give "
                                   "--verdict-examples above 0")
    if args.regret_markets is not None and args.regret_markets < 0:
        raise SpecError("regret-markets", f"is {args.regret_markets}; an integer >= 0")
    if priorities.needs_regret and args.regret_markets == 0:
        raise SpecError("rank-by", f"{args.rank_by!r} ranks by regret: give "
                                   "--regret-markets above 0")
    if args.joint and args.regret_markets == 0:
        raise SpecError("joint", "measures regret: give --regret-markets above 0")
    if priorities.needs_joint and not args.joint:
        raise SpecError("rank-by", f"{args.rank_by!r} ranks by the regret of two dimensions "
                                   "at once: give --joint")
    # where the report goes is checked first: even a read-only opening of the store leaves
    # SQLite's -shm and -wal files beside it in a writable folder
    writable_folder("--out" if args.out else "results", args.out or args.results)
    Store(args.results, mode="r").close()  # a store that cannot be read: nothing written
    refused = untrusted_rules(args.results, args.rules_from)
    if refused:  # data never runs code: said once, on one line
        print(f"fedmarket: note: not imported (named by the store, not by you): "
              f"{', '.join(refused)}; their verdicts, regret and graphs are left out; "
              "--rules-from MODULE imports a module you trust", file=sys.stderr)
    md, page = write_report(args.results, args.out, verdict_examples=args.verdict_examples,
                            rank_by=priorities, cpl_rank_by=cpl_priorities,
                            regret_markets=args.regret_markets, joint=args.joint,
                            rules_from=args.rules_from)
    print(f"wrote {md} and {page}")
    return 0
