"""Roles, types and attacks (mechanisms.roles), shared by sims and learning."""

import numpy as np
import pytest
import torch

from mechanisms import roles
from mechanisms.errors import MarketInputError


def test_types_follow_the_roles():
    r = ("trader", "buyer", "seller", "attacker")
    K, c = roles.draw_types(r, K=10.0, C=2.0, rng=0)
    assert 5 <= K[0] <= 10 and 5 <= K[1] <= 10 and K[2] == 0 and K[3] == 0
    assert 1 <= c[0] <= 2 and np.isinf(c[1]) and c[2] == 0 and c[3] == 0
    Kf, cf = roles.draw_types(r, K=10.0, C=2.0, rng=0, fixed=True)
    assert Kf.tolist() == [10, 10, 0, 0] and cf[0] == 2.0


def test_random_attacker_placement_varies_with_the_seed():
    seen = {roles.market_roles(10, attackers=1, placement="random", rng=s).index("attacker")
            for s in range(20)}
    assert len(seen) > 3
    assert roles.market_roles(4, attackers=2) == ("trader", "trader", "attacker", "attacker")


@pytest.mark.parametrize("kind", roles.ATTACKS)
def test_attacks_change_an_honest_upload(kind):
    honest = np.linspace(-1, 1, 50)
    out = roles.attack(kind, honest, rng=0)
    assert out.shape == honest.shape and not np.allclose(out, honest)
    if kind == "shuffle":
        assert np.allclose(np.sort(out), np.sort(honest))


def test_bad_role_and_attack_are_named():
    with pytest.raises(MarketInputError) as e:
        roles.draw_types(("king",), 1.0, 1.0, 0)
    assert e.value.field == "roles"
    with pytest.raises(MarketInputError) as e:
        roles.attack("flood", np.zeros(3), 0)
    assert e.value.field == "attack"


def test_sims_and_learning_attack_through_the_same_function(monkeypatch):
    """Both layers call mechanisms.roles.attack: replacing it changes both."""
    from learning.algorithms import TrainConfig
    from learning.session import Session
    from sims.inclusive import InclusiveMarket, run_inclusive_market

    calls = []

    def spy(kind, honest, rng):
        calls.append(kind)
        return np.full(np.shape(honest), 7.0)

    monkeypatch.setattr(roles, "attack", spy)
    run_inclusive_market(InclusiveMarket(rounds=1, n_params=20, attack="shuffle"))
    s = Session(TrainConfig(clients=4, attackers=1, attack="signflip", steps=1))
    up = s.uploads(s.params0)
    assert calls == ["shuffle", "signflip"]
    a = int(s.attackers[0])
    assert torch.all(up[a] == 7.0) and not torch.all(up[(a + 1) % 4] == 7.0)
