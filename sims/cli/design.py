"""``fedmarket design``: search a space of iPFL payment rules for the best trade-off, place it
on the regret / deficit / welfare frontier beside the reference rules, and certify it with the
property checker on held-out markets."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..results import write_atomic
from .common import (
    add_command,
    add_progress,
    add_quiet,
    print_table,
    progress_reporter,
    writable_folder,
)

__all__ = ["add_parser", "run"]

DEFAULT_GOAL = "IR, budget balance, minimise max regret over N c K both ways"


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "design", "search payment rules for the best trade-off and certify "
                                   "the result")
    p.add_argument("--goal", default=DEFAULT_GOAL,
                   help="constraints and objective as phrases, e.g. 'IR, no deficit, "
                        "regret <= 1%%' (see sims.design.objective)")
    p.add_argument("--space", default="balanced",
                   help="balanced | unbalanced | clipped (the linear family of payment rules "
                        "under the paper's selection; balanced = remittances; clipped = "
                        "remittances clipped to [seller's cost, buyer's marginal]: IR and "
                        "budget balanced by construction); posted | reserve | reduction "
                        "(families that change who trades, sims.design.families: posted "
                        "prices with the selection at those prices, reserve prices on the "
                        "clipped family, McAfee-style trade reduction); or module:function "
                        "taking a parameter vector (give --bounds)")
    p.add_argument("--features", nargs="+", default=None,
                   help="linear family: the features to weight (marginal average cost "
                        "distance fee); posted: the price's terms (base distance ratio "
                        "others fee); reserve: the clipped family's features")
    p.add_argument("--bounds", nargs="+", default=None, metavar="LO:HI",
                   help="a family's parameters: name=LO:HI (e.g. base=0:5, "
                        "seller_reserve=0:5, share=0:1); your own space: LO:HI per parameter")
    p.add_argument("--selection", choices=("exact", "local", "all"), default="exact",
                   help="posted: who trades at the posted prices (exact: each buyer's best "
                        "bundle; local: the paper's greedy; all: every model on offer)")
    p.add_argument("--type-space", type=Path, default=None, metavar="FILE",
                   help="draw the training and held-out markets from this type space (TOML "
                        "or JSON, proofs.typespace; default the checker's distribution); "
                        "recorded in the rule file and used to certify it")
    p.add_argument("--search", choices=("former", "strong", "wider"), default="strong",
                   help="the misreport search (proofs.regret.SEARCHES) of the training, the "
                        "frontier and the certification; strong by default "
                        "(benchmarks/design_search_strength.py)")
    p.add_argument("--joint", action="store_true",
                   help="also measure the held-out frontier with joint misreports (two type "
                        "dimensions at once: N and c, N and K, c and K, each either way); "
                        "columns largest_regret_joint_<pair> and largest_regret_joint")
    p.add_argument("--refuse-outside", action="store_true",
                   help="posted: a client whose report lies outside the type space neither "
                        "buys nor sells")
    p.add_argument("--markets", type=int, default=1000,
                   help="training markets drawn from the checker's distribution")
    p.add_argument("--market-file", type=Path, default=None,
                   help="train on this market (JSON as for 'fedmarket clear'), every client "
                        "in turn the liar, instead of drawn markets")
    p.add_argument("--seed", type=int, default=0, help="training markets' and search's seed")
    p.add_argument("--generations", type=int, default=20, help="differential evolution")
    p.add_argument("--popsize", type=int, default=5,
                   help="population = popsize x parameters (at least 5)")
    p.add_argument("--method", choices=("feasibility", "lagrangian"), default="feasibility",
                   help="constraints by Deb's feasibility rule, or by the augmented "
                        "Lagrangian over --stages stages of --generations each")
    p.add_argument("--stages", type=int, default=4,
                   help="augmented Lagrangian: outer stages (multiplier updates)")
    p.add_argument("--state", type=Path, default=None,
                   help="resume from / write the search state to this JSON file")
    p.add_argument("--heldout-seed", type=int, default=None,
                   help="seed of the held-out markets and of the checker (default: seed + "
                        "1000); must differ from --seed")
    p.add_argument("--heldout-markets", type=int, default=2000,
                   help="held-out markets on which the frontier is measured")
    p.add_argument("--frontier-size", type=int, default=10,
                   help="searched rules placed on the frontier (training Pareto set)")
    p.add_argument("--certify-examples", type=int, default=100_000,
                   help="effective examples per property when certifying (0: skip)")
    p.add_argument("--out", type=Path, default=Path("results/design"), help="output folder")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def _space(args, type_space=None):
    from sims.design import DesignInputError, LinearSpace, UserSpace
    from sims.design.families import PostedSpace, ReductionSpace, ReserveSpace
    from sims.design.space import DEFAULT_BOUNDS as DEFAULTS

    def pair(text, field):
        lo, sep, hi = text.partition(":")
        try:
            if not sep:
                raise ValueError
            return float(lo), float(hi)
        except ValueError:
            raise DesignInputError(field, f"is {text!r}; write LO:HI") from None

    def named_bounds():
        out = {}
        for item in args.bounds or []:
            name, sep, rng = item.partition("=")
            if not sep:
                raise DesignInputError("--bounds", f"is {item!r}; write name=LO:HI")
            out[name] = pair(rng, f"--bounds {name}")
        return out

    if args.refuse_outside and args.space != "posted":
        raise DesignInputError("--refuse-outside", "is an option of --space posted")
    if args.space == "posted":
        return PostedSpace(tuple(args.features or ("base", "distance")), args.selection,
                           named_bounds(), type_space if args.refuse_outside else None)
    if args.space == "reserve":
        reserve = {k: v for k, v in named_bounds().items()
                   if k in ("seller_reserve", "buyer_reserve")}
        base_bounds = dict(DEFAULTS)
        base_bounds.update({k: v for k, v in named_bounds().items() if k not in reserve})
        base = LinearSpace(tuple(args.features or ("marginal", "cost", "distance")), True,
                           base_bounds, clip=True)
        return ReserveSpace(base, reserve)
    if args.space == "reduction":
        if args.features:
            raise DesignInputError("--features", "trade reduction has one parameter, share")
        return ReductionSpace(named_bounds() or {"share": (0.0, 1.0)})
    if args.space in ("balanced", "unbalanced", "clipped"):
        features = tuple(args.features or ("marginal", "average", "cost", "distance"))
        bounds = dict(DEFAULTS)
        if "fee" in features and bounds["fee"] == (0.0, 0.0):
            bounds["fee"] = (-1.0, 1.0)
        for item in args.bounds or []:
            name, sep, rng = item.partition("=")
            if not sep:
                raise DesignInputError("--bounds", f"is {item!r}; write feature=LO:HI")
            bounds[name] = pair(rng, f"--bounds {name}")
        return LinearSpace(features, args.space != "unbalanced", bounds,
                           clip=args.space == "clipped")
    if ":" not in args.space:
        raise DesignInputError("--space", f"is {args.space!r}; balanced, unbalanced, "
                                          "clipped, posted, reserve, reduction or "
                                          "module:function")
    if args.features:
        raise DesignInputError("--features", "only for the linear family")
    return UserSpace(args.space, tuple(pair(b, "--bounds") for b in args.bounds or []))


def _probe(space) -> None:
    """Build the rule at the centre of the space's bounds before the search starts: a space
    of your own whose function fails or returns a rule not marked over_arrays is answered in
    one line here (inside the search, scipy would wrap the error in its own traceback)."""
    from mechanisms.errors import FedmarketError
    from sims.design import DesignInputError

    centre = (space.lower + space.upper) / 2
    try:
        space.rule(centre, name="probe")
    except FedmarketError:
        raise
    except Exception as exc:
        raise DesignInputError("--space", f"{getattr(space, 'spec', space.kind)} failed at "
                                          f"the centre of its bounds {centre.tolist()}: "
                                          f"{type(exc).__name__}: {exc}") from None


def run(args) -> int:
    from sims.design import DesignInputError, draw_markets, load_rule, markets_from, save_rule
    from sims.design.certify import certify
    from sims.design.frontier import (
        corner,
        frontier_table,
        pareto,
        plot_frontier,
        write_frontier,
    )
    from sims.design.objective import parse_goal
    from sims.design.search import SearchConfig, design
    from sims.design.space import space_modules

    from ..results import versions

    t0 = time.perf_counter()
    from proofs.core import CheckerInputError
    from proofs.regret import JOINT_PAIRS
    from proofs.typespace import DEFAULT, load_type_space

    try:
        ts = DEFAULT if args.type_space is None else load_type_space(args.type_space)
    except CheckerInputError as exc:  # one line naming the field
        raise DesignInputError(f"--type-space {exc.field}", exc.message) from None
    space = _space(args, ts)
    _probe(space)
    goal = parse_goal(args.goal)
    config = SearchConfig(markets=args.markets, seed=args.seed, generations=args.generations,
                          popsize=args.popsize, method=args.method, stages=args.stages)
    heldout = args.seed + 1000 if args.heldout_seed is None else args.heldout_seed
    if heldout == args.seed:
        raise DesignInputError("--heldout-seed", f"is {heldout}, the training seed; held-out "
                                                 "markets need another")
    for name in ("heldout_markets", "frontier_size"):
        if getattr(args, name) < 1:
            raise DesignInputError(f"--{name.replace('_', '-')}", "must be >= 1")
    if args.certify_examples < 0:
        raise DesignInputError("--certify-examples", "must be >= 0 (0: skip)")
    out = writable_folder("--out", args.out)
    drawn = args.market_file is None
    if drawn:
        markets = draw_markets(args.markets, args.seed, type_space=ts)
    else:
        from .clear import load_market_file

        market, D = load_market_file(args.market_file)
        markets = markets_from(market, D, source=str(args.market_file))

    with progress_reporter("design: generations", quiet=args.quiet,
                           every=args.progress_every) as bar:
        total = args.generations * (args.stages if args.method == "lagrangian" else 1)
        result = design(space, goal, config, markets=markets, state=args.state,
                        search=None if args.search == "strong" else args.search,
                        progress=None if bar is None else
                        (lambda info: bar(info["generation"] + args.generations
                                          * (info.get("stage", 1) - 1), total)))
    rule_path = save_rule(out / "designed_rule.json", space, result.theta, name="designed",
                          extra={"goal": result.goal, "training": result.markets,
                                 "training_seed": args.seed if drawn else None,
                                 "type_space": ts.to_dict(), "misreport_search": args.search,
                                 "score": result.score, "feasible": result.feasible,
                                 "estimates": result.summary})

    # the frontier on held-out markets: the training Pareto set of the search's candidates
    arc = result.archive
    front = arc[pareto(arc[["score", "mean_rel_deficit"]].to_numpy())]
    front = front.sort_values("score").head(args.frontier_size - 1)
    thetas = [result.theta] + [r[list(space.names)].to_numpy(float) for _, r in
                               front.iterrows()]
    names = ["designed"] + [f"candidate {k}" for k in range(1, len(thetas))]
    test = draw_markets(args.heldout_markets, heldout, type_space=ts)
    with progress_reporter("frontier: rules measured", quiet=args.quiet,
                           every=args.progress_every) as bar:
        table = frontier_table(space, thetas, test, goal=goal, names=names, progress=bar,
                               search=args.search, joint=args.joint or goal.joint)
    statements = [corner(table, ir=True, max_deficit=0.0, regret=0.0),
                  corner(table, ir=True, max_deficit=0.0, regret=0.01)]
    provenance = {"command": "fedmarket design", "goal": result.goal,
                  "type_space": ts.to_dict(), "misreport_search": args.search,
                  "joint_misreports": [list(p) for p in JOINT_PAIRS]
                  if args.joint or goal.joint else [],
                  "space": space.to_json(), "search": vars(config) | {"mutation":
                                                                      list(config.mutation)},
                  "training": result.markets, "heldout": test.source,
                  "heldout_seed": heldout, "corners": statements,
                  "generations": result.generations, "evaluations": result.evaluations,
                  "stages": result.extra.get("stages"),
                  "search_seconds": result.seconds, "versions": versions()}
    write_frontier(table, out, provenance)
    import matplotlib

    matplotlib.use("Agg")
    dims = sorted({d for d, _ in goal.combos}, key="NcK".index)
    axes = plot_frontier(table, dims=dims)
    fig = axes[0].figure
    fig.suptitle(f"{test.size} held-out markets (seed {heldout})", fontsize=9)
    write_atomic(out / "frontier.png", lambda tmp: fig.savefig(tmp, dpi=120), "--out")

    cert = None
    if args.certify_examples:
        with progress_reporter("certify: properties", quiet=args.quiet,
                               every=args.progress_every) as bar:
            # the exported file, loaded back: what is certified is what was saved
            # the space's modules are the ones you named (--space) for this command
            cert = certify("designed", load_rule(rule_path, space_modules(space.to_json())),
                           seed=heldout,
                           training_seed=args.seed, examples=args.certify_examples,
                           estimates=result.summary, progress=bar, type_space=ts,
                           search=args.search)
        write_atomic(out / "certification.csv", lambda tmp: cert.to_csv(tmp, index=False),
                     "--out")
    text = json.dumps(
        {**{k: v for k, v in provenance.items() if k != "versions"},
         "params": result.params, "score": result.score, "feasible": result.feasible,
         "rule_file": rule_path.name, "seconds": time.perf_counter() - t0},
        indent=2, default=str) + "\n"
    write_atomic(out / "design.json", lambda tmp: tmp.write_text(text), "--out")
    if args.quiet:
        return 0
    print(f"designed rule ({result.goal}): "
          + ", ".join(f"{k} {v:.4g}" for k, v in result.params.items())
          + f"; training score {result.score:.4g} (the goal's statistic: a regret relative "
          "to the utility level, 0.01 = 1 %; a deficit share with a regret cap; plus "
          "penalties when infeasible) "
          + ("(feasible)" if result.feasible else "(INFEASIBLE)"))
    cols = ["rule", "family", "goal_rel_regret",
            *(f"largest_regret_{d}" for d in dims),
            *(["largest_regret_joint"] if args.joint or goal.joint else []), "ir_rate",
            "deficit_rate",
            "welfare_share", "feasible", "admissible", "on_frontier"]
    print_table(table[cols], f"frontier on {test.source} (goal_rel_regret: the goal's "
                             "regret / the utility level; largest_regret_*: utility units"
                             + ("; largest_regret_joint: two dimensions lied about at once, "
                                "the largest over the pairs (frontier.csv has each pair)"
                                if args.joint or goal.joint else "")
                             + "; ir_rate, deficit_rate: shares of markets)")
    for s in statements:
        print("corner:", s)
    print(f"measured and certified on the {ts.describe()}")
    if cert is not None:
        print_table(cert[["property", "verdict", "discriminating", "failures",
                          "largest_violation", "search_estimate"]],
                    f"certification on held-out seed {heldout} ({args.certify_examples} "
                    "effective each; largest_violation: the largest over them all), on type "
                    f"space {ts.name!r}, misreport search {args.search}")
    print(f"wrote {out}/ (designed_rule.json/.py, frontier.csv/.json/.png, design.json"
          f"{', certification.csv' if cert is not None else ''})")
    return 0
