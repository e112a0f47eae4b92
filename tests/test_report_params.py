"""``fedmarket report`` keeps every cell (a cell without a swept parameter is placed, never
dropped) and plots the results against every swept parameter."""

import numpy as np
import pandas as pd
import pytest

from sims.report import NOT_SET, place, swept, write_report
from sims.sweep import Cell, Store

LAMS = (0.001, 0.1, 10.0)


def _rows(mechanism, seed, lam):
    """Two rounds of three clients; accuracy 0.5 + lam / 100 for iPFL, 0.7 for Local (seed
    adds 0.01 each), so every group's mean is known."""
    acc = (0.5 + lam / 100 if lam is not None else 0.7) + 0.01 * seed
    rows = []
    for r in range(2):
        for client in range(3):
            rows.append({"mechanism": mechanism, "seed": seed, "round": r, "client": client,
                         "acc_personalised": acc, "acc_personalised_best": acc,
                         "acc_own": acc, "gain": 1.0, "cost": 0.0, "payment": 0.0,
                         "utility": 1.0 if lam is None else lam, "n_bought": 1.0,
                         "param_partition": "niid",
                         **({} if lam is None else {"param_lam": lam})})
    return pd.DataFrame(rows)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path)
    cells = [("ipfl", lam) for lam in LAMS] + [("local", None)]
    for mech, lam in cells:
        for seed in range(3):
            params = {"partition": "niid", **({} if lam is None else {"lam": lam})}
            cell = Cell("ipfl-lambda", mech, tuple(sorted(params.items())), seed)
            df = _rows(mech, seed, lam)
            df["cell"] = cell.key
            s.put(cell, df, 0.1, "test", "h", "c")
    s.close()
    return tmp_path


def test_a_cell_without_the_swept_parameter_is_kept_and_labelled(store):
    md, _ = write_report(store, verdict_examples=0)
    table = pd.read_csv(store / "ipfl-lambda.csv")
    assert len(table) == len(LAMS) + 1  # Local is a row, not dropped
    local = table[table.mechanism == "local"]
    assert local.param_lam.tolist() == [NOT_SET] and local.seeds.tolist() == [3]
    assert local["best acc (authors')"].iloc[0].startswith("0.710")
    ipfl = table[table.mechanism == "ipfl"]
    assert ipfl.param_lam.astype(float).tolist() == list(LAMS)  # numeric order, not text
    text = md.read_text()
    assert "Cells without lam (local) ran at the scenario's default (lam = 0.001)" in text
    assert (store / "ipfl-lambda_against_lam.svg").exists()
    assert "against lam (9 runs with lam; 3 without it, dashed)" in text


def test_every_swept_parameter_gets_a_figure(store):
    s = Store(store)
    for seed in range(3):  # a second swept parameter, set in these cells only
        params = {"partition": "niid", "lam": 0.1, "beta": 0.5}
        cell = Cell("ipfl-lambda", "ipfl", tuple(sorted(params.items())), seed)
        df = _rows("ipfl", seed, 0.1).assign(param_beta=0.5, cell=cell.key)
        s.put(cell, df, 0.1, "test", "h", "c")
    s.close()
    write_report(store, verdict_examples=0)
    assert (store / "ipfl-lambda_against_lam.svg").exists()
    assert (store / "ipfl-lambda_against_beta.svg").exists()
    table = pd.read_csv(store / "ipfl-lambda.csv")
    assert len(table) == len(LAMS) + 2  # every (mechanism, lam, beta) group, none merged
    assert table.seeds.sum() == 15


def test_swept_and_place_on_a_frame():
    df = pd.DataFrame({"param_lam": [0.1, 10.0, 2.0, np.nan], "param_fixed": 1.0,
                       "param_partial": [np.nan, "a", "a", "a"]})
    assert swept(df) == ["param_lam", "param_partial"]  # one value but missing in a cell
    placed = place(df, swept(df))
    assert list(placed.param_lam.cat.categories) == ["0.1", "2", "10", NOT_SET]
    assert placed.param_partial.tolist() == [NOT_SET, "a", "a", "a"]
    # the known-bad way: grouping on the raw column drops the cell that lacks it
    assert df.groupby("param_lam").size().sum() == 3
    assert placed.groupby("param_lam", observed=True).size().sum() == 4


def test_the_summary_takes_clusters_without_update_norms():
    """pFedLIA's rows carry clusters but no update norms (CFL's carry both): summarising
    them raised KeyError 'update_norm' (seen on the reproduction's lia-vs-oracle cells)."""
    from sims.summary import summarise

    f = _rows("lia", 0, None).assign(cell="k1", scenario="lia-vs-oracle", cluster=0)
    f = f.drop(columns=["param_partition"])
    index = pd.DataFrame({"key": ["k1"], "scenario": ["lia-vs-oracle"], "code": ["c"]})
    s = summarise({"lia-vs-oracle": f}, index, command="x", setting="reduced", seeds=[0],
                  expected={"lia-vs-oracle": 1})
    out = s.cells["lia-vs-oracle"]
    assert len(out) == 3 and "cfl_clusters" not in out
    cfl = f.assign(update_norm=0.5)
    out = summarise({"lia-vs-oracle": cfl}, index, command="x", setting="reduced", seeds=[0],
                    expected={"lia-vs-oracle": 1}).cells["lia-vs-oracle"]
    assert (out.cfl_clusters == 1).all() and (out.cfl_max_update_norm == 0.5).all()
