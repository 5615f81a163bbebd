"""The event log's ring of recent events (what SSE listeners read without SQLite) holds each
event as the durable log reads it back."""

from __future__ import annotations

from datetime import datetime, timezone

from beeweave_core.events import EventType, MemoryEvent
from beeweave_core.server.event_log import EventFilter, EventLog


def test_the_ring_holds_an_event_as_the_durable_log_reads_it():
    """The ring's copy is decoded from the row's JSON (a datetime as text, a tuple as a list),
    so a listener served from the ring sees what one reading the log sees."""
    log = EventLog(None)
    log.append(MemoryEvent(EventType.UPDATED, chunk_id="m1", user_id="u", tags=("t",),
                           data={"when": datetime(2026, 1, 2, tzinfo=timezone.utc), "ids": ("a", "b")}))
    found = log.recent.after(0, 500)
    assert found is not None
    (ring, _), = found[0]
    [stored], _ = log.read(0, EventFilter())
    assert ring == stored and ring["data"] == {"when": "2026-01-02 00:00:00+00:00", "ids": ["a", "b"]}
    log.close()
