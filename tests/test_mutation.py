"""The mutation harness works (benchmarks/mutation.py; the suite itself runs with `make
mutation`, not here): a real fault is killed by the batch engine, an identity rewrite of the
same code is not."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutation():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "benchmarks" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_mutant_names_text_that_is_in_the_source(mutation):
    assert len(mutation.MUTANTS) - len(mutation.IDENTITIES) >= 30
    for m in mutation.MUTANTS:
        assert (ROOT / m.path).read_text().count(m.old) == 1, m.name


@pytest.mark.slow
def test_a_fault_is_killed_and_an_identity_survives(mutation):
    by = {m.name: m for m in mutation.MUTANTS}
    kw = {"batch": 300, "hypothesis": 20, "time_limit": 5.0, "timeout": 300}
    fault = mutation.run_mutant(by["payments_off_1e-6"], ["batch"],
                                rows=["box2/budget_balance"], **kw)
    assert fault["batch"]["status"] == "killed", fault
    same = mutation.run_mutant(by["greedy_unstable_ties"], ["batch"],
                               rows=["local/local_optimality", "box2/budget_balance"], **kw)
    assert same["batch"]["status"] == "survived", same


def test_the_table_counts_what_each_engine_scored_and_what_it_did_not(mutation):
    results = [{"mutant": "a", "what": "fault a", "batch": {"status": "killed", "seconds": 1},
                "tests": {"status": "survived", "seconds": 2}},
               {"mutant": "b", "what": "fault b", "batch": {"status": "survived", "seconds": 3}}]
    table = mutation.scores(results, ["batch", "tests"])
    assert "| batch | 1 | 1 | 0 | 0 | 0 |" in table
    assert "| tests | 0 | 1 | 0 | 0 | 1 |" in table
    assert "| b | fault b | survived (3 s) | not run |" in table


@pytest.mark.slow
def test_an_inconclusive_row_or_a_vacuous_declaration_kills_nothing(mutation):
    """The identity rewrite survives a row whose evidence ran short (a time limit far too
    short for the budget: "inconclusive") and a row declared vacuous (share-all's Lemma 1).
    Known-bad: the driver once passed bool(declared), checking the vacuous declaration as a
    claim that holds, and counted an inconclusive row as a kill; both 'killed' this identity."""
    by = {m.name: m for m in mutation.MUTANTS}
    same = mutation.run_mutant(by["greedy_unstable_ties"], ["batch"],
                               rows=["vcg/truthful_c_under", "share-all/lemma1"], batch=2000,
                               hypothesis=20, time_limit=0.05, timeout=300)
    assert same["batch"]["status"] == "survived", same
    assert same["batch"]["inconclusive"] == ["vcg/truthful_c_under"], same
    assert same["batch"]["rows"] == 2, same
