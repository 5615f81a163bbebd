"""What the lifecycle's parts share: the engine's context, the configuration, the
records part (to add, update and delete), and an outbox for events.

Read-modify-write sections run under the shared write lock. Events are sent, and
deletions done, only after the lock is released: a subscriber may call back into the
memory (even search, which records accesses) without any risk of deadlock.
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

if TYPE_CHECKING:
    from ..engine.records import Records
    from ..engine.shared import Shared

__all__ = ["LifecycleContext", "Outbox", "retired", "changed_fields"]


@dataclass
class Outbox:
    events: list[tuple[EventType, KnowledgeChunk, dict[str, Any]]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)

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


def retired(chunk: KnowledgeChunk, status: ChunkStatus, reason: str, now: datetime, **metadata: Any) -> KnowledgeChunk:
    """A copy of ``chunk`` out of the active set, saying why and when in its metadata."""
    md = dict(chunk.metadata, **metadata)
    if status is ChunkStatus.ARCHIVED:
        md.update(archived_reason=reason, archived_at=now.isoformat())
    return chunk.copy(status=status, metadata=md, relationships=[])


def changed_fields(old: KnowledgeChunk, new: KnowledgeChunk) -> list[str]:
    a, b = old.to_dict(), new.to_dict()
    return sorted(k for k in a if k != "relationships" and a[k] != b[k])
