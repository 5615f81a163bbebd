"""Statistics (beeweave_core.stats), in process. The HTML report is tested in tests/console/test_report.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.server.service import MemoryService
from beeweave_core.stats import SEARCHES, StatsRecorder, compute_stats

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _open(path, clock):
    return BeeWeave(path, embedder=HashingEmbedder(32), clock=clock,
                    lifecycle=LifecycleConfig(access_flush_interval=0.0))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def filled(tmp_path, clock):
    """Three days of memories from two agents, a used memory and a few timed searches."""
    m = _open(tmp_path / "m.db", clock)
    rows = []
    for day in range(3):
        for i in range(day + 1):
            rows.append({"content": f"deploy note {day}-{i}: the api runs on kubernetes cluster {i}",
                         "user_id": "alice" if i % 2 == 0 else "bob", "agent_id": "ops-bot" if i else "docs-bot",
                         "session_id": f"s{day}", "timestamp": T0 + timedelta(days=day, hours=i),
                         "intent": "information_query" if i else None, "tags": ["deploy"]})
    m.add_many(rows)
    yield m
    m.close()


def test_counts_growth_and_distributions(filled):
    s = compute_stats(filled)
    assert s.total == 6 and s.by_status["active"] == 6 and s.by_status["pending"] == 0
    assert s.growth == [("2025-03-01", 1, 1), ("2025-03-02", 2, 3), ("2025-03-03", 3, 6)]
    assert s.by_agent == {"ops-bot": 3, "docs-bot": 3}
    assert s.by_intent == {"(none)": 3, "information_query": 3}
    assert [m.timestamp[:10] for m in s.newest[:3]] == ["2025-03-03"] * 3
    assert compute_stats(filled, user_id="bob").total == 2
    assert s.latency.count == 0 and s.used_share is None


def test_latency_percentiles_and_used_share(filled, clock):
    rec = StatsRecorder(filled, batch=1000, interval=60)
    ms = [float(x) for x in range(1, 101)]
    hits = filled.search("kubernetes cluster", user_id="alice", k=2)
    for i, v in enumerate(ms):
        rec.record_search(v, hits if i < 10 else [], user_id="alice")
    clock.now += timedelta(minutes=5)
    filled.feedback([hits[0].id], "used")  # the recorder listens for it
    s = compute_stats(filled, recorder=rec)
    assert (s.latency.count, s.latency.p50, s.latency.p95, s.latency.p99) == (
        100, *(round(float(p), 3) for p in np.percentile(ms, [50, 95, 99])))
    assert s.searches == 100 and s.searches_with_hits == 10 and s.searches_used == 10
    assert s.used_share == 0.1
    assert [m.id for m in s.hottest][:1] == [hits[0].id] and s.hottest[0].used == 1
    # A search after the last "used" signal does not count as leading to use.
    clock.now += timedelta(minutes=5)
    rec.record_search(5.0, hits, user_id="alice")
    assert compute_stats(filled, recorder=rec).searches_used == 10
    rec.close()


def test_samples_persist_roll_and_are_forgotten_with_the_user(tmp_path, clock):
    path = tmp_path / "m.db"
    m = _open(path, clock)
    svc = MemoryService(m, recorder=StatsRecorder(m, capacity=50, batch=7))
    svc.memory.add("alice prefers tea in the morning", user_id="alice")
    svc.memory.add("bob prefers coffee", user_id="bob")
    for _ in range(60):
        svc.search("tea", user_id="alice")
    svc.search("coffee", user_id="bob")
    svc.close()  # writes what is pending
    m2 = _open(path, clock)
    try:
        s = compute_stats(m2)
        assert s.searches == 50  # the newest 50: a rolling sample
        assert compute_stats(m2, user_id="bob").searches == 1
        MemoryService(m2).forget_user("alice")
        assert compute_stats(m2, user_id="alice").searches == 0
        assert [v["user_id"] for _, v in m2.backend.kv_scan(SEARCHES)] == ["bob"]
    finally:
        m2.close()
