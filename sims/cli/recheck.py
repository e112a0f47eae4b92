"""``fedmarket recheck``: re-check the rounds of a finished Flower run offline."""

from __future__ import annotations

from pathlib import Path

from ..results import write_atomic
from .common import add_command, integer, print_table

__all__ = ["add_parser", "run"]


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "recheck", "re-check a finished Flower run's rounds against "
                                    "mechanisms.ipfl / cpl",
                    "Replay every recorded round of a Flower run folder (out/run-<run id>, "
                    "see docs/howto-flower.md) from its recorded inputs; exit status 1 if "
                    "any check fails.")
    p.add_argument("run_dir", type=Path, help="the run's folder (holds config.json)")
    p.add_argument("--round", type=integer, default=None, dest="server_round",
                   help="only this round (0: CPL's pricing; default: every round)")
    p.add_argument("--csv", type=Path, default=None,
                   help="also write the checks as CSV (default: print only)")
    p.add_argument("--rules-from", dest="rules_from", nargs="+", default=[], metavar="MODULE",
                   help="modules whose rules (module:function) the run names that you trust; "
                        "the run folder is data: a rule it names from any other module is "
                        "refused, never imported (default: none)")
    p.set_defaults(func=run, user_modules=False)


def run(args) -> int:
    from learning.flower.provenance import recheck

    df = recheck(args.run_dir, args.server_round, rules_from=args.rules_from)
    if args.csv:
        write_atomic(args.csv, lambda tmp: df.to_csv(tmp, index=False), "--csv")
    print_table(df, f"re-check of {args.run_dir}")
    bad = int((~df["ok"]).sum())
    print(f"{len(df) - bad} of {len(df)} checks passed")
    return 1 if bad else 0
