"""A 90-day simulated multi-agent trace on a controlled clock: a watch fires, a contradiction
is recorded and surfaced, a code memory is invalidated by a commit, "last week" resolves,
and the lineage tells the story. Every step is asserted."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from beeweave_core import BeeWeave, EventType, HashingEmbedder, LifecycleConfig
from tests.lifecycle.lifecycle_support import Clock
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

DAY0 = datetime(2025, 1, 6, 9, tzinfo=timezone.utc)  # a Monday
TEAM = "team-42"


@pytest.fixture(params=["sqlite", "postgres"])
def where(request, tmp_path):
    """(location, backend options): a SQLite file, or a PostgreSQL tenant of its own."""
    if request.param == "sqlite":
        return str(tmp_path / "team.db"), {}
    return request.getfixturevalue("pg_url"), {"tenant": new_tenant("trace")}


def test_ninety_days_of_a_team_memory(where):
    clock = Clock(DAY0)
    url, backend_kw = where
    m = BeeWeave.from_url(url, embedder=HashingEmbedder(256), clock=clock,
                          lifecycle=LifecycleConfig(access_flush_interval=0.0), **backend_kw)
    pushed = []
    m.events.subscribe(pushed.append, types=[EventType.WATCH_MATCHED])
    try:
        # Day 0: the planner writes down how backups work and which file does them.
        plan = m.add("Database backup runs nightly at 02:00 with pg_dump", user_id=TEAM, agent_id="planner",
                     metadata={"source": "design-doc"}, confidence=0.9)
        code = m.add("backup.py calls pg_dump with --format=custom", user_id=TEAM, agent_id="coder",
                     metadata={"paths": ["ops/backup.py"], "commit": "c0ffee1", "source": "repo"})
        watch = m.watch("database backup pg_dump nightly", user_id=TEAM, agent_id="ops-bot", min_relevance=0.5)
        assert pushed == []  # a watch sees what comes after it

        # Day 10: another agent adds a memory the ops bot is watching for; an unrelated one is not pushed.
        clock.advance(days=10)
        m.add("The lunch menu changes on Fridays", user_id=TEAM, agent_id="chef")
        nightly = m.add("Nightly database backup with pg_dump now also uploads to S3", user_id=TEAM,
                        agent_id="coder", metadata={"source": "standup"})
        assert [(e.chunk_id, e.agent_id, e.data["watch_id"]) for e in pushed] == [(nightly, "ops-bot", watch.id)]
        assert pushed[0].data["relevance"] >= 0.5

        # Day 30: an operator says otherwise; the contradiction is recorded and surfaced with its rival.
        clock.advance(days=20)
        ops = m.add("Database backup was moved to 04:00 because of the batch jobs", user_id=TEAM, agent_id="ops",
                    metadata={"source": "incident-17"}, confidence=0.6)
        m.relate(ops, plan, "contradicts", note="backup time changed")
        hits = m.search("when does the database backup run 02:00", user_id=TEAM, k=1)
        ids = [h.id for h in hits]
        assert ids[0] in (plan, ops) and {plan, ops} <= set(ids)
        rival = next(h for h in hits if "contradicts" in h.sources)
        assert rival.sources["contradicts"].from_id == ids[0]
        got = {h.id: (h.chunk.confidence, h.chunk.metadata["source"]) for h in hits}
        assert got[plan] == (0.9, "design-doc") and got[ops] == (0.6, "incident-17")

        # Day 45: a commit changes ops/backup.py; the code memory is to be verified and ranks lower.
        clock.advance(days=15)
        before = m.effective_weight(code)
        report = m.invalidate(["ops/backup.py", "README.md"], "beef002")
        assert report.marked == [code]
        marked = m.get(code)
        assert marked.metadata["verify"]["commit"] == "beef002" and m.effective_weight(code) < before
        assert [(i.chunk_id, i.reasons) for i in m.review_queue(user_id=TEAM)] == [(code, ("verify",))]
        found = m.search("backup.py pg_dump format", user_id=TEAM, k=3)
        assert next(h for h in found if h.id == code).chunk.metadata["verify"]["paths"] == ["ops/backup.py"]

        # Day 57 (a Tuesday): the backup problem is discussed again; day 63 asks about "last week".
        clock.advance(days=12)
        recent = m.add("讨论了备份问题：S3 上传超时，改为分片上传", user_id=TEAM, agent_id="ops")
        clock.advance(days=6)
        assert clock.now.weekday() == 0  # the Monday after
        zh = m.search("上周讨论的备份问题", user_id=TEAM, k=5)
        assert zh and zh[0].id == recent and all(h.id == recent for h in zh if "contradicts" not in h.sources)
        span = zh[0].time_range
        assert span is not None and span.start == datetime(2025, 3, 3, tzinfo=timezone.utc)
        assert span.end == datetime(2025, 3, 10, tzinfo=timezone.utc)
        assert [h.id for h in m.search("backup", user_id=TEAM, filters={"since": "last week"})] == [recent]

        # Day 90: maintenance runs in the background; the lineage of the plan tells its story.
        clock.advance(days=27)
        schedule = m.maintain(interval=0.01)
        assert schedule.wait_runs(1, timeout=60) and schedule.errors == 0
        lin = m.lineage(plan)
        assert lin.agents == ["planner"] and lin.sources == ["design-doc"]
        assert {"type": "contradicts", "direction": "in", "other": ops, "weight": 1.0,
                "note": "backup time changed"} in lin.relations
        assert m.lineage(code).code["verify"]["commit"] == "beef002"
        kept = m.resolve_review(code, "keep")
        assert "verify" not in kept.metadata and m.review_queue(user_id=TEAM) == []
    finally:
        m.close()
    assert not schedule.running
