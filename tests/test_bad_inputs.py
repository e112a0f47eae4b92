"""The bad-input battery: every bad input gets a typed error that names the field (API) or
one line on stderr with exit status 2 (CLI), and nothing is written or lost; plus fault tests
for the sweep store (kill -9 with a process pool, corruption, tampering, stale cells, two
sweeps on one folder).

Each API case is (callable, expected error type, expected field); each CLI case is
(argv, a text the one-line message must contain). Keep every case fast: inputs are refused
before any work, which is what is being tested.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from learning.config import TrainConfig, TrainInputError
from mechanisms import cpl, ipfl, lia
from mechanisms.distances import pairwise_distances
from mechanisms.errors import (
    FedmarketError,
    MarketInputError,
    ProblemTooLarge,
    RuleFailed,
    check_sellers,
)
from proofs import CplSolver, IpflMechanism, assert_contract, check_contract
from proofs.checker import CheckerInputError
from proofs.registry import PROPERTIES
from sims.cli import main
from sims.cpl_game import CplBenchmark
from sims.errors import SpecError, StoreError
from sims.inclusive import InclusiveMarket
from sims.store import decode_rows
from sims.sweep import Store, expand, load_toml, run_sweep

INF, NAN = float("inf"), float("nan")


def market(**kw):
    base = dict(N=[100.0, 200.0, 300.0], c=[0.1, 0.2, 0.3], K=[1e3, 1e3, 1e3], lam=0.1)
    base.update(kw)
    return ipfl.Market(**base)


D3 = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.5], [2.0, 1.5, 0.0]])


def game(**kw):
    base = dict(a=[0.5, 0.5], G=[1.0, 1.0], c=[5.0, 5.0], v=[1.0, 1.0], budget=1.0)
    base.update(kw)
    return cpl.Game(**base)


def nan_gain(x, K, N):
    return np.where(np.asarray(x) > 150, np.nan, K * np.log1p(np.asarray(x) / N))


SPEC_OK = {"name": "cpl-pricing", "mechanisms": ["bisection"], "params": {"clients": 4}}


def _writes_into_game(g):
    g.c[0] = 0.0  # the game's arrays are read-only: refused, the game unchanged
    return np.ones(g.n)


def spec(**top):
    return {"seeds": [0], "scenarios": [dict(SPEC_OK)], **top}


def entry(**kw):
    return {"seeds": [0], "scenarios": [{**SPEC_OK, **kw}]}


API = [
    # ---- iPFL market types
    ("market-N-negative", lambda: market(N=[100, -1, 3]), MarketInputError, "N"),
    ("market-N-nan", lambda: market(N=[100, NAN, 3]), MarketInputError, "N"),
    ("market-N-inf", lambda: market(N=[100, INF, 3]), MarketInputError, "N"),
    ("market-N-zero", lambda: market(N=[100, 0, 3]), MarketInputError, "N"),
    # numbers each finite whose gain overflows: refused naming the field, never NaN utilities
    # or a payment rule blamed for them (found by a fuzz of magnitudes 1e-310..1e308)
    ("market-N-subnormal", lambda: market(N=[1e-310, 200, 3]), MarketInputError, "N"),
    ("market-K-over-N-overflows", lambda: market(N=[1e-10, 200, 3], K=[1e300, 1e3, 1e3]),
     MarketInputError, "K"),
    ("market-N-sums-to-inf", lambda: market(N=[1e308, 1e308, 3]), MarketInputError, "N"),
    ("market-log-gain-data-ratio-overflows",
     lambda: market(N=[1e-300, 1e10, 3], K=[0.0, 1e3, 1e3], gain="log"), MarketInputError, "N"),
    ("market-true_N-subnormal", lambda: market(true_N=[1e-310, 200, 3]), MarketInputError,
     "true_N"),
    ("arrays-N-subnormal", lambda: ipfl.MarketArrays(N=[[1e-310, 200.0]], c=[[0.1, 0.2]],
                                                      K=[[1e3, 1e3]], lam=[0.1]),
     MarketInputError, "N"),
    ("arrays-true_K-over-N-overflows",
     lambda: ipfl.MarketArrays(N=[[1e-10, 200.0]], c=[[0.1, 0.2]], K=[[1e3, 1e3]], lam=[0.1],
                               true_K=[[1e300, 1e3]]), MarketInputError, "true_K"),
    ("market-N-string", lambda: market(N=["a", "b", "c"]), MarketInputError, "N"),
    ("market-N-2d", lambda: market(N=[[1, 2, 3]]), MarketInputError, "N"),
    ("market-N-numeric-strings", lambda: market(N=["100", "200", "300"]), MarketInputError,
     "N"),
    ("market-N-bools", lambda: market(N=[True, True, True]), MarketInputError, "N"),
    ("market-c-mixed-string", lambda: market(c=[0.1, "0.2", 0.3]), MarketInputError, "c"),
    ("market-lam-string", lambda: market(lam="2"), MarketInputError, "lam"),
    ("clear-D-strings", lambda: ipfl.clear(market(), D3.astype(str)), MarketInputError, "D"),
    ("game-v-strings", lambda: game(v=["1", "1"]), MarketInputError, "v"),
    ("response-prices-strings", lambda: cpl.best_response(game(), ["1", "2"]),
     MarketInputError, "prices"),
    ("market-N-empty", lambda: market(N=[], c=[], K=[]), MarketInputError, "N"),
    ("market-c-nan", lambda: market(c=[0.1, NAN, 0.3]), MarketInputError, "c"),
    ("market-c-neg-inf", lambda: market(c=[0.1, -INF, 0.3]), MarketInputError, "c"),
    ("market-c-negative", lambda: market(c=[0.1, -0.2, 0.3]), MarketInputError, "c"),
    ("market-c-short", lambda: market(c=[0.1, 0.2]), MarketInputError, "c"),
    ("market-K-nan", lambda: market(K=[1, NAN, 1]), MarketInputError, "K"),
    ("market-K-negative", lambda: market(K=[1, -1, 1]), MarketInputError, "K"),
    ("market-lam-nan", lambda: market(lam=NAN), MarketInputError, "lam"),
    ("market-lam-negative", lambda: market(lam=-1.0), MarketInputError, "lam"),
    ("market-lam-inf", lambda: market(lam=INF), MarketInputError, "lam"),
    ("market-gain-unknown", lambda: market(gain="cubic"), MarketInputError, "gain"),
    ("market-gain-number", lambda: market(gain=5), MarketInputError, "gain"),
    ("market-gain-returns-nan", lambda: market(gain=nan_gain), MarketInputError, "gain"),
    ("market-true_N-short", lambda: market(true_N=[1.0, 2.0]), MarketInputError, "true_N"),
    ("market-true_c-nan", lambda: market(true_c=[0.1, NAN, 0.3]), MarketInputError,
     "true_c"),
    # ---- clearing
    ("clear-rule-unknown", lambda: ipfl.clear(market(), D3, rule="FOO"), MarketInputError,
     "rule"),
    ("clear-thresholds-unknown", lambda: ipfl.clear(market(), D3, thresholds="FOO"),
     MarketInputError, "thresholds"),
    ("clear-exact-method-unknown", lambda: ipfl.clear(market(), D3, rule="exact",
                                                      exact_method="FOO"),
     MarketInputError, "exact_method"),
    ("clear-node-limit-zero", lambda: ipfl.clear(market(), D3, rule="exact",
                                                 exact_node_limit=0),
     MarketInputError, "exact_node_limit"),
    ("clear-time-limit-negative", lambda: ipfl.clear(market(), D3, rule="exact",
                                                     exact_time_limit=-1.0),
     MarketInputError, "exact_time_limit"),
    ("clear-time-limit-nan", lambda: ipfl.clear(market(), D3, rule="exact",
                                                exact_time_limit=NAN),
     MarketInputError, "exact_time_limit"),
    ("clear-time-limit-string", lambda: ipfl.clear(market(), D3, rule="exact",
                                                   exact_time_limit="10s"),
     MarketInputError, "exact_time_limit"),
    ("clear-dp-fractional", lambda: ipfl.clear(market(N=[1.5, 2.0, 3.0]), D3, rule="exact",
                                               exact_method="dp"),
     MarketInputError, "exact_method"),
    ("clear-dp-huge-table", lambda: ipfl.clear(
        ipfl.Market(N=np.arange(30) * 2.0 + 1e12 + 1, c=np.full(30, 1e-9),
                    K=np.full(30, 1e6)), np.zeros((30, 30)), rule="exact",
        exact_method="dp"), ProblemTooLarge, "exact_method"),
    ("clear-enumeration-huge", lambda: ipfl.clear(
        ipfl.Market(N=np.arange(40) + 1.0, c=np.full(40, 1e-9), K=np.full(40, 1e6)),
        np.zeros((40, 40)), rule="exact", exact_method="enumeration"),
     ProblemTooLarge, "exact_method"),
    ("clear-D-shape", lambda: ipfl.clear(market(), np.zeros((2, 2))), MarketInputError, "D"),
    ("clear-D-nan", lambda: ipfl.clear(market(), np.where(np.eye(3) > 0, 0.0, NAN)),
     MarketInputError, "D"),
    ("clear-D-negative", lambda: ipfl.clear(market(), -D3), MarketInputError, "D"),
    ("clear-D-diagonal", lambda: ipfl.clear(market(), D3 + np.eye(3)), MarketInputError, "D"),
    ("clear-D-strings", lambda: ipfl.clear(market(), [["a"] * 3] * 3), MarketInputError, "D"),
    # ---- distances
    ("dist-metric-unknown", lambda: pairwise_distances(np.ones((2, 2)), "l1"),
     MarketInputError, "metric"),
    ("dist-theta-1d", lambda: pairwise_distances(np.ones(3)), MarketInputError, "theta"),
    ("dist-theta-nan", lambda: pairwise_distances([[1.0, NAN], [0.0, 0.0]]),
     MarketInputError, "theta"),
    ("dist-theta-strings", lambda: pairwise_distances([["a", "b"]]), MarketInputError,
     "theta"),
    ("dist-l2sq-overflow", lambda: pairwise_distances([[1e200, 0.0], [-1e200, 0.0]]),
     MarketInputError, "theta"),
    ("dist-reference-shape", lambda: pairwise_distances(np.ones((2, 3)), "cosine",
                                                        reference=np.ones(2)),
     MarketInputError, "reference"),
    ("dist-reference-overflow", lambda: pairwise_distances([[1e308, 0.0], [1.0, 0.0]],
                                                           "cosine",
                                                           reference=[-1e308, 0.0]),
     MarketInputError, "reference"),
    # ---- CPL game
    ("game-a-negative", lambda: game(a=[0.5, -0.5]), MarketInputError, "a"),
    ("game-a-nan", lambda: game(a=[0.5, NAN]), MarketInputError, "a"),
    ("game-G-negative", lambda: game(G=[1.0, -1.0]), MarketInputError, "G"),
    ("game-G-overflow", lambda: game(G=[1e300, 1e300]), MarketInputError, "G"),
    ("game-c-zero", lambda: game(c=[5.0, 0.0]), MarketInputError, "c"),
    ("game-c-strings", lambda: game(c=["a", "b"]), MarketInputError, "c"),
    ("game-v-negative", lambda: game(v=[1.0, -1.0]), MarketInputError, "v"),
    ("game-budget-nan", lambda: game(budget=NAN), MarketInputError, "budget"),
    ("game-budget-inf", lambda: game(budget=INF), MarketInputError, "budget"),
    ("game-budget-string", lambda: game(budget="lots"), MarketInputError, "budget"),
    ("game-alpha-zero", lambda: game(alpha=0.0), MarketInputError, "alpha"),
    ("game-R-half", lambda: game(R=0.5), MarketInputError, "R"),
    ("game-q_min-zero", lambda: game(q_min=0.0), MarketInputError, "q_min"),
    ("game-q_max-length", lambda: game(q_max=[1.0, 1.0, 1.0]), MarketInputError, "q_max"),
    ("game-q_max-one-for-two", lambda: game(q_max=[1.0]), MarketInputError, "q_max"),
    ("game-q_max-above-1", lambda: game(q_max=2.0), MarketInputError, "q_max"),
    ("game-length-mismatch", lambda: game(G=[1.0, 1.0, 1.0]), MarketInputError, "G"),
    # ---- CPL solve and responses
    ("solve-dict", lambda: cpl.solve({"a": [1.0]}), MarketInputError, "game"),
    ("solve-method", lambda: cpl.solve(game(), "newton"), MarketInputError, "method"),
    ("solve-option", lambda: cpl.solve(game(), "bisection", tol=1), MarketInputError,
     "options"),
    ("solve-solver", lambda: cpl.solve(game(), "cvxpy", solver="FOO"), MarketInputError,
     "solver"),
    ("solve-eps0-tiny", lambda: cpl.solve(game(), "cvxpy-linesearch", eps0=1e-12),
     ProblemTooLarge, "eps0"),
    ("solve-eps0-nan", lambda: cpl.solve(game(), "cvxpy-linesearch", eps0=NAN),
     MarketInputError, "eps0"),
    ("solve-progress-not-callable", lambda: cpl.solve(game(), "cvxpy-linesearch",
                                                      progress=5), MarketInputError, "progress"),
    ("check-solve-linesearch-too-long", lambda: cpl.check_solve(cpl.Game(
        a=np.ones(2000), G=np.ones(2000), c=np.full(2000, 5.0), v=np.zeros(2000),
        budget=100.0), "cvxpy-linesearch", points=400), ProblemTooLarge, "points"),
    ("solve-xtol-negative", lambda: cpl.solve(game(), xtol=-1.0), MarketInputError, "xtol"),
    ("solve-xtol-nan", lambda: cpl.solve(game(), xtol=NAN), MarketInputError, "xtol"),
    ("solve-points-one", lambda: cpl.solve(game(), "cvxpy-linesearch", points=1),
     MarketInputError, "points"),
    ("solve-linesearch-too-long", lambda: cpl.solve(cpl.Game(
        a=np.ones(2000), G=np.ones(2000), c=np.full(2000, 5.0), v=np.zeros(2000),
        budget=100.0), "cvxpy-linesearch", points=400), ProblemTooLarge, "points"),
    ("solve-cvxpy-too-many", lambda: cpl.solve(cpl.Game(
        a=np.ones(100_001), G=np.ones(100_001), c=np.full(100_001, 5.0),
        v=np.ones(100_001), budget=1e6), "cvxpy"), ProblemTooLarge, "game"),
    ("solve-infeasible", lambda: cpl.solve(game(budget=-1e6)), cpl.BudgetInfeasible,
     "budget"),
    ("response-shape", lambda: cpl.best_response(game(), [1.0]), MarketInputError, "prices"),
    ("response-nan", lambda: cpl.best_response(game(), [1.0, NAN]), MarketInputError,
     "prices"),
    ("response-strings", lambda: cpl.best_response(game(), ["a", "b"]), MarketInputError,
     "prices"),
    ("response-dict-game", lambda: cpl.best_response({"n": 2}, [1.0, 1.0]),
     MarketInputError, "game"),
    ("uniform-dict-game", lambda: cpl.uniform_pricing({"n": 2}), MarketInputError, "game"),
    ("weighted-dict-game", lambda: cpl.weighted_pricing({"a": [1.0]}), MarketInputError,
     "game"),
    ("utilities-strings", lambda: cpl.client_utilities(game(), ["a", "b"], [0.1, 0.1]),
     MarketInputError, "prices"),
    ("scheme-responses", lambda: cpl.uniform_pricing(game(), responses="cubic"),
     MarketInputError, "responses"),
    # ---- LIA
    ("lia-rtol-nan", lambda: lia.beneficial_sets(np.eye(3), rtol=NAN), MarketInputError,
     "rtol"),
    ("lia-rtol-negative", lambda: lia.beneficial_sets(np.eye(3), rtol=-1.0),
     MarketInputError, "rtol"),
    ("lia-atol-inf", lambda: lia.beneficial_sets(np.eye(3), atol=INF), MarketInputError,
     "atol"),
    ("lia-mode", lambda: lia.cluster(np.eye(3), mode="ring"), MarketInputError, "mode"),
    # ---- training settings
    *[(f"train-{k}-{v!r}", (lambda k=k, v=v: TrainConfig(**{k: v})), TrainInputError, k)
      for k, v in [("lr", INF), ("lr", 1e300), ("lr", 0.0), ("lr", NAN), ("lr", "0.1"),
                   ("momentum", 5.0), ("momentum", -0.1), ("momentum", 1.0),
                   ("clients", 2.5), ("clients", 0), ("clients", "10"), ("clients", True),
                   ("K", INF), ("K", NAN), ("K", -1.0), ("C", -1.0), ("lam", NAN),
                   ("seed", -1), ("seed", 2.5), ("seed", True), ("rounds", 0),
                   ("steps", -1), ("batch", 0), ("beta", 0.0), ("eta", 0.0),
                   ("weight_decay", 2.0), ("dataset", "cifar"), ("partition", "random"),
                   ("algorithm", "sgd"), ("metric", "l1"), ("rule", "greedy"),
                   ("attack", "nuke"), ("lockstep", "no"), ("attackers", -1),
                   ("liar", 99), ("cpl_q_min", 0.0), ("cpl_budget", -1.0),
                   ("evaluate_every", 0), ("n_clusters", 0), ("data_dir", 5)]],
    # ---- scenario configs
    *[(f"inclusive-{k}-{v!r}", (lambda k=k, v=v: InclusiveMarket(**{k: v})),
       MarketInputError, k)
      for k, v in [("rounds", 0), ("rounds", 2.5), ("seed", -1), ("K", NAN), ("lam", -1.0),
                   ("attack", "nuke"), ("metric", "l1"), ("rule", "FOO"),
                   ("thresholds", "FOO"), ("traders", -1), ("n_params", 10**12),
                   ("liar_N", 0.0)]],
    *[(f"cplbench-{k}-{v!r}", (lambda k=k, v=v: CplBenchmark(**{k: v})), MarketInputError, k)
      for k, v in [("clients", 0), ("clients", 2.5), ("c", NAN), ("seed", -1),
                   ("budget", INF), ("R", 0), ("v_mean", -1.0)]],
    # ---- sweep specs (refused before the first cell)
    ("spec-typo-scenario", lambda: expand({"scenario": [SPEC_OK]}), SpecError, "scenario"),
    ("spec-empty", lambda: expand({}), SpecError, "scenarios"),
    ("spec-no-scenarios", lambda: expand({"seeds": [0]}), SpecError, "scenarios"),
    ("spec-not-a-table", lambda: expand(["x"]), SpecError, "spec"),
    ("spec-scenarios-table", lambda: expand({"scenarios": {"name": "x"}}), SpecError,
     "scenarios"),
    ("spec-unknown-scenario", lambda: expand(entry(name="nope")), SpecError,
     "scenarios[0].name"),
    ("spec-missing-name", lambda: expand({"scenarios": [{"mechanisms": ["x"]}]}), SpecError,
     "scenarios[0].name"),
    ("spec-typo-params", lambda: expand(entry(parms={"clients": 4})), SpecError,
     "scenarios[0].parms"),
    ("spec-typo-mechanism", lambda: expand(entry(mechanism=["bisection"])), SpecError,
     "scenarios[0].mechanism"),
    ("spec-unknown-mechanism", lambda: expand(entry(mechanisms=["FOO"])), SpecError,
     "scenarios[0].mechanisms[0]"),
    ("spec-mechanisms-empty", lambda: expand(entry(mechanisms=[])), SpecError,
     "scenarios[0].mechanisms"),
    ("spec-mechanisms-string", lambda: expand(entry(mechanisms="bisection")), SpecError,
     "scenarios[0].mechanisms"),
    ("spec-custom-rule-missing", lambda: expand({"scenarios": [
        {"name": "inclusive-market", "mechanisms": ["nomodule_xyz:rule"]}]}), SpecError,
     "scenarios[0].mechanisms[0].selection"),
    ("spec-rule-os-getcwd", lambda: expand({"scenarios": [
        {"name": "inclusive-market", "mechanisms": ["local", "os:getcwd"]}]}), SpecError,
     "scenarios[0].mechanisms[1].selection"),
    ("spec-payments-not-a-rule", lambda: expand({"scenarios": [
        {"name": "inclusive-market", "mechanisms": ["local+os:getcwd"]}]}), SpecError,
     "scenarios[0].mechanisms[0].payments"),
    ("spec-pricing-not-a-rule", lambda: expand({"scenarios": [
        {"name": "cpl-pricing", "mechanisms": ["os:getcwd"]}]}), SpecError,
     "scenarios[0].mechanisms[0].pricing"),
    ("spec-unknown-param", lambda: expand(entry(params={"colour": 1})), SpecError,
     "scenarios[0].params"),
    ("spec-param-bad-value", lambda: expand(entry(params={"clients": 0})), SpecError,
     "scenarios[0].params.clients"),
    ("spec-param-string", lambda: expand(entry(params={"budget": "x"})), SpecError,
     "scenarios[0].params.budget"),
    ("spec-param-empty-list", lambda: expand(entry(params={"budget": []})), SpecError,
     "scenarios[0].params.budget"),
    ("spec-param-seed", lambda: expand(entry(params={"seed": 3})), SpecError,
     "scenarios[0].params"),
    ("spec-params-not-table", lambda: expand(entry(params=[1, 2])), SpecError,
     "scenarios[0].params"),
    ("spec-seed-negative", lambda: expand(spec(seeds=[-1])), SpecError, "seeds[0]"),
    ("spec-seed-float", lambda: expand(spec(seeds=[0.5])), SpecError, "seeds[0]"),
    ("spec-seed-string", lambda: expand(spec(seeds=["0"])), SpecError, "seeds[0]"),
    ("spec-seeds-empty", lambda: expand(spec(seeds=[])), SpecError, "seeds"),
    ("spec-seeds-duplicate", lambda: expand(spec(seeds=[1, 1])), SpecError, "seeds"),
    ("spec-entry-seed-bad", lambda: expand(entry(seeds=[True])), SpecError,
     "scenarios[0].seeds[0]"),
    ("spec-unknown-top-key", lambda: expand(spec(parallel=4)), SpecError, "parallel"),
    # ---- sweep runner and store
    ("sweep-executor", lambda: run_sweep([], "/nonexistent-i14", executor="dask"),
     MarketInputError, "executor"),
    ("sweep-workers-zero", lambda: run_sweep([], "/nonexistent-i14", workers=0),
     MarketInputError, "workers"),
    ("sweep-workers-float", lambda: run_sweep([], "/nonexistent-i14", workers=2.5),
     MarketInputError, "workers"),
    ("sweep-time-limit-zero", lambda: run_sweep([], "/nonexistent-i14", time_limit=0),
     MarketInputError, "time_limit"),
    ("sweep-time-limit-inf", lambda: run_sweep([], "/nonexistent-i14", time_limit=INF),
     MarketInputError, "time_limit"),
    ("sweep-time-limit-text", lambda: run_sweep([], "/nonexistent-i14", time_limit="5"),
     MarketInputError, "time_limit"),
    ("sweep-cell-progress-not-callable",
     lambda: run_sweep([], "/nonexistent-i14", cell_progress=5), MarketInputError,
     "cell_progress"),
    ("store-mode", lambda: Store("/nonexistent-i14", mode="a"), MarketInputError, "mode"),
    ("store-read-missing", lambda: Store("/nonexistent-i14", mode="r"), StoreError,
     "results"),
    # ---- complex numbers are refused, not cut to their real part
    ("market-N-complex", lambda: market(N=[100 + 1j, 200, 300]), MarketInputError, "N"),
    ("market-c-complex-object", lambda: market(c=[0.1, np.complex128(0.2), 0.3]),
     MarketInputError, "c"),
    ("market-lam-complex", lambda: market(lam=2j), MarketInputError, "lam"),
    ("clear-D-complex", lambda: ipfl.clear(market(), D3 + 0j), MarketInputError, "D"),
    ("game-a-complex", lambda: game(a=[0.5 + 1j, 0.5]), MarketInputError, "a"),
    ("game-q-max-complex", lambda: game(q_max=[1 + 0j, 1]), MarketInputError, "q_max"),
    ("game-budget-complex", lambda: game(budget=1 + 1j), MarketInputError, "budget"),
    ("game-budget-text", lambda: game(budget="1"), MarketInputError, "budget"),
    # ---- dates and durations are refused, not read as counts of days or seconds since 1970
    ("market-N-dates", lambda: market(N=np.array([100, 200, 300], dtype="datetime64[D]")),
     MarketInputError, "N"),
    ("game-a-durations", lambda: game(a=np.array([1, 1], dtype="timedelta64[s]")),
     MarketInputError, "a"),
    ("game-alpha-bool", lambda: game(alpha=True), MarketInputError, "alpha"),
    ("response-complex", lambda: cpl.best_response(game(), [1 + 1j, 1.0]), MarketInputError,
     "prices"),
    ("posted-shape-complex", lambda: cpl.posted_pricing(game(), [1j, 1.0]), MarketInputError,
     "shape"),
    ("aggregate-complex", lambda: cpl.unbiased_aggregate([0.0], [[1j], [3.0]], [True, False],
                                                        [0.5, 0.5], [0.5, 0.5]),
     MarketInputError, "updates"),
    # ---- a CPL pricing rule of the user's own: the same forms as ipfl.clear, outputs checked
    ("pricing-none", lambda: cpl.apply_pricing(game(), None), MarketInputError, "pricing"),
    ("pricing-number", lambda: cpl.apply_pricing(game(), 3), MarketInputError, "pricing"),
    ("pricing-unknown-name", lambda: cpl.apply_pricing(game(), "cheapest"), MarketInputError,
     "pricing"),
    ("pricing-missing-module", lambda: cpl.apply_pricing(game(), "nomodule_xyz:f"),
     MarketInputError, "pricing"),
    ("pricing-os-getcwd", lambda: cpl.apply_pricing(game(), "os:getcwd"), MarketInputError,
     "pricing"),  # refused before the call: it cannot take a game
    ("pricing-numpy-zeros", lambda: cpl.apply_pricing(game(), "numpy:zeros"), RuleFailed,
     "pricing"),
    ("pricing-raises", lambda: cpl.apply_pricing(game(), lambda g: 1 / 0), RuleFailed,
     "pricing"),
    ("pricing-writes-game", lambda: cpl.apply_pricing(game(), _writes_into_game), RuleFailed,
     "pricing"),
    ("pricing-returns-text", lambda: cpl.apply_pricing(game(), lambda g: ["1", "2"]),
     MarketInputError, "pricing"),
    ("pricing-returns-bools", lambda: cpl.apply_pricing(game(), lambda g: [True, True]),
     MarketInputError, "pricing"),
    ("pricing-returns-complex", lambda: cpl.apply_pricing(game(), lambda g: [1 + 1j, 1.0]),
     MarketInputError, "pricing"),
    ("pricing-returns-none", lambda: cpl.apply_pricing(game(), lambda g: None),
     MarketInputError, "pricing"),
    # ---- a selection that buys from a client that does not sell (c = inf)
    ("selection-buys-from-pure-buyer", lambda: check_sellers(
        "rule", [[0, 1, 0], [0, 0, 0], [0, 0, 0]], [0.1, INF, 0.3], "mine"), MarketInputError,
     "rule"),
    ("clear-selection-buys-from-pure-buyer", lambda: ipfl.clear(
        market(c=[0.1, INF, 0.3]), D3, rule=lambda mk, D, T, P: np.eye(3, k=1, dtype=bool)),
     MarketInputError, "rule"),
    # ---- what ipfl.clear's user rules return: text, booleans, complex are refused
    ("clear-prices-text", lambda: ipfl.clear(
        market(), D3, prices=lambda mk, D: [["1.5"] * 3] * 3), MarketInputError, "prices"),
    ("clear-prices-complex", lambda: ipfl.clear(
        market(), D3, prices=lambda mk, D: np.ones((3, 3)) + 1j), MarketInputError, "prices"),
    ("clear-payments-bools", lambda: ipfl.clear(
        market(), D3, payments=lambda mk, A, D: [True, False, False]), MarketInputError,
     "payments"),
    # ---- contract checks that would pass on nothing
    *[(f"contract-{fn.__name__}-{label}", (lambda fn=fn, s=s: fn(s, max_examples=1)),
       CheckerInputError, field)
      for fn in (check_contract, assert_contract)
      for label, s, field in [
          ("none", None, "subject"), ("string", "local", "subject"),
          ("dict", {"budget_balance": True}, "subject"),
          ("declares-nothing", IpflMechanism("mine", "local"), "declares"),
          ("declares-nothing-cpl", CplSolver("mine"), "declares"),
          ("declares-list", IpflMechanism("mine", "local", declares=["budget_balance"]),
           "declares"),
          ("declares-no", IpflMechanism("mine", "local", declares={"budget_balance": "no"}),
           "declares"),
          ("declares-none", IpflMechanism("mine", "local",
                                          declares={"budget_balance": None}), "declares"),
          ("declares-one", IpflMechanism("mine", "local", declares={"budget_balance": 1}),
           "declares")]],
    ("contract-extra-not-bool", lambda: check_contract(
        IpflMechanism("mine", "local"), {PROPERTIES["budget_balance"]: "yes"}),
     CheckerInputError, "extra"),
    ("contract-extra-string", lambda: check_contract(IpflMechanism("mine", "local"), "x"),
     CheckerInputError, "extra"),
    ("contract-extra-bad-pairs", lambda: check_contract(IpflMechanism("mine", "local"),
                                                        [PROPERTIES["budget_balance"]]),
     CheckerInputError, "extra"),
]


@pytest.mark.parametrize(("call", "error", "field"),
                         [pytest.param(c, e, f, id=i) for i, c, e, f in API])
def test_api_bad_input(call, error, field):
    with pytest.raises(error) as info:
        call()
    assert info.value.field == field, str(info.value)
    assert str(info.value).startswith(f"{field}: ")
    clone = pickle.loads(pickle.dumps(info.value))  # crosses process and ray boundaries
    assert type(clone) is type(info.value) and clone.field == field
    assert str(clone) == str(info.value)
    assert not Path("/nonexistent-i14").exists()


def test_battery_is_large_enough():
    assert len(API) + len(CLI) >= 150


# ---------------------------------------------------------------------------------------
# CLI: one line on stderr, exit status 2, nothing written
# ---------------------------------------------------------------------------------------

GOOD_MARKET = {"N": [100, 200], "c": [0.1, 0.2], "K": [1000, 1000], "D": [[0, 1], [1, 0]]}


def _files(tmp: Path):
    """Input files the CLI cases read (created before each case)."""
    (tmp / "inputs").mkdir()
    inp = tmp / "inputs"
    (inp / "good.json").write_text(json.dumps(GOOD_MARKET))
    (inp / "bad.json").write_text("{not json")
    (inp / "latin1.json").write_bytes(b'{"N": [1], "x": "\xe9"}')
    (inp / "list.json").write_text("[1, 2]")
    (inp / "abc.json").write_text(json.dumps({**GOOD_MARKET, "N": ["abc", 2]}))
    (inp / "neg.json").write_text(json.dumps({**GOOD_MARKET, "N": [-1, 2]}))
    (inp / "extra.json").write_text(json.dumps({**GOOD_MARKET, "colour": 1}))
    (inp / "missing.json").write_text(json.dumps({"N": [1, 2]}))
    (inp / "nested.json").write_text(json.dumps({**GOOD_MARKET, "c": [[0.1], 0.2]}))
    (inp / "dir.json").mkdir()
    (inp / "file").write_text("x")  # a file where a folder is expected
    (inp / "empty.toml").write_text("")
    (inp / "typo.toml").write_text('[[scenario]]\nname = "cpl-pricing"\n')
    (inp / "parms.toml").write_text('[[scenarios]]\nname = "cpl-pricing"\nparms = {R = 2}\n')
    (inp / "mech.toml").write_text('[[scenarios]]\nname = "cpl-pricing"\n'
                                   'mechanism = ["uniform"]\n')
    (inp / "seed.toml").write_text('seeds = [-1]\n[[scenarios]]\nname = "cpl-pricing"\n')
    (inp / "seedint.toml").write_text('seeds = 5\n[[scenarios]]\nname = "cpl-pricing"\n')
    (inp / "unknown.toml").write_text('[[scenarios]]\nname = "nope"\n')
    (inp / "broken.toml").write_text("[[scenarios]\n")
    (inp / "latin1.toml").write_bytes(b'name = "\xe9"\n')
    (inp / "value.toml").write_text('[[scenarios]]\nname = "cpl-pricing"\n'
                                    'params = {clients = 0}\n')
    (inp / "ok.toml").write_text('[[scenarios]]\nname = "cpl-pricing"\n'
                                 'mechanisms = ["uniform"]\nparams = {clients = 4}\n')
    (inp / "nested.json").write_text("[" * 200_000 + "]" * 200_000)
    (inp / "nested-N.json").write_text('{"N": ' + "[" * 200_000 + "]" * 200_000 + "}")
    (inp / "huge-int.json").write_text(json.dumps({**GOOD_MARKET, "N": [10**400, 200]}))
    (inp / "nested.toml").write_text("x = " + "[" * 200_000 + "]" * 200_000 + "\n")
    values = ", ".join(str(v + 1) for v in range(1000))
    (inp / "huge-grid.toml").write_text(  # 10^9 cells: refused after counting, at once
        f'seeds = [0]\n[[scenarios]]\nname = "cpl-pricing"\nmechanisms = ["bisection"]\n'
        f"params = {{budget = [{values}], R = [{values}], clients = [{values}]}}\n")
    (inp / "million-grid.toml").write_text(
        'seeds = [0]\n[[scenarios]]\nname = "cpl-pricing"\nmechanisms = ["bisection"]\n'
        f"params = {{budget = [{values}], R = [{values}]}}\n")
    (tmp / "emptystore").mkdir()
    corrupt = tmp / "corrupt"
    corrupt.mkdir()
    (corrupt / "store.sqlite").write_bytes(os.urandom(65536))
    foreign = tmp / "foreign"
    foreign.mkdir()
    db = sqlite3.connect(foreign / "store.sqlite")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    return inp


UNDER_FILE = "{inp}/file/out"  # a path below a regular file: cannot be created

CLI = [
    # market
    ("market-rounds-0", ["market", "--rounds", "0"], "rounds"),
    ("market-seed-neg", ["market", "--seed", "-1"], "seed"),
    ("market-lam-nan", ["market", "--lam", "nan"], "lam"),
    ("market-rule", ["market", "--rule", "FOO"], "--rule"),
    ("market-rounds-text", ["market", "--rounds", "ten"], "--rounds"),
    ("market-out-under-file", ["market", "--out", UNDER_FILE], "--out"),
    ("market-out-is-file", ["market", "--out", "{inp}/file"], "--out"),
    ("market-unknown-option", ["market", "--colour", "red"], "unrecognized"),
    # cpl
    ("cpl-sweep-count-0", ["cpl", "--sweep", "5", "40", "0"], "--sweep"),
    ("cpl-sweep-reversed", ["cpl", "--sweep", "40", "5", "3"], "--sweep"),
    ("cpl-sweep-count-frac", ["cpl", "--sweep", "5", "40", "2.5"], "--sweep"),
    ("cpl-clients-0", ["cpl", "--clients", "0"], "clients"),
    ("cpl-budget-nan", ["cpl", "--budget", "nan"], "budget"),
    ("cpl-budget-infeasible", ["cpl", "--budget=-1e6"], "budget"),
    ("cpl-points-1", ["cpl", "--points", "1"], "--points"),
    ("cpl-seed-neg", ["cpl", "--seed", "-1"], "seed"),
    ("cpl-out-under-file", ["cpl", "--out", UNDER_FILE], "--out"),
    ("cpl-G-overflow", ["cpl", "--G", "1e300"], "G"),
    # refused before bisection and cvxpy run (the line search's guard used to be met last)
    ("cpl-linesearch-too-long", ["cpl", "--clients", "2000", "--budget", "1000", "--out",
                                 "{tmp}/c"], "points"),
    # clear
    ("clear-missing", ["clear", "{inp}/nope.json"], "market_file"),
    ("clear-directory", ["clear", "{inp}/dir.json"], "market_file"),
    ("clear-not-utf8", ["clear", "{inp}/latin1.json"], "market_file"),
    ("clear-bad-json", ["clear", "{inp}/bad.json"], "market_file"),
    ("clear-list", ["clear", "{inp}/list.json"], "market_file"),
    ("clear-number-text", ["clear", "{inp}/abc.json"], "N"),
    ("clear-negative", ["clear", "{inp}/neg.json"], "N"),
    ("clear-extra-key", ["clear", "{inp}/extra.json"], "market_file"),
    ("clear-missing-key", ["clear", "{inp}/missing.json"], "market_file"),
    ("clear-nested", ["clear", "{inp}/nested.json"], "c"),
    ("clear-csv-under-file", ["clear", "{inp}/good.json", "--csv", UNDER_FILE], "--csv"),
    ("clear-csv-is-dir", ["clear", "{inp}/good.json", "--csv", "{inp}/dir.json"], "--csv"),
    ("clear-rule", ["clear", "{inp}/good.json", "--rule", "FOO"], "rule"),
    # a rule of the user's own, found in the current folder, that raises or is no rule
    ("clear-user-rule-raises", ["clear", "{inp}/good.json", "--rule", "userrules_i23:boom"],
     "rule: userrules_i23:boom raised ZeroDivisionError"),
    ("clear-user-payments-raise", ["clear", "{inp}/good.json", "--payments",
                                   "userrules_i23:boom3"], "payments: userrules_i23:boom3"),
    ("clear-rule-os-getcwd", ["clear", "{inp}/good.json", "--rule", "os:getcwd"],
     "rule: 'os:getcwd' is not a rule of this kind"),
    ("clear-rule-numpy-zeros", ["clear", "{inp}/good.json", "--rule", "numpy:zeros"],
     "rule: 'numpy:zeros' is not a rule of this kind"),
    ("clear-payments-builtin-max", ["clear", "{inp}/good.json", "--payments", "builtins:max"],
     "payments: builtins:max raised TypeError"),  # no readable signature: fails when called
    # sweep
    ("sweep-empty-spec", ["sweep", "{inp}/empty.toml"], "scenarios"),
    ("sweep-scenario-typo", ["sweep", "{inp}/typo.toml"], "scenario"),
    ("sweep-parms-typo", ["sweep", "{inp}/parms.toml"], "parms"),
    ("sweep-mechanism-typo", ["sweep", "{inp}/mech.toml"], "mechanism"),
    ("sweep-seed-neg", ["sweep", "{inp}/seed.toml"], "seeds[0]"),
    ("sweep-seeds-scalar", ["sweep", "{inp}/seedint.toml"], "seeds"),
    ("sweep-unknown-scenario", ["sweep", "{inp}/unknown.toml"], "scenarios[0].name"),
    ("sweep-broken-toml", ["sweep", "{inp}/broken.toml"], "spec"),
    ("sweep-not-utf8", ["sweep", "{inp}/latin1.toml"], "spec"),
    ("sweep-spec-dir", ["sweep", "{inp}/dir.json"], "spec"),
    ("sweep-spec-missing", ["sweep", "{inp}/nope.toml"], "spec"),
    ("sweep-bad-value", ["sweep", "{inp}/value.toml"], "params.clients"),
    ("sweep-workers-0", ["sweep", "{inp}/ok.toml", "--workers", "0"], "--workers"),
    ("sweep-workers-text", ["sweep", "{inp}/ok.toml", "--workers", "two"], "--workers"),
    ("sweep-spec-and-preset", ["sweep", "{inp}/ok.toml", "--preset", "demo"], "spec"),
    ("sweep-neither", ["sweep"], "spec"),
    ("sweep-preset-unknown", ["sweep", "--preset", "huge"], "--preset"),
    ("sweep-executor", ["sweep", "{inp}/ok.toml", "--executor", "dask"], "--executor"),
    ("sweep-out-under-file", ["sweep", "{inp}/ok.toml", "--out", UNDER_FILE], "--out"),
    ("sweep-out-corrupt", ["sweep", "{inp}/ok.toml", "--out", "{tmp}/corrupt"], "store"),
    ("sweep-out-foreign", ["sweep", "{inp}/ok.toml", "--out", "{tmp}/foreign"], "store"),
    # report
    ("report-no-store", ["report", "{tmp}/emptystore"], "results"),
    ("report-missing", ["report", "{tmp}/nowhere"], "results"),
    ("report-corrupt", ["report", "{tmp}/corrupt"], "store"),
    ("report-foreign", ["report", "{tmp}/foreign"], "store"),
    ("report-verdict-examples-huge", ["report", "{tmp}/emptystore", "--verdict-examples",
                                      str(10**18)], "verdict-examples"),
    ("report-verdict-examples-negative", ["report", "{tmp}/emptystore",
                                          "--verdict-examples", "-1"], "verdict-examples"),
    # reproduce (its outputs are checked before the first cell: a run takes hours)
    ("reproduce-out-under-file", ["reproduce", "--out", UNDER_FILE], "--out"),
    ("reproduce-out-is-file", ["reproduce", "--out", "{inp}/file"], "--out"),
    ("reproduce-docs-is-dir", ["reproduce", "--out", "{tmp}/r", "--docs", "{inp}/dir.json"],
     "--docs"),
    ("reproduce-docs-under-file", ["reproduce", "--out", "{tmp}/r", "--docs", UNDER_FILE],
     "--docs"),
    ("reproduce-workers-0", ["reproduce", "--out", "{tmp}/r", "--workers", "0"], "workers"),
    ("reproduce-with-summary-missing", ["reproduce", "--out", "{tmp}/r", "--with-summary",
                                        "{tmp}/nowhere"], "--with-summary"),
    ("sweep-progress-negative", ["sweep", "{inp}/ok.toml", "--out", "{tmp}/s",
                                 "--progress-every", "-1"], "--progress-every"),
    ("clear-exact-time-limit-nan", ["clear", "{inp}/good.json", "--rule", "exact",
                                    "--exact-time-limit", "nan"], "exact_time_limit"),
    # bounded work: absurd sizes and nesting answered in one line
    ("clear-nested-brackets", ["clear", "{inp}/nested.json"], "nests its values too deeply"),
    ("clear-nested-N", ["clear", "{inp}/nested-N.json"], "market_file"),
    ("clear-400-digit-int", ["clear", "{inp}/huge-int.json"], "N: holds an integer too large"),
    ("sweep-nested-brackets", ["sweep", "{inp}/nested.toml"], "too deeply"),
    ("sweep-grid-1e9", ["sweep", "{inp}/huge-grid.toml"], "1,000,000,000 cells"),
    ("sweep-grid-1e6", ["sweep", "{inp}/million-grid.toml"], "--max-cells 1000000"),
    ("sweep-max-cells-0", ["sweep", "{inp}/ok.toml", "--max-cells", "0"], "--max-cells"),
    ("market-rounds-400-digits", ["market", "--rounds", "1" + "0" * 400], "out of range"),
    ("market-seed-400-digits", ["market", "--seed", "9" * 400], "--seed"),
    ("cpl-clients-400-digits", ["cpl", "--clients", "1" + "0" * 400], "--clients"),
    ("prove-examples-400-digits", ["prove", "--examples", "1" + "0" * 400], "--examples"),
    ("prove-examples-over-limit", ["prove", "--examples", str(10**12)], "examples"),
    ("prove-time-limit-inf", ["prove", "--engine", "batch", "--time-limit", "inf"],
     "time-limit"),
    ("prove-time-limit-nan", ["prove", "--engine", "batch", "--time-limit", "nan"],
     "time-limit"),
    ("prove-time-limit-zero", ["prove", "--time-limit", "0"], "time-limit"),
    ("sweep-time-limit-zero", ["sweep", "{inp}/ok.toml", "--time-limit", "0"],
     "--time-limit"),
    ("sweep-time-limit-inf", ["sweep", "{inp}/ok.toml", "--time-limit", "inf"],
     "--time-limit"),
    ("sweep-time-limit-nan", ["sweep", "{inp}/ok.toml", "--time-limit", "nan"],
     "--time-limit"),
    ("reproduce-seed-400-digits", ["reproduce", "--seeds", "1" + "0" * 400], "--seeds"),
    # prove
    ("prove-unknown-property", ["prove", "--property", "thm9"], "property"),
    ("prove-unknown-subject", ["prove", "--subject", "nobody"], "subject"),
    ("prove-examples-0", ["prove", "--examples", "0"], "examples"),
    ("prove-max-clients-1", ["prove", "--max-clients", "1"], "max-clients"),
    ("prove-seed-negative-batch", ["prove", "--engine", "batch", "--seed", "-1"], "seed"),
    ("prove-jobs-0", ["prove", "--jobs", "0"], "--jobs"),
    ("prove-jobs-negative", ["prove", "--jobs", "-2"], "--jobs"),
    ("prove-jobs-not-int", ["prove", "--jobs", "2.5"], "--jobs"),
    ("prove-cpl-on-ipfl", ["prove", "--subject", "local", "--property", "cpl_unbiased"],
     "property"),
    ("prove-markdown-under-file", ["prove", "--subject", "local", "--property",
                                   "budget_balance", "--markdown", UNDER_FILE], "--markdown"),
    # train (refused before any training, torch or not)
    ("train-lr-inf", ["train", "--lr", "inf"], "lr"),
    ("train-lr-huge", ["train", "--lr", "1e300"], "lr"),
    ("train-momentum-5", ["train", "--momentum", "5"], "momentum"),
    ("train-clients-frac", ["train", "--clients", "2.5"], "--clients"),
    ("train-K-inf", ["train", "--K", "inf"], "K"),
    ("train-seed-neg", ["train", "--seed", "-1"], "seed"),
    ("train-algorithm", ["train", "--algorithm", "sgd"], "--algorithm"),
    ("train-out-under-file", ["train", "--rounds", "1", "--out", UNDER_FILE], "--out"),
    # top level
    ("no-command", [], "COMMAND"),
    ("unknown-command", ["frobnicate"], "frobnicate"),
]


USER_RULES = textwrap.dedent("""
    import numpy as np
    def boom(market, D, T, P):
        return 1 / 0
    def boom3(market, A, D):
        raise KeyError("no such client")
    def top(market, D, T, P):
        A = np.zeros(T.shape, dtype=bool)
        A[0, 1] = True
        return A
    def slow_pay(market, A, D):  # merely slow: 0.05 s a call
        import time
        time.sleep(0.05)
        return np.zeros(market.m)
    def nap(market, D, T, P):  # merely slow: 0.05 s a round
        import time
        time.sleep(0.05)
        return np.zeros(T.shape, dtype=bool)
    def long_nap(market, D, T, P):  # one call that would take minutes
        import time
        time.sleep(300)
        return np.zeros(T.shape, dtype=bool)
""")


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    inp = _files(tmp_path)
    (tmp_path / "userrules_i23.py").write_text(USER_RULES)  # found in the current folder
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ beside it
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts the folder on sys.path
    monkeypatch.chdir(tmp_path)  # default --out folders land here, if anything is written
    return tmp_path, inp


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("argv", "needle"),
                         [pytest.param(a, n, id=i) for i, a, n in CLI])
def test_cli_bad_input_is_one_line_and_writes_nothing(argv, needle, sandbox, capsys):
    tmp, inp = sandbox
    before = _snapshot(tmp)
    argv = [a.format(inp=inp, tmp=tmp) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one line, no traceback, no usage block
    assert lines[0].startswith("fedmarket") and "error" in lines[0]
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err
    assert _snapshot(tmp) == before  # nothing written, created or changed


def test_clear_finds_a_rule_in_the_current_folder(sandbox, capsys):
    tmp, inp = sandbox  # the current folder is tmp, which pytest's sys.path does not hold
    assert main(["clear", str(inp / "good.json"), "--rule", "userrules_i23:top",
                 "--csv", "o.csv"]) == 0
    import pandas as pd

    df = pd.read_csv(tmp / "o.csv")
    assert df.loc[0, "bought_from"] == "[1]" and "userrules_i23:top" in capsys.readouterr().out


def test_a_raising_rule_in_a_sweep_names_the_cell_and_keeps_the_finished(sandbox, capsys):
    tmp, _inp = sandbox
    (tmp / "boom.toml").write_text(
        'seeds = [0]\n[[scenarios]]\nname = "inclusive-market"\n'
        'mechanisms = ["local", "userrules_i23:boom"]\nparams = {rounds = 1, n_params = 50}\n')
    code = main(["sweep", "boom.toml", "--out", "s", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    line = err[0]
    for part in ("inclusive-market / userrules_i23:boom / seed 0", "ZeroDivisionError",
                 "1 of 2 cells are stored"):
        assert part in line, line
    store = Store(tmp / "s", mode="r")
    assert set(store.cells().mechanism) == {"local"}  # the finished cell is kept
    store.close()


def test_prove_names_a_raising_rule_and_its_error_in_one_line(sandbox, capsys):
    # the rule's own KeyError, named with the row and the rule (was: "error" in the table,
    # the message nowhere, exit status 0)
    code = main(["prove", "--subject", "userrules_i23:boom3", "--property", "budget_balance",
                 "--examples", "10", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("fedmarket: row budget_balance on userrules_i23:boom3: error: ")
    assert "userrules_i23:boom3" in err[0].split("error: ", 1)[1] and "KeyError" in err[0]
    # a rule that does not raise: no such line, status 0
    assert main(["prove", "--subject", "userrules_i23:slow_pay", "--property",
                 "budget_balance", "--examples", "2", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_a_subject_named_twice_is_reported_once():
    from proofs.report import run_report

    rows = run_report(subjects=["local", "local"], properties=["budget_balance",
                                                               "budget_balance"],
                      examples=5, engine="batch")
    assert len(rows) == 1


# ---------------------------------------------------------------------------------------
# bounded work, visible progress: a rule that is merely slow gets a bound (--time-limit)
# and shows what it is doing, rather than a silent wait
# ---------------------------------------------------------------------------------------


def _slow_pay(market, A, D):
    time.sleep(0.05)
    return np.zeros(market.m)


@pytest.mark.timeout(120)  # an ignored limit would run 10,000 slow examples (minutes)
def test_a_slow_subject_under_the_hypothesis_engine_is_bounded_and_shows_its_examples():
    from proofs import check

    subject = IpflMechanism("slow", payments=_slow_pay)
    # without a limit the budget is the bound, and the report says so (this first search
    # also sets Hypothesis up, about 1 s under load, which would count against the limit)
    t0 = time.perf_counter()
    r = check(subject, PROPERTIES["budget_balance"], engine="hypothesis", max_examples=3)
    warm = time.perf_counter() - t0  # the baseline: a run's fixed costs under this load
    assert r.extra["stopped"] == "budget" and r.verdict in ("holds", "vacuous")
    heard = []
    t0 = time.perf_counter()
    r = check(subject, PROPERTIES["budget_balance"], engine="hypothesis", max_examples=10_000,
              time_limit=2.0, progress=lambda done, budget: heard.append(
                  (time.perf_counter(), done, budget)))
    took = time.perf_counter() - t0
    # bounded by the limit plus a few runs' fixed costs measured beside it (the unbounded
    # run: 10,000 examples of 0.05 s and more)
    assert r.extra["stopped"] == "time limit" and 0 < r.examples < 10_000
    assert took < 2.0 + 5 * warm, (took, warm)
    assert r.verdict == "inconclusive"  # cut short: never "holds"
    # examples done of the budget, rising, one report at least every few seconds, the last
    # one the report's own count
    assert {budget for _, _, budget in heard} == {10_000}
    done = [d for _, d, _ in heard]
    assert done == sorted(done) and len(set(done)) >= 2 and done[-1] == r.examples
    assert np.diff([t0] + [t for t, _, _ in heard]).max() < 1.0 + 2 * warm
    # the bound hides no failure: the slow rule pays nobody, which breaks IR
    r = check(subject, PROPERTIES["individual_rationality"], engine="hypothesis",
              max_examples=10_000, time_limit=2.0)
    assert r.verdict == "counterexample" and r.extra["stopped"] in ("budget", "time limit")


@pytest.mark.timeout(120)
def test_prove_hypothesis_rows_honour_the_time_limit_and_show_examples(sandbox, capsys,
                                                                        monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # table rows on one line each
    # the baseline, beside it: the same command at 2 examples (start-up, imports, the engine)
    t0 = time.perf_counter()
    assert main(["prove", "--subject", "userrules_i23:slow_pay", "--property",
                 "budget_balance", "--examples", "2", "--progress-every", "0"]) == 0
    base = time.perf_counter() - t0
    capsys.readouterr()
    t0 = time.perf_counter()
    code = main(["prove", "--subject", "userrules_i23:slow_pay", "--property",
                 "budget_balance", "--examples", "10000", "--time-limit", "2",
                 "--progress-every", "0"])
    took = time.perf_counter() - t0
    out = capsys.readouterr()
    assert code == 0 and took < 2 + 3 * base, (took, base, out.err)
    lines = out.err.splitlines()
    assert any(ln.startswith("prove checks: 0/1 (0 %), ") and
               "; running: budget_balance on userrules_i23:slow_pay: " in ln and
               "/10,000 examples (" in ln for ln in lines), lines
    assert "inconclusive" in out.out and "holds" not in out.out.split("declared")[-1]
    # the built-in rows too (the Hypothesis engine, in this process)
    assert main(["prove", "--subject", "local", "--property", "budget_balance",
                 "--examples", "50", "--time-limit", "30", "--progress-every", "0"]) == 0
    assert "running: budget_balance on local: " in capsys.readouterr().err


# a fast cell (local, 2 rounds) and a slow one: 100 rounds of 0.05 s (5 s at least)
SLOW_CELLS = {"seeds": [0], "scenarios": [
    {"name": "inclusive-market", "mechanisms": ["local"],
     "params": {"rounds": 2, "n_params": 50}},
    {"name": "inclusive-market", "mechanisms": ["userrules_i23:nap"],
     "params": {"rounds": 100, "n_params": 50}}]}
NAP = "inclusive-market / userrules_i23:nap / seed 0 (n_params=50, rounds=100)"


@pytest.mark.timeout(120)  # an ignored limit would wait for the 300 s rule
@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_a_slow_cell_shows_its_rounds_and_stops_at_the_time_limit(sandbox, monkeypatch,
                                                                  executor):
    tmp, _inp = sandbox
    monkeypatch.syspath_prepend(str(tmp))
    heard, cells_done = [], []
    stats = run_sweep(expand(SLOW_CELLS), tmp / "s", executor=executor, time_limit=1.0,
                      progress=lambda d, t: cells_done.append((d, t)),
                      cell_progress=heard.append)
    # the slow cell is stopped, named in one line (unstopped it would end after its 100
    # rounds and name nothing); the fast one is stored
    [message] = stats["timed_out"]
    assert message.startswith(NAP + ": stopped at its time limit of 1 s after ")
    assert "of 100 rounds; not stored" in message and "\n" not in message
    assert stats["ran"] == 1 and cells_done[-1] == (1, 2)
    store = Store(tmp / "s", mode="r")
    assert store.cells().mechanism.tolist() == ["local"]
    store.close()
    # the slow cell's rounds were heard as they went (from the workers, too), then its end
    naps = [st for st in heard if st.cell.mechanism == "userrules_i23:nap"]
    rounds = [st.done for st in naps if not st.over]
    assert rounds == sorted(rounds) and rounds[-1] >= 2 and len(set(rounds)) >= 3
    assert {st.total for st in naps if st.done} == {100} and naps[0].unit == "rounds"
    assert naps[-1].over and not any(st.over for st in naps[:-1])
    # steps stop once the limit passed: a step checks the limit after reporting, so at most
    # one round is heard past it, the last one (a step after it would mean the cell went
    # on); then only the cell's end (functional: no wall-clock bound, load cannot flake it)
    going = [st for st in naps if not st.over]
    late = [st for st in going if st.seconds > 1.0]
    assert late in ([], going[-1:]), [(st.done, st.seconds) for st in late]
    # every cell ends with an "over" step, the fast one included
    assert sum(st.over for st in heard) == 2


@pytest.mark.timeout(120)
def test_a_rule_that_never_returns_is_stopped_at_the_time_limit(sandbox, monkeypatch):
    tmp, _inp = sandbox
    monkeypatch.syspath_prepend(str(tmp))
    cells = expand({"seeds": [0], "scenarios": [
        {"name": "inclusive-market", "mechanisms": ["userrules_i23:long_nap", "local"],
         "params": {"rounds": 2, "n_params": 50}}]})
    # a SIGALRM timer set before (pytest-timeout's, under pytest) is kept: its handler
    # and its time left come back after the sweep
    timer, handler = signal.getitimer(signal.ITIMER_REAL), signal.getsignal(signal.SIGALRM)
    t0 = time.perf_counter()
    stats = run_sweep(cells, tmp / "s", time_limit=0.5)
    took = time.perf_counter() - t0
    assert took < 300 / 3  # not the rule's 300 s: its one call is ended
    [message] = stats["timed_out"]
    assert "userrules_i23:long_nap / seed 0" in message and "before its first step" in message
    assert stats["ran"] == 1  # the cell after it ran and is stored
    assert signal.getsignal(signal.SIGALRM) is handler
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert (left == 0) == (timer[0] == 0) and left <= timer[0] - took + 0.5


@pytest.mark.timeout(120)
def test_sweep_time_limit_names_the_cell_keeps_the_finished_and_shows_rounds(sandbox,
                                                                            capsys):
    tmp, _inp = sandbox
    (tmp / "slow.toml").write_text(
        'seeds = [0]\n[[scenarios]]\nname = "inclusive-market"\nmechanisms = ["local"]\n'
        'params = {rounds = 2, n_params = 50}\n[[scenarios]]\nname = "inclusive-market"\n'
        'mechanisms = ["userrules_i23:nap"]\nparams = {rounds = 100, n_params = 50}\n')
    code = main(["sweep", "slow.toml", "--out", "s", "--time-limit", "1",
                 "--progress-every", "0"])
    out = capsys.readouterr()
    assert code == 1, out.err
    err = out.err.splitlines()
    cell_lines = [ln for ln in err if ln.startswith("fedmarket:")]
    assert len(cell_lines) == 1 and cell_lines[0].startswith(
        f"fedmarket: cell {NAP}: stopped at its time limit of 1 s after "), err
    # while the slow cell ran, its rounds showed
    assert any(f"; running: {NAP}: " in ln and "/100 rounds (" in ln for ln in err), err
    assert "1 stopped at the time limit (not stored)" in out.out
    # a rerun keeps the finished cell and tries the slow one again; --quiet still names it
    code = main(["sweep", "slow.toml", "--out", "s", "--time-limit", "1", "--quiet"])
    out = capsys.readouterr()
    assert code == 1 and out.out == "" and out.err.count("\n") == 1 and NAP in out.err


def test_a_sweep_prints_its_cell_count_first(sandbox, capsys):
    _tmp, inp = sandbox
    assert main(["sweep", str(inp / "ok.toml"), "--out", "s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "sweep: 1 cells in the grid", out
    # a grid over the limit runs when asked (--max-cells), and is refused without
    assert main(["sweep", str(inp / "ok.toml"), "--out", "s", "--max-cells", "1",
                 "--quiet"]) == 0
    cells = expand({"seeds": [0, 1], "scenarios": [dict(SPEC_OK)]}, max_cells=2)
    assert len(cells) == 2
    with pytest.raises(SpecError, match="2 cells, over the limit of 1"):
        expand({"seeds": [0, 1], "scenarios": [dict(SPEC_OK)]}, max_cells=1)


def test_a_cpl_pricing_rule_cannot_write_into_the_game():
    g = game()
    before = g.c.copy()
    with pytest.raises(RuleFailed, match="read-only"):
        cpl.apply_pricing(g, _writes_into_game)
    assert (g.c == before).all()
    assert cpl.apply_pricing(g, "uniform").prices.tolist() == \
        cpl.apply_pricing(g, cpl.PRICING_RULES["uniform"]).prices.tolist()


def _pays_by_zero(market, A, D):
    return 1 // 0


def _writes_into_distances(market, A, D):
    D[0, 1] = 0.0  # the arrays clear hands a rule are read-only: refused, D unchanged
    return np.zeros(len(market.N))


def _selects_by_writing(market, D, T, P):
    T[...] = 0.0
    return np.zeros(T.shape, dtype=bool)


def _prices_not_a_rule(market):  # the wrong arity: a TypeError inside the call
    return None


@pytest.mark.parametrize("kind, fn, needle", [
    ("payments", _pays_by_zero, "ZeroDivisionError"),
    ("payments", _writes_into_distances, "read-only"),
    ("rule", _selects_by_writing, "read-only"),
    ("prices", _prices_not_a_rule, "TypeError"),
])
def test_ipfl_clear_names_a_user_rule_that_raises(kind, fn, needle):
    # the same surface as cpl.apply_pricing: RuleFailed naming the kind of rule, the rule and
    # its own error (chained), never the rule's raw exception; the caller's D stays intact
    mk = market()
    D = pairwise_distances(np.random.default_rng(0).normal(size=(len(mk.N), 4)))
    before = D.copy()
    with pytest.raises(RuleFailed, match=needle) as e:
        ipfl.clear(mk, D, **{kind: fn})
    assert e.value.field == kind and fn.__name__ in str(e.value)
    assert e.value.__cause__ is not None
    assert (D == before).all()


# ---------------------------------------------------------------------------------------
# read-only outputs: we run as root, so chmod would not stop a write; the commands decide
# by os.access (sims.cli.common.writable_folder), which is what is made to say "read-only"
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_store(tmp_path_factory):
    """A small finished sweep store (built once), copied into each case's read-only folder."""
    root = tmp_path_factory.mktemp("store")
    run_sweep(expand({"seeds": [0], "scenarios": [dict(SPEC_OK)]}), root / "store")
    return root / "store"


READ_ONLY = [
    ("sweep-out", ["sweep", "{inp}/ok.toml", "--out", "{ro}/new"], "--out"),
    ("sweep-into-store", ["sweep", "{inp}/ok.toml", "--out", "{ro}/store"], "--out"),
    ("report-store-folder", ["report", "{ro}/store"], "results"),
    ("report-out", ["report", "{tmp}/store", "--out", "{ro}/report"], "--out"),
    ("train-out", ["train", "--rounds", "1", "--out", "{ro}/train"], "--out"),
    ("reproduce-out", ["reproduce", "--out", "{ro}/store"], "--out"),
    ("reproduce-no-run-out", ["reproduce", "--no-run", "--out", "{ro}/store"], "--out"),
    ("reproduce-docs", ["reproduce", "--no-run", "--out", "{tmp}/store", "--docs",
                        "{ro}/reproduction.md"], "--docs"),
    ("market-out", ["market", "--rounds", "1", "--out", "{ro}/m"], "--out"),
    ("cpl-out", ["cpl", "--out", "{ro}/c"], "--out"),
    ("clear-csv", ["clear", "{inp}/good.json", "--csv", "{ro}/o.csv"], "--csv"),
    ("prove-markdown", ["prove", "--subject", "local", "--property", "budget_balance",
                        "--markdown", "{ro}/p.md"], "--markdown"),
]


@pytest.mark.parametrize(("argv", "needle"),
                         [pytest.param(a, n, id=i) for i, a, n in READ_ONLY])
def test_cli_read_only_output_is_one_line_and_writes_nothing(argv, needle, sandbox, capsys,
                                                             monkeypatch, finished_store):
    import shutil

    tmp, inp = sandbox
    ro = tmp / "ro"
    ro.mkdir()
    shutil.copytree(finished_store, ro / "store")
    shutil.copytree(finished_store, tmp / "store")
    real = os.access
    denied = []

    def access(path, mode, *args, **kw):
        if mode & os.W_OK and Path(path).absolute().is_relative_to(ro):
            denied.append(path)
            return False
        return real(path, mode, *args, **kw)

    monkeypatch.setattr(os, "access", access)
    before = _snapshot(tmp)
    code = main([a.format(inp=inp, tmp=tmp, ro=ro) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "read-only" in lines[0], err
    assert denied  # refused by the writability check, not by something else
    assert _snapshot(tmp) == before


@pytest.mark.serial
@pytest.mark.slow  # a local ray instance takes 10-20 s to start
def test_typed_error_in_a_ray_cell_is_one_line(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    spec = tmp_path / "infeasible.toml"  # valid spec; the budget fails inside the worker
    spec.write_text('seeds = [0]\n[[scenarios]]\nname = "cpl-pricing"\n'
                    'mechanisms = ["bisection"]\nparams = {clients = 4, budget = -1e6}\n')
    try:
        code = main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--executor", "ray",
                     "--workers", "1"])
    finally:
        if ray.is_initialized():
            ray.shutdown()
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fedmarket: error: budget: "), err
    assert "RayTaskError" not in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------
# the store under faults
# ---------------------------------------------------------------------------------------

SLOW_SPEC = textwrap.dedent("""
    seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    [[scenarios]]
    name = "inclusive-market"
    mechanisms = ["exact", "local", "sleepy:nap_then_buy_nothing"]
    params = { rounds = 4, n_params = 4000 }
""")
# the signal test's sweep: 16 x 60 rounds of the 0.1 s rule, about 48 s on 2 workers, so that
# a sweep that waits for its queued cells after a signal (the old Ctrl-C) overruns the 30 s
# the test allows
SIGNAL_SPEC = SLOW_SPEC.replace("rounds = 4", "rounds = 60")
# a selection rule of the user's own that takes 0.1 s a round, so that the sweep is still
# running when the test looks (the built-in rules clear all 32 cells in about a second)
SLEEPY = textwrap.dedent("""
    import time
    import numpy as np
    def nap_then_buy_nothing(market, D, T, P):
        time.sleep(0.1)
        return np.zeros(T.shape, dtype=bool)
""")
FAST = {"seeds": [0, 1], "scenarios": [
    {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform"],
     "params": {"clients": 6, "budget": [5.0, 10.0]}}]}


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.serial
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_store_faults_kill_lock_orphans_resume(tmp_path, monkeypatch):
    spec_file = tmp_path / "slow.toml"
    spec_file.write_text(SLOW_SPEC)
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    monkeypatch.syspath_prepend(str(tmp_path))  # the resume below runs in this process
    out = tmp_path / "store"
    cmd = [sys.executable, "-m", "sims.cli", "sweep", str(spec_file), "--out", str(out),
           "--executor", "processes", "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "store.lock").exists():
        time.sleep(0.05)
    time.sleep(0.3)
    # two sweeps at once: the second is refused, naming the holder, and runs nothing
    with pytest.raises(StoreError, match="another sweep") as info:
        run_sweep(expand(FAST), out)
    assert info.value.field == "out"
    workers = []
    while time.time() < deadline and len(workers) < 2:
        workers = [k for k in _children(proc.pid) if _alive(k)]
        time.sleep(0.05)
    assert workers, "the pool never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the pool workers die with their parent (no orphans)
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(k) for k in workers):
        time.sleep(0.1)
    assert not any(_alive(k) for k in workers), "orphaned pool workers"
    # resume: the lock died with the process; every cell ends up stored exactly once
    stats = run_sweep(expand(FAST), tmp_path / "other")  # unrelated folder unaffected
    assert stats["ran"] == 8
    cells = expand({"seeds": list(range(16)), "scenarios": [
        {"name": "inclusive-market",
         "mechanisms": ["exact", "local", "sleepy:nap_then_buy_nothing"],
         "params": {"rounds": 4, "n_params": 4000}}]})
    again = run_sweep(cells, out, executor="processes", workers=2)
    assert again["ran"] + again["skipped"] == 48
    store = Store(out, mode="r")
    assert store.verify() == 48 and store.cells().key.is_unique
    store.close()


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    out, todo = [], [pid]
    while todo:
        kids = [k for k in _children(todo.pop()) if _alive(k)]
        out += kids
        todo += kids
    return out


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _kill_and_watch(argv, cwd, sig, ready, timeout=90.0):
    """Start ``fedmarket ARGV`` in ``cwd``, wait until ``ready(descendants)`` holds, send
    ``sig`` to the command only (not its process group), and return the pids that were
    running beneath it and those still alive 20 s later. The command itself must end
    within 30 s."""
    proc = subprocess.Popen([sys.executable, "-m", "sims.cli", *argv], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
                            # SIGINT as a terminal gives it: a shell's background job (nohup,
                            # CI) starts with SIGINT ignored, and Python keeps that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + timeout
        kids = []
        while time.time() < deadline:
            kids = _descendants(proc.pid)
            if ready(kids):
                break
            assert proc.poll() is None, f"the command ended early ({proc.returncode})"
            time.sleep(0.05)
        assert ready(kids), f"the workers never started: {[_cmdline(k) for k in kids]}"
        time.sleep(0.5)  # let the workers reach their tasks
        kids = _descendants(proc.pid)
        proc.send_signal(sig)
        # soon (30 s, room for a loaded 2-core host): not after the queued tasks, which take
        # minutes (Ctrl-C included)
        proc.wait(timeout=30)
        deadline = time.time() + 20
        while time.time() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.1)
        return kids, [k for k in kids if _alive(k)]
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.serial
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT],
                         ids=["kill-9", "sigterm", "sigint"])
def test_prove_jobs_leaves_no_orphans(tmp_path, sig):
    # two spawned row workers, a third for local's rows that mostly wait (contains_rules,
    # proofs.report.WAITING_JOBS), and multiprocessing's resource tracker, each checked by
    # pid; the workers are the command's own children (a rule's forked child, below a
    # worker, shows the worker's command line too)
    def ready(kids):
        cmds = [_cmdline(k) for k in kids]
        workers = [k for k in kids if "spawn_main" in _cmdline(k)
                   and "sims.cli" in _cmdline(_parent(k))]
        return len(workers) >= 3 and any("resource_tracker" in c for c in cmds)

    kids, left = _kill_and_watch(["prove", "--jobs", "2", "--subject", "local",
                                  "--examples", "1000000", "--quiet"], tmp_path, sig, ready)
    assert len(kids) >= 3
    assert not left, f"orphans after {sig.name}: {[_cmdline(k) for k in left]}"


@pytest.mark.serial
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_sweep_pool_dies_with_sigterm_and_sigint(tmp_path, sig):
    (tmp_path / "slow.toml").write_text(SIGNAL_SPEC)
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    kids, left = _kill_and_watch(["sweep", "slow.toml", "--out", "store", "--executor",
                                  "processes", "--workers", "2", "--quiet"], tmp_path, sig,
                                 lambda kids: len(kids) >= 2)
    assert len(kids) >= 2 and not left, f"orphans after {sig.name}"
    store = Store(tmp_path / "store", mode="r")  # what was committed is intact
    store.verify()
    store.close()


@pytest.mark.serial
@pytest.mark.slow  # a fresh interpreter runs the command (about 10-40 s on 2 shared cores)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT],
                         ids=["kill-9", "sigterm", "sigint"])
def test_reproduce_pool_dies_with_its_parent(tmp_path, sig):
    kids, left = _kill_and_watch(["reproduce", "--setting", "digits", "--seeds", "0",
                                  "--out", "rep", "--workers", "2", "--quiet"], tmp_path,
                                 sig, lambda kids: len(kids) >= 2)
    assert len(kids) >= 2 and not left, f"orphaned reproduce workers after {sig.name}"


def test_store_corruption_tampering_and_stale_cells(tmp_path):
    out = tmp_path / "s"
    run_sweep(expand(FAST), out)
    # a finished store is one self-contained file; a report opens it read-only
    before = (out / "store.sqlite").read_bytes()
    store = Store(out, mode="r")
    assert store.verify() == 8
    store.close()
    assert (out / "store.sqlite").read_bytes() == before
    # tampered row: its digest no longer matches -> refused on resume and in reports
    db = sqlite3.connect(out / "store.sqlite")
    key = db.execute("SELECT key FROM cells LIMIT 1").fetchone()[0]
    db.execute("UPDATE cells SET parquet = ? WHERE key = ?", (b"garbage", key))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="checksum"):
        run_sweep(expand(FAST), out)
    with pytest.raises(StoreError, match="checksum"):
        from sims.report import write_report

        write_report(out, tmp_path / "rep")
    assert not (tmp_path / "rep" / "report.md").exists()
    # stale: a cell computed under another config is refused, kept only on request
    out2 = tmp_path / "s2"
    run_sweep(expand(FAST), out2)
    db = sqlite3.connect(out2 / "store.sqlite")
    db.execute("UPDATE cells SET config_hash = 'old' WHERE rowid = 1")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="reuse-stale") as info:
        run_sweep(expand(FAST), out2)
    assert info.value.field == "out"
    stats = run_sweep(expand(FAST), out2, reuse_stale=True)
    assert stats == {**stats, "ran": 0, "skipped": 8, "stale_reused": 1}
    with pytest.raises(MarketInputError, match="not both"):
        run_sweep(expand(FAST), out2, reuse_stale=True, recompute_stale=True)
    stats = run_sweep(expand(FAST), out2, recompute_stale=True)  # the stale cell, again
    assert stats == {**stats, "ran": 1, "skipped": 7, "stale_recomputed": 1}
    assert run_sweep(expand(FAST), out2)["ran"] == 0  # now current: plain resume works
    # garbage over a finished store: refused, not "already done"
    out3 = tmp_path / "s3"
    run_sweep(expand(FAST), out3)
    with open(out3 / "store.sqlite", "r+b") as fh:
        fh.seek(0)
        fh.write(os.urandom(65536))
    with pytest.raises(StoreError, match="intact"):
        run_sweep(expand(FAST), out3)


def test_a_damaged_cell_is_refused_untouched_and_recomputed_on_request(tmp_path, capsys):
    out = tmp_path / "s"
    run_sweep(expand(FAST), out)
    db = sqlite3.connect(out / "store.sqlite")
    key = db.execute("SELECT key FROM cells ORDER BY key LIMIT 1").fetchone()[0]
    good = db.execute("SELECT parquet FROM cells WHERE key = ?", (key,)).fetchone()[0]
    db.execute("UPDATE cells SET parquet = ? WHERE key = ?", (b"garbage", key))
    db.commit()
    db.close()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(StoreError, match="--recompute-damaged"):
        run_sweep(expand(FAST), out)
    _fast_toml(tmp_path)
    assert main(["sweep", "--quiet", "--out", str(out), str(tmp_path / "fast.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 8 cells" in err[0] and "--recompute-damaged" in err[0]
    # refused: not one byte of the folder changed (the SQLite header included)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main(["sweep", "--quiet", "--out", str(out), str(tmp_path / "fast.toml"),
                 "--recompute-damaged"]) == 0
    store = Store(out, mode="r")
    assert store.verify() == 8
    rows = store.db.execute("SELECT parquet FROM cells WHERE key = ?", (key,)).fetchone()[0]
    store.close()
    assert decode_rows(rows).equals(decode_rows(good))  # just that cell, computed again


def _fast_toml(tmp_path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text('seeds = [0, 1]\n[[scenarios]]\nname = "cpl-pricing"\n'
                    'mechanisms = ["bisection", "uniform"]\n'
                    'params = {clients = 6, budget = [5.0, 10.0]}\n')
    return path


FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    limit = int(sys.argv[1])                        # like a full disk, without root
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from sims.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def _full_disk(tmp_path, limit, *argv):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.run([sys.executable, "-c", FULL_DISK, str(limit), *argv], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.serial
@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_a_full_disk_during_a_sweep_is_one_line_and_the_store_resumes(tmp_path):
    spec = textwrap.dedent("""
        seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
        [[scenarios]]
        name = "cpl-pricing"
        mechanisms = ["bisection", "uniform"]
        params = { clients = 20, budget = [5.0, 10.0] }
    """)
    (tmp_path / "fs.toml").write_text(spec)
    r = _full_disk(tmp_path, 200_000, "sweep", "fs.toml", "--out", "s", "--quiet")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "cannot write to" in lines[0] and "rerun to resume" in lines[0]
    store = Store(tmp_path / "s", mode="r")
    kept = store.verify()  # intact: at least the first cell (committed at once), not all
    store.close()
    assert 1 <= kept < 80, kept
    cells = expand(load_toml(tmp_path / "fs.toml"))
    stats = run_sweep(cells, tmp_path / "s")
    assert stats["skipped"] == kept and stats["ran"] == 80 - kept
    store = Store(tmp_path / "s", mode="r")
    assert store.verify() == 80 and store.cells().key.is_unique
    store.close()


@pytest.mark.serial
@pytest.mark.slow  # a fresh interpreter runs the command (about 10-40 s on 2 shared cores)
@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_a_full_disk_during_a_report_is_one_line_and_leaves_no_partial_file(
        tmp_path, finished_store):
    r = _full_disk(tmp_path, 2000, "report", str(finished_store), "--out", "rep",
                   "--verdict-examples", "0")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "cannot write" in lines[0] and "nothing half-written" in lines[0]
    files = list((tmp_path / "rep").iterdir())
    assert all(f.stat().st_size > 0 for f in files), files  # no 0-byte CSV
    assert not [f for f in files if ".tmp" in f.name], files  # no temporary file left
    # the tables there are whole: the same bytes a report without a limit writes
    r = _full_disk(tmp_path, 10**9, "report", str(finished_store), "--out", "full",
                   "--verdict-examples", "0")
    assert r.returncode == 0, r.stderr
    tables = [f for f in files if f.suffix == ".csv"]
    assert tables
    for f in tables:
        assert f.read_bytes() == (tmp_path / "full" / f.name).read_bytes(), f.name


@pytest.mark.parametrize(("argv", "written"), [
    (["cpl", "--clients", "4", "--points", "5", "--out", "o", "--quiet"], "o/prices.png"),
    (["market", "--rounds", "1", "--out", "o", "--quiet"],
     "o/transactions.png"),
], ids=["cpl", "market"])
def test_a_full_disk_while_a_figure_is_written_leaves_no_partial_file(argv, written,
                                                                    tmp_path, monkeypatch,
                                                                    capsys):
    from matplotlib.figure import Figure

    def half_then_full(self, fname, *args, **kwargs):  # a disk that fills mid-write
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half_then_full)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0], err
    assert not (tmp_path / written).exists()  # neither the half file nor its temporary
    assert not [p for p in (tmp_path / "o").iterdir() if p.name.startswith(".")]


def test_reading_a_finished_store_writes_nothing_beside_it(tmp_path):
    # a finished store leaves WAL mode, so a read-only opening (a report) needs no -shm and
    # -wal files; a new sweep into it takes WAL up again
    import hashlib

    out = tmp_path / "s"
    run_sweep(expand(FAST), out)

    def state():
        return sorted(p.name for p in out.iterdir()), hashlib.sha1(
            (out / "store.sqlite").read_bytes()).hexdigest()

    before = state()
    assert before[0] == ["store.lock", "store.sqlite"]
    s = Store(out, mode="r")
    assert len(s.frame()) > 0 and s.verify() == len(expand(FAST))
    s.close()
    assert state() == before
    w = Store(out)
    assert w.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    w.close()


def test_typed_errors_cross_the_process_executor(tmp_path):
    # a cell whose config is refused inside the worker reaches the parent as itself
    from sims.sweep import Cell

    bad = Cell("cpl-pricing", "bisection", (("budget", -1e6), ("clients", 4)), 0)
    with pytest.raises(FedmarketError) as info:
        run_sweep([bad], tmp_path / "p", executor="processes", workers=1)
    assert info.value.field == "budget"


# ---------------------------------------------------------------------------------------
# numerics that used to go silently wrong: now right (or refused above)
# ---------------------------------------------------------------------------------------

def test_extreme_scales_give_the_right_numbers():
    X = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    for s in (1e-300, 1e-160, 1.0, 1e150, 1e300):
        np.testing.assert_allclose(pairwise_distances(X * s, "cosine"),
                                   pairwise_distances(X, "cosine"), rtol=1e-12, atol=1e-15)
    for s in (1e-150, 1e150):  # l2sq scales by s^2 and stays finite while that is finite
        np.testing.assert_allclose(pairwise_distances(X * s), pairwise_distances(X) * s * s,
                                   rtol=1e-12)
    g = game()
    q = cpl.best_response(g, [1e300, 2.0])
    assert np.isfinite(q).all() and q[0] == g.q_max[0]
    g = game(a=[1e308, 1e308])
    assert g.a.tolist() == [0.5, 0.5]  # was silently [0, 0]
    for G in ([0.0, 0.0], [1e-300, 1e-300]):
        eq = cpl.solve(game(G=G))
        assert eq.status == "degenerate" and np.isfinite(eq.prices).all()


def test_pure_buyers_never_sell_in_baseline_ledgers():
    mk = ipfl.Market(N=[100.0, 200.0, 300.0], c=[1.0, INF, 1.0], K=[1e3, 1e3, 1e3])
    u = ipfl.baseline_utilities(mk, np.ones((3, 3)))
    assert np.isfinite(u).all()  # FedAvg-style weights on a c = inf client: no -inf


def test_best_response_to_a_price_near_minus_the_float_range_is_the_floor():
    # Newton's 2 b x overflowed at P = -1e308 and the iterate stayed at its start: q was
    # s = cbrt(v K / 2c) (0.061 here) instead of the tiny root, clipped to q_min
    g = game(v=[1.0, 1.0])
    q = cpl.unconstrained_response(g, [-1e308, -1e99])
    s = np.cbrt(g.v * g.K / (2 * g.c))
    np.testing.assert_allclose(q, s / np.sqrt([1e308, 1e99] / (2 * g.c * s)), rtol=1e-12)
    assert cpl.best_response(g, [-1e308, 1e308]).tolist() == [g.q_min, 1.0]


def test_best_response_at_the_ends_of_the_float_range_warns_nothing():
    # P / (2c) overflowed (c < 1/2) with a RuntimeWarning, though its inf is the right root
    # (q_max after the clip); found by cpl_conforms' best responses at -/+ the largest float
    import warnings

    top = np.finfo(float).max
    g = game(c=[0.1, 0.1], v=[0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpl.best_response(g, [top, top]).tolist() == [1.0, 1.0]
        assert cpl.best_response(g, [-top, -top]).tolist() == [g.q_min, g.q_min]


def test_prices_past_the_float_range_are_infinite_not_nan():
    # lam (N_j / N_i) d_ij past 1.8e308 is an infinite price (nobody buys), with no
    # overflow warning; d = 0 adds nothing even when lam (N_j / N_i) alone overflows
    mk = ipfl.Market(N=[1.0, 10.0], c=[0.1, 0.2], K=[1.0, 1.0], lam=1e308)
    P = mk.prices([[0.0, 1.0], [1.0, 0.0]])
    assert P[0, 1] == INF and P[1, 0] == pytest.approx(1e307)
    assert mk.prices(np.zeros((2, 2)))[0, 1] == 0.2
    out = ipfl.clear(mk, [[0.0, 1.0], [1.0, 0.0]])
    assert not out.adjacency.any() and (out.utilities == 0).all()


def test_iterative_exact_selection_has_no_recursion_limit():
    # one buyer facing 1,499 candidate sellers: the recursive search went one frame deeper
    # per candidate and died with RecursionError; the iterative one proves its optimum
    m = 1500
    rng = np.random.default_rng(1)
    K = np.zeros(m)
    K[0] = 1e4
    mk = ipfl.Market(N=rng.uniform(100, 1000, m), c=rng.uniform(0.001, 0.01, m), K=K,
                     lam=0.0)
    seen = []
    out = ipfl.clear(mk, np.zeros((m, m)), rule="exact",
                     progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 1), (1, 1)]  # progress per buyer searched
    T0 = out.thresholds[0]
    assert ((T0 > 0) & np.isfinite(T0)).sum() > 1000  # deeper than Python's recursion limit
    assert out.exact_methods.get("branch-and-bound") == 1 and out.exact_gap == 0.0
    loc = ipfl.clear(mk, np.zeros((m, m)), rule="local")
    assert ipfl.phi(mk, out.prices, out.adjacency)[0] <= \
        ipfl.phi(mk, loc.prices, loc.adjacency)[0] + 1e-12


# ---------------------------------------------------------------------------------------
# the issue-33 battery: more bad inputs across the public API (clear and clear_batch options,
# what a user rule returns, MarketArrays, posted prices, LIA, the checker's arguments,
# subjects, sweep specs) and the CLI (market/cpl/clear/sweep/prove/design/report/recheck/
# salvage/reproduce/train with NaN/inf, negative sizes, empty arrays, wrong shapes, missing
# and malformed TOML/JSON files). Measured on d406902 (before this battery's fixes), 200
# cases: 11 raw tracebacks (6 of them the time_limit= arguments added with it), 9 silent
# acceptances, 2 unbounded runs (past 15 s: check(max_clients=10**6); train --data-dir for
# a data set that reads no folder, which trained), the rest one clear line; now every case
# is one typed error naming the field (API) or one line with exit status 2 that writes
# nothing (CLI): 0, 0 and 0. The expected field of each case is in BATTERY_FIELDS.
# ---------------------------------------------------------------------------------------

def _mk():
    from mechanisms import ipfl
    return ipfl.Market(N=[100.0, 200.0, 300.0], c=[0.1, 0.2, 0.3], K=[1e3, 1e3, 1e3], lam=0.1)



def _game(**kw):
    from mechanisms import cpl
    base = dict(a=[0.5, 0.5], G=[1.0, 1.0], c=[5.0, 5.0], v=[1.0, 1.0], budget=1.0)
    base.update(kw)
    return cpl.Game(**base)


def _arrays(**kw):
    from mechanisms import ipfl
    base = dict(N=[[100.0, 200.0, 300.0]], c=[[0.1, 0.2, 0.3]], K=[[1e3] * 3], lam=[0.1])
    base.update(kw)
    return ipfl.MarketArrays(**base)


def _check(**kw):
    from proofs import SUBJECTS, check
    from proofs.registry import PROPERTIES
    base = dict(max_examples=5)
    base.update(kw)
    subject = base.pop("subject", SUBJECTS["local"])
    prop = base.pop("prop", PROPERTIES["budget_balance"])
    return check(subject, prop, **base)


def _ipfl():
    from mechanisms import ipfl
    return ipfl


def _cpl():
    from mechanisms import cpl
    return cpl


def _lia():
    from mechanisms import lia
    return lia


BATTERY_API = [
    # ipfl.clear's own arguments
    ("clear-progress-number", lambda: _ipfl().clear(_mk(), D3, rule="exact", progress=5)),
    ("clear-time-limit-negative", lambda: _ipfl().clear(_mk(), D3, time_limit=-1)),
    ("clear-time-limit-nan", lambda: _ipfl().clear(_mk(), D3, time_limit=NAN)),
    ("clear-time-limit-text", lambda: _ipfl().clear(_mk(), D3, time_limit="1")),
    ("clear-node-limit-float", lambda: _ipfl().clear(_mk(), D3, rule="exact",
                                                     exact_node_limit=2.5)),
    ("clear-node-limit-bool", lambda: _ipfl().clear(_mk(), D3, rule="exact",
                                                    exact_node_limit=True)),
    ("clear-D-empty", lambda: _ipfl().clear(_mk(), [])),
    ("clear-D-ragged", lambda: _ipfl().clear(_mk(), [[0, 1, 2], [1, 0], [2, 1, 0]])),
    ("clear-D-none", lambda: _ipfl().clear(_mk(), None)),
    ("clear-thresholds-list", lambda: _ipfl().clear(_mk(), D3, thresholds=["exact"])),
    ("clear-allow-negative-text", lambda: _ipfl().clear(_mk(), D3,
                                                        allow_negative_distances="no")),
    ("clear-D-inf", lambda: _ipfl().clear(_mk(), np.where(np.eye(3) > 0, 0, INF))),
    ("clear-rule-none", lambda: _ipfl().clear(_mk(), D3, rule=None)),
    ("clear-payments-none", lambda: _ipfl().clear(_mk(), D3, payments=None)),
    ("clear-prices-number", lambda: _ipfl().clear(_mk(), D3, prices=3)),
    # a user rule's outputs
    ("clear-rule-returns-none", lambda: _ipfl().clear(_mk(), D3, rule=lambda m, D, T, P: None)),
    ("clear-rule-returns-ragged", lambda: _ipfl().clear(
        _mk(), D3, rule=lambda m, D, T, P: [[0, 1], [0]])),
    ("clear-rule-returns-2", lambda: _ipfl().clear(
        _mk(), D3, rule=lambda m, D, T, P: np.full((3, 3), 2) * (1 - np.eye(3)))),
    ("clear-payments-returns-dict", lambda: _ipfl().clear(
        _mk(), D3, payments=lambda m, A, D: {"a": 1})),
    ("clear-payments-returns-scalar", lambda: _ipfl().clear(
        _mk(), D3, payments=lambda m, A, D: 0.0)),
    ("clear-payments-returns-inf", lambda: _ipfl().clear(
        _mk(), D3, payments=lambda m, A, D: np.full(3, INF))),
    ("clear-prices-returns-neg-inf", lambda: _ipfl().clear(
        _mk(), D3, prices=lambda m, D: np.full((3, 3), -INF))),
    ("clear-prices-returns-1d", lambda: _ipfl().clear(
        _mk(), D3, prices=lambda m, D: np.zeros(3))),
    ("clear-gain-raises", lambda: _ipfl().Market(
        N=[1.0, 2.0], c=[0.0, 0.0], K=[1.0, 1.0], gain=lambda x, K, N: 1 / 0)),
    ("clear-gain-returns-text", lambda: _ipfl().Market(
        N=[1.0, 2.0], c=[0.0, 0.0], K=[1.0, 1.0], gain=lambda x, K, N: "x")),
    ("clear-gain-wrong-shape", lambda: _ipfl().Market(
        N=[1.0, 2.0], c=[0.0, 0.0], K=[1.0, 1.0], gain=lambda x, K, N: np.zeros(3))),
    # clear_batch and MarketArrays
    ("arrays-N-empty-market", lambda: _arrays(N=[[]], c=[[]], K=[[]])),
    ("arrays-N-scalar", lambda: _arrays(N=5.0)),
    ("arrays-lam-nan", lambda: _arrays(lam=[NAN])),
    ("arrays-lam-shape", lambda: _arrays(lam=[0.1, 0.2])),
    ("arrays-c-shape", lambda: _arrays(c=[[0.1, 0.2]])),
    ("arrays-gain-unknown", lambda: _arrays(gain="cubic")),
    ("batch-market-not-arrays", lambda: _ipfl().clear_batch(_mk(), D3[None])),
    ("batch-D-shape", lambda: _ipfl().clear_batch(_arrays(), np.zeros((2, 3, 3)))),
    ("batch-D-nan", lambda: _ipfl().clear_batch(_arrays(), np.full((1, 3, 3), NAN))),
    ("batch-rule-not-over-arrays", lambda: _ipfl().clear_batch(
        _arrays(), D3[None], rule=lambda m, D, T, P: T > 0)),
    ("batch-time-limit-zero", lambda: _ipfl().clear_batch(_arrays(), D3[None], time_limit=0)),
    ("arrays-from-markets-empty", lambda: _ipfl().MarketArrays.from_markets([])),
    ("market-replace-bad", lambda: _mk().replace(N=[1, -2, 3])),
    ("market-replace-unknown", lambda: _mk().replace(colour=1)),
    # CPL
    ("posted-shape-length", lambda: _cpl().posted_pricing(_game(), [1.0])),
    ("posted-shape-nan", lambda: _cpl().posted_pricing(_game(), [NAN, 1.0])),
    ("posted-shape-negative", lambda: _cpl().posted_pricing(_game(), [-1.0, 1.0])),
    ("posted-shape-zero", lambda: _cpl().posted_pricing(_game(), [0.0, 0.0])),
    ("posted-shape-text", lambda: _cpl().posted_pricing(_game(), "flat")),
    ("posted-responses", lambda: _cpl().posted_pricing(_game(), [1.0, 1.0], responses="x")),
    ("apply-pricing-time-limit-zero", lambda: _cpl().apply_pricing(_game(), "uniform",
                                                                   time_limit=0)),
    ("apply-pricing-time-limit-text", lambda: _cpl().apply_pricing(_game(), "uniform",
                                                                   time_limit="1")),
    ("apply-pricing-game-dict", lambda: _cpl().apply_pricing({"a": 1}, "uniform")),
    ("apply-pricing-returns-2d", lambda: _cpl().apply_pricing(_game(),
                                                              lambda g: np.ones((2, 2)))),
    ("apply-pricing-returns-inf", lambda: _cpl().apply_pricing(_game(),
                                                               lambda g: [INF, 1.0])),
    ("game-a-empty", lambda: _game(a=[], G=[], c=[], v=[])),
    ("game-q-max-nan", lambda: _game(q_max=NAN)),
    ("game-q-min-above", lambda: _game(q_min=2.0)),
    ("game-R-text", lambda: _game(R="10")),
    ("solve-game-none", lambda: _cpl().solve(None)),
    ("solve-method-none", lambda: _cpl().solve(_game(), None)),
    ("response-prices-2d", lambda: _cpl().best_response(_game(), [[1.0, 1.0]])),
    ("response-prices-empty", lambda: _cpl().best_response(_game(), [])),
    # LIA
    ("lia-influence-empty", lambda: _lia().influence([], [], [])),
    ("lia-influence-nan", lambda: _lia().influence(np.full(4, NAN), np.ones((2, 4)),
                                                   [0, 0, 1, 1])),
    ("lia-influence-shape", lambda: _lia().influence(np.ones(4), np.ones((2, 3)),
                                                     [0, 0, 1, 1])),
    ("lia-influence-owner-range", lambda: _lia().influence(np.ones(4), np.ones((2, 4)),
                                                           [0, 0, 5, 1])),
    ("lia-influence-owner-float", lambda: _lia().influence(np.ones(4), np.ones((2, 4)),
                                                           [0, 0.5, 1, 1])),
    ("lia-sets-nonsquare", lambda: _lia().beneficial_sets(np.ones((2, 3)))),
    ("lia-sets-nan", lambda: _lia().beneficial_sets(np.full((3, 3), NAN))),
    ("lia-sets-text", lambda: _lia().beneficial_sets([["a"]])),
    ("lia-cluster-empty", lambda: _lia().cluster(np.zeros((0, 0)))),
    ("lia-cluster-1d", lambda: _lia().cluster(np.ones(3))),
    # distances
    ("dist-empty", lambda: __import__("mechanisms.distances", fromlist=["x"])
     .pairwise_distances(np.zeros((0, 3)))),
    ("dist-text-metric-none", lambda: __import__("mechanisms.distances", fromlist=["x"])
     .pairwise_distances(np.ones((2, 2)), None)),
    # the checker
    ("check-max-examples-float", lambda: _check(max_examples=2.5)),
    ("check-seed-negative", lambda: _check(seed=-1)),
    ("check-seed-text", lambda: _check(seed="0")),
    ("check-seed-float", lambda: _check(seed=1.5)),
    ("check-tolerance-text", lambda: _check(tolerance="0")),
    ("check-engine-none", lambda: _check(engine=None)),
    ("check-max-clients-text", lambda: _check(max_clients="5")),
    ("check-max-clients-huge", lambda: _check(max_clients=10**6, engine="batch")),
    ("check-prop-string", lambda: _check(prop="budget_balance")),
    ("check-subject-string", lambda: _check(subject="local")),
    ("check-subject-none", lambda: _check(subject=None)),
    ("check-time-limit-nan", lambda: _check(time_limit=NAN)),
    ("check-type-space-missing", lambda: _check(engine="batch",
                                                type_space="/nonexistent-h33.toml")),
    ("check-type-space-dict-bad", lambda: _check(engine="batch", type_space={"N": "x"})),
    ("check-search-unknown", lambda: _check(engine="batch", search="strongest")),
    ("check-deadline-text", lambda: _check(deadline="x")),
    ("check-scan-hypothesis", lambda: _check(scan=True)),
    ("check-min-discriminating-neg", lambda: _check(min_discriminating=-1)),
    ("subject-bad-rule", lambda: __import__("proofs").IpflMechanism("x", rule="FOO")),
    ("subject-bad-payments", lambda: __import__("proofs").IpflMechanism("x", payments=5)),
    ("cpl-rule-subject-bad", lambda: __import__("proofs").CplPricingRule("x", "cheapest")),
    ("lia-subject-mode", lambda: __import__("proofs").LiaClustering("x", mode="ring")),
    ("lia-subject-rtol", lambda: __import__("proofs").LiaClustering("x", rtol=NAN)),
    ("subject-from-bad", lambda: __import__("proofs.subjects", fromlist=["x"])
     .subject_from("nomodule_h33:x")),
    ("subject-from-nocolon", lambda: __import__("proofs.subjects", fromlist=["x"])
     .subject_from("local")),
    ("type-space-missing", lambda: __import__("proofs.typespace", fromlist=["x"])
     .load_type_space("/nonexistent-h33.toml")),
    # sweeps
    ("run-sweep-cells-not-list", lambda: __import__("sims.sweep", fromlist=["x"])
     .run_sweep("cells", "/nonexistent-h33")),
    ("expand-max-cells-zero", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": "cpl-pricing", "mechanisms": ["uniform"]}]},
        max_cells=0)),
    ("expand-param-nan", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": "cpl-pricing", "mechanisms": ["uniform"],
                                      "params": {"budget": NAN}}]})),
    ("expand-param-inf", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": "inclusive-market", "mechanisms": ["local"],
                                      "params": {"lam": INF}}]})),
    ("expand-param-nested", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": "cpl-pricing", "mechanisms": ["uniform"],
                                      "params": {"budget": [[1.0]]}}]})),
    ("expand-param-table", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": "cpl-pricing", "mechanisms": ["uniform"],
                                      "params": {"budget": {"x": 1}}}]})),
    ("expand-seed-huge", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [2**70], "scenarios": [{"name": "cpl-pricing", "mechanisms": ["uniform"]}]})),
    ("expand-mechanism-number", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": "cpl-pricing", "mechanisms": [5]}]})),
    ("expand-name-number", lambda: __import__("sims.sweep", fromlist=["x"]).expand(
        {"seeds": [0], "scenarios": [{"name": 5, "mechanisms": ["uniform"]}]})),
    ("load-toml-missing", lambda: __import__("sims.sweep", fromlist=["x"])
     .load_toml("/nonexistent-h33.toml")),
]

BATTERY_GOOD = {"N": [100, 200], "c": [0.1, 0.2], "K": [1000, 1000], "D": [[0, 1], [1, 0]]}


def _battery_files(inp: Path) -> None:
    """The input files the battery's CLI cases read."""
    inp.mkdir(parents=True, exist_ok=True)

    def w(name, obj):
        (inp / name).write_text(obj if isinstance(obj, str) else json.dumps(obj))

    w("good.json", BATTERY_GOOD)
    w("nan.json", '{"N": [100, 200], "c": [0.1, 0.2], "K": [1000, 1000], '
                  '"D": [[0, NaN], [NaN, 0]]}')
    w("inf.json", '{"N": [100, Infinity], "c": [0.1, 0.2], "K": [1000, 1000], '
                  '"D": [[0, 1], [1, 0]]}')
    w("empty-N.json", {**BATTERY_GOOD, "N": [], "c": [], "K": [], "D": []})
    w("D-shape.json", {**BATTERY_GOOD, "D": [[0, 1, 2], [1, 0, 1], [2, 1, 0]]})
    w("D-ragged.json", {**BATTERY_GOOD, "D": [[0, 1], [1]]})
    w("D-null.json", {**BATTERY_GOOD, "D": None})
    w("lam-text.json", {**BATTERY_GOOD, "lam": "big"})
    w("lam-list.json", {**BATTERY_GOOD, "lam": [1, 2]})
    w("gain-number.json", {**BATTERY_GOOD, "gain": 5})
    w("gain-unknown.json", {**BATTERY_GOOD, "gain": "cubic"})
    w("N-bool.json", {**BATTERY_GOOD, "N": [True, 2]})
    w("N-dict.json", {**BATTERY_GOOD, "N": {"a": 1}})
    w("true-N-short.json", {**BATTERY_GOOD, "true_N": [1]})
    w("empty.json", "")
    w("null.json", "null")
    w("asym.json", {**BATTERY_GOOD, "D": [[0, 1], [2, 0]]})
    w("bad.toml", "[[scenarios]\n")
    w("nan.toml", '[[scenarios]]\nname = "cpl-pricing"\nmechanisms = ["uniform"]\n'
                  'params = {budget = nan}\n')
    w("inf.toml", '[[scenarios]]\nname = "inclusive-market"\nmechanisms = ["local"]\n'
                  'params = {lam = inf}\n')
    w("neg-rounds.toml", '[[scenarios]]\nname = "inclusive-market"\nmechanisms = ["local"]\n'
                         'params = {rounds = -3}\n')
    w("table-mech.toml", '[[scenarios]]\nname = "inclusive-market"\n'
                         'mechanisms = [{selection = 5}]\n')
    w("ts-bad.toml", "[N\n")
    w("ts-unknown.toml", 'colour = "red"\n')
    w("ts-nan.toml", "[N]\nlow = nan\nhigh = 10\n")
    w("ts.json", "{not json")
    w("rule-bad.json", "{not json")
    w("rule-empty.json", "{}")
    w("state.json", "{not json")
    (inp / "notastore").mkdir(exist_ok=True)
    (inp / "notastore" / "store.sqlite").write_bytes(os.urandom(4096))


BATTERY_CLI = [
    # clear
    ("clear-D-nan", ["clear", "{inp}/nan.json"]),
    ("clear-N-inf", ["clear", "{inp}/inf.json"]),
    ("clear-empty-market", ["clear", "{inp}/empty-N.json"]),
    ("clear-D-shape", ["clear", "{inp}/D-shape.json"]),
    ("clear-D-ragged", ["clear", "{inp}/D-ragged.json"]),
    ("clear-D-null", ["clear", "{inp}/D-null.json"]),
    ("clear-lam-text", ["clear", "{inp}/lam-text.json"]),
    ("clear-lam-list", ["clear", "{inp}/lam-list.json"]),
    ("clear-gain-number", ["clear", "{inp}/gain-number.json"]),
    ("clear-gain-unknown", ["clear", "{inp}/gain-unknown.json"]),
    ("clear-N-bool", ["clear", "{inp}/N-bool.json"]),
    ("clear-N-dict", ["clear", "{inp}/N-dict.json"]),
    ("clear-true-N-short", ["clear", "{inp}/true-N-short.json"]),
    ("clear-empty-file", ["clear", "{inp}/empty.json"]),
    ("clear-null", ["clear", "{inp}/null.json"]),
    ("clear-time-limit-neg", ["clear", "{inp}/good.json", "--time-limit", "-1"]),
    ("clear-time-limit-nan", ["clear", "{inp}/good.json", "--time-limit", "nan"]),
    ("clear-node-limit-neg", ["clear", "{inp}/good.json", "--rule", "exact",
                              "--exact-node-limit", "-5"]),
    ("clear-exact-time-inf", ["clear", "{inp}/good.json", "--rule", "exact",
                              "--exact-time-limit", "inf"]),
    ("clear-payments-unknown", ["clear", "{inp}/good.json", "--payments", "FOO"]),
    ("clear-prices-missing-module", ["clear", "{inp}/good.json", "--prices", "nomod_h33:f"]),
    # market / cpl
    ("market-lam-inf", ["market", "--lam", "inf"]),
    ("market-lam-neg", ["market", "--lam", "-1"]),
    ("market-rounds-neg", ["market", "--rounds", "-5"]),
    ("cpl-c-neg", ["cpl", "--c", "-1"]),
    ("cpl-c-nan", ["cpl", "--c", "nan"]),
    ("cpl-G-neg", ["cpl", "--G", "-1"]),
    ("cpl-v-mean-nan", ["cpl", "--v-mean", "nan"]),
    ("cpl-alpha-zero", ["cpl", "--alpha", "0"]),
    ("cpl-R-zero", ["cpl", "--R", "0"]),
    ("cpl-q-min-zero", ["cpl", "--q-min", "0"]),
    ("cpl-q-max-2", ["cpl", "--q-max", "2"]),
    ("cpl-q-max-nan", ["cpl", "--q-max", "nan"]),
    ("cpl-points-neg", ["cpl", "--points", "-3"]),
    ("cpl-sweep-nan", ["cpl", "--sweep", "nan", "5", "3"]),
    ("cpl-sweep-inf", ["cpl", "--sweep", "1", "inf", "3"]),
    # sweep
    ("sweep-broken", ["sweep", "{inp}/bad.toml", "--out", "{tmp}/s1"]),
    ("sweep-param-nan", ["sweep", "{inp}/nan.toml", "--out", "{tmp}/s2"]),
    ("sweep-param-inf", ["sweep", "{inp}/inf.toml", "--out", "{tmp}/s3"]),
    ("sweep-rounds-neg", ["sweep", "{inp}/neg-rounds.toml", "--out", "{tmp}/s4"]),
    ("sweep-table-mechanism", ["sweep", "{inp}/table-mech.toml", "--out", "{tmp}/s5"]),
    ("sweep-threads-0", ["sweep", "--preset", "demo", "--threads", "0", "--out", "{tmp}/s6"]),
    ("sweep-max-cells-neg", ["sweep", "--preset", "demo", "--max-cells", "-1",
                             "--out", "{tmp}/s7"]),
    ("sweep-checkpoints-under-file", ["sweep", "{inp}/nan.toml", "--out", "{tmp}/s8",
                                      "--checkpoints", "{inp}/good.json/x"]),
    # prove
    ("prove-type-space-missing", ["prove", "--engine", "batch", "--type-space",
                                  "{inp}/nope.toml"]),
    ("prove-type-space-broken", ["prove", "--engine", "batch", "--type-space",
                                 "{inp}/ts-bad.toml"]),
    ("prove-type-space-unknown-key", ["prove", "--engine", "batch", "--type-space",
                                      "{inp}/ts-unknown.toml"]),
    ("prove-type-space-nan", ["prove", "--engine", "batch", "--type-space",
                              "{inp}/ts-nan.toml"]),
    ("prove-type-space-json", ["prove", "--engine", "batch", "--type-space", "{inp}/ts.json"]),
    ("prove-subject-missing-module", ["prove", "--subject", "nomod_h33:rule"]),
    ("prove-subject-not-rule", ["prove", "--subject", "os:sep"]),
    ("prove-subject-wrong-arity", ["prove", "--subject", "os:getcwd"]),
    ("prove-examples-neg", ["prove", "--examples", "-5"]),
    ("prove-max-clients-neg", ["prove", "--max-clients", "-3"]),
    ("prove-time-limit-neg", ["prove", "--time-limit", "-1"]),
    ("prove-seed-text", ["prove", "--seed", "x"]),
    # design
    ("design-markets-0", ["design", "--markets", "0", "--out", "{tmp}/d1"]),
    ("design-markets-neg", ["design", "--markets", "-5", "--out", "{tmp}/d2"]),
    ("design-seed-neg", ["design", "--seed", "-1", "--out", "{tmp}/d3"]),
    ("design-generations-0", ["design", "--generations", "0", "--out", "{tmp}/d4"]),
    ("design-popsize-0", ["design", "--popsize", "0", "--out", "{tmp}/d5"]),
    ("design-stages-0", ["design", "--stages", "0", "--out", "{tmp}/d6"]),
    ("design-heldout-markets-0", ["design", "--heldout-markets", "0", "--out", "{tmp}/d7"]),
    ("design-frontier-size-0", ["design", "--frontier-size", "0", "--out", "{tmp}/d8"]),
    ("design-certify-examples-neg", ["design", "--certify-examples", "-1", "--out",
                                     "{tmp}/d9"]),
    ("design-goal-bad", ["design", "--goal", "maximise happiness", "--out", "{tmp}/d10"]),
    ("design-space-unknown", ["design", "--space", "round", "--out", "{tmp}/d11"]),
    ("design-space-missing-module", ["design", "--space", "nomod_h33:f", "--out",
                                     "{tmp}/d12"]),
    ("design-bounds-bad", ["design", "--bounds", "x", "--out", "{tmp}/d13"]),
    ("design-bounds-nan", ["design", "--bounds", "marginal=nan:1", "--out", "{tmp}/d14"]),
    ("design-features-unknown", ["design", "--features", "colour", "--out", "{tmp}/d15"]),
    ("design-type-space-missing", ["design", "--type-space", "{inp}/nope.toml", "--out",
                                   "{tmp}/d16"]),
    ("design-market-file-broken", ["design", "--market-file", "{inp}/empty.json", "--out",
                                   "{tmp}/d17"]),
    ("design-state-broken", ["design", "--state", "{inp}/state.json", "--out", "{tmp}/d18"]),
    ("design-markets-text", ["design", "--markets", "many", "--out", "{tmp}/d19"]),
    ("design-out-under-file", ["design", "--out", "{inp}/good.json/x"]),
    # report / recheck / salvage / reproduce / train
    ("report-not-a-store", ["report", "{inp}/notastore"]),
    ("report-rank-by-bad", ["report", "{inp}/notastore", "--rank-by", "colour"]),
    ("report-regret-markets-0", ["report", "{inp}/notastore", "--regret-markets", "0"]),
    ("recheck-missing", ["recheck", "{inp}/nowhere"]),
    ("recheck-not-a-folder", ["recheck", "{inp}/good.json"]),
    ("recheck-round-neg", ["recheck", "{inp}/notastore", "--round", "-1"]),
    ("salvage-missing", ["salvage", "{inp}/nowhere", "--out", "{tmp}/sv1"]),
    ("salvage-garbage", ["salvage", "{inp}/notastore", "--out", "{tmp}/sv2"]),
    ("salvage-out-under-file", ["salvage", "{inp}/notastore", "--out", "{inp}/good.json/x"]),
    ("reproduce-threads-0", ["reproduce", "--threads", "0", "--out", "{tmp}/r1"]),
    ("reproduce-seeds-neg", ["reproduce", "--seeds", "-1", "--out", "{tmp}/r2"]),
    ("reproduce-scenarios-unknown", ["reproduce", "--scenarios", "nope", "--out", "{tmp}/r3"]),
    ("train-rounds-0", ["train", "--rounds", "0"]),
    ("train-clients-0", ["train", "--clients", "0"]),
    ("train-lr-nan", ["train", "--lr", "nan"]),
    ("train-batch-neg", ["train", "--batch", "-1"]),
    ("train-data-dir-missing", ["train", "--data-dir", "{inp}/nowhere", "--rounds", "1",
                                "--out", "{tmp}/t1"]),
]


BATTERY_FIELDS = {
    'clear-progress-number': 'progress',
    'clear-time-limit-negative': 'time_limit',
    'clear-time-limit-nan': 'time_limit',
    'clear-time-limit-text': 'time_limit',
    'clear-node-limit-float': 'exact_node_limit',
    'clear-node-limit-bool': 'exact_node_limit',
    'clear-D-empty': 'D',
    'clear-D-ragged': 'D',
    'clear-D-none': 'D',
    'clear-thresholds-list': 'thresholds',
    'clear-allow-negative-text': 'allow_negative_distances',
    'clear-D-inf': 'D',
    'clear-rule-none': 'rule',
    'clear-payments-none': 'payments',
    'clear-prices-number': 'prices',
    'clear-rule-returns-none': 'rule',
    'clear-rule-returns-ragged': 'rule',
    'clear-rule-returns-2': 'rule',
    'clear-payments-returns-dict': 'payments',
    'clear-payments-returns-scalar': 'payments',
    'clear-payments-returns-inf': 'payments',
    'clear-prices-returns-neg-inf': 'prices',
    'clear-prices-returns-1d': 'prices',
    'clear-gain-raises': 'gain',
    'clear-gain-returns-text': 'gain',
    'clear-gain-wrong-shape': 'gain',
    'arrays-N-empty-market': 'N',
    'arrays-N-scalar': 'N',
    'arrays-lam-nan': 'lam',
    'arrays-lam-shape': 'lam',
    'arrays-c-shape': 'c',
    'arrays-gain-unknown': 'gain',
    'batch-market-not-arrays': 'market',
    'batch-D-shape': 'D',
    'batch-D-nan': 'D',
    'batch-rule-not-over-arrays': 'rule',
    'batch-time-limit-zero': 'time_limit',
    'arrays-from-markets-empty': 'markets',
    'market-replace-bad': 'N',
    'market-replace-unknown': 'colour',
    'posted-shape-length': 'shape',
    'posted-shape-nan': 'shape',
    'posted-shape-negative': 'shape',
    'posted-shape-zero': 'shape',
    'posted-shape-text': 'shape',
    'posted-responses': 'responses',
    'apply-pricing-time-limit-zero': 'time_limit',
    'apply-pricing-time-limit-text': 'time_limit',
    'apply-pricing-game-dict': 'game',
    'apply-pricing-returns-2d': 'pricing',
    'apply-pricing-returns-inf': 'pricing',
    'game-a-empty': 'a',
    'game-q-max-nan': 'q_max',
    'game-q-min-above': 'q_min',
    'game-R-text': 'R',
    'solve-game-none': 'game',
    'solve-method-none': 'method',
    'response-prices-2d': 'prices',
    'response-prices-empty': 'prices',
    'lia-influence-empty': 'model_losses',
    'lia-influence-nan': 'base_losses',
    'lia-influence-shape': 'base_losses',
    'lia-influence-owner-range': 'owner',
    'lia-influence-owner-float': 'owner',
    'lia-sets-nonsquare': 'I',
    'lia-sets-nan': 'I',
    'lia-sets-text': 'I',
    'lia-cluster-empty': 'I',
    'lia-cluster-1d': 'I',
    'dist-empty': 'theta',
    'dist-text-metric-none': 'metric',
    'check-max-examples-float': 'max_examples',
    'check-seed-negative': 'seed',
    'check-seed-text': 'seed',
    'check-seed-float': 'seed',
    'check-tolerance-text': 'tolerance',
    'check-engine-none': 'engine',
    'check-max-clients-text': 'max_clients',
    'check-max-clients-huge': 'max_clients',
    'check-prop-string': 'prop',
    'check-subject-string': 'subject',
    'check-subject-none': 'subject',
    'check-time-limit-nan': 'time_limit',
    'check-type-space-missing': 'type_space',
    'check-type-space-dict-bad': 'type_space.N',
    'check-search-unknown': 'search',
    'check-deadline-text': 'deadline',
    'check-scan-hypothesis': 'scan',
    'check-min-discriminating-neg': 'min_discriminating',
    'subject-bad-rule': 'rule',
    'subject-bad-payments': 'payments',
    'cpl-rule-subject-bad': 'pricing',
    'lia-subject-mode': 'mode',
    'lia-subject-rtol': 'rtol',
    'subject-from-bad': 'subject',
    'subject-from-nocolon': 'subject',
    'type-space-missing': 'type_space',
    'run-sweep-cells-not-list': 'cells',
    'expand-max-cells-zero': 'max_cells',
    'expand-param-nan': 'scenarios[0].params.budget',
    'expand-param-inf': 'scenarios[0].params.lam',
    'expand-param-nested': 'scenarios[0].params.budget',
    'expand-param-table': 'scenarios[0].params.budget',
    'expand-seed-huge': 'seeds[0]',
    'expand-mechanism-number': 'scenarios[0].mechanisms[0]',
    'expand-name-number': 'scenarios[0].name',
    'load-toml-missing': 'spec',
}

BATTERY_CLI_FIELDS = {
    'clear-D-nan': 'D',
    'clear-N-inf': 'N',
    'clear-empty-market': 'N',
    'clear-D-shape': 'D',
    'clear-D-ragged': 'D',
    'clear-D-null': 'D',
    'clear-lam-text': 'lam',
    'clear-lam-list': 'lam',
    'clear-gain-number': 'gain',
    'clear-gain-unknown': 'gain',
    'clear-N-bool': 'N',
    'clear-N-dict': 'N',
    'clear-true-N-short': 'true_N',
    'clear-empty-file': 'market_file',
    'clear-null': 'market_file',
    'clear-time-limit-neg': 'time_limit',
    'clear-time-limit-nan': 'time_limit',
    'clear-node-limit-neg': 'exact_node_limit',
    'clear-exact-time-inf': 'exact_time_limit',
    'clear-payments-unknown': 'payments',
    'clear-prices-missing-module': 'prices',
    'market-lam-inf': 'lam',
    'market-lam-neg': 'lam',
    'market-rounds-neg': 'rounds',
    'cpl-c-neg': 'c',
    'cpl-c-nan': 'c',
    'cpl-G-neg': 'G',
    'cpl-v-mean-nan': 'v_mean',
    'cpl-alpha-zero': 'alpha',
    'cpl-R-zero': 'R',
    'cpl-q-min-zero': 'q_min',
    'cpl-q-max-2': 'q_max',
    'cpl-q-max-nan': 'q_max',
    'cpl-points-neg': '--points',
    'cpl-sweep-nan': '--sweep',
    'cpl-sweep-inf': '--sweep',
    'sweep-broken': 'spec',
    'sweep-param-nan': 'scenarios[0].params.budget',
    'sweep-param-inf': 'scenarios[0].params.lam',
    'sweep-rounds-neg': 'scenarios[0].params.rounds',
    'sweep-table-mechanism': 'scenarios[0].mechanisms[0].selection',
    'sweep-threads-0': 'unrecognized arguments',
    'sweep-max-cells-neg': '--max-cells',
    'sweep-checkpoints-under-file': 'unrecognized arguments',
    'prove-type-space-missing': 'type_space',
    'prove-type-space-broken': 'type_space',
    'prove-type-space-unknown-key': 'type_space',
    'prove-type-space-nan': 'type_space.N.low',
    'prove-type-space-json': 'type_space',
    'prove-subject-missing-module': 'subject',
    'prove-subject-not-rule': 'subject',
    'prove-subject-wrong-arity': 'subject',
    'prove-examples-neg': 'examples',
    'prove-max-clients-neg': 'max-clients',
    'prove-time-limit-neg': 'time-limit',
    'prove-seed-text': 'argument --seed',
    'design-markets-0': 'markets',
    'design-markets-neg': 'markets',
    'design-seed-neg': 'seed',
    'design-generations-0': 'generations',
    'design-popsize-0': 'popsize',
    'design-stages-0': 'stages',
    'design-heldout-markets-0': '--heldout-markets',
    'design-frontier-size-0': '--frontier-size',
    'design-certify-examples-neg': '--certify-examples',
    'design-goal-bad': 'goal',
    'design-space-unknown': '--space',
    'design-space-missing-module': 'space',
    'design-bounds-bad': '--bounds',
    'design-bounds-nan': 'bounds.marginal',
    'design-features-unknown': 'features',
    'design-type-space-missing': '--type-space type_space',
    'design-market-file-broken': 'market_file',
    'design-state-broken': 'state',
    'design-markets-text': 'argument --markets',
    'design-out-under-file': '--out',
    'report-not-a-store': 'store',
    'report-rank-by-bad': 'rank-by',
    'report-regret-markets-0': 'rank-by',
    'recheck-missing': 'run_dir',
    'recheck-not-a-folder': 'run_dir',
    'recheck-round-neg': 'run_dir',
    'salvage-missing': 'broken',
    'salvage-garbage': 'broken',
    'salvage-out-under-file': '--out',
    'reproduce-threads-0': '--threads',
    'reproduce-seeds-neg': 'seeds[0]',
    'reproduce-scenarios-unknown': '--scenarios',
    'train-rounds-0': 'rounds',
    'train-clients-0': 'clients',
    'train-lr-nan': 'lr',
    'train-batch-neg': 'batch',
    'train-data-dir-missing': '--data-dir',
}


@pytest.mark.parametrize(("name", "call"), BATTERY_API, ids=[n for n, _ in BATTERY_API])
def test_battery_api(name, call):
    field = BATTERY_FIELDS[name]
    with pytest.raises((FedmarketError, CheckerInputError)) as info:
        call()
    text = str(info.value)
    assert info.value.field == field and text.startswith(f"{field}: ") and "\n" not in text
    clone = pickle.loads(pickle.dumps(info.value))  # crosses process and ray boundaries
    assert type(clone) is type(info.value) and str(clone) == text


@pytest.fixture
def battery_sandbox(tmp_path, monkeypatch):
    inp = tmp_path / "inputs"
    _battery_files(inp)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    return tmp_path, inp


@pytest.mark.parametrize(("name", "argv"), BATTERY_CLI, ids=[n for n, _ in BATTERY_CLI])
def test_battery_cli(name, argv, battery_sandbox, capsys):
    tmp, inp = battery_sandbox
    before = _snapshot(tmp)
    code = main([a.format(inp=inp, tmp=tmp) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("fedmarket") and "Traceback" not in err
    assert f"error: {BATTERY_CLI_FIELDS[name]}: " in lines[0], lines[0]
    assert _snapshot(tmp) == before  # nothing written, created or changed


def test_battery_lists_agree():
    assert {n for n, _ in BATTERY_API} == set(BATTERY_FIELDS)
    assert {n for n, _ in BATTERY_CLI} == set(BATTERY_CLI_FIELDS)


def test_markets_near_the_float64_edge_clear_to_finite_money_or_are_refused():
    """The scale check lets through every market whose gain at the most data a buyer can buy
    is finite, and what it lets through clears to finite utilities and payments under every
    built-in rule (a pure seller with a subnormal N included)."""
    mk = market(N=[1e-310, 200, 3], K=[0.0, 1e3, 1e3])  # K = 0: no gain to overflow
    near = market(N=[1e-300, 200, 3], K=[1e4, 1e3, 1e3])  # K/N = 1e304: finite
    for m in (mk, near):
        for rule, pay in (("local", "paper"), ("exact", "vcg"), ("exact", "shapley"),
                          ("box2", "paper")):
            out = ipfl.clear(m, D3, rule=rule, payments=pay)
            assert np.isfinite(out.utilities).all() and np.isfinite(out.payments).all()
