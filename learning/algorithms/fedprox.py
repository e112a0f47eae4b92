"""FedProx (Li et al. 2020): FedAvg whose local objective adds (mu / 2) ||theta - theta_g||^2,
mu = ``prox_mu``."""

from __future__ import annotations

from ..session import Session
from . import fedavg


def rounds(s: Session):
    return fedavg.rounds(s, prox=s.cfg.prox_mu)
