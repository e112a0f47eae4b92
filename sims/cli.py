"""The ``fedmarket`` command.

    fedmarket market [--rounds 20] [--rule local] [--seed 0] [--out results/market]
    fedmarket cpl [--budget 15] [--points 400] [--sweep 5 40 8] [--out results/cpl]
    fedmarket train --algorithm ipfl fedavg --dataset digits --rounds 10 [--out DIR]
    fedmarket sweep [SPEC.toml | --preset demo] [--executor processes] [--report]
    fedmarket report RESULTS
    fedmarket prove [--examples 200] [--exhaustive] [--markdown docs/reference-theorems.md]
    fedmarket clear market.json [--rule local] [--thresholds exact] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from mechanisms import ipfl
from mechanisms.errors import MarketInputError

from .inclusive import ATTACKS, InclusiveMarket, run_inclusive_market


def _console():
    try:
        from rich.console import Console

        return Console(width=max(Console().width, 120))
    except ImportError:  # pragma: no cover - rich is in the sims extra
        return None


def _print_table(df, title: str) -> None:
    console = _console()
    if console is None:  # pragma: no cover
        print(title)
        print(df.to_string(index=False))
        return
    from rich.table import Table

    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col), justify="right" if df[col].dtype.kind in "fiu" else "left")
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append(f"{v:.6g}")
            elif isinstance(v, list):
                cells.append(",".join(map(str, v)) or "-")
            else:
                cells.append(str(v))
        table.add_row(*cells)
    console.print(table)


def _cmd_market(args) -> int:
    defaults = {f.name: f.default for f in fields(InclusiveMarket)}
    cfg = InclusiveMarket(
        rounds=args.rounds,
        rule=args.rule,
        thresholds=args.thresholds,
        attack=args.attack,
        metric=args.metric,
        seed=args.seed,
        lam=args.lam if args.lam is not None else defaults["lam"],
    )
    out = Path(args.out)
    console = _console()
    if console is not None and not args.quiet:
        from rich.progress import Progress

        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("clearing rounds", total=cfg.rounds)
            result = run_inclusive_market(cfg, progress=lambda d, t: bar.update(task, completed=d))
    else:
        result = run_inclusive_market(cfg)
    from .results import write_table

    summary = result.summary()
    rounds_csv, _ = write_table(result.rounds, out / "rounds.csv", result.provenance)
    write_table(summary, out / "summary.csv", result.provenance)
    png = out / "transactions.png"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plots import plot_transaction_graph

    fig, ax = plt.subplots(figsize=(8, 7))
    plot_transaction_graph(result.flows, result.roles, ax=ax,
                           title=f"iPFL inclusive market: money flows over {cfg.rounds} rounds")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    if not args.quiet:
        _print_table(summary, f"Inclusive market (Fig. 5), rule={cfg.rule}, seed={cfg.seed}")
        honest = summary[summary.role != "attacker"]
        attackers = summary[summary.role == "attacker"]
        print(f"attacker isolated: {bool((attackers.earned == 0).all())}; "
              f"min honest utility {honest.utility.min():.3f}; "
              f"budget residual {abs(result.rounds.payment.sum()):.2e}")
        print(f"wrote {rounds_csv}, {out / 'summary.csv'}, {png}")
    return 0


def _load_market_file(path: Path):
    try:
        spec = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise MarketInputError("market_file", f"{path} does not exist") from exc
    except json.JSONDecodeError as exc:
        raise MarketInputError("market_file", f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(spec, dict):
        raise MarketInputError("market_file", "must hold a JSON object")
    missing = [k for k in ("N", "c", "K", "D") if k not in spec]
    if missing:
        raise MarketInputError("market_file", f"missing keys {missing}; need N, c, K, D")
    unknown = set(spec) - {"N", "c", "K", "D", "lam", "true_N", "true_c", "gain"}
    if unknown:
        raise MarketInputError("market_file", f"unknown keys {sorted(unknown)}")

    def floats(v):  # JSON has no inf: accept the string "inf"
        return [float(x) for x in v] if isinstance(v, list) else v

    market = ipfl.Market(
        N=floats(spec["N"]), c=floats(spec["c"]), K=floats(spec["K"]),
        lam=spec.get("lam", 0.0),
        true_N=floats(spec.get("true_N")), true_c=floats(spec.get("true_c")),
        gain=spec.get("gain", "sqrt"),
    )
    return market, spec["D"]


def _cmd_clear(args) -> int:
    market, D = _load_market_file(args.market_file)
    out = ipfl.clear(market, D, rule=args.rule, thresholds=args.thresholds,
                     allow_negative_distances=args.allow_negative_distances)
    df = out.to_frame()
    df.insert(1, "bought_from", [out.sellers_of(i) for i in range(out.m)])
    if args.csv:
        df.to_csv(args.csv, index=False)
    title = f"iPFL market, rule={out.rule} ({out.method}), thresholds={out.threshold_mode}"
    _print_table(df, title)
    print(f"welfare {out.welfare:.6f}; budget residual {out.budget_residual:.2e}")
    return 0


def _cmd_cpl(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .cpl_game import CplBenchmark, budget_sweep, compare_pricing
    from .plots import plot_budget_sweep, plot_cpl_participation, plot_cpl_prices
    from .results import write_table

    bench = CplBenchmark(clients=args.clients, c=args.c, v_mean=args.v_mean, G=args.G,
                         budget=args.budget, alpha=args.alpha, R=args.R, q_min=args.q_min,
                         q_max=args.q_max, seed=args.seed)
    game = bench.game()
    out = Path(args.out)
    console = _console()
    if console is not None and not args.quiet:
        with console.status("solving") as status:
            table, results = compare_pricing(
                game, points=args.points, progress=lambda n: status.update(f"solving: {n}"))
    else:
        table, results = compare_pricing(game, points=args.points)
    write_table(table, out / "comparison.csv", bench.provenance())
    eq = results["bisection"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plot_cpl_prices(game, eq, ax=axes[0])
    plot_cpl_participation(game, eq, ax=axes[1])
    fig.tight_layout()
    fig.savefig(out / "prices.png", dpi=110)
    plt.close(fig)
    written = [out / "comparison.csv", out / "prices.png"]
    if args.sweep:
        budgets = np.linspace(args.sweep[0], args.sweep[1], int(args.sweep[2]))
        sweep = budget_sweep(game, budgets)
        write_table(sweep, out / "budget_sweep.csv", bench.provenance())
        fig, ax = plt.subplots(figsize=(6, 4))
        plot_budget_sweep(sweep, ax=ax)
        fig.tight_layout()
        fig.savefig(out / "budget_sweep.png", dpi=110)
        plt.close(fig)
        written += [out / "budget_sweep.csv", out / "budget_sweep.png"]
    if not args.quiet:
        _print_table(table, f"CPL game: N={game.n}, B={game.budget}, seed={args.seed}")
        print(f"lambda* = {eq.multiplier:.6g}, v^t = {eq.v_threshold:.6g}, "
              f"KKT residual {eq.kkt_residual}, budget residual {eq.budget_residual:.1e}")
        print("wrote " + ", ".join(map(str, written)))
    return 0


def _cmd_prove(args) -> int:
    from proofs.registry import PROPERTIES, SUBJECTS
    from proofs.report import frame, markdown, run_report

    for name in args.subject or []:
        if name not in SUBJECTS:
            raise MarketInputError("subject", f"unknown {name!r}; choose from {list(SUBJECTS)}")
    for key in args.property or []:
        if key not in PROPERTIES:
            raise MarketInputError("property", f"unknown {key!r}; choose from "
                                               f"{list(PROPERTIES)}")
    if args.examples < 1:
        raise MarketInputError("examples", f"is {args.examples}; must be >= 1")
    console = _console()
    if console is not None and not args.quiet:
        with console.status("checking") as status:
            results = run_report(examples=args.examples, seed=args.seed,
                                 subjects=args.subject, properties=args.property,
                                 exhaustive=args.exhaustive,
                                 progress=lambda s, k: status.update(f"checking {k} on {s}"))
    else:
        results = run_report(examples=args.examples, seed=args.seed, subjects=args.subject,
                             properties=args.property, exhaustive=args.exhaustive)
    df = frame(results)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(
            f"# Theorem report\n\n{args.examples} examples per property (seed {args.seed})"
            f"{', plus the exhaustive tiny-market grid' if args.exhaustive else ''}.\n\n"
            + markdown(results))
    if not args.quiet:
        shown = df.drop(columns=["counterexample", "as_declared", "preconditions", "seconds"])
        _print_table(shown, f"Theorem report: {args.examples} examples per property")
        bad = df[~df.as_declared]
        print(f"{len(df) - len(bad)} of {len(df)} checks as declared"
              + ("" if bad.empty else f"; NOT as declared: {bad.property.tolist()}"))
        for r in df[df.counterexample.map(lambda v: isinstance(v, str))].itertuples():
            print(f"\n# counterexample: {r.property} ({r.subject})\n{r.counterexample}")
    return 0 if df.as_declared.all() else 1


def _cmd_train(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from learning.algorithms import TrainConfig, run

    from .plots import plot_accuracy
    from .results import write_table

    cfg_fields = {f.name for f in fields(TrainConfig)}
    common = {k: v for k, v in vars(args).items() if k in cfg_fields and v is not None}
    out = Path(args.out)
    results = []
    console = _console()
    for algorithm in args.algorithm:
        cfg = TrainConfig(**{**common, "algorithm": algorithm})
        if console is not None and not args.quiet:
            from rich.progress import Progress

            with Progress(console=console, transient=True) as bar:
                task = bar.add_task(f"{algorithm}: rounds", total=cfg.rounds)
                res = run(cfg, progress=lambda d, t, task=task: bar.update(task, completed=d))
        else:
            res = run(cfg)
        results.append(res)
        write_table(res.frame, out / f"{algorithm}.parquet", res.provenance())
        if "influence" in res.extras:
            from .plots import plot_influence

            fig, ax = plt.subplots(figsize=(7, 6))
            plot_influence(res.extras["influence"], res.extras["clusters"], ax=ax)
            fig.tight_layout()
            fig.savefig(out / f"{algorithm}_influence.png", dpi=110)
            plt.close(fig)
            (out / f"{algorithm}_clusters.json").write_text(json.dumps(
                {"clusters": res.extras["clusters"], "influence": res.extras["influence"]}))
        if not args.quiet:
            final = res.final()
            _print_table(final, f"{algorithm}: after {cfg.rounds} rounds ({res.seconds:.1f} s)")
            print(f"{algorithm}: mean personalised accuracy "
                  f"{final.acc_personalised.mean():.4f}, mean cumulative utility "
                  f"{final.utility.mean():.4f}")
    frame = pd.concat([r.frame for r in results], ignore_index=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    plot_accuracy(frame, ax=ax)
    ax.set_title(f"{args.dataset}, {args.partition}, {args.clients} clients")
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=110)
    plt.close(fig)
    if not args.quiet:
        print(f"wrote {out}/<algorithm>.parquet (+ .json) and {out / 'accuracy.png'}")
    return 0


def _cmd_sweep(args) -> int:
    from .report import write_report
    from .sweep import PRESETS, expand, load_toml, run_sweep

    if (args.spec is None) == (args.preset is None):
        raise MarketInputError("spec", "give a TOML spec file or --preset (not both)")
    if args.preset is not None and args.preset not in PRESETS:
        raise MarketInputError("preset", f"unknown {args.preset!r}; choose {sorted(PRESETS)}")
    spec = PRESETS[args.preset] if args.preset else load_toml(args.spec)
    if args.spec is not None:  # custom rules in the spec may live beside it
        sys.path.insert(0, str(Path(args.spec).resolve().parent))
    cells = expand(spec)
    console = _console()
    if console is not None and not args.quiet:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                      transient=True) as bar:
            task = bar.add_task("cells", total=len(cells))
            stats = run_sweep(cells, args.out, executor=args.executor, workers=args.workers,
                              ray_address=args.ray_address,
                              progress=lambda d, t: bar.update(task, completed=d))
    else:
        stats = run_sweep(cells, args.out, executor=args.executor, workers=args.workers,
                          ray_address=args.ray_address)
    if not args.quiet:
        print(f"{stats['cells']} cells: {stats['ran']} run, {stats['skipped']} already done; "
              f"{stats['wall_s']:.1f} s wall, {stats['work_s']:.1f} s of cell work "
              f"({args.executor})")
    if args.report:
        md, page = write_report(args.out)
        if not args.quiet:
            print(f"report: {md} and {page}")
    return 0


def _cmd_report(args) -> int:
    from .report import write_report

    if not (Path(args.results) / "store.sqlite").exists():
        raise MarketInputError("results", f"{args.results} holds no sweep store (store.sqlite)")
    md, page = write_report(args.results)
    print(f"wrote {md} and {page}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fedmarket", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    mk = sub.add_parser("market", help="run the paper's inclusive market (Fig. 5)")
    mk.add_argument("--rounds", type=int, default=20)
    mk.add_argument("--rule", choices=ipfl.RULES, default="local")
    mk.add_argument("--thresholds", choices=ipfl.MODES, default="exact")
    mk.add_argument("--attack", choices=ATTACKS, default="gaussian")
    mk.add_argument("--metric", choices=("l2sq", "cosine"), default="l2sq")
    mk.add_argument("--lam", type=float, default=None, help="lambda (default 2, the paper's)")
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--out", default="results/market", help="folder for CSV, JSON and PNG")
    mk.add_argument("--quiet", action="store_true", help="write files, print nothing")
    mk.set_defaults(func=_cmd_market)

    cp = sub.add_parser("cpl", help="solve the CPL pricing game (Luo et al.) and compare")
    cp.add_argument("--clients", type=int, default=40)
    cp.add_argument("--c", type=float, default=5.0, help="cost coefficient c_n")
    cp.add_argument("--v-mean", type=float, default=100.0, help="mean of v_n ~ Exp")
    cp.add_argument("--G", type=float, default=1.0, help="gradient-norm bound G_n")
    cp.add_argument("--budget", type=float, default=15.0)
    cp.add_argument("--alpha", type=float, default=1.82)
    cp.add_argument("--R", type=int, default=200)
    cp.add_argument("--q-min", type=float, default=0.01)
    cp.add_argument("--q-max", type=float, default=1.0)
    cp.add_argument("--points", type=int, default=400, help="line-search grid points")
    cp.add_argument("--sweep", type=float, nargs=3, metavar=("B_MIN", "B_MAX", "COUNT"),
                    help="also sweep the budget and plot the bound for the three schemes")
    cp.add_argument("--seed", type=int, default=0)
    cp.add_argument("--out", default="results/cpl")
    cp.add_argument("--quiet", action="store_true")
    cp.set_defaults(func=_cmd_cpl)

    pr = sub.add_parser("prove", help="check every declared property (the theorem report)")
    pr.add_argument("--examples", type=int, default=200, help="Hypothesis budget per check")
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--subject", action="append", help="only this subject (repeatable)")
    pr.add_argument("--property", action="append", help="only this property (repeatable)")
    pr.add_argument("--exhaustive", action="store_true",
                    help="also check every 3-client market of a small type grid")
    pr.add_argument("--markdown", type=Path, default=None, help="write the report here")
    pr.add_argument("--quiet", action="store_true")
    pr.set_defaults(func=_cmd_prove)

    tr = sub.add_parser("train", help="federated training with a mechanism or a baseline")
    tr.add_argument("--algorithm", nargs="+", default=["ipfl"],
                    choices=("local", "fedavg", "fedprox", "ditto", "pfedgraph", "ipfl", "cpl",
                             "lia", "oracle"),
                    help="one or more algorithms, run one after the other")
    tr.add_argument("--dataset", default="digits",
                    choices=("digits", "fashion-mnist", "synthetic"))
    tr.add_argument("--data-dir", dest="data_dir", default=None,
                    help="folder with the Fashion-MNIST IDX files")
    tr.add_argument("--partition", default="niid",
                    choices=("iid", "niid", "cluster", "skew", "pairs", "natural"))
    for name, typ, default in [
        ("beta", float, None), ("beta-in", float, None), ("n-clusters", int, None),
        ("skew-classes", int, None), ("clients", int, 10), ("rounds", int, None),
        ("steps", int, None), ("batch", int, None), ("lr", float, None),
        ("momentum", float, None), ("weight-decay", float, None), ("K", float, None),
        ("C", float, None), ("lam", float, None), ("eta", float, None),
        ("attackers", int, None), ("liar", int, None), ("liar-N", float, None),
        ("liar-c", float, None), ("prox-mu", float, None), ("cpl-budget", float, None),
        ("cpl-c", float, None), ("cpl-v-mean", float, None), ("cpl-alpha", float, None),
        ("lia-warmup", int, None), ("lia-k", int, None), ("lia-recluster", int, None),
        ("seed", int, 0),
    ]:
        tr.add_argument(f"--{name}", dest=name.replace("-", "_"), type=typ, default=default)
    tr.add_argument("--model", default=None, choices=("auto", "simplecnn-mnist", "mlp", "logreg"))
    tr.add_argument("--metric", default=None, choices=("cosine", "l2sq"))
    tr.add_argument("--rule", default=None, choices=ipfl.RULES)
    tr.add_argument("--roles", default=None, choices=("traders", "inclusive"))
    tr.add_argument("--attack", default=None,
                    choices=("none", "shuffle", "signflip", "same", "gaussian"))
    tr.add_argument("--lia-mode", dest="lia_mode", default=None, choices=("central", "p2p"))
    tr.add_argument("--cpl-pricing", dest="cpl_pricing", default=None,
                    choices=("equilibrium", "uniform", "weighted", "full"))
    tr.add_argument("--sequential", dest="lockstep", action="store_false", default=None,
                    help="train clients one by one (the reference path) instead of in lockstep")
    tr.add_argument("--out", default="results/train")
    tr.add_argument("--quiet", action="store_true")
    tr.set_defaults(func=_cmd_train)

    sw = sub.add_parser("sweep", help="run a resumable grid of scenario cells")
    sw.add_argument("spec", nargs="?", default=None, help="TOML sweep spec")
    sw.add_argument("--preset", default=None, help="a built-in sweep (demo)")
    sw.add_argument("--out", default="results/sweep", help="the results store folder")
    sw.add_argument("--executor", default="serial", choices=("serial", "processes", "ray"))
    sw.add_argument("--workers", type=int, default=2)
    sw.add_argument("--ray-address", dest="ray_address", default=None)
    sw.add_argument("--report", action="store_true", help="write the report afterwards")
    sw.add_argument("--quiet", action="store_true")
    sw.set_defaults(func=_cmd_sweep)

    rp = sub.add_parser("report", help="Markdown + HTML report of a sweep store")
    rp.add_argument("results", help="the folder given to `fedmarket sweep --out`")
    rp.set_defaults(func=_cmd_report)

    cl = sub.add_parser("clear", help="clear one market read from a JSON file")
    cl.add_argument("market_file", type=Path,
                    help='JSON object with N, c, K, D and optional lam, true_N, true_c, gain')
    cl.add_argument("--rule", choices=ipfl.RULES, default="local")
    cl.add_argument("--thresholds", choices=ipfl.MODES, default="exact")
    cl.add_argument("--allow-negative-distances", action="store_true")
    cl.add_argument("--csv", type=Path, default=None, help="also write the table as CSV")
    cl.set_defaults(func=_cmd_clear)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MarketInputError as exc:
        print(f"fedmarket: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
