"""How many of each claimed row's examples could have failed the property (issue 20, 2b).

For every built-in subject and every property it claims (declared True) or declares
"vacuous", the batch engine checks ``--examples`` discriminating examples (seed 0) and this
prints drawn, effective, discriminating and the share discriminating / effective. With
``--markdown PATH`` it rewrites the tables between the ``discriminates`` and ``shares``
markers of PATH (docs/reference-proofs.md): each property's definition of a discriminating
example, and the measured shares.

    python benchmarks/discriminating_shares.py --examples 1000 --markdown docs/reference-proofs.md
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from _timing import pick

from proofs import PROPERTIES, SUBJECTS, check
from proofs.contract import VACUOUS


def definitions_table() -> str:
    """Markdown: each property's key and which of its effective examples discriminate."""
    lines = ["| property | discriminating examples |", "|---|---|"]
    lines += [f"| `{key}` | {prop.discriminates} |" for key, prop in PROPERTIES.items()]
    return "\n".join(lines)


def measure(examples: int, seed: int = 0, time_limit: float | None = 120.0) -> list[dict]:
    rows = []
    for sname, subject in SUBJECTS.items():
        for key, declared in subject.declares.items():
            if declared is False:
                continue
            t0 = time.perf_counter()
            r = check(subject, PROPERTIES[key], max_examples=examples, seed=seed,
                      engine="batch", time_limit=time_limit)
            rows.append({"subject": sname, "property": key,
                         "declared": "vacuous" if declared == VACUOUS else "holds",
                         "verdict": r.verdict, "drawn": r.examples, "effective": r.effective,
                         "discriminating": r.discriminating,
                         "share": r.discriminating / r.effective if r.effective else 0.0,
                         "seconds": time.perf_counter() - t0})
    return rows


def shares_table(rows) -> str:
    lines = ["| subject | property | declared | verdict | drawn | effective | discriminating "
             "| share |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['subject']} | `{r['property']}` | {r['declared']} | {r['verdict']} | "
              f"{r['drawn']:,} | {r['effective']:,} | {r['discriminating']:,} | "
              f"{100 * r['share']:.0f} % |" for r in rows]
    return "\n".join(lines)


def rewrite(path: Path, marker: str, table: str) -> None:
    text = path.read_text()
    pattern = re.compile(rf"(<!-- {marker}:start -->\n).*?(\n<!-- {marker}:end -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {marker} markers")
    path.write_text(pattern.sub(lambda m: m.group(1) + table + m.group(2), text))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=pick(1000, 20))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = measure(args.examples, args.seed)
    table = shares_table(rows)
    print(table)
    if args.markdown is not None:
        rewrite(args.markdown, "discriminates", definitions_table())
        rewrite(args.markdown, "shares", table)


if __name__ == "__main__":
    main()
