"""The checker's verdicts on the families that change who trades (issue 31, part 2): every
registered rule of the posted-price, truthful-share, trade-reduction and reserve families,
plus the goal's two rule files, checked for IR, budget balance, no deficit and the six
misreport directions (batch engine, the strong misreport search, held-out seed), as a
markdown table (verdict and discriminating examples per cell).

    python benchmarks/design_family_verdicts.py --examples 2000 --seed 1000 \\
        --markdown docs/design_family_verdicts.md

docs/reference-design.md shows the committed file's table (tests/test_reference_design_page.py
checks that it does, and checks a row again).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _timing import pick

from proofs import PROPERTIES, IpflMechanism, check
from sims.design import load_rule
from sims.design.certify import CERTIFIED_PROPERTIES
from sims.design.frontier import registered_rules

FAMILIES = ("posted prices", "truthful share", "trade reduction", "reserve")
SHORT = {"individual_rationality": "IR", "budget_balance": "BB", "no_deficit": "no deficit",
         "truthful_N_over": "N over", "truthful_N_under": "N under", "thm2": "c over",
         "truthful_c_under": "c under", "truthful_K_over": "K over",
         "truthful_K_under": "K under"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=pick(2000, 20))
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--search", default="strong")
    p.add_argument("--files", nargs="*", default=["docs/designed/truthful.json",
                                                  "docs/designed/posted.json"])
    p.add_argument("--markdown", default=None)
    args = p.parse_args(argv)
    rules = [(fam, name, mech) for fam, name, mech in registered_rules(FAMILIES)]
    for f in args.files:
        mech = load_rule(f)
        rules.append(("rule file", f, mech))
    lines = ["| family | rule | " + " | ".join(SHORT[k] for k in CERTIFIED_PROPERTIES) + " |",
             "|---|---|" + "---|" * len(CERTIFIED_PROPERTIES)]
    t0 = time.process_time()
    for fam, name, mech in rules:
        subject = IpflMechanism(name, mech.rule, payments=mech.payments, prices=mech.prices)
        cells = []
        for key in CERTIFIED_PROPERTIES:
            r = check(subject, PROPERTIES[key], max_examples=args.examples, seed=args.seed,
                      engine="batch", search=args.search)
            if r.verdict == "holds":
                cell = f"holds ({r.discriminating:,})"
            elif r.verdict == "counterexample" and r.counterexample is not None:
                cell = (f"**counterexample** ({r.counterexample.violation:.3g} at draw "
                        f"{r.first_failure:,})")
            else:
                cell = f"{r.verdict} ({r.discriminating:,} of {r.examples:,})"
            cells.append(cell)
        lines.append(f"| {fam} | {name} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    text = (f"{args.examples:,} discriminating examples per cell (batch engine, seed "
            f"{args.seed}, misreport search {args.search}); holds (discriminating examples), "
            "counterexample (its violation, the draw it was found at), vacuous (no draw could "
            "fail: no report changed anything), inconclusive (fewer discriminating examples "
            "than the budget within the draw cap).\n\n"
            + "\n".join(lines) + "\n")
    print(text)
    print(f"{time.process_time() - t0:.0f} s CPU")
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
