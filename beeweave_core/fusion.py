"""Fusing ranked lists from several retrievers into one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

from .records import HitSource

__all__ = ["FusionMode", "fuse", "Ranked"]

# A retriever's output: (id, raw score), best first.
Ranked = Sequence[tuple[str, float]]


class FusionMode(str, Enum):
    RRF = "rrf"  # reciprocal-rank fusion: only ranks count
    WEIGHTED = "weighted"  # weighted sum of min-max normalised scores


def _minmax(ranked: Ranked) -> dict[str, float]:
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    hi, lo = max(scores), min(scores)
    if hi == lo:
        return {i: 1.0 for i, _ in ranked}
    return {i: (s - lo) / (hi - lo) for i, s in ranked}


def fuse(lists: Mapping[str, Ranked], *, mode: FusionMode = FusionMode.RRF, weights: Mapping[str, float] | None = None,
         rrf_k: float = 60.0) -> list[tuple[str, float, dict[str, HitSource]]]:
    """Fuse named ranked lists; return (id, fused score, sources) best first.

    ``weights`` default to 1 for every list. Ties are broken by id so results are
    reproducible run to run.
    """
    mode = FusionMode(mode)
    weights = weights or {}
    total: dict[str, float] = {}
    sources: dict[str, dict[str, HitSource]] = {}
    for name, ranked in lists.items():
        w = float(weights.get(name, 1.0))
        norm = _minmax(ranked) if mode is FusionMode.WEIGHTED else None
        for rank, (cid, score) in enumerate(ranked, start=1):
            part = w / (rrf_k + rank) if norm is None else w * norm[cid]
            total[cid] = total.get(cid, 0.0) + part
            sources.setdefault(cid, {})[name] = HitSource(rank=rank, score=float(score))
    order = sorted(total, key=lambda c: (-total[c], c))
    return [(c, total[c], sources[c]) for c in order]
