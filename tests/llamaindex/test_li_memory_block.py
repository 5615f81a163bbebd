"""BeeWeaveMemoryBlock: turns flushed from LlamaIndex's short-term memory go to
BeeWeave.ingest, and the memories relevant to each new input come back."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus

from beeweave_core import DEFAULT_TOP_K, BeeWeave
from beeweave_core.ingest.knowledge_events import KnowledgeEvent, ToolCall
from beeweave_llamaindex import BeeWeaveMemoryBlock
from beeweave_llamaindex.memory_block import messages_to_events

TURNS = [
    ("I am allergic to peanuts, please remember that.", "Noted: you are allergic to peanuts."),
    ("My favourite drink is green tea.", "Green tea it is."),
    ("I live in Hangzhou.", "Hangzhou is lovely."),
    ("What should I eat tonight?", "Something without peanuts."),
]


def chat_memory(block: BeeWeaveMemoryBlock) -> Memory:
    # A tiny budget so that every new turn pushes the oldest ones out to the block.
    return Memory.from_defaults(session_id="chat-1", memory_blocks=[block], token_limit=60,
                                chat_history_token_ratio=0.5, token_flush_size=10)


def test_turns_become_knowledge_events() -> None:
    messages = [
        ChatMessage(role="system", content="be kind"),
        ChatMessage(role="user", content="weather in Paris?", additional_kwargs={"session_id": "c1"}),
        ChatMessage(role="assistant", content="Let me look."),
        ChatMessage(role="tool", content="18C, sunny", additional_kwargs={"name": "weather"}),
        ChatMessage(role="assistant", content="18C and sunny."),
        ChatMessage(role="user", content="thanks", additional_kwargs={"session_id": "c1"}),
    ]
    events = messages_to_events(messages, user_id="alice", agent_id="helper")
    assert [(e.query, e.response, e.session_id, e.agent_id, e.user_id) for e in events] == [
        ("weather in Paris?", "Let me look.\n18C and sunny.", "c1", "helper", "alice"),
        ("thanks", "", "c1", "helper", "alice"),
    ]
    assert events[0].intermediate_steps == [ToolCall(tool="weather", output="18C, sunny")]
    assert all(isinstance(e, KnowledgeEvent) and e.metadata == {"source": "llama_index.memory"} for e in events)


def test_a_reply_without_its_question_is_still_a_turn() -> None:
    events = messages_to_events([ChatMessage(role="assistant", content="as I said: tea")], user_id="u")
    assert [(e.query, e.response) for e in events] == [("", "as I said: tea")]
    assert messages_to_events([ChatMessage(role="system", content="x"), ChatMessage(role="user", content="")],
                              user_id="u") == []


class RecordingMemory:
    """The real store for reads; writes are recorded, to check exactly what the block ingests."""

    def __init__(self, memory: BeeWeave) -> None:
        self.memory, self.ingested = memory, []

    def ingest(self, event):
        self.ingested.append(event)
        return event.id

    def search(self, *args, **kwargs):
        return self.memory.search(*args, **kwargs)


def test_flushed_turns_are_ingested_with_the_chat_session(memory) -> None:
    recorder = RecordingMemory(memory)
    short_term = chat_memory(BeeWeaveMemoryBlock(recorder, user_id="alice", agent_id="helper"))
    for q, a in TURNS:
        short_term.put_messages([ChatMessage(role="user", content=q), ChatMessage(role="assistant", content=a)])
    archived = short_term.get_all(status=MessageStatus.ARCHIVED)
    assert archived, "the token budget should have pushed turns out"
    got = [(e.query, e.response, e.session_id, e.agent_id) for e in recorder.ingested]
    assert got == [(q, a, "chat-1", "helper") for q, a in TURNS[: len(got)]]
    assert len(got) == len(archived) // 2


def test_relevant_memories_come_back_for_the_latest_input(store) -> None:
    block = BeeWeaveMemoryBlock(store, user_id="alice", similarity_top_k=1)
    text = asyncio.run(block.aget([ChatMessage(role="user", content="tea"),
                                   ChatMessage(role="assistant", content="yes"),
                                   ChatMessage(role="user", content="am I allergic to peanuts?")]))
    assert text == "- alice is allergic to peanuts"
    assert asyncio.run(block.aget([ChatMessage(role="assistant", content="hello")])) == ""
    assert asyncio.run(block.aget(None)) == ""
    assert "bob" not in asyncio.run(BeeWeaveMemoryBlock(store, user_id="alice", similarity_top_k=10)
                                    .aget([ChatMessage(role="user", content="black coffee")]))


def test_each_memory_is_one_list_item(memory) -> None:
    memory.add("line one\n\nline two", user_id="alice")
    memory.add("another line", user_id="alice")
    text = asyncio.run(BeeWeaveMemoryBlock(memory, user_id="alice").aget([ChatMessage(role="user", content="line")]))
    assert sorted(line for line in text.splitlines() if line.startswith("- ")) == ["- another line", "- line one"]
    assert "\n  \n  line two" in text


def test_empty_store_gives_no_block(memory) -> None:
    short_term = chat_memory(BeeWeaveMemoryBlock(memory, user_id="alice"))
    messages = short_term.get(input="anything about me?")
    assert all("<memory>" not in (m.content or "") for m in messages)


def test_put_then_get_round_trip(memory) -> None:
    # The hashing embedder of the tests is not the model the relevance floor was fitted on: off.
    short_term = chat_memory(BeeWeaveMemoryBlock(memory, user_id="alice", similarity_top_k=2, min_relevance=None))
    for q, a in TURNS:
        short_term.put(ChatMessage(role="user", content=q))
        short_term.put(ChatMessage(role="assistant", content=a))
    assert memory.flush(timeout=60)
    assert memory.count(user_id="alice") >= 1
    system = short_term.get(input="do I have any food allergies? peanuts?")[0]
    assert system.role == "system"
    assert "<BeeWeave>" in system.content and "allergic to peanuts" in system.content


def test_async_put_then_get_round_trip(memory) -> None:
    short_term = chat_memory(BeeWeaveMemoryBlock(memory, user_id="alice", min_relevance=None))

    async def run():
        for q, a in TURNS:
            await short_term.aput_messages([ChatMessage(role="user", content=q),
                                            ChatMessage(role="assistant", content=a)])
        assert await asyncio.to_thread(memory.flush, 60)
        return await short_term.aget(input="what do I like to drink? green tea?")

    assert "green tea" in joined(asyncio.run(run()))


def joined(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in messages)


def test_config_fields(memory) -> None:
    block = BeeWeaveMemoryBlock(memory, user_id="alice", priority=2, name="LongTerm")
    assert (block.priority, block.name, block.similarity_top_k, block.agent_id) == (2, "LongTerm", DEFAULT_TOP_K, None)
    assert "memory" not in block.model_dump() and "_memory" not in block.model_dump()
    with pytest.raises(ValueError):
        BeeWeaveMemoryBlock(memory)  # user_id is required: memories always belong to someone
