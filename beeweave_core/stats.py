"""Usage statistics of a memory: what is stored, what is used, and how fast search is.

Two kinds of numbers:

- read from the records themselves: counts by status, source agent and intent, growth
  per day, the hottest memories (most used) and the newest;
- recorded while the memory is used, by a :class:`StatsRecorder`: each search's latency
  (the embedding model's first load is timed apart: ``model_loads``, ``model_load_ms``)
  and the ids it returned, and when a memory was last marked "used" by feedback. Both
  are kept in the store (``kv_put``), so ``beeweave stats`` in another process sees the
  searches a server answered. Searches are a rolling sample (the newest ``capacity``).

A memory's heat is ``access_count + up - down`` (feedback counts in
``metadata["feedback"]``); ``used`` feedback already counts as an access.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from .errors import InvalidInputError
from .events import EventType, MemoryEvent
from .filters import build_filter
from .records import ALL_STATUSES, ChunkStatus, KnowledgeChunk, SearchHit, to_datetime
from .user_data import KvEntry, Staged, mapping, owned, same, section, sequence, time_of
from .validation import check_id, check_number

__all__ = ["StatsRecorder", "RecordedUse", "MemoryStats", "MemorySummary", "LatencyStats", "compute_stats", "heat",
           "SEARCHES", "USED"]

logger = logging.getLogger(__name__)

SEARCHES = "stats.searches"  # kv ring: "000042" -> {"at", "ms", "ids", "user_id"[, "load_ms"]}
USED = "stats.used"  # kv: chunk id -> {"at": the latest "used" feedback, "user_id": the memory's user}
_STATE = "stats.state"  # kv: "ring" -> {"next": slot}
_LIVE = (ChunkStatus.ACTIVE, ChunkStatus.PENDING)
CAPACITY = 5000  # searches the ring keeps


def _put_searches(backend: Any, searches: list[dict[str, Any]], capacity: int) -> None:
    if not searches:
        return
    # Claim the slots atomically: two processes recording at once must not write their
    # searches over each other's.
    claimed = backend.kv_update(_STATE, "ring", lambda st: {
        "next": (int((st or {"next": 0})["next"]) + len(searches)) % capacity})
    slot = (int((claimed or {"next": 0})["next"]) - len(searches)) % capacity
    for entry in searches:
        backend.kv_put(SEARCHES, f"{slot % capacity:07d}", entry, user_id=entry["user_id"])
        slot += 1


def heat(chunk: KnowledgeChunk) -> int:
    fb = chunk.metadata.get("feedback") or {}
    return int(chunk.access_count) + int(fb.get("up", 0)) - int(fb.get("down", 0))


class StatsRecorder:
    """Times searches and notes "used" feedback of one memory, written to its store in batches.

    Writes wait in memory until ``batch`` searches are pending or ``interval`` seconds
    have passed since the first of them (a timer), and at ``flush()`` / ``close()``: a
    write transaction per search would sit on the read path.

    Usage:
        .. code-block:: python

            recorder = StatsRecorder(memory)
            hits = recorder.search("deploy steps", user_id="alice")  # memory.search, timed
            recorder.close()
            print(compute_stats(memory).latency)
    """

    def __init__(self, memory: Any, *, capacity: int = CAPACITY, batch: int = 64, interval: float = 2.0) -> None:
        self.memory = memory
        self.capacity = capacity
        self._batch = batch
        self._interval = interval
        self._searches: list[dict[str, Any]] = []
        self._used: dict[str, tuple[str, str | None]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self._sub = memory.events.subscribe(self._on_event, types=[EventType.UPDATED])

    def search(self, query: str, **kwargs: Any) -> list[SearchHit]:
        """``memory.search`` with its latency and results recorded."""
        warm_up = getattr(self.memory, "warm_up", None)  # the model's load is not the search's latency
        load_s = float(warm_up(chinese=False)) if callable(warm_up) else 0.0
        t0 = time.perf_counter()
        hits = self.memory.search(query, **kwargs)
        self.record_search((time.perf_counter() - t0) * 1000.0, hits, user_id=kwargs.get("user_id"),
                           load_ms=load_s * 1000.0)
        return hits

    def record_search(self, ms: float, hits: Iterable[SearchHit], *, user_id: str | None = None,
                      at: datetime | None = None, load_ms: float = 0.0) -> None:
        """One search: ``ms`` its latency; ``load_ms`` the model load that came before it (kept apart)."""
        ids = [h.id for h in hits]
        if not isinstance(user_id, str):
            owners = {h.chunk.user_id for h in hits}
            user_id = owners.pop() if len(owners) == 1 else None  # so that forgetting the user forgets it
        entry = {"at": (at or self.memory.clock()).isoformat(), "ms": round(float(ms), 3), "ids": ids,
                 "user_id": user_id}
        if load_ms > 0:
            entry["load_ms"] = round(float(load_ms), 3)
        self._add(lambda: self._searches.append(entry))

    def _on_event(self, ev: MemoryEvent) -> None:
        if ev.data.get("feedback") == "used" and ev.chunk_id is not None:
            self._add(lambda: self._used.__setitem__(ev.chunk_id, (ev.at.isoformat(), ev.user_id)))

    def _add(self, change: Any) -> None:
        with self._lock:
            if self._closed:
                return
            change()
            due = self._interval == 0 or len(self._searches) + len(self._used) >= self._batch
            if not due and self._timer is None:
                self._timer = threading.Timer(self._interval, self._on_timer)
                self._timer.daemon = True
                self._timer.start()
        if due:
            self.flush()

    def _on_timer(self) -> None:
        try:
            self.flush()
        except Exception:  # a background write must not kill the process; the next flush retries
            logger.exception("BeeWeave: writing search statistics failed")

    def flush(self) -> None:
        """Write what is pending to the store."""
        with self._write_lock:
            with self._lock:
                searches, self._searches = self._searches, []
                used, self._used = self._used, {}
                self._stop_timer()
            if not searches and not used:
                return
            backend = self.memory.backend
            for cid, (at, user) in used.items():
                backend.kv_put(USED, cid, {"at": at, "user_id": user}, user_id=user)
            _put_searches(backend, searches, self.capacity)

    def close(self) -> None:
        """Write what is pending and stop listening; later searches are not recorded."""
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._stop_timer()
            self.memory.events.unsubscribe(self._sub)

    def _stop_timer(self) -> None:  # with self._lock held
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


@dataclass
class MemorySummary:
    """One memory as the stats show it."""

    id: str
    user_id: str
    agent_id: str | None
    status: str
    heat: int
    access_count: int
    used: int
    up: int
    down: int
    weight: float
    timestamp: str
    text: str

    @classmethod
    def of(cls, c: KnowledgeChunk, chars: int = 160) -> MemorySummary:
        fb = c.metadata.get("feedback") or {}
        text = c.summary or c.raw_content
        return cls(c.id, c.user_id, c.agent_id, c.status.value, heat(c), c.access_count, int(fb.get("used", 0)),
                   int(fb.get("up", 0)), int(fb.get("down", 0)), float(c.weight), c.timestamp.isoformat(),
                   text if len(text) <= chars else text[: chars - 1] + "…")


@dataclass
class LatencyStats:
    """Search latency over the recorded sample, in milliseconds (None without searches)."""

    count: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    max: float | None = None
    samples: list[float] = field(default_factory=list)  # for histograms; not in to_dict

    @classmethod
    def of(cls, ms: list[float]) -> LatencyStats:
        if not ms:
            return cls()
        a = np.asarray(ms, dtype=np.float64)
        p50, p95, p99 = (round(float(x), 3) for x in np.percentile(a, [50, 95, 99]))
        return cls(len(ms), p50, p95, p99, round(float(a.mean()), 3), round(float(a.max()), 3), list(ms))


@dataclass
class MemoryStats:
    """What :func:`compute_stats` finds. ``to_dict()`` is the JSON of ``GET /api/v1/stats``.

    ``growth`` lists (day, memories added that day, live total at the end of it) for live
    (active or pending) memories by their timestamp. ``used_share`` is the share of
    recorded searches that returned at least one memory later marked "used".
    """

    generated_at: str
    user_id: str | None
    total: int
    by_status: dict[str, int]
    by_agent: dict[str, int]
    by_intent: dict[str, int]
    growth: list[tuple[str, int, int]]
    hottest: list[MemorySummary]
    newest: list[MemorySummary]
    latency: LatencyStats
    searches: int
    searches_with_hits: int
    searches_used: int
    used_share: float | None
    dead_letters: int = 0  # events whose processing failed (of this user, when one is given)
    model_loads: int = 0  # recorded searches that first loaded the model (its time is not in latency)
    model_load_ms: float | None = None  # the longest of those loads
    pending_events: int = 0  # events queued, not yet stored (the whole store)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["latency"].pop("samples")
        out["growth"] = [{"day": d, "added": n, "total": t} for d, n, t in self.growth]
        return out


class RecordedUse:
    """What a :class:`StatsRecorder` wrote of a user, in their export (``UserData``):
    ``searches``, their recorded searches oldest first (``{"at", "ms", "ids", "user_id"[,
    "load_ms"]}``), and ``used``, memory id -> ``{"at", "user_id"}`` of the latest "used"
    feedback on each of the user's memories."""

    keeps = (SEARCHES, USED)

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def export_user(self, user_id: str) -> dict[str, Any]:
        used = dict(self.backend.kv_scan(USED))
        # A mark written before marks carried their user belongs to the memory's user.
        untagged = [cid for cid, v in used.items() if "user_id" not in v]
        owners = {cid: c.user_id for cid, c in self.backend.get(untagged).items()} if untagged else {}
        return {"searches": _searches(self.backend, user_id),
                "used": {cid: {**v, "user_id": user_id} for cid, v in used.items()
                         if v.get("user_id", owners.get(cid)) == user_id}}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        searches = []
        for i, raw in enumerate(section(data, "searches", list)):
            where = f"searches[{i}]"
            entry = mapping(raw, where)
            owned(entry, where, user_id)
            time_of(entry.get("at"), f"{where}.at")
            check_number(f"{where}.ms", entry.get("ms"), low=0.0)
            ids = sequence(entry.get("ids"), f"{where}.ids")
            if not all(isinstance(x, str) for x in ids):  # may be shared memories: not the user's to check
                raise InvalidInputError(f"{where}.ids must be a list of memory ids")
            searches.append(entry)
        staged = Staged()
        for cid, raw in section(data, "used", dict).items():
            entry = mapping(raw, f"used[{cid!r}]")
            owned(entry, f"used[{cid!r}]", user_id)
            time_of(entry.get("at"), f"used[{cid!r}].at")
            staged.names.add(check_id(cid, "used key"))
            staged.kv.append(KvEntry("used", USED, cid, entry))

        def write() -> dict[str, int]:
            held = {same(v) for v in _searches(self.backend, user_id)}  # a repeated import adds none twice
            todo = [e for e in searches if same(e) not in held]
            _put_searches(self.backend, todo, CAPACITY)
            return {"searches": len(todo)}

        staged.write = write
        return staged


def _searches(backend: Any, user_id: str | None) -> list[dict[str, Any]]:
    rows = [v for _, v in backend.kv_scan(SEARCHES) if user_id is None or v.get("user_id") == user_id]
    return sorted(rows, key=lambda v: v["at"])


def compute_stats(memory: Any, *, user_id: str | None = None, top: int = 10,
                  recorder: StatsRecorder | None = None) -> MemoryStats:
    """Statistics of the whole store, or of one user's memories.

    ``recorder`` is flushed first so that the searches it holds are counted. Reads every
    record once (O(n)); meant for dashboards and reports, not for a hot path.
    """
    if recorder is not None:
        recorder.flush()
    backend = memory.backend
    chunks = list(backend.scan(build_filter({"status": ALL_STATUSES}, user_id=user_id)))
    live = [c for c in chunks if c.status in _LIVE]
    by_status = {s.value: 0 for s in ChunkStatus}
    by_status.update(Counter(c.status.value for c in chunks))
    by_day = Counter(c.timestamp.date().isoformat() for c in live)
    growth, total = [], 0
    for day in sorted(by_day):
        total += by_day[day]
        growth.append((day, by_day[day], total))
    hottest = sorted((c for c in live if heat(c) > 0), key=lambda c: (-heat(c), -c.timestamp.timestamp(), c.id))
    newest = sorted(live, key=lambda c: (-c.timestamp.timestamp(), c.id))
    searches = _searches(backend, user_id)
    used_at = {key: to_datetime(v["at"]) for key, v in backend.kv_scan(USED)}
    used = 0
    for s in searches:
        at = to_datetime(s["at"])
        if any(cid in used_at and used_at[cid] >= at for cid in s["ids"]):
            used += 1
    dead_fn = getattr(memory, "dead_letters", None)
    dead = [] if dead_fn is None else dead_fn()
    if user_id is not None:
        dead = [d for d in dead if d.event.user_id == user_id]
    pending_fn = getattr(memory, "pending_events", None)
    loads = [float(s["load_ms"]) for s in searches if s.get("load_ms")]
    return MemoryStats(
        dead_letters=len(dead), pending_events=0 if pending_fn is None else int(pending_fn()),
        generated_at=memory.clock().isoformat(), user_id=user_id, total=len(chunks), by_status=by_status,
        by_agent=_ranked(Counter(c.agent_id or "(none)" for c in live)),
        by_intent=_ranked(Counter(c.intent.value if c.intent else "(none)" for c in live)),
        growth=growth, hottest=[MemorySummary.of(c) for c in hottest[:top]],
        newest=[MemorySummary.of(c) for c in newest[:top]],
        latency=LatencyStats.of([float(s["ms"]) for s in searches]), searches=len(searches),
        model_loads=len(loads), model_load_ms=round(max(loads), 3) if loads else None,
        searches_with_hits=sum(1 for s in searches if s["ids"]), searches_used=used,
        used_share=round(used / len(searches), 4) if searches else None)


def _ranked(counts: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
