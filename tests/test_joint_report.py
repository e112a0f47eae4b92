"""Joint misreports (issue 31, part 4) where a user reads regret: the frontier table
(``frontier_table(joint=True)``, ``fedmarket design --joint``) and the report's comparison
and ranking (``regret_per_seed(joint=True)``, ``fedmarket report --joint``)."""

import json

import numpy as np
import pandas as pd
import pytest

from sims.cli import main
from sims.design import REFERENCES, DesignInputError, draw_markets, evaluate
from sims.errors import SpecError
from sims.ranking import JOINT_CRITERIA, Priorities, rank


def test_the_frontier_measures_joint_misreports_on_request():
    """With joint=True every rule gets the largest regret per pair of dimensions lied about
    at once: the evaluation's joint maximum on the same markets, at least each one-dimension
    largest of its pair. Known bad: without joint there are no such columns; a pair given
    as text is refused in one line naming the field."""
    from sims.design.frontier import frontier_table

    mk = draw_markets(12, seed=5)
    table = frontier_table(None, [], mk, families=["paper"], search="former", joint=True)
    row = table.iloc[0]
    assert table.rule.tolist() == ["paper"]
    s = evaluate(REFERENCES["paper"], mk, search="former",
                 joint=(("N", "c"), ("N", "K"), ("c", "K"))).summary
    for a, b in (("N", "c"), ("N", "K"), ("c", "K")):
        col = f"largest_regret_joint_{a}{b}"
        assert row[col] == s[f"max_regret_joint_{a}{b}"]
        assert row[col] >= max(row[f"largest_regret_{a}"], row[f"largest_regret_{b}"])
    assert row["largest_regret_joint"] == max(row[f"largest_regret_joint_{p}"]
                                              for p in ("Nc", "NK", "cK"))
    assert row["largest_regret_joint"] > 0  # the paper's rule pays a liar
    plain = frontier_table(None, [], mk, families=["paper"], search="former")
    assert not any(c.startswith("largest_regret_joint") for c in plain.columns)
    with pytest.raises(DesignInputError, match="joint"):
        frontier_table(None, [], mk, families=["paper"], search="former", joint="NK")


def test_joint_criteria_rank_and_need_the_joint_measure():
    """regret_joint (and each pair) ranks like the other regret criteria, lower first; a
    per-seed table without the joint columns is refused with the flag to give."""
    per_seed = pd.DataFrame({"mechanism": ["a"] * 2 + ["b"] * 2, "seed": [0, 1] * 2,
                             "regret_joint": [50.0, 60.0, 20.0, 25.0],
                             "regret_NK": [50.0, 60.0, 20.0, 25.0]})
    assert rank(per_seed, Priorities.parse("regret_joint")).mechanism.tolist() == ["b", "a"]
    assert rank(per_seed, Priorities.parse("regret_NK")).mechanism.tolist() == ["b", "a"]
    assert Priorities.parse("ir,regret_joint").needs_joint
    assert Priorities.parse("ir,regret_joint").needs_regret
    assert not Priorities.parse("ir,regret,welfare").needs_joint
    assert set(JOINT_CRITERIA) == {"regret_joint", "regret_Nc", "regret_NK", "regret_cK"}
    with pytest.raises(SpecError, match="--joint"):
        rank(per_seed.drop(columns=["regret_joint"]), Priorities.parse("regret_joint"))


@pytest.mark.parametrize(("argv", "message"), [
    pytest.param(["report", "RESULTS", "--rank-by", "ir,regret_joint"], "give --joint",
                 id="report-rank-without-joint"),
    pytest.param(["report", "RESULTS", "--joint", "--regret-markets", "0"],
                 "--regret-markets above 0", id="report-joint-without-markets"),
    pytest.param(["sweep", "SPEC", "--out", "OUT", "--joint"], "add --report",
                 id="sweep-joint-without-report"),
    pytest.param(["sweep", "SPEC", "--out", "OUT", "--report", "--rank-by", "regret_cK"],
                 "give --joint", id="sweep-rank-without-joint"),
])
def test_joint_options_misused_are_one_line(argv, message, tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[[scenarios]]\nname = "inclusive-market"\nmechanisms = ["local"]\n'
                    'params = { rounds = 1, n_params = 100 }\n')
    subs = {"RESULTS": str(tmp_path / "none"), "SPEC": str(spec), "OUT": str(tmp_path / "o")}
    assert main([subs.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "o" / "store.sqlite").exists()


@pytest.mark.slow
def test_regret_per_seed_measures_joint_misreports_on_the_same_markets():
    """regret_per_seed(joint=True): per seed the evaluation's joint maxima on that seed's
    markets, regret_joint their largest, each at least its pair's one-dimension regrets;
    a rule the bulk clearing cannot run is NaN in the joint columns too."""
    from proofs.regret import JOINT_PAIRS
    from sims.comparison import regret_per_seed
    from sims.design import Mechanism

    reg = regret_per_seed(["local"], [0], markets=20, search="former", joint=True)
    got = reg.iloc[0]
    s = evaluate(Mechanism("local"), draw_markets(20, 0), search="former",
                 joint=JOINT_PAIRS).summary
    for a, b in JOINT_PAIRS:
        assert got[f"regret_{a}{b}"] == s[f"max_regret_joint_{a}{b}"]
        assert got[f"regret_{a}{b}"] >= max(got[f"regret_{a}"], got[f"regret_{b}"])
    assert got.regret_joint == max(got[f"regret_{a}{b}"] for a, b in JOINT_PAIRS)
    assert got.regret_joint >= got.regret > 0
    assert "regret_joint" not in regret_per_seed(["local"], [0], markets=3,
                                                 search="former").columns
    bad = regret_per_seed(["local+no_such_module_t31j:pay"], [0], markets=3, joint=True)
    assert bad[["regret_Nc", "regret_NK", "regret_cK", "regret_joint"]].isna().all(axis=None)


@pytest.mark.slow
def test_design_joint_writes_the_joint_columns(tmp_path, capsys):
    """fedmarket design --joint: the held-out frontier carries the joint columns, the
    printed table the largest, the sidecar the pairs."""
    out = tmp_path / "d"
    assert main(["design", "--markets", "6", "--generations", "1", "--popsize", "2",
                 "--features", "marginal", "cost", "--heldout-markets", "8",
                 "--frontier-size", "1", "--certify-examples", "0", "--search", "former",
                 "--joint", "--out", str(out)]) == 0
    assert "largest_regret_joint" in capsys.readouterr().out
    table = pd.read_csv(out / "frontier.csv")
    for p in ("Nc", "NK", "cK"):
        assert np.isfinite(table[f"largest_regret_joint_{p}"]).all()
    side = json.loads((out / "frontier.json").read_text())
    assert side["joint_misreports"] == [["N", "c"], ["N", "K"], ["c", "K"]]


def test_a_goal_can_count_joint_misreports():
    """'jointly': the goal's regret statistic is also the worst over the pairs of its
    dimensions lied about at once; a goal of one dimension cannot say it (one line)."""
    from sims.design.objective import parse_goal

    goal = parse_goal("IR, budget balance, minimise max regret over N K, jointly")
    assert goal.joint_pairs == (("N", "K"),)
    assert goal.describe().endswith("minimise max regret over N K (both ways, and jointly)")
    summary = {f"max_rel_regret_{d}_{w}": 0.1 for d in "NK" for w in ("over", "under")}
    assert parse_goal("minimise max regret over N K").regret(summary) == 0.1
    with pytest.raises(KeyError):  # the joint statistic is read, not skipped
        goal.regret(summary)
    assert goal.regret({**summary, "max_rel_regret_joint_NK": 0.3}) == 0.3
    assert parse_goal("minimise mean regret, jointly").joint_pairs == (
        ("N", "c"), ("N", "K"), ("c", "K"))
    with pytest.raises(DesignInputError, match="jointly"):
        parse_goal("minimise max regret over K, jointly")


def test_the_design_search_scores_joint_misreports():
    """design() with a 'jointly' goal measures the pair at once on the training markets:
    the best rule's summary has the joint statistic and its score is the goal's on it."""
    from sims.design import LinearSpace
    from sims.design.objective import parse_goal
    from sims.design.search import SearchConfig, design

    space = LinearSpace(("marginal", "cost"), clip=True)
    goal = parse_goal("IR, budget balance, minimise max regret over N K, jointly")
    result = design(space, goal, SearchConfig(generations=1, popsize=2, seed=0),
                    markets=draw_markets(6, seed=0), search="former")
    s = result.summary
    assert s["max_rel_regret_joint_NK"] >= max(s["max_rel_regret_N"], s["max_rel_regret_K"])
    assert result.score == pytest.approx(goal.score(s))
