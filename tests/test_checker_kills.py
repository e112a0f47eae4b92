"""The checker kills generated mutants that had survived it (issue 34, part 5;
docs/reference-proofs.md, "Killed by the checker on main since"). Each mutant is planted by
recompiling the one function it changes with its mutated line (monkeypatched: nothing on
disk changes) and the checker's row that now catches it is run with the batch engine at a
small budget: it must find a counterexample. Each check is general (an unknown name on both
sides of string order, a length one short and one long, what a refusal's message names, a
public function's value pinned to the oracle, a progress report as documented), so these
are its planted-fault tests; the unmutated rows hold in tests/test_contract.py."""

from __future__ import annotations
import __future__

import inspect
import sys
import textwrap

import numpy as np
import pytest

import mechanisms.cpl as mcpl
import mechanisms.cpl.batch as cbatch
import mechanisms.cpl.equilibrium as cequilibrium
import mechanisms.cpl.response as cresponse
import mechanisms.distances as distances
import mechanisms.files as files
import mechanisms.gains as gains
import mechanisms.ipfl as mipfl
import mechanisms.ipfl.market as mmarket
import mechanisms.ipfl.selection as selection
import mechanisms.roles as roles
from proofs import PROPERTIES, SUBJECTS, check
from proofs import input_properties as ip

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def plant(monkeypatch, owner, name: str, before: str, after: str, *aliases) -> None:
    """Replace ``owner.name`` (a module's function, or a class's method or classmethod) by
    its source with ``before`` (once) made ``after``, compiled in the owner's module; the
    same object is also set on each ``(namespace, name)`` of ``aliases``."""
    raw = inspect.getattr_static(owner, name)
    fn = raw.__func__ if isinstance(raw, classmethod | staticmethod) else raw
    source = textwrap.dedent(inspect.getsource(fn))
    assert source.count(before) == 1, (name, before)
    module = sys.modules[fn.__module__]
    code = compile(source.replace(before, after), inspect.getsourcefile(fn), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    made: dict = {}
    exec(code, module.__dict__, made)
    new = made[fn.__name__]
    new = type(raw)(new) if isinstance(raw, classmethod | staticmethod) else new
    monkeypatch.setattr(owner, name, new)
    for namespace in aliases:
        monkeypatch.setattr(namespace, name, new)


def _caught(subject: str, key: str, examples: int = 200) -> bool:
    r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=examples, seed=0,
              engine="batch")
    return r.verdict in ("counterexample", "error")  # error: the row raised (not as declared)


def _fault(family: str, what: str, field: str | None = None) -> int:
    """The 1-based index of the fault of ``family`` (and ``field``) whose description starts
    with ``what``."""
    found = [k for k, f in enumerate(ip.FAULTS[family], 1)
             if f.what.startswith(what) and field in (None, f.field)]
    assert len(found) == 1, what
    return found[0]


def _refused_on_every_draw(family: str, subject: str, what: str, field: str | None = None,
                           k: int = 3) -> list:
    """The fault's violation on ``k`` drawn well-formed instances of the family."""
    smp = {"ipfl": ip.ipfl_base_sampler, "cpl": ip.cpl_base_sampler,
           "lia": ip.lia_base_sampler}[family]()
    prop = {"ipfl": "refuses_bad_input", "cpl": "cpl_refuses_bad_input",
            "lia": "lia_refuses_bad_input"}[family]
    index = _fault(family, what, field)
    bases = [c for d in smp.draw(np.random.default_rng(0), k) for c in smp.cases(d)]
    return [PROPERTIES[prop].amount(SUBJECTS[subject], ip.FaultCase(b, index, family))
            for b in bases]


# ------------------------------------------------- bad input: the refusals, both ways


# (family, subject, the fault's description and field, owner, function, before, after,
# aliases)
_REFUSED = [
    # metric > "cosine" took "angle" (before "cosine") for cosine
    pytest.param("ipfl", "local", "unknown, for the gradients", None, distances,
                 "distance_gradients", 'if metric != "cosine":', 'if metric > "cosine":', (ip,),
                 id="d4fd92269e"),
    # P.shape > (n,) let prices one entry short through
    pytest.param("cpl", "cpl-bisection", "of the wrong length (one more, one fewer)", "prices",
                 cresponse, "_prices", "if P.shape != (game.n,):", "if P.shape > (game.n,):",
                 (), id="5d30c4a4a9"),
    # budget <= 1 named an earlier game (B = 0.5) as the one without a budget
    pytest.param("cpl", "cpl-uniform", "not positive, for posted prices in a batch", None,
                 cbatch, "posted_pricing_batch",
                 "k = int(np.flatnonzero(games.budget <= 0)[0])",
                 "k = int(np.flatnonzero(games.budget <= 1)[0])", (mcpl,), id="298c167090"),
    # np.argwhere(bad)[-1] named 2^50 N, not the first point where the slope rises
    pytest.param("ipfl", "local", "a convex function", None, gains, "_check_shape",
                 "r, k = np.argwhere(bad)[0]", "r, k = np.argwhere(bad)[-1]", (),
                 id="851534fef0"),
    # the slope tolerance divided by the rounding slack (instead of adding it) passed x^1.01
    # on every market (and x^2 on some)
    pytest.param("ipfl", "local", "a function barely convex", None, gains, "_check_shape",
                 "+ slack[:, :-1] + slack[:, 1:]", "/ slack[:, :-1] + slack[:, 1:]", (),
                 id="3c0bba9503"),
    # each validator's boundary from just outside on both sides: MarketArrays' N > 0 as
    # N != 0 let a negative N through; a theta of no parameters, or of no clients, passed
    pytest.param("ipfl", "local", "an entry negative, to MarketArrays", "N", mipfl.MarketArrays,
                 "__post_init__", "(arr <= 0 if lo_open else arr < 0)",
                 "(arr == 0 if lo_open else arr < 0)", (), id="98eb4abf11"),
    pytest.param("ipfl", "local", "no parameters (m x 0), to the", "theta", distances, "_params",
                 "X.shape[1] < 1", "X.shape[1] < 0", (), id="dfd745ac1a"),
    pytest.param("ipfl", "local", "no clients (0 x 2)", "theta", distances, "_params",
                 "X.shape[0] < 1", "X.shape[-1] < 1", (), id="12723c2401"),
    pytest.param("ipfl", "exact", "0, to selection.exact", "exact_node_limit", selection,
                 "exact", 'node_limit = as_int("exact_node_limit", node_limit, lo=1)',
                 'node_limit = as_int("exact_node_limit", node_limit, lo=0)', (mipfl,),
                 id="e90099d5b1"),
    # the gain's overflow refusal named the market's index (k[not 1] = k[0]) as the client
    pytest.param("ipfl", "local", "1e308 with N 1e-3 at client 0 of market 1", "K", mmarket,
                 "_check_scale", 'raise MarketInputError(name, f"client {k[-1]} (N=',
                 'raise MarketInputError(name, f"client {k[not 1]} (N=', (), id="16cae4f55f"),
    # the validation these faults found missing (the pairs were cast to int, out of range an
    # IndexError; prox_centres' N unchecked: 0 gave inf), taken out again
    pytest.param("ipfl", "local", "fractional indices, for the gradients", "neighbours",
                 distances, "distance_gradients", "pairs = _pairs(neighbours, X.shape[0])",
                 "pairs = np.asarray(neighbours, dtype=np.intp).reshape(-1, 2)", (ip,),
                 id="unchecked-pairs"),
    pytest.param("ipfl", "local", "an entry 0, to prox_centres", "N", distances,
                 "prox_centres", 'N = as_vector("N", N, m=X.shape[0], positive=True)',
                 "N = np.asarray(N, dtype=np.float64)", (mipfl, ip), id="unchecked-prox-N"),
    # the increasing test against a fixed amount (2 noise ** 1e-300 = 2) passed a gain
    # decreasing by less than 2 over the grid; the rounding allowance multiplied by the step's
    # width (not divided) passed a gain convex only far out, where the steps are wide
    pytest.param("ipfl", "local", "a function decreasing by little", None, gains,
                 "_check_shape", "if (steps < -(2 * noise + 1e-300)).any():",
                 "if (steps < -(2 * noise ** 1e-300)).any():", (), id="265f006bba"),
    pytest.param("ipfl", "local", "a function linear up to 2^20 N", None, gains,
                 "_check_shape", "slack = 2 * noise / dx", "slack = 2 * noise * dx", (),
                 id="8d91684083"),
    # 3 x the rounding allowance per slope (not 2): a gain convex 0.2 % past the documented
    # allowance passed
    # the slope named above the first point where a gain's slope rises read slopes[r, k ^ 1]
    # (the one below, where k is odd): "rises from 3.34 ... to 3.34"
    pytest.param("ipfl", "local", "a function linear up to 2^20 N", None, gains,
                 "_check_shape", "to {slopes[r, k + 1]:.6g}", "to {slopes[r, k ^ 1]:.6g}", (),
                 id="3a241d9290"),
    # the absolute amounts all 1.0 (1.0 ** instead of 2.0 **), or their last step dropped
    # (arange to CHECK_SPAN[1] - CHECK_SPAN[0] - 1): a gain convex at 2^49 N, between the
    # multiples of N the grid tries, passed
    pytest.param("ipfl", "local", "a function convex at 2^49 N", None, gains.Gain,
                 "check", "absolute = 2.0 ** (start", "absolute = 1.0 ** (start", (),
                 id="69cd5a59a4"),
    pytest.param("ipfl", "local", "a function convex at 2^49 N", None, gains.Gain,
                 "check", "CHECK_SPAN[1] - CHECK_SPAN[0] + 1, 2.0)",
                 "CHECK_SPAN[1] - CHECK_SPAN[0] - 1, 2.0)", (), id="b887ffd3a6"),
    pytest.param("ipfl", "local", "a function convex 0.2 % past", None, gains,
                 "_check_shape", "slack = 2 * noise / dx", "slack = 3 * noise / dx", (),
                 id="7a9a9101a0"),
    pytest.param("ipfl", "local", "not square (one column short)", "T", selection, "_greedy",
                 "if T.ndim < 2 or T.shape[-1] != T.shape[-2]:", "if T.ndim < 2:", (),
                 id="unchecked-T"),
    # a GameBatch built from arrays checking its fields' number of axes (or of entries)
    # instead of their shape: a q_max of (B, 1) for n >= 2 clients (or (B, 2) for one), a
    # budget of (B, 1), broadcast into games they do not describe
    pytest.param("cpl", "cpl-bisection", "(B, 1) for n >= 2 clients", "q_max",
                 sys.modules["mechanisms.cpl.game"].GameBatch, "__post_init__",
                 "if arr.shape != want:", "if arr.ndim != len(want):", (),
                 id="batch-shape-by-ndim"),
    pytest.param("cpl", "cpl-uniform", "(B, 1), not (B,)", "budget",
                 sys.modules["mechanisms.cpl.game"].GameBatch, "__post_init__",
                 "if arr.shape != want:", "if arr.size != np.prod(want):", (),
                 id="batch-shape-by-size"),
    # the slope allowance relative to the grid's first (steepest) slope, not to the slopes
    # beside the kink: a gain whose slope fell 1000-fold before a kink 0.2 % past it passed
    pytest.param("ipfl", "local", "a function convex 0.2 % past", None, gains, "_check_shape",
                 "np.maximum(np.abs(slopes[:, :-1]), np.abs(slopes[:, 1:]))",
                 "np.maximum(np.abs(slopes[:, :1]), np.abs(slopes[:, 1:]))", (),
                 id="c3999c99a9"),
    # baseline_utilities without validating W (as before): a vector W answered, the
    # others raised numpy's errors naming nothing
    pytest.param("ipfl", "local", "a baseline's aggregation", "W",
                 sys.modules["mechanisms.ipfl.money"], "baseline_support",
                 "W = _aggregation(market, W)", "W = np.asarray(W, dtype=np.float64)", (),
                 id="unchecked-W"),
    # the ratio of the others' data to a subnormal N tested as x + n (always finite): the
    # refusal blamed K/N, not the ratio's overflow
    pytest.param("ipfl", "local", "an entry subnormal (1e-310)", "N", mmarket, "_check_scale",
                 "ratio = np.isfinite(x / n)", "ratio = np.isfinite(x + n)", (),
                 id="60381d27d0"),
    # MarketArrays' refusal of an entry naming the last bad entry, not the first (two bad)
    pytest.param("ipfl", "local", "an entry negative, to MarketArrays (the last two", "N",
                 mmarket.MarketArrays, "__post_init__", "np.argwhere(bad)[0])",
                 "np.argwhere(bad)[-1])", (), id="183a911d0c"),
    # check_distances allowing negative distances by default (documented: refused unless
    # allow_negative=True): the fault also calls it with its defaults
    pytest.param("ipfl", "local", "a negative pair (d_01 = d_10 = -0.5)", "D",
                 mmarket.MarketArrays, "check_distances", "allow_negative: bool = False",
                 "allow_negative: bool = True", (), id="5cf9efac5a"),
    # check_distances allowing asymmetric distances by default (documented: refused unless
    # allow_asymmetric=True; clear passes its option explicitly, so only a direct call sees it)
    *(pytest.param("ipfl", "local", "asymmetric at (0, 1) alone, to Market.check_distances",
                   "D", owner, "check_distances", "allow_asymmetric: bool = False",
                   "allow_asymmetric: bool = True", (), id=f"7567b1b7bf-{owner.__name__}")
      for owner in (mmarket.Market, mmarket.MarketArrays)),
    # the refusal of N (or true_N) summing past the float range never ran: its field
    # written which - "N" (a TypeError) passed every row
    pytest.param("ipfl", "local", "entries summing past the float range", "N", mmarket,
                 "_check_scale", 'MarketInputError(which + "N", f"sums to inf',
                 'MarketInputError(which - "N", f"sums to inf', (), id="c502e7ffc4"),
    pytest.param("ipfl", "local", "entries summing past the float range", "true_N", mmarket,
                 "_check_scale", 'MarketInputError(which + "N", f"sums to inf',
                 'MarketInputError(which - "N", f"sums to inf', (), id="c502e7ffc4-true_N"),
    # alpha's open end tested by identity (0.0 is not alpha: true of any float made at run
    # time) let 0 and negative exponents through; the fault tries 2, just above 1, 0, -0.5
    pytest.param("ipfl", "local", "a power gain of exponent 2", "alpha", gains.PowerGain,
                 "__post_init__", "if not (0.0 < float(self.alpha) <= 1.0):",
                 "if not (0.0 is not float(self.alpha) <= 1.0):", (), id="4c1278eb13"),
    # a gain's values checked against x's shape by identity (never equal: a wrong shape
    # passed) or by order (a shape with one more column than x compares greater: passed);
    # the fault gives both 8 columns and one more than x
    pytest.param("ipfl", "local", "a function of the wrong shape beyond 8 points", None,
                 gains.Gain, "check", "if vals.shape != grid.shape:",
                 "if vals.shape is grid.shape:", (), id="efe7a35e06"),
    pytest.param("ipfl", "local", "a function of the wrong shape beyond 8 points", None,
                 gains.Gain, "check", "if vals.shape != grid.shape:",
                 "if vals.shape < grid.shape:", (), id="4e05bb2cc7"),
    # the dynamic programme's refusal named the buyer int(r) >> m (0 for buyer 2 of a
    # batch's second market of 3 clients: r = 5), not its index in its market
    pytest.param("ipfl", "exact", "'dp' over about 1e12 data for buyer 2", "exact_method",
                 selection, "exact", "{int(r) % m} ({sz.size}", "{int(r) >> m} ({sz.size}",
                 (mipfl,), id="56edffd61c"),
    # posted_pricing_batch(games, shape, /, ...): games= and shape= by keyword, which the
    # documented signature allows, a TypeError
    pytest.param("cpl", "cpl-uniform", "NaN, for posted prices in a batch", None, cbatch,
                 "posted_pricing_batch", "shape, *, responses", "shape, /, responses", (mcpl,),
                 id="11d46d0f48"),
    # a62de503a1 (on cc60ffd's line; main's since): each game's shape must have a positive
    # entry, tested per client instead (axis 0): a batch's all-zero game passed
    pytest.param("cpl", "cpl-uniform", "all zero for the second game of a batch", "shape",
                 cbatch, "posted_pricing_batch", "& (shape > 0).any(axis=1)",
                 "& (shape > 0).any(axis=0)", (mcpl,), id="a62de503a1"),
    # solve_batch(games, /, xtol): games= by keyword, which the documented signature
    # (games, *, xtol) allows, a TypeError
    pytest.param("cpl", "cpl-bisection", "below the spend at q_min, in a batch", None,
                 cbatch, "solve_batch", "games: GameBatch, *, xtol", "games: GameBatch, /, xtol",
                 (mcpl,), id="1e4224b12c"),
]


@pytest.mark.parametrize("family, subject, what, field, owner, name, before, after, aliases",
                         _REFUSED)
def test_a_refusal_off_its_documentation_is_caught(monkeypatch, family, subject, what, field,
                                                   owner, name, before, after, aliases):
    """An unknown name on either side of string order, a length one short, the game a
    batch's refusal names, the point a convex gain's refusal names, a barely convex gain,
    a boundary crossed from the other side:
    refused on every draw unmutated, let through (or misnamed) on every draw mutated."""
    assert _refused_on_every_draw(family, subject, what, field) == [0.0] * 3
    plant(monkeypatch, owner, name, before, after, *aliases)
    assert all(v > 0 for v in _refused_on_every_draw(family, subject, what, field))


def test_a_game_batch_broadcasting_its_fields_is_caught(monkeypatch):
    """The old GameBatch (only a normalised, no shape checked: a q_max of (B, 1) for two
    clients solved as one bound per game): cpl_refuses_bad_input finds it."""
    game = sys.modules["mechanisms.cpl.game"]
    monkeypatch.setattr(game.GameBatch, "__post_init__", lambda self: object.__setattr__(
        self, "a", game.normalised_weights(self.a)))
    assert _caught("cpl-bisection", "cpl_refuses_bad_input", 200)


def test_a_game_batch_answering_values_no_game_allows_is_caught(monkeypatch):
    """A GameBatch built from arrays checked only for shapes (before: a G of NaN solved to a
    NaN q, a negative c or a q_max below q_min answered): cpl_refuses_bad_input finds it,
    through its faults of each field's value in a batch's second game."""
    game = sys.modules["mechanisms.cpl.game"]
    assert not _caught("cpl-bisection", "cpl_refuses_bad_input", 200)
    rules = game._check_values  # one copy for both: a Game keeps its rules here

    def one_game_only(a, *args, batch, **kw):
        return game.normalised_weights(a) if batch else rules(a, *args, batch=batch, **kw)

    monkeypatch.setattr(game, "_check_values", one_game_only)
    assert _caught("cpl-bisection", "cpl_refuses_bad_input", 200)


_GAME = sys.modules["mechanisms.cpl.game"]

# (owner, function, before, after): a CPL game's validation off its documentation, each
# a generated mutant that survived cpl_refuses_bad_input before
_GAME_INPUTS = [
    # the refusal of q_max out of range names entry 0 (d1b729fddf, of Game's own check
    # before one copy served a game and a batch: the mask all True), or the last entry out
    # of range (36cbff9a1f then, 95db693425 now), not the first: the faults put it in the
    # last two entries
    pytest.param(_GAME, "_first", "np.argwhere(bad)[0]", "np.argwhere(bad | True)[0]",
                 id="d1b729fddf"),
    pytest.param(_GAME, "_first", "np.argwhere(bad)[0]", "np.argwhere(bad)[-1]",
                 id="95db693425"),
    # the length test by identity (never true): one q_max entry for several clients is
    # broadcast (numpy's broadcast_to), not refused
    pytest.param(_GAME.Game, "__post_init__", "q_max.shape != (n,)", "q_max.shape is (n,)",
                 id="ed03f321ec"),
    # weights whose sum overflows, scaled, then summed without keepdims: in a batch, numpy's
    # broadcasting error (or the wrong totals where B = n)
    pytest.param(_GAME, "normalised_weights",
                 "keepdims=True))\n        total = a.sum(axis=-1, keepdims=True)",
                 "keepdims=True))\n        total = a.sum(axis=-1, keepdims=False)",
                 id="a5d83c57ce"),
]


@pytest.mark.parametrize("owner, name, before, after", _GAME_INPUTS)
def test_a_game_validated_off_its_documentation_is_caught(monkeypatch, owner, name, before,
                                                          after):
    """cpl_refuses_bad_input holds unmutated and finds each (200 examples, seed 0)."""
    assert not _caught("cpl-bisection", "cpl_refuses_bad_input", 200)
    plant(monkeypatch, owner, name, before, after)
    assert _caught("cpl-bisection", "cpl_refuses_bad_input", 200)


def test_clear_taking_its_arguments_positionally_only_is_caught(monkeypatch):
    """7c186f92d9: `def clear(market, D, rule="local", /, ...)` refuses market=, D=, rule=
    by keyword (a TypeError), which the documented signature allows."""
    module = sys.modules["mechanisms.ipfl.clear"]
    plant(monkeypatch, module, "clear", 'rule: str | Callable = "local",\n    *,',
          'rule: str | Callable = "local",\n    /,', mipfl)
    assert _caught("local", "refuses_bad_input", 200)


# ------------------------------------------------------ values and reports as documented

# (mutant or fault, owner, function, before, after, aliases, subject, property, examples)
_aggregation = sys.modules["mechanisms.cpl.aggregation"]
_errors = sys.modules["mechanisms.errors"]

_CAUGHT = [
    # markets[1].gain fails on the batch of one market (an IndexError)
    pytest.param(mipfl.MarketArrays, "from_markets", "gain = markets[0].gain",
                 "gain = markets[1].gain", (), "local", "one_market", 50, id="c79a67ca5f"),
    # eq11_margins taking the batch axis for m raised on every batch of more than m markets
    # (an IndexError); the batch engine fell back to one instance at a time, where it did
    # not, and the row held: a bulk evaluation raising where no instance does is an error
    pytest.param(selection, "eq11_margins", "m = N.shape[-1]", "m = N.shape[-2]", (mipfl,),
                 "local", "local_optimality", 200, id="1d4bd7c383"),
    # eq11_violations' default rtol -0.999999999 lists nearly every pair
    pytest.param(selection, "eq11_violations", "rtol: float = 1e-9",
                 "rtol: float = -0.999999999", (mipfl,), "local", "local_optimality", 200,
                 id="a0df2e2557"),
    # the buyers with nothing to search left out of the report after the enumerations
    # (counted only at the end, in one jump)
    pytest.param(selection, "exact", "done = int(((enum | (k == 0)) & (Kf > 0)).sum())",
                 "done = int(((enum | (k == -1)) & (Kf > 0)).sum())", (mipfl,), "exact",
                 "one_path", 200, id="ec41353da8"),
    # the last report (buyers, buyers) made twice (as 5bdecb5039 did, `done <= buyers`
    # before the final report of the former code)
    pytest.param(selection, "exact", "    return ExactSelection(",
                 "    if progress is not None:\n        progress(done, buyers)\n"
                 "    return ExactSelection(", (mipfl,), "exact", "one_path", 200,
                 id="last-report-twice"),
    # a price of exactly g_i(N_j) solved for a root (T = N_j) instead of never worth buying
    # (T = 0, Gain.thresholds' rule): conforms places prices at the edges of the rule
    pytest.param(gains.Gain, "thresholds", "(price > limit) & (price < first)",
                 "(price > limit) & (price <= first)", (), "local", "conforms", 50,
                 id="19c7151c15"),
    # the sqrt closed form's large-q asymptote without its correction 1/(3 v^3) (3.0 ** v0
    # for 3.0 * v0): thresholds 1e-12 off, within the oracle's 1e-9, beyond rounding
    pytest.param(gains, "_sqrt_roots", "v_big = v0 + 1.0 / (3.0 * v0 * v0 * v0)",
                 "v_big = v0 + 1.0 / (3.0 ** v0 * v0 * v0)", (), "local", "conforms", 50,
                 id="1b232cc240"),
    # the asymptote's v0 with a floor division (0 for tiny prices: v0 inf, the threshold
    # inf where the root is finite)
    pytest.param(gains, "_sqrt_roots", "np.broadcast_to(np.cbrt(price), shape)[big] *",
                 "np.broadcast_to(np.cbrt(price), shape)[big] //", (), "local", "conforms", 50,
                 id="b52f708cd0"),
    # the baselines' support as a floor division of booleans: the same support, and a
    # RuntimeWarning (divide by zero) on every call; the ledger must be silent
    pytest.param(sys.modules["mechanisms.ipfl.money"], "baseline_support",
                 "support = (W != 0) & ~np.eye", "support = (W != 0) // ~np.eye", (),
                 "box2", "conforms", 50, id="bcb00a3006"),
    # one market's welfare handed back as a 0-d array (np.ndim(out) < 0), not the float
    # ipfl.welfare documents
    pytest.param(sys.modules["mechanisms.ipfl.money"], "welfare", "if np.ndim(out) == 0 else",
                 "if np.ndim(out) < 0 else", (mipfl,), "box2", "one_market", 50,
                 id="22760b7a4e"),
    # the sqrt gain's closed form on one pair given as plain numbers: its blocks read the
    # first axis of shape () (an IndexError, as on main before), or one pair taken for an
    # empty input (np.empty handed back): conforms asks each gain for one pair as numbers
    pytest.param(gains.SqrtGain, "thresholds", "shape = given or (1,)", "shape = given", (),
                 "local", "conforms", 50, id="sqrt-thresholds-of-numbers"),
    pytest.param(gains.SqrtGain, "thresholds", "if T.size == 0:", "if T.size == 1:", (),
                 "local", "conforms", 50, id="3e7acf4e2e"),
    # no early return for no pairs: (3, 0) prices reach fmax.reduce of an empty array
    pytest.param(gains.SqrtGain, "thresholds", "if T.size == 0:", "if T.size < 0:", (),
                 "local", "conforms", 50, id="64b6b97e30"),
    # the generic root finder's brackets compared as h ** l: every bracket halved 200 times
    # (the same roots to the last bits, 4x the calls of the gain): past gains.ROOT_CALLS_MAX
    pytest.param(gains.Gain, "_roots", "wide = h - l > _BISECT_RTOL * h",
                 "wide = h ** l > _BISECT_RTOL * h", (), "exact", "work_bound", 50,
                 id="3710345a3e"),
    # P - 2c instead of P / 2c in cpl.best_response_v0
    pytest.param(cresponse, "best_response_v0", "P / (2.0 * game.c)", "P - (2.0 * game.c)",
                 (mcpl,), "cpl-uniform", "cpl_conforms", 100, id="7225646110"),
    # a price of inf or -inf let through to the best response (only NaN refused): it was
    # answered q_max or q_min (cpl_refuses_bad_input asked only for a NaN price)
    pytest.param(cresponse, "_prices", "if not np.isfinite(P).all():",
                 "if np.isnan(P).any():", (), "cpl-uniform", "cpl_refuses_bad_input", 200,
                 id="prices-inf-accepted"),
    # 2 c % q^2 instead of 2 c q^2 in cpl.spend_scale
    pytest.param(cequilibrium, "spend_scale", "2.0 * game.c * q**2", "2.0 * game.c % q**2",
                 (mcpl,), "cpl-bisection", "cpl_conforms", 100, id="824e555671"),
    # the KKT residual of a one-game answer off its formula (4 c - q^3 / K for 4 c q^3 / K):
    # the first game of each batch is also solved on the one-game path
    pytest.param(cequilibrium, "_kkt_residual",
                 "4.0 * game.c[interior] * q[interior] ** 3 / game.K[interior]",
                 "4.0 * game.c[interior] - q[interior] ** 3 / game.K[interior]", (),
                 "cpl-bisection", "cpl_conforms", 20, id="59aa552bb7"),
    # the one-game KKT residual None where clients are interior (their mask emptied: % and
    # >> of booleans): it was checked only where reported
    pytest.param(cequilibrium, "_kkt_residual",
                 "(q > game.q_min * (1 + 1e-9)) & (q < game.q_max * (1 - 1e-9))",
                 "(q > game.q_min * (1 + 1e-9)) % (q < game.q_max * (1 - 1e-9))", (),
                 "cpl-bisection", "cpl_conforms", 50, id="7d7d8e29ae"),
    pytest.param(cequilibrium, "_kkt_residual",
                 "(q < game.q_max * (1 - 1e-9)) & (game.K > 0)",
                 "(q < game.q_max * (1 - 1e-9)) >> (game.K > 0)", (),
                 "cpl-bisection", "cpl_conforms", 50, id="e116f7bdba"),
    # the clients' utilities of a one-game answer off U = P q - c q^2 - v bound (q^3; %)
    pytest.param(sys.modules["mechanisms.cpl.game"], "client_utilities", "game.c * q**2",
                 "game.c * q** 3", (mcpl, cequilibrium), "cpl-bisection", "cpl_conforms", 50,
                 id="bb0c1cfd55"),
    pytest.param(sys.modules["mechanisms.cpl.game"], "client_utilities",
                 "return P * q - game.c", "return P * q % game.c", (mcpl, cequilibrium),
                 "cpl-uniform", "cpl_conforms", 50, id="526b240d69"),
    # positive_root's closed form below b = -1e100 as 1 / sqrt(b) (NaN), not 1 / sqrt(-b): the
    # best responses to a price near minus the float range (cpl_conforms also asks for them)
    pytest.param(cresponse, "positive_root", "x[deep] = 1.0 / np.sqrt(-b[deep])",
                 "x[deep] = 1.0 / np.sqrt(b[deep])", (), "cpl-uniform", "cpl_conforms", 20,
                 id="e4d3a0a1a3"),
    # the exact solver's bracket for mu started at v + 4 c q_min^3 + K (not / K): above the
    # root where K is large, and the polish recovers it only to 1e-8 (cancellation): the
    # answer spends a binding B to 5e-8 of the spend's scale, not to its rounding
    pytest.param(cbatch, "solve_games", "v + 4.0 * c * q_min**3 / K",
                 "v + 4.0 * c * q_min**3 + K", (), "cpl-bisection", "cpl_conforms", 200,
                 id="3d6c0ee532"),
    # the bisection's info["mu"] 1 ** lambda (= 1), not 1 / lambda
    pytest.param(cequilibrium, "_bisection", "mu = 1.0 / float(out.multiplier[0])",
                 "mu = 1.0 ** float(out.multiplier[0])", (), "cpl-bisection", "cpl_one_game",
                 50, id="925d783f46"),
    # cpl.posted_floor_spend's least scale need ** shape (not / shape): the weighted
    # baseline's floor spend too low, budgets drawn above it leave clients on the floor
    pytest.param(cbatch, "posted_floor_spend", "need / shape, np.inf", "need ** shape, np.inf",
                 (mcpl,), "cpl-bisection", "cpl_beats_baselines", 200, id="33d9d2138f"),
    # cpl.posted_floor_spend's scale 1 (not 0) from a client that reaches the level at any
    # price: the floor spend of p >= 1 where the least scale is below 1; its value pinned to
    # the oracle's (cpl_conforms of a posted price)
    pytest.param(cbatch, "posted_floor_spend", "per = np.where(need <= 0, 0.0,",
                 "per = np.where(need <= 0, 1.0,", (mcpl,), "cpl-uniform", "cpl_conforms", 200,
                 id="ebf1d5d29e"),
    # the line search's account of its grid (info["statuses"]): every count 0.0 (/ 1 for
    # + 1); the points over budget counted 0 (+ 0); its multiplier 1 - mu (not 1 / mu)
    pytest.param(cequilibrium, "_linesearch",
                 "statuses[prob.status] = statuses.get(prob.status, 0) + 1",
                 "statuses[prob.status] = statuses.get(prob.status, 0) / 1", (), "cpl-bisection",
                 "cpl_one_path", 20, id="31fb787285", marks=pytest.mark.slow),
    pytest.param(cequilibrium, "_linesearch",
                 'statuses["over_budget"] = statuses.get("over_budget", 0) + 1',
                 'statuses["over_budget"] = statuses.get("over_budget", 0) + 0', (),
                 "cpl-bisection", "cpl_one_path", 100, id="2407025262",
                 marks=pytest.mark.slow),
    # the line search's multiplier off its documented median of 4 c q^3 / K + v (* K):
    # it was checked only as positive and finite
    pytest.param(cequilibrium, "_linesearch", "4.0 * game.c * q**3 / np.where(",
                 "4.0 * game.c * q**3 * np.where(", (), "cpl-bisection", "cpl_one_path", 20,
                 id="c18d21faeb", marks=pytest.mark.slow),
    pytest.param(cequilibrium, "_finish",
                 "multiplier = 0.0 if not np.isfinite(mu) else 1.0 / mu",
                 "multiplier = 0.0 if not np.isfinite(mu) else 1.0 - mu", (), "cpl-bisection",
                 "cpl_one_path", 20, id="fd11036d5c", marks=pytest.mark.slow),
    # a one-game answer that can be changed after the fact (frozen=False)
    pytest.param(cequilibrium, "Equilibrium", "@dataclass(frozen=True, eq=False)",
                 "@dataclass(frozen=False, eq=False)", (mcpl,), "cpl-uniform", "cpl_one_game",
                 20, id="419d3259ad"),
    # cvxpy's multiplier scaled the wrong way (its value against the bisection's lambda*)
    pytest.param(cequilibrium, "_cvxpy", "lam = float(budget.dual_value) * _scale(game)",
                 "lam = float(budget.dual_value) / _scale(game)", (), "cpl-bisection",
                 "cpl_one_path", 30, id="52ae2f0bbf", marks=pytest.mark.slow),
    # the line search answering q_min, keeping the last grid point instead of the best, its
    # eps0 grid stopping short of the top: each worse than the exact optimum at B - 2 h
    pytest.param(cequilibrium, "_linesearch",
                 "q = np.clip(1.0 / best[1], game.q_min, game.q_max)",
                 "q = np.clip(0.0 / best[1], game.q_min, game.q_max)", (), "cpl-bisection",
                 "cpl_one_path", 30, id="4fa250dc55", marks=pytest.mark.slow),
    pytest.param(cequilibrium, "_linesearch", "prob.value >= best[0]:",
                 "prob.value == best[0]:", (), "cpl-bisection", "cpl_one_path", 30,
                 id="dfde7073fc", marks=pytest.mark.slow),
    pytest.param(cequilibrium, "_linesearch_grid", "np.arange(lo, hi + eps0, eps0)",
                 "np.arange(lo, hi - eps0, eps0)", (), "cpl-bisection", "cpl_one_path", 30,
                 id="001d665096", marks=pytest.mark.slow),
]


# issue 34's generated mutants of mechanisms/distances.py, roles.py, cpl/aggregation.py and
# errors.py, each killed at 200 examples by one of three rows: by (owner, function, row),
# (before, after, mutant id); the function's aliases (where another module imported it by
# name) in _ALIASES
_ROW = {"conforms": ("local", "conforms"), "refuses": ("local", "refuses_bad_input"),
        "cpl": ("cpl-uniform", "cpl_refuses_bad_input"),
        "cplconf": ("cpl-uniform", "cpl_conforms")}
_ALIASES = {"pairwise_distances": (ip,), "prox_centres": (ip,), "inclusive_roles": (ip,),
            "market_roles": (ip,),
            "draw_types": (ip,), "unbiased_aggregate": (mcpl,), "as_int": (ip,),
            "as_real": (ip,), "as_seed": (ip,), "check_size": (ip,), "as_matrix": (mmarket,),
            "check_symmetric": (mmarket,), "replace_atomically": (ip,)}
_ISSUE34 = {
    # mechanisms.distances: a squared distance clamped at -1 (not 0), a cosine at -2 (not -1):
    # out of their documented ranges where rounding leaves them (proofs.conformance.
    # range_gaps)
    (distances, "pairwise_distances", "conforms"): [
        ("np.maximum(D, 0.0, out=D)", "np.maximum(D, -1.0, out=D)", "cd1f1b8eb5"),
        ("np.clip(cos, -1.0, 1.0, out=cos)", "np.clip(cos, -2.0, 1.0, out=cos)", "ccb74c190d"),
        # the default metric cosine (documented: l2sq), here and in the two functions below
        ('metric: str = "l2sq"', 'metric: str = "cosine"', "distances-default-cosine")],
    # one client refused (its bound from inside, proofs.input_properties.
    # _distances_and_roles_edges); a reference's refusal naming the number of clients as the
    # parameters expected
    (distances, "_params", "refuses"): [
        ("X.shape[0] < 1", "X.shape[0] < 2", "ba068c9f4a"),
        # a non-finite theta's refusal naming the first finite entry (seed-35 sample)
        ("np.argwhere(~np.isfinite(X))[0]", "np.argwhere(np.isfinite(X))[0]", "62187c94c2"),
        ("expected ({X.shape[1]},)", "expected ({X.shape[0]},)", "17a15648e4")],
    # an index out of range let through when it is m (an IndexError), or the refusal naming
    # the column (not the pair) it is in; no neighbours read as one pair (0, 0): a gradient
    # where none is asked for (the edges are now answered in their documented shapes)
    # (seed-35 sample) the cosine gradients' reference taken where the metric `is not` the
    # literal "cosine": right for a fresh name, the reference dropped for the literal itself;
    # prox_centres taking any metric from "l2sq" up in string order as l2sq, and refusing an
    # adjacency of the wrong shape naming (p, p) for (m, m)
    # each function's default metric cosine, not l2sq as documented
    (distances, "distance_gradients", "conforms"): [
        ('reference if metric == "cosine" else None',
         'reference if metric is not "cosine" else None', "70c37602f5"),
        ('metric: str = "l2sq"', 'metric: str = "cosine"', "gradients-default-cosine"),
        # a stand-in norm of 0 for a vanishing delta: the same gradients (that pair's is 0
        # either way), after a RuntimeWarning of 0/0 on well-formed input
        ("np.where(ok, nu, 1.0), np.where(ok, nv, 1.0)",
         "np.where(ok, nu, 0.0), np.where(ok, nv, 1.0)", "e936ca280c"),
        ("np.where(ok, nu, 1.0), np.where(ok, nv, 1.0)",
         "np.where(ok, nu, 1.0), np.where(ok, nv, 0.0)", "df1d3c8079")],
    (distances, "prox_centres", "conforms"): [
        ('if metric == "l2sq":', 'if metric is "l2sq":', "3511017566"),
        ('metric: str = "l2sq"', 'metric: str = "cosine"', "prox-default-cosine")],
    (distances, "prox_centres", "refuses"): [
        ('if metric == "l2sq":', 'if metric >= "l2sq":', "f490279835"),
        ("{(X.shape[0],) * 2}", "{(X.shape[1],) * 2}", "d1eac2d135"),
        # eta = inf let through (only eta > 0 asked: the refusal of 0 alone passed it)
        ("np.isfinite(eta) and eta > 0", "eta > 0", "eta-inf-accepted")],
    (distances, "_pairs", "refuses"): [
        ("bad = (pairs < 0) | (pairs >= m)", "bad = (pairs < 0) >> (pairs >= m)", "89bb0ac971"),
        ("bad.any(axis=1)", "bad.any(axis=0)", "afa4b847f0"),
        ("np.zeros((0, 2), dtype=np.intp)", "np.zeros((1, 2), dtype=np.intp)", "2274eecc1e"),
        # (seed-36 sample) triples taken as pairs where their count is even (fewer than 2
        # columns refused, not other than 2); a flat row's last axis read as the second
        ("if raw.shape[-1] != 2", "if raw.shape[-1] < 2", "5f2c9708d3"),
        ("if raw.shape[-1] != 2", "if raw.shape[+1] != 2", "5cc3e0b2a1"),
        # no neighbours given as [] (float64, size 0) refused as not integers (seed 38)
        ("if raw.size == 0:", "if raw.size < 0:", "1696ff9d6a"),
        # unsigned client indices refused as not integers (beyond the generated mutants)
        ('raw.dtype.kind not in "iu"', 'raw.dtype.kind not in "i"', "unsigned-pairs-refused")],
    # mechanisms.roles: the Fig. 5 market's default of 0 attackers (not 1); the traders' costs
    # all C (U(C, C), not U(C/2, C)): off the oracle's seeded draws
    (roles, "inclusive_roles", "conforms"): [
        ("attackers: int = 1", "attackers: int = 0", "4349763239")],
    (roles, "draw_types", "conforms"): [
        ("g.uniform(C / 2, C, m)", "g.uniform(C / 1, C, m)", "d7493331be"),
        ("fixed: bool = False", "fixed: bool = True", "default-fixed-types")],
    # beyond the generated mutants: the shuffle leaving the model as it is, Gaussian noise of
    # variance 4 (both passed "a permutation", "finite"), every attacker a free rider, a
    # random placement that never picks the last client or ignores rng: against the
    # oracle's seeded draws (proofs.oracle.ipfl.attack_draws, free_rider, random_placement)
    (roles, "attack", "conforms"): [
        ("return g.permutation(honest)", "return honest.copy()", "shuffle-identity"),
        ("g.standard_normal(honest.shape)", "g.normal(0.0, 2.0, honest.shape)",
         "gaussian-variance-4")],
    (roles, "attacker_is_free_rider", "conforms"): [
        ("kind in FREE_RIDER_ATTACKS", "kind in ATTACKS", "every-attacker-free")],
    (roles, "market_roles", "conforms"): [
        # the defaults off their documentation: one attacker, placed at random
        ("attackers: int = 0", "attackers: int = 1", "default-one-attacker"),
        ("def market_roles(m: int, *,", "def market_roles(m: int, /,", "1f5c5081f6"),
        ('placement: str = "last"', 'placement: str = "random"', "default-placed-at-random"),
        ("_rng(rng).choice(m, size", "_rng(rng).choice(m - 1, size", "never-the-last"),
        ("_rng(rng).choice(m, size", "_rng(None).choice(m, size", "placement-rng-ignored")],
    # the refusal of a negative block naming no field (a TypeError making it: drawn at 200
    # examples only since every fault is drawn once per table's length of draws); attackers
    # past m accepted
    (roles, "inclusive_roles", "refuses"): [('name + "s"', 'name * "s"', "9106f2d63b")],
    (roles, "market_roles", "refuses"): [
        ("if not 0 <= attackers < m:", "if not 0 <= attackers != m:", "7e1b2d551c")],
    # cpl.unbiased_aggregate's q in (0, 1] crossed from each side and beyond: a negative q
    # accepted (q == 0), q = 1 refused (q >= 1, its bound from inside), 1 < q <= 2 accepted;
    # a q one entry long passed to numpy's broadcasting error (and its refusal, when it was
    # one check with participated's, named participated)
    (_aggregation, "unbiased_aggregate", "cpl"): [
        ("(q <= 0) | (q > 1)", "(q == 0) | (q > 1)", "3b9b400925"),
        ("(q <= 0) | (q > 1)", "(q <= 0) | (q >= 1)", "5aedc24ec4"),
        ("(q <= 0) | (q > 1)", "(q <= 0) | (q > 2)", "819ae75bf2"),
        ("if q.shape != a.shape:", "if q.shape < a.shape:", "q-longer-unrefused"),
        # updates' shape compared by order: a row fewer (numpy's matmul error) or a column
        # fewer (broadcast against w, answered) let through (seed-36 sample)
        ("if U.shape != (a.size, w.size):", "if U.shape > (a.size, w.size):", "0b95d3f90c"),
        # and beyond what the generated mutants reached: a NaN q, a weight <= 0 or NaN, a
        # non-finite w or participant's update accepted (NaN aggregates, silently)
        ("if np.isnan(q).any():", "if np.isnan(q).all():", "q-nan-unrefused"),
        ('as_vector("a", a, positive=True)', 'as_vector("a", a)', "a-negative-unrefused"),
        ("if not np.isfinite(w).all():", "if not np.isfinite(w).any():", "w-nan-unrefused"),
        ("bad = S[:, None] & ~np.isfinite(U)", "bad = S[:, None] & np.isnan(U)",
         "update-inf-unrefused"),
        # its refusal naming the last bad row, or the first bad entry's column (generated
        # mutants of that new line: two bad rows now, the first in column 1)
        ("np.argwhere(bad)[0][0]", "np.argwhere(bad)[-1][0]", "cb18c4cad9"),
        ("np.argwhere(bad)[0][0]", "np.argwhere(bad)[0][1]", "cfb13ea236")],
    # the weights used as given (data sizes d_n: a biased step), an absent client's NaN row
    # read (0 x NaN) or refused: against the oracle at conformance.AGGREGATION_SCALES
    (_aggregation, "unbiased_aggregate", "cplconf"): [
        ("a = normalised_weights(a)", "a = a", "weights-unnormalised"),
        ("U = np.where(S[:, None], U, w[None, :])", "U = U", "absent-nan-read"),
        ("bad = S[:, None] & ~np.isfinite(U)", "bad = ~np.isfinite(U)", "absent-nan-refused")],
    # mechanisms.errors' shared validators crossed from both sides and their bounds from
    # inside (no mechanism passes hi= to as_int, none calls as_seed with a valid seed)
    (_errors, "as_int", "cpl"): [
        ("(hi is not None and value > hi)", "(hi is not None and value < hi)", "5d47ee8309")],
    (_errors, "as_real", "cpl"): [
        ("if hi is not None and v > hi:", "if hi is not None and v >= hi:", "9f69721dfc")],
    (_errors, "as_seed", "cpl"): [("int | np.integer)", "int << np.integer)", "6764d1456d")],
    # what the messages name: the memory a size needs in GiB, an entry's index (3, not (3,))
    # in a vector, the first odd value of an array of objects, booleans as booleans; and
    # datetime64 taken for complex (kind <= "c"; before, dates passed as days since 1970)
    (_errors, "check_size", "refuses"): [
        ("{nbytes / 2**30:.3g}", "{nbytes - 2**30:.3g}", "a2ac6bf6db")],
    (_errors, "_describe", "refuses"): [
        ("if idx.size == 1 else", "if idx.size > 1 else", "5a7d06fb0f")],
    (_errors, "as_floats", "refuses"): [
        ("holds {odd[0]!r}", "holds {odd[-1]!r}", "1df380123b"),
        ('if kind == "b" else "text"', 'if kind is not "b" else "text"', "4ebc28fbda"),
        ('elif kind == "c":', 'elif kind <= "c":', "750ed26dba")],
    # a distance matrix's refusals naming the wrong entry: the last nonzero diagonal entry,
    # the first entry <= 0 or != 0 for the first negative one, the second differing pair;
    # and the symmetry check comparing D with itself (swapaxes(arr, 0, -2) of an (m, m) D)
    (_errors, "as_matrix", "refuses"): [
        ("np.flatnonzero(diag != 0)[0]", "np.flatnonzero(diag != 0)[-1]", "c4520a341f"),
        ("{_describe(arr, arr < 0)}", "{_describe(arr, arr <= 0)}", "97fe4fc497"),
        ("{_describe(arr, arr < 0)}", "{_describe(arr, arr != 0)}", "efb819a5c0")],
    (_errors, "check_symmetric", "refuses"): [
        ("np.swapaxes(arr, -1, -2)", "np.swapaxes(arr, 0, -2)", "f1c64609b3"),
        ("np.argwhere(bad)[0]", "np.argwhere(bad)[1]", "96b2d51d73"),
        # the rounding allowance absolute (1e-9 % scale), or ten times too loose: a D 1e6 in
        # size off by half the allowance refused, one off by twice it accepted
        ("SYMMETRY_RTOL * scale", "SYMMETRY_RTOL % scale", "b42f7dda60"),
        ("SYMMETRY_RTOL * scale", "SYMMETRY_RTOL * scale * 10", "symmetry-10x-loose")],
    # mechanisms.files.replace_atomically (run by no row before): a write failing before its
    # temporary file exists raised FileNotFoundError from the clean-up, not its own error
    # (unlink(missing_ok=False)); a write failing halfway left its temporary file; a
    # temporary file without the path's suffix (a writer inferring the format from it)
    (files, "replace_atomically", "refuses"): [
        ("tmp.unlink(missing_ok=True)", "tmp.unlink(missing_ok=False)", "a23131dbd2"),
        ("tmp.unlink(missing_ok=True)", "pass", "temporary-left"),
        (".tmp{path.suffix}", ".tmp", "suffix-dropped")],
}
_CAUGHT += [pytest.param(owner, name, before, after, _ALIASES.get(name, ()), *_ROW[row], 200,
                         id=mutant, marks=pytest.mark.filterwarnings("ignore::SyntaxWarning"))
            for (owner, name, row), rows in _ISSUE34.items() for before, after, mutant in rows]

@pytest.mark.parametrize("owner, name, before, after, aliases, subject, key, examples",
                         _CAUGHT)
def test_a_value_or_report_off_its_documentation_is_caught(monkeypatch, owner, name, before,
                                                           after, aliases, subject, key,
                                                           examples):
    """from_markets of one market, eq11_violations' default, the exact selection's progress
    reports, the v0 responses and the spend scale pinned to the oracle, a one-game KKT
    residual against its equations, cvxpy's multiplier against lambda*, the line search
    against the exact optimum a grid step's budget lower."""
    assert not _caught(subject, key, examples)
    plant(monkeypatch, owner, name, before, after, *aliases)
    assert _caught(subject, key, examples)


@pytest.mark.parametrize("key", ["truthful_N_over", "thm2"])
def test_a_reference_rule_claiming_false_is_checked_as_claimed(monkeypatch, key):
    """``no_payments`` claiming a property False that share-all's registry entry declares
    "vacuous" (generated mutant be34dda9ce: truthful_N_over=False): the rule's own claim
    stands (proofs.registry.reference_declares), so the row is declared False and the checker,
    which finds no counterexample, reads it not as declared. Before, the registry's "vacuous"
    overrode the claim and the row held."""
    from types import MappingProxyType

    from proofs import IpflMechanism, check_declared
    from proofs.registry import _REFERENCE_EXTRA, reference_declares

    none = mipfl.PAYMENT_RULES["none"]

    def share_all():  # as the registry builds it, from the rule's claims as they are now
        declares = {**SUBJECTS["share-all"].declares,
                    **reference_declares(none.claims, _REFERENCE_EXTRA["share-all"])}
        return IpflMechanism("share-all", "share-all", payments="none", prices="paper",
                             declares=declares)

    assert share_all().declares == SUBJECTS["share-all"].declares
    assert check_declared(share_all(), key, max_examples=50, seed=0, engine="batch")[1]
    monkeypatch.setattr(none, "claims", MappingProxyType({**none.claims, key: False}))
    assert share_all().declares[key] is False
    assert not check_declared(share_all(), key, max_examples=50, seed=0, engine="batch")[1]


def test_a_clearing_that_warns_is_caught(monkeypatch):
    """share-all's adjacency as a floor division of booleans (generated mutant ff80df740c):
    the same 0/1 entries (int8, which the clearing makes bool) with a divide-by-zero
    RuntimeWarning wherever a pure buyer is on sale. It survived every row; conforms now
    holds the clearing silent on well-formed input, in bulk and on one market (the
    Hypothesis engine's path)."""
    from types import MappingProxyType

    from proofs.conformance import ipfl_conforms
    from proofs.ipfl_properties import IpflCase

    rules = sys.modules["mechanisms.ipfl.rules"]
    market = mipfl.Market(N=[100, 200, 300], c=[0.1, np.inf, 0.2], K=[1e4, 1e4, 0.0])
    case = IpflCase(market, np.zeros((3, 3)))
    assert not _caught("share-all", "conforms", 50)
    assert ipfl_conforms(SUBJECTS["share-all"], case) == 0.0
    plant(monkeypatch, rules, "share_all", "(K[..., :, None] > 0) & np.isfinite",
          "(K[..., :, None] > 0) // np.isfinite", mipfl)
    kinds = dict(rules._KINDS)  # the name "share-all" resolves to the planted function
    kinds["rule"] = MappingProxyType({**kinds["rule"], "share-all": rules.share_all})
    monkeypatch.setattr(rules, "_KINDS", kinds)
    assert _caught("share-all", "conforms", 50)
    assert ipfl_conforms(SUBJECTS["share-all"], case) > 0.0


@pytest.mark.parametrize("after", [
    pytest.param("T[stalled] = 1.0", id="70f831d3a6"),
    pytest.param("T[stalled] = -1.0", id="48545996a7"),
    # the line main had: a price of 0 set to inf again, also on the diagonal (documented 0)
    # where a price rule of your own prices a client's own model at 0
    pytest.param("T[stalled] = 0.0\n        T[(P == 0) & (Ki > 0)] = np.inf",
                 id="published-diagonal-inf")])
def test_a_published_never_off_its_convention_is_caught(monkeypatch, after):
    """The published numerics' stalled roots set to 1 or -1 instead of 0: never bought all
    the same (T <= N_j), so the outcome-level oracle took them; conforms now holds a never
    bought pair to the toolkit's convention, T = 0 exactly, and the published thresholds at
    placed prices to the exact ones with the stall rule (the diagonal 0)."""
    th = sys.modules["mechanisms.ipfl.thresholds"]
    assert not _caught("box2", "conforms", 50)
    plant(monkeypatch, th, "thresholds", "T[stalled] = 0.0", after, mipfl)
    monkeypatch.setattr(sys.modules["mechanisms.ipfl.clear"], "solve_thresholds",
                        th.thresholds)
    assert _caught("box2", "conforms", 50)


@pytest.mark.parametrize("guard", [pytest.param(8 + 2**30, id="d17ff66587"),
                                   pytest.param(8 ^ 2**30, id="ef4b37ec0f"),
                                   pytest.param(8 * 2 >> 30, id="23812c2c57")])
@pytest.mark.parametrize("subject, key", [("local", "refuses_bad_input"),
                                          ("cpl-uniform", "cpl_refuses_bad_input")])
def test_a_memory_guard_off_its_documentation_is_caught(monkeypatch, guard, subject, key):
    """mechanisms.errors.MAX_BYTES other than the documented 8 GiB: the refusals name
    another guard, or a size of exactly 8 GiB is refused (input_properties.MEMORY_GUARD,
    written there, not imported)."""
    errors = sys.modules["mechanisms.errors"]
    assert not _caught(subject, key)
    monkeypatch.setattr(errors, "MAX_BYTES", guard)
    assert _caught(subject, key)


@pytest.mark.parametrize("family", ["ipfl", "cpl", "lia"])
def test_every_fault_is_drawn_at_a_small_budget(family):
    """The faults of each table are stratified over the draws (FaultSampler.draw): 200
    draws (seed 0) give every fault and none; uniform draws left about a quarter of the iPFL
    table unseen at this budget (94 of 124)."""
    smp = ip.FaultSampler({"ipfl": ip.ipfl_base_sampler, "cpl": ip.cpl_base_sampler,
                           "lia": ip.lia_base_sampler}[family](), family)
    seen = {int(f) for d in smp.draw(np.random.default_rng(0), 200) for f in smp.faults(d)}
    assert seen == set(range(len(ip.FAULTS[family]) + 1))


def test_prices_where_the_model_difference_adds_nothing_are_caught(monkeypatch):
    """Market's lam defaulting to 1 (generated mutant 42f1d23adc; documented 0), and
    model_difference's inf * 0 written 1 instead of 0 (005018368d: lam 0 with distances whose
    (N_j/N_i) d overflows): conforms prices a Market without lam, lam 0 at overflowing D and
    lam 1e308 at D = 0, each P_ij = c_j exactly."""
    assert not _caught("box2", "conforms", 50)
    defaults = mmarket.Market.__init__.__defaults__
    monkeypatch.setattr(mmarket.Market.__init__, "__defaults__", (1.0, *defaults[1:]))
    assert _caught("box2", "conforms", 50)
    monkeypatch.undo()
    plant(monkeypatch, mmarket, "model_difference", "out[nan] = 0.0", "out[nan] = 1.0",
          mipfl)
    assert _caught("box2", "conforms", 50)


# ------------------------------------------- names compared by identity (proofs.names)

# (mutant or fault, owner, function, before, after, aliases, subject, property, examples):
# each compares a user-facing name with ``is``, true only of the interned literal; the
# checker passes every name as a fresh string (proofs.names.fresh), as a program reading it
# from a file would
_IDENTITY = [
    pytest.param(distances, "distance_gradients", 'reference if metric == "cosine" else None',
                 'reference if metric is "cosine" else None', (), "local", "conforms", 50,
                 id="8fa8484558"),
    pytest.param(sys.modules["mechanisms.ipfl.thresholds"], "thresholds",
                 'if mode == "published":', 'if mode is "published":', (mipfl,), "local",
                 "conforms", 50, id="thresholds-mode-is"),
    pytest.param(sys.modules["mechanisms.lia"], "cluster", 'if mode == "p2p":',
                 'if mode is "p2p":', (), "lia-p2p", "lia_conforms", 50, id="lia-mode-is"),
    pytest.param(cequilibrium, "solve", 'if method == "cvxpy":', 'if method is "cvxpy":',
                 (mcpl,), "cpl-bisection", "cpl_one_path", 20, id="solve-method-is"),
]


@pytest.mark.parametrize("owner, name, before, after, aliases, subject, key, examples",
                         _IDENTITY)
def test_a_name_compared_by_identity_is_caught(monkeypatch, owner, name, before, after,
                                               aliases, subject, key, examples):
    """A metric, threshold mode, clustering mode or solver method compared with ``is``:
    every name the checker passes is a fresh string equal to the literal, so the comparison
    fails where the name is used (each survived on main before proofs.names)."""
    import warnings

    from proofs.names import fresh

    literal = "cosine"
    assert fresh(literal) == literal and fresh(literal) is not literal
    assert not _caught(subject, key, examples)
    with warnings.catch_warnings():  # compiling `x is "literal"` warns
        warnings.simplefilter("ignore", SyntaxWarning)
        plant(monkeypatch, owner, name, before, after, *aliases)
    if name == "thresholds":  # clear imports it under another name
        monkeypatch.setattr(sys.modules["mechanisms.ipfl.clear"], "solve_thresholds",
                            getattr(owner, name))
    assert _caught(subject, key, examples)


# ------------------------------------------------ the data-named-rule guard (lookup)

_GUARD = "module == t or module.startswith(t + \".\")"
_WEAKER = [("module <= t or module.startswith(t + \".\")", "4ae5332a6d"),
           ("module >= t or module.startswith(t + \".\")", "module-ge"),
           ("module == t or module.startswith(t)", "bare-prefix"),
           ("module == t or t.startswith(module)", "descendant"),
           ("module == t or module.startswith(t >> \".\")", "a553a45e25")]


@pytest.mark.parametrize("where", ["_refuse_untrusted", "untrusted"])
@pytest.mark.parametrize("weaker", [pytest.param(w, id=i) for w, i in _WEAKER])
def test_a_weakened_trust_guard_is_caught(monkeypatch, where, weaker):
    """A guard (or its listing, ``untrusted``) that compares module names by order, by a
    bare prefix or the wrong way round trusts ``proofs.rule_properties`` when a block trusts
    only modules around it (proofs.rule_properties.NEIGHBOURS, drawn on the markets of an odd
    number of clients): contains_rules' ``from_data`` behaviour then fails; one raising a
    TypeError on a trusted name fails it too (the listing's error escapes the check: the
    checker's verdict is then "error", which reports the row not as declared)."""
    import mechanisms.lookup as lookup
    from proofs import rule_properties as rp

    smp = ip.ipfl_base_sampler()
    bases = [c for d in smp.draw(np.random.default_rng(0), 8) for c in smp.cases(d)]
    odd = next(b for b in bases if b.market.m % 2)
    even = next(b for b in bases if b.market.m % 2 == 0)

    def violation(base):
        return rp.contained_violation(SUBJECTS["local"],
                                      rp.RuleCase(base, "payments", "from_data", "ipfl"))

    assert violation(odd) == 0.0 and violation(even) == 0.0
    plant(monkeypatch, lookup, where, _GUARD, weaker, *((rp,) if where == "untrusted" else ()))
    try:
        got = violation(odd)
    except TypeError:
        got = 1.0
    assert got == 1.0


# ------------------------------------------------------------------ sealed results (seal)


def _unfreeze(monkeypatch, cls) -> None:
    """``cls`` (a frozen dataclass) made assignable, as ``frozen=False`` would."""
    monkeypatch.setattr(cls, "__setattr__", object.__setattr__)
    monkeypatch.setattr(cls, "__delattr__", object.__delattr__)


def test_an_assignable_cpl_answer_is_caught(monkeypatch):
    """Generated mutant 419d3259ad (cpl.Equilibrium with frozen=False) survived every row:
    cpl_one_game now finds the one-game answer assignable."""
    _unfreeze(monkeypatch, cequilibrium.Equilibrium)
    assert _caught("cpl-bisection", "cpl_one_game", 50)


def test_an_assignable_gain_of_your_own_is_caught(monkeypatch):
    """Generated mutant f198a01557 (CallableGain with frozen=False) survived every row:
    one_market now finds a gain of your own assignable."""
    _unfreeze(monkeypatch, gains.CallableGain)
    assert _caught("local", "one_market", 50)


def test_a_writeable_bulk_answer_is_caught(monkeypatch):
    """cpl.solve_batch's answer was the one result of the toolkit with writeable arrays
    (now sealed in BatchEquilibrium.__post_init__): without the seal, cpl_one_game fails."""
    monkeypatch.setattr(cbatch.BatchEquilibrium, "__post_init__", lambda self: None)
    assert _caught("cpl-bisection", "cpl_one_game", 50)


def test_a_writeable_exact_selection_is_caught(monkeypatch):
    """ipfl.exact's ExactSelection had writeable arrays (adjacency, methods, gaps) while every
    other result of the toolkit is sealed: with the seal taken out again (nothing frozen in
    exact, nothing copied and frozen by the class), one_market finds it on the exact rule."""
    plant(monkeypatch, selection, "exact", "arr.setflags(write=False)",
          "arr.setflags(write=True)", mipfl)
    monkeypatch.setattr(selection.ExactSelection, "__post_init__", lambda self: None)
    assert _caught("exact", "one_market", 50)


def test_freezing_the_callers_array_is_caught(monkeypatch):
    """Generated mutant 885bbdec59 (read_only's ``copy or None`` -> ``copy and None``: the
    caller's D frozen in place instead of a copy) survived every row: one_market now hands
    ipfl.clear a writeable D of the caller's and finds it made read-only."""
    iclear = sys.modules["mechanisms.ipfl.clear"]  # the module (ipfl.clear: the function)
    imarket = sys.modules["mechanisms.ipfl.market"]
    plant(monkeypatch, imarket, "read_only", "copy=copy or None", "copy=copy and None",
          iclear)
    assert _caught("local", "one_market", 50)


def test_the_seal_helpers_count_what_they_say():
    from dataclasses import dataclass

    from proofs.seal import handed_back, unsealed

    @dataclass
    class Open:
        x: np.ndarray

    @dataclass(frozen=True)
    class Shut:
        x: np.ndarray
        inner: object = None

    ro = np.zeros(2)
    ro.setflags(write=False)
    assert unsealed(Open(ro)) == 1 and unsealed(Shut(np.zeros(2))) == 1
    assert unsealed(Shut(ro)) == 0 and unsealed(Shut(ro, Open(ro))) == 1
    assert unsealed(object()) == 1
    mine = {"D": np.ones(2)}
    assert handed_back({"D": np.ones(2)}, mine) == 0
    mine["D"][0] = 2.0
    assert handed_back({"D": np.ones(2)}, mine) == 1
    mine = {"D": np.ones(2)}
    mine["D"].setflags(write=False)
    assert handed_back({"D": np.ones(2)}, mine) == 1


def test_every_batch_result_is_sealed():
    """OutcomeBatch.exact_methods was a writeable array (the docstring: arrays read-only);
    cpl.solve_batch's BatchEquilibrium had writeable arrays."""
    from proofs.seal import unsealed

    m = mipfl.Market(N=[20.0, 30.0, 40.0], c=[0.0, 1.0, 2.0], K=[1e3, 1e3, 1e4], lam=0.5)
    D = np.ones((3, 3)) - np.eye(3)
    out = mipfl.clear_batch(mipfl.MarketArrays.of(m), D[None], "exact")
    assert out.exact_methods is not None and unsealed(out) == 0
    g = mcpl.Game(a=[0.5, 0.5], G=[1.0, 1.0], c=[5.0, 5.0], v=[1.0, 1.0], budget=1.0)
    assert unsealed(mcpl.solve_batch(mcpl.GameBatch.from_games([g]))) == 0
    # ipfl.exact's ExactSelection (a NamedTuple with writeable arrays before), one market and
    # a batch
    P = m.prices(D)
    T = mipfl.thresholds(m, D, prices=P)
    assert unsealed(mipfl.exact(m, P, T)) == 0
    assert unsealed(mipfl.exact(mipfl.MarketArrays.of(m), P[None], T[None])) == 0


# -------------------------------------------- the validators' bounds from inside, accepted

@pytest.mark.parametrize("family, subject, owner, name, before, after, aliases", [
    pytest.param("ipfl", "local", mipfl.rules, "cost_plus", "markup < 0", "markup <= 0",
                 (mipfl,), id="9ad8eecdd4"),
    pytest.param("cpl", "cpl-bisection", sys.modules["mechanisms.cpl.game"],
                 "_check_values", '("R", R, " and >= 1", lambda x: x >= 1)',
                 '("R", R, " and >= 1", lambda x: x > 1)', (), id="R-at-1-refused"),
    # from_markets comparing the markets' gains by identity: two markets built apart with
    # the gain "log" (equal, not the same object) refused
    pytest.param("ipfl", "local", mmarket.MarketArrays, "from_markets",
                 "if any(mk.gain != gain for mk in markets):",
                 "if any(mk.gain is not gain for mk in markets):", (), id="925760d657"),
    # a gain of your own passing NaN on where its input is NaN refused as if the NaN were
    # its own (the test of the inputs' NaN OR-ed instead of AND-ed, for x or for K and N)
    pytest.param("ipfl", "local", gains.CallableGain, "value",
                 "bad = np.isnan(out) & ~np.isnan(xs)", "bad = np.isnan(out) + ~np.isnan(xs)",
                 (), id="400bf46165"),
    pytest.param("ipfl", "local", gains.CallableGain, "value",
                 "& ~np.isnan(Ks) & ~np.isnan(Ns)", "& ~np.isnan(Ks) + ~np.isnan(Ns)", (),
                 id="48772f00d0"),
    # a gain of your own whose g(0) is exactly Gain.check's allowance (1e-9 of its largest
    # value on 0..16 N) refused
    pytest.param("ipfl", "local", gains.Gain, "check", "(np.abs(vals[:, :1]) > 1e-9 * scale)",
                 "(np.abs(vals[:, :1]) >= 1e-9 * scale)", (), id="e1b25e2bef"),
    # a step's rounding allowance taken from the grid's first value and the step's upper
    # one (g[:, :+1], not g[:, :-1]): a gain whose one step down is exactly the documented
    # allowance (1 to 1 - 2^-39) refused as decreasing
    pytest.param("ipfl", "local", gains, "_check_shape", "np.abs(g[:, :-1])",
                 "np.abs(g[:, :+1])", (), id="8bab2fa9d3"),
    pytest.param("lia", "lia-central", sys.modules["mechanisms.lia"], "beneficial_sets",
                 'rtol = as_real("rtol", rtol, lo=0)',
                 'rtol = as_real("rtol", rtol, lo=0, lo_open=True)', (), id="rtol-0-refused"),
    # a row of one value (one client's row, a row given alone) refused as empty (caught
    # before only by the crash it causes on a row of no values)
    pytest.param("lia", "lia-central", sys.modules["mechanisms.lia"], "two_means_1d",
                 "v.shape[-1] == 0:", "v.shape[-1] == 1:", (), id="e5c082c1dc"),
])
def test_a_bound_refused_from_inside_is_caught(monkeypatch, family, subject, owner, name,
                                               before, after, aliases):
    """A validator refusing its own bound (a markup of 0, R = 1, rtol = 0: valid, as
    documented) fails the family's refuses_bad_input on the draws without a fault, which
    also answer each bound from inside (proofs.input_properties.EDGE_ANSWER)."""
    smp = {"ipfl": ip.ipfl_base_sampler, "cpl": ip.cpl_base_sampler,
           "lia": ip.lia_base_sampler}[family]()
    prop = PROPERTIES[{"ipfl": "refuses_bad_input", "cpl": "cpl_refuses_bad_input",
                       "lia": "lia_refuses_bad_input"}[family]]
    bases = [c for d in smp.draw(np.random.default_rng(0), 3) for c in smp.cases(d)]

    def violations():
        return [prop.amount(SUBJECTS[subject], ip.FaultCase(b, 0, family)) for b in bases]

    assert violations() == [0.0] * len(bases)
    plant(monkeypatch, owner, name, before, after, *aliases)
    assert all(v > 0 for v in violations())


# ------------------------- pFedLIA: each rule of validation crossed from both sides

_lia = sys.modules["mechanisms.lia"]

# (mutant, the fault's description and field, function, before, after): each lets one side
# of a rule through, on a batch or on one instance, or names the wrong shape, range or entry
_LIA_REFUSED = [
    pytest.param("empty (0, 0)", "I", "_check", "M.shape[-1] == 0:", "M.shape[-1] < 0:",
                 id="db8f7de9ee"),
    pytest.param("empty, in a batch", "I", "_check", "M.shape[-1] == 0:",
                 "M.shape[- 0] == 0:", id="ab1817a1b7"),
    pytest.param("no samples, in a batch", "model_losses", "influence",
                 "losses.shape[-1] == 0:", "losses.shape[1] == 0:", id="2e808ef206"),
    pytest.param("one entry long", "owner", "influence", "if raw.shape != (n,)",
                 "if raw.shape < (n,)", id="8415439185"),
    pytest.param("one entry short", "base_losses", "influence",
                 'f"must be {(*losses.shape[:-2], n)} like "',
                 'f"must be {(*losses.shape[:+2], n)} like "', id="def41d060b"),
    pytest.param("a client that does not exist", "owner", "influence", 'f"0..{m - 1}")',
                 'f"0..{m & 1}")', id="70cee35efb"),
    pytest.param("an entry NaN", "model_losses", "_describe_bad", "if len(where) == 1 else",
                 "if len(where) > 1 else", id="7708c9b944"),
    pytest.param("2-D labelings", "labels", "adjusted_rand_index", "or a.ndim != 1:",
                 "or a.ndim < 1:", id="0668f27a38"),
    pytest.param("one entry short", "labels", "adjusted_rand_index", "if a.shape != b.shape",
                 "if a.shape is b.shape", id="e8f2169e9a"),
]


@pytest.mark.parametrize("what, field, name, before, after", _LIA_REFUSED)
def test_a_lia_refusal_off_its_rule_is_caught(monkeypatch, what, field, name, before, after):
    """lia_refuses_bad_input crosses each rule of pFedLIA's validation from both sides and
    beyond it, on one instance and on a batch (an empty (0, 0) score matrix and a batch of
    them, losses of no samples in a batch, owners one entry long and 2-D labelings, next to
    the faults one short), and holds what a refusal names to the case: the shape expected
    and got, the valid range of client indices, the first non-finite entry's index. Each
    mutant here but e8f2169e9a (caught before by the crash a labeling one entry long
    causes) survived every lia row at 200 examples before: refused on every draw unmutated,
    let through (or misnamed) on every draw mutated."""
    assert _refused_on_every_draw("lia", "lia-central", what, field) == [0.0] * 3
    plant(monkeypatch, _lia, name, before, after)
    assert all(v > 0 for v in _refused_on_every_draw("lia", "lia-central", what, field))


# -------------------- pFedLIA: every configuration and parameter drawn (lia_conforms)

# function -> (before, after, mutant): each is right on the draws of before (2-12 clients,
# the subjects' tolerances 1e-3 and 1e-12, every row far from the no-split threshold,
# positional arguments, no score exactly 0) and wrong elsewhere
_LIA_CONFIGURATIONS = {
    "beneficial_sets": [
        # the no-split threshold: atol's sign, rtol divided by the row's magnitude, the
        # magnitude of the column (axis -2): rows placed just above and below the
        # threshold, at drawn tolerances both non-zero
        ("np.abs(M).max(axis=-1) + atol", "np.abs(M).max(axis=-1) - atol", "4c95d0c2f5"),
        ("rtol * np.abs(M)", "rtol / np.abs(M)", "7256111f02"),
        ("np.abs(M).max(axis=-1)", "np.abs(M).max(axis=~1)", "f44984f4a0"),
        # the documented default rtol (1e-3) off: the defaults asked by leaving them out
        ("rtol: float = 1e-3", "rtol: float = 1.001", "e2f2c3f01f"),
        # the tolerances positional (I positional-only): a call by keyword fails
        ("(I, *, rtol", "(I, /, rtol", "7e1f224f16"),
    ],
    "two_means_1d": [
        # one client (m = 1): a batch of one-value rows answered with the wrong shape
        ("np.full(s.shape[:-1], m)", "np.full(s.shape[:1], m)", "16c551cedc"),
        # the sums of squares as sums of s / s: a score of exactly 0 divides 0 by 0
        ("np.cumsum(s * s, axis=-1)", "np.cumsum(s / s, axis=-1)", "bde4233869"),
    ],
    # the index of one item (no pairs): NaN
    "adjusted_rand_index": [("if a.size > 1 else", "if a.size >= 1 else", "79944085ef")],
}


@pytest.mark.parametrize("name, before, after", [
    pytest.param(name, before, after, id=mutant)
    for name, rows in _LIA_CONFIGURATIONS.items() for before, after, mutant in rows])
def test_a_lia_configuration_the_draws_missed_is_caught(monkeypatch, name, before, after):
    """lia_conforms draws one client as well as 2-12, asks mechanisms.lia's sets and
    clusters at drawn tolerances (the documented defaults left out of the call; both
    non-zero at three scales; one of them or both 0) with a row of each instance placed
    just above or just below the no-split threshold rtol * max|row| + atol, calls every
    public function by keyword as well as positionally, compares the adjusted Rand index of
    labelings of every size from 0 with the oracle, and gives two_means_1d a row holding an
    exact 0. Each mutant survived every lia row at 200 examples before, but 7256111f02,
    which lia_scale_invariance caught (not lia_conforms)."""
    assert not _caught("lia-central", "lia_conforms", 100)
    plant(monkeypatch, _lia, name, before, after)
    assert _caught("lia-central", "lia_conforms", 100)


# ------------------------------------------------ the adjusted Rand index (lia_conforms)

@pytest.mark.parametrize("before, after", [
    ("if top == expected:", "if top is not expected:"),  # 8eb28855de: always 1.0
    ("top = 0.5 * (sa + sb)", "top = max(sa, sb)"),  # a wrong normaliser: 1 only when equal
    ("index = comb2(table).sum()", "index = comb2(table).sum() + 1e-9"),  # off by 1e-9
], ids=["8eb28855de", "normaliser-max", "off-1e-9"])
def test_the_adjusted_rand_index_is_pinned_to_the_oracle(monkeypatch, before, after):
    """lia_conforms compares mechanisms.lia.adjusted_rand_index of the clusters and the
    planted groups with the oracle's pair counts; the partitions differ in some draws (noise
    up to the gap), so an index that is right only on identical partitions is caught (the
    recovery rows meet identical ones only)."""
    import mechanisms.lia as lia

    assert not _caught("lia-central", "lia_conforms", 100)
    plant(monkeypatch, lia, "adjusted_rand_index", before, after)
    assert _caught("lia-central", "lia_conforms", 100)


# ------------------------------------------ distances at scales where squares over/underflow

@pytest.mark.parametrize("before, after", [
    ("np.where(np.asarray(x) > 0, np.ldexp(1.0, e), 1.0)",
     "np.where(np.asarray(x) <= 0, np.ldexp(1.0, e), 1.0)"),  # 95319bad0c: no scaling
    ("np.ldexp(1.0, e)", "np.ldexp(1.0, e - 600)"),  # a scale that is not the row's own
], ids=["95319bad0c", "wrong-scale"])
def test_distances_are_pinned_at_scales_where_their_squares_overflow(monkeypatch, before,
                                                                       after):
    """conforms compares the cosine distances of the models times 2^-540 and 2^520 with the
    unscaled ones (and l2sq at 2^-+200, times 2^(2k)), bit for bit: a Gram matrix taken
    without each row's own power-of-two scale underflows to orthogonal (distance 1) or
    overflows to NaN there, which the drawn models (entries of order 1) never reach."""
    assert not _caught("local", "conforms", 50)
    plant(monkeypatch, distances, "_pow2", before, after)
    assert _caught("local", "conforms", 50)


def test_a_refusal_showing_a_value_whole_is_caught(monkeypatch):
    """4c17f18a87: _short cutting only values of exactly 80 characters showed a 12 x 12 array
    of text whole (about 1,000 characters on one line); a refusal is at most 300
    characters (input_properties.MESSAGE_MAX; the tables' longest is about 230)."""
    import mechanisms.errors as errors

    assert ip.MESSAGE_MAX == 300
    assert not _caught("local", "refuses_bad_input", 200)
    plant(monkeypatch, errors, "_short", "if len(text) <= 80 else", "if len(text) != 80 else")
    assert _caught("local", "refuses_bad_input", 200)


# ------------------------------------------ one instance alone and in a batch (lia_conforms)

_MEANS = ("    before = _client_means(base, who, counts)  # (..., m): L(theta_0; Z_i)\n"
          "    after = _client_means(losses, who, counts)  # (..., j, i): L(theta_j; Z_i)\n")
_PRODUCT = ("    mean = np.zeros((n, m))\n"
            "    mean[np.arange(n), who] = 1.0 / counts[who]\n"
            "    before = base @ mean\n"
            "    after = losses @ mean\n")


@pytest.mark.parametrize("subject", ["lia-central", "lia-p2p"])
def test_scores_that_depend_on_the_batch_are_caught(monkeypatch, subject):
    """The per-client means as one product with the (n, m) matrix of 1 / |Z_i| (before
    a05e270): BLAS rounds it differently for one instance than for a batch, so an instance's
    scores (and at 2-means ties its sets) depended on the batch that held it. With three or
    more validation samples per client the rounding shows; lia_conforms draws 1 to 6 per
    client and checks instances of each batch alone, bit for bit (with two samples each, as
    the draws had, the product is exact in any order and this survived at any budget)."""
    import mechanisms.lia as lia

    assert not _caught(subject, "lia_conforms", 100)
    plant(monkeypatch, lia, "influence", _MEANS, _PRODUCT)
    r = check(SUBJECTS[subject], PROPERTIES["lia_conforms"], max_examples=100, seed=0,
              engine="batch")
    assert r.verdict == "counterexample"
    assert r.counterexample.rerun() > 0  # alone against batches of its copies


# ------------------------------------- layouts the API allows (leading dimensions, broadcast)

_money = sys.modules["mechanisms.ipfl.money"]

# (mutant, owner, function, before, after, aliases): each is right for the one-dimensional
# batch of the draws and wrong for another layout the signature allows; one_market clears
# the batch also as two leading dimensions and asks paper_prices_arrays for a batch past its
# blocking, a D shared by the batch and one lam for all (``_two_dims_gaps``)
_LAYOUTS = [
    pytest.param(_money, "baseline_support",
                 "~np.eye(W.shape[-1], dtype=bool)", "~np.eye(W.shape[+1], dtype=bool)",
                 (), "local", "one_market", id="40608b05f3"),
    pytest.param(mmarket, "paper_prices_arrays", "N.shape[:-1] + (N.shape[-1],) * 2",
                 "N.shape[:-2] + (N.shape[-1],) * 2", (mipfl,), "local", "one_market",
                 id="ec298f2d10"),
    pytest.param(mmarket, "paper_prices_arrays",
                 "(a[lo:lo + step] if a.shape[0] > 1 else a for a in ops)",
                 "(a[lo:lo + step] if a.shape[1] > 1 else a for a in ops)", (mipfl,),
                 "local", "one_market", id="1c43bff124"),
    # m read off the second axis: right for (m, m) and (B, m, m), not for (B1, B2, m, m)
    pytest.param(selection, "_greedy", "m = T.shape[-1]", "m = T.shape[1]", (), "local",
                 "one_market", id="greedy-shape-1"),
    # pFedLIA's bulk code (lia_conforms lays the batch out as two leading dimensions too)
    pytest.param(sys.modules["mechanisms.lia"], "beneficial_sets",
                 "np.eye(M.shape[-1], dtype=bool)", "np.eye(M.shape[1], dtype=bool)", (),
                 "lia-p2p", "lia_conforms", id="sets-shape-1"),
    pytest.param(sys.modules["mechanisms.lia"], "cluster", "m = sets.shape[-1]",
                 "m = sets.shape[1]", (), "lia-central", "lia_conforms", id="cluster-shape-1"),
]


@pytest.mark.parametrize("owner, name, before, after, aliases, subject, key", _LAYOUTS)
def test_a_fault_of_another_batch_layout_is_caught(monkeypatch, owner, name, before, after,
                                                   aliases, subject, key):
    assert not _caught(subject, key, 50)
    plant(monkeypatch, owner, name, before, after, *aliases)
    assert _caught(subject, key, 50)


# ---------------------------------- the work of the iterative algorithms (cpl/work_bound)


def _caught_standard(subject: str, key: str) -> bool:
    """The row as the standard run checks it (``fedmarket prove --standard --subject S
    --property K``: its engine, seed and the row's budget) finds a counterexample."""
    from proofs.standard import STANDARD

    r = check(SUBJECTS[subject], PROPERTIES[key], max_examples=STANDARD.budget(subject, key),
              seed=STANDARD.seed, engine=STANDARD.engine)
    return r.verdict in ("counterexample", "error")


# (fault, owner, function, before, after, subject, property): each keeps the answers (or
# changes them within the documented rounding) and makes an iterative algorithm do more
# work; the tests caught them only by counting calls (tests/test_cpl_batch.py,
# tests/test_selection.py). The rows read the work each result reports.
_WORK = [
    # the Illinois halving at the upper end dropped: plain regula falsi there (generated
    # mutant 73701da5b3 is the same with `below % (side == -1)`): 2x the CPU of
    # cpl.solve_batch, answers within 4e-16; a game whose budget does not bind takes up to
    # 182 iterations (measured <= 25, declared ONE_SIDED_ROOT_STEPS x 52 = 39)
    pytest.param(cbatch, "_root",
                 "fhi = np.where(above, ft, np.where(below & (side == -1), 0.5 * fhi, fhi))",
                 "fhi = np.where(above, ft, fhi)", "cpl-bisection", "cpl_work_bound",
                 id="illinois-upper"),
    pytest.param(cbatch, "_root", "below & (side == -1)", "below % (side == -1)",
                 "cpl-bisection", "cpl_work_bound", id="73701da5b3"),
    # no bisection step every ROOT_BISECTION_EVERY-th iteration (Illinois alone): faster
    # on most games, past the proven 4 (halvings + 2) where the budget sits a hair above the
    # floor spend or below the q_max spend (the edge stratum: up to 7.5 x)
    pytest.param(cbatch, "_root", "(it % ROOT_BISECTION_EVERY == ROOT_BISECTION_EVERY - 1)",
                 "False", "cpl-bisection", "cpl_work_bound", id="no-bisection-step"),
    # the posted price's bracket grown by 1.5 instead of 2: more doublings than
    # ceil(log2 p) + 1
    pytest.param(cbatch, "posted_pricing_batch", "hi = np.where(short, 2.0 * hi, hi)",
                 "hi = np.where(short, 1.5 * hi, hi)", "cpl-uniform", "cpl_work_bound",
                 id="slow-bracket"),
    # the equilibrium's polish doubling its bracket while it already holds the root
    # (generated mutant 46197fd056: `<<` for `&` makes the doubling test true exactly where
    # it should be false; 60 doublings on every binding game, its bracket 2^60 wider and up
    # to 316 polish iterations instead of 175, answers within the spend's rounding) or
    # starting the polish from a bracket narrower than documented: the polish is proven never
    # to double with xtol = 0 (cpl.solve_batch), so any doubling is work the proof rules out
    pytest.param(cbatch, "solve_games", "grow = binding & ~((f_lo <= 0) & (f_hi >= 0))",
                 "grow = binding & ~((f_lo <= 0) << (f_hi >= 0))", "cpl-bisection",
                 "cpl_work_bound", id="46197fd056"),
    pytest.param(cbatch, "solve_games", "width = 64 * _EPS * np.abs(mu)",
                 "width = 0.5 * _EPS * np.abs(mu)", "cpl-bisection", "cpl_work_bound",
                 id="narrow-polish"),
    # the search in mu starting from a bracket wider than the spec's (every client at q_min
    # to every client at q_max): the work bound counts halvings from the first bracket, so
    # these stay within it while doing more work (generated mutant 0c4cd2228e, 5 c q^3 / K
    # at the top: up to 9 iterations more, q moved by up to 1.5e-8 within the spend's
    # rounding); root_halvings is held to what the spec's bracket needs (the oracle's)
    pytest.param(cbatch, "solve_games", "v + 4.0 * c * q_max**3 / K, -np.inf",
                 "v + 5.0 * c * q_max**3 / K, -np.inf", "cpl-bisection", "cpl_work_bound",
                 id="0c4cd2228e"),
    pytest.param(cbatch, "solve_games",
                 "mu_lo = np.min(np.where(pos, v + 4.0 * c * q_min**3 / K, np.inf), axis=-1)",
                 "mu_lo = 0.5 * np.min(np.where(pos, v + 4.0 * c * q_min**3 / K, np.inf), "
                 "axis=-1)", "cpl-bisection", "cpl_work_bound", id="low-bracket"),
    # a bracket narrower than its stopping width counted as log2 of their ratio (negative,
    # -inf for a bracket of width 0), not as 0 halvings (generated mutant 3bf4151221): only
    # where every client's valuation is far above its bracket (v ~ 2^64 x 4 c q^3 / K), the
    # games the row derives from every fourth drawn one
    pytest.param(cbatch, "_root", "np.clip(width0 / stop, 1.0, np.inf)",
                 "np.clip(width0 / stop, 0.0, np.inf)", "cpl-bisection", "cpl_work_bound",
                 id="3bf4151221"),
    # branch-and-bound pruning only where the bound reaches best * tol (about 0; generated
    # mutant ce04a3e2a5: exact/one_path 17 s instead of 2.7 s, the same answers), or where
    # it beats the incumbent by 5 % of |phi|: the full tree, up to the node limit (15-40 CPU
    # s: the searches of 20,000 nodes in Python)
    pytest.param(selection, "_branch_and_bound", ">= best_val - tol:", ">= best_val * tol:",
                 "exact", "work_bound", id="ce04a3e2a5", marks=pytest.mark.slow),
    pytest.param(selection, "_branch_and_bound", ">= best_val - tol:",
                 ">= best_val - tol + 0.05 * abs(best_val):", "exact", "work_bound",
                 id="prunes-less", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("owner, name, before, after, subject, key", _WORK)
def test_more_work_is_caught_at_the_standard_run(monkeypatch, owner, name, before, after,
                                                 subject, key):
    """The row of the standard run finds each fault that only adds work (it stops at its
    first counterexample: the Illinois faults at draw 2, the dropped bisection step at 477,
    the looser pruning at about 4,050 markets, seed 0); the unmutated rows hold at the
    standard run's budget (test_the_work_rows_hold_at_the_standard_run)."""
    plant(monkeypatch, owner, name, before, after, *((mcpl,) if name ==
                                                     "posted_pricing_batch" else ()))
    assert _caught_standard(subject, key)


@pytest.mark.slow
@pytest.mark.parametrize("subject, key", [
    ("cpl-bisection", "cpl_work_bound"), ("cpl-uniform", "cpl_work_bound"),
    ("cpl-weighted", "cpl_work_bound"), ("cpl-gradient", "cpl_work_bound"),
    ("exact", "work_bound")])
def test_the_work_rows_hold_at_the_standard_run(subject, key):
    """Unmutated, every work row holds at the standard run's budget (100,000 games a CPL
    row, 2-4 CPU s; 20,000 markets for exact, about 12 CPU s)."""
    assert not _caught_standard(subject, key)


# ------------------------- the exact selection's declarations and the sizes and units never drawn
# (the blind-spot sample of mechanisms/ipfl/selection.py, seed 34: survivors of the rows)

_NODE_BOUND = "BB_NODES_FLOOR + BB_NODES_PER_CANDIDATE * (k + 1.0)"


@pytest.mark.parametrize("before, after", [
    # the full tree's size with one level too many (2^(k+2) - 1): more work let through
    pytest.param("full = 2.0 ** (k + 1.0) - 1.0", "full = 2.0 ** (k + 2.0) - 1.0",
                 id="8cd05c9865"),
    # the per-candidate term as 8 % (k + 1) (a bound of 519 nodes for k >= 8) or 8 k: not
    # the documented bound, reached by no drawn buyer
    pytest.param(_NODE_BOUND, _NODE_BOUND.replace("* (k", "% (k"), id="30796a992b"),
    pytest.param(_NODE_BOUND, _NODE_BOUND.replace("1.0)", "0.0)"), id="bd84c97fa3"),
])
def test_a_node_bound_off_its_documented_formula_is_caught(monkeypatch, before, after):
    """work_bound compares ipfl.bb_node_bound with the formula its docs declare (the
    constants written in proofs, not imported) at every k up to 300: a bound that moved
    with the code it bounds let more (or claimed less) work pass."""
    assert not _caught("exact", "work_bound", 20)
    plant(monkeypatch, selection, "bb_node_bound", before, after, mipfl)
    assert _caught("exact", "work_bound", 20)


def test_an_exact_selection_given_no_count_is_caught(monkeypatch):
    """cb42cece5d: `name < "nodes"` for `name == "nodes"` in ExactSelection.__post_init__
    made a selection built without a count hold array(None), not the documented None."""
    plant(monkeypatch, selection.ExactSelection, "__post_init__",
          'if name == "nodes" and value is None:', 'if name < "nodes" and value is None:')
    assert _caught("exact", "work_bound", 20)


@pytest.mark.parametrize("subject", ["box2", "local"])
def test_the_greedy_past_the_small_integer_cache_is_caught(monkeypatch, subject):
    """ebcb678712: T's sides compared by identity (`is not`) are equal objects only up to
    256 (CPython's small integers): a square T of 257 clients refused. one_path clears a
    257-client market with each greedy rule once a batch (the draws stop at 100)."""
    assert not _caught(subject, "one_path", 20)
    plant(monkeypatch, selection, "_greedy", "T.shape[-1] != T.shape[-2]",
          "T.shape[-1] is not T.shape[-2]")
    assert _caught(subject, "one_path", 20)


@pytest.mark.parametrize("name, before, after", [
    # the table's width as total + gcd, not total / gcd: data of about 1e12 in a unit of
    # 2^40 (11 cells) refused as 1e13 cells
    pytest.param("_dp_width", "size.sum() / np.gcd", "size.sum() + np.gcd", id="34eb10789d"),
    # the empty set costing 1: every total shifted by 1 chooses as before, except where the
    # prices are far below 1 (money in another unit), which 1 + price rounds away
    pytest.param("_dp", "best[0] = 0.0", "best[0] = 1.0", id="e043df0181"),
])
def test_the_dynamic_programme_in_other_units_is_caught(monkeypatch, name, before, after):
    """one_path's dynamic programme on huge data amounts of a common unit, in two units
    of money (once a batch): its guard must let the tiny table run, and it must choose the
    enumeration's optimum in both."""
    assert not _caught("exact", "one_path", 20)
    plant(monkeypatch, selection, name, before, after)
    assert _caught("exact", "one_path", 20)


@pytest.mark.parametrize("subject", ["local", "exact"])
def test_eq11_for_buyers_of_small_k_is_caught(monkeypatch, subject):
    """ea44762cb6: eq11_margins exempting every buyer with K <= 1 (`K > 1` for `K > 0`, the
    pure sellers): no drawn K is below 1000. local_optimality repeats Eq. 11's test in
    another unit of money (K x 2^-20) once a batch: the same signs, the same +inf."""
    assert not _caught(subject, "local_optimality", 20)
    plant(monkeypatch, selection, "eq11_margins", "out = np.where(K[..., :, None] > 0, out",
          "out = np.where(K[..., :, None] > 1, out", mipfl)
    assert _caught(subject, "local_optimality", 20)


def test_roots_left_unbisected_at_data_below_one_are_caught(monkeypatch):
    """64c6ebbe5b: the generic root finder (log and power gains) starts bisecting only the
    brackets wider than 4e-16 ** hi (not 4e-16 * hi): at data amounts of a few hundredths a
    bracket [N_j, 2 N_j] counts as narrow and its midpoint is answered. The type spaces draw
    N >= 20, where the two tests agree; conforms' small-data roots (the market's data scaled
    below 1) catch it, for the log gain and the power gain of exponent 0.5 (at 0.9 the roots lie
    past T = 1, where the two tests agree again), and on the row."""
    from proofs import conformance
    N, K = np.array([20.0, 300.0, 1999.0]), np.array([5e4, 0.0, 1e3])
    for gain in (mipfl.LogGain(), mipfl.PowerGain(0.5), mipfl.PowerGain(0.9), mipfl.SqrtGain()):
        gaps = conformance.Gaps()
        conformance._small_data_gaps(gaps, gain, N, K)
        assert gaps.violation == 0.0, gain.name
    plant(monkeypatch, gains.Gain, "_roots",
          "idx = np.flatnonzero(hi_f - lo_f > _BISECT_RTOL * hi_f)",
          "idx = np.flatnonzero(hi_f - lo_f > _BISECT_RTOL ** hi_f)")
    for gain in (mipfl.LogGain(), mipfl.PowerGain(0.5)):  # the gains conforms draws
        gaps = conformance.Gaps()
        conformance._small_data_gaps(gaps, gain, N, K)
        assert gaps.violation > 0.0, gain.name
    assert _caught("local", "conforms")


@pytest.mark.parametrize("before, after", [
    ("moving = ~(np.abs(step) <= 4e-16 * xl)", "moving = ~(np.abs(step) <= 4e-16 / xl)"),
    ("x[deep] = 1.0 / np.sqrt(-b[deep])", "x[deep] = 2.0 / np.sqrt(-b[deep])"),
], ids=["2a623c0c32", "6d622463e6"])
def test_small_roots_off_the_cubic_are_caught(monkeypatch, before, after):
    """2a623c0c32: the cubic's Newton iterates stop once a step is within 4e-16 / x (not
    4e-16 * x): for b = P / (2 c s) far below -1 the root x ~ 1/sqrt(-b) is small, the test
    passes at once and an iterate far from the root is answered (0.71 relative at b = -1e16).
    6d622463e6: the closed form below b = -1e100 twice the root. A clipped best response
    never shows either (the root lies below q_min); cpl_conforms' roots of
    `cpl.unconstrained_response` at placed prices (b from -1e200 to 1e40) catch them, on the
    bulk path and the one-game path."""
    plant(monkeypatch, cresponse, "positive_root", before, after)
    assert _caught("cpl-bisection", "cpl_conforms")
    assert _caught("cpl-gradient", "cpl_conforms")  # no bulk hook: the one-game path


def test_a_rule_refused_only_when_called_is_caught(monkeypatch):
    """09dd53af47: `_check_arity` returning early for every kind of rule (`if not field not
    in ARITY`): 'os:getcwd' as a rule is no longer refused at once, as documented, but
    called, and its TypeError reported as the rule's failure (a RuleFailed naming the slot).
    contains_rules' refusals before any call must not be a RuleFailed."""
    import mechanisms.lookup as lookup
    plant(monkeypatch, lookup, "_check_arity", "if field not in ARITY:",
          "if not field not in ARITY:")
    assert _caught("local", "contains_rules")
    assert _caught("cpl-uniform", "cpl_contains_rules")


_iclear = sys.modules["mechanisms.ipfl.clear"]  # the module (ipfl.clear: the function)


@pytest.mark.parametrize("subject, before, after", [
    # reclear() cleared None (the market asked for when none is given) and refused it
    pytest.param("local", "self.market if market is None else market",
                 "self.market if not market is None else market", id="ab4f410892"),
    # reclear() cleared D=None and refused it
    pytest.param("vcg", "self.D if D is None else D", "self.D if D is not None else D",
                 id="208052d8d0"),
    # reclear(market=...) cleared its own market again, not the one given
    pytest.param("exact", "self.market if market is None else market",
                 "self.market if market is None else self.market", id="reclear-own-market"),
])
def test_reclear_is_caught(monkeypatch, subject, before, after):
    """Outcome.reclear (clear again with the same rules and options) ran on no row:
    one_market now clears the first market's outcome again as it is, and with the second
    market and D, once a batch, against the bulk clearing of those markets."""
    assert not _caught(subject, "one_market", 50)
    plant(monkeypatch, _iclear.Outcome, "reclear", before, after)
    assert _caught(subject, "one_market", 50)


@pytest.mark.parametrize("subject, before, after", [
    # d0f71073be: `not p` of a rule that returns payments (VCG): refused for m >= 2
    pytest.param("vcg", "np.clip(-p, 0.0, None)", "np.clip(not p, 0.0, None)",
                 id="d0f71073be"),
    # earned as the payment's positive part: a client paying the operator also earned it
    pytest.param("vcg", "np.clip(-p, 0.0, None)", "np.clip(p, 0.0, None)", id="earned-sign"),
    # paid as the column sums of the remittances (what a client received)
    pytest.param("local", "paid = R.sum(axis=1)", "paid = R.sum(axis=0)", id="paid-axis"),
])
def test_to_frame_is_caught(monkeypatch, subject, before, after):
    """Outcome.to_frame ran on no row: one_market now tabulates the first market's outcome
    once a batch and checks each column against the outcome (its docstring)."""
    assert not _caught(subject, "one_market", 50)
    plant(monkeypatch, _iclear.Outcome, "to_frame", before, after)
    assert _caught(subject, "one_market", 50)


def test_a_gain_off_at_other_units_of_data_is_caught(monkeypatch):
    """conforms clears each batch's first market in another unit of data too (N times 2^-12
    or 2^30: amounts a Market accepts and the type spaces never draw): a sqrt gain that
    floors N at 1 (a guard against dividing by a tiny N, harmless at the drawn N >= 20) is
    caught there alone (Box 2's small-data roots, which would catch it too, turned off)."""
    from proofs import conformance
    monkeypatch.setattr(conformance, "_small_data_gaps", lambda gaps, gain, N, K: None)
    assert not _caught("local", "conforms")
    plant(monkeypatch, gains.SqrtGain, "value", "return np.sqrt(K / N) - np.sqrt(K / (N + x))",
          "return np.sqrt(K / np.maximum(N, 1.0)) - np.sqrt(K / np.maximum(N + x, 1.0))")
    assert _caught("local", "conforms")
    monkeypatch.setattr(conformance, "_other_data_units", lambda *args: 0.0)
    assert not _caught("local", "conforms")  # nothing else sees it


def test_a_stop_naming_the_outer_rule_is_caught(monkeypatch):
    """aa258525da: a limit's stop names the first rule of your own still running
    (`_running[not 1]`, i.e. [0]), not the innermost: where a rule (called without a limit)
    clears its market under a limit with a sleeping rule of its own, the refusal named the
    outer rule's slot. contains_rules' nested_clear behaviour catches it."""
    import mechanisms.contain as contain
    plant(monkeypatch, contain, "_ring", "raise TimeUp(lim, _running[-1] if _running else None)",
          "raise TimeUp(lim, _running[not 1] if _running else None)")
    assert _caught("local", "contains_rules")


def test_a_limit_stopping_the_rule_it_started_in_is_caught(monkeypatch):
    """2c0c1ea's fault: a limit's ring stopped whatever rule of your own was running, also
    the rule the limit was started in (a rule that clears its market under a limit of its
    own was stopped in the clearing's steps and named). contains_rules' nested_late
    behaviour (the rule's own steps past a limit of its own, then a rule inside it) catches
    it; the rows held before that behaviour."""
    import mechanisms.contain as contain
    from proofs import rule_properties
    plant(monkeypatch, contain, "_ring", "if lim.expired and (lim.anywhere or len(_running) > "
          "lim.depth):", "if lim.expired and (lim.anywhere or _running):")
    assert _caught("local", "contains_rules")
    monkeypatch.setattr(rule_properties, "BEHAVIOURS",
                        tuple(b for b in rule_properties.BEHAVIOURS if b != "nested_late"))
    assert not _caught("local", "contains_rules")


def test_a_power_gain_off_at_exponents_never_drawn_is_caught(monkeypatch):
    """The draws' power gains have the exponents 0.5 and 1 (linear); a Market accepts any in
    (0, 1]. A marginal limit taken as the linear one's (K N_j / N) for every exponent from
    0.95 up (a test written >= 0.95, not == 1) is missed by every drawn market: conforms'
    placed thresholds also solve a power gain of an exponent of EDGE_ALPHAS a batch, whose
    roots are checked against the oracle, and catch it."""
    from proofs import conformance

    def limit(self, Nj, K, N):  # (written out: a planted copy could not call super())
        if float(self.alpha) >= 0.95:
            return np.asarray(K) * np.asarray(Nj) / np.asarray(N)
        return np.zeros(np.broadcast_shapes(np.shape(Nj), np.shape(K), np.shape(N)))

    monkeypatch.setattr(gains.PowerGain, "marginal_limit", limit)
    assert _caught("local", "conforms")
    monkeypatch.setattr(conformance, "EDGE_ALPHAS", (0.5,))  # the drawn exponent only
    assert not _caught("local", "conforms")


def test_the_bisection_refused_by_the_conic_guard_is_caught(monkeypatch):
    """a55bf2bc7b: check_solve's size guard of the conic solvers tested `method is not
    "bisection"`: a method name that is not the interned literal (a user's string, read
    from a file) was refused over CVXPY_MAX_N clients though the bisection has no such
    bound. cpl_refuses_bad_input's draws without a fault check it is accepted."""
    import warnings
    with warnings.catch_warnings():  # Python's own SyntaxWarning for `is not` with a literal
        warnings.simplefilter("ignore", SyntaxWarning)
        plant(monkeypatch, cequilibrium, "check_solve",
              'if method != "bisection" and game.n > CVXPY_MAX_N:',
              'if method is not "bisection" and game.n > CVXPY_MAX_N:', mcpl)
    assert _caught("cpl-bisection", "cpl_refuses_bad_input")


def test_an_enumeration_guard_that_never_refuses_is_caught(monkeypatch):
    """0a53277f00: the enumeration's size estimate written 9 // k 2^k (0 from k = 10) never
    refuses: refuses_bad_input asks for the enumeration on buyers of 27 candidates, refused
    unmutated before any subset is built. Mutated, the enumeration itself is replaced by an
    error here (it would build 2^27 subsets, GiBs): the fault sees it run."""
    what = "'enumeration' for buyers of 27 candidates"
    assert _refused_on_every_draw("ipfl", "local", what, "exact_method") == [0.0] * 3
    plant(monkeypatch, selection, "exact", 'check_size("exact_method", 9.0 * kk * 2.0**kk,',
          'check_size("exact_method", 9.0 // kk * 2.0**kk,', mipfl)

    def enumerated(*args):
        raise RuntimeError("the enumeration ran")

    monkeypatch.setattr(selection, "_enumerate_rows", enumerated)
    assert all(v > 0 for v in _refused_on_every_draw("ipfl", "local", what, "exact_method"))


_processes = sys.modules["mechanisms.processes"]


_ORPHAN_FAULTS = [
    # die_with_parent never asking for the death signal (the watch alone kills, later)
    pytest.param("_death_signal", "libc = libc if libc is not None else _libc()",
                 "libc = libc if not libc is not None else _libc()", id="8895ca5143"),
    pytest.param("_death_signal", "if libc is None:", "if libc is not None:", id="ce01012a52"),
    # a parent that died before the child asked: not seen (is), seen on one side only (<)
    pytest.param("die_with_parent", "if os.getppid() != parent:  # the parent",
                 "if os.getppid() is parent:  # the parent", id="07a5490436"),
    pytest.param("die_with_parent", "if os.getppid() != parent:  # the parent",
                 "if os.getppid() < parent:  # the parent", id="a024a2c772"),
    # the watch: none (while not True), blind (is), ending its child while the parent lives
    # (==), never started (a sleep of -0.5 s raises in its thread), every 1.5 s
    pytest.param("die_with_parent", "while True:", "while not True:", id="404de3f694"),
    pytest.param("die_with_parent", "            if os.getppid() != parent:\n",
                 "            if os.getppid() is parent:\n", id="e6c9f8be63"),
    pytest.param("die_with_parent", "            if os.getppid() != parent:\n",
                 "            if os.getppid() == parent:\n", id="watch-ends-early"),
    pytest.param("die_with_parent", "poll: float = 0.5", "poll: float = -0.5", id="7775884e02"),
    pytest.param("die_with_parent", "poll: float = 0.5", "poll: float = 1.5", id="7a6f20b2ef"),
    # kill_with_parent's preexec_fn: a program ended at once (==, >=), or its starter's death
    # before it asked not seen (is, <); no death signal asked for
    pytest.param("kill_with_parent", "if os.getppid() != parent:", "if os.getppid() == parent:",
                 id="5ebb3a12eb"),
    pytest.param("kill_with_parent", "if os.getppid() != parent:", "if os.getppid() >= parent:",
                 id="bd6a41a298"),
    pytest.param("kill_with_parent", "if os.getppid() != parent:", "if os.getppid() is parent:",
                 id="ba70fb9a47"),
    pytest.param("kill_with_parent", "if os.getppid() != parent:", "if os.getppid() < parent:",
                 id="1d4ebbfb43"),
    pytest.param("kill_with_parent", "_death_signal(sig, libc)", "pass", id="preexec-no-signal"),
    # a pool worker that does not die with its parent, or forgets its queue
    pytest.param("pool_worker", "die_with_parent(parent)", "pass", id="worker-immortal"),
    pytest.param("pool_worker", "_TO_PARENT = to_parent", "_TO_PARENT = None",
                 id="worker-queue-lost"),
]
_LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"),
                            reason="the kernel's death signal")


@_LINUX
@pytest.mark.parametrize("name, before, after", _ORPHAN_FAULTS)
def test_a_process_that_outlives_its_parent_is_caught(monkeypatch, name, before, after):
    """Every process the toolkit starts dies with its parent (mechanisms.processes): the
    generated mutants of the death signal and the watch all survived runs_in_a_worker,
    which never killed a parent. Its orphans check (proofs.process_properties.orphans, on
    half the draws that stop the pool) kills a process of its own whose children were
    started each way and sees each gone, each told of a dead parent ending at once."""
    from proofs import process_properties as pp
    assert pp.orphans() is True
    plant(monkeypatch, _processes, name, before, after)
    assert pp.orphans() is False


@pytest.mark.slow  # 30-50 s each: the row at 200 examples, its pool started again and again
@_LINUX
@pytest.mark.parametrize("name, before, after", _ORPHAN_FAULTS)
def test_a_process_that_outlives_its_parent_is_caught_by_the_row(monkeypatch, name, before,
                                                                 after):
    """The same faults, caught by runs_in_a_worker itself at 200 examples."""
    plant(monkeypatch, _processes, name, before, after)
    assert _caught("local", "runs_in_a_worker")


@pytest.mark.slow  # about 35 s: the row twice at 200 examples
@_LINUX
def test_a_death_signal_never_asked_for_is_caught(monkeypatch):
    """a1921a509b: PR_SET_PDEATHSIG = 2 (PR_GET_PDEATHSIG, which fails on the signal number
    as an address): no child asks for the death signal; a program started with
    kill_with_parent, which has no watch, outlives its starter."""
    assert not _caught("local", "runs_in_a_worker")
    monkeypatch.setattr(_processes, "PR_SET_PDEATHSIG", 2)
    assert _caught("local", "runs_in_a_worker")


_contain = sys.modules["mechanisms.contain"]


@pytest.mark.parametrize("name, before, after", [
    # 52b8d08618: the child a rule ran in waited for with WNOHANG: left a zombie (or running)
    pytest.param("_reap", "os.waitpid(pid, 0)", "os.waitpid(pid, 1)", id="52b8d08618"),
    # 368af72ad8: a rule's error cut to limit | 3 (303) characters and "...": over the limit
    pytest.param("describe", "text[:limit - 3]", "text[:limit | 3]", id="368af72ad8"),
    pytest.param("describe", "if len(text) <= limit", "if len(text) <= 2 * limit",
                 id="described-uncut"),
])
def test_a_rule_child_left_unreaped_or_an_error_shown_uncut_is_caught(monkeypatch, name,
                                                                       before, after):
    """contains_rules: after a call whose rule ran in a child process of its own (under a
    time limit), that child is reaped (the rule writes its pid; no zombie, nothing running);
    the raises rule's error (two lines, 500 characters) is shown on one line cut to 300
    characters ending in "...". Both survived the row before."""
    plant(monkeypatch, _contain, name, before, after)
    assert _caught("local", "contains_rules")


def test_a_stop_raised_inside_a_finalizer_is_caught(monkeypatch):
    """8b04127db0: `_COLLECTING = phase is "start"`: the collector passes its phase as a new
    string, never the literal itself, so no collection is seen and a limit that passes while
    a finalizer runs raises inside it ("Exception ignored", the finalizer cut short).
    contains_rules' finalizer behaviour (an anywhere limit of 0.01 s, a finalizer of 0.03 s)
    catches it."""
    import gc
    import warnings

    from proofs import rule_properties as rp
    assert rp._finalizer_violation() == 0.0
    with warnings.catch_warnings():  # Python's own SyntaxWarning for `is` with a literal
        warnings.simplefilter("ignore", SyntaxWarning)
        plant(monkeypatch, _contain, "_collecting", 'phase == "start"', 'phase is "start"')
    # the callback the first limit registered is the original function: the mutant's instead
    # (gc.callbacks is the collector's own list: changed in place, put back after)
    saved = list(gc.callbacks)
    gc.callbacks[:] = [c for c in saved if getattr(c, "__name__", "") != "_collecting"]
    try:
        assert rp._finalizer_violation() == 1.0
        assert _caught("local", "contains_rules")
        assert _caught("cpl-uniform", "cpl_contains_rules")
    finally:
        gc.callbacks[:] = saved


@pytest.mark.parametrize("before, after", [
    # 1b74f2ea4d: the test for a ring that is not ours made with `is` (never true): a ring
    # of a timer found with no time left, held back as the first limit started, was lost
    pytest.param('if now < _due - _EARLY and _foreign.get("unsure"):',
                 'if now is _due - _EARLY and _foreign.get("unsure"):', id="1b74f2ea4d",
                 marks=pytest.mark.slow),  # about 26 s: the row waits out its draws
    # 626472766f: `or`: with a handler of someone else's in place and no timer of its, our
    # own ring was handed to that handler once
    pytest.param('if now < _due - _EARLY and _foreign.get("unsure"):',
                 'if now < _due - _EARLY or _foreign.get("unsure"):', id="626472766f"),
    # b4de21f492: the timer found's deadline as `fdl % _EARLY` (about 0): a limit's ring
    # that stops nothing (no rule running) rang the foreign timer 60 s early
    pytest.param("and now >= fdl - _EARLY:", "and now >= fdl % _EARLY:", id="b4de21f492"),
])
def test_a_foreign_timer_rung_lost_or_rung_early_is_caught(monkeypatch, before, after):
    """contains_rules' foreign_ring_pending (someone's SIGALRM held back as the call's limit
    starts: their handler called once), foreign_handler_idle (their handler, no timer:
    never called) and foreign_timer_late (a 60 s timer of theirs, a limit passing where no
    rule runs: never called, still running) catch each; they survived the row before."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        plant(monkeypatch, _contain, "_ring", before, after)
    assert _caught("local", "contains_rules")
