"""pFedLIA's properties (Rokvic, Danassis, Faltings 2025; spec lia.md): what the paper and the
specification claim of the lazy influence scores and the clustering, checked on drawn
instances: the per-sample validation losses of a joint model theta_0 and of every client's
partial model theta_j, with planted groups of clients (a client's update helps the clients
of its own group and hurts the others, plus noise). Subjects are
:class:`proofs.LiaClustering`; each property rejects a known-bad variant
(tests/test_lia_properties.py) and both engines draw the same instances (the Hypothesis
strategy draws the uniform numbers the batch engine's sampler transforms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from mechanisms import lia

from .batch import Draws, Sampler
from .core import Property
from .oracle import lia as olia
from .strategies import MAX_CLIENTS

__all__ = ["LIA_PROPERTIES", "LiaCase", "LiaSampler", "lia_instances"]

MAX_SAMPLES = 6  # validation samples per client: 1 to MAX_SAMPLES, uneven across clients
PATTERNS = 2  # the sample layouts drawn for each number of clients (owners, _layout)
RELABELLINGS = 4  # the relabellings across sample counts drawn for each layout (_relabelling)
SEPARATION = 50.0  # small noise: |noise| <= the least gap between a row's groups / SEPARATION
ONE_GROUP_NOISE = 1e-4  # one group: |noise| <= 1e-4 h (below the no-split tolerance 1e-3)
SCORE_RTOL = 1e-12
COPIES = (2, 7, 64)  # one instance (a recheck, Hypothesis): the batches of its copies compared
ARI_TOL = 1e-12  # the adjusted Rand index against the oracle's pair counts
# The no-split tolerances (rtol, atol) the sets are also asked at (lia_conforms, the built-in
# subjects): tier 0 the documented defaults (proofs.oracle.lia.DEFAULT_RTOL, DEFAULT_ATOL),
# asked by leaving them out of the call; both non-zero at three scales; one of them zero;
# both zero (every split taken)
TOLERANCES = ((None, None), (2.0**-4, 2.0**-6), (2.0**-10, 2.0**-3), (0.0, 2.0**-5),
              (2.0**-3, 0.0), (0.0, 0.0))
PLACE = 2.0**-10  # a placed row's best split's gap: the threshold times 1 +- PLACE
NO_PLACE = (0, 0, 1.0, 0.0, 1.0, 0.0)  # (tier, row, side, share, sign, size): tier 0, row 0


def _arr(a) -> str:
    return "[" + ", ".join(repr(float(v)) for v in np.ravel(a)) + "]"


@dataclass(frozen=True, eq=False)
class LiaCase:
    """One pFedLIA instance.

    base : (n,) the joint model's per-sample validation losses.
    losses : (m, n) every client's partial model's per-sample losses.
    owner : (n,) the client each validation sample belongs to.
    groups : (m,) the planted groups (a client's update helps its own group).
    separated : the noise is small against the gap between a row's groups (the recovery
        precondition: |noise| <= gap / 50 with two groups or more, <= 1e-4 h with one).
    perm : (m,) a relabelling of the clients (new client a is old client perm[a]).
    scale : a power of two the losses are multiplied by (scale invariance).
    place : (tier, row, side, share, sign, size): the tolerances of :data:`TOLERANCES`
        (``tier``) the sets are also asked at, with score row ``row`` moved so that its best
        split's gap sits just above (``side`` +1) or below (-1) their no-split threshold
        (:func:`_placed`; ``share`` of it atol's, the row's largest magnitude on the side
        ``sign``, ``size`` its log2 where it is free).
    """

    base: np.ndarray
    losses: np.ndarray
    owner: np.ndarray
    groups: np.ndarray
    separated: bool
    perm: np.ndarray
    scale: float
    place: tuple = NO_PLACE

    @property
    def m(self) -> int:
        return len(self.groups)

    def code(self) -> str:
        rows = ",\n     ".join(_arr(r) for r in self.losses)
        return (f"case = LiaCase(base=np.array({_arr(self.base)}),\n"
                f"    losses=np.array([{rows}]),\n"
                f"    owner=np.array({np.asarray(self.owner).tolist()}), "
                f"groups=np.array({np.asarray(self.groups).tolist()}),\n"
                f"    separated={self.separated!r}, "
                f"perm=np.array({np.asarray(self.perm).tolist()}), scale={self.scale!r},\n"
                f"    place={tuple(self.place)!r})")

    def __repr__(self):
        return self.code()


# client fields: group, help, harm, base loss x MAX_SAMPLES (its t-th sample's), perm key;
# globals: groups, noise kind, scale, the sample layout, the relabelling, the placed row's
# tolerances, row, side, atol's share, sign and size
_GROUP, _HELP, _HARM, _BASE = range(4)
_PERM = _BASE + MAX_SAMPLES
(_NGROUPS, _NOISE, _SCALE, _LAYOUT, _RELABEL, _TIER, _ROW, _SIDE, _SHARE, _SIGN,
 _SIZE) = range(11)


@cache
def _layout(m: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample layout ``p`` (0..PATTERNS-1) of ``m`` clients: (owner (n,), rank (n,)), the
    client of each validation sample and its place among that client's samples, n = 3m
    for every layout of m (so a batch is one array). Each client has 1 to MAX_SAMPLES
    samples (uneven: the n - m samples past the first go to clients at random, never all
    alike but with one client; layout 0 gives client 0 one sample only where there are
    others), interleaved in a random sample order,
    as validation sets are in real use; fixed by (m, p), so both engines and a recheck see
    the same layout."""
    rng = np.random.default_rng([34, m, p])
    n = 3 * m
    counts = np.ones(m, int)
    for _ in range(n - m):
        open_ = np.flatnonzero(counts < MAX_SAMPLES)
        if p == 0 and m > 1:
            open_ = open_[open_ > 0]
        counts[rng.choice(open_)] += 1
    if m > 1 and counts.min() == counts.max():  # uneven always: 3 each (n = 3m) made 2, ..., 4
        counts[0], counts[-1] = counts[0] - 1, counts[-1] + 1
    owner = rng.permutation(np.repeat(np.arange(m), counts))
    rank = np.zeros(n, int)
    for i in range(m):
        rank[owner == i] = np.arange(counts[i])
    owner.flags.writeable = rank.flags.writeable = False
    return owner, rank


@cache
def _relabelling(m: int, p: int, j: int) -> np.ndarray:
    """Relabelling ``j`` (0..RELABELLINGS-1) of layout ``p`` of ``m`` clients: a fixed
    permutation of the clients other than the identity (new client a is old client
    sigma[a]); one client: the identity, the only one."""
    rng = np.random.default_rng([34, m, p, j, 1])
    if m == 1:
        sigma = np.zeros(1, int)
        sigma.flags.writeable = False
        return sigma
    while True:
        sigma = rng.permutation(m)
        if (sigma != np.arange(m)).any():
            sigma.flags.writeable = False
            return sigma


class LiaSampler(Sampler):
    """pFedLIA instances of 1-12 clients (uniform), 1-4 planted groups, 1 to MAX_SAMPLES
    validation samples per client, interleaved (one of PATTERNS layouts, :func:`_layout`):
    client i's sample s has the joint model's loss b_is in [0.1, 3];
    client j's partial model's loss there is b_is - e_ij - noise_ij, with e_ij = h_i in
    [0.05, 1] when j is in i's group (its update helps i) and -harm_i in [0, 1] otherwise, so
    I(i, j) = e_ij + noise_ij. ``noise``: "small" (the recovery precondition, built in:
    |noise| <= min_i (h_i + harm_i) / 50, or 1e-4 min_i h_i with one group present),
    "large" (|noise| up to the largest gap: the groups can blur) or "any" (half and half).
    A power of two in 2^-3..2^3 and a relabelling are drawn with each instance, and the
    tolerances the sets are also asked at with a row placed at their threshold
    (``place``: :data:`TOLERANCES`, :func:`_placed`)."""

    n_client = _PERM + 1
    n_glob = _SIZE + 1
    min_m = 1
    max_m = MAX_CLIENTS

    def __init__(self, noise: str = "any"):
        if noise not in ("small", "large", "any"):
            raise ValueError(f"noise: unknown {noise!r}; allowed: 'small', 'large', 'any'")
        self.noise = noise

    def arrays(self, d: Draws) -> dict:
        """The instances of ``d`` as arrays: base (B, n), losses (B, m, n), owner (B, n),
        rank (B, n) (each sample's place among its client's), groups (B, m), separated (B,),
        perm (B, m), sigma (B, m) (the relabelling across sample counts the perm ends with),
        scale (B,), place (B, 6) (LiaCase.place); n = 3m."""
        u, p, g = d.client, d.pair, d.glob
        B, m = d.size, d.m
        n_groups = np.minimum(1 + np.minimum((g[:, _NGROUPS] * 4).astype(int), 3), m)
        groups = np.minimum((u[..., _GROUP] * n_groups[:, None]).astype(int),
                            n_groups[:, None] - 1)
        h = 0.05 + 0.95 * u[..., _HELP]
        harm = u[..., _HARM]
        layout = np.minimum((g[:, _LAYOUT] * PATTERNS).astype(int), PATTERNS - 1)
        owner = np.stack([_layout(m, q)[0] for q in range(PATTERNS)])[layout]  # (B, n)
        rank = np.stack([_layout(m, q)[1] for q in range(PATTERNS)])[layout]
        rows = np.arange(B)[:, None]
        # the relabelling: sigma (one of RELABELLINGS for the layout) after a random
        # permutation pi among the clients of each sample count (client sigma[a]'s place)
        j = np.minimum((g[:, _RELABEL] * RELABELLINGS).astype(int), RELABELLINGS - 1)
        sigma = np.stack([np.stack([_relabelling(m, q, i) for i in range(RELABELLINGS)])
                          for q in range(PATTERNS)])[layout, j]  # (B, m)
        counts = np.stack([np.bincount(_layout(m, q)[0], minlength=m)
                           for q in range(PATTERNS)])[layout]  # (B, m)
        canonical = np.lexsort((np.broadcast_to(np.arange(m), (B, m)), counts), axis=-1)
        shuffled = np.lexsort((u[..., _PERM], counts), axis=-1)
        pi = np.empty((B, m), int)
        np.put_along_axis(pi, canonical, shuffled, axis=1)  # c[pi[i]] = c[i]
        base = 0.1 + 2.9 * u[rows, owner, _BASE + rank]  # (B, n): client i's t-th sample
        small = {"small": np.ones(B, bool), "large": np.zeros(B, bool),
                 "any": g[:, _NOISE] < 0.5}[self.noise]
        # the groups present (a drawn group may hold nobody)
        present = (np.sort(groups, axis=1)[:, 1:] != np.sort(groups, axis=1)[:, :-1]).sum(1) + 1
        amp = np.where(small, np.where(present >= 2, (h + harm).min(axis=1) / SEPARATION,
                                       ONE_GROUP_NOISE * h.min(axis=1)),
                       (h + harm).max(axis=1))
        same = groups[:, :, None] == groups[:, None, :]
        effect = np.where(same, h[:, :, None], -harm[:, :, None])  # (B, i, j)
        noise = amp[:, None, None] * (2.0 * p - 1.0)
        # losses[b, j, s] = base[b, s] - effect[b, i, j] - noise[b, i, j], i = owner[b, s]
        shift = np.swapaxes(effect + noise, 1, 2)  # (B, j, i)
        losses = base[:, None, :] - np.take_along_axis(
            shift, np.broadcast_to(owner[:, None, :], (B, m, owner.shape[1])), axis=2)
        return {"base": base, "losses": losses, "owner": owner, "groups": groups,
                "separated": small, "rank": rank, "sigma": sigma,
                "perm": np.take_along_axis(pi, sigma, axis=1),
                "scale": 2.0 ** (np.minimum((g[:, _SCALE] * 7).astype(int), 6) - 3),
                "place": _place(g, m)}

    def bulk_input(self, d: Draws) -> dict:
        return self.arrays(d)

    def cases(self, d: Draws) -> list[LiaCase]:
        a = self.arrays(d)
        return [LiaCase(a["base"][k], a["losses"][k], a["owner"][k], a["groups"][k],
                        bool(a["separated"][k]), a["perm"][k], float(a["scale"][k]),
                        tuple(a["place"][k].tolist())) for k in range(d.size)]

    def simple(self) -> dict:
        return {"client": [0.0], "pair": [0.5, 0.0], "glob": [0.0]}


def _place(g: np.ndarray, m: int) -> np.ndarray:
    """(B, 6) each instance's ``place`` (LiaCase) from its global uniforms ``g``."""
    tier = np.minimum((g[:, _TIER] * len(TOLERANCES)).astype(int), len(TOLERANCES) - 1)
    row = np.minimum((g[:, _ROW] * m).astype(int), m - 1)
    return np.stack([tier, row, np.where(g[:, _SIDE] < 0.5, -1.0, 1.0), g[:, _SHARE],
                     np.where(g[:, _SIGN] < 0.5, 1.0, -1.0), 6.0 * g[:, _SIZE] - 3.0], axis=1)


GRID = 1024  # the Hypothesis strategy's uniform numbers: multiples of 1/GRID


def lia_instances(noise: str, min_clients: int = 1):
    """The Hypothesis strategy: the uniform numbers of one draw, transformed by
    :class:`LiaSampler` (the batch engine's transform). Hypothesis draws them on a grid of
    1/GRID (integers shrink in few steps, floats in many: a counterexample's shrinking took
    40-70 s on floats), 0 -- the simplest value -- where it shrinks to."""

    def instances(max_clients=None):
        top = MAX_CLIENTS if max_clients is None else max_clients
        sampler = LiaSampler(noise)
        unit = st.integers(0, GRID - 1).map(lambda k: k / GRID)

        @st.composite
        def build(draw):
            m = draw(st.integers(min_clients, top))
            client = draw(st.lists(unit, min_size=m * sampler.n_client,
                                   max_size=m * sampler.n_client))
            pair = draw(st.lists(unit, min_size=m * m, max_size=m * m))
            glob = draw(st.lists(unit, min_size=sampler.n_glob, max_size=sampler.n_glob))
            d = Draws(np.array(client).reshape(1, m, sampler.n_client),
                      np.array(pair).reshape(1, m, m), np.array(glob).reshape(1, -1))
            return sampler.cases(d)[0]

        return build()

    instances.clients = (min_clients, MAX_CLIENTS)
    return instances


# ------------------------------------------------------------------------------ checks
#
# Every property is one check over a batch of instances (the arrays of LiaSampler.arrays):
# ``check(answer, a)``, where ``answer(base, losses, owner)`` is what the subject answers for
# the batch's losses and owners (B, n) (scores "I" (B, m, m), sets "C" (B, m, m), clusters
# "labels" (B, m) in central mode or None, "together" (B, m, m): the same cluster /
# neighbourhood). The batch
# engine calls it with the built-in subject's bulk code (mechanisms.lia over the batch); one
# instance (the Hypothesis engine, a recheck) with a batch of one answered by the subject's
# own methods.


def _together(out) -> np.ndarray:
    """(..., m, m) bool from cluster ids (..., m) or p2p neighbourhoods (..., m, m)."""
    out = np.asarray(out)
    if out.ndim >= 2 and out.shape[-1] == out.shape[-2] and out.dtype == bool:
        return out
    return out[..., :, None] == out[..., None, :]


def _one_answer(subject):
    def answer(base, losses, owner):
        I = np.asarray(subject.scores(base[0], losses[0], owner[0]), dtype=float)
        C = np.asarray(subject.sets(I), dtype=bool)
        out = np.asarray(subject.cluster(I))
        labels = None if out.ndim == 2 else out[None]
        return {"I": I[None], "C": C[None], "labels": labels, "together": _together(out)[None]}

    return answer


def _bulk_answer(subject):
    def answer(base, losses, owner):
        # one call of the bulk code for each sample layout of the batch
        I = np.empty(losses.shape[:2] + losses.shape[1:2])
        left = np.ones(len(owner), bool)
        while left.any():
            own = owner[np.argmax(left)]
            rows = left & (owner == own).all(axis=1)
            I[rows] = lia.influence(base[rows], losses[rows], own)
            left &= ~rows
        kw = {"rtol": subject.rtol, "atol": subject.atol}
        C = lia.beneficial_sets(I, **kw)
        out = lia.cluster(I, mode=subject.mode, **kw)
        labels = None if subject.mode == "p2p" else out
        return {"I": I, "C": C, "labels": labels, "together": _together(out)}

    return answer


def _two_dims_answer(subject):
    """The bulk code on the batch's first 2 x (B // 2) instances laid out as two leading
    dimensions (2, B // 2), as the API allows ((..., n) losses, (..., m, m) scores), its
    answer flattened back to one: every sample layout with an even number of instances is
    scored as (2, count / 2) as well. Every argument by keyword, as the signatures allow."""
    def answer(base, losses, owner):
        h = len(owner) // 2
        base, losses, owner = base[:2 * h], losses[:2 * h], owner[:2 * h]
        m = losses.shape[1]
        I = np.empty((2 * h, m, m))
        left = np.ones(2 * h, bool)
        while left.any():
            own = owner[np.argmax(left)]
            rows = np.flatnonzero(left & (owner == own).all(axis=1))
            if rows.size % 2 == 0:
                half = rows.size // 2
                I[rows] = lia.influence(base_losses=base[rows].reshape(2, half, -1),
                                        model_losses=losses[rows].reshape(2, half, m, -1),
                                        owner=own).reshape(rows.size, m, m)
            else:
                I[rows] = lia.influence(base_losses=base[rows], model_losses=losses[rows],
                                        owner=own)
            left[rows] = False
        kw = {"rtol": subject.rtol, "atol": subject.atol}
        two = I.reshape(2, h, m, m)
        C = np.asarray(lia.beneficial_sets(I=two, **kw)).reshape(2 * h, m, m)
        out = np.asarray(lia.cluster(I=two, mode=subject.mode, **kw))
        out = out.reshape(2 * h, *out.shape[2:])
        labels = None if subject.mode == "p2p" else out
        return {"I": I, "C": C, "labels": labels, "together": _together(out)}

    return answer


def _case_arrays(case) -> dict:
    return {"base": case.base[None], "losses": case.losses[None],
            "owner": np.asarray(case.owner)[None],
            "groups": case.groups[None], "separated": np.array([case.separated]),
            "perm": case.perm[None], "scale": np.array([case.scale]),
            "place": np.array([case.place], dtype=float)}


def _permuted(a) -> tuple:
    """The batch relabelled (new client a is old client perm[a]): its models reordered, its
    validation samples renamed and placed so that each client's samples keep their order
    (added in the same order: the same mean to the bit). A batch's perm is pi o sigma, pi
    among clients of equal sample counts (``rank``: new client a takes the places of old
    client sigma[a]'s samples, so the batch has as many layouts as before); one instance
    (no sigma) keeps its samples where they are, their owners renamed."""
    perm, owner = a["perm"], a["owner"]
    B, n = owner.shape
    if "sigma" not in a:
        return (a["base"], np.take_along_axis(a["losses"], perm[:, :, None], axis=1),
                np.take_along_axis(np.argsort(perm, axis=1), owner, axis=1))
    sigma, rank = a["sigma"], a["rank"]
    rows = np.arange(B)[:, None]
    place = np.zeros((B, perm.shape[1], MAX_SAMPLES), int)  # client i's t-th sample's place
    place[rows, owner, rank] = np.arange(n)
    new = np.take_along_axis(np.argsort(sigma, axis=1), owner, axis=1)  # new owner of each place
    source = place[rows, np.take_along_axis(perm, new, axis=1), rank]  # old place it takes
    base = np.take_along_axis(a["base"], source, axis=1)
    losses = a["losses"][rows[:, :, None], perm[:, :, None], source[:, None, :]]
    return base, losses, new


def _row_ok(i: int, row: list, got: list, rtol: float, atol: float) -> bool:
    """Whether ``got`` (the subject's C_i) is a beneficial set the specification allows for
    row I(i, .): everyone when the row does not split; otherwise the higher group of an
    optimal 2-means split (the first of an exact tie, in cut order) with i added. Scale-free
    tolerances: a split is optimal to SCORE_RTOL of the row's sum of squares, a gap at the
    threshold to SCORE_RTOL of its largest magnitude (rows of any scale are asked: placed
    rows, :func:`_placed`, reach 1e-11)."""
    everyone = all(got)
    info = olia.beneficial_set(i, row, rtol, atol)
    if not info["distinct"]:
        return everyone
    splits, min_gap = info["splits"], info["min_gap"]
    tol = SCORE_RTOL * math.fsum(v * v for v in row)
    gap_tol = SCORE_RTOL * max(abs(v) for v in row)
    gap = splits[0][2]
    if gap < min_gap - gap_tol:
        return everyone
    if everyone and gap <= min_gap + gap_tol:
        return True  # at the no-split threshold to float noise: either answer
    for k, (cost, high, _) in enumerate(splits):
        if cost > splits[0][0] + tol:
            break
        if k > 0 and cost == splits[k - 1][0]:
            continue  # an exact tie: only the first (lowest) cut may be taken
        if [h or j == i for j, h in enumerate(high)] == got:
            return True
    return False


def _rows_ok(I, C, rtol, atol) -> np.ndarray:
    """(B,) the number of sets that are not a beneficial set the spec allows (_row_ok)."""
    return np.array([sum(not _row_ok(i, I[k][i], C[k][i], rtol, atol)
                         for i in range(len(I[k]))) for k in range(len(I))], dtype=float)


def _placed(row: list, gap: float, rtol: float, atol: float, side: float, share: float,
            sign: float, size: float) -> list | None:
    """``row`` moved (scaled by a > 0 and shifted: the 2-means split of a row is the same
    after, its gap times a) so that the gap of its best split, ``gap``, sits at the no-split
    threshold ``rtol * max|row| + atol`` times 1 + ``side`` PLACE, just above (+1: it splits)
    or just below (-1: everyone): both tolerances count where both are non-zero (atol a
    ``share``-drawn part of the threshold, up to the most the row's spread leaves it), its
    largest magnitude on the side ``sign`` (2^``size`` where the threshold leaves it free).
    None where no place can be found (a flat row, no tolerance, or an rtol so large that
    every placement of the row falls below the threshold)."""
    if not gap > 0 or rtol == atol == 0:
        return None
    lo, hi = min(row), max(row)
    f = 1.0 + side * PLACE
    if rtol == 0:
        a = atol * f / gap
        b = -a * (lo + hi) / 2.0 + sign * 2.0**size * a * (hi - lo)
        return [a * v + b for v in row]
    room = 1.0 - rtol * f * (hi - lo) / (2.0 * gap)  # atol's largest share of the threshold
    if room <= 0:
        return None
    if atol == 0:
        top = 2.0**size  # the largest magnitude
        a = rtol * top * f / gap
    else:
        w = room * (0.05 + 0.9 * share)
        threshold = atol / w
        top = (1.0 - w) * threshold / rtol
        a = threshold * f / gap
    b = top - a * hi if sign > 0 else -top - a * lo
    return [a * v + b for v in row]


def _at_tolerances(I: np.ndarray, place: np.ndarray, mode: str) -> np.ndarray:
    """(B,) mechanisms.lia's sets and clusters at the drawn tolerances (:data:`TOLERANCES`;
    tier 0: the documented defaults, left out of the call) on the scores with each
    instance's row ``place[k, 1]`` placed at the threshold (:func:`_placed`, by the gaps of
    :func:`mechanisms.lia.two_means_1d`): the placed row's set against the oracle
    (:func:`_row_ok`; 1 if not) plus the clusters that are not the components of the sets
    (p2p: the entries that differ from them)."""
    B = len(I)
    _, lo, hi = lia.two_means_1d(values=I)
    gaps = hi - lo
    tier, rows = place[:, 0].astype(int), place[:, 1].astype(int)
    tols = [(olia.DEFAULT_RTOL, olia.DEFAULT_ATOL) if t == 0 else TOLERANCES[t]
            for t in range(len(TOLERANCES))]
    J = np.array(I, dtype=float)
    for k in range(B):
        new = _placed(J[k, rows[k]].tolist(), float(gaps[k, rows[k]]), *tols[tier[k]],
                      *place[k, 2:].tolist())
        if new is not None:
            J[k, rows[k]] = new
    out = np.zeros(B)
    for t in np.unique(tier).tolist():
        ks = np.flatnonzero(tier == t)
        kw = {} if t == 0 else dict(zip(("rtol", "atol"), TOLERANCES[t], strict=True))
        C = np.asarray(lia.beneficial_sets(I=J[ks], **kw))
        ids = np.asarray(lia.cluster(I=J[ks], mode=mode, **kw))
        for n, k in enumerate(ks.tolist()):
            r = rows[k]
            out[k] = float(not _row_ok(r, J[k, r].tolist(), C[n, r].tolist(), *tols[t]))
            if mode == "p2p":
                out[k] += float(np.sum(ids[n] != C[n]))
            else:
                out[k] += float(sum(x != y for x, y in zip(ids[n].tolist(),
                                                           olia.clusters(C[n].tolist()),
                                                           strict=True)))
    return out


def _one_row_gap(row: list) -> float:
    """:func:`mechanisms.lia.two_means_1d` on one row given as a 1-D array: the same split
    and centres as the row in a batch of rows (bit for bit), and a split the oracle allows
    (:func:`proofs.oracle.lia.two_means`: everyone high when the row has fewer than two
    distinct values, else the values above a cut high, the higher centre theirs, and the
    split's objective the least to SCORE_RTOL of the row's squares). 0 when it holds, else
    1."""
    high, lo, hi = lia.two_means_1d(values=np.array(row))
    rows = lia.two_means_1d(np.array([row, row]))
    if not (np.array_equal(high, rows[0][0]) and lo == rows[1][0] and hi == rows[2][0]):
        return 1.0
    if len(set(row)) < 2:
        return 0.0 if high.all() else 1.0
    splits = olia.two_means(row)
    tol = SCORE_RTOL * (1.0 + math.fsum(v * v for v in row))
    cost = olia.split_cost(row, high.tolist())
    v = np.array(row)
    ordered = 0 < high.sum() < len(row) and v[~high].max() <= v[high].min() and lo < hi
    return 0.0 if ordered and cost <= splits[0][0] + tol else 1.0


def _conforms(answer, a):
    """(amount, effective) per instance: the scores against the oracle's mean-loss
    differences (1e-12 of the largest), each set against the spec's 2-means rule (the
    subject's own rtol, atol), the clusters against the components of the subject's own
    sets' mutual edges numbered by first client (p2p: the sets themselves), and (central) the
    adjusted Rand index of the clusters and the planted groups against the oracle's pair
    counts (within ARI_TOL); once a batch, the 2-means of one row given alone, moved so that
    it holds an exact 0 (:func:`_one_row_gap`), and (central) the index of labelings of every
    size from 0 to m (:func:`_ari_sizes`); one instance alone through the subject's own
    methods and in a batch through the bulk code give the same scores bit for bit, the same
    sets and clusters (:func:`_differ`; a built-in subject only): with the bulk code, the
    first and the last instance of each sample layout of the batch also alone
    (:func:`_alone`), and the batch laid out as two leading dimensions, every argument by
    keyword (:func:`_two_dims_answer`); one instance, also in batches of COPIES copies of
    it. Every configuration and parameter of the public API reached (a built-in subject):
    mechanisms.lia's sets and clusters at drawn tolerances (the documented defaults left out
    of the call, both non-zero, one or both 0) with a row of each instance placed just above
    or just below the no-split threshold (:func:`_at_tolerances`); one client drawn as well
    as 2-12."""
    got = answer(a["base"], a["losses"], a["owner"])
    I, C = got["I"], got["C"]
    B, m = I.shape[:2]
    out = np.zeros(B)
    for k in range(B):
        want = olia.influence(a["base"][k].tolist(), a["losses"][k].tolist(),
                              a["owner"][k].tolist(), m)
        big = 1.0 + max(abs(v) for row in want for v in row)
        err = float(np.max(np.abs(I[k] - np.array(want))))
        out[k] = max(0.0, err - SCORE_RTOL * big) if math.isfinite(err) else math.inf
        if got["labels"] is None:
            out[k] = max(out[k], float(np.sum(got["together"][k] != C[k])))
        else:
            labels = olia.clusters(C[k].tolist())
            out[k] = max(out[k], float(sum(int(x) != y for x, y in
                                           zip(got["labels"][k].tolist(), labels,
                                               strict=True))))
            # the paper's measure of the clusters against the planted groups (any noise:
            # the partitions differ in some draws), against the oracle's pair counts
            ids, groups = got["labels"][k].tolist(), a["groups"][k].tolist()
            ari = float(lia.adjusted_rand_index(ids, groups))
            want = olia.adjusted_rand_index(ids, groups)
            gap = abs(ari - want) - ARI_TOL
            out[k] = max(out[k], gap if math.isfinite(gap) else math.inf)
    # once a batch: client 0's row, moved so that its middle value is exactly 0 (a score of
    # 0, an update that neither helps nor hurts, is valid: nothing may divide by it)
    row = I[0][0] - I[0][0][m // 2]
    out[0] = max(out[0], _one_row_gap(row.tolist()))
    if got["labels"] is not None:  # once a batch: the index of labelings of every size
        out[0] = max(out[0], _ari_sizes(got["labels"][0].tolist(), a["groups"][0].tolist()))
    if "one" in a:  # the bulk path: some instances also alone, through the subject's methods
        for k in _alone(a["owner"]):
            alone = a["one"](a["base"][k:k + 1], a["losses"][k:k + 1], a["owner"][k:k + 1])
            out[k] = max(out[k], _differ(got, k, alone, 0))
    if a.get("two") is not None and B >= 2:  # the bulk path: two leading dimensions too
        two = a["two"](a["base"], a["losses"], a["owner"])
        for k in range(2 * (B // 2)):
            out[k] = max(out[k], _differ(got, k, two, k))
    if "bulk" in a:  # one instance (a built-in subject): also in batches of its copies
        for copies in COPIES:
            rows = np.zeros(copies, int)
            batch = a["bulk"](a["base"][rows], a["losses"][rows], a["owner"][rows])
            out[0] = max(out[0], max(_differ(got, 0, batch, k) for k in range(copies)))
    if "one" in a or "bulk" in a:  # a built-in subject: mechanisms.lia at other tolerances
        out = np.maximum(out, _at_tolerances(I, a["place"], a["mode"]))
    return np.maximum(out, _rows_ok(I.tolist(), C.tolist(), a["rtol"], a["atol"]))


def _ari_sizes(ids: list, groups: list) -> float:
    """:func:`mechanisms.lia.adjusted_rand_index` of the first n cluster ids and planted
    groups for every n from 0 (no items) to m, against the oracle's pair counts: the index
    where it is undefined (fewer than two items, trivial labelings: 1.0 by convention) as
    well as where it is not. The largest gap past ARI_TOL (inf for a NaN), else 0."""
    worst = 0.0
    for n in range(len(ids) + 1):
        gap = abs(float(lia.adjusted_rand_index(a=ids[:n], b=groups[:n]))
                  - olia.adjusted_rand_index(ids[:n], groups[:n])) - ARI_TOL
        worst = max(worst, gap if math.isfinite(gap) else math.inf)
    return worst


def _alone(owner) -> list:
    """The instances of a batch checked alone as well: the first and the last of each sample
    layout (every layout's first and last place in the batch)."""
    _, first = np.unique(owner, axis=0, return_index=True)
    _, last = np.unique(owner[::-1], axis=0, return_index=True)
    return sorted(set(first.tolist()) | {len(owner) - 1 - k for k in last.tolist()})


def _differ(x, j, y, k) -> float:
    """How many entries of instance ``j`` of answer ``x`` differ from instance ``k`` of
    answer ``y``: scores bit for bit (a NaN differs), sets, neighbourhoods and cluster ids
    exactly."""
    n = float(np.sum(np.asarray(x["I"][j], dtype=float).view(np.int64)
                     != np.asarray(y["I"][k], dtype=float).view(np.int64)))
    for f in ("C", "together"):
        n += float(np.sum(x[f][j] != y[f][k]))
    if (x["labels"] is None) != (y["labels"] is None):
        return n + 1.0
    if x["labels"] is not None:
        n += float(np.sum(np.asarray(x["labels"][j]) != np.asarray(y["labels"][k])))
    return n


def _self_included(answer, a):
    """i is in C_i for every client (and in its own p2p neighbourhood or cluster)."""
    got = answer(a["base"], a["losses"], a["owner"])
    diag = np.arange(got["C"].shape[-1])
    return (np.sum(~got["C"][:, diag, diag], axis=1)
            + np.sum(~got["together"][:, diag, diag], axis=1)).astype(float)


def _higher_centre(answer, a):
    """C_i is the group of the higher centre: every member but i scores at least as high as
    every non-member (a set of i alone: i's own score the highest). Counts the rows that
    break it; discriminating when some row split (C_i is not everyone)."""
    got = answer(a["base"], a["losses"], a["owner"])
    I, C = got["I"], got["C"]
    m = I.shape[-1]
    eye = np.eye(m, dtype=bool)
    members = C & ~eye
    low = np.where(members, I, np.inf).min(axis=-1)
    low = np.where(members.any(axis=-1), low, I[:, np.arange(m), np.arange(m)])
    outside = np.where(~C, I, -np.inf).max(axis=-1)
    split = ~C.all(axis=-1)
    wrong = np.sum(split & (outside > low), axis=-1).astype(float)
    return wrong, np.ones(len(I), bool), split.any(axis=-1)


def _components(answer, a):
    """Central mode: the clusters are the connected components of the mutual edges (j in C_i
    and i in C_j), numbered 0, 1, ... by first client, and nothing else (the number of
    clusters is never an input); p2p mode: each neighbourhood is the client's set."""
    got = answer(a["base"], a["losses"], a["owner"])
    C = got["C"]
    if got["labels"] is None:
        return np.sum(got["together"] != C, axis=(1, 2)).astype(float)
    return np.array([float(sum(int(x) != y for x, y in
                               zip(got["labels"][k].tolist(), olia.clusters(C[k].tolist()),
                                   strict=True))) for k in range(len(C))])


def _recovery(answer, a):
    """The planted groups are recovered (the paper's synthetic check: adjusted Rand index 1
    against the Oracle clustering): clients share a cluster (central) / are in each other's
    neighbourhood (p2p) exactly when they share a group. Counts the pairs that differ; with
    cluster ids (central), the paper's measure must agree: :func:`mechanisms.lia.
    adjusted_rand_index` of the ids and the planted groups is 1 exactly when no pair
    differs (else one more)."""
    got = answer(a["base"], a["losses"], a["owner"])
    planted = a["groups"][:, :, None] == a["groups"][:, None, :]
    pairs = np.sum(got["together"] != planted, axis=(1, 2)).astype(float)
    if got["labels"] is not None:
        ari = np.array([lia.adjusted_rand_index(ids, groups)
                        for ids, groups in zip(got["labels"], a["groups"], strict=True)])
        pairs = np.where((ari == 1.0) == (pairs == 0), pairs, pairs + 1.0)
    return pairs


def _permutation(answer, a):
    """Relabelling the clients relabels the beneficial sets and the clusters."""
    got = answer(a["base"], a["losses"], a["owner"])
    moved = answer(*_permuted(a))
    pi = a["perm"]
    rows, cols = pi[:, :, None], pi[:, None, :]
    b = np.arange(len(pi))[:, None, None]
    return (np.sum(moved["C"] != got["C"][b, rows, cols], axis=(1, 2))
            + np.sum(moved["together"] != got["together"][b, rows, cols], axis=(1, 2))
            ).astype(float)


def _scale_invariance(answer, a):
    """Multiplying every loss by a power of two (the scores by the same) changes neither the
    beneficial sets nor the clusters (2-means and the relative no-split rule are
    scale-free)."""
    got = answer(a["base"], a["losses"], a["owner"])
    s = a["scale"]
    scaled = answer(a["base"] * s[:, None], a["losses"] * s[:, None, None], a["owner"])
    return (np.sum(scaled["C"] != got["C"], axis=(1, 2))
            + np.sum(scaled["together"] != got["together"], axis=(1, 2))).astype(float)


def _one_instance(check):
    """The one-instance violation of a check over batches: the batch of ``case`` alone,
    answered by the subject's own methods."""

    def violation(subject, case):
        a = {**_case_arrays(case), "rtol": getattr(subject, "rtol", 1e-3),
             "atol": getattr(subject, "atol", 1e-12), "mode": getattr(subject, "mode", None)}
        if _builtin(subject):
            a["bulk"] = _bulk_answer(subject)
        out = check(_one_answer(subject), a)
        if not isinstance(out, tuple):
            return float(out[0])
        return float(out[0][0]), float(out[0][0]), bool(out[2][0])

    violation.__name__ = check.__name__.lstrip("_")
    violation.__doc__ = check.__doc__
    return violation


def _builtin(subject) -> bool:
    """Whether ``subject`` is a :class:`proofs.LiaClustering` with the built-in rules (its
    answers are mechanisms.lia's bulk code's)."""
    from .subjects import LiaClustering

    return isinstance(subject, LiaClustering) and all(
        getattr(subject, r) is None for r in ("scores_rule", "sets_rule", "cluster_rule")
    ) and all(getattr(subject.__class__, f) is getattr(LiaClustering, f)
              for f in ("scores", "sets", "cluster"))


def _hook(check):
    """A Property's ``batch`` hook: the check over the whole batch with the subject's bulk
    code, for a :class:`proofs.LiaClustering` with the built-in rules (None otherwise: one
    instance at a time through its own methods)."""

    def for_subject(subject):
        if not _builtin(subject):
            return None

        def evaluate(a):
            out = check(_bulk_answer(subject),
                        {**a, "rtol": subject.rtol, "atol": subject.atol, "mode": subject.mode,
                         "one": _one_answer(subject), "two": _two_dims_answer(subject)})
            return out if isinstance(out, tuple) else (out,)

        return evaluate

    return for_subject


_EVERY = ("every effective example (no discriminating flag: {what}, checked on each, could "
          "break on any instance)")
_PRE = "per-sample losses of the joint and partial models; planted groups"


def _prop(key, name, statement, reference, preconditions, check, noise="any",
          discriminates="", note=""):
    instances = lia_instances(noise)
    return Property(key, name, statement, reference, preconditions, "lia", instances,
                    _one_instance(check), note=note, sample=lambda: LiaSampler(noise),
                    batch=_hook(check), clients=instances.clients, discriminates=discriminates)


LIA_PROPERTIES = {p.key: p for p in [
    _prop("lia_conforms", "Conforms to the equations (pFedLIA)",
          "the scores, the beneficial sets and the clusters equal the oracle's transcription "
          "of the score and the clustering rules", "spec lia.md: Score, Clustering",
          _PRE + "; any noise", _conforms,
          discriminates=_EVERY.format(what="the scores, every set and every cluster"),
          note="the oracle (proofs.oracle.lia) is written from the paper's summary and the "
               "spec"),
    _prop("lia_self_included", "A client is in its own beneficial set",
          "i in C_i for every client i", "spec lia.md (C_i: i itself included)",
          _PRE + "; any noise", _self_included,
          discriminates=_EVERY.format(what="every client's own membership")),
    _prop("lia_higher_centre", "The beneficial set is the higher group",
          "every member of C_i but i scores at least as high as every non-member",
          "paper Fig. 3 (k-means frontier); spec lia.md (the higher centre)",
          _PRE + "; any noise", _higher_centre,
          discriminates="some client's set split the row (C_i is not everyone)"),
    _prop("lia_components", "Clusters are the mutual components",
          "central: clusters = connected components of {i - j : j in C_i and i in C_j}, "
          "numbered by first client; p2p: the neighbourhoods are the sets",
          "spec lia.md (centralised mode, ours; peer-to-peer mode)", _PRE + "; any noise",
          _components, discriminates=_EVERY.format(what="every client's cluster")),
    _prop("lia_recovery", "Planted groups are recovered",
          "clients share a cluster (p2p: a neighbourhood) iff they share a planted group; "
          "central: the adjusted Rand index against the groups is 1 exactly then",
          "paper (synthetic check: matches the Oracle clustering, adjusted Rand index 1)",
          _PRE + "; noise below 1/50 of the gap between groups (1e-4 h with one group)",
          _recovery, noise="small",
          discriminates=_EVERY.format(what="every pair of clients")),
    _prop("lia_recovery_noisy", "Planted groups are recovered, any noise",
          "clients share a cluster (p2p: a neighbourhood) iff they share a planted group",
          "paper (synthetic check; precondition dropped)",
          _PRE + "; noise up to the largest gap", _recovery, noise="large",
          discriminates=_EVERY.format(what="every pair of clients"),
          note="noise as large as the gap blurs the groups: a row's 2-means splits elsewhere"),
    _prop("lia_permutation", "Permutation equivariance (pFedLIA)",
          "relabelling the clients relabels the beneficial sets and the clusters", "-",
          _PRE + "; any noise", _permutation,
          discriminates=_EVERY.format(what="the relabelled sets and clusters")),
    _prop("lia_scale_invariance", "Scale invariance (pFedLIA)",
          "multiplying every loss by a power of two changes no set and no cluster",
          "- (2-means and the relative no-split rule are scale-free)", _PRE + "; any noise",
          _scale_invariance,
          discriminates=_EVERY.format(what="the rescaled sets and clusters")),
]}
