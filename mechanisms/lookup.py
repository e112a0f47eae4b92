"""One way to name a rule of your own, everywhere (``ipfl.clear``, ``cpl.apply_pricing``, the
checker's subjects, sweep specs, ``fedmarket clear``/``sweep``/``prove``):

* a built-in name from the table of its kind (``"local"``, ``"vcg"``, ``"uniform"``, ...);
* a callable;
* ``"package.module:function"``, imported with :mod:`importlib` from ``sys.path``. The
  ``fedmarket`` command puts the current folder first on ``sys.path`` (and ``sweep`` the spec
  file's folder before it), so ``--rule mymod:fn`` finds ``./mymod.py``; from Python, the
  folder of the script you run (or the current folder in an interactive session) is there.

A rule that imports but cannot be called as a rule (``os:getcwd``) or that raises is answered
with :class:`~mechanisms.errors.RuleFailed` naming the rule and its own error
(:func:`call_rule`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping

from .errors import FedmarketError, MarketInputError, RuleFailed

__all__ = ["ARITY", "call_rule", "describe", "guarded", "load_callable", "lookup", "rule_name"]


def load_callable(spec: str, field: str = "rule") -> Callable:
    """Import ``"package.module:function"``; errors name ``field``."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise MarketInputError(field, f"{spec!r}: a rule of your own is 'module:function'")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise MarketInputError(field, f"cannot import {spec!r}: {exc}") from exc
    except Exception as exc:  # the module itself raised while importing
        raise RuleFailed(field, f"importing {spec!r} raised {type(exc).__name__}: "
                                f"{exc}") from exc
    if not callable(obj):
        raise MarketInputError(field, f"{spec!r} is not callable")
    _check_arity(field, spec, obj)
    return obj


# how many positional arguments each kind of rule is called with (rules.py, apply_pricing)
ARITY = {"rule": ("rule(market, D, thresholds, prices)", 4),
         "selection": ("rule(market, D, thresholds, prices)", 4),
         "mechanism": ("rule(market, D, thresholds, prices)", 4),
         "payments": ("payments(market, A, D)", 3),
         "prices": ("prices(market, D)", 2),
         "pricing": ("rule(game)", 1)}


def _check_arity(field: str, spec: str, fn: Callable) -> None:
    """Refuse, at once, a function that cannot take a rule's arguments (``os:getcwd``,
    ``numpy:zeros`` as a selection rule); functions whose signature Python cannot read
    (some built-ins) are left to fail when called (:func:`call_rule`)."""
    if field not in ARITY:
        return
    import inspect

    shape, n = ARITY[field]
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError as exc:
        raise MarketInputError(field, f"{spec!r} is not a rule of this kind: it cannot be "
                                      f"called as {shape} ({exc})") from None


def rule_name(fn: Callable) -> str:
    """A readable name for a rule of your own: "module:qualname"."""
    mod = getattr(fn, "__module__", None) or "?"
    return f"{mod}:{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', repr(fn))}"


def lookup(field: str, spec, table: Mapping[str, Callable]) -> tuple[str, Callable]:
    """(name, function) of a rule given as a name in ``table``, ``"module:function"`` or a
    callable; anything else (None included) is a :class:`MarketInputError` naming
    ``field`` and listing the choices."""
    if callable(spec):
        return rule_name(spec), spec
    if isinstance(spec, str):
        if ":" in spec:
            return spec, load_callable(spec, field)
        if spec in table:
            return spec, table[spec]
    raise MarketInputError(field, f"unknown {spec!r}; choose one of {tuple(table)}, "
                                  "'module:function' or a callable")


def call_rule(field: str, label: str, fn: Callable, *args):
    """``fn(*args)`` for a user's rule: an expected fedmarket error passes as itself; any
    other exception (the rule's own bug, or a function that is not a rule: ``os:getcwd``
    called with a market) becomes :class:`RuleFailed` naming ``field``, the rule and the
    error, chained to the original."""
    try:
        return fn(*args)
    except FedmarketError:
        raise
    except Exception as exc:
        raise RuleFailed(field, f"{label} raised {describe(exc)}") from exc


def guarded(field: str, label: str, fn: Callable) -> Callable:
    """``fn`` wrapped so that each call goes through :func:`call_rule` (its name, module and
    signature kept: :func:`rule_name` of the wrapper is the rule's own)."""

    @functools.wraps(fn)
    def rule(*args):
        return call_rule(field, label, fn, *args)

    return rule


def describe(exc: BaseException, limit: int = 300) -> str:
    """``"TypeError: message"`` on one line, at most ``limit`` characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
