"""The seed papers' claims, tested on a reproduction's per-cell summary: for each claim the
paper's statement, ours as mean and 95 % interval over seeds, the setup (generated from the
configurations its cells ran), the differences from the authors, and a verdict by one rule
(:data:`RULE`).

Statistics are over SEEDS: each seed gives one number per test (e.g. the mean over clients of
a run), and the interval is Student's t interval of those numbers (:func:`sims.stats.ci95`,
shared with the sweep report); the spread over clients is reported separately and labelled so.
``write_page`` renders docs/reproduction.md.

The verdict rule, the same for every claim: a claim is one or more :class:`Test` s, each a
per-seed quantity, the side of a margin the paper says it lies on (``>=``, ``>``, ``<=``,
``<``) and the margin, stated with the claim before any number is seen. Each test is decided
by the sequential rule of :mod:`sims.sequential` (looks at 3, 5 and 10 seeds, an
error-spending design): *reproduced* when the interval at the first decisive look lies on the
claimed side, *not reproduced* when it lies wholly on the other side, and *inconclusive*
otherwise (with the next look, or at the cap the seeds a fresh interval would need). A claim
is reproduced when every test is, not reproduced when every test is not, *partly* when some
are reproduced and some not, and inconclusive otherwise; its cells (:func:`group_of`) get
seeds while its verdict can still change (:attr:`Claim.next_look`). A test that cannot fail
(:attr:`Test.fixed`: its quantity is fixed by construction, e.g. the attacker's utility under
an algorithm without payments, :func:`zero_by_construction`) is shown but is not evidence: a
claim's verdict and tally count only the tests that could fail. Where iPFL scores as Local
(its pull too weak to move the models), the claim says so next to its verdict
(:func:`local_note`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .comparison import cpl_per_seed, roles_per_seed
from .results import write_atomic
from .sequential import CONFIRM, CONFIRM_CPU_HOURS, LOOKS, Decision, confirm, decide
from .stats import ACC, DACC, ci95, t_half_width

__all__ = [
    "BY_ROLE",
    "COMPARABLE",
    "DECLARED",
    "EQUAL_NEAR",
    "GROUP_PARAMS",
    "IPFL_TABLE_SCENARIOS",
    "LEFT_OUT",
    "LEFT_OUT_OF",
    "NOT_REPRODUCED",
    "RULE",
    "SPLIT",
    "Claim",
    "Test",
    "as_local",
    "claim_differences",
    "claims",
    "combine",
    "cost_lines",
    "declared_differences",
    "design_lines",
    "differences_line",
    "fedamp_note",
    "figure_parts",
    "group_of",
    "groups_of",
    "identical_ledgers",
    "inconclusive_lines",
    "left_out",
    "local_note",
    "round_curves",
    "seed_table",
    "seeds_needed",
    "seeds_text",
    "setting_text",
    "tally",
    "write_page",
    "zero_by_construction",
]

COMPARABLE = 0.02  # "comparable accuracy": within 2 percentage points (a non-inferiority margin)
BASELINES = ("local", "fedavg", "fedprox", "ditto", "fedamp", "cfl", "fedfomo", "pfedgraph")
MAX_SEEDS = 10_000  # seeds_needed looks no further
# Every claim's tests, stated before any number: (claim, quantity per seed, side, margin).
MARGINS = {
    "fig2 accuracy": ("Fig. 2", "iPFL minus the best baseline, best accuracy", ">=",
                      -COMPARABLE),
    "fig2 utility": ("Fig. 2", "iPFL minus the best baseline, utility per client", ">", 0.0),
    "liar gain": ("Table 2 (mechanism level and with training)",
                  "the liar's utility gain from each misreport", "<=", 0.0),
    "fig4 ipfl utility": ("Fig. 4", "per attack: iPFL's change of the attacker's utility",
                          "<", 0.0),
    "fig4 ipfl accuracy": ("Fig. 4", "per attack: iPFL's change of benign best accuracy",
                           ">=", -COMPARABLE),
    "fig4 baseline utility": ("Fig. 4", "per attack and baseline: its change of the "
                                        "attacker's utility (0 by construction, so not "
                                        "evidence, for a baseline without payments)",
                              ">=", 0.0),
    "fig5 attacker": ("Fig. 5", "attacker's earnings (mechanism level) or models sold "
                                "(with training)", "<=", 0.0),
    "fig5 honest": ("Fig. 5", "smallest honest utility", ">=", 0.0),
    "fig5 buyers": ("Fig. 5", "buyers' net payment", ">", 0.0),
    "fig5 sellers": ("Fig. 5", "sellers' net income", ">", 0.0),
    "cpl bound": ("CPL", "bound reduction against each posted-price scheme, per budget (%)",
                  ">", 0.0),
    "cpl profit": ("CPL", "client profit gain against each posted-price scheme, per budget",
                   ">", 0.0),
    "lia ari": ("pFedLIA", "ARI to the true groups", ">", 0.9),
    "lia oracle": ("pFedLIA", "best accuracy minus Oracle", ">=", -COMPARABLE),
    "lia fedavg": ("pFedLIA", "best accuracy minus FedAvg", ">", 0.0),
    "lia local": ("pFedLIA", "best accuracy minus Local", ">", 0.0),
}


def _priced(df) -> dict:
    """``confirmable`` for the tests of a learning claim read from ``df``: True when its cells
    for :data:`~sims.sequential.CONFIRM` fresh seeds cost at most
    :data:`~sims.sequential.CONFIRM_CPU_HOURS` by their own CPU clocks
    (:func:`sims.costs.cpu_per_seed`); cells without a CPU clock cannot be priced and get no
    confirmation run. The price depends on the cells' timings only, never on their values."""
    from .costs import cpu_per_seed

    per_seed = cpu_per_seed(df)
    return {"confirmable": per_seed is not None
            and per_seed * CONFIRM <= CONFIRM_CPU_HOURS * 3600.0}


def _m(key: str) -> tuple[str, float]:
    """(side, margin) of a stated test (:data:`MARGINS`)."""
    return MARGINS[key][2], MARGINS[key][3]
RULE = ("Each claim is a set of tests, each a per-seed quantity, the side of a margin the paper "
        "says it lies on and the margin, fixed before the numbers (the table below). Seeds are "
        "added by a sequential rule fixed in advance (`sims.sequential`): every claim's cells "
        "run seeds 0-2; a claim still undecided gets seeds 0-4, then 0-9 (the cap). Each test "
        "is looked at after 3, 5 and 10 seeds and stops at the first look whose interval lies "
        "wholly on one side of its margin: **reproduced** on the claimed side, **not "
        "reproduced** on the other; **inconclusive** while it spans the margin (then 'more "
        "seeds' names the next look, or, at the cap, how many seeds one interval at this mean "
        "and spread would need). The interval at a look is mean +- c sd / sqrt(n) over its "
        "first n seeds, c from the error-spending design below, so that looking three times "
        "errs no more often than one 95 % interval. A claim is reproduced when all its tests "
        "are, not reproduced when all are not, partly when some are and some are not, and "
        "inconclusive otherwise; its seeds stop once its verdict can no longer change. A "
        "claim whose cells need no training (the mechanism-level markets: Table 2's liars, "
        "Fig. 5's market, CPL), or whose learning cells for 50 fresh seeds cost at most "
        f"{CONFIRM_CPU_HOURS:g} CPU-hours by their own CPU clocks (the median over seeds of a "
        "seed's cells' CPU seconds, times 50; cells without a CPU clock cannot be priced), "
        "and that is still inconclusive at the cap gets a confirmation "
        "run: a separate experiment on 50 fresh seeds (10-59), one fixed 95 % interval, whose "
        "verdict its undecided tests then take, the first run's shown beside it (each run errs "
        "at most 5 %, so such a test had two chances: at most 10 %; this stage was added after "
        "the first run left Table 2's size x 10 test inconclusive at the cap, and extended to "
        "learning claims by their price after the first run left six of them inconclusive "
        "at the cap: the price is of the cells, not of their values). A test "
        "whose quantity is fixed by construction (it cannot fail, e.g. '0 by construction') is "
        "shown but is not evidence: only the tests that could fail count.")


def design_lines() -> list[str]:
    """The page's statement of the sequential design: its looks, the error spent by each,
    the intervals' multipliers beside the fixed 95 % t, and the error rates simulated."""
    from scipy import stats

    from .sequential import ALPHA, design_table, simulated_error

    table = pd.DataFrame(design_table()).assign(**{
        "information fraction": lambda d: d["information fraction"].map("{:.1f}".format),
        "error spent by this look": lambda d: d["error spent by this look"].map("{:.4f}".format),
        "interval multiplier": lambda d: d["interval multiplier"].map("{:.2f}".format),
        "fixed 95 % t multiplier": lambda d: d["fixed 95 % t multiplier"].map("{:.2f}".format)})
    runs = 100_000
    ours = simulated_error(runs=runs, rng=1)
    naive = simulated_error(runs=runs, rng=1, multipliers=[stats.t.ppf(0.975, n - 1)
                                                           for n in LOOKS])
    return ["The design: looks after " + ", ".join(map(str, LOOKS)) + f" seeds, two-sided "
            f"error rate {ALPHA:g} spent by Lan and DeMets' Pocock-type function alpha ln(1 + "
            "(e - 1) t), t = n / " + f"{LOOKS[-1]}" + "; each look's multiplier c is a boundary "
            "on Student's t statistic (exact at the first look, placed on 400,000 simulated "
            "null tests at the later ones):", "", _md(table), "",
            f"Simulated on {runs:,} other null tests (normal per-seed values, mean on the "
            f"margin), the rule calls {ours:.3f} of them decisive; the fixed 95 % interval at "
            f"every look would call {naive:.3f} (`sims.sequential.simulated_error`).", ""]


def fmt(values, digits: int = 3, bounds=None) -> str:
    m, lo, hi, n = ci95(values, bounds)
    if n == 0:
        return "n/a"
    if n == 1:
        return f"{m:.{digits}f} (1 seed)"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


SIDES = (">=", ">", "<=", "<")


def seeds_needed(values, side: str, margin: float) -> int | None:
    """The smallest number of seeds n at which an interval with the observed mean and sd,
    t(0.975, n - 1) sd / sqrt(n) wide on each side, would lie wholly on one side of the margin;
    None when no number would (the mean on the margin) or more than :data:`MAX_SEEDS`.

    >>> seeds_needed([0.0, 1.0, 2.0], ">=", 0.5)  # mean 1, sd 1: t(n-1)/sqrt(n) < 0.5
    18
    >>> seeds_needed([1.0, 3.0], ">", 2.0) is None  # the mean on the margin
    True
    """
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if v.size < 2:
        return None
    gap, sd = abs(float(v.mean()) - margin), float(v.std(ddof=1))
    strict = side in (">", "<")
    if gap == 0.0 and (strict or sd > 0):
        return None
    if sd == 0.0:
        return 2
    n = np.arange(2, MAX_SEEDS + 1)
    ok = np.flatnonzero(t_half_width(sd, n) < gap)
    return int(n[ok[0]]) if ok.size else None


@dataclass(frozen=True)
class Test:
    """One test of a claim: per-seed ``values``, the claimed ``side`` of ``margin``, decided by
    the sequential rule (:func:`sims.sequential.decide`). ``values`` given as a pandas Series
    with an index level named "seed" carry their seeds; otherwise ``seeds`` names them (default
    0, 1, ...)."""

    __test__ = False  # not a pytest class

    label: str
    values: tuple
    side: str
    margin: float
    digits: int = 3
    bounds: tuple | None = None
    fixed: str = ""  # why it cannot fail, e.g. "0 by construction": shown, never counted
    seeds: tuple = ()
    confirmable: bool = False  # cheap cells: a confirmation run after an inconclusive cap

    def __post_init__(self):
        if self.side not in SIDES:
            raise ValueError(f"side is {self.side!r}; choose one of {SIDES}")
        seeds = self.seeds
        if isinstance(self.values, pd.Series) and "seed" in self.values.index.names:
            seeds = self.values.index.get_level_values("seed")
        values = tuple(float(x) for x in self.values)
        seeds = tuple(int(x) for x in seeds) if len(seeds) else tuple(range(len(values)))
        if len(seeds) != len(values):
            raise ValueError(f"seeds has {len(seeds)} entries for {len(values)} values")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "seeds", seeds)

    @property
    def interval(self):
        """Mean and fixed 95 % interval over every seed run (descriptive; the verdict is the
        sequential rule's, :attr:`decision`)."""
        return ci95(self.values, self.bounds)

    @property
    def first_run(self) -> Decision:
        """The sequential rule's decision on the first run's seeds (0 to the cap)."""
        first = [i for i, x in enumerate(self.seeds) if x < LOOKS[-1]]
        return decide([self.values[i] for i in first], [self.seeds[i] for i in first],
                      self.side, self.margin, self.bounds)

    @property
    def decision(self) -> Decision:
        """The first run's decision, or, for a confirmable test inconclusive at the cap, its
        confirmation run's (:func:`sims.sequential.confirm`)."""
        d = self.first_run
        if self.confirmable and d.verdict == "inconclusive" and d.final:
            return confirm(self.values, self.seeds, self.side, self.margin, self.bounds)
        return d

    @property
    def could_fail(self) -> bool:
        return not self.fixed

    @property
    def verdict(self) -> str:
        if self.fixed:
            return f"{self.fixed} (not evidence)"
        return self.decision.verdict

    @property
    def next_look(self) -> int | None:
        """The seeds the next look of an undecided test needs (None: decided, at the cap, or
        fixed by construction)."""
        return None if self.fixed else self.decision.next_look

    def more_seeds(self, stopped: str = "") -> str:
        """Why the test stopped where it did, for an inconclusive one; for one decided by a
        confirmation run, what the first run said. ``stopped``: why its claim adds no seed
        although this test's next look is ahead (a claim decided whatever this test says)."""
        d = self.decision
        ahead = stopped and self.verdict == "inconclusive" and d.next_look is not None
        if d.stage == "confirmation":
            f = self.first_run
            first = (f"first run ({seeds_text(f.seeds)}): inconclusive, {f.mean:.{self.digits}f} "
                     f"[{f.low:.{self.digits}f}, {f.high:.{self.digits}f}]")
            if ahead:
                return f"{first}; none: no confirmation run, {stopped}"
            if d.next_look is not None:
                return f"{first}; confirmation run: {CONFIRM} fresh seeds ({d.next_look} in all)"
            if self.verdict != "inconclusive":
                return first
        if self.verdict != "inconclusive":
            return ""
        if ahead:
            return f"none: {stopped}"
        if d.next_look is not None:
            return f"next look: {d.next_look} seeds"
        by_seed = dict(zip(self.seeds, self.values, strict=True))
        need = seeds_needed([by_seed[x] for x in d.seeds], self.side, self.margin)
        where = (f"the confirmation run's {CONFIRM} fresh seeds span the margin too"
                 if d.stage == "confirmation" else f"at the cap ({LOOKS[-1]} seeds)")
        return (f"none: {where}; at this mean and spread a fresh "
                "fixed 95 % interval would need "
                + (f"about {need:,} seeds" if need is not None else
                   f"more than {MAX_SEEDS:,} seeds (the mean on the margin)"))

    @property
    def shown(self) -> Decision:
        """The decision its line shows: :attr:`decision`, or the first run's while a
        confirmation run has not been run (no seed of it yet)."""
        d = self.decision
        return self.first_run if not d.look and d.stage == "confirmation" else d

    def row(self, stopped: str = "") -> dict:
        """The test's line in its claim's table (``stopped``: as :meth:`more_seeds`)."""
        d = self.shown
        ours = (f"{d.mean:.{self.digits}f} [{d.low:.{self.digits}f}, {d.high:.{self.digits}f}]"
                if d.look else fmt(self.values, self.digits, self.bounds))
        return {"test": self.label, "claimed": f"{self.side} {self.margin:g}",
                "ours (mean [interval at the look])": ours,
                "seeds used": seeds_text(d.seeds) + ("; confirmation run"
                                                     if d.stage == "confirmation" else ""),
                "verdict": self.verdict,
                "more seeds": self.more_seeds(stopped)}


def seeds_text(seeds) -> str:
    """``n (first-last)`` of consecutive seeds, else ``n (a, b, c)``.

    >>> seeds_text((0, 1, 2)), seeds_text((0, 2, 3)), seeds_text(())
    ('3 (0-2)', '3 (0, 2, 3)', '0')
    """
    s = [int(x) for x in seeds]
    if not s:
        return "0"
    if s == list(range(s[0], s[0] + len(s))) and len(s) > 2:
        return f"{len(s)} ({s[0]}-{s[-1]})"
    return f"{len(s)} ({', '.join(map(str, s))})"


def combine(verdicts) -> str:
    """A claim's verdict from its tests' (the module docstring's rule).

    >>> combine(["reproduced", "reproduced"]), combine(["reproduced", "inconclusive"])
    ('reproduced', 'inconclusive')
    >>> combine(["reproduced", "not reproduced"]), combine(["not reproduced"] * 2)
    ('partly', 'not reproduced')
    """
    v = list(verdicts)
    if not v:
        return "not run"
    if all(x == "reproduced" for x in v):
        return "reproduced"
    if all(x == "not reproduced" for x in v):
        return "not reproduced"
    if "reproduced" in v and "not reproduced" in v:
        return "partly"
    return "inconclusive"


@dataclass
class Claim:
    name: str
    paper: str  # the paper's statement and where
    ours: str  # our numbers (mean [95 % CI] over seeds)
    setup: str
    tests: list = field(default_factory=list)
    reason: str = ""  # a note on the verdict (a likely cause, the scope)
    table: pd.DataFrame | None = field(default=None, repr=False)
    fixed: str | None = None  # "not run" or "finding": no tests decide it
    scenario: str = ""  # the scenario whose cells it reads (its per-round curves' cells)
    part: str = ""  # the partition, where a scenario's partitions are claims of their own
    groups: tuple = ()  # the cell groups it reads (:func:`group_of`): where its seeds go
    note: str = ""  # shown next to the verdict, in the verdict table too (iPFL equals Local)

    @property
    def verdict(self) -> str:
        """By :func:`combine` over the tests that could fail (no test that could fail: "no
        test could fail")."""
        if self.fixed is not None:
            return self.fixed
        live = [t.verdict for t in self.tests if t.could_fail]
        return combine(live) if live or not self.tests else "no test could fail"

    @property
    def next_look(self) -> int | None:
        """The seeds its cells need next under the sequential rule: while the verdict can
        still change (inconclusive, with a test whose next look is ahead), the largest next
        look of its undecided tests; None once decided (reproduced, not reproduced, partly:
        no further seed changes a claim with tests on both sides) or at the cap."""
        if self.verdict != "inconclusive":
            return None
        looks = [t.next_look for t in self.tests if t.could_fail and t.next_look is not None]
        return max(looks) if looks else None

    def rows(self) -> list[dict]:
        """Its tests' lines (:meth:`Test.row`): a test whose next look is ahead in a claim
        whose verdict no seed changes (partly: tests on both sides) says so, not the look
        the rule will never run."""
        stopped = ("" if self.verdict == "inconclusive" or self.next_look is not None else
                   f"the claim reads {self.verdict} (decided tests on both sides), which no "
                   "further seed changes, so the rule adds none")
        return [t.row(stopped) for t in self.tests]

    def seeds_used(self) -> str:
        """The seeds its tests' verdicts used: one count, or the range over its tests."""
        n = sorted({t.shown.n for t in self.tests if t.could_fail})
        return "" if not n else str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"


def _not_run(name, paper, why, setup="") -> Claim:
    return Claim(name, paper, "", setup, reason=why, fixed="not run")


# ------------------------------------------------------------------------------ cell groups

# the parameters that make a scenario's cells claims of their own (each value its own group)
GROUP_PARAMS = {"fig2": ("partition", "lam"), "liars": ("thresholds",),
                "fig4": ("dataset",), "liars-learning": ("dataset",),
                "fig5-learning": ("dataset",)}
# algorithms no claim reads (CFL: see cfl_note) in the scenarios of LEFT_OUT_OF, their cells
# run at the first look's seeds only; but for a cell that carries what DECLARED says (CFL at
# the split thresholds declared for its setting, sims.settings.CFL_THRESHOLDS, where its
# criterion fires): that one a claim reads among the baselines. Fig. 4 reads CFL at the
# authors' thresholds (on digits its criterion fires there: every run split, but under the
# gaussian attack, whose upload keeps the mean update's norm above eps1)
LEFT_OUT = ("cfl",)
DECLARED = {"cfl": "cfl_eps1"}
LEFT_OUT_OF = ("fig2", "fig2-corrected")


def left_out(mechanism: str, params: dict, scenario: str = "fig2") -> bool:
    """Whether no claim reads a cell of ``mechanism`` with these ``params`` in ``scenario``
    (:data:`LEFT_OUT` in :data:`LEFT_OUT_OF`, but for :data:`DECLARED`).

    >>> left_out("cfl", {"partition": "niid"}), left_out("cfl", {"cfl_eps1": 0.47})
    (True, False)
    >>> left_out("cfl", {"attack": "none"}, "fig4")
    False
    """
    return (scenario in LEFT_OUT_OF and mechanism in LEFT_OUT
            and DECLARED.get(mechanism) not in params)


def _left_out_rows(df: pd.DataFrame) -> pd.Series:
    """The rows of a summary frame whose cells no claim reads (:func:`left_out`)."""
    if "mechanism" not in df:
        return pd.Series(False, df.index)
    mask = df.mechanism.isin(LEFT_OUT)
    if "scenario" in df:
        mask &= df.scenario.isin(LEFT_OUT_OF)
    for mech, param in DECLARED.items():
        col = f"param_{param}"
        if col in df:
            mask &= ~((df.mechanism == mech) & df[col].notna())
    return mask


def group_of(scenario: str, mechanism: str, params: dict) -> str:
    """The group of a cell: the cells one claim reads share it, and the sequential rule adds
    seeds to a group as a claim reading it needs them. A cell of an algorithm no claim reads
    (:func:`left_out`) is a group of its own, run at the first look's seeds only.

    >>> group_of("fig2", "ipfl", {"partition": "niid", "lam": 2.0, "rounds": 8})
    'fig2/partition niid/lam 2'
    >>> group_of("inclusive-market", "box2", {"rounds": 20})
    'inclusive-market/box2'
    """
    if left_out(mechanism, params, scenario):
        return f"{scenario}/{mechanism}"
    if scenario == "inclusive-market":
        return f"{scenario}/{mechanism}"
    return "/".join([scenario, *(f"{k} {_g(params[k])}" for k in GROUP_PARAMS.get(scenario, ())
                                 if k in params)])


def groups_of(df: pd.DataFrame) -> tuple:
    """The groups (:func:`group_of`) of the cells in a summary frame that a claim reads (not
    those of :data:`LEFT_OUT`)."""
    if df is None or df.empty or "scenario" not in df:
        return ()
    cols = [c for c in df if c.startswith("param_")]
    cells = df.drop_duplicates("cell") if "cell" in df else df
    if "mechanism" not in cells:
        cells = cells.assign(mechanism="")
    cells = cells[~_left_out_rows(cells)]
    out = set()
    for row in cells[["scenario", "mechanism", *cols]].itertuples(index=False):
        params = {c[len("param_"):]: v for c, v in zip(cols, row[2:], strict=True)
                  if not (isinstance(v, float) and np.isnan(v))}
        out.add(group_of(row[0], row[1], params))
    return tuple(sorted(out))


# ------------------------------------------------------------------------------ per-seed numbers


def per_run(df: pd.DataFrame, keys=("mechanism",)) -> pd.DataFrame:
    """One row per (keys, seed): mean over clients of the best-over-rounds and last-round
    personalised accuracy, the cumulative utility per client, and the spread over clients
    (std of the clients' best accuracy, labelled ``client_sd``)."""
    keys = list(keys)
    last_round = df.groupby([*keys, "seed"])["round"].transform("max")
    last = df[df["round"] == last_round]
    cum = df.groupby([*keys, "seed", "client"], as_index=False).utility.sum()
    acc = last.groupby([*keys, "seed"]).agg(
        acc_best=("acc_personalised_best", "mean"), acc_last=("acc_personalised", "mean"),
        client_sd=("acc_personalised_best", "std"))
    util = cum.groupby([*keys, "seed"]).utility.mean().rename("utility")
    out = acc.join(util)
    if "n_bought" in df:  # others' models a client uses per round (aggregates or buys)
        out = out.join(df.groupby([*keys, "seed"]).n_bought.mean().rename("models_used"))
    return out.reset_index()


def seed_table(runs: pd.DataFrame, keys=("mechanism",)) -> pd.DataFrame:
    """Per keys: mean [95 % CI] over seeds of each per-run number; client spread apart."""
    rows = []
    for k, g in runs.groupby(list(keys)):
        k = k if isinstance(k, tuple) else (k,)
        rows.append({**dict(zip(keys, k, strict=True)), "seeds": g.seed.nunique(),
                     "best acc (authors')": fmt(g.acc_best, bounds=ACC),
                     "last-round acc": fmt(g.acc_last, bounds=ACC),
                     "utility per client (money units)": fmt(g.utility, 1),
                     **({"others' models used per round": f"{g.models_used.mean():.1f}"}
                        if "models_used" in g else {}),
                     "client spread (sd of best acc)": f"{g.client_sd.mean():.3f}"})
    return pd.DataFrame(rows)


def _paired(runs, metric, mine="ipfl", others=BASELINES):
    """Per seed: metric(mine) - max over the others present."""
    wide = runs.pivot_table(index="seed", columns="mechanism", values=metric)
    others = [o for o in others if o in wide]
    if mine not in wide or not others:
        return pd.Series([], dtype=float, index=pd.Index([], name="seed"))
    return (wide[mine] - wide[others].max(axis=1)).dropna()


# ------------------------------------------------------------------------------ setups

_DATA = {"fashion-mnist": "Fashion-MNIST", "digits": "scikit-learn digits (8x8)",
         "synthetic": "synthetic data", "cifar10": "CIFAR-10"}


def describe(cfg: dict, varying: dict | None = None, lia: bool = False) -> str:
    """The setup of a cell's configuration ``cfg`` (its fields as a dict) in words; the fields
    in ``varying`` ({field: values}) are listed as such; ``lia``: the cells ran pFedLIA (its
    warm-up and lazy steps are named). Generated from the configuration a cell ran, never
    written by hand."""
    varying = dict(varying or {})

    def val(k):
        if k in varying:
            return " / ".join(map(_g, varying.pop(k)))
        return _g(cfg.get(k))

    if "dataset" not in cfg or "steps" not in cfg:  # a mechanism-level scenario
        keep = {k: v for k, v in cfg.items() if k not in ("seed",)}
        return "mechanism level: " + ", ".join(
            f"{k} {val(k)}" for k in sorted(keep)) + _rest(varying)
    from learning.config import PRESETS

    pub = PRESETS["published"]
    same = [k for k, v in pub.items() if cfg.get(k) == v]
    preset = ("published setup" if len(same) == len(pub) else "corrected defaults"
              if not same else "published in " + ", ".join(same))
    data = _DATA.get(cfg["dataset"], cfg["dataset"])
    if cfg.get("train_subsample"):
        data += f" (a uniform draw of {cfg['train_subsample']:,} training samples)"
    model = cfg.get("model", "auto")
    if model == "auto":
        from learning.models import auto

        model = auto(cfg["dataset"])
    part = f"{val('partition')} partition"
    if cfg.get("partition") in ("niid", "cluster") or "partition" in varying:
        part += f" (beta {val('beta')})"
    if cfg.get("partition") in ("cluster", "pairs"):
        part += f", {val('n_clusters')} groups"
    if cfg.get("partition") == "skew":
        part += f", {val('skew_classes')} classes per client"
    text = (f"{preset}; {data}, {model}; {val('clients')} clients, {part}; {val('rounds')} "
            f"rounds of {val('steps')} local SGD steps (batch {val('batch')}, lr {val('lr')}, "
            f"momentum {val('momentum')}, weight decay {val('weight_decay')}); iPFL lambda "
            f"{val('lam')}, eta {val('eta')}, {val('metric')} distance")
    if cfg.get("test_subsample"):
        text += f"; {cfg['test_subsample']:,} global test samples"
    if cfg.get("evaluate_every", 1) > 1:
        text += f"; test accuracy every {cfg['evaluate_every']} rounds and in the last"
    if cfg.get("attackers") or "attack" in varying:
        text += (f"; {cfg['attackers']} attacker(s) ({cfg['attacker_placement']} client), "
                 f"attack {val('attack')}")
    if cfg.get("roles") == "inclusive":
        text += f"; inclusive market (attack {val('attack')})"
    if cfg.get("liar", -1) >= 0:
        text += (f"; client {cfg['liar']} reports cost x {val('liar_c')}, data x "
                 f"{val('liar_N')}")
    if lia or cfg.get("algorithm") in ("lia", "oracle") or "lia_warmup" in varying:
        text += (f"; pFedLIA: {val('lia_warmup')} FedAvg warm-up rounds (of the "
                 f"{val('rounds')}; Oracle clusters from the first), then {val('lia_k')} lazy "
                 "SGD steps per client on one batch for the influence scores")
    for k in ("algorithm", "seed"):
        varying.pop(k, None)
    return text + _rest(varying)


def _g(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _rest(varying: dict) -> str:
    return "".join(f"; {k}: {' / '.join(map(_g, vs))}" for k, vs in sorted(varying.items()))


def setup_of(df: pd.DataFrame, cfgs: dict) -> str:
    """The setup of the cells in ``df``: their configurations (``cfgs``: config id -> fields)
    described once, with the fields that differ between them listed."""
    if df is None or df.empty or "config_id" not in df:
        return ""
    ids = [i for i in pd.unique(df.config_id) if i in cfgs]
    if not ids:
        return ""
    rows = [cfgs[i] for i in ids]
    keys = sorted({k for r in rows for k in r} - {"algorithm", "seed"})
    varying = {}
    for k in keys:
        vals = sorted({json.dumps(r.get(k), sort_keys=True) for r in rows})
        if len(vals) > 1:
            varying[k] = [json.loads(v) for v in vals]
    lia = "mechanism" in df and bool({"lia", "oracle"} & set(df.mechanism))
    return describe(rows[0], varying, lia=lia)


# ------------------------------------------------------------------------------ claims


def _fig2(frames, cfgs, scenario, label) -> list[Claim]:
    """Fig. 2's claims per partition: at the cells' own lambda (the paper's), and where iPFL
    also ran at another lambda (``param_lam``: :data:`sims.reproduce.PULL_LAM`), again with
    those iPFL cells against the same baselines (whose cells do not depend on lambda)."""
    df = frames.get(scenario)
    if df is None or df.empty:
        return [_not_run(f"Fig. 2 ({label})", FIG2, "no cells in the store")]
    keys = ["param_partition"] if "param_partition" in df else []
    pulled = df["param_lam"].notna() if "param_lam" in df else pd.Series(False, df.index)
    out = []
    for part, g in (df[~pulled].groupby(keys) if keys else [(("niid",), df[~pulled])]):
        part = part[0] if isinstance(part, tuple) else part
        out.append(_fig2_claim(g, cfgs, f"Fig. 2, {part} ({label})", part))
        here = df[pulled & (df.param_partition == part)] if keys else df[pulled]
        for lam, h in (here.groupby("param_lam") if not here.empty else []):
            both = pd.concat([g[g.mechanism != "ipfl"], h], ignore_index=True)
            out.append(_fig2_claim(both, cfgs, f"Fig. 2, {part} ({label}, iPFL at lambda "
                                               f"{lam:g})", part, lam=lam))
    return out


def _fig2_claim(g: pd.DataFrame, cfgs: dict, name: str, part: str, lam=None) -> Claim:
    out_rows = _left_out_rows(g)
    left, g = g[out_rows], g[~out_rows]
    declared_cfl = g[g.mechanism == "cfl"]
    runs = per_run(g)
    # only seeds with every algorithm (a run stopped midway leaves a seed partly done)
    whole = runs.groupby("seed").mechanism.nunique()
    runs = runs[runs.seed.isin(whole[whole == runs.mechanism.nunique()].index)]
    setup = setup_of(g, cfgs)
    if lam is not None:
        setup += f"; iPFL at lambda {lam:g}, the baselines' cells those of the setting above"
    if runs[runs.mechanism == "ipfl"].seed.nunique() < 1 or runs.mechanism.nunique() < 2:
        return Claim(name, FIG2, "too few cells yet", setup,
                     reason="needs iPFL and a baseline for a whole seed",
                     table=seed_table(runs), fixed="not run", part=part, groups=groups_of(g))
    dacc = _paired(runs, "acc_best")
    dutil = _paired(runs, "utility")
    used = sorted(runs.seed.unique())
    cheap = _priced(g)
    tests = [Test("iPFL minus the best baseline, best accuracy", dacc, *_m("fig2 accuracy"),
                  bounds=DACC, **cheap),
             Test("iPFL minus the best baseline, utility per client (money units)", dutil,
                  *_m("fig2 utility"), 1, **cheap)]
    return Claim(
        name, FIG2, f"iPFL minus best baseline (every seed run): best accuracy "
        f"{fmt(dacc, bounds=DACC)}, utility per client {fmt(dutil, 1)} money units (seeds with "
        f"every algorithm run: {', '.join(map(str, used))})", setup, tests,
        "; ".join(n for n in (cfl_note(left, cfgs), cfl_note(declared_cfl, cfgs),
                              fedamp_note(runs, g, cfgs)) if n),
        seed_table(runs), part=part, groups=groups_of(g), note=local_note(runs))


EQUAL_NEAR = 0.005  # an algorithm "scores as Local" when every seed's mean best accuracy is
# this close to Local's (iPFL at the paper's lambda; FedAMP)


def as_local(runs: pd.DataFrame, mechanism: str) -> pd.Series | None:
    """Per seed run with both: ``mechanism`` minus Local, mean best accuracy over clients
    (``runs``: :func:`per_run`'s rows); None when either did not run."""
    by = runs.set_index(["mechanism", "seed"]).acc_best
    names = by.index.get_level_values(0)
    if mechanism not in names or "local" not in names:
        return None
    d = (by[mechanism] - by["local"]).dropna()
    return d if not d.empty else None


def local_note(runs: pd.DataFrame) -> str:
    """"iPFL equals Local here" where iPFL's mean best accuracy is within :data:`EQUAL_NEAR`
    of Local's in every seed run with both (its pull too weak to move the models: the
    lambda finding); else, where both ran, how far apart they are (every seed run)."""
    d = as_local(runs, "ipfl")
    if d is None:
        return ""
    if (d.abs() <= EQUAL_NEAR).all():
        return (f"iPFL equals Local here: iPFL minus Local, best accuracy "
                f"{fmt(d, bounds=DACC)}, each of {len(d)} seeds within {EQUAL_NEAR:g}")
    return (f"iPFL minus Local here, best accuracy {fmt(d, bounds=DACC)}: "
            f"{int((d.abs() > EQUAL_NEAR).sum())} of {len(d)} seeds more than {EQUAL_NEAR:g} "
            "apart")


FEDAMP_NEAR = EQUAL_NEAR  # FedAMP "scores as Local" when every seed's best accuracy is this close
FEDAMP_PULL = "python benchmarks/fedamp_pull.py"  # the measurement of why (digits, 3 rounds)


def fedamp_note(runs: pd.DataFrame, df: pd.DataFrame, cfgs: dict) -> str:
    """Where FedAMP's best accuracy is within :data:`FEDAMP_NEAR` of Local's in every seed
    run with both (``runs``: :func:`per_run`'s rows), why: its models never leave the
    clients' own training; the server's attentive model u_i enters only through the proximal
    term of weight fedamp_lam (the cells' configurations, ``cfgs``), too weak to move them,
    as :data:`FEDAMP_PULL` measures (the figures quoted are asserted by
    tests/test_baselines.py)."""
    d = as_local(runs, "fedamp")
    if d is None or not (d.abs() <= FEDAMP_NEAR).all():
        return ""
    ids = pd.unique(df[df.mechanism == "fedamp"].config_id) if "config_id" in df else []
    conf = [cfgs[i] for i in ids if i in cfgs]
    lams = sorted({c["fedamp_lam"] for c in conf if "fedamp_lam" in c})
    lam = "/".join(f"{v:g}" for v in lams) or "?"
    heuristic = conf and all(c.get("fedamp_attention") == "heuristic"
                             and c.get("fedamp_self") == 0.3 for c in conf)
    return (f"FedAMP scores as Local (FedAMP minus Local, best accuracy "
            f"{fmt(d, bounds=DACC)}; each of {len(d)} seeds within {FEDAMP_NEAR:g}): "
            + ("its attention does not collapse to self (self weight 0.3, another client "
               "weighted more in every round), but " if heuristic else "")
            + "FedAMP as the authors run it keeps each client's own model and pulls it toward "
            "the attentive model u_i only by (fedamp_lam / 2) ||theta - u_i||^2, fedamp_lam "
            f"{lam} (the authors' --fedamp_lam1), too weak to move it far: `{FEDAMP_PULL}` "
            "(digits, 9 clients, 3 rounds of 50 steps, beside Local from one seed) finds "
            "FedAMP's models at most 3 % of Local's distance travelled away from Local's and "
            "every client's accuracy within half a point; at fedamp_lam 1, a third or more "
            "away and 4 or more points lower")


def cfl_note(df, cfgs: dict | None = None) -> str:
    """Whether CFL split in these cells (a run without a split is FedAvg with unweighted
    means), with the norms its criterion compared (the largest client update norm, what eps2
    bounds; the smallest norm of a cluster's mean update, what eps1 bounds) against its
    thresholds (``cfgs``: the cells' configurations). Cells at the authors' thresholds are left
    out of every claim (:func:`left_out`) and it says so; cells at the thresholds declared for
    their setting (:data:`sims.settings.CFL_THRESHOLDS`, the rule of
    :mod:`sims.cfl_thresholds`) are among the baselines, and it says that."""
    if df is None or df.empty or "cfl_clusters" not in df:
        return ""
    cfl = df[df.mechanism == "cfl"]
    c = cfl.groupby("seed").cfl_clusters.max()
    if c.empty:
        return ""
    declared = "param_cfl_eps1" in cfl and cfl.param_cfl_eps1.notna().all()
    norm = cfl.groupby("seed").cfl_max_update_norm.max()
    split = int((c > 1).sum())
    text = (f"CFL split in {split} of {len(c)} runs (largest client update norm "
            f"{norm.min():.2f}-{norm.max():.2f}")
    if "cfl_min_mean_norm" in cfl and cfl.cfl_min_mean_norm.notna().any():
        low = cfl.groupby("seed").cfl_min_mean_norm.min()
        text += f", smallest norm of a cluster's mean update {low.min():.3f}-{low.max():.3f}"
    conf = [cfgs[i] for i in pd.unique(cfl.config_id) if i in cfgs] \
        if cfgs and "config_id" in cfl else []
    eps = sorted({(k["cfl_eps1"], k["cfl_eps2"]) for k in conf
                  if "cfl_eps1" in k and "cfl_eps2" in k})
    if eps and declared:
        text += (", against the split thresholds declared for this setting, " + " / ".join(
            f"eps1 {e1:.3g} and eps2 {e2:.3g}" for e1, e2 in eps) + ": the authors' 2 and 2.5 "
            "where their criterion fires at these norms, else both scaled by the rule fixed in "
            "advance (eps2 the median over a warm-up run's rounds of the largest client update "
            "norm, eps1 / eps2 the authors' 0.8; `python benchmarks/cfl_norms.py`)")
    elif eps:
        text += (", against its split thresholds, the authors' " + " / ".join(
            f"eps1 {e1:g} (the mean update's norm must fall below it) and eps2 {e2:g} (a "
            "client's must exceed it)" for e1, e2 in eps))
    text += ")"
    if declared:
        text += "; CFL is counted among the baselines here"
        if split == 0:
            text += (", though it never split: 'CFL' here is FedAvg with unweighted means")
    elif split == 0:
        text += ("; it never split, so 'CFL' here is FedAvg with unweighted means, scored "
                 "on the clients' trained models: it is left out of the claims (FedAvg is "
                 "there) and runs at the first look's seeds only, to show this")
    else:
        text += "; at the authors' thresholds it is left out of the claims"
    return text


FIG2 = ("iPFL achieves comparable or better accuracy than the baselines and consistently the "
        "highest economic utility (Fig. 2; Fashion-MNIST NIID/Cluster/Skew among nine settings)")


def _liars(frames, cfgs) -> list[Claim]:
    df = frames.get("liars")
    paper = ("a liar's utility falls when it lies: size x0.1 -513.4, x0.5 -9.95, x10 0; "
             "cost x2/x5/x10 0, against 617.3 honest (Table 2, CIFAR-10 NIID)")
    if df is None or df.empty:
        return [_not_run("Table 2 (liars)", paper, "no cells")]
    out = []
    for th, g in df.groupby("thresholds"):
        rows, tests = [], []
        for (kind, factor), h in g.groupby(["kind", "factor"]):
            h = h.set_index("seed")
            rows.append({"kind": kind, "factor": factor,
                         "liar gain from lying (money units)": fmt(h.liar_gain, 2),
                         "honest min utility (money units)": fmt(h.honest_min_utility, 2)})
            tests.append(Test(f"liar's gain, {kind} x {factor:g} (money units)", h.liar_gain,
                              *_m("liar gain"), 2, confirmable=True))
        good = sum(x.verdict == "reproduced" for x in tests)
        out.append(Claim(
            f"Table 2, liars ({th} thresholds)", paper,
            f"lying did not pay in {good} of {len(tests)} misreports (the interval at the "
            "deciding look at or below 0)", setup_of(g, cfgs), tests, table=pd.DataFrame(rows),
            part=th, groups=groups_of(g)))
    return out


_SHORT = {"digits": "digits", "fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10",
          "synthetic": "synthetic data"}


def _by_dataset(df: pd.DataFrame, cfgs: dict):
    """(data set, its cells) per data set a scenario's cells trained on (their configs)."""
    ds = (df.config_id.map(lambda i: cfgs.get(i, {}).get("dataset", "digits"))
          if "config_id" in df else pd.Series("digits", index=df.index))
    return [(d, df[ds == d]) for d in sorted(ds.unique(), key=lambda d: (d != "digits", d))]


def _liars_learning(frames, cfgs) -> list[Claim]:
    df = frames.get("liars-learning")
    paper = ("a liar's utility falls when it lies about its cost or data (Table 2, CIFAR-10 "
             "NIID, with training)")
    name = "Table 2, liars with training"
    if df is None or df.empty or "param_liar_c" not in df:
        return [_not_run(name, paper, "no cells")]
    return [_liars_learning_claim(g, cfgs, f"{name} ({_SHORT.get(d, d)})", paper, d)
            for d, g in _by_dataset(df, cfgs)]


def _liars_learning_claim(df, cfgs, name, paper, part) -> Claim:
    liar = int(df.param_liar.iloc[0]) if "param_liar" in df else 0

    def util(g):
        return g[g.client == liar].groupby("seed").utility.sum()

    truth = util(df[df.param_liar_c == 1.0])  # the other entry's cells have NaN there
    rows, tests, cheap = [], [], _priced(df)
    for col, kind in (("param_liar_c", "cost"), ("param_liar_N", "size")):
        if col not in df:
            continue
        for factor, g in df[df[col].notna() & (df[col] != 1.0)].groupby(col):
            gain = (util(g) - truth.reindex(util(g).index)).dropna()
            rows.append({"misreport": f"{kind} x {factor:g}", "seeds": len(gain),
                         "liar's utility, truthful (money units)":
                             fmt(truth.reindex(gain.index), 1),
                         "gain from lying (money units)": fmt(gain, 1)})
            tests.append(Test(f"liar's gain, {kind} x {factor:g} (money units)", gain,
                              *_m("liar gain"), 1, **cheap))
    good = sum(x.verdict == "reproduced" for x in tests)
    return Claim(name, paper, f"lying did not pay in {good} of {len(tests)} misreports (the "
                 "interval at the deciding look at or below 0)", setup_of(df, cfgs), tests,
                 "the liar's utility is realised at its true cost and data",
                 pd.DataFrame(rows), scenario="liars-learning", part=part,
                 groups=groups_of(df))


def _fig4(frames, cfgs) -> list[Claim]:
    df = frames.get("fig4")
    paper = ("only iPFL reduces the malicious client's utility while keeping the benign "
             "clients' accuracy, under all four attacks (Fig. 4, CIFAR-10 Cluster, 8 benign "
             "clients and one attacker)")
    if df is None or df.empty:
        return [_not_run("Fig. 4, attacks", paper, "no cells")]
    return [_fig4_claim(g, cfgs, f"Fig. 4, attacks ({_SHORT.get(d, d)})", paper, d)
            for d, g in _by_dataset(df, cfgs)]


def _fig4_claim(df, cfgs, name, paper, part) -> Claim:
    rows = []
    for (mech, seed, attack), g in df.groupby(["mechanism", "seed", "param_attack"]):
        last = g[g["round"] == g["round"].max()]
        att = g.role == "attacker"
        rows.append({"mechanism": mech, "seed": seed, "attack": attack,
                     "benign_acc": last[last.role != "attacker"].acc_personalised_best.mean(),
                     "attacker_utility": g[att].utility.sum()})
    r = pd.DataFrame(rows)
    fixed = {m: zero_by_construction(m, [cfgs.get(i, {}) for i in pd.unique(g.config_id)]
                                     if "config_id" in g else [],
                                     r[r.mechanism == m].attacker_utility)
             for m, g in df.groupby("mechanism")}
    before = r[r.attack == "none"].set_index(["mechanism", "seed"])
    table, tests, cheap = [], [], _priced(df)
    for (mech, attack), g in r[r.attack != "none"].groupby(["mechanism", "attack"]):
        g = g.set_index(["mechanism", "seed"])
        d_acc = (g.benign_acc - before.benign_acc.reindex(g.index)).dropna()
        d_util = (g.attacker_utility - before.attacker_utility.reindex(g.index)).dropna()
        if mech == "ipfl":
            tests += [Test(f"{attack}: iPFL's change of attacker utility (money units)",
                           d_util, *_m("fig4 ipfl utility"), 1, **cheap),
                      Test(f"{attack}: iPFL's change of benign best accuracy", d_acc,
                           *_m("fig4 ipfl accuracy"), bounds=DACC, **cheap)]
        else:
            tests.append(Test(f"{attack}: {mech}'s change of attacker utility (money units)",
                              d_util, *_m("fig4 baseline utility"), 1,
                              fixed="0 by construction" if fixed[mech] else ""))
        table.append({"algorithm": mech, "attack": attack,
                      "change of benign best acc": fmt(d_acc, bounds=DACC),
                      "change of attacker utility (money units)": fmt(d_util, 1)})
    zero = sorted(m for m, z in fixed.items() if z)
    only = set(df.mechanism) == {"ipfl"}
    return Claim(name, paper,
                 "see the tests: iPFL's attacker-utility change below 0 and its benign "
                 f"accuracy within {COMPARABLE} under each attack"
                 + ("" if only else ", every baseline's attacker-utility change at or above 0"),
                 setup_of(df, cfgs), tests,
                 "attackers have gain scale K = 0 and cost 0 (reported and true) under every "
                 "attack, as the authors' attack clients: their utility is their net payment"
                 + (f"; {', '.join(zero)} pay nothing (learning.algorithms.UNPAID), so there "
                    "the attacker's utility is 0 in every round whatever it submits: those "
                    "tests cannot fail and are not counted" if zero else "")
                 + ("; only iPFL ran here: the baselines pay nothing, so under them the "
                    "attacker's utility is 0 by construction (not evidence; the digits claim "
                    "shows it)" if only else ""),
                 pd.DataFrame(table), scenario="fig4", part=part, groups=groups_of(df))


def zero_by_construction(mechanism: str, configs, values) -> bool:
    """Whether the attacker's utility under ``mechanism`` is 0 by construction in cells of
    the configurations ``configs`` (dicts of TrainConfig fields): the registry declares the
    algorithm without payments (:attr:`learning.algorithms.Algorithm.pays` False) and every
    cell's attackers are traders, whose types are ``learning.session.ATTACKER_TYPES`` =
    (K, c) = (0, 0). The measured ``values`` (the attacker's utility per cell) must all be
    exactly 0 too: a nonzero one contradicts the declaration, and the test then counts.

    >>> zero_by_construction("fedavg", [{"roles": "traders"}], [0.0, 0.0])
    True
    >>> zero_by_construction("ipfl", [{"roles": "traders"}], [0.0, 0.0])  # a market pays
    False
    >>> zero_by_construction("fedavg", [{"roles": "traders"}], [0.0, 1.5])  # contradicted
    False
    """
    from learning.algorithms import get
    from learning.session import ATTACKER_TYPES

    try:
        alg = get(mechanism)
    except ValueError:  # not an algorithm this toolkit can load: nothing is declared
        return False
    v = np.asarray(list(values), dtype=float)
    return (not alg.pays and ATTACKER_TYPES == (0.0, 0.0) and len(configs) > 0
            and all(c.get("roles", "traders") == "traders" for c in configs)
            and v.size > 0 and bool(np.all(v == 0.0)))


def _fig5(frames, cfgs) -> list[Claim]:
    out = []
    paper = ("in the inclusive market the attacker is isolated, every honest client gains, "
             "buyers pay and sellers earn (Fig. 5, 12 clients, 20 rounds)")
    df = frames.get("inclusive-market")
    if df is not None and not df.empty:
        twins = identical_ledgers(df)
        for mech, r in roles_per_seed(df).groupby("mechanism", sort=True):
            g = df[df.mechanism == mech]
            r = r.set_index("seed")
            att, hmin = r.attacker_earned, r.min_honest_utility
            buy, sell = r.buyer_net_payment, r.seller_net_income
            cheap = {"confirmable": True}  # market-level cells: a confirmation run costs seconds
            tests = [Test("attacker's earnings (money units)", att, *_m("fig5 attacker"), 2,
                          **cheap),
                     Test("smallest honest utility (money units)", hmin, *_m("fig5 honest"),
                          2, **cheap),
                     Test("buyers' net payment (money units)", buy, *_m("fig5 buyers"), 2,
                          **cheap),
                     Test("sellers' net income (money units)", sell, *_m("fig5 sellers"), 2,
                          **cheap)]
            same = twins.get(mech, [])
            out.append(Claim(
                f"Fig. 5, inclusive market ({mech} rule)", paper,
                f"attacker earned {fmt(att, 2)}; min honest utility {fmt(hmin, 2)}; buyers' "
                f"net payment {fmt(buy, 2)}; sellers' net income {fmt(sell, 2)} (money "
                "units; every seed run)", setup_of(g, cfgs), tests,
                (f"every client's ledger, every round and seed, equals the {', '.join(same)} "
                 "rule's: in this market the rules gave the same outcome, so these claims "
                 "are the same evidence, not independent" if same else ""),
                scenario="inclusive-market", groups=groups_of(g)))
    df = frames.get("fig5-learning")
    for d, g in (_by_dataset(df, cfgs) if df is not None and not df.empty else []):
        r = roles_per_seed(g, keys=()).set_index("seed")  # every cell of the data set
        att_sold, hmin = r.attacker_models_sold, r.min_honest_utility
        buy, sell = r.buyer_net_payment, r.seller_net_income
        cheap = _priced(g)
        tests = [Test("models sold by the attacker", att_sold, *_m("fig5 attacker"), 1,
                      **cheap),
                 Test("smallest honest utility (money units)", hmin, *_m("fig5 honest"), 2,
                      **cheap),
                 Test("buyers' payment (money units)", buy, *_m("fig5 buyers"), 2, **cheap),
                 Test("sellers' income (money units)", sell, *_m("fig5 sellers"), 2, **cheap)]
        claim = Claim(
            f"Fig. 5, inclusive market with training ({_SHORT.get(d, d)})", paper,
            f"models sold by the attacker {fmt(att_sold, 1)}; min honest utility "
            f"{fmt(hmin, 2)}; buyers' payment {fmt(buy, 2)}; sellers' income {fmt(sell, 2)} "
            "(money units; every seed run)", setup_of(g, cfgs), tests,
            scenario="fig5-learning", part=d, groups=groups_of(g))
        if tests[0].verdict != "reproduced":
            claim.reason = ("a likely cause of a sold attacker model: the cosine distance (the "
                            "authors' default) is at most 2, so a random model's price lambda "
                            "N_j/N_i d_ij stays bounded and a buyer with a large enough gain "
                            "still buys it; the mechanism-level market uses the squared L2 "
                            "distance, under which it is far")
        out.append(claim)
    return out or [_not_run("Fig. 5", paper, "no cells")]


LEDGER_COLUMNS = ("gain", "cost", "payment", "utility", "earned", "paid", "n_bought",
                  "n_sold")


def identical_ledgers(df: pd.DataFrame) -> dict:
    """{mechanism: the other mechanisms whose every ledger value (per seed, client and round)
    is exactly its own} over the seeds both ran (none in common: not identical).

    >>> f = pd.DataFrame({"mechanism": ["a", "b", "c"], "seed": 0, "client": 0, "round": 0,
    ...                   "utility": [1.0, 1.0, 2.0]})
    >>> identical_ledgers(f)
    {'a': ['b'], 'b': ['a']}
    """
    keys = [k for k in ("seed", "client", "round") if k in df]
    cols = [c for c in LEDGER_COLUMNS if c in df]
    by = {m: g.sort_values(keys).set_index(keys)[cols] for m, g in df.groupby("mechanism")}
    out = {}
    for a, fa in by.items():
        for b, fb in by.items():
            if a != b and cols and len(fa) and fa.index.equals(fb.index) \
                    and np.array_equal(fa.to_numpy(float), fb.to_numpy(float), equal_nan=True):
                out.setdefault(a, []).append(b)
    return out


def _cpl(frames, cfgs) -> list[Claim]:
    df = frames.get("cpl-pricing")
    paper = ("equilibrium pricing gives a better model (lower convergence bound) and higher "
             "client profit than uniform and weighted pricing at the same budget (CPL paper)")
    if df is None or df.empty:
        return [_not_run("CPL pricing", paper, "no cells")]
    per = cpl_per_seed(df).rename(columns={"objective_bound": "bound",
                                           "client_utility_sum": "profit"})
    rows, tests = [], []
    for b, g in per.groupby("budget"):
        w = g.pivot_table(index="seed", columns="mechanism", values=["bound", "profit"])
        for other in ("uniform", "weighted"):
            if "bisection" not in w["bound"] or other not in w["bound"]:
                continue
            db = (100 * (w["bound"][other] - w["bound"]["bisection"])
                  / w["bound"][other].abs()).dropna()
            dp = (w["profit"]["bisection"] - w["profit"][other]).dropna()
            rows.append({"budget (money units)": b, "against": other,
                         "bound reduction vs other (%)": fmt(db, 3, bounds=(-np.inf, 100.0)),
                         "client profit gain, equilibrium - other (money units)":
                             fmt(dp, 2)})
            tests += [Test(f"B {b:g}, bound reduction vs {other} (%)", db, *_m("cpl bound"), 3,
                           (-np.inf, 100.0), confirmable=True),
                      Test(f"B {b:g}, client profit gain vs {other} (money units)", dp,
                           *_m("cpl profit"), 2, confirmable=True)]
    if not rows:
        return [_not_run("CPL pricing", paper, "no pair of equilibrium and posted-price cells")]
    return [Claim("CPL, pricing schemes", paper, "see the tests", setup_of(df, cfgs), tests,
                  "the bound is positive, so a reduction's interval is clipped at 100 %",
                  pd.DataFrame(rows), groups=groups_of(df))]


def _lia(frames, cfgs) -> list[Claim]:
    df = frames.get("lia-vs-oracle")
    paper = ("pFedLIA recovers the Oracle's clusters and matches its accuracy, above FedAvg "
             "and Local (pFedLIA paper)")
    name = "pFedLIA against Oracle, FedAvg and Local"
    if df is None or df.empty:
        return [_not_run(name, paper, "no cells")]
    runs = per_run(df)
    wide = runs.pivot_table(index="seed", columns="mechanism", values="acc_best")
    ari = df[df.mechanism == "lia"].groupby("seed").ari.first() if "ari" in df else []
    d = {o: (wide["lia"] - wide[o]).dropna() for o in ("oracle", "fedavg", "local")
         if "lia" in wide and o in wide}
    cheap = _priced(df)
    tests = [Test("ARI to the true groups", ari, *_m("lia ari"), bounds=DACC, **cheap),
             Test("best accuracy minus Oracle", d.get("oracle", []), *_m("lia oracle"),
                  bounds=DACC, **cheap),
             Test("best accuracy minus FedAvg", d.get("fedavg", []), *_m("lia fedavg"),
                  bounds=DACC, **cheap),
             Test("best accuracy minus Local", d.get("local", []), *_m("lia local"),
                  bounds=DACC, **cheap)]
    return [Claim(name, paper,
                  f"ARI to the true groups {fmt(ari, bounds=DACC)}; best accuracy minus "
                  f"Oracle {fmt(d.get('oracle', []), bounds=DACC)}, minus FedAvg "
                  f"{fmt(d.get('fedavg', []), bounds=DACC)}, minus Local "
                  f"{fmt(d.get('local', []), bounds=DACC)}", setup_of(df, cfgs), tests,
                  "" if tests[3].verdict == "reproduced" else
                  "on this partition every client holds only two classes, so Local is "
                  "already near 100 % and leaves little room", seed_table(runs),
                  groups=groups_of(df))]


def _lambda(frames, cfgs) -> list[Claim]:
    df = frames.get("ipfl-lambda")
    text = ("our finding, not the paper's: with lambda = 0.001 the proximal spring lambda/eta "
            "moves a model about 0.4 % toward its centre per round, so iPFL equals Local")
    name = "iPFL against Local as lambda grows"
    if df is None or df.empty or "local" not in set(df.mechanism):
        return [_not_run(name, text, "no cells (iPFL per lambda and Local in the same setting)")]
    local = per_run(df[df.mechanism == "local"]).set_index("seed").acc_best
    rows = []
    for lam, g in df[df.mechanism == "ipfl"].groupby("param_lam"):
        r = per_run(g).set_index("seed")
        d = (r.acc_best - local.reindex(r.index)).dropna()
        rows.append({"lambda": lam, "iPFL best acc": fmt(r.acc_best, bounds=ACC),
                     "iPFL minus Local": fmt(d, bounds=DACC),
                     "utility per client (money units)": fmt(r.utility, 1)})
    return [Claim(name, text, "see the table", setup_of(df, cfgs),
                  reason="exploratory: no paper claim to compare with",
                  table=pd.DataFrame(rows), fixed="finding", groups=groups_of(df))]


def claims(frames: dict[str, pd.DataFrame], configs: dict | None = None) -> list[Claim]:
    """Every claim evaluated on the frames of a reproduction summary (scenario -> frame);
    ``configs``: config id -> the configuration's fields (for the setups)."""
    c = configs or {}
    frames = {k: f if f is None or "scenario" in f else f.assign(scenario=k)
              for k, f in frames.items()}
    out = [*_of("fig2", _fig2(frames, c, "fig2", "published")),
           *_of("fig2-corrected", _fig2(frames, c, "fig2-corrected", "corrected")),
           *_of("liars", _liars(frames, c)), *_of("liars-learning", _liars_learning(frames, c)),
           *_of("fig4", _fig4(frames, c)), *_fig5(frames, c),
           *_of("cpl-pricing", _cpl(frames, c)), *_of("lia-vs-oracle", _lia(frames, c)),
           *_of("ipfl-lambda", _lambda(frames, c))]
    return out


def _of(scenario: str, built: list[Claim]) -> list[Claim]:
    """The claims ``built`` from ``scenario``'s cells, marked so (its per-round curves)."""
    for c in built:
        c.scenario = c.scenario or scenario
    return built


# ------------------------------------------------------------------------------ the page


def _md(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "---|" * len(df.columns)
    return "\n".join([head, sep, *("| " + " | ".join(map(str, r)) + " |"
                                   for r in df.itertuples(index=False))])


def costs(frames) -> pd.DataFrame:
    """Wall seconds per algorithm-round (training and evaluation) from the learning cells."""
    rows = []
    for name, df in frames.items():
        if "seconds" not in df or "n_rounds" not in df:
            continue
        cells = df.groupby(["mechanism", "cell"]).agg(
            seconds=("seconds", "first"), rounds=("n_rounds", "first"),
            training=("seconds_training", "first"), evaluation=("seconds_evaluation", "first"))
        for mech, g in cells.groupby("mechanism"):
            rows.append({"scenario": name, "algorithm": mech, "cells": len(g),
                         "s per round": f"{(g.seconds / g.rounds).mean():.2f}",
                         "training share": f"{(g.training / g.seconds).mean():.0%}",
                         "evaluation share": f"{(g.evaluation / g.seconds).mean():.0%}"})
    return pd.DataFrame(rows)


def tally(c: Claim) -> str:
    """"k of n" tests reproduced; where some cannot fail, "k of n tests that could fail"."""
    if not c.tests:
        return ""
    live = [x for x in c.tests if x.could_fail]
    k = sum(x.verdict == "reproduced" for x in live)
    if len(live) == len(c.tests):
        return f"{k} of {len(c.tests)}"
    fixed = sorted({x.fixed for x in c.tests if not x.could_fail})
    return (f"{k} of {len(live)} tests that could fail ({len(c.tests) - len(live)} more: "
            f"{', '.join(fixed)}, not evidence)")


def differences() -> pd.DataFrame:
    """Every declared difference from the authors (learning.config): the ``published`` preset's
    switches and what no setting removes."""
    from learning.config import OTHER_DIFFERENCES, PUBLISHED_DIFFERENCES

    rows = [{"what": k, "authors / published preset": _g(v), "ours / why": why}
            for k, v, why in PUBLISHED_DIFFERENCES]
    rows += [{"what": k, "authors / published preset": v, "ours / why": why}
             for k, v, why in OTHER_DIFFERENCES]
    return pd.DataFrame(rows)


# The claims (by the scenario whose cells they read) that the iPFL authors' pipeline's
# differences (:func:`differences`: learning.config's two lists) cover: every claim whose cells
# train with iPFL's code and the authors' baselines
IPFL_TABLE_SCENARIOS = ("fig2", "fig2-corrected", "fig4", "fig5-learning", "liars-learning",
                        "ipfl-lambda")


def _budgets() -> str:
    from .settings import spec

    for e in spec("reduced", (0,))["scenarios"]:
        if e["name"] == "cpl-pricing":
            return ", ".join(f"{b:g}" for b in e["params"]["budget"])
    return "none"


def _full_setting(scenario: str) -> str:
    """What the full setting runs ``scenario`` on, read from :data:`sims.settings.SETTINGS`."""
    from .settings import CIFAR_SCENARIOS, SETTINGS

    full = SETTINGS["full"]
    cfg = full["cifar"] if scenario in CIFAR_SCENARIOS else full["other"]
    name = {"fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10"}.get(cfg["dataset"],
                                                                          cfg["dataset"])
    return f"{name} for {cfg['rounds']} rounds of {cfg['steps']} local steps"


DISTANCE = {"l2sq": "squared L2 distance (l2sq)", "cosine": "cosine distance"}


def claim_differences() -> pd.DataFrame:
    """The differences of each claim from its paper beyond the iPFL pipeline's table
    (:func:`differences`), claim by claim, each checked against the papers' text
    (/work/shared/papers), the specs and, for the iPFL authors' scripts, 19dx/iPFL; our side is
    read from the scenarios' configurations and :data:`sims.settings.SETTINGS` where it is a
    number. Column ``scenarios``: the scenarios whose claims the row covers
    (:func:`declared_differences`)."""
    from learning.algorithms.cfl import AUTHORS_EPS

    from .cpl_game import CplBenchmark
    from .inclusive import InclusiveMarket
    from .scenarios import SCENARIOS, LiarScenario
    from .settings import CFL_THRESHOLDS, CFL_WARMUP_SEED

    lia = SCENARIOS["lia-vs-oracle"].config()
    fig5 = SCENARIOS["fig5-learning"].config()
    liars = SCENARIOS["liars-learning"].config()
    fig4 = SCENARIOS["fig4"].config()
    market, liar = InclusiveMarket(), LiarScenario()
    cpl = CplBenchmark()
    first, cap = LOOKS[0], LOOKS[-1]
    rows = [
        ("CPL", ("cpl-pricing",), "training",
         "the pricing's effect on trained models: multinomial logistic regression on "
         "Synthetic(1,1), MNIST and EMNIST (CPL paper, Section VI; spec cpl.md)",
         "no training: each cell solves the game once for its prices and participation "
         "levels (`sims.cpl_game`); 'a better model' is tested on the convergence bound only"),
        ("CPL", ("cpl-pricing",), "gradient bounds G_n",
         "per client, estimated from the clients' gradient norms in training (spec cpl.md; "
         "Assumption 3 of the CPL paper)",
         f"drawn per client, lognormal with mean {cpl.G:g} and spread {cpl.G_spread:g} "
         "(synthetic: no training to estimate them from)"),
        ("CPL", ("cpl-pricing",), "game and budgets",
         "the MNIST benchmark: 40 clients, c_n 5, v_n ~ Exp(mean 100), alpha 1.82, B 15, and "
         "budget sweeps (their code, spec cpl.md)",
         f"{cpl.clients} clients, c_n {cpl.c:g}, v_n ~ Exp(mean {cpl.v_mean:g}), alpha "
         f"{cpl.alpha:g} (their stored MNIST value, not estimated); budgets {_budgets()}"),
        ("CPL", ("cpl-pricing",), "repetitions",
         "each experiment averaged over 20 independent runs (CPL paper, Section VI)",
         f"independent seeds by the sequential rule, {first} to {cap}, and, for a test still "
         f"inconclusive at the cap, a confirmation run on {CONFIRM} fresh seeds (a seed draws "
         "the clients' sizes, values and bounds)"),
        ("pFedLIA", ("lia-vs-oracle",), "clients",
         "32 clients, each holding 2 of 8 classes (4 groups; pFedLIA paper, Fig. 3b)",
         f"{lia.clients} clients on {lia.dataset}, each holding 2 classes ({lia.n_clusters} "
         f"groups, classes 0-{2 * lia.n_clusters - 1}): a smaller synthetic check"),
        ("pFedLIA", ("lia-vs-oracle",), "warm-up",
         "a FedAvg warm-up before clustering (20 rounds on CIFAR-100; pFedLIA paper, Fig. 4)",
         f"{lia.lia_warmup} FedAvg warm-up rounds of the {lia.rounds}, counted in the rounds "
         "(the setup line names them)"),
        ("pFedLIA", ("lia-vs-oracle",), "lazy influence steps",
         "each client takes 'a few local epochs' (e.g. 5-20) from the joint model on a batch "
         "of its data for the scores (pFedLIA paper, Fig. 2)",
         f"{lia.lia_k} extra SGD steps per client on one fixed batch, once, for the clustering "
         f"(not among the {lia.steps} local steps of a round)"),
        ("Fig. 5 with training", ("fig5-learning",), "lambda and K",
         "lambda 1, K 5e7 (their run script run_scripts/run_cifar10_playground.sh, 19dx/iPFL)",
         f"lambda {fig5.lam:g} and K {fig5.K:g}, the paper's CIFAR-10 Cluster values (spec "
         "ipfl.md) that the mechanism-level market also uses"),
        ("Fig. 5 with training", ("fig5-learning",), "data and clients",
         "the paper: CIFAR-10 Cluster, 12 clients, 20 rounds; their run script: NIID (beta 1), "
         "10 clients, 200 local iterations",
         f"{fig5.clients} clients, {fig5.partition} partition, on {fig5.dataset} and on "
         f"Fashion-MNIST (reduced); in the full setting on {_full_setting('fig5-learning')}, "
         "not CIFAR-10 for 20 rounds"),
        ("Fig. 5 (mechanism level)", ("inclusive-market",), "models and distance",
         "trained models (CIFAR-10 Cluster, 12 clients, 20 rounds); the authors' default "
         "distance is cosine",
         f"no training: each round every honest client uploads synthetic parameters "
         f"({market.n_params:,}, simplecnn-mnist's size: a round model plus its cluster's "
         f"offset plus noise, `sims.inclusive`), the attacker's replaced by the "
         f"'{market.attack}' attack; the {DISTANCE.get(market.metric, market.metric)}, lambda "
         f"{market.lam:g}, K {market.K:g}"),
        ("Table 2 (mechanism level)", ("liars",), "training",
         "with training on CIFAR-10 NIID: the liar's accuracy and utility",
         f"no training: the Fig. 5 market (synthetic uploads of {liar.n_params:,} parameters, "
         f"{liar.rounds} rounds), trader {liar.liar} lying; its true utility when lying minus "
         "its utility in the truthful run of the same seed (the claim with training trains)"),
        ("Table 2 with training", ("liars-learning",), "data and clients",
         "CIFAR-10 NIID (paper, Table 2)",
         f"{liars.clients} clients, {liars.partition} partition, client {max(liars.liar, 0)} the "
         f"liar, on {liars.dataset} and on Fashion-MNIST (reduced); in the full setting on "
         f"{_full_setting('liars-learning')}"),
        ("Fig. 4", ("fig4",), "data and clients",
         "CIFAR-10 Cluster, 8 benign clients and one attacker (paper, Fig. 4)",
         f"{fig4.clients} clients (one attacker), {fig4.partition} partition, on "
         f"{fig4.dataset} and on Fashion-MNIST (reduced); in the full setting on "
         f"{_full_setting('fig4')}"),
        ("Fig. 4", ("fig4",), "baselines on Fashion-MNIST", "every baseline under every attack",
         "on Fashion-MNIST (reduced) only iPFL runs: the baselines pay nothing, so the "
         "attacker's utility under them is 0 by construction (the digits claim runs them)"),
        ("Fig. 2", ("fig2",), "CFL's split thresholds",
         f"eps1 {AUTHORS_EPS[0]:g}, eps2 {AUTHORS_EPS[1]:g} (the iPFL authors' CFL, "
         "utils/algorithms/cfl_utils.py; the CFL authors' notebook: 0.4 and 1.6), in their "
         "setting of 200 local steps a round",
         "at the reduced setting's update norms (Fashion-MNIST, 8 rounds of 10 steps: largest "
         "client update norm 0.16-1.12) the authors' never fire, and CFL would be FedAvg with "
         "unweighted means; so both are scaled by the rule fixed in advance (sims.cfl_thresholds: "
         "eps2 the median over a warm-up run's rounds, seed "
         f"{CFL_WARMUP_SEED}, of the largest client update norm, eps1 / eps2 the authors' "
         f"{AUTHORS_EPS[0] / AUTHORS_EPS[1]:g}; `python benchmarks/cfl_norms.py --setting "
         "reduced`): " + "; ".join(
             f"{part} eps1 {e[0]:.3g}, eps2 {e[1]:.3g}" for (st, part), e
             in sorted(CFL_THRESHOLDS.items()) if st == "reduced")
         + ", where it splits and is counted among the baselines. The norms grow over the 8 "
         "rounds (the federation is not near the stationary point CFL's criterion looks for), "
         "so with eps2 at their median the first split comes midway (round 4 of 0-7 in each "
         "warm-up), on early updates; on digits the authors' "
         "fire (in round 0) and stand; medium and full: the authors', not measured, CFL left "
         "out of the claims there"),
        ("Fig. 4", ("fig4",), "CFL", "CFL among the four baselines",
         "on digits at the authors' thresholds, where its criterion fires (seeds 0-2: every "
         "run split into 2-4 clusters but under the gaussian attack, whose upload keeps the "
         "mean update's norm near 7.7, above eps1); not in the Fashion-MNIST repeat (iPFL "
         "alone), nor in the medium and full settings (its norms there not measured)"),
    ]
    return pd.DataFrame([(c, w, a, o, sc) for c, sc, w, a, o in rows],
                        columns=["claim", "what", "authors", "ours / why", "scenarios"])


def declared_differences(c: Claim, table: pd.DataFrame | None = None) -> list[str]:
    """Where the page declares the claim's differences from its paper: the iPFL pipeline's
    table (for a claim whose cells train with it, :data:`IPFL_TABLE_SCENARIOS`) and the rows
    of :func:`claim_differences` (``table``) covering its scenario; empty when none does."""
    table = claim_differences() if table is None else table
    out = []
    if c.scenario in IPFL_TABLE_SCENARIOS:
        out.append(f"the iPFL pipeline's table ({len(differences())} rows)")
    rows = table[[c.scenario in sc for sc in table["scenarios"]]]
    out += [f"{r.claim}: {r.what}" for r in rows.itertuples(index=False)]
    return out


def differences_line(c: Claim, table: pd.DataFrame | None = None) -> str:
    """The claim section's line naming its declared differences (``declared_differences``);
    none for a claim that read no cells (not run: no scenario)."""
    if not c.scenario:
        return ""
    d = declared_differences(c, table)
    return ("*Differences from the authors (declared above):* " + "; ".join(d) + "."
            if d else "*Differences from the authors:* **none declared**.")


# What the papers report that no claim here tests, and why (the page's section); each item
# checked against the papers' text (/work/shared/papers)
NOT_REPRODUCED = (
    ("iPFL Fig. 2", "6 of its 9 settings: CIFAR-10 NIID, Cluster and Skew; PACS (Cluster); "
     "FEMNIST; Shakespeare",
     "Fig. 2 runs on Fashion-MNIST only (every setting); PACS, FEMNIST and Shakespeare have no "
     "loader here, and CIFAR-10's Fig. 2 would need the full setting's scale for 81 cells a "
     "seed"),
    ("iPFL Fig. 2", "the size of iPFL's lead (e.g. 'outperforms FedAMP by 1.75 %')",
     "the claim tested is the paper's 'comparable or better': iPFL's best accuracy within 2 "
     "points of the best baseline's, and a higher utility"),
    ("iPFL Fig. 3", "each client's utility positive under iPFL (CIFAR-10 Cluster, PACS, "
     "Fashion-MNIST NIID), against 7 baselines",
     "not stated as a test; the Fashion-MNIST NIID cells hold every client's utility "
     "(`reproduction_cells.csv`)"),
    ("iPFL Table 1", "the LLM market: instruction tuning of Mistral 7B, TinyLlama 1.1B and "
     "Llama2 7B (Mix-Finance, Code&Finance)",
     "needs LLM fine-tuning on GPUs and the instruction data sets: out of this toolkit's "
     "scope"),
    ("iPFL Table 2", "the liar's accuracy (lower or the same when it lies)",
     "not tested: the claims test the liar's utility, what the market decides; the cells "
     "with training hold every client's accuracy (`reproduction_cells.csv`)"),
    ("iPFL Fig. 4, Table 2 with training", "on CIFAR-10",
     "on digits and Fashion-MNIST here; CIFAR-10 only in the full setting (not run: see the "
     "costs)"),
    ("CPL", "the pricing's effect on trained models, and the impact of the system parameters "
     "(its other two setups)", "only the pricing comparison at three budgets, on the bound"),
    ("pFedLIA", "CIFAR-100 (up to 17 % over baselines), the Nordic next-word task (GPT-2), "
     "LIA's 40-500x speed-up over exact influence",
     "only the synthetic clustering check (digits, 2 classes a client); the speed-up is "
     "measured by benchmarks/bench_lia.py, not on this page"),
)


def _more(c: Claim) -> str:
    if c.next_look is not None:
        return f"next look: {c.next_look}"
    return "none: at the cap" if c.verdict == "inconclusive" else ""


def inconclusive_lines(cl: list[Claim]) -> list[str]:
    """The page's account of every inconclusive claim: the seeds it used and, at the cap, why
    more seeds would not help (each undecided test's mean and spread against its margin, and
    the claim's own note); one still short of the cap is pending, with its next look."""
    rows = []
    for c in cl:
        if c.verdict != "inconclusive":
            continue
        open_ = [t for t in c.tests if t.could_fail and t.verdict == "inconclusive"]
        why = "; ".join(f"{t.label}: {t.row()['ours (mean [interval at the look])']} against "
                        f"{t.side} {t.margin:g}, {t.more_seeds()}" for t in open_)
        rows.append(f"- **{c.name}** ({'pending, ' + _more(c) if c.next_look else 'at the cap'}"
                    f"; seeds used {c.seeds_used()}): {why}"
                    + (f". {_sentence(c.reason)}" if c.reason else "") + ".")
    if not rows:
        return []
    return ["## Inconclusive claims", "",
            "Each inconclusive claim, the seeds it used and its undecided tests. At the cap "
            f"({LOOKS[-1]} seeds) the rule, fixed in advance, adds no seed: looking again "
            "would spend error the design does not have. How far a test is from deciding is "
            "the number of seeds a fresh, separately declared fixed 95 % interval would need "
            "at the observed mean and spread: many more than the cap where the mean sits on or "
            "near the margin (more seeds would not help), about the cap where a new run could "
            "decide it.", "",
            *rows, ""]


def _wall_over_cpu(frames: dict, bench: Path | None) -> tuple[float, float, int] | None:
    """How much slower Fig. 2's stored cells ran per round, on the wall clock, than the cost
    benchmark's CPU clock per round of the same algorithms at the same sizes (``bench``: its
    file, :data:`COSTS`): (smallest, largest ratio, algorithms compared); None without both."""
    import json

    df = frames.get("fig2")
    if bench is None or not Path(bench).is_file() or df is None or "seconds" not in df:
        return None
    b = json.loads(Path(bench).read_text())
    st = b.get("setting", {})
    cpu = {r["algorithm"]: r["lockstep s/round"] for r in b.get("rows", [])}
    keep = pd.Series(True, index=df.index)
    for k in ("dataset", "clients", "steps", "batch", "test_subsample", "train_subsample"):
        if k not in st or f"param_{k}" not in df:
            return None  # the cells do not say their size: not comparable
        col = df[f"param_{k}"]
        keep &= (col == st[k]) if isinstance(st[k], str) else np.isclose(
            pd.to_numeric(col, errors="coerce"), float(st[k]))
    cells = df[keep].groupby("cell").agg(mechanism=("mechanism", "first"),
                                         seconds=("seconds", "first"),
                                         rounds=("n_rounds", "first"))
    ratios = [(g.seconds / g.rounds).mean() / cpu[m]
              for m, g in cells.groupby("mechanism") if m in cpu and cpu[m] > 0]
    return (min(ratios), max(ratios), len(ratios)) if ratios else None


def cost_lines(frames: dict, configs: dict, setting: str, bench: Path | None = None
               ) -> list[str]:
    """The page's CPU-hours: this summary's cells as measured, and one seed of every setting
    priced at the rates measured from its cells (:mod:`sims.costs`), on the CPU clock where
    its learning cells carry one, else on their own wall clock, said to be an upper bound and
    set against the cost benchmark's CPU clock (``bench``)."""
    from .costs import clock_of, estimate, measured, rates

    clock = clock_of(frames)
    m = measured(frames)
    if m.empty or clock is None:
        return []
    r = rates(frames, configs, clock)
    unit = "CPU-hours" if clock == "cpu" else "wall hours (upper bound of CPU-hours)"
    first, cap = LOOKS[0], LOOKS[-1]
    rows = []
    for name in ("reduced", "digits", "medium", "full"):
        e = estimate(name, frames, configs, clock=clock)
        rows.append({"setting": name, "learning cells a seed": e["cells"],
                     f"{unit} a seed": f"{e['hours']:.1f}",
                     f"first look, {first} seeds": f"{first * e['hours']:.1f}",
                     f"cap, {cap} seeds": f"{cap * e['hours']:.1f}",
                     "priced at": f"{e['priced']} own rate, {e['proxy']} Fashion-MNIST's, "
                                  f"{e['unpriced']} none"})
    timed = int(m["cells with a CPU clock"].sum())
    lines = ["## CPU-hours per setting", "",
             "Measured from the cells' own timings (`sims.costs`): of the "
             f"{int(m['cells'].sum())} cells of this page, the "
             f"{int(m['cells with a wall time'].sum())} that stored their wall time took "
             f"{m['wall hours'].sum():.2f} wall hours (one math thread a cell, on a 2-core "
             "host shared with other jobs; the others, mechanism-level, carry none in this "
             "summary); "
             + (f"{timed} learning cells carry their process's CPU clock, "
                f"{m['CPU-hours'].sum():.2f} CPU-hours:" if timed else
                "none carries a CPU clock (they were computed before `learning.runner` "
                "recorded one, `seconds_cpu`):"), "",
             _md(m.assign(**{"CPU-hours": m["CPU-hours"].map("{:.3f}".format),
                             "wall hours": m["wall hours"].map("{:.3f}".format)})), ""]
    if clock == "cpu":
        lines += ["Each setting's learning cells for one seed, priced at the CPU seconds per "
                  "client and local step and per client and test image measured here (per "
                  "data set and algorithm, from the cells' CPU time split by their training "
                  f"and evaluation shares: {len(r)} rates)"]
    else:
        ratio = _wall_over_cpu(frames, bench)
        lines += ["Each setting's learning cells for one seed, priced at the wall seconds per "
                  "client and local step and per client and test image these cells took "
                  f"(per data set and algorithm, their training and evaluation seconds: "
                  f"{len(r)} rates). Wall time is an upper bound of a one-thread cell's CPU "
                  "time, and a loose one on a loaded host"
                  + (f": Fig. 2's stored cells took {ratio[0]:.0f} to {ratio[1]:.0f} times "
                     "the CPU seconds per round that the cost benchmark below measures for the "
                     f"same {ratio[2]} algorithms at the same sizes (its best round after the "
                     "first, evaluating every round; these cells evaluate every second "
                     "round), so read these hours as an upper bound, by that measure an order "
                     "of magnitude or more above the CPU-hours" if ratio else "")
                  + "; cells run now record their CPU clock, and a page whose learning cells "
                  "all carry it is priced on it"]
    lines[-1] += ("; a cell on a data set not measured here is priced at its algorithm's "
                  "Fashion-MNIST rate (CIFAR-10's model is larger: low). The sequential rule "
                  f"runs {first} to {cap} seeds a claim:")
    return [*lines, "", _md(pd.DataFrame(rows)), ""]


def _sentence(text: str) -> str:
    """``text`` as a sentence: its first letter upper case, but for a name that starts lower
    case ("iPFL equals Local here" stays so).

    >>> _sentence("it never split"), _sentence("iPFL equals Local here")
    ('It never split', 'iPFL equals Local here')
    """
    if text[:1].islower() and text[1:2].isupper():
        return text
    return text[:1].upper() + text[1:]


def write_page(summary, page, *, figures: bool = True) -> Path:
    """Evaluate every claim on a reproduction summary (:class:`sims.summary.Summary` or the
    folder holding its files, and the cost benchmark's file) and write the Markdown page (and
    its figures next to it)."""
    from . import summary as summary_mod

    s = summary if isinstance(summary, summary_mod.Summary) else summary_mod.read(summary)
    page = Path(page)
    inputs = page.parent if isinstance(summary, summary_mod.Summary) else Path(summary)
    page.parent.mkdir(parents=True, exist_ok=True)
    frames, meta = s.cells, s.meta
    cl = claims(frames, s.configs)
    figs = _round_figures(s.rounds, page.parent) if figures else {}
    done, expected = meta.get("done", {}), meta.get("expected", {})
    pending = {k: expected[k] - done.get(k, 0) for k in expected
               if expected[k] > done.get(k, 0)}
    versions = meta.get("code_versions", {})
    lines = [
        "# Reproducing the seed papers", "",
        f"Generated by `{meta.get('command', 'fedmarket reproduce')}` (resumable: rerun to "
        "continue; `--no-run` rewrites this page from the committed per-cell summary next to "
        f"it, {', '.join(f'`{f}`' for f in summary_mod.FILES)}, without the store). Each "
        "test's verdict is the sequential rule's (the verdict rule below): its interval is "
        "the one at the look that decided it, over the seeds that look used; every other "
        "number (the 'Ours' lines and the tables beside the tests) is the mean and Student's "
        "t 95 % interval over every seed run, descriptive. Each seed is one run; the spread "
        "over clients is shown separately and labelled. Money (utility, gain, payment, cost, "
        "earnings, budget) is in the market's money units, the unit of the gain function's "
        "scale K; utilities are summed over a run's rounds. 'Best acc' is each client's best "
        "personalised test accuracy over the rounds, as the iPFL authors report it; "
        "'last-round acc' is the last round's. Intervals of an accuracy are clipped to [0, 1], "
        "of a difference of accuracies to [-1, 1].", "",
        *([ROUNDS_TEXT, ""] if figures else []),
        "## Which cells, which code", "",
        f"{meta.get('cells', 0)} cells of the {sum(expected.values())} this setting asks for "
        f"are in the summary, computed by {len(versions)} version(s) of the code (a cell's "
        "`code` column in the summary; `--recompute-stale` recomputes cells of older code):",
        "",
        _md(pd.DataFrame([{"code version": k, "cells": v} for k, v in versions.items()]))
        if versions else "(none)", "",
        *([f"{meta['merged']['taken']} of them taken from an earlier run's summary "
           f"(`--with-summary`), after the {meta['merged']['compared']} cells computed both "
           "there and here agreed in every result column (`sims.summary.merge`); the code "
           "versions above say which code computed each.", ""]
          if meta.get("merged", {}).get("taken") else [])]
    if pending:
        lines += ["**Pending** (not computed yet; their claims read 'not run' or use the seeds "
                  "done): " + ", ".join(f"{k} {v} of {expected[k]}"
                                        for k, v in sorted(pending.items())) + ".", ""]
    lines += ["## Setting", "", setting_text(meta.get("setting", "reduced")), "",
              "## Differences from the authors", "",
              "Every difference from the iPFL authors' pipeline (their paper and code, "
              "19dx/iPFL) we know of, for every claim with training (Fig. 2, 4, 5, Table 2 "
              "and the lambda finding). The `published` preset switches on the first group "
              "(`learning.config.PUBLISHED_DIFFERENCES`); the second "
              "(`learning.config.OTHER_DIFFERENCES`) holds in every setting:", "",
              _md(differences()), "",
              "The other claims' differences, claim by claim (`sims.claims.claim_differences`"
              "; the scale of each claim is in its setup line):", "",
              _md(claim_differences().drop(columns="scenarios")), "",
              "## What the papers report that is not reproduced here", "",
              _md(pd.DataFrame(list(NOT_REPRODUCED), columns=["paper", "what", "why not"])),
              "",
              "## Schedule", "",
              "Every algorithm runs one schedule (`learning.algorithms.SCHEDULE`, the authors' "
              "main loop): each round, local training, then evaluation, then aggregation (or "
              "the market's clearing); R rounds are R trainings and R ledgers, the last "
              "included. The models scored are the trained ones, before aggregation, except "
              "where the algorithm's model is the server's aggregate (FedAvg, FedProx, CPL, "
              "pFedLIA, Oracle). Ditto trains two models per round (personal and global). "
              "`tests/test_schedule.py` checks every registered algorithm against this.", "",
              "## Verdict rule", "", RULE, "",
              _md(pd.DataFrame([{"claim": c, "test (per seed)": q, "claimed": f"{s} {m:g}"}
                                for c, q, s, m in MARGINS.values()])), "",
              *design_lines(),
              "## Verdicts", "",
              "'Seeds used': the seeds of the looks that decided its tests (a range where "
              "they differ); 'more seeds': the next look of a claim still undecided, or 'none' "
              "for one inconclusive at the cap (why: its section below).", "",
              _md(pd.DataFrame([{"claim": c.name, "verdict": c.verdict,
                                 "tests reproduced": tally(c), "seeds used": c.seeds_used(),
                                 "more seeds": _more(c), "note": c.note} for c in cl])), "",
              *inconclusive_lines(cl)]
    table = claim_differences()
    for c in cl:
        lines += [f"## {c.name}", "", f"*Paper:* {c.paper}.", ""]
        if c.ours:
            lines += [f"*Ours:* {c.ours}.", ""]
        if c.setup:
            lines += [f"*Setup (from the cells' configurations):* {c.setup}.", ""]
        if differences_line(c, table):
            lines += [differences_line(c, table), ""]
        lines += [f"*Verdict:* **{c.verdict}**" + (f" ({c.reason})." if c.reason else ".")
                  + (f" {_sentence(c.note)}." if c.note else ""), ""]
        if c.tests:
            lines += [_md(pd.DataFrame(c.rows())), ""]
        if c.table is not None and not c.table.empty:
            lines += [_md(c.table), ""]
        if figures:
            lines += round_curves(c, frames, figs)
    if meta.get("setting") != "medium":
        lines += scale_section(cl, inputs / MEDIUM_FOLDER)
    lines += cost_lines(frames, s.configs, meta.get("setting", "reduced"), inputs / COSTS)
    cost = costs(frames)
    if not cost.empty:
        lines += ["## Time per algorithm-round in the stored cells", "",
                  "Wall seconds per algorithm-round in the cells above (lockstep training; a "
                  "shared, loaded machine, so read the ratios rather than the absolutes):", "",
                  _md(cost), ""]
    lines += _bench_costs(inputs / COSTS)
    write_atomic(page, lambda tmp: tmp.write_text("\n".join(lines) + "\n"))
    return page


ROUNDS_TEXT = (
    "Each claim's *per-round curves* (from `reproduction_rounds.csv`) are the mean over "
    "clients per round (band: 95 % interval over seeds) of the personalised test accuracy "
    "(cells with training), the utility summed over the rounds so far, and the number of "
    "others' models a client used (bought or aggregated), one line per algorithm or rule; "
    "Fig. 5's are per role (attacker, buyer, seller, trader: the mean over that role's "
    "clients) and add the models each role sold, so that the attacker's curves stand apart "
    "from the honest clients' (a row of panels per algorithm or rule), and so are Fig. 4's "
    "(attacker and trader, the benign clients; a figure per attack, 'none' the attacker "
    "client behaving honestly); Table 2's liars "
    "(mechanism level) show the liar's utility summed so far and per round, in the truthful "
    "run and with each misreport; a claim whose cells store no rounds says so in their place.")
ROUNDS_HEAD = "*Per-round curves:*"
# why a scenario's cells store no rounds, where they do not (the page's note in the curves'
# place; which cells lack rounds is read from the summary, not from this table)
NO_ROUNDS = {
    "liars": "each cell runs the market twice, truthfully and with the misreport, and these "
             "cells, computed before per-round rows were stored, hold one row, the liar's "
             "utility summed over those rounds (recompute them: `--recompute-stale`)",
    "cpl-pricing": "each cell solves the CPL game once at one budget (the server's prices "
                   "and the clients' participation levels; `sims.cpl_game.CplBenchmark`)",
}


def round_curves(c: Claim, cells: dict, figs: dict) -> list[str]:
    """The page's lines in a claim's per-round curves' place: its figure (``figs``: (scenario,
    part) -> (title, path), from :func:`_round_figures`); where its cells (``cells``: the
    summary's per-cell frames) store no rounds, a one-shot note saying why (:data:`NO_ROUNDS`);
    where they do but the summary holds no per-round rows of them, that they are missing."""
    # its part's figure, or every figure of its part (Fig. 4: one per attack), or, for a
    # claim over every part of its scenario, every figure of the scenario
    found = [f for (name, p), f in sorted(figs.items()) if name == c.scenario
             and (not c.part or p in ("", c.part) or p.startswith(f"{c.part}_"))]
    if found:
        return [ROUNDS_HEAD, "", *(x for title, path in found
                                   for x in (f"![{title}]({path.name})", ""))]
    df = cells.get(c.scenario)
    if df is None or df.empty:
        return [f"{ROUNDS_HEAD} none: no cells ran.", ""]
    if "n_rounds" in df and df["n_rounds"].notna().any():
        return [f"{ROUNDS_HEAD} **missing**: these cells ran rounds, but the summary holds no "
                "per-round rows of them (`reproduction_rounds.csv`); rebuild it from the store "
                "(`fedmarket reproduce --no-run`).", ""]
    why = NO_ROUNDS.get(c.scenario, "its cells store one result each")
    return [f"{ROUNDS_HEAD} none: one-shot, no rounds in its cells' rows: {why}.", ""]


COSTS = "reproduction_costs.json"  # next to the page: the cost benchmark's figures


def _bench_costs(path: Path) -> list[str]:
    """The benchmark of a reproduction's cost (benchmarks/bench_learning.py --costs FILE),
    when it wrote FILE next to the page (``COSTS``)."""
    import json

    if not path.is_file():
        return []
    b = json.loads(path.read_text())
    st = b["setting"]
    ev = b.get("evaluation_s", {})
    lines = ["## What a reproduction costs: lockstep vs sequential", "",
             f"Measured by `{b.get('command', 'python benchmarks/bench_learning.py --costs')}` "
             f"({b['when']}, {b['threads']} math thread, {b['cpus']} CPUs shared with other "
             f"jobs): CPU seconds of the one-thread process (other jobs do not inflate it; "
             "on an idle machine it is the wall time) per round of each Fig. 2 algorithm "
             "on Fashion-MNIST with "
             f"{st['model']} in this page's reduced setting ({st['clients']} clients, "
             f"{st['steps']} local steps of batch {st['batch']}, {st['test_subsample']:,} test "
             "images, evaluation every round), the best of the rounds after the first, "
             "training all clients at once (lockstep, vmap) and one after the other "
             "(sequential), side by side in one run; the evaluation share is one round's "
             "evaluation (test sets and validation splits) over a lockstep round.", "",
             _md(pd.DataFrame(b["rows"]).assign(**{
                 "evaluation share": lambda d: d["evaluation share"].map("{:.0%}".format)})
                 [["algorithm", "lockstep s/round", "sequential s/round",
                   "sequential / lockstep", "evaluation share"]]),
             ""]
    if ev:
        loop = ev.get("loop over clients")
        lines += ["Evaluation of the 10 clients' models in the same run (global test subsample "
                  "and own splits), CPU seconds, best of 3: "
                  + "; ".join(f"{k} {v:.3f} s" + (f" ({loop / v:.1f}x the loop)" if loop
                                                   else "") for k, v in ev.items()) + ".", ""]
    return lines


MEDIUM_FOLDER = "medium"  # the medium setting's summary: this subfolder next to the page


def scale_section(reduced: list[Claim], folder) -> list[str]:
    """The page's section comparing the reduced and medium verdicts of every claim the medium
    setting's summary in ``folder`` holds (``fedmarket reproduce --setting medium --docs
    <folder>/reproduction.md`` writes it); no section without that summary. Only the cells
    run count, each claim decided by the same sequential rule (fewer than its first look's
    seeds: inconclusive)."""
    from . import summary as summary_mod

    folder = Path(folder)
    if not all((folder / f).is_file() for f in summary_mod.FILES):
        return []
    ms = summary_mod.read(folder)
    medium = {c.name: c for c in claims(ms.cells, ms.configs) if c.tests}
    rows = []
    for c in reduced:
        m = medium.get(c.name)
        if m is None:
            continue
        rows.append({"claim": c.name, "reduced": c.verdict, "medium": m.verdict,
                     "medium seeds used": m.seeds_used(), "medium note": m.note,
                     **{f"medium: {t.label}": t.row()["ours (mean [interval at the look])"]
                        for t in m.tests if c.name.startswith("Fig. 2,")}})
    done, expected = ms.meta.get("done", {}), ms.meta.get("expected", {})
    return ["## Scale: reduced vs medium", "",
            "The claims again at a larger scale (`fedmarket reproduce --setting medium`; "
            "`sims.reproduce.MEDIUM`): all 60,000 Fashion-MNIST training and 10,000 test "
            "images, 20 rounds of 50 local steps; Fig. 2 on iPFL, Local, FedAvg and the reduced "
            "setting's best baseline per partition (`sims.reproduce.MEDIUM_ALGORITHMS`), so "
            "'best baseline' there is the best of those three. The medium setting has every "
            "learning claim; this table has those of its cells actually run ("
            + ", ".join(f"{k} {done.get(k, 0)} of {v}" for k, v in sorted(expected.items()))
            + f"; summary in `{MEDIUM_FOLDER}/`), each decided by the sequential rule.", "",
            _md(pd.DataFrame(rows).fillna("")) if rows else "(no claim with medium cells)", ""]


def setting_text(setting: str) -> str:
    """What the setting is, in general; each claim's exact setup is generated from its cells'
    configurations."""
    text = {"reduced": "Reduced to fit a shared 2-core machine: Fig. 2 (published setup) on "
                       "real Fashion-MNIST with simplecnn-mnist, the paper's data set and "
                       "model, smaller in data, rounds and local steps, at the paper's lambda "
                       "and again with iPFL at lambda 2, where its pull moves the models; the "
                       "other learning claims on scikit-learn digits, and Fig. 4, Fig. 5 and "
                       "Table 2 with training again on Fashion-MNIST at Fig. 2's reduced "
                       "sizes. ",
            "digits": "Reduced to fit a shared 2-core machine: every learning claim on "
                      "scikit-learn digits. ",
            "full": "The paper's sizes, 50 rounds of 200 local steps, for every learning claim "
                    "but pFedLIA's: Fig. 4 and Table 2 with training on CIFAR-10 (the paper's "
                    "data set for both), Fig. 2, Fig. 5 with training, the lambda sweep and "
                    "Fig. 2 with corrected defaults on Fashion-MNIST; pFedLIA against Oracle "
                    "stays on scikit-learn digits at its reduced size. ",
            "medium": "Every learning claim at a scale between the reduced setting and the "
                      "paper's: all 60,000 Fashion-MNIST training images, 20 rounds of 50 "
                      "local steps; Fig. 2 on iPFL, Local, FedAvg and the reduced setting's "
                      "best baseline per partition; pFedLIA at its reduced size. "}.get(setting, "")
    return text + ("Each claim's setup line below is generated from the configurations its "
                   "cells ran (every field, from the summary's sidecar), not written by hand.")


# the scenarios whose claims are about roles (Fig. 5: the attacker isolated, honest clients
# gaining, buyers paying, sellers earning; Fig. 4: the attacker's utility against the benign
# clients' accuracy): their figures draw one line per role (a row of panels per algorithm or
# rule) from the summary's per-role rows, with the models each role sold; every other figure
# draws the means over all clients
BY_ROLE = ("fig4", "inclusive-market", "fig5-learning")
# a figure per value of these parameters (Fig. 2's per partition, Table 2's liars per
# thresholds, Fig. 4's per data set and attack, Fig. 5's and Table 2's with training per data
# set): (column, prefix on the figure's title, the value of cells that do not set it)
SPLIT = {"fig2": (("param_partition", "", None),),
         "fig2-corrected": (("param_partition", "", None),),
         "liars": (("param_thresholds", "", None),),
         "fig4": (("param_dataset", "", "digits"), ("param_attack", "attack ", None)),
         "fig5-learning": (("param_dataset", "", "digits"),),
         "liars-learning": (("param_dataset", "", "digits"),)}


def figure_parts(name: str, df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per row of a scenario's frame (per-cell or per-round rows): the part of its figure's
    file name (``reproduction_rounds_<name>_<part>.svg``; "" for one figure) and of its title,
    by :data:`SPLIT` (a parameter the frame lacks and has no default for splits nothing)."""
    names = pd.Series("", index=df.index)
    titles = pd.Series("", index=df.index)
    for c, pre, dflt in SPLIT.get(name, ()):
        if c not in df and dflt is None:
            continue
        col = (df[c] if c in df else pd.Series(np.nan, index=df.index, dtype=object))
        col = (col.astype(object).where(col.notna(), dflt) if dflt is not None else col)
        col = col.map(str)
        names = col.where(names == "", names + "_" + col)
        titles = (pre + col).where(titles == "", titles + ", " + pre + col)
    return names, titles


def _round_figures(rounds: dict, folder: Path) -> dict:
    """One figure per scenario's cells with rounds (Fig. 2 per partition), keyed (scenario,
    partition or ""), each (title, path): accuracy (where the cells have it), cumulative
    utility and models used by round, one line per algorithm (and swept parameter); for a
    scenario of :data:`BY_ROLE`, one row of panels per algorithm, one line per role, and the
    models sold."""
    if not rounds:
        return {}
    import matplotlib

    matplotlib.use("Agg")
    from .plots import pyplot
    plt = pyplot()

    from .plots import plot_accuracy_by_round
    from .summary import ALL

    # the same figure, the same file: a fixed salt for the SVG ids, and text as text, not as
    # glyph paths (a glyph's id in the file is its index in whichever DejaVu Sans file
    # matplotlib found, its own or the system's, so paths made the same figure another file
    # on another host); set for these figures only, not for the process
    out = {}
    with matplotlib.rc_context({"svg.hashsalt": "fedmarket", "svg.fonttype": "none"}):
        for name, df in sorted(rounds.items()):
            roles = "role" in df and name in BY_ROLE and bool((df.role != ALL).any())
            if "role" in df:
                df = df[(df.role != ALL) if roles else (df.role == ALL)]
            # a figure per claim (Fig. 2's per partition, Table 2's liars per thresholds), per
            # data set and attack for Fig. 4
            names, titles = figure_parts(name, df)
            for part, g in df.groupby(names, sort=True):
                shown = titles[g.index[0]]
                g = g.copy()
                cols = {c for c, _, _ in SPLIT.get(name, ())}
                swept = [c for c in g if c.startswith("param_") and c not in cols
                         and g[c].nunique() > 1]
                g["label"] = g.mechanism.astype(str)
                for c in swept:  # a cell that does not set the parameter: no suffix
                    g["label"] += np.where(g[c].notna(), " " + c[len("param_"):] + " "
                                           + g[c].map(_g), "")
                if "liar_utility_lying" in g:
                    g = _truthful_and_lying(g)
                panels = [(col, bounds) for col, bounds in (("acc_personalised", (0.0, 1.0)),
                                                            ("utility_cum", None),
                                                            ("n_bought", None),
                                                            *([("n_sold", None)] if roles else []),
                                                            ("liar_utility_cum", None),
                                                            ("liar_utility", None))
                          if col in g and g[col].notna().any()]
                if not panels:
                    continue
                # per role: one row of panels per algorithm (or rule), one line per role
                rows = list(g.groupby("label", sort=True)) if roles else [("", g)]
                fig, axes = plt.subplots(len(rows), len(panels),
                                         figsize=(5 * len(panels), 4.2 * len(rows)), squeeze=False)
                for (head, r), row in zip(rows, axes, strict=True):
                    for ax, (col, bounds) in zip(row, panels, strict=True):
                        plot_accuracy_by_round(r, ax=ax, column=col,
                                               by="role" if roles else "label", bounds=bounds)
                        if head:
                            ax.set_title(head)
                    for ax in row[1:]:
                        if ax.get_legend() is not None:
                            ax.get_legend().remove()
                title = (f"{name}{', ' + shown if shown else ''}: per-round curves"
                         + (" per role" if roles else ""))
                fig.suptitle(title)
                fig.tight_layout()
                path = folder / f"reproduction_rounds_{name}{'_' + str(part) if part else ''}.svg"
                write_atomic(path, lambda tmp, fig=fig: fig.savefig(tmp, metadata={"Date": None}))
                plt.close(fig)
                out[(name, str(part))] = (title, path)
    return out


def _truthful_and_lying(g: pd.DataFrame) -> pd.DataFrame:
    """Table 2's liar rows (each cell: the liar's utility per round in the truthful and in
    the lying run) as lines: "truthful" (the same market whatever the misreport, so one line
    over the cells of every misreport) and one line per misreport ("size x 0.1: lying")."""
    what = (g.param_kind.astype(str) + " x " + g.param_factor.map(_g)
            if {"param_kind", "param_factor"} <= set(g) else g.label)
    runs = [g.assign(label="truthful", liar_utility=g.liar_utility_honest,
                     liar_utility_cum=g.liar_utility_honest_cum),
            g.assign(label=what + ": lying", liar_utility=g.liar_utility_lying,
                     liar_utility_cum=g.liar_utility_lying_cum)]
    return pd.concat(runs, ignore_index=True)
