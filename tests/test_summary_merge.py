"""sims.summary.merge: a committed summary merged into a store's compares the cells both hold
column by column; a parameter neither sets is the same on both sides."""

import pandas as pd
import pytest

from sims.errors import StoreError
from sims.summary import Summary, merge


def _summary(dataset, acc=0.5):
    df = pd.DataFrame({"cell": ["a", "b"], "client": [0, 0], "code": ["x", "x"],
                       "config_id": ["c1", "c1"],
                       "param_dataset": pd.array(dataset, dtype="string"),
                       "acc": [acc, 0.6]})
    return Summary({"fig4": df}, {}, {"configs": {"c1": {}}, "done": {}})


def test_merge_reads_a_parameter_both_sides_lack_as_the_same():
    """A cell that sets no dataset (pandas' NA in a string column, on both sides) is the
    same cell in the store and in the summary merged into it (astype(str) kept NA, and
    NA == NA is not True: the page could not be rebuilt once digits and Fashion-MNIST
    cells of one scenario were both in the summary)."""
    merge(_summary([pd.NA, "fashion-mnist"]), _summary([pd.NA, "fashion-mnist"]), {"a", "b"})
    with pytest.raises(StoreError, match="param_dataset differs"):  # a real difference
        merge(_summary(["digits", "fashion-mnist"]), _summary([pd.NA, "fashion-mnist"]),
              {"a", "b"})
    with pytest.raises(StoreError, match="acc differs"):
        merge(_summary([pd.NA, "fashion-mnist"], 0.5), _summary([pd.NA, "fashion-mnist"], 0.7),
              {"a", "b"})
