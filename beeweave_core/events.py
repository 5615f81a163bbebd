"""Memory events (memory.created / updated / merged / expired / deleted, pattern.detected...)
and in-process subscriptions filtered by type, tag, user or agent.

A subscriber that raises is logged and skipped: one bad listener never breaks a write.
Backends that span processes (PostgreSQL) forward the same events between processes.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from .errors import InvalidInputError
from .records import utcnow

__all__ = ["EventType", "MemoryEvent", "EventBus", "Subscription"]

logger = logging.getLogger(__name__)


class EventType(str, Enum):
    CREATED = "memory.created"
    UPDATED = "memory.updated"
    MERGED = "memory.merged"
    EXPIRED = "memory.expired"
    DELETED = "memory.deleted"
    PATTERN_DETECTED = "pattern.detected"
    WATCH_MATCHED = "watch.matched"  # a standing query (BeeWeave.watch) matched a new or updated memory


@dataclass(frozen=True)
class MemoryEvent:
    type: EventType
    chunk_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    tags: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)
    at: datetime = field(default_factory=utcnow)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value, "chunk_id": self.chunk_id, "user_id": self.user_id,
                "agent_id": self.agent_id, "tags": list(self.tags), "data": self.data, "at": self.at.isoformat()}


@dataclass(frozen=True)
class Subscription:
    id: int
    callback: Callable[[MemoryEvent], Any]
    types: frozenset[EventType] | None = None
    tags: frozenset[str] | None = None
    user_id: str | None = None
    agent_id: str | None = None

    def matches(self, ev: MemoryEvent) -> bool:
        return ((self.types is None or ev.type in self.types)
                and (self.tags is None or bool(self.tags.intersection(ev.tags)))
                and (self.user_id is None or ev.user_id == self.user_id)
                and (self.agent_id is None or ev.agent_id == self.agent_id))


class EventBus:
    def __init__(self) -> None:
        self._subs: dict[int, Subscription] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.errors = 0  # subscriber failures, logged and counted

    def subscribe(self, callback: Callable[[MemoryEvent], Any], *, types: Iterable[EventType | str] | None = None,
                  tags: Iterable[str] | None = None, user_id: str | None = None,
                  agent_id: str | None = None) -> Subscription:
        if not callable(callback):
            raise InvalidInputError(f"a subscriber is a callable taking a MemoryEvent, got {type(callback).__name__}")
        try:
            kinds = None if types is None else frozenset(EventType(t) for t in ((types,) if isinstance(types, str)
                                                                                 else types))
        except ValueError:
            raise InvalidInputError(f"unknown event types in {types!r}; known: "
                                    f"{', '.join(t.value for t in EventType)}") from None
        sub = Subscription(next(self._ids), callback, kinds,
                           None if tags is None else frozenset(tags), user_id, agent_id)
        with self._lock:
            self._subs[sub.id] = sub
        return sub

    def unsubscribe(self, sub: Subscription | int) -> None:
        with self._lock:
            self._subs.pop(sub if isinstance(sub, int) else sub.id, None)

    def emit(self, event: MemoryEvent) -> None:
        with self._lock:
            subs = [s for s in self._subs.values() if s.matches(event)]
        for s in subs:
            try:
                s.callback(event)
            except Exception:  # a listener's bug must not break the write that emitted
                self.errors += 1
                logger.exception("BeeWeave event subscriber failed on %s", event.type.value)

    @property
    def active(self) -> bool:
        return bool(self._subs)
