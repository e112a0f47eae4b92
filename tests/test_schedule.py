"""Every algorithm in the registry on one schedule (learning.algorithms.SCHEDULE): round t is
scored after t + 1 local trainings (x the declared trainings per round), on the declared
models (the ones just trained, or this round's server aggregate), and R rounds hold R ledgers
computed from R aggregations or market clearings, the last included. Known-bad variants (the
schedules this codebase once had) must be rejected by the same check."""

import numpy as np
import pytest
import torch

import mechanisms.ipfl as mipfl
from learning.algorithms import REGISTRY, Algorithm, TrainConfig
from learning.algorithms import fedavg as fedavg_mod
from learning.algorithms import ipfl as ipfl_mod
from learning.algorithms import pfedgraph as pfedgraph_mod
from learning.session import Round, Session

ROUNDS = 3
BASE = {"dataset": "digits", "clients": 5, "rounds": ROUNDS, "steps": 2, "batch": 8,
        "beta": 0.5, "lam": 2.0}
EXTRA = {"lia": {"partition": "pairs", "n_clusters": 2, "lia_warmup": 1, "lia_k": 1},
         "oracle": {"partition": "pairs", "n_clusters": 2}}


def _flat(params):
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], dim=1).double()


def schedule_problems(alg: Algorithm, monkeypatch, rounds: int = ROUNDS) -> list[str]:
    """Run ``alg`` for ``rounds`` rounds with instruments on the session and report every
    departure from the schedule (empty: it follows it)."""
    cfg = TrainConfig(algorithm="ipfl" if alg.name not in REGISTRY else alg.name,
                      **{**BASE, **EXTRA.get(alg.name, {})})
    s = Session(cfg)
    trained, aggregated, ledgers, outcomes = [], [], [], []

    def wrap(name, sink, value=lambda r: r):
        fn = getattr(s, name)

        def inner(*a, **k):
            out = fn(*a, **k)
            sink.append(value(out))
            return out
        setattr(s, name, inner)

    wrap("train", trained, _flat)
    wrap("aggregate", aggregated, lambda r: r.double())
    wrap("unbiased_step", aggregated, lambda r: r.double()[None])
    wrap("baseline_ledger", ledgers)
    wrap("zero_ledger", ledgers)
    clear = mipfl.clear

    def counting_clear(*a, **k):
        out = clear(*a, **k)
        outcomes.append(out)
        return out
    monkeypatch.setattr(mipfl, "clear", counting_clear)
    problems = []
    gen = alg.rounds(s)
    seen_train = seen_agg = 0
    for t in range(rounds):
        r: Round = next(gen)
        want = (t + 1) * alg.trainings
        if s.train_calls != want:
            problems.append(f"round {t}: scored after {s.train_calls} trainings, not {want}")
        # one ledger per round, computed this round
        made = {"market": len(outcomes), "baseline": len(ledgers), "none": len(ledgers),
                "pricing": len(aggregated)}[alg.family]
        if made != t + 1:
            problems.append(f"round {t}: {made} ledger rounds (aggregations or clearings) "
                            f"so far, not {t + 1}")
        if alg.family == "market" and outcomes:
            if not np.allclose(r.ledger["payment"], outcomes[-1].payments):
                problems.append(f"round {t}: the ledger is not this round's clearing")
        elif alg.family in ("baseline", "none") and ledgers and r.ledger is not ledgers[-1]:
            problems.append(f"round {t}: the ledger is not this round's")
        # the models scored
        got = _flat(r.params)
        this_round = trained[seen_train:]
        if alg.evaluates == "trained":
            if not any(torch.equal(got, x) for x in this_round):
                problems.append(f"round {t}: the scored models are not this round's trained "
                                "models")
        else:
            agg = aggregated[seen_agg:]
            last = agg[-1] if agg else None
            if last is None or not torch.allclose(got, last.expand_as(got).float().double()
                                                  if last.shape[0] == 1 else last):
                problems.append(f"round {t}: the scored models are not this round's aggregate")
            if any(torch.equal(got, x) for x in this_round):
                problems.append(f"round {t}: the scored models are the trained ones")
        seen_train, seen_agg = len(trained), len(aggregated)
    return problems


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_algorithm_follows_the_schedule(name, monkeypatch):
    assert schedule_problems(REGISTRY[name], monkeypatch) == []


def _old_ipfl(s):
    """The known-bad schedule iPFL had: round 0 without a market, then clearing before each
    training, so R rounds held R - 1 clearings."""
    m = s.clients
    params = s.train(s.params0)
    yield Round(params, s.zero_ledger(), {})
    while True:
        up = s.uploads(params).double().numpy()
        out, centres = ipfl_mod.market_round(s.market, up, eta=5.0, metric="cosine",
                                             rule="local", reference=s.theta0)
        params = s.train(params, centre=s.stack(centres), prox=np.full(m, 0.4))
        yield Round(params, ipfl_mod.ledger(out), {})


def _trains_ahead(s):
    """pFedGraph's and FedAMP's old schedule: one training before the loop."""
    s.train(s.params0)
    yield from pfedgraph_mod.rounds(s)


@pytest.mark.parametrize(("alg", "says"), [
    (Algorithm("ipfl", _old_ipfl, "market", "old iPFL"), "ledger rounds"),
    (Algorithm("pfedgraph", _trains_ahead, "baseline", "ahead"), "trainings, not"),
    # scored after aggregation while declaring the trained models (CFL's and FedFomo's bug)
    (Algorithm("fedavg", fedavg_mod.rounds, "baseline", "declared wrong", "trained"),
     "not this round's trained"),
    (Algorithm("local", REGISTRY["local"].rounds, "none", "declared wrong", "aggregate"),
     "not this round's aggregate"),
    # Ditto without its declared second training
    (Algorithm("ditto", REGISTRY["ditto"].rounds, "baseline", "undeclared"), "trainings, not"),
], ids=["ipfl-late-market", "trains-ahead", "scored-after-aggregation", "local-as-aggregate",
        "ditto-one-training"])
def test_the_check_rejects_the_known_bad_schedules(alg, says, monkeypatch):
    problems = schedule_problems(alg, monkeypatch)
    assert any(says in p for p in problems), problems


def test_runner_rounds_are_trainings_and_ledgers():
    """The runner scores R rounds for R trainings: a run of R rounds of iPFL trades in its
    first round too (round 0 is a market round)."""
    from learning.algorithms import run

    res = run(TrainConfig(algorithm="ipfl", **BASE))
    f = res.frame
    assert sorted(f["round"].unique()) == list(range(ROUNDS))
    assert f[f["round"] == 0].n_bought.sum() > 0  # lam 2: clients buy in the first round
