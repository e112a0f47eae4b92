"""The branch coverage of mechanisms/ under the standard run (benchmarks/coverage_standard.py;
the measuring run itself is long and manual): the page shows what the committed data file
holds, every uncovered branch carries a reason, and the script's figures are coverage.py's."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "coverage_standard.json"


@pytest.fixture(scope="module")
def cs():
    path = ROOT / "benchmarks" / "coverage_standard.py"
    spec = importlib.util.spec_from_file_location("coverage_standard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def summary():
    return json.loads(DATA.read_text())


def test_the_page_shows_the_committed_figures(cs, summary):
    """docs/reference-proofs.md's block is what the script renders from the data file
    (regenerate: python benchmarks/coverage_standard.py --no-run)."""
    page = (ROOT / "docs" / "reference-proofs.md").read_text()
    start, end = cs.MARKERS
    block = page.split(start, 1)[1].split(end, 1)[0].strip()
    assert block == cs.render(summary, cs.load_reasons()).strip()


def test_the_totals_add_up_and_every_uncovered_branch_is_listed(summary):
    t = summary["totals"]
    for key in t:
        assert t[key] == sum(f[key] for f in summary["files"].values())
    missing = t["branches"] - t["covered_branches"]
    assert missing == len(summary["uncovered"])
    per_file = {}
    for b in summary["uncovered"]:
        per_file[b["file"]] = per_file.get(b["file"], 0) + 1
    for rel, f in summary["files"].items():
        assert f["branches"] - f["covered_branches"] == per_file.get(rel, 0), rel
        assert (ROOT / rel).exists(), rel  # every measured file is a file of mechanisms/
    assert set(summary["files"]) == {p.relative_to(ROOT).as_posix()
                                     for p in (ROOT / "mechanisms").rglob("*.py")}


def test_every_uncovered_branch_has_a_reason(cs, summary):
    reasons = cs.load_reasons()
    lacking = [f"{b['file']}:{b['line']} ({b['function']}: {b['text']})"
               for b in summary["uncovered"] if cs.reason_for(b, reasons) == cs.NO_REASON]
    assert not lacking, "add them to benchmarks/coverage_reasons.toml:\n" + "\n".join(lacking)


def test_a_reason_matches_the_most_specific_entry(cs):
    reasons = [{"file": "f.py", "why": "file"},
               {"file": "f.py", "function": "g", "why": "function"},
               {"file": "f.py", "function": "g", "text": "if x:", "why": "text"}]
    branch = {"file": "f.py", "function": "g", "text": "if x:", "line": 3, "to": 4}
    assert cs.reason_for(branch, reasons) == "text"
    assert cs.reason_for({**branch, "text": "if y:"}, reasons) == "function"
    assert cs.reason_for({**branch, "function": "h"}, reasons) == "file"
    assert cs.reason_for({**branch, "file": "e.py"}, reasons) == cs.NO_REASON


def test_the_figures_are_coverage_py_s(cs, tmp_path):
    """The script's summary of a measured run equals coverage.py's own report: a small
    program over a module with a branch taken one way only."""
    pkg = tmp_path / "mechanisms"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("def f(x):\n    if x > 0:\n        return 1\n    return 2\n")
    (tmp_path / "main.py").write_text("from mechanisms.m import f\nf(1)\n")
    rc = tmp_path / "rc"
    rc.write_text(f"[run]\nbranch = True\nsource = {pkg}\n"
                  f"data_file = {tmp_path / '.coverage'}\n")
    cov = [sys.executable, "-m", "coverage"]
    subprocess.run([*cov, "run", f"--rcfile={rc}", "main.py"], cwd=tmp_path, check=True)
    subprocess.run([*cov, "json", f"--rcfile={rc}", "-q", "-o", "c.json"], cwd=tmp_path,
                   check=True)
    report = json.loads((tmp_path / "c.json").read_text())
    s = cs.summarise(report, 1.0, "prove", 5, root=tmp_path)
    assert s["files"]["mechanisms/m.py"] == {"branches": 2, "covered_branches": 1,
                                             "statements": 4, "covered_statements": 3}
    assert s["uncovered"] == [{"file": "mechanisms/m.py", "line": 2, "to": 4,
                               "function": "f", "text": "if x > 0:"}]
    assert s["variant"] == "reduced: 5 per row" and "--examples 5" in s["command"]
    assert s["code_version"] == cs.code_version(tmp_path)


def test_the_measured_command_is_the_standard_run_or_its_reduced_variant(cs):
    assert cs.prove_args(None) == ["prove", "--standard"]
    args = cs.prove_args(2000)
    assert args[:2] == ["prove", "--engine"] and "--exhaustive" in args
    assert args[args.index("--examples") + 1] == "2000"
    assert args[args.index("--jobs") + 1] == "2" and args[args.index("--seed") + 1] == "0"


def test_the_figures_before_the_draws_are_the_recorded_ones(cs):
    """The page's "before" paragraph quotes docs/coverage_standard_before.json."""
    before = json.loads((ROOT / "docs" / "coverage_standard_before.json").read_text())
    page = " ".join((ROOT / "docs" / "reference-proofs.md").read_text().split())
    t = before["totals"]
    assert (f"{t['covered_branches']} of {t['branches']} branches "
            f"({cs.percent(t['covered_branches'], t['branches'])})") in page
    assert (f"statements {t['covered_statements']:,} of {t['statements']:,} "
            f"({cs.percent(t['covered_statements'], t['statements'])})") in page
    for rel in ("mechanisms/gains.py", "mechanisms/ipfl/selection.py",
                "mechanisms/ipfl/thresholds.py", "mechanisms/processes.py"):
        f = before["files"][rel]
        assert f"{rel} {f['covered_branches']} of {f['branches']}" in page, rel
    assert before["command"] in page


@pytest.mark.parametrize("name, files", [
    # before the bad-input and containment properties (511b856)
    ("coverage_standard_before_properties.json", ()),
    # before cpl_one_game, one_market and one_path's exact options (7565fbf)
    ("coverage_standard_before_one_game.json",
     ("mechanisms/cpl/equilibrium.py", "mechanisms/cpl/response.py",
      "mechanisms/ipfl/selection.py")),
    # before the faults, behaviours and properties of 6f7a4fe..e33bb40 (41ba63c)
    ("coverage_standard_before_faults.json",
     ("mechanisms/contain.py", "mechanisms/lookup.py", "mechanisms/ipfl/market.py",
      "mechanisms/gains.py", "mechanisms/errors.py", "mechanisms/processes.py")),
    # before the checks on the last reachable branches (3bf0a7d, mechanisms/ of 702ddc0)
    ("coverage_standard_before_branches.json",
     ("mechanisms/processes.py", "mechanisms/cpl/equilibrium.py", "mechanisms/cpl/game.py",
      "mechanisms/distances.py", "mechanisms/errors.py", "mechanisms/ipfl/market.py",
      "mechanisms/ipfl/selection.py", "mechanisms/lia.py", "mechanisms/lookup.py")),
])
def test_the_earlier_figures_the_page_quotes_are_the_recorded_ones(cs, name, files):
    """The page quotes docs/<name>, the reduced variant measured before a step: its totals,
    and the files the step changed."""
    before = json.loads((ROOT / "docs" / name).read_text())
    page = " ".join((ROOT / "docs" / "reference-proofs.md").read_text().split())
    t = before["totals"]
    assert (f"{t['covered_branches']} of {t['branches']} branches "
            f"({cs.percent(t['covered_branches'], t['branches'])}; statements "
            f"{t['covered_statements']:,} of {t['statements']:,}") in page
    for rel in files:
        f = before["files"][rel]
        assert f"{rel} {f['covered_branches']} of {f['branches']}" in page, rel
