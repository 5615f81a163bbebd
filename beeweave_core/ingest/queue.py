"""The durable event queue: pending events until processed, and the dead letters.

``EventQueue`` is the small protocol the pipeline needs; :class:`SQLiteEventQueue` keeps it
in a table (``ingest_events``) of the store's own SQLite file, so a store is one database
(and its WAL) however much it ingests; in memory for a store in memory. ``ingest()``
inserts the event and returns once the insert is committed: acknowledged means in the
store's file. A PostgreSQL store has its own queue in its database
(``store/postgres/ingest_queue.py``).

Why WAL with ``synchronous=NORMAL``: a committed write has reached the operating system, so
it survives the process being killed (not a power cut: ``fsync=True`` syncs each commit).
The queue's connection never checkpoints on a caller's insert (``wal_autocheckpoint=0``):
the worker checkpoints from a second connection whenever it is idle, and empties the WAL
(TRUNCATE). ``secure_delete`` zeroes processed events in the file, so no processed event
lingers in the file or its WAL once the worker is idle. While a backlog drains, ``done``
checkpoints too once the WAL passes ``WAL_LIMIT``, so it stays bounded.

Several processes on one store share the one table. A worker takes a batch by claiming it
(``taken_by``: its owner name) in one write transaction, so two workers never hold one event.
An owner is ``<slot>:<random>``; the slot is a lock file (``<db>.ingest.lock``,
``.ingest.lock.1``...) the owner holds an exclusive ``flock`` on while the queue is open. A
claim whose slot nobody holds belongs to a process that died: ``take`` gives it back to the
queue (at once when a queue opens, then every ``ADOPT_INTERVAL`` seconds; an idle worker polls
that often), so a sibling killed mid-batch leaves nothing waiting for some process to reopen the
store. Unclaimed events are taken by whichever worker looks first, and counts are the store's:
``flush()`` waits for every acknowledged event, a dead sibling's included.

Exactly once: an event stays ``pending`` until its memories are stored and ``done`` deletes it;
a crash in between leaves it pending, and its memories, whose ids derive from the event id,
are skipped when it is taken again (``IngestRuntime.store_new``).

A store written before the queue was a table kept it in ``<db>.queue`` files and
memory-mapped ``<db>.queue.intake`` journals: their events are moved into the table when the
queue opens, and the files deleted (:mod:`.queue_upgrade`).

Every SQLite error is raised as :class:`StoreUnavailableError` with the original chained
(a full disk, a locked or unreadable file), and a refused call leaves the queue unchanged.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import StoreClosedError, StoreUnavailableError
from ..store.files import file_id
from ..store.wal import truncate_wal, use_wal
from .queue_upgrade import import_old_queues, numbered, old_queue_files, try_lock

__all__ = ["QueuedEvent", "DeadRow", "StoredEvent", "EventQueue", "UserEvents", "SQLiteEventQueue", "holds_events"]

TABLE = "ingest_events"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    enqueued_at REAL NOT NULL,
    failed_at REAL,
    taken_by TEXT
);
CREATE INDEX IF NOT EXISTS {TABLE}_state ON {TABLE} (state, seq);
"""
_COLUMNS = "id, user_id, body, state, attempts, error, enqueued_at, failed_at"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueuedEvent:
    """A pending event as the worker receives it."""

    seq: int
    id: str
    body: dict[str, Any]
    attempts: int


@dataclass(frozen=True)
class DeadRow:
    """An event that failed, with the error that stopped it."""

    id: str
    user_id: str
    body: dict[str, Any]
    error: str
    attempts: int
    failed_at: float


@dataclass(frozen=True)
class StoredEvent:
    """An event as the queue keeps it, pending or dead: what a user's export holds of the
    queue and what its import puts back (:class:`UserEvents`)."""

    id: str  # the queue key (``<event id>@<user>``)
    user_id: str
    body: str  # the event's JSON text, as queued (or as it was when it failed)
    state: str  # "pending" or "dead"
    attempts: int
    error: str | None
    enqueued_at: float  # seconds since the epoch
    failed_at: float | None


@runtime_checkable
class EventQueue(Protocol):
    """What the ingestion pipeline needs of a queue (a PostgreSQL table implements it too).

    Events are ``pending`` until ``done`` removes them, or ``dead`` after ``fail``.
    ``put`` must be durable when it returns (if ``durable`` is true).
    """

    durable: bool

    def put(self, event_id: str, user_id: str, body: str) -> bool:
        """Store a pending event; False (and no change) if the id is already queued."""

    def put_many(self, rows: Sequence[tuple[str, str, str]]) -> int:
        """``put`` for many ``(event_id, user_id, body)`` rows in one transaction; return how many were new."""

    def pending_count(self) -> int: ...

    def take(self, n: int) -> list[QueuedEvent]:
        """The ``n`` oldest pending events (they stay pending until ``done`` or ``fail``)."""

    def done(self, ids: Sequence[str]) -> None:
        """Remove processed events (pending or dead)."""

    def fail(self, event_id: str, error: str, *, body: str | None = None) -> None:
        """Mark a pending event dead with its error (``body`` replaces the stored event)."""

    def dead(self, limit: int | None = None) -> list[DeadRow]: ...

    def postpone(self, ids: Sequence[str], error: str) -> None:
        """Count a failed attempt of pending events that stay pending (the store was unavailable).
        Optional: the worker retries without it."""

    def revive(self, ids: Sequence[str] | None = None) -> int:
        """Make dead events pending again (all of them if ``ids`` is None); return how many."""

    def discard(self, ids: Sequence[str]) -> int:
        """Delete dead events for good; return how many."""

    def drop_oldest(self, exclude: Collection[str], reason: str) -> str | None:
        """Move the oldest pending event not in ``exclude`` to the dead letters; return its id."""

    def checkpoint(self) -> None:
        """Housekeeping the worker runs off the callers' path (e.g. a WAL checkpoint)."""

    def close(self) -> None: ...


@runtime_checkable
class UserEvents(Protocol):
    """What a user's export, import and forget need of a queue (both queues of BeeWeave have
    it; a queue given as ``IngestConfig.queue`` without it exports only its dead letters)."""

    def of_user(self, user_id: str) -> list[StoredEvent]:
        """The user's pending and dead events, oldest first."""

    def restore(self, events: Sequence[StoredEvent]) -> int:
        """Put events back as they were (pending ones pending, dead ones dead, in the order
        given); an id the queue holds is kept as it is. Return how many were new."""

    def forget_user(self, user_id: str) -> int:
        """Delete every event of the user, pending or dead; return how many."""

    def users(self) -> list[str]:
        """The users the queue holds events of (pending or dead), sorted."""


def holds_events(path: Path, old_base: Path | None) -> bool:
    """Whether the SQLite file ``path`` has a queue table with events in it, or there are files
    of the queue as it was before it was a table (``old_base``'s): the runtime opens the queue
    at start-up then, to resume them (a store that never ingested gets no lock file)."""
    if old_base is not None and old_queue_files(old_base):
        return True
    if not path.exists():
        return False
    try:
        db = sqlite3.connect(str(path), timeout=5.0)
        try:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name=?", (TABLE,)).fetchone() is None:
                return False
            return db.execute(f"SELECT 1 FROM {TABLE} LIMIT 1").fetchone() is not None
        finally:
            db.close()
    except sqlite3.Error:
        return True  # cannot tell: open the queue, which says what is wrong


class SQLiteEventQueue:
    """An :class:`EventQueue` in a table of the SQLite file ``path`` (the store's, or one of its
    own), or in memory (``path=None``)."""

    # The WAL size at which ``done`` checkpoints while a backlog drains.
    WAL_LIMIT = 8 << 20
    CHECKPOINT_WAIT = 1.0  # seconds a checkpoint keeps trying while a write or a read is in its way
    ADOPT_INTERVAL = 5.0  # seconds between looks for claims (and old queue files) of processes that died

    def __init__(self, path: str | Path | None = None, *, fsync: bool = False, timeout: float = 30.0,
                 old_base: Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        # Where the queue's files were before it was a table (see queue_upgrade).
        self._old_base = old_base
        self.durable = self.path is not None
        self._lock = threading.Lock()
        self._closed = False
        self._slot: Path | None = None
        self._slot_file: io.FileIO | None = None
        self._adopted_at = float("-inf")  # the first take looks at once
        self.owner = "mem"
        self._file_id: tuple[int, int] | None = None
        if self.path is not None:
            try:
                self._slot, self._slot_file, n = _own_slot(self.path)
            except OSError as exc:
                raise StoreUnavailableError(f"cannot open the ingest queue of {self.path}: {exc}") from exc
            self.owner = f"{n}:{uuid.uuid4().hex}"
        self._ckpt: sqlite3.Connection | None = None
        try:
            self._db = self._connect(timeout)
            self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            self._db.execute("PRAGMA secure_delete=ON")  # processed events leave no trace in the file
            with self._write():
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
                if self.path is not None:
                    # Claims of this slot's earlier owner: it died (this queue holds the slot now).
                    self._db.execute(f"UPDATE {TABLE} SET taken_by=NULL WHERE taken_by LIKE ?",
                                     (self.owner.split(":")[0] + ":%",))
            if self.path is not None:
                self._file_id = file_id(self.path)
                self._db.execute("PRAGMA wal_autocheckpoint=0")  # never checkpoint on a caller's put
                self._ckpt = self._connect(timeout)
                # No busy handler: the checkpoint tries again itself (see store.wal.truncate_wal).
                self._ckpt.execute("PRAGMA busy_timeout=0")
                self._adopt()
        except BaseException as exc:
            for db in (getattr(self, "_db", None), self._ckpt):
                if db is not None:
                    db.close()
            self._release()
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailableError(f"cannot open the ingest queue of {self.path}: {exc}") from exc
            raise

    def _release(self) -> None:
        if self._slot_file is not None:
            if self._slot is not None:
                self._slot.unlink(missing_ok=True)  # before the flock goes: see try_lock
            self._slot_file.close()
            self._slot_file = None

    @property
    def poll_interval(self) -> float | None:
        """How often an idle worker takes again: other processes put events in the same table,
        and claims of a process that died are given back then."""
        return None if self.path is None else self.ADOPT_INTERVAL

    def _adopt(self) -> None:
        """Give back the claims of owners that died, and move in the files of the queue as it was
        before it was a table (old files a live process of an older version holds stay)."""
        assert self.path is not None
        self._adopted_at = time.monotonic()
        with self._write():
            owners = [r[0] for r in self._db.execute(
                f"SELECT DISTINCT taken_by FROM {TABLE} WHERE state='pending' AND taken_by IS NOT NULL "
                "AND taken_by != ?", (self.owner,))]
            for owner in owners:
                slot = numbered(_slot_base(self.path), int(owner.split(":")[0]))
                held = try_lock(slot)
                if held is None:
                    continue  # a live process's claim
                try:
                    self._db.execute(f"UPDATE {TABLE} SET taken_by=NULL WHERE taken_by=?", (owner,))
                finally:
                    slot.unlink(missing_ok=True)
                    held.close()
        if self._old_base is None:
            return
        if self._old_base == self.path:
            self._move_old_table()
        import_old_queues(self._old_base, self.path, self._insert_old)

    def _move_old_table(self) -> None:
        """A queue file of an older version given as the queue's own file holds its events in a
        table ``events``: moved into the queue table, in one transaction."""
        with self._write():
            if self._db.execute("SELECT 1 FROM sqlite_master WHERE name='events'").fetchone() is not None:
                self._db.execute(f"INSERT OR IGNORE INTO {TABLE} ({_COLUMNS}) SELECT {_COLUMNS} FROM events "
                                 "ORDER BY seq")
                self._db.execute("DROP TABLE events")

    def _insert_old(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert events from the queue files of an older version (an id held already is kept)."""
        with self._write():
            self._db.executemany(f"INSERT OR IGNORE INTO {TABLE} ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)", rows)

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction: committed, or rolled back and raised as StoreUnavailableError
        (SQLite may already have rolled it back itself, e.g. on a full disk)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            yield
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailableError(f"the ingest queue of {self.path or ':memory:'} is unavailable: "
                                            f"{exc}") from exc
            raise

    @contextmanager
    def _read(self) -> Iterator[None]:
        """A read, or one statement in its own transaction: SQLite errors as StoreUnavailableError."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"the ingest queue of {self.path or ':memory:'} is unavailable: "
                                        f"{exc}") from exc

    def _connect(self, timeout: float) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:" if self.path is None else str(self.path), timeout=timeout,
                             check_same_thread=False, isolation_level=None)
        if self.path is not None:
            use_wal(db, timeout)
        return db

    def _check(self) -> None:
        if self._closed:
            raise StoreClosedError("the ingest queue is closed")

    def _check_file(self) -> None:
        """The file is still the one opened. SQLite keeps writing to a deleted file's inode: an
        event put there would be acknowledged and lost with it, so the put is refused."""
        if self._file_id is not None and file_id(self.path) != self._file_id:  # type: ignore[arg-type]
            raise StoreUnavailableError(f"the file {self.path} was deleted or replaced while open: nothing more "
                                        "is queued in it; close the store and open the file again")

    def put(self, event_id: str, user_id: str, body: str) -> bool:
        # One statement, committed on its own (no BEGIN/COMMIT around it): each SQLite call
        # releases the GIL, and a caller waits to get it back while the worker runs Python.
        with self._lock:
            self._check()
            with self._read():
                cur = self._db.execute(f"INSERT OR IGNORE INTO {TABLE} (id, user_id, body, enqueued_at) "
                                       "VALUES (?,?,?,?)", (event_id, user_id, body, time.time()))
            self._check_file()  # after the commit: a file deleted before it holds the event
            return cur.rowcount == 1

    def put_many(self, rows: Sequence[tuple[str, str, str]]) -> int:
        if not rows:
            return 0
        now = time.time()
        with self._lock:
            self._check()
            before = self._db.total_changes
            with self._write():
                self._db.executemany(f"INSERT OR IGNORE INTO {TABLE} (id, user_id, body, enqueued_at) "
                                     "VALUES (?,?,?,?)", [(eid, uid, body, now) for eid, uid, body in rows])
            self._check_file()
            return self._db.total_changes - before

    def pending_count(self) -> int:
        with self._lock, self._read():
            self._check()
            return int(self._db.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state='pending'").fetchone()[0])

    def take(self, n: int) -> list[QueuedEvent]:
        """Claim the ``n`` oldest pending events no live owner holds (this queue's own claims
        included: the worker takes one batch at a time, so it holds none when it takes)."""
        with self._lock:
            self._check()
            if self.path is not None and time.monotonic() - self._adopted_at >= self.ADOPT_INTERVAL:
                try:
                    self._adopt()
                except (StoreUnavailableError, OSError):
                    # Tried again at the next look; the events stay where they are meanwhile.
                    logger.warning("BeeWeave: could not look for the ingest claims of processes that died in %s "
                                   "yet", self.path, exc_info=True)
            with self._write():
                rows = self._db.execute(
                    f"SELECT seq, id, body, attempts FROM {TABLE} WHERE state='pending' "
                    "AND (taken_by IS NULL OR taken_by=?) ORDER BY seq LIMIT ?", (self.owner, n)).fetchall()
                if rows:
                    self._db.executemany(f"UPDATE {TABLE} SET taken_by=? WHERE seq=?",
                                         [(self.owner, r[0]) for r in rows])
        return [QueuedEvent(seq, eid, json.loads(body), attempts) for seq, eid, body, attempts in rows]

    def done(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._check()
            with self._write():
                self._db.execute(f"DELETE FROM {TABLE} WHERE id IN ({marks})", list(ids))
        if self.path is not None and self._wal_size() > self.WAL_LIMIT:
            self.checkpoint()  # a long backlog: keep the WAL bounded while it drains

    def _wal_size(self) -> int:
        try:
            return os.stat(str(self.path) + "-wal").st_size
        except OSError:
            return 0

    def fail(self, event_id: str, error: str, *, body: str | None = None) -> None:
        with self._lock:
            self._check()
            with self._write():
                self._db.execute(
                    f"UPDATE {TABLE} SET state='dead', error=?, attempts=attempts+1, failed_at=?, "
                    "body=coalesce(?, body), taken_by=NULL WHERE id=? AND state='pending'",
                    (error, time.time(), body, event_id))

    def postpone(self, ids: Sequence[str], error: str) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._check()
            with self._write():
                self._db.execute(f"UPDATE {TABLE} SET attempts=attempts+1, error=?, taken_by=NULL "
                                 f"WHERE state='pending' AND taken_by=? AND id IN ({marks})", [error, self.owner, *ids])

    def dead(self, limit: int | None = None) -> list[DeadRow]:
        with self._lock, self._read():
            self._check()
            rows = self._db.execute(f"SELECT id, user_id, body, error, attempts, failed_at FROM {TABLE} "
                                    "WHERE state='dead' ORDER BY seq LIMIT ?", (-1 if limit is None else limit,)
                                    ).fetchall()
        return [DeadRow(eid, uid, json.loads(body), error or "", attempts, failed_at or 0.0)
                for eid, uid, body, error, attempts, failed_at in rows]

    def revive(self, ids: Sequence[str] | None = None) -> int:
        with self._lock:
            self._check()
            with self._write():
                if ids is None:
                    cur = self._db.execute(f"UPDATE {TABLE} SET state='pending', taken_by=NULL WHERE state='dead'")
                else:
                    marks = ",".join("?" * len(ids))
                    cur = self._db.execute(f"UPDATE {TABLE} SET state='pending', taken_by=NULL WHERE state='dead' "
                                           f"AND id IN ({marks})", list(ids))
            return cur.rowcount

    def discard(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._check()
            with self._write():
                cur = self._db.execute(f"DELETE FROM {TABLE} WHERE state='dead' AND id IN ({marks})", list(ids))
            return cur.rowcount

    def drop_oldest(self, exclude: Collection[str], reason: str) -> str | None:
        with self._lock:
            self._check()
            with self._write():
                rows = self._db.execute(f"SELECT id FROM {TABLE} WHERE state='pending' AND (taken_by IS NULL "
                                        "OR taken_by=?) ORDER BY seq LIMIT ?", (self.owner, len(exclude) + 1)).fetchall()
                victim = next((r[0] for r in rows if r[0] not in exclude), None)
                if victim is not None:
                    self._db.execute(f"UPDATE {TABLE} SET state='dead', error=?, failed_at=?, taken_by=NULL "
                                     "WHERE id=?", (reason, time.time(), victim))
            return victim

    def of_user(self, user_id: str) -> list[StoredEvent]:
        with self._lock, self._read():
            self._check()
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE user_id=? ORDER BY seq",
                                    (user_id,)).fetchall()
        return [StoredEvent(*r) for r in rows]

    def restore(self, events: Sequence[StoredEvent]) -> int:
        if not events:
            return 0
        with self._lock:
            self._check()
            before = self._db.total_changes
            with self._write():
                self._db.executemany(f"INSERT OR IGNORE INTO {TABLE} ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
                                     [(e.id, e.user_id, e.body, e.state, e.attempts, e.error, e.enqueued_at,
                                       e.failed_at) for e in events])
            self._check_file()
            return self._db.total_changes - before

    def users(self) -> list[str]:
        with self._lock, self._read():
            self._check()
            return [r[0] for r in self._db.execute(f"SELECT DISTINCT user_id FROM {TABLE} ORDER BY user_id")]

    def forget_user(self, user_id: str) -> int:
        with self._lock:
            self._check()
            with self._write():
                cur = self._db.execute(f"DELETE FROM {TABLE} WHERE user_id=?", (user_id,))
            n = cur.rowcount
        self.checkpoint()  # secure_delete zeroed them in the file; the WAL lets go of them too
        return n

    def checkpoint(self) -> None:
        """Copy the WAL into the file and empty it (TRUNCATE): the WAL holds every event as it was
        queued, raw, until it is emptied; the file keeps only pending and dead events, since
        ``secure_delete`` zeroes the processed ones."""
        if self._ckpt is None or self._closed:
            return
        truncate_wal(self._ckpt, self.CHECKPOINT_WAIT)  # a busy one is tried again when the worker is next idle

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._ckpt is not None:
                    self._ckpt.close()
                if self.path is not None:
                    # Give back this queue's claims (a batch the worker was stopped in) and empty
                    # the WAL so no processed event lingers in it.
                    self._db.execute(f"UPDATE {TABLE} SET taken_by=NULL WHERE taken_by=?", (self.owner,))
                    # The WAL is the store's: any process reading the store holds the checkpoint
                    # up, and with the 30 s busy timeout a close waited all of it. At most
                    # CHECKPOINT_WAIT, as the idle checkpoint (the worker emptied the WAL when it
                    # went idle); the next checkpoint of any process on the file empties it otherwise.
                    truncate_wal(self._db, self.CHECKPOINT_WAIT)
            except sqlite3.Error:
                pass  # e.g. a full disk: the claims go back when another queue finds the slot free
            finally:
                self._db.close()
                self._release()


def _slot_base(path: Path) -> Path:
    return path.with_name(path.name + ".ingest.lock")


def _own_slot(path: Path) -> tuple[Path, io.FileIO, int]:
    """The first lock file of ``path``'s series no live process holds, locked, and its number."""
    base = _slot_base(path)
    for n in range(10_000):
        slot = numbered(base, n)
        f = try_lock(slot)
        if f is not None:
            return slot, f, n
    raise OSError(f"no free ingest lock file beside {path}")
