"""Durable records of change: past versions of a memory and the lifecycle's own actions.

Both are ordered logs in the store (``log_append``), tagged with the user so that
``delete_user`` forgets them too:
- ``lifecycle.versions``: a memory's full state just before new content replaced it (an
  edit, a fact's new value) or duplicates were folded into it (``history()``); deleted with
  the memory;
- ``lifecycle.audit``: what maintenance did to a memory and why (merged, archived,
  deleted; expired, evicted, duplicate), so nothing disappears without a record.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..records import KnowledgeChunk, to_datetime
from ..store.base import StoreBackend
from .reports import MemoryVersion

__all__ = ["VERSIONS", "AUDIT", "record_version", "forget_versions", "read_versions", "record_action", "read_actions"]

VERSIONS = "lifecycle.versions"
AUDIT = "lifecycle.audit"


def record_version(backend: StoreBackend, chunk: KnowledgeChunk, reason: str, now: datetime) -> int:
    state = chunk.to_dict()
    state.pop("relationships")  # edges are not part of a version; the audit log has moved ones
    return backend.log_append(VERSIONS, chunk.id, {"reason": reason, "at": now.isoformat(), "chunk": state},
                              user_id=chunk.user_id)


def forget_versions(backend: StoreBackend, chunk_ids: list[str]) -> None:
    """Delete the versions of deleted memories: what a person deleted must not stay readable
    in an earlier version (the audit log keeps what maintenance did, without the text)."""
    if chunk_ids:
        backend.log_delete(VERSIONS, chunk_ids)


def read_versions(backend: StoreBackend, chunk_id: str) -> list[MemoryVersion]:
    return [MemoryVersion(seq, KnowledgeChunk.from_dict(v["chunk"]), to_datetime(v["at"]), v["reason"])
            for seq, _, v in backend.log_read(VERSIONS, chunk_id)]


def record_action(backend: StoreBackend, chunk: KnowledgeChunk, action: str, reason: str, now: datetime,
                  **details: Any) -> None:
    # The user is in the entry too: it outlives the memory, and a user's export finds it by them.
    backend.log_append(AUDIT, chunk.id, {"action": action, "reason": reason, "at": now.isoformat(),
                                         "user_id": chunk.user_id, **details}, user_id=chunk.user_id)


def read_actions(backend: StoreBackend, chunk_id: str | None = None) -> list[dict[str, Any]]:
    return [dict(v, chunk_id=key, seq=seq) for seq, key, v in backend.log_read(AUDIT, chunk_id)]
