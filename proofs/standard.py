"""The standard run: the one checker run every score and coverage figure refers to.

``fedmarket prove --standard`` (``make standard``) runs :data:`STANDARD`: the batch engine,
seed 0, every declared row of every built-in subject with its exhaustive companion, each row
to its own budget of discriminating examples (:meth:`StandardRun.budget`), two rows at a
time. The mutation scores (``make mutation``), the branch coverage of ``mechanisms/``
(``benchmarks/coverage_standard.py``) and the per-row budgets in
docs/reference-proofs.md all name this run; change it here and nowhere else.

>>> from proofs.standard import STANDARD
>>> STANDARD.command()
'fedmarket prove --standard'
>>> STANDARD.budget("box2", "budget_balance") >= 100_000
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["STANDARD", "StandardRun"]


@dataclass(frozen=True)
class StandardRun:
    """What the standard run checks and how hard.

    engine, seed, jobs, exhaustive : as ``fedmarket prove`` takes them; ``jobs`` counts the
        computing worker processes: the rows of a property that mostly waits
        (:attr:`proofs.Property.waits`) run in :data:`proofs.report.WAITING_JOBS` more.
    examples : the budget of discriminating examples of every row not in ``budgets``.
    budgets : ``"subject/property"`` (or ``"*/property"``: every subject) -> that row's
        budget of discriminating examples, where a row needs more than ``examples`` (a rare
        regime) or can afford no more.
    time_limit : seconds per row (None: none); ``time_limits`` overrides it per row, keyed
        like ``budgets``. A row cut short reads "inconclusive", never "holds".
    """

    engine: str = "batch"
    seed: int = 0
    examples: int = 100_000
    budgets: Mapping[str, int] = field(default_factory=dict)
    time_limit: float | None = None
    time_limits: Mapping[str, float] = field(default_factory=dict)
    jobs: int = 2
    exhaustive: bool = True

    def __post_init__(self):
        for name in ("budgets", "time_limits"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def _lookup(self, table: Mapping, subject: str, key: str, default):
        return table.get(f"{subject}/{key}", table.get(f"*/{key}", default))

    def budget(self, subject: str, key: str) -> int:
        """The row's budget of discriminating examples."""
        return int(self._lookup(self.budgets, subject, key, self.examples))

    def limit(self, subject: str, key: str) -> float | None:
        """The row's time limit in seconds (None: none)."""
        return self._lookup(self.time_limits, subject, key, self.time_limit)

    def command(self) -> str:
        """The command that runs it."""
        return "fedmarket prove --standard"

    def describe(self) -> str:
        """One line: the settings, for reports and pages."""
        from .report import WAITING_JOBS

        extra = f", {len(self.budgets)} rows with their own budget" if self.budgets else ""
        limit = "no time limit" if self.time_limit is None else \
            f"at most {self.time_limit:g} s a row"
        return (f"engine {self.engine}, seed {self.seed}, {self.examples:,} discriminating "
                f"examples per row{extra}, {limit}, "
                f"{'with' if self.exhaustive else 'without'} the exhaustive grid, "
                f"{self.jobs} worker processes, plus {WAITING_JOBS} for the rows that mostly "
                "wait (rules sleeping past their time limits)")


STANDARD = StandardRun(budgets={
    # game by game through the conic solvers, about 0.06 CPU s a game (cvxpy and a 30-point
    # line search): 1,000 games is a minute
    "cpl-bisection/cpl_one_path": 1_000,
    # one instance at a time, 2-10 ms each (a well-formed answer and a fault's call); 5,000
    # gives each of a table's 15-61 faults about 80-300 draws per subject
    "*/refuses_bad_input": 5_000,
    "*/cpl_refuses_bad_input": 5_000,
    "*/lia_refuses_bad_input": 5_000,
    # one instance at a time: the subject's own answer, then a clearing with a rule of your
    # own (5 in 32 sleep to a 0.05 s limit, 9 in 32 run in a child process under a limit)
    "*/contains_rules": 3_000,
    "*/cpl_contains_rules": 3_000,
    # one game at a time through every one-game entry point (cpl.solve; for a posted price
    # four calibrations of one game: cpl.apply_pricing, the named baseline, the v0 responses,
    # the rule on a Game), 5-40 ms a game
    "*/cpl_one_game": 5_000,
    # one market at a time: ipfl.clear and each built-in rule function on one Market,
    # 5-50 ms a market
    "*/one_market": 5_000,
    # the reference oracle (proofs/oracle: a literal transcription in plain Python, slow by
    # design), market by market, the truthful market and its lying twin: 0.6-1.5 CPU ms a
    # market (iPFL), 0.2-0.3 (CPL), 0.4 (pFedLIA) on this 2-core host
    # (benchmarks/standard_rows.py --scale 40): at 100,000 a row the 13 oracle rows took
    # 875 CPU s, 73 % of the 1,200 CPU s the whole run may take (10 minutes on 2 cores);
    # 20,000 each: about 175 s
    "*/conforms": 20_000,
    "*/cpl_conforms": 20_000,
    "*/lia_conforms": 20_000,
    # every algorithm of the exact selection buyer by buyer in Python (the dynamic programme
    # and branch-and-bound for every buyer with a candidate, twice more stopped, once with a
    # progress callback): 1.4 CPU ms a market at 2-12 clients, about 1 s for each market of
    # the 100-client tier; 100,000 took 464 CPU s projected (--scale 20), 366 s of the
    # standard run's wall time at load 10
    "exact/one_path": 20_000,
    # one market at a time through a pool worker (a task's round trip, ~2-5 ms) and 1 in 10
    # stopping the pool (a worker's end and a new fork, ~20-50 ms): 2,000 draws took 21 s
    # wall, 8 CPU s at a load of ~14 (fedmarket prove --engine batch --examples 2000
    # --subject local --property runs_in_a_worker)
    "local/runs_in_a_worker": 2_000,
    # vcg clears with the exact selection: its one_path runs the same buyer-by-buyer
    # searches, and VCG's pivot by enumeration and by search besides: 1.25 CPU ms a market
    # (no size tier: VCG's cost is exponential in the market), 174 s of the standard run's
    # row time at load 2-5
    "vcg/one_path": 20_000,
    # the exact selection's branch-and-bound on every buyer with a candidate, in Python:
    # 0.66 CPU ms a market (100,000 took 66 CPU s); 20,000 reach 1,300 buyers of 10-90
    # candidates, where a search that prunes less leaves its documented bound
    "exact/work_bound": 20_000,
})
"""The standard run (``fedmarket prove --standard``)."""
