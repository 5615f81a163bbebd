"""LangGraph store items reach the middleware's prompt as their text, not as raw JSON
(issue 46: ``- {"text": "I'm allergic…"}``)."""

from __future__ import annotations

import json

from langchain.agents import create_agent
from langchain_core.messages import AIMessage

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveMiddleware, BeeWeaveStore
from tests.langchain.lc_support import RecordingChatModel, user_says

ALLERGY = "I'm allergic to peanuts and cashews."


def recalled_lines(memory: BeeWeave, question: str) -> list[str]:
    model = RecordingChatModel(responses=[AIMessage("ok")])
    create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="alice", capture=False,
                                                          min_relevance=None, abstain_below=0)]
                 ).invoke(user_says(question))
    [system] = model.system_texts()
    return [line for line in system.splitlines() if line.startswith("- ")]


def test_a_store_item_shows_as_its_text(memory: BeeWeave) -> None:
    store = BeeWeaveStore(memory)
    store.put(("memories", "alice"), "allergy", {"text": ALLERGY})
    store.put(("memories", "alice"), "note", {"content": "Alice's peanut allergy is severe.", "source": "chat"})
    lines = recalled_lines(memory, "Which nuts is alice allergic to? peanuts")
    assert f"- {ALLERGY}" in lines
    assert "- Alice's peanut allergy is severe." in lines
    assert not any("{" in line for line in lines), lines


def test_a_store_item_without_a_text_field_shows_as_json(memory: BeeWeave) -> None:
    store = BeeWeaveStore(memory)
    store.put(("memories", "alice"), "diet", {"diet": "vegetarian", "since": 2019})
    assert recalled_lines(memory, "vegetarian diet") == ["- " + json.dumps({"diet": "vegetarian", "since": 2019})]


def test_the_search_tool_gives_a_store_item_as_its_text(memory: BeeWeave) -> None:
    BeeWeaveStore(memory).put(("memories", "alice"), "allergy", {"text": ALLERGY})
    middleware = BeeWeaveMiddleware(memory, user_id="alice", capture=False, abstain_below=0, min_relevance=None,
                                    tools=True)
    [search] = [t for t in middleware.tools if t.name == "search_memory"]
    assert [m["content"] for m in json.loads(search.invoke({"query": "peanuts allergic"}))] == [ALLERGY]
