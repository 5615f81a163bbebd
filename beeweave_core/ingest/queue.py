"""The durable event queue: pending events until processed, and the dead letters.

``EventQueue`` is the small protocol the pipeline needs; :class:`SQLiteEventQueue` is
the implementation for a file beside the store (``<db>.queue``) or in memory. It has its
own connection, so queue work never waits behind the store's writes. ``ingest()`` does
not write here itself: it appends to the intake (:mod:`.intake`) and the worker moves
events in, many per transaction (with ``fsync=True``, or a custom queue, callers write
here directly).

Why SQLite in WAL mode with ``synchronous=NORMAL``: a committed write has reached the
operating system, so it survives the process being killed (not a power cut: ``fsync``).
The writing connection never checkpoints (``wal_autocheckpoint=0``): the worker
checkpoints from a second connection, outside the queue's lock, whenever it is idle, and
empties the WAL (TRUNCATE). ``secure_delete`` zeroes processed events in the file, so no
processed event lingers in the file or its WAL once the worker is idle. While a backlog
drains, ``done`` checkpoints too once the WAL passes ``WAL_LIMIT``, so it stays bounded.

Several processes on one store: a queue file belongs to one process at a time (an exclusive
``flock`` on ``<file>.lock``, held while it is open), so each process's worker processes only
the events its own callers acknowledged and its counts are exact. A process takes the first
free file of ``<queue>``, ``<queue>.1``, ``<queue>.2``...; a file whose owner died is adopted
by a live process: its pending and dead events are copied in (an id already held is skipped)
and the file is deleted. A process looks for such files when it opens the queue, and then
every ``ADOPT_INTERVAL`` seconds while it takes or counts events (an idle worker polls that
often), so the events of a sibling killed mid-run are stored by the survivors, and their
``flush()`` waits for them, without any process reopening the store.

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
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import StoreUnavailableError
from ..store.wal import use_wal
from .intake import _numbered, _series_others, _try_lock

__all__ = ["QueuedEvent", "DeadRow", "EventQueue", "SQLiteEventQueue"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    enqueued_at REAL NOT NULL,
    failed_at REAL
);
CREATE INDEX IF NOT EXISTS events_state ON events (state, seq);
"""
_SCHEMA_VERSION = 1


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


@runtime_checkable
class EventQueue(Protocol):
    """What the ingestion pipeline needs of a queue (a PostgreSQL table can implement it too).

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


class SQLiteEventQueue:
    """An :class:`EventQueue` in a SQLite file (``path``) or in memory (``path=None``)."""

    # The WAL size at which ``done`` checkpoints while a backlog drains.
    WAL_LIMIT = 8 << 20
    ADOPT_INTERVAL = 5.0  # seconds between looks for the queue files of processes that died

    def __init__(self, path: str | Path | None = None, *, fsync: bool = False, timeout: float = 30.0) -> None:
        self.base = None if path is None else Path(path)
        self.path = self.base
        self.durable = self.path is not None
        self._lock = threading.Lock()
        self._closed = False
        self._owner: io.FileIO | None = None
        self._adopted_at = time.monotonic()
        if self.base is not None:
            try:
                self.path, self._owner = _own_file(self.base)
            except OSError as exc:
                raise StoreUnavailableError(f"cannot open the ingest queue at {self.base}: {exc}") from exc
        try:
            self._db = self._connect(timeout)
            self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            self._db.execute("PRAGMA secure_delete=ON")  # processed events leave no trace in the file
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise StoreUnavailableError(f"the queue at {self.path} has schema {version}: upgrade beeweave")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
            self._ckpt = None
            if self.path is not None:
                self._db.execute("PRAGMA wal_autocheckpoint=0")  # never checkpoint on a caller's put
                self._ckpt = self._connect(timeout)
                # The idle checkpoint waits this long (ms) for a caller's write, then tries again later.
                self._ckpt.execute("PRAGMA busy_timeout=1000")
            if self.base is not None:
                self._adopt_orphans()
            self._pending = self._db.execute("SELECT COUNT(*) FROM events WHERE state='pending'").fetchone()[0]
        except sqlite3.Error as exc:
            if hasattr(self, "_db"):
                self._db.close()
            self._release()
            raise StoreUnavailableError(f"cannot open the ingest queue at {self.path}: {exc}") from exc
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._owner is not None:
            self._owner.close()  # releases the flock
            self._owner = None

    @property
    def poll_interval(self) -> float | None:
        """How often an idle worker takes again: a queue file on disk may have siblings whose
        process dies, and their events are adopted then (``adopt``)."""
        return None if self.base is None else self.ADOPT_INTERVAL

    def adopt(self) -> int:
        """Adopt the queue files of sibling processes that died (at most once every
        ``ADOPT_INTERVAL`` seconds); return how many pending events came in."""
        if self.base is None or time.monotonic() - self._adopted_at < self.ADOPT_INTERVAL:
            return 0
        with self._lock:
            self._check()
            self._adopted_at = time.monotonic()
            try:
                self._adopt_orphans()
                pending = self._db.execute("SELECT COUNT(*) FROM events WHERE state='pending'").fetchone()[0]
            except (sqlite3.Error, OSError, StoreUnavailableError):
                # The orphan stays where it is; this or another process adopts it later.
                logger.warning("BeeWeave: could not adopt the ingest queues beside %s yet", self.path, exc_info=True)
                return 0
            came, self._pending = pending - self._pending, pending
            return max(came, 0)

    def _adopt_orphans(self) -> None:
        """Copy in the events of the series' queue files no live process holds, then delete them."""
        assert self.base is not None and self.path is not None
        for other in _series_others(self.base, self.path):
            fd = _try_lock(Path(str(other) + ".lock"))
            if fd is None:
                continue  # a live process's queue
            try:
                src = sqlite3.connect(str(other), isolation_level=None)
                try:
                    has = src.execute("SELECT 1 FROM sqlite_master WHERE name='events'").fetchone()
                    rows = src.execute("SELECT id, user_id, body, state, attempts, error, enqueued_at, failed_at "
                                       "FROM events ORDER BY seq").fetchall() if has else []
                finally:
                    src.close()
                with self._write():
                    self._db.executemany(
                        "INSERT OR IGNORE INTO events (id, user_id, body, state, attempts, error, enqueued_at, "
                        "failed_at) VALUES (?,?,?,?,?,?,?,?)", rows)
                for side in ("", "-wal", "-shm", ".lock"):
                    Path(str(other) + side).unlink(missing_ok=True)
            finally:
                fd.close()

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
                raise StoreUnavailableError(f"the ingest queue at {self.path or ':memory:'} is unavailable: "
                                            f"{exc}") from exc
            raise

    @contextmanager
    def _read(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"the ingest queue at {self.path or ':memory:'} is unavailable: "
                                        f"{exc}") from exc

    def _connect(self, timeout: float) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:" if self.path is None else str(self.path), timeout=timeout,
                             check_same_thread=False, isolation_level=None)
        if self.path is not None:
            use_wal(db, timeout)
        return db

    def _check(self) -> None:
        if self._closed:
            from ..errors import StoreClosedError

            raise StoreClosedError("the ingest queue is closed")

    def put(self, event_id: str, user_id: str, body: str) -> bool:
        with self._lock:
            self._check()
            with self._write():
                cur = self._db.execute("INSERT OR IGNORE INTO events (id, user_id, body, enqueued_at) "
                                       "VALUES (?,?,?,?)", (event_id, user_id, body, time.time()))
            added = cur.rowcount == 1
            self._pending += added
            return added

    def put_many(self, rows: Sequence[tuple[str, str, str]]) -> int:
        if not rows:
            return 0
        now = time.time()
        with self._lock:
            self._check()
            before = self._db.total_changes
            with self._write():
                self._db.executemany("INSERT OR IGNORE INTO events (id, user_id, body, enqueued_at) VALUES (?,?,?,?)",
                                     [(eid, uid, body, now) for eid, uid, body in rows])
            added = self._db.total_changes - before
            self._pending += added
            return added

    def pending_count(self) -> int:
        self.adopt()
        return self._pending

    def take(self, n: int) -> list[QueuedEvent]:
        self.adopt()
        with self._lock, self._read():
            self._check()
            rows = self._db.execute("SELECT seq, id, body, attempts FROM events WHERE state='pending' "
                                    "ORDER BY seq LIMIT ?", (n,)).fetchall()
        return [QueuedEvent(seq, eid, json.loads(body), attempts) for seq, eid, body, attempts in rows]

    def done(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._check()
            with self._write():
                gone = self._db.execute(f"SELECT COUNT(*) FROM events WHERE state='pending' AND id IN ({marks})",
                                        list(ids)).fetchone()[0]
                self._db.execute(f"DELETE FROM events WHERE id IN ({marks})", list(ids))
            self._pending -= gone
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
                cur = self._db.execute(
                    "UPDATE events SET state='dead', error=?, attempts=attempts+1, failed_at=?, body=coalesce(?, body) "
                    "WHERE id=? AND state='pending'", (error, time.time(), body, event_id))
            self._pending -= cur.rowcount

    def postpone(self, ids: Sequence[str], error: str) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._check()
            with self._write():
                self._db.execute(f"UPDATE events SET attempts=attempts+1, error=? WHERE state='pending' "
                                 f"AND id IN ({marks})", [error, *ids])

    def dead(self, limit: int | None = None) -> list[DeadRow]:
        with self._lock, self._read():
            self._check()
            rows = self._db.execute("SELECT id, user_id, body, error, attempts, failed_at FROM events "
                                    "WHERE state='dead' ORDER BY seq LIMIT ?", (-1 if limit is None else limit,)).fetchall()
        return [DeadRow(eid, uid, json.loads(body), error or "", attempts, failed_at or 0.0)
                for eid, uid, body, error, attempts, failed_at in rows]

    def revive(self, ids: Sequence[str] | None = None) -> int:
        with self._lock:
            self._check()
            with self._write():
                if ids is None:
                    cur = self._db.execute("UPDATE events SET state='pending' WHERE state='dead'")
                else:
                    marks = ",".join("?" * len(ids))
                    cur = self._db.execute(f"UPDATE events SET state='pending' WHERE state='dead' AND id IN ({marks})",
                                           list(ids))
            self._pending += cur.rowcount
            return cur.rowcount

    def discard(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._check()
            with self._write():
                cur = self._db.execute(f"DELETE FROM events WHERE state='dead' AND id IN ({marks})", list(ids))
            return cur.rowcount

    def drop_oldest(self, exclude: Collection[str], reason: str) -> str | None:
        with self._lock:
            self._check()
            with self._write():
                rows = self._db.execute("SELECT id FROM events WHERE state='pending' ORDER BY seq LIMIT ?",
                                        (len(exclude) + 1,)).fetchall()
                victim = next((r[0] for r in rows if r[0] not in exclude), None)
                if victim is not None:
                    self._db.execute("UPDATE events SET state='dead', error=?, failed_at=? WHERE id=?",
                                     (reason, time.time(), victim))
            if victim is not None:
                self._pending -= 1
            return victim

    def checkpoint(self) -> None:
        """Copy the WAL into the file and empty it (TRUNCATE): the WAL holds every event as it was
        queued, raw, until it is emptied; the file keeps only pending and dead events, since
        ``secure_delete`` zeroes the processed ones."""
        if self._ckpt is None or self._closed:
            return
        try:
            self._ckpt.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # a busy checkpoint is retried when the worker is next idle

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._ckpt is not None:
                    self._ckpt.close()
                if self.path is not None:
                    # Empty the WAL so no processed event lingers in it.
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    empty = self._db.execute("SELECT count(*) FROM events").fetchone()[0] == 0
            except sqlite3.Error:
                empty = False  # e.g. a full disk: the WAL is emptied by the next open
            finally:
                self._db.close()
                if self.path is not None and self.path != self.base and empty:
                    # A second process's file with nothing left in it: gone with the process.
                    for side in ("", "-wal", "-shm"):
                        Path(str(self.path) + side).unlink(missing_ok=True)
                    Path(str(self.path) + ".lock").unlink(missing_ok=True)
                self._release()


def _own_file(base: Path) -> tuple[Path, io.FileIO]:
    """The first queue file of ``base``'s series no live process holds, and the fd holding it."""
    for n in range(10_000):
        path = _numbered(base, n)
        fd = _try_lock(Path(str(path) + ".lock"))
        if fd is not None:
            return path, fd
    raise OSError(f"no free ingest queue file beside {base}")
