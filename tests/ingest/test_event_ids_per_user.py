"""Event ids are each user's own (issue 47, item 4): alice's and bob's "turn-1" are two events
with two sets of memories, on both backends. Before, bob's was acknowledged and then
dead-lettered ("memory id 'turn-1:0' belongs to another user"), or, while alice's was still
queued, dropped as a repeat of hers. One user's repeated event is still stored once, also
when a store written before ids carried the user holds it."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave
from beeweave_core.ids import event_memory_id
from beeweave_core.server import open_memory

pytestmark = pytest.mark.slow

EMB = "beeweave:hashing-64"


@pytest.fixture(scope="module")
def pg_url():
    from tests.postgres.pg_support import fresh_schema, schema_url, server_url

    with fresh_schema() as schema:
        yield schema_url(server_url(), schema)


@pytest.fixture(params=["sqlite", "postgres"])
def m(request, tmp_path):
    if request.param == "sqlite":
        mem = BeeWeave(str(tmp_path / "m.db"), embedder=EMB)
    else:
        from tests.postgres.pg_support import new_tenant

        mem = open_memory(request.getfixturevalue("pg_url"), tenant=new_tenant(), embedder=EMB)
    yield mem
    mem.close()


def _turn(user: str, text: str, eid: str = "turn-1") -> dict:
    return {"id": eid, "user_id": user, "query": f"Where does {user} keep the {text}?",
            "response": f"{user.title()} keeps the {text} in the blue cupboard."}


def _texts(m, user: str) -> list[str]:
    return [c.raw_content for c in m.get_all(user_id=user).items]


@pytest.mark.parametrize("flush_between", [True, False], ids=["one-after-the-other", "both-queued"])
def test_two_users_events_of_one_id_are_both_stored(m, flush_between):
    m.ingest(_turn("alice", "spare keys"))
    if flush_between:
        assert m.flush(30)
    m.ingest(_turn("bob", "passport"))
    assert m.flush(30)
    assert m.dead_letters() == []
    assert any("spare keys" in t for t in _texts(m, "alice")) and any("passport" in t for t in _texts(m, "bob"))
    assert m.get(event_memory_id("turn-1", "bob", 0)).user_id == "bob"
    # One user's repeat is one event: nothing new, nothing dead.
    m.ingest(_turn("bob", "passport"))
    assert m.flush(30) and m.dead_letters() == [] and len(_texts(m, "bob")) == 1


def test_an_event_id_cannot_reach_another_users_ids(m):
    # alice names her event after bob's memory id: her memories are still hers, his still come.
    m.ingest(_turn("alice", "bike", eid="turn-1@bob"))
    m.ingest(_turn("bob", "car"))
    assert m.flush(30) and m.dead_letters() == []
    assert [c.user_id for c in m.get_many([event_memory_id("turn-1", "bob", 0)])] == ["bob"]
    assert "car" in m.get(event_memory_id("turn-1", "bob", 0)).raw_content


def test_a_memory_stored_under_the_old_id_is_not_stored_again(m):
    # A store from before ids carried the user holds alice's turn as "turn-1:0".
    m.add("Where does alice keep the spare keys?\n\nAlice keeps the spare keys in the blue cupboard.",
          user_id="alice", chunk_id="turn-1:0")
    m.ingest(_turn("alice", "spare keys"))  # the same event, retried after the upgrade
    m.ingest(_turn("bob", "spare keys"))  # bob's own "turn-1" is his, and new
    assert m.flush(30) and m.dead_letters() == []
    assert [c.id for c in m.get_all(user_id="alice").items] == ["turn-1:0"]
    assert [c.id for c in m.get_all(user_id="bob").items] == [event_memory_id("turn-1", "bob", 0)]


def test_dead_letters_are_retried_and_discarded_per_user(tmp_path):
    from beeweave_core.ingest import IngestConfig

    with BeeWeave(str(tmp_path / "d.db"), embedder=EMB, ingest=IngestConfig(autostart=False)) as mem:
        for user in ("alice", "bob"):
            mem.ingest(_turn(user, "umbrella"))
        mem._ingestion.runtime._move_intake()
        q = mem._ingestion.runtime.queue()
        for qe in q.take(10):
            q.fail(qe.id, "test: failed")
        assert sorted(d.event.user_id for d in mem.dead_letters()) == ["alice", "bob"]
        mem.drain("alice", timeout=0)  # a forget of alice discards hers, not bob's "turn-1"
        assert [d.event.user_id for d in mem.dead_letters()] == ["bob"]
        assert mem.retry_dead_letters(["turn-1"]) == 1
        assert mem.flush(30) and [c.user_id for c in mem.get_all().items] == ["bob"]
