"""``BeeWeaveMemory``: a conversation memory for LangChain chains and ``AgentExecutor``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import Field, PrivateAttr, SkipValidation

from beeweave_core.api import MemoryAPI
from beeweave_core.defaults import DEFAULT_TOP_K
from beeweave_core.degrade import Failures
from beeweave_core.errors import InvalidInputError
from beeweave_core.ingest.extract import summarize
from beeweave_core.ingest.knowledge_events import KnowledgeEvent
from beeweave_core.records import SearchHit

from ._convert import text_of, tool_calls_from_steps

__all__ = ["BeeWeaveMemory"]

logger = logging.getLogger(__name__)


def _mapping(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"BeeWeaveMemory needs the chain's {name} as a dict, got {type(value).__name__}")
    return value


class BeeWeaveMemory(BaseMemory):
    """Short-term: the last ``window`` turns verbatim and a summary of older turns.
    Long-term: the memories BeeWeave finds for the current input.

    ``save_context`` hands each turn to ``BeeWeave.ingest``, so what was said becomes
    long-term memory for later sessions; ``clear()`` empties the short-term buffer
    and summary (the store keeps what it has learnt).

    Older turns are summarised by ``llm`` when one is given (LangChain's progressive
    summary prompt), else offline by BeeWeave's extractive summary of each line.

    Long-term memories pass the "nothing relevant" gate ``abstain_below`` (None: the store's
    default, ``SearchConfig.abstain_below``): with one, an off-topic input adds none.
    ``abstain_below=0`` turns any gate off.

    When the store is unavailable (a locked file, PostgreSQL down, the server
    unreachable) the chain goes on without long-term memories, and a turn that cannot
    be handed to the store is kept in the short-term buffer only; each such failure is
    logged as a warning and counted in ``errors``. Inputs it cannot read raise
    ``InvalidInputError`` (a ``ValueError``); a store closed by the program raises
    ``StoreClosedError``.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[langchain]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_langchain import BeeWeaveMemory

            memory = BeeWeaveMemory(memory=BeeWeave("memory.db"), user_id="alice", session_id="s1")

    Usage:
        .. code-block:: python

            from langchain_classic.chains import ConversationChain

            chain = ConversationChain(llm=llm, memory=memory)  # the default prompt's {history}
            chain.invoke({"input": "I am allergic to peanuts."})

            # long-term memories in their own prompt variable, history as messages:
            memory = BeeWeaveMemory(memory=store, user_id="alice", memory_key="chat_history",
                                    long_term_key="long_term", return_messages=True)
    """

    memory: SkipValidation[MemoryAPI] = Field(description="The BeeWeave store (or a BeeWeaveClient).")
    user_id: str = Field(description="Whose conversation this is.")
    session_id: str | None = None
    agent_id: str | None = None
    memory_key: str = Field(default="history", description="The prompt variable of the conversation.")
    long_term_key: str | None = Field(
        default=None, description="A separate prompt variable for long-term memories; None puts them in memory_key.")
    input_key: str | None = Field(default=None, description="The input holding the user's message (guessed if None).")
    output_key: str | None = Field(default=None, description="The output holding the answer (guessed if None).")
    window: int = Field(default=5, ge=0, description="How many recent turns are kept verbatim.")
    long_term_k: int = Field(default=DEFAULT_TOP_K, ge=0, description="How many long-term memories to retrieve.")
    search_kwargs: dict[str, Any] = Field(default_factory=dict, description="More BeeWeave.search arguments.")
    min_relevance: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Long-term memories below this calibrated relevance are left out (None: none are).")
    abstain_below: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="No long-term memories when none reaches this calibrated relevance (None: the store's "
                    "default gate, SearchConfig.abstain_below; 0: off, always the top ones).")
    llm: Any = Field(default=None, description="A LangChain model that summarises older turns.")
    return_messages: bool = Field(default=False, description="Messages for chat prompts instead of text.")
    human_prefix: str = "Human"
    ai_prefix: str = "AI"

    _turns: list[tuple[str, str]] = PrivateAttr(default_factory=list)
    _summary: str = PrivateAttr(default="")
    _failures: Failures = PrivateAttr(default_factory=lambda: Failures(logger))

    @property
    def errors(self) -> int:
        """How many searches or hand-offs found the store unavailable (and went on without it)."""
        return self._failures.count

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key] + ([self.long_term_key] if self.long_term_key else [])

    @property
    def buffer(self) -> list[tuple[str, str]]:
        """The verbatim turns, oldest first, as (human, ai) pairs."""
        return list(self._turns)

    @property
    def summary(self) -> str:
        """The summary of the turns that left the window."""
        return self._summary

    # -- keys -------------------------------------------------------------------------
    def _input_text(self, given: dict[str, Any]) -> str:
        inputs = _mapping("inputs", given)
        if self.input_key is not None:
            return text_of(inputs.get(self.input_key))
        keys = [k for k in inputs if k not in self.memory_variables and k != "stop"]
        if len(keys) != 1:
            raise InvalidInputError(
                f"BeeWeaveMemory cannot tell the user's input among {sorted(map(str, keys))}: set input_key")
        return text_of(inputs[keys[0]])

    def _output_text(self, given: dict[str, Any]) -> str:
        outputs = _mapping("outputs", given)
        if self.output_key is not None:
            return text_of(outputs.get(self.output_key), role="ai")
        keys = [k for k in outputs if k != "intermediate_steps"]
        key = keys[0] if len(keys) == 1 else "output" if "output" in outputs else None
        if key is None:
            raise InvalidInputError(
                f"BeeWeaveMemory cannot tell the answer among {sorted(map(str, outputs))}: set output_key")
        return text_of(outputs[key], role="ai")

    # -- reading -------------------------------------------------------------------------
    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        query = self._input_text(inputs)
        found: list[str] = []
        if query.strip() and self.long_term_k:
            none: list[SearchHit] = []
            hits = self._failures.unless_unavailable("memory search", lambda: self.memory.search(
                query, user_id=self.user_id, k=self.long_term_k,
                **{"min_relevance": self.min_relevance, "abstain_below": self.abstain_below, **self.search_kwargs}), none)
            found = [h.chunk.raw_content for h in hits]
        history = self._history()
        long_term = self._long_term(found)
        if self.long_term_key:
            return {self.memory_key: history, self.long_term_key: long_term}
        return {self.memory_key: long_term + history}

    def _history(self) -> Any:
        messages: list[BaseMessage] = []
        if self._summary:
            messages.append(SystemMessage(f"Summary of the earlier conversation: {self._summary}"))
        for human, ai in self._turns:
            messages += [HumanMessage(human), AIMessage(ai)]
        if self.return_messages:
            return messages
        lines = [f"{self.human_prefix}: {m.content}" if isinstance(m, HumanMessage)
                 else f"{self.ai_prefix}: {m.content}" if isinstance(m, AIMessage) else str(m.content)
                 for m in messages]
        return "\n".join(lines)

    def _long_term(self, found: list[str]) -> Any:
        items = ("\n  ".join(line for line in t.splitlines() if line.strip()) for t in found)
        text = "Relevant memories:\n" + "\n".join(f"- {t}" for t in items) if found else ""
        if self.return_messages:
            return [SystemMessage(text)] if text else []
        return text + "\n" if text and not self.long_term_key else text

    # -- writing ---------------------------------------------------------------------------
    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        human, ai = self._input_text(inputs), self._output_text(outputs)
        event = KnowledgeEvent(
            user_id=self.user_id, query=human, response=ai, session_id=self.session_id, agent_id=self.agent_id,
            intermediate_steps=tool_calls_from_steps(outputs.get("intermediate_steps")),
            metadata={"source": "langchain.memory"})
        self._failures.unless_unavailable("memory ingest", lambda: self.memory.ingest(event), None)
        self._turns.append((human, ai))
        if len(self._turns) > self.window:
            cut = len(self._turns) - self.window
            old, self._turns = self._turns[:cut], self._turns[cut:]
            self._summary = self._summarize(old)

    def _summarize(self, turns: list[tuple[str, str]]) -> str:
        lines = "\n".join(f"{self.human_prefix}: {h}\n{self.ai_prefix}: {a}" for h, a in turns)
        if self.llm is not None:
            # Imported here: langchain_classic.memory takes seconds to import.
            from langchain_classic.memory.prompt import SUMMARY_PROMPT

            reply = self.llm.invoke(SUMMARY_PROMPT.format(summary=self._summary, new_lines=lines))
            return text_of(reply, role="ai").strip()
        return " ".join(filter(None, [self._summary, *(summarize("", t) for turn in turns for t in turn)]))

    def clear(self) -> None:
        """Forget the short-term buffer and summary (long-term memories stay in the store)."""
        self._turns = []
        self._summary = ""
