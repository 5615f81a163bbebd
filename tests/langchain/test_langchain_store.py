"""The adapters against a real BeeWeave: runs and turns become memories after flush()."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveCallbackHandler, BeeWeaveMemory
from tests.langchain.lc_support import (
    ANSWER,
    QUESTION,
    TOOL_RESULT,
    executor,
    graph_agent,
    recall_agent,
    script,
    user_says,
)


def learnt(memory: BeeWeave) -> list[str]:
    """The store's memories of alice after the worker is done."""
    assert memory.flush(timeout=60)
    return [h.chunk.raw_content for h in memory.search("staging database port", user_id="alice", k=10)]


def assert_run_knowledge_found(memory: BeeWeave) -> None:
    texts = learnt(memory)
    assert any(QUESTION in t and ANSWER in t for t in texts), texts  # the question with its answer
    assert any(TOOL_RESULT in t for t in texts), texts  # what the tool returned
    [top] = memory.search("PostgreSQL dba team", user_id="alice", k=1)
    assert TOOL_RESULT in top.chunk.raw_content


def test_agent_executor_run_is_found_in_the_store(memory) -> None:
    handler = BeeWeaveCallbackHandler(memory, user_id="alice", session_id="s1")
    assert executor(script()).invoke({"input": QUESTION}, config={"callbacks": [handler]})["output"] == ANSWER
    assert_run_knowledge_found(memory)
    assert handler.errors == 0


def test_agent_executor_with_constructor_callbacks_is_found_in_the_store(memory) -> None:
    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    executor(script(), callbacks=[handler], return_intermediate_steps=True).invoke({"input": QUESTION})
    assert_run_knowledge_found(memory)


def test_create_agent_run_is_found_in_the_store(memory) -> None:
    handler = BeeWeaveCallbackHandler(memory, session_id="s1")
    state = graph_agent(script()).invoke(user_says(QUESTION),
                                         config={"callbacks": [handler], "metadata": {"user_id": "alice"}})
    assert state["messages"][-1].text == ANSWER
    assert_run_knowledge_found(memory)
    assert {c.session_id for c in memory.trace("s1", user_id="alice")} == {"s1"}


@pytest.mark.asyncio
async def test_ainvoke_run_is_found_in_the_store(memory) -> None:
    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    state = await graph_agent(script()).ainvoke(user_says(QUESTION), config={"callbacks": [handler]})
    assert state["messages"][-1].text == ANSWER
    assert_run_knowledge_found(memory)


def test_a_closed_store_leaves_the_answer_unchanged(embedder) -> None:
    memory = BeeWeave(embedder=embedder)
    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    memory.close()
    assert executor(script()).invoke({"input": QUESTION}, config={"callbacks": [handler]})["output"] == ANSWER
    assert handler.errors == 1


def test_conversation_turns_become_long_term_memory(memory) -> None:
    first = BeeWeaveMemory(memory=memory, user_id="alice", session_id="monday")
    first.save_context({"input": "I'm allergic to peanuts."}, {"response": "Noted, no peanuts for you."})
    memory.flush(timeout=60)
    second = BeeWeaveMemory(memory=memory, user_id="alice", session_id="tuesday", long_term_key="long_term")
    seen = second.load_memory_variables({"input": "what food allergies do I have"})
    assert "I'm allergic to peanuts." in seen["long_term"]
    assert seen["history"] == ""


def test_used_and_rated_memories_change_weight(memory) -> None:
    fact = memory.add(ANSWER, user_id="alice")
    before = memory.get(fact).weight
    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    recall_agent(memory, user_id="alice", k=1).invoke(user_says(QUESTION), config={"callbacks": [handler]})
    used = memory.get(fact).weight
    assert used > before and handler.errors == 0
    assert handler.feedback(handler.last_run_id, "down") == [fact]
    assert memory.get(fact).weight < used


def test_a_memory_gone_before_the_rating_costs_the_others_nothing(memory, caplog) -> None:
    kept, gone = memory.add(ANSWER, user_id="alice"), memory.add(f"{ANSWER} (an older note)", user_id="alice")
    search = memory.search

    def search_then_merge(*args, **kwargs):
        hits = search(*args, **kwargs)
        memory.delete(gone)  # e.g. merged into its duplicate before the run ends
        return hits

    memory.search = search_then_merge
    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    recall_agent(memory, user_id="alice", k=2).invoke(user_says(QUESTION), config={"callbacks": [handler]})
    del memory.search
    assert handler.errors == 0
    assert any(gone in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)  # reported
    assert memory.get(kept).metadata["feedback"] == {"used": 1}  # the "used" signal still reached it
    assert handler.feedback(handler.last_run_id, "up") == [kept]
    assert memory.get(kept).metadata["feedback"]["up"] == 1
    memory.delete(kept)
    assert handler.feedback(handler.last_run_id, "down") == []  # nothing left to rate: nothing fails


def test_a_bad_rating_is_refused_by_the_store(memory) -> None:
    from beeweave_core import InvalidInputError

    handler = BeeWeaveCallbackHandler(memory, user_id="alice")
    executor(script()).invoke({"input": QUESTION}, config={"callbacks": [handler]})
    with pytest.raises(InvalidInputError):
        handler.feedback(handler.last_run_id, "sideways")
    assert handler.feedback(handler.last_run_id, "up") == []  # this run recalled nothing
