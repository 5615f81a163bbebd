"""Expiry by rule, what becomes of an expired memory, and the eviction score used when a
capacity limit is set."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from enum import Enum

from ..records import KnowledgeChunk
from ..scoring import ScoringConfig, effective_weight, is_expired, ttl_passed
from .config import ExpiryRule, ForgetAction, LifecycleConfig

__all__ = ["Fate", "expiry_fate", "rule_expiry", "inherited_expiry", "eviction_score", "eviction_victims"]


class Fate(str, Enum):
    """What ``maintain()`` does with a memory, judged on the record its write reads."""

    KEEP = "keep"
    REVIEW = "review"  # expired but valued: a person decides
    ARCHIVE = "archive"
    DELETE = "delete"


def expiry_fate(chunk: KnowledgeChunk, now: datetime, cfg: LifecycleConfig, scoring: ScoringConfig) -> Fate:
    """An item's TTL deletes it whatever its weight; an expired memory is archived or deleted
    (``expired_action``) unless its effective weight reaches ``review_weight``."""
    if ttl_passed(chunk, now):
        return Fate.DELETE
    if not is_expired(chunk, now):
        return Fate.KEEP
    if effective_weight(chunk, now, scoring) >= cfg.review_weight:
        return Fate.REVIEW
    return Fate.ARCHIVE if cfg.expired_action is ForgetAction.ARCHIVE else Fate.DELETE


def rule_expiry(chunk: KnowledgeChunk, rules: Sequence[ExpiryRule]) -> tuple[datetime, str] | None:
    """(expires_at, rule name) from the matching rule with the shortest ttl, or None.

    Memories that are pinned or already have an ``expires_at`` are left alone.
    """
    if chunk.pinned or chunk.expires_at is not None:
        return None
    hits = [r for r in rules if r.matches(chunk)]
    if not hits:
        return None
    rule = min(hits, key=lambda r: r.ttl)
    try:
        return chunk.timestamp + rule.ttl, rule.name
    except OverflowError:  # a memory dated at the end of the calendar expires at its end
        return datetime.max.replace(tzinfo=timezone.utc), rule.name


def inherited_expiry(chunks: Sequence[KnowledgeChunk],
                     due: Mapping[str, tuple[datetime, str]]) -> dict[str, tuple[datetime, str]]:
    """Expiries for the tool memories of an ingested run whose turn a rule made expire: a
    tool's output answering a time-bound question ("sunny, 21 °C in Lyon" for "today's
    weather?") is as time-bound as the turn, though its own words carry no cue."""
    turns: dict[str, tuple[datetime, str]] = {}
    for c in chunks:
        info = c.metadata.get("ingest")
        if c.id in due and isinstance(info, Mapping) and info.get("role") == "turn" and info.get("event_id"):
            turns[str(info["event_id"])] = due[c.id]
    out: dict[str, tuple[datetime, str]] = {}
    for c in chunks:
        info = c.metadata.get("ingest")
        if (c.id in due or c.pinned or c.expires_at is not None or not isinstance(info, Mapping)
                or info.get("role") != "tool"):
            continue
        found = turns.get(str(info.get("event_id")))
        if found is not None:
            out[c.id] = (found[0], f"{found[1]} (its turn)")
    return out


def eviction_score(chunk: KnowledgeChunk, now: datetime, cfg: LifecycleConfig) -> float:
    """ln(access_count + 1)·w1 + 1/(idle_days + 1)·w2, where idle time runs from the last
    access (a search hit or a ``used`` signal), or from the memory's timestamp if it was never
    accessed: an old memory read today is as fresh as a new one."""
    since = chunk.last_accessed if chunk.last_accessed is not None else chunk.timestamp
    age_days = max((now - since) / timedelta(days=1), 0.0)
    return (math.log(chunk.access_count + 1) * cfg.evict_access_weight
            + cfg.evict_age_weight / (age_days + 1.0))


def eviction_victims(active: Sequence[KnowledgeChunk], capacity: int, now: datetime,
                     cfg: LifecycleConfig) -> list[KnowledgeChunk]:
    """Which of a user's active memories to evict to get down to ``capacity``: the lowest
    scores first (ties: oldest, then id). Pinned memories are never evicted, so a user
    with more pinned memories than the capacity stays above it."""
    over = len(active) - capacity
    if over <= 0:
        return []
    candidates = sorted((c for c in active if not c.pinned),
                        key=lambda c: (eviction_score(c, now, cfg), c.timestamp, c.id))
    return candidates[:over]
