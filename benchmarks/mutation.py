"""Mutation testing of the property checker and the test suite (issue 20, part 2).

Each mutant is one small fault: a source-text replacement applied to a temporary copy of the
repository (the tracked files of the working tree). For every mutant, in that copy:

* ``batch``: every declared (subject, property) row of the mutated family (iPFL mutants: the
  iPFL subjects, CPL mutants: the CPL subjects) checked as the contract checks it with the
  batch engine (``--batch`` effective examples per claim, at most ``--time-limit`` s per
  row; :data:`ROW_TIME_LIMITS` allows named rows more), stopping at the first row that is
  not as declared: the mutant is KILLED. A first pass (:data:`FIRST_PASS`, ``--first-pass``)
  checks the rows declared to hold on a small budget first, and kills only on what a small
  budget settles (a confirmed counterexample to a claim). The rows
  of the subjects that run the mutated code come first (:func:`subject_order`), then every
  other row of the family in the registry's order: a mutant SURVIVES only if no row at all
  fails. A row
  whose verdict is "inconclusive" (its evidence ran short: the time limit or the draw cap
  before the budget of discriminating examples) neither kills nor passes: it is listed with
  the score and the scan goes on (on the unmutated code such a row is inconclusive too);
* ``hypothesis``: the same with the Hypothesis engine (``--hypothesis`` examples);
* ``tests``: the test files that cover the mutated module (``pytest -x -q``).

An engine whose process ends in a traceback (the checker itself raised) scores INTERNAL
ERROR; a mutant whose text is no longer in the source scores STALE (the list must follow the
code). Every result is appended to a JSON-lines file as it finishes; a rerun skips what is
there (resumable). ``--markdown`` writes the score table into docs/reference-proofs.md
between the ``mutation-scores`` markers.

    python benchmarks/mutation.py --out results/mutation.jsonl              # everything
    python benchmarks/mutation.py --only eq13_sign --engines batch tests   # one mutant
    python benchmarks/mutation.py --out results/mutation.jsonl --markdown docs/reference-proofs.md

``make mutation-named`` runs the whole list (regression cases; the mutation score is on
generated mutants: benchmarks/generated_mutation.py, ``make mutation``). The mutation suite
is not part of ``make test``
(tests/test_mutation.py checks the harness on one mutant and one identity non-mutant).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    family: str  # "ipfl" | "cpl": whose declared properties must catch it
    tests: tuple[str, ...]
    what: str = ""


_IPFL_TESTS = ("tests/test_mechanism_rules.py", "tests/test_incentives.py",
               "tests/test_ipfl_public.py", "tests/test_thresholds.py",
               "tests/test_selection.py")
_CPL_TESTS = ("tests/test_cpl.py", "tests/test_cpl_facts.py", "tests/test_cpl_batch.py",
              "tests/test_cpl_bulk.py")

MUTANTS: tuple[Mutant, ...] = (
    # -- money (Eqs. 3, 12, 13)
    Mutant("eq13_sign", "mechanisms/ipfl/money.py", "return R.sum(axis=-1) - R.sum(axis=-2)",
           "return R.sum(axis=-2) - R.sum(axis=-1)", "ipfl", _IPFL_TESTS,
           "Eq. 13 sign flipped"),
    Mutant("payments_off_1e-6", "mechanisms/ipfl/money.py",
           "return R.sum(axis=-1) - R.sum(axis=-2)",
           "return R.sum(axis=-1) - R.sum(axis=-2) + 1e-6", "ipfl", _IPFL_TESTS,
           "every payment off by 1e-6"),
    Mutant("nan_payment", "mechanisms/ipfl/money.py", "return R.sum(axis=-1) - R.sum(axis=-2)",
           "return (R.sum(axis=-1) - R.sum(axis=-2)) + np.where(R.sum(axis=-1) > 1e-3, "
           "np.nan, 0.0)", "ipfl", _IPFL_TESTS, "a NaN payment for a big buyer"),
    Mutant("eq3_no_sharing_cost", "mechanisms/ipfl/money.py",
           "return G - C - np.asarray(p)",
           "return G - np.asarray(p)", "ipfl", _IPFL_TESTS,
           "sharing cost dropped from Eq. 3"),
    Mutant("eq3_sharing_cost_N", "mechanisms/ipfl/money.py",
           "return _sharing_cost(market.true_c, A)",
           "return _sharing_cost(market.true_N, A)",
           "ipfl", _IPFL_TESTS, "N in place of c in the sharing cost"),
    Mutant("eq3_reported_c", "mechanisms/ipfl/money.py",
           "return _sharing_cost(market.true_c, A)",
           "return _sharing_cost(market.c, A)",
           "ipfl", _IPFL_TESTS, "sharing cost at the reported c"),
    Mutant("eq3_reported_K", "mechanisms/ipfl/money.py",
           "return _gain(market.gain, A, market.true_N, market.true_K)",
           "return _gain(market.gain, A, market.true_N, market.K)",
           "ipfl", _IPFL_TESTS, "gain at the reported K"),
    Mutant("eq12_distance_sign", "mechanisms/ipfl/money.py",
           "R[idx] = marginal - model_difference(", "R[idx] = marginal + model_difference(",
           "ipfl",
           _IPFL_TESTS, "Eq. 12's distance term sign flipped"),
    Mutant("eq12_ratio_inverted", "mechanisms/ipfl/money.py",
           "model_difference(Nj, Ni, np.asarray(D)[idx]",
           "model_difference(Ni, Nj, np.asarray(D)[idx]", "ipfl", _IPFL_TESTS,
           "Eq. 12's ratio inverted"),
    Mutant("eq12_no_marginal_drop", "mechanisms/ipfl/money.py",
           "marginal = gain(ni, Ki, Ni) - gain(ni - Nj, Ki, Ni)",
           "marginal = gain(ni, Ki, Ni)", "ipfl", _IPFL_TESTS,
           "Eq. 12 pays the whole gain, not the marginal"),
    # -- prices (Eq. 10)
    Mutant("eq10_ratio_inverted", "mechanisms/ipfl/market.py",
           "out = model_difference(Nj, Ni, d, lam_, out=P[lo:lo + step])",
           "out = model_difference(Ni, Nj, d, lam_, out=P[lo:lo + step])", "ipfl",
           _IPFL_TESTS,
           "Eq. 10's ratio inverted"),
    Mutant("eq10_distance_sign", "mechanisms/ipfl/market.py",
           "out = model_difference(Nj, Ni, d, lam_, out=P[lo:lo + step])",
           "out = model_difference(Nj, Ni, d, -lam_, out=P[lo:lo + step])", "ipfl",
           _IPFL_TESTS, "Eq. 10's distance sign"),
    # -- selection (Box 2, greedy, exact)
    Mutant("greedy_lt_as_le", "mechanisms/ipfl/selection.py",
           "take = active & Sc[k] & (n + Nc[k] < Tc[k])",
           "take = active & Sc[k] & (n + Nc[k] <= Tc[k])", "ipfl", _IPFL_TESTS,
           "greedy < as <="),
    Mutant("greedy_off_by_one", "mechanisms/ipfl/selection.py", "for k in range(last):",
           "for k in range(last - 1):", "ipfl", _IPFL_TESTS, "greedy skips the last seller"),
    # greedy_extra_seller: the first seller of every scanned row is taken whatever its
    # threshold. Its former text, ``Sc[k] & ((n + Nc[k] < Tc[k]) | (k == 0))``, became an
    # equivalent of greedy_lt_as_le at k = 0 with 577ead5: the scan visits only sellers with
    # T > 0 (Sc), and every such T >= N_j (the threshold's floor), so the forced take
    # differed from the original only where N_j == T_ij exactly (never drawn; it survived).
    Mutant("greedy_extra_seller", "mechanisms/ipfl/selection.py",
           "take = active & Sc[k] & (n + Nc[k] < Tc[k])",
           "take = active & ((Sc[k] & (n + Nc[k] < Tc[k])) | (k == 0))", "ipfl",
           _IPFL_TESTS, "greedy always takes one extra seller"),
    Mutant("greedy_ascending", "mechanisms/ipfl/selection.py",
           'order = np.argsort(-Tt, axis=-1, kind="stable")',
           'order = np.argsort(Tt, axis=-1, kind="stable")', "ipfl", _IPFL_TESTS,
           "greedy visits the lowest threshold first"),
    Mutant("greedy_unstable_ties", "mechanisms/ipfl/selection.py",
           'order = np.argsort(-Tt, axis=-1, kind="stable")',
           'order = np.argsort(-Tt, axis=-1, kind="stable")[..., ::-1][..., ::-1][..., '
           '::-1][..., ::-1]', "ipfl", _IPFL_TESTS,
           "identity (four reversals): NOT a fault, must survive"),
    Mutant("box2_never_stops", "mechanisms/ipfl/selection.py",
           "stop_at_first_failure=True, top=top)",
           "stop_at_first_failure=False, top=top)",
           "ipfl", _IPFL_TESTS, "Box 2 never stops (becomes the local rule)"),
    Mutant("exact_worst_subset", "mechanisms/ipfl/selection.py",
           "return subset_members(np.argmin(obj, axis=-1), k)",
           "return subset_members(np.argmax(obj, axis=-1), k)", "ipfl",
           _IPFL_TESTS, "exact enumeration takes the worst subset"),
    Mutant("pure_seller_buys", "mechanisms/ipfl/thresholds.py",
           "np.copyto(T, 0.0, where=pure[..., :, None])",
           "pass", "ipfl", _IPFL_TESTS, "a pure seller's threshold row kept"),
    # -- the gain (Eq. 4) and its thresholds
    Mutant("gain_double_x", "mechanisms/gains.py",
           "return np.sqrt(K / N) - np.sqrt(K / (N + x))",
           "return np.sqrt(K / N) - np.sqrt(K / (N + 2.0 * x))", "ipfl", _IPFL_TESTS,
           "the gain counts bought data twice"),
    Mutant("gain_non_monotone", "mechanisms/gains.py",
           "return np.sqrt(K / N) - np.sqrt(K / (N + x))",
           "return (np.sqrt(K / N) - np.sqrt(K / (N + x))) * np.cos(x / N)", "ipfl",
           _IPFL_TESTS, "non-monotone gain"),
    Mutant("threshold_floor", "mechanisms/gains.py", "np.maximum(x, Nj, out=x)",
           "np.maximum(x, 2.0 * Nj, out=x)", "ipfl", _IPFL_TESTS,
           "thresholds floored at 2 N_j"),
    # -- reference rules
    Mutant("vcg_pivot_keeps_row", "mechanisms/ipfl/rules.py",
           "w_minus = without.sum(axis=-2) - np.diagonal(without, axis1=-2, axis2=-1)",
           "w_minus = without.sum(axis=-2)", "ipfl",
           ("tests/test_mechanism_rules.py", "tests/test_incentives.py"),
           "VCG's pivot keeps i's own row"),
    Mutant("shapley_weights", "mechanisms/ipfl/rules.py",
           "1.0 / (kr * comb(kr - 1, card[None, :]))",
           "1.0 / (kr * comb(kr, card[None, :]))", "ipfl",
           ("tests/test_mechanism_rules.py", "tests/test_incentives.py"),
           "Shapley weights wrong"),
    Mutant("cost_plus_no_markup", "mechanisms/ipfl/rules.py", "COST_PLUS_MARKUP = 0.25",
           "COST_PLUS_MARKUP = -0.25", "ipfl",
           ("tests/test_mechanism_rules.py", "tests/test_incentives.py"),
           "cost-plus pays below cost"),
    Mutant("share_all_self", "mechanisms/ipfl/rules.py",
           "    A[..., np.arange(m), np.arange(m)] = False\n    return A",
           "    return A", "ipfl", ("tests/test_mechanism_rules.py",),
           "share-all buys its own model"),
    # -- CPL (one implementation for one game and for many: mechanisms/cpl/batch.py, game.py,
    # response.py)
    Mutant("cpl_threshold_half", "mechanisms/cpl/batch.py",
           "return np.where(lam == 0, np.inf, 1.0 / (3.0 * lam))",
           "return np.where(lam == 0, np.inf, 1.0 / (2.0 * lam))", "cpl", _CPL_TESTS,
           "CPL threshold 1/(2 lambda)"),
    Mutant("cpl_ignores_budget", "mechanisms/cpl/batch.py",
           "        return spend(games, _kkt_q(games, d + per_game(s))) - games.budget",
           "        return spend(games, _kkt_q(games, d + per_game(s))) - 2.0 * games.budget",
           "cpl", _CPL_TESTS, "CPL bisection solves for twice the budget"),
    Mutant("cpl_best_response_v0", "mechanisms/cpl/response.py",
           "return np.clip(unconstrained_response(game, prices), per_game(game.q_min), "
           "game.q_max)",
           "return np.clip(np.asarray(prices, dtype=float) / (2.0 * game.c), "
           "per_game(game.q_min), game.q_max)", "cpl", _CPL_TESTS,
           "CPL best response as if v = 0"),
    Mutant("cpl_spend_sign", "mechanisms/cpl/game.py",
           "np.sum(2.0 * game.c * q**2 - game.v * game.K / q, axis=-1)",
           "np.sum(2.0 * game.c * q**2 + game.v * game.K / q, axis=-1)", "cpl",
           _CPL_TESTS, "CPL spend with the valuation's sign flipped"),
    Mutant("cpl_bound_no_q", "mechanisms/cpl/game.py",
           "np.sum(game.K * (1.0 - q) / q, axis=-1)",
           "np.sum(game.K * (1.0 - q), axis=-1)", "cpl", _CPL_TESTS,
           "CPL bound without the 1/q"),
    Mutant("cpl_root_wrong_cubic", "mechanisms/cpl/response.py",
           "step = (xl**3 - bl * xl**2 - 1.0) / (3.0 * xl**2 - 2.0 * bl * xl)",
           "step = (xl**3 - bl * xl**2 - 2.0) / (3.0 * xl**2 - 2.0 * bl * xl)", "cpl",
           _CPL_TESTS, "CPL response solves the wrong cubic"),
    Mutant("cpl_response_no_clip", "mechanisms/cpl/response.py",
           "return np.clip(unconstrained_response(game, prices), per_game(game.q_min), "
           "game.q_max)",
           "return unconstrained_response(game, prices)", "cpl",
           _CPL_TESTS, "CPL best response not clipped to [q_min, q_max]"),
)

IDENTITIES = {"greedy_unstable_ties"}  # not faults: a harness that kills them is broken

# Per-row time allowances of the batch engine (seconds): such a row is checked for at most the
# larger of this and --time-limit. The evidence rule is the same (--batch discriminating
# examples, else "inconclusive"); only the time to reach it differs. vcg/truthful_c_under:
# about 24 % of its draws discriminate (8,432 drawn for 2,000, seed 0), and every draw is
# cleared 12 times by the VCG enumeration of 2^m subsets (the truthful market and the
# misreport search): 2.9-3.3 CPU s on this machine (3.5-5.1 s wall at load 4-6), more than 10 s
# wall beside a second mutant and other work; at 10 s it read "inconclusive" in every run.
ROW_TIME_LIMITS = {"vcg/truthful_c_under": 30.0}

# The batch engine's first pass: every row declared to hold (or vacuous) on this many
# discriminating examples, in the order below, before the full pass. It settles only what a
# small budget can settle: a claim's counterexample (re-run and confirmed, as the contract
# confirms one), the subject raising, a discriminating draw where the declaration says none
# can be; a row that "holds" there is checked again in full. Rows declared NOT to hold are
# left to the full pass (a search that misses its counterexample on a small budget proves
# nothing). Most faults break a claim on the first hundred draws; without the pass the scan
# reaches a late row only after every earlier row's full budget (eq3_reported_c: 65 rows).
FIRST_PASS = 100


# ----------------------------------------------------------------------- the order of rows
#
# Which subjects run the mutated code is derived, not declared: the mutated definition is the
# innermost function of the mutant's file around its text (for a module-level statement, such
# as COST_PLUS_MARKUP, every function of that file whose code names what it assigns), and a
# subject runs it when the function is called while the subject clears small instances of
# two small markets in bulk (as the batch engine clears them) and one with subject.settle, on
# the unmutated code. Those subjects' rows are checked first, the others after, each group in
# the registry's order. iPFL only: the CPL family keeps the registry's order, where the
# solver cpl-bisection comes first and its rows evaluate every CPL function (its properties
# recompute best responses, spend and bounds themselves), while the pricing rules, which run
# fewer of them, declare budget feasibility alone.


def mutated_functions(mutant: Mutant) -> set[tuple[str, str, int, int]]:
    """(file, name, first line, last line) of the definitions the mutant changes."""
    import ast

    path = ROOT / mutant.path
    text = path.read_text()
    line = text[:text.index(mutant.old)].count("\n") + 1
    tree = ast.parse(text)
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def span(n):
        first = min([n.lineno, *(d.lineno for d in n.decorator_list)])
        return str(path), n.name, first, n.end_lineno

    inside = [n for n in funcs if span(n)[2] <= line <= n.end_lineno]
    if inside:  # the innermost function around the mutated text
        return {span(max(inside, key=lambda n: span(n)[2]))}
    stmt = next(n for n in tree.body if n.lineno <= line <= n.end_lineno)
    names = {t.id for n in ast.walk(stmt) if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    return {span(n) for n in funcs
            if any(isinstance(x, ast.Name) and x.id in names for x in ast.walk(n))}


_RUNS: dict = {}


def _exercise(subject) -> None:
    """Clear small iPFL markets with the subject, as the checks do (see above)."""
    import numpy as np

    from mechanisms import ipfl
    from proofs.ipfl_properties import batch_rule

    N = np.array([[100.0, 400.0, 250.0, 50.0], [300.0, 80.0, 120.0, 500.0]])
    c = np.array([[0.0, 0.5, np.inf, 0.2], [0.3, 0.1, 0.4, 0.05]])
    K = np.array([[5e4, 0.0, 3e4, 2e4], [4e4, 6e4, 1e4, 0.0]])
    lam = np.array([0.0, 2.0])
    D = np.abs(np.arange(16).reshape(4, 4) - np.arange(16).reshape(4, 4).T) / 16.0
    D = np.broadcast_to(D, (2, 4, 4)).copy()
    settle = batch_rule(subject)
    if settle is not None:
        settle(N, c, K, lam, D)
    subject.settle(ipfl.Market(N=N[1], c=c[1], K=K[1], lam=float(lam[1])), D[1])


def runs(subject) -> set[tuple[str, str, int]]:
    """(file, name, first line) of every Python function called while the subject clears
    the small instances of :func:`_exercise` (on this tree's code)."""
    if subject.name not in _RUNS:
        seen = set()

        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                seen.add((code.co_filename, code.co_name, code.co_firstlineno))

        sys.setprofile(profile)
        try:
            _exercise(subject)
        finally:
            sys.setprofile(None)
        _RUNS[subject.name] = seen
    return _RUNS[subject.name]


def _registry():
    """proofs.registry of THIS tree (ROOT), whatever else is installed."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from proofs import registry

    if not Path(registry.__file__).resolve().is_relative_to(ROOT):
        raise RuntimeError(f"proofs is imported from {registry.__file__}, not from {ROOT}: "
                           "run with PYTHONPATH set to the tree the mutants are made from")
    return registry


def subject_order(mutant: Mutant) -> tuple[list[str], list[str]]:
    """(order, owners): every subject of the mutant's family in the order its rows are
    checked, and the subjects that run the mutated code (first in the order; empty: the
    registry's order)."""
    subjects = [name for name, s in _registry().SUBJECTS.items() if s.family == mutant.family]
    funcs = mutated_functions(mutant)

    def owns(name):
        called = runs(_registry().SUBJECTS[name])
        return any((f, n, first) in called for f, n, lo, hi in funcs for first in range(lo, hi))

    owners = [name for name in subjects if mutant.family == "ipfl" and owns(name)]
    return owners + [name for name in subjects if name not in owners], owners

# the driver run inside the mutated copy: every declared row of the family, as the
# contract checks it (declared True, False or VACUOUS), stopping at the first row not as
# declared that is not merely inconclusive
_DRIVER = r"""
import json, sys
from proofs.contract import VACUOUS, contract_check
from proofs.registry import PROPERTIES, SUBJECTS
family, engine, budget, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
only = set(sys.argv[5].split(",")) if sys.argv[5] else None
order = sys.argv[6].split(",")
allowance = json.loads(sys.argv[7])  # per-row time limits (the larger of it and limit)
first = int(sys.argv[8])  # the first pass's budget (0: no first pass)
# an honest full check: the order is a permutation of every subject of the family
assert sorted(order) == sorted(n for n, s in SUBJECTS.items() if s.family == family), order
rows = [(sname, key, declared) for sname in order
        for key, declared in SUBJECTS[sname].declares.items()
        if only is None or f"{sname}/{key}" in only]


def internal(report):
    return report.verdict == "error" and (
        "Hypothesis engine raised" in (report.error or "")
        or "property " in (report.error or ""))


def conclusive(report, declared):
    # the first pass: what a small budget settles (a claim's confirmed counterexample, the
    # subject raising, a draw that discriminates where nothing may); "holds" or "vacuous"
    # on a small budget settles nothing
    if report.verdict == "error":
        return True
    if declared == VACUOUS:
        return report.discriminating > 0 or report.counterexample is not None
    ce = report.counterexample
    return report.verdict == "counterexample" and ce is not None and ce.rerun() > 0


def done(report, n, sname, key, stage, inconclusive):
    print(json.dumps({"killed": not internal(report), "internal": internal(report),
                      "rows": n, "by": f"{sname}/{key}", "verdict": report.verdict,
                      "error": report.error, "pass": stage, "inconclusive": inconclusive}))
    sys.exit(0)


n = 0
if engine == "batch" and first > 0:  # pass 1: the claims, each on a small budget
    for sname, key, declared in rows:
        if declared is False:
            continue  # a counterexample expected: only the full budget can miss it
        got = contract_check(SUBJECTS[sname], PROPERTIES[key], declared, max_examples=first,
                             seed=0, engine=engine, time_limit=limit)
        n += 1
        if internal(got.report) or conclusive(got.report, declared):
            done(got.report, n, sname, key, 1, [])
inconclusive = []  # rows whose evidence ran short (time limit, draw cap): no kill, no pass
for sname, key, declared in rows:  # pass 2: every row, as the contract checks it
    subject = SUBJECTS[sname]
    kw = ({"time_limit": max(limit, allowance.get(f"{sname}/{key}", 0.0))}
          if engine == "batch" else {})
    # the declaration as the contract holds it (True, False or VACUOUS)
    got = contract_check(subject, PROPERTIES[key], declared, max_examples=budget, seed=0,
                         engine=engine, **kw)
    n += 1
    if not internal(got.report) and not got.as_declared and got.report.verdict == "inconclusive":
        inconclusive.append(f"{sname}/{key}")
        continue
    if internal(got.report) or not got.as_declared:
        done(got.report, n, sname, key, 2, inconclusive)
print(json.dumps({"killed": False, "internal": False, "rows": n,
                  "inconclusive": inconclusive}))
"""


def source_commit() -> str:
    """The commit the mutants are made from: ROOT's HEAD (short), "+changes" when a tracked
    file differs from it (the copy is made from the working tree)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    head = git("rev-parse", "--short=7", "HEAD")
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def copy_tree(dst: Path) -> None:
    """The tracked files of ROOT's working tree, copied into ``dst``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def mutant_env(copy: Path) -> dict:
    """The environment a run in the copy ``copy`` gets: its code first on the path, one
    thread per math library, the dev Hypothesis profile."""
    env = dict(os.environ, PYTHONPATH=str(copy), HYPOTHESIS_PROFILE="dev",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return env


def run_mutant(mutant: Mutant, engines, *, batch: int, hypothesis: int, time_limit: float,
               timeout: float, rows=None, first_pass: int = FIRST_PASS) -> dict:
    """Score one mutant (see the module doc); ``rows``: only these "subject/property" rows
    (default: every declared row of the mutant's family)."""
    out = {"mutant": mutant.name, "what": mutant.what, "path": mutant.path}
    text = (ROOT / mutant.path).read_text()
    if text.count(mutant.old) != 1:
        out["status"] = "stale"
        return out
    order, owners = subject_order(mutant)
    out["first"] = owners
    commit = source_commit()
    with tempfile.TemporaryDirectory(prefix="fedmarket-mutant-") as tmp:
        copy = Path(tmp)
        copy_tree(copy)
        (copy / mutant.path).write_text(text.replace(mutant.old, mutant.new))
        for engine in engines:
            t0 = time.perf_counter()
            if engine == "tests":
                cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                       *mutant.tests]
            else:
                budget = batch if engine == "batch" else hypothesis
                cmd = [sys.executable, "-c", _DRIVER, mutant.family, engine, str(budget),
                       str(time_limit), ",".join(rows or ()), ",".join(order),
                       json.dumps(ROW_TIME_LIMITS), str(first_pass)]
            try:
                r = subprocess.run(cmd, cwd=copy, env=mutant_env(copy), capture_output=True,
                                   text=True, timeout=timeout)
                seconds = time.perf_counter() - t0
            except subprocess.TimeoutExpired:
                out[engine] = {"status": "timeout", "seconds": timeout, "commit": commit}
                continue
            if engine == "tests":
                status = "killed" if r.returncode != 0 else "survived"
                out[engine] = {"status": status, "seconds": round(seconds, 1),
                               "commit": commit}
                continue
            last = r.stdout.strip().splitlines()[-1:] or [""]
            try:
                got = json.loads(last[0])
            except json.JSONDecodeError:  # the checker itself crashed
                out[engine] = {"status": "internal error", "seconds": round(seconds, 1),
                               "error": r.stderr.strip().splitlines()[-1:], "commit": commit}
                continue
            status = ("internal error" if got["internal"] else
                      "killed" if got["killed"] else "survived")
            out[engine] = {"status": status, "seconds": round(seconds, 1), "commit": commit,
                           **{k: got[k] for k in ("by", "verdict", "rows", "pass", "inconclusive")
                              if got.get(k)}}
    return out


def _commits(results: list[dict], engine) -> list[tuple[str, int]]:
    """(commit, mutants) of an engine's results, the most frequent first."""
    from collections import Counter

    got = Counter(r[engine].get("commit", "unknown commit") for r in results if engine in r)
    return sorted(got.items(), key=lambda kv: (-kv[1], kv[0]))


def _at(commit: str) -> str:
    return f"at {commit}" if all(ch in "0123456789abcdef" for ch in commit) else commit


def scores(results: list[dict], engines) -> str:
    """The markdown table of a run: per engine, how many mutants were killed, survived,
    raised inside the checker, timed out, and the commits its mutants were made from; then
    one row per mutant (a cell from another commit than its engine's most frequent names
    it)."""
    lines = ["| | killed | survived | internal error | timeout | not run | commits |",
             "|---|---|---|---|---|---|---|"]
    faults = [r for r in results if r["mutant"] not in IDENTITIES and r.get("status") != "stale"]
    usual = {}
    for engine in engines:
        got = [r.get(engine, {}).get("status") for r in faults]
        commits = _commits(results, engine)
        usual[engine] = commits[0][0] if commits else None
        where = ", ".join(f"{_at(c)} ({n})" for c, n in commits) or "-"
        lines.append(f"| {engine} | {got.count('killed')} | {got.count('survived')} | "
                     f"{got.count('internal error')} | {got.count('timeout')} | "
                     f"{got.count(None)} | {where} |")
    lines += ["", "| mutant | fault | " + " | ".join(engines) + " |",
              "|---|---|" + "---|" * len(engines)]
    for r in results:
        cells = []
        for engine in engines:
            e = r.get(engine)
            if e is None:
                cells.append(r.get("status", "not run"))
                continue
            commit = e.get("commit", "unknown commit")
            cell = (f"{e['status']} ({e['seconds']:g} s)" if commit == usual[engine] else
                    f"{e['status']} ({e['seconds']:g} s, {_at(commit)})")
            if e.get("by"):
                cell += f" by {e['by']}" + (" (first pass)" if e.get("pass") == 1 else "")
            if e.get("inconclusive"):
                cell += f"; inconclusive: {', '.join(e['inconclusive'])}"
            cells.append(cell)
        lines.append(f"| {r['mutant']} | {r['what']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _write_markdown(path: Path, table: str, command: str) -> None:
    start, end = "<!-- mutation-scores:start -->", "<!-- mutation-scores:end -->"
    text = path.read_text()
    block = (f"{start}\nGenerated by `{command}` (\"not run\": the engine did not score that "
             f"mutant; the commits column: the commits the mutants were made from, and how "
             f"many).\n\n{table}{end}")
    if start in text and end in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def _shown(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "results" / "mutation.jsonl")
    p.add_argument("--only", nargs="*", default=None, help="mutant names (default: all)")
    p.add_argument("--engines", nargs="*", default=["batch", "hypothesis", "tests"],
                   choices=["batch", "hypothesis", "tests"])
    p.add_argument("--batch", type=int, default=2000, help="batch engine: effective examples")
    p.add_argument("--hypothesis", type=int, default=60, help="Hypothesis engine: examples")
    p.add_argument("--time-limit", type=float, default=10.0, help="batch: seconds per row")
    p.add_argument("--first-pass", type=int, default=FIRST_PASS,
                   help="batch: the first pass's budget per claim (0: no first pass)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per engine run")
    p.add_argument("--markdown", type=Path, default=None,
                   help="write the scores into this page (between mutation-scores markers)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing: the table of what --out holds (its lines merged per "
                        "mutant, a later line replacing the engines it holds; an engine a "
                        "mutant was not scored by reads 'not run')")
    args = p.parse_args(argv)
    names = {m.name for m in MUTANTS}
    for name in args.only or []:
        if name not in names:
            p.error(f"--only: unknown mutant {name!r}; known: {sorted(names)}")
    chosen = [m for m in MUTANTS if args.only is None or m.name in args.only]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            r = json.loads(line)  # a later line replaces the engines it holds, keeps others
            done[r["mutant"]] = {**done.get(r["mutant"], {}), **r}
    for m in chosen:
        prev = done.get(m.name)
        if args.no_run or (prev is not None and all(e in prev for e in args.engines)):
            continue
        r = run_mutant(m, args.engines, batch=args.batch, hypothesis=args.hypothesis,
                       time_limit=args.time_limit, timeout=args.timeout,
                       first_pass=args.first_pass)
        if prev is not None:
            r = {**prev, **r}
        done[m.name] = r
        with args.out.open("a") as f:
            f.write(json.dumps(r) + "\n")
        print(json.dumps(r), flush=True)
    results = [done[m.name] for m in chosen if m.name in done]
    table = scores(results, args.engines)
    print(table)
    if args.markdown is not None:
        cmd = (f"python benchmarks/mutation.py --out {_shown(args.out)} --engines "
               f"{' '.join(args.engines)} --batch {args.batch} --hypothesis {args.hypothesis} "
               f"--time-limit {args.time_limit:g} --first-pass {args.first_pass}"
               + (" --no-run" if args.no_run else ""))
        _write_markdown(args.markdown, table, cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
