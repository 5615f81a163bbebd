"""Forgetting that happens: a simulated 90 days on a controlled clock, read from timestamps only."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from beeweave_core.lifecycle.expiry import eviction_score


def test_ninety_days_one_off_sinks_below_repeated_and_down_voted_stays_below_neutral(make, clock) -> None:
    m = make()
    text = "deploy with make release then tag the commit"
    one_off, repeated, down, unrated = (m.add(text, user_id="u") for _ in range(4))
    m.feedback([one_off], "used")
    for _ in range(3):
        m.feedback([down], "down")
    start = clock.now
    for day in range(1, 91):
        clock.now = start + timedelta(days=day)
        if day % 7 == 0:  # used about once a week
            m.feedback([repeated], "used")
        w = {cid: m.effective_weight(cid) for cid in (one_off, repeated, down, unrated)}
        assert w[down] < 1.0 and w[down] < w[unrated] and w[down] < w[one_off]
        if day >= 7:
            assert w[repeated] > w[one_off]
    w = {cid: m.effective_weight(cid) for cid in (one_off, repeated, down, unrated)}
    assert w[one_off] < 0.6 < 1.0 < w[repeated]  # the one-off memory sank below neutral
    assert w[down] < 1.0
    order = [h.id for h in m.search("how do we deploy a release", user_id="u", k=4)]
    assert order[0] == repeated and order[-1] == down
    # Nothing was stored by the passing of time: maintenance changes none of it.
    m.maintain()
    assert {cid: m.effective_weight(cid) for cid in w} == pytest.approx(w)


def test_a_used_memory_restarts_from_neutral(make, clock) -> None:
    m = make(used_delta=0.1)
    a = m.add("alpha", user_id="u")
    b = m.add("beta", user_id="u")
    clock.advance(days=60)
    assert m.effective_weight(a) == pytest.approx(0.5 + 0.5 * 0.98**60)
    m.feedback([a], "used")  # in use again: what sinking took is given back, then the delta
    assert m.effective_weight(a) == pytest.approx(1.1)
    assert m.effective_weight(b) == pytest.approx(0.5 + 0.5 * 0.98**60)
    clock.advance(days=30)
    assert m.effective_weight(a) > m.effective_weight(b)


def test_down_vote_does_not_refresh(make, clock) -> None:
    m = make(down_delta=-0.5)
    a = m.add("alpha", user_id="u")
    clock.advance(days=60)
    before = m.effective_weight(a)
    m.feedback([a], "down")
    assert m.effective_weight(a) == pytest.approx(before - 0.5)


def test_eviction_counts_idle_time_from_the_last_access(make, clock) -> None:
    m = make(evict_access_weight=1.0, evict_age_weight=1.0)
    read = m.add("read today", user_id="u", timestamp=clock.now - timedelta(days=29))
    idle = m.add("never read", user_id="u", timestamp=clock.now - timedelta(days=29))
    m.search("read today", user_id="u", k=1)
    m.flush()
    got = m.get(read)
    assert got.access_count == 1 and got.last_accessed == clock.now
    assert eviction_score(got, clock.now, m.lifecycle) == pytest.approx(math.log(2) + 1.0)
    assert eviction_score(m.get(idle), clock.now, m.lifecycle) == pytest.approx(1 / 30)
