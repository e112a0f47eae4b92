"""Every claim's differences from its paper are declared (issue 32, part 3): the claim-by-claim
table covers each claim the committed summary evaluates, each claim's section names where its
differences are declared, what the papers report and the page does not reproduce is listed,
and every money column of the pages carries its units."""

import re
from itertools import pairwise
from pathlib import Path

import pytest

from sims.claims import (
    IPFL_TABLE_SCENARIOS,
    NOT_REPRODUCED,
    Claim,
    claim_differences,
    claims,
    declared_differences,
    differences_line,
)
from sims.scenarios import SCENARIOS

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = [DOCS / "reproduction.md", DOCS / "medium" / "reproduction.md"]


@pytest.fixture(scope="module")
def committed():
    from sims import summary

    s = summary.read(DOCS)
    return claims(s.cells, s.configs)


def test_every_committed_claim_declares_its_differences(committed):
    """Each claim evaluated on the committed summary reads cells of a scenario, and the page
    declares its differences: the iPFL pipeline's table where its cells train with iPFL's code,
    and the claim-by-claim rows the issue names for CPL, pFedLIA and Fig. 5 with training."""
    assert len(committed) >= 10
    page = (DOCS / "reproduction.md").read_text()
    for c in committed:
        assert c.scenario, c.name
        d = declared_differences(c)
        assert d, f"{c.name}: no difference declared"
        assert (c.scenario in IPFL_TABLE_SCENARIOS) == any("iPFL pipeline" in x for x in d)
        assert differences_line(c) in page, c.name  # in the claim's own section
    by = {c.scenario: set(declared_differences(c)) for c in committed}
    assert {"CPL: training", "CPL: gradient bounds G_n", "CPL: repetitions"} <= by["cpl-pricing"]
    assert {"pFedLIA: clients", "pFedLIA: warm-up",
            "pFedLIA: lazy influence steps"} <= by["lia-vs-oracle"]
    assert {"Fig. 5 with training: lambda and K",
            "Fig. 5 with training: data and clients"} <= by["fig5-learning"]
    assert "**none declared**" not in page
    # the pFedLIA row says its setup line names the warm-up rounds and the lazy steps: it does
    lia = SCENARIOS["lia-vs-oracle"].config()
    (setup,) = [c.setup for c in committed if c.scenario == "lia-vs-oracle"]
    assert (f"{lia.lia_warmup} FedAvg warm-up rounds (of the {lia.rounds}" in setup
            and f"{lia.lia_k} lazy SGD steps per client on one batch" in setup)


def test_a_claim_nobody_declared_reads_none_declared():
    """The known-bad: a claim on a scenario no declaration covers has none, and its section
    says so in bold (the test above then fails on the page)."""
    stray = Claim("a new claim", "p", "o", "s", scenario="not-a-declared-scenario")
    assert declared_differences(stray) == []
    assert "**none declared**" in differences_line(stray)


def test_the_claim_table_names_real_scenarios_and_reads_their_configurations():
    """Each row covers scenarios that exist, and its numbers are the scenarios' own (the
    pFedLIA, Fig. 5 and CPL rows read them from the configurations, not from prose)."""
    from sims.cpl_game import CplBenchmark
    from sims.settings import SETTINGS

    t = claim_differences()
    assert all(sc and set(sc) <= set(SCENARIOS) for sc in t["scenarios"])
    ours = dict(zip(t["claim"] + ": " + t["what"], t["ours / why"], strict=True))
    lia = SCENARIOS["lia-vs-oracle"].config()
    assert ours["pFedLIA: clients"].startswith(f"{lia.clients} clients")
    assert ours["pFedLIA: warm-up"].startswith(f"{lia.lia_warmup} FedAvg warm-up rounds of "
                                               f"the {lia.rounds}")
    assert ours["pFedLIA: lazy influence steps"].startswith(f"{lia.lia_k} extra SGD steps")
    fig5 = SCENARIOS["fig5-learning"].config()
    assert ours["Fig. 5 with training: lambda and K"].startswith(
        f"lambda {fig5.lam:g} and K {fig5.K:g}")
    full = SETTINGS["full"]["other"]
    assert (f"in the full setting on Fashion-MNIST for {full['rounds']} rounds of "
            f"{full['steps']} local steps" in ours["Fig. 5 with training: data and clients"])
    assert f"mean {CplBenchmark().G:g}" in ours["CPL: gradient bounds G_n"]


def test_what_the_papers_report_and_the_page_does_not_is_listed():
    """The section names Fig. 3, Table 1's LLM market and the 6 of Fig. 2's 9 settings not
    run, each with why, on the committed page."""
    page = (DOCS / "reproduction.md").read_text()
    assert "## What the papers report that is not reproduced here" in page
    what = {(p, w) for p, w, _ in NOT_REPRODUCED}
    assert ("iPFL Fig. 3", next(w for p, w in what if p == "iPFL Fig. 3")) in what
    assert any(p == "iPFL Table 1" and "LLM" in w for p, w in what)
    assert any(p == "iPFL Fig. 2" and w.startswith("6 of its 9 settings") for p, w in what)
    assert all(why.strip() for _, _, why in NOT_REPRODUCED)
    for p, w, why in NOT_REPRODUCED:
        assert f"| {p} | {w} | {why} |" in page


MONEY = re.compile(r"utilit|profit|payment|\bearn|income|budget|\bgain|\bcost|\bpaid|\bprices?\b",
                   re.I)


def unitless_money_columns(text: str) -> list[str]:
    """The headers of the Markdown tables in ``text`` that name money without its units."""
    lines = text.splitlines()
    bad = []
    for head, rule in pairwise(lines):
        if head.startswith("|") and rule.startswith("|---"):
            bad += [h for h in (c.strip() for c in head.strip("|").split("|"))
                    if MONEY.search(h) and "(money units)" not in h]
    return bad


@pytest.mark.parametrize("page", PAGES, ids=["reduced", "medium"])
def test_every_money_column_carries_its_units(page):
    assert unitless_money_columns(page.read_text()) == []


def test_a_money_column_without_units_is_caught():
    text = "| claim | utility per client | client profit gain (money units) |\n|---|---|---|\n"
    assert unitless_money_columns(text) == ["utility per client"]
    assert unitless_money_columns(text.replace("utility per client", "best acc")) == []
