"""A warm node worker: keeps torch, the node's data and its model loaded between messages.

A Flower 1.42 SuperNode starts a fresh ClientApp process for every message (imports, data,
model: seconds each time). Started next to the SuperNode, a worker does the node's work in
one long-lived process; the ClientApp then only forwards each message to it (node config
``worker="/path/to/node.sock"``) and needs neither torch nor the data::

    python -m learning.flower.worker /tmp/node0.sock &
    flower-supernode ... --node-config "partition-id=0 worker='/tmp/node0.sock'"

The worker listens on a Unix socket (owner-only permissions), serves one request at a time and
computes exactly what the ClientApp would (:func:`learning.flower.client.work`). A request
that fails is answered with its error, which the ClientApp raises (the server then logs it).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from multiprocessing.connection import Client, Connection

__all__ = ["call", "serve"]


def call(address: str, request: dict, timeout: float = 600.0) -> dict:
    """Send one request to the worker at ``address``; its reply, or RuntimeError."""
    try:
        conn = Client(address, family="AF_UNIX")
    except OSError as exc:
        raise RuntimeError(f"node worker at {address!r} is not reachable ({exc}); start it "
                           f"with `python -m learning.flower.worker {address}`") from None
    with conn:
        conn.send(request)
        if not conn.poll(timeout):
            raise RuntimeError(f"node worker at {address!r} gave no answer in {timeout:g} s")
        reply = conn.recv()
    if "error" in reply:
        raise RuntimeError(f"node worker: {reply['error']}")
    return reply


def _preload() -> None:
    """Import what every request needs (torch, the learner, the config) before the first one
    arrives: a node restarted mid-run then answers its registration query in the time of its
    data and model, not of its imports (44 s for a cold first query on a loaded 2-core host)."""
    import torch  # noqa: F401

    from .. import evaluate, local, models, session  # noqa: F401
    from ..config import TrainConfig  # noqa: F401
    from . import adapter, node  # noqa: F401


def _listen(address: str) -> socket.socket:
    """A listening Unix socket at ``address`` (owner-only), which appears there only once it
    listens: bound under a temporary name, then renamed into place. A caller that sees the path
    therefore never meets a bound socket that does not yet listen (refused connection)."""
    tmp = f"{address}.{os.getpid()}.tmp"
    for path in (address, tmp):
        if os.path.exists(path):
            os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is the owner's only
    try:
        sock.bind(tmp)
    finally:
        os.umask(old)
    sock.listen(16)
    os.rename(tmp, address)
    return sock


def serve(address: str, max_requests: int | None = None, log=None) -> None:
    """Answer requests on ``address`` until killed (or after ``max_requests``); ``log(line)``
    receives the time each request took. Listens at once (the path exists only once it
    listens), then imports what requests need; a request that comes meanwhile waits in the
    socket's backlog. A caller that connects and leaves without a request is ignored."""
    sock = _listen(address)
    served = 0
    from .client import work  # after listening: a caller meanwhile waits in the backlog

    _preload()
    try:
        while max_requests is None or served < max_requests:
            peer, _ = sock.accept()
            with Connection(peer.detach()) as conn:
                try:
                    request = conn.recv()
                except (EOFError, OSError):  # a caller that left without asking
                    continue
                t0 = time.perf_counter()
                try:
                    reply = work(request)
                except Exception as exc:  # answered to the ClientApp, which raises it
                    reply = {"error": f"{type(exc).__name__}: {exc}"}
                try:
                    conn.send(reply)
                except OSError:  # the caller gave up (its timeout); the next one is served
                    continue
            served += 1
            if log is not None:
                now = time.time()
                stamp = f"{time.strftime('%H:%M:%S', time.localtime(now))}.{int(now % 1 * 1e3):03d}"
                log(f"{stamp} {request.get('op')} "
                    f"{(request.get('conf') or {}).get('server-round', '')} "
                    f"{time.perf_counter() - t0:.3f} s")
    finally:
        sock.close()
        if os.path.exists(address):
            os.unlink(address)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m learning.flower.worker",
                                description="a warm Flower node worker (see the module doc)")
    p.add_argument("address", help="the Unix socket path to listen on")
    args = p.parse_args(argv)
    serve(args.address, log=lambda line: print(line, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
