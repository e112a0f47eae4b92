"""The neural family starts at the paper's rule, its differentiable loss measures the same
regret as the bulk evaluation, and a trained network is a rule the toolkit clears."""

import numpy as np
import pytest

from mechanisms import ipfl
from sims.design import REFERENCES, DesignInputError, draw_markets, evaluate

neural = pytest.importorskip("sims.design.neural")

MARKET = ipfl.Market(N=[400, 500, 600, 300], c=[0.5, 1.0, 0.0, np.inf],
                     K=[5e4, 3e4, 0.0, 8e4], lam=2.0)
D = np.array([[0, .1, .3, .2], [.1, 0, .2, .4], [.3, .2, 0, .1], [.2, .4, .1, 0]])


def test_untrained_network_is_the_paper_rule():
    rule = neural.NeuralRule(hidden=4, seed=3).rule()
    a = ipfl.clear(MARKET, D, "local", payments=rule).payments
    b = ipfl.clear(MARKET, D, "local", payments="paper").payments
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_training_loss_is_the_bulk_regret_and_the_result_clears():
    combos = (("K", "under"), ("c", "under"))
    mk = draw_markets(40, seed=2)
    model, hist = neural.train(neural.NeuralConfig(steps=2, hidden=4, combos=combos,
                                                   lr=0.05), markets=mk)
    assert len(hist) == 2 and np.isfinite(hist["loss"]).all()
    # step 1 is measured before any update: the paper's rule, as the bulk evaluation sees it
    # with the training's inner search (the checker's misreports_batch defaults: "former";
    # the design measures' default is the stronger search, DEFAULT_SEARCH)
    s = evaluate(REFERENCES["paper"], mk, combos=combos, search="former").summary
    expected = np.mean([s[f"mean_regret_{d}_{w}"] for d, w in combos]) / s["utility_level"]
    assert hist.loc[0, "mean_rel_regret"] == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert hist.loc[0, "ir_penalty"] == 0  # the paper's rule is IR
    trained = model.rule("trained")
    assert not np.allclose(ipfl.clear(MARKET, D, "local", payments=trained).payments,
                           ipfl.clear(MARKET, D, "local", payments="paper").payments)
    out = ipfl.clear(MARKET, D, "local", payments=trained)
    assert abs(out.payments.sum()) < 1e-9  # remittances: balanced
    with pytest.raises(DesignInputError, match="steps"):
        neural.NeuralConfig(steps=0)
