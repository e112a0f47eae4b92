"""``fedmarket cpl``: solve the CPL pricing game (Luo et al.) and compare pricing schemes."""

from __future__ import annotations

from dataclasses import fields

from ..cpl_game import CplBenchmark
from ..errors import SpecError
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
    d = {f.name: f.default for f in fields(CplBenchmark)}
    p = add_command(sub, "cpl", "solve the CPL pricing game (Luo et al.) and compare")
    p.add_argument("--clients", type=integer, default=d["clients"], help="number of clients N")
    p.add_argument("--c", type=float, default=d["c"], help="cost coefficient c_n")
    p.add_argument("--v-mean", type=float, default=d["v_mean"], help="mean of v_n ~ Exp")
    p.add_argument("--G", type=float, default=d["G"], help="gradient-norm bound G_n")
    p.add_argument("--budget", type=float, default=d["budget"], help="the server's budget B")
    p.add_argument("--alpha", type=float, default=d["alpha"], help="convergence-bound alpha")
    p.add_argument("--R", type=integer, default=d["R"], help="training rounds R in the bound")
    p.add_argument("--q-min", type=float, default=d["q_min"],
                   help="lowest participation level")
    p.add_argument("--q-max", type=float, default=d["q_max"],
                   help="highest participation level")
    p.add_argument("--points", type=integer, default=400,
                   help="grid points of the cvxpy line search")
    p.add_argument("--sweep", type=float, nargs=3, metavar=("B_MIN", "B_MAX", "COUNT"),
                   help="also sweep the budget and plot the bound for the three schemes")
    p.add_argument("--seed", type=integer, default=d["seed"], help="random seed")
    p.add_argument("--out", default="results/cpl", help="folder for CSV, JSON and PNG")
    add_quiet(p)
    add_progress(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from ..plots import pyplot
    plt = pyplot()
    import numpy as np

    from ..cpl_game import budget_sweep, compare_pricing
    from ..plots import plot_budget_sweep, plot_cpl_participation, plot_cpl_prices
    from ..results import write_atomic, write_table

    bench = CplBenchmark(clients=args.clients, c=args.c, v_mean=args.v_mean, G=args.G,
                         budget=args.budget, alpha=args.alpha, R=args.R, q_min=args.q_min,
                         q_max=args.q_max, seed=args.seed)
    game = bench.game()
    if args.points < 2:
        raise SpecError("--points", f"is {args.points}; the line search needs >= 2 points")
    if args.sweep:
        lo, hi, count = args.sweep
        if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
            raise SpecError("--sweep", f"budgets {lo} to {hi}: need 0 < B_MIN <= B_MAX, finite")
        if not (count == int(count) and 1 <= count <= 10_000):
            raise SpecError("--sweep", f"COUNT is {count}; must be an integer in [1, 10000]")
    out = writable_folder("--out", args.out)
    with progress_reporter("cpl line search: grid points", quiet=args.quiet,
                           every=args.progress_every) as progress:
        table, results = compare_pricing(
            game, points=args.points,
            progress=None if progress is None else (
                lambda name, d, t: progress(d, t) if name == "cvxpy-linesearch" else None))
    write_table(table, out / "comparison.csv", bench.provenance())
    eq = results["bisection"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plot_cpl_prices(game, eq, ax=axes[0])
    plot_cpl_participation(game, eq, ax=axes[1])
    fig.tight_layout()
    write_atomic(out / "prices.png", lambda tmp: fig.savefig(tmp, dpi=110), "--out")
    plt.close(fig)
    written = [out / "comparison.csv", out / "prices.png"]
    if args.sweep:
        budgets = np.linspace(args.sweep[0], args.sweep[1], int(args.sweep[2]))
        sweep = budget_sweep(game, budgets)
        write_table(sweep, out / "budget_sweep.csv", bench.provenance())
        fig, ax = plt.subplots(figsize=(6, 4))
        plot_budget_sweep(sweep, ax=ax)
        fig.tight_layout()
        write_atomic(out / "budget_sweep.png", lambda tmp: fig.savefig(tmp, dpi=110),
                     "--out")
        plt.close(fig)
        written += [out / "budget_sweep.csv", out / "budget_sweep.png"]
    if not args.quiet:
        print_table(table, f"CPL game: N={game.n}, B={game.budget}, seed={args.seed}")
        print(f"lambda* = {eq.multiplier:.6g}, v^t = {eq.v_threshold:.6g}, "
              f"KKT residual {eq.kkt_residual}, budget residual {eq.budget_residual:.1e}")
        print("wrote " + ", ".join(map(str, written)))
    return 0
