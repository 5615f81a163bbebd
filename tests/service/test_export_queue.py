"""A user's export holds their events still in the ingest queue and their dead letters.

An export taken while events wait for the worker used to miss them: what the user told the
agent a moment ago was not in "export my data", an import elsewhere lost it, and a forget
left it queued, to be stored after the user was forgotten. The ingestion part now exports
``queued_events`` and ``dead_letters`` (the event as queued, attempts, error, times), an
import queues the pending ones again (processed once: their memory ids derive from the event
id) and puts the dead letters back as dead letters, and a forget deletes both.

Both queues: the table in the SQLite file, and PostgreSQL's own (one tenant per store here).
The worker never runs unless a test starts it (``autostart=False``), so events stay queued.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.ingest import IngestConfig
from beeweave_core.server import open_memory
from beeweave_core.server.service import MemoryService

EMB = "beeweave:hashing-64"
TEXTS = ["My favourite colour is green.", "I work as a nurse in Lyon.", "My cat is called Miso.",
         "I am learning Japanese."]

# (user, state, event id) of the rows a store's queue holds for a user, oldest first
Rows = list[tuple[str, str, str]]


class Stores:
    """Stores on one backend, each opened by name; ``rows(name, user)`` reads the queue table
    itself (not through the code under test)."""

    def __init__(self, tmp_path: Path, kind: str) -> None:
        self.tmp_path, self.kind = tmp_path, kind
        self.opened: list[BeeWeave] = []
        self.tenants: dict[str, str] = {}
        self.schema = ""

    def open(self, name: str, **ingest: Any) -> BeeWeave:
        config = IngestConfig(**{"autostart": False, **ingest})
        if self.kind == "sqlite":
            m = open_memory(self.tmp_path / f"{name}.db", embedder=EMB, ingest=config)
        else:
            from tests.postgres.pg_support import new_tenant, schema_url, server_url

            tenant = self.tenants.setdefault(name, new_tenant())
            m = open_memory(schema_url(server_url(), self.schema), tenant=tenant, embedder=EMB, ingest=config)
        self.opened.append(m)
        return m

    def rows(self, name: str, user: str) -> Rows:
        if self.kind == "sqlite":
            with sqlite3.connect(self.tmp_path / f"{name}.db") as db:
                got = db.execute("SELECT user_id, state, body FROM ingest_events WHERE user_id=? ORDER BY seq",
                                 (user,)).fetchall()
        else:
            import psycopg
            from psycopg import sql

            from tests.postgres.pg_support import server_url

            with psycopg.connect(server_url()) as conn:
                q = sql.SQL("SELECT user_id, state, body FROM {} WHERE tenant=%s AND user_id=%s ORDER BY seq").format(
                    sql.Identifier(self.schema, "ingest_events"))
                got = conn.execute(q, (self.tenants[name], user)).fetchall()
        return [(u, state, json.loads(body)["id"]) for u, state, body in got]

    def close(self) -> None:
        for m in self.opened:
            m.close()


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    from tests.postgres.pg_support import fresh_schema

    with fresh_schema() as schema:
        yield schema


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: Any, tmp_path: Path) -> Iterator[Stores]:
    s = Stores(tmp_path, request.param)
    if request.param == "postgres":
        s.schema = request.getfixturevalue("pg_schema")
    yield s
    s.close()


def _queue(m: BeeWeave) -> None:
    """alice: a dead letter (the oldest, dropped when the queue was full) and three pending
    events; bob: one pending event of the same id as one of alice's."""
    for i, text in enumerate(TEXTS):
        m.ingest({"user_id": "alice", "id": f"ev{i}", "query": text, "response": "Noted."})
    m.ingest({"user_id": "bob", "id": "ev1", "query": "I live in Oslo.", "response": "Noted."})


def _source(stores: Stores) -> BeeWeave:
    m = stores.open("src", max_pending=4, when_full="drop_oldest")
    _queue(m)
    assert stores.rows("src", "alice") == [("alice", "dead", "ev0"), *(("alice", "pending", f"ev{i}") for i in (1, 2, 3))]
    return m


def _export(m: BeeWeave, user: str = "alice") -> dict[str, Any]:
    return json.loads(json.dumps(MemoryService(m).export_user(user), default=str))


def _memories(m: BeeWeave, user: str = "alice") -> list[str]:
    return sorted(c.id for c in m.get_all(user_id=user, limit=1000).items)


def test_an_export_holds_the_users_queued_events_and_dead_letters(stores: Stores) -> None:
    m = _source(stores)
    data = _export(m)
    assert [e["event"]["id"] for e in data["queued_events"]] == ["ev1", "ev2", "ev3"]
    assert [e["event"]["query"] for e in data["queued_events"]] == TEXTS[1:]
    assert all(e["event"]["user_id"] == "alice" and e["attempts"] == 0 for e in data["queued_events"])
    [dead] = data["dead_letters"]
    assert dead["event"]["query"] == TEXTS[0] and dead["error"] == "dropped: queue full" and dead["failed_at"]
    assert not MemoryService.export_is_empty(data)  # a user with only queued events has data
    assert m.user_data.users() == ["alice", "bob"]  # and is among the users (copy, reset)
    bob = _export(m, "bob")
    assert [e["event"]["query"] for e in bob["queued_events"]] == ["I live in Oslo."] and bob["dead_letters"] == []
    assert "Oslo" not in json.dumps(data)  # another user's event of the same id is not in alice's export


def test_imported_events_are_processed_once_and_dead_letters_stay_dead(stores: Stores) -> None:
    src = _source(stores)
    data = _export(src)
    src.start_ingest()
    assert src.flush(60)
    want = _memories(src)  # what the events become where they were ingested
    assert want

    dst = stores.open("dst")
    report = dst.import_user(data)
    assert report.other["queued_events"] == 3 and report.other["dead_letters"] == 1
    assert stores.rows("dst", "alice") == [("alice", "dead", "ev0"), *(("alice", "pending", f"ev{i}") for i in (1, 2, 3))]
    assert stores.rows("dst", "bob") == []
    assert _export(dst)["dead_letters"] == data["dead_letters"]  # as it was: error, attempts, times
    assert [e["event"] for e in _export(dst)["queued_events"]] == [e["event"] for e in data["queued_events"]]

    dst.start_ingest()
    assert dst.flush(60)
    assert _memories(dst) == want
    assert stores.rows("dst", "alice") == [("alice", "dead", "ev0")]
    [letter] = dst.dead_letters()
    assert letter.event.query == TEXTS[0] and letter.error == "dropped: queue full"

    dst.import_user(data)  # again: the events are queued again, and store nothing twice
    assert dst.flush(60)
    assert _memories(dst) == want

    assert dst.retry_dead_letters() == 1 and dst.flush(60)
    assert set(want) < set(_memories(dst)) and stores.rows("dst", "alice") == []


def test_forget_deletes_the_users_queued_events_and_dead_letters(stores: Stores) -> None:
    m = _source(stores)
    bob = stores.rows("src", "bob")
    m.forget_user("alice")
    assert stores.rows("src", "alice") == [] and stores.rows("src", "bob") == bob
    assert MemoryService.export_is_empty(_export(m))
    m.start_ingest()
    assert m.flush(60)
    assert _memories(m) == [] and _memories(m, "bob")  # nothing of alice came back; bob's was stored


class GatedEmbedder(HashingEmbedder):
    """Blocks the worker inside storing a batch until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__(64)
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed_documents(self, texts: Any) -> Any:
        if threading.current_thread().name == "beeweave-ingest":
            self.entered.set()
            assert self.gate.wait(10), "the test never opened the gate"
        return super().embed_documents(texts)


def test_a_forget_while_the_worker_stores_the_users_batch_is_not_undone_by_it(tmp_path: Path) -> None:
    emb = GatedEmbedder()
    with BeeWeave(tmp_path / "m.db", embedder=emb, ingest=IngestConfig(autostart=False)) as m:
        _queue(m)
        m.start_ingest()
        assert emb.entered.wait(10)  # the worker holds the batch (taken, out of the queue's reach)
        forget = threading.Thread(target=m.forget_user, args=("alice",))
        forget.start()
        time.sleep(0.2)
        emb.gate.set()
        forget.join(10)
        assert not forget.is_alive() and m.flush(30)
        assert _memories(m) == [] and _memories(m, "bob")


class GatedExtractor:
    """Blocks the worker while it extracts a batch (before it stores anything) until ``gate``."""

    def __init__(self) -> None:
        from beeweave_core.ingest.extract import OfflineExtractor

        self.inner = OfflineExtractor()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def extract(self, query: str, response: str, *, content: Any = None) -> Any:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return self.inner.extract(query, response, content=content)


def test_a_forget_while_the_worker_extracts_the_users_batch_drops_their_events(tmp_path: Path) -> None:
    extractor = GatedExtractor()
    with BeeWeave(tmp_path / "m.db", embedder=EMB, ingest=IngestConfig(autostart=False, extractor=extractor)) as m:
        _queue(m)
        m.start_ingest()
        assert extractor.entered.wait(10)
        m.forget_user("alice")  # returns at once: the worker has stored nothing yet
        extractor.gate.set()
        assert m.flush(30)
        assert _memories(m) == [] and _memories(m, "bob")


def test_export_forget_import_brings_the_queue_back(stores: Stores) -> None:
    m = _source(stores)
    data = _export(m)
    svc = MemoryService(m)
    m.forget_user("alice")  # as MemoryService.forget_user ends (it processes the queue first)
    svc.import_user(data)
    assert [(e["event"]["id"], e["attempts"], e["error"]) for e in _export(m)["queued_events"]] == \
        [(e["event"]["id"], e["attempts"], e["error"]) for e in data["queued_events"]]
    assert _export(m)["dead_letters"] == data["dead_letters"]


Spoil = Callable[[dict[str, Any]], None]


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d["queued_events"][1]["event"].update(user_id="bob"), r"queued_events\[1\].event belongs to user 'bob'"),
    (lambda d: d["queued_events"][0]["event"].update(query="", response=""), "not an event"),
    (lambda d: d["queued_events"][0]["event"].update(surprise=1), "not an event"),
    (lambda d: d["queued_events"][2].update(event="ev3"), "must be a JSON object"),
    (lambda d: d["queued_events"].append(d["queued_events"][0]), "holds the event 'ev1' twice"),
    (lambda d: d["dead_letters"].append({**d["queued_events"][0], "failed_at": d["dead_letters"][0]["failed_at"]}),
     "holds the event 'ev1' twice"),
    (lambda d: d["dead_letters"][0].update(failed_at="never"), "not a time"),
    (lambda d: d["dead_letters"][0].update(attempts=-1), "attempts must be a whole number"),
    (lambda d: d["dead_letters"][0]["event"].pop("id"), "event id"),
    (lambda d: d.update(dead_letters={"ev0": {}}), "dead_letters must be a JSON list"),
])
def test_a_bad_queued_event_imports_nothing(tmp_path: Path, spoil: Spoil, message: str) -> None:
    stores = Stores(tmp_path, "sqlite")
    try:
        data = _export(_source(stores))
        spoil(data)
        dst = stores.open("dst")
        with pytest.raises(InvalidInputError, match=message):
            dst.import_user(data)
        assert dst.pending_events() == 0 and dst.dead_letters() == [] and dst.count() == 0
    finally:
        stores.close()


def test_an_export_without_the_queue_sections_imports(tmp_path: Path) -> None:
    stores = Stores(tmp_path, "sqlite")
    try:
        src = _source(stores)
        src.add("A plain memory.", user_id="alice", chunk_id="a-1")
        data = _export(src)
        data.pop("queued_events", None), data.pop("dead_letters", None)  # as the code before them exported
        dst = stores.open("dst")
        report = dst.import_user(data)
        assert report.memories == 1 and "queued_events" not in report.other
        assert dst.pending_events() == 0 and dst.dead_letters() == []
    finally:
        stores.close()
