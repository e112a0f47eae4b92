"""Every code block in docs/ and README.md runs, and so do the modules' doctests."""

import doctest
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(page: Path, lang: str):
    return [body for kind, body in FENCE.findall(page.read_text()) if kind == lang]


def test_docs_laid_out_by_kind():
    kinds = {p.name.split("-")[0] for p in PAGES if p.parent.name == "docs"}
    assert {"tutorial", "howto", "explanation", "reference"} <= kinds


def test_readme_starts_with_the_two_commands():
    """The README opens with exactly `make demo` and `make test`, each a target of the Makefile."""
    text = (ROOT / "README.md").read_text()
    first = FENCE.search(text)
    assert first is not None and text[:first.start()].strip() == "# fedmarket"
    commands = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert [c for c in commands if c] == ["make demo", "make test"]
    targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M)
    assert {"demo", "test"} <= set(targets)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for body in blocks(page, "python"):
        exec(compile(body, str(page), "exec"), namespace)


@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.parent.name == "docs" and blocks(p, "bash")],
    ids=lambda p: p.name,
)
def test_bash_blocks_run(page, tmp_path):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for body in blocks(page, "bash"):
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr


def _modules():
    import mechanisms
    import sims

    for pkg in (mechanisms, sims):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_doctests(name):
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0
