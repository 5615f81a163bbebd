"""create_agent with BeeWeave as its LangGraph store and its memory middleware.

Run 1 (thread "monday"): the user tells a fact; a tool writes it to ``runtime.store``
(a ``BeeWeaveStore``) and ``BeeWeaveMiddleware`` hands the run to BeeWeave's ingestion.
Run 2 (a new thread, "friday"): the middleware recalls the fact into the model's system
message, and a tool finds it again through ``runtime.store`` (BeeWeave's hybrid search).
The same two runs then go through ``ainvoke``.

    python examples/langchain_store_and_middleware.py

Offline: the model is scripted (its tool calls and wording are fixed), and it records the
system message it was given, so the output shows what a real model would have seen.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langchain_models import ScriptedChatModel, tool_call
from langgraph.checkpoint.memory import InMemorySaver
from typing_extensions import TypedDict

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveMiddleware, BeeWeaveStore

FACT = "Please remember: my favourite colour is teal and I live in Lisbon."
QUESTION = "What is my favourite colour?"


class Context(TypedDict):
    user_id: str


class ShowingModel(ScriptedChatModel):
    """The scripted model, keeping the system message of each call."""

    seen: list[str] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(next((m.text for m in messages if m.type == "system"), ""))
        return super()._generate(messages, *args, **kwargs)


@tool
def remember(fact: str, runtime: ToolRuntime[Context]) -> str:
    """Save a fact about the user in the long-term store."""
    runtime.store.put(("memories", runtime.context["user_id"]), "profile", {"text": fact})
    return "saved"


@tool
def recall(query: str, runtime: ToolRuntime[Context]) -> str:
    """Search the long-term store for facts about the user."""
    items = runtime.store.search(("memories", runtime.context["user_id"]), query=query, limit=3)
    return "\n".join(i.value["text"] for i in items) or "nothing found"


def build(memory: BeeWeave) -> tuple[Any, ShowingModel]:
    model = ShowingModel(responses=[
        tool_call("remember", fact=FACT), AIMessage("Noted: teal, and Lisbon."),
        tool_call("recall", query="favourite colour"), AIMessage("Your favourite colour is teal."),
    ])
    model.seen = []
    agent = create_agent(model, [remember, recall], system_prompt="You are a helpful assistant.",
                         store=BeeWeaveStore(memory), checkpointer=InMemorySaver(), context_schema=Context,
                         middleware=[BeeWeaveMiddleware(memory, user_id="alice")])
    return agent, model


def report(model: ShowingModel, state: dict[str, Any]) -> dict[str, Any]:
    recalled = model.seen[2].split("\n\n", 1)[1] if "\n\n" in model.seen[2] else ""
    tool_found = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    print("run 2, the memory message the middleware added:\n  " + recalled.replace("\n", "\n  "))
    print("run 2, what the recall tool found in runtime.store:\n  " + "\n  ".join(tool_found))
    print("run 2, answer: " + state["messages"][-1].text)
    return {"recalled": recalled, "tool_found": tool_found, "answer": state["messages"][-1].text}


def run_sync(memory: BeeWeave) -> dict[str, Any]:
    agent, model = build(memory)
    context = Context(user_id="alice")
    agent.invoke({"messages": [{"role": "user", "content": FACT}]},
                 config={"configurable": {"thread_id": "monday"}}, context=context)
    memory.flush()  # ingestion runs in the background: wait for it
    state = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]},
                         config={"configurable": {"thread_id": "friday"}}, context=context)
    return report(model, state)


async def run_async(memory: BeeWeave) -> dict[str, Any]:
    agent, model = build(memory)
    context = Context(user_id="alice")
    await agent.ainvoke({"messages": [{"role": "user", "content": FACT}]},
                        config={"configurable": {"thread_id": "monday"}}, context=context)
    await asyncio.to_thread(memory.flush)
    state = await agent.ainvoke({"messages": [{"role": "user", "content": QUESTION}]},
                                config={"configurable": {"thread_id": "friday"}}, context=context)
    return report(model, state)


def main(embedder: Any = None) -> dict[str, Any]:
    with BeeWeave(embedder=embedder) as memory:
        out = {"sync": run_sync(memory)}
    with BeeWeave(embedder=embedder) as memory:
        out["async"] = asyncio.run(run_async(memory))
    return out


if __name__ == "__main__":
    main()
