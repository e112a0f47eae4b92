"""Property verdicts per mechanism, for the report: the economist's question ("which promises
does this rule keep?") answered next to the simulation tables.

For every iPFL mechanism of a sweep (``selection+payments+prices``, rules of your own
included) the checker runs the budget, participation and incentive properties; for every CPL
pricing rule, the budget and the comparison with the baselines, with the batch engine
(numpy draws evaluated in bulk) at :data:`EXAMPLES` effective examples per cell by default.
Each row: the verdict ("holds"; "counterexample", for budget balance with whether it is a
deficit or a surplus and the signed amount, the operator's sum_i p_i on the counterexample;
"inconclusive" when fewer discriminating examples -- markets on which the property could
have failed -- than the budget were checked, never "holds"; "vacuous" when none was), the
engine, how many markets were drawn, checked and discriminating, and for the incentive
properties the regret: the largest gain the full
misreport search finds on the counterexample, the same number the detail describes.
"""

from __future__ import annotations

import pandas as pd

from mechanisms.errors import FedmarketError

__all__ = ["CPL_KEYS", "EXAMPLES", "IPFL_KEYS", "beats_baselines_detail", "cpl_verdicts",
           "ipfl_verdicts"]

EXAMPLES = 10_000  # discriminating examples per verdict cell (below it: "inconclusive")
TIME_LIMIT = 5.0  # seconds per cell: a rule the checker cannot clear in bulk (one of your own
# not written over arrays) is evaluated market by market and may stop short: "inconclusive"

IPFL_KEYS = ("budget_balance", "no_deficit", "individual_rationality", "thm2",
             "truthful_c_under", "truthful_K_over", "truthful_K_under", "truthful_N_over",
             "truthful_N_under")
CPL_KEYS = ("cpl_budget_feasible", "cpl_beats_baselines")


def _row(mechanism: str, key: str, report, detail: str = "", regret=None) -> dict:
    return {"mechanism": mechanism, "property": key, "verdict": report.verdict,
            "engine": report.engine, "examples": report.examples,
            "effective": report.effective, "discriminating": report.discriminating,
            "regret": regret, "detail": detail}


def _not_checked(name: str, key: str, exc) -> dict:
    return {"mechanism": name, "property": key, "verdict": "not checked", "engine": None,
            "examples": 0, "effective": 0, "discriminating": 0, "regret": None,
            "detail": f"not checked: {exc}"}


def ipfl_verdicts(mechanisms, *, examples: int = EXAMPLES, seed: int = 0,
                  keys=IPFL_KEYS, engine: str = "batch",
                  time_limit: float | None = TIME_LIMIT) -> pd.DataFrame:
    """One row per (mechanism, property). ``mechanisms``: canonical names
    ("selection+payments+prices", see :func:`sims.scenarios.parse_ipfl_mechanism`)."""
    from proofs import PROPERTIES, IpflMechanism, check
    from proofs.ipfl_properties import best_misreport, operator_balance

    from .scenarios import parse_ipfl_mechanism

    rows = []
    for name in mechanisms:
        try:
            selection, payments, prices = parse_ipfl_mechanism(name)
            subject = IpflMechanism(name, selection, payments=payments, prices=prices)
        except FedmarketError as exc:  # a rule of your own that is not importable here
            rows += [_not_checked(name, k, exc) for k in keys]
            continue
        for key in keys:
            prop = PROPERTIES[key]
            report = check(subject, prop, max_examples=examples, seed=seed, engine=engine,
                           min_discriminating=examples,
                           **({"time_limit": time_limit} if engine == "batch" else {}))
            detail, regret = "", None
            ce = report.counterexample
            if ce is not None and key in ("budget_balance", "no_deficit"):
                side, amount = operator_balance(subject, ce.instance)
                detail = f"{side} {amount:+.4g}"  # the operator's sum_i p_i, signed
            dim = getattr(prop.violation, "dimension", None)
            if ce is not None and dim is not None:
                # the figure and the detail come from one search: the largest gain the full
                # misreport search finds on the counterexample
                found, _ = best_misreport(subject, ce.instance, dim, prop.violation.direction)
                regret, detail = found.regret, found.describe()
            rows.append(_row(name, key, report, detail, regret))
    return pd.DataFrame(rows)


def cpl_verdicts(mechanisms, *, examples: int = EXAMPLES, seed: int = 0,
                 keys=CPL_KEYS, engine: str = "batch",
                 time_limit: float | None = TIME_LIMIT) -> pd.DataFrame:
    """One row per (CPL pricing rule or solver, property)."""
    from mechanisms import cpl
    from proofs import PROPERTIES, CplPricingRule, CplSolver, check

    rows = []
    for name in mechanisms:
        try:
            subject = (CplSolver(name, name) if name in cpl.METHODS
                       else CplPricingRule(name, name))
        except FedmarketError as exc:
            rows += [_not_checked(name, k, exc) for k in keys]
            continue
        for key in keys:
            report = check(subject, PROPERTIES[key], max_examples=examples, seed=seed,
                           engine=engine, min_discriminating=examples,
                           **({"time_limit": time_limit} if engine == "batch" else {}))
            detail = ""
            if report.counterexample is not None and key.startswith("cpl_beats_baselines"):
                detail = beats_baselines_detail(subject, report.counterexample.instance)
            rows.append(_row(name, key, report, detail))
    return pd.DataFrame(rows)


def beats_baselines_detail(subject, case) -> str:
    """What a counterexample to ``cpl_beats_baselines`` shows: on its game, the bound the
    subject's prices buy (the clients' exact best responses) against the uniform and the
    weighted posted prices at the same budget, each with the relative gap (positive: the
    subject is worse), and the game's size and budget."""
    from mechanisms import cpl

    game = getattr(case, "game", case)
    own = subject.solve(game).objective
    parts = []
    for label, base in (("uniform", cpl.uniform_pricing), ("weighted", cpl.weighted_pricing)):
        try:
            b = base(game).objective
        except cpl.BudgetInfeasible as exc:  # a baseline that cannot spend this budget
            parts.append(f"{label}: not priced ({exc})")
            continue
        gap = (own - b) / b if b > 0 else float("inf") if own > b else 0.0
        parts.append(f"{label} {b:.6g} ({gap:+.3%})")
    return (f"bound {own:.6g} against " + ", ".join(parts)
            + f" (budget {float(game.budget):.6g}, {game.n} clients)")
