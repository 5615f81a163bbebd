"""A search hit promotes a short-term memory at the use that lifts it over the bar, whether
its earlier accesses are written yet (searches in quick succession) or not."""

from __future__ import annotations

import pytest

from beeweave_core import MemoryTier
from tests.lifecycle.lifecycle_support import unit


@pytest.mark.parametrize("interval", [60.0, 0.0], ids=["batched", "written-at-once"])
def test_quick_searches_promote_at_the_seventh_use(make, interval) -> None:
    m = make(access_flush_interval=interval)  # default TierConfig: ln(1 + 7) >= 2.0 > ln(1 + 6)
    short = m.add("the staging cluster restarts at midnight", user_id="u", tier="short", embedding=unit(1, 0))
    tiers = []
    for _ in range(8):  # no pause, no flush: with interval 60 the accesses wait in the recorder
        assert short in {h.id for h in m.search("cluster", user_id="u", k=5, query_embedding=unit(1, 0))}
        tiers.append(m.get(short).tier)
    assert tiers == [MemoryTier.SHORT] * 6 + [MemoryTier.LONG] * 2
    m.flush()
    c = m.get(short)
    assert c.access_count == 8 and c.tier is MemoryTier.LONG and c.expires_at is None
    promoted = [a for a in m.audit(short) if a.get("action") == "promoted"]
    assert len(promoted) == 1 and promoted[0].get("reason", "used") == "used"


def test_pending_uses_are_not_counted_twice_once_written(make) -> None:
    m = make(access_flush_interval=60.0)
    short = m.add("the staging cluster restarts at midnight", user_id="u", tier="short", embedding=unit(1, 0))
    for i in range(6):
        m.search("cluster", user_id="u", k=5, query_embedding=unit(1, 0))
        if i % 2:
            m.flush()  # some written, some waiting
        assert m.get(short).tier is MemoryTier.SHORT
    m.flush()
    assert m.get(short).access_count == 6 and m.get(short).tier is MemoryTier.SHORT
    m.search("cluster", user_id="u", k=5, query_embedding=unit(1, 0))
    assert m.get(short).tier is MemoryTier.LONG
