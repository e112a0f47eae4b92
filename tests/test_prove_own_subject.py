"""``fedmarket prove --subject module:name`` checks a rule of your own (issue 20, part 6)."""

import textwrap

from sims.cli import main


def test_prove_checks_your_own_rules(tmp_path, monkeypatch, capsys):
    (tmp_path / "ownrules.py").write_text(textwrap.dedent("""
        import numpy as np
        from mechanisms import cpl

        def half_uniform(game):
            return np.asarray(cpl.uniform_pricing(game).prices) * 0.5

        def pay_nobody(market, A, D):
            return np.zeros(market.m)
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")  # rows on one line each
    monkeypatch.syspath_prepend(str(tmp_path))
    # a CPL pricing rule: the solver-only properties are not asked of it
    assert main(["prove", "--subject", "ownrules:half_uniform", "--engine", "batch",
                 "--examples", "300"]) == 0
    out = capsys.readouterr().out
    assert "Equilibrium identities" not in out and "Within budget" in out
    # iPFL payments: budget balance holds, individual rationality fails (nobody is paid)
    assert main(["prove", "--subject", "ownrules:pay_nobody", "--engine", "batch",
                 "--examples", "300", "--property", "budget_balance",
                 "--property", "individual_rationality"]) == 0
    out = capsys.readouterr().out
    assert "holds" in out and "counterexample" in out
    # misuse: one line
    assert main(["prove", "--subject", "ownrules:nothing"]) == 2
    assert "subject" in capsys.readouterr().err
