"""Access tracking: search hits update access_count and last_accessed in the store."""

from __future__ import annotations

import threading
import time

from beeweave_core import BeeWeave


def test_search_hits_are_counted_and_timestamped(mem, clock) -> None:
    a = mem.add("python packaging with pyproject", user_id="u")
    b = mem.add("coffee in the morning", user_id="u")
    clock.advance(hours=1)
    hits = mem.search("python packaging", user_id="u", k=1)
    assert [h.id for h in hits] == [a]
    first = clock.now
    clock.advance(hours=1)
    mem.search("python packaging", user_id="u", k=1)
    got = mem.get(a)
    assert got.access_count == 2 and got.last_accessed == clock.now > first
    assert mem.get(b).access_count == 0 and mem.get(b).last_accessed is None


def test_accesses_wait_in_memory_until_flush(make, clock) -> None:
    m = make(access_flush_interval=3600, access_batch=1000)
    a = m.add("python packaging with pyproject", user_id="u")
    for _ in range(3):
        m.search("python packaging", user_id="u", k=1)
    assert m.get(a).access_count == 0  # still buffered
    m.flush()
    assert m.get(a).access_count == 3 and m.get(a).last_accessed == clock.now


def test_a_full_batch_is_written_at_once(make) -> None:
    m = make(access_flush_interval=3600, access_batch=2)
    a = m.add("python packaging with pyproject", user_id="u")
    b = m.add("python packaging with setup.py", user_id="u")
    m.search("python packaging", user_id="u", k=2)
    assert m.get(a).access_count == 1 and m.get(b).access_count == 1


def test_accesses_are_written_after_a_bounded_delay(make) -> None:
    m = make(access_flush_interval=0.05, access_batch=1000)
    a = m.add("python packaging with pyproject", user_id="u")
    m.search("python packaging", user_id="u", k=1)
    deadline = time.monotonic() + 5
    while m.get(a).access_count == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert m.get(a).access_count == 1


def test_access_counts_survive_close_and_reopen(make, tmp_path, clock) -> None:
    db_path = tmp_path / "memory.db"
    m = make(db_path, access_flush_interval=3600)
    a = m.add("python packaging with pyproject", user_id="u")
    m.search("python packaging", user_id="u", k=1)
    m.search("python packaging", user_id="u", k=1)
    m.close()  # writes what was buffered
    m = make(db_path)
    got = m.get(a)
    assert got.access_count == 2 and got.last_accessed == clock.now


def test_buffered_counts_do_not_undo_changes_made_meanwhile(make) -> None:
    m = make(access_flush_interval=3600, up_delta=1.0)
    a = m.add("python packaging with pyproject", user_id="u")
    m.search("python packaging", user_id="u", k=1)
    m.feedback([a], "up")
    m.feedback([a], "used")
    m.update(a, tags=["build"])
    m.flush()
    got = m.get(a)
    assert got.access_count == 2 and got.weight == 2.1 and got.tags == ["build"]


def test_accesses_of_deleted_memories_are_dropped(make) -> None:
    m = make(access_flush_interval=3600)
    a = m.add("python packaging with pyproject", user_id="u")
    b = m.add("python packaging with setup.py", user_id="u")
    m.search("python packaging", user_id="u", k=2)
    m.delete(a)
    m.flush()
    assert m.get(b).access_count == 1


def test_concurrent_searches_count_every_access(make) -> None:
    m: BeeWeave = make(access_flush_interval=0.01, access_batch=7)
    a = m.add("python packaging with pyproject", user_id="u")

    def run() -> None:
        for _ in range(25):
            m.search("python packaging", user_id="u", k=1)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m.flush()
    assert m.get(a).access_count == 100


def test_access_writes_send_no_events(mem) -> None:
    seen = []
    a = mem.add("python packaging with pyproject", user_id="u")
    mem.events.subscribe(seen.append)
    mem.search("python packaging", user_id="u", k=1)
    mem.flush()
    assert mem.get(a).access_count == 1 and seen == []
