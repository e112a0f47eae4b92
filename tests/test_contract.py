"""The contract suite: every property every subject declares, checked both ways.

Declared True: no counterexample in the budget. Declared False: the checker finds one by itself
(fixed seed, fixed budget), and the shrunk instance re-runs as a failure.
"""

import os

import pytest

from proofs import SUBJECTS, check_declared

BUDGET = {"dev": 60, "ci": 150, "nightly": 100_000}.get(
    os.environ.get("HYPOTHESIS_PROFILE", "dev"), 60)

CASES = [
    pytest.param(s, k, id=f"{s}-{k}")
    for s, subject in SUBJECTS.items()
    for k in subject.declares
]


@pytest.mark.parametrize(("subject", "key"), CASES)
def test_declared_property(subject, key):
    subj = SUBJECTS[subject]
    report, as_declared = check_declared(subj, key, max_examples=BUDGET, seed=0)
    declared = subj.declares[key]
    detail = report.counterexample.code() if report.counterexample else ""
    assert as_declared, f"{subject}/{key}: declared {declared}, got {report.verdict}\n{detail}"
    if not declared:
        assert report.counterexample.rerun() > 0  # the shrunk instance still breaks it
        assert report.examples <= BUDGET


def test_every_property_is_declared_somewhere():
    from proofs import PROPERTIES

    declared = {k for s in SUBJECTS.values() for k in s.declares}
    assert declared == set(PROPERTIES)


def test_checker_is_reproducible_across_processes():
    import subprocess
    import sys

    code = ("from proofs import SUBJECTS, check_declared;"
            "r, _ = check_declared(SUBJECTS['local'], 'truthful_N', max_examples=50, seed=3);"
            "print(r.examples); print(r.counterexample.code())")
    a = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    r, _ = check_declared(SUBJECTS["local"], "truthful_N", max_examples=50, seed=3)
    assert a.stdout == f"{r.examples}\n{r.counterexample.code()}\n"
