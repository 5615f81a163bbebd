"""What the lifecycle mixins share: configuration, a lock, and an outbox for events.

Read-modify-write sections run under one re-entrant lock. Events are sent, and
deletions done, only after the lock is released: a subscriber may call back into the
memory (even search, which records accesses) without any risk of deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..events import EventType
from ..records import ChunkStatus, KnowledgeChunk
from .access import AccessRecorder
from .config import LifecycleConfig

if TYPE_CHECKING:
    from ..engine import MemoryCore as _Core
else:
    _Core = object

__all__ = ["LifecycleHost", "Outbox", "retired", "id_list"]


@dataclass
class Outbox:
    events: list[tuple[EventType, KnowledgeChunk, dict[str, Any]]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)

    def emit(self, type_: EventType, chunk: KnowledgeChunk, **data: Any) -> None:
        self.events.append((type_, chunk, data))


class LifecycleHost(_Core):
    """The attributes every lifecycle mixin relies on (set by ``LifecycleMixin.__init__``)."""

    lifecycle: LifecycleConfig
    _lc_lock: threading.RLock
    _access: AccessRecorder

    @contextmanager
    def _changes(self) -> Iterator[Outbox]:
        """Hold the lifecycle lock while the body changes records; then send the events and
        do the deletions it queued (``delete_many`` sends ``memory.deleted``)."""
        box = Outbox()
        with self._lc_lock:
            yield box
        for type_, chunk, data in box.events:
            self._emit(type_, chunk, **data)
        if box.delete:
            self.delete_many(box.delete)


def retired(chunk: KnowledgeChunk, status: ChunkStatus, reason: str, now: datetime, **metadata: Any) -> KnowledgeChunk:
    """A copy of ``chunk`` out of the active set, saying why and when in its metadata."""
    md = dict(chunk.metadata, **metadata)
    if status is ChunkStatus.ARCHIVED:
        md.update(archived_reason=reason, archived_at=now.isoformat())
    return chunk.copy(status=status, metadata=md, relationships=[])


def id_list(ids: str | Iterable[str]) -> list[str]:
    """One id or several, without repeats, in the order given (each is checked by ``get_many``)."""
    if isinstance(ids, str):
        return [ids]
    if not isinstance(ids, Iterable) or isinstance(ids, (bytes, dict)):
        raise InvalidInputError(f"chunk ids must be a string or a list of strings, got {type(ids).__name__}")
    out = list(ids)
    if any(not isinstance(i, str) for i in out):
        raise InvalidInputError("chunk ids must be strings")
    return list(dict.fromkeys(out))
