"""``fedmarket salvage``: copy the intact cells of a damaged results store to a new one."""

from __future__ import annotations

import sys

from .common import add_command, add_quiet, writable_folder

__all__ = ["add_parser", "run"]


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "salvage", "copy the intact cells of a damaged sweep store into a "
                                    "new store",
                    description="Read a damaged results store (cut short, or pages "
                                "overwritten) page by page and copy every intact cell, byte "
                                "for byte, into a new store in --out; the cells found damaged "
                                "are counted and named (all of them in OUT/salvage.json). A "
                                "sweep with the same spec into OUT then computes the missing "
                                "cells again. Exit status 0 when nothing was lost, 1 when "
                                "some cells were (that line goes to stderr, even with "
                                "--quiet).")
    p.add_argument("broken", help="the damaged store's folder (or its store.sqlite)")
    p.add_argument("--out", required=True, help="a new folder for the salvaged store")
    add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..salvage import salvage

    writable_folder("--out", args.out)
    result = salvage(args.broken, args.out)
    if result.lost:  # even with --quiet: these cells are not in the new store
        print(f"fedmarket: {result.summary()}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(result.summary())
    return 0
