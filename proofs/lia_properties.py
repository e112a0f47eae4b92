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

import numpy as np
from hypothesis import strategies as st

from mechanisms import lia

from .batch import Draws, Sampler
from .core import Property
from .oracle import lia as olia
from .strategies import MAX_CLIENTS

__all__ = ["LIA_PROPERTIES", "LiaCase", "LiaSampler"]

SAMPLES = 2  # validation samples per client
SEPARATION = 50.0  # small noise: |noise| <= the least gap between a row's groups / SEPARATION
ONE_GROUP_NOISE = 1e-4  # one group: |noise| <= 1e-4 h (below the no-split tolerance 1e-3)
SCORE_RTOL = 1e-12
ARI_TOL = 1e-12  # the adjusted Rand index against the oracle's pair counts


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
    """

    base: np.ndarray
    losses: np.ndarray
    owner: np.ndarray
    groups: np.ndarray
    separated: bool
    perm: np.ndarray
    scale: float

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
                f"perm=np.array({np.asarray(self.perm).tolist()}), scale={self.scale!r})")

    def __repr__(self):
        return self.code()


# client fields: group, help, harm, base loss x SAMPLES, perm key; globals: groups, noise kind,
# scale, spare
_GROUP, _HELP, _HARM, _BASE = range(4)
_PERM = _BASE + SAMPLES
_NGROUPS, _NOISE, _SCALE = range(3)


class LiaSampler(Sampler):
    """pFedLIA instances of 2-12 clients (uniform), 1-4 planted groups, SAMPLES validation
    samples per client: client i's sample s has the joint model's loss b_is in [0.1, 3];
    client j's partial model's loss there is b_is - e_ij - noise_ij, with e_ij = h_i in
    [0.05, 1] when j is in i's group (its update helps i) and -harm_i in [0, 1] otherwise, so
    I(i, j) = e_ij + noise_ij. ``noise``: "small" (the recovery precondition, built in:
    |noise| <= min_i (h_i + harm_i) / 50, or 1e-4 min_i h_i with one group present),
    "large" (|noise| up to the largest gap: the groups can blur) or "any" (half and half).
    A power of two in 2^-3..2^3 and a relabelling are drawn with each instance."""

    n_client = _PERM + 1
    n_glob = 4
    min_m = 2
    max_m = MAX_CLIENTS

    def __init__(self, noise: str = "any"):
        if noise not in ("small", "large", "any"):
            raise ValueError(f"noise: unknown {noise!r}; allowed: 'small', 'large', 'any'")
        self.noise = noise

    def arrays(self, d: Draws) -> dict:
        """The instances of ``d`` as arrays: base (B, n), losses (B, m, n), owner (n,),
        groups (B, m), separated (B,), perm (B, m), scale (B,); n = m SAMPLES."""
        u, p, g = d.client, d.pair, d.glob
        B, m = d.size, d.m
        n_groups = np.minimum(1 + np.minimum((g[:, _NGROUPS] * 4).astype(int), 3), m)
        groups = np.minimum((u[..., _GROUP] * n_groups[:, None]).astype(int),
                            n_groups[:, None] - 1)
        h = 0.05 + 0.95 * u[..., _HELP]
        harm = u[..., _HARM]
        base = 0.1 + 2.9 * u[..., _BASE:_BASE + SAMPLES]  # (B, m, S)
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
        # losses[b, j, i, s] = base[b, i, s] - effect[b, i, j] - noise[b, i, j]
        losses = base[:, None, :, :] - np.swapaxes(effect + noise, 1, 2)[..., None]
        return {"base": base.reshape(B, -1), "losses": losses.reshape(B, m, -1),
                "owner": np.repeat(np.arange(m), SAMPLES), "groups": groups,
                "separated": small,
                "perm": np.argsort(u[..., _PERM], axis=1, kind="stable"),
                "scale": 2.0 ** (np.minimum((g[:, _SCALE] * 7).astype(int), 6) - 3)}

    def bulk_input(self, d: Draws) -> dict:
        return self.arrays(d)

    def cases(self, d: Draws) -> list[LiaCase]:
        a = self.arrays(d)
        return [LiaCase(a["base"][k], a["losses"][k], a["owner"], a["groups"][k],
                        bool(a["separated"][k]), a["perm"][k], float(a["scale"][k]))
                for k in range(d.size)]

    def simple(self) -> dict:
        return {"client": [0.0], "pair": [0.5, 0.0], "glob": [0.0]}


GRID = 1024  # the Hypothesis strategy's uniform numbers: multiples of 1/GRID


def _instances(noise: str):
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
            m = draw(st.integers(2, top))
            client = draw(st.lists(unit, min_size=m * sampler.n_client,
                                   max_size=m * sampler.n_client))
            pair = draw(st.lists(unit, min_size=m * m, max_size=m * m))
            glob = draw(st.lists(unit, min_size=sampler.n_glob, max_size=sampler.n_glob))
            d = Draws(np.array(client).reshape(1, m, sampler.n_client),
                      np.array(pair).reshape(1, m, m), np.array(glob).reshape(1, -1))
            return sampler.cases(d)[0]

        return build()

    instances.clients = (2, MAX_CLIENTS)
    return instances


# ------------------------------------------------------------------------------ checks
#
# Every property is one check over a batch of instances (the arrays of LiaSampler.arrays):
# ``check(answer, a)``, where ``answer(base, losses)`` is what the subject answers for the
# batch's losses (scores "I" (B, m, m), sets "C" (B, m, m), clusters "labels" (B, m) in
# central mode or None, "together" (B, m, m): the same cluster / neighbourhood). The batch
# engine calls it with the built-in subject's bulk code (mechanisms.lia over the batch); one
# instance (the Hypothesis engine, a recheck) with a batch of one answered by the subject's
# own methods.


def _together(out) -> np.ndarray:
    """(..., m, m) bool from cluster ids (..., m) or p2p neighbourhoods (..., m, m)."""
    out = np.asarray(out)
    if out.ndim >= 2 and out.shape[-1] == out.shape[-2] and out.dtype == bool:
        return out
    return out[..., :, None] == out[..., None, :]


def _one_answer(subject, owner):
    def answer(base, losses):
        I = np.asarray(subject.scores(base[0], losses[0], owner), dtype=float)
        C = np.asarray(subject.sets(I), dtype=bool)
        out = np.asarray(subject.cluster(I))
        labels = None if out.ndim == 2 else out[None]
        return {"I": I[None], "C": C[None], "labels": labels, "together": _together(out)[None]}

    return answer


def _bulk_answer(subject, owner):
    def answer(base, losses):
        I = lia.influence(base, losses, owner)
        kw = {"rtol": subject.rtol, "atol": subject.atol}
        C = lia.beneficial_sets(I, **kw)
        out = lia.cluster(I, mode=subject.mode, **kw)
        labels = None if subject.mode == "p2p" else out
        return {"I": I, "C": C, "labels": labels, "together": _together(out)}

    return answer


def _case_arrays(case) -> dict:
    return {"base": case.base[None], "losses": case.losses[None], "owner": case.owner,
            "groups": case.groups[None], "separated": np.array([case.separated]),
            "perm": case.perm[None], "scale": np.array([case.scale])}


def _permuted(a) -> tuple:
    """The batch relabelled (new client k is old client perm[k]): its models and its
    validation samples reordered, the owners kept."""
    perm, (B, _, n) = a["perm"], a["losses"].shape
    samples = (perm[:, :, None] * SAMPLES + np.arange(SAMPLES)).reshape(B, n)
    losses = np.take_along_axis(a["losses"], perm[:, :, None], axis=1)
    return (np.take_along_axis(a["base"], samples, axis=1),
            np.take_along_axis(losses, samples[:, None, :], axis=2))


def _row_ok(i: int, row: list, got: list, rtol: float, atol: float) -> bool:
    """Whether ``got`` (the subject's C_i) is a beneficial set the specification allows for
    row I(i, .): everyone when the row does not split; otherwise the higher group of an
    optimal 2-means split (the first of an exact tie, in cut order) with i added."""
    everyone = all(got)
    info = olia.beneficial_set(i, row, rtol, atol)
    if not info["distinct"]:
        return everyone
    splits, min_gap = info["splits"], info["min_gap"]
    tol = SCORE_RTOL * (1.0 + math.fsum(v * v for v in row))
    gap = splits[0][2]
    if gap < min_gap - tol:
        return everyone
    if everyone and gap <= min_gap + tol:
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


def _one_row_gap(row: list) -> float:
    """:func:`mechanisms.lia.two_means_1d` on one row given as a 1-D array: the same split
    and centres as the row in a batch of rows (bit for bit), and a split the oracle allows
    (:func:`proofs.oracle.lia.two_means`: everyone high when the row has fewer than two
    distinct values, else the values above a cut high, the higher centre theirs, and the
    split's objective the least to SCORE_RTOL of the row's squares). 0 when it holds, else
    1."""
    high, lo, hi = lia.two_means_1d(np.array(row))
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
    counts (within ARI_TOL); once a batch,
    the 2-means of one row given alone (:func:`_one_row_gap`)."""
    got = answer(a["base"], a["losses"])
    I, C = got["I"], got["C"]
    B, m = I.shape[:2]
    owner = a["owner"].tolist()
    out = np.zeros(B)
    for k in range(B):
        want = olia.influence(a["base"][k].tolist(), a["losses"][k].tolist(), owner, m)
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
    out[0] = max(out[0], _one_row_gap(I[0][0].tolist()))  # once a batch: client 0's row
    return np.maximum(out, _rows_ok(I.tolist(), C.tolist(), a["rtol"], a["atol"]))


def _self_included(answer, a):
    """i is in C_i for every client (and in its own p2p neighbourhood or cluster)."""
    got = answer(a["base"], a["losses"])
    diag = np.arange(got["C"].shape[-1])
    return (np.sum(~got["C"][:, diag, diag], axis=1)
            + np.sum(~got["together"][:, diag, diag], axis=1)).astype(float)


def _higher_centre(answer, a):
    """C_i is the group of the higher centre: every member but i scores at least as high as
    every non-member (a set of i alone: i's own score the highest). Counts the rows that
    break it; discriminating when some row split (C_i is not everyone)."""
    got = answer(a["base"], a["losses"])
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
    got = answer(a["base"], a["losses"])
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
    got = answer(a["base"], a["losses"])
    planted = a["groups"][:, :, None] == a["groups"][:, None, :]
    pairs = np.sum(got["together"] != planted, axis=(1, 2)).astype(float)
    if got["labels"] is not None:
        ari = np.array([lia.adjusted_rand_index(ids, groups)
                        for ids, groups in zip(got["labels"], a["groups"], strict=True)])
        pairs = np.where((ari == 1.0) == (pairs == 0), pairs, pairs + 1.0)
    return pairs


def _permutation(answer, a):
    """Relabelling the clients relabels the beneficial sets and the clusters."""
    got = answer(a["base"], a["losses"])
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
    got = answer(a["base"], a["losses"])
    s = a["scale"]
    scaled = answer(a["base"] * s[:, None], a["losses"] * s[:, None, None])
    return (np.sum(scaled["C"] != got["C"], axis=(1, 2))
            + np.sum(scaled["together"] != got["together"], axis=(1, 2))).astype(float)


def _one_instance(check):
    """The one-instance violation of a check over batches: the batch of ``case`` alone,
    answered by the subject's own methods."""

    def violation(subject, case):
        a = {**_case_arrays(case), "rtol": getattr(subject, "rtol", 1e-3),
             "atol": getattr(subject, "atol", 1e-12)}
        out = check(_one_answer(subject, case.owner), a)
        if not isinstance(out, tuple):
            return float(out[0])
        return float(out[0][0]), float(out[0][0]), bool(out[2][0])

    violation.__name__ = check.__name__.lstrip("_")
    violation.__doc__ = check.__doc__
    return violation


def _hook(check):
    """A Property's ``batch`` hook: the check over the whole batch with the subject's bulk
    code, for a :class:`proofs.LiaClustering` with the built-in rules (None otherwise: one
    instance at a time through its own methods)."""

    def for_subject(subject):
        from .subjects import LiaClustering

        if not isinstance(subject, LiaClustering) or any(
                getattr(subject, r) is not None for r in ("scores_rule", "sets_rule",
                                                          "cluster_rule")) or any(
                getattr(type(subject), f) is not getattr(LiaClustering, f)
                for f in ("scores", "sets", "cluster")):
            return None

        def evaluate(a):
            out = check(_bulk_answer(subject, a["owner"]),
                        {**a, "rtol": subject.rtol, "atol": subject.atol})
            return out if isinstance(out, tuple) else (out,)

        return evaluate

    return for_subject


_EVERY = ("every effective example (no discriminating flag: {what}, checked on each, could "
          "break on any instance)")
_PRE = "per-sample losses of the joint and partial models; planted groups"


def _prop(key, name, statement, reference, preconditions, check, noise="any",
          discriminates="", note=""):
    instances = _instances(noise)
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
