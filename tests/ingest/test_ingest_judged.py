"""What the extractor judges (category, confidence, importance) reaches the memories and
admission; the design's distiller schema is read as is; a tool's output inherits its
turn's expiry; offline tags are fewer and never filler."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from beeweave_core import ChunkStatus, MemoryTier
from beeweave_core.ingest import (
    AdmissionRules,
    IngestConfig,
    KnowledgeEvent,
    LLMExtractor,
    PatternConfig,
    SourceRule,
    ToolCall,
)
from beeweave_core.ingest.extract import OfflineExtractor
from tests.ingest.ingest_support import everything

AT = datetime(2025, 2, 1, 12, 0, tzinfo=timezone.utc)
DISTILLED = {"core_summary": "The user is allergic to peanuts.", "entities": ["peanuts"], "category": "preference",
             "confidence": "high", "raw_excerpt": "I'm allergic to peanuts, never suggest them."}


def _model(answer: dict):
    return LLMExtractor(lambda prompt: "```json\n" + json.dumps(answer) + "\n```")


def test_the_distiller_schema_is_accepted_as_is() -> None:
    ext = _model(DISTILLED)
    e = ext.extract("I'm allergic to peanuts, never suggest them.", "Noted: no peanuts.")
    assert ext.failures == 0 and e.extra["extractor"] == "llm"
    assert e.summary == "The user is allergic to peanuts." and e.entities == ("peanuts",)
    assert (e.category, e.confidence, e.importance) == ("preference", 0.9, None)
    assert e.extra["raw_excerpt"] == DISTILLED["raw_excerpt"]
    assert len(e.tags) == 3  # completed from the text's own keywords
    low = _model(dict(DISTILLED, confidence=0.35, importance="medium")).extract("q", "a")
    assert (low.confidence, low.importance) == (0.35, 0.6)


def test_judged_values_reach_the_memory_and_admission(make_memory, clock) -> None:
    rules = AdmissionRules(sources=[SourceRule(role="turn", min_confidence=0.7)])
    m = make_memory(extractor=_model(dict(DISTILLED, importance="high")), admission=rules)
    m.ingest(KnowledgeEvent(user_id="u", id="e1", timestamp=AT, query="I'm allergic to peanuts, never suggest them.",
                            response="Noted: I will never suggest peanuts."))
    assert m.flush(10)
    c = m.get("e1@u:0")
    assert c.status is ChunkStatus.ACTIVE and c.confidence == 0.9
    assert c.metadata["category"] == "preference" and c.metadata["importance"] == 1.0
    assert c.metadata["ingest"]["raw_excerpt"] == DISTILLED["raw_excerpt"]
    assert c.tier is MemoryTier.LONG  # importance "high" promotes at once
    unsure = make_memory(extractor=_model(dict(DISTILLED, confidence="medium")), admission=rules)
    unsure.ingest(KnowledgeEvent(user_id="u", id="e2", timestamp=AT, query="Maybe I like tea, not sure.",
                                 response="I will remember that you may like tea."))
    assert unsure.flush(10)
    held = unsure.get("e2@u:0")
    assert held.status is ChunkStatus.PENDING and held.confidence == 0.6
    assert held.metadata["ingest"]["review"] == ["confidence 0.6 < 0.7 (source rule: role='turn')"]
    assert held.tier is MemoryTier.SHORT


def test_a_tool_output_inherits_its_turns_expiry(make_memory) -> None:
    m = make_memory()
    m.ingest(KnowledgeEvent(
        user_id="u", id="w1", timestamp=AT, query="What's the weather in Lyon today?",
        response="Today it is sunny in Lyon, 21 °C.",
        intermediate_steps=[ToolCall("weather", {"city": "Lyon"}, "sunny, 21 °C in Lyon, light wind from the west")]))
    assert m.flush(10)
    turn, tool = m.get("w1@u:0"), m.get("w1@u:1")
    assert turn.expires_at == AT + timedelta(hours=24) and turn.metadata["expiry_rule"] == "weather"
    assert tool.expires_at == turn.expires_at and tool.metadata["expiry_rule"] == "weather (its turn)"
    m.ingest(KnowledgeEvent(user_id="u", id="w2", timestamp=AT, query="Which city hosts the Lumière museum?",
                            response="The Lumière museum is in Lyon.",
                            intermediate_steps=[ToolCall("search", "Lumiere museum", "Institut Lumière, Lyon 8e, "
                                                                                    "rue du Premier-Film")]))
    assert m.flush(10)
    lasting = m.get("w2@u:1")  # a lasting fact's tool output has no rule expiry: it waits for promotion, then settles
    assert "expiry_rule" not in lasting.metadata and lasting.expires_at is None and "settles_at" in lasting.metadata
    assert {c.id for c in everything(m)} >= {"w1@u:0", "w1@u:1", "w2@u:0", "w2@u:1"}


def test_offline_tags_are_fewer_and_never_filler() -> None:
    x = OfflineExtractor()
    e = x.extract("帮我写个快速排序，哪种语言都可以", "这是用Python写的快速排序实现。")
    assert not {"写个", "快速", "哪种", "可以"} & set(e.tags)
    assert "排序" in e.tags and len(e.tags) < 5
    e = x.extract("I checked the logs: why did the nightly backup fail?",
                  "The nightly backup of the billing database failed because the disk was full.")
    assert "checked" not in e.tags and "backup" in e.tags
    assert e.confidence is None and e.importance is None  # rules do not pretend to judge these


def test_ingest_tier_is_configurable(make_memory) -> None:
    m = make_memory(tier="long")
    m.ingest(KnowledgeEvent(user_id="u", id="t1", timestamp=AT, query="Where are the runbooks?",
                            response="The runbooks live in the ops wiki."))
    assert m.flush(10)
    assert m.get("t1@u:0").tier is MemoryTier.LONG and m.get("t1@u:0").expires_at is None
    assert IngestConfig().tier is MemoryTier.SHORT


def test_repeated_turns_merge_at_insert_with_history(make_memory, clock) -> None:
    m = make_memory(patterns=PatternConfig(enabled=False))
    for i in range(12):  # the same question and answer, twelve times
        m.ingest(KnowledgeEvent(user_id="u", id=f"q{i}", timestamp=AT + timedelta(minutes=i),
                                query="How do I reset the staging database?",
                                response="Run make reset-db from the ops repository."))
    m.ingest(KnowledgeEvent(user_id="u", id="other", timestamp=AT, query="How do I reset the production database?",
                            response="Never: production resets need a change request and two approvals."))
    assert m.flush(10)
    active = everything(m, status="active")
    assert len(active) == 2  # one memory of the twelve, and the different question
    primary = next(c for c in active if c.id != "other@u:0")
    assert len(primary.metadata["merged_from"]) == 11 and m.history(primary.id)
    merged = everything(m, status="merged")
    assert len(merged) == 11 and all(c.metadata["merged_into"] == primary.id for c in merged)
    # A caller's own add() is kept as given: twice the same words are two memories.
    for _ in range(2):
        m.add("The deploy freeze starts on Friday at noon.", user_id="v")
    assert m.count(user_id="v") == 2
