"""``BeeWeaveMemoryBlock``: BeeWeave as the long-term memory of ``llama_index.core.memory.Memory``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock

from beeweave_core.api import MemoryAPI
from beeweave_core.defaults import DEFAULT_TOP_K
from beeweave_core.degrade import Failures
from beeweave_core.ingest.knowledge_events import KnowledgeEvent, ToolCall

__all__ = ["BeeWeaveMemoryBlock", "messages_to_events"]

logger = logging.getLogger(__name__)


class BeeWeaveMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for a LlamaIndex agent or chat engine, kept in BeeWeave.

    When ``Memory`` flushes turns out of its short-term queue, they are handed to
    ``BeeWeave.ingest`` as ``KnowledgeEvent``s (a user message is the query, the
    assistant's replies the response, tool messages the intermediate steps). For each
    new input, the memories most relevant to the latest user message come back as text,
    one list item per memory (``- ...``); with a "nothing relevant" gate (``abstain_below``, by
    default the store's), an off-topic message gets an empty block (``abstain_below=0``: no gate).

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[llamaindex]"

    Instantiate:
        .. code-block:: python

            from llama_index.core.memory import Memory
            from beeweave_core import BeeWeave
            from beeweave_llamaindex import BeeWeaveMemoryBlock

            memory = BeeWeave("memory.db")
            block = BeeWeaveMemoryBlock(memory, user_id="alice", similarity_top_k=3)
            chat_memory = Memory.from_defaults(memory_blocks=[block], token_limit=4000)

    Usage:
        .. code-block:: python

            from llama_index.core.chat_engine import SimpleChatEngine
            engine = SimpleChatEngine.from_defaults(llm=llm, memory=chat_memory)
            engine.chat("I am allergic to peanuts.")

    Ingestion is asynchronous in BeeWeave: call ``memory.flush()`` to wait for it.
    Memories are read across all of the user's sessions; each event records the
    LlamaIndex session it came from as its ``session_id``.

    When the store is unavailable (a locked file, PostgreSQL down, the server
    unreachable) the block returns no memories and turns that cannot be handed to the
    store are dropped; each such failure is logged as a warning and counted in
    ``errors``, and the next call tries the store again.

    Args:
        memory: the BeeWeave store.
        **config: the fields below, and those of ``BaseMemoryBlock`` (``priority``:
            0 = never truncated, higher numbers are truncated later).
    """

    name: str = Field(default="BeeWeave", description="The name of the memory block.")
    user_id: str = Field(description="Whose memories are written and read.")
    agent_id: str | None = Field(default=None, description="Recorded on ingested events as the agent.")
    similarity_top_k: int = Field(default=DEFAULT_TOP_K, description="How many memories to return.")
    min_relevance: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Memories below this calibrated relevance are left out (None: none are); "
                    "when none passes the block is empty.")
    abstain_below: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="The block is empty when no memory reaches this calibrated relevance (None: the store's "
                    "default gate, SearchConfig.abstain_below; 0: off, always the top ones).")
    scopes: list[str] | None = Field(
        default=None, description='Whose knowledge is read: "user", "tenant", shared scopes such as "project:atlas" '
                                  "(None: the store's default, the user's, the tenant's and the granted scopes).")

    _memory: MemoryAPI = PrivateAttr()
    _failures: Failures = PrivateAttr(default_factory=lambda: Failures(logger))

    def __init__(self, memory: MemoryAPI, **config: Any) -> None:
        super().__init__(**config)
        self._memory = memory

    @property
    def errors(self) -> int:
        """How many searches or hand-offs found the store unavailable (and went on without it)."""
        return self._failures.count

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = next((m.content for m in reversed(messages or []) if m.role == MessageRole.USER and m.content), "")
        if not query.strip():
            return ""
        hits = await asyncio.to_thread(self._search, query)
        # One list item per memory; continuation lines are indented so a memory that spans
        # several lines stays recognisably one item.
        return "\n".join("- " + h.chunk.raw_content.replace("\n", "\n  ") for h in hits)

    def _search(self, query: str) -> list[Any]:
        return self._failures.unless_unavailable("memory block search", lambda: self._memory.search(
            query, user_id=self.user_id, k=self.similarity_top_k, min_relevance=self.min_relevance,
            abstain_below=self.abstain_below, scopes=self.scopes), [])

    async def _aput(self, messages: list[ChatMessage]) -> None:
        for event in messages_to_events(messages, user_id=self.user_id, agent_id=self.agent_id):
            await asyncio.to_thread(self._failures.unless_unavailable, "memory block ingest",
                                    lambda e=event: self._memory.ingest(e), None)


def messages_to_events(messages: list[ChatMessage], *, user_id: str,
                       agent_id: str | None = None) -> list[KnowledgeEvent]:
    """Group chat messages into turns: each user message opens a ``KnowledgeEvent``; the
    assistant messages after it are its response and tool messages its steps. System
    messages are context, not conversation, and are skipped."""
    events: list[KnowledgeEvent] = []
    for m in messages:
        text = m.content or ""
        if m.role == MessageRole.USER or not events:
            if m.role == MessageRole.SYSTEM:
                continue
            events.append(KnowledgeEvent(user_id=user_id, agent_id=agent_id,
                                         session_id=m.additional_kwargs.get("session_id"),
                                         metadata={"source": "llama_index.memory"}))
        event = events[-1]
        if m.role == MessageRole.USER:
            event.query = text
        elif m.role == MessageRole.ASSISTANT and text:
            event.response = f"{event.response}\n{text}" if event.response else text
        elif m.role == MessageRole.TOOL:
            event.intermediate_steps.append(ToolCall(tool=str(m.additional_kwargs.get("name", "tool")), output=text))
    return [e for e in events if e.query or e.response]
