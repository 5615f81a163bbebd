"""ingest(): validation on the caller's thread, and how an event becomes memories."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from beeweave_core import ChunkStatus, ContentType, EmptyContentError, Intent, InvalidInputError, StoreClosedError
from beeweave_core.ingest import InvalidEventError, KnowledgeEvent, ToolCall
from tests.ingest.ingest_support import everything


def run(m, *events) -> None:
    for e in events:
        m.ingest(e)
    assert m.flush(10)


def test_a_turn_and_its_meaningful_tool_calls_become_memories(make_memory) -> None:
    m = make_memory()
    at = datetime(2025, 2, 1, 12, 0, tzinfo=timezone.utc)
    event = KnowledgeEvent(
        user_id="alice", agent_id="travel-bot", session_id="s1", id="run-7", timestamp=at,
        query="What's the weather in Paris tomorrow?", response="Sunny, 21 °C. Take sunglasses.",
        metadata={"channel": "web"},
        intermediate_steps=[
            ToolCall("weather_api", {"city": "Paris"}, {"city": "Paris", "temp": 21, "sky": "sunny", "wind": 3}),
            ToolCall("geocode", "Paris", "ok"),  # too short to be knowledge
            ToolCall("news", "Paris", None, error="HTTP 503"),  # failed
            ToolCall("echo", "x", "Sunny, 21 °C. Take sunglasses."),  # the answer itself
        ])
    assert m.ingest(event) == "run-7"
    assert m.flush(10)
    chunks = {c.id: c for c in everything(m)}
    assert set(chunks) == {"run-7@alice:0", "run-7@alice:1"}
    turn, tool = chunks["run-7@alice:0"], chunks["run-7@alice:1"]
    assert turn.raw_content == "What's the weather in Paris tomorrow?\n\nSunny, 21 °C. Take sunglasses."
    for c in (turn, tool):
        assert (c.user_id, c.agent_id, c.session_id, c.timestamp) == ("alice", "travel-bot", "s1", at)
        assert c.status is ChunkStatus.ACTIVE and c.metadata["channel"] == "web"
        assert c.metadata["ingest"]["event_id"] == "run-7"
    assert turn.metadata["ingest"]["tools"] == ["weather_api", "geocode", "news", "echo"]
    assert turn.metadata["ingest"]["tool_errors"] == [{"tool": "news", "error": "HTTP 503"}]
    assert turn.intent is Intent.INFORMATION_QUERY and turn.summary and 3 <= len(turn.tags) <= 5
    assert tool.metadata["ingest"]["tool"] == "weather_api" and tool.metadata["ingest"]["step"] == 1
    assert tool.processed_content.type is ContentType.DATA and tool.processed_content.payload["temp"] == 21
    assert tool.raw_content.startswith('weather_api: {"city": "Paris"}\n')
    assert tool.summary.startswith("weather_api: ")
    assert m.search("Paris weather", user_id="alice", k=2)


def test_code_answers_are_code(make_memory) -> None:
    m = make_memory()
    run(m, {"user_id": "u", "id": "e", "query": "Write a Python function that adds two numbers",
            "response": "```python\ndef add(a, b):\n    return a + b\n```"})
    c = m.get("e@u:0")
    assert c.processed_content.type is ContentType.CODE and c.processed_content.language == "python"
    assert c.intent is Intent.CODE_GENERATION and "python" in c.tags
    assert m.search("add two numbers", user_id="u", filters={"type": "code"})[0].id == "e@u:0"


def test_a_question_holding_data_gives_the_type_when_the_answer_is_prose(make_memory) -> None:
    m = make_memory()
    run(m, {"user_id": "u", "id": "e", "query": '{"error": "E42", "service": "billing"}',
            "response": "E42 means the billing service lost its database connection."})
    assert m.get("e@u:0").processed_content.type is ContentType.DATA


def test_tool_memories_can_be_turned_off_and_long_outputs_are_cut(make_memory) -> None:
    m = make_memory(tool_memories=False)
    run(m, KnowledgeEvent(user_id="u", id="e", query="q about logs", response="see the logs for details",
                          intermediate_steps=[ToolCall("logs", None, "line\n" * 50)]))
    assert [c.id for c in everything(m)] == ["e@u:0"]
    m2 = make_memory(max_tool_output_chars=100)
    run(m2, KnowledgeEvent(user_id="u", id="e", query="q about logs", response="see the logs",
                           intermediate_steps=[ToolCall("logs", None, "word " * 100)]))
    assert "…[399 more characters not kept]" in m2.get("e@u:1").raw_content


def test_an_event_with_only_a_query_is_remembered(make_memory) -> None:
    m = make_memory()
    run(m, {"user_id": "u", "id": "e", "query": "Remember that my dentist is Dr. Lee in Lyon."})
    assert m.get("e@u:0").raw_content == "Remember that my dentist is Dr. Lee in Lyon."


def test_the_same_event_id_is_processed_once(make_memory) -> None:
    m = make_memory()
    e = {"user_id": "u", "id": "same", "query": "What is BM25?", "response": "A ranking function used by search engines."}
    run(m, e, e)
    run(m, e)  # long after the first was processed
    assert [c.id for c in everything(m)] == ["same@u:0"]


@pytest.mark.parametrize("event, error", [
    ("not an event", InvalidEventError),
    ({"user_id": "u", "query": "q", "colour": "red"}, InvalidEventError),
    ({"query": "q"}, InvalidEventError),
    ({"user_id": "", "query": "q"}, InvalidEventError),
    ({"user_id": "u", "query": 3}, InvalidEventError),
    ({"user_id": "u", "query": "q", "session_id": ""}, InvalidEventError),
    ({"user_id": "u", "query": "q", "metadata": {"x": object()}}, InvalidEventError),
    ({"user_id": "u", "query": "q", "metadata": "m"}, InvalidEventError),
    ({"user_id": "u", "query": "q", "timestamp": "yesterday"}, InvalidEventError),
    ({"user_id": "u", "query": "q", "feedback": True}, InvalidEventError),
    ({"user_id": "u", "query": "q", "feedback": float("nan")}, InvalidEventError),
    ({"user_id": "u", "query": "q", "intermediate_steps": [{"input": 1}]}, InvalidEventError),
    ({"user_id": "u", "query": "q", "intermediate_steps": "search"}, InvalidEventError),
    ({"user_id": "u", "query": "\ud800"}, InvalidEventError),
    ({"user_id": "u", "query": "q", "id": "x" * 300}, InvalidEventError),
    ({"user_id": "u", "query": "  ", "response": ""}, EmptyContentError),
])
def test_bad_events_raise_at_once_and_write_nothing(make_memory, event, error) -> None:
    m = make_memory()
    with pytest.raises(error):
        m.ingest(event)
    assert issubclass(error, InvalidInputError)
    assert m.pending_events() == 0 and m.flush(5) and everything(m) == []


def test_a_too_large_event_is_refused(make_memory) -> None:
    m = make_memory(max_event_chars=1000)
    with pytest.raises(InvalidEventError, match="max_event_chars"):
        m.ingest({"user_id": "u", "query": "x" * 2000})


def test_the_callers_event_is_not_changed(make_memory) -> None:
    m = make_memory()
    steps = [{"tool": "mail", "input": {"to": "bob@example.com"}, "output": "sent to bob@example.com ok, id 4411"}]
    event = {"user_id": "u", "query": "mail bob@example.com", "intermediate_steps": steps}
    m.ingest(event)
    assert m.flush(10)
    assert steps[0]["input"] == {"to": "bob@example.com"} and event["query"] == "mail bob@example.com"


def test_tool_values_that_are_not_json_are_kept_as_text(make_memory) -> None:
    class Doc:
        def __str__(self) -> str:
            return "a document about the quarterly budget review"

    m = make_memory()
    run(m, KnowledgeEvent(user_id="u", id="e", query="find the budget doc", response="found it",
                          intermediate_steps=[ToolCall("search", {"q": "budget"}, Doc())]))
    assert "quarterly budget review" in m.get("e@u:1").raw_content


def test_timestamps_default_to_the_stores_clock(make_memory, clock) -> None:
    m = make_memory()
    run(m, {"user_id": "u", "id": "e", "query": "what time is it", "response": "It is nine in the morning."})
    assert m.get("e@u:0").timestamp == clock.now


def test_ingest_after_close_is_refused(make_memory) -> None:
    m = make_memory()
    m.close()
    with pytest.raises(StoreClosedError):
        m.ingest({"user_id": "u", "query": "hello there, anyone?"})
