"""90 simulated days with the default tiers: what an agent learns is kept.

Knowledge ingested on day 1 and never used again is still found on day 30 and day 90,
ranked below a memory of the same kind that was used; an event backfilled three days late is
found (its wait for promotion counts from when it was stored); time-sensitive facts (today's
weather, a price) expire by their rule; and each settled memory's history says why it stayed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from beeweave_core import BeeWeave, ChunkStatus, HashingEmbedder, MemoryTier
from beeweave_core.lifecycle import LifecycleConfig
from tests.lifecycle.lifecycle_support import DIM, Clock

USER = "ops-team"


def _event(m: BeeWeave, eid: str, query: str, response: str, when: object) -> str:
    m.ingest({"id": eid, "user_id": USER, "agent_id": "helper", "query": query, "response": response,
              "timestamp": when.isoformat()})  # type: ignore[attr-defined]
    return f"{eid}@{USER}:0"


def _found(m: BeeWeave, query: str, k: int = 5) -> list[str]:
    return [h.id for h in m.search(query, user_id=USER, k=k)]


def test_ninety_days_with_the_default_tiers(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "durable.db"

    def open_store() -> BeeWeave:
        return BeeWeave(path, embedder=HashingEmbedder(DIM), clock=clock,
                        lifecycle=LifecycleConfig(access_flush_interval=0.0))

    m = open_store()
    start = clock.now
    fmt = _event(m, "ev-format", "Which format should the weekly report use?",
                 "Use the Markdown template with a summary table first, then the incident list.", start)
    port = _event(m, "ev-port", "Which port does the billing API use?",
                  "The billing API listens on port 8443 behind the gateway.", start)
    backfilled = _event(m, "ev-backfill", "Where are the on-call runbooks kept?",
                        "The on-call runbooks are kept in the ops wiki under Runbooks/OnCall.",
                        start - timedelta(days=3))
    weather = _event(m, "ev-weather", "What's the weather today?", "Today's weather is sunny, 24 degrees.", start)
    price = m.add("AAPL stock price is $190 today.", user_id=USER, tier="short")
    assert m.flush(30)
    for cid in (fmt, port, backfilled):
        c = m.get(cid)
        assert c.tier is MemoryTier.SHORT and c.expires_at is None, cid
    assert m.get(weather).expires_at is not None and m.get(price).expires_at is not None  # the rules'
    assert backfilled in _found(m, "on-call runbooks wiki")  # three days old, stored now: found

    for day in range(1, 91):
        clock.advance(days=1)
        if day <= 10:  # the port is asked about daily for ten days; the format never again
            assert port in _found(m, "billing API port")
        m.maintain()
        if day in (2, 30, 90):
            m.close()
            m = open_store()
        if day == 2:
            assert m.get(weather).status is ChunkStatus.ARCHIVED  # yesterday's weather is gone
            assert m.get(price).status is ChunkStatus.ARCHIVED
            assert weather not in _found(m, "weather today sunny")
        if day in (30, 90):
            for cid in (fmt, backfilled, port):
                c = m.get(cid)
                assert c.status is ChunkStatus.ACTIVE and c.tier is MemoryTier.LONG, (day, cid)
            assert fmt in _found(m, "weekly report format Markdown template"), day
            assert backfilled in _found(m, "on-call runbooks wiki"), day
            actions = [a["action"] for a in m.audit(fmt)]
            assert "settled" in actions  # the reason it is still there
            # the used memory outranks the unused one for a query both match equally
            both = m.search("the billing API and the weekly report", user_id=USER, k=10)
            ranks = {h.id: i for i, h in enumerate(both)}
            assert m.get(port).access_count >= 10
            assert port in ranks and fmt in ranks and ranks[port] < ranks[fmt], (day, ranks)
    m.close()
