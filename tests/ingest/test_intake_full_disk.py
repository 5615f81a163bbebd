"""The intake journal on a disk that cannot give it its space, and what the worker logs while
the store is down.

A write into a memory-mapped file over a block the disk cannot allocate is not an error: the
kernel kills the process with SIGBUS. So a journal file is mapped only once all of it is
reserved. A failed reservation (a full disk, a file-size limit) makes ``ingest`` raise
StoreUnavailableError, every time, never leaves a sparse file a later open would map, and
never gives up records an existing journal holds.

The tests that could die of SIGBUS (on code without the reservation) run in a child process:
a real small tmpfs, mounted when the test may (root), skipped otherwise.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave
from beeweave_core.errors import StoreUnavailableError
from beeweave_core.ingest import intake as intake_module
from beeweave_core.ingest.intake import MmapJournal
from tests.reliability.rel_support import small_tmpfs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
_REAL_FALLOCATE = getattr(os, "posix_fallocate", None)


def _failing_fallocate(code: int) -> Callable[..., None]:
    def fallocate(fd: int, offset: int, length: int) -> None:
        raise OSError(code, os.strerror(code))
    return fallocate


@pytest.fixture
def mapped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the journal files mapped while the test runs."""
    sizes: list[int] = []
    real = mmap.mmap

    def spy(fd: int, length: int, *args: Any, **kwargs: Any) -> mmap.mmap:
        sizes.append(length)
        return real(fd, length, *args, **kwargs)

    monkeypatch.setattr(intake_module.mmap, "mmap", spy)
    return sizes


def _reservable(directory: Path) -> bool:
    """Whether st_blocks shows a reservation on this file system (it does on ext4, xfs, tmpfs)."""
    probe = directory / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if _REAL_FALLOCATE is None:
            return False
        _REAL_FALLOCATE(fd, 0, 1 << 20)
        return os.fstat(fd).st_blocks * 512 >= 1 << 20
    except OSError:
        return False
    finally:
        os.close(fd)
        probe.unlink()


def _sparse_copy(path: Path) -> bytes:
    """Make the journal at ``path`` sparse past its first page, as an older version whose
    reservation failed (or a crash between sizing and reserving) left it; its bytes."""
    data = path.read_bytes()
    path.unlink()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, len(data))  # a hole: no block behind it
        os.pwrite(fd, data[:4096], 0)  # the header and the records
    finally:
        os.close(fd)
    assert data[4096:] == bytes(len(data) - 4096)
    return data


# -- without a mount: the reservation fails because posix_fallocate is made to fail -------------------
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG])
def test_a_failed_reservation_leaves_nothing_a_later_open_would_map(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: list[int], code: int) -> None:
    monkeypatch.setattr(os, "posix_fallocate", _failing_fallocate(code), raising=False)
    path = tmp_path / "q.intake"
    for _ in range(3):  # every open fails: none finds a file it takes as reserved
        with pytest.raises(StoreUnavailableError) as info:
            MmapJournal(path, size=1 << 20)
        assert mapped == [], "a journal whose space is not reserved was mapped"
        assert not path.exists(), "a journal whose reservation failed was left behind"
        assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == code
        assert "journal_bytes" in str(info.value)  # what to lower
    monkeypatch.undo()  # room again: the journal opens and works
    j = MmapJournal(path, size=1 << 20)
    try:
        assert j.append(b"event") and j.drain()[0] == [b"event"]
    finally:
        j.close()


def test_a_sparse_journal_left_by_an_older_version_is_reserved_before_it_is_mapped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: list[int]) -> None:
    path = tmp_path / "q.intake"
    j = MmapJournal(path, size=256 << 10)
    for r in (b"one", b"two", b"three"):
        assert j.append(r)
    j.close()  # the records are acknowledged events
    data = _sparse_copy(path)
    mapped.clear()

    monkeypatch.setattr(os, "posix_fallocate", _failing_fallocate(errno.ENOSPC), raising=False)
    with pytest.raises(StoreUnavailableError):
        MmapJournal(path, size=256 << 10)
    assert mapped == [], "a sparse journal was mapped on a full disk"
    assert path.read_bytes() == data, "the acknowledged records of a journal that could not be reserved were touched"

    monkeypatch.undo()  # room again: the same records come back, in a journal reserved in full
    again = MmapJournal(path, size=256 << 10)
    try:
        assert again.drain()[0] == [b"one", b"two", b"three"]
        if _reservable(tmp_path):
            assert os.stat(path).st_blocks * 512 >= os.stat(path).st_size, "the journal was mapped sparse"
    finally:
        again.close()


def test_a_header_less_stub_from_a_crash_between_sizing_and_reserving_is_not_mapped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: list[int]) -> None:
    path = tmp_path / "q.intake"
    with open(path, "wb") as f:
        f.truncate(1 << 20)  # sized, never reserved, no header
    monkeypatch.setattr(os, "posix_fallocate", _failing_fallocate(errno.ENOSPC), raising=False)
    with pytest.raises(StoreUnavailableError):
        MmapJournal(path, size=1 << 20)
    assert mapped == [] and not path.exists()  # it held nothing: removed, its partial space freed


@pytest.mark.parametrize("how", ["unsupported", "absent"])
def test_without_fallocate_the_blocks_are_written_and_records_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    path = tmp_path / "q.intake"
    j = MmapJournal(path, size=128 << 10)
    assert j.append(b"kept")
    j.close()
    _sparse_copy(path)
    if how == "absent":  # no posix_fallocate on this platform (macOS)
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    else:  # a file system without fallocate
        monkeypatch.setattr(os, "posix_fallocate", _failing_fallocate(errno.EOPNOTSUPP), raising=False)
    again = MmapJournal(path, size=128 << 10)
    try:
        assert again.drain()[0] == [b"kept"] and again.append(b"new")
        assert os.stat(path).st_size == 128 << 10
        if _reservable(tmp_path):
            assert os.stat(path).st_blocks * 512 >= 128 << 10
    finally:
        again.close()
    fresh = MmapJournal(tmp_path / "other.intake", size=64 << 10)  # a new one is written in full too
    try:
        assert os.stat(tmp_path / "other.intake").st_size == 64 << 10 and fresh.append(b"x")
    finally:
        fresh.close()


def test_an_empty_journal_takes_a_new_size_and_one_with_records_keeps_its_own(tmp_path: Path) -> None:
    path = tmp_path / "q.intake"
    MmapJournal(path, size=256 << 10).close()
    j = MmapJournal(path, size=64 << 10)  # journal_bytes lowered: nothing waits, so it is made again
    assert path.stat().st_size == 64 << 10
    assert j.append(b"waiting")
    j.close()
    j = MmapJournal(path, size=256 << 10)  # an event waits: the file keeps its size and its record
    try:
        assert path.stat().st_size == 64 << 10 and j.drain()[0] == [b"waiting"]
    finally:
        j.close()


def test_every_ingest_raises_while_the_journal_cannot_be_reserved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_memory: Callable[..., BeeWeave]) -> None:
    m = make_memory(tmp_path / "m.db")
    monkeypatch.setattr(os, "posix_fallocate", _failing_fallocate(errno.ENOSPC), raising=False)
    for i in range(4):  # not only the first: none may land in an unreserved mapping
        with pytest.raises(StoreUnavailableError, match="ingest journal"):
            m.ingest({"user_id": "u", "id": f"refused{i}", "query": "where is the invoice for March?",
                      "response": "In the billing folder."})
    assert not (tmp_path / "m.db.queue.intake").exists()
    added = m.add("the disk is full but a direct add does not use the journal", user_id="u")
    monkeypatch.undo()  # room again
    ev = m.ingest({"user_id": "u", "id": "accepted", "query": "where is the invoice for April?",
                   "response": "In the billing folder, under April."})
    assert m.flush(30)
    assert m.backend.contains([f"{ev}@u:0", added]) == {f"{ev}@u:0", added}
    assert m.dead_letters() == [] and m.pending_events() == 0


# -- a real full disk: a small tmpfs, in a child process (SIGBUS would kill pytest) ------------------
_CHILD = textwrap.dedent("""
    import errno, os, sys, time
    from pathlib import Path
    from beeweave_core import BeeWeave, HashingEmbedder
    from beeweave_core.errors import StoreUnavailableError
    from beeweave_core.ingest import IngestConfig

    disk, n = Path(sys.argv[1]), int(sys.argv[2])
    text = "the quarterly report lists every invoice of the month "

    def event(i, size):
        return {"user_id": "u", "id": f"ev{i}", "query": f"question {i}: " + text * size, "response": text * size}

    # 1. The default journal (16 MiB) cannot be reserved on a 12 MiB disk: every ingest is
    #    refused, none is acknowledged into a journal without space (the trial died of SIGBUS).
    started = time.monotonic()
    m = BeeWeave(disk / "m.db", embedder=HashingEmbedder(32))
    refused = 0
    for i in range(n):
        try:
            m.ingest(event(i, 40))
        except StoreUnavailableError as exc:
            assert exc.__cause__ is not None
            refused += 1
        else:
            raise SystemExit(f"ingest {i} was acknowledged with no journal space reserved")
    m.add("a direct add still works: " + text, user_id="u", chunk_id="direct")
    m.close()
    print("REFUSED", refused, f"{time.monotonic() - started:.1f} s", flush=True)

    # 2. A journal that fits (journal_bytes lowered): acknowledged until the disk is full, then
    #    refused with StoreUnavailableError; what was acknowledged is stored once there is room.
    started = time.monotonic()
    m = BeeWeave(disk / "m2.db", embedder=HashingEmbedder(32), ingest=IngestConfig(journal_bytes=256 << 10))
    acked, refused = [m.ingest(event(n, 20))], 0  # the journal is made while there is room
    assert m.flush(30)
    filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(filler, bytes(64 << 10))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(filler)
    for i in range(n + 1, 4 * n):
        try:
            acked.append(m.ingest(event(i, 20)))
        except StoreUnavailableError as exc:
            assert exc.__cause__ is not None
            refused += 1
            if refused >= 10:
                break
    assert acked and refused >= 10, (len(acked), refused)
    os.unlink(disk / "filler")
    assert m.flush(120), m.pending_events()
    stored = m.backend.contains([f"{e}@u:0" for e in acked])
    assert stored == {f"{e}@u:0" for e in acked}, len(stored)
    assert m.dead_letters() == []
    m.close()
    print("ACKED", len(acked), "REFUSED", refused, f"{time.monotonic() - started:.1f} s", flush=True)
""")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "12m") as disk:
        yield disk


def test_a_small_full_disk_refuses_every_ingest_and_never_dies(small_disk: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _CHILD, str(small_disk), "3000"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr[-3000:]
    assert done.returncode != -7, f"the process died of SIGBUS writing into an unreserved journal:\n{out}"
    assert done.returncode == 0, out
    assert "REFUSED 3000" in done.stdout and "ACKED" in done.stdout, out
    print(done.stdout, f"{time.monotonic() - started:.1f} s")


# -- what the worker logs while the store is down ------------------------------------------------
def _unavailable() -> StoreUnavailableError:
    try:
        raise OSError(errno.ENOSPC, "No space left on device")
    except OSError as cause:  # chained, as the stores raise it: a two-exception traceback
        try:
            raise StoreUnavailableError("the ingest queue is unavailable: database or disk is full") from cause
        except StoreUnavailableError as exc:
            return exc


def _records(caplog: pytest.LogCaptureFixture, words: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if words in r.getMessage()]


def test_a_queue_that_keeps_failing_logs_one_traceback_and_its_recovery(
        tmp_path: Path, make_memory: Callable[..., BeeWeave], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="beeweave_core.ingest")
    m = make_memory(tmp_path / "m.db", autostart=False)
    ev = m.ingest({"user_id": "u", "query": "where is the invoice for March?", "response": "In billing."})
    runtime = m._ingestion.runtime  # type: ignore[attr-defined]
    q = runtime.queue()
    real_take, calls = q.take, []

    def take(n: int) -> Any:
        calls.append(n)
        if len(calls) <= 4:  # the disk is full for the first four reads
            raise _unavailable()
        return real_take(n)

    q.take = take
    m.start_ingest()
    assert m.flush(30)
    assert len(calls) > 4 and m.backend.contains([f"{ev}@u:0"])
    failed = _records(caplog, "reading the queue")
    with_trace = [r for r in failed if r.exc_info]
    assert len(with_trace) == 1, [r.getMessage() for r in with_trace]  # not one per retry
    assert with_trace[0].levelno == logging.WARNING
    assert len([r for r in failed if r.levelno >= logging.WARNING]) == 1  # the rest: rate-limited
    back = _records(caplog, "works again")
    assert len(back) == 1 and "4 failures" in back[0].getMessage()


def test_pattern_detection_failing_through_an_outage_logs_one_traceback(
        tmp_path: Path, make_memory: Callable[..., BeeWeave], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG, logger="beeweave_core.ingest")
    m = make_memory(tmp_path / "m.db", autostart=False)
    runtime = m._ingestion.runtime  # type: ignore[attr-defined]
    real_observe, seen = runtime.patterns.observe, []

    def observe(sighting: Any) -> Any:
        seen.append(sighting)
        if len(seen) <= 6:  # the database is down for the first six events
            raise _unavailable()
        return real_observe(sighting)

    monkeypatch.setattr(runtime.patterns, "observe", observe)
    for i in range(8):
        m.ingest({"user_id": "u", "id": f"e{i}", "query": f"how do I reset password number {i}?",
                  "response": "Settings, then Security, then Reset password."})
    m.start_ingest()
    assert m.flush(30) and len(seen) == 8
    failed = _records(caplog, "pattern detection")
    assert len([r for r in failed if r.exc_info]) == 1, [r.getMessage() for r in failed]
    assert len([r for r in failed if r.levelno >= logging.WARNING and "works again" not in r.getMessage()]) == 1
    assert len(_records(caplog, "pattern detection works again")) == 1
