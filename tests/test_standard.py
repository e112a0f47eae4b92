"""The standard run (proofs.standard): one named definition, per-row budgets, the CLI flag."""

import dataclasses
import subprocess
import sys

import pytest

from proofs.report import header, run_report
from proofs.standard import STANDARD, StandardRun


def test_the_standard_run_is_one_frozen_definition():
    assert STANDARD.command() == "fedmarket prove --standard"
    assert STANDARD.engine == "batch" and STANDARD.seed == 0 and STANDARD.exhaustive
    with pytest.raises(dataclasses.FrozenInstanceError):
        STANDARD.examples = 10  # type: ignore[misc]
    with pytest.raises(TypeError):
        STANDARD.budgets["box2/thm2"] = 1  # type: ignore[index]


def test_a_row_takes_its_own_budget_then_every_subjects_then_the_default():
    run = StandardRun(examples=50, budgets={"local/thm2": 7, "*/thm2": 9},
                      time_limits={"*/lemma1": 3.0})
    assert run.budget("local", "thm2") == 7
    assert run.budget("box2", "thm2") == 9
    assert run.budget("box2", "budget_balance") == 50
    assert run.limit("box2", "lemma1") == 3.0 and run.limit("box2", "thm2") is None


def test_run_report_checks_each_row_to_its_own_budget():
    run = StandardRun(examples=30, budgets={"box2/budget_balance": 12}, exhaustive=False,
                      jobs=1)
    rows = run_report(subjects=["box2"], properties=["budget_balance", "no_deficit"],
                      engine="batch", standard=run)
    got = {r.property.key: (r.max_examples, r.discriminating) for r, _ in rows}
    assert got == {"budget_balance": (12, 12), "no_deficit": (30, 30)}
    text = header(run.examples, run.seed, run.engine, None, False, rows, jobs=2,
                  standard=run)
    assert "`fedmarket prove --standard --jobs 2 --markdown" in text
    assert "The standard run (engine batch, seed 0, 30 discriminating" in text


def test_the_cli_refuses_what_the_standard_run_fixes_in_one_line():
    out = subprocess.run([sys.executable, "-m", "sims.cli", "prove", "--standard",
                          "--examples", "5"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--standard fixes --examples" in lines[0], out.stderr


def test_the_page_lists_every_row_with_its_own_budget():
    """docs/reference-proofs.md ("The standard run") lists the rows with a budget of their
    own and the budget, between its standard-budgets markers: exactly STANDARD.budgets."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "reference-proofs.md").read_text()
    block = text.split("<!-- standard-budgets:start -->")[1].split(
        "<!-- standard-budgets:end -->")[0]
    rows = [line.split("|")[1:3] for line in block.strip().splitlines()[2:]]
    listed = {key.strip().strip("`"): int(budget.strip().replace(",", ""))
              for key, budget in rows}
    assert listed == dict(STANDARD.budgets)
