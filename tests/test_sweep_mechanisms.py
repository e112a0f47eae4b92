"""Sweeps take any mechanism: iPFL selection + payments + prices, CPL pricing rules, given as
TOML tables or strings, all imported and checked before the first cell runs."""

import subprocess
import sys
import textwrap

import pytest

from sims.sweep import SpecError, expand, load_toml, run_cell

MYMOD = """
import numpy as np
from mechanisms import cpl

def half(market, A, D):
    return np.where(A, 0.5, 0.0)

def quadratic_g(game):
    return cpl.posted_pricing(game, game.a * game.G ** 2).prices
"""


@pytest.fixture
def mymod(tmp_path, monkeypatch):
    (tmp_path / "i11_user_rules.py").write_text(MYMOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_toml_tables_and_strings_name_any_mechanism(mymod):
    spec_file = mymod / "spec.toml"
    spec_file.write_text(textwrap.dedent("""
        seeds = [0]
        [[scenarios]]
        name = "inclusive-market"
        mechanisms = ["local", {selection = "exact", payments = "vcg"},
                      {payments = "i11_user_rules:half"}, "local+cost-plus+cost-plus",
                      "share-all+none"]
        params = {rounds = 2, n_params = 100}
        [[scenarios]]
        name = "cpl-pricing"
        mechanisms = ["bisection", "gradient", {pricing = "i11_user_rules:quadratic_g"}]
        params = {clients = 8}
    """))
    cells = expand(load_toml(spec_file))
    assert [c.mechanism for c in cells] == [
        "local", "exact+vcg", "local+i11_user_rules:half", "local+cost-plus+cost-plus",
        "share-all+none", "bisection", "gradient", "i11_user_rules:quadratic_g"]
    rows = {c.mechanism: run_cell(c)[1] for c in cells}
    vcg = rows["exact+vcg"].groupby("round").payment.sum()
    assert (vcg.abs() > 1e-9).any()  # VCG is not budget balanced; its rows say so
    half = rows["local+i11_user_rules:half"]
    assert (half.paid == 0.5 * half.n_bought).all()
    assert (rows["share-all+none"].payment == 0).all()
    cpl_rows = rows["i11_user_rules:quadratic_g"]
    assert set(cpl_rows.columns) >= {"price", "q", "G"}


@pytest.mark.parametrize(("mechanism", "where"), [
    ({"payments": "i11_user_rules:nope"}, "mechanisms[0].payments: cannot import"),
    ({"selection": "lcoal"}, "mechanisms[0].selection: unknown 'lcoal'"),
    ({"paymnts": "vcg"}, "mechanisms[0].paymnts: unknown key"),
    ("local+vgc", "mechanisms[0].payments: unknown 'vgc'"),
    ("local+paper+paper+paper", "mechanisms[0]: 'local+paper+paper+paper'"),
])
def test_bad_ipfl_mechanisms_fail_before_any_cell_naming_the_key(mymod, mechanism, where):
    with pytest.raises(SpecError, match="scenarios\\[0\\]." + where.replace("[", "\\[")
                       .replace("]", "\\]").replace("+", "\\+")):
        expand({"scenarios": [{"name": "inclusive-market", "mechanisms": [mechanism]}]})


def test_bad_cpl_pricing_fails_before_any_cell(mymod):
    with pytest.raises(SpecError, match=r"mechanisms\[1\]\.pricing: cannot import"):
        expand({"scenarios": [{"name": "cpl-pricing",
                               "mechanisms": ["bisection", {"pricing": "i11_user_rules:zz"}]}]})
    with pytest.raises(SpecError, match="twice"):
        expand({"scenarios": [{"name": "inclusive-market",
                               "mechanisms": ["exact+vcg", {"selection": "exact",
                                                            "payments": "vcg"}]}]})


def test_cli_answers_a_bad_payment_rule_in_one_line(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[[scenarios]]\nname = "inclusive-market"\n'
                    'mechanisms = ["local", {payments = "nosuchmod:rule"}]\n')
    r = subprocess.run([sys.executable, "-m", "sims.cli", "sweep", str(spec), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "mechanisms[1].payments" in lines[0], r.stderr
    assert not (tmp_path / "out" / "store.sqlite").exists()  # no cell ran, nothing stored
