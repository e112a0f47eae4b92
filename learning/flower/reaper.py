"""Stops a federation's process groups when the process that started them dies, however it dies.

:class:`learning.flower.loopback.Loopback` starts one reaper next to the federation, in a
session of its own, and keeps a pipe to its standard input open. It writes ``+<pgid>`` for
every process group it starts or finds below it (flwr starts the SuperLink's SuperExec and its
ServerApps in a session of their own; a SuperNode's SuperExec and ClientApps share the
SuperNode's group), ``-<pgid>`` for a group it stopped itself, and ``done`` when it stopped
everything. When the pipe closes without ``done`` (the parent exited, was killed by SIGTERM,
or by SIGKILL, where no handler of the parent can run), the reaper sends SIGTERM to every group
it was told of, SIGKILL after ``grace`` seconds to whatever is left, and exits. It imports
nothing beyond the standard library and never touches a group it was not told of::

    python -m learning.flower.reaper [--grace 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

__all__ = ["reap", "serve"]


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def reap(groups, grace: float = 3.0) -> None:
    """SIGTERM every process group in ``groups``, SIGKILL after ``grace`` s those left."""
    groups = [g for g in groups if g > 1 and g != os.getpgrp()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if sig == signal.SIGKILL:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(g) for g in groups):
            time.sleep(0.05)  # (a zombie still counts until its parent reaps it)


def serve(stream, grace: float = 3.0) -> bool:
    """Read ``+pgid`` / ``-pgid`` / ``done`` lines from ``stream`` until it closes; reap the
    groups unless ``done`` came first. True when it reaped."""
    groups: dict[int, None] = {}
    for line in stream:
        line = line.strip()
        if line == "done":
            return False
        if line[:1] in "+-" and line[1:].isdigit():
            if line[0] == "+":
                groups[int(line[1:])] = None
            else:
                groups.pop(int(line[1:]), None)
    reap(list(groups), grace)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m learning.flower.reaper",
                                description="stop a federation's process groups when the "
                                            "pipe on stdin closes (see the module doc)")
    p.add_argument("--grace", type=float, default=3.0,
                   help="seconds between SIGTERM and SIGKILL (default 3)")
    args = p.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # outlive a signal meant for the whole tree
    serve(sys.stdin, args.grace)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
