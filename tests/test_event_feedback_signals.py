"""Signals that arrive inside a knowledge event: the event's own rating acts on the memories
it stored (as the same rating through ``feedback()`` would, once per event), and a tool
result with a structured failed status is a failed tool call."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, StoreUnavailableError
from beeweave_core.ingest import IngestConfig
from beeweave_core.ingest.queue import SQLiteEventQueue
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.lifecycle.attribution import tool_failed
from tests.ingest.ingest_support import Clock
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

EVENT_ID = "run-42"
IDS = [f"{EVENT_ID}@ann:0", f"{EVENT_ID}@ann:1"]  # the turn memory and the tool call's memory


def _event(feedback: float | None) -> dict[str, Any]:
    return {"id": EVENT_ID, "user_id": "ann", "feedback": feedback,
            "query": "How do I rotate the API keys of the billing service?",
            "response": "Run `billing keys rotate --grace 24h`, then redeploy the workers.",
            "intermediate_steps": [{"tool": "runbook", "input": "billing keys",
                                    "output": "Key rotation: the old key stays valid during the grace period; "
                                              "workers pick the new key up on their next restart."}]}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, clock: Clock, tmp_path: Path) -> Iterator[Callable[..., BeeWeave]]:
    """``open_store(name)``: a store on the test clock (a SQLite file, or a PostgreSQL tenant)
    named ``name``; the same name opens the same store again. Closed at the end."""
    opened: list[BeeWeave] = []
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    tenants: dict[str, str] = {}

    def _open(name: str, **ingest: Any) -> BeeWeave:
        # No merge on insert: the test compares each memory with its twin, not with a merged group.
        kw: dict[str, Any] = dict(embedder=HashingEmbedder(64), clock=clock, ingest=IngestConfig(**ingest),
                                  lifecycle=LifecycleConfig(merge_on_insert=False, access_flush_interval=0.0))
        if url is None:
            m = BeeWeave(tmp_path / f"{name}.db", **kw)
        else:
            m = BeeWeave.from_url(url, tenant=tenants.setdefault(name, new_tenant("evfb")), **kw)
        opened.append(m)
        return m

    yield _open
    for m in opened:
        m.close()


def _state(m: BeeWeave) -> list[tuple[Any, ...]]:
    """What a rating changes on each of the event's memories."""
    out = []
    for c in (m.get(i) for i in IDS):
        out.append((c.id, c.weight, c.reinforced_at, c.tier, c.access_count, c.status,
                    c.metadata.get("feedback"), c.metadata.get("stale")))
    return out


@pytest.mark.parametrize("rating, signal", [(1.0, "up"), (-1.0, "down"), (0.5, "up"), (-2.0, "down")])
def test_an_events_rating_acts_like_the_same_rating_through_feedback(open_store, clock, rating, signal) -> None:
    rated = open_store("rated")
    rated.ingest(_event(rating))
    assert rated.flush(timeout=60)
    twin = open_store("twin")  # the same event unrated, then rated through the feedback API
    twin.ingest(_event(None))
    assert twin.flush(timeout=60)
    unrated = _state(twin)
    twin.feedback(IDS, signal)
    assert _state(rated) == _state(twin) != unrated
    assert all(rated.get(i).metadata["feedback"][signal] == 1 for i in IDS)


def test_an_unrated_or_neutral_event_changes_no_weight(open_store) -> None:
    m = open_store("neutral")
    m.ingest(_event(0.0))
    assert m.flush(timeout=60)
    for c in (m.get(i) for i in IDS):
        assert c.weight == 1.0 and c.reinforced_at is None and "feedback" not in c.metadata


def test_an_event_processed_again_is_rated_once(open_store, clock) -> None:
    m = open_store("again")
    m.ingest(_event(1.0))
    assert m.flush(timeout=60)
    once = _state(m)
    clock.advance(hours=2)
    m.ingest(_event(1.0))  # the same event id again: nothing new to store, nothing to rate
    assert m.flush(timeout=60)
    assert _state(m) == once
    assert all(m.get(i).metadata["feedback"] == {"up": 1, "down_streak": 0} for i in IDS)


def test_a_rating_sent_only_with_a_repeated_event_id_is_not_applied(open_store) -> None:
    # An event id already processed is not processed again: its memories keep what they were stored with.
    m = open_store("late")
    m.ingest(_event(None))
    assert m.flush(timeout=60)
    before = _state(m)
    m.ingest(_event(1.0))
    assert m.flush(timeout=60)
    assert _state(m) == before


def test_a_batch_retried_after_its_rating_is_not_rated_again(clock, tmp_path, monkeypatch) -> None:
    # The worker stores and rates an event, then marking it done fails (the store was
    # unavailable): the batch stays pending and is processed again.
    done = SQLiteEventQueue.done
    calls: list[int] = []

    def flaky_done(self: SQLiteEventQueue, ids: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise StoreUnavailableError("the queue is unavailable for a moment")
        done(self, ids)

    monkeypatch.setattr(SQLiteEventQueue, "done", flaky_done)
    m = BeeWeave(tmp_path / "retry.db", embedder=HashingEmbedder(64), clock=clock, ingest=IngestConfig(),
                 lifecycle=LifecycleConfig(merge_on_insert=False))
    try:
        m.ingest(_event(1.0))
        assert m.flush(timeout=60) and len(calls) >= 2
        for c in (m.get(i) for i in IDS):
            assert c.metadata["feedback"]["up"] == 1
            assert c.weight == pytest.approx(1.0 + LifecycleConfig().up_delta)
    finally:
        m.close()


# -- tool outcomes --------------------------------------------------------------------------
@pytest.mark.parametrize("output", [
    {"status": "failed"}, {"status": "FAILED", "detail": "quota exceeded"}, {"status": "Failure"},
    {"status": "error", "message": "timeout"}, {"ok": False}, {"success": False, "data": None},
    '{"status": "failed", "reason": "quota exceeded"}', '  {"ok": false}\n',
])
def test_a_structured_failed_status_is_a_failure(output) -> None:
    assert tool_failed(output) is True


@pytest.mark.parametrize("output", [
    {"status": "ok"}, {"status": "succeeded"}, {"status": "completed", "failed": 0}, {"ok": True},
    {"success": True}, {"ok": 0}, {"status": None},
    "The import failed for 2 of 300 rows; the rest were loaded.", "status: failed tests are listed below",
    '{"status": "ok", "note": "retry failed jobs later"}', "{not json: failed}", '["failed"]',
])
def test_a_result_that_merely_mentions_failure_is_not_one(output) -> None:
    assert tool_failed(output) is False
