"""No self-pollution: calls of the memory's own tools never become memories, and a
middleware that cannot know its user says so instead of silently doing nothing."""

from __future__ import annotations

import logging

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_models import tool_call

from beeweave_core import KnowledgeEvent, ToolCall
from beeweave_core.ingest.memory_tools import MEMORY_TOOLS
from beeweave_langchain import BeeWeaveCallbackHandler, BeeWeaveMiddleware
from tests.langchain.lc_support import (
    ANSWER,
    QUESTION,
    TOOL_RESULT,
    Recorder,
    RecordingChatModel,
    recall_agent,
    user_says,
)
from tests.support import all_statuses_filter

FACT = "Alice is allergic to peanuts."


def live(memory) -> list[str]:
    return [c.raw_content for c in memory.backend.scan(all_statuses_filter()) if c.status.value == "active"]


def test_seven_middleware_runs_with_memory_tools_leave_one_memory_per_fact(memory) -> None:
    replies = [tool_call("save_memory", content=FACT), AIMessage("Noted: no peanuts for you.")]
    for _ in range(6):
        replies += [tool_call("search_memory", query="allergies"), AIMessage("You are allergic to peanuts.")]
    model = RecordingChatModel(responses=replies)
    bot = create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="alice", tools=True)])
    bot.invoke(user_says("Please remember that I'm allergic to peanuts."))
    assert memory.flush(timeout=60)
    for _ in range(6):
        state = bot.invoke(user_says("What am I allergic to?"))
        assert FACT in state["messages"][2].text  # the search tool found it
        assert memory.flush(timeout=60)
    texts = live(memory)
    assert texts == [FACT], texts  # the saved fact, once: no tool call, no turn repeating it
    assert not [t for t in texts if t.startswith(tuple(MEMORY_TOOLS))]
    assert memory.search("peanuts", user_id="alice")[0].chunk.raw_content == FACT


def test_a_run_with_other_tools_keeps_them_but_not_the_memory_tools(memory) -> None:
    steps = [ToolCall("search_memory", {"query": "staging"}, f'[{{"content": "{TOOL_RESULT}"}}]'),
             ToolCall("recall_notes", {"q": "staging"}, "notes: the staging database was moved last week"),
             ToolCall("lookup_config", {"key": "staging database port"}, TOOL_RESULT)]
    memory.ingest(KnowledgeEvent(user_id="alice", query=QUESTION, response=ANSWER, intermediate_steps=steps,
                                 metadata={"memory_tools": ["recall_notes"]}))  # a face's own memory tool
    assert memory.flush(timeout=60)
    texts = live(memory)
    assert sorted(t.split("\n", 1)[0] for t in texts) == sorted(
        [QUESTION, 'lookup_config: {"key": "staging database port"}']), texts
    assert all("memory_tools" not in c.metadata for c in memory.backend.scan(all_statuses_filter()))


def test_a_recall_tool_run_is_not_stored_again_through_the_callbacks(memory) -> None:
    memory.add(ANSWER, user_id="alice")
    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    for _ in range(3):
        recall_agent(memory, user_id="alice", k=1).invoke(user_says(QUESTION), config={"callbacks": [handler]})
        assert memory.flush(timeout=60)
    assert live(memory) == [ANSWER] and handler.errors == 0


def test_a_middleware_without_a_user_id_warns_once(caplog) -> None:
    store = Recorder()
    mw = BeeWeaveMiddleware(store)
    bot = create_agent(RecordingChatModel(responses=[AIMessage("hi"), AIMessage("hi again")]), [], middleware=[mw])
    with caplog.at_level(logging.WARNING, logger="beeweave_langchain.middleware"):
        bot.invoke(user_says("Hello"))
        bot.invoke(user_says("Hello again"))
    warnings = [r for r in caplog.records if "no user id" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert store.events == []  # nothing captured, as the warning says


def test_the_user_id_can_come_from_the_run_config() -> None:
    store = Recorder()
    bot = create_agent(RecordingChatModel(responses=[AIMessage("hi")]), [], middleware=[BeeWeaveMiddleware(store)])
    bot.invoke(user_says("Hello"), config={"configurable": {"user_id": "dora"}})
    [event] = store.events
    assert event.user_id == "dora"


async def test_every_mcp_server_tool_is_a_memory_tool(memory) -> None:
    pytest.importorskip("mcp")
    from beeweave_core.mcp.server import build_server

    names = {t.name for t in await build_server(memory).list_tools()}
    assert names and names <= MEMORY_TOOLS, names - MEMORY_TOOLS  # a new MCP tool belongs in MEMORY_TOOLS
