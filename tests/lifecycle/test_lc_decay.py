"""Decay is computed from timestamps, so it is right without maintain(); ranking uses it."""

from __future__ import annotations

import math

import pytest

from beeweave_core import ScoringConfig
from beeweave_core.scoring import effective_weight, score_factor


def test_earned_weight_decays_095_per_day_without_maintain(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")
    assert m.effective_weight(a) == pytest.approx(2.0)
    for days in (1, 2, 10, 100):
        clock.now = m.get(a).reinforced_at
        clock.advance(days=days)
        assert m.effective_weight(a) == pytest.approx(1 + 0.95**days)
    clock.advance(hours=12)  # fractional periods decay smoothly
    assert m.effective_weight(a) == pytest.approx(1 + 0.95**100.5)
    assert m.get(a).weight == 2.0  # nothing was written: reading is enough


def test_negative_weight_recovers_towards_neutral(make, clock) -> None:
    m = make(down_delta=-0.5)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "down")
    clock.advance(days=3)
    assert m.effective_weight(a) == pytest.approx(1 - 0.5 * 0.95**3)


def test_unrated_memory_sits_at_neutral_and_keeps_plain_relevance(mem, clock) -> None:
    a = mem.add("alpha", user_id="u")
    clock.advance(days=400)
    assert mem.effective_weight(a) == 1.0
    assert score_factor(mem.get(a), clock.now, mem.scoring) == 1.0


def test_pinned_memories_do_not_decay(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("alpha", user_id="u", pinned=True)
    m.feedback([a], "up")
    clock.advance(days=30)
    assert m.effective_weight(a) == pytest.approx(2.0)


def test_decay_period_and_factor_are_configurable(make, clock) -> None:
    from datetime import timedelta

    m = make(up_delta=1.0, scoring=ScoringConfig(decay=0.5, period=timedelta(hours=1)))
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")
    clock.advance(hours=3)
    assert m.effective_weight(a) == pytest.approx(1.125)


def test_weight_factor_is_log_of_weight_plus_one(make, clock) -> None:
    m = make(up_delta=2.0)
    a = m.add("alpha", user_id="u")
    m.feedback([a], "up")
    c = m.get(a)
    assert score_factor(c, clock.now, m.scoring) == pytest.approx(math.log(4) / math.log(2))
    assert effective_weight(c, clock.now, m.scoring) == pytest.approx(3.0)
    assert score_factor(c, clock.now, ScoringConfig(use_weight=False)) == 1.0


@pytest.mark.parametrize("bad", [dict(decay=0), dict(decay=1.5), dict(stale_penalty=2), dict(expired_penalty=-1),
                                 dict(period=0)])
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
    first = [h.id for h in m.search("how to restart the nginx server", user_id="u", k=3)]
    assert sorted(first) == sorted(ids)
    loser, winner = first[0], first[-1]
    m.feedback([winner], "up")
    m.feedback([winner], "up")
    m.feedback([loser], "down")
    after = [h.id for h in m.search("how to restart the nginx server", user_id="u", k=3)]
    assert after[0] == winner and after[-1] == loser
    # A year without feedback: the earned weights have decayed, the plain order is back.
    clock.advance(days=365)
    assert [h.id for h in m.search("how to restart the nginx server", user_id="u", k=3)] == first


def test_used_signal_alone_lifts_a_memory(make) -> None:
    m = make(used_delta=0.3)
    a = m.add("the standup is at 9:30 in room B", user_id="u")
    b = m.add("the standup is at 9:30 in room B", user_id="u")
    m.feedback([b], "used")
    assert [h.id for h in m.search("when is the standup", user_id="u", k=2)] == [b, a]
