"""Goals as a user states them ("IR, budget balance, minimise max regret over N c K") turned
into one penalised number to minimise.

Phrases (comma-separated, case-insensitive):

=============================  ==============================================================
``IR`` / ``IR always``         no client ends below zero utility (rate and size penalised)
``budget balance``             sum_i p_i = 0 on every market (mean |balance| penalised)
``no deficit``                 sum_i p_i >= 0 (mean deficit and deficit rate penalised)
``deficit <= 5%``              mean deficit at most 5 % of the utility level
``regret <= 1%``               the regret statistic at most 1 % of the utility level; the
                               search then minimises the operator's mean deficit instead
``minimise max regret``        the regret statistic is the maximum over markets (default)
``minimise mean regret``       ... the mean over markets (``q50``, ``q90``, ``q99``: that
                               quantile over markets)
``maximise welfare``           the objective is the mean welfare (Eq. 5) instead of regret;
                               with ``regret <= x`` the regret cap is then a constraint
``over N c K``                 the type dimensions whose regret counts (default all three)
``both ways`` / ``over`` /     the directions (default both)
``under``
``jointly``                    the regret statistic also over every pair of the chosen
                               dimensions lied about at once (N and c, N and K, c and K, each
                               either way; :func:`proofs.regret.joint_regret_arrays`)
=============================  ==============================================================

The regret statistic is the worst over the chosen (dimension, direction) pairs of the max (or
mean) regret, relative to the utility level (:mod:`sims.design.evaluate`). Constraints come
first (Deb's feasibility rule): an infeasible rule scores :data:`INFEASIBLE` plus ``penalty
x`` its violations plus its objective, so every rule meeting the constraints on the
training markets beats every rule that does not, and among infeasible rules the search is
steered towards smaller violations. :meth:`Goal.lagrangian` is the other way to state the
constraints (the augmented Lagrangian, :func:`sims.design.search.design` with
``method="lagrangian"``): multipliers and a penalty weight raised stage by stage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proofs.regret import JOINT_PAIRS

from .errors import DesignInputError
from .evaluate import COMBOS, STATISTICS

__all__ = ["Goal", "parse_goal"]

BUDGETS = ("balanced", "no-deficit", "any")
INFEASIBLE = 1e6  # added to the score of a rule that breaks a constraint
_PCT = r"(\d+(?:\.\d+)?)\s*(%?)"


@dataclass(frozen=True)
class Goal:
    ir: bool = True
    budget: str = "balanced"
    max_deficit: float | None = None
    regret_cap: float | None = None
    statistic: str = "max"
    combos: tuple = COMBOS
    penalty: float = 1e3
    welfare: bool = False  # maximise the mean welfare (the regret cap, if any, a constraint)
    joint: bool = False  # the regret statistic also over pairs of dimensions lied about at once

    def __post_init__(self):
        if self.budget not in BUDGETS:
            raise DesignInputError("budget", f"is {self.budget!r}; choose from {BUDGETS}")
        if self.statistic not in STATISTICS:
            raise DesignInputError("statistic", f"is {self.statistic!r}; one of {STATISTICS}")
        for name in ("max_deficit", "regret_cap"):
            v = getattr(self, name)
            if v is not None and not (v >= 0 and v < float("inf")):
                raise DesignInputError(name, f"is {v!r}; must be a finite number >= 0")
        if not self.combos or any(tuple(c) not in COMBOS for c in self.combos):
            raise DesignInputError("combos", f"is {self.combos!r}; pairs from {COMBOS}")
        if not self.penalty > 0:
            raise DesignInputError("penalty", f"is {self.penalty!r}; must be > 0")
        if self.joint and not self.joint_pairs:
            raise DesignInputError("goal", "'jointly' needs at least two dimensions (over N "
                                           "c, N K or c K)")

    @property
    def joint_pairs(self) -> tuple:
        """The pairs of the goal's dimensions lied about at once (``jointly``), in the order
        of :data:`proofs.regret.JOINT_PAIRS`; () without ``jointly``."""
        if not self.joint:
            return ()
        dims = {d for d, _ in self.combos}
        return tuple(p for p in JOINT_PAIRS if set(p) <= dims)

    def regret(self, summary: dict) -> float:
        """The regret statistic: worst over the combos (and, ``jointly``, the pairs of
        dimensions lied about at once), relative to the utility level."""
        return max([summary[f"{self.statistic}_rel_regret_{d}_{w}"] for d, w in self.combos]
                   + [summary[f"{self.statistic}_rel_regret_joint_{a}{b}"]
                      for a, b in self.joint_pairs])

    def violations(self, summary: dict) -> dict[str, float]:
        """Each constraint's violation (0: met), relative to the utility level."""
        out = {}
        if self.ir:
            out["ir"] = summary["ir_rate"] + summary["ir_rel_violation"]
        if self.budget == "balanced":
            out["budget_balance"] = summary["mean_rel_imbalance"] if \
                summary["mean_rel_imbalance"] > 1e-9 else 0.0
        elif self.budget == "no-deficit":
            out["no_deficit"] = summary["deficit_rate"] + summary["mean_rel_deficit"]
        if self.max_deficit is not None:
            out["deficit_cap"] = max(0.0, summary["mean_rel_deficit"] - self.max_deficit)
        if self.regret_cap is not None:
            out["regret_cap"] = max(0.0, self.regret(summary) - self.regret_cap)
        return out

    def score(self, summary: dict) -> float:
        """What the search minimises: the regret statistic (or, with a regret cap, the mean
        relative deficit); a rule breaking a constraint adds :data:`INFEASIBLE` and
        ``penalty`` x the sum of its violations."""
        base = self.objective(summary)
        bad = sum(self.violations(summary).values())
        return float(base + (INFEASIBLE + self.penalty * bad if bad > 0 else 0.0))

    def objective(self, summary: dict) -> float:
        """The quantity minimised under the constraints: minus the mean welfare (``maximise
        welfare``), else the regret statistic, or with a regret cap the mean relative
        deficit."""
        if self.welfare:
            return -float(summary["mean_welfare"])
        return float(summary["mean_rel_deficit"] if self.regret_cap is not None
                     else self.regret(summary))

    def lagrangian(self, summary: dict, multipliers: dict, rho: float) -> float:
        """The augmented Lagrangian of the goal: objective + sum_k lambda_k g_k + rho/2 sum_k
        g_k^2, with g_k >= 0 the constraint violations (:meth:`violations`; 0 when met) and
        ``multipliers`` lambda_k by constraint name (missing: 0)."""
        g = self.violations(summary)
        return float(self.objective(summary)
                     + sum(multipliers.get(k, 0.0) * v for k, v in g.items())
                     + 0.5 * rho * sum(v * v for v in g.values()))

    def feasible(self, summary: dict) -> bool:
        return not any(v > 0 for v in self.violations(summary).values())

    def describe(self) -> str:
        parts = ["IR" if self.ir else "IR not required",
                 {"balanced": "budget balance", "no-deficit": "no deficit",
                  "any": "any budget"}[self.budget]]
        if self.max_deficit is not None:
            parts.append(f"deficit <= {100 * self.max_deficit:g}%")
        if self.regret_cap is not None:
            parts.append(f"regret <= {100 * self.regret_cap:g}%")
        dims = sorted({d for d, _ in self.combos}, key="NcK".index)
        ways = sorted({w for _, w in self.combos})
        over = f"{self.statistic} regret over {' '.join(dims)} " \
               f"({'both ways' if len(ways) == 2 else ways[0]}" \
               f"{', and jointly' if self.joint else ''})"
        if self.regret_cap is not None:
            parts[-1] = f"regret <= {100 * self.regret_cap:g}% ({over})"
            parts.append("maximise welfare" if self.welfare else "minimise the mean deficit")
        elif self.welfare:
            parts.append("maximise welfare")
        else:
            parts.append(f"minimise {over}")
        return ", ".join(parts)


def parse_goal(text: str, penalty: float = 1e3) -> Goal:
    """A :class:`Goal` from the phrases of the module docstring.

    >>> parse_goal("IR, budget balance, minimise max regret over c K").describe()
    'IR, budget balance, minimise max regret over c K (both ways)'
    >>> parse_goal("IR, no deficit, regret <= 1%").regret_cap
    0.01
    """
    if not isinstance(text, str) or not text.strip():
        raise DesignInputError("goal", "is empty; e.g. 'IR, budget balance, minimise max regret'")
    kw: dict = {"ir": False, "budget": "any", "penalty": penalty}
    dims, ways = ["N", "c", "K"], ["over", "under"]
    for raw in text.split(","):
        phrase = " ".join(raw.lower().split())
        if not phrase:
            continue
        if phrase in ("ir", "ir always", "individual rationality"):
            kw["ir"] = True
        elif phrase in ("budget balance", "budget balanced", "balanced", "bb"):
            kw["budget"] = "balanced"
        elif phrase in ("no deficit", "no-deficit"):
            kw["budget"] = "no-deficit"
        elif m := re.fullmatch(r"(deficit|regret)\s*<=\s*" + _PCT, phrase):
            value = float(m.group(2)) / (100.0 if m.group(3) else 1.0)
            kw["max_deficit" if m.group(1) == "deficit" else "regret_cap"] = value
        elif phrase in ("maximise welfare", "maximize welfare"):
            kw["welfare"] = True
        elif m := re.fullmatch(r"minimi[sz]e (max|mean|q50|q90|q99) regret"
                               r"(?: over ([nck ]+?))?"
                               r"(?: (both ways|over|under))?", phrase):
            kw["statistic"] = m.group(1)
            if m.group(2):
                dims = _dims(m.group(2), raw)
            if m.group(3) and m.group(3) != "both ways":
                ways = [m.group(3)]
        elif m := re.fullmatch(r"over ([nck ]+)", phrase):
            dims = _dims(m.group(1), raw)
        elif phrase in ("jointly", "joint", "two at once"):
            kw["joint"] = True
        elif phrase in ("both ways", "over", "under"):
            ways = ["over", "under"] if phrase == "both ways" else [phrase]
        else:
            raise DesignInputError("goal", f"cannot read {raw.strip()!r}; phrases: 'IR', "
                                           "'budget balance', 'no deficit', 'deficit <= 5%', "
                                           "'regret <= 1%', 'minimise max|mean|q90 regret "
                                           "[over N c K] [both ways|over|under]', "
                                           "'jointly', 'maximise welfare'")
    kw["combos"] = tuple((d, w) for d in dims for w in ways)
    return Goal(**kw)


def _dims(text: str, raw: str) -> list[str]:
    out = []
    for t in text.split():
        key = {"n": "N", "c": "c", "k": "K"}.get(t)
        if key is None:
            raise DesignInputError("goal", f"{raw.strip()!r}: dimensions are N, c, K")
        out.append(key)
    return sorted(set(out), key="NcK".index)
