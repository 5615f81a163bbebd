"""``MemoryService``: what the REST API offers, over one local store.

The server's routes, the CLI on a local store, and ``BeeWeaveClient`` on a remote one
share these method names and meanings, so a caller (or the CLI) need not care which
it holds. Everything here is plain Python; nothing imports FastAPI.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..filters import build_filter
from ..lifecycle.facts import CONFLICTS, FACTS
from ..lifecycle.history import AUDIT, VERSIONS
from ..records import ChunkStatus, KnowledgeChunk, SearchHit
from ..stats import SEARCHES, MemoryStats, StatsRecorder, compute_stats

__all__ = ["MemoryService", "EXPORT_FORMAT", "check_user_id", "review_dict"]

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "beeweave.export/1"
_ALL_STATUSES = [s.value for s in ChunkStatus]
_SEP = "\x1f"  # the lifecycle's kv keys are "<user>\x1f<name>"


def check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInputError("user_id must be a non-empty string")
    if len(user_id) > 512:
        raise InvalidInputError("user_id may have at most 512 characters")
    try:
        user_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("user_id is not valid Unicode (lone surrogate)") from None
    return user_id


class MemoryService:
    """One store with its search statistics, offered the way the REST API offers it.

    Args:
        memory: an open ``BeeWeave``.
        recorder: records search latencies (default: a new :class:`StatsRecorder`).
        forget_timeout: how long ``forget_user`` waits for queued events to be processed
            (an event still queued would bring the user's data back after the deletion).
    """

    def __init__(self, memory: Any, *, recorder: StatsRecorder | None = None, forget_timeout: float = 30.0) -> None:
        self.memory = memory
        self.recorder = recorder or StatsRecorder(memory)
        self.forget_timeout = forget_timeout

    # -- writing ---------------------------------------------------------------------------
    def ingest(self, event: Any) -> str:
        return self.memory.ingest(event)

    def flush(self, timeout: float | None = None) -> bool:
        drained = self.memory.flush(timeout)
        self.recorder.flush()
        return drained

    def feedback(self, chunk_ids: str | Iterable[str], signal: str) -> list[KnowledgeChunk]:
        return self.memory.feedback(chunk_ids, signal)

    # -- reading ---------------------------------------------------------------------------
    def search(self, query: str, **kwargs: Any) -> list[SearchHit]:
        return self.recorder.search(query, **kwargs)

    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]:
        if not isinstance(session_id, str) or not session_id.strip():
            raise InvalidInputError("session_id must be a non-empty string")
        return self.memory.trace(session_id, user_id=None if user_id is None else check_user_id(user_id))

    def stats(self, *, user_id: str | None = None, top: int = 10) -> MemoryStats:
        return compute_stats(self.memory, user_id=None if user_id is None else check_user_id(user_id), top=top,
                             recorder=self.recorder)

    # -- review and maintenance ------------------------------------------------------------------
    def pending(self, *, user_id: str | None = None, agent_id: str | None = None,
                limit: int | None = None) -> list[KnowledgeChunk]:
        return self.memory.pending(user_id=user_id, agent_id=agent_id, limit=limit)

    def approve(self, ids: str | Iterable[str]) -> list[str]:
        return self.memory.approve(ids)

    def reject(self, ids: str | Iterable[str], *, reason: str | None = None) -> list[str]:
        return self.memory.reject(ids, reason=reason)

    def review_queue(self, *, user_id: str | None = None) -> list[Any]:
        return self.memory.review_queue(user_id=user_id)

    def resolve_review(self, chunk_id: str, decision: str) -> KnowledgeChunk | None:
        return self.memory.resolve_review(chunk_id, decision)

    def maintain(self, *, user_id: str | None = None) -> Any:
        return self.memory.maintain(user_id=user_id)

    # -- a user's data ------------------------------------------------------------------------
    def export_user(self, user_id: str) -> dict[str, Any]:
        """Everything stored about a user, as JSON-able data.

        Memories of every status with their relationships, past versions (also of deleted
        memories), the lifecycle's audit log, facts and conflict groups, the review queue,
        hot question patterns, and the user's recorded searches.
        """
        user = check_user_id(user_id)
        m, backend = self.memory, self.memory.backend
        chunks = list(backend.scan(build_filter({"status": _ALL_STATUSES}, user_id=user)))
        versions = [{"seq": seq, "chunk_id": key, **v} for seq, key, v in backend.log_read(VERSIONS)
                    if v.get("chunk", {}).get("user_id") == user]
        ids = {c.id for c in chunks} | {v["chunk_id"] for v in versions}
        audit = [dict(v, chunk_id=key, seq=seq) for seq, key, v in backend.log_read(AUDIT) if key in ids]
        prefix = user + _SEP
        return {
            "format": EXPORT_FORMAT,
            "user_id": user,
            "exported_at": m.clock().isoformat(),
            "chunks": [c.to_dict() for c in chunks],
            "versions": versions,
            "audit": audit,
            "facts": {k[len(prefix):]: v for k, v in backend.kv_scan(FACTS, prefix)},
            "conflicts": {k[len(prefix):]: v for k, v in backend.kv_scan(CONFLICTS, prefix)},
            "review": [review_dict(r) for r in m.review_queue(user_id=user)],
            "hot_patterns": [_jsonable(vars(p)) for p in m.hot_patterns(user_id=user)],
            "searches": [v for _, v in backend.kv_scan(SEARCHES) if v.get("user_id") == user],
        }

    def forget_user(self, user_id: str) -> int:
        """Delete everything of a user (records, index entries, relationships, versions, review
        and stats entries, dead letters); return how many memories were deleted.

        Queued events are processed first, so none of them brings the user back.
        """
        user = check_user_id(user_id)
        m = self.memory
        if not m.flush(self.forget_timeout):
            logger.warning("forget_user(%r): the ingest queue did not drain in %s s; events still queued "
                           "for this user will be stored later", user, self.forget_timeout)
        self.recorder.flush()
        dead = [d.event.id for d in m.dead_letters() if d.event.user_id == user]
        if dead:
            m.discard_dead_letters(dead)
        return m.backend.delete_user(user)

    def close(self) -> None:
        try:
            self.recorder.close()
        finally:
            self.memory.close()


def review_dict(item: Any) -> dict[str, Any]:
    return {"chunk_id": item.chunk_id, "user_id": item.user_id, "reasons": list(item.reasons),
            "flagged_at": item.flagged_at.isoformat()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "value") and isinstance(getattr(value, "value"), str):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
