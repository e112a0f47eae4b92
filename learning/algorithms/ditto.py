"""Ditto (Li et al., ICML 2021): a global model trained as in FedAvg, and a personal model v_i
per client trained on min_v F_i(v) + (lambda / 2) ||v - w^t||^2 toward the global model w^t the
client received at the start of the round (lambda = ``ditto_lam``, 1 as in the authors' iPFL
code). Two local trainings per round, declared in the registry (``trainings = 2``): the
personal models (batch stream call 2t) and the global model's local copies (call 2t + 1); the
personal models are scored after training, before the global aggregation, as the authors do."""

from __future__ import annotations

import numpy as np

from ..session import Round, Session


def rounds(s: Session):
    m = s.clients
    st = s.carry(lambda: {"glob": s.flatten(s.params0)[0], "personal": s.params0})
    full = np.ones((m, m))
    while True:
        start = s.broadcast(st["glob"])
        st["personal"] = s.train(st["personal"], centre=start,
                                 prox=np.full(m, s.cfg.ditto_lam))
        st["glob"] = s.aggregate(s.uploads(s.train(start)), s.fedavg_weights())
        yield Round(st["personal"], s.baseline_ledger(full), {})
