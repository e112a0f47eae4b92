"""Type spaces as an input (issue 31, part 1): the default is the checker's distribution,
a space of your own (Python, TOML) changes the draws of the checker and of the design
search, bad input names its field, and a verdict depends on the space it is claimed on."""

import numpy as np
import pytest

from mechanisms import ipfl
from proofs import PROPERTIES, IpflMechanism, check
from proofs.batch import IPFL_SPECS, ipfl_sampler
from proofs.core import CheckerInputError
from proofs.typespace import DEFAULT, Dim, TypeSpace, as_type_space, load_type_space
from sims.cli import main
from sims.design import draw_markets

NARROW = TypeSpace(name="cheap sellers", c=Dim(0.0, 2.0), N=Dim(100, 500, integer=True),
                   K=Dim(1e4, 1e6, dist="loguniform"), clients=(2, 5))


def test_default_is_the_checkers_distribution():
    """The batch engine's ranges, coordinate by coordinate (proofs.batch: N integers
    20..2000, c [0, 5], K [1e3, 1e6], lam [0, 5], d [0, 2], roles 1/2 1/4 1/4, 2-12
    clients), and every sampler is built on it."""
    u = np.array([0.0, 0.5, 0.999999, 1.0])
    assert DEFAULT.N.value(u).tolist() == [20.0, 1010.0, 2000.0, 2000.0]
    assert DEFAULT.c.value(u)[[0, 3]].tolist() == [0.0, 5.0]
    assert DEFAULT.K.value(u)[[0, 3]].tolist() == [1e3, 1e6]
    assert DEFAULT.role(np.array([0.0, 0.49, 0.5, 0.74, 0.75])).tolist() == [0, 0, 1, 1, 2]
    assert all(ipfl_sampler(k).type_space is DEFAULT for k in IPFL_SPECS)
    assert DEFAULT.is_default and "N 20..2000 integers" in DEFAULT.describe()


def test_a_space_of_your_own_changes_the_draws():
    rng = np.random.default_rng(3)
    s = ipfl_sampler("thm2", NARROW)
    a = [s.arrays(d) for d in s.draw(rng, 2000)]
    N = np.concatenate([x["N"].ravel() for x in a])
    c = np.concatenate([x["c"].ravel() for x in a])
    K = np.concatenate([x["K"].ravel() for x in a])
    assert N.min() >= 100 and N.max() <= 500 and (N == np.floor(N)).all()
    assert c[np.isfinite(c)].max() <= 2.0 and np.isinf(c).any()
    k = K[K > 0]
    assert k.min() >= 1e4 and np.median(k) < 2e5  # loguniform: median 1e5, not 5e5
    assert max(x["N"].shape[1] for x in a) <= 5
    assert NARROW.contains(N, c, K).all()
    assert not NARROW.contains([50.0], [1.0], [1e5])[0]  # N below the space
    mk = draw_markets(50, seed=0, type_space=NARROW)
    assert "cheap sellers" in mk.source and mk.type_space is NARROW


def test_toml_and_errors_name_the_field(tmp_path):
    f = tmp_path / "space.toml"
    f.write_text('name = "mine"\n[c]\nhigh = 2.0\n[roles]\ntrader = 1.0\nbuyer = 0.0\n'
                 'seller = 0.0\n')
    space = load_type_space(f)
    assert space.c == Dim(0.0, 2.0) and space.roles == (1.0, 0.0, 0.0)
    assert space.N == DEFAULT.N  # missing tables keep the default
    assert as_type_space(space.to_dict()) == space
    bad = {'[c]\nhigh = -1.0\n': "type_space.c.high", '[K]\nlow = 0.0\ndist = "loguniform"\n':
           "type_space.K.low", '[roles]\ntrader = 0.9\n': "type_space.roles",
           '[N]\nlow = 1\nhigh = 10\nwidth = 3\n': "type_space.N", 'colour = 1\n': "type_space"}
    for text, field in bad.items():
        f.write_text(text)
        with pytest.raises(CheckerInputError) as err:
            load_type_space(f)
        assert err.value.field == field, text


@ipfl.over_arrays
def _fixed_prices(market, D):
    """Every model on sale at 2.0 (the known-bad rule below: a seller's cost is not
    covered); pure buyers (c = inf) sell nothing."""
    c = np.asarray(market.c, dtype=float)[..., None, :]
    return np.where(np.isfinite(c), 2.0, np.inf) + np.zeros(np.shape(D))


@ipfl.over_arrays
def _fixed_payments(market, A, D):
    return np.where(np.asarray(A, dtype=bool), 2.0, 0.0)


def test_a_verdict_holds_on_the_space_it_is_claimed_on():
    """A price of 2 that every seller must accept is IR exactly when no cost exceeds 2: the
    checker finds the counterexample on the default space (costs up to 5) and none on a
    space of costs up to 2 (a known-bad / known-good pair on one rule)."""
    subject = IpflMechanism("fixed 2", "exact", payments=_fixed_payments, prices=_fixed_prices)
    prop = PROPERTIES["individual_rationality"]
    bad = check(subject, prop, max_examples=2000, seed=0, engine="batch")
    assert bad.verdict == "counterexample"
    assert bad.extra["type_space"] == DEFAULT.describe()
    cheap = TypeSpace(name="costs up to 2", c=Dim(0.0, 2.0))
    good = check(subject, prop, max_examples=2000, seed=0, engine="batch", type_space=cheap)
    assert good.verdict == "holds" and "costs up to 2" in good.extra["type_space"]
    with pytest.raises(CheckerInputError) as err:
        check(subject, prop, max_examples=20, engine="hypothesis", type_space=cheap)
    assert err.value.field == "type_space"


def test_prove_prints_the_space_and_answers_misuse_in_one_line(tmp_path, capsys):
    f = tmp_path / "space.toml"
    f.write_text('name = "small"\n[N]\nlow = 20\nhigh = 200\n')
    assert main(["prove", "--subject", "local", "--property", "individual_rationality",
                 "--engine", "batch", "--examples", "200", "--type-space", str(f)]) == 0
    out = capsys.readouterr().out
    assert "iPFL verdicts on the type space 'small': N 20..200 integers" in out
    assert main(["prove", "--subject", "local", "--type-space", str(f)]) == 2
    err = capsys.readouterr().err
    assert "needs --engine batch" in err and "Traceback" not in err
    f.write_text('[c]\nlow = 3\nhigh = 1\n')
    assert main(["prove", "--subject", "local", "--engine", "batch", "--type-space",
                 str(f)]) == 2
    err = capsys.readouterr().err
    assert "type_space.c.high" in err and len(err.strip().splitlines()) == 1
