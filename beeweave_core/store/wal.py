"""Switching a SQLite connection to WAL, safely when several processes open a new file at once.

``PRAGMA journal_mode=WAL`` needs an exclusive lock on the file. When two connections that
both hold a shared lock want it, SQLite refuses one of them at once with "database is locked"
instead of waiting: waiting would deadlock, so its busy handler is not called and the
connection's ``timeout`` does not help. Measured here: three processes opening one new file
at the same moment, one of them failed in 36 of 200 tries. The refused one only has to try
again once the other has switched the file.
"""

from __future__ import annotations

import logging
import sqlite3
import time

__all__ = ["use_wal", "empty_wal", "truncate_wal", "EMPTY_WAIT"]

_FIRST_WAIT = 0.001  # seconds; doubled after each refusal, up to _MAX_WAIT
_MAX_WAIT = 0.1


def use_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Put ``db`` in WAL mode, trying again for up to ``timeout`` seconds while the file is locked."""
    deadline = time.monotonic() + timeout
    wait = _FIRST_WAIT
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(2 * wait, _MAX_WAIT)


def truncate_wal(db: sqlite3.Connection, wait: float) -> bool:
    """Copy the WAL into the file and truncate it, trying again for up to ``wait`` seconds while
    a write or a read is in the way; True once it is empty.

    Not through SQLite's busy handler (it is off while this runs, then set back): a TRUNCATE
    checkpoint holds the file's write lock while it waits for readers, so with the connection's
    busy timeout any process reading the file would stall every writer of the file (an ``add``,
    an ``ingest``, other processes') for as long as it waited. Without one, each try takes the
    write lock only to copy what it can."""
    before = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout=0")
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                if not db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
                    return True
            except sqlite3.Error:
                pass  # busy (or e.g. a full disk): as a busy checkpoint
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
    finally:
        db.execute(f"PRAGMA busy_timeout={int(before)}")


# Seconds a forget keeps trying to empty the WAL while others read the file (each try brief).
EMPTY_WAIT = 2.0


def empty_wal(db: sqlite3.Connection, what: str, wait: float = EMPTY_WAIT) -> None:
    """Copy a WAL into its database file and truncate it (after forgetting a user: deleted rows,
    zeroed by ``secure_delete`` in the file, must not stay in the WAL); a warning if a reader
    kept it from emptying for ``wait`` seconds (the next checkpoint empties it)."""
    if not truncate_wal(db, wait):
        logging.getLogger(__name__).warning(
            "BeeWeave: could not empty the WAL of %s after forgetting a user (another connection is "
            "reading); the deleted rows stay in it until the next checkpoint", what)
