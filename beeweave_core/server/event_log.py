"""Memory events over HTTP: a durable, bounded event log per tenant, SSE listeners, webhooks.

Every event of a tenant's ``memory.events`` bus is appended to a small SQLite log beside
the tenant's store (``<store>.events``; in memory for in-memory stores) with a sequence
number, the SSE ``id``. A client that reconnects with ``Last-Event-ID: <seq>`` gets what
it missed, also across a server restart, as long as the log still holds it (the newest
``max_events`` are kept). Webhooks get the same events, signed, retried with backoff.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import EventType
from ..store.wal import empty_wal, use_wal
from .event_tail import RecentEvents
from .fanout import Wakeups

__all__ = ["EventLog", "EventFilter", "Webhook", "WebhookSender", "DROP_REASONS", "sign"]

logger = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, chunk_id TEXT, user_id TEXT, agent_id TEXT,
    tags TEXT NOT NULL, data TEXT NOT NULL, at TEXT NOT NULL)"""


@dataclass(frozen=True)
class EventFilter:
    """The filters of ``memory.events.subscribe``: types, tags (any of), user, agent; and a key's users."""

    types: frozenset[str] | None = None
    tags: frozenset[str] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    users: frozenset[str] | None = None  # a user-scoped API key sees only its users' events

    def matches(self, ev: dict[str, Any]) -> bool:
        return ((self.types is None or ev["type"] in self.types)
                and (self.tags is None or bool(self.tags.intersection(ev["tags"])))
                and (self.user_id is None or ev["user_id"] == self.user_id)
                and (self.agent_id is None or ev["agent_id"] == self.agent_id)
                and (self.users is None or ev["user_id"] in self.users))


class EventLog:
    """The tenant's events with sequence numbers; SSE listeners follow it (:func:`fanout.follow`)."""

    def __init__(self, path: str | Path | None, *, max_events: int = 100_000, recent: int = 1024) -> None:
        self.max_events = max_events
        self.path = None if path is None else Path(path)
        self._db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False,
                                   isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            use_wal(self._db, 30.0)
            # As durable as the store's own writes (WAL + NORMAL survives a process crash): FULL
            # synced every append, the bulk of a write's time on the server
            # (benchmarks/history/server.md, "SSE fan-out and tool calls").
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA secure_delete=ON")  # deleted events are zeroed in the file
            self._db.execute(_SCHEMA)
        self.recent = RecentEvents(recent)  # what SSE listeners read without SQLite (event_tail)
        self.wakeups = Wakeups()  # how they learn of an append: O(1) for the writer (fanout)
        self._appended = 0

    def append(self, ev: Any) -> int:
        """Store a ``MemoryEvent``; returns its sequence number."""
        data = json.dumps(ev.data, default=str)
        row = (ev.type.value, ev.chunk_id, ev.user_id, ev.agent_id, json.dumps(list(ev.tags)), data,
               ev.at.isoformat())
        # The ring's copy, decoded as read() decodes the row; all the JSON work is done here,
        # before the lock every append and read of the tenant waits on.
        recent = {"type": row[0], "chunk_id": ev.chunk_id, "user_id": ev.user_id, "agent_id": ev.agent_id,
                  "tags": list(ev.tags), "data": json.loads(data), "at": row[6]}
        with self._lock:
            cur = self._db.execute("INSERT INTO events(type, chunk_id, user_id, agent_id, tags, data, at) "
                                   "VALUES (?,?,?,?,?,?,?)", row)
            seq = int(cur.lastrowid or 0)
            self._appended += 1
            if self._appended % 1000 == 0:  # bounded: drop the oldest now and then
                self._db.execute("DELETE FROM events WHERE seq <= ?", (seq - self.max_events,))
            # Under the lock, so the ring gets events in sequence order.
            self.recent.add(seq, {"seq": seq, **recent})
        self.wakeups.notify()
        return seq

    def read(self, after: int, flt: EventFilter, limit: int = 500) -> tuple[list[dict[str, Any]], int]:
        """Events with seq > ``after`` that match, and the last seq looked at."""
        with self._lock:
            rows = self._db.execute("SELECT seq, type, chunk_id, user_id, agent_id, tags, data, at FROM events "
                                    "WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)).fetchall()
        out = []
        last = after
        for seq, type_, cid, uid, aid, tags, data, at in rows:
            last = seq
            ev = {"seq": seq, "type": type_, "chunk_id": cid, "user_id": uid, "agent_id": aid,
                  "tags": json.loads(tags), "data": json.loads(data), "at": at}
            if flt.matches(ev):
                out.append(ev)
        return out, last

    def last_seq(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(seq) FROM events").fetchone()
        return int(row[0] or 0)

    def forget_user(self, user_id: str) -> int:
        """Delete every event of ``user_id`` but the ``memory.deleted`` notices (ids only: a
        mirror that reconnects erases its copies from them, also after a retried erasure);
        returns how many. The rows are zeroed in the file (``secure_delete``) and the WAL is
        emptied into it (TRUNCATE checkpoint), so no byte of the log's files holds them. Events
        without a user, and other users', stay."""
        with self._lock:
            n = self._db.execute("DELETE FROM events WHERE user_id=? AND type != ?",
                                 (user_id, EventType.DELETED.value)).rowcount
            if self.path is not None:
                empty_wal(self._db, f"the event log {self.path}")
            self.recent.forget_user(user_id)
        return max(int(n), 0)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-BeeWeave-Signature`` of a delivery: ``sha256=<hex HMAC of "<timestamp>.<body>">``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


@dataclass(frozen=True)
class Webhook:
    """Where to POST events: ``url``, the HMAC ``secret``, which ``types`` (None: all), which tenant (None: all)."""

    url: str
    secret: str
    types: frozenset[str] | None = None
    tenant: str | None = None
    max_attempts: int = 6
    first_delay: float = 0.5

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Webhook:
        types = data.get("types")
        return cls(str(data["url"]), str(data["secret"]), None if types is None else frozenset(types),
                   data.get("tenant"), int(data.get("max_attempts", 6)), float(data.get("first_delay", 0.5)))


# Why a notification was given up, as the ``reason`` of ``beeweave_webhook_dropped_total``.
DROP_REASONS = ("queue_full", "retries_full", "attempts", "shutdown")


@dataclass
class WebhookSender:
    """A background thread per webhook delivering its events, with exponential backoff (one
    per webhook: a receiver that hangs until the timeout holds up only its own deliveries).

    Each delivery is ``POST url`` with the event as JSON and the headers
    ``X-BeeWeave-Event`` (type), ``X-BeeWeave-Delivery`` (``<tenant>:<seq>``, for
    deduplication), ``X-BeeWeave-Timestamp`` and ``X-BeeWeave-Signature`` (:func:`sign`).
    A 2xx is delivered; anything else is retried up to ``max_attempts`` times.

    Bounded, and every loss counted (``dropped``, by reason: :data:`DROP_REASONS`): new
    events wait in a queue of ``max_queue`` per webhook (when it is full the event is dropped,
    ``queue_full``); retries wait in a heap the delivery thread owns, of at most ``max_queue``
    too (``retries_full``), and never go back into the queue: the thread is the queue's only
    consumer, and a blocking put of its own retries into a full queue stopped it for good.
    """

    hooks: list[Webhook]
    timeout: float = 5.0
    max_queue: int = 10_000
    delivered: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    _queues: dict[int, queue.Queue[Any]] = field(default_factory=dict)  # by the hook's position
    _retries: dict[int, list[Any]] = field(default_factory=dict)  # by the hook's position: the thread's heap
    _threads: list[threading.Thread] = field(default_factory=list)
    _start_lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def failed(self) -> int:
        """Notifications given up, for any reason."""
        return sum(self.dropped.values())

    def _drop(self, reason: str, hook: Webhook, tenant: str, event: dict[str, Any], n: int = 1) -> None:
        with self._start_lock:  # the counts are shared by the hooks' threads and the submitters
            self.dropped[reason] += n
        logger.error("webhook %s: event %s of %s not delivered (%s)", hook.url, event["seq"], tenant, reason)

    def submit(self, tenant: str, event: dict[str, Any]) -> None:
        self._start()
        for i, hook in enumerate(self.hooks):
            if (hook.tenant is None or hook.tenant == tenant) and (hook.types is None or event["type"] in hook.types):
                try:
                    self._queues[i].put_nowait((hook, tenant, event, 1))
                except queue.Full:
                    self._drop("queue_full", hook, tenant, event)

    def _start(self) -> None:
        with self._start_lock:
            if self._threads:
                return
            for i in range(len(self.hooks)):
                self._queues[i] = queue.Queue(maxsize=self.max_queue)
                self._retries[i] = []
                t = threading.Thread(target=self._run, args=(self._queues[i], self._retries[i]),
                                     name=f"beeweave-webhook-{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def _run(self, pending: queue.Queue[Any], later: list[Any]) -> None:
        import httpx

        order = itertools.count()  # ties in the heap never compare the items
        with httpx.Client(timeout=self.timeout) as http:
            while not self._stop.is_set():
                now = time.monotonic()
                if later and later[0][0] <= now:  # a due retry first, straight from the heap
                    item = heapq.heappop(later)[2]
                else:
                    wait = 0.05 if not later else min(0.05, later[0][0] - now)
                    try:
                        item = pending.get(timeout=wait)
                    except queue.Empty:
                        continue
                hook, tenant, event, attempt = item
                try:
                    ok = self._deliver(http, hook, tenant, event)
                except Exception:  # whatever it was, the thread goes on: a failed attempt
                    logger.exception("webhook %s: event %s of %s", hook.url, event.get("seq"), tenant)
                    ok = False
                if ok:
                    with self._start_lock:
                        self.delivered += 1
                elif attempt >= hook.max_attempts:
                    self._drop("attempts", hook, tenant, event)
                elif len(later) >= self.max_queue:
                    self._drop("retries_full", hook, tenant, event)
                else:
                    heapq.heappush(later, (time.monotonic() + hook.first_delay * 2 ** (attempt - 1), next(order),
                                           (hook, tenant, event, attempt + 1)))

    @staticmethod
    def _deliver(http: Any, hook: Webhook, tenant: str, event: dict[str, Any]) -> bool:
        body = json.dumps({"tenant": tenant, **event}, separators=(",", ":")).encode()
        ts = str(int(time.time()))
        headers = {"Content-Type": "application/json", "X-BeeWeave-Event": event["type"],
                   "X-BeeWeave-Delivery": f"{tenant}:{event['seq']}", "X-BeeWeave-Timestamp": ts,
                   "X-BeeWeave-Signature": sign(hook.secret, ts, body)}
        try:
            resp = http.post(hook.url, content=body, headers=headers)
        except Exception as exc:  # network errors are retried
            logger.warning("webhook %s: %s", hook.url, exc)
            return False
        return 200 <= resp.status_code < 300

    def close(self) -> None:
        """Stop the threads; what they had not delivered yet is counted as dropped (``shutdown``)."""
        self._stop.set()
        for t in self._threads:
            t.join(5)
        left = sum(q.qsize() for q in self._queues.values()) + sum(len(h) for h in self._retries.values())
        if left:
            with self._start_lock:
                self.dropped["shutdown"] += left
            logger.error("webhooks: %d notifications not delivered before shutdown", left)


def filter_from(types: Iterable[str] | None, tags: Iterable[str] | None, user_id: str | None,
                agent_id: str | None, users: Iterable[str] | None) -> EventFilter:
    return EventFilter(None if not types else frozenset(types), None if not tags else frozenset(tags), user_id,
                       agent_id, None if users is None else frozenset(users))
