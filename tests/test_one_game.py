"""One game (one market) is the batch of one (issue 34, part 1): the checker's ``cpl_one_game``
(and ``one_market``) call every one-game entry point of mechanisms/ on every drawn game and
hold it to the bulk code bit for bit. Each check is shown to fail on a planted fault that
changes the one-game path only (the bulk code untouched)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from mechanisms import cpl, gains, ipfl
from mechanisms.cpl import equilibrium, response
from mechanisms.ipfl import selection
from proofs import PROPERTIES, SUBJECTS, check
from proofs.batch import cpl_sampler, ipfl_sampler
from proofs.standard import STANDARD

CPL_SUBJECTS = [s for s, subj in SUBJECTS.items() if subj.family == "cpl"]


def _cpl(subject, n=30):
    return check(SUBJECTS[subject], PROPERTIES["cpl_one_game"], max_examples=n, seed=0,
                 engine="batch")


def _games(k=3):
    smp = cpl_sampler("cpl_one_game")
    return [c for d in smp.draw(np.random.default_rng(1), k) for c in smp.cases(d)]


@pytest.mark.parametrize("subject", ["cpl-bisection", "cpl-gradient"])
def test_the_one_game_paths_equal_the_bulk_code(subject):
    r = _cpl(subject)
    assert r.verdict == "holds" and r.discriminating >= 30
    assert r.extra["mode"] == "batch (vectorised)"
    for case in _games():  # the one-instance check (Hypothesis engine, rerun()): the same
        amount, _, discriminating = PROPERTIES["cpl_one_game"].violation(SUBJECTS[subject],
                                                                         case)
        assert amount == 0.0 and discriminating


def test_a_subject_without_bulk_code_is_not_checked():
    own = SUBJECTS["cpl-bisection"].__class__("cvxpy", method="cvxpy")
    assert PROPERTIES["cpl_one_game"].batch(own) is None
    assert PROPERTIES["cpl_one_game"].violation(own, _games(1)[0]) is None


# ---------------------------------------------------------------- known-bad one-game paths


def test_a_one_game_solver_that_stops_early_is_caught(monkeypatch):
    """cpl.solve's batch of one solved to a looser tolerance than solve_batch's: the
    one-game equilibrium is off by a few ulps to 1e-6, within every tolerance the other
    properties allow."""
    real = equilibrium.solve_games
    monkeypatch.setattr(equilibrium, "solve_games",
                        lambda games, xtol=0.0, name_games=True: real(games, xtol=1e-9,
                                                                      name_games=name_games))
    assert _cpl("cpl-bisection").verdict == "counterexample"


def _spend_missing_a_client(monkeypatch):
    """The one-game Equilibrium (_equilibrium) read with its last client's spend missing."""
    real = equilibrium._equilibrium

    def wrong(game, method, status, out, t0, solver=None, info=None):
        eq = real(game, method, status, out, t0, solver, info)
        object.__setattr__(eq, "spent", float(np.sum(eq.payments[:-1])))
        return eq

    monkeypatch.setattr(equilibrium, "_equilibrium", wrong)


def test_a_one_game_outcome_reported_wrong_is_caught(monkeypatch):
    """The batch-of-one outcome read into an Equilibrium with the spend of its last
    client's price missing (_equilibrium: what solve, posted_pricing and apply_pricing
    return for one game)."""
    _spend_missing_a_client(monkeypatch)
    for subject in ("cpl-bisection", "cpl-uniform"):
        assert _cpl(subject).verdict == "counterexample", subject


def test_one_game_baselines_with_the_authors_responses_are_caught(monkeypatch):
    """The named baselines and the built-in rule on a Game calibrated with the v0
    responses (q = P/2c, as if v = 0) where the bulk code uses the exact ones."""
    real = equilibrium._posted
    monkeypatch.setattr(equilibrium, "_posted",
                        lambda name, game, responses: real(name, game, "v0"))
    assert _cpl("cpl-weighted").verdict == "counterexample"


def test_a_game_s_prices_read_wrong_by_the_best_response_are_caught(monkeypatch):
    """best_response on one Game with its prices rounded to float32 (the batch path
    untouched)."""
    real = response._prices

    def rounded(game, prices):
        P = real(game, prices)
        return P if isinstance(game, cpl.GameBatch) else P.astype(np.float32).astype(float)

    monkeypatch.setattr(response, "_prices", rounded)
    assert _cpl("cpl-bisection").verdict == "counterexample"


def test_a_nan_is_a_failure(monkeypatch):
    """A one-game answer with a NaN utility fails, even where the bulk code has none."""
    real = equilibrium._equilibrium

    def nan(game, method, status, out, t0, solver=None, info=None):
        eq = real(game, method, status, out, t0, solver, info)
        u = np.array(eq.utilities)
        u[0] = np.nan
        object.__setattr__(eq, "utilities", u)
        return eq

    monkeypatch.setattr(equilibrium, "_equilibrium", nan)
    case = _games(1)[0]
    amount, _, _ = PROPERTIES["cpl_one_game"].violation(SUBJECTS["cpl-bisection"], case)
    assert amount >= 1


def test_a_one_game_path_refusing_a_game_fails_by_inf(monkeypatch):
    def refuses(game, *a, **kw):
        raise cpl.BudgetInfeasible("budget", "refused")

    monkeypatch.setattr(equilibrium, "_bisection", refuses)
    amount, _, _ = PROPERTIES["cpl_one_game"].violation(SUBJECTS["cpl-bisection"],
                                                        _games(1)[0])
    assert amount == np.inf


# ------------------------------------------------------------------------------------ iPFL

IPFL_SUBJECTS = [s for s, subj in SUBJECTS.items() if subj.family == "ipfl"]
ipfl_clear = importlib.import_module("mechanisms.ipfl.clear")  # the module (ipfl.clear: a function)


def _ipfl(subject, n=40):
    return check(SUBJECTS[subject], PROPERTIES["one_market"], max_examples=n, seed=0,
                 engine="batch")


def _markets(k=3, mode=None):
    smp = ipfl_sampler("one_market")
    out = [c for d in smp.draw(np.random.default_rng(2), 4 * k) for c in smp.cases(d)]
    return [c for c in out if mode is None or c.thresholds == mode][:k]


@pytest.mark.parametrize("subject", ["local", "vcg"])
def test_one_market_equals_the_bulk_clearing(subject):
    r = _ipfl(subject)
    assert r.verdict == "holds" and r.discriminating >= 40 and r.largest_violation == 0.0
    for case in _markets():
        amount, _, _ = PROPERTIES["one_market"].violation(SUBJECTS[subject], case)
        assert amount == 0.0


def _halve_until_all_narrow(self, price, Nj, K, N):
    """The generic gains' threshold roots as they were before this check: every root of a
    batch halved until ALL brackets were narrow, so a market's thresholds depended on the
    other markets cleared beside it (what one_market found: 2 of 17 two-client log-gain
    markets of seed 0's first draw off by 1.5e-8 in thresholds of 1e8)."""
    def marginal(T, nj, k, n):
        return self.value(T, k, n) - self.value(T - nj, k, n)

    lo, hi = Nj.copy(), 2.0 * Nj
    grow = marginal(hi, Nj, K, N) > price
    while grow.any():
        lo[grow] = hi[grow]
        hi[grow] *= 2.0
        grow = grow & (marginal(hi, Nj, K, N) > price)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        above = marginal(mid, Nj, K, N) > price
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        if np.all(hi - lo <= 4e-16 * hi):
            break
    return 0.5 * (lo + hi)


def test_thresholds_that_depend_on_the_batch_are_caught(monkeypatch):
    monkeypatch.setattr(gains.Gain, "_roots", _halve_until_all_narrow)
    assert _ipfl("local", 300).verdict == "counterexample"


def test_a_generic_gain_s_thresholds_do_not_depend_on_the_batch():
    """The fix (mechanisms/gains.py): each root is halved until its own bracket is narrow.
    Every batch of seed 0's first 200 draws (the first holds the 17 two-client log-gain
    markets where one_market found it): each market's thresholds alone equal its row of
    the batch, bit for bit."""
    smp = ipfl_sampler("one_market")
    for d in smp.draw(np.random.default_rng(0), 200):
        a = smp.bulk_input(d)
        if isinstance(ipfl.Market(N=[1.0], c=[0.0], K=[0.0], gain=a["gain"]).gain,
                      ipfl.SqrtGain):
            continue  # closed-form roots
        markets = ipfl.MarketArrays(a["N"], a["c"], a["K"], a["lam"], gain=a["gain"])
        both = ipfl.thresholds(markets, a["D"])
        for k in range(d.size):
            alone = ipfl.thresholds(markets.market(k), a["D"][k])
            assert np.array_equal(alone, both[k]), (d.m, k)


def test_a_one_market_clearing_that_drops_the_threshold_mode_is_caught(monkeypatch):
    """ipfl.clear (one market) clearing with the exact roots whatever mode it is given;
    clear_batch untouched."""
    real = ipfl_clear._clear

    def exact_only(market, D, rule, pay, price, thresholds, exact, one=None):
        return real(market, D, rule, pay, price, "exact" if one is not None else thresholds,
                    exact, one)

    monkeypatch.setattr(ipfl_clear, "_clear", exact_only)
    assert _ipfl("local", 200).verdict == "counterexample"


def test_a_one_market_exact_search_that_stops_early_is_caught(monkeypatch):
    """ipfl.exact on one Market stopping branch-and-bound at its first node (a batch of
    markets untouched)."""
    real = ipfl.exact

    def early(market, P, T, method="auto", **kw):
        if isinstance(market, ipfl.Market):
            return real(market, P, T, "branch-and-bound", node_limit=1)
        return real(market, P, T, method, **kw)

    monkeypatch.setattr(ipfl, "exact", early)
    assert _ipfl("exact", 300).verdict == "counterexample"


def _nan_utilities(monkeypatch):
    """ipfl.utilities with client 0's utility NaN."""
    real = ipfl.utilities

    def nan(market, A, p, **kw):
        U = np.array(real(market, A, p, **kw), dtype=float)
        U[..., 0] = np.nan
        return U

    monkeypatch.setattr(ipfl, "utilities", nan)


def test_a_nan_in_one_market_s_outcome_is_a_failure(monkeypatch):
    _nan_utilities(monkeypatch)
    amount, _, _ = PROPERTIES["one_market"].violation(SUBJECTS["local"], _markets(1)[0])
    assert amount >= 1


# ------------------------------------------------- one_path: the exact selection's options


def test_a_stopped_search_whose_gap_is_no_bound_is_caught(monkeypatch):
    """The gap a buyer keeps when the time limit leaves it the local rule's choice claimed
    to be 0 (an 'optimal' answer that is not): one_path's stopped searches catch it."""
    monkeypatch.setattr(selection, "_root_gap", lambda *a, **kw: 0.0)
    r = check(SUBJECTS["exact"], PROPERTIES["one_path"], max_examples=300, seed=0,
              engine="batch")
    assert r.verdict == "counterexample"


def test_a_progress_callback_that_miscounts_is_caught(monkeypatch):
    """The exact selection's progress reporting the buyers searched but not the ones
    enumerated (its final count short of the buyers)."""
    real = selection.exact

    def short(market, P, T, method="auto", *, progress=None, **kw):
        if progress is None:
            return real(market, P, T, method, **kw)
        seen = []
        out = real(market, P, T, method, progress=lambda d, t: seen.append((d, t)), **kw)
        for d, t in seen[:-1] if len(seen) > 1 else seen:
            progress(d, t)
        return out

    monkeypatch.setattr(ipfl, "exact", short)
    r = check(SUBJECTS["exact"], PROPERTIES["one_path"], max_examples=100, seed=0,
              engine="batch")
    assert r.verdict == "counterexample"


# ------------------------------------------- the Hypothesis engine (one instance at a time)
# It hands a property the checker's tracked stand-in for the subject, which counts the
# subject's calls: a row whose property never called it reads "vacuous" (the slow tier's
# contract rows of one_market did, and cpl_one_game raised on the stand-in, before).


@pytest.mark.parametrize("subject, key", [("local", "one_market"), ("share-all", "one_market"),
                                          ("cpl-bisection", "cpl_one_game"),
                                          ("cpl-uniform", "cpl_one_game")])
def test_the_hypothesis_engine_checks_it_through_the_subject(subject, key):
    r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=15, seed=0,
              engine="hypothesis")
    assert r.verdict == "holds" and r.effective >= 15 and r.discriminating >= 15


def test_the_hypothesis_engine_catches_a_one_game_fault(monkeypatch):
    _spend_missing_a_client(monkeypatch)
    r = check(SUBJECTS["cpl-bisection"], PROPERTIES["cpl_one_game"], max_examples=15, seed=0,
              engine="hypothesis")
    assert r.verdict == "counterexample"


def test_the_hypothesis_engine_catches_a_one_market_fault(monkeypatch):
    _nan_utilities(monkeypatch)
    r = check(SUBJECTS["local"], PROPERTIES["one_market"], max_examples=15, seed=0,
              engine="hypothesis")
    assert r.verdict == "counterexample"


@pytest.mark.parametrize("family, key", [("cpl", "cpl_one_game"), ("ipfl", "one_market")])
def test_every_subject_of_the_family_declares_it_and_the_standard_run_budgets_it(family, key):
    names = [s for s, subj in SUBJECTS.items() if subj.family == family]
    assert names
    for name in names:
        assert SUBJECTS[name].declares[key] is True, name
        assert STANDARD.budget(name, key) == 5_000
