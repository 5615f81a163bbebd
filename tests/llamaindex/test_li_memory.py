"""BeeWeaveMemory as the memory of a LlamaIndex FunctionAgent (a fake LLM that calls a tool) and
of a chat engine: the short-term history is kept, finished turns are ingested, and a later
session gets the relevant long-term memories in its system message."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool, ToolSelection

from beeweave_core import BeeWeave, InvalidInputError, StoreClosedError, StoreUnavailableError
from beeweave_llamaindex import BeeWeaveMemory

FACT = "My favourite colour is teal and I live in Lisbon."
noted: list[str] = []


def note(fact: str) -> str:
    """Write a fact down in the user's notebook."""
    noted.append(fact)
    return "written down"


class Model:
    """A fake function-calling LLM: a statement is noted with the ``note`` tool, then
    acknowledged; a question is answered with the memories in the system message."""

    def __init__(self) -> None:
        self.prompts: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.prompts.append(list(messages))
        last = messages[-1]
        if last.role == "tool":
            return ChatMessage(role="assistant", content="Noted.")
        question = last.content or ""
        if not question.endswith("?"):
            return ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
                ToolSelection(tool_id="call-1", tool_name="note", tool_kwargs={"fact": question})]})
        system = "\n".join(m.content or "" for m in messages if m.role == "system")
        recalled = [line[2:] for line in system.splitlines() if line.startswith("- ")]
        return ChatMessage(role="assistant", content="From memory: " + " | ".join(recalled) if recalled
                           else "I don't know.")


def agent(model: Model) -> FunctionAgent:
    return FunctionAgent(tools=[FunctionTool.from_defaults(note)], llm=MockFunctionCallingLLM(response_generator=model),
                         system_prompt="You are Alice's assistant.")


async def two_sessions(memory: BeeWeave) -> tuple[Model, str, BeeWeaveMemory, BeeWeaveMemory]:
    model = Model()
    monday = BeeWeaveMemory.from_client(memory, context={"user_id": "alice", "session_id": "monday"})
    assert str(await agent(model).run(FACT, memory=monday)) == "Noted."
    await asyncio.to_thread(memory.flush, 60)
    friday = BeeWeaveMemory.from_client(memory, context={"user_id": "alice", "session_id": "friday"})
    answer = str(await agent(model).run("What is my favourite colour?", memory=friday))
    return model, answer, monday, friday


@pytest.mark.asyncio
async def test_a_function_agent_recalls_in_a_later_session(memory) -> None:
    model, answer, monday, friday = await two_sessions(memory)
    assert noted[-1] == FACT  # the tool really ran
    assert "teal" in answer  # from the long-term memory: friday's history does not hold it
    assert [m.role.value for m in monday.get_all()] == ["user", "assistant", "tool", "assistant"]
    assert [m.content for m in friday.get_all() if m.role == "user"] == ["What is my favourite colour?"]
    assert "You are Alice's assistant." in "\n".join(m.content or "" for m in model.prompts[-1] if m.role == "system")
    events = memory.trace("monday", user_id="alice")
    assert events and any("teal" in c.raw_content for c in events)


@pytest.mark.asyncio
async def test_each_finished_turn_is_one_event_with_its_tool_call(memory) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.events: list[Any] = []

        def ingest(self, event: Any) -> str:
            self.events.append(event)
            return event.id

        def search(self, *args: Any, **kwargs: Any) -> list[Any]:
            return memory.search(*args, **kwargs)

        def add_turn(self, *args: Any, **kwargs: Any) -> Any:  # the session's working memory
            return memory.add_turn(*args, **kwargs)

        def get_conversation_context(self, *args: Any, **kwargs: Any) -> Any:
            return memory.get_conversation_context(*args, **kwargs)

    recorder = Recorder()
    mem = BeeWeaveMemory.from_client(recorder, context={"user_id": "alice", "agent_id": "helper",
                                                         "session_id": "s1"})
    await agent(Model()).run(FACT, memory=mem)
    [event] = recorder.events
    assert (event.query, event.response, event.session_id, event.agent_id) == (FACT, "Noted.", "s1", "helper")
    assert [(s.tool, s.output) for s in event.intermediate_steps] == [("note", "written down")]


def test_a_chat_engine_keeps_history_and_adds_memories(memory) -> None:
    memory.add("Alice's favourite colour is teal.", user_id="alice")
    memory.add("Bob's favourite colour is red.", user_id="bob")
    model = Model()
    chat = BeeWeaveMemory.from_client(memory, context={"user_id": "alice"})
    engine = SimpleChatEngine.from_defaults(llm=MockFunctionCallingLLM(response_generator=model), memory=chat)
    assert "teal" in str(engine.chat("What is Alice's favourite colour?"))
    assert "red" not in str(engine.chat("And what is her favourite colour again?"))  # only alice's memories
    assert len(chat.get_all()) == 4  # the short-term history: two turns
    chat.reset()
    assert chat.get_all() == []


def test_get_puts_memories_into_the_system_message(memory) -> None:
    memory.add("Alice's favourite colour is teal.", user_id="alice")
    mem = BeeWeaveMemory.from_client(memory, context={"user_id": "alice"},
                                     chat_history=[ChatMessage(role="system", content="Be brief.")])
    mem.put(ChatMessage(role="user", content="favourite colour?"))
    first, user = mem.get()
    assert first.role == "system" and first.content.startswith("Be brief.\n\nRelevant memories")
    assert "- Alice's favourite colour is teal." in first.content and user.content == "favourite colour?"
    assert [m.content for m in mem.get_all()] == ["Be brief.", "favourite colour?"]  # the history is unchanged


def test_from_config_opens_a_store_and_bad_contexts_are_refused(tmp_path) -> None:
    mem = BeeWeaveMemory.from_config({"store": str(tmp_path / "m.db"), "embedder": "beeweave:hashing-32"},
                                     context={"user_id": "alice"})
    mem.memory.add("Alice keeps bees.", user_id="alice")
    mem.put(ChatMessage(role="user", content="Does Alice keep bees?"))
    assert "Alice keeps bees." in mem.get()[0].content
    mem.memory.close()
    with pytest.raises(InvalidInputError):
        BeeWeaveMemory.from_client(mem.memory, context={})
    with pytest.raises(InvalidInputError):
        BeeWeaveMemory.from_client(mem.memory, context={"user_id": "a", "tenant": "x"})


def test_an_unavailable_store_leaves_the_history_alone() -> None:
    class Down:
        """A store whose database is unreachable (as BeeWeave reports a PostgreSQL outage)."""

        def search(self, *args: Any, **kwargs: Any) -> list[Any]:
            raise StoreUnavailableError("PostgreSQL is unreachable")

        def ingest(self, event: Any) -> str:
            raise StoreUnavailableError("PostgreSQL is unreachable")

    mem = BeeWeaveMemory.from_client(Down(), context={"user_id": "alice"})
    mem.put(ChatMessage(role="user", content="hello?"))
    mem.put(ChatMessage(role="assistant", content="hi"))
    assert [m.content for m in mem.get()] == ["hello?", "hi"]
    assert mem.errors == 2  # the ingest and the search, each logged


def test_a_closed_store_is_a_mistake_and_says_so(embedder) -> None:
    closed = BeeWeave(embedder=embedder)
    closed.close()
    mem = BeeWeaveMemory.from_client(closed, context={"user_id": "alice"})
    mem.put(ChatMessage(role="user", content="hello?"))
    with pytest.raises(StoreClosedError):
        mem.put(ChatMessage(role="assistant", content="hi"))


@pytest.mark.slow
def test_a_session_resumes_after_a_restart_with_a_bounded_summary(tmp_path, embedder) -> None:
    from beeweave_core.lifecycle import LifecycleConfig, SessionConfig
    from beeweave_core.lifecycle.sessions import count_tokens

    path = tmp_path / "chat.db"
    cfg = LifecycleConfig(sessions=SessionConfig(max_turns=6, summary_tokens=80))
    store = BeeWeave(path, embedder=embedder, lifecycle=cfg)
    chat = BeeWeaveMemory.from_client(store, context={"user_id": "alice", "session_id": "trip"})
    for i in range(100):  # 200 turns
        chat.put(ChatMessage(role="user", content=f"Day {i}: we plan the museum visit number {i} in Lisbon."))
        chat.put(ChatMessage(role="assistant", content=f"Booked visit {i} at the tile museum."))
    ctx = store.get_conversation_context("trip", 6, user_id="alice")
    assert ctx.total_turns == 200 and count_tokens(ctx.summary) <= 80 and ctx.summary
    store.close()
    store = BeeWeave(path, embedder=embedder, lifecycle=cfg)  # a restart: a new memory on the session
    again = BeeWeaveMemory.from_client(store, context={"user_id": "alice", "session_id": "trip"})
    history = again.get_all()
    assert [m.content for m in history][-2:] == ["Day 99: we plan the museum visit number 99 in Lisbon.",
                                                 "Booked visit 99 at the tile museum."]
    assert len(history) == 6
    first = again.get()[0]
    assert first.role == "system" and first.content.startswith("Earlier in this conversation:\n" + ctx.summary)
    store.close()
