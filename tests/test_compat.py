"""Design 004's names (beeweave_core.compat, issue 46 item 11) over a local BeeWeave and over a real
server through BeeWeaveClient; our clients raise on a refused key instead of answering "no memories"."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave, InvalidInputError
from beeweave_core.async_client import AsyncBeeWeaveClient
from beeweave_core.client import AuthenticationError, BeeWeaveClient
from beeweave_core.compat import DesignMemory, time_range_filters
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

KEY = "compat-key-0001"
NOW = datetime.now(timezone.utc)
OLD, RECENT = NOW - timedelta(days=40), NOW - timedelta(days=2)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(ServerConfig(tmp_path_factory.mktemp("compat"), {KEY: "acme"}, embedder=EMBEDDER))
    yield s
    s.stop()


@pytest.fixture(params=["local", "client"])
def memory(request, server):
    if request.param == "local":
        m = BeeWeave(embedder=EMBEDDER)
        yield m
        m.close()
    else:
        c = BeeWeaveClient(server.url, KEY)
        yield c
        c.close()


def _seed(design: DesignMemory) -> tuple[str, str]:
    old = design.save_memory("The deploy window for the billing service is Tuesday night.",
                             metadata={"source": "runbook"}, tags=["deploy"], timestamp=OLD.isoformat())
    new = design.save_memory("The deploy window for the billing service moved to Thursday night.",
                             metadata={"source": "chat"}, tags=["deploy"], timestamp=RECENT.isoformat())
    return old, new


def test_query_memories_reads_time_range_in_every_form(memory) -> None:
    user = f"u-{id(memory)}"
    design = DesignMemory(memory, user_id=user, session_id="s1", agent_id="ops-bot")
    old, new = _seed(design)
    everything = design.query_memories("billing deploy window")
    assert {r["id"] for r in everything} == {old, new}
    recent = next(r for r in everything if r["id"] == new)
    assert recent["content"].endswith("Thursday night.") and recent["tags"] == ["deploy"]
    assert recent["metadata"]["source"] == "chat" and recent["session_id"] == "s1" and recent["score"] > 0
    for time_range in ["last 7 days", (NOW - timedelta(days=7), None), {"start": (NOW - timedelta(days=7)).isoformat()},
                       {"since": NOW - timedelta(days=7), "until": NOW + timedelta(days=1)}]:
        got = design.query_memories("billing deploy window", filters={"time_range": time_range})
        assert [r["id"] for r in got] == [new], time_range
    older = design.query_memories("billing deploy window", filters={"time_range": (None, NOW - timedelta(days=30)),
                                                                    "tags": ["deploy"]}, top_k=1)
    assert [r["id"] for r in older] == [old]


def test_get_conversation_context_takes_window_size(memory) -> None:
    user = f"c-{id(memory)}"
    for i in range(4):
        memory.add_turn("chat-1", "user" if i % 2 == 0 else "assistant", f"turn number {i}", user_id=user)
    design = DesignMemory(memory, user_id=user, session_id="chat-1")
    context = design.get_conversation_context(window_size=2)
    assert [t.content for t in context.turns] == ["turn number 2", "turn number 3"] and context.total_turns == 4
    assert len(DesignMemory(memory, user_id=user).get_conversation_context(10, session_id="chat-1").turns) == 4
    with pytest.raises(InvalidInputError, match="needs a session"):
        DesignMemory(memory, user_id=user).get_conversation_context(window_size=2)


def test_time_range_forms_and_refusals() -> None:
    start = datetime(2024, 5, 1, tzinfo=timezone.utc)
    assert time_range_filters("上周") == {"since": "上周", "until": "上周"}
    assert time_range_filters([start, None]) == {"since": start.isoformat()}
    assert time_range_filters({"from": 1, "to": 2}) == {"since": 1, "until": 2}
    for bad in [{"start": 1, "stop": 2}, {"begin": 1}, 42, (1, 2, 3)]:
        with pytest.raises(InvalidInputError, match="time_range"):
            time_range_filters(bad)


@pytest.mark.parametrize("key", [None, "wrong-key-0001"])
def test_a_refused_key_raises_and_is_never_no_memories(server, key) -> None:
    """A design 000 client given no key (or a wrong one) must hear it, from every read path."""
    with BeeWeaveClient(server.url, KEY) as good:
        good.add("The deploy window is Thursday night.", user_id="alice")
    with BeeWeaveClient(server.url, key) as client:
        design = DesignMemory(client, user_id="alice", session_id="s1")
        calls = [lambda: client.search("deploy window", user_id="alice"),
                 lambda: client.search_semantic("deploy window", user_id="alice"),
                 lambda: design.query_memories("deploy window"),
                 lambda: design.get_conversation_context(window_size=10),
                 lambda: client.list_memories(user_id="alice")]
        for call in calls:
            with pytest.raises(AuthenticationError, match="HTTP 40[13]"):
                call()

    async def async_reads() -> None:
        async with AsyncBeeWeaveClient(server.url, key) as client:
            with pytest.raises(AuthenticationError):
                await client.search("deploy window", user_id="alice")
            with pytest.raises(AuthenticationError):
                await client.search_semantic("deploy window", user_id="alice")

    asyncio.run(async_reads())


def test_the_middleware_over_a_refused_key_raises_instead_of_answering_without_memories(server) -> None:
    """The LangChain middleware degrades when the store fails, but a refused key is a set-up
    error: the run stops with it rather than going on as if the user had no memories."""
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from beeweave_langchain import BeeWeaveMiddleware
    from tests.langchain.lc_support import RecordingChatModel, user_says

    with BeeWeaveClient(server.url, "wrong-key-0001") as client:
        model = RecordingChatModel(responses=[AIMessage("answering anyway")])
        bot = create_agent(model, [], middleware=[BeeWeaveMiddleware(client, user_id="alice")])
        with pytest.raises(AuthenticationError):
            bot.invoke(user_says("When is the deploy window?"))
        assert model.system_texts() == []  # the model was never called without its memories
