"""Certification: a designed rule checked by the property checker on HELD-OUT markets (a seed
other than the training draws'), its verdicts shown beside the search's own estimates.

The checker (:func:`proofs.check`, batch engine) evaluates a rule marked over_arrays through
the same bulk clearing the search used, draws from its own seeded stream, and answers per
property "holds", "counterexample", "vacuous" or "inconclusive" with its effective count. A
rule is never called truthful on its training markets: :func:`certify` refuses a held-out
seed equal to the training seed.
"""

from __future__ import annotations

import pandas as pd

from proofs import PROPERTIES, IpflMechanism, check
from proofs.typespace import as_type_space

from .errors import DesignInputError
from .evaluate import Mechanism

__all__ = ["CERTIFIED_PROPERTIES", "certify", "estimate", "rule_file_subject"]

CERTIFIED_PROPERTIES = ("individual_rationality", "budget_balance", "no_deficit",
                        "truthful_N_over", "truthful_N_under", "thm2", "truthful_c_under",
                        "truthful_K_over", "truthful_K_under")
DIRECTION = {"thm2": ("c", "over")}


def certify(name: str, payments, *, seed: int, training_seed: int | None,
            examples: int = 100_000, properties=CERTIFIED_PROPERTIES, rule: str = "local",
            prices: str = "paper", estimates: dict | None = None,
            progress=None, type_space=None, search="strong") -> pd.DataFrame:
    """Check ``payments`` (a payment rule over arrays, a built-in name, or
    "module:function") with ``rule`` and ``prices`` on ``examples`` effective examples per
    property, batch engine, seed ``seed`` (must differ from ``training_seed``). One row per
    property: verdict, effective and drawn examples, the largest violation the checker saw
    over the whole budget (the check does not stop at the first counterexample: for a
    regret property, the largest regret found on any of its examples), ``failures`` (the
    examples that failed, of ``discriminating``), seconds, and, from ``estimates`` (a
    summary of :func:`sims.design.evaluate.evaluate` on training markets), the search's
    own estimate of the same quantity. ``payments`` may be a
    :class:`sims.design.evaluate.Mechanism` (its own selection and prices then). Markets
    are drawn from ``type_space`` (default the checker's distribution); the rows'
    ``type_space`` column names it: the verdicts hold on that space. ``search``: the
    misreport search of the regret properties (default "strong", see
    :data:`proofs.regret.SEARCHES`)."""
    if training_seed is not None and seed == training_seed:
        raise DesignInputError("seed", f"is {seed}, the training markets' seed; certify on "
                                       "held-out markets (another seed)")
    if not (isinstance(examples, int) and examples >= 1):
        raise DesignInputError("examples", f"is {examples!r}; must be an integer >= 1")
    for key in properties:
        if key not in PROPERTIES:
            raise DesignInputError("properties", f"unknown {key!r}")
    if isinstance(payments, Mechanism):
        rule, prices, payments = payments.rule, payments.prices, payments.payments
    subject = IpflMechanism(name, rule, payments=payments, prices=prices)
    space = as_type_space(type_space)
    rows = []
    for k, key in enumerate(properties):
        r = check(subject, PROPERTIES[key], max_examples=examples, seed=seed, engine="batch",
                  scan=True, type_space=space, search=search)
        row = {"rule": name, "property": key, "verdict": r.verdict, "effective": r.effective,
               "discriminating": r.discriminating, "failures": r.extra.get("failures"),
               "type_space": space.name, "search": r.extra.get("search"),
               "examples": r.examples, "engine": r.engine, "mode": r.extra.get("mode", ""),
               "largest_violation": r.largest_violation, "seconds": r.seconds,
               "counterexample_violation": (r.counterexample.violation
                                            if r.counterexample is not None else None)}
        if estimates is not None:
            row["search_estimate"] = estimate(key, estimates)
        rows.append(row)
        if progress is not None:
            progress(k + 1, len(properties))
    return pd.DataFrame(rows)


def estimate(key: str, s: dict):
    """The search's estimate, in its training ``summary`` ``s``, of the quantity property
    ``key`` checks (IR: the share of markets broken; budget balance: the mean relative
    imbalance; no deficit: the deficit share; a regret property: the largest regret found);
    None for a property the search does not measure."""
    if key == "individual_rationality":
        return s.get("ir_rate")
    if key == "budget_balance":
        return s.get("mean_rel_imbalance")
    if key == "no_deficit":
        return s.get("deficit_rate")
    if key not in DIRECTION and not key.startswith("truthful_"):
        return None
    dim, way = DIRECTION.get(key) or key.removeprefix("truthful_").split("_")
    return s.get(f"max_regret_{dim}_{way}")


def rule_file_subject(path, rules_from=()):
    """(subject, document) of a rule file written by ``fedmarket design``
    (:func:`sims.design.save_rule`): an :class:`proofs.IpflMechanism` named by the file,
    clearing the saved rule with the local selection at the paper's prices (what the search
    measured; a mechanism family's file: its own selection, prices and payments), and the
    file's JSON (its ``estimates``: the search's training summary; ``training_seed``: the
    seed of the training markets, which certification must avoid; ``type_space``: the space
    the rule was designed on, which certification draws from). ``rules_from``: the modules
    you trust a space of your own in the file to come from (:func:`load_rule`; any other
    is refused unimported)."""
    import json
    from pathlib import Path

    from .space import load_rule

    path = Path(path)
    rule = load_rule(path, rules_from)
    doc = json.loads(path.read_text())
    if callable(rule):  # a payment rule: the paper's local selection at the paper's prices
        return IpflMechanism(str(path), "local", payments=rule), doc
    return IpflMechanism(str(path), rule.rule, payments=rule.payments, prices=rule.prices), doc
