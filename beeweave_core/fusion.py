"""Fusing ranked lists from several retrievers into one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import Enum

import numpy as np

from .records import HitSource

__all__ = ["FusionMode", "fuse", "fuse_scores", "Ranked"]

# A retriever's output: (id, raw score), best first.
Ranked = Sequence[tuple[str, float]]


class FusionMode(str, Enum):
    ZSCORE = "zscore"  # weighted sum of z-normalised scores (the default)
    RRF = "rrf"  # reciprocal-rank fusion: only ranks count
    WEIGHTED = "weighted"  # weighted sum of min-max normalised scores


def _normalised(ranked: Ranked, mode: FusionMode) -> dict[str, float]:
    scores = [s for _, s in ranked]
    if mode is FusionMode.WEIGHTED:
        hi, lo = max(scores), min(scores)
        span = hi - lo
        return {i: (s - lo) / span if span else 1.0 for i, s in ranked}
    n = len(scores)
    mean = math.fsum(scores) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / n)  # population std
    # A list with no spread (e.g. no query term matched) says nothing: all zeros.
    return {i: (s - mean) / std if std > 1e-9 else 0.0 for i, s in ranked}


def fuse(lists: Mapping[str, Ranked], *, mode: FusionMode = FusionMode.ZSCORE,
         weights: Mapping[str, float] | None = None, rrf_k: float = 60.0,
         limit: int | None = None) -> list[tuple[str, float, dict[str, HitSource]]]:
    """Fuse named ranked lists; return (id, fused score, sources) best first.

    Score-based modes (zscore, weighted) normalise each list over its own members;
    an id missing from a list gets that list's lowest normalised score. ``weights``
    default to 1 for every list. Ties are broken by id so results are reproducible.
    ``limit`` keeps only the best ``limit`` (their sources are the only ones built).
    A hit's sources name only the lists that matched it (a positive raw score: a BM25 of 0
    shares no term with the query), though every list's normalised score entered its total.
    In RRF a list credits only the ids it matched (a positive score), and ids with equal
    scores share a rank (the best of their places), so that neither a list that matched
    nothing nor the ids' order (random uuids) decides anything. Equal totals are ordered by
    each list's raw score (in the order of ``lists``), then by id.
    """
    mode = FusionMode(mode)
    weights = weights or {}
    all_ids = list(dict.fromkeys(cid for ranked in lists.values() for cid, _ in ranked))
    total = dict.fromkeys(all_ids, 0.0)
    for name, ranked in lists.items():
        if not ranked:
            continue
        w = float(weights.get(name, 1.0))
        if mode is FusionMode.RRF:
            rank, prev = 0, None
            for place, (cid, score) in enumerate(ranked, start=1):
                if score != prev:
                    rank, prev = place, score
                if score > 0:  # no credit for what the list did not match
                    total[cid] += w / (rrf_k + rank)
            continue
        norm = _normalised(ranked, mode)
        floor = min(norm.values())
        for cid in all_ids:
            total[cid] += w * norm.get(cid, floor)
    raw = [{cid: float(score) for cid, score in ranked} for ranked in lists.values()]
    order = sorted(all_ids, key=lambda c: (-total[c], *(-r.get(c, -math.inf) for r in raw), c))
    if limit is not None:
        order = order[: max(limit, 0)]
    sources: dict[str, dict[str, HitSource]] = {cid: {} for cid in order}
    for name, ranked in lists.items():
        for rank, (cid, score) in enumerate(ranked, start=1):
            src = sources.get(cid)
            if src is not None and score > 0:
                src[name] = HitSource(rank=rank, score=float(score))
    return [(c, total[c], sources[c]) for c in order]


def fuse_scores(ids: Sequence[str], scores: Mapping[str, np.ndarray], *, mode: FusionMode = FusionMode.ZSCORE,
                weights: Mapping[str, float] | None = None, rrf_k: float = 60.0,
                limit: int | None = None) -> list[tuple[str, float, dict[str, HitSource]]]:
    """``fuse`` for lists that each score every id (distinct ids), given as arrays aligned with
    ``ids``: the same result (each list ranked by score, then id), with array arithmetic where
    ``fuse`` loops over ids. The engine's two retrievers score the union of their candidates,
    so its fusion takes this path (RRF credit only for positive scores, equal scores sharing
    a rank, equal totals ordered by each list's score and then id, as in ``fuse``)."""
    mode = FusionMode(mode)
    weights = weights or {}
    n = len(ids)
    if not n:
        return []
    by_id = np.empty(n, np.int64)  # each id's place in id order, the tie-break
    by_id[sorted(range(n), key=ids.__getitem__)] = np.arange(n)
    total = np.zeros(n)
    listed: dict[str, tuple[list[int], list[float]]] = {}  # each list's ranks and scores, for the sources
    tie_keys: list[np.ndarray] = []  # each list's scores, negated: the tie-break after the total
    for name, s in scores.items():
        s = np.asarray(s, np.float64)
        tie_keys.append(-s)
        rank = np.empty(n, np.int64)
        rank[np.lexsort((by_id, -s))] = np.arange(1, n + 1)
        listed[name] = (rank.tolist(), s.tolist())
        w = float(weights.get(name, 1.0))
        if mode is FusionMode.RRF:
            # Equal scores share the best of their ranks; only matches (score > 0) earn credit.
            shared = np.searchsorted(np.sort(-s), -s, side="left") + 1
            total += np.where(s > 0, w / (rrf_k + shared), 0.0)
        elif mode is FusionMode.WEIGHTED:
            lo, hi = float(s.min()), float(s.max())
            total += w * ((s - lo) / (hi - lo) if hi - lo else np.ones(n))
        else:
            mean = math.fsum(listed[name][1]) / n
            std = math.sqrt(math.fsum(((s - mean) ** 2).tolist()) / n)  # population std
            total += w * ((s - mean) / std if std > 1e-9 else np.zeros(n))
    order = np.lexsort((by_id, *reversed(tie_keys), -total))
    if limit is not None:
        order = order[: max(limit, 0)]
    totals = total.tolist()
    return [(ids[i], totals[i], {name: HitSource(rank[i], score[i]) for name, (rank, score) in listed.items()
                                 if score[i] > 0})
            for i in order.tolist()]
