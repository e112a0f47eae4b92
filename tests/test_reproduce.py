"""fedmarket reproduce: the spec, seed-level statistics and the page written from a store."""

import numpy as np
import pandas as pd
import pytest

from sims.claims import ACC, ci95, fmt, per_run, seed_table, write_page
from sims.reproduce import spec
from sims.sweep import Cell, expand, run_sweep


def test_spec_covers_every_claim_and_the_full_setting_is_one_switch():
    cells = expand(spec("reduced", (0, 1)))
    names = {c.scenario for c in cells}
    assert {"fig2", "fig4", "liars", "inclusive-market", "cpl-pricing", "lia-vs-oracle",
            "ipfl-lambda", "fig5-learning", "fig2-corrected"} <= names
    fig2 = {c.mechanism for c in cells if c.scenario == "fig2"}
    assert len(fig2) == 9  # iPFL and the eight baselines of the paper
    full = [c for c in expand(spec("full", (0,))) if c.scenario == "fig2"]
    assert all(dict(c.params)["dataset"] == "fashion-mnist" for c in full)
    assert all(dict(c.params)["steps"] == 200 and dict(c.params)["rounds"] == 50 for c in full)
    # the reduced setting's Fig. 2 is on Fashion-MNIST; 'digits' keeps every claim on digits
    assert all(dict(c.params)["dataset"] == "fashion-mnist" for c in cells
               if c.scenario == "fig2")
    digits = expand(spec("digits", (0, 1)))
    assert not any("dataset" in dict(c.params) for c in digits)
    # only Fig. 2 differs between the two: the other learning cells are shared
    assert ({c.key for c in cells if c.scenario != "fig2"}
            == {c.key for c in digits if c.scenario != "fig2"})


def test_accuracy_intervals_stay_in_range():
    accs = [0.95, 0.97, 0.99]
    _, lo, hi, _ = ci95(accs, bounds=ACC)
    assert hi == 1.0 and lo == pytest.approx(0.97 - (ci95(accs)[2] - 0.97))
    assert ci95(accs)[2] > 1.0  # unclipped, the t interval passes 1 (what the bounds prevent)
    assert "1.000]" in fmt(accs, bounds=ACC)


def test_seed_interval_is_not_the_client_spread():
    # clients differ a lot within a run, seeds agree: narrow interval, wide client spread
    rows = []
    for seed in range(3):
        for client in range(10):
            acc = 0.5 + 0.04 * (client - 4.5) + 0.001 * seed
            rows.append({"mechanism": "x", "seed": seed, "round": 0, "client": client,
                         "acc_personalised": acc, "acc_personalised_best": acc, "utility": 1.0})
    runs = per_run(pd.DataFrame(rows))
    _, lo, hi, n = ci95(runs.acc_best)
    assert n == 3 and hi - lo < 0.01
    assert runs.client_sd.mean() > 0.1
    table = seed_table(runs)
    assert "client spread (sd of best acc)" in table.columns


def test_ci95_known_values_and_single_seed():
    m, lo, hi, _ = ci95([0.0, 2.0])  # sd sqrt(2), n 2: half-width t(0.975, 1) = 12.706
    assert m == 1.0 and hi - m == pytest.approx(12.706, rel=1e-3) and m - lo == hi - m
    assert np.isnan(ci95([1.0])[1])


def test_page_from_a_small_store(tmp_path):
    cells = [Cell("inclusive-market", "local", (("n_params", 200), ("rounds", 3)), s)
             for s in (0, 1)]
    cells += [Cell("liars", "local", (("factor", 10.0), ("kind", "size"), ("n_params", 200),
                                      ("rounds", 3)), s) for s in (0, 1)]
    # a cell of another setting in the same store: the page leaves it out when told
    other = [Cell("cpl-pricing", m, (("budget", 15.0),), 0) for m in ("bisection", "uniform")]
    run_sweep([*cells, *other], tmp_path)
    assert "CPL, pricing" in write_page(tmp_path, tmp_path / "all.md", seeds=(0, 1)).read_text()
    page = write_page(tmp_path, tmp_path / "reproduction.md", seeds=(0, 1),
                      keys={c.key for c in cells})
    text = page.read_text()
    assert "| CPL pricing | not run |" in text
    assert "lockstep vs sequential" not in text  # no benchmark file, no section
    import json

    (tmp_path / "reproduction_costs.json").write_text(json.dumps({
        "command": "x", "when": "now", "threads": 1, "cpus": 2,
        "setting": {"model": "simplecnn-mnist", "clients": 10, "steps": 10, "batch": 64,
                    "test_subsample": 1000},
        "rows": [{"algorithm": "ipfl", "lockstep s/round": 2.0, "sequential s/round": 5.0,
                  "sequential / lockstep": 2.5, "evaluation share": 0.25}],
        "evaluation_s": {"vmap": 0.5, "loop over clients": 1.0}}))
    bench = write_page(tmp_path, tmp_path / "r2.md", seeds=(0, 1), keys=set()).read_text()
    assert "bench_learning.py --costs" in bench and "| ipfl | 2.0 | 5.0 | 2.5 | 25% |" in bench
    assert "vmap 0.500 s (2.0x the loop)" in bench
    assert "fedmarket reproduce --seeds 0 1" in text and "Fashion-MNIST" in text
    assert "## Verdicts" in text and "Fig. 5, inclusive market (local rule)" in text
    assert "Table 2, liars (exact thresholds)" in text
    assert "| fig2" not in text and "not run" in text  # claims without cells say so


@pytest.mark.slow
def test_report_keeps_swept_parameters_apart_and_exports_rounds(tmp_path):
    from sims.report import write_report

    small = {"rounds": 2, "steps": 3, "clients": 4, "batch": 16}
    cells = [Cell("ipfl-learning", mech, tuple(sorted({**small, "beta": beta}.items())), seed)
             for mech in ("fedavg", "local") for beta in (0.5, 1.0) for seed in (0, 1)]
    run_sweep(cells, tmp_path)
    md, _ = write_report(tmp_path)
    table = pd.read_csv(tmp_path / "ipfl-learning.csv")
    assert len(table) == 4  # (mechanism, beta) pairs: beta 0.5 and 1.0 never merged
    assert set(table.param_beta) == {0.5, 1.0} and (table.seeds == 2).all()
    assert "[" in table["best acc (authors')"].iloc[0]  # a 95 % interval over seeds
    rounds = pd.read_parquet(tmp_path / "ipfl-learning_rounds.parquet")
    assert len(rounds) == 8 * 2 * 4  # every cell, round and client
    assert (tmp_path / "ipfl-learning_0.5.svg").exists()
    assert "client spread" in md.read_text()


def test_liars_with_training_compare_the_liar_with_its_truthful_self():
    from sims.claims import claims

    def frame(lie_pays: bool):
        rows = []
        for seed in range(3):
            for col, f in (("param_liar_c", 1.0), ("param_liar_c", 5.0), ("param_liar_N", 0.1)):
                lying = f != 1.0
                for client in range(3):
                    u = 100.0 + seed + (5.0 if lying and lie_pays else -20.0 if lying else 0)
                    rows.append({"seed": seed, "client": client, "round": 0, "param_liar": 0,
                                 "utility": u if client == 0 else 50.0,
                                 "param_liar_c": f if col == "param_liar_c" else np.nan,
                                 "param_liar_N": f if col == "param_liar_N" else np.nan})
        return pd.DataFrame(rows)

    honest = next(c for c in claims({"liars-learning": frame(False)})
              if c.name == "Table 2, liars with training")
    assert honest.verdict == "reproduced" and len(honest.table) == 2
    assert honest.table["gain from lying"].str.startswith("-20.0").all()
    paying = next(c for c in claims({"liars-learning": frame(True)})
              if c.name == "Table 2, liars with training")
    assert paying.verdict == "not reproduced"  # the known-bad case: lying pays
