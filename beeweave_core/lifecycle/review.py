"""The review queue: memories a person (or a supervising agent) should look at.

One kv entry per memory in namespace ``lifecycle.review``, with the reasons it is there
("stale" after repeated negative feedback, "expired" for an expired memory of high
weight). Entries of memories that no longer exist, or left the active set (merged,
archived), are dropped when the queue is read. :class:`ReviewQueue` hands a user's entries
over in their export and takes them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..filters import build_filter
from ..records import ChunkStatus, KnowledgeChunk, to_datetime
from ..store.base import StoreBackend
from ..user_data import KvEntry, Staged, mapping, section, time_of
from ..validation import check_id
from .reports import ReviewItem

__all__ = ["REVIEW", "ReviewQueue", "flag", "unflag", "read_queue"]

REVIEW = "lifecycle.review"
_LIVE = build_filter({"status": [ChunkStatus.ACTIVE.value, ChunkStatus.PENDING.value]})


def flag(backend: StoreBackend, chunk: KnowledgeChunk, reason: str, now: datetime) -> bool:
    """Put a memory in the queue for ``reason``; False if it was already there for it.
    Atomic (``kv_update``): two processes flagging one memory keep both reasons."""
    added = False

    def change(entry: dict[str, Any] | None) -> dict[str, Any]:
        nonlocal added
        entry = entry or {"user_id": chunk.user_id, "reasons": [], "flagged_at": now.isoformat()}
        added = reason not in entry["reasons"]
        return dict(entry, reasons=[*entry["reasons"], reason]) if added else entry

    backend.kv_update(REVIEW, chunk.id, change, user_id=chunk.user_id)
    return added


def unflag(backend: StoreBackend, chunk_id: str, reason: str | None = None) -> None:
    """Take a memory out of the queue (only for ``reason``, if given)."""
    found = backend.kv_get(REVIEW, chunk_id)
    if found is None:
        return  # the common case, without a write

    def change(entry: dict[str, Any] | None) -> dict[str, Any] | None:
        if entry is None:
            return None
        reasons = [] if reason is None else [r for r in entry["reasons"] if r != reason]
        return dict(entry, reasons=reasons) if reasons else None

    backend.kv_update(REVIEW, chunk_id, change, user_id=found.get("user_id"))


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


class ReviewQueue:
    """A user's review entries in their export (``UserData``): ``review``, a list of
    ``{"chunk_id", "user_id", "reasons", "flagged_at"}`` of memories still in the queue."""

    keeps = (REVIEW,)

    def __init__(self, backend: StoreBackend) -> None:
        self.backend = backend

    def export_user(self, user_id: str) -> dict[str, Any]:
        return {"review": [item.to_dict() for item in read_queue(self.backend, user_id)]}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        staged = Staged()
        for i, raw in enumerate(section(data, "review", list)):
            r = mapping(raw, f"review[{i}]")
            reasons = r.get("reasons")
            if not isinstance(reasons, list) or not all(isinstance(x, str) for x in reasons):
                raise InvalidInputError(f"review[{i}].reasons must be a list of strings")
            cid = check_id(r.get("chunk_id"), f"review[{i}].chunk_id")
            staged.names.add(cid)
            staged.kv.append(KvEntry("review", REVIEW, cid, {
                "user_id": user_id, "reasons": reasons, "flagged_at": time_of(r.get("flagged_at"), f"review[{i}].flagged_at")}))
        return staged
