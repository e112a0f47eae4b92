"""Fig. 4's tests that cannot fail. An algorithm without payments (the registry's declaration,
``Algorithm.pays`` False: learning.algorithms.UNPAID) gives an attacker, whose types are
(K, c) = (0, 0), utility 0 in every round whatever it submits, so "the baseline's change of the
attacker's utility >= 0" cannot fail there: the page shows it as "0 by construction (not
evidence)" and the claim's verdict and tally count only the tests that could fail. The
declaration itself is checked by running every unpaid algorithm on a tiny setting, with the
known-bad variant (a baseline ledger that pays the attacker) rejected by the same check."""

import numpy as np
import pandas as pd
import pytest

from learning.algorithms import ATTACKS, REGISTRY, TrainConfig, run
from learning.session import ATTACKER_TYPES, Session
from sims.claims import claims, tally, zero_by_construction

TINY = {"dataset": "digits", "clients": 5, "rounds": 2, "steps": 2, "batch": 8, "beta": 0.5,
        "lam": 2.0, "attackers": 1}
EXTRA = {"lia": {"partition": "pairs", "n_clusters": 2, "lia_warmup": 1, "lia_k": 1},
         "oracle": {"partition": "pairs", "n_clusters": 2}}
UNPAID = [name for name, alg in REGISTRY.items() if not alg.pays]
ATTACKED = [a for a in ATTACKS if a != "none"]


def attacker_utility(name: str, attack: str) -> np.ndarray:
    """The attacker's utility per round of a tiny run of ``name`` under ``attack``."""
    cfg = TrainConfig(algorithm=name, attack=attack, **{**TINY, **EXTRA.get(name, {})})
    f = run(cfg).frame
    return f[f.role == "attacker"].sort_values("round").utility.to_numpy()


def test_the_declaration_names_the_market_and_pricing_as_paying():
    assert {"ipfl", "cpl"} == {n for n, a in REGISTRY.items() if a.pays}
    assert len(UNPAID) == len(REGISTRY) - 2 and "local" in UNPAID and "fedfomo" in UNPAID
    assert ATTACKER_TYPES == (0.0, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", UNPAID)
def test_an_unpaid_algorithm_gives_the_attacker_exactly_zero(name):
    """Without an attack and under one of the attacks (a different one per algorithm), every
    round: the change Fig. 4 tests is exactly 0, by construction."""
    attack = ATTACKED[UNPAID.index(name) % len(ATTACKED)]
    for a in ("none", attack):
        u = attacker_utility(name, a)
        assert u.size == TINY["rounds"] and np.all(u == 0.0), (name, a, u)


@pytest.mark.slow
def test_the_check_rejects_an_algorithm_that_pays_the_attacker(monkeypatch):
    """Known-bad variants: iPFL (a market, declared paying) gives the attacker nonzero utility,
    which the check above rejects; a baseline ledger that pays the attacker 1 a round breaks
    the declaration, and the runner refuses it (every run, built-in or the user's)."""
    from mechanisms.errors import RuleFailed

    assert np.any(attacker_utility("ipfl", "signflip") != 0.0)
    ledger = Session.baseline_ledger

    def paying(self, W):
        out = ledger(self, W)
        pay = np.zeros(self.clients)
        pay[self.attackers] = -1.0
        return {**out, "payment": pay, "utility": out["utility"] - pay}
    monkeypatch.setattr(Session, "baseline_ledger", paying)
    with pytest.raises(RuleFailed, match="declared without payments") as e:
        attacker_utility("fedavg", "signflip")
    assert e.value.field == "algorithm"


def _fig4_frame(util: dict) -> tuple[pd.DataFrame, dict]:
    """A Fig. 4 frame: per (mechanism, attack, seed) the attacker's utility ``util[mech]``
    (a function of attack and seed); one honest client at accuracy 0.8."""
    rows = []
    for mech, f in util.items():
        for attack in ("none", "signflip"):
            for seed in range(3):
                for client, role in ((0, "trader"), (1, "attacker")):
                    rows.append({"mechanism": mech, "seed": seed, "param_attack": attack,
                                 "round": 0, "client": client, "role": role,
                                 "config_id": "c", "acc_personalised_best": 0.8,
                                 "utility": f(attack, seed) if role == "attacker" else 1.0})
    return pd.DataFrame(rows), {"c": {"roles": "traders"}}


def _fig4(frame, cfgs):
    return next(c for c in claims({"fig4": frame}, cfgs) if c.name == "Fig. 4, attacks (digits)")


def test_fig4_counts_only_the_tests_that_could_fail(tmp_path):
    drop = {"none": 0.0, "signflip": -50.0}
    frame, cfgs = _fig4_frame({"ipfl": lambda a, s: 100.0 + drop[a] + s,
                               "fedavg": lambda a, s: 0.0})
    claim = _fig4(frame, cfgs)
    by = {t.label: t for t in claim.tests}
    base = by["signflip: fedavg's change of attacker utility (money units)"]
    assert not base.could_fail and base.verdict == "0 by construction (not evidence)"
    assert by["signflip: iPFL's change of attacker utility (money units)"].verdict == \
        "reproduced"
    assert claim.verdict == "reproduced"  # iPFL's two tests; the baseline's is not counted
    assert tally(claim) == ("2 of 2 tests that could fail (1 more: 0 by construction, not "
                            "evidence)")
    # the known-bad variant: iPFL's attacker gains nothing from losing (no drop): its test
    # fails, and the baseline's 0 does not dress the tally up ('2 of 3' if it counted)
    bad, cfgs = _fig4_frame({"ipfl": lambda a, s: 100.0 + s, "fedavg": lambda a, s: 0.0})
    claim = _fig4(bad, cfgs)
    assert claim.verdict == "partly"  # iPFL's utility test not reproduced, accuracy reproduced
    assert tally(claim).startswith("1 of 2 tests that could fail")


def test_a_test_is_fixed_only_where_declared_and_measured_zero():
    zero = lambda a, s: 0.0  # noqa: E731
    # a market (declared paying) with 0 change: counted, and it fails ('<' 0)
    frame, cfgs = _fig4_frame({"ipfl": zero})
    claim = _fig4(frame, cfgs)
    assert all(t.could_fail for t in claim.tests)
    assert claim.tests[0].verdict == "not reproduced"
    # an algorithm the registry does not know: nothing declared, counted
    frame, cfgs = _fig4_frame({"mine": zero})
    assert all(t.could_fail for t in _fig4(frame, cfgs).tests)
    # declared unpaid but measured nonzero: the declaration is contradicted, counted
    frame, cfgs = _fig4_frame({"fedavg": lambda a, s: 10.0 + s if a == "none" else 0.0})
    t = _fig4(frame, cfgs).tests[0]
    assert t.could_fail and t.verdict == "not reproduced"
    # attackers that are not traders (the inclusive market): not by construction
    assert not zero_by_construction("fedavg", [{"roles": "inclusive"}], [0.0])
    assert not zero_by_construction("fedavg", [], [0.0])  # no configuration: nothing known
    assert zero_by_construction("fedavg", [{"roles": "traders"}], [0.0])


def test_the_committed_page_does_not_count_fig4s_baseline_tests():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "reproduction.md").read_text()
    row = next(line for line in page.splitlines()
               if line.startswith("| Fig. 4, attacks (digits) |"))
    assert "tests that could fail" in row and "0 by construction" in row, row
    base = next(line for line in page.splitlines() if line.startswith(
        "| gaussian: ditto's change of attacker utility (money units) | >= 0 | 0.0 [0.0, 0.0] |"))
    assert "| 0 by construction (not evidence) |" in base  # rebuilt byte for byte: test_reproduce


def test_a_users_generator_may_pay_and_a_declared_baseline_may_not(user_module):
    """A plain rounds(session) generator is family "custom" (Algorithm.pays True: nothing is
    promised, so its Fig. 4 tests count); an Algorithm the user declares "baseline" is held
    to it by the runner (test_the_check_rejects_an_algorithm_that_pays_the_attacker)."""
    from learning.algorithms import get

    user_module("myfig4algs", "from learning.algorithms import Algorithm\n"
                              "def gen(s):\n    yield\n"
                              "DECLARED = Algorithm('declared', gen, 'baseline', 'x')\n")
    assert get("myfig4algs:gen").pays and not get("myfig4algs:DECLARED").pays
    assert not zero_by_construction("myfig4algs:gen", [{"roles": "traders"}], [0.0, 0.0])
    assert zero_by_construction("myfig4algs:DECLARED", [{"roles": "traders"}], [0.0, 0.0])
