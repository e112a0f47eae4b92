"""Every code block in docs/ and README.md runs, and so do the modules' doctests."""

import doctest
import importlib
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
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


# Pages whose blocks run for minutes (searches, sweeps, training, deployments) are the slow
# tier; every other page's blocks run in the default tier.
SLOW_PYTHON = {"tutorial-design-a-rule.md", "tutorial-prototype-a-rule.md", "howto-sweep.md"}
SLOW_BASH = {"howto-sweep.md"}


def _tiered(pages, slow):
    return [pytest.param(p, id=p.name, marks=(pytest.mark.slow,) if p.name in slow else ())
            for p in pages]


def test_the_slow_pages_exist():
    """A renamed page must not leave a stale name behind (its blocks would move tiers)."""
    names = {p.name for p in PAGES}
    assert SLOW_PYTHON <= names and SLOW_BASH <= names


def _user_modules() -> set[str]:
    """Modules imported from a temporary folder: a user's module that a test wrote in its
    own tmp_path (``designed_rule``, ``mymod``). A page that names such a module
    ("designed_rule:payments") after writing its own must import its own, as it would in a
    fresh session, not one another test left in ``sys.modules``."""
    tmp = Path(tempfile.gettempdir()).resolve()
    # a checkout or an environment may itself live in the temporary folder (a fresh clone in
    # /tmp): its modules (numpy, sims) are never a test's
    ours = {Path(p).resolve() for p in (ROOT, sys.prefix, sys.base_prefix, sys.exec_prefix)}
    out = set()
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if not path:
            continue
        where = Path(path).resolve()
        if where.is_relative_to(tmp) and not any(where.is_relative_to(o) for o in ours):
            out.add(name)
    return out


@pytest.mark.parametrize("page", _tiered(PAGES, SLOW_PYTHON))
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # a page's sys.path.insert is undone
    for name in _user_modules():
        monkeypatch.delitem(sys.modules, name)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    try:
        for body in blocks(page, "python"):
            exec(compile(body, str(page), "exec"), namespace)
    finally:  # nor does the page leave its own modules to the tests after it
        for name in _user_modules():
            sys.modules.pop(name, None)


def test_a_page_runs_without_the_modules_other_tests_wrote(tmp_path, monkeypatch):
    """A module another test wrote in its tmp_path (tutorial-design-a-rule.md names
    "designed_rule:payments", as tests/test_design.py does with a different rule) is one the
    page runner drops before a page: the page imports its own."""
    (tmp_path / "stale_t_docs.py").write_text("payments = 'stale'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("stale_t_docs")
    try:
        assert "stale_t_docs" in _user_modules()
        assert "numpy" not in _user_modules() and "sims" not in _user_modules()
    finally:
        sys.modules.pop("stale_t_docs", None)


@pytest.mark.parametrize(
    "page", _tiered([p for p in PAGES if p.parent.name == "docs" and blocks(p, "bash")],
                    SLOW_BASH),
)
def test_bash_blocks_run(page, tmp_path):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for body in blocks(page, "bash"):
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr


PACKAGES = ("mechanisms", "learning", "proofs", "sims")


def _modules(packages=PACKAGES):
    """Every module of ``packages`` (the toolkit's four by default), by dotted name."""
    for name in packages:
        pkg = importlib.import_module(name)
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            yield info.name


def _doctest(module) -> doctest.TestResults:
    return doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_doctests(name):
    failed, _ = _doctest(importlib.import_module(name))
    assert failed == 0


def _with_examples():
    """Dotted names of the toolkit's modules whose source holds a doctest prompt."""
    for name in PACKAGES:
        for path in sorted((ROOT / name).rglob("*.py")):
            if ">>> " in path.read_text():
                parts = path.relative_to(ROOT).with_suffix("").parts
                yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_with_examples_has_its_doctests_collected_and_run():
    """No module's examples go unchecked: each module whose source has a ``>>>`` is among
    test_doctests' modules and doctest finds examples in it. The former collection
    (mechanisms and sims only) is rejected: it missed learning.flower.wire."""
    with_examples = sorted(_with_examples())
    assert "learning.flower.wire" in with_examples
    collected = set(_modules())
    assert set(with_examples) <= collected
    assert not set(with_examples) <= set(_modules(("mechanisms", "sims")))
    for name in with_examples:
        assert _doctest(importlib.import_module(name)).attempted > 0, name


def test_a_broken_doctest_fails_the_check(user_module):
    """The check test_doctests applies fails on a module whose example prints something else,
    and passes on the same module with the example right."""
    source = '''def double(x):
    """
    >>> double(2)
    {}
    """
    return 2 * x
'''
    user_module("doctest_wrong", source.format(5))
    import doctest_wrong

    assert _doctest(doctest_wrong) == (1, 1)
    user_module("doctest_right", source.format(4))
    import doctest_right

    assert _doctest(doctest_right) == (0, 1)
