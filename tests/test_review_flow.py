"""One review flow (issue 45 item 8): ``review()`` lists what ingestion holds pending and what the
lifecycle flagged, ``decide()`` keeps, archives or deletes any of them; the old names
(``pending/approve/reject``, ``review_queue/resolve_review``) still work and warn."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave, ChunkStatus, HashingEmbedder, InvalidInputError, NotFoundError
from beeweave_core.lifecycle.reports import ReviewItem


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def mem():
    with BeeWeave(embedder=HashingEmbedder(64), clock=Clock()) as m:
        yield m


def _waiting(m: BeeWeave) -> tuple[str, str, str]:
    """A pending memory of agent "intake", a memory flagged stale, and an ordinary one."""
    held = m.add("the vpn gateway moved to 10.2.0.1 last night", user_id="u", status="pending", agent_id="intake")
    stale = m.add("the staging database lives on db-old.internal", user_id="u", agent_id="ops")
    for _ in range(3):
        m.feedback(stale, "down")
    plain = m.add("lunch is at noon on fridays", user_id="u")
    return held, stale, plain


def test_review_lists_pending_and_flagged_memories_with_their_reasons_oldest_first(mem) -> None:
    held, stale, plain = _waiting(mem)
    items = mem.review()
    assert [(i.chunk_id, i.reasons) for i in items] == [(held, ("pending",)), (stale, ("stale",))]
    assert all(isinstance(i, ReviewItem) and i.chunk is not None and i.chunk.id == i.chunk_id for i in items)
    assert [i.chunk_id for i in mem.review(reasons="pending")] == [held]
    assert [i.chunk_id for i in mem.review(reasons=["stale", "expired"])] == [stale]
    assert [i.chunk_id for i in mem.review(agent_id="ops")] == [stale]
    assert [i.chunk_id for i in mem.review(limit=1)] == [held]
    assert mem.review(user_id="someone-else") == []
    with pytest.raises(InvalidInputError, match="review reasons are pending, stale, expired, verify, fact_conflict"):
        mem.review(reasons="bored")


def test_keep_approves_a_pending_memory_and_clears_a_flagged_one(mem) -> None:
    held, stale, _ = _waiting(mem)
    assert mem.decide([held, stale], "keep") == [held, stale]
    assert mem.get(held).status is ChunkStatus.ACTIVE
    assert mem.review() == []
    assert mem.get(stale).status is ChunkStatus.ACTIVE and not mem.get(stale).metadata.get("stale")


def test_delete_rejects_a_pending_memory_for_good_and_deletes_a_flagged_one(mem) -> None:
    held, stale, plain = _waiting(mem)
    assert mem.decide(held, "delete", reason="wrong gateway") == [held]
    assert mem.decide([stale], "delete") == [stale]
    assert mem.get_many([held, stale]) == [] and mem.review() == []
    assert mem.get(plain).status is ChunkStatus.ACTIVE


def test_a_bad_decision_changes_nothing(mem) -> None:
    held, stale, _ = _waiting(mem)
    before = [(i.chunk_id, i.reasons) for i in mem.review()]
    with pytest.raises(InvalidInputError, match="is pending: keep .approve. or delete .reject."):
        mem.decide([stale, held], "archive")  # archive is for flagged memories only
    with pytest.raises(NotFoundError, match="no memory with id 'nope'"):
        mem.decide([held, "nope"], "keep")
    with pytest.raises(InvalidInputError, match="decision must be keep, archive, delete"):
        mem.decide([held], "approve")
    with pytest.raises(InvalidInputError, match="reason must be text"):
        mem.decide([held], "delete", reason=42)  # type: ignore[arg-type]
    assert [(i.chunk_id, i.reasons) for i in mem.review()] == before
    assert mem.decide([stale], "archive") == [stale] and mem.get(stale).status is ChunkStatus.ARCHIVED


def test_the_old_names_still_work_and_warn(mem) -> None:
    held, stale, _ = _waiting(mem)
    with pytest.warns(DeprecationWarning, match=r"pending\(\) is deprecated: use BeeWeave.review"):
        assert [c.id for c in mem.pending(user_id="u")] == [held]
    with pytest.warns(DeprecationWarning, match="review_queue"):
        assert [i.chunk_id for i in mem.review_queue()] == [stale]
    with pytest.warns(DeprecationWarning, match="approve"):
        assert mem.approve([held]) == [held]
    with pytest.warns(DeprecationWarning, match="resolve_review"):
        assert mem.resolve_review(stale, "keep").id == stale
    other = mem.add("a memory held for review", user_id="u", status="pending")
    with pytest.warns(DeprecationWarning, match="reject"):
        assert mem.reject(other, reason="no") == [other]
    assert mem.review() == []
