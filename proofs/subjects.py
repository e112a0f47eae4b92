"""What the checker checks: iPFL mechanisms (a selection rule, a payment rule and a price rule,
the built-in ones or a user's own), CPL pricing rules and pFedLIA's scores and clustering,
each declaring the properties it claims. The clearing itself lives in
:func:`mechanisms.ipfl.clear`; a subject only names the rules and what it claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from mechanisms import cpl, ipfl, lia
from mechanisms.contain import call_rule, describe, must_pass
from mechanisms.errors import MarketInputError, as_real
from mechanisms.lookup import rule_name

from .core import is_builtin, registered
from .names import fresh

__all__ = ["CplPricingRule", "CplSolver", "IpflMechanism", "LiaClustering", "Settlement",
           "subject_from"]

Settlement = ipfl.Outcome  # what :meth:`IpflMechanism.settle` returns (kept name)


def _importable(f) -> tuple[str, str] | None:
    """(import line, name) for a module-level function, else None."""
    mod, qual = getattr(f, "__module__", None), getattr(f, "__qualname__", "")
    if not mod or mod == "__main__" or "<" in qual or "." in qual:
        return None
    return f"from {mod} import {qual}", qual


class _Registered:
    """Pickles a built-in subject (one of ``proofs.SUBJECTS``) by its name, so a report
    checked in a worker process comes back naming the registry's own object; any other
    subject pickles field by field (its rules must then be importable functions)."""

    def __reduce_ex__(self, protocol):
        if is_builtin(self):
            return registered, ("subject", self.name)
        return super().__reduce_ex__(protocol)


@dataclass(frozen=True, eq=False)
class IpflMechanism(_Registered):
    """An iPFL-style mechanism: a selection rule, a payment rule and a price rule.

    rule : "box2" | "local" | "exact", or your own ``rule(market, D, thresholds, prices) ->
        adjacency`` ((m, m) bool, a_ij = i buys j).
    payments : "paper" | "vcg" | "shapley" | "cost-plus", or your own ``f(market, A, D)``
        returning (m, m) remittances r_ij (paid by i to j; p_i = sum_j r_ij - sum_j r_ji,
        Eq. 13) or (m,) payments p_i directly (need not balance).
    remittances : the same as ``payments`` (kept for rules returning remittances).
    prices : "paper" | "cost-plus", or your own ``prices(market, D) -> (m, m)`` that
        selection uses.
    declares : property key -> True (claimed) / False (known not to hold).
    """

    family: ClassVar[str] = "ipfl"

    name: str
    rule: str | Callable = "local"
    remittances: Callable | None = None
    payments: str | Callable | None = None
    prices: str | Callable = "paper"
    declares: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self):  # resolve names now: a typo fails here, not mid-search
        for key in ("rule", "remittances", "payments", "prices"):  # as a user's program
            object.__setattr__(self, key, fresh(getattr(self, key)))  # would (proofs.names)
        ipfl.resolve("rule", self.rule)
        ipfl.resolve("payments", self.money)
        ipfl.resolve("prices", self.prices)

    def code(self) -> tuple[str, str] | None:
        """(imports, expression) that rebuild this mechanism, when every rule is a built-in
        name or an importable module-level function; None otherwise."""
        parts, imports = [repr(self.name)], ["from proofs import IpflMechanism"]
        for key in ("rule", "remittances", "payments", "prices"):
            f = getattr(self, key)
            if f is None or (key == "prices" and f == "paper"):
                continue
            if isinstance(f, str):
                parts.append(f"{key}={f!r}")
                continue
            got = _importable(f)
            if got is None:
                return None
            imports.append(got[0])
            parts.append(f"{key}={got[1]}")
        return "\n".join(imports), f"IpflMechanism({', '.join(parts)})"

    @property
    def money(self):
        return self.payments if self.payments is not None else (self.remittances or "paper")

    def settle(self, market: ipfl.Market, D, *, allow_negative: bool = False,
               allow_asymmetric: bool = True, thresholds: str = "exact") -> ipfl.Outcome:
        """Clear one round with :func:`mechanisms.ipfl.clear`. ``allow_asymmetric`` is on
        by default, unlike ``clear``'s: the checker's type spaces draw asymmetric D (row i
        buyer i's own distance) for half their markets on purpose (:mod:`proofs.typespace`),
        so the properties are claimed for them too."""
        return ipfl.clear(market, D, self.rule, payments=self.money, prices=self.prices,
                          thresholds=fresh(thresholds), allow_negative_distances=allow_negative,
                          allow_asymmetric_distances=allow_asymmetric)


@dataclass(frozen=True, eq=False)
class CplSolver(_Registered):
    """A CPL equilibrium solver by name (see :func:`mechanisms.cpl.solve`)."""

    family: ClassVar[str] = "cpl"
    kind: ClassVar[str] = "solver"  # an equilibrium solver: it has a budget multiplier

    name: str
    method: str = "bisection"
    options: Mapping = field(default_factory=dict)
    declares: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "method", fresh(self.method))  # proofs.names

    def solve(self, game: cpl.Game) -> cpl.Equilibrium:
        return cpl.solve(game, self.method, **dict(self.options))


@dataclass(frozen=True, eq=False)
class CplPricingRule(_Registered):
    """Any CPL pricing rule as a subject: ``rule(game) -> prices`` ((n,) P_n), a built-in
    name of :data:`mechanisms.cpl.PRICING_RULES` ("uniform", "weighted", "gradient") or a
    "module:function" string. The clients answer with their exact best responses
    (:func:`mechanisms.cpl.apply_pricing`)."""

    family: ClassVar[str] = "cpl"
    kind: ClassVar[str] = "pricing rule"  # prices only: no multiplier, no threshold

    name: str
    rule: str | Callable = "uniform"
    declares: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "rule", fresh(self.rule))  # proofs.names
        _ = self.function  # resolve now: a typo fails here, not mid-search

    @property
    def function(self) -> Callable:
        if callable(self.rule):
            return self.rule
        if ":" in self.rule:
            return ipfl.load_callable(self.rule, "pricing")
        if self.rule not in cpl.PRICING_RULES:
            raise MarketInputError("pricing", f"unknown {self.rule!r}; choose one of "
                                              f"{tuple(cpl.PRICING_RULES)} or 'module:function'")
        return cpl.PRICING_RULES[self.rule]

    def solve(self, game: cpl.Game) -> cpl.Equilibrium:
        return cpl.apply_pricing(game, self.function, name=self.name)


@dataclass(frozen=True, eq=False)
class LiaClustering(_Registered):
    """pFedLIA (spec lia.md) as a subject: the lazy influence scores and the clustering of
    :mod:`mechanisms.lia`.

    mode : "central" (clusters: the connected components of the mutual edges) or "p2p"
        (each client's own beneficial set).
    rtol, atol : the no-split tolerance of :func:`mechanisms.lia.beneficial_sets`.
    scores_rule, sets_rule, cluster_rule : rules of your own, with the signatures of
        :meth:`scores`, :meth:`sets` and :meth:`cluster` (None: the built-in); give
        ``cluster_rule`` with ``sets_rule`` (the built-in clustering reads the built-in sets).
    declares : property key -> True / False / "vacuous".
    """

    family: ClassVar[str] = "lia"

    name: str
    mode: str = "central"
    rtol: float = 1e-3
    atol: float = 1e-12
    scores_rule: Callable | None = None
    sets_rule: Callable | None = None
    cluster_rule: Callable | None = None
    declares: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "mode", fresh(self.mode))  # proofs.names
        if self.mode not in ("central", "p2p"):
            raise MarketInputError("mode", f"unknown {self.mode!r}; choose 'central' or 'p2p'")
        for name in ("rtol", "atol"):
            as_real(name, getattr(self, name), lo=0)
        for name in ("scores_rule", "sets_rule", "cluster_rule"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise MarketInputError(name, f"is {getattr(self, name)!r}; must be a "
                                             "function, or None")

    def scores(self, base_losses, model_losses, owner):
        """I (m, m): the lazy influence of j on i (:func:`mechanisms.lia.influence`)."""
        if self.scores_rule is not None:
            return call_rule("scores_rule", rule_name(self.scores_rule), self.scores_rule,
                             base_losses, model_losses, owner)
        return lia.influence(base_losses, model_losses, owner)

    def sets(self, I):
        """(m, m) bool, row i the beneficial set C_i (:func:`mechanisms.lia.beneficial_sets`)."""
        if self.sets_rule is not None:
            return call_rule("sets_rule", rule_name(self.sets_rule), self.sets_rule, I)
        return lia.beneficial_sets(I, rtol=self.rtol, atol=self.atol)

    def cluster(self, I):
        """(m,) cluster ids (central) or the (m, m) sets (p2p): :func:`mechanisms.lia.cluster`."""
        if self.cluster_rule is not None:
            return call_rule("cluster_rule", rule_name(self.cluster_rule), self.cluster_rule,
                             I)
        return lia.cluster(I, mode=self.mode, rtol=self.rtol, atol=self.atol)


def subject_from(spec: str):
    """The subject a ``"module:name"`` names (``fedmarket prove --subject mymod:rule``):

    * an :class:`IpflMechanism`, :class:`CplSolver` or :class:`CplPricingRule` object: itself
      (its ``declares`` say what it claims);
    * a function of one argument ``rule(game) -> prices``: a CPL pricing rule;
    * of three ``f(market, A, D)``: iPFL payments (remittances or payments) with the local
      selection rule and the paper's prices;
    * of four ``rule(market, D, thresholds, prices)``: an iPFL selection rule with the
      paper's payments and prices.

    A function declares nothing: every property of its family that applies is checked and
    reported. Errors (not importable, not a rule) are a MarketInputError naming ``subject``.
    """
    import inspect

    from mechanisms.lookup import import_named

    module, _, name = str(spec).partition(":")
    if not module or not name:
        raise MarketInputError("subject", f"{spec!r}: a subject of your own is 'module:name'")
    try:
        obj = import_named(str(spec), "subject")
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise MarketInputError("subject", f"cannot import {spec!r}: {exc}") from exc
    except MarketInputError:  # refused: named by data the user did not vouch for
        raise
    except BaseException as exc:  # the module raised while importing (sys.exit too)
        if must_pass(exc):
            raise
        raise MarketInputError("subject", f"importing {spec!r} raised "
                                          f"{describe(exc)}") from exc
    if isinstance(obj, (IpflMechanism, CplSolver, CplPricingRule, LiaClustering)):
        return obj
    if not callable(obj) or isinstance(obj, type):
        raise MarketInputError("subject", f"{spec!r} is a {type(obj).__name__}; expected a "
                                          "subject (IpflMechanism, CplPricingRule, CplSolver) "
                                          "or a rule function")
    try:
        params = [p for p in inspect.signature(obj).parameters.values()
                  if p.default is inspect.Parameter.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError) as exc:
        raise MarketInputError("subject", f"{spec!r}: cannot read its signature") from exc
    if len(params) == 1:
        return CplPricingRule(spec, obj)
    if len(params) == 3:
        return IpflMechanism(spec, "local", payments=obj)
    if len(params) == 4:
        return IpflMechanism(spec, obj)
    raise MarketInputError("subject", f"{spec!r} takes {len(params)} arguments; a CPL pricing "
                                      "rule takes (game), iPFL payments (market, A, D), an "
                                      "iPFL selection rule (market, D, thresholds, prices)")
