"""What BeeWeaveCallbackHandler captures from runs, checked with a recording store."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_models import ScriptedChatModel, tool_call

from beeweave_core import NotFoundError
from beeweave_langchain import BeeWeaveCallbackHandler
from tests.langchain.lc_support import (
    ANSWER,
    QUESTION,
    TOOL_RESULT,
    Recorder,
    broken_tool,
    executor,
    graph_agent,
    lookup_config,
    recall_agent,
    script,
    user_says,
)


def only_event(store: Recorder):
    assert len(store.events) == 1, store.events
    return store.events[0]


def assert_learnt_the_port(event) -> None:
    assert event.query == QUESTION
    assert event.response == ANSWER
    [call] = event.intermediate_steps
    assert (call.tool, call.input, call.output, call.error) == (
        "lookup_config", {"key": "staging database port"}, TOOL_RESULT, None)


def test_agent_executor_run_becomes_one_event() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice", session_id="s1", agent_id="ops")
    out = executor(script()).invoke({"input": QUESTION}, config={"callbacks": [handler]})
    assert out["output"] == ANSWER
    event = only_event(store)
    assert_learnt_the_port(event)
    assert (event.user_id, event.session_id, event.agent_id) == ("alice", "s1", "ops")
    assert event.id == handler.last_run_id.hex
    assert event.metadata["run_name"] == "AgentExecutor"
    assert handler.errors == 0


def test_agent_executor_constructor_callbacks_read_intermediate_steps() -> None:
    # LangChain does not hand constructor callbacks to the tools: the results come from the run's output.
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    agent = executor(script(), callbacks=[handler], return_intermediate_steps=True)
    agent.invoke({"input": QUESTION})
    assert_learnt_the_port(only_event(store))


def test_agent_executor_constructor_callbacks_keep_tool_calls_without_steps() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    executor(script(), callbacks=[handler]).invoke({"input": QUESTION})
    [call] = only_event(store).intermediate_steps
    assert (call.tool, call.input) == ("lookup_config", {"key": "staging database port"})


def test_create_agent_run_with_ids_from_config_metadata() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="default-user", session_id="default-session")
    state = graph_agent(script()).invoke(user_says(QUESTION), config={
        "callbacks": [handler], "metadata": {"user_id": "bob", "session_id": "s7", "agent_id": "graph"}})
    assert state["messages"][-1].text == ANSWER
    event = only_event(store)
    assert_learnt_the_port(event)
    assert (event.user_id, event.session_id, event.agent_id) == ("bob", "s7", "graph")


def test_parallel_tool_calls_are_all_captured() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    both = AIMessage("", tool_calls=[
        {"name": "lookup_config", "args": {"key": "staging database port"}, "id": "c1"},
        {"name": "lookup_config", "args": {"key": "prod database port"}, "id": "c2"}])
    graph_agent([both, AIMessage(ANSWER)]).invoke(user_says(QUESTION), config={"callbacks": [handler]})
    calls = sorted((c.input["key"], c.output) for c in only_event(store).intermediate_steps)
    assert calls == [("prod database port", "no such key"), ("staging database port", TOOL_RESULT)]
    assert handler.errors == 0


def test_a_failed_tool_call_is_recorded_with_its_error() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")

    def ask(question: str) -> str:  # tools called inside a runnable are nested under its run
        try:
            broken_tool.invoke({"key": "x"})
        except ValueError:
            pass
        return lookup_config.invoke({"key": "staging database port"})

    assert RunnableLambda(ask).invoke(QUESTION, config={"callbacks": [handler]}) == TOOL_RESULT
    broken, looked_up = only_event(store).intermediate_steps
    assert (broken.tool, broken.output) == ("broken_tool", None)
    assert broken.error == "ValueError: registry unavailable for x"
    assert (looked_up.tool, looked_up.output, looked_up.error) == ("lookup_config", TOOL_RESULT, None)


def test_any_runnable_run_becomes_an_event() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    prompt = ChatPromptTemplate.from_messages([("human", "{question}")])
    chain = prompt | ScriptedChatModel(responses=[AIMessage("Port 5433.")]) | StrOutputParser()
    assert chain.invoke({"question": QUESTION}, config={"callbacks": [handler]}) == "Port 5433."
    event = only_event(store)
    assert (event.query, event.response, event.intermediate_steps) == (QUESTION, "Port 5433.", [])


def test_streamed_runnable_is_captured_at_the_end() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    chain = RunnableLambda(lambda q: q) | ScriptedChatModel(responses=[AIMessage("Port 5433.")]) | StrOutputParser()
    assert "".join(chain.stream(QUESTION, config={"callbacks": [handler]})) == "Port 5433."
    event = only_event(store)
    assert (event.query, event.response) == (QUESTION, "Port 5433.")


def test_each_top_level_run_is_one_event_and_nothing_is_left_behind() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    agent = graph_agent(script() * 3)
    for _ in range(3):
        agent.invoke(user_says(QUESTION), config={"callbacks": [handler]})
    assert len(store.events) == 3
    assert len({e.id for e in store.events}) == 3
    assert handler._runs == {} and handler._root_of == {}


def test_a_failing_run_is_not_ingested_and_never_masked() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")

    def boom(_: str) -> str:
        raise KeyError("no answer")

    with pytest.raises(KeyError):
        RunnableLambda(boom).invoke(QUESTION, config={"callbacks": [handler]})
    assert store.events == [] and handler.errors == 0
    assert handler.feedback(handler.last_run_id, "down") == []  # still ratable, nothing was used


@pytest.mark.parametrize("make", [lambda: Recorder(fail=True), lambda: object()], ids=["ingest-raises", "no-ingest"])
def test_a_broken_store_leaves_the_answer_unchanged(make, caplog) -> None:
    handler = BeeWeaveCallbackHandler(make(), user_id="alice")
    out = executor(script()).invoke({"input": QUESTION}, config={"callbacks": [handler]})
    state = graph_agent(script()).invoke(user_says(QUESTION), config={"callbacks": [handler]})
    assert out["output"] == ANSWER and state["messages"][-1].text == ANSWER
    assert handler.errors == 2
    assert "BeeWeave callback on_chain_end failed" in caplog.text


def test_a_run_without_user_is_counted_not_raised() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store)
    out = executor(script()).invoke({"input": QUESTION}, config={"callbacks": [handler]})
    assert out["output"] == ANSWER
    assert store.events == [] and handler.errors == 1


def test_feedback_for_an_unknown_run_says_so() -> None:
    handler = BeeWeaveCallbackHandler(Recorder(), user_id="alice")
    with pytest.raises(NotFoundError):
        handler.feedback(uuid.uuid4(), "up")


@pytest.mark.asyncio
async def test_ainvoke_of_both_agents() -> None:
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    out = await executor(script()).ainvoke({"input": QUESTION}, config={"callbacks": [handler]})
    state = await graph_agent(script()).ainvoke(user_says(QUESTION), config={"callbacks": [handler]})
    assert out["output"] == ANSWER and state["messages"][-1].text == ANSWER
    assert len(store.events) == 2
    for event in store.events:
        assert_learnt_the_port(event)
    assert handler.errors == 0


def test_tool_call_helper_is_what_the_agents_expect() -> None:
    assert tool_call("lookup_config", key="k").tool_calls[0]["args"] == {"key": "k"}


def test_memories_a_beeweave_retriever_returned_get_used_then_rated(memory) -> None:
    ids = memory.add_many([{"content": ANSWER, "user_id": "alice"},
                           {"content": "Production listens on 5432.", "user_id": "alice"}])
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    recall_agent(memory, user_id="alice", k=2, min_relevance=None).invoke(user_says(QUESTION),
                                                                  config={"callbacks": [handler]})
    [(used, signal)] = store.feedbacks
    # Both were retrieved; only the one the answer drew on was used.
    assert signal == "used" and used == [ids[0]]
    assert sorted(only_event(store).metadata["used_memories"]) == sorted(ids)
    assert handler.feedback(str(handler.last_run_id), "down") == used
    assert store.feedbacks[-1] == (used, "down")


def test_documents_of_other_retrievers_are_not_rated() -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Other(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [Document("x", metadata={"id": "not-a-memory"})]

    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    (RunnableLambda(lambda q: q) | Other()).invoke(QUESTION, config={"callbacks": [handler]})
    assert store.feedbacks == []
    assert handler.feedback(handler.last_run_id, "up") == []


def test_a_failed_run_sends_no_used_feedback(memory) -> None:
    memory.add(ANSWER, user_id="alice")
    store = Recorder()
    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    from beeweave_langchain import BeeWeaveRetriever

    def fail(_: object) -> str:
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError):
        (BeeWeaveRetriever(memory=memory, user_id="alice") | RunnableLambda(fail)).invoke(
            QUESTION, config={"callbacks": [handler]})
    assert store.feedbacks == [] and store.events == []
    assert len(handler.feedback(handler.last_run_id, "down")) == 1  # the user can still say it was wrong
