"""The ingestion part of ``BeeWeave``: events in, memories out.

``ingest(event)`` validates the event, writes it durably to the queue and returns its id;
a background worker does the rest (redact, normalize, extract, admit, embed, store,
link, count patterns) in batches. See :mod:`beeweave_core.ingest` for the whole story.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError, NotFoundError
from ..events import EventType
from ..filters import build_filter
from ..ids import event_key
from ..records import ChunkStatus, KnowledgeChunk, new_id, to_datetime
from ..user_data import KvEntry, Staged, mapping, owned, section, time_of
from ..validation import check_id, check_limit, check_text, check_user, id_list
from .config import IngestConfig
from .documents import DocFormat, document_chunks, load_sources
from .knowledge_events import DeadLetter, KnowledgeEvent
from .messages import chat_turns
from .patterns import HotPattern
from .pipeline import chunk_ids
from .queue import StoredEvent
from .runtime import REJECTED, IngestRuntime
from .validate import EVENT_KEYS, event_dict, event_json

if TYPE_CHECKING:
    from ..engine.shared import Shared
    from ..engine.writes import Records

__all__ = ["Ingestion", "IngestSink", "QUEUED", "DEAD"]

logger = logging.getLogger(__name__)

# A user's export: the events still waiting in the ingest queue, and the dead letters.
QUEUED, DEAD = "queued_events", "dead_letters"
_STATES = {QUEUED: "pending", DEAD: "dead"}
# What a queued body may hold besides the event's keys (redact_before_queue marks it redacted).
_QUEUE_MARKS = ("redacted", "redactions")


class IngestSink:
    """What the ingest runtime writes through: the store, tokenizer, clock and events, the
    records part's writers (so stored events get links, events and lifecycle rules), and the
    lifecycle's ``feedback`` (an event's own rating acts on its memories; None: not rated) and
    its fact timelines' ``reconcile`` (a stated fact supersedes the older value; None: not kept)."""

    def __init__(self, shared: Shared, records: Records, feedback: Callable[..., Any] | None = None,
                 reconcile: Callable[[list[KnowledgeChunk]], Any] | None = None) -> None:
        self.backend = shared.backend
        self.tokenizer = shared.tokenizer
        self.clock = shared.clock
        self.events = shared.events
        # The pipeline redacted and admitted every memory it hands over.
        self.add = partial(records.add, trusted=True)
        self.add_many = partial(records.add_many, trusted=True)
        self.get_many = records.get_many
        self.update = records.update
        self.feedback = feedback
        self.reconcile = reconcile


class Ingestion:
    """Knowledge events in, memories out: non-blocking, durable, exactly once.

    Usage:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_core.ingest import IngestConfig, KnowledgeEvent, ToolCall

            with BeeWeave("memory.db", ingest=IngestConfig()) as memory:
                memory.ingest(KnowledgeEvent(user_id="alice", query="How do I reset my password?",
                                             response="Settings > Security > Reset password."))
                memory.flush()  # only to wait for the worker (e.g. in a test or a script)
                memory.search("password reset", user_id="alice")

    Configured by ``BeeWeave(..., ingest=IngestConfig(...))``.
    """

    def __init__(self, shared: Shared, records: Records, config: IngestConfig,
                 feedback: Callable[..., Any] | None = None,
                 reconcile: Callable[[list[KnowledgeChunk]], Any] | None = None) -> None:
        self.shared = shared
        self.records = records
        self.runtime = IngestRuntime(IngestSink(shared, records, feedback, reconcile), config)

    def open(self) -> None:
        """Resume events a dead process left queued."""
        self.runtime.open()

    @property
    def config(self) -> IngestConfig:
        return self.runtime.config

    # -- events -----------------------------------------------------------------------------
    def ingest(self, event: KnowledgeEvent | Mapping[str, Any]) -> str:
        """Queue a knowledge event and return its id at once.

        The event is validated and written durably before this returns; the worker turns
        it into memories in the background (``flush()`` waits for it). An event id that
        is already queued or processed is not processed again. A bad event raises
        ``InvalidInputError`` and writes nothing; a full queue follows
        ``IngestConfig.when_full``.
        """
        rt = self.runtime
        body = event_dict(event, now=self.shared.clock())
        if self.records.policy is not None:  # an event to a shared scope: refused before it is queued
            self.records.policy.check_scope(body.get("user_id"), body.get("agent_id"), body.get("category"))
        if rt.config.redact_before_queue:
            from .pipeline import redact_event

            body, _ = redact_event(rt.pipeline.redactor, body)
        text = event_json(body, max_chars=rt.config.max_event_chars)
        rt.put(text)
        return body["id"]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued event is processed (at most ``timeout`` seconds); True if
        the queue is empty."""
        return self.runtime.flush(timeout)

    def add_messages(self, messages: Any, *, user_id: str, session_id: str | None = None,
                     agent_id: str | None = None, metadata: Mapping[str, Any] | None = None,
                     tags: Iterable[str] | str = (), timestamp: Any = None,
                     timeout: float | None = None, text_only: Mapping[str, Any] | None = None) -> list[str]:
        """A conversation's memories (``BeeWeave.add(messages)``, mem0's ``add(messages)``).

        Each turn becomes an event (:func:`.messages.chat_turns`) that is queued as ``ingest``
        queues one, so the pipeline decides what is kept (small talk and calls of the memory's
        own tools are not; secrets are redacted). Waits for the worker, at most ``timeout``
        seconds, and returns the ids of the memories stored from the turns, oldest turn first:
        none for small talk, and after a timeout only those stored by then (the rest follow).
        Every event is checked before the first is queued: bad input queues nothing.
        ``text_only``: arguments of ``BeeWeave.add`` for one text (chunk_id, embedding...),
        refused when given: a conversation's memories get the pipeline's ids and vectors.
        """
        given = sorted(k for k, v in (text_only or {}).items() if v is not None)
        if given:
            raise InvalidInputError(f"{', '.join(given)} apply to one text, not to chat messages")
        caller: dict[str, Any] = {"user_id": user_id, "session_id": session_id, "agent_id": agent_id,
                                  "metadata": metadata, "timestamp": timestamp}
        listed = [tags] if isinstance(tags, str) else list(tags)
        if listed:
            caller["tags"] = listed
        now = self.shared.clock()
        # The turns share a time; ids that sort in turn order keep the conversation's order
        # wherever memories are listed by (timestamp, id): get_all, trace, session context.
        conversation = new_id()
        events = [event_dict({**caller, **turn.event(), "id": f"{conversation}-{n:04d}"}, now=now)
                  for n, turn in enumerate(chat_turns(messages))]
        for body in events:
            self.ingest(body)
        if events:
            self.flush(timeout)
        wanted = [cid for body in events
                  for cid in chunk_ids(body["id"], body["user_id"], len(body["intermediate_steps"]))]
        return [c.id for c in self.records.get_many(wanted)]

    def drain(self, user_id: str | None = None, timeout: float | None = 30.0) -> bool:
        """Before a deletion: process the queued events (at most ``timeout`` seconds), then
        discard the dead letters of ``user_id`` (``None``: every user's), so that no queued or
        retried event brings deleted memories back. True if the queue drained; if not, the
        events left are stored later, and that is logged."""
        drained = self.flush(timeout)
        if not drained and (timeout is None or timeout > 0):  # 0: the caller chose not to wait
            logger.warning("the ingest queue did not drain in %s s before deleting %s; events still queued "
                           "will be stored later", timeout, "everything" if user_id is None else repr(user_id))
        self.runtime.discard_of(user_id)
        return drained

    def start_ingest(self) -> None:
        """Start the worker (needed only with ``IngestConfig(autostart=False)``)."""
        self.runtime.wake()

    def pending_events(self) -> int:
        """How many ingested events wait for the worker (dead letters not counted)."""
        return self.runtime.pending_count()

    def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """Events whose processing failed, oldest first, with their errors."""
        out = []
        for row in self.runtime.dead(check_limit(limit)):
            fields = {k: row.body[k] for k in EVENT_KEYS if k in row.body}
            out.append(DeadLetter(KnowledgeEvent.from_dict(fields), row.error, row.attempts,
                                  datetime.fromtimestamp(row.failed_at, tz=timezone.utc)))
        return out

    def retry_dead_letters(self, ids: str | Iterable[str] | None = None) -> int:
        """Queue dead events again (all, or those with the given event ids); return how many."""
        return self.runtime.revive(None if ids is None else id_list(ids, "event ids"))

    def discard_dead_letters(self, ids: str | Iterable[str]) -> int:
        """Delete dead events for good; return how many."""
        return self.runtime.discard(id_list(ids, "event ids"))

    # -- review --------------------------------------------------------------------------------
    def pending(self, *, user_id: str | None = None, agent_id: str | None = None,
                limit: int | None = None) -> list[KnowledgeChunk]:
        """Memories waiting for review, oldest first (``metadata["ingest"]["review"]`` says why)."""
        limit = check_limit(limit)
        filters: dict[str, Any] = {"status": ChunkStatus.PENDING.value}
        if agent_id is not None:
            filters["agent_id"] = agent_id
        flt = build_filter(filters, user_id=user_id)
        return list(self.shared.backend.scan(flt, order="timestamp", limit=limit))

    def _reviewable(self, name: str, ids: str | Iterable[str]) -> list[KnowledgeChunk]:
        wanted = id_list(ids)
        found = self.shared.backend.get(wanted)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise NotFoundError(f"no memory with id {missing[0]!r}; nothing was changed")
        return [found[i] for i in wanted if found[i].status is ChunkStatus.PENDING]

    def approve(self, ids: str | Iterable[str]) -> list[str]:
        """Make pending memories active; return the ids that changed (others were not pending)."""
        chunks = self._reviewable("approve", ids)
        at = self.shared.clock().isoformat()
        approved: list[KnowledgeChunk] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            # On the records as the write reads them: an edit another process made since they
            # were read is kept, and one it rejected (deleted) or approved meanwhile is left.
            approved[:] = [c.copy(status=ChunkStatus.ACTIVE, relationships=[], metadata={
                **c.metadata, "ingest": {**c.metadata.get("ingest", {}), "reviewed": {"decision": "approved", "at": at}}})
                for c in current.values() if c.status is ChunkStatus.PENDING]
            return approved

        with self.shared.write_lock:
            self.shared.backend.modify([c.id for c in chunks], change)
        for c in approved:
            self.shared.emit(EventType.UPDATED, c, fields=["metadata", "status"])
        done = {c.id for c in approved}
        return [c.id for c in chunks if c.id in done]

    def reject(self, ids: str | Iterable[str], *, reason: str | None = None) -> list[str]:
        """Delete pending memories; return the ids that were rejected.

        Rejected memories are deleted, not archived: they never were knowledge, and
        keeping them would keep text someone decided should not be remembered. Their ids
        are remembered (with ``reason``), so re-ingesting the same event does not bring
        them back.
        """
        chunks = self._reviewable("reject", ids)
        self.runtime.mark_rejected(chunks, reason)
        # Only those still pending as the delete reads them: another process may have approved
        # one since it was read (its rejection mark then goes: it is knowledge after all).
        gone = set(self.records.delete_many([c.id for c in chunks],
                                            only_if=lambda c: c.status is ChunkStatus.PENDING))
        self.runtime.unmark_rejected([c.id for c in chunks if c.id not in gone])
        return [c.id for c in chunks if c.id in gone]

    # -- patterns -------------------------------------------------------------------------------
    def forget_user(self, user_id: str) -> None:
        """Remove a user's questions from the shared pattern counts (part of a user's forget)."""
        self.runtime.forget_user(user_id)

    def forget_events(self, user_id: str) -> int:
        """Delete the user's events still in the queue, pending or dead (part of a user's
        forget, before the memories go); return how many."""
        return self.runtime.forget_events(user_id)

    # -- a user's data (UserData) ----------------------------------------------------------------
    @property
    def keeps(self) -> tuple[str, ...]:
        return (*self.runtime.patterns.keeps, REJECTED)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """The user's question patterns (``PatternTracker.export_user``), ``rejected``:
        memory id -> ``{"at", "reason", "user_id"}`` of the memories rejected in review, which
        ingestion never stores again (marks written before they carried their user cannot be
        told apart and are not exported), and the user's events still in the ingest queue,
        oldest first: ``queued_events`` (waiting for the worker) and ``dead_letters`` (failed
        for good), each ``{"event", "attempts", "error", "enqueued_at"}`` (and ``"failed_at"``
        for a dead letter), the event as the queue holds it."""
        queued: dict[str, list[dict[str, Any]]] = {QUEUED: [], DEAD: []}
        for e in self.runtime.events_of(user_id):
            row: dict[str, Any] = {"event": json.loads(e.body), "attempts": e.attempts, "error": e.error,
                                   "enqueued_at": _iso(e.enqueued_at)}
            if e.state == "dead":
                row["failed_at"] = _iso(e.failed_at or e.enqueued_at)
            queued[DEAD if e.state == "dead" else QUEUED].append(row)
        return {**self.runtime.patterns.export_user(user_id),
                "rejected": {k: v for k, v in self.shared.backend.kv_scan(REJECTED) if v.get("user_id") == user_id},
                **queued}

    def users_held(self) -> list[str]:
        """The users with events in the ingest queue (pending or dead): a user whose only data
        is there has an export too (``UserExport.users``)."""
        return self.runtime.queue_users()

    def _stored_event(self, raw: Any, where: str, name: str, user_id: str) -> StoredEvent:
        """An exported queued event or dead letter of the export's user, checked."""
        row = mapping(raw, where)
        body = mapping(row.get("event"), f"{where}.event")
        owned(body, f"{where}.event", user_id)
        event_id = body.get("id")
        if not isinstance(event_id, str) or not event_id or len(event_id) > 256:
            raise InvalidInputError(f"{where}.event.id must be an event id (a string of 1 to 256 characters)")
        state = _STATES[name]
        if state == "pending":  # the worker will process it: an event as ingest() takes one
            try:
                event_dict({k: v for k, v in body.items() if k not in _QUEUE_MARKS}, now=self.shared.clock())
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}.event is not an event: {exc}") from None
        try:
            text = event_json(body, max_chars=self.config.max_event_chars)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{where}.event: {exc}") from None
        attempts = row.get("attempts", 0)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 0 <= attempts < 2**31:
            raise InvalidInputError(f"{where}.attempts must be a whole number >= 0")
        error = check_text(f"{where}.error", row.get("error") or None, optional=True)
        enqueued = to_datetime(time_of(row.get("enqueued_at"), f"{where}.enqueued_at")).timestamp()
        failed = None
        if state == "dead":
            failed = to_datetime(time_of(row.get("failed_at"), f"{where}.failed_at")).timestamp()
        return StoredEvent(event_key(event_id, user_id), user_id, text, state, attempts, error, enqueued, failed)

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        staged = self.runtime.patterns.stage_import(user_id, data)
        events: dict[str, list[StoredEvent]] = {QUEUED: [], DEAD: []}
        seen: set[str] = set()
        for name in (QUEUED, DEAD):
            for i, raw in enumerate(section(data, name, list)):
                e = self._stored_event(raw, f"{name}[{i}]", name, user_id)
                if e.id in seen:
                    raise InvalidInputError(f"{name}[{i}]: the export holds the event {json.loads(e.body)['id']!r} "
                                            "twice")
                seen.add(e.id)
                events[name].append(e)
        if events[QUEUED] or events[DEAD]:
            before = staged.write

            def write() -> dict[str, int]:
                counts = dict(before()) if before is not None else {}
                # Dead letters first: a pending event put first could be taken by the worker
                # before they are in.
                counts[DEAD] = self.runtime.restore_events(events[DEAD])
                counts[QUEUED] = self.runtime.restore_events(events[QUEUED])
                return counts

            staged.write = write
        for cid, raw in section(data, "rejected", dict).items():
            where = f"rejected[{cid!r}]"
            mark = mapping(raw, where)
            owned(mark, where, user_id)
            staged.names.add(check_id(cid, "rejected key"))
            staged.kv.append(KvEntry("rejected", REJECTED, cid, {
                "at": time_of(mark.get("at"), f"{where}.at"),
                "reason": check_text(f"{where}.reason", mark.get("reason"), optional=True), "user_id": user_id}))
        return staged

    def hot_patterns(self, *, user_id: str | None = None) -> list[HotPattern]:
        """Recurring questions that are hot now (within a window of ``PatternConfig``), most
        asked first. ``user_id`` limits to one user's (with ``PatternScope.USER``); the shared
        patterns, asked by several users, come after them for every user."""
        return self.runtime.hot_patterns(user_id)

    # -- cold start ----------------------------------------------------------------------------------
    def import_documents(self, sources: Any, *, user_id: str, agent_id: str | None = None,
                         tags: Sequence[str] = (), format: DocFormat | str | None = None,
                         chunk_chars: int = 1200, overlap: int = 150, review: bool = False,
                         show_progress: bool | None = None, batch_size: int = 256) -> list[str]:
        """Import FAQ or documentation as seed memories; return the chunk ids in order.

        Args:
            sources: a path or a text, or a list of them (text, Markdown, JSONL; by file
                suffix, else guessed from the content).
            user_id: whose memories they become (``scope_owner("tenant")``: seed knowledge
                every user's search finds; see :mod:`beeweave_core.scopes`).
            tags: added to every chunk (besides the extracted keywords and "document").
            format: force ``"text"``, ``"markdown"`` or ``"jsonl"``.
            chunk_chars / overlap: chunk size and the overlap between neighbours.
            review: store them pending review instead of active.
            show_progress: a progress bar (default: none; the CLI shows one on a terminal).

        Everything is read and checked before anything is stored. Chunks already stored by
        an earlier import of the same document, or rejected in review, are skipped.
        Redaction applies.
        """
        from .pipeline import Pipeline

        check_user(user_id)
        if self.records.policy is not None:  # seed knowledge for a shared scope: its write rules apply
            self.records.policy.check_scope(user_id, agent_id, None)
        if isinstance(tags, str) or not all(isinstance(t, str) and t.strip() for t in tags):
            raise InvalidInputError("tags must be a list of non-empty strings")
        chunks = document_chunks(load_sources(sources, format), chunk_chars, overlap)
        pipeline: Pipeline = self.runtime.pipeline
        records = []
        for dc in chunks:
            records.append(pipeline.document_chunk(dc, user_id=user_id, agent_id=agent_id, tags=list(tags),
                                                   status=ChunkStatus.PENDING if review else ChunkStatus.ACTIVE,
                                                   now=self.shared.clock()))
        unique: dict[str, KnowledgeChunk] = {}
        for r in records:
            unique.setdefault(r.id, r)  # the same document twice in one call
        self.runtime.store_new(list(unique.values()), batch_size=batch_size,
                               show_progress=bool(show_progress))
        return list(unique)

    # -- lifecycle -----------------------------------------------------------------------------------
    def close(self) -> None:
        self.runtime.close()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
