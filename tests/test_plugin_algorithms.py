"""Algorithms of your own, without touching the registry: "module:attr" (an Algorithm or a
rounds(session) generator function) or an installed entry point, in TrainConfig, ``fedmarket
train``, sweeps and ``fedmarket reproduce``."""


import numpy as np
import pandas as pd
import pytest

from learning.algorithms import ENTRY_POINT_GROUP, TrainConfig, get, run
from learning.config import TrainInputError
from mechanisms.errors import RuleFailed

TINY = {"dataset": "digits", "clients": 4, "rounds": 2, "steps": 5, "batch": 16, "lr": 0.05,
        "beta": 0.5}

MODULE = '''
import numpy as np

from learning.algorithms import Algorithm
from learning.session import Round


def mylocal(s):
    """Local training written outside the toolkit."""
    params = s.params0
    while True:
        params = s.train(params)
        yield Round(params, s.zero_ledger(), {})


def halfway(s):
    """Each client averages its trained model with the clients' mean (no money)."""
    params = s.params0
    while True:
        up = s.uploads(s.train(params))
        mean = up.mean(0, keepdim=True)
        params = s.stack(0.5 * up + 0.5 * mean)
        yield Round(params, s.baseline_ledger(np.ones((s.clients, s.clients))), {})


ALGORITHM = Algorithm("halfway", halfway, "baseline", "half toward the mean")


def short(s):
    yield Round(s.params0, s.zero_ledger(), {})


def broken(s):
    raise ZeroDivisionError("my bug")
    yield


def exits(s):  # sys.exit from an algorithm of your own: its rule error, not an exit
    import sys
    sys.exit(8)
    yield


def no_ledger(s):
    while True:
        yield Round(s.params0, {}, {})


NOT_AN_ALGORITHM = 3
'''


@pytest.fixture
def myalgos(user_module):
    return user_module("myalgos", MODULE)


def test_an_algorithm_of_your_own_runs_through_the_same_loop(myalgos):
    mine = run(TrainConfig(algorithm="myalgos:mylocal", **TINY)).frame
    local = run(TrainConfig(algorithm="local", **TINY)).frame
    assert (mine.algorithm == "myalgos:mylocal").all()
    cols = ["acc_personalised", "acc_own", "acc_val", "loss", "utility"]
    pd.testing.assert_frame_equal(mine[cols], local[cols])  # local training, same seed
    half = run(TrainConfig(algorithm="myalgos:ALGORITHM", **TINY)).frame
    assert get("myalgos:ALGORITHM").family == "baseline"
    assert get("myalgos:mylocal").family == "custom"
    assert not np.allclose(half.acc_own, local.acc_own)  # it did something else
    assert (half.n_bought == TINY["clients"] - 1).all()


def test_a_broken_algorithm_is_named(myalgos):
    for name, text in (("myalgos:broken", "my bug"), ("myalgos:short", "stopped after 1"),
                       ("myalgos:exits", "myalgos:exits raised SystemExit: 8"),
                       ("myalgos:no_ledger", "ledger lacks")):
        with pytest.raises(RuleFailed, match=text) as e:
            run(TrainConfig(algorithm=name, **TINY))
        assert e.value.field == "algorithm"
    for name in ("myalgos:missing", "nosuchmodule:x", "myalgos:NOT_AN_ALGORITHM", "fedsgd"):
        with pytest.raises(TrainInputError) as e:
            TrainConfig(algorithm=name)
        assert e.value.field == "algorithm"


def test_an_installed_entry_point_is_found_by_name(myalgos, monkeypatch):
    dist = myalgos / "myalgos-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myalgos\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n"
                                           "halfway = myalgos:ALGORITHM\n")
    assert get("halfway").summary == "half toward the mean"
    cfg = TrainConfig(algorithm="halfway", **TINY)
    direct = run(TrainConfig(algorithm="myalgos:ALGORITHM", **TINY)).frame
    via = run(cfg).frame
    np.testing.assert_array_equal(via.acc_own, direct.acc_own)


def test_train_and_sweep_take_your_algorithm(myalgos, monkeypatch, capsys):
    from sims.cli import main
    from sims.sweep import expand, run_cell

    monkeypatch.chdir(myalgos)
    argv = ["train", "--dataset", "digits", "--clients", "4", "--rounds", "2", "--steps", "5",
            "--batch", "16", "--lr", "0.05", "--beta", "0.5", "--quiet"]
    assert main([*argv, "--algorithm", "myalgos:mylocal", "local", "--out", "t"]) == 0
    a = pd.read_parquet(myalgos / "t" / "myalgos-mylocal.parquet")
    b = pd.read_parquet(myalgos / "t" / "local.parquet")
    np.testing.assert_array_equal(a.acc_own, b.acc_own)
    assert main([*argv, "--algorithm", "myalgos:missing", "--out", "t"]) == 2
    assert "algorithm" in capsys.readouterr().err
    spec = {"seeds": [0], "scenarios": [{
        "name": "fig2", "mechanisms": ["myalgos:mylocal"],
        "params": {"clients": 4, "rounds": 1, "steps": 5, "dataset": "digits"}}]}
    (cell,) = expand(spec)
    _, df, _ = run_cell(cell)
    assert (df.mechanism == "myalgos:mylocal").all() and len(df) == 4
    with pytest.raises(ValueError, match="missing"):
        expand({**spec, "scenarios": [{**spec["scenarios"][0],
                                       "mechanisms": ["myalgos:missing"]}]})


def test_reproduce_runs_your_algorithm_beside_the_nine(myalgos, capsys):
    from sims.cli import main
    from sims.reproduce import spec
    from sims.sweep import expand

    base = expand(spec(seeds=[0]))
    more = expand(spec(seeds=[0], algorithms=["myalgos:mylocal"]))
    added = [c for c in more if c.mechanism == "myalgos:mylocal"]
    assert {c.key for c in base} <= {c.key for c in more}  # the stored cells stay the same
    assert len(more) == len(base) + len(added)
    # Fig. 2: NIID, Skew and Cluster of seed 0, and Fig. 2 under our corrected defaults
    assert sorted(c.scenario for c in added) == ["fig2", "fig2", "fig2", "fig2-corrected"]
    argv = ["reproduce", "--seeds", "0", "--out", str(myalgos / "s"), "--quiet",
            "--with-algorithms"]
    assert main([*argv, "myalgos:missing"]) == 2
    assert "--with-algorithms" in capsys.readouterr().err
