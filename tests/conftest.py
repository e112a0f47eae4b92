import sys

import pytest

from proofs.profiles import load_profile

load_profile()  # dev / ci / nightly ship with the package (proofs/profiles.py)


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
