"""The queue and the worker: full-queue policies, dead letters and retry, flush, clean shutdown."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import pytest

from beeweave_core import BeeWeave, EventType, HashingEmbedder, InvalidInputError
from beeweave_core.ingest import Extraction, IngestConfig, OfflineExtractor, QueueFullError, QueueFullPolicy
from beeweave_core.store.base import Capabilities
from beeweave_core.store.sqlite import SQLiteStore
from tests.ingest.ingest_support import everything


class GatedEmbedder(HashingEmbedder):
    """Blocks inside embed_documents until ``gate`` is set; ``entered`` says the worker got there."""

    def __init__(self) -> None:
        super().__init__(32)
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed_documents(self, texts: Any) -> np.ndarray:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return super().embed_documents(texts)


class FailingExtractor:
    """Raises on queries containing ``poison`` while ``broken`` is true."""

    def __init__(self) -> None:
        self.broken = True
        self.inner = OfflineExtractor()

    def extract(self, query: str, response: str, *, content: Any = None) -> Extraction:
        if self.broken and "poison" in query:
            raise RuntimeError("extractor crashed on this one")
        return self.inner.extract(query, response, content=content)


def ev(i: int | str, **kw: Any) -> dict[str, Any]:
    return {"user_id": "u", "id": f"e{i}", "query": f"question number {i} about tea", "response": f"answer {i}: green tea", **kw}


def ids(m: BeeWeave) -> set[str]:
    """The ids of the events' memories (these similar questions also make a pattern memory)."""
    return {c.id for c in everything(m) if not c.id.startswith("pattern:")}


# -- full queue ------------------------------------------------------------------------------------
def test_raise_policy_refuses_at_once_and_writes_nothing(make_memory) -> None:
    m = make_memory(max_pending=2, when_full=QueueFullPolicy.RAISE, autostart=False)
    m.ingest(ev(1))
    m.ingest(ev(2))
    with pytest.raises(QueueFullError):
        m.ingest(ev(3))
    assert m.pending_events() == 2
    assert m.flush(10) and ids(m) == {"e1@u:0", "e2@u:0"}
    m.ingest(ev(3))  # room again
    assert m.flush(10) and "e3@u:0" in ids(m)


def test_block_policy_waits_for_room_then_gives_up(make_memory) -> None:
    m = make_memory(max_pending=1, full_timeout=0.2, autostart=False)
    m.ingest(ev(1))
    t = time.monotonic()
    with pytest.raises(QueueFullError, match="full_timeout"):
        m.ingest(ev(2))
    assert time.monotonic() - t >= 0.2
    assert m.pending_events() == 1


def test_block_policy_proceeds_when_the_worker_makes_room(make_memory) -> None:
    emb = GatedEmbedder()
    m = make_memory(embedder=emb, max_pending=2, batch_size=1, full_timeout=10)
    m.ingest(ev(1))
    assert emb.entered.wait(10)  # the worker holds e1 (still pending until stored)
    m.ingest(ev(2))
    done = threading.Event()
    threading.Thread(target=lambda: (m.ingest(ev(3)), done.set()), daemon=True).start()
    assert not done.wait(0.3)  # blocked: the queue is full
    emb.gate.set()
    assert done.wait(10)
    assert m.flush(10) and ids(m) == {"e1@u:0", "e2@u:0", "e3@u:0"}


def test_drop_oldest_moves_it_to_the_dead_letters_where_nothing_is_lost(make_memory) -> None:
    m = make_memory(max_pending=2, when_full="drop_oldest", autostart=False)
    for i in (1, 2, 3):
        m.ingest(ev(i))
    assert m.pending_events() == 2
    dead = m.dead_letters()
    assert [(d.event.id, d.error) for d in dead] == [("e1", "dropped: queue full")]
    assert m.flush(10) and ids(m) == {"e2@u:0", "e3@u:0"}
    assert m.retry_dead_letters() == 1
    assert m.flush(10) and ids(m) == {"e1@u:0", "e2@u:0", "e3@u:0"} and m.dead_letters() == []


# -- dead letters ---------------------------------------------------------------------------------------
def test_a_failing_event_goes_to_the_dead_letters_and_the_others_pass(make_memory) -> None:
    extractor = FailingExtractor()
    m = make_memory(extractor=extractor)
    m.ingest(ev(1))
    m.ingest(ev("p", query="poison question from bob@example.com", response="never stored"))
    m.ingest(ev(2))
    assert m.flush(10)
    assert ids(m) == {"e1@u:0", "e2@u:0"}
    (dead,) = m.dead_letters()
    assert dead.event.id == "ep" and dead.attempts == 1
    assert "RuntimeError: extractor crashed" in dead.error
    assert dead.event.query == "poison question from [EMAIL]"  # kept redacted
    extractor.broken = False
    assert m.retry_dead_letters(["ep"]) == 1
    assert m.flush(10) and "ep@u:0" in ids(m) and m.dead_letters() == []


def test_a_store_failure_is_pinned_on_the_one_event_that_caused_it(make_memory) -> None:
    class Picky(HashingEmbedder):
        def embed_documents(self, texts: Any) -> np.ndarray:
            if any("explode" in t for t in texts):
                raise ValueError("cannot embed this")
            return super().embed_documents(texts)

    m = make_memory(embedder=Picky(32), autostart=False)
    for e in (ev(1), ev("x", response="explode now"), ev(2)):
        m.ingest(e)
    assert m.flush(10)  # one batch: it fails as a whole, then event by event
    assert ids(m) == {"e1@u:0", "e2@u:0"}
    assert [d.event.id for d in m.dead_letters()] == ["ex"]
    assert m.discard_dead_letters("ex") == 1 and m.dead_letters() == []


def test_events_wait_for_an_unavailable_store_instead_of_dying(tmp_path, clock, caplog) -> None:
    """A store that refuses its writes (locked by another process: the queue's own statements are
    short, the store's writes are what waits) is not the events' fault: they stay pending, are
    retried with backoff, and are stored once the store takes writes again; nothing is
    dead-lettered."""
    from beeweave_core.errors import StoreUnavailableError

    caplog.set_level(logging.WARNING)
    db = tmp_path / "memory.db"
    store = SQLiteStore(db, timeout=0.05)
    m = BeeWeave(backend=store, embedder=HashingEmbedder(32), clock=clock, ingest=IngestConfig(retry_max_delay=0.1))
    down = [True]

    def locked(real):  # type: ignore[no-untyped-def]
        def write(*args, **kwargs):  # type: ignore[no-untyped-def]
            if down[0]:
                raise StoreUnavailableError("the store is unavailable: database is locked")
            return real(*args, **kwargs)
        return write

    store.insert, store.insert_linked = locked(store.insert), locked(store.insert_linked)  # type: ignore[method-assign]
    try:
        m.ingest(ev(1))
        m.ingest(ev(2))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the worker has retried the batch at least twice
            waiting = m.parts.ingestion.runtime.queue().take(10)
            if len(waiting) == 2 and all(e.attempts >= 2 for e in waiting):
                break
            time.sleep(0.02)
        assert [(e.id, e.attempts >= 2) for e in m.parts.ingestion.runtime.queue().take(10)] == [("e1@u", True), ("e2@u", True)]
        assert m.pending_events() == 2 and m.dead_letters() == [] and ids(m) == set()
        down[0] = False
        assert m.flush(30)
        assert ids(m) == {"e1@u:0", "e2@u:0"} and m.dead_letters() == []
        said = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
        assert len(said) == 1  # one warning for the outage, not one per retry
    finally:
        m.close()


def test_retry_of_unknown_ids_does_nothing(make_memory) -> None:
    m = make_memory()
    assert m.retry_dead_letters() == 0 and m.dead_letters() == []
    m.ingest(ev(1))
    assert m.flush(10) and m.retry_dead_letters(["nope"]) == 0
    with pytest.raises(InvalidInputError):
        m.retry_dead_letters([None])


# -- the worker ---------------------------------------------------------------------------------------
def test_ingest_returns_before_the_worker_has_processed_anything(make_memory) -> None:
    emb = GatedEmbedder()
    m = make_memory(embedder=emb)
    m.ingest(ev(1))
    assert emb.entered.wait(10) and ids(m) == set()  # returned; the worker is still embedding
    assert not m.flush(0.05)  # not drained yet
    emb.gate.set()
    assert m.flush(10) and ids(m) == {"e1@u:0"}


def test_autostart_off_keeps_events_until_flush_or_start(make_memory) -> None:
    m = make_memory(autostart=False)
    m.ingest(ev(1))
    time.sleep(0.1)
    assert m.pending_events() == 1 and ids(m) == set()
    m.start_ingest()
    assert m.flush(10) and ids(m) == {"e1@u:0"}


def test_batches_are_embedded_together(make_memory) -> None:
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed_documents(self, texts: Any) -> np.ndarray:
            calls.append(len(texts))
            return super().embed_documents(texts)

    m = make_memory(embedder=Counting(32), autostart=False, batch_size=50)
    for i in range(40):
        m.ingest(ev(i))
    calls.clear()
    assert m.flush(10)
    assert calls[0] == 40  # one embedding call for the whole batch (pattern memories come after)


def test_close_waits_for_the_current_batch_and_stops_the_worker(make_memory, db_path) -> None:
    emb = GatedEmbedder()
    m = make_memory(db_path, embedder=emb)
    m.ingest(ev(1))
    assert emb.entered.wait(10)
    closing = threading.Thread(target=m.close)
    closing.start()
    time.sleep(0.1)
    assert closing.is_alive()  # waiting for the batch in progress
    emb.gate.set()
    closing.join(10)
    assert not closing.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "beeweave-ingest"]
    with BeeWeave(db_path, embedder=HashingEmbedder(32)) as again:
        assert ids(again) == {"e1@u:0"} and again.pending_events() == 0


def test_close_processes_what_an_in_memory_queue_still_holds(make_memory) -> None:
    m = make_memory(autostart=False)
    created: list[str] = []
    m.events.subscribe(lambda e: created.append(e.chunk_id), types=[EventType.CREATED])
    m.ingest(ev(1))
    m.close()
    assert "e1@u:0" in created


def test_flush_from_a_subscriber_on_the_worker_thread_does_not_deadlock(make_memory) -> None:
    m = make_memory()
    answers: list[bool] = []
    m.events.subscribe(lambda e: answers.append(m.flush(5)), types=[EventType.CREATED])
    m.ingest(ev(1))
    assert m.flush(10) and answers  # returned at once inside the worker


def test_a_store_without_a_file_keeps_the_queue_in_memory_or_where_told(tmp_path, caplog) -> None:
    class NoFile:
        """A durable backend that is not a file and has no queue of its own (the default
        ``Capabilities``), its roles played by an in-memory store."""

        capabilities = Capabilities()

        def __init__(self) -> None:
            self._inner = SQLiteStore(None)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    with caplog.at_level(logging.WARNING, logger="beeweave_core.ingest"):
        with BeeWeave(backend=NoFile(), embedder=HashingEmbedder(32)) as m:
            m.ingest(ev(1))
            assert m.flush(10) and ids(m) == {"e1@u:0"}
    assert "kept in memory" in caplog.text
    queue_file = tmp_path / "events.queue"
    with BeeWeave(backend=NoFile(), embedder=HashingEmbedder(32),
                  ingest=IngestConfig(queue_path=queue_file, autostart=False)) as m:
        m.ingest(ev(1))
        assert queue_file.exists() and m.pending_events() == 1


def test_bad_configuration_is_refused() -> None:
    for bad in (dict(max_pending=0), dict(batch_size=-1), dict(when_full="spill"), dict(full_timeout=-1),
                dict(extractor=object())):
        with pytest.raises((InvalidInputError, ValueError)):
            IngestConfig(**bad)
    with pytest.raises(InvalidInputError):
        BeeWeave(embedder=HashingEmbedder(32), ingest={"batch_size": 3})


def test_an_event_id_reused_by_another_user_is_that_users_own_event(make_memory) -> None:
    # A third user trial saw alice's event "run-1" accepted and then dropped without a trace,
    # because bob's event "run-1" had already stored memories under the ids it derives; then
    # it went to the dead letters. Ids carry the user now (beeweave_core.ids): both are stored.
    m = make_memory()
    m.ingest({"id": "run-1", "user_id": "bob", "query": "What is the vault code for the bank?",
              "response": "The vault code is 7731-alpha."})
    assert m.flush(10)
    bob = m.count(user_id="bob")
    m.ingest({"id": "run-1", "user_id": "alice", "query": "What is my favourite colour today?",
              "response": "Your favourite colour today is blue."})
    assert m.flush(10)
    assert m.count(user_id="alice") == 1 and m.count(user_id="bob") == bob and m.dead_letters() == []
    # The same user's event seen again (a crash repair, a retry) is still stored once, quietly.
    m.ingest({"id": "run-2", "user_id": "bob", "query": "Who rotates the vault code?", "response": "Dana does."})
    assert m.flush(10)
    m.parts.ingestion.runtime.store_new(m.parts.ingestion.runtime.pipeline.prepare(
        {"id": "run-2", "user_id": "bob", "query": "Who rotates the vault code?", "response": "Dana does.",
         "timestamp": m.clock().isoformat()}).chunks)  # the pipeline reads stamped events (ingest stamps them)
    assert m.dead_letters() == []
    # An id a tenant-wide caller gave another user's memory still fails the event, never silently.
    m.add("Carol's note.", user_id="carol", chunk_id="run-3@bob:0")
    m.ingest({"id": "run-3", "user_id": "bob", "query": "Where is the spare key?", "response": "Under the mat."})
    assert m.flush(10)
    [dead] = m.dead_letters()
    assert dead.event.id == "run-3" and "belongs to another user" in dead.error
