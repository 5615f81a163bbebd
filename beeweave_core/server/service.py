"""``MemoryService``: what the REST API offers, over one local store.

The server's routes, the CLI on a local store, and ``BeeWeaveClient`` on a remote one
share these method names and meanings, so a caller (or the CLI) need not care which
it holds. Everything here is plain Python; nothing imports FastAPI.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine.listing import Page
from ..errors import InvalidInputError
from ..ingest.write_policy import WritePolicy
from ..lifecycle.reports import ReviewItem
from ..records import ChunkStatus, KnowledgeChunk, SearchHit, to_datetime
from ..stats import MemoryStats, StatsRecorder, compute_stats
from ..user_export import EXPORT_FORMAT, ExportPlan, ImportReport, export_is_empty
from ..validation import check_user

__all__ = ["MemoryService", "EXPORT_FORMAT", "check_user_id", "review_dict", "Page", "EDITABLE"]

logger = logging.getLogger(__name__)

# What PATCH /memories/{id} may change (the rest is derived or bookkeeping).
EDITABLE = ("content", "tags", "pinned", "expires_at", "confidence", "status", "metadata", "summary", "entities",
            "weight")


def check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInputError("user_id must be a non-empty string")
    if len(user_id) > 512:
        raise InvalidInputError("user_id may have at most 512 characters")
    try:
        user_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("user_id is not valid Unicode (lone surrogate)") from None
    return check_user(user_id)


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
        self.policy = WritePolicy(memory.ingest_config, memory.scope_config)
        self.event_log: Any = None  # the server's EventLog of this store's events, when served

    # -- one memory ---------------------------------------------------------------------------
    def add_memory(self, record: Mapping[str, Any]) -> KnowledgeChunk:
        """Add one memory (keys of ``BeeWeave.add``: content, user_id, tags, metadata, pinned,
        expires_at, confidence...), redacted and admitted like an ingested one."""
        if not isinstance(record, Mapping):
            raise InvalidInputError("a memory is a JSON object")
        rec = self.policy.new_memory(record)
        if not isinstance(rec.get("content"), str):
            raise InvalidInputError("content must be a string")
        rec["user_id"] = check_user_id(rec.get("user_id"))
        status = rec.pop("status", None)
        if status is None:
            # The policy ran above (with the service's own bookkeeping): stored as it left it.
            chunk_id = self.memory.add(rec.pop("content"), user_id=rec.pop("user_id"), trusted=True, **rec)
            return self.memory.get(chunk_id)
        # A status (the caller's, or "pending" from admission) is part of the record when it is
        # first written, never applied by a second write: add_many takes whole KnowledgeChunks.
        fields = {k: v for k, v in rec.items() if k not in ("content", "chunk_id", "embedding")}
        fields["timestamp"] = to_datetime(fields["timestamp"]) if fields.get("timestamp") is not None \
            else self.memory.clock()
        if rec.get("chunk_id") is not None:
            fields["id"] = rec["chunk_id"]
        try:
            chunk = KnowledgeChunk(raw_content=rec["content"], status=ChunkStatus(status), **fields)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(str(exc)) from None
        return self.memory.get(self.memory.add_many([chunk], show_progress=False, trusted=True)[0])

    def get_memory(self, chunk_id: str) -> KnowledgeChunk:
        return self.memory.get(chunk_id)

    def update_memory(self, chunk_id: str, changes: Mapping[str, Any]) -> KnowledgeChunk:
        """Edit one memory: ``EDITABLE`` fields only; new text and tags are redacted."""
        unknown = sorted(set(changes) - set(EDITABLE))
        if unknown:
            raise InvalidInputError(f"these fields cannot be edited: {unknown}; editable: {', '.join(EDITABLE)}")
        if not changes:
            return self.memory.get(chunk_id)
        return self.memory.update(chunk_id, **changes)  # redacted there, as the library's edits are

    def delete_memory(self, chunk_id: str) -> bool:
        return self.memory.delete(chunk_id)

    def history(self, chunk_id: str) -> list[Any]:
        return self.memory.history(chunk_id)

    def lineage(self, chunk_id: str) -> Any:
        return self.memory.lineage(chunk_id)

    def relationships(self, chunk_id: str, *, types: Iterable[str] | None = None,
                      direction: str = "both") -> list[Any]:
        if direction not in ("in", "out", "both"):
            raise InvalidInputError(f"direction is 'in', 'out' or 'both', got {direction!r}")
        return self.memory.relationships(chunk_id, types=types, direction=direction)

    def relate(self, source_id: str, target_id: str, type: str, *, weight: float = 1.0,
               note: str | None = None) -> Any:
        """A user-defined typed edge (``BeeWeave.relate``)."""
        relate = getattr(self.memory, "relate", None)
        if relate is None:
            raise InvalidInputError("this engine has no user-defined relationships yet (BeeWeave.relate)")
        return relate(source_id, target_id, type, weight=weight, note=note)

    def list_memories(self, *, filters: Mapping[str, Any] | None = None, user_id: str | None = None,
                      metadata: Mapping[str, Any] | None = None, limit: int = 50,
                      cursor: str | None = None) -> Page:
        """Memories oldest first (timestamp, then id), ``limit`` at a time; every status unless
        ``filters`` says otherwise. ``metadata`` keeps memories whose metadata has those values."""
        return self.memory.get_all(user_id=None if user_id is None else check_user_id(user_id), filters=filters,
                                   metadata=metadata, limit=limit, cursor=cursor)

    # -- facts, patterns, dead letters ------------------------------------------------------------------
    def facts(self, user_id: str) -> dict[str, KnowledgeChunk]:
        """A user's facts: subject key -> its current memory."""
        return self.memory.parts.lifecycle.facts.remembered(check_user_id(user_id))

    def hot_patterns(self, *, user_id: str | None = None) -> list[Any]:
        return self.memory.hot_patterns(user_id=None if user_id is None else check_user_id(user_id))

    def dead_letters(self, *, limit: int | None = None, user_id: str | None = None) -> list[Any]:
        dead = self.memory.dead_letters(None if user_id is not None else limit)
        if user_id is not None:
            dead = [d for d in dead if d.event.user_id == user_id][: limit]
        return dead

    def retry_dead_letters(self, ids: Iterable[str] | None = None) -> int:
        return self.memory.retry_dead_letters(None if ids is None else list(ids))

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

    def declared_fields(self) -> dict[str, str]:
        return self.memory.declared_fields()

    def declare_fields(self, fields: Mapping[str, str]) -> dict[str, str]:
        return self.memory.declare_fields(fields)

    def stats(self, *, user_id: str | None = None, top: int = 10) -> MemoryStats:
        return compute_stats(self.memory, user_id=None if user_id is None else check_user_id(user_id), top=top,
                             recorder=self.recorder)

    # -- review and maintenance ------------------------------------------------------------------
    def review(self, *, user_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
               reasons: str | Sequence[str] | None = None) -> list[Any]:
        return self.memory.review(user_id=user_id, agent_id=agent_id, limit=limit, reasons=reasons)

    def decide(self, ids: str | Iterable[str], decision: str, *, reason: str | None = None) -> list[str]:
        return self.memory.decide(ids, decision, reason=reason)

    # The deprecated REST routes (/review/pending, approve, reject, queue, resolve) answer as they
    # always did, from the parts the review flow routes to.
    def pending(self, *, user_id: str | None = None, agent_id: str | None = None,
                limit: int | None = None) -> list[KnowledgeChunk]:
        return self.memory.parts.ingestion.pending(user_id=user_id, agent_id=agent_id, limit=limit)

    def approve(self, ids: str | Iterable[str]) -> list[str]:
        return self.memory.parts.ingestion.approve(ids)

    def reject(self, ids: str | Iterable[str], *, reason: str | None = None) -> list[str]:
        return self.memory.parts.ingestion.reject(ids, reason=reason)

    def review_queue(self, *, user_id: str | None = None) -> list[Any]:
        return self.memory.parts.lifecycle.review_queue(user_id=user_id)

    def resolve_review(self, chunk_id: str, decision: str) -> KnowledgeChunk | None:
        return self.memory.parts.lifecycle.resolve_review(chunk_id, decision)

    def maintain(self, *, user_id: str | None = None) -> Any:
        return self.memory.maintain(user_id=user_id)

    # -- a user's data ------------------------------------------------------------------------
    @staticmethod
    def export_is_empty(data: Mapping[str, Any]) -> bool:
        """Whether an export holds nothing of the user (``GET /users/{id}/export`` says 404)."""
        return export_is_empty(data)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """Everything stored about a user, as JSON-able data (``BeeWeave.export_user``), with the
        searches this service recorded and not yet wrote."""
        user = check_user_id(user_id)
        self.recorder.flush()
        return self.memory.export_user(user)

    def check_export(self, data: Mapping[str, Any] | ExportPlan) -> ExportPlan:
        """An export checked without reading the store (its shape, and that every part of it is
        about its user); raises ``InvalidInputError`` naming the first problem."""
        return self.memory.user_data.check_export(data)

    def import_user(self, data: Mapping[str, Any] | ExportPlan, *,
                    vectors: Mapping[str, Any] | None = None) -> ImportReport:
        """Write a user's export (or its checked plan) back, into this store or another
        (``BeeWeave.import_user``)."""
        return self.memory.import_user(data, vectors=vectors)

    def check_import(self, data: Mapping[str, Any] | ExportPlan) -> ExportPlan:
        """Raise what ``import_user(data)`` would raise before writing; write nothing. Returns
        the checked plan, which ``import_user`` takes."""
        return self.memory.user_data.check_import(data)

    def forget_user(self, user_id: str, flush_timeout: float | None = None) -> int:
        """Delete everything of a user (records, index entries, relationships, versions, review
        and stats entries, dead letters, their events in the server's event log), then send
        ``memory.deleted`` for each of their memories; return how many memories were deleted.

        Queued events are processed first, so none of them brings the user back.
        """
        user = check_user_id(user_id)
        m = self.memory
        m.drain(user, timeout=self.forget_timeout if flush_timeout is None else flush_timeout)
        self.recorder.flush()
        if self.event_log is not None:  # the SSE log would replay their memories and watch matches
            self.event_log.forget_user(user)
        # After the purge: the log keeps the memory.deleted notices (ids and user, nothing said),
        # so a client mirroring the memories over the stream or webhooks erases its copies too.
        return m.forget_user(user)

    def close(self) -> None:
        try:
            self.recorder.close()
        finally:
            try:
                self.memory.close()
            finally:
                if self.event_log is not None:
                    self.event_log.close()


def review_dict(item: ReviewItem) -> dict[str, Any]:
    return item.to_dict()
