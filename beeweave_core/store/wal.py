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

__all__ = ["use_wal", "empty_wal"]

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


def empty_wal(db: sqlite3.Connection, what: str) -> None:
    """Copy a WAL into its database file and truncate it (after forgetting a user: deleted rows,
    zeroed by ``secure_delete`` in the file, must not stay in the WAL); a warning if it cannot."""
    try:
        busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.OperationalError as exc:
        busy, detail = 1, str(exc)
    else:
        detail = "another connection is reading"
    if busy:
        logging.getLogger(__name__).warning(
            "BeeWeave: could not empty the WAL of %s after forgetting a user (%s); the deleted rows stay "
            "in it until the next checkpoint", what, detail)
