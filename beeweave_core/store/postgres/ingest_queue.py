"""The ingest queue of a PostgreSQL store, in its database: shared by every host.

``PostgresEventQueue`` implements the ``EventQueue`` protocol (beeweave_core/ingest/queue.py)
over the ``ingest_events`` table, one tenant per queue. What it adds to the SQLite queue:

* durable where the store is: ``put`` commits before it returns, so a 202 survives the
  host that gave it (its disk, its queue directory), and any host's worker drains it;
* claims, not reads: ``take`` leases the oldest pending events with ``FOR UPDATE SKIP
  LOCKED`` — workers on many hosts take disjoint batches without waiting for each other —
  and sets ``lease_until`` and ``leased_by`` (the queue instance: one worker); an event
  whose lease ran out (its worker died mid-batch) is taken again by the next worker;
* a live worker takes its own leases back at once: the events it leased but does not hold
  (``_held``: taken and not yet given back by ``done``/``fail``/``postpone``). A claim
  whose reply was lost with the connection (committed, but ``take`` raised), or a
  ``done``/``postpone`` that failed while the database was down, leaves such a lease; the
  worker's next ``take`` claims those events again instead of waiting for the lease to run
  out. Another worker's lease is never taken before it runs out, and a ``postpone`` gives
  back only this worker's own lease;
* exactly once by event id: an event's memories have ids derived from its id, and the
  runtime stores only those not stored yet (``IngestRuntime.store_new``), so an event
  taken twice after an expired lease is stored once; ``done`` deletes the row.

No statement depends on session state (schema-qualified, autocommit, no prepared
statements), so the queue works through a transaction pooler like the store.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from ...errors import StoreClosedError
from ...ingest.queue import DeadRow, QueuedEvent, StoredEvent
from .connection import Database

__all__ = ["PostgresEventQueue", "DEFAULT_LEASE"]

DEFAULT_LEASE = 120.0  # seconds a worker holds a batch before another may take it


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


class PostgresEventQueue:
    """An ``EventQueue`` in the store's database, on the store's connection pool.

    Args:
        db: the tenant's ``Database`` (``PostgresStore.db``); the queue is that tenant's.
        lease: seconds a taken batch stays with its worker before another worker may take
            it (longer than any batch takes; a batch stored twice is still stored once).
        poll_interval: seconds between an idle worker's looks at the queue.
    """

    durable = True

    def __init__(self, db: Database, *, lease: float = DEFAULT_LEASE, poll_interval: float = 1.0) -> None:
        self._db = db
        self._t = db.tenant
        self.lease = float(lease)
        # How often an idle worker looks again: events other hosts accepted, or leases run out.
        self.poll_interval = float(poll_interval)
        self._pid = os.getpid()
        # Who holds a lease: this queue instance (one worker), unique across hosts and
        # processes; the host and pid are for the operator's eyes.
        self.worker = _worker_id()
        self._lock = threading.Lock()
        self._taking = threading.Lock()  # one claim at a time, so each sees what the others hold
        self._held: set[str] = set()  # ids taken and not given back yet: the batch in the worker's hands
        self._closed = False

    def _me(self) -> str:
        """This worker's identity; a forked child is another worker (it holds none of its
        parent's leases and must not take them back)."""
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._lock, self._taking = threading.Lock(), threading.Lock()
            self._held = set()
            self.worker = _worker_id()
        return self.worker

    def _release(self, ids: Sequence[str]) -> None:
        """The worker no longer holds ``ids`` (given back, or giving them back failed): a
        lease of its own left on them is taken back by its next ``take``."""
        with self._lock:
            self._held.difference_update(ids)

    def _run(self, text: str, args: Any, *, fetch: bool = True) -> list[tuple[Any, ...]]:
        if self._closed:
            raise StoreClosedError("the ingest queue is closed")
        with self._db.conn() as conn:
            cur = conn.execute(self._db.q(text), args)
            return cur.fetchall() if fetch and cur.description is not None else []

    def put(self, event_id: str, user_id: str, body: str) -> bool:
        return self.put_many([(event_id, user_id, body)]) == 1

    def put_many(self, rows: Sequence[tuple[str, str, str]]) -> int:
        if not rows:
            return 0
        got = self._run(
            "INSERT INTO @ingest_events (tenant, id, user_id, body) "
            "SELECT %(t)s, u.id, u.user_id, u.body FROM unnest(%(ids)s::text[], %(users)s::text[], %(bodies)s::text[]) "
            "WITH ORDINALITY AS u(id, user_id, body, i) ORDER BY u.i ON CONFLICT (tenant, id) DO NOTHING RETURNING id",
            {"t": self._t, "ids": [r[0] for r in rows], "users": [r[1] for r in rows], "bodies": [r[2] for r in rows]})
        return len(got)

    def pending_count(self) -> int:
        return int(self._run("SELECT count(*) FROM @ingest_events WHERE tenant = %s AND state = 'pending'",
                             (self._t,))[0][0])

    def take(self, n: int) -> list[QueuedEvent]:
        """Lease the ``n`` oldest pending events nobody holds: not leased, a lease that ran
        out, or this worker's own lease on events it does not hold (see the module)."""
        me = self._me()
        with self._taking:
            with self._lock:
                held = list(self._held)
            rows = self._run(
                "WITH c AS (SELECT id FROM @ingest_events WHERE tenant = %(t)s AND state = 'pending' "
                "AND (lease_until IS NULL OR lease_until < now() OR (leased_by = %(me)s AND NOT id = ANY(%(held)s::text[]))) "
                "ORDER BY seq LIMIT %(n)s FOR UPDATE SKIP LOCKED) "
                "UPDATE @ingest_events e SET lease_until = now() + make_interval(secs => %(lease)s), "
                "leased_by = %(me)s FROM c WHERE e.tenant = %(t)s AND e.id = c.id "
                "RETURNING e.seq, e.id, e.body, e.attempts",
                {"t": self._t, "n": max(int(n), 0), "lease": self.lease, "me": me, "held": held})
            with self._lock:
                self._held.update(r[1] for r in rows)
        rows.sort()
        return [QueuedEvent(seq, eid, json.loads(body), attempts) for seq, eid, body, attempts in rows]

    def done(self, ids: Sequence[str]) -> None:
        if ids:
            try:
                self._run("DELETE FROM @ingest_events WHERE tenant = %s AND id = ANY(%s)", (self._t, list(ids)),
                          fetch=False)
            finally:
                self._release(ids)

    def fail(self, event_id: str, error: str, *, body: str | None = None) -> None:
        try:
            self._run("UPDATE @ingest_events SET state = 'dead', error = %s, attempts = attempts + 1, "
                      "failed_at = now(), body = coalesce(%s, body), lease_until = NULL "
                      "WHERE tenant = %s AND id = %s AND state = 'pending'",
                      (error, body, self._t, event_id), fetch=False)
        finally:
            self._release([event_id])

    def postpone(self, ids: Sequence[str], error: str) -> None:
        """Count a failed attempt and give the events back now (the store was unavailable):
        only those this worker holds the lease of (a lease that ran out and another worker
        took is that worker's)."""
        if ids:
            try:
                self._run("UPDATE @ingest_events SET attempts = attempts + 1, error = %s, lease_until = NULL "
                          "WHERE tenant = %s AND state = 'pending' AND id = ANY(%s) AND leased_by = %s",
                          (error, self._t, list(ids), self._me()), fetch=False)
            finally:
                self._release(ids)

    def dead(self, limit: int | None = None) -> list[DeadRow]:
        rows = self._run(
            "SELECT id, user_id, body, error, attempts, extract(epoch FROM failed_at) FROM @ingest_events "
            "WHERE tenant = %s AND state = 'dead' ORDER BY seq LIMIT %s", (self._t, limit))
        return [DeadRow(eid, uid, json.loads(body), error or "", attempts, float(failed_at or 0.0))
                for eid, uid, body, error, attempts, failed_at in rows]

    def revive(self, ids: Sequence[str] | None = None) -> int:
        return len(self._run(
            "UPDATE @ingest_events SET state = 'pending', lease_until = NULL WHERE tenant = %s AND state = 'dead' "
            "AND (%s::text[] IS NULL OR id = ANY(%s)) RETURNING id",
            (self._t, None if ids is None else list(ids), None if ids is None else list(ids))))

    def discard(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        return len(self._run("DELETE FROM @ingest_events WHERE tenant = %s AND state = 'dead' AND id = ANY(%s) "
                             "RETURNING id", (self._t, list(ids))))

    def drop_oldest(self, exclude: Collection[str], reason: str) -> str | None:
        rows = self._run(
            "WITH v AS (SELECT id FROM @ingest_events WHERE tenant = %s AND state = 'pending' AND NOT id = ANY(%s) "
            "ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) "
            "UPDATE @ingest_events e SET state = 'dead', error = %s, failed_at = now(), lease_until = NULL "
            "FROM v WHERE e.tenant = %s AND e.id = v.id RETURNING e.id", (self._t, list(exclude), reason, self._t))
        return rows[0][0] if rows else None

    def of_user(self, user_id: str) -> list[StoredEvent]:
        rows = self._run(
            "SELECT id, user_id, body, state, attempts, error, extract(epoch FROM enqueued_at), "
            "extract(epoch FROM failed_at) FROM @ingest_events WHERE tenant = %s AND user_id = %s ORDER BY seq",
            (self._t, user_id))
        return [StoredEvent(eid, uid, body, state, attempts, error, float(enq), None if failed is None else float(failed))
                for eid, uid, body, state, attempts, error, enq, failed in rows]

    def restore(self, events: Sequence[StoredEvent]) -> int:
        if not events:
            return 0
        got = self._run(
            "INSERT INTO @ingest_events (tenant, id, user_id, body, state, attempts, error, enqueued_at, failed_at) "
            "SELECT %(t)s, u.id, u.user_id, u.body, u.state, u.attempts, u.error, to_timestamp(u.enq), "
            "to_timestamp(u.failed) FROM unnest(%(ids)s::text[], %(users)s::text[], %(bodies)s::text[], "
            "%(states)s::text[], %(attempts)s::int[], %(errors)s::text[], %(enq)s::float8[], %(failed)s::float8[]) "
            "WITH ORDINALITY AS u(id, user_id, body, state, attempts, error, enq, failed, i) ORDER BY u.i "
            "ON CONFLICT (tenant, id) DO NOTHING RETURNING id",
            {"t": self._t, "ids": [e.id for e in events], "users": [e.user_id for e in events],
             "bodies": [e.body for e in events], "states": [e.state for e in events],
             "attempts": [e.attempts for e in events], "errors": [e.error for e in events],
             "enq": [e.enqueued_at for e in events], "failed": [e.failed_at for e in events]})
        return len(got)

    def users(self) -> list[str]:
        return [r[0] for r in self._run("SELECT DISTINCT user_id FROM @ingest_events WHERE tenant = %s ORDER BY user_id",
                                        (self._t,))]

    def forget_user(self, user_id: str) -> int:
        return len(self._run("DELETE FROM @ingest_events WHERE tenant = %s AND user_id = %s RETURNING id",
                             (self._t, user_id)))

    def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL vacuums the processed rows."""

    def close(self) -> None:
        self._closed = True  # the pool is the store's; it closes with the store
