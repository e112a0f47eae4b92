"""Ditto (Li et al. 2021): a global model trained as in FedAvg, and a personal model per client
trained toward the global model with (lambda / 2) ||v - w||^2."""

from __future__ import annotations

import numpy as np

from ..session import Round, Session


def rounds(s: Session):
    m = s.clients
    glob = s.flatten(s.params0)[0]
    personal = s.params0
    full = np.ones((m, m))
    while True:
        start = s.broadcast(glob)
        glob = s.aggregate(s.uploads(s.train(start)), s.fedavg_weights())
        centre = s.broadcast(glob)
        personal = s.train(personal, centre=centre, prox=np.full(m, s.cfg.prox_mu))
        yield Round(personal, s.baseline_ledger(full), {})
