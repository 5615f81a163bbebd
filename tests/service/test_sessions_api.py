"""A session's working memory over HTTP: the client's add_turn / get_conversation_context
against a live server, tenants kept apart, bad input refused."""

from __future__ import annotations

import pytest

from beeweave_core import InvalidInputError


def test_turns_and_context_over_http(acme, beta) -> None:
    for i in range(3):
        ctx = acme.add_turn("http-s1", "user" if i % 2 == 0 else "assistant", f"Turn {i} about the backup plan.",
                            user_id="ann")
    assert ctx.total_turns == 3 and [t.content for t in ctx.turns][-1] == "Turn 2 about the backup plan."
    got = acme.get_conversation_context("http-s1", 2, user_id="ann")
    assert [t.role for t in got.turns] == ["assistant", "user"] and got.total_turns == 3
    assert acme.add_turn("http-s1", "user", "Mail ann@example.com", user_id="ann").turns[-1].content == "Mail [EMAIL]"
    assert beta.get_conversation_context("http-s1", 5, user_id="ann").total_turns == 0  # another tenant
    with pytest.raises(InvalidInputError):
        acme.add_turn("http-s1", "robot", "hello", user_id="ann")
    with pytest.raises(InvalidInputError):
        acme.get_conversation_context("http-s1", -1, user_id="ann")


def test_tiers_over_http(acme) -> None:
    short = acme.add("The staging cluster restarts at midnight tonight.", user_id="tia", tier="short")
    acme.add("The user prefers dark mode in every app.", user_id="tia")
    # a short-term memory waits for promotion, then settles into long-term: no expiry
    assert acme.get(short).tier.value == "short" and "settles_at" in acme.get(short).metadata
    hits = acme.search("staging cluster midnight", user_id="tia", k=5, filters={"tier": "short"})
    assert [h.id for h in hits] == [short]
    with pytest.raises(InvalidInputError):
        acme.search("x", user_id="tia", filters={"tier": "forever"})
