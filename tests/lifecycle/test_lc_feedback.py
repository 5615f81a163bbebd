"""Feedback: used / up / down change weights, counts and staleness; bad input changes nothing."""

from __future__ import annotations

import pytest

from beeweave_core import InvalidInputError, NotFoundError
from beeweave_core.lifecycle import FeedbackSignal, LifecycleConfig


def test_each_signal_moves_the_weight_by_its_delta_and_restarts_decay(make, clock) -> None:
    m = make(used_delta=0.2, up_delta=0.5, down_delta=-0.25)
    a = m.add("the deploy script lives in ops/deploy.sh", user_id="u")
    assert m.get(a).weight == 1.0 and m.get(a).reinforced_at is None
    clock.advance(hours=1)
    (c,) = m.feedback([a], FeedbackSignal.UP)
    assert c.weight == pytest.approx(1.5) and c.reinforced_at == clock.now
    (c,) = m.feedback(a, "used")  # a single id is fine too
    assert c.weight == pytest.approx(1.7)
    (c,) = m.feedback([a], "down")
    assert c.weight == pytest.approx(1.45)
    assert c.metadata["feedback"] == {"up": 1, "used": 1, "down": 1, "down_streak": 1}


def test_feedback_adds_to_the_decayed_weight_not_the_stored_one(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")  # weight 2.0 now
    clock.advance(days=2)  # earned part 1.0 decays to 0.95**2
    (c,) = m.feedback([a], "up")
    assert c.weight == pytest.approx(1 + 0.95**2 + 1.0)


def test_used_counts_as_an_access(mem, clock) -> None:
    a = mem.add("alpha", user_id="u")
    clock.advance(minutes=5)
    (c,) = mem.feedback([a], "used")
    assert c.access_count == 1 and c.last_accessed == clock.now
    (c,) = mem.feedback([a], "up")
    assert c.access_count == 1  # only "used" is an access


def test_weight_is_clamped(make) -> None:
    m = make(up_delta=5.0, down_delta=-5.0, min_weight=0.1, max_weight=3.0)
    a = m.add("alpha", user_id="u")
    assert m.feedback([a], "up")[0].weight == 3.0
    assert m.feedback([a], "down")[0].weight == pytest.approx(0.1)


def test_repeated_down_marks_stale_and_flags_for_review(make) -> None:
    m = make(stale_after=3)
    a, b = m.add("alpha", user_id="u"), m.add("beta", user_id="v")
    for _ in range(2):
        m.feedback([a, b], "down")
    assert not m.get(a).metadata.get("stale") and m.review_queue() == []
    m.feedback([a], "down")
    assert m.get(a).metadata["stale"] is True
    (item,) = m.review_queue()
    assert (item.chunk_id, item.user_id, item.reasons) == (a, "u", ("stale",))
    assert m.review_queue(user_id="v") == []
    m.feedback([a], "down")  # already flagged: still one entry
    assert len(m.review_queue()) == 1


def test_up_ends_the_down_streak_and_clears_stale(make) -> None:
    m = make(stale_after=2)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "down")
    m.feedback([a], "up")
    m.feedback([a], "down")
    assert not m.get(a).metadata.get("stale")  # not two in a row
    m.feedback([a], "down")
    assert m.get(a).metadata["stale"] and m.review_queue()
    m.feedback([a], "up")
    assert "stale" not in m.get(a).metadata and m.review_queue() == []


def test_stale_memories_rank_below_their_twins(mem) -> None:
    a = mem.add("the wifi password is hunter2", user_id="u")
    b = mem.add("the wifi password is hunter2", user_id="u")
    base = {h.id: h.score for h in mem.search("wifi password", user_id="u")}
    assert base[a] == pytest.approx(base[b])
    mem.update(b, metadata={"stale": True})
    hits = {h.id: h.score for h in mem.search("wifi password", user_id="u")}
    assert hits[b] == pytest.approx(hits[a] * mem.scoring.stale_penalty)


def test_unknown_id_raises_and_changes_nothing(mem) -> None:
    a = mem.add("alpha", user_id="u")
    before = mem.get(a).to_dict()
    with pytest.raises(NotFoundError):
        mem.feedback([a, "nope"], "up")
    assert mem.get(a).to_dict() == before


@pytest.mark.parametrize("signal", ["like", "", None, 3])
def test_bad_signal_is_rejected(mem, signal) -> None:
    a = mem.add("alpha", user_id="u")
    with pytest.raises(InvalidInputError):
        mem.feedback([a], signal)
    assert mem.get(a).weight == 1.0


def test_bad_ids_are_rejected(mem) -> None:
    for bad in ([3], 3, None, b"id", [""]):
        with pytest.raises(InvalidInputError):
            mem.feedback(bad, "up")
    assert mem.feedback([], "up") == []


def test_review_decisions(mem) -> None:
    a, b, c = (mem.add(t, user_id="u") for t in ("alpha", "beta", "gamma"))
    for cid in (a, b, c):
        for _ in range(3):
            mem.feedback([cid], "down")
    assert {i.chunk_id for i in mem.review_queue()} == {a, b, c}
    kept = mem.resolve_review(a, "keep")
    assert "stale" not in kept.metadata and kept.metadata["feedback"]["down_streak"] == 0
    assert mem.resolve_review(b, "archive").status.value == "archived"
    assert mem.resolve_review(c, "delete") is None and not mem.backend.contains([c])
    assert mem.review_queue() == []
    assert [(e["chunk_id"], e["action"]) for e in mem.audit()] == [(b, "archived"), (c, "deleted")]
    with pytest.raises(InvalidInputError):
        mem.resolve_review(a, "shrug")
    with pytest.raises(NotFoundError):
        mem.resolve_review(c, "keep")


@pytest.mark.parametrize("bad", [dict(stale_after=0), dict(min_weight=-1), dict(max_weight=0.01),
                                 dict(access_batch=0), dict(merge_threshold=2), dict(capacity=0),
                                 dict(expired_action="shred"), dict(up_delta="x"), dict(expiry_rules=("x",))])
def test_bad_config_is_rejected(bad) -> None:
    with pytest.raises(InvalidInputError):
        LifecycleConfig(**bad)


def test_lifecycle_must_be_a_config() -> None:
    from beeweave_core import BeeWeave, HashingEmbedder

    with pytest.raises(InvalidInputError):
        BeeWeave(embedder=HashingEmbedder(8), lifecycle={"capacity": 3})


def test_the_queue_drops_memories_that_left_the_active_set(make) -> None:
    m = make(stale_after=1)
    a, b, c = (m.add(t, user_id="u") for t in ("alpha", "beta", "gamma"))
    m.feedback([a, b, c], "down")
    m.update(a, status="archived")
    m.delete(b)
    assert [i.chunk_id for i in m.review_queue()] == [c]
    assert [k for k, _ in m.backend.kv_scan("lifecycle.review")] == [c]
