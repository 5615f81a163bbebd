"""Events: memory.created / updated / merged / expired / deleted, with subscriptions
filtered by type, tag, user and agent."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_core import EventType, InvalidInputError
from tests.lifecycle.lifecycle_support import unit


def _story(m, clock) -> dict[str, str]:
    """One memory through every event type."""
    ids = {}
    ids["a"] = m.add("the user wants dark mode everywhere", user_id="u", agent_id="ui-bot", tags=["ui"],
                     embedding=unit(1, 0))
    ids["b"] = m.add("dark mode please", user_id="u", agent_id="ui-bot", tags=["ui"], embedding=unit(1, 0.1))
    ids["w"] = m.add("Today's weather: sunny", user_id="v", agent_id="weather-bot", tags=["weather"],
                     embedding=unit(0, 1))
    m.feedback([ids["a"]], "up")
    clock.advance(days=2)
    m.maintain()  # b merges into a; w expires
    m.delete(ids["a"])
    return ids


def test_every_event_type_is_sent_in_order(mem, clock) -> None:
    seen = []
    mem.events.subscribe(seen.append)
    ids = _story(mem, clock)
    got = [(ev.type, ev.chunk_id) for ev in seen]
    a, b, w = ids["a"], ids["b"], ids["w"]
    assert got == [
        (EventType.CREATED, a), (EventType.CREATED, b),
        (EventType.CREATED, w), (EventType.UPDATED, w),  # the weather rule set expires_at
        (EventType.UPDATED, a),  # feedback
        (EventType.EXPIRED, w),
        (EventType.UPDATED, a), (EventType.MERGED, b),
        (EventType.DELETED, a),
    ]
    assert all(ev.at == clock.now for ev in seen[-4:])


def test_subscriptions_filter_by_type_tag_user_and_agent(mem, clock) -> None:
    by_type, by_tag, by_user, by_agent, combined = [], [], [], [], []
    mem.events.subscribe(by_type.append, types=[EventType.MERGED, EventType.EXPIRED])
    mem.events.subscribe(by_tag.append, tags=["weather"])
    mem.events.subscribe(by_user.append, user_id="u")
    mem.events.subscribe(by_agent.append, agent_id="weather-bot")
    mem.events.subscribe(combined.append, types=["memory.updated"], user_id="u", tags=["ui"])
    ids = _story(mem, clock)
    assert [(ev.type, ev.chunk_id) for ev in by_type] == [(EventType.EXPIRED, ids["w"]), (EventType.MERGED, ids["b"])]
    assert {ev.chunk_id for ev in by_tag} == {ids["w"]} and len(by_tag) == 3
    assert {ev.user_id for ev in by_user} == {"u"} and len(by_user) == 6
    assert by_agent == by_tag
    assert [ev.chunk_id for ev in combined] == [ids["a"], ids["a"]]
    assert combined[0].data["feedback"] == "up" and combined[1].data["reason"] == "merge"


def test_unsubscribe_and_a_failing_subscriber(mem) -> None:
    seen = []
    sub = mem.events.subscribe(seen.append)

    def boom(ev) -> None:
        raise RuntimeError("listener bug")

    mem.events.subscribe(boom)
    a = mem.add("alpha", user_id="u")
    mem.feedback([a], "up")  # the failing listener does not break feedback
    assert mem.get(a).weight == 1.5 and mem.events.errors == 2
    mem.events.unsubscribe(sub)
    mem.feedback([a], "up")
    assert len(seen) == 2


def test_a_subscriber_may_call_back_into_the_memory(make, clock) -> None:
    m = make(capacity=1, access_flush_interval=0.0)
    found = []
    m.events.subscribe(lambda ev: found.append(len(m.search("alpha", user_id="u"))),
                       types=[EventType.UPDATED, EventType.MERGED])
    m.add("alpha", user_id="u", timestamp=clock.now - timedelta(days=3))
    m.add("alpha beta", user_id="u")  # evicts the first; the listener searches meanwhile
    assert found == [1]


def test_a_bad_subscription_is_refused_with_a_beeweave_error(mem) -> None:
    with pytest.raises(InvalidInputError, match="memory.create"):  # was a bare ValueError
        mem.events.subscribe(lambda e: None, types=["memory.create"])
    with pytest.raises(InvalidInputError):  # was accepted, then a traceback on every event
        mem.events.subscribe("notcallable")
    seen = []
    mem.events.subscribe(seen.append, types="memory.created")  # one type by name
    mem.add("a memory", user_id="u")
    assert [e.type for e in seen] == [EventType.CREATED]
