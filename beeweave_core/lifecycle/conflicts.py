"""Conflicting memories: alternative answers to one question (opinions on a topic, facts
that contradict). Within a search result they are ordered by confidence, then recency."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..records import KnowledgeChunk, SearchHit

__all__ = ["GROUP_KEY", "conflict_order", "order_conflicts"]

GROUP_KEY = "conflict_group"  # metadata: the group a conflicting memory belongs to


def conflict_order(chunk: KnowledgeChunk) -> tuple[Any, ...]:
    """Sort key, best first: highest confidence, then newest."""
    return (-float(chunk.confidence), -chunk.timestamp.timestamp(), chunk.id)


def order_conflicts(hits: list[SearchHit]) -> None:
    """Reorder, in place, the hits of each conflict group among the places they hold.

    Hits of other memories keep their places, and each place keeps its score, so the
    list stays sorted by score: the best-ordered member takes the group's best place.
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for i, h in enumerate(hits):
        group = h.chunk.metadata.get(GROUP_KEY)
        if group:
            groups.setdefault((h.chunk.user_id, str(group)), []).append(i)
    for places in groups.values():
        if len(places) < 2:
            continue
        members = sorted((hits[i] for i in places), key=lambda h: conflict_order(h.chunk))
        scores = [hits[i].score for i in places]
        for i, h, s in zip(places, members, scores):
            hits[i] = h if h.score == s else replace(h, score=s)
