"""``fedmarket reproduce``: every claim of the seed papers this toolkit can test, as one
resumable sweep (:func:`spec`), and docs/reproduction.md written from its store
(:func:`write_reproduction`).

Two settings: ``reduced`` (what fits a 2-core machine: digits and an MLP, 20 rounds of 50 local
steps; the scenarios' defaults) and ``full`` (the paper's sizes: Fashion-MNIST with
simplecnn-mnist, 50 rounds of 200 steps). Every learning claim runs the ``published`` setup
(learning.config.PUBLISHED_DIFFERENCES); Fig. 2 also runs our corrected defaults.
"""

from __future__ import annotations

__all__ = ["FULL", "SETTINGS", "spec", "write_reproduction"]

FULL = {"dataset": "fashion-mnist", "rounds": 50, "steps": 200, "batch": 64, "lr": 0.01}
SETTINGS = {"reduced": {}, "full": FULL}
ATTACK_GRID = ["none", "shuffle", "signflip", "same", "gaussian"]
LAMBDAS = [0.001, 0.1, 1.0, 2.0, 10.0]


def spec(setting: str = "reduced", seeds=(0, 1, 2)) -> dict:
    """The sweep spec (as :func:`sims.sweep.expand` reads it) of a reproduction."""
    if setting not in SETTINGS:
        from mechanisms.errors import MarketInputError

        raise MarketInputError("setting", f"is {setting!r}; choose one of {tuple(SETTINGS)}")
    learn = dict(SETTINGS[setting])
    return {
        "seeds": list(seeds),
        "scenarios": [
            {"name": "liars", "mechanisms": ["local"],
             "params": {"kind": "size", "factor": [0.1, 0.5, 10.0],
                        "thresholds": ["exact", "published"]}},
            {"name": "liars", "mechanisms": ["local"],
             "params": {"kind": "cost", "factor": [2.0, 5.0, 10.0],
                        "thresholds": ["exact", "published"]}},
            {"name": "inclusive-market", "mechanisms": ["box2", "local"],
             "params": {"rounds": 20}},
            {"name": "cpl-pricing", "mechanisms": ["bisection", "uniform", "weighted"],
             "params": {"budget": [5.0, 15.0, 40.0]}},
            {"name": "fig2", "params": {"partition": ["niid", "cluster", "skew"], **learn}},
            {"name": "lia-vs-oracle", "params": {}},
            {"name": "fig5-learning", "params": learn},
            {"name": "ipfl-lambda", "mechanisms": ["ipfl"],
             "params": {"lam": LAMBDAS, "partition": "niid", **learn}},
            {"name": "fig2-corrected",
             "mechanisms": ["local", "fedavg", "ditto", "pfedgraph", "ipfl"],
             "params": {"partition": "niid", **learn}},
            # one seed after the other, so that a partial run has whole seeds
            *({"name": "fig4", "params": {"attack": ATTACK_GRID, **learn}, "seeds": [s]}
              for s in seeds),
        ],
    }


def write_reproduction(store_folder, page, *, setting: str = "reduced", seeds=(0, 1, 2)):
    """Write the reproduction page from the cells in the store (see :mod:`sims.claims`)."""
    from .claims import write_page

    return write_page(store_folder, page, setting=setting, seeds=seeds)
