"""The sympy derivations behind the mechanisms, run as tests, each with a known-bad twin."""

import pytest
import sympy as sp

from proofs import cpl_derivations as cd
from proofs import ipfl_derivations as idv


@pytest.mark.parametrize("derivation", cd.ALL + idv.ALL, ids=lambda f: f.__name__)
def test_derivation_holds(derivation):
    facts = derivation()
    assert facts


def test_the_seed_papers_inverse_price_typo_is_wrong():
    """Known-bad: the seed text prints the inverse price without the factor v alpha / R
    (2 c q - a^2 G^2 / q^2); it does not solve the first-order condition."""
    q, c, v, a, G, alpha, R = sp.symbols("q c v a G alpha R", positive=True)
    K = alpha * a**2 * G**2 / R
    typo = 2 * c * q - a**2 * G**2 / q**2
    foc = 2 * c * q**3 - typo * q**2 - v * K
    assert sp.simplify(foc) != 0
    assert sp.simplify(foc.subs(v, R / alpha)) == 0  # right only when v alpha / R = 1


def test_p1_not_convex_in_q():
    """Known-bad: the paper's q-form. A budget term's curvature 4c - 2vK/q^3 changes sign."""
    q, c, v, K = sp.symbols("q c v K", positive=True)
    d2 = sp.diff(2 * c * q**2 - v * K / q, q, 2)
    vals = {c: 1, v: 1, K: 1}
    assert d2.subs(vals | {q: sp.Rational(1, 2)}) < 0 < d2.subs(vals | {q: 2})
