"""An event's default time is the store's clock, whether it is a ``KnowledgeEvent`` or a dict:
a store run on a test's or a replay's clock must not mix in wall-clock times."""

from __future__ import annotations

from beeweave_core.ingest import KnowledgeEvent
from tests.ingest.ingest_support import everything


def test_an_event_object_without_a_time_takes_the_stores_clock(make_memory, clock) -> None:
    m = make_memory()
    m.ingest(KnowledgeEvent(user_id="u", query="Which port does staging use?", response="Staging listens on 5433."))
    m.ingest({"user_id": "u", "query": "Which port does prod use?", "response": "Prod listens on 5432."})
    assert m.flush(10)
    stamps = {c.timestamp for c in everything(m, user_id="u")}
    assert stamps == {clock.now}


def test_an_event_objects_own_time_is_kept(make_memory, clock) -> None:
    m = make_memory()
    event = KnowledgeEvent(user_id="u", query="Which port does staging use?", response="5433.",
                           timestamp="2024-01-02T03:04:05+00:00")
    m.ingest(event)
    assert m.flush(10)
    assert [c.timestamp.isoformat() for c in everything(m, user_id="u")] == ["2024-01-02T03:04:05+00:00"]
    assert event.at == event.timestamp
