"""The ``fedmarket`` command: one module per sub-command.

    fedmarket market [--rounds 20] [--rule local] [--seed 0] [--out results/market]
    fedmarket cpl [--budget 15] [--points 400] [--sweep 5 40 8] [--out results/cpl]
    fedmarket train --algorithm ipfl fedavg --dataset digits --rounds 10 [--out DIR]
    fedmarket sweep [SPEC.toml | --preset demo] [--executor processes] [--report]
    fedmarket report RESULTS
    fedmarket salvage BROKEN --out NEW
    fedmarket reproduce [--setting reduced|digits|full] [--seeds 0 1 2] [--out results/reproduce]
    fedmarket prove [--examples 200] [--exhaustive] [--markdown docs/reference-theorems.md]
    fedmarket clear market.json [--rule local] [--thresholds exact] [--csv out.csv]
    fedmarket recheck results/flower/run-RUNID [--round 2] [--csv out.csv]
    fedmarket design [--goal "IR, budget balance, minimise max regret"] [--out results/design]

A rule of your own named ``module:function`` (``--rule``, ``--payments``, ``--prices``, sweep
specs) is imported from the current folder first, then the installed packages (sweeps: the spec
file's folder before the current one); one lookup rule everywhere (:mod:`mechanisms.lookup`).
A name read from a results folder (``report``, ``recheck``) is data: it imports only from a
module you name with ``--rules-from`` (:func:`mechanisms.lookup.names_from_data`).

Each module (``sims.cli.market``, ``sims.cli.cpl``, ...) defines ``add_parser(sub)`` and
``run(args) -> int``. Misuse (a bad input, an unreadable or unwritable file, a broken store)
is answered with one line on stderr and exit status 2; a traceback means a bug.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from .common import Parser, UsageError, run_guarded, user_modules

__all__ = ["COMMANDS", "build_parser", "main"]

DESCRIPTION = ("Incentive mechanisms for federated-learning model markets: run, sweep, "
               "check and report.")
COMMANDS = ("market", "cpl", "prove", "train", "sweep", "report", "salvage", "clear",
            "recheck", "reproduce", "design")


def build_parser(argv=None) -> Parser:
    """The full parser. Commands whose option defaults need heavy imports (``train`` reads
    them from the learner's config, which loads torch) build them only when ``argv`` names
    that command."""
    p = Parser(prog="fedmarket", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        module.add_parser(sub, full=chosen == name)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(argv).parse_args(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    # rules of your own are found in the current folder; not for the commands that read a
    # results folder (report, recheck) unless you name modules to trust (--rules-from): a
    # results folder you were handed, or the folder you stand in, never supplies code
    if getattr(args, "user_modules", True) or getattr(args, "rules_from", None):
        user_modules(Path.cwd())
    return run_guarded(args.func, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
