"""``python -m proofs``: the theorem report as Markdown on stdout (``fedmarket prove`` is the
full command with tables and options). Self-contained: proofs/ never imports sims/."""

import argparse
import sys

from .registry import PROPERTIES, SUBJECTS
from .report import frame, markdown, run_report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofs", description=__doc__)
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subject", action="append", choices=list(SUBJECTS))
    ap.add_argument("--property", action="append", choices=list(PROPERTIES))
    args = ap.parse_args(argv)
    if args.examples < 1:
        ap.error(f"--examples is {args.examples}; must be >= 1")
    results = run_report(examples=args.examples, seed=args.seed, subjects=args.subject,
                         properties=args.property)
    print(markdown(results))
    return 0 if frame(results).as_declared.all() else 1


if __name__ == "__main__":
    sys.exit(main())
