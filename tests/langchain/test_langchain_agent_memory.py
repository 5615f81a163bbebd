"""create_agent with BeeWeave as its store and its memory middleware: a fact told in one run
is recalled in a new thread, through the middleware's system message and through a tool
that reads ``runtime.store``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_models import tool_call
from langgraph.checkpoint.memory import InMemorySaver
from typing_extensions import TypedDict

from beeweave_core import BeeWeave, StoreClosedError, StoreUnavailableError
from beeweave_core.relevance import DEFAULT_MIN_RELEVANCE
from beeweave_langchain import BeeWeaveMiddleware, BeeWeaveStore
from beeweave_langchain.store import item_id
from tests.langchain.lc_support import Recorder, RecordingChatModel, user_says


class Context(TypedDict):
    user_id: str


FACT = "My favourite colour is teal and I live in Lisbon."
ANSWER = "Your favourite colour is teal."


@tool
def remember(fact: str, runtime: ToolRuntime[Context]) -> str:
    """Write a fact about the user to the long-term store."""
    user = runtime.context["user_id"]
    runtime.store.put(("memories", user), "fact-1", {"text": fact})
    return "saved"


@tool
def recall(query: str, runtime: ToolRuntime[Context]) -> str:
    """Search the long-term store for facts about the user."""
    items = runtime.store.search(("memories", runtime.context["user_id"]), query=query, limit=3)
    return "\n".join(i.value["text"] for i in items) or "nothing found"


def agent(memory: BeeWeave, model: RecordingChatModel, **middleware: Any) -> Any:
    return create_agent(model, [remember, recall], system_prompt="You are a helpful assistant.",
                        store=BeeWeaveStore(memory), checkpointer=InMemorySaver(), context_schema=Context,
                        middleware=[BeeWeaveMiddleware(memory, user_id="alice", **middleware)])


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


RUN_1 = [tool_call("remember", fact=FACT), AIMessage("Noted: teal, Lisbon.")]
RUN_2 = [tool_call("recall", query="favourite colour"), AIMessage(ANSWER)]


def check_run_2(memory: BeeWeave, model: RecordingChatModel, state: dict[str, Any]) -> None:
    first_call = model.system_texts()[len(RUN_1)]  # the first model call of run 2
    assert first_call.startswith("You are a helpful assistant.")
    assert "teal" in first_call.split("You are a helpful assistant.", 1)[1]  # recalled by the middleware
    [tool_result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert FACT in tool_result.text  # found again through runtime.store
    assert state["messages"][-1].text == ANSWER
    assert len([m for m in state["messages"] if m.type == "human"]) == 1  # a new thread: run 1 is not in it
    item = memory.get(item_id(("memories", "alice"), "fact-1"))
    assert json.loads(json.dumps(item.metadata["langgraph"]["value"])) == {"text": FACT}


def test_a_fact_told_in_one_thread_is_recalled_in_the_next(memory) -> None:
    model = RecordingChatModel(responses=RUN_1 + RUN_2)
    bot = agent(memory, model)
    bot.invoke(user_says(FACT), config=thread("t1"), context={"user_id": "alice"})
    assert "teal" not in model.system_texts()[0]  # nothing to recall yet: no memory message
    assert memory.flush(timeout=60)
    state = bot.invoke(user_says("What is my favourite colour?"), config=thread("t2"), context={"user_id": "alice"})
    check_run_2(memory, model, state)


@pytest.mark.asyncio
async def test_the_same_with_ainvoke(memory) -> None:
    model = RecordingChatModel(responses=RUN_1 + RUN_2)
    bot = agent(memory, model)
    await bot.ainvoke(user_says(FACT), config=thread("t1"), context={"user_id": "alice"})
    assert memory.flush(timeout=60)
    state = await bot.ainvoke(user_says("What is my favourite colour?"), config=thread("t2"),
                              context={"user_id": "alice"})
    check_run_2(memory, model, state)


def test_each_run_is_one_knowledge_event_with_its_tool_calls(memory) -> None:
    recorder = Recorder(search_in=memory)
    model = RecordingChatModel(responses=list(RUN_1))
    bot = create_agent(model, [remember], store=BeeWeaveStore(memory), context_schema=Context,
                       middleware=[BeeWeaveMiddleware(recorder, user_id="alice", agent_id="helper")])
    bot.invoke(user_says(FACT), config=thread("t1"), context={"user_id": "alice"})
    [event] = recorder.events
    assert (event.user_id, event.agent_id, event.session_id) == ("alice", "helper", "t1")
    assert event.query == FACT and event.response == "Noted: teal, Lisbon."
    assert [(s.tool, s.input, s.output) for s in event.intermediate_steps] == [("remember", {"fact": FACT}, "saved")]


def test_nothing_relevant_means_no_memory_message(memory) -> None:
    memory.add("The staging database listens on port 5433.", user_id="alice")
    memory.add("Bob's favourite colour is red.", user_id="bob")  # another user's memory is never recalled
    model = RecordingChatModel(responses=[AIMessage("Hello!")])
    create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="alice", capture=False,
                                                        min_relevance=DEFAULT_MIN_RELEVANCE)]).invoke(
        user_says("Tell me a joke about penguins"))
    assert model.system_texts() == [""]


def test_the_memory_message_keeps_to_its_budget(memory) -> None:
    for i in range(5):
        memory.add(f"Alice's project number {i} is called Teal {i} " + "x" * 60, user_id="alice")
    model = RecordingChatModel(responses=[AIMessage("ok")])
    create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="alice", max_chars=200, capture=False,
                                                          min_relevance=None)]
                 ).invoke(user_says("Which projects are called Teal?"))
    [system] = model.system_texts()
    recalled = [line for line in system.splitlines() if line.startswith("- ")]
    assert 1 <= len(recalled) < 5 and sum(len(line) for line in recalled) <= 200


def test_only_the_memories_the_answer_drew_on_are_marked_used(memory) -> None:
    drawn = memory.add("Alice's favourite colour is teal.", user_id="alice")
    ignored = memory.add("Alice's favourite dish is a colourful paella from Valencia.", user_id="alice")
    model = RecordingChatModel(responses=[AIMessage("Alice's favourite colour is teal.")])
    create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="alice")]).invoke(
        user_says("What is Alice's favourite colour?"))
    assert "teal" in model.system_texts()[0] and "paella" in model.system_texts()[0]  # both were recalled
    assert memory.get(drawn).metadata.get("feedback") == {"used": 1}
    assert "feedback" not in memory.get(ignored).metadata


class Unreachable:
    """A store every call of which fails as an unreachable server or database does."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailableError("the server is unreachable")
        return fail


def test_an_unavailable_store_never_reaches_the_agent() -> None:
    mw = BeeWeaveMiddleware(Unreachable(), user_id="alice")
    model = RecordingChatModel(responses=[AIMessage("still answering")])
    state = create_agent(model, [], middleware=[mw]).invoke(user_says("What is my favourite colour?"))
    assert state["messages"][-1].text == "still answering"
    assert mw.errors == 2  # the recall and the capture, each logged


def test_a_closed_store_is_a_mistake_the_run_sees(embedder) -> None:
    """Only an outage is absorbed (as in every face): using a closed store raises."""
    closed = BeeWeave(embedder=embedder)
    closed.close()
    mw = BeeWeaveMiddleware(closed, user_id="alice")
    model = RecordingChatModel(responses=[AIMessage("answering anyway")])
    with pytest.raises(StoreClosedError):
        create_agent(model, [], middleware=[mw]).invoke(user_says("What is my favourite colour?"))
    assert mw.errors == 0 and model.system_texts() == []


def test_the_user_can_come_from_the_runtime_context(memory) -> None:
    memory.add("Carol's favourite colour is teal.", user_id="carol")
    model = RecordingChatModel(responses=[AIMessage("teal")])
    create_agent(model, [], context_schema=Context, middleware=[BeeWeaveMiddleware(memory, capture=False)]).invoke(
        user_says("What is Carol's favourite colour?"), context={"user_id": "carol"})
    assert "Carol's favourite colour is teal." in model.system_texts()[0]


# -- the middleware's memory tools --------------------------------------------------------
def test_the_memory_tools_have_json_schemas(memory) -> None:
    tools = {t.name: t for t in BeeWeaveMiddleware(memory, user_id="alice", tools=True).tools}
    assert set(tools) == {"search_memory", "save_memory", "update_memory", "forget_memory"}
    assert tools["save_memory"].args_schema["required"] == ["content"]
    assert tools["update_memory"].tool_call_schema["properties"]["memory_id"]["type"] == "string"
    with pytest.raises(ValueError, match="user_id"):
        BeeWeaveMiddleware(memory, tools=True)


def test_the_model_saves_searches_updates_and_forgets_with_the_tools(memory) -> None:
    other = memory.add("Bob's secret is 42.", user_id="bob")
    mw = BeeWeaveMiddleware(memory, user_id="alice", tools=True, capture=False)
    model = RecordingChatModel(responses=[tool_call("save_memory", content="Alice's cat is called Miso."),
                                          AIMessage("saved")])
    bot = create_agent(model, [], middleware=[mw])
    state = bot.invoke(user_says("Remember that my cat is called Miso."))
    saved = json.loads(state["messages"][2].text)["id"]
    assert memory.get(saved).raw_content == "Alice's cat is called Miso." and memory.get(saved).user_id == "alice"

    def run(*calls: AIMessage) -> list[str]:
        model.responses = [*calls, AIMessage("done")]
        model.i = 0
        out = bot.invoke(user_says("go"))
        return [m.text for m in out["messages"] if isinstance(m, ToolMessage)]

    [found] = run(tool_call("search_memory", query="cat name"))
    assert json.loads(found)[0]["id"] == saved
    run(tool_call("update_memory", memory_id=saved, content="Alice's cat is called Mochi."))
    assert memory.get(saved).raw_content == "Alice's cat is called Mochi."
    [refused] = run(tool_call("forget_memory", memory_id=other))  # another user's memory: as if absent
    assert "no memory with id" in refused and memory.get(other).user_id == "bob"
    [bad] = run(tool_call("save_memory", content="   "))  # the store refuses: the model reads why
    assert "empty" in bad
    run(tool_call("forget_memory", memory_id=saved))
    assert memory.get_many([saved]) == []


def test_the_original_system_message_is_kept_when_memories_are_added(memory) -> None:
    memory.add("Alice's favourite colour is teal.", user_id="alice")
    model = RecordingChatModel(responses=[AIMessage("teal")])
    create_agent(model, [], system_prompt=SystemMessage("Be brief."),
                 middleware=[BeeWeaveMiddleware(memory, user_id="alice", capture=False)]).invoke(
        user_says("What is Alice's favourite colour?"))
    assert model.system_texts()[0].startswith("Be brief.\n\nRelevant memories")


@pytest.mark.slow
@pytest.mark.model
def test_with_the_default_model_only_relevant_memories_are_recalled() -> None:
    # The fused score is relative to the other candidates (an unrelated question still gets
    # ~0.8), so the relevance gate reads the lexical and vector evidence of each hit.
    with BeeWeave() as memory:
        for text in ["My favourite colour is teal.", "The staging database listens on port 5433.",
                     "Bob plays the cello."]:
            memory.add(text, user_id="alice")
        for question, expected in [("What colour do I like?", "teal"), ("Tell me a joke about penguins", None),
                                   ("What's the weather in Paris tomorrow?", None)]:
            model = RecordingChatModel(responses=[AIMessage("ok")])
            create_agent(model, [], middleware=[BeeWeaveMiddleware(memory, user_id="alice", capture=False,
                                                                    min_relevance=DEFAULT_MIN_RELEVANCE)]).invoke(
                user_says(question))
            [system] = model.system_texts()
            assert (expected in system) if expected else system == "", (question, system)


def test_the_next_message_in_the_thread_rates_what_the_previous_answer_used(memory) -> None:
    drawn = memory.add("Alice's favourite colour is teal.", user_id="alice")
    model = RecordingChatModel(responses=[AIMessage("Alice's favourite colour is teal."), AIMessage("Glad to help."),
                                          AIMessage("Alice's favourite colour is teal."), AIMessage("Sorry.")])
    graph = create_agent(model, [], checkpointer=InMemorySaver(),
                         middleware=[BeeWeaveMiddleware(memory, user_id="alice", min_relevance=None, capture=False)])
    graph.invoke(user_says("What is Alice's favourite colour?"), thread("t1"))
    graph.invoke(user_says("Thanks, that solved it!"), thread("t1"))
    assert memory.get(drawn).metadata["feedback"] == {"used": 1, "up": 1, "down_streak": 0}
    graph.invoke(user_says("What is Alice's favourite colour?"), thread("t2"))
    graph.invoke(user_says("不对"), thread("t2"))
    assert memory.get(drawn).metadata["feedback"] == {"used": 2, "up": 1, "down": 1, "down_streak": 1}


def test_a_failed_tool_call_rates_the_memory_it_drew_on_down(memory) -> None:
    @tool
    def shell(cmd: str) -> str:
        """Run a shell command."""
        return "make: *** No rule to make target 'release'.\nexit code 2"

    howto = memory.add("Deploy with make release on the build host", user_id="alice")
    other = memory.add("Alice's favourite colour is teal.", user_id="alice")
    model = RecordingChatModel(responses=[tool_call("shell", cmd="make release on build host"),
                                          AIMessage("The deploy failed.")])
    create_agent(model, [shell], middleware=[BeeWeaveMiddleware(memory, user_id="alice", min_relevance=None,
                                                                capture=False)]).invoke(user_says("Deploy it"))
    assert memory.get(howto).metadata["feedback"]["down"] == 1
    assert "feedback" not in memory.get(other).metadata
