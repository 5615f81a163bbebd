"""A LlamaIndex agent whose long-term memory is BeeWeave.

``Memory`` keeps a small short-term window; turns that fall out of it are handed to
``BeeWeaveMemoryBlock`` and ingested by BeeWeave. In a later session (a new
short-term memory), the agent is given the memories relevant to each new input.

Offline: the agent's model is LlamaIndex's ``MockFunctionCallingLLM`` with a reply
that reads back the long-term memory it was given, so the output shows what a real
model would have seen.

    python examples/llamaindex_agent_memory.py
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from beeweave_core import BeeWeave
from beeweave_llamaindex import BeeWeaveMemoryBlock

FIRST_SESSION = [
    "Please remember that I am allergic to peanuts.",
    "I drink oolong tea in the afternoon.",
    "My team deploys to production on Tuesdays.",
    "I am flying to Hangzhou next month.",
]
LATER_QUESTIONS = ["Can I eat the peanut satay at the party?", "What tea should I bring to the office?"]


def read_back_memory(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Stand-in for a model: acknowledges statements; answers questions with the long-term
    memory in its prompt."""
    question = next((m.content or "" for m in reversed(messages) if m.role == "user"), "")
    prompt = "\n".join(m.content or "" for m in messages)
    found = re.search(r"<BeeWeave>\s*(.*?)\s*</BeeWeave>", prompt, re.S)
    if not question.rstrip().endswith("?"):
        return ChatMessage(role="assistant", content="Noted.")
    if not found:
        return ChatMessage(role="assistant", content="I do not remember anything about that.")
    recalled = " | ".join(line[2:] for line in found.group(1).splitlines() if line.startswith("- "))
    return ChatMessage(role="assistant", content=f"From what I remember: {recalled}")


def short_term(block: BeeWeaveMemoryBlock, session_id: str) -> Memory:
    # A small window so that older turns flow to BeeWeave within this short demo.
    return Memory.from_defaults(session_id=session_id, memory_blocks=[block], token_limit=80,
                                chat_history_token_ratio=0.5, token_flush_size=20)


async def converse(embedder: Any = None) -> list[str]:
    with BeeWeave(embedder=embedder) as memory:
        block = BeeWeaveMemoryBlock(memory, user_id="alice", agent_id="assistant", similarity_top_k=3)
        agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=read_back_memory),
                              system_prompt="You are Alice's assistant.")
        monday = short_term(block, "monday")
        for text in FIRST_SESSION:
            await agent.run(text, memory=monday)
        await asyncio.to_thread(memory.flush, 60)  # ingestion runs in the background; wait for it
        print(f"BeeWeave now holds {memory.count(user_id='alice')} memories of alice")
        friday = short_term(block, "friday")
        answers = []
        for question in LATER_QUESTIONS:
            answer = str(await agent.run(question, memory=friday))
            print(f"Q: {question}\nA: {answer}")
            answers.append(answer)
        return answers


def main(embedder: Any = None) -> list[str]:
    return asyncio.run(converse(embedder))


if __name__ == "__main__":
    main()
