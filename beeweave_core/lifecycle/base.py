"""What the lifecycle's parts share: the engine's context, the configuration, the
records part (to add, update and delete), and an outbox for events.

Read-modify-write sections run under the shared write lock, which keeps out the other
threads of this process only: a change to records read earlier is written with
``StoreBackend.modify``, judged again on the records as the write reads them, so another
process's edit in between is judged and kept, never written over. Events are sent, and
deletions done, only after the lock is released: a subscriber may call back into the
memory (even search, which records accesses) without any risk of deadlock. A deletion
decided on a read (``Forget``) is done only if the record is still the one judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..events import EventType
from ..records import ChunkStatus, KnowledgeChunk
from .config import LifecycleConfig
from .history import record_action

if TYPE_CHECKING:
    from ..engine.shared import Shared
    from ..engine.writes import Records

__all__ = ["LifecycleContext", "Outbox", "Forget", "retired", "changed_fields"]


@dataclass(frozen=True)
class Forget:
    """A deletion decided on ``chunk`` as read (expired, evicted): done only while the stored
    record is still that one, so another writer's renewal (a new text, an expiry lifted)
    wins. ``events`` are sent once it is done. The audit entry is written before, when the
    decision is made (a crash in between must not delete without a record), so a spared
    memory gets a second one saying it was kept."""

    chunk: KnowledgeChunk
    reason: str
    at: datetime
    events: tuple[tuple[EventType, dict[str, Any]], ...] = ()


@dataclass
class Outbox:
    events: list[tuple[EventType, KnowledgeChunk, dict[str, Any]]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # whatever they are now (a person's decision)
    forget: list[Forget] = field(default_factory=list)
    spared: list[Forget] = field(default_factory=list)  # filled on exit: the ``forget`` not done

    def emit(self, type_: EventType, chunk: KnowledgeChunk, **data: Any) -> None:
        self.events.append((type_, chunk, data))


class LifecycleContext:
    """The engine context, lifecycle settings and the records part, given to each lifecycle part."""

    def __init__(self, shared: Shared, config: LifecycleConfig, records: Records) -> None:
        self.shared = shared
        self.config = config
        self.records = records

    @property
    def backend(self) -> Any:
        return self.shared.backend

    def now(self) -> datetime:
        return self.shared.clock()

    @contextmanager
    def changes(self) -> Iterator[Outbox]:
        """Hold the write lock while the body changes records; then send the events and do
        the deletions it queued (through the records part: ``memory.deleted``, relinking)."""
        box = Outbox()
        with self.shared.write_lock:
            yield box
        for type_, chunk, data in box.events:
            self.shared.emit(type_, chunk, **data)
        if box.delete:
            self.records.delete_many(box.delete)
        if box.forget:
            self._forget(box)

    def _forget(self, box: Outbox) -> None:
        judged = {f.chunk.id: f for f in box.forget}

        def announce(gone: list[str]) -> None:  # why each went, before its ``memory.deleted``
            for cid in gone:
                for type_, data in judged[cid].events:
                    self.shared.emit(type_, judged[cid].chunk, **data)

        gone = set(self.records.delete_many(
            list(judged), only_if=lambda c: c == judged[c.id].chunk.copy(relationships=[]), first=announce))
        for cid, f in judged.items():
            if cid not in gone:
                box.spared.append(f)
                record_action(self.backend, f.chunk, "kept", "changed meanwhile", f.at, instead_of=f.reason)


def retired(chunk: KnowledgeChunk, status: ChunkStatus, reason: str, now: datetime, **metadata: Any) -> KnowledgeChunk:
    """A copy of ``chunk`` out of the active set, saying why and when in its metadata."""
    md = dict(chunk.metadata, **metadata)
    if status is ChunkStatus.ARCHIVED:
        md.update(archived_reason=reason, archived_at=now.isoformat())
    return chunk.copy(status=status, metadata=md, relationships=[])


def changed_fields(old: KnowledgeChunk, new: KnowledgeChunk) -> list[str]:
    a, b = old.to_dict(), new.to_dict()
    return sorted(k for k in a if k != "relationships" and a[k] != b[k])
