"""A mechanism is data: selection, payment and price rules as names or functions, through one
``ipfl.clear``; reference payment rules (VCG, Shapley, cost-plus) on hand-checked markets."""

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from mechanisms import ipfl
from mechanisms.errors import RuleFailed
from proofs.strategies import ipfl_instances

ROOT = Path(__file__).resolve().parents[1]
MK = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 0.0], K=[5e4, 3e4, 0.0], lam=2.0)
D3 = np.array([[0, .1, .3], [.1, 0, .2], [.3, .2, 0]])


def test_outcome_keeps_its_inputs_and_reclears():
    out = ipfl.clear(MK, D3, "exact", payments="shapley")
    assert out.market is MK and np.array_equal(out.D, D3)
    assert (out.rule, out.payment_rule, out.price_rule) == ("exact", "shapley", "paper")
    again = out.reclear()
    assert np.array_equal(again.adjacency, out.adjacency)
    assert np.array_equal(again.payments, out.payments)
    lied = out.reclear(market=MK.replace(c=[0.5, 3.0, 0.0], true_c=MK.c))
    assert lied.payment_rule == "shapley" and not lied.truthful


@settings(max_examples=40, deadline=None)
@given(ipfl_instances(max_m=5))
def test_gain_is_computed_directly_for_every_payment_rule(inst):
    """U = G - sharing cost - p with G = g(sum a_ij N_j) whatever the payment rule."""
    market, D = inst
    for payments in ("paper", "shapley", "cost-plus"):
        out = ipfl.clear(market, D, "local", payments=payments)
        A = out.adjacency
        G = market.gain.value(A @ market.N, market.K, market.N)
        np.testing.assert_allclose(out.gains, G, rtol=0, atol=0)
        sold = A.sum(0)
        cost = np.array([market.c[j] * sold[j] if sold[j] else 0.0 for j in range(market.m)])
        np.testing.assert_allclose(out.utilities, G - cost - out.payments, rtol=1e-12,
                                   atol=1e-9)


def test_true_K_enters_the_gain_not_the_selection():
    liar = MK.replace(K=[5e4, 3e5, 0.0], true_K=MK.K)
    assert not liar.truthful and np.array_equal(liar.true_K, MK.K)
    out = ipfl.clear(liar, D3)
    A = out.adjacency
    np.testing.assert_allclose(out.gains, MK.gain.value(A @ MK.N, MK.K, MK.N))
    # selection used the reported K: client 1's threshold row differs from the truthful one
    assert not np.array_equal(out.thresholds[1], ipfl.clear(MK, D3).thresholds[1])
    with pytest.raises(ipfl.MarketInputError, match="true_K"):
        ipfl.Market(N=[1, 1], c=[0, 0], K=[1, 1], true_K=[-1, 1])


def test_selection_uses_the_rule_prices():
    """A posted price high enough that nobody buys: selection follows the price rule."""

    def prohibitive(market, D):
        return np.full((market.m, market.m), 1e9)

    out = ipfl.clear(MK, D3, "local", prices=prohibitive)
    assert not out.adjacency.any() and out.price_rule.endswith(".prohibitive")
    assert np.all(out.thresholds == 0)
    seen = {}

    def spy(market, D, T, P):
        seen["P"] = P
        return ipfl.local(T, market.N)

    ipfl.clear(MK, D3, spy, prices="cost-plus")
    np.testing.assert_allclose(seen["P"], ipfl.cost_plus_prices(MK, D3))


def test_rules_by_module_path_and_errors_name_the_key():
    out = ipfl.clear(MK, D3, "local", payments="mechanisms.ipfl.rules:shapley_remittances")
    assert out.payment_rule == "mechanisms.ipfl.rules:shapley_remittances"
    with pytest.raises(ipfl.MarketInputError, match=r"^payments: unknown 'vgc'"):
        ipfl.clear(MK, D3, payments="vgc")
    with pytest.raises(ipfl.MarketInputError, match=r"^prices: cannot import"):
        ipfl.clear(MK, D3, prices="nosuchmodule:f")
    # the rule named in every error about what it returned (RuleFailed)
    with pytest.raises(RuleFailed, match=r"^payments: .*<lambda> returned shape"):
        ipfl.clear(MK, D3, payments=lambda market, A, D: np.zeros(2))
    with pytest.raises(ipfl.MarketInputError, match=r"^payments: .*<lambda> returned NaN"):
        ipfl.clear(MK, D3, payments=lambda market, A, D: np.full(3, np.nan))
    with pytest.raises(RuleFailed, match=r"^prices: .*<lambda> returned nan"):
        ipfl.clear(MK, D3, prices=lambda market, D: np.full((3, 3), np.nan))
    with pytest.raises(ipfl.MarketInputError, match=r"^rule: .* returned a client buying"):
        ipfl.clear(MK, D3, lambda market, D, T, P: np.eye(3, dtype=bool))


def test_direct_payments_have_no_remittances_and_frame_uses_the_operator():
    out = ipfl.clear(MK, D3, "exact", payments="vcg")
    assert out.remittances is None
    f = out.to_frame()
    np.testing.assert_allclose(f.paid - f.earned, out.payments)


# ---------------------------------------------------------------------------- VCG


def _vcg_by_hand(market, D):
    """Clarke pivot by brute force: re-clear the market without client i (c_i = inf, K_i = 0)."""
    full = ipfl.clear(market, D, "exact")
    W = -ipfl.phi(market, full.prices, full.adjacency).sum()
    p = []
    for i in range(market.m):
        c, K = market.c.copy(), market.K.copy()
        c[i], K[i] = np.inf, 0.0
        without = market.replace(c=c, K=K)
        A = ipfl.clear(without, D, "exact").adjacency
        h = -ipfl.phi(without, without.prices(D), A).sum()
        sold = full.adjacency[:, i].sum()
        v_i = market.gain.value(full.adjacency[i] @ market.N, market.K[i], market.N[i]) - (
            market.c[i] * sold if sold else 0.0)
        p.append(h - (W - v_i))
    return np.array(p)


@settings(max_examples=30, deadline=None)
@given(ipfl_instances(max_m=5))
def test_vcg_matches_the_clarke_pivot_by_hand_and_is_individually_rational(inst):
    market, D = inst
    out = ipfl.clear(market, D, "exact", payments="vcg")
    np.testing.assert_allclose(out.payments, _vcg_by_hand(market, D), rtol=1e-9, atol=1e-9)
    assert out.utilities.min() >= -1e-9 * (1 + np.abs(out.payments).max())


def test_vcg_runs_a_deficit_on_a_two_client_exchange():
    """Two traders who each want the other's model: each is pivotal for the other's purchase,
    so each pays only the other's cost and the operator pays the gains in between."""
    mk = ipfl.Market(N=[100, 100], c=[0.1, 0.1], K=[1e4, 1e4])
    out = ipfl.clear(mk, np.zeros((2, 2)), "exact", payments="vcg")
    assert out.adjacency.sum() == 2
    g = mk.gain.value(100.0, 1e4, 100.0)
    # without i nobody trades (W_-i = 0); W - v_i = g - c for the other buyer => p_i = c - g
    np.testing.assert_allclose(out.payments, [0.1 - g, 0.1 - g])
    assert out.budget_surplus < 0


# ---------------------------------------------------------------------------- Shapley


def test_shapley_split_of_one_buyer_by_hand():
    """Buyer 0 buys from sellers 1 (N=100) and 2 (N=300): the Shapley share of 1 is
    (g(100) + g(400) - g(300)) / 2, net of its model-difference term."""
    mk = ipfl.Market(N=[100, 100, 300], c=[np.inf, 0.0, 0.0], K=[1e5, 0.0, 0.0], lam=1.0)
    D = np.array([[0, .2, .1], [.2, 0, 0], [.1, 0, 0]])
    A = np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]], bool)
    R = ipfl.shapley_remittances(mk, A, D)

    def g(x):
        return mk.gain.value(x, 1e5, 100.0)

    sh1 = 0.5 * (g(100) + g(400) - g(300))
    sh2 = 0.5 * (g(300) + g(400) - g(100))
    np.testing.assert_allclose(R[0, 1:], [sh1 - 0.2, sh2 - 3 * 0.1])
    np.testing.assert_allclose(sh1 + sh2, g(400))  # efficiency: the whole gain is split


# ---------------------------------------------------------------------------- cost-plus


def test_cost_plus_pays_the_posted_price():
    prices, pay = ipfl.cost_plus(1.0)
    out = ipfl.clear(MK, D3, "local", payments=pay, prices=prices)
    A = out.adjacency
    np.testing.assert_allclose(out.remittances, np.where(A, 2.0 * MK.c[None, :], 0.0))
    with pytest.raises(ipfl.MarketInputError, match="markup"):
        ipfl.cost_plus(-1)


def test_the_built_in_cost_plus_rule_pays_cost_plus_a_quarter_above_cost():
    """payments="cost-plus" with prices="cost-plus" posts and pays (1 + 0.25) c_j for every
    model bought (rules.COST_PLUS_MARKUP = 0.25), so a seller earns a quarter above its sharing
    cost on every sale (individually rational). Known-bad: the mutant cost_plus_no_markup
    (markup -0.25, a seller paid below its cost) fails it."""
    mk = ipfl.Market(N=[400, 500, 600], c=[0.5, 1.0, 2.0], K=[5e4, 3e4, 2e4], lam=2.0)
    out = ipfl.clear(mk, D3, "local", payments="cost-plus", prices="cost-plus")
    A = out.adjacency
    assert A.sum() >= 2  # models with a cost are sold (0 -> 1, 1 -> 0, 2 -> 0)
    np.testing.assert_allclose(out.remittances, np.where(A, 1.25 * mk.c[None, :], 0.0))
    earned = out.remittances.sum(axis=0) - A.sum(axis=0) * mk.c  # what sellers keep
    np.testing.assert_allclose(earned, 0.25 * A.sum(axis=0) * mk.c)
    assert earned.max() > 0


def test_share_all_buys_every_model_on_sale_but_its_own():
    """The FedAvg-like baseline: a client with a gain (K_i > 0) takes every other client's
    model on sale (finite c), never its own; a pure seller takes none. One market and in
    bulk. Known-bad: the mutant share_all_self (the diagonal kept) fails it."""
    mk = ipfl.Market(N=[400, 500, 600, 300], c=[0.5, np.inf, 0.0, 2.0], K=[5e4, 3e4, 0.0, 1e4],
                     lam=2.0)
    D = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0))) / 10
    want = (mk.K[:, None] > 0) & np.isfinite(mk.c)[None, :] & ~np.eye(4, dtype=bool)
    out = ipfl.clear(mk, D, "share-all", payments="none")
    assert np.array_equal(out.adjacency, want)
    bulk = ipfl.clear_batch(ipfl.MarketArrays.from_markets([mk, mk]), np.stack([D, D]),
                            "share-all", payments="none")
    assert np.array_equal(bulk.adjacency, np.stack([want, want]))


@settings(max_examples=40, deadline=None)
@given(ipfl_instances(max_m=5))
def test_every_built_in_rule_pays_finite_amounts(inst):
    """No payment, remittance or utility of a built-in rule is NaN or infinite (the mutant
    nan_payment, a NaN payment for a big buyer in Eq. 13, fails it)."""
    market, D = inst
    for rule, payments, prices in [("box2", "paper", "paper"), ("exact", "vcg", "paper"),
                                   ("local", "shapley", "paper"),
                                   ("local", "cost-plus", "cost-plus"),
                                   ("share-all", "none", "paper")]:
        out = ipfl.clear(market, D, rule, payments=payments, prices=prices)
        assert np.all(np.isfinite(out.payments)), (rule, payments, out.payments)
        assert np.all(np.isfinite(out.utilities)), (rule, payments, out.utilities)
        if out.remittances is not None:
            assert np.all(np.isfinite(out.remittances)), (rule, payments)


def test_reference_rules_declare_claims():
    for name, fn in ipfl.PAYMENT_RULES.items():
        assert fn.pairs_with in ipfl.SELECTION_RULES, name
        assert "budget_balance" in fn.claims and "individual_rationality" in fn.claims, name


# ---------------------------------------------------------------------------- layering


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_no_import_circle_between_sims_and_proofs():
    """proofs/ never imports sims/, and sims/ reaches proofs/ only in the prove/report command
    layer (never in the simulation modules)."""
    for path in (ROOT / "proofs").rglob("*.py"):
        assert "sims" not in _imports(path), path
    for name in ("inclusive.py", "scenarios.py", "sweep.py", "cpl_game.py"):
        assert "proofs" not in _imports(ROOT / "sims" / name), name
    for path in (ROOT / "mechanisms").rglob("*.py"):
        assert not {"proofs", "sims", "learning", "torch"} & _imports(path), path


def test_inclusive_custom_rule_equals_builtin_on_every_column():
    """A custom rule that reimplements "local" gives the same per-round frame as "local":
    one clearing path, one gain definition."""
    from sims.inclusive import InclusiveMarket, run_inclusive_market

    def my_local(market, D, T, P):
        return ipfl.local(T, market.N)

    cfg = InclusiveMarket(rounds=2, n_params=200)
    a = run_inclusive_market(cfg).rounds
    b = run_inclusive_market(cfg, rule=my_local).rounds
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    c = run_inclusive_market(cfg, payments="shapley").rounds
    np.testing.assert_array_equal(a.gain.to_numpy(), c.gain.to_numpy())
    assert not np.allclose(a.payment.to_numpy(), c.payment.to_numpy())


def test_cli_clear_takes_any_mechanism_and_true_k(tmp_path, capsys):
    import json

    from sims.cli import main

    f = tmp_path / "m.json"
    f.write_text(json.dumps({"N": [100, 100], "c": [0.1, 0.1], "K": [1e4, 1e4],
                             "D": [[0, 0], [0, 0]], "true_K": [1e4, 2e4]}))
    assert main(["clear", str(f), "--rule", "exact", "--payments", "vcg"]) == 0
    out = capsys.readouterr().out
    assert "payments=vcg" in out and "(deficit)" in out
    assert main(["clear", str(f), "--payments", "vgc"]) == 2
    assert "payments: unknown 'vgc'" in capsys.readouterr().err


def test_shapley_works_through_the_coalitions_a_chunk_at_a_time(monkeypatch):
    """The Shapley split evaluates at most SHAPLEY_CHUNK coalition x seller entries per step
    (its working memory: a few float arrays of that many entries), however many buyers the
    batch holds. A generated mutant that made the step SHAPLEY_CHUNK ^ (2^k k) instead of
    SHAPLEY_CHUNK // (2^k k) took every buyer at once (2.1 GiB instead of 0.56 for 24
    markets of 15 clients) and survived every test: the values are the same. Here with a
    small chunk, so that the batch spans many steps."""
    import tracemalloc

    from mechanisms.ipfl import rules

    chunk = 2**14
    monkeypatch.setattr(rules, "SHAPLEY_CHUNK", chunk)
    m, B = 9, 24  # 8 sellers a buyer: 2^8 coalitions; 216 buyers, 8 a step
    rng = np.random.default_rng(0)
    markets = [ipfl.Market(N=rng.uniform(50, 500, m), c=np.zeros(m), K=np.full(m, 1e5),
                           lam=1.0) for _ in range(B)]
    batch = ipfl.MarketArrays.from_markets(markets)
    A = np.broadcast_to(~np.eye(m, dtype=bool), (B, m, m))
    D = np.zeros((B, m, m))
    tracemalloc.start()
    try:
        R = ipfl.shapley_remittances(batch, A, D)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # sixteen float64 arrays of a chunk (2 MiB): measured 0.75 MB; every buyer at once, 12.6 MB
    assert peak <= 16 * chunk * 8, peak
    # the same split as one market at a time (the chunking changes nothing else)
    one = ipfl.shapley_remittances(ipfl.MarketArrays.from_markets(markets[:1]), A[:1], D[:1])
    np.testing.assert_allclose(R[:1], one, rtol=1e-12)
