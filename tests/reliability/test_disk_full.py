"""A store on a small, full disk (a 24 MiB tmpfs mounted for the test; skipped where it cannot
be mounted): add and ingest raise StoreUnavailableError (a BeeWeaveError, the OS error chained)
and never a raw sqlite3 error; nothing acknowledged is lost once space is freed; the queue's
WAL stays bounded while the backlog drains."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from beeweave_core.errors import BeeWeaveError, StoreUnavailableError
from beeweave_core.ingest import IngestConfig
from tests.reliability.rel_support import all_chunks, assert_consistent, open_file_store, sentence_for, small_tmpfs

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "24m") as disk:
        yield disk


def _fill(path: Path) -> None:
    """Write ``path`` until the disk is full.

    Unbuffered on purpose: a buffered file keeps the unwritten tail of a short write and its
    close() raises ENOSPC again when it flushes, outside any handler."""
    block = os.urandom(64 << 10)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, block)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_full_disk_refuses_cleanly_and_loses_nothing_acknowledged(small_disk: Path) -> None:
    rnd = random.Random(3)
    db = small_disk / "m.db"
    m = open_file_store(db, ingest=IngestConfig(journal_bytes=256 << 10, batch_size=32))
    added, acked, refused = [], [], []
    for i in range(40):
        added.append(m.add(sentence_for(rnd), user_id="u", chunk_id=f"pre{i}"))
    for i in range(20):
        acked.append(m.ingest({"user_id": "u", "id": f"pre-ev{i}", "query": sentence_for(rnd), "response": "ok"}))
    assert m.flush(30)
    _fill(small_disk / "filler")
    os.truncate(small_disk / "filler", (small_disk / "filler").stat().st_size - (3 << 20))  # 3 MiB left
    i = 0
    while len(refused) < 30 and i < 20_000:
        i += 1
        try:
            if i % 2:
                try:
                    added.append(m.add(sentence_for(rnd, 30, 60), user_id="u", chunk_id=f"a{i}"))
                except BeeWeaveError:
                    assert not m.backend.contains([f"a{i}"]), "a refused add was stored"
                    raise
            else:
                acked.append(m.ingest({"user_id": "u", "id": f"ev{i}", "query": sentence_for(rnd, 30, 60),
                                       "response": sentence_for(rnd, 30, 60)}))
        except BeeWeaveError as exc:
            assert isinstance(exc, StoreUnavailableError), exc
            assert exc.__cause__ is not None  # the OS / SQLite error is chained
            refused.append(exc)
        except Exception as exc:  # what this test is looking for
            pytest.fail(f"a raw {type(exc).__name__} escaped on a full disk: {exc}")
    print("DISKFULL", i, len(added), len(acked), len(refused), {str(e)[:150] for e in refused})
    assert refused, "the disk never filled"
    assert len(added) > 60 and len(acked) > 40, "nothing was acknowledged while the disk filled"
    assert all("cannot rollback" not in str(e) for e in refused)
    (small_disk / "filler").unlink()  # space again: the backlog drains
    assert m.flush(120)
    wal = Path(str(db) + ".queue-wal")
    assert not wal.exists() or wal.stat().st_size < 16 << 20
    assert m.dead_letters() == [] and m.pending_events() == 0
    chunks = all_chunks(m.backend)
    assert set(added) <= set(chunks), sorted(set(added) - set(chunks))[:5]
    turns = {cid.rpartition("@")[0] for cid in chunks if cid.endswith(":0")}  # <event>@<user>:0
    assert set(acked) <= turns, sorted(set(acked) - turns)[:5]
    assert_consistent(m)
    m.close()
    # And the store reopens with all of it (with its journal's size: a default 16 MiB journal,
    # reserved afresh, need not fit beside a store that filled this 24 MiB disk).
    with open_file_store(db, ingest=IngestConfig(journal_bytes=256 << 10)) as again:
        assert set(added) <= set(all_chunks(again.backend))
        assert again.verify().ok
