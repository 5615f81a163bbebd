"""The ingest queue as a table of the store's own file: what files a store has, the order of
events, and the move of an older version's queue files (``<db>.queue``, the intake journal)
into the table."""

from __future__ import annotations

import fcntl
import shutil
import tarfile
from pathlib import Path

import pytest

from beeweave_core import HashingEmbedder, StoreUnavailableError
from beeweave_core.ingest.queue import SQLiteEventQueue
from beeweave_core.ingest.queue_upgrade import try_lock
from tests.ingest.ingest_support import everything

# Made by tests/ingest/data/make_old_queue_files.py with the code of b9675b0 (before the queue was
# a table), the store killed (os._exit) with its files as they were: old-0..4 pending and old-5
# dead in m.db.queue, old-6..9 in the intake journal m.db.queue.intake; m.db holds "pre-1".
OLD_FILES = Path(__file__).parent / "data" / "old_queue_files.tar.gz"


def ev(i: int, user: str = "u") -> dict[str, str]:
    return {"id": f"e{i}", "user_id": user, "query": f"What is code {i}?", "response": f"Code {i} is in drawer {i}."}


def _old_store(tmp_path: Path) -> Path:
    with tarfile.open(OLD_FILES) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "m.db"


def test_a_store_that_ingests_is_one_database_and_a_lock_file_while_open(make_memory, db_path) -> None:
    m = make_memory(db_path, autostart=False)
    m.add("a plain memory", user_id="u")
    assert not db_path.with_name(db_path.name + ".ingest.lock").exists()  # nothing ingested: no lock file
    for i in range(5):
        m.ingest(ev(i))
    names = sorted(p.name for p in db_path.parent.iterdir())
    assert names == ["memory.db", "memory.db-shm", "memory.db-wal", "memory.db.ingest.lock"], names
    assert m.flush(20) and m.pending_events() == 0
    m.close()
    assert sorted(p.name for p in db_path.parent.iterdir()) in (["memory.db"], ["memory.db", "memory.db.snapshot"])


def test_events_come_out_in_order_and_an_id_queued_twice_is_one_event(tmp_path: Path) -> None:
    q = SQLiteEventQueue(tmp_path / "q.db")
    assert [q.put(f"k{i}", "u", f'{{"n": {i}}}') for i in range(5)] == [True] * 5
    assert q.put("k2", "u", '{"n": 99}') is False
    assert q.put_many([("k5", "u", '{"n": 5}'), ("k1", "u", '{"n": 1}')]) == 1
    assert [e.body["n"] for e in q.take(10)] == [0, 1, 2, 3, 4, 5] and q.pending_count() == 6
    q.done(["k0", "k1"])
    q.fail("k2", "ValueError: bad")
    assert [e.id for e in q.take(10)] == ["k3", "k4", "k5"] and [d.id for d in q.dead()] == ["k2"]
    q.close()
    again = SQLiteEventQueue(tmp_path / "q.db")
    assert again.pending_count() == 3 and [d.error for d in again.dead()] == ["ValueError: bad"]
    assert again.revive() == 1 and [e.id for e in again.take(10)] == ["k2", "k3", "k4", "k5"]
    again.close()


def test_a_store_written_by_the_older_version_keeps_every_pending_and_dead_event(tmp_path: Path, make_memory) -> None:
    db = _old_store(tmp_path)
    m = make_memory(db, embedder=HashingEmbedder(64), autostart=False)
    assert m.pending_events() == 9
    [dead] = m.dead_letters()
    assert dead.event.id == "old-5" and "made dead by the fixture" in dead.error
    left = sorted(p.name for p in tmp_path.iterdir() if ".queue" in p.name)
    assert left == [], left  # moved in, then deleted
    assert m.flush(30) and m.pending_events() == 0
    stored = [c.metadata["ingest"]["event_id"] for c in everything(m) if "ingest" in c.metadata]
    assert sorted(stored) == [f"old-{i}" for i in range(10) if i != 5]  # each once
    assert m.backend.contains(["pre-1"]) == {"pre-1"}
    assert m.retry_dead_letters() == 1 and m.flush(30)
    assert "old-5" in {c.metadata["ingest"]["event_id"] for c in everything(m) if "ingest" in c.metadata}


def test_old_files_a_live_older_process_holds_wait_until_it_is_gone(tmp_path: Path, make_memory,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SQLiteEventQueue, "ADOPT_INTERVAL", 0.0)
    db = _old_store(tmp_path)
    journal = tmp_path / "m.db.queue.intake"
    holder = open(journal, "rb")  # an older version's process holds its journal open and locked
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    try:
        m = make_memory(db, embedder=HashingEmbedder(64), autostart=False)
        assert m.pending_events() == 5 and journal.exists()  # the queue file's events only
    finally:
        holder.close()  # that process exits
    assert m.flush(30) and journal.exists() is False
    assert len({c.metadata["ingest"]["event_id"] for c in everything(m) if "ingest" in c.metadata}) == 9


def test_an_old_queue_file_named_by_queue_path_becomes_the_table(tmp_path: Path) -> None:
    _old_store(tmp_path)
    path = tmp_path / "events.queue"
    shutil.move(tmp_path / "m.db.queue", path)
    q = SQLiteEventQueue(path, old_base=path)
    assert q.pending_count() == 5 and [d.id for d in q.dead()] == ["old-5@u"]
    assert [e.id for e in q.take(10)] == [f"old-{i}@u" for i in range(5)]
    q.close()


def test_a_lock_file_is_taken_only_when_free(tmp_path: Path) -> None:
    first = try_lock(tmp_path / "x.lock")
    assert first is not None and try_lock(tmp_path / "x.lock") is None
    first.close()
    again = try_lock(tmp_path / "x.lock")
    assert again is not None
    again.close()


def test_an_event_put_into_a_deleted_store_file_is_refused(tmp_path: Path, make_memory) -> None:
    # SQLite keeps writing to a deleted file's inode: the event would be acknowledged and lost.
    m = make_memory(tmp_path / "m.db", autostart=False)
    m.ingest(ev(1))
    for f in tmp_path.iterdir():
        f.unlink()
    with pytest.raises(StoreUnavailableError, match="deleted or replaced while open"):
        m.ingest(ev(2))
