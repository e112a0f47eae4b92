"""Which rule, with incentives in it (issue 31, part 6): the checker's scan reports the
largest violation found over the whole budget; `prove` on a subject that declares nothing
counts its counterexamples."""

import textwrap

import pytest

from proofs import PROPERTIES, IpflMechanism, check
from proofs.checker import CheckerInputError
from sims.cli import main
from sims.design.space import linear_rule

MIDPOINT = linear_rule({"marginal": 0.5, "cost": 0.5}, clip=True, name="midpoint")


def test_scan_reports_the_largest_violation_over_the_budget():
    """Without scan the batch engine stops at the first counterexample (its largest
    violation is the largest seen up to there); with scan it checks the whole budget, the
    counterexample stays the first one found, and the largest violation is over every
    example: at least the stopped run's, and the failures are counted. Known bad for the
    count: a property that holds has none."""
    subject = IpflMechanism("midpoint", "local", payments=MIDPOINT)
    prop = PROPERTIES["truthful_K_under"]
    first = check(subject, prop, max_examples=600, seed=3, engine="batch")
    whole = check(subject, prop, max_examples=600, seed=3, engine="batch", scan=True)
    assert first.verdict == whole.verdict == "counterexample"
    assert first.discriminating < 600 == whole.discriminating
    assert whole.first_failure == first.first_failure
    assert whole.counterexample.violation == first.counterexample.violation
    assert whole.largest_violation > 10 * first.largest_violation
    assert 0 < whole.extra["failures"] <= whole.discriminating
    holds = check(subject, PROPERTIES["budget_balance"], max_examples=600, seed=3,
                  engine="batch", scan=True)
    assert holds.verdict == "holds" and holds.extra["failures"] == 0
    with pytest.raises(CheckerInputError, match="scan"):
        check(subject, prop, max_examples=10, seed=3, engine="hypothesis", scan=True)


def test_prove_counts_the_counterexamples_of_a_subject_that_declares_nothing(
        tmp_path, monkeypatch, capsys):
    """'N of N checks as declared' is true of rows that declare nothing; the line also says
    how many of them found a counterexample, and --scan prints the largest violation and
    the failures of each row."""
    (tmp_path / "mid.py").write_text(textwrap.dedent("""
        from sims.design.space import linear_rule
        payments = linear_rule({"marginal": 0.5, "cost": 0.5}, clip=True, name="mid")
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.syspath_prepend(str(tmp_path))
    props = ["budget_balance", "individual_rationality", "thm2", "truthful_K_under"]
    args = ["prove", "--subject", "mid:payments", "--engine", "batch", "--examples", "300"]
    for p in props:
        args += ["--property", p]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "4 of 4 checks as declared; 4 of them check claims nobody declared: 2 found a " \
           "counterexample, 2 holds" in out
    assert main([*args, "--scan"]) == 0
    out = capsys.readouterr().out
    assert "failures" in out and "largest_violation" in out
    row = next(ln for ln in out.splitlines() if "No gain from understating K" in ln)
    assert row.split("│")[-2].strip() not in ("", "None", "0")  # failures counted
    # --scan on the built-in subjects (they declare their claims) is misuse: one line
    assert main(["prove", "--scan", "--engine", "batch", "--examples", "10"]) == 2
    assert "--scan" in capsys.readouterr().err
