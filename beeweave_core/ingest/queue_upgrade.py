"""Moving the ingest queue of an older version into the queue table, and the lock files.

Before the queue was a table of the store (:mod:`.queue`), a store kept its acknowledged events
in files beside it: SQLite queue files (``<db>.queue``, ``<db>.queue.1``... each with a
``.lock`` file its process held a ``flock`` on) and memory-mapped intake journals
(``<db>.queue.intake``, ``.intake.1``..., each held by a ``flock`` on itself). When the queue
opens, the events of every such file no live process holds are inserted into the table (pending
and dead ones as they were) in one transaction, then the files are deleted; a file a live
process of the older version holds is left for a later look. A kill between the insert and the
deletion inserts them again at the next open: an id the table holds is kept, and an event
processed meanwhile is stored once all the same (its memories are skipped by id).

A journal record is ``[length u32][crc32 u32][seq u64][payload]``, 8-byte aligned, after a
64-byte header ``[magic][consumed offset u64][last consumed seq u64]``; the unconsumed records
start at the consumed offset, the first with any seq above the header's, each later one with
its predecessor's seq + 1, and a torn record (bad length or crc) ends them.
"""

from __future__ import annotations

import fcntl
import glob
import io
import json
import os
import sqlite3
import struct
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..ids import event_key

__all__ = ["import_old_queues", "old_queue_files", "numbered", "try_lock"]

_MAGIC = b"BWJRNL01"
_HEADER = struct.Struct("<8sQQ")
_TOP = 64
_RECORD = struct.Struct("<IIQ")  # length, crc32, seq
_OLD_COLUMNS = "id, user_id, body, state, attempts, error, enqueued_at, failed_at"


def numbered(base: Path, n: int) -> Path:
    return base if n == 0 else base.with_name(f"{base.name}.{n}")


def _series(base: Path) -> list[Path]:
    """The files of ``base``'s series that exist: ``base``, ``base.1``, ``base.2``..."""
    # The name escaped: a store named e.g. "m[1].db" would be a glob pattern that never matches
    # its own files, and their acknowledged events would never be moved in.
    more = sorted((p for p in base.parent.glob(glob.escape(base.name) + ".*") if p.name[len(base.name) + 1:].isdigit()),
                  key=lambda p: int(p.name[len(base.name) + 1:]))
    return [p for p in [base, *more] if p.exists()]


def try_lock(path: Path) -> io.FileIO | None:
    """``path`` open (created if need be), holding its exclusive flock, or None if another
    process holds it. The file is checked to still be the one at ``path`` after locking (its
    holder deletes it before letting go): a lock on a deleted file protects nothing. A file
    object, not a bare fd: one dropped without close() still releases the lock when collected."""
    while True:
        f = io.FileIO(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(f.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return f
        f.close()


def old_queue_files(old_base: Path) -> list[Path]:
    """The queue files and journals of an older version in ``old_base``'s series."""
    queues = [p for p in _series(old_base) if p.is_file()]
    return queues + _series(old_base.with_name(old_base.name + ".intake"))


def import_old_queues(old_base: Path, same_file: Path | None,
                      insert: Callable[[Sequence[tuple[Any, ...]]], None]) -> int:
    """Insert the events of the older version's files of ``old_base`` with ``insert`` (rows of
    id, user_id, body, state, attempts, error, enqueued_at, failed_at), then delete the files;
    ``same_file`` is the queue table's own file, skipped here (the table's owner moves an old
    table inside it). Return how many rows were read."""
    rows: list[tuple[Any, ...]] = []
    taken: list[tuple[list[Path], io.FileIO]] = []
    try:
        for path in _series(old_base):
            if path == same_file:
                continue
            held = try_lock(Path(str(path) + ".lock"))
            if held is None:
                continue  # a live process of the older version uses it
            taken.append(([path, *(Path(str(path) + s) for s in ("-wal", "-shm", ".lock"))], held))
            rows += _old_queue_rows(path)
        now = time.time()
        for path in _series(old_base.with_name(old_base.name + ".intake")):
            held = try_lock(path)
            if held is None:
                continue
            taken.append(([path], held))
            for raw in _journal_records(held.fileno()):
                body = json.loads(raw)
                rows.append((event_key(body["id"], body["user_id"]), body["user_id"], raw.decode("utf-8"),
                             "pending", 0, None, now, None))
        if rows:
            insert(rows)  # committed before any file goes
        for files, _ in taken:
            for f in files:
                f.unlink(missing_ok=True)  # before the flock goes: see try_lock
        return len(rows)
    finally:
        for _, held in taken:
            held.close()


def _old_queue_rows(path: Path) -> list[tuple[Any, ...]]:
    src = sqlite3.connect(str(path), isolation_level=None)
    try:
        if src.execute("SELECT 1 FROM sqlite_master WHERE name='events'").fetchone() is None:
            return []
        return src.execute(f"SELECT {_OLD_COLUMNS} FROM events ORDER BY seq").fetchall()
    finally:
        src.close()


def _journal_records(fd: int) -> list[bytes]:
    """The unconsumed records of an intake journal (see the module docstring)."""
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    if len(data) < _TOP or data[:8] != _MAGIC:
        return []
    _, pos, seq = _HEADER.unpack_from(data, 0)
    out: list[bytes] = []
    while pos + _RECORD.size <= len(data):
        length, crc, got = _RECORD.unpack_from(data, pos)
        end = pos + _RECORD.size + length
        if (got != seq + 1 if out else got <= seq) or end > len(data) or zlib.crc32(data[pos + _RECORD.size:end]) != crc:
            break
        out.append(data[pos + _RECORD.size:end])
        pos, seq = (end + 7) & ~7, got
    return out
