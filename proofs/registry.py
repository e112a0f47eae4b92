"""The built-in subjects and what each declares (True: claimed and checked; False: known not
to hold, and the checker must find the counterexample; "vacuous": cannot fail on the subject,
and the checker must find no example that could have failed)."""

from __future__ import annotations

from mechanisms import cpl, ipfl

from .conformance import CONFORMANCE_PROPERTIES
from .contract import VACUOUS, contract_check
from .core import CATALOGUE, CheckerInputError, Property, registered
from .cpl_properties import CPL_PROPERTIES
from .input_properties import INPUT_PROPERTIES
from .ipfl_properties import IPFL_PROPERTIES
from .lia_properties import LIA_PROPERTIES
from .process_properties import PROCESS_PROPERTIES
from .rule_properties import RULE_PROPERTIES
from .subjects import CplPricingRule, CplSolver, IpflMechanism, LiaClustering

__all__ = ["PROPERTIES", "SUBJECTS", "check_declared", "reference_declares", "registered"]

# the catalogue of proofs.core is the registry: the engines, reports and pickles read it
# there without importing this module (which imports every property module)
PROPERTIES = CATALOGUE["property"]
PROPERTIES.update({**IPFL_PROPERTIES, **CPL_PROPERTIES, **CONFORMANCE_PROPERTIES,
                   **LIA_PROPERTIES, **INPUT_PROPERTIES, **RULE_PROPERTIES,
                   **PROCESS_PROPERTIES})

_IPFL_COMMON = {
    **ipfl.PAYMENT_RULES["paper"].claims,
    "ir_negative_distances": False,
    "lemma1": True,
    "thm3": True,
    "thm3_lam0": False,
    "permutation": True,
    "permutation_ties": False,
    # the paper's payments also pay these lies (batch engine, seed 0: understating c gains
    # 46.7 with box2/local, overstating K 123, understating N 2.58)
    "truthful_c_under": False,
    "truthful_K_over": False,
    "truthful_N_under": False,
    "budget_identity": True,
    "pure_sellers_never_buy": True,
    "conforms": True,
    "one_path": True,
    "one_market": True,
    "refuses_bad_input": True,
    "contains_rules": True,
}

# Every iPFL property declared for every built-in iPFL subject (issue 20, part 4). Beyond
# what each payment rule claims itself (mechanisms.ipfl.rules), these were measured with
# the batch engine (20,000 effective examples per pair, seed 0; every False one with the
# counterexample the checker finds, every True one holding): selection properties follow
# the selection rule each pairs with, the permutation and Thm 3 facts hold for every rule
# that breaks ties by index, and the reference payments pay the lies listed False.
_REFERENCE_EXTRA = {
    # every reference rule conforms to the oracle's transcription of its own definition
    # (proofs.conformance: VCG to the Clarke pivot, Shapley to the Shapley split, ...)
    "vcg": {"conforms": True, "local_optimality": True, "global_optimality": True, "lemma1": True,
            "thm3": True, "thm3_lam0": False, "permutation": True, "permutation_ties": False,
            "truthful_N_under": False, "budget_identity": True,
            "pure_sellers_never_buy": True, "box2_prefix": False, "one_path": True},
    "shapley": {"conforms": True, "ir_negative_distances": False, "local_optimality": True,
                "global_optimality": False, "lemma1": True, "thm2": True, "thm3": True,
                "thm3_lam0": False, "permutation": True, "permutation_ties": False,
                "truthful_N_under": False, "truthful_c_under": False,
                "truthful_K_over": False, "budget_identity": True,
                "pure_sellers_never_buy": True, "box2_prefix": False,
                "shapley_efficiency": True, "shapley_symmetry": True,
                "greedy_tie_rule": True, "one_path": True},
    "cost-plus": {"conforms": True, "ir_negative_distances": False, "local_optimality": True,
                  "global_optimality": False, "lemma1": True, "thm3": True,
                  "thm3_lam0": False, "permutation": True, "permutation_ties": False,
                  "truthful_N_over": False, "truthful_N_under": False,
                  "truthful_c_under": False, "truthful_K_over": False,
                  "truthful_K_under": False, "budget_identity": True,
                  "pure_sellers_never_buy": True, "box2_prefix": False, "one_path": True},
    # share-all: every client but a pure seller (K = 0) buys every model, whatever the
    # reports (no payments), so no misreport of N, K or a finite c changes any outcome:
    # Lemma 1 and the six truthfulness properties cannot fail on it (0 of 20,000 draws
    # discriminating). Declared "vacuous" (proofs.contract.VACUOUS): true of the rule, but
    # the checker has no evidence to show, and the contract asserts that none of its draws
    # discriminates.
    "share-all": {"conforms": True, "ir_negative_distances": False, "local_optimality": False,
                  "global_optimality": False, "thm3": False, "thm3_lam0": False,
                  "permutation": True, "permutation_ties": True, "budget_identity": True,
                  "pure_sellers_never_buy": True, "box2_prefix": False,
                  "one_path": VACUOUS,
                  **dict.fromkeys(("lemma1", "thm2", "truthful_c_under", "truthful_K_over",
                                   "truthful_K_under", "truthful_N_over",
                                   "truthful_N_under"), VACUOUS)},
}


def reference_declares(claims, extra) -> dict:
    """A reference payment rule's declarations: what the rule claims itself (its ``.claims``,
    mechanisms.ipfl.rules) with the facts measured here (``extra``) added. A fact never
    overrides the rule's own claim: "vacuous" (true of the rule, no evidence to show) stands
    in for a claim of True only, so a rule claiming a property False keeps False, and the
    checker must find its counterexample (generated mutant be34dda9ce, ``no_payments``
    claiming truthful_N_over False, was hidden behind share-all's "vacuous" before).

    >>> reference_declares({"thm2": True, "lemma1": False},
    ...                    {"thm2": "vacuous", "lemma1": "vacuous", "thm3": False})
    {'thm2': 'vacuous', 'lemma1': False, 'thm3': False}
    """
    out = {**claims, **extra}
    for key, claim in claims.items():
        if not (claim is True and out[key] == VACUOUS):
            out[key] = claim
    return out


# The facts the papers and theory imply beyond the theorems (issue 20, part 2): the budget
# identity of Eqs. 3 and 5 and that pure sellers never buy (spec, types) for every iPFL
# subject, Shapley's efficiency and symmetry for the
# Shapley rule, the documented tie rule for the greedy selections (box2, local, and shapley,
# which selects with local), CPL's threshold formula for the solver; each holds at 10^4
# effective examples with the batch engine (seed 0) and rejects a known-bad variant
# (tests/test_checker_identities.py).
SUBJECTS = CATALOGUE["subject"]
SUBJECTS.update({
    "box2": IpflMechanism("box2", "box2", declares={
        **_IPFL_COMMON, "local_optimality": False, "global_optimality": False, "thm2": True,
        "greedy_tie_rule": True, "box2_prefix": True}),
    "local": IpflMechanism("local", "local", declares={
        **_IPFL_COMMON, "local_optimality": True, "global_optimality": False, "thm2": True,
        "greedy_tie_rule": True, "box2_prefix": False,
        # the toolkit's pool handling, the same for every subject: checked through one
        "runs_in_a_worker": True}),
    "exact": IpflMechanism("exact", "exact", declares={
        **_IPFL_COMMON, "local_optimality": True, "global_optimality": True, "thm2": True,
        "box2_prefix": False, "work_bound": True}),
    **{name: IpflMechanism(
        name, ipfl.PAYMENT_RULES[payments].pairs_with, payments=payments, prices=prices,
        declares={**reference_declares(ipfl.PAYMENT_RULES[payments].claims,
                                       _REFERENCE_EXTRA[name]),
                  "refuses_bad_input": True, "contains_rules": True, "one_market": True})
       for name, payments, prices in [("vcg", "vcg", "paper"), ("shapley", "shapley", "paper"),
                                      ("cost-plus", "cost-plus", "cost-plus"),
                                      ("share-all", "none", "paper")]},
    "cpl-bisection": CplSolver("cpl-bisection", "bisection", declares={
        "cpl_se_identities": True, "cpl_threshold": True, "cpl_threshold_all": False,
        "cpl_beats_baselines": True, "cpl_beats_baselines_any": False,
        "cpl_budget_feasible": True, "cpl_threshold_formula": True, "cpl_conforms": True,
        "cpl_one_path": True, "cpl_refuses_bad_input": True, "cpl_contains_rules": True,
        "cpl_one_game": True, "cpl_work_bound": True}),
    **{f"cpl-{rule}": CplPricingRule(f"cpl-{rule}", rule, declares={"cpl_budget_feasible": True,
                                                                 "cpl_conforms": True,
                                                                 "cpl_refuses_bad_input": True,
                                                                 "cpl_contains_rules": True,
                                                                 "cpl_one_game": True,
                                                                 "cpl_work_bound": True})
       for rule in cpl.PRICING_RULES},
    # pFedLIA (spec lia.md): what the paper and the spec claim of the scores and the
    # clustering (proofs.lia_properties), in both modes; noise as large as the gap between
    # the planted groups blurs them (the checker finds where)
    **{f"lia-{mode}": LiaClustering(f"lia-{mode}", mode, declares={
        **dict.fromkeys(LIA_PROPERTIES, True), "lia_recovery_noisy": False,
        "lia_refuses_bad_input": True})
       for mode in ("central", "p2p")},
})


def check_declared(subject, key, **kwargs):
    """Check one declared property of a subject; returns (report, as_declared). A property
    declared not to hold may draw up to ``FALSIFY_FACTOR`` times the budget (see
    :mod:`proofs.contract`).

    ``key``: a property key from ``subject.declares`` (built-in), or your own
    :class:`~proofs.Property` whose key the subject declares."""
    prop = key if isinstance(key, Property) else PROPERTIES.get(key)
    pkey = prop.key if prop is not None else key
    if prop is None:
        raise CheckerInputError("key", f"unknown property {key!r}; pass the Property itself")
    if pkey not in subject.declares:
        raise CheckerInputError("key", f"{subject.name!r} declares nothing about {pkey!r}; "
                                       f"it declares {sorted(subject.declares)}")
    result = contract_check(subject, prop, subject.declares[pkey], **kwargs)
    return result.report, result.as_declared
