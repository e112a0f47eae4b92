import sys

import pytest

from proofs.profiles import load_profile

load_profile()  # dev / ci / nightly ship with the package (proofs/profiles.py)


def pytest_addoption(parser):
    parser.addoption("--flower-full", action="store_true",
                     help="also run the tests marked flower_full (more Flower deployments on "
                          "127.0.0.1, minutes each; make test-flower)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--flower-full"):
        return
    skip = pytest.mark.skip(reason="a further Flower deployment: run with --flower-full "
                                   "(make test-flower)")
    for item in items:
        if "flower_full" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _forget_modules_written_by_the_test(tmp_path_factory):
    """Tests and doc pages write rule modules (``myrules.py``) into their temporary folder and
    import them; a module cached in sys.modules would shadow the next test's module of the same
    name (a doc page's ``myrules`` once hid test_sweep's ``myrules:top_one``)."""
    yield
    root = str(tmp_path_factory.getbasetemp())
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(root):
            del sys.modules[name]


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``user_module(name, source)``: a module of the user's own, written into the test's
    temporary folder and importable by name (the autouse fixture above forgets it afterwards);
    returns the folder."""

    def write(name: str, source: str):
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(name, None)
        return tmp_path

    return write
