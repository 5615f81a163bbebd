"""What the lifecycle hands back: maintenance reports, review items and past versions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ..records import KnowledgeChunk

__all__ = ["MaintenanceReport", "ReviewItem", "MemoryVersion"]


@dataclass
class MaintenanceReport:
    """What one ``maintain()`` run did.

    ``merged``, ``expired`` and ``evicted`` say why memories left the active set;
    ``archived`` and ``deleted`` say what happened to them (an expired or evicted memory
    is counted once in each pair). ``flagged`` counts memories newly put in the review
    queue; ``merges`` maps each primary to the ids merged into it in this run.
    ``promoted`` / ``demoted`` count memories that moved to / from the long-term tier;
    ``settled`` the short-term memories kept in long-term after their wait for promotion.
    ``ruled`` counts memories an expiry rule gave an ``expires_at`` in this run (rules
    added or changed since a memory was stored apply to it here).
    """

    merged: int = 0
    expired: int = 0
    archived: int = 0
    deleted: int = 0
    flagged: int = 0
    evicted: int = 0
    promoted: int = 0
    demoted: int = 0
    settled: int = 0
    ruled: int = 0
    merges: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReviewItem:
    """A memory waiting for a decision: ``reasons`` holds "pending" (held by ingestion's admission
    rules), or the lifecycle's flags ("stale", "expired", "verify", "fact_conflict"); ``flagged_at`` is when."""

    chunk_id: str
    user_id: str | None
    reasons: tuple[str, ...]
    flagged_at: datetime
    chunk: KnowledgeChunk | None = None  # the memory itself, as ``BeeWeave.review()`` lists it

    def to_dict(self) -> dict[str, Any]:
        out = {"chunk_id": self.chunk_id, "user_id": self.user_id, "reasons": list(self.reasons),
               "flagged_at": self.flagged_at.isoformat()}
        return out if self.chunk is None else {**out, "chunk": self.chunk.to_dict()}


@dataclass(frozen=True)
class MemoryVersion:
    """A past state of a memory: as it was just before ``replaced_at``.

    ``reason`` is "fact_update" (a fact got new content) or "merge" (duplicates were
    folded into it).
    """

    seq: int
    chunk: KnowledgeChunk
    replaced_at: datetime
    reason: str
