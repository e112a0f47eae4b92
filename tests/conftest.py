import pickle
import sys

import numpy as np
import pytest

from proofs.profiles import load_profile, module_independent_draws

load_profile()  # dev / ci / nightly ship with the package (proofs/profiles.py)


@pytest.fixture(autouse=True)
def _draws_independent_of_what_was_imported():
    """Hypothesis draws constants from the source of every local module imported so far
    (proofs.profiles.module_independent_draws): the same derandomised test then drew other
    examples after other files' tests had imported more modules (or written their own rule
    modules) -- test_thresholds' vectorised[sqrt] failed in a combined run and passed alone.
    Every test draws without them: the same examples alone and in any combination."""
    with module_independent_draws():
        yield


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


def write_cifar_batches(folder, n_train=8, n_test=12, seed=0):
    """The cifar-10-batches-py layout: five training batches and a test batch, each a pickled
    dict with b'data' (n, 3072) uint8, channel-major, and b'labels'."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, n in [*((f"data_batch_{i}", n_train) for i in range(1, 6)), ("test_batch", n_test)]:
        x = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        y = [int(v) for v in np.arange(n) % 10]  # every class present, as a list like CIFAR's
        with open(folder / name, "wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"labels": y, b"data": x,
                         b"filenames": [b"x.png"] * n}, f, protocol=2)
        out[name] = (x, y)
    return out


@pytest.fixture
def cifar_batches():
    """:func:`write_cifar_batches`: a small CIFAR-10 in the standard python-batch format."""
    return write_cifar_batches
