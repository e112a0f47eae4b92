"""``fedmarket report``: a Markdown + HTML report of a sweep store."""

from __future__ import annotations

from pathlib import Path

from mechanisms.errors import MarketInputError

from .common import add_command

__all__ = ["add_parser", "run"]


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "report", "Markdown + HTML report of a sweep store")
    p.add_argument("results", help="the folder given to `fedmarket sweep --out`")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..report import write_report

    if not (Path(args.results) / "store.sqlite").exists():
        raise MarketInputError("results", f"{args.results} holds no sweep store (store.sqlite)")
    md, page = write_report(args.results)
    print(f"wrote {md} and {page}")
    return 0
