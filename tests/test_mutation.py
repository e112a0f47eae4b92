"""The mutation harness works (benchmarks/mutation.py; the suite itself runs with `make
mutation`, not here): a real fault is killed by the batch engine, an identity rewrite of the
same code is not."""

import importlib.util
import json
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
    results = [{"mutant": "a", "what": "fault a",
                "batch": {"status": "killed", "seconds": 1, "commit": "abc1234"},
                "tests": {"status": "survived", "seconds": 2, "commit": "0123456"}},
               {"mutant": "b", "what": "fault b",
                "batch": {"status": "survived", "seconds": 3, "commit": "abc1234"}},
               {"mutant": "c", "what": "fault c",
                "batch": {"status": "killed", "seconds": 4, "commit": "fedcba9"}},
               {"mutant": "d", "what": "fault d",
                "batch": {"status": "killed", "seconds": 2, "commit": "abc1234",
                          "by": "box2/box2_prefix", "pass": 1}}]
    table = mutation.scores(results, ["batch", "tests"])
    assert "| batch | 3 | 1 | 0 | 0 | 0 | at abc1234 (3), at fedcba9 (1) |" in table
    assert "| tests | 0 | 1 | 0 | 0 | 3 | at 0123456 (1) |" in table
    assert "| d | fault d | killed (2 s) by box2/box2_prefix (first pass) | not run |" in table
    assert "| b | fault b | survived (3 s) | not run |" in table
    # a cell from another commit than its engine's most frequent one names it
    assert "| c | fault c | killed (4 s, at fedcba9) | not run |" in table


def test_the_commit_is_the_trees_head(mutation):
    import subprocess

    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True, check=True).stdout.strip()
    assert mutation.source_commit().split("+")[0] == head


@pytest.mark.slow
def test_an_inconclusive_row_or_a_vacuous_declaration_kills_nothing(mutation):
    """The identity rewrite survives a row whose evidence ran short (a time limit far too
    short for the budget: "inconclusive") and a row declared vacuous (share-all's Lemma 1).
    Known-bad: the driver once passed bool(declared), checking the vacuous declaration as a
    claim that holds, and counted an inconclusive row as a kill; both 'killed' this identity.
    A row with a time allowance (vcg/truthful_c_under, ROW_TIME_LIMITS) is checked for its
    allowance, not the short limit: it reaches its budget (without the allowance it reads
    inconclusive here: checked)."""
    by = {m.name: m for m in mutation.MUTANTS}
    assert mutation.ROW_TIME_LIMITS["vcg/truthful_c_under"] > 10.0
    same = mutation.run_mutant(by["greedy_unstable_ties"], ["batch"],
                               rows=["box2/thm2", "vcg/truthful_c_under", "share-all/lemma1"],
                               batch=2000, hypothesis=20, time_limit=0.05, timeout=300)
    assert same["batch"]["status"] == "survived", same
    assert same["batch"]["inconclusive"] == ["box2/thm2"], same
    assert same["batch"]["rows"] == 3 + 3, same  # the first pass (no False row) and the full


def test_the_rows_of_the_subjects_that_run_the_mutated_code_come_first(mutation):
    """benchmarks/mutation.py checks first the rows of the subjects whose clearing runs the
    mutated definition (derived by tracing their clearing), then every other row of the
    family in the registry's order: the order is a permutation of the family (a full check)."""
    from proofs.registry import SUBJECTS

    by = {m.name: m for m in mutation.MUTANTS}
    ipfl = [n for n, s in SUBJECTS.items() if s.family == "ipfl"]
    cpl = [n for n, s in SUBJECTS.items() if s.family == "cpl"]

    def order(name):
        got, owners = mutation.subject_order(by[name])
        assert sorted(got) == sorted(ipfl if by[name].family == "ipfl" else cpl), name
        assert got[:len(owners)] == owners, name
        return got, owners

    # the reference rules' own code: their subject first, the rest in the registry's order
    assert {f[1] for f in mutation.mutated_functions(by["vcg_pivot_keeps_row"])} == \
        {"vcg_payments"}
    assert order("vcg_pivot_keeps_row") == (["vcg"] + [n for n in ipfl if n != "vcg"], ["vcg"])
    assert order("shapley_weights")[1] == ["shapley"]
    assert order("share_all_self")[1] == ["share-all"]
    # a module-level constant: the functions that name it (cost_plus_prices, ..._remittances)
    assert order("cost_plus_no_markup")[1] == ["cost-plus"]
    assert order("box2_never_stops")[1] == ["box2"]
    assert order("exact_worst_subset")[1] == ["exact", "vcg"]  # vcg's pivot enumerates too
    # shared code: Eq. 3 and the gain run in every subject (the registry's order); the greedy
    # in the subjects that select with it
    for name in ("eq3_no_sharing_cost", "gain_double_x", "eq10_distance_sign"):
        assert order(name) == (ipfl, ipfl), name
    assert order("greedy_off_by_one")[1] == ["box2", "local", "shapley", "cost-plus"]
    # CPL keeps the registry's order (cpl-bisection first)
    assert order("cpl_best_response_v0") == (cpl, [])


@pytest.mark.slow
def test_a_mutant_of_vcgs_code_is_checked_on_vcgs_rows_first(mutation):
    """The mutated VCG pivot fails vcg/no_deficit and leaves box2's budget balance as it is:
    checked vcg first, the kill comes at row 1 (in the registry's order it was row 2)."""
    by = {m.name: m for m in mutation.MUTANTS}
    got = mutation.run_mutant(by["vcg_pivot_keeps_row"], ["batch"],
                              rows=["box2/budget_balance", "vcg/no_deficit"], batch=300,
                              hypothesis=20, time_limit=5.0, timeout=300,
                              first_pass=0)  # the order alone (no_deficit: declared False)
    assert got["first"] == ["vcg"], got
    assert got["batch"]["status"] == "killed", got
    assert (got["batch"]["by"], got["batch"]["rows"]) == ("vcg/no_deficit", 1), got


def test_no_run_merges_the_lines_of_a_mutant_engine_by_engine(mutation, tmp_path, capsys):
    """--no-run reads every line of --out: a later line replaces the engines it holds and
    keeps the others (runs of different engines, appended to one file, make one row)."""
    out = tmp_path / "m.jsonl"
    lines = [{"mutant": "eq13_sign", "what": "w", "tests": {"status": "killed", "seconds": 9,
                                                            "commit": "0123456"}},
             {"mutant": "eq13_sign", "what": "w", "batch": {"status": "survived", "seconds": 1,
                                                            "commit": "abc1234"}},
             {"mutant": "eq13_sign", "what": "w", "batch": {"status": "killed", "seconds": 2,
                                                            "commit": "abc1234"}}]
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert mutation.main(["--out", str(out), "--only", "eq13_sign", "--engines", "batch",
                          "tests", "--no-run"]) == 0
    table = capsys.readouterr().out
    assert "| eq13_sign | w | killed (2 s) | killed (9 s) |" in table


@pytest.mark.slow
def test_the_first_pass_kills_on_a_claims_counterexample_and_nothing_else(mutation):
    """The batch engine's first pass checks the claims on a small budget: the sharing cost at
    the reported c breaks vcg's truthfulness in c there (row 2 of 2, first pass; the full
    pass would reach it only after box2's row on its whole budget). The identity rewrite
    survives both passes, box2/local_optimality included: declared NOT to hold, it is left to
    the full pass (known-bad: a first pass that scored it would read "holds" on 100 draws --
    the counterexample is draw 3,424 -- and kill the identity)."""
    by = {m.name: m for m in mutation.MUTANTS}
    kw = {"batch": 2000, "hypothesis": 20, "time_limit": 10.0, "timeout": 300}
    got = mutation.run_mutant(by["eq3_reported_c"], ["batch"],
                              rows=["box2/budget_balance", "vcg/truthful_c_under"], **kw)
    assert got["batch"]["status"] == "killed", got
    assert (got["batch"]["by"], got["batch"]["rows"], got["batch"]["pass"]) == \
        ("vcg/truthful_c_under", 2, 1), got
    same = mutation.run_mutant(by["greedy_unstable_ties"], ["batch"],
                               rows=["box2/local_optimality", "box2/budget_balance"], **kw)
    assert same["batch"]["status"] == "survived", same
    assert same["batch"]["rows"] == 1 + 2, same  # the claim twice, the False row once
    off = mutation.run_mutant(by["greedy_unstable_ties"], ["batch"],
                              rows=["box2/local_optimality", "box2/budget_balance"],
                              first_pass=0, **kw)
    assert off["batch"]["rows"] == 2, off


@pytest.mark.slow
def test_box2_that_never_stops_breaks_its_prefix_in_the_first_pass(mutation):
    """box2_never_stops turns Box 2 into the local rule: box2/box2_prefix (declared to hold)
    finds the skipped client on the first pass's small budget; before that property it was
    caught only when box2/local_optimality (declared to fail) read "holds" on its full
    budget, 18 rows in."""
    by = {m.name: m for m in mutation.MUTANTS}
    got = mutation.run_mutant(by["box2_never_stops"], ["batch"],
                              rows=["box2/local_optimality", "box2/box2_prefix"], batch=2000,
                              hypothesis=20, time_limit=10.0, timeout=300)
    assert (got["batch"]["status"], got["batch"]["by"], got["batch"]["pass"]) == \
        ("killed", "box2/box2_prefix", 1), got
