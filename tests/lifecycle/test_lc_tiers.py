"""Tiers on both backends: the TTL a tier gives, promotion by feedback, by use and in
maintenance, the tier filter in search and counts, and the tier surviving a reopen."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_core import ChunkStatus, InvalidInputError, MemoryTier, TierConfig
from beeweave_core.filters import build_filter
from beeweave_core.lifecycle.tiers import promotion_score
from tests.lifecycle.lifecycle_support import unit


def test_tiers_on_every_backend(reopen, clock) -> None:
    m = reopen(tiers=TierConfig(promote_at=1.5))
    short = m.add("the staging cluster restarts at midnight", user_id="u", tier="short", embedding=unit(1, 0))
    work = m.add("we are debugging the login page right now", user_id="u", tier="working", embedding=unit(0, 1))
    pinned = m.add("the office is on floor two", user_id="u", tier="short", pinned=True, embedding=unit(1, 1))
    kept = m.add("the user prefers dark mode", user_id="u", embedding=unit(0, 0, 1))
    start = clock.now
    # a short-term memory waits 24 h for promotion, then settles (it does not expire)
    assert m.get(short).expires_at is None
    assert m.get(short).metadata["settles_at"] == (start + timedelta(hours=24)).isoformat()
    assert m.get(work).expires_at == start + timedelta(hours=2)
    assert m.get(pinned).expires_at is None and m.get(kept).tier is MemoryTier.LONG
    assert {h.id for h in m.search("cluster", user_id="u", k=10, filters={"tier": "short"},
                                   query_embedding=unit(1, 0))} == {short, pinned}
    m.flush()
    assert m.get(short).tier is MemoryTier.SHORT and m.get(short).access_count == 1  # a use: ln 2 < 1.5
    m.feedback(short, "up")  # ln 2 + 1 = 1.69
    assert m.get(short).tier is MemoryTier.LONG and m.get(short).expires_at is None
    clock.advance(hours=3)
    report = m.maintain(user_id="u")
    assert (report.promoted, report.expired) == (0, 1) and m.get(work).status is ChunkStatus.ARCHIVED
    m.close()
    again = reopen(tiers=TierConfig(promote_at=1.5))
    assert again.get(short).tier is MemoryTier.LONG
    assert again.count(user_id="u", filters={"tier": "long"}) == 2
    assert again.count(user_id="u", filters={"tier": ["short", "working"]}) == 1  # the pinned one
    assert [c.id for c in again.backend.scan(build_filter({"tier": "short"}, user_id="u"))] == [pinned]


def test_learnt_knowledge_is_kept_and_tier_times_run_from_storage(reopen, clock) -> None:
    """Unpromoted short-term knowledge settles into long-term after its wait instead of
    expiring; a backfilled memory's wait and a working memory's TTL count from when it was
    stored, not from its own (old) timestamp; ``short_expires=True`` keeps the old expiry."""
    m = reopen()
    start = clock.now
    fresh = m.add("deploys go out on tuesdays", user_id="u", tier="short", embedding=unit(1, 0))
    old = m.add("the vpn needs a token", user_id="u", tier="short", timestamp=start - timedelta(days=3),
                embedding=unit(0, 1))
    work = m.add("debugging the cache now", user_id="u", tier="working", timestamp=start - timedelta(days=3),
                 embedding=unit(1, 1))
    assert m.get(old).metadata["settles_at"] == (start + timedelta(hours=24)).isoformat()
    assert m.get(work).expires_at == start + timedelta(hours=2)  # not already expired
    assert old in {h.id for h in m.search("vpn token", user_id="u", k=5, query_embedding=unit(0, 1))}
    clock.advance(days=2)
    report = m.maintain(user_id="u")
    assert report.settled == 2 and report.expired == 1
    for cid in (fresh, old):
        c = m.get(cid)
        assert c.tier is MemoryTier.LONG and c.status is ChunkStatus.ACTIVE and c.expires_at is None
        assert c.metadata["settled"]["from"] == "short" and "settles_at" not in c.metadata
        assert [a["action"] for a in m.audit(cid)][-1] == "settled"  # the reason a user can read
    clock.advance(days=28)
    m.maintain(user_id="u")
    assert fresh in {h.id for h in m.search("deploys tuesdays", user_id="u", k=5, query_embedding=unit(1, 0))}
    m.close()
    expiring = reopen(tiers=TierConfig(short_expires=True))
    gone = expiring.add("a passing remark", user_id="u", tier="short", embedding=unit(0, 0, 1))
    assert expiring.get(gone).expires_at == clock.now + timedelta(hours=24)
    clock.advance(days=2)
    assert expiring.maintain(user_id="u").expired == 1 and expiring.get(gone).status is ChunkStatus.ARCHIVED


def test_bad_tiers_are_refused(mem) -> None:
    with pytest.raises(InvalidInputError):
        mem.add("x" * 30, user_id="u", tier="forever")
    with pytest.raises(InvalidInputError):
        mem.search("x", user_id="u", filters={"tier": "forever"})
    for bad in (dict(short_ttl=timedelta(0)), dict(promote_at=float("nan")), dict(demote_below="low")):
        with pytest.raises(InvalidInputError):
            TierConfig(**bad)  # type: ignore[arg-type]
    assert mem.count() == 0


def test_the_promotion_score() -> None:
    from beeweave_core import KnowledgeChunk

    cfg = TierConfig()
    c = KnowledgeChunk("a memory", "u", tier="short", access_count=3,
                       metadata={"feedback": {"up": 2, "down": 1}, "importance": "medium", "merged_from": [{}, {}]})
    import math

    assert promotion_score(c, cfg) == pytest.approx(math.log(4) + 1 + 2 * 0.6 + math.log(3))
    assert promotion_score(c, cfg, extra_uses=1) == pytest.approx(math.log(5) + 1 + 1.2 + math.log(3))
