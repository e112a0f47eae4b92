"""One folder per Flower run, and an offline re-check of any of its rounds.

``<out>/run-<run id>/`` holds

* ``config.json`` - the run config, the Flower settings, versions and every registration
  (partition id, node, reported type);
* ``reference.npy`` - the initial model (the reference point of the cosine distance);
* ``pricing.json`` (CPL) - the reports, gradient norms, game parameters, prices and q;
* ``rounds/round-NNNN.json`` - each round's inputs (who was sent a message, who took part,
  their reports, upload digests, distances) and its outcome (adjacency, payments, utilities;
  CPL: weights and the digest of the new global model), and who was rejected and why;
* ``rounds/round-NNNN.npz`` - the uploads themselves, when the run sets ``save-uploads``;
* ``result.json`` and ``params.npz`` - the ledger, evaluation and final models.

:func:`recheck` replays every recorded round against :mod:`mechanisms.ipfl` /
:mod:`mechanisms.cpl` (``fedmarket recheck RUN_DIR``); it needs no flwr. Each round's file and
``result.json``'s ``round_times`` carry the ServerApp's time stamps of the round (``start``,
``end``, ``seconds``, ``reply_wait_seconds``, ``joined``); :func:`slow_rounds` finds the rounds
that took much longer than a baseline (a round held up by something it waited for).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from mechanisms.files import read_arrays

__all__ = ["RunRecorder", "recheck", "slow_rounds"]


def _digest(flat) -> str:
    return hashlib.sha256(np.ascontiguousarray(flat, dtype=np.float64).tobytes()).hexdigest()


def _write(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=float))
    tmp.replace(path)


class RunRecorder:
    """Writes a run's folder as the ServerApp goes (see the module docstring)."""

    def __init__(self, out, run_id, save_uploads: bool = False):
        self.dir = Path(out) / f"run-{run_id}"
        (self.dir / "rounds").mkdir(parents=True, exist_ok=True)
        self.save_uploads = bool(save_uploads)

    def start(self, config: dict, reference: np.ndarray | None = None) -> None:
        _write(self.dir / "config.json", config)
        if reference is not None:
            np.save(self.dir / "reference.npy", np.asarray(reference, dtype=np.float64))

    def pricing(self, record: dict) -> None:
        _write(self.dir / "pricing.json", record)

    def __call__(self, server_round: int, record: dict, uploads: dict) -> None:
        _write(self.dir / "rounds" / f"round-{server_round:04d}.json", record)
        if self.save_uploads and uploads:
            np.savez(self.dir / "rounds" / f"round-{server_round:04d}.npz",
                     **{str(k): np.asarray(v, dtype=np.float64) for k, v in uploads.items()})

    def finish(self, summary: dict, params: dict | None = None) -> None:
        _write(self.dir / "result.json", summary)
        if params:
            np.savez(self.dir / "params.npz", **{str(k): v for k, v in params.items()})


def slow_rounds(round_times, baseline, margin: float, checked=None) -> dict[int, float]:
    """The rounds among ``checked`` (round numbers; default: every round not in ``baseline``)
    that took longer than the median duration of the ``baseline`` rounds plus ``margin``
    seconds: round -> its duration. ``round_times`` is what a run's ``result.json`` holds
    under ``round_times`` (dicts with ``round`` and ``seconds``). A checked round without a
    finite duration counts as slow; the baseline's durations must be finite.

    >>> times = [{"round": t, "seconds": s} for t, s in enumerate([5.0, 6.0, 40.0, 5.5], 1)]
    >>> slow_rounds(times, baseline=[1, 2, 4], margin=10.0)
    {3: 40.0}
    >>> slow_rounds(times[:2], baseline=[1], margin=10.0)
    {}
    """
    from mechanisms.errors import MarketInputError

    seconds = {}
    for entry in round_times:
        try:
            t = int(entry["round"])
            value = entry.get("seconds")
            seconds[t] = float("nan") if value is None else float(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise MarketInputError("round_times", f"entry {entry!r} lacks a round number "
                                                  f"and seconds ({exc})") from None
    base = sorted(set(int(t) for t in baseline))
    if not base:
        raise MarketInputError("baseline", "is empty; name at least one round to compare "
                                           "with")
    missing = [t for t in base if t not in seconds]
    if missing:
        raise MarketInputError("baseline", f"names rounds {missing} that round_times lacks "
                                           f"(it has {sorted(seconds)})")
    ref = np.array([seconds[t] for t in base])
    if not np.isfinite(ref).all():
        raise MarketInputError("baseline", f"rounds {base} have durations {ref.tolist()}; "
                                           "every one must be finite")
    if not (np.isfinite(margin) and margin >= 0):
        raise MarketInputError("margin", f"is {margin!r}; must be finite and >= 0 seconds")
    bound = float(np.median(ref)) + float(margin)
    todo = sorted(set(seconds) - set(base)) if checked is None else \
        sorted(set(int(t) for t in checked))
    out = {}
    for t in todo:
        value = seconds.get(t, float("nan"))
        if not value <= bound:  # NaN or a missing round: slow
            out[t] = value
    return out


def _not_arrays(message: str):
    from mechanisms.errors import MarketInputError

    return MarketInputError("run_dir", message)


def _rounds(run: Path, which: int | None):
    files = sorted((run / "rounds").glob("round-*.json"))
    for f in files:
        rec = json.loads(f.read_text())
        if which is None or rec["round"] == which:
            up = f.with_suffix(".npz")
            yield rec, (read_arrays(up, _not_arrays) if up.is_file() else None)


def recheck(run_dir, server_round: int | None = None, *, atol: float = 1e-9,
            rules_from=()):
    """Replay the recorded rounds of a finished run; a DataFrame with one row per (round,
    check): ``ok`` and a ``detail``. Checks: iPFL - the clearing (adjacency, payments) from the
    recorded reports and distances, the utilities (with a liar's recorded truth), budget
    balance, and with saved uploads their digests and
    the distances; CPL - the prices and q from the recorded reports, and with saved uploads the
    digests and the unbiased aggregate's digest.

    The run folder is data: a rule it names ("module:function") is imported only from a
    module in ``rules_from`` (:func:`mechanisms.lookup.names_from_data`); any other is
    refused, unimported (:class:`mechanisms.lookup.UntrustedName`)."""
    from mechanisms.lookup import names_from_data

    with names_from_data(f"the run folder {run_dir}", rules_from):
        return _recheck(run_dir, server_round, atol)


def _recheck(run_dir, server_round, atol):
    import pandas as pd

    from mechanisms import cpl, ipfl
    from mechanisms.errors import MarketInputError

    run = Path(run_dir)
    if not (run / "config.json").is_file():
        raise MarketInputError("run_dir", f"{run} is not a Flower run folder (no "
                                          "config.json)")
    rows = []

    def add(rnd, check, ok, detail=""):
        rows.append({"round": rnd, "check": check, "ok": bool(ok), "detail": detail})

    ref_path = run / "reference.npy"
    reference = read_arrays(ref_path, _not_arrays) if ref_path.is_file() else None
    pricing = json.loads((run / "pricing.json").read_text()) \
        if (run / "pricing.json").is_file() else None
    if pricing is not None and server_round in (None, 0):
        rep = pricing["reports"]
        N = np.asarray(rep["N"])
        game = cpl.Game(a=N / N.sum(), G=np.asarray(pricing["G"]),
                        c=np.full(len(N), pricing["c"]), v=np.asarray(rep["v"]),
                        budget=pricing["budget"], alpha=pricing["alpha"], R=pricing["rounds"],
                        q_min=pricing["q_min"])
        from ..algorithms.cpl import prices_and_q

        prices, q = prices_and_q(game, pricing["pricing"])
        ok = np.allclose(prices, pricing["prices"], rtol=1e-6, atol=1e-9) and \
            np.allclose(q, pricing["q"], rtol=1e-6, atol=1e-9)
        add(0, "cpl pricing", ok, f"prices {np.round(prices, 6).tolist()}")
    for rec, up in _rounds(run, server_round):
        t = rec["round"]
        if up is not None:
            bad = [p for p, d in rec["upload_digests"].items() if _digest(up[p]) != d]
            add(t, "upload digests", not bad, f"mismatch: {bad}" if bad else
                f"{len(rec['upload_digests'])} uploads")
        if rec["algorithm"] == "ipfl" and "outcome" in rec:
            r = rec["reports"]
            D = np.asarray(rec["distances"], dtype=float)
            true = rec.get("truth", {})  # a liar's truth: utilities only, never the clearing
            market = ipfl.Market(N=np.asarray(r["N"]), c=np.asarray(r["c"], dtype=float),
                                 K=np.asarray(r["K"]), lam=rec["lam"],
                                 true_N=true.get("N"), true_c=true.get("c"),
                                 true_K=true.get("K"))
            want = rec["outcome"]
            try:  # the server cleared a D computed from the uploads (symmetric); a stored D
                # the clearing refuses (asymmetric, negative: tampered) fails the check
                out = ipfl.clear(market, D, rule=rec["rule"])
            except ipfl.MarketInputError as err:
                if err.field != "D":  # a refused rule name, a bad report: the run's refusal
                    raise
                add(t, "ipfl clearing", False, f"the stored round does not clear: {err}")
                add(t, "ipfl utilities", False, "not cleared")
            else:
                same_adj = np.array_equal(out.adjacency.astype(int),
                                          np.asarray(want["adjacency"]))
                same_pay = np.allclose(out.payments, want["payments"], rtol=1e-9, atol=atol)
                add(t, "ipfl clearing", same_adj and same_pay,
                    f"{int(out.adjacency.sum())} trades among {len(rec['participants'])}")
                same_u = np.allclose(out.utilities, want["utilities"], rtol=1e-9, atol=atol)
                add(t, "ipfl utilities", same_u,
                    "realised: true N, c, K" if true else "reported")
            total = float(np.sum(want["payments"]))
            add(t, "payments sum to zero", abs(total) <= atol * max(1.0, np.abs(
                want["payments"]).max()), f"sum {total:.3g}")
            if up is not None and reference is not None:
                X = np.stack([up[str(p)] for p in rec["participants"]])
                D2 = ipfl.pairwise_distances(X, rec["metric"], reference=reference)
                add(t, "distances from uploads", np.allclose(D2, D, rtol=1e-12, atol=1e-15))
        elif rec["algorithm"] == "cpl":
            a, q = np.asarray(rec["a"]), np.asarray(rec["q"])
            if pricing is not None:
                N = np.asarray(pricing["reports"]["N"])
                same = rec["priced"] == pricing["pids"] and np.allclose(
                    a, N / N.sum(), rtol=1e-12) and np.allclose(q, pricing["q"], rtol=1e-12)
                add(t, "cpl weights a, q", same, f"{len(rec['participants'])} participants")
            if up is not None:
                g = up["global_before"]
                S = [p in rec["participants"] for p in rec["priced"]]
                U = np.stack([up[str(p)] if s else g for p, s in zip(rec["priced"], S,
                                                                      strict=True)])
                new = cpl.unbiased_aggregate(g, U, S, a, q)
                add(t, "cpl aggregate", _digest(new.astype(np.float32)) ==
                    rec["global_after"])
    if not rows:
        raise MarketInputError("round", f"{server_round} is not recorded in {run}")
    return pd.DataFrame(rows)
