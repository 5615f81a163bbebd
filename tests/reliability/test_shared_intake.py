"""The intake journal and the queue with several owners (what several processes on one store
do; flock locks of two open files conflict within one process too, so one process shows it):
each opener gets its own file, and the files of an owner that died are taken over with their
records, which are handed over first and then deleted."""

from __future__ import annotations

from pathlib import Path

from beeweave_core.ingest.intake import MmapJournal
from beeweave_core.ingest.queue import SQLiteEventQueue


def _die(j: MmapJournal) -> None:
    """What a SIGKILL leaves: the mapping gone and the lock released, nothing tidied."""
    j._mm.close()
    j._release()


def test_each_opener_has_its_own_journal_and_a_dead_ones_records_are_adopted(tmp_path: Path) -> None:
    base = tmp_path / "q.intake"
    first, second, third = (MmapJournal(base, 4096) for _ in range(3))
    assert [j.path.name for j in (first, second, third)] == ["q.intake", "q.intake.1", "q.intake.2"]
    for j, name in ((first, b"a"), (second, b"b"), (third, b"c")):
        for i in range(3):
            assert j.append(name + str(i).encode())
    _die(second)
    _die(third)
    heir = MmapJournal(base, 4096)  # takes the first free file (.1) and adopts .2
    assert heir.path.name == "q.intake.1" and heir.count() == 6
    records, mark = heir.drain()
    assert records == [b"c0", b"c1", b"c2"]  # the orphan's, first
    heir.commit(mark)
    assert not (tmp_path / "q.intake.2").exists()
    records, mark = heir.drain()
    assert records == [b"b0", b"b1", b"b2"]  # then its own file's, left by the dead owner
    heir.commit(mark)
    assert heir.count() == 0 and first.drain()[0] == [b"a0", b"a1", b"a2"]
    heir.close()
    assert not (tmp_path / "q.intake.1").exists()  # an emptied second file goes at close
    first.close()
    assert base.exists()


def test_each_opener_has_its_own_queue_and_a_dead_ones_events_are_adopted(tmp_path: Path) -> None:
    base = tmp_path / "q"
    first, second = SQLiteEventQueue(base), SQLiteEventQueue(base)
    assert second.path is not None and second.path.name == "q.1"
    first.put("e1", "u", '{"id": "e1"}')
    second.put_many([("e2", "u", '{"id": "e2"}'), ("e3", "u", '{"id": "e3"}')])
    second.fail("e3", "boom")
    assert first.pending_count() == 1 and second.pending_count() == 1  # each counts its own
    second._db.close()  # dies: no close, the lock goes with the process
    second._release()
    first.close()
    heir = SQLiteEventQueue(base)
    assert heir.path == base
    assert [e.id for e in heir.take(10)] == ["e1", "e2"]
    assert [d.id for d in heir.dead()] == ["e3"]
    assert not (tmp_path / "q.1").exists()
    heir.close()
