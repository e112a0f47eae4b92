"""The checker's ``cpl_one_path`` (issue 34, part 1): every method of ``cpl.solve`` agrees
with the solver subject's equilibrium, checked in the standard run on the cpl-bisection
subject; the paths it guards are the conic solvers', which no other checker row runs."""

import warnings

import numpy as np
import pytest

from mechanisms import cpl
from mechanisms.cpl import equilibrium
from proofs import PROPERTIES, SUBJECTS, check_declared
from proofs.standard import STANDARD

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # cvxpy's "may be inaccurate"


def _check(n=12):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return check_declared(SUBJECTS["cpl-bisection"], "cpl_one_path", max_examples=n,
                              seed=0, engine="batch")


def test_every_method_agrees_on_the_drawn_games():
    report, as_declared = _check()
    assert as_declared and report.verdict == "holds"
    assert report.discriminating >= 12


def test_the_standard_run_gives_the_row_its_own_budget():
    assert STANDARD.budget("cpl-bisection", "cpl_one_path") == 1_000
    assert SUBJECTS["cpl-bisection"].declares["cpl_one_path"] is True
    assert PROPERTIES["cpl_one_path"].needs == "solver"


def _at_a_larger_budget(monkeypatch, linesearch):
    """The conic problem of one method (cvxpy, or the line search) posed at a budget half
    way from B to the q_max spend: a method that answers another game than the one asked."""
    real = equilibrium._cvxpy_problem

    def shifted(game, linesearch_=None, **kw):
        ls = kw.get("linesearch", linesearch_)
        if ls == linesearch:
            top = cpl.spend(game, game.q_max)
            game = game.replace(budget=game.budget + 0.5 * (top - game.budget))
        return real(game, ls)

    monkeypatch.setattr(equilibrium, "_cvxpy_problem", shifted)


def test_a_line_search_that_overspends_is_caught(monkeypatch):
    """The line search posed at a larger budget with its budget guard off: it answers a
    grid point that overspends B."""
    _at_a_larger_budget(monkeypatch, linesearch=True)
    monkeypatch.setattr(equilibrium, "LINESEARCH_BUDGET_RTOL", np.inf)
    report, as_declared = _check()
    assert not as_declared and report.verdict == "counterexample"


def test_a_method_without_an_answer_is_caught(monkeypatch):
    """A method raising SolverFailed on a drawn game fails the property."""
    def fails(game, *args, **kwargs):
        raise cpl.SolverFailed("cvxpy-linesearch", "no grid point solved within the budget")

    monkeypatch.setattr(equilibrium, "_linesearch", fails)
    report, as_declared = _check(4)
    assert not as_declared and report.verdict == "counterexample"


def test_cvxpy_at_another_budget_is_caught(monkeypatch):
    _at_a_larger_budget(monkeypatch, linesearch=False)
    report, as_declared = _check()
    assert not as_declared and report.verdict == "counterexample"


def test_the_line_search_reports_the_multiplier_its_answer_implies():
    """No budget multiplier comes out of the line search's grid: it reports lambda = 1/mu,
    mu the median over the clients with K > 0 of the KKT value 4 c q^3 / K + v at its q
    (mechanisms/cpl/equilibrium.py), and the threshold v^t = 1/(3 lambda) beside it."""
    g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1.0, 2.0, 3.0], c=[1.0, 2.0, 1.5], v=[0.0, 0.1, 0.0],
                 budget=0.0, alpha=1.0, R=10, q_min=0.01, q_max=[1.0, 1.0, 1.0])
    lo, hi = cpl.spend(g, np.full(3, 0.01)), cpl.spend(g, g.q_max)
    g = g.replace(budget=lo + 0.5 * (hi - lo))
    ls = cpl.solve(g, "cvxpy-linesearch", points=30)
    mu = np.median(4.0 * g.c * ls.q**3 / g.K + g.v)
    assert ls.status == "optimal" and 0 < ls.multiplier < np.inf
    assert ls.multiplier == pytest.approx(1.0 / mu, rel=1e-12)
    assert ls.v_threshold == pytest.approx(mu / 3.0, rel=1e-12)


def test_the_spend_scale_is_the_size_of_the_terms_the_spend_sums():
    """spend_scale (the line search's budget tolerance is relative to it) pinned to its
    definition, sum_n (2 c_n q_n^2 + v_n K_n / q_n), on a game with every term nonzero."""
    g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1.0, 2.0, 3.0], c=[1.0, 2.0, 1.5], v=[0.3, 0.1, 0.2],
                 budget=1.0, alpha=1.0, R=10, q_min=0.01, q_max=[1.0, 1.0, 1.0])
    q = np.array([0.3, 0.5, 0.7])
    terms = [2.0 * c * x * x + v * k / x for c, v, k, x in zip(g.c, g.v, g.K, q, strict=True)]
    assert cpl.spend_scale(g, q) == pytest.approx(sum(terms), rel=1e-14)


def test_the_eps0_grid_reaches_the_top_of_the_line_search_range():
    """With ``eps0`` the line search's grid of M runs from sum c q_min^2 to sum c q_max^2 in
    steps of eps0, the top included: a quarter of the range is 5 points (6 if rounding
    carries the last step past the top), never fewer."""
    g = cpl.Game(a=[0.2, 0.3, 0.5], G=[1.0, 2.0, 3.0], c=[1.0, 2.0, 1.5], v=[0.0, 0.1, 0.0],
                 budget=0.0, alpha=1.0, R=10, q_min=0.01, q_max=[1.0, 1.0, 1.0])
    lo_b, hi_b = cpl.spend(g, np.full(3, 0.01)), cpl.spend(g, g.q_max)
    g = g.replace(budget=lo_b + 0.5 * (hi_b - lo_b))
    lo, hi = float(np.sum(g.c * 0.01**2)), float(np.sum(g.c * g.q_max**2))
    ls = cpl.solve(g, "cvxpy-linesearch", eps0=(hi - lo) / 4)
    assert ls.status == "optimal" and ls.info["grid_points"] in (5, 6)
