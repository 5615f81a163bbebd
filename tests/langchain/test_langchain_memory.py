"""BeeWeaveMemory: short-term window and summary, long-term search, turns handed to ingest."""

from __future__ import annotations

import warnings

import pytest
from langchain_classic.chains import ConversationChain
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate

from beeweave_langchain import BeeWeaveMemory
from tests.langchain.lc_support import ANSWER, QUESTION, TOOL_RESULT, Recorder, executor, script

TURNS = [("Hi, I'm Alice.", "Hello Alice!"), ("I live in Lyon. It is lovely.", "Nice city."),
         ("I like tea.", "Noted."), ("What's up?", "Not much.")]


@pytest.fixture
def store(memory) -> Recorder:
    memory.add("Alice is allergic to peanuts.", user_id="alice")
    memory.add("Bob is allergic to cats.", user_id="bob")
    return Recorder(search_in=memory)


def conversation(mem: BeeWeaveMemory, replies: list[str], prompt: PromptTemplate | None = None) -> ConversationChain:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConversationChain is deprecated, and still supported
        return ConversationChain(llm=FakeListChatModel(responses=replies), memory=mem,
                                 **({"prompt": prompt} if prompt else {}))


def test_conversation_chain_with_the_default_prompt(store) -> None:
    mem = BeeWeaveMemory(memory=store, user_id="alice", session_id="s1", window=2)
    chain = conversation(mem, [a for _, a in TURNS])
    for human, ai in TURNS:
        assert chain.invoke({"input": human})["response"] == ai
    assert mem.buffer == TURNS[-2:]
    assert mem.summary == "Hi, I'm Alice. Hello Alice! I live in Lyon. It is lovely. Nice city."
    history = mem.load_memory_variables({"input": "what am I allergic to"})["history"]
    assert history.startswith("Relevant memories:\n- Alice is allergic to peanuts.")
    assert "Bob" not in history  # another user's memory never comes back
    assert history.endswith("Human: I like tea.\nAI: Noted.\nHuman: What's up?\nAI: Not much.")
    assert "Summary of the earlier conversation: Hi, I'm Alice." in history


def test_every_turn_is_handed_to_ingest(store) -> None:
    mem = BeeWeaveMemory(memory=store, user_id="alice", session_id="s1", agent_id="bot")
    chain = conversation(mem, ["Hello Alice!"])
    chain.invoke({"input": "Hi, I'm Alice."})
    [event] = store.events
    assert (event.user_id, event.session_id, event.agent_id) == ("alice", "s1", "bot")
    assert (event.query, event.response) == ("Hi, I'm Alice.", "Hello Alice!")


def test_long_term_in_its_own_variable_and_messages(store) -> None:
    mem = BeeWeaveMemory(memory=store, user_id="alice", memory_key="chat_history", long_term_key="long_term",
                         min_relevance=None,
                         return_messages=True, window=1)
    assert mem.memory_variables == ["chat_history", "long_term"]
    for human, ai in TURNS[:2]:
        mem.save_context({"input": human}, {"output": ai})
    got = mem.load_memory_variables({"input": "peanut allergy"})
    summary, *recent = got["chat_history"]
    assert isinstance(summary, SystemMessage) and "Hi, I'm Alice." in summary.content
    assert recent == [HumanMessage(TURNS[1][0]), AIMessage(TURNS[1][1])]
    [long_term] = got["long_term"]
    assert isinstance(long_term, SystemMessage) and "Alice is allergic to peanuts." in long_term.content


def test_separate_long_term_text_works_in_a_custom_prompt(store) -> None:
    prompt = PromptTemplate.from_template("{long_term}\n{history}\nHuman: {input}\nAI:")
    mem = BeeWeaveMemory(memory=store, user_id="alice", long_term_key="long_term", min_relevance=None)
    out = conversation(mem, ["Avoid peanuts."], prompt).invoke({"input": "what should I avoid eating"})
    assert out["long_term"].startswith("Relevant memories:\n- Alice is allergic to peanuts.")
    assert out["history"] == ""


def test_clear_empties_the_short_term_buffer(store) -> None:
    mem = BeeWeaveMemory(memory=store, user_id="alice", window=1, long_term_k=0)
    for human, ai in TURNS:
        mem.save_context({"input": human}, {"response": ai})
    mem.clear()
    assert mem.buffer == [] and mem.summary == ""
    assert mem.load_memory_variables({"input": "hello"}) == {"history": ""}
    assert len(store.events) == len(TURNS)  # what was learnt stays in the store


def test_an_llm_summarises_older_turns(store) -> None:
    llm = FakeListChatModel(responses=["Alice introduced herself.", "Alice, from Lyon, likes tea."])
    mem = BeeWeaveMemory(memory=store, user_id="alice", window=2, llm=llm, long_term_k=0)
    for human, ai in TURNS:
        mem.save_context({"input": human}, {"response": ai})
    assert mem.summary == "Alice, from Lyon, likes tea."


def test_agent_executor_with_memory(store) -> None:
    mem = BeeWeaveMemory(memory=store, user_id="alice", memory_key="chat_history", return_messages=True)
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are an ops assistant."), MessagesPlaceholder("chat_history"), ("human", "{input}"),
        MessagesPlaceholder("agent_scratchpad")])
    agent = executor(script(), memory=mem, return_intermediate_steps=True, prompt=prompt)
    assert agent.invoke({"input": QUESTION})["output"] == ANSWER
    assert mem.buffer == [(QUESTION, ANSWER)]
    [event] = store.events
    [call] = event.intermediate_steps
    assert (call.tool, call.output) == ("lookup_config", TOOL_RESULT)


def test_ambiguous_inputs_ask_for_input_key(store) -> None:
    mem = BeeWeaveMemory(memory=store, user_id="alice")
    with pytest.raises(ValueError, match="input_key"):
        mem.load_memory_variables({"input": "a", "other": "b"})
    mem = BeeWeaveMemory(memory=store, user_id="alice", input_key="input", long_term_k=0)
    assert mem.load_memory_variables({"input": "a", "other": "b"}) == {"history": ""}
