"""``fedmarket clear``: clear one iPFL market read from a JSON file."""

from __future__ import annotations

import json
from pathlib import Path

from mechanisms import ipfl

from ..errors import SpecError
from ..results import read_text, write_atomic
from .common import (
    add_command,
    add_progress,
    add_quiet,
    integer,
    print_table,
    progress_reporter,
    writable_file,
)

__all__ = ["add_parser", "load_market_file", "run"]


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "clear", "clear one market read from a JSON file")
    p.add_argument("market_file", type=Path,
                   help="JSON object with N, c, K, D and optional lam, true_N, true_c, "
                        "true_K, gain")
    p.add_argument("--rule", default="local",
                   help="the sellers-selection rule: box2, local, exact, share-all or "
                        "module:function (found in the current folder or on sys.path)")
    p.add_argument("--payments", default="paper",
                   help="the payment rule: paper, vcg, shapley, cost-plus, none or "
                        "module:function")
    p.add_argument("--prices", default="paper",
                   help="the price rule selection uses: paper, cost-plus or module:function")
    p.add_argument("--thresholds", choices=ipfl.MODES, default="exact",
                   help="exact gain thresholds, or the paper's published approximation")
    p.add_argument("--exact-method", choices=ipfl.EXACT_METHODS, default="auto",
                   help="how --rule exact searches each buyer's sellers")
    p.add_argument("--exact-node-limit", type=integer, default=ipfl.NODE_LIMIT,
                   help="--rule exact: branch-and-bound nodes per buyer before it stops "
                        "with a proven gap")
    p.add_argument("--exact-time-limit", type=float, default=None, metavar="SECONDS",
                   help="--rule exact: seconds for all buyers together; when they run out "
                        "the search stops and the proven gap is printed (default: no limit; "
                        "a limit makes the result depend on the machine's speed)")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="stop a rule of your own (--rule/--payments/--prices module:function) "
                        "still running after this many seconds, with one line naming it "
                        "(default: no limit)")
    p.add_argument("--allow-negative-distances", action="store_true",
                   help="accept d_ij < 0 on purpose (individual rationality needs d >= 0)")
    p.add_argument("--allow-asymmetric-distances", action="store_true",
                   help="clear a D with d_ij != d_ji as given, row i being buyer i's own "
                        "distance (e.g. a divergence); refused otherwise, in one line")
    p.add_argument("--csv", type=Path, default=None,
                   help="also write the table as CSV (default: print only)")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def load_market_file(path: Path):
    """(Market, D) from a JSON file; a problem with the file is a SpecError naming
    ``market_file`` or the key, a bad value a MarketInputError naming the field."""
    text = read_text("market_file", path)
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError("market_file", f"{path} is not valid JSON: {exc}") from exc
    except RecursionError:  # 200,000 nested brackets
        raise SpecError("market_file", f"{path} nests its values too deeply; a market file "
                                       "holds numbers, lists of numbers (N, c, K) and a "
                                       "list of lists (D)") from None
    if not isinstance(spec, dict):
        raise SpecError("market_file", "must hold a JSON object")
    missing = [k for k in ("N", "c", "K", "D") if k not in spec]
    if missing:
        raise SpecError("market_file", f"missing keys {missing}; need N, c, K, D")
    unknown = set(spec) - {"N", "c", "K", "D", "lam", "true_N", "true_c", "true_K", "gain"}
    if unknown:
        raise SpecError("market_file", f"unknown keys {sorted(unknown)}; allowed: N, c, K, "
                                       "D, lam, true_N, true_c, true_K, gain")

    def numbers(key, v, depth=1):
        """JSON numbers, or the strings "inf"/"-inf"/"nan" (JSON has no infinity); the
        Market's own checks then say which values are allowed."""
        if v is None and key in ("true_N", "true_c", "true_K"):
            return None
        if depth and isinstance(v, list):
            return [numbers(key, x, depth - 1) for x in v]
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise SpecError(key, f"{v!r} is not a number")
        if isinstance(v, str):
            if v.strip().lower() not in ("inf", "+inf", "-inf", "infinity", "nan"):
                raise SpecError(key, f"{v!r} is not a number (strings allowed: 'inf')")
            return float(v)
        return v

    market = ipfl.Market(
        N=numbers("N", spec["N"]), c=numbers("c", spec["c"]), K=numbers("K", spec["K"]),
        lam=numbers("lam", spec.get("lam", 0.0), 0),
        true_N=numbers("true_N", spec.get("true_N")),
        true_c=numbers("true_c", spec.get("true_c")),
        true_K=numbers("true_K", spec.get("true_K")),
        gain=spec.get("gain", "sqrt"),
    )
    return market, numbers("D", spec["D"], 2)


def run(args) -> int:
    market, D = load_market_file(args.market_file)
    if args.csv:
        writable_file("--csv", args.csv)
    # a rule of the user's own that raises is a RuleFailed naming it (ipfl.clear), one line
    options = dict(rule=args.rule, payments=args.payments, prices=args.prices,
                   thresholds=args.thresholds, exact_method=args.exact_method,
                   exact_node_limit=args.exact_node_limit,
                   exact_time_limit=args.exact_time_limit,
                   allow_negative_distances=args.allow_negative_distances,
                   allow_asymmetric_distances=args.allow_asymmetric_distances,
                   time_limit=args.time_limit)
    with progress_reporter("exact selection: buyers", quiet=args.quiet or args.rule != "exact",
                           every=args.progress_every) as progress:
        out = ipfl.clear(market, D, **options, progress=progress)
    df = out.to_frame()
    df.insert(1, "bought_from", [out.sellers_of(i) for i in range(out.m)])
    if args.csv:
        write_atomic(args.csv, lambda tmp: df.to_csv(tmp, index=False), "--csv")
    title = (f"iPFL market, rule={out.rule} ({out.method}), payments={out.payment_rule}, "
             f"prices={out.price_rule}, thresholds={out.threshold_mode}")
    if args.quiet:
        return 0
    print_table(df, title)
    side = "surplus" if out.budget_surplus > 0 else "deficit"
    print(f"welfare {out.welfare:.6f}; budget residual {out.budget_residual:.2e}"
          + (f" ({side})" if out.budget_residual > 1e-9 else ""))
    if out.exact_stopped:
        limit = ("--exact-time-limit" if out.exact_stopped == "time-limit" else
                 "--exact-node-limit")
        print(f"exact selection stopped early ({limit}): the selection's phi is at most "
              f"{out.exact_gap:.6g} above the optimum (summed over buyers; "
              f"methods per buyer: {out.exact_methods})")
    elif out.rule == "exact":
        print("exact selection: proven optimal for every buyer")
    return 0
