"""Editing a memory's text keeps the earlier version (``history``, ``lineage().edits``), on
SQLite and on PostgreSQL; edits that only change bookkeeping, or that are refused, keep none."""

from __future__ import annotations

import pytest

from beeweave_core import ChunkStatus, InvalidInputError, NotFoundError
from beeweave_core.lifecycle.history import read_versions


@pytest.mark.slow
def test_an_edit_keeps_the_earlier_version(reopen, clock) -> None:
    m = reopen()
    cid = m.add("Alice works at Acme", user_id="u", tags=["job"], metadata={"source": "chat-1"})
    before = m.get(cid)
    clock.advance(hours=1)
    t1 = clock.now
    m.update(cid, content="Alice works at Initech")
    clock.advance(hours=1)
    m.update(cid, content="Alice works at Globex", tags=["job", "current"])

    assert m.get(cid).raw_content == "Alice works at Globex"
    history = m.history(cid)
    assert [v.chunk.raw_content for v in history] == ["Alice works at Acme", "Alice works at Initech"]
    assert [v.reason for v in history] == ["edit", "edit"]
    assert [v.replaced_at for v in history] == [t1, clock.now]
    assert history[0].chunk.to_dict() == {**before.to_dict(), "relationships": []}  # the whole earlier state
    assert history[1].chunk.tags == ["job"]
    edits = m.lineage(cid).edits
    assert [(e["seq"], e["reason"]) for e in edits] == [(v.seq, "edit") for v in history]
    m.close()

    m = reopen()  # versions are stored, not kept in the process
    assert m.history(cid) == history


def test_only_a_new_text_makes_a_version(mem) -> None:
    cid = mem.add("The deploy runs on Fridays", user_id="u")
    mem.update(cid, tags=["ops"], metadata={"k": 1}, pinned=True, weight=2.0, confidence=0.5,
               status=ChunkStatus.ARCHIVED, summary="deploy day")
    mem.update(cid, content="The deploy runs on Fridays")  # the same text again changes nothing it says
    assert mem.history(cid) == [] and mem.lineage(cid).edits == []
    mem.update(cid, content="The deploy runs on Tuesdays")
    (version,) = mem.history(cid)
    assert version.chunk.raw_content == "The deploy runs on Fridays" and version.chunk.tags == ["ops"]


def test_an_unversioned_edit_replaces_without_a_version(mem) -> None:
    cid = mem.add("The deploy runs on Fridays", user_id="u")
    mem.update(cid, content="The deploy runs on Mondays", versioned=False)
    assert mem.get(cid).raw_content == "The deploy runs on Mondays" and mem.history(cid) == []
    with pytest.raises(InvalidInputError):
        mem.update(cid, content="The deploy runs daily", versioned="no")
    assert mem.get(cid).raw_content == "The deploy runs on Mondays"


def test_a_deleted_memory_takes_its_versions_with_it(reopen) -> None:
    # An edit that removed a card number, then a delete: the number must not stay readable.
    m = reopen()
    cid = m.add("my card is 4111 1111", user_id="u", trusted=True)
    other = m.add("the deploy runs on Fridays", user_id="u")
    m.update(cid, content="my card is on file", trusted=True)
    m.update(other, content="the deploy runs on Mondays")
    assert m.delete(cid)
    with pytest.raises(NotFoundError):  # an unknown id now, with no version left behind
        m.history(cid)
    assert read_versions(m.backend, cid) == [] and len(m.history(other)) == 1
    m.close()
    m = reopen()
    assert read_versions(m.backend, cid) == [] and len(m.history(other)) == 1
    m.close()


def test_a_refused_edit_records_nothing(mem) -> None:
    cid = mem.add("The deploy runs on Fridays", user_id="u")
    state = mem.get(cid).to_dict()
    for bad in ({"content": "   "}, {"content": 42}, {"content": "new text", "confidence": "high"},
                {"content": "new text", "no_such_field": 1}, {"content": "new text", "id": "other"}):
        with pytest.raises(InvalidInputError):
            mem.update(cid, **bad)
    assert mem.get(cid).to_dict() == state and mem.history(cid) == []
    with pytest.raises(NotFoundError):
        mem.update("nope", content="new text")
    with pytest.raises(NotFoundError):
        mem.history("nope")


def test_an_edit_racing_another_store_loses_no_version(reopen) -> None:
    """Another process (or host) changes the text between this edit's checks and its write:
    the text the write really replaced is in the history too."""
    m, other = reopen(), reopen()
    cid = m.add("v0", user_id="u")
    original = m.backend.modify

    def modify(ids, change):
        other.update(cid, content="v1")  # lands just before this write takes the record
        return original(ids, change)

    m.backend.modify = modify
    try:
        m.update(cid, content="v2")
    finally:
        del m.backend.modify
    assert m.get(cid).raw_content == "v2"
    texts = [v.chunk.raw_content for v in m.history(cid)]
    assert texts[-1] == "v1" and [t for i, t in enumerate(texts) if t not in texts[:i]] == ["v0", "v1"]
