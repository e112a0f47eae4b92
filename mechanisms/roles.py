"""Market roles, their economic types and the attacks of the iPFL paper, shared by the
mechanism-level scenarios (:mod:`sims.inclusive`) and the learner (:mod:`learning`).

=========  =================  ==================  =========================================
role       gain scale K       sharing cost c      uploads
=========  =================  ==================  =========================================
trader     U(K/2, K) or K     U(C/2, C) or C      its model
buyer      U(K/2, K) or K     +inf (never sells)  its model
seller     0 (never buys)     0                   its model
attacker   0 (or K: free      0 (reports C as a   an attack on a model (Fig. 4)
           rider)             free rider)
=========  =================  ==================  =========================================

``fixed=True`` gives every trader and buyer exactly K and every trader exactly C (the authors'
setting outside the inclusive market); ``fixed=False`` draws them uniformly as in Fig. 5.

Attacks (Fig. 4): ``shuffle`` (a random permutation of an honest model), ``signflip`` (its
negation), ``same`` (every parameter the same value) and ``gaussian`` (N(0, 1) noise). In the
paper the ``same`` and ``gaussian`` attackers are *free riders*: they keep the gain scale K of a
trader, report the sharing cost C while their true cost is 0, and skip training; see
:func:`attacker_is_free_rider`.

>>> market_roles(5, attackers=1, placement="last")
('trader', 'trader', 'trader', 'trader', 'attacker')
>>> K, c = draw_types(("trader", "buyer", "seller"), K=10.0, C=1.0, rng=0, fixed=True)
>>> K.tolist(), c.tolist()
([10.0, 10.0, 0.0], [1.0, inf, 0.0])
>>> attack("signflip", np.array([1.0, -2.0]), rng=0).tolist()
[-1.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from .errors import MarketInputError

__all__ = ["ATTACKS", "FREE_RIDER_ATTACKS", "ROLES", "attack", "attacker_is_free_rider",
           "draw_types", "inclusive_roles", "market_roles"]

ROLES = ("trader", "buyer", "seller", "attacker")
ATTACKS = ("shuffle", "signflip", "same", "gaussian")
FREE_RIDER_ATTACKS = ("same", "gaussian")


def _rng(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def inclusive_roles(traders: int = 3, buyers: int = 4, sellers: int = 4,
                    attackers: int = 1) -> tuple[str, ...]:
    """The Fig. 5 market's roles in block order (traders, buyers, sellers, attackers)."""
    counts = (traders, buyers, sellers, attackers)
    for name, k in zip(ROLES, counts, strict=True):
        if int(k) < 0:
            raise MarketInputError(name + "s", f"is {k!r}; must be >= 0")
    return tuple(r for r, k in zip(ROLES, counts, strict=True) for _ in range(int(k)))


def market_roles(m: int, *, attackers: int = 0, placement: str = "last",
                 rng=None) -> tuple[str, ...]:
    """``m`` traders of which ``attackers`` are attackers: the last ones (``placement="last"``)
    or clients drawn at random with ``rng`` (``"random"``, as in Fig. 4)."""
    if not 0 <= attackers < m:
        raise MarketInputError("attackers", f"is {attackers}; must lie in [0, {m})")
    roles = np.array(["trader"] * m, dtype=object)
    if placement == "last":
        at = np.arange(m - attackers, m)
    elif placement == "random":
        at = _rng(rng).choice(m, size=attackers, replace=False)
    else:
        raise MarketInputError("placement", f"is {placement!r}; choose 'last' or 'random'")
    roles[at] = "attacker"
    return tuple(roles.tolist())


def draw_types(roles, K: float, C: float, rng, *, fixed: bool = False):
    """(K_i, c_i) per client from its role (table in the module docstring). The draws are made
    for every client (K first, then c) whatever the roles, so adding a role elsewhere does not
    shift the others' types."""
    role = np.asarray(roles, dtype=object)
    unknown = set(role.tolist()) - set(ROLES)
    if unknown:
        raise MarketInputError("roles", f"unknown {sorted(unknown)}; choose from {ROLES}")
    m = role.size
    g = _rng(rng)
    k_draw = np.full(m, float(K)) if fixed else g.uniform(K / 2, K, m)
    c_draw = np.full(m, float(C)) if fixed else g.uniform(C / 2, C, m)
    K_i = np.where(np.isin(role, ["trader", "buyer"]), k_draw, 0.0)
    c_i = np.where(role == "trader", c_draw, 0.0)
    c_i = np.where(role == "buyer", np.inf, c_i)
    return K_i.astype(float), c_i.astype(float)


def attacker_is_free_rider(kind: str) -> bool:
    """Fig. 4: the ``same`` and ``gaussian`` attackers are free riders (keep K, report C,
    true cost 0, no training); ``shuffle`` and ``signflip`` corrupt a trained model."""
    return kind in FREE_RIDER_ATTACKS


def attack(kind: str, honest: np.ndarray, rng) -> np.ndarray:
    """The attacked upload built from an honest parameter vector ``honest`` (Fig. 4)."""
    honest = np.asarray(honest, dtype=float)
    g = _rng(rng)
    if kind == "gaussian":
        return g.standard_normal(honest.shape)
    if kind == "shuffle":
        return g.permutation(honest)
    if kind == "signflip":
        return -honest
    if kind == "same":
        return np.ones_like(honest)
    raise MarketInputError("attack", f"unknown {kind!r}; choose one of {ATTACKS}")
