"""The ingest queue in PostgreSQL (PostgresEventQueue): the EventQueue protocol, claims
that two workers never share, leases that run out when a worker dies, and ingestion
through it: events accepted by one BeeWeave are stored exactly once by another."""

from __future__ import annotations

import json
import time

import pytest

from beeweave_core import BeeWeave, ChunkStatus
from beeweave_core.filters import build_filter
from beeweave_core.ingest import IngestConfig
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.postgres.ingest_queue import PostgresEventQueue
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow


def _event(i: int, user: str = "ann") -> tuple[str, str, str]:
    eid = f"e{i:03d}"
    return eid, user, json.dumps({"id": eid, "user_id": user, "content": f"fact number {i}"})


@pytest.fixture
def store(pg_url):  # noqa: F811
    s = PostgresStore(pg_url, tenant=new_tenant(), pool_size=2)
    yield s
    s.close()


def test_put_take_done_and_the_dead_letters(store) -> None:
    q = store.ingest_queue()
    assert q.durable and q.put(*_event(0)) and not q.put(*_event(0))  # an id is queued once
    assert q.put_many([_event(i) for i in range(1, 6)] + [_event(0)]) == 5
    assert q.pending_count() == 6
    batch = q.take(4)
    assert [e.id for e in batch] == ["e000", "e001", "e002", "e003"]  # oldest first
    assert batch[0].body["content"] == "fact number 0"
    assert [e.id for e in q.take(10)] == ["e004", "e005"]  # a leased event is nobody else's
    assert q.take(10) == []
    q.done(["e000", "e001"])
    q.fail("e002", "ValueError: bad", body=json.dumps({"id": "e002", "redacted": True}))
    assert q.pending_count() == 3
    dead = q.dead()
    assert [(d.id, d.error, d.attempts, d.body) for d in dead] == [("e002", "ValueError: bad", 1,
                                                                    {"id": "e002", "redacted": True})]
    assert q.revive(["e002"]) == 1 and q.pending_count() == 4
    assert q.drop_oldest({"e003"}, "dropped: queue full") == "e002"
    assert q.discard(["e002", "e003"]) == 1  # only dead events are discarded
    q.postpone(["e003"], "StoreUnavailableError: down")  # gives the lease back at once
    assert [e.id for e in q.take(10)] == ["e003"]
    other = PostgresStore(store.url, schema=store.schema, tenant=new_tenant(), pool_size=1)
    try:  # tenants do not see each other's events
        assert other.ingest_queue().pending_count() == 0
    finally:
        other.close()


def test_two_workers_never_share_a_batch_and_a_lapsed_lease_is_taken_again(store) -> None:
    a = PostgresEventQueue(store.db, lease=1.0)
    b = PostgresEventQueue(store.db, lease=1.0)
    a.put_many([_event(i) for i in range(10)])
    first, second = a.take(6), b.take(6)
    assert not {e.id for e in first} & {e.id for e in second}
    assert len(first) + len(second) == 10
    assert b.take(10) == []
    a.done([e.id for e in first])  # worker b "dies" holding its batch
    time.sleep(1.3)
    again = a.take(10)
    assert sorted(e.id for e in again) == sorted(e.id for e in second)


def _events(n: int) -> list[dict]:
    return [{"id": f"ev{i}", "user_id": "ann", "query": f"where does deploy {i} run?",
             "response": f"The deploy {i} runs on cluster {i % 3}, managed by team {i % 4}."} for i in range(n)]


def _memories(memory: BeeWeave) -> list:
    """Every memory (a detected pattern's text depends on which events came first: its id only)."""
    every = build_filter({"status": [s.value for s in ChunkStatus]})
    return sorted((c.id, "" if c.id.startswith("pattern:") else c.content) for c in memory.backend.scan(every))


def test_events_accepted_by_one_memory_are_stored_once_by_another(pg_url, tmp_path) -> None:  # noqa: F811
    tenant = new_tenant()
    url = f"{pg_url}&ingest_lease=1"
    # Host A accepts the events but never processes them (its worker is off), then goes away.
    a = BeeWeave.from_url(url, tenant=tenant, embedder="beeweave:hashing-64", ingest=IngestConfig(autostart=False))
    for e in _events(12):
        a.ingest(e)
    assert a.pending_events() == 12
    # A's worker took a batch and died holding it: its lease runs out and B takes it again.
    a.backend.ingest_queue().take(5)
    a.backend.close()  # not A's close(): nothing of A's shutdown runs
    b = BeeWeave.from_url(url, tenant=tenant, embedder="beeweave:hashing-64")
    ref = BeeWeave(str(tmp_path / "ref.db"), embedder="beeweave:hashing-64")  # the same events, embedded
    try:
        assert b.flush(timeout=60) and b.pending_events() == 0
        for e in _events(12):
            ref.ingest(e)
        assert ref.flush(timeout=60)
        assert _memories(b) == _memories(ref)  # every event's memories, once
        for e in _events(3):  # an event accepted again is not stored again
            b.ingest(e)
        assert b.flush(timeout=60)
        assert _memories(b) == _memories(ref)
    finally:
        b.close()
        ref.close()


def test_the_worker_opens_each_tenant_with_the_model_it_was_built_with(pg_url) -> None:  # noqa: F811
    # `beeweave worker` without --embedder opened every tenant with MiniLM, so a tenant built
    # with another model stopped it ("this store was embedded with ..."), for all tenants.
    import threading

    from beeweave_core.store.postgres.worker import run_worker

    tenant = new_tenant()
    a = BeeWeave.from_url(pg_url, tenant=tenant, embedder="beeweave:hashing-64", ingest=IngestConfig(autostart=False))
    a.add("The tenant's first memory records its model.", user_id="ann")
    for e in _events(4):
        a.ingest(e)
    a.close()
    stop, opened, served = threading.Event(), threading.Event(), []
    t = threading.Thread(target=lambda: served.append(run_worker(pg_url, tenants=[tenant], stop=stop,
                                                                 opened=lambda _: opened.set())))
    t.start()
    try:
        assert opened.wait(60)
        b = BeeWeave.from_url(pg_url, tenant=tenant, embedder="beeweave:hashing-64",
                              ingest=IngestConfig(autostart=False))
        deadline = time.monotonic() + 60
        while b.pending_events() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b.pending_events() == 0 and b.count(user_id="ann") > 0
        b.close()
    finally:
        stop.set()
        t.join(60)
    assert served == [1]
