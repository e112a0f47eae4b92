"""Mechanism comparisons for the report: each cell's (seed's) numbers, their mean and 95 %
interval over seeds, and the clients a mechanism leaves worse off.

Every number is computed per seed first (one cell is one game), then summarised over seeds
with :func:`sims.stats.ci95`, as the learning tables are: rows of different seeds (different
games) are never mixed inside one number.

* :func:`cpl_per_seed`: one row per (CPL pricing rule, budget, other swept parameters, seed);
* :func:`market_per_seed`: one row per (iPFL mechanism, swept parameters, seed) of a market
  scenario: social welfare (Eq. 5, the clearing's :attr:`mechanisms.ipfl.Outcome.welfare`),
  total payments, the operator's signed balance (:attr:`mechanisms.ipfl.Outcome.budget_surplus`,
  positive a surplus, negative a deficit), participation and individual-rationality failures;
* :func:`ir_failures`: one row per (mechanism, seed, client) whose utility was negative in
  some round, with the size of the worst shortfall;
* :func:`regret_per_seed`: one row per (iPFL mechanism, seed): the largest regret a
  misreport of N, c or K earns (utility units), measured by :mod:`sims.design.evaluate` on
  markets the checker draws with that seed (the same markets for every mechanism);
* :func:`intervals`: a tidy summary, one row per (keys, metric): mean, low, high, seeds;
* :func:`readable`: the same as a table of "mean [low, high]" strings, a column per metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stats import ci95

__all__ = [
    "CLIENT_SUMS",
    "CPL_BOUNDS",
    "CPL_METRICS",
    "FIG5_METRICS",
    "IR_TOL",
    "JOINT_REGRET_METRICS",
    "MARKET_METRICS",
    "REGRET_MARKETS",
    "REGRET_METRICS",
    "ROLE_METRICS",
    "client_totals",
    "cpl_per_seed",
    "intervals",
    "ir_failures",
    "market_per_seed",
    "readable",
    "regret_per_seed",
    "roles_per_seed",
]

IR_TOL = 1e-9  # a utility below -IR_TOL * max(1, |gain|) is a failure of IR (float rounding)

# metric -> what it is (the report's legend); order = the tables' column order
CPL_METRICS = {
    "objective_bound": "the convergence bound sum K (1 - q)/q the server minimises (lower is "
                       "better)",
    "spent": "what the server pays, sum P_n q_n",
    "client_utility_sum": "the clients' total utility WITHOUT each client's constant term (its "
                          "value of the model): compare across rules, a negative sum is no IR "
                          "failure",
    "negative_prices": "clients charged to take part (P_n < 0)",
}
CPL_BOUNDS = {"objective_bound": (0.0, np.inf), "spent": (0.0, np.inf),
              "negative_prices": (0.0, np.inf)}  # ranges the CPL metrics cannot leave
MARKET_METRICS = {
    "welfare": "social welfare (Eq. 5, true types) summed over the rounds",
    "total_payments": "money the clients paid (to sellers or to the operator), summed over "
                      "rounds",
    "operator_balance": "the operator's balance sum_i p_i summed over rounds: positive a "
                        "surplus it keeps, negative a deficit it pays",
    "worst_round_balance": "the operator's balance in its worst round (negative: the largest "
                           "deficit of a round)",
    "participation": "share of clients that buy or sell at least one model, mean over rounds",
    "ir_failures": "(round, client) pairs with a negative utility (IR fails)",
    "min_utility": "the lowest utility of any client in any round (negative: IR fails)",
}
ROUND_COLUMNS = ("round_welfare", "round_operator_balance")  # written by the market scenarios
REGRET_MARKETS = 300  # markets per seed on which a report measures regret
REGRET_METRICS = {
    **{f"regret_{d}": f"the largest regret (utility units) a client earns by misreporting {d},"
                      " either way, on the checker's markets drawn with the seed"
       for d in ("N", "c", "K")},
    "regret": "the largest of regret_N, regret_c, regret_K",
}
JOINT_REGRET_METRICS = {  # measured with --joint (regret_per_seed(..., joint=True))
    **{f"regret_{a}{b}": f"the largest regret (utility units) a client earns by misreporting "
                         f"{a} and {b} at once, each either way (at least regret_{a} and "
                         f"regret_{b})"
       for a, b in (("N", "c"), ("N", "K"), ("c", "K"))},
    "regret_joint": "the largest of regret_Nc, regret_NK, regret_cK",
}


def _keys(df: pd.DataFrame, keys) -> list[str]:
    return [k for k in keys if k in df.columns]


def cpl_per_seed(df: pd.DataFrame, keys=("mechanism", "budget")) -> pd.DataFrame:
    """One row per (``keys``, seed) of a ``cpl-pricing`` frame (one row per client and
    cell): the cell's bound and spending (the same on each of its rows), the clients' total
    profit and the number of negative prices.

    >>> f = pd.DataFrame({"mechanism": "uniform", "budget": 15.0, "seed": [0, 0, 1, 1],
    ...                   "objective_bound": [2.0, 2.0, 4.0, 4.0], "spent": 15.0,
    ...                   "utility": [1.0, 2.0, 3.0, -1.0], "price": [1.0, 1.0, 1.0, -1.0]})
    >>> cpl_per_seed(f)[["seed", "objective_bound", "client_utility_sum",
    ...                  "negative_prices"]].to_numpy().tolist()
    [[0.0, 2.0, 3.0, 0.0], [1.0, 4.0, 2.0, 1.0]]
    """
    by = df.groupby([*_keys(df, keys), "seed"], observed=True, sort=True)
    out = by.agg(objective_bound=("objective_bound", "first"), spent=("spent", "first"),
                 client_utility_sum=("utility", "sum"),
                 negative_prices=("price", lambda p: int((p < 0).sum())))
    if "cell" in df:  # the cell each number comes from
        out["cell"] = by["cell"].first()
    return out.reset_index()


def _ir_mask(df: pd.DataFrame) -> pd.Series:
    return df["utility"] < -IR_TOL * np.maximum(1.0, df["gain"].abs())


def market_per_seed(df: pd.DataFrame, keys=("mechanism",)) -> pd.DataFrame:
    """One row per (``keys``, seed) of a market scenario's frame (one row per round and
    client, with the clearing's ``round_welfare`` and ``round_operator_balance`` on each row
    of its round): the metrics of :data:`MARKET_METRICS`.

    A frame without the round columns (cells stored by older code) raises a KeyError that
    names them."""
    missing = [c for c in ROUND_COLUMNS if c not in df.columns]
    if missing:
        raise KeyError(f"the rows lack {missing} (cells computed before these were stored; "
                       "rerun the sweep with --recompute-stale)")
    keys = _keys(df, keys)
    cell = [*keys, "seed"]
    rounds = df.groupby([*cell, "round"], observed=True, sort=True)
    per_round = rounds.agg(welfare=("round_welfare", "first"),
                           balance=("round_operator_balance", "first"),
                           paid=("paid", "sum"))
    trading = (df["n_bought"] + df["n_sold"]) > 0
    per_round["participation"] = trading.groupby(
        [df[k] for k in [*cell, "round"]], observed=True, sort=True).mean()
    by = per_round.groupby(level=cell, observed=True, sort=True)
    out = pd.DataFrame({
        "welfare": by.welfare.sum(),
        "total_payments": by.paid.sum(),
        "operator_balance": by.balance.sum(),
        "worst_round_balance": by.balance.min(),
        "participation": by.participation.mean(),
    })
    fails = _ir_mask(df)
    g = df.assign(_fail=fails).groupby(cell, observed=True, sort=True)
    out["ir_failures"] = g["_fail"].sum().astype(int)
    out["min_utility"] = g["utility"].min()
    return out.reset_index()


ROLE_METRICS = {
    "attacker_earned": "what the attackers earned, summed over rounds",
    "min_honest_utility": "the lowest cumulative utility of an honest client",
    "mean_trader_utility": "mean cumulative utility of a trader",
    "mean_buyer_utility": "mean cumulative utility of a buyer",
    "mean_seller_utility": "mean cumulative utility of a seller",
}


FIG5_METRICS = {
    "buyer_net_payment": "mean over buyers of a buyer's net payment (paid minus earned)",
    "seller_net_income": "mean over sellers of a seller's net income (earned minus paid)",
    "attacker_models_sold": "models the attackers sold, summed over rounds",
}  # computed beside ROLE_METRICS for the reproduction's Fig. 5 tests; not in the report's table


CLIENT_SUMS = ("utility", "earned", "paid", "payment", "n_sold")


def client_totals(df: pd.DataFrame, keys=("mechanism",)) -> pd.DataFrame:
    """One row per (``keys``, seed, client, role) of an inclusive market: the client's
    columns of :data:`CLIENT_SUMS` the frame has, summed over rounds (its cumulative
    utility, earnings, payments and models sold)."""
    sums = {c: (c, "sum") for c in CLIENT_SUMS if c in df.columns}
    return df.groupby([*_keys(df, keys), "seed", "client", "role"], observed=True,
                      as_index=False).agg(**sums)


def roles_per_seed(df: pd.DataFrame, keys=("mechanism",)) -> pd.DataFrame:
    """One row per (``keys``, seed) of an inclusive market (mechanism level or with
    training): the metrics of :data:`ROLE_METRICS` and :data:`FIG5_METRICS` from each
    client's cumulative utility, earnings, payments and models sold (NaN for a role the
    market lacks or a column its frame lacks). A client's net payment is ``paid - earned``
    where the frame has both (the mechanism-level market), else its signed ``payment``.

    >>> f = pd.DataFrame({"mechanism": "m", "seed": 0, "client": [0, 1, 2],
    ...                   "role": ["attacker", "buyer", "seller"], "utility": [0.0, 2.0, 1.0],
    ...                   "earned": [0.0, 0.5, 3.0], "paid": [0.0, 3.0, 0.5]})
    >>> r = roles_per_seed(f).iloc[0]
    >>> float(r.min_honest_utility), float(r.buyer_net_payment), float(r.seller_net_income)
    (1.0, 2.5, 2.5)
    >>> g = f.drop(columns=["earned", "paid"]).assign(payment=[0.0, 2.5, -2.5],
    ...                                              n_sold=[1, 0, 2])
    >>> r = roles_per_seed(g, keys=()).iloc[0]
    >>> float(r.buyer_net_payment), float(r.seller_net_income), int(r.attacker_models_sold)
    (2.5, 2.5, 1)
    """
    cell = [*_keys(df, keys), "seed"]
    per = client_totals(df, keys)
    if {"paid", "earned"} <= set(per.columns):
        per["net"] = per.paid - per.earned
    elif "payment" in per:
        per["net"] = per.payment
    rows = []
    for k, g in per.groupby(cell, observed=True, sort=True):
        att, honest = g[g.role == "attacker"], g[g.role != "attacker"]
        buyers, sellers = g[g.role == "buyer"], g[g.role == "seller"]
        rows.append({**dict(zip(cell, k, strict=True)),
                     "attacker_earned": att.earned.sum() if "earned" in g else np.nan,
                     "min_honest_utility": honest.utility.min(),
                     **{f"mean_{r}_utility": g[g.role == r].utility.mean()
                        for r in ("trader", "buyer", "seller")},
                     "buyer_net_payment": buyers.net.mean() if "net" in g else np.nan,
                     "seller_net_income": -sellers.net.mean() if "net" in g else np.nan,
                     "attacker_models_sold": att.n_sold.sum() if "n_sold" in g else np.nan})
    return pd.DataFrame(rows)


def ir_failures(df: pd.DataFrame, keys=("mechanism",)) -> pd.DataFrame:
    """One row per (``keys``, seed, client) whose utility was negative in some round (below
    -:data:`IR_TOL` x max(1, |gain|)): its role, in how many rounds, the worst round and its
    utility there (the shortfall), its cumulative utility and the cell, so that the case can
    be rerun (the cell's scenario, mechanism, parameters and seed)."""
    keys = _keys(df, keys)
    who = [*keys, "seed", "client"]
    cols = [*who, *(["role"] if "role" in df else []), "round", "utility",
            *(["cell"] if "cell" in df else [])]
    bad = df.loc[_ir_mask(df), cols]
    if bad.empty:
        return pd.DataFrame(columns=[*who, *(["role"] if "role" in df else []), "rounds_failed",
                                     "worst_round", "worst_utility", "cumulative_utility",
                                     *(["cell"] if "cell" in df else [])])
    worst = bad.loc[bad.groupby(who, observed=True, sort=True)["utility"].idxmin()]
    worst = worst.rename(columns={"round": "worst_round", "utility": "worst_utility"})
    worst = worst.set_index(who)
    worst.insert(0, "rounds_failed", bad.groupby(who, observed=True).size())
    cum = df.groupby(who, observed=True).utility.sum().rename("cumulative_utility")
    worst = worst.join(cum)
    order = [*(["role"] if "role" in df else []), "rounds_failed", "worst_round",
             "worst_utility", "cumulative_utility", *(["cell"] if "cell" in df else [])]
    return worst[order].reset_index().sort_values(["worst_utility", *who]).reset_index(
        drop=True)


def intervals(per_seed: pd.DataFrame, keys, metrics, bounds=None) -> pd.DataFrame:
    """Tidy summary over seeds: one row per (``keys``, metric) with the mean, the 95 %
    interval (Student's t; NaN with one seed) and the number of seeds. ``bounds``: metric ->
    (lo, hi), the range a metric cannot leave (its interval is clipped to it).

    >>> f = pd.DataFrame({"mechanism": ["a", "a", "a"], "seed": [0, 1, 2],
    ...                   "welfare": [1.0, 2.0, 3.0]})
    >>> intervals(f, ["mechanism"], ["welfare"]).round(3).to_numpy().tolist()
    [['a', 'welfare', 2.0, -0.484, 4.484, 3]]
    """
    clash = sorted({"metric", "mean", "low", "high", "seeds"} & set(keys))
    if clash:
        raise ValueError(f"keys {clash} clash with the summary's own columns; rename them")
    rows = []
    for k, g in per_seed.groupby(list(keys), observed=True, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        for metric in metrics:
            m, lo, hi, n = ci95(g[metric].to_numpy(dtype=float), (bounds or {}).get(metric))
            rows.append({**dict(zip(keys, k, strict=True)), "metric": metric, "mean": m,
                         "low": lo, "high": hi, "seeds": n})
    return pd.DataFrame(rows, columns=[*keys, "metric", "mean", "low", "high", "seeds"])


ZERO = 1e-9  # relative to a metric's largest magnitude: below it a number is float rounding


def _text(m: float, lo: float, hi: float, n: int, scale: float) -> str:
    def g(x):
        return "0" if abs(x) < ZERO * scale else f"{x:.4g}"

    if n == 0:
        return "n/a"
    if n == 1:
        return f"{g(m)} (1 seed)"
    return f"{g(m)} [{g(lo)}, {g(hi)}]"


def readable(summary: pd.DataFrame, keys) -> pd.DataFrame:
    """:func:`intervals`' rows as one row per ``keys``: "mean [low, high]" per metric (signs
    kept: a deficit reads negative) and the number of seeds. A number below :data:`ZERO`
    times its metric's largest magnitude (at least 1) reads 0: float rounding of a balanced
    budget (1e-15) is not a surplus.

    >>> s = pd.DataFrame({"mechanism": ["a", "b"], "metric": "operator_balance",
    ...                   "mean": [5e-16, -9.37], "low": [-6e-15, -12.0],
    ...                   "high": [7e-15, -6.7], "seeds": 3})
    >>> readable(s, ["mechanism"]).operator_balance.tolist()
    ['0 [0, 0]', '-9.37 [-12, -6.7]']
    """
    keys = list(keys)
    vals = summary[["mean", "low", "high"]].abs().max(axis=1)
    scale = vals.groupby(summary.metric).transform("max").fillna(0.0).clip(lower=1.0)
    text = summary.assign(v=[_text(r.mean, r.low, r.high, r.seeds, sc)
                             for r, sc in zip(summary.itertuples(), scale, strict=True)])
    wide = text.pivot(index=keys, columns="metric", values="v")
    wide = wide[list(dict.fromkeys(summary.metric))]
    seeds = summary.groupby(keys, observed=True).seeds.max().rename("seeds")
    return wide.join(seeds).reset_index()


def regret_per_seed(mechanisms, seeds, *, markets: int = REGRET_MARKETS,
                    search: dict | None = None, joint: bool = False) -> pd.DataFrame:
    """One row per (iPFL mechanism, seed): ``regret_N``, ``regret_c``, ``regret_K`` (the
    largest regret found over ``markets`` markets drawn from the checker's regret-property
    distribution with that seed, either direction, utility units: the measure of
    :func:`sims.design.evaluate.evaluate`, the same markets for every mechanism), their
    maximum ``regret``, and ``regret_note``: empty, or why a mechanism was not measured
    (a rule of your own that the bulk clearing cannot run: NaN regrets).
    ``mechanisms``: canonical names "selection+payments+prices". ``joint``: also two
    dimensions misreported at once (:data:`proofs.regret.JOINT_PAIRS`, each either way):
    ``regret_Nc``, ``regret_NK``, ``regret_cK`` (each at least its pair's one-dimension
    regrets) and their maximum ``regret_joint`` (:data:`JOINT_REGRET_METRICS`)."""
    from mechanisms.errors import FedmarketError
    from proofs.regret import JOINT_PAIRS
    from sims.design import DesignInputError, Mechanism, draw_markets, evaluate

    from .scenarios import parse_ipfl_mechanism

    dims = ("N", "c", "K")
    pairs = tuple(JOINT_PAIRS) if joint else ()
    jcols = [f"regret_{a}{b}" for a, b in pairs]
    rows = []
    drawn = {int(s): draw_markets(markets, int(s)) for s in seeds}
    for name in mechanisms:
        try:
            mech = Mechanism(name, *parse_ipfl_mechanism(name))
        except FedmarketError as exc:
            mech, note = None, f"not measured: {exc}"
        for seed, mk in drawn.items():
            row = {"mechanism": name, "seed": seed}
            if mech is not None:
                try:
                    s = evaluate(mech, mk, search=search, joint=pairs).summary
                    row.update({f"regret_{d}": s[f"max_regret_{d}"] for d in dims})
                    row.update({f"regret_{a}{b}": s[f"max_regret_joint_{a}{b}"]
                                for a, b in pairs})
                    note = ""
                except (FedmarketError, DesignInputError) as exc:
                    note = f"not measured: {exc}"
            if note:
                row.update({f"regret_{d}": np.nan for d in dims})
                row.update({c: np.nan for c in jcols})
            row["regret"] = max(row[f"regret_{d}"] for d in dims)
            if pairs:
                row["regret_joint"] = max(row[c] for c in jcols)
            row["regret_note"] = note
            rows.append(row)
    return pd.DataFrame(rows, columns=["mechanism", "seed", *(f"regret_{d}" for d in dims),
                                       "regret", *jcols, *(["regret_joint"] if pairs else []),
                                       "regret_note"])
