"""The frontier's floor and figure: regret_floor checks its premises market by market and
bounds from the critical reports where the buyer switches sellers; the frontier marks the
rules that break IR or run a deficit, and labels absolute and relative regret apart."""

import numpy as np
import pytest

from mechanisms import ipfl
from sims.design import DesignInputError, LinearSpace, evaluate, markets_from
from sims.design.frontier import regret_floor

# Held-out market 1,610 of draw_markets(2000, seed=1000) (issue 31): client 1 buys client 0's
# model and nothing else is traded; as client 0 raises its cost past about 5.07, client 1
# buys client 2's larger model instead, long before its price reaches client 1's marginal.
SWITCH = ipfl.Market(N=[1097.0, 20.0, 1767.0],
                     c=[3.071596633360918, 4.905709415736725, 2.9385622607368704],
                     K=[0.0, 928350.7214708966, 0.0], lam=0.3274106296186441)
SWITCH_D = np.array([[0.0, 0.4569392140049784, 1.9195866757725737],
                     [0.0, 0.0, 0.29837310450707655],
                     [1.1310165017431122, 1.186845480099286, 0.0]])


def _sold(cost: float) -> bool:
    """Is client 0's model bought when it reports ``cost`` (one market, ipfl.clear)?"""
    c = SWITCH.c.copy()
    c[0] = cost
    out = ipfl.clear(SWITCH.replace(c=c), SWITCH_D, "local", payments="paper")
    return bool(out.adjacency[:, 0].any())


def test_floor_on_a_switching_market_bounds_from_the_critical_cost():
    """The closed form (m - c - 2 lam (N_j/N_i) d) / 2 assumes the seller stays bought up to
    c_hi = m - lam (N_j/N_i) d (here 186.6); it is not: the buyer switches at c* = 5.07. The
    floor comes from c*, found independently here by scanning single-market clearings."""
    A = ipfl.clear(SWITCH, SWITCH_D, "local", payments="paper").adjacency
    assert np.argwhere(A).tolist() == [[1, 0]]
    row = regret_floor(markets_from(SWITCH, SWITCH_D)).iloc[0]
    assert row.single_trade and (row.buyer, row.seller) == (1, 0)
    assert not row.premise_seller and row.premise_buyer
    assert row.c_hi == pytest.approx(186.618301, abs=1e-5)
    assert row.floor_premise == pytest.approx(91.773352, abs=1e-5)  # the closed form
    # the critical cost by a plain scan of ipfl.clear: sold just below c*, not just above
    grid = np.linspace(SWITCH.c[0], row.c_hi, 2001)
    sold = np.array([_sold(x) for x in grid[:200]])
    first_off = int(np.argmin(sold))
    assert sold[:first_off].all() and not sold[first_off:].any()
    assert grid[first_off - 1] <= row.c_star < grid[first_off]
    assert _sold(row.c_star) and not _sold(row.c_star * (1 + 1e-9))
    assert row.v_star == pytest.approx(row.price, rel=1e-9)
    assert row.floor == pytest.approx((row.c_star - row.price) / 2, rel=1e-12)
    assert row.floor == pytest.approx(1.001697, abs=1e-5)


def test_the_closed_form_fails_on_the_switching_market_where_the_floor_holds():
    """Known bad: the closed form claims every IR rule without deficit pays some liar 91.8
    here. The cost rule (the buyer pays the seller's reported cost: IR and balanced by
    construction) pays the seller at most c* - c_j (2.0) for overstating c, and the buyer
    6.2 for understating K (at a lower K it buys client 2's larger model, at client 2's
    cost): the closed form is no bound; the critical-cost floor (1.0) is below both."""
    space = LinearSpace(("marginal", "cost", "distance"), clip=True)
    rule = space.rule(space.point(cost=1.0))
    mine = markets_from(SWITCH, SWITCH_D)
    ev = evaluate(rule, mine, combos=(("c", "over"), ("K", "under")),
                  search={"span": 1e4, "grid": 64})
    s = ev.summary
    assert s["ir_rate"] == 0 and abs(s["mean_balance"]) < 1e-9
    floor = regret_floor(mine).iloc[0]
    # the seller's best lie is (just below) its critical cost: c* - c_j, found by the search
    seller = ev.per_market.iloc[0]["regret_c_over"]
    assert seller == pytest.approx(floor.c_star - SWITCH.c[0], rel=5e-3)
    found = max(s["max_regret_c_over"], s["max_regret_K_under"])
    assert floor.floor <= found < floor.floor_premise / 10


def test_floor_with_ir_demanded_on_bounded_types():
    """IR demanded only for costs up to cost_max (and gain scales from scale_min): the
    critical cost is searched within them, so the floor shrinks to (cost_max - v*) / 2, and
    to 0 where the bound lies below the price; a gain-scale bound above the critical one
    raises v* to the gain there."""
    mine = markets_from(SWITCH, SWITCH_D)
    free = regret_floor(mine).iloc[0]
    row = regret_floor(mine, cost_max=4.0).iloc[0]
    assert row.c_star == pytest.approx(4.0, rel=1e-12) and row.premise_seller
    assert row.floor == pytest.approx((4.0 - free.price) / 2, rel=1e-9)
    assert row.floor < free.floor
    assert regret_floor(mine, cost_max=1.0).iloc[0].floor == 0.0
    K = SWITCH.K[1]
    row = regret_floor(mine, scale_min=0.5 * K).iloc[0]
    g = SWITCH.gain.value(SWITCH.N[0], 0.5 * K, SWITCH.N[1])  # G_1({0}) at half its K
    assert row.v_star == pytest.approx(g, rel=1e-9) and row.v_star > free.v_star
    with pytest.raises(DesignInputError, match="cost_max"):
        regret_floor(mine, cost_max=-1.0)
