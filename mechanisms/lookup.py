"""One way to name a rule of your own, everywhere (``ipfl.clear``, ``cpl.apply_pricing``, the
checker's subjects, sweep specs, ``fedmarket clear``/``sweep``/``prove``):

* a built-in name from the table of its kind (``"local"``, ``"vcg"``, ``"uniform"``, ...);
* a callable;
* ``"package.module:function"``, imported with :mod:`importlib` from ``sys.path``. The
  ``fedmarket`` command puts the current folder first on ``sys.path`` (and ``sweep`` the spec
  file's folder before it), so ``--rule mymod:fn`` finds ``./mymod.py``; from Python, the
  folder of the script you run (or the current folder in an interactive session) is there.

A name read from data (a results store, a Flower run folder: anything not typed by the person
running the code) is data, never code: within :func:`names_from_data` a ``"module:function"``
imports only if the user named its module (``trusted``: ``--rules-from`` on the command line, the
modules of their own sweep spec); any other is refused, unimported, with
:class:`UntrustedName` (:func:`import_named`, the one import every lookup goes through).

A rule that imports but cannot be called as a rule (``os:getcwd``) or that raises is answered
with :class:`~mechanisms.errors.RuleFailed` naming the rule and its own error
(:func:`call_rule`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterable, Mapping

from .contain import call_rule, describe, must_pass
from .errors import FedmarketError, MarketInputError, RuleFailed

__all__ = ["ARITY", "UntrustedName", "call_rule", "describe", "guarded", "import_module_named",
           "import_named", "load_callable", "lookup", "named_modules", "names_from_data",
           "rule_name", "untrusted"]


class UntrustedName(MarketInputError):
    """A ``"module:function"`` read from data whose module the user did not name: refused,
    never imported (:func:`names_from_data`)."""


# the data sources being read, innermost last: (what is read, the modules the user trusts);
# process-wide (not a context variable), so threads a reader starts are held to it too
_FROM_DATA: list[tuple[str, frozenset]] = []


def _module_names(trusted: Iterable[str]) -> frozenset:
    names = [trusted] if isinstance(trusted, str) else list(trusted or ())
    for t in names:
        if not isinstance(t, str) or not all(p.isidentifier() for p in t.split(".")):
            raise MarketInputError("rules_from", f"{t!r} is not a module name (a.b.c)")
    return frozenset(names)


@contextlib.contextmanager
def names_from_data(source: str, trusted: Iterable[str] = ()):
    """Within the block, every ``"module:function"`` name is taken to be read from ``source``
    (e.g. ``"the store in results/x"``): it imports only if its module, or a package above
    it, is in ``trusted`` (modules the user named themselves); any other is refused with
    :class:`UntrustedName` before anything is imported. Built-in names and callables pass as
    ever. Nested blocks: a name must be trusted by each.

    >>> with names_from_data("the store in x"):
    ...     load_callable("os:getcwd", "payments")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mechanisms.lookup.UntrustedName: payments: 'os:getcwd' is named by the store in x, ...
    """
    _FROM_DATA.append((str(source), _module_names(trusted)))
    try:
        yield
    finally:
        _FROM_DATA.pop()


def untrusted(specs: Iterable[str], trusted: Iterable[str] = ()) -> list[str]:
    """The ``"module:function"`` names among ``specs`` (each may be a mechanism name, parts
    joined by "+") whose module is neither in ``trusted`` nor below a package in it: the
    names a :func:`names_from_data` block with ``trusted`` refuses, in order, once each.

    >>> untrusted(["local", "local+mine.rules:pay+evil:prices", "x:y"], trusted=["mine"])
    ['evil:prices', 'x:y']
    """
    trusted = _module_names(trusted)
    out: dict[str, None] = {}
    for spec in specs:
        for part in str(spec).split("+"):
            module = part.partition(":")[0].strip()
            if ":" in part and not any(module == t or module.startswith(t + ".")
                                       for t in trusted):
                out[part.strip()] = None
    return list(out)


def named_modules(specs: Iterable[str]) -> list[str]:
    """The modules the ``"module:function"`` names among ``specs`` come from (parts joined
    by "+" included), in order, once each: what a user's own spec trusts.

    >>> named_modules(["local", "local+mine.rules:pay+cost-plus", "x:y", 3])
    ['mine.rules', 'x']
    """
    out: dict[str, None] = {}
    for spec in specs:
        if isinstance(spec, str):
            for part in spec.split("+"):
                module = part.partition(":")[0].strip()
                if ":" in part and all(p.isidentifier() for p in module.split(".")):
                    out[module] = None
    return list(out)


def _refuse_untrusted(name: str, module: str, field: str) -> None:
    """The one check of the guard: UntrustedName unless every :func:`names_from_data` block
    in force trusts ``module`` (itself or a package above it)."""
    for source, trusted in _FROM_DATA:
        if not any(module == t or module.startswith(t + ".") for t in trusted):
            raise UntrustedName(field, f"{name!r} is named by {source}, not by you; fedmarket "
                                       "imports no code that data names: if you trust "
                                       f"module {module!r}, name it yourself (--rules-from "
                                       f"{module})")


def import_named(spec: str, field: str):
    """The module of ``"module:function"``, imported (``ImportError`` as from
    :func:`importlib.import_module`), unless a :func:`names_from_data` block refuses it."""
    module = spec.partition(":")[0].strip()
    _refuse_untrusted(spec, module, field)
    return importlib.import_module(module)


def import_module_named(module: str, field: str):
    """``module`` (a plain module name, e.g. a list of modules to import up front),
    imported, unless a :func:`names_from_data` block refuses it: the same guard as
    :func:`import_named`.

    >>> with names_from_data("the node config"):
    ...     import_module_named("json", "preload")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mechanisms.lookup.UntrustedName: preload: 'json' is named by the node config, not by you; ...
    >>> with names_from_data("the node config", ["json"]):
    ...     import_module_named("json", "preload").__name__
    'json'
    """
    module = str(module).strip()
    _refuse_untrusted(module, module, field)
    return importlib.import_module(module)


def load_callable(spec: str, field: str = "rule") -> Callable:
    """Import ``"package.module:function"``; errors name ``field``."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise MarketInputError(field, f"{spec!r}: a rule of your own is 'module:function'")
    try:
        obj = import_named(spec, field)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise MarketInputError(field, f"cannot import {spec!r}: {exc}") from exc
    except FedmarketError:  # refused (UntrustedName), or an expected error of the module's
        raise
    except BaseException as exc:  # the module itself raised while importing (sys.exit too)
        if must_pass(exc):
            raise
        raise RuleFailed(field, f"importing {spec!r} raised {describe(exc)}") from exc
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


def guarded(field: str, label: str, fn: Callable) -> Callable:
    """``fn`` wrapped so that each call goes through :func:`call_rule` (its name, module and
    signature kept: :func:`rule_name` of the wrapper is the rule's own)."""

    @functools.wraps(fn)
    def rule(*args):
        return call_rule(field, label, fn, *args)

    return rule
