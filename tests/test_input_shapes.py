"""Inputs (issue 33, part 5). A user's gain is checked for its shape (g(0) = 0, increasing,
concave) whatever the data amounts N are: the check's grid does not scale with N alone
(:meth:`mechanisms.gains.Gain.check`), so a convex gain is refused at tiny and at large N
and a concave one, however it is written, is accepted at every N. An asymmetric D is refused
in one line naming D and the first pair that differs, by the library and ``fedmarket clear``
alike, unless allowed on purpose (``allow_asymmetric_distances=True``,
``--allow-asymmetric-distances``: d_ij is buyer i's distance to j's model, e.g. a
divergence), when it is cleared as given."""

import numpy as np
import pytest

from mechanisms import ipfl
from mechanisms.errors import MarketInputError
from mechanisms.gains import CallableGain, LogGain, PowerGain, SqrtGain

SIZES = [1e-20, 1e-12, 1e-6, 1e-3, 1.0, 3.0, 1e3, 1e6, 1e12]

CONVEX = {
    "exp(x) - 1": lambda x, K, N: K * np.expm1(x),
    "x + x^2": lambda x, K, N: K * (x + x**2),
    "cosh(x) - 1": lambda x, K, N: K * (np.cosh(x) - 1.0),
    "x^1.01": lambda x, K, N: K * x**1.01,
    # concave on the buyer's own 0 .. 16 N (all the former grid saw), convex beyond 64 N
    "log, then convex": lambda x, K, N: K * (np.log1p(x / N)
                                             + np.maximum(x / N - 64.0, 0.0) ** 2),
}

CONCAVE = {
    "the paper's sqrt gain, written out": lambda x, K, N: np.sqrt(K / N) - np.sqrt(K / (N + x)),
    "log(1 + x/N)": lambda x, K, N: K * np.log(1.0 + x / N),
    "x / (N + x)": lambda x, K, N: K * x / (N + x),
    "linear": lambda x, K, N: K * x,
    "capped at N": lambda x, K, N: K * np.minimum(x, N),
    "arctan(x/N)": lambda x, K, N: K * np.arctan(x / N),
    "1 - exp(-x/N)": lambda x, K, N: K * -np.expm1(-x / N),
    "sqrt(x)": lambda x, K, N: K * np.sqrt(x),
    "the built-in sqrt": SqrtGain().value,
    "the built-in log": LogGain().value,
    "the built-in power 0.3": PowerGain(0.3).value,
}


def _check(fn, N, K=(1e-3, 1.0, 1e4)):
    K = np.asarray(K, dtype=float)
    CallableGain(fn=fn, label="mine").check(K, np.full(K.shape, N))


@pytest.mark.parametrize("name", list(CONVEX))
@pytest.mark.parametrize("N", SIZES)
def test_a_convex_gain_is_refused_at_every_data_size(name, N):
    # (exp and cosh overflow float64 within 16 N from N = 1e3: refused for that)
    with pytest.raises(MarketInputError, match=r"^gain: .*(must be concave|finite values)"):
        _check(CONVEX[name], N)


@pytest.mark.parametrize("name", list(CONCAVE))
@pytest.mark.parametrize("N", SIZES)
def test_a_concave_gain_is_accepted_at_every_data_size(name, N):
    _check(CONCAVE[name], N)


def test_the_former_grid_could_not_see_these_convex_gains():
    """Known-bad: the former check looked only at 0, N/4, ..., 16 N. At N = 1e-20 exp(x) - 1
    and x + x^2 are straight there to 1e-18 relative (their bend below the check's 1e-9
    tolerance), and "log, then convex" is concave there at every N: a grid that follows N
    alone passes all three, so the refusals above come from the grid across scales."""
    N = 1e-20
    x = N * np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    for name in ("exp(x) - 1", "x + x^2"):
        g = CONVEX[name](x, 1.0, N)
        slopes = np.diff(g) / np.diff(x)
        assert np.diff(slopes).max() <= 1e-9 * slopes.max(), name
    for n in (1e-20, 1.0, 1e12):
        x = n * np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
        slopes = np.diff(CONVEX["log, then convex"](x, 1.0, n)) / np.diff(x)
        assert (np.diff(slopes) < 0).all()


def test_a_market_refuses_a_convex_gain_in_one_line_naming_gain():
    with pytest.raises(MarketInputError) as info:
        ipfl.Market(N=[1e-9, 2e-9], c=[0.1, 0.1], K=[1.0, 1.0], gain=CONVEX["x + x^2"])
    assert str(info.value).startswith("gain: ") and "\n" not in str(info.value)
    assert "concave" in str(info.value)
    ipfl.Market(N=[1e-9, 2e-9], c=[0.1, 0.1], K=[1.0, 1.0], gain=CONCAVE["x / (N + x)"])


def test_the_other_shape_checks_still_hold():
    """g(0) = 0 and increasing are refused as before, at tiny and large N."""
    for N in (1e-12, 1e6):
        with pytest.raises(MarketInputError, match="g\\(0\\) = 0"):
            _check(lambda x, K, N: K * (1.0 + np.log1p(x / N)), N)
        with pytest.raises(MarketInputError, match="increasing"):
            _check(lambda x, K, N: -K * np.log1p(x / N), N)


# an asymmetric D (issue 33, part 5): refused by default (more often a transposed or
# half-filled matrix than a divergence), cleared as given on purpose. d_ij is buyer i's
# d(theta_i, theta_j) (the paper's Eq. 6 term in i's objective). Validated in one place
# (check_distances) for the library and the command line.


def _market_file(tmp_path, D):
    import json

    path = tmp_path / "market.json"
    path.write_text(json.dumps({"N": [100, 200, 300], "c": [0.1, 0.2, 0.1],
                                "K": [1e4, 1e4, 1e4], "lam": 1.0, "D": D}))
    return str(path)


MARKET = ipfl.Market(N=[100, 200, 300], c=[0.1, 0.2, 0.1], K=[1e4, 1e4, 1e4], lam=1.0)
SYMMETRIC = [[0, 0.1, 0.3], [0.1, 0, 0.2], [0.3, 0.2, 0]]
# buyer 2 finds client 1's model far from its own (a divergence), client 1 finds 2's close
ASYMMETRIC = [[0, 0.1, 0.3], [0.1, 0, 0.2], [0.3, 2.0, 0]]
REFUSED = r"^D: is not symmetric: D\[1, 2\] = 0.2 but D\[2, 1\] = 2.0; pass allow_asymmetric"


def test_an_asymmetric_D_is_refused_by_default_in_one_line_naming_D_and_the_pair():
    with pytest.raises(MarketInputError, match=REFUSED) as err:
        ipfl.clear(MARKET, ASYMMETRIC)
    assert "\n" not in str(err.value)
    with pytest.raises(MarketInputError, match=REFUSED.replace("D\\[", "D\\[1\\]\\[")):
        ipfl.clear_batch(ipfl.MarketArrays.from_markets([MARKET, MARKET]),
                         [SYMMETRIC, ASYMMETRIC])
    with pytest.raises(MarketInputError, match=r"^allow_asymmetric_distances: is 'yes'"):
        ipfl.clear(MARKET, ASYMMETRIC, allow_asymmetric_distances="yes")


def test_an_asymmetric_D_is_cleared_as_given_on_purpose_row_i_being_buyer_i_s():
    """Buyer i's selection and the remittances it sends read row i of D only: raising
    d_21 alone changes buyer 2's purchases and nobody else's."""
    sym = ipfl.clear(MARKET, SYMMETRIC)
    asym = ipfl.clear(MARKET, ASYMMETRIC, allow_asymmetric_distances=True)
    assert asym.options["allow_asymmetric_distances"] is True
    assert asym.reclear().adjacency.tolist() == asym.adjacency.tolist()  # the option kept
    assert sym.adjacency[2, 1] and not asym.adjacency[2, 1]  # the far model is not bought
    assert np.array_equal(sym.adjacency[:2], asym.adjacency[:2])  # rows 0 and 1 unchanged
    assert np.allclose(sym.remittances[:2], asym.remittances[:2], atol=1e-12)
    # the transpose is another market: buyer 1 now sees 2's model as far
    assert not ipfl.clear(MARKET, np.transpose(ASYMMETRIC),
                          allow_asymmetric_distances=True).adjacency[1, 2]
    # the batch engine the same, market by market
    batch = ipfl.clear_batch(ipfl.MarketArrays.from_markets([MARKET, MARKET]),
                             [SYMMETRIC, ASYMMETRIC], allow_asymmetric_distances=True)
    assert np.array_equal(batch.adjacency[1], asym.adjacency)
    assert np.allclose(batch.payments[1], asym.payments, atol=1e-12)


def test_the_symmetry_check_tolerates_rounding_only():
    from mechanisms.errors import SYMMETRY_RTOL

    theta = np.random.default_rng(0).standard_normal((30, 500))
    m = 30
    mk = ipfl.Market(N=[100] * m, c=[0.1] * m, K=[1e4] * m, lam=1.0)
    for metric in ("l2sq", "cosine"):  # distances the toolkit computes pass as they are
        ipfl.clear(mk, ipfl.pairwise_distances(theta, metric, reference=theta[0] * 0.1))
    D = np.array(SYMMETRIC, dtype=float)
    D[0, 1] *= 1 + 0.5 * SYMMETRY_RTOL  # rounding: accepted
    ipfl.clear(MARKET, D)
    D[0, 1] = 0.1 + 10 * SYMMETRY_RTOL * 0.3  # beyond it (0.3 is the largest d): refused
    with pytest.raises(MarketInputError, match=r"^D: is not symmetric: D\[0, 1\]"):
        ipfl.clear(MARKET, D)


def test_fedmarket_clear_refuses_an_asymmetric_D_and_clears_it_on_purpose(tmp_path, capsys):
    import pandas as pd

    from sims.cli import main

    assert main(["clear", _market_file(tmp_path, ASYMMETRIC), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedmarket: error: D: is not symmetric: "
                                               "D[1, 2] = 0.2 but D[2, 1] = 2.0"), err
    assert "--allow-asymmetric-distances" in err[0]
    csv = tmp_path / "out.csv"
    assert main(["clear", _market_file(tmp_path, ASYMMETRIC), "--quiet",
                 "--allow-asymmetric-distances", "--csv", str(csv)]) == 0
    assert capsys.readouterr().err == ""
    df = pd.read_csv(csv)
    want = ipfl.clear(MARKET, ASYMMETRIC, allow_asymmetric_distances=True).payments
    assert np.allclose(df["payment"], want, atol=1e-9)
    assert main(["clear", _market_file(tmp_path, SYMMETRIC), "--quiet"]) == 0


@pytest.mark.parametrize("D, field_text", [
    ([[0, 0.1], [0.1, 0]], "has shape"),
    ([[0, 0.1, 0.3], [0.1, 0.5, 0.2], [0.3, 2.0, 0]], "diagonal"),
    ([[0, 0.1, 0.3], [0.1, 0, float("nan")], [0.3, 2.0, 0]], "finite"),
    ([[0, 0.1, 0.3], [0.1, 0, -0.2], [0.3, 2.0, 0]], ">= 0"),
])
def test_the_one_check_of_D_refuses_the_same_for_library_and_command(D, field_text, tmp_path,
                                                                       capsys):
    from sims.cli import main

    with pytest.raises(MarketInputError, match=f"^D: .*{field_text}"):
        ipfl.clear(MARKET, D)
    assert main(["clear", _market_file(tmp_path, D), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedmarket: error: D: ") and field_text in err[0]


def test_a_convex_gain_s_refusal_names_the_first_point_where_the_slope_rises():
    """Of every point where the slope rises, the message names the smallest data amount of the
    first buyer (x^2: the grid's first interior point, 2^-16 N), not the last one (a
    generated mutant reading np.argwhere(bad)[-1] named 2^48 N and survived every test)."""
    from mechanisms.gains import CHECK_RELATIVE

    with pytest.raises(MarketInputError, match="must be concave") as err:
        _check(lambda x, K, N: K * (np.asarray(x) / N) ** 2, 1.0, K=(1.0, 2.0))
    assert f"x = {CHECK_RELATIVE[1]:.6g} " in str(err.value), str(err.value)
