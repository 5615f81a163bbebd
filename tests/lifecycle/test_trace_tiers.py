"""A 90-day simulated trace of two agents sharing one store, on a controlled clock, with
``TierConfig(short_expires=True)`` (the default keeps them: tests/lifecycle/test_trace_durable.py):
short-term memories expire, frequently used and praised ones are promoted to long-term,
an important one is long-term from the start, the operator lowers the bar (promotion in
maintenance) and turns demotion on; the store is closed and reopened between phases.
Every step is asserted."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from beeweave_core import BeeWeave, ChunkStatus, HashingEmbedder, MemoryTier, TierConfig
from beeweave_core.filters import build_filter
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.scoring import is_expired
from tests.lifecycle.lifecycle_support import DIM, Clock

DAY = timedelta(days=1)
USER = "ops-team"


def _open(path: Path, clock: Clock, **tiers: object) -> BeeWeave:
    return BeeWeave(path, embedder=HashingEmbedder(DIM), clock=clock,
                    lifecycle=LifecycleConfig(access_flush_interval=0.0,
                                              tiers=TierConfig(**{"short_expires": True, **tiers})))  # type: ignore[arg-type]


def _tier(m: BeeWeave, cid: str) -> MemoryTier:
    return m.get(cid).tier


def _audit(m: BeeWeave, cid: str, action: str) -> list[dict]:
    return [a for a in m.audit(cid) if a["action"] == action]


def test_ninety_days_of_tiers(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "trace.db"
    m = _open(path, clock)
    start = clock.now

    # -- day 0: what the agents learn -------------------------------------------------------
    reset = m.add("To reset the staging database run make reset-db from the ops repository.",
                  user_id=USER, agent_id="deployer", tier="short")
    port = m.add("The billing API listens on port 8443 behind the internal gateway.",
                 user_id=USER, agent_id="support", tier="short")
    lunch = m.add("The team ordered noodles for lunch on the first day of the quarter.",
                  user_id=USER, agent_id="support", tier="short")
    rule = m.add("Production deploys need two approvals from the release captains.", user_id=USER,
                 agent_id="deployer", tier="short", metadata={"importance": "high"})
    wifi = m.add("The office wifi password rotates on the first Monday of every month.", user_id=USER)
    m.ingest({"query": "Where are the on-call runbooks kept?", "timestamp": clock.now.isoformat(),
              "response": "The on-call runbooks are kept in the ops wiki under Runbooks/OnCall.",
              "user_id": USER, "agent_id": "support", "id": "ev-runbooks"})
    m.flush()
    runbooks = "ev-runbooks@ops-team:0"

    for cid in (reset, port, lunch, runbooks):  # short-term: a 24 h TTL from when it was said
        c = m.get(cid)
        assert c.tier is MemoryTier.SHORT, cid
        assert c.expires_at == start + DAY, cid
        assert c.metadata["tier_ttl"] == "short"
    important = m.get(rule)  # importance "high" scores 2.0: long-term at once, no TTL
    assert important.tier is MemoryTier.LONG and important.expires_at is None
    assert _audit(m, rule, "promoted")[0]["reason"] == "stored"
    assert _tier(m, wifi) is MemoryTier.LONG and m.get(wifi).expires_at is None  # add() defaults to long
    assert m.count(user_id=USER, filters={"tier": "short"}) == 4
    assert m.count(user_id=USER, filters={"tier": "long"}) == 2

    # -- hours 1-7: the deployer keeps looking up the reset command -------------------------
    for n in range(1, 8):
        clock.advance(minutes=50)
        hits = m.search("reset the staging database", user_id=USER, k=1, filters={"tier": ["short", "long"]})
        assert [h.id for h in hits] == [reset]
        # ln(1 + uses) reaches the bar of 2.0 at the 7th use, evaluated at that search.
        assert _tier(m, reset) is (MemoryTier.LONG if n == 7 else MemoryTier.SHORT), n
    promoted = m.get(reset)
    assert promoted.expires_at is None and "tier_ttl" not in promoted.metadata
    assert promoted.metadata["promoted"]["from"] == "short"
    assert _audit(m, reset, "promoted")[0]["reason"] == "used"

    # -- hour 8: support praises the port answer twice -------------------------------------
    m.feedback(port, "up")
    assert _tier(m, port) is MemoryTier.SHORT  # one "up" scores 1.0
    m.feedback(port, "up")
    assert _tier(m, port) is MemoryTier.LONG and m.get(port).expires_at is None
    assert _audit(m, port, "promoted")[0]["reason"] == "feedback"

    # -- day 1: the unused short-term memories expire ---------------------------------------
    clock.now = start + DAY + timedelta(hours=1)
    # Expired by its timestamps before any maintenance: search ranks it down (expired_penalty).
    assert is_expired(m.get(lunch), clock.now) and not is_expired(m.get(port), clock.now)
    report = m.maintain(user_id=USER)
    assert (report.expired, report.archived, report.promoted) == (2, 2, 0)
    for cid in (lunch, runbooks):
        assert m.get(cid).status is ChunkStatus.ARCHIVED
    for cid in (reset, port, rule, wifi):
        assert m.get(cid).status is ChunkStatus.ACTIVE
    assert m.count(user_id=USER, filters={"tier": "short"}) == 0
    m.close()

    # -- days 2-44: a daily stand-up note, gone the next day unless someone uses it ---------
    m = _open(path, clock)
    notes = []
    for day in range(2, 45):
        clock.now = start + day * DAY
        notes.append(m.add(f"Stand-up note of day {day}: ticket OPS-{1000 + day} is in review.",
                           user_id=USER, agent_id="deployer", tier="short"))
        clock.advance(hours=25)
        report = m.maintain(user_id=USER)
        assert (report.expired, report.promoted) == (1, 0), day
        assert m.get(notes[-1]).status is ChunkStatus.ARCHIVED
        if day % 7 == 0:  # the reset command stays in use, and stays long-term
            assert m.search("reset staging database", user_id=USER, k=1)[0].id == reset
    assert all(m.get(n).status is ChunkStatus.ARCHIVED for n in notes)
    assert m.count(user_id=USER) == 4
    m.close()

    # -- day 45: the operator lowers the bar; maintenance promotes what now qualifies -------
    m = _open(path, clock)
    clock.now = start + 45 * DAY
    liked = m.add("The staging cluster is patched every Thursday night.", user_id=USER, tier="short")
    m.feedback(liked, "up")
    assert _tier(m, liked) is MemoryTier.SHORT
    m.close()
    m = _open(path, clock, promote_at=1.0)
    clock.advance(hours=2)
    report = m.maintain(user_id=USER)
    assert (report.promoted, report.expired) == (1, 0)
    assert _tier(m, liked) is MemoryTier.LONG and m.get(liked).expires_at is None
    assert _audit(m, liked, "promoted")[0]["reason"] == "maintenance"
    m.close()

    # -- day 60: demotion on; the never-used wifi memory goes back to short-term ------------
    m = _open(path, clock, demote_below=0.05)
    clock.now = start + 60 * DAY
    report = m.maintain(user_id=USER)
    # Eviction score ln(accesses + 1) + 1/(age_days + 1): wifi (no access, 60 days) is at
    # 0.016. The rule scores as low but its importance still qualifies it for long-term;
    # the used and praised memories are above the bar.
    assert report.demoted == 1
    c = m.get(wifi)
    assert c.tier is MemoryTier.SHORT and c.expires_at == clock.now + DAY
    assert _audit(m, wifi, "demoted")[0]["reason"] == "cold"
    for cid in (reset, port, rule, liked):
        assert _tier(m, cid) is MemoryTier.LONG
    clock.advance(hours=25)
    report = m.maintain(user_id=USER)
    assert (report.expired, report.demoted) == (1, 0) and m.get(wifi).status is ChunkStatus.ARCHIVED
    m.close()

    # -- day 90: what is left is what was used, praised or important ------------------------
    m = _open(path, clock)
    clock.now = start + 90 * DAY
    report = m.maintain(user_id=USER)
    assert (report.expired, report.promoted, report.demoted) == (0, 0, 0)
    alive = {c.id for c in m.backend.scan(build_filter({"tier": "long"}, user_id=USER))}
    assert alive == {reset, port, rule, liked}
    assert m.count(user_id=USER, filters={"tier": ["short", "working"]}) == 0
    m.close()
