"""mechanisms.processes.kill_with_parent, the preexec_fn of the child programs the toolkit
starts (the Flower loopback's SuperLink and SuperNodes, the executor, the mutation
harness's runs): the program runs as usual while its parent lives, dies with it, and the
function declines off the main thread."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mechanisms.processes import kill_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="PR_SET_PDEATHSIG is Linux's")


def test_a_child_runs_as_usual_while_its_parent_lives():
    r = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True,
                       text=True, preexec_fn=kill_with_parent(), timeout=60)
    assert (r.returncode, r.stdout) == (0, "ran\n")


def test_off_the_main_thread_it_declines():
    got = []
    t = threading.Thread(target=lambda: got.append(kill_with_parent()))
    t.start()
    t.join()
    assert got == [None]
    assert callable(kill_with_parent())  # on the main thread: a preexec_fn


def test_the_child_dies_with_its_parent():
    """A parent starts a sleeping child with kill_with_parent() and is killed (os._exit):
    the child is gone soon after."""
    parent = textwrap.dedent("""
        import os, subprocess, sys
        from mechanisms.processes import kill_with_parent
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 preexec_fn=kill_with_parent())
        print(child.pid, flush=True)
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    pid = int(r.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # a zombie of init's is gone too: read its state
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError("the child outlived its parent by 10 s")
