"""What a knowledge event may say about its memories: tags (the caller's first, then the
extracted ones), expiry (expires_at or ttl), pin, confidence, importance, category; the
design document's agent_response and LangChain [action, observation] steps."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave
from beeweave_core.ids import event_memory_id
from beeweave_core.ingest.errors import InvalidEventError

EMBEDDER = "beeweave:hashing-64"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture()
def m():
    mem = BeeWeave(embedder=EMBEDDER)
    yield mem
    mem.close()


def _turn(m, event):
    eid = m.ingest(event)
    assert m.flush(20) and m.dead_letters() == []
    return m.get(event_memory_id(eid, event["user_id"], 0))


def test_the_callers_tags_come_first_and_filter(m):
    c = _turn(m, {"user_id": "u", "query": "写个快速排序函数", "response": "def quicksort(xs): ...",
                  "metadata": {"tags": ["编程", "算法", "Python"]}})
    assert c.tags[:3] == ["编程", "算法", "Python"]
    assert [h.chunk.id for h in m.search("排序", user_id="u", filters={"tags": ["算法"]})] == [c.id]
    d = _turn(m, {"user_id": "u", "query": "How do I reload nginx?", "response": "nginx -s reload",
                  "tags": ["nginx"], "metadata": {"tags": ["ignored"]}})
    assert d.tags[0] == "nginx" and "ignored" not in d.tags
    assert [h.chunk.id for h in m.search("reload", user_id="u", filters={"tags": ["nginx"]})] == [d.id]


def test_expiry_pin_confidence_importance_category(m):
    c = _turn(m, {"user_id": "u", "query": "What is the wifi password for guests?", "response": "Ask reception.",
                  "timestamp": T0.isoformat(), "ttl": 3600, "pinned": True, "confidence": 0.4, "importance": 3.0,
                  "category": "office"})
    assert c.expires_at == T0 + timedelta(hours=1)
    assert c.pinned and c.confidence == 0.4 and c.weight == 3.0 and c.metadata["category"] == "office"
    d = _turn(m, {"user_id": "u", "query": "When does the sale end?", "response": "On Friday.",
                  "expires_at": "2026-03-06T00:00:00Z"})
    assert d.expires_at == datetime(2026, 3, 6, tzinfo=timezone.utc) and not d.pinned


def test_the_design_documents_event_shape(m):
    eid = m.ingest({"user_id": "u", "session_id": "s", "query": "What's the weather in Paris?",
                    "agent_response": "It is 18 degrees and sunny in Paris.",
                    "intermediate_steps": [[{"tool": "weather", "tool_input": "Paris", "log": "calling weather"},
                                            "Paris: 18°C, sunny, wind 10 km/h from the west, humidity 40%"]]})
    assert m.flush(20)
    turn, tool = m.get(event_memory_id(eid, "u", 0)), m.get(event_memory_id(eid, "u", 1))
    assert turn.raw_content.endswith("It is 18 degrees and sunny in Paris.")
    assert tool.raw_content.startswith("weather: Paris") and "humidity 40%" in tool.raw_content


@pytest.mark.parametrize("bad", [
    {"tags": [""]}, {"tags": [1]}, {"ttl": -5}, {"ttl": 10, "expires_at": "2030-01-01"},
    {"pinned": "yes"}, {"confidence": 1.5}, {"importance": 0}, {"category": ""},
    {"expires_at": "9999-12-31T23:59:59-12:00"}, {"timestamp": "9999-12-31T23:59:59-12:00"},
    {"agent_response": "one", "response": "another"}, {"intermediate_steps": [["only-one"]]},
    {"intermediate_steps": [[42, "observation"]]}, {"ttl": 1e300},
])
def test_bad_fields_are_refused_and_nothing_is_queued(m, bad):
    with pytest.raises(InvalidEventError):
        m.ingest({"user_id": "u", "query": "q?", "response": "an answer", **bad})
    assert m.pending_events() == 0
