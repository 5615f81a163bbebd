"""Facts that change, through the capture path: "I live in Berlin" then "I moved to Munich"
keeps both, Munich current and first, Berlin superseded from the move (``invalid_at``) and
returned by a search ``as_of`` a day before it. English and Chinese."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig, LLMExtractor
from beeweave_core.lifecycle.timeline import CONFLICT_REASON
from beeweave_core.records import KnowledgeChunk

T0 = datetime(2025, 1, 10, 9, 0, tzinfo=timezone.utc)
T1 = T0 + timedelta(days=45)

CASES = {
    "en": ("I live in Berlin.", "Noted: Berlin.", "I moved to Munich.", "Congratulations on the move!",
           "where do I live", "Berlin", "Munich"),
    "zh": ("我住在北京", "好的，记住了：北京。", "我搬到了上海", "恭喜搬家！", "我住在哪里", "北京", "上海"),
}


def _say(m: BeeWeave, query: str, response: str, at: datetime, **extra: object) -> str:
    return m.ingest({"user_id": "alice", "query": query, "response": response, "timestamp": at.isoformat(), **extra})


def _moved(make_memory, clock) -> BeeWeave:
    """A store where alice said she lives in Berlin (T0), then that she moved to Munich (T1)."""
    clock.now = T1 + timedelta(days=1)
    m = make_memory()
    _say(m, "I live in Berlin.", "Noted.", T0)
    _say(m, "I moved to Munich.", "Great!", T1)
    assert m.flush(30)
    return m


def _text(hit: object) -> str:
    return hit.chunk.raw_content  # type: ignore[attr-defined]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_move_supersedes_the_old_home_and_as_of_finds_it(make_memory, clock, lang: str) -> None:
    said_old, ack_old, said_new, ack_new, question, old, new = CASES[lang]
    clock.now = T1 + timedelta(days=10)
    m = make_memory()
    _say(m, said_old, ack_old, T0)
    _say(m, said_new, ack_new, T1)
    assert m.flush(30)

    hits = m.search(question, user_id="alice")
    assert new in _text(hits[0]) and not hits[0].superseded
    assert hits[0].chunk.valid_from == T1 and hits[0].chunk.invalid_at is None
    before = next(h for h in hits if old in _text(h))
    assert before.superseded and before.chunk.invalid_at == T1 and before.chunk.valid_from == T0
    assert before.chunk.metadata["fact"]["superseded_by"] == hits[0].id
    assert hits.index(before) > 0

    then = m.search(question, user_id="alice", as_of=T1 - timedelta(days=1))
    assert old in _text(then[0]) and not then[0].superseded
    assert not any(new in _text(h) for h in then)  # said later: not known then
    iso = m.search(question, user_id="alice", as_of=(T1 - timedelta(days=1)).isoformat())
    assert [h.id for h in iso] == [h.id for h in then]

    # The old state stays in history; the current value is the subject's fact.
    assert [v.reason for v in m.history(before.id)] == ["superseded"]
    assert m.history(before.id)[0].chunk.invalid_at is None
    assert new in m.fact("residence", user_id="alice").raw_content


def test_a_search_for_the_old_value_still_puts_the_current_first(make_memory, clock) -> None:
    m = _moved(make_memory, clock)
    hits = m.search("Berlin", user_id="alice")
    assert [("Munich" in _text(h), h.superseded) for h in hits[:2]] == [(True, False), (False, True)]
    assert hits[0].score >= hits[1].score  # places keep their scores


def test_the_same_value_said_again_continues_until_the_move(make_memory, clock) -> None:
    clock.now = T1 + timedelta(days=1)
    m = make_memory()
    _say(m, "I live in Berlin.", "OK.", T0)
    _say(m, "I still live in Berlin, by the way.", "Good to know.", T0 + timedelta(days=20))
    _say(m, "I moved to Munich.", "Great!", T1)
    assert m.flush(30)
    timeline = m.parts.lifecycle.facts.timeline.timeline("residence", user_id="alice")
    assert [c.invalid_at for c in timeline] == [T1, T1, None]
    middle = m.search("Berlin", user_id="alice", as_of=T0 + timedelta(days=30))
    assert middle and not any(h.superseded for h in middle)


def test_a_backfilled_older_statement_is_superseded_on_arrival(make_memory, clock) -> None:
    clock.now = T1 + timedelta(days=1)
    m = make_memory()
    _say(m, "I moved to Munich.", "Great!", T1)
    assert m.flush(30)
    _say(m, "I live in Berlin.", "OK.", T0)  # arrives late, said earlier
    assert m.flush(30)
    current = m.fact("residence", user_id="alice")
    assert "Munich" in current.raw_content and current.invalid_at is None
    old = m.parts.lifecycle.facts.timeline.timeline("residence", user_id="alice")[0]
    assert "Berlin" in old.raw_content and old.invalid_at == T1


def test_equal_standing_goes_to_review_and_supersedes_nothing(make_memory, clock) -> None:
    clock.now = T0 + timedelta(days=1)
    m = make_memory()
    _say(m, "I live in Berlin.", "OK.", T0, agent_id="crm-sync")
    _say(m, "I live in Hamburg.", "OK.", T0, agent_id="chat")
    assert m.flush(30)
    members = m.parts.lifecycle.facts.timeline.timeline("residence", user_id="alice")
    assert len(members) == 2 and all(c.invalid_at is None for c in members)
    queued = {item.chunk_id: item.reasons for item in m.review_queue(user_id="alice")}
    assert {c.id for c in members} <= set(queued)
    assert all(CONFLICT_REASON in queued[c.id] for c in members)
    assert {c.metadata["conflict_group"] for c in m.get_many([c.id for c in members])} == {f"fact:residence@{T0.isoformat()}"}
    assert not any(h.superseded for h in m.search("where do I live", user_id="alice"))
    # A reviewer keeps one: settling the timeline again does not put it back in the queue.
    m.resolve_review(members[0].id, "keep")
    m.parts.lifecycle.facts.timeline.settle("alice", "residence")
    assert members[0].id not in {item.chunk_id for item in m.review_queue(user_id="alice")}


def test_one_source_saying_two_values_at_once_keeps_the_later(make_memory, clock) -> None:
    clock.now = T0 + timedelta(days=1)
    m = make_memory()
    _say(m, "I live in Berlin.", "OK.", T0, agent_id="chat")
    _say(m, "Sorry, I live in Hamburg.", "OK.", T0, agent_id="chat")
    assert m.flush(30)
    assert "Hamburg" in m.fact("residence", user_id="alice").raw_content
    assert m.review_queue(user_id="alice") == []


def test_deleting_the_new_statement_makes_the_old_current_again(make_memory, clock) -> None:
    m = _moved(make_memory, clock)
    new = m.fact("residence", user_id="alice")
    m.delete(new.id)
    again = m.fact("residence", user_id="alice")
    assert "Berlin" in again.raw_content and again.invalid_at is None
    assert "superseded_by" not in again.metadata["fact"]


def test_reconciling_again_changes_nothing(make_memory, clock, monkeypatch) -> None:
    m = _moved(make_memory, clock)
    timeline = m.parts.lifecycle.facts.timeline
    members = timeline.timeline("residence", user_id="alice")
    real_get, reads = m.backend.kv_get, []
    monkeypatch.setattr(m.backend, "kv_get", lambda ns, k: reads.append(k) or real_get(ns, k))
    assert timeline.reconcile(members) == []  # a retried batch: nothing added twice, nothing changed
    assert reads == ["alice\x1fresidence"]  # the timeline as added to is settled; one read checks it
    monkeypatch.undo()
    assert len(m.backend.kv_get("lifecycle.timeline", "alice\x1fresidence")["entries"]) == 2
    assert len(m.history(members[0].id)) == 1


def test_a_redacted_value_is_never_taken_for_the_same(make_memory, clock) -> None:
    clock.now = T1 + timedelta(days=1)
    m = make_memory()
    _say(m, "My phone number is +49 170 1234567", "Saved.", T0)
    _say(m, "My phone number is +49 171 7654321", "Updated.", T1)
    assert m.flush(30)
    old, new = m.parts.lifecycle.facts.timeline.timeline("phone", user_id="alice")
    assert "1234567" not in old.raw_content  # redacted before anything else
    assert old.invalid_at == T1 and new.invalid_at is None


def test_a_model_extractor_names_the_facts(make_memory, clock) -> None:
    def model(prompt: str) -> str:
        city = "Munich" if "Munich" in prompt else "Berlin"
        return json.dumps({"summary": f"The user lives in {city}.", "tags": ["home"], "intent": "other",
                           "facts": [{"key": "Home City", "value": city}]})

    clock.now = T1 + timedelta(days=1)
    m = make_memory(extractor=LLMExtractor(model))
    _say(m, "Berlin is where I am.", "OK.", T0)  # no offline rule matches: the model's facts count
    _say(m, "Now it is Munich for me.", "OK.", T1)
    assert m.flush(30)
    old, new = m.parts.lifecycle.facts.timeline.timeline("home_city", user_id="alice")
    assert old.invalid_at == T1 and new.metadata["fact"]["value"] == "Munich"


def test_validity_survives_reopening_the_store(tmp_path, clock) -> None:
    clock.now = T1 + timedelta(days=1)
    path = tmp_path / "m.db"
    with BeeWeave(path, embedder=HashingEmbedder(32), clock=clock, ingest=IngestConfig()) as m:
        _say(m, "I live in Berlin.", "OK.", T0)
        _say(m, "I moved to Munich.", "Great!", T1)
        assert m.flush(30)
    with BeeWeave(path, embedder=HashingEmbedder(32), clock=clock) as m:
        old, new = m.parts.lifecycle.facts.timeline.timeline("residence", user_id="alice")
        assert (old.valid_from, old.invalid_at, new.valid_from, new.invalid_at) == (T0, T1, T1, None)
        assert "Berlin" in m.search("where do I live", user_id="alice", as_of=T0 + timedelta(days=1))[0].chunk.raw_content


def test_a_record_stored_before_validity_existed_reads_back() -> None:
    doc = KnowledgeChunk("I live in Berlin.", user_id="alice").to_dict()
    del doc["valid_from"], doc["invalid_at"]
    old = KnowledgeChunk.from_stored(json.loads(json.dumps(doc)))
    assert old.valid_from is None and old.invalid_at is None and old.raw_content == "I live in Berlin."


def test_a_short_statement_is_not_held_back_for_its_length(make_memory, clock) -> None:
    clock.now = T0 + timedelta(days=1)
    m = make_memory()
    _say(m, "我住在北京", "OK.", T0)
    _say(m, "天气不错", "OK.", T0)  # as short, and states nothing: still held for review
    assert m.flush(30)
    assert m.fact("residence", user_id="alice").status.value == "active"
    assert [c.raw_content.split()[0] for c in m.pending(user_id="alice")] == ["天气不错"]


def test_a_settle_from_a_stale_read_is_settled_again(make_memory, clock, monkeypatch) -> None:
    # Another host read the timeline before Munich was added and wrote what it read: settling
    # again, because the timeline changed under it, leaves the newest state in the store.
    m = _moved(make_memory, clock)
    key = "alice\x1fresidence"
    real_get = m.backend.kv_get
    stale = {"entries": real_get("lifecycle.timeline", key)["entries"][:1]}
    reads: list[str] = []

    def kv_get(namespace: str, k: str):
        reads.append(k)
        return stale if len(reads) == 1 else real_get(namespace, k)

    monkeypatch.setattr(m.backend, "kv_get", kv_get)
    m.parts.lifecycle.facts.timeline.settle("alice", "residence")
    # The stale read, the check that found the timeline changed (settled next), the check that found it settled.
    assert len(reads) == 3
    old, new = m.parts.lifecycle.facts.timeline.timeline("residence", user_id="alice")
    assert (old.invalid_at, new.invalid_at) == (T1, None)
