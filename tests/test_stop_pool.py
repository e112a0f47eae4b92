"""mechanisms.processes.stop_pool, how an error or Ctrl-C ends a process pool (the sweep's,
``reproduce``'s, ``prove --jobs``): the pool's manager thread ends too, also when a worker was
terminated halfway through sending its result. Python joins that thread before it exits, so
a thread left waiting there is a command that never ends: a ``sweep --executor processes``
was still running 30 s after Ctrl-C on a loaded host (its cells' rows, about 160 kB each,
are more than a pipe holds, so a worker spends a while in mid-message)."""

import multiprocessing
import os
import random
import struct
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from mechanisms.processes import stop_pool

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="a forked pool")


def _nap(seconds):
    time.sleep(seconds)


def _rows(size):
    return b"x" * size


def _stop_and_wait(pool, timeout):
    """stop_pool, then whether the manager thread ended within ``timeout`` s. A thread left
    waiting is released afterwards (by closing this process's end of the pipe, what the fix
    does), so that a failing run does not hang the test process too."""
    thread = pool._executor_manager_thread
    results = pool._result_queue
    stop_pool(pool)
    pool.shutdown(wait=False)
    thread.join(timeout)
    ended = not thread.is_alive()
    if not ended:
        results._writer.close()
        thread.join(30)
    return ended


def test_a_pool_stopped_with_half_a_result_in_its_pipe_ends():
    """The state a worker terminated in mid-message leaves, made exactly: the header of a
    1 MB message and 7 bytes of it in the result pipe, the manager thread waiting for the
    rest. Before the fix it waited forever."""
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    future = pool.submit(_nap, 60)
    while not future.running():
        time.sleep(0.01)
    os.write(pool._result_queue._writer.fileno(), struct.pack("!i", 1 << 20) + b"partial")
    assert _stop_and_wait(pool, 20), "the manager thread still waits for the message's rest"
    assert future.done()


def test_pools_stopped_while_their_workers_send_large_results_end():
    """Workers sending 4 MB results (more than a pipe holds: each waits in mid-message for
    the manager thread to read on), the pool stopped at a random moment, 6 times: each
    manager thread ends. Before the fix most of them waited forever (15 of 20 stops with
    160 kB results, a sweep cell's size)."""
    rng = random.Random(0)
    hung = 0
    for _ in range(6):
        pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
        futures = [pool.submit(_rows, 4 << 20) for _ in range(40)]
        while not any(f.done() for f in futures):  # results are on their way
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.05))
        hung += not _stop_and_wait(pool, 10)
    assert hung == 0, f"{hung} of 6 stopped pools left their manager thread waiting"
