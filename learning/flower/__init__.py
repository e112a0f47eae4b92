"""Flower integration (Message API, flwr >= 1.20): the iPFL and CPL mechanisms as server
strategies, ClientApps that reuse learning/'s local training, and a ready Flower app.

Optional extra: ``pip install fedmarket[flower]``. Importing this package needs flwr.
"""

from .strategies import CplStrategy, IpflStrategy

__all__ = ["CplStrategy", "IpflStrategy"]
