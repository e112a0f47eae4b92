"""The frontier's floor and figure: regret_floor checks its premises market by market and
bounds from the critical reports where the buyer switches sellers; the frontier marks the
rules that break IR or run a deficit, and labels absolute and relative regret apart."""

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mechanisms import ipfl
from sims.design import DesignInputError, LinearSpace, evaluate, markets_from
from sims.design.frontier import (
    frontier_markdown,
    page_section,
    regret_floor,
    replace_page_section,
)

# half of the drawn markets have an asymmetric D on purpose (proofs.typespace): the
# tests clear them as the checker does, with the opt-in (tests/test_input_shapes.py checks
# the refusal without it)
_clear = functools.partial(ipfl.clear, allow_asymmetric_distances=True)
_clear_batch = functools.partial(ipfl.clear_batch, allow_asymmetric_distances=True)

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
    out = _clear(SWITCH.replace(c=c), SWITCH_D, "local", payments="paper")
    return bool(out.adjacency[:, 0].any())


def test_the_switching_market_is_held_out_market_1610_of_seed_1000():
    from sims.design import draw_markets

    k = 1610
    for g in draw_markets(2000, 1000).groups:
        if k < len(g["N"]):
            break
        k -= len(g["N"])
    assert g["N"][k].tolist() == SWITCH.N.tolist() and g["c"][k].tolist() == SWITCH.c.tolist()
    assert g["K"][k].tolist() == SWITCH.K.tolist() and g["lam"][k] == SWITCH.lam
    np.testing.assert_array_equal(g["D"][k], SWITCH_D)
    # the drawn support the page quotes: costs in [0, 5] (or a pure buyer's inf), gain
    # scales in [1e3, 1e6] (or a pure seller's 0)
    c = np.concatenate([x["c"].ravel() for x in draw_markets(2000, 1000).groups])
    K = np.concatenate([x["K"].ravel() for x in draw_markets(2000, 1000).groups])
    assert c[np.isfinite(c)].min() >= 0 and c[np.isfinite(c)].max() <= 5
    assert K[K > 0].min() >= 1e3 and K.max() <= 1e6
    assert regret_floor(markets_from(SWITCH, SWITCH_D)).iloc[0].c_hi > 100  # c_hi: hundreds


def test_floor_on_a_switching_market_bounds_from_the_critical_cost():
    """The closed form (m - c - 2 lam (N_j/N_i) d) / 2 assumes the seller stays bought up to
    c_hi = m - lam (N_j/N_i) d (here 186.6); it is not: the buyer switches at c* = 5.07. The
    floor comes from c*, found independently here by scanning single-market clearings."""
    A = _clear(SWITCH, SWITCH_D, "local", payments="paper").adjacency
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
    assert floor.floor <= found <= 6.2 < floor.floor_premise / 10


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


DOCS = Path(__file__).resolve().parents[1] / "docs"


def _committed():
    import json

    table = pd.read_csv(DOCS / "design_frontier.csv")
    side = json.loads((DOCS / "design_frontier.json").read_text())
    return table, side


def test_the_page_shows_the_committed_frontier():
    """docs/reference-design.md's frontier section is what frontier_markdown writes from the
    committed CSV and sidecar (benchmarks/design_frontier.py --page), byte for byte, and its
    figure is committed beside it. Known bad: one number of the table changed, or the floor
    of the sidecar, and the page no longer matches."""
    table, side = _committed()
    page = (DOCS / "reference-design.md").read_text()
    assert page_section(page) == frontier_markdown(table, side)
    assert (DOCS / side["figure"]).is_file()
    assert side["command"].startswith("python benchmarks/design_frontier.py ")
    assert f"the `{side['search']}` misreport search" in page_section(page)
    bad = table.copy()
    bad.loc[0, "largest_regret_K"] *= 1.01
    assert page_section(page) != frontier_markdown(bad, side)
    assert page_section(page) != frontier_markdown(table, {**side, "floor": {
        **side["floor"], "largest": side["floor"]["largest"] + 1}})
    # the section is replaced in place, the rest of the page kept
    again = replace_page_section(page, frontier_markdown(table, side))
    assert again == page


def test_the_committed_frontier_marks_rules_that_break_ir_or_run_a_deficit():
    """share-all (zero regret, IR broken) and VCG (zero c and K regret, a deficit) are not
    frontier points; the paper's rule has welfare share 1; every frontier point is
    admissible; the figure's labels say why a rule is not."""
    table, _ = _committed()
    row = table.set_index("rule")
    assert row.loc["share-all", "ir_rate"] > 0 and not row.loc["share-all", "on_frontier"]
    assert row.loc["vcg", "deficit_rate"] > 0 and not row.loc["vcg", "on_frontier"]
    assert row.loc["paper", "welfare_share"] == 1.0
    assert table.loc[table.on_frontier, "admissible"].all()
    families = set(table.family)
    assert {"paper", "clipped split", "VCG", "share-all", "searched"} <= families
    # what the page says of the searched clipped rule: the midpoint split beats it in every
    # dimension out of sample
    cols = [f"largest_regret_{d}" for d in "NcK"]
    assert (row.loc["midpoint", cols] < row.loc["clipped search", cols]).all()
    # what the page says of the rules that change who trades: the posted price dominates
    # the paper's rule (more welfare, less regret in every dimension, none in c and K), the
    # paper's rule and the midpoint are off the frontier, share at pi* is its zero-regret
    # end at about a quarter of the welfare
    posted = row.loc["posted 4, exact"]
    assert posted.on_frontier and posted.welfare_share > 1
    assert (posted[cols] < row.loc["paper", cols]).all()
    assert posted.largest_regret_c == posted.largest_regret_K == 0
    assert not row.loc["paper", "on_frontier"] and not row.loc["midpoint", "on_frontier"]
    # the searched posted rule (docs/designed/posted.json): the most welfare of any
    # admissible rule, regret only from overstating N
    found = row.loc["posted"]
    assert found.family == "searched" and found.on_frontier and found.admissible
    assert found.welfare_share == table.loc[table.admissible, "welfare_share"].max()
    assert found.largest_regret_c == found.largest_regret_K == 0
    assert found.max_regret_N_under == 0 < found.max_regret_N_over
    import json

    posted = json.loads((DOCS / "designed" / "posted.json").read_text())
    assert posted["estimates"]["markets"] == 2000 and posted["training"].endswith("seed 0")
    assert posted["theta"] == {"base": 5.0} and posted["space"]["selection"] == "exact"
    assert posted["space"]["refuse_outside"]
    share = row.loc["share at pi*"]
    assert share.on_frontier and (share[cols] == 0).all()
    assert 0.2 < share.welfare_share < 0.3


@pytest.mark.slow
def test_the_committed_frontier_is_what_the_code_measures():
    """Two rows of the committed table and the floor, measured again on the same markets
    (the sidecar's seed and size): the same numbers. A change of the measure (the misreport
    search, the distribution) fails here until the page is regenerated with the command
    the page names."""
    from proofs.regret import SEARCHES
    from sims.design import draw_markets
    from sims.design.evaluate import DEFAULT_SEARCH
    from sims.design.frontier import floor_summary, frontier_table

    table, side = _committed()
    markets = draw_markets(side["size"], side["seed"])
    # the search the committed figures were measured with (the sidecar's), and it is the
    # design measures' default: the page's figures are what `evaluate` reports today
    assert side["search"] == DEFAULT_SEARCH and side["search_options"] == SEARCHES[
        DEFAULT_SEARCH]
    again = frontier_table(None, [], markets, families=["paper", "clipped split"],
                           search=side["search"])
    cols = ["welfare_share", "ir_rate", "deficit_rate",
            *(f"{s}_regret_{d}" for s in ("largest", "mean", "q90") for d in "NcK")]
    want = table.set_index("rule").loc[again.rule, cols]
    np.testing.assert_allclose(again.set_index("rule")[cols].to_numpy(float),
                               want.to_numpy(float), rtol=1e-9, atol=1e-12)
    floor = floor_summary(markets, cost_max=side["floor"]["cost_max"],
                          scale_min=side["floor"]["scale_min"])
    assert floor == pytest.approx(side["floor"], rel=1e-9, nan_ok=True)
