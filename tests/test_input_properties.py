"""The checker's bad-input properties (issue 34, part 2: proofs.input_properties):
``refuses_bad_input``, ``cpl_refuses_bad_input``, ``lia_refuses_bad_input``. Every fault of
each table is refused on a fixed instance (fast, here), the checker holds them on the
built-in subjects, and it rejects known-bad variants: a subject that repairs bad distances,
one that solves an infeasible budget, one that refuses good input, validation that reads
text as numbers."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from mechanisms import cpl, ipfl, lia
from mechanisms.errors import MarketInputError
from proofs import PROPERTIES, SUBJECTS, CplSolver, IpflMechanism, check
from proofs import input_properties as ip

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _cases(family, k=3, seed=0):
    smp = {"ipfl": ip.ipfl_base_sampler, "cpl": ip.cpl_base_sampler,
           "lia": ip.lia_base_sampler}[family]()
    rng = np.random.default_rng(seed)
    return [c for d in smp.draw(rng, k) for c in smp.cases(d)]


@pytest.mark.parametrize("family, subject", [("ipfl", "local"), ("ipfl", "exact"),
                                             ("cpl", "cpl-bisection"), ("cpl", "cpl-uniform"),
                                             ("lia", "lia-central")])
def test_every_fault_of_the_table_is_refused_naming_its_field(family, subject):
    prop = {"ipfl": "refuses_bad_input", "cpl": "cpl_refuses_bad_input",
            "lia": "lia_refuses_bad_input"}[family]
    subj = SUBJECTS[subject]
    for base in _cases(family):
        for k in range(len(ip.FAULTS[family]) + 1):
            case = ip.FaultCase(base, k, family)
            assert PROPERTIES[prop].amount(subj, case) == 0, case.describe()


@pytest.mark.parametrize("change", [{"K": 0.0}, {"c": np.inf}, {"N": 1.0}, {"lam": 0.0}])
def test_every_ipfl_fault_is_a_fault_on_markets_at_the_edges_too(change):
    """Every fault is refused also where every client has the same edge value (K = 0: no
    gain; c = inf: a pure buyer; N = 1; lam = 0): a fault that is valid input there (a gain
    scaled by K alone: 0 everywhere when every K is 0) made the standard run's
    refuses_bad_input fail on every iPFL subject."""
    subj = SUBJECTS["local"]
    for base in _cases("ipfl", k=1):
        mk = base.market
        fields = {"N": mk.N, "c": mk.c, "K": mk.K, "lam": mk.lam, "gain": mk.gain}
        fields.update({k: v if k == "lam" else np.full(mk.m, v) for k, v in change.items()})
        edge = dataclasses.replace(base, market=ipfl.Market(**fields))
        for k in range(1, len(ip.FAULTS["ipfl"]) + 1):
            case = ip.FaultCase(edge, k, "ipfl")
            assert PROPERTIES["refuses_bad_input"].amount(subj, case) == 0, case.describe()


def test_every_subject_declares_its_family_s_property():
    for subject in SUBJECTS.values():
        key = {"ipfl": "refuses_bad_input", "cpl": "cpl_refuses_bad_input",
               "lia": "lia_refuses_bad_input"}[subject.family]
        assert subject.declares[key] is True, subject.name


@pytest.mark.parametrize("key, subject", [("refuses_bad_input", "box2"),
                                          ("cpl_refuses_bad_input", "cpl-weighted"),
                                          ("lia_refuses_bad_input", "lia-p2p")])
def test_the_checker_holds_them(key, subject):
    r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=150, seed=0, engine="batch")
    assert r.verdict == "holds" and r.discriminating >= 150


def test_both_engines_draw_faults_and_well_formed_instances():
    from hypothesis import HealthCheck, given, settings

    seen = set()

    @settings(max_examples=60, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(PROPERTIES["cpl_refuses_bad_input"].strategy())
    def draw(case):
        seen.add(case.fault == 0)

    draw()
    assert seen == {True, False}
    smp = PROPERTIES["refuses_bad_input"].sample()
    faults = [c.fault for d in smp.draw(np.random.default_rng(0), 400) for c in smp.cases(d)]
    assert 0 in faults and len(set(faults)) > len(ip.IPFL_FAULTS) // 2
    assert max(faults) <= len(ip.IPFL_FAULTS)


# ------------------------------------------------------------------ known-bad variants


@dataclasses.dataclass(frozen=True, eq=False)
class _Repairing(IpflMechanism):
    """Repairs bad distances instead of refusing them (NaN -> 0, negative -> |d|, the
    diagonal zeroed)."""

    def settle(self, market, D, **kw):
        try:
            D = np.abs(np.nan_to_num(np.asarray(D, dtype=float), posinf=0.0))
        except (TypeError, ValueError):
            pass
        if D.ndim == 2 and D.shape[0] == D.shape[1]:
            np.fill_diagonal(D, 0.0)
        return super().settle(market, D, **kw)


@dataclasses.dataclass(frozen=True, eq=False)
class _Flooring(CplSolver):
    """Answers an infeasible budget with the floor q = q_min instead of refusing it."""

    def solve(self, game):
        low = cpl.spend(game, np.full(game.n, game.q_min))
        return super().solve(game.replace(budget=max(game.budget, low)))


@dataclasses.dataclass(frozen=True, eq=False)
class _Picky(IpflMechanism):
    """Refuses a good market: one with a pure buyer (c = inf)."""

    def settle(self, market, D, **kw):
        if np.isinf(market.c).any():
            raise MarketInputError("c", "a pure buyer is not supported")
        return super().settle(market, D, **kw)


@pytest.mark.parametrize("subject, key", [
    (_Repairing("repairing", "local"), "refuses_bad_input"),
    (_Flooring("flooring"), "cpl_refuses_bad_input"),
    (_Picky("picky", "local"), "refuses_bad_input"),
])
def test_a_subject_that_repairs_or_refuses_good_input_is_caught(subject, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = check(subject, PROPERTIES[key], max_examples=400, seed=0, engine="batch")
    assert r.verdict == "counterexample"
    assert r.counterexample.rerun() > 0


def test_validation_that_reads_text_as_numbers_is_caught(monkeypatch):
    """lia read its scores and losses with np.asarray(..., float64): text such as '0.5'
    passed as 0.5, booleans as 0 and 1 (found by lia_refuses_bad_input; now
    mechanisms.errors.as_floats)."""
    import mechanisms.lia as mlia

    monkeypatch.setattr(mlia, "as_floats", lambda field, x: np.asarray(x, dtype=np.float64))
    r = check(SUBJECTS["lia-central"], PROPERTIES["lia_refuses_bad_input"], max_examples=400,
              seed=0, engine="batch")
    assert r.verdict == "counterexample"
    what = r.counterexample.instance.describe()
    assert what.split(": ")[1].split(",")[0] in ("text", "booleans"), what


def test_numbers_held_as_objects_read_without_their_scan_are_caught(monkeypatch):
    """as_floats scans an array of objects for text, booleans and complex numbers: without
    the scan, exact fractions with True among them pass as numbers (True read as 1.0)."""
    import mechanisms.errors as me

    real = me.as_floats

    def no_scan(field, values):
        raw = np.asarray(values)
        return np.asarray(raw, dtype=np.float64) if raw.dtype.kind == "O" else \
            real(field, values)

    k = next(i for i, f in enumerate(ip.IPFL_FAULTS, 1) if "fractions" in f.what)
    base = _cases("ipfl", k=1)[0]
    case = ip.FaultCase(base, k, "ipfl")
    assert PROPERTIES["refuses_bad_input"].amount(SUBJECTS["local"], case) == 0
    monkeypatch.setattr(me, "as_floats", no_scan)
    assert PROPERTIES["refuses_bad_input"].amount(SUBJECTS["local"], case) == 1


@pytest.mark.parametrize("subject", ["local", "vcg", "exact"])
def test_distances_whose_sum_overflows_are_answered_without_a_warning(subject):
    """Found by the edge answer of refuses_bad_input: D's validation (its sum) and VCG's
    subset sums of prices near 1e308 overflowed with a RuntimeWarning (an error under this
    suite's settings); a sum past the float range is inf by design there."""
    for base in _cases("ipfl", k=4, seed=1):
        case = ip.FaultCase(base, 0, "ipfl")
        assert PROPERTIES["refuses_bad_input"].amount(SUBJECTS[subject], case) == 0


def test_distances_refused_for_their_sum_alone_are_caught(monkeypatch):
    """A D of finite entries whose sum overflows float64 is well-formed: refuses_bad_input
    has the subject answer it on the instances drawn without a fault. Validation that
    refuses it for its sum (the entries never looked at) is caught."""
    import mechanisms.ipfl.market as market_module

    real = market_module.as_matrix

    def sum_only(field, values, m, **kw):
        with np.errstate(over="ignore"):
            if not np.isfinite(np.asarray(values, dtype=float).sum()):
                raise MarketInputError(field, "must be finite")
        return real(field, values, m, **kw)

    base = _cases("ipfl", k=1)[0]
    case = ip.FaultCase(base, 0, "ipfl")
    assert PROPERTIES["refuses_bad_input"].amount(SUBJECTS["local"], case) == 0
    monkeypatch.setattr(market_module, "as_matrix", sum_only)
    assert PROPERTIES["refuses_bad_input"].amount(SUBJECTS["local"], case) == 1


# ------------------------------------------------- what the properties found (regressions)


def test_an_error_about_a_long_array_is_one_line():
    with pytest.raises(MarketInputError) as info:
        ipfl.Market(N=np.arange(1.0, 13.0) + 0.123456789j, c=np.zeros(12), K=np.ones(12))
    assert info.value.field == "N" and "\n" not in str(info.value)


def test_text_scores_and_losses_are_refused():
    with pytest.raises(MarketInputError, match="text") as info:
        lia.cluster(np.array([["0", "1"], ["1", "0"]]))
    assert info.value.field == "I"
    with pytest.raises(MarketInputError) as info:
        lia.influence(["1", "1"], [["0.5", "0.5"], ["1", "1"]], [0, 1])
    assert info.value.field == "model_losses"


def test_exact_options_are_checked_whatever_the_rule():
    mk = ipfl.Market(N=[100.0, 200.0], c=[0.1, 0.2], K=[1e3, 1e3], lam=0.1)
    D = [[0.0, 1.0], [1.0, 0.0]]
    for kw, field in (({"exact_node_limit": 0}, "exact_node_limit"),
                      ({"exact_time_limit": -1.0}, "exact_time_limit")):
        for clear in (lambda **k: ipfl.clear(mk, D, "local", **k),
                      lambda **k: ipfl.clear_batch(ipfl.MarketArrays.of(mk), np.asarray(D)[None],
                                                   "local", **k)):
            with pytest.raises(MarketInputError) as info:
                clear(**kw)
            assert info.value.field == field


def test_the_reference_page_states_the_fault_tables_sizes():
    """docs/reference-proofs.md's printed counts are the tables' (a printed claim, asserted)."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "reference-proofs.md").read_text()
    got = re.search(r"a table of (\d+) iPFL, (\d+) CPL and (\d+) pFedLIA faults", page)
    assert got is not None
    assert tuple(map(int, got.groups())) == (len(ip.IPFL_FAULTS), len(ip.CPL_FAULTS),
                                             len(ip.LIA_FAULTS))
