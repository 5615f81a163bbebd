"""Agents, tools and a recording store shared by the LangChain adapter tests."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import BaseTool, tool
from langchain_models import ScriptedChatModel, tool_call

QUESTION = "Which port does the staging database listen on?"
ANSWER = "The staging database listens on port 5433."
TOOL_RESULT = "staging-db.internal:5433 (PostgreSQL 16, owned by the dba team)"


class Recorder:
    """A stand-in store that records what the adapters hand to ``ingest`` and ``feedback``;
    ``search`` goes to a real store when one is given (else it finds nothing)."""

    def __init__(self, *, fail: bool = False, search_in: Any = None) -> None:
        self.events: list[Any] = []
        self.feedbacks: list[tuple[list[str], str]] = []
        self.fail = fail
        self.search_in = search_in

    def search(self, query: str, **kwargs: Any) -> list[Any]:
        return [] if self.search_in is None else self.search_in.search(query, **kwargs)

    def ingest(self, event: Any) -> str:
        if self.fail:
            raise RuntimeError("the store is down")
        self.events.append(event)
        return event.id

    def feedback(self, chunk_ids: list[str], signal: str) -> None:
        if self.fail:
            raise RuntimeError("the store is down")
        self.feedbacks.append((list(chunk_ids), str(getattr(signal, "value", signal))))


@tool
def lookup_config(key: str) -> str:
    """Look up a value in the configuration registry."""
    return {"staging database port": TOOL_RESULT}.get(key, "no such key")


@tool
def broken_tool(key: str) -> str:
    """A tool whose backend is down."""
    raise ValueError(f"registry unavailable for {key}")


def script(*final: str) -> list[BaseMessage]:
    """The model asks lookup_config once, then answers."""
    return [tool_call("lookup_config", key="staging database port"), *(AIMessage(t) for t in final or (ANSWER,))]


def executor(replies: list[Any], tools: list[BaseTool] | None = None, prompt: ChatPromptTemplate | None = None,
             **kwargs: Any) -> AgentExecutor:
    tools = tools or [lookup_config]
    prompt = prompt or ChatPromptTemplate.from_messages([
        ("system", "You are an ops assistant."), ("human", "{input}"), MessagesPlaceholder("agent_scratchpad")])
    model = ScriptedChatModel(responses=replies)
    return AgentExecutor(agent=create_tool_calling_agent(model, tools, prompt), tools=tools, **kwargs)


def graph_agent(replies: list[Any], tools: list[BaseTool] | None = None) -> Any:
    return create_agent(ScriptedChatModel(responses=replies), tools or [lookup_config])


def recall_agent(memory: Any, query: str = "staging database port", **retriever: Any) -> Any:
    """A create_agent agent that looks in BeeWeave (a BeeWeaveRetriever tool), then answers."""
    from langchain_core.tools import create_retriever_tool

    from beeweave_langchain import BeeWeaveRetriever

    recall = create_retriever_tool(BeeWeaveRetriever(memory=memory, **retriever), "recall", "Search memory.")
    return graph_agent([tool_call("recall", query=query), AIMessage(ANSWER)], [recall])


def user_says(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class RecordingChatModel(ScriptedChatModel):
    """A scripted model that also records the messages of every call (to see what recall added)."""

    calls: list[list[BaseMessage]] = []

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self.calls = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.calls.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def system_texts(self) -> list[str]:
        """The system message of each call ("" when there was none)."""
        return [next((m.text for m in call if m.type == "system"), "") for call in self.calls]
