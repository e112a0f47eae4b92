"""Hand-checked iPFL numbers: the issue's public checks and the paper's Table 1 baseline."""

import numpy as np
import pytest

from mechanisms import ipfl

N5 = [400, 500, 600, 450, 550]
K5 = [5e4, 3e4, 0, 8e4, 2e4]
C5 = [0.5, 1, 0, 2, 0.3]
D5 = [
    [0, 0.1, 0.3, 0.5, 0.2],
    [0.1, 0, 0.25, 0.4, 0.15],
    [0.3, 0.25, 0, 0.35, 0.3],
    [0.5, 0.4, 0.35, 0, 0.45],
    [0.2, 0.15, 0.3, 0.45, 0],
]
P5 = [1.51659, 1.10953, -3.30162, 1.49752, -0.82202]
U5 = [3.98413, 2.37243, 3.30162, 4.76475, 1.78196]


@pytest.fixture
def five():
    return ipfl.Market(N=N5, c=C5, K=K5, lam=2.0)


@pytest.mark.parametrize("rule", ipfl.RULES)
def test_five_client_public_check(five, rule):
    out = ipfl.clear(five, D5, rule=rule)
    bought = {i: out.sellers_of(i) for i in range(5)}
    assert bought == {0: [2, 4], 1: [2, 4], 2: [], 3: [2, 4], 4: [2]}
    np.testing.assert_allclose(out.payments, P5, atol=5e-6)
    np.testing.assert_allclose(out.utilities, U5, atol=5e-6)
    assert out.budget_residual < 1e-12
    assert out.welfare == pytest.approx(sum(U5), abs=3e-5)
    assert out.welfare == pytest.approx(ipfl.welfare(five, out.adjacency), rel=1e-12)
    assert out.rule == rule and out.threshold_mode == "exact" and out.m == 5


def test_outcome_is_frozen(five):
    out = ipfl.clear(five, D5)
    with pytest.raises(ValueError):
        out.payments[0] = 0.0
    with pytest.raises(AttributeError):
        out.welfare = 1.0  # type: ignore[misc]


def test_exact_reports_its_method(five):
    out = ipfl.clear(five, D5, rule="exact")
    assert out.method == "enumeration"
    assert out.exact_methods == {"enumeration": 4, "none": 1}  # client 2 is a pure seller


def test_exact_s_result_type_is_public(five):
    """``ipfl.exact`` returns an ``ipfl.ExactSelection`` (importable from the package, as
    its reference documents, not only from mechanisms.ipfl.selection)."""
    P = ipfl.paper_prices(five, D5)
    found = ipfl.exact(five, P, ipfl.thresholds(five, D5, prices=P))
    assert isinstance(found, ipfl.ExactSelection) and "ExactSelection" in ipfl.__all__


def test_exact_reports_every_method_its_buyers_used(five, monkeypatch):
    """Outcome.method of rule "exact" names the methods its buyers used, joined by "+" in
    sorted order, "none" (nothing to search) left out: with the time budget spent before
    any buyer's turn (a clock ticking one second per look, so time_limit 0 has passed
    however fine the real clock), every buyer keeps the local rule's choice as "time-limit";
    with a budget that runs out after the first enumeration group, some buyers enumerated
    and the rest ran out. Generated mutant ea37bfa857 (`k < "none"`) left "time-limit"
    (which sorts after "none") out of the name."""
    from mechanisms.ipfl import selection

    ticks = iter(range(10**9))
    monkeypatch.setattr(selection.time, "monotonic", lambda: float(next(ticks)))
    out = ipfl.clear(five, D5, rule="exact", exact_time_limit=0.0)
    assert out.exact_methods == {"time-limit": 4, "none": 1}
    assert out.method == "time-limit" and out.exact_stopped == "time-limit"
    ticks = iter(range(10**9))  # 1 s: the first group of buyers (by candidate count) only
    out = ipfl.clear(five, D5, rule="exact", exact_time_limit=1.0)
    assert out.exact_methods == {"enumeration": 2, "time-limit": 2, "none": 1}
    assert out.method == "enumeration+time-limit"


def test_table1_baseline_utility():
    """6 clients x 200 samples, K = 2e4, c = 1, full graph, 50 rounds: 45.88 (Table 1: 45.9)."""
    mk = ipfl.Market(N=[200] * 6, c=[1.0] * 6, K=[2e4] * 6)
    per_round = ipfl.baseline_utilities(mk, np.ones((6, 6)))
    expected = 50 * (np.sqrt(2e4 / 200) - np.sqrt(2e4 / 1200) - 5)
    np.testing.assert_allclose(50 * per_round, expected, rtol=1e-12)
    assert round(float(50 * per_round[0]), 1) == 45.9


def test_pure_buyer_and_pure_seller():
    """c = inf never sells (and pays no inf*0 cost); K = 0 never buys, even for free."""
    mk = ipfl.Market(N=[300, 300, 300], c=[np.inf, 0.0, 0.0], K=[1e5, 1e5, 0.0], lam=0.0)
    out = ipfl.clear(mk, np.zeros((3, 3)))
    assert not out.adjacency[:, 0].any()  # nobody buys the pure buyer
    assert not out.adjacency[2].any()  # the pure seller buys nothing
    assert out.adjacency[0, 1] and out.adjacency[0, 2]
    assert np.isfinite(out.utilities).all()
    assert out.thresholds[0, 1] == np.inf  # free model: always worth buying


def test_liar_uses_true_values_for_utility():
    """Reported N drives selection and payments; the liar's buyers realise the true gain."""
    honest = ipfl.Market(N=[500, 500, 500], c=[0.5, 0.5, 0.5], K=[5e4] * 3, lam=1.0)
    liar = honest.replace(N=[500, 500, 5000], true_N=[500, 500, 500])
    d = np.full((3, 3), 0.05)
    np.fill_diagonal(d, 0.0)
    out_h = ipfl.clear(honest, d)
    out_l = ipfl.clear(liar, d)
    assert not out_l.truthful and out_h.truthful
    # the buyers' realised gain uses the true 500 samples, not the reported 5000
    g = honest.gain.value
    assert out_l.gains[0] == pytest.approx(g(out_l.adjacency[0] @ liar.true_N, 5e4, 500.0))
    assert out_l.payments.sum() == pytest.approx(0.0, abs=1e-12)


def test_published_threshold_mode_differs_where_spec_says():
    """Root x = N_i + T <= 2 N_j: the published code stalls and never buys; price 0: always."""
    mk = ipfl.Market(N=[100, 1000, 1000], c=[0.0, 0.05, 0.0], K=[1e6, 1e6, 1e6], lam=0.0)
    d = np.zeros((3, 3))
    T_exact = ipfl.thresholds(mk, d, "exact")
    T_pub = ipfl.thresholds(mk, d, "published")
    x = 100 + T_exact[0, 1]
    assert np.isfinite(T_exact[0, 1]) and x > 2 * 1000  # a regular root: both agree
    assert T_pub[0, 1] == T_exact[0, 1]
    assert T_exact[0, 2] == np.inf and T_pub[0, 2] == np.inf
    # make the root small: an expensive seller for a small buyer
    mk2 = ipfl.Market(N=[100, 1000], c=[0.0, 20.0], K=[1e6, 1e6], lam=0.0)
    d = np.zeros((2, 2))
    T2 = ipfl.thresholds(mk2, d, "exact")
    assert 0 < T2[0, 1] < np.inf and 100 + T2[0, 1] <= 2000
    assert ipfl.thresholds(mk2, d, "published")[0, 1] == 0.0
    out = ipfl.clear(mk2, d, thresholds="published")
    assert out.threshold_mode == "published" and not out.adjacency[0, 1]
    assert ipfl.clear(mk2, d).adjacency[0, 1]


BAD_MARKETS = [
    pytest.param({"N": [0, 1]}, "N", id="N-zero"),
    pytest.param({"N": [-5, 1]}, "N", id="N-negative"),
    pytest.param({"N": [np.inf, 1]}, "N", id="N-inf"),
    pytest.param({"N": [np.nan, 1]}, "N", id="N-nan"),
    pytest.param({"c": [-0.1, 1]}, "c", id="c-negative"),
    pytest.param({"c": [np.nan, 1]}, "c", id="c-nan"),
    pytest.param({"c": [1, 2, 3]}, "c", id="c-length"),
    pytest.param({"K": [-1, 1]}, "K", id="K-negative"),
    pytest.param({"K": [np.inf, 1]}, "K", id="K-inf"),
    pytest.param({"lam": -1.0}, "lam", id="lam-negative"),
    pytest.param({"lam": np.nan}, "lam", id="lam-nan"),
    pytest.param({"true_N": [1.0]}, "true_N", id="true_N-length"),
    pytest.param({"true_c": [-1.0, 0]}, "true_c", id="true_c-negative"),
    pytest.param({"gain": lambda x, K, N: K * x * x / N}, "gain", id="gain-convex"),
    pytest.param({"gain": lambda x, K, N: K * (x / N + 1)}, "gain", id="gain-g0-nonzero"),
    pytest.param({"gain": "cubic"}, "gain", id="gain-unknown"),
]


@pytest.mark.parametrize(("override", "field"), BAD_MARKETS)
def test_bad_market_input_names_the_field(override, field):
    kwargs = {"N": [100, 200], "c": [1.0, 1.0], "K": [1e4, 1e4], "lam": 1.0} | override
    with pytest.raises(ipfl.MarketInputError) as info:
        ipfl.Market(**kwargs)
    assert info.value.field == field
    assert str(info.value).startswith(field + ":")


BAD_D = [
    pytest.param(np.zeros((2, 3)), "shape", id="not-square"),
    pytest.param(np.zeros((3, 3)), "shape", id="wrong-m"),
    pytest.param([[0, np.nan], [1, 0]], "finite", id="nan"),
    pytest.param([[0, np.inf], [1, 0]], "finite", id="inf"),
    pytest.param([[1, 1], [1, 0]], "diagonal", id="diagonal"),
    pytest.param([[0, -0.5], [1, 0]], "allow_negative_distances", id="negative"),
]


@pytest.mark.parametrize(("D", "words"), BAD_D)
def test_bad_distances_name_the_field(D, words):
    mk = ipfl.Market(N=[100, 200], c=[1.0, 1.0], K=[1e4, 1e4], lam=1.0)
    with pytest.raises(ipfl.MarketInputError, match=words) as info:
        ipfl.clear(mk, D)
    assert info.value.field == "D"


def test_negative_distances_only_on_request():
    mk = ipfl.Market(N=[100, 200], c=[0.0, 0.0], K=[1e4, 1e4], lam=1.0)
    out = ipfl.clear(mk, [[0, -0.5], [-0.5, 0]], allow_negative_distances=True)
    assert out.adjacency[0, 1] and out.adjacency[1, 0]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rule": "greedy"}, "rule"),
        ({"thresholds": "fsolve"}, "thresholds"),
        ({"rule": "exact", "exact_method": "milp"}, "exact_method"),
    ],
)
def test_bad_options_name_the_field(kwargs, field):
    mk = ipfl.Market(N=[100, 200], c=[1.0, 1.0], K=[1e4, 1e4], lam=1.0)
    with pytest.raises(ipfl.MarketInputError) as info:
        ipfl.clear(mk, np.zeros((2, 2)), **kwargs)
    assert info.value.field == field


def test_dp_refuses_fractional_data():
    mk = ipfl.Market(N=[100.5, 200], c=[1.0, 1.0], K=[1e4, 1e4], lam=1.0)
    with pytest.raises(ipfl.MarketInputError, match="integer") as info:
        ipfl.clear(mk, np.zeros((2, 2)), rule="exact", exact_method="dp")
    assert info.value.field == "exact_method"
