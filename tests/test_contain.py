"""User code contained (issue 33, part 3; mechanisms.contain): whatever a rule of the user's
own raises (sys.exit, GeneratorExit, a BaseException of its own; not Ctrl-C) is the one-line
rule error naming it; a time limit stops a rule that hangs (a sleep, a busy loop) in
ipfl.clear, cpl.apply_pricing and both engines of proofs.check; a rule receives copies it
cannot use to change the outcome, even after turning writing back on; every sweep error names
the cell and the rule. Each case through the Python API and the command line."""

from __future__ import annotations

import gc
import os
import signal
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from mechanisms import cpl, ipfl
from mechanisms.contain import Limit, TimeUp, call_rule, handed
from mechanisms.errors import MarketInputError, RuleFailed, RuleTimedOut
from proofs import IpflMechanism, check
from proofs.checker import CheckerInputError
from proofs.registry import PROPERTIES
from sims.cli import main
from sims.errors import CellFailed
from sims.sweep import expand, run_sweep

RULES = textwrap.dedent('''
    import sys
    import time

    import numpy as np

    from mechanisms import ipfl


    class Mine(BaseException):
        pass


    def exit_pay(market, A, D):
        sys.exit(3)


    def genexit_pay(market, A, D):
        raise GeneratorExit("closed")


    def mine_pay(market, A, D):
        raise Mine("a BaseException of its own")


    def boom_pay(market, A, D):
        return 1 / 0


    def sleep_pay(market, A, D):
        time.sleep(1e9)


    def spin_pay(market, A, D):
        while True:
            pass


    def swallow_pay(market, A, D):  # swallows every stop, forever
        while True:
            try:
                time.sleep(0.01)
            except BaseException:
                pass


    def swallow_spin_pay(market, A, D):  # the same in a busy loop
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass


    def swallow_price(game):
        while True:
            try:
                time.sleep(0.01)
            except BaseException:
                pass


    def spawn_pay(market, A, D):  # starts a program of its own, then swallows every stop
        import os
        import subprocess
        p = subprocess.Popen(["sleep", "1000"])
        with open(os.environ["H33_PIDFILE"], "w") as f:
            f.write(str(p.pid))
        while True:
            try:
                time.sleep(0.01)
            except BaseException:
                pass


    def quit_pay(market, A, D):  # ends its process without a word
        import os
        os._exit(0)


    def nan_pay(market, A, D):
        return np.full(A.shape[:-1], np.nan)


    def shape_pay(market, A, D):
        return np.zeros(A.shape[-1] + 1)


    def _unlock(a):
        chain = [a]
        while isinstance(chain[-1].base, np.ndarray):
            chain.append(chain[-1].base)
        for x in reversed(chain):
            x.flags.writeable = True
        return a


    @ipfl.over_arrays
    def zeroing_pay(market, A, D):
        """Turns writing back on, zeroes the adjacency and D it is handed (and the
        market's sizes), then pays nobody: on the zeroed outcome nobody trades and IR
        "holds"; on the real one sellers bear their costs unpaid."""
        _unlock(A)[...] = False
        _unlock(D)[...] = 0.0
        _unlock(market.N)[...] = 1.0
        return np.zeros(A.shape[:-1])


    KEPT = []


    def keeping_pay(market, A, D):  # keeps what it is handed, writes into it on its next call
        for a in KEPT:
            _unlock(a)[...] = 0
        KEPT.extend([A, D, market.c])
        return np.zeros(A.shape[-1])


    def zeroing_rule(market, D, T, P):
        _unlock(T)[...] = 0.0
        _unlock(P)[...] = 0.0
        out = np.ones(T.shape, dtype=bool)
        np.fill_diagonal(out, False)
        return out & np.isfinite(market.c)[None, :]


    def exit_price(game):
        sys.exit(3)


    def sleep_price(game):
        time.sleep(1e9)


    def zeroing_price(game):
        _unlock(game.c)[...] = 1e9
        return np.ones(game.n)


    def exit_gain(x, K, N):
        sys.exit(4)


    def exit_space(theta):
        sys.exit(5)
''')


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("contain")
    (folder / "h33rules.py").write_text(RULES)
    sys.path.insert(0, str(folder))
    try:
        import h33rules

        yield h33rules
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("h33rules", None)


@pytest.fixture
def cwd_rules(rules, tmp_path, monkeypatch):
    """The rules module beside a CLI run in ``tmp_path`` (the current folder)."""
    (tmp_path / "h33rules.py").write_text(RULES)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def market():
    return ipfl.Market(N=[100.0, 200.0, 300.0], c=[0.1, 0.2, 0.3], K=[1e3, 1e3, 1e3],
                       lam=0.1)


D3 = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.5], [2.0, 1.5, 0.0]])


def game():
    return cpl.Game(a=[0.5, 0.5], G=[1.0, 1.0], c=[5.0, 5.0], v=[1.0, 1.0], budget=1.0)


IR = PROPERTIES["individual_rationality"]
RAISERS = [("exit_pay", "SystemExit: 3"), ("genexit_pay", "GeneratorExit: closed"),
           ("mine_pay", "Mine: a BaseException of its own")]


# ------------------------------------------------------------------- what a rule raises


@pytest.mark.parametrize(("name", "says"), RAISERS)
def test_any_base_exception_of_a_rule_is_the_rule_error(rules, name, says):
    fn = getattr(rules, name)
    with pytest.raises(RuleFailed) as e:
        ipfl.clear(market(), D3, payments=fn)
    assert e.value.field == "payments" and f"h33rules:{name} raised {says}" in str(e.value)
    assert "\n" not in str(e.value) and e.value.__cause__ is not None
    batch = ipfl.over_arrays(lambda market, A, D: fn(market, A, D))
    with pytest.raises(RuleFailed, match=says):
        ipfl.clear_batch(ipfl.MarketArrays.of(market()), D3[None], payments=batch)
    for engine in ("batch", "hypothesis"):
        r = check(IpflMechanism(name, payments=fn), IR, engine=engine, max_examples=5)
        assert r.verdict == "error" and f"h33rules:{name} raised {says}" in r.error, r.error


def test_pricing_rules_gains_and_design_spaces_are_contained_too(rules):
    with pytest.raises(RuleFailed, match="exit_price raised SystemExit: 3") as e:
        cpl.apply_pricing(game(), rules.exit_price)
    assert e.value.field == "pricing"
    with pytest.raises(RuleFailed, match=r"exit_gain\(x, K, N\) raised SystemExit: 4"):
        ipfl.Market(N=[1.0, 2.0], c=[0.0, 0.0], K=[1.0, 1.0], gain=rules.exit_gain)
    from sims.design.space import UserSpace

    space = UserSpace("h33rules:exit_space", ((0.0, 1.0),) * 3)  # a space that exits
    with pytest.raises(RuleFailed, match="h33rules:exit_space raised SystemExit: 5"):
        space.rule([0.5, 0.5, 0.5])


def test_ctrl_c_and_the_toolkits_own_stops_pass_through():
    def interrupted(*args):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        call_rule("payments", "interrupted", interrupted)
    with pytest.raises(TimeUp):
        call_rule("payments", "stopped", lambda: (_ for _ in ()).throw(TimeUp()))


# ---------------------------------------------------------------------- time limits


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["sleep_pay", "spin_pay"])
def test_a_hanging_rule_is_stopped_at_the_time_limit_of_clear(rules, name):
    t0 = time.monotonic()
    with pytest.raises(RuleTimedOut) as e:
        ipfl.clear(market(), D3, payments=getattr(rules, name), time_limit=0.3)
    assert time.monotonic() - t0 < 5
    assert e.value.field == "payments" and str(e.value) == (
        f"payments: h33rules:{name} was stopped at the time limit of 0.3 s (time_limit): it "
        "had not returned")
    slow = ipfl.over_arrays(lambda market, A, D: rules.sleep_pay(market, A, D))
    with pytest.raises(RuleTimedOut, match=r"time limit of 0\.3 s"):
        ipfl.clear_batch(ipfl.MarketArrays.of(market()), D3[None], payments=slow,
                         time_limit=0.3)


@pytest.mark.timeout(60)
def test_apply_pricing_takes_a_time_limit(rules):
    t0 = time.monotonic()
    with pytest.raises(RuleTimedOut, match=r"sleep_price was stopped at the time limit of "
                                           r"0\.3 s"):
        cpl.apply_pricing(game(), rules.sleep_price, time_limit=0.3)
    assert time.monotonic() - t0 < 5
    # a rule that returns in time is not affected
    assert cpl.apply_pricing(game(), "uniform", time_limit=5).status == "optimal"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("engine", ["batch", "hypothesis"])
@pytest.mark.parametrize("name", ["sleep_pay", "spin_pay"])
def test_check_stops_a_hanging_rule_in_both_engines(rules, engine, name):
    t0 = time.monotonic()
    r = check(IpflMechanism(name, payments=getattr(rules, name)), IR, engine=engine,
              max_examples=50, time_limit=1.0)
    assert time.monotonic() - t0 < 10
    assert r.verdict == "error" and r.extra["stopped"] == "time limit"
    assert r.error == (f"payments: h33rules:{name} was stopped at the time limit of 1 s "
                       "(time_limit): it had not returned")


def _children() -> set[int]:
    """The live child processes of this process (Linux /proc)."""
    kids = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                kids.update(int(k) for k in f.read().split())
        except OSError:
            pass
    return kids


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")
def test_a_rule_that_swallows_every_stop_is_stopped_at_the_limit_and_leaves_no_process(
        rules):
    """Under a time limit a rule runs in a child process the parent kills at the limit
    (mechanisms.contain): one that catches every BaseException in an endless loop (the
    in-process stop alone could never end it) is stopped within the limit plus a small
    margin, with the one-line error naming it, and no process is left behind."""
    before = _children()
    t0 = time.monotonic()  # baseline: a rule that returns, under a limit (a child as well)
    ipfl.clear(market(), D3, payments=rules.zeroing_pay, time_limit=5)
    base = time.monotonic() - t0
    limit = 1.0
    for name in ("swallow_pay", "swallow_spin_pay"):
        t0 = time.monotonic()
        with pytest.raises(RuleTimedOut) as e:
            ipfl.clear(market(), D3, payments=getattr(rules, name), time_limit=limit)
        took = time.monotonic() - t0
        assert limit <= took < 1.25 * limit + 3 * base, (name, took, base)
        assert str(e.value) == (f"payments: h33rules:{name} was stopped at the time limit "
                                "of 1 s (time_limit): it had not returned")
    t0 = time.monotonic()
    with pytest.raises(RuleTimedOut, match=r"^pricing: swallow_price was stopped at the time "
                                           r"limit of 1 s"):
        cpl.apply_pricing(game(), rules.swallow_price, time_limit=limit)
    assert time.monotonic() - t0 < 1.25 * limit + 3 * base
    for engine in ("batch", "hypothesis"):
        t0 = time.monotonic()
        r = check(IpflMechanism("swallow", payments=rules.swallow_pay), IR, engine=engine,
                  max_examples=50, time_limit=limit)
        assert r.verdict == "error" and r.extra["stopped"] == "time limit", r
        assert r.error == ("payments: h33rules:swallow_pay was stopped at the time limit of "
                           "1 s (time_limit): it had not returned")
    deadline = time.monotonic() + 5  # a killed child is reaped at once; allow the kernel
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _children() - before


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")
def test_what_a_stopped_rule_started_is_stopped_with_it(rules, tmp_path, monkeypatch):
    """The child runs in a process group of its own, killed as a whole at the limit: a
    program the rule started goes too."""
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("H33_PIDFILE", str(pidfile))
    with pytest.raises(RuleTimedOut, match="h33rules:spawn_pay was stopped"):
        ipfl.clear(market(), D3, payments=rules.spawn_pay, time_limit=1.0)
    pid = int(pidfile.read_text())

    def running():
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    t0 = time.monotonic()  # SIGKILL is delivered at once; reaping is init's
    while running() and time.monotonic() - t0 < 1.0:
        time.sleep(0.02)
    assert not running()


def test_under_a_limit_a_rule_s_result_and_errors_come_back_from_its_process(rules):
    """The child returns what the rule returns and raises what it raises (the same
    one-line errors as without a limit); a rule that ends its process is a RuleFailed."""
    plain = ipfl.clear(market(), D3, payments=rules.zeroing_pay)
    limited = ipfl.clear(market(), D3, payments=rules.zeroing_pay, time_limit=30)
    assert np.array_equal(plain.payments, limited.payments)
    assert np.array_equal(plain.adjacency, limited.adjacency)
    for name, says in (("exit_pay", "raised SystemExit: 3"), ("mine_pay", "raised Mine: a "
                       "BaseException of its own"), ("nan_pay", "returned NaN")):
        with pytest.raises(RuleFailed, match=says):
            ipfl.clear(market(), D3, payments=getattr(rules, name), time_limit=30)
    with pytest.raises(RuleFailed, match=r"^payments: h33rules:quit_pay raised ProcessEnded: "
                                         r"ended its process without returning$"):
        ipfl.clear(market(), D3, payments=rules.quit_pay, time_limit=30)
    with pytest.raises(RuleFailed, match="returned an object that cannot be sent back"):
        ipfl.clear(market(), D3, payments=lambda market, A, D: (lambda: 0), time_limit=30)
    # without a limit the rule runs in this process, as before
    with pytest.raises(RuleFailed, match="returned"):
        ipfl.clear(market(), D3, payments=lambda market, A, D: (lambda: 0))


def test_a_rule_s_child_loads_no_library(monkeypatch):
    """The forked child asks for its death signal with the C library its parent loaded
    before forking (mechanisms.processes.before_fork): a child of a process with threads
    must not load libraries. The parent's library is forgotten here, so without
    before_fork the child would load it itself."""
    import ctypes

    from mechanisms import processes

    loads: list[int] = []
    real = ctypes.CDLL

    def counting(*a, **kw):
        loads.append(os.getpid())
        return real(*a, **kw)

    monkeypatch.setattr(ctypes, "CDLL", counting)
    monkeypatch.setattr(processes, "_LIBC", None)

    def rule():
        return os.getpid(), [p for p in loads if p == os.getpid()]

    with Limit(60.0):
        child, loaded_there = call_rule("rule", "rule", rule)
    assert child != os.getpid()  # it ran in a child
    assert loaded_there == []
    if sys.platform.startswith("linux"):
        assert loads == [os.getpid()]  # loaded once, here, before the fork


def test_limits_nest_and_give_back_the_timer_found(rules):
    rang = []

    def mine(*args):
        rang.append(time.monotonic())

    old = signal.signal(signal.SIGALRM, mine)
    before = signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        outer = Limit(5.0)
        with outer:  # the inner limit stops its rule; the outer one has not passed
            with pytest.raises(RuleTimedOut):
                ipfl.clear(market(), D3, payments=rules.sleep_pay, time_limit=0.2)
            assert not outer.expired
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 20 < left <= 30 and not rang  # the timer found keeps its time
        assert signal.getsignal(signal.SIGALRM) is mine  # and its handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, *before)
        signal.signal(signal.SIGALRM, old)


def test_the_timer_found_rings_at_its_time_during_a_limit(rules):
    rang = []
    old = signal.signal(signal.SIGALRM, lambda *a: rang.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        t0 = time.monotonic()
        with pytest.raises(RuleTimedOut):
            ipfl.clear(market(), D3, payments=rules.sleep_pay, time_limit=0.6)
        assert len(rang) == 1 and 0.15 < rang[0] - t0 < 0.5  # its own time, once
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_ring_of_the_timer_found_that_comes_after_a_limit_started_reaches_its_handler():
    """Someone else's timer that rings in the moment the first limit starts shows no time
    left, and its ring (held back there, or taken by another thread, which leaves the
    handler to the main thread's next check) reaches the limit's handler only after: it was
    lost, the owner's handler never ran (the contains_rules rows' foreign_timer_rings
    failed so under load). Made here: a handler with no time left when the limit starts,
    then its ring. It reaches its handler once; a ring of the limit's own still stops."""
    rang = []
    old = signal.signal(signal.SIGALRM, lambda *a: rang.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0)
        limit = Limit(0.3, anywhere=True)
        with pytest.raises(TimeUp):
            with limit:
                os.kill(os.getpid(), signal.SIGALRM)  # the ring, late
                t0 = time.monotonic()
                while time.monotonic() - t0 < 5:
                    time.sleep(1e-3)
        assert len(rang) == 1 and limit.expired  # its handler once, the limit still stops
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_limit_that_passes_while_the_timer_found_s_handler_runs_waits_for_it():
    """The handler of someone else's timer, called at its time during a limit, ran with the
    limit's timer still set: a limit passing meanwhile raised its stop inside that handler,
    cutting it short (a stop in its first line: its ring lost; the contains_rules rows'
    foreign_timer_rings failed so under load). Made here: the handler takes 0.3 s, the
    limit passes 0.1 s into it. The handler finishes; the limit stops what runs after."""
    done = []

    def slow(*args):
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.3:
            time.sleep(0.01)
        done.append(time.monotonic())

    old = signal.signal(signal.SIGALRM, slow)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        limit = Limit(0.2, anywhere=True)
        t0 = time.monotonic()
        with pytest.raises(TimeUp):
            with limit:
                while time.monotonic() - t0 < 5:
                    time.sleep(1e-3)
        stopped = time.monotonic()
        assert len(done) == 1 and limit.expired  # the handler finished, then the stop
        assert done[0] - t0 >= 0.35 and stopped - done[0] < 1.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_late_ring_of_a_limit_s_own_never_reaches_the_handler_put_back(monkeypatch):
    """A ring of the limit's own timer that another thread took as the limit ended reaches
    the main thread only after: it rang the handler put back, someone else's (a second
    ring of theirs, or one before its time). Made here: the ring sent to the main thread as
    the limit ends, held back until SIGALRM is let through.
    The timer found keeps its time, its handler not called."""
    from mechanisms import contain

    rang = []
    main = threading.main_thread().ident  # held back there until SIGALRM is let through
    monkeypatch.setattr(contain, "_drop_pending_alarm",
                        lambda: signal.pthread_kill(main, signal.SIGALRM))
    old = signal.signal(signal.SIGALRM, lambda *a: rang.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with Limit(5.0):
            pass
        time.sleep(0.05)
        assert rang == [] and 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_time_limit_off_the_main_thread_is_refused_not_ignored(rules):
    got = []

    def run():
        for call in (lambda: ipfl.clear(market(), D3, payments=rules.sleep_pay,
                                        time_limit=1),
                     lambda: cpl.apply_pricing(game(), rules.sleep_price, time_limit=1),
                     lambda: check(IpflMechanism("s", payments=rules.sleep_pay), IR,
                                   max_examples=5, time_limit=1)):
            try:
                call()
                got.append(None)
            except (MarketInputError, CheckerInputError) as exc:
                got.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert len(got) == 3 and all(e is not None and e.field == "time_limit" for e in got)
    assert all("main thread" in str(e) for e in got)


# ------------------------------------------------------------------------------ copies


def test_a_rule_that_turns_writing_on_cannot_change_the_outcome(rules):
    mk = market()
    N, D = mk.N.copy(), D3.copy()
    ref = ipfl.clear(mk, D3, payments="none")  # the same selection, nobody paid
    out = ipfl.clear(mk, D3, payments=rules.zeroing_pay)
    assert out.adjacency.sum() == ref.adjacency.sum() > 0
    for name in ("adjacency", "D", "gains", "utilities", "thresholds", "prices"):
        assert np.array_equal(getattr(out, name), getattr(ref, name)), name
    assert np.array_equal(mk.N, N) and np.array_equal(D3, D)  # the caller's too
    sel = ipfl.clear(mk, D3, rule=rules.zeroing_rule)
    assert np.isfinite(sel.prices[0, 1]) and sel.prices[0, 1] > 0 and sel.thresholds.any()
    g = game()
    cpl.apply_pricing(g, rules.zeroing_price)
    assert g.c.tolist() == [5.0, 5.0]


def test_a_rule_that_keeps_what_it_was_handed_cannot_change_an_earlier_outcome(rules):
    first = ipfl.clear(market(), D3, payments=rules.keeping_pay)
    kept = first.adjacency.copy(), first.D.copy(), first.market.c.copy()
    ipfl.clear(market(), D3, payments=rules.keeping_pay)  # writes into what it kept
    assert np.array_equal(first.adjacency, kept[0]) and np.array_equal(first.D, kept[1])
    assert np.array_equal(first.market.c, kept[2])


@pytest.mark.parametrize("engine", ["batch", "hypothesis"])
def test_the_check_does_not_say_holds_on_an_outcome_the_rule_zeroed(rules, engine):
    # the case: the rule zeroes the adjacency it is handed; on the zeroed outcome
    # nobody trades and IR "held"; the real outcome has unpaid sellers
    r = check(IpflMechanism("zeroing", payments=rules.zeroing_pay), IR, engine=engine,
              max_examples=200)
    assert r.verdict == "counterexample", r.verdict


def test_handed_copies_arrays_inside_the_toolkits_objects():
    mk = market()
    h = handed(mk)
    assert h is not mk and not np.shares_memory(h.N, mk.N) and not h.N.flags.writeable
    assert h.m == mk.m and h.gain == mk.gain
    assert handed((1, "x")) == (1, "x")


# ----------------------------------------------------------------------------- sweeps


def _sweep_spec(mechanism):
    return {"seeds": [0], "scenarios": [{"name": "inclusive-market", "mechanisms": [mechanism],
                                         "params": {"rounds": 1, "n_params": 50}}]}


@pytest.mark.parametrize(("mechanism", "says"), [
    ("local+h33rules:nan_pay", "h33rules:nan_pay returned NaN"),
    ("local+h33rules:shape_pay", "h33rules:shape_pay returned shape (13,)"),
    ("local+h33rules:boom_pay", "h33rules:boom_pay raised ZeroDivisionError"),
    ("local+h33rules:exit_pay", "h33rules:exit_pay raised SystemExit: 3"),
])
def test_every_sweep_error_names_the_cell_and_the_rule(rules, tmp_path, mechanism, says):
    with pytest.raises(CellFailed) as e:
        run_sweep(expand(_sweep_spec(mechanism)), tmp_path / "s")
    text = str(e.value)
    assert f"inclusive-market / {mechanism} / seed 0" in text and says in text, text
    assert "\n" not in text


@pytest.mark.timeout(60)
def test_a_sweep_timeout_names_the_cell_and_the_rule(rules, tmp_path):
    stats = run_sweep(expand(_sweep_spec("local+h33rules:sleep_pay")), tmp_path / "s",
                      time_limit=0.5)
    [message] = stats["timed_out"]
    assert "inclusive-market / local+h33rules:sleep_pay / seed 0" in message
    assert message.endswith("; stopped in the payments rule h33rules:sleep_pay")


# ------------------------------------------------------------------------ command line

CLI = [
    (["prove", "--subject", "h33rules:exit_pay", "--property", "individual_rationality",
      "--examples", "5", "--quiet"], "h33rules:exit_pay raised SystemExit: 3"),
    (["prove", "--subject", "h33rules:sleep_pay", "--property", "individual_rationality",
      "--examples", "5", "--time-limit", "1", "--quiet"],
     "h33rules:sleep_pay was stopped at the time limit of 1 s"),
    (["prove", "--subject", "h33rules:nan_pay", "--property", "individual_rationality",
      "--examples", "5", "--quiet", "--engine", "batch"], "h33rules:nan_pay returned NaN"),
    (["prove", "--subject", "h33rules:shape_pay", "--property", "individual_rationality",
      "--examples", "5", "--quiet", "--engine", "batch"],
     "h33rules:shape_pay returned shape"),
    (["clear", "m.json", "--payments", "h33rules:exit_pay"],
     "h33rules:exit_pay raised SystemExit: 3"),
    (["clear", "m.json", "--payments", "h33rules:sleep_pay", "--time-limit", "0.5"],
     "h33rules:sleep_pay was stopped at the time limit of 0.5 s"),
    (["clear", "m.json", "--payments", "h33rules:nan_pay"], "h33rules:nan_pay returned NaN"),
    (["clear", "m.json", "--payments", "h33rules:shape_pay"],
     "h33rules:shape_pay returned shape (4,)"),
    (["sweep", "exit.toml", "--out", "s", "--quiet"],
     "inclusive-market / local+h33rules:exit_pay / seed 0"),
    (["sweep", "nan.toml", "--out", "s", "--quiet"],
     "local+h33rules:nan_pay / seed 0 (n_params=50, rounds=1): payments: h33rules:nan_pay "
     "returned NaN"),
    (["sweep", "shape.toml", "--out", "s", "--quiet"],
     "local+h33rules:shape_pay / seed 0 (n_params=50, rounds=1): payments: "
     "h33rules:shape_pay returned shape"),
    (["design", "--space", "h33rules:exit_space", "--bounds", "0:1", "--markets", "20",
      "--out", "d"], "h33rules:exit_space raised SystemExit: 5"),
    (["sweep", "sleep.toml", "--out", "s", "--quiet", "--time-limit", "0.5"],
     "stopped in the payments rule h33rules:sleep_pay"),
    (["clear", "m.json", "--payments", "h33rules:swallow_pay", "--time-limit", "0.5"],
     "h33rules:swallow_pay was stopped at the time limit of 0.5 s"),
    (["sweep", "swallow.toml", "--out", "s", "--quiet", "--time-limit", "0.5"],
     "stopped in the payments rule h33rules:swallow_pay"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("argv", "needle"), CLI, ids=[" ".join(a[:4]) for a, _ in CLI])
def test_misbehaving_rules_on_the_command_line_end_in_one_line(cwd_rules, capsys, argv,
                                                               needle):
    import json

    (cwd_rules / "m.json").write_text(json.dumps(
        {"N": [100, 200, 300], "c": [0.1, 0.2, 0.3], "K": [1e3, 1e3, 1e3], "lam": 0.1,
         "D": D3.tolist()}))
    for name in ("exit", "sleep", "nan", "shape", "swallow"):
        (cwd_rules / f"{name}.toml").write_text(
            'seeds = [0]\n[[scenarios]]\nname = "inclusive-market"\n'
            f'mechanisms = ["local+h33rules:{name}_pay"]\n'
            'params = {rounds = 1, n_params = 50}\n')
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1, err
    assert needle in lines[0] and "Traceback" not in err, lines[0]


def test_a_zeroing_rule_on_the_command_line_changes_nothing(cwd_rules, capsys):
    import json

    (cwd_rules / "m.json").write_text(json.dumps(
        {"N": [100, 200, 300], "c": [0.1, 0.2, 0.3], "K": [1e3, 1e3, 1e3], "lam": 0.1,
         "D": D3.tolist()}))
    assert main(["clear", "m.json", "--payments", "h33rules:zeroing_pay", "--csv",
                 "z.csv"]) == 0
    assert main(["clear", "m.json", "--payments", "none", "--csv", "n.csv"]) == 0
    import pandas as pd

    z, n = pd.read_csv(cwd_rules / "z.csv"), pd.read_csv(cwd_rules / "n.csv")
    assert z["bought_from"].tolist() == n["bought_from"].tolist() != ["[]"] * 3
    capsys.readouterr()
    # the check sees the real outcome: unpaid sellers, not the zeroed one ("holds")
    code = main(["prove", "--subject", "h33rules:zeroing_pay", "--property",
                 "individual_rationality", "--examples", "200", "--engine", "batch"])
    out = capsys.readouterr().out
    assert code == 0 and "counterexample" in out and "holds" not in out, out


@pytest.mark.parametrize("engine", ["batch", "hypothesis"])
def test_a_lia_rule_and_a_property_of_your_own_are_contained(rules, engine):
    from proofs import LiaClustering, Property
    from proofs.ipfl_properties import IpflCase
    from proofs.strategies import ipfl_instances

    def exiting_sets(I):
        sys.exit(6)

    lia_subject = LiaClustering("exiting", sets_rule=exiting_sets)
    r = check(lia_subject, PROPERTIES["lia_self_included"], engine=engine, max_examples=5)
    assert r.verdict == "error" and "exiting_sets raised SystemExit: 6" in r.error, r.error

    def exiting_property(subject, case):
        subject.settle(case.market, case.D)
        sys.exit(7)

    prop = Property("exits", "exits", "-", "-", "-", "ipfl",
                    lambda: ipfl_instances().map(lambda md: IpflCase(*md)), exiting_property)
    r = check(IpflMechanism("local", "local"), prop, max_examples=5, engine=engine)
    assert r.verdict == "error" and "property 'exits' raised SystemExit: 7" in r.error, r.error


_SLOW_FORK: list[float] = []  # seconds the parent's side of os.fork takes, while set


def _slow_fork():
    if _SLOW_FORK:
        time.sleep(_SLOW_FORK[0])


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")
def test_a_limit_that_passes_while_the_rule_s_process_starts_stops_it_cleanly(rules,
                                                                              monkeypatch):
    """The alarm held back while the rule's child is forked: a limit that passes then stops
    the rule when the fork is done (the child killed, one RuleTimedOut), not inside os.fork's
    own callbacks, where Python can only print 'Exception ignored' and go on."""
    if not hasattr(os, "register_at_fork"):
        pytest.skip("no os.fork here")
    if not getattr(_slow_fork, "registered", False):
        os.register_at_fork(after_in_parent=_slow_fork)  # (cannot be unregistered: a no-op
        _slow_fork.registered = True  # while _SLOW_FORK is empty)
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    before = _children()
    _SLOW_FORK.append(0.3)
    done = threading.Event()  # another thread, which the kernel may hand the alarm to
    other = threading.Thread(target=done.wait, daemon=True)
    other.start()
    try:
        with pytest.raises(RuleTimedOut):
            ipfl.clear(market(), D3, payments=rules.swallow_pay, time_limit=0.1)
    finally:
        _SLOW_FORK.clear()
        done.set()
        other.join()
    assert [type(u.exc_value) for u in ignored] == []
    assert not _children() - before  # the child was reaped


class _SlowGarbage:
    """Garbage only the collector frees (a cycle) whose finalizer takes 0.3 s."""

    def __init__(self, done: list):
        self.me, self.done = self, done

    def __del__(self):
        time.sleep(0.3)
        self.done.append(True)


def test_a_limit_that_passes_in_a_finalizer_the_collector_runs_stops_after_it(monkeypatch):
    """A limit's alarm rings while the garbage collector runs some other code's finalizer
    (0.3 s, against a 0.1 s limit): the finalizer runs to its end and the stop reaches the
    limit's owner after it, instead of being raised inside the finalizer, where Python can
    only print 'Exception ignored' and the finalizer's clean-up is lost (an unraisable
    TimeUp, seen once in a full default-tier run under xdist)."""
    ignored, done = [], []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    limit = Limit(0.1, anywhere=True)
    t0 = time.monotonic()
    with pytest.raises(TimeUp) as info:
        with limit:
            _SlowGarbage(done)
            gc.collect()
            time.sleep(5)
    assert info.value.limit is limit
    assert time.monotonic() - t0 < 4  # stopped after the finalizer, not at the sleep's end
    assert done == [True]
    assert [type(u.exc_value) for u in ignored] == []


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks here")
def test_a_limit_ends_when_another_thread_takes_its_held_back_alarm():
    """A limit's alarm held back at its end (the main thread masks SIGALRM there) is pending
    for the whole process, and another thread, which does not mask it, may take it at any
    moment: between a look at the pending signals and a wait for it, the wait would never
    end (the timer is off by then). Made exactly here: the alarm seen pending, and gone.
    The limit must still end (it hung in sigwait before)."""
    script = textwrap.dedent("""
        import signal
        from mechanisms.contain import Limit
        signal.sigpending = lambda: {signal.SIGALRM}  # seen pending; another thread took it
        with Limit(5.0):
            pass
        print("ended")
    """)
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
         os.environ.get("PYTHONPATH", "")])}
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=60, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("the limit's end waited for an alarm that another thread had taken")
    assert out.returncode == 0 and out.stdout == "ended\n", out.stderr


def test_a_stop_as_a_rule_is_entered_leaves_no_rule_running(monkeypatch):
    """A limit's alarm can raise as contained.__enter__'s append returns, before the with
    block starts (so its __exit__ never runs): the rule must not stay on the running stack,
    where every later ring would take the toolkit's own steps for that rule's (the
    contains_rules 'late' behaviour met it: a stop in the toolkit's steps named the prices
    slot)."""
    import mechanisms.contain as contain

    class RingsAtAppend(list):
        def append(self, item):
            super().append(item)
            raise contain.TimeUp(None, item)

    running = RingsAtAppend()
    monkeypatch.setattr(contain, "_running", running)
    with pytest.raises(contain.TimeUp):
        with contain.contained("prices", "a rule"):
            pass
    assert list(running) == []


def test_a_limit_started_inside_a_rule_stops_only_the_rules_started_inside_it():
    """A rule of your own (no limit) that starts a limit of its own (it clears a market with
    a time_limit): when that limit passes in the toolkit's own steps, nothing is stopped
    there -- not the steps, not the rule around them, which the limit does not own -- and
    the next rule started inside it is not started (naming that rule). Before, the ring
    raised in the steps and named the outer rule, and a ring in Limit.__enter__ left the
    limit behind, every later rule then refused and the process killed by its alarm."""
    import mechanisms.contain as contain

    with contain.contained("prices", "an outer rule of yours"):  # running, without a limit
        limit = Limit(0.001)
        with pytest.raises(TimeUp) as info:
            with limit:
                t0 = time.monotonic()
                while time.monotonic() - t0 < 0.05:  # the toolkit's own steps, past the limit
                    pass
                call_rule("payments", "an inner rule", lambda: 0)
    assert info.value.limit is limit and not info.value.started
    assert info.value.where == ("payments", "an inner rule")
    assert contain._limits == [] and contain._running == []


def test_a_rule_that_clears_under_a_limit_of_its_own_is_not_stopped_by_it():
    """The same through ipfl.clear, as a rule of your own would (proofs.rule_properties'
    nested_clear, with a limit of 1e-9 s that rings 1 ms on, in the inner clearing's own
    steps (the exact selection of 12 clients): the inner clearing names its own rule, never
    the outer one's slot, which answers; no limit is left in force."""
    import mechanisms.contain as contain

    rng = np.random.default_rng(0)
    mk = ipfl.Market(N=rng.integers(100, 2000, 12).astype(float), c=rng.uniform(0, 5, 12),
                     K=rng.uniform(1e3, 1e6, 12), lam=1.0)
    D = rng.uniform(0, 2, (12, 12))
    D = (D + D.T) / 2
    np.fill_diagonal(D, 0.0)
    named = []

    def outer_prices(market_, D_):
        try:
            ipfl.clear(market_, np.asarray(D_), "exact", time_limit=1e-9,
                       payments=lambda m, A, D2: np.zeros(m.m))
        except RuleTimedOut as exc:
            named.append(exc.field)
        return np.ones((market_.m, market_.m))

    for _ in range(20):
        out = ipfl.clear(mk, D, "local", prices=outer_prices)
        assert out.prices is not None
    # stopped or not (a ring as the rule's process starts lets a quick rule answer: 22 of 50
    # stopped on this host), never in the outer rule's name
    assert set(named) <= {"payments"}, named
    assert contain._limits == []
