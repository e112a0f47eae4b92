"""The two-client theorem of docs/explanation-truthful-design.md, tested at its edge: in
markets where one client can sell to one other, a rule truthful in the six directions, IR on
the type space and without deficit trades only with sellers of cost <= kappa. On the posted
family the checker finds exactly that: at a price up to kappa (every buyer takes every model
on offer) all six directions and IR hold; above it, IR breaks when every buyer must buy and
overstating N pays when buyers choose."""

import numpy as np
import pytest

from proofs import PROPERTIES, IpflMechanism, check
from proofs.typespace import DEFAULT, Dim, TypeSpace
from sims.design.families import posted_mechanism, truthful_posted_price, two_client_bounds

# pure buyers and pure sellers, two clients: the markets where one client can sell to one
# other (half of them: the other half are two buyers or two sellers, who cannot trade)
ONE_WAY = TypeSpace(name="two-client one-way", roles=(0.0, 0.5, 0.5), clients=(2, 2))
# the same markets with costs around kappa: a seller's cost decides whether it sells at kappa
# in about half of them (on the default costs only the zero-cost atoms sell, too few draws
# discriminate for Thm 2 to reach its budget within the draw cap)
NEAR_KAPPA = TypeSpace(name="two-client one-way, costs near kappa", roles=(0.0, 0.5, 0.5),
                       clients=(2, 2), c=Dim(0.0, 0.007))
SIX = ("truthful_N_over", "truthful_N_under", "thm2", "truthful_c_under", "truthful_K_over",
       "truthful_K_under")


def kappa(space):
    return np.sqrt(space.K.low) * (space.N.high ** -0.5 - (space.N.high + space.N.low) ** -0.5)


def _check(mech, key, examples=300, space=ONE_WAY):
    subject = IpflMechanism("posted", mech.rule, payments=mech.payments, prices=mech.prices)
    return check(subject, PROPERTIES[key], max_examples=examples, seed=5, engine="batch",
                 type_space=space, search="strong")


def test_kappa_on_the_default_space():
    assert kappa(DEFAULT) == pytest.approx(0.0035092, abs=1e-7)
    # two clients: the 'all' selection's IR price is kappa itself (one model of N_lo data)
    assert truthful_posted_price(ONE_WAY) == pytest.approx(kappa(ONE_WAY), rel=1e-12)


def test_at_kappa_a_few_examples():
    """The fast tier's version of the two tests below (100 examples, two rows)."""
    at = posted_mechanism({"base": kappa(ONE_WAY)}, "all", refuse_outside=NEAR_KAPPA)
    assert _check(at, "truthful_K_under", 100, NEAR_KAPPA).verdict == "holds"
    above = posted_mechanism({"base": 1000 * kappa(ONE_WAY)}, "all", refuse_outside=ONE_WAY)
    assert _check(above, "individual_rationality", 300).verdict == "counterexample"


@pytest.mark.slow
@pytest.mark.parametrize("key", ("individual_rationality", "no_deficit", *SIX))
def test_at_kappa_every_direction_holds(key):
    mech = posted_mechanism({"base": kappa(ONE_WAY)}, "all", refuse_outside=NEAR_KAPPA)
    assert _check(mech, key, space=NEAR_KAPPA).verdict == "holds"


@pytest.mark.slow
@pytest.mark.parametrize("factor", [1.5, 30.0, 1000.0])
def test_above_kappa_ir_or_truthfulness_in_n_breaks(factor):
    """Above kappa the two ways out are both closed: if every buyer type buys, the least
    eager one pays more than it gains (IR); if buyers choose, a seller is bought more often
    by reporting more data (N overstated)."""
    price = factor * kappa(ONE_WAY)
    forced = posted_mechanism({"base": price}, "all", refuse_outside=ONE_WAY)
    assert _check(forced, "individual_rationality", 3000).verdict == "counterexample"
    chosen = posted_mechanism({"base": price}, "exact", refuse_outside=ONE_WAY)
    assert _check(chosen, "individual_rationality").verdict == "holds"
    assert _check(chosen, "truthful_N_over", 3000).verdict == "counterexample"


def _mixed(f, a, b, e=1e-4):
    """d2 f / da db by central differences (relative steps)."""
    da, db = e * a, e * b
    return (f(a + da, b + db) - f(a + da, b - db) - f(a - da, b + db)
            + f(a - da, b - db)) / (4 * da * db)


def test_theorem_2_step_2_has_no_threshold_inside_the_box():
    """Theorem 2, step 2: a threshold could follow the other client's report only if the
    ratio of the mixed derivatives of log h(N_1, N_2) and log h(N_2, N_1) did not depend on
    N_1. It does, by a factor 16 across the default box (known bad: a separable h, for which
    the ratio is constant, would let it follow)."""
    def h(a, b):
        return a ** -0.5 - (a + b) ** -0.5

    def ratio(n1, n2, f=h):
        return -(_mixed(lambda a, b: np.log(f(a, b)), n1, n2)
                 / _mixed(lambda a, b: np.log(f(b, a)), n1, n2))

    assert ratio(20.0, 20.0) == pytest.approx(-1.0, rel=1e-3)
    assert ratio(2000.0, 20.0) == pytest.approx(-0.2494, rel=1e-2)
    assert ratio(20.0, 2000.0) == pytest.approx(-4.010, rel=1e-2)
    grid = np.geomspace(20.0, 2000.0, 7)
    for n2 in grid:
        r = [ratio(n1, n2) for n1 in grid]
        assert max(r) - min(r) > 0.2, n2  # depends on N_1 at every N_2
    def separable(a, b):  # h = f(N) g(x): log h's mixed derivatives vanish
        return (1.0 / np.sqrt(a)) * (1.0 - np.exp(-b / 100.0))

    assert abs(_mixed(lambda a, b: np.log(separable(a, b)), 300.0, 700.0)) < 1e-9


def test_the_two_way_bound_on_the_default_space():
    """kappa2 = sqrt(K_lo) min over the box of h(N_1, N_2) + h(N_2, N_1): at N_1 = N_2 =
    N_hi on the default space, 2 (sqrt(1/2) - 1/2)."""
    k1, k2 = two_client_bounds(DEFAULT)
    assert k2 == pytest.approx(2 * (0.5 ** 0.5 - 0.5), rel=1e-9)
    assert k1 == pytest.approx(kappa(DEFAULT), rel=1e-12)
