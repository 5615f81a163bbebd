"""Scopes through the LangChain faces: a user-scoped retriever, the middleware's recall and
its search tool, and the LangGraph store find shared knowledge (the tenant's, a granted
project's) beside the user's own, and never another user's private memories."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_models import tool_call

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveMiddleware, BeeWeaveRetriever, BeeWeaveStore
from tests.langchain.lc_support import RecordingChatModel, user_says
from tests.scopes_faces import ALICE_FACT, BOB_FACT, PROJECT_FACT, TENANT_FACT, scoped_memory


@pytest.fixture
def memory() -> Iterator[BeeWeave]:
    with scoped_memory() as m:
        yield m


def texts(docs) -> set[str]:
    return {d.page_content for d in docs}


def test_a_user_scoped_retriever_finds_shared_knowledge(memory) -> None:
    found = texts(BeeWeaveRetriever(memory=memory, user_id="alice", k=10).invoke("staging"))
    assert found == {TENANT_FACT, PROJECT_FACT, ALICE_FACT}  # hers, the tenant's, her project's
    found = texts(BeeWeaveRetriever(memory=memory, user_id="bob", k=10).invoke("staging"))
    assert found == {TENANT_FACT, BOB_FACT}  # never alice's notes, no grant for the project
    only = BeeWeaveRetriever(memory=memory, user_id="bob", k=10, scopes=["project:atlas"]).invoke("staging")
    assert texts(only) == {PROJECT_FACT}
    assert texts(BeeWeaveRetriever(memory=memory, user_id="alice", k=10, scopes=["user"]).invoke("staging")) \
        == {ALICE_FACT}


def test_the_middleware_recalls_shared_knowledge_and_its_tool_searches_it(memory) -> None:
    model = RecordingChatModel(responses=[AIMessage("ok")])
    create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="bob", capture=False,
                                                            abstain_below=0)]).invoke(user_says("staging refunds?"))
    system = model.system_texts()[0]
    assert TENANT_FACT in system and BOB_FACT in system and ALICE_FACT not in system

    mw = BeeWeaveMiddleware(memory, user_id="bob", tools=True, capture=False, abstain_below=0,
                            scopes=["user", "project:atlas"])
    model = RecordingChatModel(responses=[tool_call("search_memory", query="staging parser", k=10),
                                          AIMessage("done")])
    state = create_agent(model, [], middleware=[mw]).invoke(user_says("how does the parser work?"))
    [answer] = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    found = {h["content"] for h in json.loads(answer)}
    assert PROJECT_FACT in found and ALICE_FACT not in found and TENANT_FACT not in found


def test_a_user_namespace_of_the_langgraph_store_reads_the_shared_namespace_too(memory) -> None:
    store = BeeWeaveStore(memory)
    store.put(("memories", "scope:tenant"), "refunds", {"text": "Refunds take five working days."})
    store.put(("memories", "alice"), "notes", {"text": "Alice's refunds notes are in the blue notebook."})
    store.put(("memories", "bob"), "hint", {"text": "Bob's refunds password hint is his dog."})
    found = {i.key for i in store.search(("memories", "alice"), query="refunds", limit=10)}
    assert found == {"refunds", "notes"}
    assert {i.key for i in store.search(("memories", "alice"), limit=10)} == {"refunds", "notes"}
    private = BeeWeaveStore(memory, scopes=["user"])
    assert {i.key for i in private.search(("memories", "alice"), query="refunds", limit=10)} == {"notes"}
