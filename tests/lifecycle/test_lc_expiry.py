"""Expiry: set explicitly or by rules (English and Chinese cues); maintain() archives,
deletes or flags; expired memories rank down before any maintenance; pinned never expire."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_core import ChunkStatus, EventType, InvalidInputError, KnowledgeChunk
from beeweave_core.lifecycle import DEFAULT_EXPIRY_RULES, ExpiryRule
from beeweave_core.lifecycle.expiry import rule_expiry

DAY = timedelta(hours=24)


@pytest.mark.parametrize("text,rule", [
    ("Today's weather in Berlin: sunny, 21 degrees", "weather"),
    ("It is raining right now in Oslo", "weather"),
    ("今天天气晴，最高气温25度", "weather"),
    ("明天有雨，记得带伞。明天天气预报说下雨", "weather"),
    ("今天weather很好", "weather"),
    ("AAPL stock price is $191.20", "stock_price"),
    ("腾讯股价今天涨到380元", "stock_price"),
    ("股价收在一百二十元", "stock_price"),
])
def test_rules_give_volatile_memories_a_day(text, rule) -> None:
    c = KnowledgeChunk(text, "u")
    assert rule_expiry(c, DEFAULT_EXPIRY_RULES) == (c.timestamp + DAY, rule)


@pytest.mark.parametrize("text", [
    "The user likes rainy weather",
    "用户喜欢下雨天的天气",
    "The user tracks the AAPL stock price",
    "Today I learned the user is allergic to peanuts",
    "今天用户说他对花生过敏",
])
def test_lasting_memories_get_no_expiry(text) -> None:
    assert rule_expiry(KnowledgeChunk(text, "u"), DEFAULT_EXPIRY_RULES) is None


def test_rules_apply_when_memories_are_added(mem, clock) -> None:
    ids = mem.add_many([{"content": t, "user_id": "u"} for t in ("今天天气晴，最高气温25度", "用户对花生过敏",
                                                                  "AAPL stock price is $191.20")])
    got = [mem.get(i) for i in ids]
    assert [c.expires_at for c in got] == [clock.now + DAY, None, clock.now + DAY]
    assert [c.metadata.get("expiry_rule") for c in got] == ["weather", None, "stock_price"]


def test_tag_rule_and_rules_measure_from_the_memorys_timestamp(mem, clock) -> None:
    said = clock.now - timedelta(hours=30)
    cid = mem.add("quote of the moment", user_id="u", tags=["ephemeral"], timestamp=said)
    assert mem.get(cid).expires_at == said + DAY


def test_explicit_expiry_and_pinned_are_left_alone(mem, clock) -> None:
    at = clock.now + timedelta(days=7)
    a = mem.add("Today's weather: sunny", user_id="u", expires_at=at)
    b = mem.add("Today's weather: sunny", user_id="u", pinned=True)
    assert mem.get(a).expires_at == at and "expiry_rule" not in mem.get(a).metadata
    assert mem.get(b).expires_at is None


def test_custom_rules(make, clock) -> None:
    rule = ExpiryRule("otp", timedelta(minutes=10), patterns=(r"\bcode\b", r"\d{6}"))
    m = make(expiry_rules=(rule,))
    a = m.add("your login code is 123456", user_id="u")
    assert m.get(a).expires_at == clock.now + timedelta(minutes=10)
    assert m.get(m.add("Today's weather: sunny", user_id="u")).expires_at is None  # defaults replaced
    for bad in (dict(ttl=timedelta(0), tags=("x",)), dict(ttl=DAY), dict(ttl=DAY, patterns=("(",)),
                dict(ttl=DAY, tags="x")):
        with pytest.raises(InvalidInputError):
            ExpiryRule("bad", **bad)


def test_expired_memories_rank_down_before_maintain(mem, clock) -> None:
    old = mem.add("the office wifi is guest-2024", user_id="u", expires_at=clock.now + DAY)
    new = mem.add("the office wifi is guest-2024", user_id="u")
    first = {h.id: h.score for h in mem.search("office wifi", user_id="u")}
    assert first[old] == pytest.approx(first[new])
    clock.advance(days=2)
    hits = mem.search("office wifi", user_id="u")
    assert [h.id for h in hits] == [new, old]
    assert hits[1].score == pytest.approx(hits[0].score * mem.scoring.expired_penalty)


def test_maintain_archives_expired_low_weight_and_flags_high_weight(make, clock) -> None:
    m = make(up_delta=1.0, review_weight=1.5)
    seen = []
    m.events.subscribe(seen.append, types=[EventType.EXPIRED])
    low = m.add("Today's weather: sunny", user_id="u")
    high = m.add("Today's weather: rain, take the blue umbrella", user_id="u")
    pinned = m.add("today's weather dashboard link", user_id="u", pinned=True, expires_at=clock.now)
    keep = m.add("the user likes tea", user_id="u")
    m.feedback([high], "up")
    clock.advance(hours=25)
    report = m.maintain()
    assert (report.expired, report.archived, report.deleted, report.flagged) == (1, 1, 0, 1)
    assert m.get(low).status is ChunkStatus.ARCHIVED and m.get(low).metadata["archived_reason"] == "expired"
    assert m.get(high).status is ChunkStatus.ACTIVE
    assert [(i.chunk_id, i.reasons) for i in m.review_queue()] == [(high, ("expired",))]
    assert m.get(pinned).status is ChunkStatus.ACTIVE and m.get(keep).status is ChunkStatus.ACTIVE
    assert [(ev.chunk_id, ev.data["action"]) for ev in seen] == [(low, "archived"), (high, "review")]
    assert [h.id for h in m.search("weather", user_id="u", k=10)].count(low) == 0
    # A second run does not flag or report the same memory again.
    assert m.maintain().flagged == 0 and len(seen) == 2
    # Keeping it clears the passed expiry.
    assert m.resolve_review(high, "keep").expires_at is None
    assert m.review_queue() == []


def test_expired_can_be_deleted_with_an_audit_record(make, clock) -> None:
    m = make(expired_action="delete")
    seen = []
    m.events.subscribe(seen.append)
    a = m.add("AAPL stock price is $191.20", user_id="u", agent_id="trader")
    clock.advance(days=2)
    report = m.maintain()
    assert (report.expired, report.deleted, report.archived) == (1, 1, 0)
    assert not m.backend.contains([a])
    assert [ev.type for ev in seen[-2:]] == [EventType.EXPIRED, EventType.DELETED]
    assert seen[-2].agent_id == "trader"
    (entry,) = m.audit(a)
    assert (entry["action"], entry["reason"]) == ("deleted", "expired")
