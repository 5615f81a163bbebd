"""Standing queries: an agent's ``watch(query, user_id, min_relevance)`` is told, through
the event bus (``watch.matched``), when a new or updated memory of that user matches it.

The event goes wherever bus events go: in-process subscribers, and a server's SSE stream
and webhooks. Watches live in the process that made them.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..events import EventType, MemoryEvent, Subscription
from ..records import ChunkStatus, KnowledgeChunk
from ..validation import check_content, check_id, check_number
from .shared import Shared

__all__ = ["Watch", "Watches", "watch_relevance"]

_CONTENT_FIELDS = {"raw_content", "summary", "processed_content"}


def watch_relevance(query_vector: np.ndarray, memory_vector: np.ndarray) -> float:
    """How relevant a memory is to a standing query, on an absolute scale in [0, 1].

    The cosine of the two embeddings, clipped at 0: the one absolute signal available for a
    single memory (fused search scores are relative to the other candidates). This is the
    one place to switch to a calibrated relevance once search provides one.
    """
    return max(0.0, float(np.dot(query_vector, memory_vector)))


@dataclass
class Watch:
    """One standing query. ``cancel()`` ends it; ``fired`` counts its matches."""

    id: str
    query: str
    user_id: str
    agent_id: str | None
    min_relevance: float
    vector: np.ndarray = field(repr=False)
    fired: int = 0
    _owner: Watches | None = field(default=None, repr=False)

    def cancel(self) -> None:
        if self._owner is not None:
            self._owner.cancel(self.id)


class Watches:
    """The watches of one memory; an ``on_insert`` hook and, while any exist, a bus subscriber."""

    def __init__(self, shared: Shared, embed_query: object) -> None:
        self.shared = shared
        self._embed = embed_query
        self._watches: dict[str, Watch] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sub: Subscription | None = None
        self._seen: dict[tuple[str, str], str] = {}  # (watch, memory) -> content it fired for

    def watch(self, query: str, *, user_id: str, agent_id: str | None = None,
              min_relevance: float = 0.5) -> Watch:
        check_content(query, "query")
        check_id(user_id, "user_id")
        if agent_id is not None:
            check_id(agent_id, "agent_id")
        check_number("min_relevance", min_relevance, low=0.0, high=1.0)
        vec = np.asarray(self._embed(query), dtype=np.float32)  # type: ignore[operator]
        w = Watch(f"w{next(self._ids)}", query, user_id, agent_id, float(min_relevance), vec, _owner=self)
        with self._lock:
            self._watches[w.id] = w
            if self._sub is None:
                self._sub = self.shared.events.subscribe(self._on_event, types=[EventType.UPDATED])
        return w

    def cancel(self, watch_id: str) -> bool:
        with self._lock:
            gone = self._watches.pop(watch_id, None)
            self._seen = {k: v for k, v in self._seen.items() if k[0] != watch_id}
            if not self._watches and self._sub is not None:
                self.shared.events.unsubscribe(self._sub)
                self._sub = None
        return gone is not None

    def all(self, *, user_id: str | None = None) -> list[Watch]:
        with self._lock:
            return [w for w in self._watches.values() if user_id is None or w.user_id == user_id]

    # -- hooks -------------------------------------------------------------------------------
    def on_insert(self, chunks: list[KnowledgeChunk], link: bool) -> None:
        if self._watches:
            self._check(chunks, "created")

    def _on_event(self, ev: MemoryEvent) -> None:
        fields = set(ev.data.get("fields") or ())
        if ev.chunk_id is None or not fields & _CONTENT_FIELDS:
            return  # feedback, access, status: the memory says nothing new
        found = self.shared.backend.get([ev.chunk_id]).get(ev.chunk_id)
        if found is not None:
            self._check([found], "updated")

    def _check(self, chunks: Sequence[KnowledgeChunk], reason: str) -> None:
        watches = self.all()
        users = {w.user_id for w in watches}
        live = [c for c in chunks if c.user_id in users and c.status is ChunkStatus.ACTIVE]
        if not live:
            return
        vectors = self.shared.backend.get_vectors([c.id for c in live])
        for c in live:
            vec = vectors.get(c.id)
            if vec is None:
                continue
            for w in watches:
                if w.user_id != c.user_id or w.vector.shape != vec.shape:
                    continue
                rel = watch_relevance(w.vector, vec)
                key = (w.id, c.id)
                if rel < w.min_relevance or self._seen.get(key) == c.raw_content:
                    continue
                self._seen[key] = c.raw_content
                w.fired += 1
                self.shared.events.emit(MemoryEvent(
                    EventType.WATCH_MATCHED, c.id, c.user_id, w.agent_id, tuple(c.tags),
                    {"watch_id": w.id, "query": w.query, "relevance": round(rel, 6), "reason": reason,
                     "memory_agent_id": c.agent_id, "content": c.raw_content}, self.shared.clock()))

