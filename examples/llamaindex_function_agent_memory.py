"""A LlamaIndex FunctionAgent with ``BeeWeaveMemory`` as its memory.

Monday: the user states facts; the agent calls a tool for each, and each finished turn
(question, tool call, answer) is ingested by BeeWeave. Friday (a new ``BeeWeaveMemory``, an
empty chat history): the memories relevant to each question reach the model in its system
message.

    python examples/llamaindex_function_agent_memory.py

Offline: the model is LlamaIndex's ``MockFunctionCallingLLM`` with a reply function that
calls the tool for statements and answers questions from the memories it was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool, ToolSelection

from beeweave_core import BeeWeave
from beeweave_llamaindex import BeeWeaveMemory

MONDAY = ["I am allergic to peanuts.", "My team deploys to production on Tuesdays."]
FRIDAY = ["Can I eat the peanut satay?", "When does my team deploy?"]


def add_to_calendar(note: str) -> str:
    """Keep a note in the user's calendar."""
    return f"noted in the calendar: {note}"


def reply(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Stand-in for a model: notes statements with the tool; answers questions from memory."""
    last = messages[-1]
    if last.role == "tool":
        return ChatMessage(role="assistant", content="Noted.")
    if not (last.content or "").endswith("?"):
        return ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
            ToolSelection(tool_id="call-1", tool_name="add_to_calendar", tool_kwargs={"note": last.content})]})
    system = "\n".join(m.content or "" for m in messages if m.role == "system")
    items = system.split("\n- ")[1:]  # one item per memory; its continuation lines are indented
    recalled = [" ".join(item.split()) for item in items]
    return ChatMessage(role="assistant", content="From memory: " + (" | ".join(recalled) if recalled else "nothing"))


async def converse(embedder: Any = None) -> list[str]:
    with BeeWeave(embedder=embedder) as memory:
        agent = FunctionAgent(tools=[FunctionTool.from_defaults(add_to_calendar)],
                              llm=MockFunctionCallingLLM(response_generator=reply),
                              system_prompt="You are Alice's assistant.")
        monday = BeeWeaveMemory.from_client(memory, context={"user_id": "alice", "session_id": "monday"})
        for text in MONDAY:
            await agent.run(text, memory=monday)
        await asyncio.to_thread(memory.flush, 60)  # ingestion runs in the background
        friday = BeeWeaveMemory.from_client(memory, context={"user_id": "alice", "session_id": "friday"},
                                            similarity_top_k=2)
        answers = []
        for question in FRIDAY:
            answers.append(str(await agent.run(question, memory=friday)))
            print(f"Q: {question}\nA: {answers[-1]}")
        return answers


def main(embedder: Any = None) -> list[str]:
    return asyncio.run(converse(embedder))


if __name__ == "__main__":
    main()
