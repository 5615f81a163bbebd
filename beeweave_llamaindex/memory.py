"""``BeeWeaveMemory``: a LlamaIndex ``BaseMemory`` with BeeWeave as its long-term memory.

A drop-in for ``FunctionAgent(...).run(..., memory=...)`` and chat engines
(``SimpleChatEngine.from_defaults(memory=...)``): the short-term chat history is a
``ChatMemoryBuffer`` (held, not inherited), and ``get`` adds the long-term memories
relevant to the latest user message to the system message. Each completed turn (a
user message, the tool calls and the final answer) is handed to ``BeeWeave.ingest``;
the ingestion pipeline decides what becomes a memory.

With a ``session_id``, the session's working memory is BeeWeave's own
(``add_turn`` / ``get_conversation_context``): every user message and final answer is
stored in the session's buffer, a new ``BeeWeaveMemory`` on the same session (after a
restart) starts from its latest turns, and the rolling summary of the older turns (bounded
by ``SessionConfig.summary_tokens``) joins the system message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.memory.types import BaseMemory

from beeweave_core.defaults import DEFAULT_TOP_K
from beeweave_core.degrade import Failures
from beeweave_core.errors import InvalidInputError

from .memory_block import messages_to_events

__all__ = ["BeeWeaveMemory", "DEFAULT_HEADER"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER = "Relevant memories from earlier conversations (use them when they help):"
SUMMARY_HEADER = "Earlier in this conversation:"


def _text(message: ChatMessage) -> str:
    return "".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def _final_answer(message: ChatMessage) -> bool:
    """An assistant message with text and no tool call ends a turn."""
    return message.role == MessageRole.ASSISTANT and bool(_text(message).strip()) and \
        not message.additional_kwargs.get("tool_calls") and \
        not any(isinstance(b, ToolCallBlock) for b in message.blocks)


def _named_tools(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Tool results named after the tool that produced them (agents record only the call id)."""
    names: dict[str, str] = {}
    for m in messages:
        for call in m.additional_kwargs.get("tool_calls") or ():
            if getattr(call, "tool_id", None):
                names[call.tool_id] = call.tool_name
        for b in m.blocks:
            if isinstance(b, ToolCallBlock) and b.tool_call_id:
                names[b.tool_call_id] = b.tool_name
    out = []
    for m in messages:
        cid = m.additional_kwargs.get("tool_call_id")
        if m.role == MessageRole.TOOL and "name" not in m.additional_kwargs and cid in names:
            m = m.model_copy(update={"additional_kwargs": {**m.additional_kwargs, "name": names[cid]}})
        out.append(m)
    return out


class BeeWeaveMemory(BaseMemory):
    """Short-term chat history plus BeeWeave long-term memory, as one LlamaIndex memory.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[llamaindex]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_llamaindex import BeeWeaveMemory

            memory = BeeWeaveMemory.from_client(BeeWeave("memory.db"), context={"user_id": "alice"})
            # or: BeeWeaveMemory.from_config({"store": "memory.db"}, context={"user_id": "alice"})

    Usage:
        .. code-block:: python

            agent = FunctionAgent(tools=tools, llm=llm)
            await agent.run("I'm allergic to peanuts.", memory=memory)
            # a later session, a new BeeWeaveMemory on the same store:
            await agent.run("Suggest a snack.", memory=later)  # the model sees the allergy

    ``get`` returns the chat history with the memories (one ``- ...`` line each, best
    first) appended to its first system message, or in a new system message at the start.
    When the store is unavailable the history comes back without memories and the turn
    is not ingested; each failure is logged and counted in ``errors``. A store closed by
    the program raises ``StoreClosedError``.

    Args (``context`` keys for ``from_client`` / ``from_config``):
        user_id: whose memories are read and written (required).
        agent_id, session_id: recorded on the ingested turns.
        similarity_top_k: how many memories to add; min_score, min_relevance, abstain_below: passed
            to the search (``abstain_below=None``: the store's default "nothing relevant" gate,
            ``SearchConfig.abstain_below``; ``abstain_below=0`` turns any gate off).
    """

    user_id: str = Field(description="Whose memories are read and written.")
    agent_id: str | None = Field(default=None, description="Recorded on ingested turns as the agent.")
    session_id: str | None = Field(default=None, description="Recorded on ingested turns as the session.")
    similarity_top_k: int = Field(default=DEFAULT_TOP_K, description="How many memories to add.")
    min_score: float | None = Field(default=None, description="Memories below this search score are left out.")
    min_relevance: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Memories below this calibrated relevance are left out (None: none are); "
                    "when none passes, no memory message is added.")
    abstain_below: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="No memory message when no memory reaches this calibrated relevance (None: the store's "
                    "default gate, SearchConfig.abstain_below; 0: off, always the top ones).")
    header: str = Field(default=DEFAULT_HEADER, description="The line before the memories.")
    scopes: list[str] | None = Field(
        default=None, description='Whose knowledge is read: "user", "tenant", shared scopes such as "project:atlas" '
                                  "(None: the store's default, the user's, the tenant's and the granted scopes).")
    primary_memory: ChatMemoryBuffer = Field(description="The short-term chat history.")

    _memory: Any = PrivateAttr()
    _failures: Failures = PrivateAttr(default_factory=lambda: Failures(logger))

    def __init__(self, memory: Any, **data: Any) -> None:
        if not isinstance(data.get("user_id"), str) or not data["user_id"].strip():
            raise InvalidInputError("BeeWeaveMemory needs a user_id (context={'user_id': ...})")
        data.setdefault("primary_memory", ChatMemoryBuffer.from_defaults())
        super().__init__(**data)
        self._memory = memory
        if self.session_id and not self.primary_memory.get_all():
            self.primary_memory.set(self._resume())

    def _resume(self) -> list[ChatMessage]:
        """The session's latest turns from the store (nothing if it has none or is down)."""
        assert self.session_id is not None
        sid = self.session_id
        ctx = self._failures.unless_unavailable("session context", lambda: self._memory.get_conversation_context(
            sid, 20, user_id=self.user_id), None)
        return [] if ctx is None else [ChatMessage(role=t.role, content=t.content) for t in ctx.turns]

    @classmethod
    def class_name(cls) -> str:
        return "BeeWeaveMemory"

    @classmethod
    def from_defaults(cls, memory: Any = None, **kwargs: Any) -> BeeWeaveMemory:
        if memory is None:
            raise InvalidInputError("BeeWeaveMemory.from_defaults needs memory= (a BeeWeave store)")
        return cls(memory, **kwargs)

    @classmethod
    def from_client(cls, client: Any, context: Mapping[str, Any], *, chat_history: list[ChatMessage] | None = None,
                    token_limit: int | None = None, **kwargs: Any) -> BeeWeaveMemory:
        """Over an open store (``BeeWeave``, or a ``BeeWeaveClient`` for a server); ``context``
        gives ``user_id`` and optionally ``agent_id`` and ``session_id``."""
        unknown = set(context) - {"user_id", "agent_id", "session_id"}
        if unknown:
            raise InvalidInputError(f"unknown context keys {sorted(unknown)}; known: user_id, agent_id, session_id")
        primary = ChatMemoryBuffer.from_defaults(chat_history=chat_history, token_limit=token_limit)
        return cls(client, **dict(context), primary_memory=primary, **kwargs)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], context: Mapping[str, Any], **kwargs: Any) -> BeeWeaveMemory:
        """Opens the store ``config["store"]`` (a path, ``sqlite:///...`` or ``postgresql://...``);
        the other keys are ``BeeWeave`` arguments (``embedder``...)."""
        from beeweave_core import BeeWeave

        config = dict(config)
        store = config.pop("store", None)
        memory = BeeWeave.from_url(store, **config) if store else BeeWeave(**config)
        return cls.from_client(memory, context, **kwargs)

    @property
    def memory(self) -> Any:
        """The BeeWeave store."""
        return self._memory

    @property
    def errors(self) -> int:
        """How many searches or hand-offs found the store unavailable (and went on without it)."""
        return self._failures.count

    # -- reading -------------------------------------------------------------------------------
    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        messages = self.primary_memory.get(input=input, **kwargs)
        query = input or next((_text(m) for m in reversed(messages) if m.role == MessageRole.USER and _text(m)), "")
        summary = self._summary()
        hits: list[Any] = [] if not query.strip() else self._failures.unless_unavailable(
            "memory search", lambda: self._memory.search(query, user_id=self.user_id, k=self.similarity_top_k,
                                                         min_score=self.min_score,
                                                         min_relevance=self.min_relevance,
                                                         abstain_below=self.abstain_below,
                                                         scopes=self.scopes), [])
        if not hits and not summary:
            return messages
        lines = [SUMMARY_HEADER, summary] if summary else []
        if hits:
            lines += [self.header, *("- " + h.chunk.raw_content.replace("\n", "\n  ") for h in hits)]
        block = "\n".join(lines)
        if messages and messages[0].role == MessageRole.SYSTEM:
            first = messages[0]
            merged = f"{_text(first)}\n\n{block}" if _text(first) else block
            return [ChatMessage(role=MessageRole.SYSTEM, content=merged, additional_kwargs=first.additional_kwargs),
                    *messages[1:]]
        return [ChatMessage(role=MessageRole.SYSTEM, content=block), *messages]

    def get_all(self) -> list[ChatMessage]:
        return self.primary_memory.get_all()

    # -- writing -------------------------------------------------------------------------------
    def _summary(self) -> str:
        if not self.session_id:
            return ""
        sid = self.session_id
        ctx = self._failures.unless_unavailable("session context", lambda: self._memory.get_conversation_context(
            sid, 0, user_id=self.user_id), None)
        return "" if ctx is None else ctx.summary

    def put(self, message: ChatMessage) -> None:
        self.primary_memory.put(message)
        text = _text(message)
        if self.session_id and text.strip() and (message.role == MessageRole.USER or _final_answer(message)):
            sid, role = self.session_id, str(getattr(message.role, "value", message.role))
            self._failures.unless_unavailable("session turn", lambda: self._memory.add_turn(
                sid, role, text, user_id=self.user_id), None)
        if _final_answer(message):
            self._ingest_turn()

    def _ingest_turn(self) -> None:
        history = self.primary_memory.get_all()
        start = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == MessageRole.USER), 0)
        for event in messages_to_events(_named_tools(history[start:]), user_id=self.user_id, agent_id=self.agent_id):
            event.session_id = event.session_id or self.session_id
            event.metadata["source"] = "llama_index.BeeWeaveMemory"
            self._failures.unless_unavailable("memory ingest", partial(self._memory.ingest, event), None)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the short-term history (the long-term memory keeps what it learnt)."""
        self.primary_memory.set(messages)

    def reset(self) -> None:
        """Clear the short-term history (the long-term memory keeps what it learnt)."""
        self.primary_memory.reset()
