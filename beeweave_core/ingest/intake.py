"""The intake: where ``ingest()`` puts an event, without ever releasing the GIL.

Why not insert into the SQLite queue directly: every SQLite call releases the GIL, and
getting it back while the worker runs Python code can take as long as the interpreter's
switch interval, or an OS time slice if the worker is descheduled on a busy machine.
Measured under a busy worker, a direct insert had a p99 of 6 to 25 ms; a write into a
memory-mapped file stays near 20 µs. So ``ingest()`` appends to an :class:`MmapJournal`
(a file mapped ``MAP_SHARED``: once the bytes are copied they are in the page cache and
survive the process being killed) and the worker moves the records into the SQLite queue
in one transaction, then marks them consumed. A crash between those two steps moves them
again; the queue ignores an event id it already holds, and a processed event's memories
are skipped by id, so nothing is processed twice.

A record is ``[length u32][crc32 u32][seq u64][payload]``, 8-byte aligned; the sequence
number is written last. The header holds where the unconsumed records start and the last
consumed seq; sequence numbers only grow over the file's life, so a record left from an
earlier pass over the file has a seq at or below the header's and is never read, nor is a
record torn by a crash. Records after the first must follow their predecessor's seq. When
every record is consumed the journal starts again at the top; a journal that is full makes
the caller move the records itself (slower, still correct).

A commit must survive being killed after any of its writes, because records appended after
the drain sit right behind the committed ones: it first moves the header past the committed
records (the start, then the seq, each a write of 8 aligned bytes), then zeroes them, and only
then sends the header back to the top. A kill between the header's two stores leaves the new
start with the old seq, which is why the first record may have any seq above the header's.

Several processes on one store: a journal file belongs to one process at a time, held by an
exclusive ``flock`` for as long as it is open. A process takes the first free file of
``<queue>.intake``, ``<queue>.intake.1``, ``.2``... so two processes never write one
mapping. A file whose owner died is unlocked: a live process locks it too, hands its records
over first (``drain``) and deletes it once they are in the queue. It looks for such files when
it opens the intake, and then every ``ADOPT_INTERVAL`` seconds while its events are counted
(the worker counts before each move, and an idle worker polls), so a sibling killed mid-run
does not leave its acknowledged events waiting for some process to reopen the store.

Disk space: a write into the mapping cannot fail politely. On a block the file system has
not allocated (a hole in a sparse file, on a full disk) the kernel kills the process with
SIGBUS. So every block of the file is reserved before it is mapped, and an existing file is
reserved again on open; a journal that cannot be reserved is not opened at all, and the
caller gets :class:`StoreUnavailableError` (see ``_reserve_journal``).
"""

from __future__ import annotations

import errno
import fcntl
import io
import mmap
import os
import struct
import threading
import time
import zlib
from collections import deque
from pathlib import Path
from typing import Protocol, cast

from ..errors import StoreClosedError, StoreUnavailableError

__all__ = ["Intake", "MemoryIntake", "MmapJournal"]

_MAGIC = b"BWJRNL01"
_HEADER = struct.Struct("<8sQQ")  # magic, consumed offset, last consumed seq
_TOP = 64  # records start here
_RECORD = struct.Struct("<II")  # length, crc32 (the seq follows as its own u64)
_SEQ = struct.Struct("<Q")
_REC_HEAD = 16
# Errors of a reservation the disk cannot give: full, over a quota, over a file-size limit.
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
# posix_fallocate is not supported by this file system: the blocks are written instead.
_NO_FALLOCATE = {errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS}


class Intake(Protocol):
    """Fast, ordered hand-over from callers to the worker."""

    def append(self, payload: bytes) -> bool:
        """Store one record; False if there is no room (nothing was written)."""

    def drain(self) -> tuple[list[bytes], object]:
        """Every record not yet consumed (oldest first) and a mark for :meth:`commit`."""

    def commit(self, mark: object) -> None:
        """The records up to ``mark`` are safely elsewhere: forget them."""

    def count(self) -> int: ...

    def close(self) -> None: ...


class MemoryIntake:
    """An :class:`Intake` in memory, for stores that are in memory anyway."""

    def __init__(self) -> None:
        self._items: deque[bytes] = deque()

    def append(self, payload: bytes) -> bool:
        self._items.append(payload)  # atomic under the GIL, and it never releases it
        return True

    def drain(self) -> tuple[list[bytes], object]:
        items = list(self._items)
        return items, len(items)

    def commit(self, mark: object) -> None:
        for _ in range(int(mark)):  # type: ignore[call-overload]
            self._items.popleft()

    def count(self) -> int:
        return len(self._items)

    def close(self) -> None:
        pass


class MmapJournal:
    """An :class:`Intake` in a memory-mapped file (see the module docstring)."""

    ADOPT_INTERVAL = 5.0  # seconds between looks for the journals of sibling processes that died

    def __init__(self, path: str | Path, size: int = 16 << 20) -> None:
        self.base = Path(path)
        self._lock = threading.Lock()
        self._file: io.FileIO | None = None
        self._orphans: list[_Orphan] = []
        self._adopted_at = time.monotonic()
        want = max(size, 4 * _TOP)
        try:
            self.path, self._file = _lock_free_file(self.base)
            fd = self._file.fileno()
            fresh = _reserve_journal(self.path, fd, want)  # before mapping: see _reserve_journal
            self._cap = os.fstat(fd).st_size
            self._mm = mmap.mmap(fd, self._cap)
            self._orphans = _adopt_orphans(self.base, self.path)
        except OSError as exc:
            self._release()
            hint = ""
            if exc.errno in _NO_ROOM:
                hint = (f" (the journal reserves its whole size, {want} bytes here, when it is created; "
                        "IngestConfig.journal_bytes sets it)")
            raise StoreUnavailableError(f"cannot open the ingest journal at {self.base}: {exc}{hint}") from exc
        if fresh or self._mm[:8] != _MAGIC:
            self._mm[:8] = _MAGIC
            self._write_header(_TOP, 0)
        self._recover()

    def _release(self) -> None:
        for o in self._orphans:
            o.close()
        self._orphans = []
        if self._file is not None:
            self._file.close()  # releases the flock
            self._file = None

    def _write_header(self, consumed: int, seq: int) -> None:
        # The start first, then the seq (see the module docstring): never one store of both.
        self._mm[8:16] = _SEQ.pack(consumed)
        self._mm[16:24] = _SEQ.pack(seq)
        self._consumed, self._consumed_seq = consumed, seq

    def _recover(self) -> None:
        """Find the records a previous process appended but the worker never consumed."""
        spans, self._head, self._next_seq = _scan(self._mm, self._cap)
        _, self._consumed, self._consumed_seq = _HEADER.unpack_from(self._mm, 0)
        self._count = len(spans)
        if spans:  # after a kill between the header's two stores the header's seq is older
            self._consumed_seq = self._next_seq - len(spans) - 1

    def append(self, payload: bytes) -> bool:
        size = _aligned(_REC_HEAD + len(payload))
        with self._lock:
            if self._mm.closed:
                raise StoreClosedError("the ingest journal is closed")
            if self._head + size > self._cap and self._consumed == self._head:
                self._head = _TOP  # everything was consumed: start again at the top
                self._write_header(_TOP, self._consumed_seq)
            if self._head + size > self._cap:
                return False
            pos = self._head
            self._mm[pos + _REC_HEAD: pos + _REC_HEAD + len(payload)] = payload
            self._mm[pos: pos + 8] = _RECORD.pack(len(payload), zlib.crc32(payload))
            self._mm[pos + 8: pos + 16] = _SEQ.pack(self._next_seq)  # last: this makes the record exist
            self._head += size
            self._next_seq += 1
            self._count += 1
            return True

    def drain(self) -> tuple[list[bytes], object]:
        if self._orphans:  # a dead process's records first: they are older than ours
            orphan = self._orphans[0]
            return list(orphan.records), orphan
        with self._lock:
            start, end, first = self._consumed, self._head, self._consumed_seq + 1
        # Records below the head are complete and stay put until committed: copy without the
        # lock, so a caller appending meanwhile never waits (waiting would release the GIL).
        raw = self._mm[start:end]
        out, pos = [], 0
        while pos < len(raw):
            (length,) = struct.unpack_from("<I", raw, pos)
            out.append(raw[pos + _REC_HEAD: pos + _REC_HEAD + length])
            pos = _aligned(pos + _REC_HEAD + length)
        return out, (start, end, first + len(out) - 1, len(out))

    def commit(self, mark: object) -> None:
        if isinstance(mark, _Orphan):
            if self._orphans and self._orphans[0] is mark:
                self._orphans.pop(0)
                mark.delete()
            return
        start, end, last_seq, n = cast(tuple[int, int, int, int], mark)
        if n == 0 or self._consumed != start:
            return  # nothing, or committed already
        # In this order, so that a kill after any write loses nothing (module docstring). The
        # zeroing holds the lock (an append's restart at the top must not run meanwhile), which
        # costs callers nothing: the copy holds the GIL anyway.
        with self._lock:
            self._write_header(end, last_seq)
            self._mm[start:end] = bytes(end - start)  # consumed events leave no trace
            self._count -= n
            if end == self._head:
                self._head = _TOP
                self._write_header(_TOP, last_seq)

    def count(self) -> int:
        self.adopt()
        return self._count + sum(len(o.records) for o in self._orphans)

    def adopt(self) -> int:
        """Take on the journal files of sibling processes that died since the last look (at
        most once every ``ADOPT_INTERVAL`` seconds); return how many records came with them."""
        if time.monotonic() - self._adopted_at < self.ADOPT_INTERVAL:
            return 0
        with self._lock:
            self._adopted_at = time.monotonic()
            if self._mm.closed:
                return 0
            held = {o.path for o in self._orphans}
            try:
                found = [o for o in _adopt_orphans(self.base, self.path) if o.path not in held]
            except OSError:
                return 0  # tried again at the next look
            self._orphans.extend(found)
        return sum(len(o.records) for o in found)

    def close(self) -> None:
        with self._lock:
            if not self._mm.closed:
                self._mm.close()
            if self.path != self.base and self._count == 0 and self._file is not None:
                self.path.unlink(missing_ok=True)  # a second process's empty journal goes with it
            self._release()


def _reserve_journal(path: Path, fd: int, size: int) -> bool:
    """Give every block of the journal file ``fd`` its disk space before the file is mapped;
    True if the file is new (it gets a fresh header), False if its records are kept.

    A write into a ``MAP_SHARED`` mapping over a block the file system cannot allocate (a hole
    of a sparse file on a full disk) is no error a caller can catch: the kernel sends SIGBUS
    and the whole process dies. So the file is mapped only once all of it is reserved, and the
    reservation comes before the size (``posix_fallocate`` sizes the file as it reserves). A
    file that exists is reserved again, a no-op when it already is: it may be sparse, left by
    an older version whose reservation failed after sizing the file, or by a crash between the
    two. An existing file without unconsumed records whose size is not ``size`` is made again
    at ``size`` (so a changed ``IngestConfig.journal_bytes`` applies to a store that has a
    journal already).

    When the reservation fails (a full disk, a file-size limit) the error is raised; a file
    with no unconsumed records is removed first (it frees what a partial reservation took, and
    the next open starts afresh), one with records is left as it is for a later open to
    recover once there is room: acknowledged events are never given up."""
    current = os.fstat(fd).st_size
    fresh = current < _TOP or (current != size and not _read_records(fd))
    if fresh and current:
        os.ftruncate(fd, 0)  # a header-less stub, or an empty journal of another size
    try:
        _reserve(fd, size if fresh else current)
        os.fsync(fd)  # the allocation itself is durable before any record is acknowledged
    except OSError:
        if fresh or not _read_records(fd):
            path.unlink(missing_ok=True)  # we hold its lock: nobody else uses it (see _try_lock)
        raise
    return fresh


def _reserve(fd: int, size: int) -> None:
    """Allocate the disk blocks of bytes ``[0, size)`` of ``fd``, extending the file to ``size``."""
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno not in _NO_FALLOCATE:
                raise
    # No fallocate here: write every block, its own bytes back (nothing maps the file yet) and
    # zeros past the end.
    step = 1 << 20
    for start in range(0, size, step):
        n = min(step, size - start)
        data = os.pread(fd, n, start)
        view = memoryview(data + bytes(n - len(data)))
        while view:
            done = os.pwrite(fd, view, start)
            view, start = view[done:], start + done


def _numbered(base: Path, n: int) -> Path:
    return base if n == 0 else base.with_name(f"{base.name}.{n}")


def _series_others(base: Path, mine: Path) -> list[Path]:
    """The files of ``base``'s series (``base``, ``base.1``, ``base.2``...) that exist, but
    ``mine``: where a process that died may have left its intake journal or queue."""
    numbered = sorted((p for p in base.parent.glob(base.name + ".*") if p.name[len(base.name) + 1:].isdigit()),
                      key=lambda p: p.name)
    return [p for p in [base, *numbered] if p != mine and p.exists()]


def _try_lock(path: Path) -> io.FileIO | None:
    """``path`` open, holding its exclusive flock, or None if another process holds it. The
    file is checked to still be the one at ``path`` after locking (it may have been deleted
    by a process that adopted it meanwhile): a lock on a deleted file protects nothing. A file
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


def _lock_free_file(base: Path) -> tuple[Path, io.FileIO]:
    """The first journal file of ``base``'s series no live process holds, locked."""
    for n in range(10_000):
        path = _numbered(base, n)
        fd = _try_lock(path)
        if fd is not None:
            return path, fd
    raise OSError(f"no free ingest journal beside {base}")


class _Orphan:
    """A journal file another process left (it died): locked by us, its records read, deleted
    once they are in the queue."""

    def __init__(self, path: Path, file: io.FileIO, records: list[bytes]) -> None:
        self.path, self.file, self.records = path, file, records

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self.close()

    def close(self) -> None:
        self.file.close()


def _adopt_orphans(base: Path, mine: Path) -> list[_Orphan]:
    """Lock every journal file of the series (the first, and the numbered ones) beside ours
    that no live process holds and read its unconsumed records (a file with none is deleted
    at once)."""
    out: list[_Orphan] = []
    for path in _series_others(base, mine):
        fd = _try_lock(path)
        if fd is None:
            continue  # a live process's
        records = _read_records(fd.fileno())
        orphan = _Orphan(path, fd, records)
        if records:
            out.append(orphan)
        else:
            orphan.delete()
    return out


def _read_records(fd: int) -> list[bytes]:
    """The unconsumed records of a journal file (see MmapJournal._recover)."""
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    if len(data) < _TOP or data[:8] != _MAGIC:
        return []
    spans, _, _ = _scan(data, len(data))
    return [data[a:b] for a, b in spans]


def _scan(data: mmap.mmap | bytes, size: int) -> tuple[list[tuple[int, int]], int, int]:
    """The payload spans of the unconsumed records, where the next record goes, and its seq.

    The first record after the header's start may have any seq above the header's (a commit
    killed between the header's two stores leaves an older seq there); each later record's
    must follow its predecessor's."""
    _, pos, seq = _HEADER.unpack_from(data, 0)
    spans: list[tuple[int, int]] = []
    expected = seq + 1
    while pos + _REC_HEAD <= size:
        length, crc = _RECORD.unpack_from(data, pos)
        (got,) = _SEQ.unpack_from(data, pos + 8)
        end = pos + _REC_HEAD + length
        if (got != expected if spans else got <= seq) or end > size or zlib.crc32(data[pos + _REC_HEAD: end]) != crc:
            break
        spans.append((pos + _REC_HEAD, end))
        pos, expected = _aligned(end), got + 1
    return spans, pos, expected


def _aligned(n: int) -> int:
    return (n + 7) & ~7
