"""BeeWeave end to end on PostgreSQL (``BeeWeave.from_url``): the public API works, search
gives the embedded store's results, and memory events reach other processes' buses."""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime, timezone

import pytest

from beeweave_core import BeeWeave, EventType, HashingEmbedder, NotFoundError
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.postgres.events import to_memory_event
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.support import WORDS, sentence

pytestmark = pytest.mark.slow

NOW = datetime(2024, 6, 1, tzinfo=timezone.utc)


def _records(n: int = 80) -> list[dict]:
    rnd = random.Random(21)
    return [{"content": sentence(rnd, 4, 12), "user_id": rnd.choice(["alice", "bob"]), "chunk_id": f"m{i}",
             "session_id": f"s{rnd.randint(0, 3)}", "timestamp": 1_700_000_000 + rnd.randint(0, 50) * 3600,
             "tags": rnd.sample(["work", "home", "food"], rnd.randint(0, 2))} for i in range(n)]


def _open(url: str, tenant: str) -> BeeWeave:
    return BeeWeave.from_url(url, embedder=HashingEmbedder(32), tenant=tenant, clock=lambda: NOW)


def test_add_search_get_delete_through_from_url(pg_url) -> None:  # noqa: F811
    with _open(pg_url, new_tenant()) as memory:
        assert isinstance(memory.backend, PostgresStore)
        mid = memory.add("The user prefers answers in Chinese.", user_id="alice", session_id="s1", tags=["pref"])
        memory.add("用户对花生过敏。", user_id="alice", session_id="s1")
        memory.add("Bob likes strong coffee.", user_id="bob")
        assert memory.count() == 3 and memory.count(user_id="alice") == 2
        hits = memory.search("answers in Chinese", user_id="alice", k=2)
        assert hits[0].id == mid and {h.chunk.user_id for h in hits} == {"alice"}
        assert memory.search("coffee", user_id="alice", k=5, filters={"tags": "pref"})[0].id == mid
        assert memory.get(mid).tags == ["pref"]
        assert memory.update(mid, tags=["pref", "lang"]).tags == ["pref", "lang"]
        assert memory.delete(mid) and not memory.delete(mid)
        with pytest.raises(NotFoundError):
            memory.get(mid)
        assert memory.count() == 2


def test_search_equals_the_embedded_store(pg_url) -> None:  # noqa: F811
    records = _records()
    with _open(pg_url, new_tenant()) as pg, BeeWeave(embedder=HashingEmbedder(32), clock=lambda: NOW) as lite:
        pg.add_many(records)
        lite.add_many(records)
        assert sorted((e.source_id, e.target_id, e.type.value) for e in pg.backend.edges([r["chunk_id"] for r in records])) \
            == sorted((e.source_id, e.target_id, e.type.value) for e in lite.backend.edges([r["chunk_id"] for r in records]))
        rnd = random.Random(4)
        for _ in range(6):
            query = sentence(rnd, 2, 6, WORDS[:60])
            for kw in ({"user_id": "alice"}, {"user_id": "bob", "filters": {"tags": ["work", "food"]}},
                       {"user_id": "alice", "expand": True}, {"fusion": "rrf"}):
                got = [(h.id, h.score) for h in pg.search(query, k=8, **kw)]
                want = [(h.id, h.score) for h in lite.search(query, k=8, **kw)]
                assert [i for i, _ in got] == [i for i, _ in want], (query, kw)
                assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)


def test_events_reach_another_store_as_memory_events(pg_url) -> None:  # noqa: F811
    """How the engine forwards: a listener on the backend emits on its own EventBus."""
    tenant = new_tenant()
    with _open(pg_url, tenant) as writer, _open(pg_url, tenant) as reader:
        got: list = []
        done = threading.Event()

        def on_event(ev) -> None:
            got.append(ev)
            if len(got) == 4:
                done.set()

        reader.events.subscribe(on_event, types=[EventType.CREATED, EventType.DELETED], user_id="alice")
        listener = reader.backend.listen(lambda payload: reader.events.emit(to_memory_event(payload)))
        try:
            writer.add("one", user_id="alice", chunk_id="e1", tags=["t"])
            writer.add("two", user_id="bob", chunk_id="e2")  # another user: filtered by the subscription
            writer.update("e1", tags=["t", "u"])  # an update: not subscribed
            reader.add("three", user_id="alice", chunk_id="e3")  # the reader's own write: emitted locally, not echoed
            writer.delete("e1")
            writer.add("four", user_id="alice", chunk_id="e4")
            assert done.wait(10)
        finally:
            listener.close()
        time.sleep(0.3)  # nothing more may come
        assert len(got) == 4
        remote = [(e.type, e.chunk_id) for e in got if e.data.get("remote")]
        local = [(e.type, e.chunk_id) for e in got if not e.data.get("remote")]
        assert remote == [(EventType.CREATED, "e1"), (EventType.DELETED, "e1"), (EventType.CREATED, "e4")]
        assert local == [(EventType.CREATED, "e3")]
        assert got[[e.chunk_id for e in got].index("e1")].tags == ("t",)


def test_declared_fields_reach_another_handle_and_filter(pg_url) -> None:  # noqa: F811
    tenant = new_tenant()
    first, other = _open(pg_url, tenant), None
    try:
        for i, p in enumerate(["p1", "p2", "p1", None]):
            first.add(f"apple note {i}", user_id="ann", chunk_id=f"c{i}",
                      metadata={} if p is None else {"project_id": p})
        other = _open(pg_url, tenant)  # opened before the declaration
        first.declare_fields({"project_id": "str"})
        assert other.declared_fields() == {"project_id": "str"}
        hits = other.search("apple note", user_id="ann", filters={"project_id": "p1"}, k=10)
        assert sorted(h.chunk.id for h in hits) == ["c0", "c2"]
        assert other.count(filters={"project_id": ["p1", "p2"]}) == 3
        fresh = _open(pg_url, new_tenant())
        try:
            assert fresh.declared_fields() == {}  # per tenant, as the store's meta
        finally:
            fresh.close()
    finally:
        first.close()
        if other is not None:
            other.close()


def test_contradicting_memories_come_as_in_the_embedded_store(pg_url) -> None:  # noqa: F811
    """A hit's rivals (``contradicts``, either direction, other relations beside them): the
    same results as the embedded store. A local-index search reads them with the records
    (``Candidates.rivals``), so it never asks ``edges`` for its hits."""
    records = _records()
    rnd = random.Random(9)
    with _open(pg_url, new_tenant()) as pg, BeeWeave(embedder=HashingEmbedder(32), clock=lambda: NOW) as lite:
        pg.add_many(records, link=False)
        lite.add_many(records, link=False)
        users = {r["chunk_id"]: r["user_id"] for r in records}
        pairs = {(a, b) for a, b in (rnd.sample(sorted(users), 2) for _ in range(80)) if users[a] == users[b]}
        for a, b in sorted(pairs):
            for m in (pg, lite):
                m.relate(a, b, "contradicts" if (a + b).count("1") % 3 else "supports")
        asked: list[list[str]] = []
        plain_edges = pg.backend.edges

        def edges(wanted, **kw):
            asked.append(list(wanted))
            return plain_edges(wanted, **kw)

        pg.backend.edges = edges  # type: ignore[method-assign]
        for _ in range(8):
            query = sentence(rnd, 2, 6, WORDS[:60])
            for kw in ({"user_id": "alice"}, {"user_id": "bob", "filters": {"tags": ["work", "food"]}}, {}):
                asked.clear()
                got = pg.search(query, k=6, **kw)
                want = lite.search(query, k=6, **kw)
                def rivals(hits):
                    return [(h.id, s and (s.rank, s.from_id, s.via)) for h in hits
                            for s in [h.sources.get("contradicts")]]
                assert rivals(got) == rivals(want), (query, kw)
                assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
                assert asked == []  # the rivals come with the records' statement
