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

# The dense retriever's list: equal fused totals are ordered by its raw score first.
DENSE = "vector"
# Fused totals closer than this (relative to the largest, at least 1) are equal: z-scores sum
# to totals that are equal in exact arithmetic but not always in floating point (two
# candidates ranked oppositely by two lists total +1 - 1 and -1 + 1, ~1e-16 apart).
TIE_TOLERANCE = 1e-12


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


def _tie_keys(names: Sequence[str]) -> list[int]:
    """The lists' positions in the order that breaks ties: the dense list first (it scores
    every candidate by its meaning, where BM25 gives 0 to every one that shares no term with
    the query), then the others as given."""
    return sorted(range(len(names)), key=lambda i: names[i] != DENSE)


def _ordered(total: np.ndarray, keys: Sequence[np.ndarray], by_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order of fused ``total`` (best first) and the totals as reported. Totals equal up
    to rounding (``TIE_TOLERANCE``) are one total, the group's largest, and are ordered by
    ``keys`` (each list's negated raw score, in tie-break order), then ``by_id``: without
    that the last bit of the z-scores' arithmetic, not the evidence, ordered them."""
    n = len(total)
    if not n:
        return np.zeros(0, np.int64), total
    first = np.argsort(-total, kind="stable")
    t = total[first]
    tol = TIE_TOLERANCE * max(1.0, float(np.abs(t).max()))
    starts = np.concatenate([[True], t[:-1] - t[1:] > tol])
    group = np.empty(n, np.int64)
    group[first] = np.cumsum(starts) - 1
    reported = t[starts][group]
    return np.lexsort((by_id, *reversed(list(keys)), group)), reported


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
    nothing nor the ids' order (random uuids) decides anything. Equal totals (up to
    rounding, ``TIE_TOLERANCE``, and then reported as one) are ordered by the dense list's
    (``DENSE``) raw score, then each other list's (in the order of ``lists``), then by id: in
    z-score fusion two candidates that two lists rank oppositely always tie, and a store of
    two or three memories is where that happens.
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
    by_id = np.empty(len(all_ids), np.int64)
    by_id[sorted(range(len(all_ids)), key=all_ids.__getitem__)] = np.arange(len(all_ids))
    keys = [np.array([-raw[i].get(c, -math.inf) for c in all_ids]) for i in _tie_keys(list(lists))]
    places, reported = _ordered(np.array([total[c] for c in all_ids]), keys, by_id)
    if limit is not None:
        places = places[: max(limit, 0)]
    order = [all_ids[i] for i in places.tolist()]
    totals = {all_ids[i]: float(reported[i]) for i in places.tolist()}
    sources: dict[str, dict[str, HitSource]] = {cid: {} for cid in order}
    for name, ranked in lists.items():
        for rank, (cid, score) in enumerate(ranked, start=1):
            src = sources.get(cid)
            if src is not None and score > 0:
                src[name] = HitSource(rank=rank, score=float(score))
    return [(c, totals[c], sources[c]) for c in order]


def fuse_scores(ids: Sequence[str], scores: Mapping[str, np.ndarray], *, mode: FusionMode = FusionMode.ZSCORE,
                weights: Mapping[str, float] | None = None, rrf_k: float = 60.0,
                limit: int | None = None) -> list[tuple[str, float, dict[str, HitSource]]]:
    """``fuse`` for lists that each score every id (distinct ids), given as arrays aligned with
    ``ids``: the same result (each list ranked by score, then id), with array arithmetic where
    ``fuse`` loops over ids. The engine's two retrievers score the union of their candidates,
    so its fusion takes this path (RRF credit only for positive scores, equal scores sharing
    a rank, equal totals ordered by the dense list's score, the others' and then id, as in
    ``fuse``)."""
    mode = FusionMode(mode)
    weights = weights or {}
    n = len(ids)
    if not n:
        return []
    by_id = np.empty(n, np.int64)  # each id's place in id order, the tie-break
    by_id[sorted(range(n), key=ids.__getitem__)] = np.arange(n)
    total = np.zeros(n)
    listed: dict[str, tuple[list[int], list[float]]] = {}  # each list's ranks and scores, for the sources
    negated: list[np.ndarray] = []  # each list's scores, negated: the tie-break after the total
    for name, s in scores.items():
        s = np.asarray(s, np.float64)
        negated.append(-s)
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
    order, reported = _ordered(total, [negated[i] for i in _tie_keys(list(scores))], by_id)
    if limit is not None:
        order = order[: max(limit, 0)]
    totals = reported.tolist()
    return [(ids[i], totals[i], {name: HitSource(rank[i], score[i]) for name, (rank, score) in listed.items()
                                 if score[i] > 0})
            for i in order.tolist()]
