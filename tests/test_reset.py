"""``BeeWeave.reset(confirm=True)`` (mem0's ``reset()``): every user's everything goes, with
the guarantees of ``DELETE /api/v1/users/{id}``: queued events are processed first and dead
letters discarded, so nothing comes back; memories of every status, facts and session
buffers go; ``memory.deleted`` is sent for each memory; the store's model stays (issue 44)."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.ingest import IngestConfig
from tests.support import all_statuses_filter


def fill(m: BeeWeave) -> int:
    m.add("Alice's staging database listens on port 5433.", user_id="alice")
    archived = m.add("Alice used to live in Berlin.", user_id="alice")
    m.update(archived, status="archived")
    m.add("Bob's coffee budget is 200 EUR.", user_id="bob")
    m.remember_fact("city", "Bob lives in Munich.", user_id="bob")
    m.add_turn("chat", "user", "Carol only chatted, nothing was stored as a memory.", user_id="carol")
    # A dead letter: erin's event would store a memory id that dave's memory already holds
    # (event ids are per user, so only an id chosen to collide does).
    m.add("Dave's vault code is 7731-alpha.", user_id="dave", chunk_id="run-1@erin:0")
    m.ingest({"id": "run-1", "user_id": "erin", "query": "What is my favourite colour?", "response": "Blue."})
    assert m.flush(10) and len(m.dead_letters()) == 1
    return len(list(m.backend.scan(all_statuses_filter())))


def test_reset_needs_confirm_and_then_leaves_nothing(tmp_path) -> None:
    path = tmp_path / "m.db"
    m = BeeWeave(path, embedder=HashingEmbedder(32), ingest=IngestConfig(autostart=False))
    try:
        stored = fill(m)
        for wrong in ({}, {"confirm": "yes"}):
            with pytest.raises(InvalidInputError, match="confirm=True"):
                m.reset(**wrong)
        assert len(list(m.backend.scan(all_statuses_filter()))) == stored
        # Queued before the reset: processed first, then deleted, never stored afterwards.
        m.ingest({"user_id": "frank", "query": "Where is the spare key?", "response": "Under the blue pot."})
        deleted_notices: list[str] = []
        m.events.subscribe(lambda ev: deleted_notices.append(ev.chunk_id), types=["memory.deleted"])
        assert m.reset(confirm=True) == stored + 1
        assert m.flush(10) and m.pending_events() == 0
        assert list(m.backend.scan(all_statuses_filter())) == []
        assert m.backend.users() == [] and m.dead_letters() == []
        assert len(deleted_notices) == stored + 1
        assert m.fact("city", user_id="bob") is None
        assert not m.get_conversation_context("chat", user_id="carol").turns
        kept = m.add("After the reset the store still works.", user_id="alice")
        assert [h.id for h in m.search("store still works", user_id="alice", abstain_below=0)] == [kept]
    finally:
        m.close()
    with BeeWeave(path) as again:  # the store's model is remembered across the reset
        assert again.embedder.name == HashingEmbedder(32).name and again.count(user_id="alice") == 1
