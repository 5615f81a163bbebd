"""Review round 4: failure cases of the ingest queue as a table of the store's file, the
catch-up of the in-memory index, and per-user export/import, each found failing first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from tests.reliability.rel_support import all_chunks

SECRET = "zorblaxquintessa"  # a word only alice's events hold


def _memory(path: Path, **config: Any) -> BeeWeave:
    return BeeWeave(path, embedder=HashingEmbedder(32), ingest=IngestConfig(**config))


def _event(i: int, user: str, word: str = "plain") -> dict[str, str]:
    return {"id": f"ev{i}", "user_id": user, "query": f"Where is the {word} key number {i}?",
            "response": f"The {word} key {i} is in the blue drawer."}


# -- forgetting a user on the embedded store ---------------------------------------------------------
def test_forget_user_drops_the_users_queued_and_dead_events_from_the_store_file(tmp_path: Path) -> None:
    """The queue is a table of the store's file now, so ``delete_user`` reaches it: a user's
    pending events (a drain that timed out, a worker that is behind) and dead letters hold their
    words, and a pending one would be stored after the forget, bringing the user back. The
    PostgreSQL store deletes them in the forget's transaction; the embedded store left them."""
    db = tmp_path / "m.db"
    m = _memory(db, autostart=False)
    try:
        m.ingest(_event(1, "alice", SECRET))  # still queued when she is forgotten
        m.ingest(_event(2, "alice", SECRET))
        m.ingest(_event(3, "bob"))
        m._ingestion.runtime.queue().fail("ev2@alice", "ValueError: made dead by the test")
        assert m.pending_events() == 2 and len(m.dead_letters()) == 1
        m.forget_user("alice")
        assert m.dead_letters() == []
        assert m.pending_events() == 1  # bob's event only
        m.start_ingest()
        assert m.flush(30)
        assert {c.user_id for c in all_chunks(m.backend).values()} == {"bob"}  # alice did not come back
    finally:
        m.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert SECRET.encode() not in blob


# -- exactly once across users: pattern sightings ---------------------------------------------------
def test_two_users_events_of_one_id_are_two_sightings_of_a_shared_question(tmp_path: Path) -> None:
    """A sighting counted before a crash is recognised by its event id when the event is
    processed again; but an event id is one user's (``ann``'s "turn-1" and ``bob``'s are two
    events, ids carry the user), so the shared count must tell them apart by the user too."""
    with _memory(tmp_path / "m.db") as m:  # the default: a question three users ask is shared
        for user in ("ann", "bob", "cy"):
            m.ingest({"user_id": user, "id": "turn-1", "query": "How do I change my avatar?",
                      "response": "Profile > Avatar."})
            assert m.flush(30)
        shared = [p for p in m.hot_patterns() if p.user_id == "scope:tenant"]
        assert len(shared) == 1 and shared[0].counts["1h"] == 3


# -- the move of an older version's queue files -------------------------------------------------------
OLD_FILES = Path(__file__).resolve().parents[1] / "ingest" / "data" / "old_queue_files.tar.gz"


def test_numbered_old_queue_files_are_found_beside_a_store_whose_name_has_glob_characters(tmp_path: Path) -> None:
    """A second process of the older version queued in ``<db>.queue.1`` and ``<db>.queue.intake.1``.
    They are listed with a glob of the store's name: ``[1]`` in the name is a character class
    there, so the files were never found and their acknowledged events never moved in."""
    import tarfile

    with tarfile.open(OLD_FILES) as tar:
        tar.extractall(tmp_path, filter="data")
    (tmp_path / "m.db").rename(tmp_path / "m[1].db")
    (tmp_path / "m.db.queue").rename(tmp_path / "m[1].db.queue.1")
    (tmp_path / "m.db.queue.intake").rename(tmp_path / "m[1].db.queue.intake.1")
    with BeeWeave(tmp_path / "m[1].db", embedder=HashingEmbedder(64), ingest=IngestConfig(autostart=False)) as m:
        assert m.pending_events() == 9 and len(m.dead_letters()) == 1
        assert sorted(p.name for p in tmp_path.iterdir() if ".queue" in p.name) == []


# -- flush() waits for every acknowledged event of the store ------------------------------------------
def test_flush_waits_for_events_another_process_left_in_the_queue_table(tmp_path: Path) -> None:
    """The queue is one table for every process on the store, and ``flush()`` is documented to
    wait for every acknowledged event, a dead sibling's included. A process that had not
    ingested itself when another one left events there (closed before its worker got to them,
    or killed) said nothing was pending and flushed at once, with the events unprocessed."""
    db = tmp_path / "m.db"
    with _memory(db) as first:  # open before anything is queued: it has no queue open yet
        first.add("a memory of the first process", user_id="u")
        with _memory(db, autostart=False) as other:  # e.g. a script that ingests and exits
            acked = [other.ingest(_event(i, "u")) for i in range(3)]
        assert first.pending_events() == 3
        assert first.flush(30) and first.pending_events() == 0
        assert first.backend.contains([f"{e}@u:0" for e in acked]) == {f"{e}@u:0" for e in acked}


# -- closing while another process reads the store ----------------------------------------------------
def test_close_does_not_wait_half_a_minute_for_another_connections_read(tmp_path: Path) -> None:
    """At close the queue empties the WAL (TRUNCATE checkpoint), which waits for every reader of
    the file. Since the queue is a table of the store's file, every process that reads the
    store is such a reader: a close waited the queue's whole busy timeout (30 s) whenever one
    held a read open, where the worker's own checkpoints wait a second and try again later."""
    import sqlite3
    import time

    db = tmp_path / "m.db"
    m = _memory(db)
    m.ingest(_event(1, "u"))
    assert m.flush(30)
    reader = sqlite3.connect(str(db), isolation_level=None)  # e.g. another process's long read
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM chunks").fetchone()
        m.add("written after the reader began: the WAL has frames it may still need", user_id="u")
        started = time.monotonic()
        m.close()
        assert time.monotonic() - started < 10
    finally:
        reader.execute("COMMIT")
        reader.close()
    with _memory(db) as again:  # nothing lost by the skipped checkpoint
        assert again.backend.contains(["ev1@u:0"]) == {"ev1@u:0"} and again.count(user_id="u") == 2


def test_the_idle_workers_checkpoint_does_not_stall_the_stores_writers(tmp_path: Path, monkeypatch) -> None:
    """An idle worker empties the WAL (TRUNCATE checkpoint) at each poll. A TRUNCATE checkpoint
    holds the file's write lock while it waits for readers, and the queue is a table of the
    store's file: while any process held a read open, every write to the store (an ``add``, an
    ``ingest``, another process's) stalled up to the checkpoint's one-second wait at each poll."""
    import sqlite3
    import time

    from beeweave_core.ingest.queue import SQLiteEventQueue

    monkeypatch.setattr(SQLiteEventQueue, "ADOPT_INTERVAL", 0.2)  # polls (and checkpoints) often
    db = tmp_path / "m.db"
    with _memory(db) as m:
        m.ingest(_event(1, "u"))
        assert m.flush(30)
        m.add("a memory written before the reader began", user_id="u")
        reader = sqlite3.connect(str(db), isolation_level=None)  # e.g. another process's long read
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM chunks").fetchone()
            slow, end, i = [], time.monotonic() + 3.0, 0
            while time.monotonic() < end:
                started = time.monotonic()
                m.add(f"memory number {i} written while the reader reads", user_id="u")
                took = time.monotonic() - started
                if took > 0.6:
                    slow.append(round(took, 2))
                i += 1
                time.sleep(0.01)
        finally:
            reader.execute("COMMIT")
            reader.close()
        assert slow == [], f"{len(slow)} of {i} adds waited: {slow[:5]}"


def test_a_forget_while_another_connection_reads_neither_hangs_nor_stalls_writers(tmp_path: Path) -> None:
    """A forget empties the WAL (TRUNCATE checkpoint) so no deleted row stays in it. Through the
    store's 30 s busy handler that checkpoint held the file's write lock while it waited for a
    reader: the forget took half a minute and every other writer of the file waited with it."""
    import sqlite3
    import threading
    import time

    db = tmp_path / "m.db"
    with _memory(db) as m:
        for i in range(20):
            m.add(f"note {i} of the user to forget", user_id="gone")
            m.add(f"note {i} of the user who stays", user_id="stays")
        reader = sqlite3.connect(str(db), isolation_level=None)  # e.g. another process's long read
        writer = sqlite3.connect(str(db), isolation_level=None, timeout=30)
        writer.execute("CREATE TABLE IF NOT EXISTS scratch (n INTEGER)")
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM chunks").fetchone()
            took: list[float] = []
            forget = threading.Thread(target=lambda: took.append(_timed(lambda: m.forget_user("gone"))))
            forget.start()
            slow, i = [], 0
            while forget.is_alive() and i < 400:
                started = time.monotonic()
                writer.execute("INSERT INTO scratch VALUES (?)", (i,))
                if (wait := time.monotonic() - started) > 0.6:
                    slow.append(round(wait, 2))
                i += 1
                time.sleep(0.01)
            forget.join(60)
        finally:
            reader.execute("COMMIT")
            reader.close()
            writer.close()
        assert took and took[0] < 10, took
        assert slow == [], f"{len(slow)} of {i} writes waited: {slow[:5]}"
        assert m.count(user_id="gone") == 0 and m.count(user_id="stays") == 20


def _timed(fn: Any) -> float:
    import time

    started = time.monotonic()
    fn()
    return time.monotonic() - started
