"""The intake journal: ordered, crash-safe hand-over from ingest() to the worker."""

from __future__ import annotations

from pathlib import Path

from beeweave_core.ingest.intake import MemoryIntake, MmapJournal
from beeweave_core.ingest.queue import SQLiteEventQueue
from tests.ingest.ingest_support import everything


def test_append_drain_commit(tmp_path: Path) -> None:
    j = MmapJournal(tmp_path / "j", size=4096)
    assert j.append(b"one") and j.append(b"two")
    records, mark = j.drain()
    assert records == [b"one", b"two"] and j.count() == 2
    assert j.append(b"three")  # appended while the first two are being moved
    j.commit(mark)
    assert j.count() == 1 and j.drain()[0] == [b"three"]
    j.close()


def test_unconsumed_records_survive_a_reopen_and_consumed_ones_do_not(tmp_path: Path) -> None:
    j = MmapJournal(tmp_path / "j", size=4096)
    for r in (b"a", b"b", b"c"):
        j.append(r)
    records, mark = j.drain()
    j.commit(mark)
    j.append(b"d")
    j.append(b"e")
    j.close()  # like a crash: nothing else is written on close
    again = MmapJournal(tmp_path / "j", size=4096)
    assert again.drain()[0] == [b"d", b"e"] and again.count() == 2
    again.append(b"f")
    assert again.drain()[0] == [b"d", b"e", b"f"]
    again.close()


def test_a_full_journal_refuses_and_restarts_at_the_top_once_consumed(tmp_path: Path) -> None:
    j = MmapJournal(tmp_path / "j", size=1024)
    n = 0
    while j.append(b"x" * 100):
        n += 1
    assert 5 <= n < 10
    j.commit(j.drain()[1])
    assert j.count() == 0 and j.append(b"y" * 100)  # back at the top
    j.close()
    assert MmapJournal(tmp_path / "j", size=1024).drain()[0] == [b"y" * 100]


def test_records_of_an_earlier_pass_and_torn_records_are_never_read(tmp_path: Path) -> None:
    j = MmapJournal(tmp_path / "j", size=1024)
    for i in range(5):
        j.append(b"old-%d" % i)
    j.commit(j.drain()[1])  # consumed: zeroed, and the next record goes to the top
    j.append(b"new")
    j.close()
    raw = (tmp_path / "j").read_bytes()
    assert b"old-" not in raw  # consumed records leave no trace
    # Forge a record from an earlier pass right after "new": an old sequence number.
    import struct
    import zlib
    j = MmapJournal(tmp_path / "j", size=1024)
    pos = j._head
    j._mm[pos + 16: pos + 19] = b"bad"
    j._mm[pos: pos + 8] = struct.pack("<II", 3, zlib.crc32(b"bad"))
    j._mm[pos + 8: pos + 16] = struct.pack("<Q", 1)  # not the next sequence number
    j._mm[pos + 24: pos + 48] = b"\xff" * 24  # garbage after it
    j.close()
    assert MmapJournal(tmp_path / "j", size=1024).drain()[0] == [b"new"]
    # A record whose payload does not match its checksum (torn by a crash) ends the log.
    j = MmapJournal(tmp_path / "j", size=1024)
    j.append(b"whole")
    j._mm[j._head - 8: j._head - 3] = b"WHOLE"[:5]
    j.close()
    assert MmapJournal(tmp_path / "j", size=1024).drain()[0] == [b"new"]


def test_memory_intake() -> None:
    m = MemoryIntake()
    m.append(b"a")
    records, mark = m.drain()
    m.append(b"b")
    m.commit(mark)
    assert records == [b"a"] and m.drain()[0] == [b"b"] and m.count() == 1


def test_the_queue_ignores_an_event_moved_twice(tmp_path: Path) -> None:
    q = SQLiteEventQueue(tmp_path / "q")
    assert q.put_many([("e1", "u", "{}"), ("e2", "u", "{}")]) == 2
    assert q.put_many([("e2", "u", "{}"), ("e3", "u", "{}")]) == 1
    assert q.pending_count() == 3
    q.close()


def test_a_full_journal_makes_the_caller_move_it_and_order_is_kept(make_memory, db_path) -> None:
    m = make_memory(db_path, journal_bytes=2048, autostart=False)
    for i in range(20):
        m.ingest({"user_id": "u", "id": f"e{i:02d}", "session_id": "s", "timestamp": 1_700_000_000 + i,
                  "query": f"step {i} of the runbook", "response": "done " * 40})
    assert m.pending_events() == 20
    taken = [e.id for e in m.parts.ingestion.runtime.queue().take(100)]
    assert taken == sorted(taken) and 0 < len(taken) < 20  # moved by the caller when the journal filled up
    assert m.flush(20)
    assert len([c for c in everything(m) if not c.id.startswith("pattern:")]) == 20


class _Killed(Exception):
    pass


class _DiesAfter:
    """Stands in for the journal's mapping and lets ``writes`` writes through, then 'kills' the
    process: the writes made so far stay in the file, as they do in the page cache after SIGKILL."""

    def __init__(self, mm, writes: int) -> None:  # type: ignore[no-untyped-def]
        self.mm, self.left, self.closed = mm, writes, False

    def __setitem__(self, key, value) -> None:  # type: ignore[no-untyped-def]
        if self.left == 0:
            raise _Killed
        self.left -= 1
        self.mm[key] = value


def _commit_killed_after(path: Path, writes: int, first: list[bytes], later: list[bytes]) -> bool:
    """Append ``first``, drain them, append ``later``, then commit with the process killed after
    ``writes`` writes into the mapping. True if the commit finished before that."""
    j = MmapJournal(path, size=4096)
    for r in first:
        assert j.append(r)
    _, mark = j.drain()
    for r in later:
        assert j.append(r)
    real = j._mm
    j._mm = _DiesAfter(real, writes)  # type: ignore[assignment]
    try:
        j.commit(mark)
        finished = True
    except _Killed:
        finished = False
    real.close()
    j._release()  # the dead process's flock goes with it
    return finished


def test_a_commit_killed_at_any_write_loses_no_record_appended_after_the_drain(tmp_path: Path) -> None:
    # The drained records are in the queue by the time commit runs; the ones appended after the
    # drain are only in the journal, so a reopen must find every one of them whatever write the
    # commit died after. Both cases: the commit empties the journal (nothing after the drain) and
    # the commit leaves later records behind.
    first, later = [b"drained-%d" % i for i in range(2)], [b"later-%d" % i for i in range(3)]
    for after in (later, []):
        writes = 0
        while True:
            path = tmp_path / f"j{len(after)}-{writes}"
            finished = _commit_killed_after(path, writes, first, after)
            j = MmapJournal(path, size=4096)
            records, _ = j.drain()
            assert [r for r in records if r not in first] == after, (writes, records)
            assert j.append(b"next")  # and the journal goes on from there
            assert j.drain()[0][-1] == b"next"
            j.close()
            if finished:
                break
            writes += 1
