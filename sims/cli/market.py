"""``fedmarket market``: the paper's inclusive market (Fig. 5), cleared round by round."""

from __future__ import annotations

from dataclasses import fields

from mechanisms import ipfl
from mechanisms.distances import METRICS

from ..inclusive import ATTACKS, InclusiveMarket, run_inclusive_market
from .common import (
    add_command,
    add_progress,
    add_quiet,
    integer,
    print_table,
    progress_reporter,
    writable_folder,
)

__all__ = ["add_parser", "run"]


def add_parser(sub, full: bool = False) -> None:
    defaults = {f.name: f.default for f in fields(InclusiveMarket)}
    p = add_command(sub, "market", "run the paper's inclusive market (Fig. 5)")
    p.add_argument("--rounds", type=integer, default=defaults["rounds"], help="market rounds")
    p.add_argument("--rule", choices=ipfl.RULES, default=defaults["rule"],
                   help="the sellers-selection rule")
    p.add_argument("--thresholds", choices=ipfl.MODES, default=defaults["thresholds"],
                   help="exact gain thresholds, or the paper's published approximation")
    p.add_argument("--attack", choices=ATTACKS, default=defaults["attack"],
                   help="what the attacker uploads")
    p.add_argument("--metric", choices=METRICS, default=defaults["metric"],
                   help="distance between uploaded parameters")
    p.add_argument("--lam", type=float, default=defaults["lam"],
                   help="lambda, the weight of the distance penalty (the paper's value)")
    p.add_argument("--seed", type=integer, default=defaults["seed"], help="random seed")
    p.add_argument("--out", default="results/market", help="folder for CSV, JSON and PNG")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def run(args) -> int:
    cfg = InclusiveMarket(rounds=args.rounds, rule=args.rule, thresholds=args.thresholds,
                          attack=args.attack, metric=args.metric, seed=args.seed, lam=args.lam)
    out = writable_folder("--out", args.out)
    with progress_reporter("market rounds", quiet=args.quiet,
                           every=args.progress_every) as progress:
        result = run_inclusive_market(cfg, progress=progress)
    from ..results import write_atomic, write_table

    summary = result.summary()
    rounds_csv, _ = write_table(result.rounds, out / "rounds.csv", result.provenance)
    write_table(summary, out / "summary.csv", result.provenance)
    png = out / "transactions.png"
    import matplotlib

    matplotlib.use("Agg")
    from ..plots import pyplot
    plt = pyplot()

    from ..plots import plot_transaction_graph

    fig, ax = plt.subplots(figsize=(8, 7))
    plot_transaction_graph(result.flows, result.roles, ax=ax,
                           title=f"iPFL inclusive market: money flows over {cfg.rounds} rounds")
    fig.tight_layout()
    write_atomic(png, lambda tmp: fig.savefig(tmp, dpi=110), "--out")
    plt.close(fig)
    if not args.quiet:
        print_table(summary, f"Inclusive market (Fig. 5), rule={cfg.rule}, seed={cfg.seed}")
        honest = summary[summary.role != "attacker"]
        attackers = summary[summary.role == "attacker"]
        print(f"attacker isolated: {bool((attackers.earned == 0).all())}; "
              f"min honest utility {honest.utility.min():.3f}; "
              f"budget residual {abs(result.rounds.payment.sum()):.2e}")
        print(f"wrote {rounds_csv}, {out / 'summary.csv'}, {png}")
    return 0
