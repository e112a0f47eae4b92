"""``fedmarket train``: federated training with a mechanism or a baseline.

Option defaults are the learner's (``TrainConfig``); reading them loads torch, so the full
option list is built only when the command line names ``train``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields

from .common import (
    add_command,
    add_progress,
    add_quiet,
    print_table,
    progress_reporter,
    writable_folder,
)

__all__ = ["OPTIONS", "add_parser", "run"]

# (TrainConfig field, help); type and default come from TrainConfig itself
OPTIONS = (
    ("dataset", "dataset to train on"),
    ("data_dir", "folder with the Fashion-MNIST IDX files or the CIFAR-10 python batches "
                 "(default: the known paths)"),
    ("partition", "how the data is split among clients"),
    ("beta", "Dirichlet concentration of the non-IID split"),
    ("beta_in", "Dirichlet concentration inside a cluster (cluster partition)"),
    ("n_clusters", "number of clusters (cluster and pairs partitions)"),
    ("skew_classes", "classes per client (skew partition)"),
    ("clients", "number of clients"),
    ("rounds", "communication rounds"),
    ("model", "model architecture (auto: by dataset)"),
    ("steps", "local SGD steps per round"),
    ("batch", "mini-batch size"),
    ("lr", "SGD learning rate"),
    ("momentum", "SGD momentum"),
    ("weight_decay", "SGD weight decay"),
    ("K", "iPFL gain scale K"),
    ("C", "iPFL sharing-cost scale C"),
    ("lam", "iPFL lambda, the weight of the distance penalty"),
    ("eta", "iPFL eta"),
    ("metric", "distance between client models"),
    ("rule", "iPFL sellers-selection rule (also --selection): box2, local, exact, share-all "
             "or module:function (found in the current folder or on sys.path)"),
    ("payments", "iPFL payment rule: paper, vcg, shapley, cost-plus, none or module:function "
                 "(e.g. designed_rule:payments, written by fedmarket design)"),
    ("prices", "iPFL price rule selection uses: paper, cost-plus or module:function"),
    ("roles", "traders only, or the paper's inclusive market roles"),
    ("attack", "what attackers upload"),
    ("attackers", "number of attacking clients"),
    ("liar", "client id of a liar (-1: none)"),
    ("liar_N", "the liar reports N times this factor"),
    ("liar_c", "the liar reports c times this factor"),
    ("attacker_placement", "which clients attack: random (Fig. 4) or the last ones"),
    ("prox_mu", "FedProx proximal weight mu"),
    ("ditto_lam", "Ditto lambda (personal model toward the round-start global model)"),
    ("pfedgraph_alpha", "pFedGraph alpha: graph rows Proj_simplex(p + cos / (2 alpha))"),
    ("pfedgraph_lam", "pFedGraph weight of -cos(theta, aggregate) in local training"),
    ("fedamp_lam", "FedAMP proximal weight toward the attentive model"),
    ("fedamp_sigma", "FedAMP attention exp(sigma * cos)"),
    ("fedamp_self", "FedAMP weight of the client's own model"),
    ("fedamp_attention", "FedAMP attention: heuristic (HeurFedAMP, cosine softmax; the iPFL "
                         "authors' runs) or paper (1 - exp(-x/sigma) of squared distances)"),
    ("fedamp_alpha", "FedAMP (paper attention): step alpha_k in units of sigma / (m - 1)"),
    ("fedamp_dsigma", "FedAMP (paper attention): sigma of A (0: the round's median squared "
                      "distance)"),
    ("cfl_eps1", "CFL: split when the cluster's mean update norm is below eps1"),
    ("cfl_eps2", "CFL: ... and its largest update norm is above eps2"),
    ("fedfomo_M", "FedFomo: models sent to each client per round"),
    ("cpl_pricing", "CPL pricing scheme"),
    ("cpl_budget", "CPL server budget B"),
    ("cpl_c", "CPL cost coefficient c_n"),
    ("cpl_v_mean", "CPL mean of v_n ~ Exp"),
    ("cpl_alpha", "CPL convergence-bound alpha"),
    ("cpl_q_min", "CPL lowest participation level"),
    ("lia_warmup", "pFedLIA FedAvg warm-up rounds"),
    ("lia_k", "pFedLIA lazy epochs k"),
    ("lia_recluster", "pFedLIA re-cluster every R rounds (0: never)"),
    ("lia_mode", "pFedLIA central server or peer to peer"),
    ("thresholds", "iPFL thresholds: exact roots or the published code's numerics"),
    ("fixed_types", "every trader gets K and C exactly (the authors'), not U(K/2, K), U(C/2, C)"),
    ("partition_cap", "cap each client at N/m samples in niid and cluster (the authors')"),
    ("normalise", "standardise inputs by the training mean and std (the authors')"),
    ("holdout", "hold out 10 %% validation and 10 %% own test (no: train on all)"),
    ("sampling", "SGD batches with replacement, or shuffled passes (epochs)"),
    ("test_subsample", "evaluate on this many global test samples (0: all)"),
    ("train_subsample", "partition this many training samples among the clients (0: all)"),
    ("allow_quit", "iPFL: a client with negative round utility quits (keeps its best model)"),
    ("evaluate_every", "measure test accuracy every k rounds (and in the last)"),
    ("seed", "random seed"),
    ("device", "where training and evaluation run: cpu, cuda, cuda:N, or auto (cuda when "
               "present, else cpu)"),
)


ALIASES = {"rule": ("--selection",)}


def _choices(algorithms_module) -> dict:
    from learning.config import DATASETS, PARTITIONS
    from learning.models import MODELS
    from mechanisms import ipfl
    from mechanisms.distances import METRICS

    return {"algorithm": algorithms_module.ALGORITHMS, "attack": algorithms_module.ATTACKS,
            "dataset": DATASETS, "partition": PARTITIONS, "model": ("auto", *MODELS),
            "metric": METRICS, "roles": ("traders", "inclusive"),
            "lia_mode": ("central", "p2p"), "attacker_placement": ("random", "last"),
            "thresholds": ipfl.MODES, "sampling": ("replacement", "epochs"),
            "cpl_pricing": ("equilibrium", "uniform", "weighted", "full")}


class _Given(argparse.Action):
    """Stores the value and records that the option was given (so a preset does not override
    it)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = set(getattr(namespace, "given", ())) | {self.dest}


class _GivenFlag(argparse.BooleanOptionalAction):
    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        namespace.given = set(getattr(namespace, "given", ())) | {self.dest}


def add_parser(sub, full: bool = False) -> None:
    p = add_command(sub, "train", "federated training with a mechanism or a baseline")
    p.set_defaults(func=run)
    if not full:
        return
    from learning import algorithms

    choices = _choices(algorithms)
    cfg = {f.name: f for f in fields(algorithms.TrainConfig)}
    from learning.config import PRESETS

    p.add_argument("--algorithm", nargs="+", default=["ipfl"],
                   help="one or more algorithms, run one after the other: "
                        f"{', '.join(choices['algorithm'])}, or one of your own: "
                        "module:attr (found in the current folder or on sys.path) or an "
                        f"installed entry point of group {algorithms.ENTRY_POINT_GROUP}")
    p.add_argument("--preset", default="corrected", choices=sorted(PRESETS),
                   help="published: the iPFL authors' pipeline (learning.config."
                        "PUBLISHED_DIFFERENCES); options given explicitly still win")
    p.set_defaults(given=frozenset())
    for name, text in OPTIONS:
        f = cfg[name]
        if isinstance(f.default, bool):
            p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=f.default,
                           action=_GivenFlag, help=text)
            continue
        typ = type(f.default) if isinstance(f.default, int | float) else str
        p.add_argument(f"--{name.replace('_', '-')}", *ALIASES.get(name, ()), dest=name,
                       type=typ, default=f.default, choices=choices.get(name), help=text,
                       action=_Given)
    p.add_argument("--sequential", dest="lockstep", action="store_false",
                   default=cfg["lockstep"].default,
                   help="train clients one by one (the reference path) instead of in lockstep")
    p.add_argument("--out", default="results/train", help="folder for Parquet, JSON and PNG")
    p.add_argument("--log-dir", default=None,
                   help="per-round logs, one folder per algorithm: rounds.csv (always) and "
                        "TensorBoard event files where the tensorboard package is installed "
                        "(pip install fedmarket[tensorboard])")
    add_quiet(p)
    add_progress(p)


def run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from ..plots import pyplot
    plt = pyplot()
    import pandas as pd

    from learning.algorithms import TrainConfig
    from learning.algorithms import run as train
    from learning.config import PRESETS, TrainInputError

    from ..errors import SpecError
    from ..plots import plot_accuracy
    from ..results import write_atomic, write_table

    cfg_fields = {f.name for f in fields(TrainConfig)}
    common = {k: v for k, v in vars(args).items() if k in cfg_fields and v is not None}
    given = set(getattr(args, "given", ()))
    common.update({k: v for k, v in PRESETS[getattr(args, "preset", "corrected")].items()
                   if k not in given})
    try:
        configs = [TrainConfig(**{**common, "algorithm": a}) for a in args.algorithm]
    except TrainInputError as exc:
        if exc.field != "algorithm":
            raise
        raise SpecError("--algorithm", exc.message) from None
    _data_folder(configs[0].dataset, configs[0].data_dir)
    out = writable_folder("--out", args.out)
    logs = writable_folder("--log-dir", args.log_dir) if args.log_dir else None
    results, written = [], []
    for cfg in configs:
        algorithm = cfg.algorithm
        stem = algorithm.replace(":", "-")  # an algorithm of your own: module-attr.parquet
        log = None
        if logs is not None:
            from learning.roundlog import RoundLog

            log = RoundLog(logs / stem)
        with progress_reporter(f"{algorithm}: rounds", quiet=args.quiet,
                               every=args.progress_every) as progress:
            res = train(cfg, progress=progress, log=log)
        results.append(res)
        if log is not None:
            written.append(log.csv)
        table, side = write_table(res.frame, out / f"{stem}.parquet", res.provenance())
        written += [table, side]
        if "influence" in res.extras:
            from ..plots import plot_influence

            fig, ax = plt.subplots(figsize=(7, 6))
            plot_influence(res.extras["influence"], res.extras["clusters"], ax=ax)
            fig.tight_layout()
            write_atomic(out / f"{stem}_influence.png",
                         lambda tmp, fig=fig: fig.savefig(tmp, dpi=110), "--out")
            plt.close(fig)
            text = json.dumps({"clusters": res.extras["clusters"],
                               "influence": res.extras["influence"]})
            write_atomic(out / f"{stem}_clusters.json",
                         lambda tmp, text=text: tmp.write_text(text), "--out")
            written += [out / f"{stem}_influence.png", out / f"{stem}_clusters.json"]
        if not args.quiet:
            final = res.final()
            print_table(final, f"{algorithm}: after {cfg.rounds} rounds ({res.seconds:.1f} s)")
            print(f"{algorithm}: mean personalised accuracy "
                  f"{final.acc_personalised.mean():.4f}, mean cumulative utility "
                  f"{final.utility.mean():.4f}")
    frame = pd.concat([r.frame for r in results], ignore_index=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    plot_accuracy(frame, ax=ax)
    ax.set_title(f"{args.dataset}, {args.partition}, {args.clients} clients")
    fig.tight_layout()
    write_atomic(out / "accuracy.png", lambda tmp: fig.savefig(tmp, dpi=110), "--out")
    plt.close(fig)
    written.append(out / "accuracy.png")
    if not args.quiet:
        print("wrote " + ", ".join(map(str, written)))
    return 0


def _data_folder(dataset: str, data_dir) -> None:
    """A data set read from a folder (Fashion-MNIST, CIFAR-10) is found before any training, or
    one line naming --data-dir (given) or --dataset (looked for in the known places, then
    $FEDMARKET_FASHION_MNIST / $FEDMARKET_CIFAR10, which the loader's message names)."""
    from learning.data import cifar10_folder, fashion_mnist_folder
    from mechanisms.errors import MarketInputError

    from ..errors import SpecError

    find = {"fashion-mnist": fashion_mnist_folder, "cifar10": cifar10_folder}.get(dataset)
    if find is None:
        if data_dir:  # given for a data set that reads no folder: a mistake, not ignored
            raise SpecError("--data-dir", f"is {data_dir!r}, but --dataset {dataset} reads no "
                                          "folder (only fashion-mnist and cifar10 do)")
        return
    try:
        find(data_dir)
    except MarketInputError as exc:
        if data_dir:
            raise SpecError("--data-dir", exc.message) from None
        raise SpecError("--dataset", f"{dataset}: {exc.message[:-1]}, or name the folder with "
                                     "--data-dir.") from None
