"""The generated-mutant harness (benchmarks/generated_mutation.py; the score itself runs with
`make mutation`): its operators, its sample, which rows and tests it runs for a mutant, a
handful of generated mutants scored end to end, and the page that shows the score."""

import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("cosmic_ray", reason="the mutation extra (make venv installs it)")


@pytest.fixture(scope="module")
def gm():
    path = ROOT / "benchmarks" / "generated_mutation.py"
    spec = importlib.util.spec_from_file_location("generated_mutation", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["generated_mutation"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def money(gm):
    """The mutants of mechanisms/ipfl/money.py (one small module: fast to enumerate)."""
    return gm.mutants(ROOT, [ROOT / "mechanisms" / "ipfl" / "money.py"])


def test_the_slice_operator_does_what_its_examples_say(gm):
    op = gm.operators()[gm.SLICE]
    from cosmic_ray.mutating import mutate_code

    for ex in op.examples():
        assert mutate_code(ex.pre_mutation_code, op, ex.occurrence) == ex.post_mutation_code
    # x[:, None] and x[i] have no slice bound to drop
    assert mutate_code("y = x[:, None] + x[i]\n", op, 0) is None


def test_every_operator_class_is_generated_and_only_those(gm, money):
    kinds = {m.kind for m in money}
    assert kinds == {"arithmetic", "comparison", "constant", "boolean", "slice"}, kinds
    names = set(gm.operators())
    assert not any("Decorator" in n or "Exception" in n or "ZeroIteration" in n
                   or "Break" in n or "Variable" in n for n in names)


def test_each_mutant_changes_its_own_position_only(gm, money):
    text = (ROOT / "mechanisms/ipfl/money.py").read_text()
    assert len({m.key for m in money}) == len(money)  # keys name mutants uniquely
    for m in money[::7]:
        mutated = gm.mutate(text, m)
        a, b = text.splitlines(), mutated.splitlines()
        changed = [i + 1 for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        assert changed and m.line <= changed[0] and changed[-1] <= m.end_line, m.key


def test_the_sample_is_seeded_uniform_and_nested(gm, money):
    """The k smallest SHA-256 ranks: the same for the same seed, another for another seed,
    the smaller sample inside the larger (a rerun with more mutants keeps the results)."""
    ten, twenty = gm.sample(money, 10, 0), gm.sample(money, 20, 0)
    assert [m.key for m in ten] == [m.key for m in gm.sample(money, 10, 0)]
    assert {m.key for m in ten} <= {m.key for m in twenty}
    assert {m.key for m in ten} != {m.key for m in gm.sample(money, 10, 1)}
    assert len(gm.sample(money, None, 0)) == len(money)


def test_a_run_cut_short_shows_its_longest_scored_prefix_by_rank(gm, money):
    """Mutants are scored in rank order; the page of a run stopped early shows the longest
    prefix (by rank) of the planned sample that is fully scored: the sample of that size."""
    planned = gm.sample(money, 12, 0)
    ranked = [m.id for m in sorted(planned, key=lambda m: gm.rank(m, 0))]
    both = {"checker": {"status": "killed"}, "tests": {"status": "survived"}}
    done = {i: dict(both) for i in ranked[:5]}
    done[ranked[5]] = {"checker": {"status": "killed"}}  # in flight: tests not yet scored
    done[ranked[6]] = dict(both)  # finished before the one above: not in the prefix
    done[ranked[2]] = {"incompetent": "does not compile"}
    chosen = gm.sample([m for m in planned if m.id in done], 12, 0)
    got, n = gm.scored_prefix(chosen, ranked, done, ("checker", "tests"), 12)
    assert n == 12 and {m.id for m in got} == set(ranked[:5])
    assert {m.key for m in got} == {m.key for m in gm.sample(money, 5, 0)}  # nested samples
    assert gm.scored_prefix(chosen, None, done, ("checker",), 12) == (chosen, len(chosen))


def test_the_rows_run_are_those_that_execute_the_mutant_cheapest_first(gm, money):
    m = next(x for x in money if x.where == "body")
    lines = {str(m.span[0]): [2, 0], "999": [1]}
    base = {"rows": ["a/x", "b/y", "c/z"], "seconds": [5.0, 1.0, 0.5],
            "passes": [True, True, True], "lines": {m.path: lines}}
    assert gm.users(base, m) == [2, 0]
    base["passes"][2] = False  # a row that fails unmutated cannot kill
    assert gm.users(base, m) == [0]
    base["lines"] = {m.path: {"999": [1]}}
    assert gm.users(base, m) == []  # no row executes it: "not executed"
    # code run at import (or under the empty context): every row that ran mechanisms/
    top = dataclasses.replace(m, where="module", span=(m.first, m.first))
    base = {"rows": ["a/x", "b/y"], "seconds": [1.0, 2.0], "passes": [True, True],
            "lines": {top.path: {str(top.first): [-1]}, "mechanisms/other.py": {"1": [1]}}}
    assert gm.users(base, top) == [1]
    # a default or decorator: the rows that run the function's body
    sig = next(x for x in money if x.where == "signature")
    base["lines"] = {sig.path: {str(sig.first): [-1], str(sig.span[0]): [0]}}
    assert gm.users(base, sig) == [0]
    # an annotation is never evaluated (from __future__ import annotations): no row
    note = dataclasses.replace(m, where="annotation")
    base["lines"] = {note.path: {str(note.first): [-1, 0, 1]}}
    assert gm.users(base, note) == []


def test_the_score_counts_equivalents_apart_with_an_exact_interval(gm):
    rows = ([{"key": f"k{i}", "checker": {"status": "killed"}, "tests": {"status": "survived"}}
             for i in range(8)]
            + [{"key": "t", "checker": {"status": "survived"}, "tests": {"status": "killed"}},
               {"key": "s", "checker": {"status": "not executed"},
                "tests": {"status": "survived"}},
               {"key": "e", "checker": {"status": "survived"}, "tests": {"status": "survived"}},
               {"key": "i", "incompetent": "does not compile"}])
    t = gm.tally({"mutants": rows, "equivalents": {"e": "argued"}})
    assert (t["sampled"], t["incompetent"], t["equivalent"], t["scored"]) == (12, 1, 1, 10)
    assert (t["checker"]["killed"], t["tests"]["killed"], t["both"]["killed"]) == (8, 1, 9)
    assert t["both"]["of"] == 10
    # Clopper-Pearson, 9 of 10: 0.555 - 0.997
    assert t["both"]["low"] == pytest.approx(0.5550, abs=1e-4)
    assert t["both"]["high"] == pytest.approx(0.9975, abs=1e-4)


def _small_copy(dst: Path) -> Path:
    for part in ("mechanisms", "proofs", "sims", "benchmarks", "tests"):
        shutil.copytree(ROOT / part, dst / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def test_generated_mutants_scored_end_to_end(gm, money, tmp_path, monkeypatch):
    """Eq. 13's sign flipped by the operator Sub -> Add is killed by the one row run (its
    budget balance); a mutant no row executes survives as "not executed" without a run;
    the copy's file is restored after each."""
    monkeypatch.setattr(gm, "_COPIES", {})
    monkeypatch.setattr(gm.named, "copy_tree", _small_copy)
    flip = next(m for m in money if m.operator == "core/ReplaceBinaryOperator_Sub_Add"
                and "R.sum(axis=-1) - R.sum(axis=-2)" in
                (ROOT / m.path).read_text().splitlines()[m.line - 1])
    text = (ROOT / flip.path).read_text()
    base = {"command": "fedmarket prove --engine batch --examples 50",
            "rows": ["box2/budget_balance"], "seconds": [0.5], "passes": [True],
            "lines": {flip.path: {str(flip.span[0]): [0]}}}
    got = gm.score(flip, ("checker",), {"checker": base}, str(tmp_path))
    assert got["checker"]["status"] == "killed", got
    assert got["checker"]["by"] == "box2/budget_balance"
    assert "R.sum(axis=-1) + R.sum(axis=-2)" in got["after"]
    other = next(m for m in money if m.first != flip.first)
    got = gm.score(other, ("checker",), {"checker": base}, str(tmp_path))
    assert got["checker"]["status"] == "not executed", got
    (copy,) = gm._COPIES.values()
    assert (copy / flip.path).read_text() == text


def test_an_argued_equivalent_is_not_run_by_the_checker(gm, money, tmp_path, monkeypatch):
    """A mutant with an argument of equivalence is "skipped" by the checker (its argument
    stands in for a survivor's whole budget) and counted apart from the survivors that ran;
    the tests still run on it. The same mutant without its argument is run (and killed)."""
    monkeypatch.setattr(gm, "_COPIES", {})
    monkeypatch.setattr(gm.named, "copy_tree", _small_copy)
    flip = next(m for m in money if m.operator == "core/ReplaceBinaryOperator_Sub_Add"
                and "R.sum(axis=-1) - R.sum(axis=-2)" in
                (ROOT / m.path).read_text().splitlines()[m.line - 1])
    base = {"command": "fedmarket prove --engine batch --examples 50",
            "rows": ["box2/budget_balance"], "seconds": [0.5], "passes": [True],
            "lines": {flip.path: {str(flip.span[0]): [0]}}}
    monkeypatch.setattr(gm, "equivalents", lambda: {flip.key: "argued"})
    got = gm.score(flip, ("checker",), {"checker": base}, str(tmp_path))
    assert got["checker"] == {"status": "skipped", "why": "argued equivalent", "rows": 0,
                              "of": 0, "seconds": 0.0}, got
    row = {"key": flip.key, "checker": got["checker"], "tests": {"status": "killed"}}
    t = gm.tally({"mutants": [row], "equivalents": {}})  # the tests set the argument aside
    assert t["checker"] == {"killed": 0, "of": 1, "unrun": 1, "low": 0.0, "high": 0.975}, t
    monkeypatch.setattr(gm, "equivalents", dict)
    got = gm.score(flip, ("checker",), {"checker": base}, str(tmp_path))
    assert got["checker"]["status"] == "killed", got


def test_where_a_mutant_runs(gm, tmp_path):
    """A function's body, a def's default (for the calls of that def), module-level code (at
    import), an annotation (never evaluated under ``from __future__ import annotations``;
    evaluated without it)."""
    src = ("from __future__ import annotations\n"
           "LIMIT = 2 + 3\n"
           "def f(x: int | None = 1 + 2):\n"
           "    return x * 4\n")
    (tmp_path / "mechanisms").mkdir()
    mod = tmp_path / "mechanisms" / "m.py"
    mod.write_text(src)

    def where(text, op):
        return {m.where for m in gm.mutants(tmp_path, [mod]) if m.operator == op
                and text in src.splitlines()[m.line - 1]}

    assert where("2 + 3", "core/ReplaceBinaryOperator_Add_Sub") == {"module"}
    assert where("1 + 2", "core/ReplaceBinaryOperator_Add_Sub") == {"signature"}
    assert where("int | None", "core/ReplaceBinaryOperator_BitOr_BitAnd") == {"annotation"}
    assert where("x * 4", "core/ReplaceBinaryOperator_Mul_Add") == {"body"}
    mod.write_text(src.split("\n", 1)[1])  # annotations evaluated at import now
    src = mod.read_text()
    assert where("int | None", "core/ReplaceBinaryOperator_BitOr_BitAnd") == {"signature"}


def test_nothing_evaluates_annotations(gm):
    """The premise of the annotation mutants' argument (generated_mutation.ANNOTATION): no
    code of the toolkit evaluates annotations (every module of mechanisms/ with a function
    or class has ``from __future__ import annotations``: the harness reads it per module)."""
    for part in ("mechanisms", "proofs", "sims", "learning"):
        for f in (ROOT / part).rglob("*.py"):
            text = f.read_text()
            assert "get_type_hints" not in text and "eval_str" not in text, f
    assert "never evaluated" in gm.ANNOTATION


def test_every_argued_equivalent_names_a_generated_mutant(gm):
    """benchmarks/equivalent_mutants.toml: each key is a mutant the tool generates from the
    current source, or one whose line has changed since but that the results the page shows
    hold (the argument lapses with them: gm.unfounded), and each argument says why."""
    args = gm.equivalents()
    if not args:
        return
    files = sorted({ROOT / k.split("|")[0] for k in args if (ROOT / k.split("|")[0]).exists()})
    keys = {m.key for m in gm.mutants(ROOT, files)}
    assert gm.unfounded(args, keys, gm.shown_keys()) == []
    for key, why in args.items():
        assert len(why.split()) >= 8, key


def test_an_argument_of_no_generated_or_shown_mutant_is_refused(gm, tmp_path):
    """unfounded keeps an argument whose line is gone while the page's results hold its
    mutant, and refuses one that names a mutant of neither today's source nor those results
    (a typo in the key), and one whose results the page no longer shows."""
    path = ROOT / "mechanisms" / "ipfl" / "money.py"
    generated = {m.key for m in gm.mutants(ROOT, [path])}
    today = sorted(generated)[0]
    gone = "mechanisms/cpl/game.py|Game.__post_init__|core/X|a line since changed|0"
    typo = today.replace("|", " |", 1)  # the path misspelt
    assert typo not in generated
    shown = {"73ff4fae23": {gone}}
    args = dict.fromkeys((today, gone, typo), "argued")
    assert gm.unfounded(args, generated, shown) == [
        f"{typo}: not generated from today's source, and no results the page shows hold it "
        "(shown: code 73ff4fae23)"]
    refused = gm.unfounded(args, generated, {})
    assert len(refused) == 2 and refused[0].startswith(f"{gone}: ")
    assert refused[1].startswith(f"{typo}: ") and refused[1].endswith("(shown: none)")
    # the page's results as the committed file holds them (its code version, its rows' keys)
    committed = tmp_path / "mutation_generated.json"
    assert gm.shown_keys(committed) == {}
    committed.write_text(json.dumps({"code": "73ff4fae23", "mutants": [{"key": gone,
                                                                         "id": "x"}]}))
    assert gm.shown_keys(committed) == shown


def test_a_mutant_argued_twice_is_refused(gm, tmp_path):
    """Two arguments for one key: the second would silently replace the first (a rebase
    merged two sessions' arguments for 228ef753df and the page's showed the other one)."""
    entry = ("[[equivalent]]\nkey = 'a|b|c|d|0'\n"
             "argument = 'one two three four five six seven eight'\n")
    path = tmp_path / "equivalent_mutants.toml"
    path.write_text(entry)
    assert gm.equivalents(path) == {"a|b|c|d|0": "one two three four five six seven eight"}
    path.write_text(entry + "\n" + entry)
    with pytest.raises(ValueError, match="argued twice"):
        gm.equivalents(path)


@pytest.mark.slow
def test_the_tests_engine_runs_the_tests_that_run_the_mutant(gm, money, tmp_path,
                                                           monkeypatch):
    """Eq. 13's sign flipped fails the tests that run it (a pytest run of their node ids, the
    fastest first, stopping at the first failure); with none, "not executed"."""
    monkeypatch.setattr(gm, "_COPIES", {})
    monkeypatch.setattr(gm.named, "copy_tree", _small_copy)
    flip = next(m for m in money if m.operator == "core/ReplaceBinaryOperator_Sub_Add"
                and "R.sum(axis=-1) - R.sum(axis=-2)" in
                (ROOT / m.path).read_text().splitlines()[m.line - 1])
    tests = ["tests/test_ipfl_public.py::test_pure_buyer_and_pure_seller",
             "tests/test_ipfl_public.py::test_liar_uses_true_values_for_utility"]
    base = {"tests": tests, "seconds": [0.5, 0.2], "passes": [True, True],
            "lines": {flip.path: {str(flip.span[0]): [0, 1]}}}
    got = gm.score(flip, ("tests",), {"tests": base}, str(tmp_path))
    assert got["tests"]["status"] == "killed", got
    assert got["tests"]["by"] == tests[1], got  # the faster first
    base["lines"] = {}
    got = gm.score(flip, ("tests",), {"tests": base}, str(tmp_path))
    assert got["tests"]["status"] == "not executed", got


def test_the_page_shows_the_committed_results(gm):
    """docs/reference-proofs.md's generated-mutation block is what the script renders from
    the committed results (docs/mutation_generated.json), with the equivalence arguments
    as benchmarks/equivalent_mutants.toml has them now; its counts are those of the rows."""

    page = (ROOT / "docs" / "reference-proofs.md").read_text()
    start, end = gm.MARKERS
    block = page[page.index(start):page.index(end) + len(end)] + "\n"
    committed = ROOT / "docs" / "mutation_generated.json"
    if not committed.exists():
        assert "No run landed yet" in block
        return
    summary = json.loads(committed.read_text())
    assert block == gm.render(summary), "regenerate: python benchmarks/generated_mutation.py " \
        "--no-run --markdown docs/reference-proofs.md"
    rows = summary["mutants"]
    assert summary["sampled"] == len(rows) == len({r["id"] for r in rows})
    assert summary["sampled"] <= summary.get("planned", summary["sampled"])
    argued = gm.equivalents()
    for key, why in summary["equivalents"].items():
        assert why in (argued.get(key), gm.ANNOTATION), f"stale argument: {key}"
    survivors = {r["key"] for r in rows if "incompetent" not in r and not any(
        r.get(e, {}).get("status") in gm.KILLS for e in ("checker", "tests"))}
    assert set(summary["equivalents"]) <= survivors
    assert {k for k in argued if k in {r["key"] for r in rows}} & survivors \
        <= set(summary["equivalents"])


def test_a_test_module_the_mutant_breaks_at_import_counts_as_killed(gm, money, tmp_path):
    """A mutant that makes a test module fail to import (a seed check raising at module
    level) kills: pytest reports the collection error and then, for the node ids asked for,
    "found no collectors" (exit 4), which is the mutant's doing, not the harness's."""
    copy = tmp_path / "copy"
    (copy / "tests").mkdir(parents=True)
    (copy / "tests" / "test_broken.py").write_text(
        "raise RuntimeError('the mutant broke this import')\n\n\ndef test_x():\n    pass\n")
    (copy / "tests" / "test_fine.py").write_text("def test_y():\n    pass\n")
    m = money[0]
    base = {"tests": ["tests/test_broken.py::test_x"], "seconds": [0.1], "passes": [True],
            "lines": {m.path: {str(m.span[0]): [0]}}}
    got = gm.score_tests(copy, base, m)
    assert got["status"] == "killed" and got["rc"] == 4, got
    assert got["by"].startswith("tests/test_broken.py"), got
    base["tests"] = ["tests/test_fine.py::test_y"]  # a module that imports: it survives
    assert gm.score_tests(copy, base, m)["status"] == "survived"
    # the conftest failing to import (4ef4e858f4 broke a validator the conftest calls): no
    # test can run, exit 4 without a collection error: killed, not a harness error
    (copy / "tests" / "conftest.py").write_text("raise TypeError('unsupported operand')\n")
    got = gm.score_tests(copy, base, m)
    assert got["status"] == "killed" and got["rc"] == 4, got
    assert got["by"] == "tests/conftest.py (import)", got


def test_a_mutant_that_breaks_an_import_is_killed_by_the_checker(gm, money, monkeypatch):
    """The triage run of a mutant that breaks an import ends before any row ("<import>", no
    row of the baseline): the harness neither reorders by it nor crashes (it raised
    ValueError and stopped the whole run), and the checker's run, failing the same way,
    kills the mutant."""
    m = money[0]
    base = {"command": "fedmarket prove --engine batch", "rows": ["a/x", "b/y"],
            "seconds": [1.0, 2.0], "passes": [True, True], "triage": "triage",
            "triage_passes": [True, True], "lines": {m.path: {str(m.span[0]): [0, 1]}}}
    calls = []

    def broken_import(copy, command, rows, limits=None, **kw):
        calls.append((command, list(rows)))
        return [{"row": "<import>", "rc": "exit 1", "error": ["ImportError: mutated"]}]

    monkeypatch.setattr(gm, "run_rows", broken_import)
    got = gm.score_checker(Path("."), base, m)
    assert got["status"] == "killed" and got["by"] == "<import>", got
    assert got["flagged"] == 0 and calls[1] == (base["command"], ["a/x", "b/y"])


def test_the_triage_stops_at_its_first_failure_and_that_row_runs_first(gm, money,
                                                                        monkeypatch):
    """The cheap run goes cheapest row first and stops where it first fails; the standard
    run starts with that row (and stops at its own first failure)."""
    m = money[0]
    base = {"command": "standard", "rows": ["a/x", "b/y", "c/z"],
            "seconds": [1.0, 2.0, 3.0], "passes": [True] * 3, "triage": "triage",
            "triage_passes": [True] * 3, "lines": {m.path: {str(m.span[0]): [0, 1, 2]}}}
    calls = []

    def rows_failing_at_b(copy, command, rows, limits=None, stop=True, **kw):
        calls.append((command, list(rows), stop))
        out = []
        for r in rows:
            out.append({"row": r, "rc": 1 if r == "b/y" else 0})
            if r == "b/y" and stop:
                break
        return out

    monkeypatch.setattr(gm, "run_rows", rows_failing_at_b)
    got = gm.score_checker(Path("."), base, m)
    assert calls[0] == ("triage", ["a/x", "b/y", "c/z"], True), calls
    assert calls[1][:2] == ("standard", ["b/y", "a/x", "c/z"]), calls
    assert got["status"] == "killed" and got["by"] == "b/y" and got["flagged"] == 1, got


def test_retry_scores_again_only_the_statuses_named(gm):
    held = {"checker": {"status": "killed"}, "tests": {"status": "error"}}
    assert gm.to_score(held, ("checker", "tests")) == ()
    assert gm.to_score(held, ("checker", "tests"), ("error",)) == ("tests",)
    assert gm.to_score({"checker": {"status": "survived"}}, ("checker", "tests"),
                       ("error",)) == ("tests",)


def test_the_tests_can_run_only_where_the_checker_did_not_kill(gm, money, tmp_path,
                                                               monkeypatch):
    """--tests-after-checker: score() skips the tests of a mutant the checker killed, and
    runs them on one it did not; the page's tests row then says whom it covers, while the
    checker-or-tests row still counts every scored mutant."""
    monkeypatch.setattr(gm, "_COPIES", {})
    monkeypatch.setattr(gm.named, "copy_tree", _small_copy)
    monkeypatch.setattr(gm, "equivalents", dict)
    ran = []
    verdict = {}

    def checker(copy, base, m):
        ran.append("checker")
        return {"status": verdict["checker"]}

    def tests(copy, base, m):
        ran.append("tests")
        return {"status": "killed"}

    monkeypatch.setattr(gm, "score_checker", checker)
    monkeypatch.setattr(gm, "score_tests", tests)
    m = money[0]
    for status, expect in (("killed", ["checker"]), ("timeout", ["checker"]),
                           ("survived", ["checker", "tests"])):
        ran.clear()
        verdict["checker"] = status
        got = gm.score(m, ("checker", "tests"), dict.fromkeys(("checker", "tests")),
                       str(tmp_path), after_checker=True)
        assert ran == expect and ("tests" in got) == (status == "survived"), (status, got)
    ran.clear()
    verdict["checker"] = "killed"
    gm.score(m, ("checker", "tests"), dict.fromkeys(("checker", "tests")), str(tmp_path))
    assert ran == ["checker", "tests"]

    rows = ([{"key": f"k{i}", "checker": {"status": "killed"}} for i in range(18)]
            + [{"key": "s", "checker": {"status": "survived"}, "tests": {"status": "killed"}},
               {"key": "n", "checker": {"status": "survived"},
                "tests": {"status": "survived"}}])
    t = gm.tally({"mutants": rows, "equivalents": {}})
    assert t["tests_after_checker"] is True
    assert (t["tests"]["killed"], t["tests"]["of"]) == (1, 2)
    assert (t["both"]["killed"], t["both"]["of"]) == (19, 20)
    # a run cut short shows the prefix whose tests ran where the checker did not kill
    ms = [dataclasses.replace(money[k], id=f"m{k}") for k in range(4)]
    done = {"m0": {"checker": {"status": "killed"}},
            "m1": {"checker": {"status": "survived"}, "tests": {"status": "killed"}},
            "m2": {"checker": {"status": "timeout"}},
            "m3": {"checker": {"status": "survived"}}}  # its tests not run yet
    ranked = ["m0", "m1", "m2", "m3"]
    got, planned = gm.scored_prefix(ms, ranked, done, ("checker", "tests"), None, True)
    assert [m.id for m in got] == ["m0", "m1", "m2"] and planned == 4
    got, _ = gm.scored_prefix(ms, ranked, done, ("checker", "tests"), None)
    assert got == []  # without the flag every mutant needs both engines
    rows[0]["tests"] = {"status": "killed"}  # a kill of the checker with a tests result
    assert gm.tally({"mutants": rows, "equivalents": {}})["tests_after_checker"] is False


def test_a_kill_counts_once_it_happens_again(gm, money, tmp_path, monkeypatch):
    """A row (test) that fails once and passes when run again on the same mutant (a time
    limit missed under load) is an error to retry, not a kill; one that fails again kills."""
    m = money[0]
    base = {"command": "standard", "rows": ["a/x", "b/y"], "seconds": [1.0, 2.0],
            "passes": [True] * 2, "lines": {m.path: {str(m.span[0]): [0, 1]}}}
    runs = []

    def failing_once(copy, command, rows, limits=None, stop=True, **kw):
        runs.append(list(rows))
        return [{"row": r, "rc": 1 if r == "b/y" and len(runs) == 1 else 0} for r in rows]

    monkeypatch.setattr(gm, "run_rows", failing_once)
    got = gm.score_checker(Path("."), base, m)
    assert runs == [["a/x", "b/y"], ["b/y"]], runs
    assert got["status"] == "error" and got["why"] == "kill not reproduced", got
    monkeypatch.setattr(gm, "run_rows", lambda copy, command, rows, limits=None, **kw: [
        {"row": r, "rc": 1 if r == "b/y" else 0} for r in rows])
    assert gm.score_checker(Path("."), base, m)["status"] == "killed"

    copy = tmp_path / "copy"
    (copy / "tests").mkdir(parents=True)
    flag = tmp_path / "ran"
    (copy / "tests" / "test_flaky.py").write_text(
        "from pathlib import Path\n\n\ndef test_x():\n"
        f"    flag = Path({str(flag)!r})\n"
        "    first = not flag.exists()\n    flag.write_text('1')\n    assert not first\n")
    (copy / "tests" / "test_bad.py").write_text("def test_y():\n    assert False\n")
    base = {"tests": ["tests/test_flaky.py::test_x"], "seconds": [0.1], "passes": [True],
            "lines": {m.path: {str(m.span[0]): [0]}}}
    got = gm.score_tests(copy, base, m)
    assert got["status"] == "error" and got["why"] == "kill not reproduced", got
    base["tests"] = ["tests/test_bad.py::test_y"]
    got = gm.score_tests(copy, base, m)
    assert got["status"] == "killed" and got["by"] == "tests/test_bad.py::test_y", got


def test_a_run_past_the_memory_cap_is_killed_as_out_of_memory(gm, money, tmp_path,
                                                                monkeypatch):
    """Every process of a mutant's runs holds at most MEMORY_CAP bytes of data (RLIMIT_DATA,
    set before exec, inherited by its children): past it an allocation fails, and the
    mutant is killed with the reason "memory" (4a06c9bfb6, 2**16 ** m, grew to 9.3 GB before
    its time limit; two such with --jobs 2 could take the machine down). A tiny cap here:
    a child allocating 256 MiB under a 128 MiB cap fails, under 1 GiB it does not."""
    import subprocess

    hog = [sys.executable, "-c", "b = bytearray(256 * 2**20); b[-1] = 1"]
    low = subprocess.run(hog, capture_output=True, text=True,
                         preexec_fn=gm._dies_with_us(128 * 2**20))
    assert low.returncode == 1 and "MemoryError" in low.stderr, low
    assert subprocess.run(hog, preexec_fn=gm._dies_with_us(2**30)).returncode == 0
    assert "memory" in gm.KILLS

    # the tests engine: pytest under the cap, the first failure a MemoryError
    copy = tmp_path / "copy"
    (copy / "tests").mkdir(parents=True)
    (copy / "tests" / "test_hog.py").write_text(
        "def test_hog():\n    b = bytearray(1024 * 2**20)\n    b[-1] = 1\n\n\n"
        "def test_small():\n    b = bytearray(16 * 2**20)\n    b[-1] = 1\n")
    m = money[0]
    base = {"tests": ["tests/test_hog.py::test_small"], "seconds": [0.1], "passes": [True],
            "lines": {m.path: {str(m.span[0]): [0]}}}
    monkeypatch.setattr(gm, "MEMORY_CAP", 512 * 2**20)
    assert gm.score_tests(copy, base, m)["status"] == "survived"  # pytest runs under it
    base["tests"] = ["tests/test_hog.py::test_hog"]
    got = gm.score_tests(copy, base, m)
    assert got["status"] == "memory" and got["by"] == "tests/test_hog.py::test_hog", got
    assert gm.tally({"mutants": [{"key": "k", "tests": got}], "equivalents": {}})[
        "tests"]["killed"] == 1

    # the checker engine: a row whose run raised MemoryError (the driver's rc), or whose
    # report is an error naming one (the checker catches what a subject raises: 4a06c9bfb6
    # under the cap read "error", box2/one_path), is "memory", not run a second time (the
    # cap is the process's own, not the machine's load); another error is a kill as before
    base = {"command": "standard", "rows": ["a/x", "b/y"], "seconds": [1.0, 2.0],
            "passes": [True] * 2, "lines": {m.path: {str(m.span[0]): [0, 1]}}}
    raised = "box2.select raised MemoryError: "
    for bad, status, again in (({"rc": "MemoryError: "}, "memory", False),
                               ({"rc": 1, "errors": [raised]}, "memory", False),
                               ({"rc": 1, "errors": ["box2.select raised ValueError: x"]},
                                "killed", True)):
        runs = []

        def run(copy, command, rows, limits=None, stop=True, bad=bad, runs=runs, **kw):
            runs.append(list(rows))
            return [{"row": r, **(bad if r == "b/y" else {"rc": 0})} for r in rows]

        monkeypatch.setattr(gm, "run_rows", run)
        got = gm.score_checker(Path("."), base, m)
        assert got["status"] == status and got["by"] == "b/y", (bad, got)
        assert runs == [["a/x", "b/y"], *([["b/y"]] if again else [])], (bad, runs)


def test_a_driver_killed_by_a_signal_in_a_row_kills_the_mutant(gm, tmp_path):
    """The driver ended by a signal in the middle of a row (the system's out-of-memory
    killer sends SIGKILL, as the harness's own time limit does) fails that row: it read as
    a pass when only a time limit's SIGKILL was expected."""
    copy = tmp_path / "copy"
    (copy / "benchmarks").mkdir(parents=True)
    (copy / "benchmarks" / "generated_mutation.py").write_text(
        "import json, os, signal, sys\n"
        "print(json.dumps({'start': 'a/x'}), flush=True)\n"
        "print(json.dumps({'row': 'a/x', 'rc': 0, 'seconds': 0.0}), flush=True)\n"
        "print(json.dumps({'start': 'b/y'}), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    got = gm.run_rows(copy, "standard", ["a/x", "b/y"], {"a/x": 60.0, "b/y": 60.0})
    assert got[0]["rc"] == 0 and got[-1]["row"] == "b/y" and got[-1]["rc"] == "exit -9", got


def test_a_baseline_out_of_memory_stops_naming_the_cap(gm, tmp_path, monkeypatch):
    """The baselines run under MEMORY_CAP as the mutants do: a row or test of the unmutated
    tree out of memory under it stops the run, naming the cap (every mutant would read
    "memory" there; a row merely failing is recorded as not passing)."""
    from proofs.registry import SUBJECTS

    rows = [f"{s}/{k}" for s, subj in SUBJECTS.items() for k in subj.declares]
    monkeypatch.setattr(gm, "run_rows", lambda copy, command, names, **kw: [
        {"row": n, "rc": 1 if n == rows[1] else 0, "seconds": 1.0,
         "errors": ["property 'x' raised MemoryError: "] if n == rows[1] else []}
        for n in names])
    with pytest.raises(SystemExit, match=r"1 rows ran out of memory under the 4 GiB cap"):
        gm.checker_baseline(tmp_path, "fedmarket prove --standard", None, tmp_path)

    copy = tmp_path / "copy"
    (copy / "tests").mkdir(parents=True)
    (copy / "tests" / "test_hog.py").write_text(
        "def test_hog():\n    b = bytearray(1024 * 2**20)\n    b[-1] = 1\n")
    monkeypatch.setattr(gm, "MEMORY_CAP", 768 * 2**20)
    with pytest.raises(SystemExit, match=r"1 tests ran out of memory under the 0.75 GiB cap"):
        gm.tests_baseline(copy, "tests", tmp_path)


FORKS = '''\
import os

from mechanisms.contain import Limit, call_rule


def helper():
    return 3  # CHILD: called by the child only


def forks():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        x = helper()  # CHILD: the forking frame, after the fork
        os.write(w, bytes([x]))
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)


def rule(x):
    return x + 1  # CHILD: a rule run in mechanisms/contain.py's child, under a limit


def contained():
    with Limit(60.0):
        return call_rule("rule", "rule", rule, 1)


def after():
    return 0  # the next row
'''

MEASURE = '''\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("gm", sys.argv[1])
gm = importlib.util.module_from_spec(spec)
sys.modules["gm"] = gm
spec.loader.exec_module(gm)
children = sys.argv[3] == "1"
cov = gm.measure(sys.argv[2], "pkg", children)
import pkg
cov.switch_context("row/a")
pkg.forks()
assert pkg.contained() == 2
got = gm.gather_children(cov, sys.argv[2]) if children else (0, 0)
cov.switch_context("row/b")
pkg.after()
cov.stop()
cov.save()
print(list(got))
'''


@pytest.mark.parametrize("children", [True, False], ids=["followed", "today"])
def test_the_map_follows_forked_children(gm, tmp_path, children):
    """The checker's baseline follows forked children: a line run only in a child (after
    ``os.fork`` in the forking function, in a function the child calls, and in a rule run
    in mechanisms/contain.py's child under a time limit) is in the map under the row that
    forked (never the empty context, which would read as import-time code of every row).
    The map of the driver's process alone (``children=False``, the harness before this)
    lacks them: the generated mutants 22641b00ac and 83345ec98e read "not executed" so."""
    import json
    import os
    import subprocess

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(FORKS)
    (tmp_path / "measure.py").write_text(MEASURE)
    data = tmp_path / "rows.coverage"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    r = subprocess.run([sys.executable, "measure.py", str(ROOT / "benchmarks" /
                        "generated_mutation.py"), str(data), "1" if children else "0"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = gm._contexts(data, tmp_path)["pkg/__init__.py"]
    child = [n for n, text in enumerate(FORKS.splitlines(), 1) if "# CHILD" in text]
    assert len(child) == 3
    fork = next(n for n, t in enumerate(FORKS.splitlines(), 1) if "os.fork()" in t)
    assert lines[fork] == ["row/a"]  # the parent's own line, either way
    nxt = next(n for n, t in enumerate(FORKS.splitlines(), 1) if "return 0" in t)
    assert lines[nxt] == ["row/b"]
    if children:
        assert {n: lines.get(n) for n in child} == {n: ["row/a"] for n in child}
        assert json.loads(r.stdout) == [2, 0]  # one data file per child, gathered, readable
        left = sorted(f.name for f in gm._data_files(data))  # the driver's, the children's
        assert len(left) == 2 and left[0] == "rows.coverage-children", left
    else:
        assert not any(n in lines for n in child), lines


def test_the_rows_that_start_children_are_measured_again_and_merged(gm, tmp_path,
                                                                     monkeypatch):
    """--children: the rows whose map executed a child-starting line (os.fork in
    mechanisms/contain.py, any line of mechanisms/processes.py; not at import) are run again
    following children; their new lines join the map under their rows, the baseline says
    so, and a row whose verdict changed stops it. The checker's "not executed" decided on
    the old map are those scored again, and the page says which were decided so."""
    sites = gm.child_sites(ROOT)
    fork = next(n for n in sorted(sites["mechanisms/contain.py"])
                if "os.fork()" in (ROOT / "mechanisms/contain.py").read_text().splitlines()[n - 1])
    proc = min(sites["mechanisms/processes.py"])
    base = {"command": "fedmarket prove --standard", "rows": ["a/x", "b/y", "c/z", "d/w"],
            "seconds": [1.0] * 4, "passes": [True, True, False, True],
            "lines": {"mechanisms/contain.py": {str(fork): [-1, 1], "1": [0]},
                      "mechanisms/processes.py": {str(proc): [-1, 2]},
                      "mechanisms/other.py": {"5": [3]}}}
    assert gm.child_rows(base, ROOT) == ["b/y", "c/z"]  # not the import (-1), not a/x

    ran = []

    def rows(copy, command, names, **kw):
        ran.append((names, kw))
        return [{"row": n, "rc": 0 if n == "b/y" else 1, "seconds": 2.0, "children": 3,
                 "unreadable": 0} for n in names]

    monkeypatch.setattr(gm, "run_rows", rows)
    monkeypatch.setattr(gm, "_contexts", lambda data, copy: {
        "mechanisms/contain.py": {244: ["b/y"], fork: ["b/y"]},
        "mechanisms/processes.py": {64: ["c/z", ""]},
        "mechanisms/other.py": {5: ["d/w"]}})  # d/w was not run again: not merged
    new, change = gm.follow_children(tmp_path, base, ["b/y", "c/z"], tmp_path)
    assert ran[0][0] == ["b/y", "c/z"] and ran[0][1]["children"] is True
    assert new["lines"]["mechanisms/contain.py"]["244"] == [1]
    assert new["lines"]["mechanisms/contain.py"][str(fork)] == [-1, 1]
    assert new["lines"]["mechanisms/processes.py"]["64"] == [2]  # "" (import) not merged
    assert new["lines"]["mechanisms/other.py"] == {"5": [3]}
    assert new["map"] == gm.CHILDREN and new["children_rows"] == ["b/y", "c/z"]
    assert new["seconds"] == base["seconds"] and base.get("map") is None  # base unchanged
    assert change["lines_added"] == 2 and change["children"] == 6
    assert change["added"] == {"mechanisms/contain.py": "244", "mechanisms/processes.py": "64"}
    base["passes"][2] = True  # c/z passed in the baseline, fails now: nothing merged
    with pytest.raises(SystemExit, match=r"1 rows ran otherwise than in the baseline: c/z"):
        gm.follow_children(tmp_path, base, ["b/y", "c/z"], tmp_path)
    with pytest.raises(SystemExit, match="no such row"):
        gm.follow_children(tmp_path, base, ["z/z"], tmp_path)

    unseen = gm._unseen_in_children
    assert unseen({"status": "not executed"})  # a result written before "map" existed
    assert unseen({"status": "not executed", "map": "parent"})
    assert not unseen({"status": "not executed", "map": gm.CHILDREN})
    assert not unseen({"status": "not executed", "why": "annotation"})
    assert not unseen({"status": "survived"}) and not unseen(None)


def test_children_rewrites_the_stored_baseline_keeping_the_first(gm, tmp_path, monkeypatch):
    """--children: the stored checker baseline of this code version and command is measured
    again and written back in place, the map of the driver's process kept beside it; a
    baseline that follows children already is left alone; none stored: a clear error."""
    import json

    monkeypatch.setattr(gm, "BASELINES", tmp_path)
    monkeypatch.setattr(gm.named, "copy_tree", lambda copy: None)
    with pytest.raises(SystemExit, match="no stored checker baseline"):
        gm.rebaseline_children("c0de", "fedmarket prove --standard", [])
    path = gm.baseline_path("checker", "c0de", "fedmarket prove --standard")
    base = {"rows": ["a/x"], "lines": {}, "seconds": [1.0], "passes": [True]}
    path.write_text(json.dumps(base))
    calls = []

    def follow(copy, b, rows, work):
        calls.append(rows)
        return {**b, "map": gm.CHILDREN, "children_rows": rows}, {"rows": rows}

    monkeypatch.setattr(gm, "follow_children", follow)
    monkeypatch.setattr(gm, "child_rows", lambda b, root: ["a/x"])
    assert gm.rebaseline_children("c0de", "fedmarket prove --standard", [])["rows"] == ["a/x"]
    assert json.loads(path.read_text())["map"] == gm.CHILDREN
    assert json.loads(path.with_suffix(".parent.json").read_text()) == base
    assert gm.rebaseline_children("c0de", "fedmarket prove --standard", []) is None
    assert calls == [["a/x"]]  # the second call found it done
    gm.rebaseline_children("c0de", "fedmarket prove --standard", ["b/y"])  # rows named: run
    assert calls[-1] == ["b/y"]
    assert json.loads(path.with_suffix(".parent.json").read_text()) == base  # the first kept


def test_the_page_names_the_not_executed_decided_on_the_parent_map(gm):
    """A scored mutant the checker found "not executed" on a map of the driver's process
    only is named on the page as such; decided on a map that follows children, or argued
    equivalent, it is not."""
    import copy
    import json

    summary = json.loads((ROOT / "docs" / "mutation_generated.json").read_text())
    summary["mutants"] = [r for r in summary["mutants"] if "incompetent" not in r][:3]
    r = summary["mutants"][0]
    r["checker"] = {"status": "not executed", "rows": 0, "of": 0, "seconds": 0.0}
    summary["equivalents"] = {}
    summary["sampled"] = 3
    said = "were decided on a coverage map of the driver's process only"
    assert f"1 of the checker's \"not executed\" ({r['id']}) {said}" in gm.render(summary)
    followed = copy.deepcopy(summary)
    followed["mutants"][0]["checker"]["map"] = gm.CHILDREN
    assert said not in gm.render(followed)
    argued = copy.deepcopy(summary)
    argued["equivalents"] = {r["key"]: "an argument"}
    assert said not in gm.render(argued)
