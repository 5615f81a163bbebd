"""Dedup and merge: which memories are duplicates, which one stays, what it absorbs.

Pure functions over chunks and edges; the mixin reads and writes the store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from ..records import KnowledgeChunk, Relationship, RelationType
from ..scoring import ScoringConfig, effective_weight, refreshed_weight

__all__ = ["KEYED_KINDS", "dedupable", "primary_key", "plan_groups", "fold", "redirect_edges", "RESERVED_KEYS"]

# Lifecycle bookkeeping in metadata: never copied from a merged memory into its primary.
RESERVED_KEYS = frozenset({"merged_into", "merged_at", "merged_from", "stale", "feedback", "source", "sources",
                           "conflict_group", "kind", "fact_key", "topic", "version", "expiry_rule"})

Neighbours = Callable[[KnowledgeChunk], Sequence[tuple[str, float]]]


# Memories that keep their own identity: facts and opinions (versioned by key), and items an
# application keeps under its own key (``kind="item"``: the LangGraph store's), which must stay
# readable and findable under that key whatever else the store holds.
KEYED_KINDS = ("fact", "opinion", "item")


def dedupable(chunk: KnowledgeChunk) -> bool:
    """Facts, opinions, keyed items and marked conflicts keep their own identity: they are
    never merged (neither absorbed nor absorbing)."""
    md = chunk.metadata
    return md.get("kind") not in KEYED_KINDS and not md.get("conflict_group")


def primary_key(chunk: KnowledgeChunk, now: datetime, scoring: ScoringConfig) -> tuple[Any, ...]:
    """Sort key, best first: pinned, highest earned weight (the effective weight without what
    going unused took, so a newer duplicate does not win by being newer), longest, oldest."""
    # Rounded: two unrated copies a few milliseconds apart give 1.0 and 0.9999999999999999, and
    # float noise must not pick the primary over "longest, oldest".
    return (not chunk.pinned, -round(refreshed_weight(chunk, now, scoring), 9), -len(chunk.raw_content),
            chunk.timestamp, chunk.id)


def plan_groups(ordered: Sequence[KnowledgeChunk], neighbours: Neighbours,
                threshold: float) -> list[tuple[KnowledgeChunk, list[tuple[KnowledgeChunk, float]]]]:
    """Greedy grouping over ``ordered`` (best first): each memory not yet absorbed absorbs its
    neighbours at or above ``threshold`` that come after it. Every merged memory is a
    duplicate of its own primary (no chains A~B~C), and a pinned memory is never absorbed."""
    by_id = {c.id: c for c in ordered}
    done: set[str] = set()  # absorbed, or already considered as a primary
    groups = []
    for p in ordered:
        if p.id in done:
            continue
        done.add(p.id)
        members = []
        for oid, sim in neighbours(p):
            o = by_id.get(oid)
            if o is None or oid in done or sim < threshold or o.pinned:
                continue
            members.append((o, float(sim)))
            done.add(oid)
        if members:
            groups.append((p, members))
    return groups


def _unique(values: Iterable[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault(json.dumps(v, sort_keys=True, ensure_ascii=False, default=str), v)
    return list(seen.values())


def _sources(c: KnowledgeChunk) -> list[Any]:
    out = list(c.metadata.get("sources") or [])
    if c.metadata.get("source") is not None:
        out.append(c.metadata["source"])
    return out


def fold(primary: KnowledgeChunk, others: Sequence[KnowledgeChunk], now: datetime,
         scoring: ScoringConfig) -> KnowledgeChunk:
    """The primary after absorbing ``others``: tags, entities, summaries and sources are
    united; access counts add up; weight and confidence take the best of the group;
    every merged memory is recorded in ``metadata["merged_from"]`` with its content."""
    group = [primary, *others]
    new = primary.copy(tags=[], entities=[], metadata=dict(primary.metadata), relationships=[])
    new.tags = list(dict.fromkeys(t for c in group for t in c.tags))
    new.entities = list(dict.fromkeys(e for c in group for e in c.entities))
    summaries = list(dict.fromkeys(c.summary for c in group if c.summary))
    new.summary = "\n".join(summaries) if summaries else None
    sources = _unique(s for c in others for s in _sources(c))
    if sources:
        new.metadata["sources"] = _unique([*new.metadata.get("sources", []), *sources])
    new.metadata["merged_from"] = [*new.metadata.get("merged_from", []), *(
        {"id": o.id, "raw_content": o.raw_content, "timestamp": o.timestamp.isoformat(),
         "session_id": o.session_id, "agent_id": o.agent_id, "source": o.metadata.get("source")} for o in others)]
    for o in others:
        for key, value in o.metadata.items():
            if key not in RESERVED_KEYS:
                new.metadata.setdefault(key, value)
    new.access_count = sum(c.access_count for c in group)
    accessed = [c.last_accessed for c in group if c.last_accessed is not None]
    new.last_accessed = max(accessed) if accessed else None
    best = max(effective_weight(c, now, scoring) for c in group)
    if best != effective_weight(primary, now, scoring):
        new.weight, new.reinforced_at = best, now
    new.confidence = max(c.confidence for c in group)
    expiries = [c.expires_at for c in group]
    new.expires_at = None if None in expiries else max(e for e in expiries if e is not None)
    return new


def redirect_edges(edges: Iterable[Relationship], merged: dict[str, float], primary_id: str,
                   primary_edges: Iterable[Relationship]) -> tuple[list[Relationship], list[Relationship]]:
    """(to delete, to add): every edge of a merged memory moves to the primary (the stronger
    weight wins where the primary already has that edge; edges inside the group vanish),
    and each merged memory gets a ``merged_into`` edge (weight = similarity) to the primary.
    Earlier ``merged_into`` edges are history and stay."""
    have = {(e.source_id, e.target_id, e.type): e.weight for e in primary_edges}
    add: dict[tuple[str, str, RelationType], Relationship] = {}
    delete = []
    for e in edges:
        if e.type is RelationType.MERGED_INTO:
            continue
        delete.append(e)
        src = primary_id if e.source_id in merged else e.source_id
        dst = primary_id if e.target_id in merged else e.target_id
        if src == dst:
            continue
        key = (src, dst, e.type)
        weight = max(e.weight, have.get(key, e.weight), add[key].weight if key in add else e.weight)
        add[key] = Relationship(src, dst, e.type, weight)
    for mid, sim in merged.items():
        add[(mid, primary_id, RelationType.MERGED_INTO)] = Relationship(mid, primary_id, RelationType.MERGED_INTO,
                                                                        round(sim, 6))
    return delete, list(add.values())
