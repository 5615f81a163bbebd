"""The queue table with several owners (what several processes on one store do; flock locks of
two open files conflict within one process too, so one process shows it): one table, each
owner with its own lock file; a batch one owner took is not taken by another while that owner
lives, and comes back to the queue when it dies."""

from __future__ import annotations

from pathlib import Path

import pytest

from beeweave_core.ingest.queue import SQLiteEventQueue


def _die(q: SQLiteEventQueue) -> None:
    """What a SIGKILL leaves: connections and the lock gone, the claims and the lock file left."""
    q._db.close()
    assert q._ckpt is not None and q._slot_file is not None
    q._ckpt.close()
    assert q._slot_file is not None
    q._slot_file.close()
    q._slot_file = None


def test_owners_share_one_table_and_never_hold_one_event_twice(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first, second = SQLiteEventQueue(path), SQLiteEventQueue(path)
    assert (tmp_path / "m.db.ingest.lock").exists() and (tmp_path / "m.db.ingest.lock.1").exists()
    first.put("e1", "u", '{"id": "e1"}')
    second.put_many([("e2", "u", '{"id": "e2"}'), ("e3", "u", '{"id": "e3"}')])
    assert first.pending_count() == second.pending_count() == 3  # the store's count
    assert [e.id for e in first.take(2)] == ["e1", "e2"]
    assert [e.id for e in second.take(10)] == ["e3"]  # not what the live first holds
    assert [e.id for e in first.take(10)] == ["e1", "e2"]  # its own, taken again (its worker lost the batch)
    second.close()
    assert not (tmp_path / "m.db.ingest.lock.1").exists()  # the lock file goes with its owner
    first.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]


@pytest.mark.parametrize("heir_opens_after", [True, False], ids=["heir-opens-after", "heir-was-open"])
def test_a_dead_owners_batch_comes_back_to_the_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     heir_opens_after: bool) -> None:
    monkeypatch.setattr(SQLiteEventQueue, "ADOPT_INTERVAL", 0.0)
    path = tmp_path / "m.db"
    heir = None if heir_opens_after else SQLiteEventQueue(path)
    dying = SQLiteEventQueue(path)
    dying.put_many([(f"e{i}", "u", f'{{"id": "e{i}"}}') for i in range(4)])
    assert len(dying.take(3)) == 3
    dying.fail("e3", "boom")
    if heir is not None:
        assert [e.id for e in heir.take(10)] == []  # e0-e2 are the live owner's, e3 is dead
    _die(dying)
    heir = heir or SQLiteEventQueue(path)
    assert [e.id for e in heir.take(10)] == ["e0", "e1", "e2"]
    assert [d.id for d in heir.dead()] == ["e3"] and heir.pending_count() == 3
    heir.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]
