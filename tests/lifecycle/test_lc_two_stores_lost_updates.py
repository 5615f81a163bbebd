"""Lost updates between two stores on one SQLite file or PostgreSQL tenant (two processes, as
in issue 47): the second store's edit or delete lands between the first's read and its write,
through its own connection, so the first learns of it only from the database (SQLite: its
change log; PostgreSQL: the locked rows). The window is held open as in
tests/conformance_lost_updates.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_core import ChunkStatus
from tests.conformance_lost_updates import DELETES, NEW_TEXT, interleave


def _expired(store, clock) -> str:
    cid = store.add("the meeting is on monday at ten", user_id="u", expires_at=clock.now + timedelta(hours=1))
    clock.advance(hours=2)
    return cid


@pytest.mark.parametrize("action", ["archive", "delete"])
def test_maintain_keeps_what_the_other_store_wrote_meanwhile(reopen, clock, monkeypatch, action) -> None:
    first, second = reopen(expired_action=action), reopen()
    cid = _expired(first, clock)
    fired = interleave(monkeypatch, first.backend, cid,
                       lambda: second.update(cid, content=NEW_TEXT, expires_at=None),
                       on=DELETES if action == "delete" else ("update", "modify"))
    first.maintain()
    assert fired
    for store in (first, second):
        got = store.get(cid)
        assert (got.content, got.status, got.expires_at) == (NEW_TEXT, ChunkStatus.ACTIVE, None)


def test_maintain_raises_nothing_when_the_other_store_deletes_meanwhile(reopen, clock, monkeypatch) -> None:
    first, second = reopen(), reopen()
    cid = _expired(first, clock)
    fired = interleave(monkeypatch, first.backend, cid, lambda: second.delete(cid))
    report = first.maintain()
    assert fired and report.archived == 0
    assert not first.backend.contains([cid]) and not second.backend.contains([cid])


def test_a_put_through_the_other_store_survives_a_sweep(reopen, clock, monkeypatch) -> None:
    pytest.importorskip("langgraph")
    from beeweave_langchain.store import BeeWeaveStore, item_id

    sweeping, putting = BeeWeaveStore(reopen()), BeeWeaveStore(reopen())
    putting.put(("u", "notes"), "plan", {"text": "monday"}, ttl=1)
    clock.advance(minutes=5)
    fired = interleave(monkeypatch, sweeping.memory.backend, item_id(("u", "notes"), "plan"),
                       lambda: putting.put(("u", "notes"), "plan", {"text": "friday"}, ttl=60), on=DELETES)
    assert sweeping.sweep() == 0
    assert fired
    for store in (sweeping, putting):
        item = store.get(("u", "notes"), "plan")
        assert item is not None and item.value == {"text": "friday"}
