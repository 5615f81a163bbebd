"""Model extraction runs concurrently within ``IngestConfig.max_concurrency``: a 1 s model no
longer means one event per second. Events are still stored in queue order, a failing event
still goes to the dead letters alone, and nothing acknowledged is lost when the store closes
mid-batch."""

from __future__ import annotations

import time

import pytest

from beeweave_core import BeeWeave, EventType, HashingEmbedder, StoreUnavailableError
from beeweave_core.ingest import IngestConfig, LLMExtractor
from beeweave_core.ingest.extract import Extraction
from beeweave_core.records import ProcessedContent
from tests.ingest.ingest_support import SlowModel

pytestmark = pytest.mark.slow


def _events(n: int) -> list[dict[str, str]]:
    return [{"id": f"e{i:03d}", "user_id": "u", "query": f"question number {i} about topic {i}",
             "response": f"answer number {i} with detail {i}"} for i in range(n)]


def _run(m: BeeWeave, events: list[dict[str, str]]) -> tuple[float, list[str]]:
    created: list[str] = []
    m.events.subscribe(lambda e: created.append(e.chunk_id), types=[EventType.CREATED])
    t0 = time.perf_counter()
    for e in events:
        m.ingest(e)
    assert m.flush(120)
    return time.perf_counter() - t0, created


def test_a_1s_model_extracts_within_the_proportional_bound_in_queue_order() -> None:
    # The bar is 100 events in 15 s with a 1 s model; 32 events get the same 0.15 s each.
    model = SlowModel(1.0)
    with BeeWeave(embedder=HashingEmbedder(32), ingest=IngestConfig(extractor=LLMExtractor(model))) as m:
        took, created = _run(m, _events(32))
    assert model.calls == 32 and 1 < model.peak <= 16
    assert took <= 32 * 0.15, f"32 events took {took:.1f} s"
    assert created == [f"e{i:03d}@u:0" for i in range(32)]  # stored in the order queued


def test_the_configured_bound_is_never_exceeded() -> None:
    model = SlowModel(0.2)
    cfg = IngestConfig(extractor=LLMExtractor(model), max_concurrency=4)
    with BeeWeave(embedder=HashingEmbedder(32), ingest=cfg) as m:
        took, created = _run(m, _events(12))
    assert model.peak == 4
    assert took >= 3 * 0.2  # 12 calls, 4 at a time
    assert len(created) == 12


def test_one_at_a_time_when_asked() -> None:
    model = SlowModel(0.05)
    with BeeWeave(embedder=HashingEmbedder(32), ingest=IngestConfig(extractor=LLMExtractor(model),
                                                                    max_concurrency=1)) as m:
        _run(m, _events(6))
    assert model.peak == 1


class Failing:
    """An extractor that fails (outside any fallback) for one question."""

    def __init__(self, bad: str) -> None:
        self.bad = bad

    def extract(self, query: str, response: str, *, content: ProcessedContent | None = None) -> Extraction:
        time.sleep(0.05)
        if query == self.bad:
            raise RuntimeError("extraction broke")
        return Extraction(summary=response[:40])


def test_a_failing_event_goes_to_the_dead_letters_and_the_rest_keep_their_order() -> None:
    events = _events(10)
    with BeeWeave(embedder=HashingEmbedder(32), ingest=IngestConfig(extractor=Failing(events[4]["query"]))) as m:
        _, created = _run(m, events)
        dead = m.dead_letters()
    assert [d.event.id for d in dead] == ["e004"] and "extraction broke" in dead[0].error
    assert created == [f"e{i:03d}@u:0" for i in range(10) if i != 4]


def test_events_acknowledged_before_a_close_mid_batch_are_not_lost(tmp_path) -> None:
    path = tmp_path / "m.db"
    model = SlowModel(0.5)
    cfg = IngestConfig(extractor=LLMExtractor(model), close_timeout=0.1)
    m = BeeWeave(path, embedder=HashingEmbedder(32), ingest=cfg)
    ids = [m.ingest(e) for e in _events(20)]
    time.sleep(0.2)  # the worker is waiting for the model
    m.close()
    time.sleep(0.6)  # the old worker's calls return to a closed store
    with BeeWeave(path, embedder=HashingEmbedder(32), ingest=IngestConfig(extractor=LLMExtractor(SlowModel(0.01)))) as again:
        assert again.flush(60)
        assert sorted(c.id for c in again.get_many([f"{i}@u:0" for i in ids])) == [f"{i}@u:0" for i in ids]


def test_a_store_outage_mid_batch_keeps_the_rest_pending_and_stores_each_once() -> None:
    # Groups of a batch are stored as their extraction finishes; the store failing for the
    # second group leaves it (and what follows) pending, retried once the store is back.
    model = SlowModel(0.05)
    cfg = IngestConfig(extractor=LLMExtractor(model), max_concurrency=4)
    with BeeWeave(embedder=HashingEmbedder(32), ingest=cfg) as m:
        sink = m.parts.ingestion.runtime.memory
        add_many, calls = sink.add_many, []

        def flaky(chunks, **kw):
            calls.append(len(chunks))
            if len(calls) == 2:
                raise StoreUnavailableError("database is locked")
            return add_many(chunks, **kw)

        sink.add_many = flaky
        took, created = _run(m, _events(12))
    assert created == [f"e{i:03d}@u:0" for i in range(12)]  # each once, in queue order
    assert len(calls) >= 4 and calls[0] <= 4  # stored group by group, not the batch at once
