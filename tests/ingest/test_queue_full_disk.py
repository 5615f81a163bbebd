"""Ingest on a full disk, and what the worker logs while the store is down.

``ingest()`` commits the event into the store's queue table before it returns: on a disk that
is full the commit fails, and ``ingest`` raises StoreUnavailableError (the OS error chained);
what was acknowledged before is stored once there is room again. A real small tmpfs, mounted
when the test may (root), skipped otherwise; the store runs in a child process, as a process
that dies of a signal on a full disk must not take pytest with it.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave
from beeweave_core.errors import StoreUnavailableError
from tests.reliability.rel_support import small_tmpfs

ROOT = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent("""
    import errno, os, sys, time
    from pathlib import Path
    from beeweave_core import BeeWeave, HashingEmbedder
    from beeweave_core.errors import StoreUnavailableError

    disk, n = Path(sys.argv[1]), int(sys.argv[2])
    text = "the quarterly report lists every invoice of the month "

    def event(i, size):
        return {"user_id": "u", "id": f"ev{i}", "query": f"question {i}: " + text * size, "response": text * size}

    # Acknowledged until the disk is full, then refused with StoreUnavailableError; what was
    # acknowledged is stored once there is room.
    started = time.monotonic()
    m = BeeWeave(disk / "m.db", embedder=HashingEmbedder(32))
    acked, refused = [m.ingest(event(n, 20))], 0
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


def test_a_full_disk_refuses_ingest_cleanly_and_stores_what_was_acknowledged(small_disk: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(small_disk), "3000"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, out
    assert "ACKED" in done.stdout, out
    print(done.stdout)


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
