"""Facts that change on both backends (SQLite, PostgreSQL): the timeline and the validity marks
live in the store, so a restarted process, or a second host, sees the same current value."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.fact_faces import T0, T1


def _say(m, query: str, at: datetime) -> None:
    m.ingest({"user_id": "alice", "query": query, "response": "OK.", "timestamp": at.isoformat()})
    assert m.flush(60)


def test_a_move_is_kept_across_a_restart(reopen, clock) -> None:
    clock.now = T1 + timedelta(days=1)
    first = reopen()
    _say(first, "I live in Berlin.", T0)
    _say(first, "I moved to Munich.", T1)
    first.close()
    again = reopen()
    hits = again.search("where do I live", user_id="alice", abstain_below=0)
    assert "Munich" in hits[0].chunk.raw_content and not hits[0].superseded
    assert any(h.superseded and "Berlin" in h.chunk.raw_content and h.chunk.invalid_at == T1 for h in hits)
    then = again.search("where do I live", user_id="alice", abstain_below=0, as_of=T1 - timedelta(days=1))
    assert "Berlin" in then[0].chunk.raw_content and not then[0].superseded


def test_two_hosts_stating_a_fact_converge_on_one_timeline(reopen, clock) -> None:
    clock.now = T1 + timedelta(days=1)
    a, b = reopen(), reopen()
    _say(a, "我住在北京", T0)
    _say(b, "我搬到了上海", T1)
    for m in (a, b):
        current = m.fact("residence", user_id="alice")
        assert "上海" in current.raw_content and current.invalid_at is None
        old, new = m.parts.lifecycle.facts.timeline.timeline("residence", user_id="alice")
        assert old.invalid_at == T1 and old.metadata["fact"]["superseded_by"] == new.id
