"""The review queue: memories a person (or a supervising agent) should look at.

One kv entry per memory in namespace ``lifecycle.review``, with the reasons it is there
("stale" after repeated negative feedback, "expired" for an expired memory of high
weight). Entries of memories that no longer exist, or left the active set (merged,
archived), are dropped when the queue is read.
"""

from __future__ import annotations

from datetime import datetime

from ..filters import build_filter
from ..records import ChunkStatus, KnowledgeChunk, to_datetime
from ..store.base import StoreBackend
from .reports import ReviewItem

__all__ = ["REVIEW", "flag", "unflag", "read_queue"]

REVIEW = "lifecycle.review"
_LIVE = build_filter({"status": [ChunkStatus.ACTIVE.value, ChunkStatus.PENDING.value]})


def flag(backend: StoreBackend, chunk: KnowledgeChunk, reason: str, now: datetime) -> bool:
    """Put a memory in the queue for ``reason``; False if it was already there for it."""
    entry = backend.kv_get(REVIEW, chunk.id) or {"user_id": chunk.user_id, "reasons": [],
                                                 "flagged_at": now.isoformat()}
    if reason in entry["reasons"]:
        return False
    entry["reasons"] = [*entry["reasons"], reason]
    backend.kv_put(REVIEW, chunk.id, entry, user_id=chunk.user_id)
    return True


def unflag(backend: StoreBackend, chunk_id: str, reason: str | None = None) -> None:
    """Take a memory out of the queue (only for ``reason``, if given)."""
    entry = backend.kv_get(REVIEW, chunk_id)
    if entry is None:
        return
    reasons = [] if reason is None else [r for r in entry["reasons"] if r != reason]
    if reasons:
        backend.kv_put(REVIEW, chunk_id, dict(entry, reasons=reasons), user_id=entry.get("user_id"))
    else:
        backend.kv_delete(REVIEW, chunk_id)


def read_queue(backend: StoreBackend, user_id: str | None = None) -> list[ReviewItem]:
    entries = list(backend.kv_scan(REVIEW))
    alive = backend.matching([k for k, _ in entries], _LIVE)
    out = []
    for key, entry in entries:
        if key not in alive:
            backend.kv_delete(REVIEW, key)
        elif user_id is None or entry.get("user_id") == user_id:
            out.append(ReviewItem(key, entry.get("user_id"), tuple(entry["reasons"]), to_datetime(entry["flagged_at"])))
    return sorted(out, key=lambda r: (r.flagged_at, r.chunk_id))
