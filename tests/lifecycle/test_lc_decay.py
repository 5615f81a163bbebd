"""Decay is computed from timestamps, so it is right without maintain(); ranking uses it."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from beeweave_core import ScoringConfig
from beeweave_core.scoring import effective_weight, score_factor


def _unused(days: float) -> float:
    """The neutral weight after ``days`` unused, by the defaults: floor 0.5, 0.98 a day."""
    return 0.5 + 0.5 * 0.98**days


def test_earned_weight_decays_095_per_day_without_maintain(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")
    assert m.effective_weight(a) == pytest.approx(2.0)
    for days in (1, 2, 10, 100):
        clock.now = m.get(a).reinforced_at
        clock.advance(days=days)
        assert m.effective_weight(a) == pytest.approx(_unused(days) + 0.95**days)
    clock.advance(hours=12)  # fractional periods decay smoothly
    assert m.effective_weight(a) == pytest.approx(_unused(100.5) + 0.95**100.5)
    assert m.get(a).weight == 2.0  # nothing was written: reading is enough


def test_a_penalty_decays_slower_than_praise_and_stays_below_neutral(make, clock) -> None:
    m = make(down_delta=-0.5, up_delta=0.5)
    down = m.add("alpha", user_id="u")
    up = m.add("beta", user_id="u")
    m.feedback([down], "down")
    m.feedback([up], "up")
    start = clock.now
    for days in (3, 30, 60, 365):
        clock.now = start + timedelta(days=days)
        assert m.effective_weight(down) == pytest.approx(_unused(days) - 0.5 * 0.99**days)
        assert m.effective_weight(up) == pytest.approx(_unused(days) + 0.5 * 0.95**days)
        assert m.effective_weight(down) < _unused(days) < 1.0  # still below an unrated memory
        assert 1.0 - m.effective_weight(down) > m.effective_weight(up) - 1.0  # blame outlasts praise


def test_unrated_memory_starts_neutral_and_sinks_towards_the_floor(mem, clock) -> None:
    a = mem.add("alpha", user_id="u")
    assert mem.effective_weight(a) == 1.0
    assert score_factor(mem.get(a), clock.now, mem.scoring) == 1.0  # plain relevance, for a new memory
    clock.advance(days=400)
    assert mem.effective_weight(a) == pytest.approx(_unused(400))
    assert 0.5 < mem.effective_weight(a) < 0.501
    never = ScoringConfig(unused_decay=1.0)  # sinking off: the neutral weight stays
    assert effective_weight(mem.get(a), clock.now, never) == 1.0


def test_pinned_memories_do_not_decay(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("alpha", user_id="u", pinned=True)
    m.feedback([a], "up")
    clock.advance(days=30)
    assert m.effective_weight(a) == pytest.approx(2.0)


def test_decay_period_and_factor_are_configurable(make, clock) -> None:
    m = make(up_delta=1.0, scoring=ScoringConfig(decay=0.5, floor=1.0, period=timedelta(hours=1)))
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")
    clock.advance(hours=3)
    assert m.effective_weight(a) == pytest.approx(1.125)  # floor 1: only the earned part decays


def test_weight_factor_is_log_of_weight_plus_one(make, clock) -> None:
    m = make(up_delta=2.0)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")
    c = m.get(a)
    assert score_factor(c, clock.now, m.scoring) == pytest.approx(math.log(4) / math.log(2))
    assert effective_weight(c, clock.now, m.scoring) == pytest.approx(3.0)
    assert score_factor(c, clock.now, ScoringConfig(use_weight=False)) == 1.0


@pytest.mark.parametrize("bad", [dict(decay=0), dict(decay=1.5), dict(stale_penalty=2), dict(expired_penalty=-1),
                                 dict(period=0), dict(penalty_decay=0), dict(unused_decay=1.1), dict(floor=-0.1),
                                 dict(floor=2), dict(floor=True)])
def test_bad_scoring_config_is_rejected(bad) -> None:
    from beeweave_core import InvalidInputError

    with pytest.raises(InvalidInputError):
        ScoringConfig(**bad)


def test_feedback_changes_the_order_of_search_results_end_to_end(make, clock) -> None:
    m = make()
    texts = ["Restart the nginx server with systemctl restart nginx",
             "Restart the nginx server by sending it the HUP signal",
             "Restart the nginx server from the admin dashboard"]
    ids = [m.add(t, user_id="u") for t in texts]
    # Two memories on other topics: fused z-scores over the three answers alone spread any
    # difference between them to +-1.2 in each list (with rank_bm25's idf, negative for terms in
    # every memory, BM25 ranked them backwards and the lists' disagreement hid that).
    for other in ("The office wifi password is on the whiteboard.", "Invoices are due on the 5th."):
        m.add(other, user_id="u")
    first = [h.id for h in m.search("how to restart the nginx server", user_id="u", k=3)]
    assert sorted(first) == sorted(ids)
    loser, winner = first[0], first[-1]
    m.feedback([winner], "up")
    m.feedback([winner], "up")
    m.feedback([loser], "down")
    after = [h.id for h in m.search("how to restart the nginx server", user_id="u", k=3)]
    assert after[0] == winner and after[-1] == loser
    # A year without feedback: praise has faded and so has most of the penalty, the plain order
    # is back; what is left of the penalty still holds the down-voted memory below the others.
    clock.advance(days=365)
    assert [h.id for h in m.search("how to restart the nginx server", user_id="u", k=3)] == first
    assert m.effective_weight(loser) < min(m.effective_weight(i) for i in first if i != loser)
    assert m.effective_weight(winner) == pytest.approx(m.effective_weight(first[1]), abs=1e-6)


def test_used_signal_alone_lifts_a_memory(make) -> None:
    m = make(used_delta=0.3)
    a = m.add("the standup is at 9:30 in room B", user_id="u")
    b = m.add("the standup is at 9:30 in room B", user_id="u")
    m.feedback([b], "used")
    assert [h.id for h in m.search("when is the standup", user_id="u", k=2)] == [b, a]
