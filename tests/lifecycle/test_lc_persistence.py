"""Everything the lifecycle records survives closing and reopening a file store."""

from __future__ import annotations

from beeweave_core import ChunkStatus, RelationType
from tests.lifecycle.lifecycle_support import unit


def test_lifecycle_state_survives_close_and_reopen(reopen, clock) -> None:
    m = reopen(up_delta=1.0, stale_after=2, access_flush_interval=3600)
    a = m.add("the user wants dark mode everywhere", user_id="u", embedding=unit(1, 0))
    b = m.add("dark mode please", user_id="u", embedding=unit(1, 0.1))
    s = m.add("the printer is on floor 2", user_id="u", embedding=unit(0, 1))
    w = m.add("Today's weather: sunny", user_id="u", embedding=unit(0, 0, 1))
    f = m.remember_fact("home_city", "Alice lives in Paris", user_id="u", embedding=unit(0, 0, 0, 1))
    clock.advance(hours=1)
    m.remember_fact("home_city", "Alice lives in Lyon", user_id="u")
    o1 = m.remember_opinion("Tea is best", user_id="u", topic="drink", confidence=0.9, source="bob")
    o2 = m.remember_opinion("Coffee is best", user_id="u", topic="drink", confidence=0.4, source="eve")
    m.feedback([a], "up")
    m.feedback([s], "down")
    m.feedback([s], "down")
    m.search("dark mode", user_id="u", k=2)
    clock.advance(days=2)
    report = m.maintain()
    assert report.merges == {a: [b]} and report.expired == 1
    results = [(h.id, h.score) for h in m.search("dark mode printer weather", user_id="u", k=10)]
    m.flush()
    state = {cid: m.get(cid).to_dict() for cid in (a, b, s, w, f, o1, o2)}
    queue, versions, audit = m.review_queue(), m.history(f), m.audit()
    relationships = sorted((e.source_id, e.target_id, e.type.value) for e in m.relationships(a))
    weights = {cid: m.effective_weight(cid) for cid in (a, s)}
    m.close()

    m = reopen()
    assert {cid: m.get(cid).to_dict() for cid in (a, b, s, w, f, o1, o2)} == state
    assert m.get(a).access_count == 3  # a and b found by the first search (b folded into a), a by the second
    assert m.get(b).status is ChunkStatus.MERGED and m.get(w).status is ChunkStatus.ARCHIVED
    assert m.review_queue() == queue and [(i.chunk_id, i.reasons) for i in queue] == [(s, ("stale",))]
    assert m.history(f) == versions and [v.chunk.raw_content for v in versions] == ["Alice lives in Paris"]
    assert m.audit() == audit
    assert sorted((e.source_id, e.target_id, e.type.value) for e in m.relationships(a)) == relationships
    assert (b, a, RelationType.MERGED_INTO.value) in relationships
    assert {cid: m.effective_weight(cid) for cid in (a, s)} == weights
    assert [(h.id, h.score) for h in m.search("dark mode printer weather", user_id="u", k=10)] == results
    assert m.fact("home_city", user_id="u").id == f
    assert [c.id for c in m.opinions("drink", user_id="u")] == [o1, o2]
    # Decay keeps running from the stored timestamps after reopening.
    clock.advance(days=10)
    assert m.effective_weight(a) < weights[a]


def test_delete_user_forgets_lifecycle_records(reopen) -> None:
    m = reopen(stale_after=1)
    f = m.remember_fact("k", "one", user_id="u")
    m.remember_fact("k", "two", user_id="u")
    m.feedback([f], "down")
    keep = m.remember_fact("k", "other user", user_id="v")
    assert m.history(f) and m.review_queue(user_id="u")
    m.backend.delete_user("u")
    assert m.review_queue() == [] and m.fact("k", user_id="u") is None
    assert m.backend.log_read("lifecycle.versions", f) == []
    assert m.fact("k", user_id="v").id == keep
