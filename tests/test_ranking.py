"""Ranking mechanisms under stated priorities (sims.ranking, `fedmarket report --rank-by`)."""

import pandas as pd
import pytest

from sims.cli import main
from sims.errors import SpecError
from sims.ranking import Priorities, rank


def frame(rows):
    """per-seed rows: (mechanism, seed, welfare, ir_failures, operator_balance)."""
    return pd.DataFrame(rows, columns=["mechanism", "seed", "welfare", "ir_failures",
                                       "operator_balance"])


TWO = frame([("a", 0, 10.0, 0, 0.0), ("a", 1, 12.0, 0, 0.0),
             ("b", 0, 20.0, 3, -5.0), ("b", 1, 22.0, 1, -3.0),
             ("c", 0, 15.0, 0, 2.0), ("c", 1, 15.0, 0, 4.0)])


@pytest.mark.parametrize(("text", "criteria", "weights"), [
    pytest.param("welfare", ("welfare",), None, id="one"),
    pytest.param(" ir , deficit,welfare ", ("ir", "deficit", "welfare"), None, id="order"),
    pytest.param("welfare=2,ir=0.5", ("welfare", "ir"), (2.0, 0.5), id="weighted"),
])
def test_priorities_parse(text, criteria, weights):
    p = Priorities.parse(text)
    assert p.criteria == criteria and p.weights == weights


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("welfar", "unknown criterion 'welfar'", id="typo"),
    pytest.param("", "names no criterion", id="empty"),
    pytest.param("welfare,ir=1", "mixes weights and an order", id="mixed"),
    pytest.param("welfare=x", "weight of welfare is 'x'", id="not-a-number"),
    pytest.param("welfare=0", "must be a positive finite number", id="zero"),
    pytest.param("welfare=nan", "must be a positive finite number", id="nan"),
    pytest.param("ir,ir", "twice", id="twice"),
])
def test_bad_priorities_name_rank_by(text, message):
    with pytest.raises(SpecError, match=message) as info:
        Priorities.parse(text)
    assert info.value.field == "rank-by"


def test_lexicographic_order_and_ties():
    assert rank(TWO, Priorities.parse("welfare")).mechanism.tolist() == ["b", "c", "a"]
    # a and c tie on IR (0 failures): welfare decides between them; b fails IR, so last
    r = rank(TWO, Priorities.parse("ir,welfare"))
    assert r.mechanism.tolist() == ["c", "a", "b"]
    assert r["rank"].tolist() == [1, 2, 3]
    assert r.ir.tolist() == [0.0, 0.0, 2.0] and r.welfare.tolist() == [15.0, 11.0, 21.0]
    # the deficit counts a surplus as 0: a (balanced) and c (surplus) tie, welfare decides
    assert rank(TWO, Priorities.parse("deficit,welfare")).mechanism.tolist() == ["c", "a", "b"]
    # the signed balance prefers the surplus; |balance| prefers the balanced rule
    assert rank(TWO, Priorities.parse("balance")).mechanism.tolist() == ["c", "a", "b"]
    assert rank(TWO, Priorities.parse("imbalance")).mechanism.tolist() == ["a", "c", "b"]


def test_float_rounding_never_decides():
    """A balanced rule's 1e-15 'deficit' ties with an exact 0; welfare decides. Known-bad:
    compared raw, the rounding would put the lower-welfare rule first."""
    df = frame([("exact0", 0, 1.0, 0, 0.0), ("exact0", 1, 1.0, 0, 0.0),
                ("noisy", 0, 2.0, 0, -1e-15), ("noisy", 1, 2.0, 0, 3e-16)])
    r = rank(df, Priorities.parse("deficit,welfare"))
    assert r.mechanism.tolist() == ["noisy", "exact0"]
    assert r.deficit.tolist() == [0.0, 0.0]
    raw = df.assign(d=(-df.operator_balance).clip(lower=0)).groupby("mechanism").d.mean()
    assert raw.idxmin() == "exact0"  # what a raw comparison would have ranked first


def test_weighted_scores_by_hand():
    # welfare means a 11, b 21, c 15 -> scaled (v - 11) / 10: 0, 1, 0.4
    # ir means 0, 2, 0 (lower is better) -> 1, 0, 1
    r = rank(TWO, Priorities.parse("welfare=3,ir=1")).set_index("mechanism")
    assert r.score.to_dict() == pytest.approx({"b": 3 / 4, "c": (1.2 + 1) / 4, "a": 1 / 4})
    assert r["rank"].to_dict() == {"b": 1, "c": 2, "a": 3}


def test_ahead_of_next_is_the_paired_difference_on_the_deciding_criterion():
    r = rank(TWO, Priorities.parse("ir,welfare")).set_index("mechanism")
    # c - a on welfare per seed: 5, 3 -> mean 4, t interval 4 +- 12.706 * sqrt(2) / sqrt(2)
    assert r.loc["c", "ahead_of_next"] == \
        "welfare +4 [-8.706, +16.71] (not separated; ahead on 2 of 2 seeds)"
    # a - b on ir (lower is better): b - a = 3, 1 -> +2 [-10.71, +14.71]
    assert r.loc["a", "ahead_of_next"].startswith("ir +2 [")
    assert r.loc["b", "ahead_of_next"] == "last"
    sep = frame([("x", s, 10.0 + s, 0, 0.0) for s in range(4)]
                + [("y", s, 5.0 + s, 0, 0.0) for s in range(4)])
    assert rank(sep, Priorities.parse("welfare")).ahead_of_next[0] == \
        "welfare +5 [+5, +5] (separated; ahead on 4 of 4 seeds)"


def test_truthfulness_reads_the_verdict_table():
    verdicts = pd.DataFrame({
        "mechanism": ["a", "a", "b", "b", "c"],
        "property": ["thm2", "truthful_K_under", "thm2", "budget_balance", "thm2"],
        "verdict": ["holds", "holds", "counterexample", "holds", "inconclusive"]})
    r = rank(TWO, Priorities.parse("truthfulness,welfare"), verdicts=verdicts)
    # a: 2 incentive properties hold; b: 0 (budget balance is not one); c: 0 (inconclusive
    # is not "holds"), and b's welfare is higher than c's
    assert r.mechanism.tolist() == ["a", "b", "c"]
    assert r.truthfulness.tolist() == [2.0, 0.0, 0.0]
    with pytest.raises(SpecError, match="verdict tables"):
        rank(TWO, Priorities.parse("truthfulness"))


def test_cli_answers_bad_priorities_in_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path), "--rank-by", "welfar"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rank-by: unknown criterion 'welfar'" in err[0]
    assert main(["report", str(tmp_path), "--rank-by", "truthfulness",
                 "--verdict-examples", "0"]) == 2
    assert "truthfulness needs the verdict tables" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


def test_sweep_checks_rank_by_before_any_cell(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[[scenarios]]\nname = "inclusive-market"\nmechanisms = ["local"]\n'
                    'params = { rounds = 1, n_params = 100 }\n')
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--report", "--rank-by", "x"]) == 2
    assert "rank-by: unknown criterion 'x'" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--out", str(out), "--rank-by", "welfare"]) == 2
    assert "add --report" in capsys.readouterr().err
    assert not (out / "store.sqlite").exists()
