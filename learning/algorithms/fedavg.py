"""FedAvg (McMahan et al. 2017): every round each client trains from the global model; the
server averages the uploads with weights N_j / sum N. ``prox > 0`` adds FedProx's proximal
term (mu / 2) ||theta - theta_global||^2 (:mod:`learning.algorithms.fedprox`)."""

from __future__ import annotations

import numpy as np

from ..session import Round, Session


def rounds(s: Session, prox: float = 0.0):
    m = s.clients
    st = s.carry(lambda: {"glob": s.flatten(s.params0)[0]})
    full = np.ones((m, m))
    while True:
        start = s.broadcast(st["glob"])
        trained = s.train(start, centre=start if prox else None,
                          prox=np.full(m, prox) if prox else None)
        st["glob"] = s.aggregate(s.uploads(trained), s.fedavg_weights())
        yield Round(s.broadcast(st["glob"]), s.baseline_ledger(full), {})
