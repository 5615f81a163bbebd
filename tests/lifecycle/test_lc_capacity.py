"""Capacity: above the per-user limit, the lowest eviction score ln(access+1)·w1 + 1/(idle days+1)·w2
goes first; pinned memories are never evicted."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from beeweave_core import ChunkStatus, EventType
from beeweave_core.lifecycle.expiry import eviction_score


def test_eviction_score_formula(make, clock) -> None:
    m = make(evict_access_weight=2.0, evict_age_weight=3.0)
    a = m.add("alpha", user_id="u", timestamp=clock.now - timedelta(days=4))
    for _ in range(3):
        m.feedback([a], "used")
    # used just now: idle for 0 days, however old the memory is
    assert eviction_score(m.get(a), clock.now, m.lifecycle) == pytest.approx(math.log(4) * 2 + 3 / 1)


def test_maintain_evicts_the_lowest_scores_first(make, clock) -> None:
    m = make(capacity=3, capacity_on_insert=False)
    old_unused = m.add("old and never used", user_id="u", timestamp=clock.now - timedelta(days=30))
    old_used = m.add("old but used a lot", user_id="u", timestamp=clock.now - timedelta(days=30))
    mid = m.add("ten days old", user_id="u", timestamp=clock.now - timedelta(days=10))
    new = m.add("brand new", user_id="u")
    pinned = m.add("old, pinned", user_id="u", timestamp=clock.now - timedelta(days=90), pinned=True)
    other = m.add("another user's", user_id="v", timestamp=clock.now - timedelta(days=90))
    for _ in range(5):
        m.feedback([old_used], "used")
    report = m.maintain()
    assert report.evicted == 2 and report.archived == 2
    assert m.get(old_unused).status is ChunkStatus.ARCHIVED and m.get(mid).status is ChunkStatus.ARCHIVED
    for cid in (old_used, new, pinned, other):
        assert m.get(cid).status is ChunkStatus.ACTIVE
    assert m.get(mid).metadata["archived_reason"] == "evicted"
    assert m.count(user_id="u") == 3 and m.maintain().evicted == 0


def test_capacity_is_enforced_on_insert(make, clock) -> None:
    m = make(capacity=2, evict_action="delete")
    seen = []
    m.events.subscribe(seen.append, types=["memory.deleted"])
    first = m.add("first", user_id="u")
    clock.advance(days=3)
    m.add("second", user_id="u")
    m.add("third", user_id="u")
    assert not m.backend.contains([first]) and m.count(user_id="u") == 2
    assert [ev.chunk_id for ev in seen] == [first]
    assert m.audit(first)[0]["reason"] == "evicted"


def test_pinned_memories_may_exceed_the_capacity(make) -> None:
    m = make(capacity=1)
    a = m.add("one", user_id="u", pinned=True)
    b = m.add("two", user_id="u", pinned=True)
    c = m.add("three", user_id="u")
    assert [m.get(x).status for x in (a, b, c)] == [ChunkStatus.ACTIVE, ChunkStatus.ACTIVE, ChunkStatus.ARCHIVED]


def test_eviction_by_archive_sends_an_update_event(make, clock) -> None:
    m = make(capacity=1)
    seen = []
    m.events.subscribe(seen.append, types=[EventType.UPDATED], user_id="u")
    a = m.add("one", user_id="u", timestamp=clock.now - timedelta(days=9))
    m.add("two", user_id="u")
    (ev,) = seen
    assert ev.chunk_id == a and ev.data["reason"] == "evicted" and ev.data["fields"] == ["status"]
