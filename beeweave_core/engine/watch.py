"""Standing queries: an agent's ``watch(query, user_id, min_relevance)`` is told, through
the event bus (``watch.matched``), when a new or updated memory of that user matches it.

The event goes wherever bus events go: in-process subscribers, and a server's SSE stream
and webhooks. Watches are kept in the store (kv namespace ``engine.watches``, one entry per
watch, owned by its user so forgetting the user removes them): a reopened store keeps them,
and another process on the same store sees them within ``REFRESH_SECONDS`` and checks its own
writes against them (the event is emitted where the write happened).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..events import EventType, MemoryEvent, Subscription
from ..records import ChunkStatus, KnowledgeChunk
from ..user_data import KvEntry, Staged, mapping, owned, section, write_kv
from ..validation import check_content, check_id, check_number, check_text, check_user
from .shared import Shared

__all__ = ["Watch", "Watches", "watch_relevance", "WATCHES", "REFRESH_SECONDS"]

WATCHES = "engine.watches"  # kv: watch id -> {"query", "user_id", "agent_id", "min_relevance"}
REFRESH_SECONDS = 1.0  # how stale this process's view of other processes' watches may be
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
    vector: np.ndarray | None = field(default=None, repr=False)  # embedded when first needed
    fired: int = 0  # matches seen by this process
    _owner: Watches | None = field(default=None, repr=False)

    def cancel(self) -> None:
        if self._owner is not None:
            self._owner.cancel(self.id)


class Watches:
    """The watches of one store; an ``on_insert`` hook and, while any exist, a bus subscriber."""

    def __init__(self, shared: Shared, embed_query: object, redact: Callable[[str], str] | None = None) -> None:
        self.shared = shared
        self._embed = embed_query
        self._redact = redact  # a standing query is stored: redacted as a memory's text is
        self._watches: dict[str, Watch] = {}
        self._lock = threading.Lock()
        self._sub: Subscription | None = None
        self._seen: dict[tuple[str, str], str] = {}  # (watch, memory) -> content it fired for
        self._loaded_at: float | None = None  # monotonic time of the last read of the store

    def watch(self, query: str, *, user_id: str, agent_id: str | None = None,
              min_relevance: float = 0.5) -> Watch:
        check_content(query, "query")
        check_user(user_id)
        if agent_id is not None:
            check_id(agent_id, "agent_id")
        check_number("min_relevance", min_relevance, low=0.0, high=1.0)
        if self._redact is not None:
            query = self._redact(query)
        vec = np.asarray(self._embed(query), dtype=np.float32)  # type: ignore[operator]
        # A random id: watches of several processes share one namespace.
        w = Watch(f"w{uuid.uuid4().hex[:12]}", query, user_id, agent_id, float(min_relevance), vec, _owner=self)
        self.shared.backend.kv_put(WATCHES, w.id, {"query": w.query, "user_id": w.user_id, "agent_id": w.agent_id,
                                                   "min_relevance": w.min_relevance}, user_id=user_id)
        self._refresh(force=True)
        with self._lock:
            self._watches[w.id] = w
        return w

    def cancel(self, watch_id: str) -> bool:
        gone = self.shared.backend.kv_delete(WATCHES, watch_id) if isinstance(watch_id, str) else False
        self._refresh(force=True)
        return gone

    def all(self, *, user_id: str | None = None) -> list[Watch]:
        self._refresh()
        with self._lock:
            return [w for w in self._watches.values() if user_id is None or w.user_id == user_id]

    def refresh(self) -> None:
        """Read the store's watches now (after a change made around this part, e.g. a user forgotten)."""
        self._refresh(force=True)

    # -- a user's data (UserData) ------------------------------------------------------------
    keeps = (WATCHES,)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """``watches``: ``[{"id", "query", "user_id", "agent_id", "min_relevance"}]``."""
        return {"watches": [{"id": k, **v} for k, v in self.shared.backend.kv_scan(WATCHES)
                            if v.get("user_id") == user_id]}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        entries = []
        for i, raw in enumerate(section(data, "watches", list)):
            w = mapping(raw, f"watches[{i}]")
            owned(w, f"watches[{i}]", user_id)
            entries.append(KvEntry("watches", WATCHES, check_id(w.get("id"), f"watches[{i}].id"), {
                "query": check_text(f"watches[{i}].query", w.get("query")), "user_id": user_id,
                "agent_id": w.get("agent_id"),
                "min_relevance": check_number(f"watches[{i}].min_relevance", w.get("min_relevance"),
                                              low=0.0, high=1.0)}))

        def check() -> None:  # watch ids are not the user's own keys: one may be another user's
            for e in entries:
                held = self.shared.backend.kv_get(WATCHES, e.key)
                if held is not None and held.get("user_id") != user_id:
                    raise InvalidInputError(f"the store already holds a watch {e.key!r} of another user; "
                                            "nothing was imported")

        def write() -> dict[str, int]:
            counts = write_kv(self.shared.backend, user_id, entries)
            self._refresh(force=True)  # this process watches them from now on
            return counts

        return Staged(check=check, write=write)

    def _refresh(self, *, force: bool = False) -> None:
        """Bring this process's watches in line with the store's (at most every
        ``REFRESH_SECONDS`` unless forced); a watch known here keeps its vector and count."""
        now = time.monotonic()
        if not force and self._loaded_at is not None and now - self._loaded_at < REFRESH_SECONDS:
            return
        stored = dict(self.shared.backend.kv_scan(WATCHES))
        with self._lock:
            self._loaded_at = now
            known = self._watches
            self._watches = {wid: known.get(wid) or Watch(wid, v["query"], v["user_id"], v.get("agent_id"),
                                                          float(v["min_relevance"]), _owner=self)
                             for wid, v in stored.items()}
            self._seen = {k: v for k, v in self._seen.items() if k[0] in self._watches}
            if self._watches and self._sub is None:
                self._sub = self.shared.events.subscribe(self._on_event, types=[EventType.UPDATED])
            elif not self._watches and self._sub is not None:
                self.shared.events.unsubscribe(self._sub)
                self._sub = None

    def _vector(self, w: Watch) -> np.ndarray:
        if w.vector is None:  # a watch made by another process, or before this one opened the store
            w.vector = np.asarray(self._embed(w.query), dtype=np.float32)  # type: ignore[operator]
        return w.vector

    # -- hooks -------------------------------------------------------------------------------
    def on_insert(self, chunks: list[KnowledgeChunk], link: bool) -> None:
        self._refresh()
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
                if w.user_id != c.user_id:
                    continue
                wvec = self._vector(w)
                if wvec.shape != vec.shape:
                    continue
                rel = watch_relevance(wvec, vec)
                key = (w.id, c.id)
                if rel < w.min_relevance or self._seen.get(key) == c.raw_content:
                    continue
                self._seen[key] = c.raw_content
                w.fired += 1
                self.shared.events.emit(MemoryEvent(
                    EventType.WATCH_MATCHED, c.id, c.user_id, w.agent_id, tuple(c.tags),
                    {"watch_id": w.id, "query": w.query, "relevance": round(rel, 6), "reason": reason,
                     "memory_agent_id": c.agent_id, "content": c.raw_content}, self.shared.clock()))

