"""Flower integration (Message API, tested with flwr 1.42): the iPFL and CPL mechanisms as server
strategies, a ClientApp whose node owns its data and type, and a ready Flower app.

Optional extra: ``pip install fedmarket[flower]``. The strategies and the app need flwr;
:mod:`learning.flower.provenance` (re-checking a finished run) needs numpy only, so this
package imports its submodules lazily.
"""

__all__ = ["CplStrategy", "IpflStrategy", "Registry"]


def __getattr__(name):
    if name in __all__:
        from . import strategies

        return getattr(strategies, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
