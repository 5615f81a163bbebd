"""``BeeWeave.add(messages)`` (mem0's ``add(messages, user_id=...)``): a conversation goes
through ingestion turn by turn, so what it teaches is kept and small talk, system prompts and
calls of the memory's own tools are not (issue 44, mem0 parity)."""

from __future__ import annotations

import json

import pytest

from beeweave_core import InvalidInputError
from beeweave_core.ingest.messages import chat_turns
from tests.ingest.ingest_support import everything

CONVERSATION = [
    {"role": "system", "content": "You are a helpful travel assistant."},
    {"role": "user", "content": "I'm vegetarian and allergic to peanuts."},
    {"role": "assistant", "content": "Noted: vegetarian, no peanuts."},
    {"role": "user", "content": "Thanks!"},
    {"role": "assistant", "content": "You're welcome!"},
    {"role": "user", "content": [{"type": "text", "text": "Which gate does flight LH 454 leave from?"}]},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "flight_status", "arguments": json.dumps({"flight": "LH 454"})}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "LH 454 boards at gate B44 at 14:05, on time."},
    {"role": "assistant", "content": "It leaves from gate B44."},
]


def test_a_conversation_keeps_what_it_teaches_and_nothing_else(make_memory) -> None:
    m = make_memory()
    ids = m.add(CONVERSATION, user_id="alice", session_id="trip")
    stored = {c.id: c for c in everything(m, user_id="alice")}
    assert sorted(ids) == sorted(stored) and len(ids) == 3  # the diet turn, the gate turn, the tool's answer
    texts = [stored[i].raw_content for i in ids]
    assert texts[0] == "I'm vegetarian and allergic to peanuts.\n\nNoted: vegetarian, no peanuts."
    assert texts[1] == "Which gate does flight LH 454 leave from?\n\nIt leaves from gate B44."
    assert texts[2].startswith("flight_status: ") and "gate B44 at 14:05" in texts[2]
    assert all("Thanks" not in t and "travel assistant" not in t for t in texts)  # small talk, the system prompt
    assert {c.session_id for c in stored.values()} == {"trip"}
    assert [c.id for c in m.get_all(user_id="alice").items] == ids  # listed in the conversation's order
    assert m.search("peanut allergy", user_id="alice", abstain_below=0)[0].id == ids[0]


def test_calls_of_the_memorys_own_tools_are_not_stored_again(make_memory) -> None:
    m = make_memory()
    saved = [
        {"role": "user", "content": "Remember that my badge number is 4471."},
        {"role": "assistant", "tool_calls": [{"id": "s1", "function": {
            "name": "save_memory", "arguments": json.dumps({"content": "Badge number: 4471"})}}]},
        {"role": "tool", "tool_call_id": "s1", "content": json.dumps({"id": "m-1"})},
        {"role": "assistant", "content": "Saved."},
    ]
    assert m.add(saved, user_id="alice") == []
    assert everything(m, user_id="alice") == []


def test_small_talk_alone_stores_nothing_and_a_text_is_stored_as_before(make_memory) -> None:
    m = make_memory()
    assert m.add([{"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": "You're welcome!"}],
                 user_id="alice") == []
    one = m.add("The user prefers window seats.", user_id="alice")
    assert isinstance(one, str) and [c.id for c in everything(m, user_id="alice")] == [one]


def test_bad_messages_queue_nothing(make_memory) -> None:
    m = make_memory()
    good = {"role": "user", "content": "My locker is number 12."}
    for bad in ([good, {"role": "narrator", "content": "x"}], [good, "just text"], [],
                [good, {"role": "assistant", "tool_calls": "save"}]):
        with pytest.raises(InvalidInputError):
            m.add(bad, user_id="alice")
    with pytest.raises(InvalidInputError, match="chunk_id"):
        m.add([good], user_id="alice", chunk_id="mine")
    with pytest.raises(InvalidInputError, match="timeout"):
        m.add("a text", user_id="alice", timeout=1)
    assert m.pending_events() == 0 and everything(m, user_id="alice") == []


def test_turns_split_at_each_new_question() -> None:
    turns = chat_turns([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                        {"role": "assistant", "content": "c"}, {"role": "tool", "name": "lookup", "content": "d"},
                        {"role": "user", "content": "e"}])
    assert [t.event()["query"] for t in turns] == ["a\n\nb", "e"]
    assert turns[0].event()["intermediate_steps"] == [{"tool": "lookup", "input": None, "output": "d", "error": None}]
