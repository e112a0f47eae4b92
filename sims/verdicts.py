"""Property verdicts per mechanism, for the report: the economist's question ("which promises
does this rule keep?") answered next to the simulation tables.

For every iPFL mechanism of a sweep (``selection+payments+prices``, rules of your own
included) the checker runs the budget, participation and incentive properties; for every CPL
pricing rule, the budget and the comparison with the baselines. Each row: the verdict
("holds" or "counterexample"; for budget balance, whether the counterexample is a deficit or a
surplus), how many markets were drawn and checked, and for the incentive properties the
largest regret found (over every checked market, and the full regret search on the
counterexample, whose misreport and factor the detail names).
"""

from __future__ import annotations

import pandas as pd

from mechanisms.errors import FedmarketError

__all__ = ["CPL_KEYS", "IPFL_KEYS", "cpl_verdicts", "ipfl_verdicts"]

IPFL_KEYS = ("budget_balance", "no_deficit", "individual_rationality", "thm2",
             "truthful_c_under", "truthful_K_over", "truthful_K_under", "truthful_N_over",
             "truthful_N_under")
CPL_KEYS = ("cpl_budget_feasible", "cpl_beats_baselines")


def _row(mechanism: str, key: str, report, detail: str = "", regret=None) -> dict:
    return {"mechanism": mechanism, "property": key, "verdict": report.verdict,
            "examples": report.examples, "effective": report.effective, "regret": regret,
            "detail": detail}


def ipfl_verdicts(mechanisms, *, examples: int = 20, seed: int = 0,
                  keys=IPFL_KEYS) -> pd.DataFrame:
    """One row per (mechanism, property). ``mechanisms``: canonical names
    ("selection+payments+prices", see :func:`sims.scenarios.parse_ipfl_mechanism`)."""
    from proofs import PROPERTIES, IpflMechanism, check
    from proofs.ipfl_properties import best_misreport, budget_side

    from .scenarios import parse_ipfl_mechanism

    rows = []
    for name in mechanisms:
        try:
            selection, payments, prices = parse_ipfl_mechanism(name)
            subject = IpflMechanism(name, selection, payments=payments, prices=prices)
        except FedmarketError as exc:  # a rule of your own that is not importable here
            rows += [{"mechanism": name, "property": k, "verdict": "not checked",
                      "examples": 0, "regret": None, "detail": str(exc)} for k in keys]
            continue
        for key in keys:
            prop = PROPERTIES[key]
            report = check(subject, prop, max_examples=examples, seed=seed)
            detail, regret = "", None
            ce = report.counterexample
            if ce is not None and key in ("budget_balance", "no_deficit"):
                detail = budget_side(subject, ce.instance)
            dim = getattr(prop.violation, "dimension", None)
            if dim is not None and report.largest_violation is not None:
                regret = max(0.0, report.largest_violation)  # a regret is never negative
            if ce is not None and dim is not None:
                found, _ = best_misreport(subject, ce.instance, dim, prop.violation.direction)
                regret, detail = max(found.regret, regret or 0.0), found.describe()
            rows.append(_row(name, key, report, detail, regret))
    return pd.DataFrame(rows)


def cpl_verdicts(mechanisms, *, examples: int = 20, seed: int = 0,
                 keys=CPL_KEYS) -> pd.DataFrame:
    """One row per (CPL pricing rule or solver, property)."""
    from mechanisms import cpl
    from proofs import PROPERTIES, CplPricingRule, CplSolver, check

    rows = []
    for name in mechanisms:
        try:
            subject = (CplSolver(name, name) if name in cpl.METHODS
                       else CplPricingRule(name, name))
        except FedmarketError as exc:
            rows += [{"mechanism": name, "property": k, "verdict": "not checked",
                      "examples": 0, "regret": None, "detail": str(exc)} for k in keys]
            continue
        for key in keys:
            rows.append(_row(name, key, check(subject, PROPERTIES[key], max_examples=examples,
                                              seed=seed)))
    return pd.DataFrame(rows)
