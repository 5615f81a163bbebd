"""A live worker gets its own leases back after a database outage (PostgresEventQueue).

A user trial stopped the server (``pg_ctl -m immediate stop``) under load and restarted it:
one event stayed leased by a live worker for the whole 120 s lease, and ``flush(60)`` on
both processes returned False. The claim had committed but its reply was lost with the
connection (or the worker's give-back, ``done``/``postpone``, failed while the server was
down), so the worker no longer knew it held the lease and nobody could claim the event.

The outage is simulated deterministically: the store's connections are wrapped so that one
chosen statement runs (and commits: autocommit) before the connection breaks, or breaks
before it runs, as a connection lost to a stopped server does. The worker must get the
event back at once; another worker's live lease must still be respected.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from beeweave_core import BeeWeave, ChunkStatus
from beeweave_core.errors import StoreUnavailableError
from beeweave_core.filters import build_filter
from beeweave_core.ingest import IngestConfig
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.postgres.ingest_queue import PostgresEventQueue
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow

EMBEDDER = "beeweave:hashing-64"


def _claim(text: str) -> bool:
    return "ingest_events" in text and "make_interval(" in text  # take()'s UPDATE ... SET lease_until


def _delete(text: str) -> bool:
    return text.lstrip().startswith("DELETE FROM") and "ingest_events" in text  # done()


def _postpone(text: str) -> bool:
    return "ingest_events" in text and "attempts = attempts + 1, error" in text  # postpone()


class _Conn:
    """A pooled connection whose next statement matching a rule loses its connection."""

    def __init__(self, conn: psycopg.Connection, lossy: _Lossy) -> None:
        self._conn, self._lossy = conn, lossy

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        when = self._lossy.match(query)
        if when is None:
            return self._conn.execute(query, params, **kw)
        if when == "after":  # the statement commits; its reply never arrives
            self._conn.execute(query, params, **kw)
        self._conn.close()  # the pool discards a closed connection
        raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _Lossy:
    """Wraps a store's connections: ``lose(rule, when)`` breaks the connection of the next
    statement for which ``rule(text)`` holds, ``after`` it committed or ``before`` it ran."""

    def __init__(self, store: PostgresStore) -> None:
        self._real = store.db.conn
        self._rules: list[tuple[Callable[[str], bool], str]] = []
        self.lost: list[str] = []
        store.db.conn = self._wrapped  # type: ignore[method-assign]

    def lose(self, rule: Callable[[str], bool], when: str) -> None:
        self._rules.append((rule, when))

    def match(self, query: Any) -> str | None:
        text = query if isinstance(query, str) else str(query)
        for i, (rule, when) in enumerate(self._rules):
            if rule(text):
                del self._rules[i]
                self.lost.append(when)
                return when
        return None

    @contextmanager
    def _wrapped(self, *, write: bool = False) -> Iterator[Any]:
        with self._real(write=write) as conn:
            yield _Conn(conn, self)


def _event(i: int, user: str = "ann") -> tuple[str, str, str]:
    eid = f"e{i:03d}"
    return eid, user, json.dumps({"id": eid, "user_id": user, "content": f"fact number {i}"})


def _lease(store: PostgresStore, eid: str) -> tuple[str | None, float | None]:
    """Who holds ``eid``'s lease, and for how many more seconds."""
    with store.db.conn() as conn:
        row = conn.execute(store.db.q("SELECT leased_by, extract(epoch FROM lease_until - now()) FROM @ingest_events "
                                    "WHERE tenant = %s AND id = %s"), (store.tenant, eid)).fetchone()
    assert row is not None
    return row[0], None if row[1] is None else float(row[1])


@pytest.fixture
def store(pg_url):  # noqa: F811
    s = PostgresStore(pg_url, tenant=new_tenant(), pool_size=2)
    yield s
    s.close()


def test_a_claim_whose_reply_was_lost_is_taken_back_by_its_worker_not_by_another(store) -> None:
    lossy = _Lossy(store)
    a, b = PostgresEventQueue(store.db), PostgresEventQueue(store.db)
    a.put_many([_event(i) for i in range(3)])
    lossy.lose(_claim, "after")
    with pytest.raises(StoreUnavailableError):
        a.take(10)
    assert lossy.lost == ["after"]
    holder, left = _lease(store, "e000")
    assert holder == a.worker and left is not None and left > 100  # committed: a's lease, a does not know it
    assert b.take(10) == []  # another worker never takes a live lease
    assert [e.id for e in a.take(10)] == ["e000", "e001", "e002"]  # a takes its own back at once
    assert a.take(10) == [] and b.take(10) == []  # the batch a holds now is nobody's to take again
    a.done(["e000", "e001", "e002"])
    assert a.pending_count() == 0


@pytest.mark.parametrize("give_back", ["done", "postpone"])
def test_a_give_back_that_failed_leaves_no_lease_in_the_way(store, give_back: str) -> None:
    lossy = _Lossy(store)
    a, b = PostgresEventQueue(store.db), PostgresEventQueue(store.db)
    a.put_many([_event(i) for i in range(2)])
    assert [e.id for e in a.take(10)] == ["e000", "e001"]
    lossy.lose(_delete if give_back == "done" else _postpone, "before")  # the server is down
    with pytest.raises(StoreUnavailableError):
        getattr(a, give_back)(["e000", "e001"], *(["StoreUnavailableError: down"] if give_back == "postpone" else []))
    assert _lease(store, "e000")[0] == a.worker
    assert b.take(10) == []
    assert [e.id for e in a.take(10)] == ["e000", "e001"]  # a takes the batch again, not after 120 s


def test_a_live_lease_of_another_worker_is_respected(store) -> None:
    a, b, c = PostgresEventQueue(store.db, lease=1.0), PostgresEventQueue(store.db), PostgresEventQueue(store.db)
    a.put_many([_event(i) for i in range(2)])
    assert len(a.take(10)) == 2
    b.postpone(["e000", "e001"], "StoreUnavailableError: down")  # not b's lease: nothing is given back
    assert c.take(10) == [] and b.take(10) == []
    time.sleep(1.3)  # a's lease runs out (a died, or is slow): b takes the batch
    assert [e.id for e in b.take(10)] == ["e000", "e001"]
    a.postpone(["e000", "e001"], "StoreUnavailableError: down")  # a's late give-back is not b's
    assert _lease(store, "e000")[0] == b.worker
    assert c.take(10) == [] and a.take(10) == []


def _memories(memory: BeeWeave) -> list[tuple[str, str]]:
    every = build_filter({"status": [s.value for s in ChunkStatus]})
    return sorted((c.id, "" if c.id.startswith("pattern:") else c.content) for c in memory.backend.scan(every))


def _ingest_events(n: int) -> list[dict]:
    return [{"id": f"ev{i}", "user_id": "ann", "query": f"where does deploy {i} run?",
             "response": f"The deploy {i} runs on cluster {i % 3}, managed by team {i % 4}."} for i in range(n)]


@pytest.mark.parametrize("outage", ["claim reply lost", "give-back failed"])
def test_the_worker_stores_the_event_within_seconds_after_an_outage(pg_url, outage: str) -> None:  # noqa: F811
    tenant = new_tenant()
    # Two processes on one tenant; only a's worker runs until the flushes (autostart off).
    a = BeeWeave.from_url(pg_url, tenant=tenant, embedder=EMBEDDER, ingest=IngestConfig(autostart=False))
    b = BeeWeave.from_url(pg_url, tenant=tenant, embedder=EMBEDDER, ingest=IngestConfig(autostart=False))
    try:
        lossy = _Lossy(a.backend)
        if outage == "claim reply lost":
            lossy.lose(_claim, "after")
        else:  # the memories are stored, then the server goes: done and postpone both fail
            lossy.lose(_delete, "before")
            lossy.lose(_postpone, "before")
        for e in _ingest_events(3):
            a.ingest(e)
        started = time.monotonic()
        assert a.flush(timeout=15), f"pending {a.pending_events()}"
        assert time.monotonic() - started < 10  # the retry, not the 120 s lease
        assert lossy.lost == (["after"] if outage == "claim reply lost" else ["before", "before"])
        assert b.flush(timeout=5) and b.pending_events() == 0
        # Exactly once: the memories of the same events ingested without an outage.
        ref = BeeWeave.from_url(pg_url, tenant=new_tenant(), embedder=EMBEDDER)
        try:
            for e in _ingest_events(3):
                ref.ingest(e)
            assert ref.flush(timeout=30)
            assert _memories(b) == _memories(ref) and _memories(b)
        finally:
            ref.close()
    finally:
        a.close()
        b.close()
