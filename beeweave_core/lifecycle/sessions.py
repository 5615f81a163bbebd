"""Working memory: a bounded buffer of a session's latest turns with a rolling summary of
the older ones, stored in the backend (it survives restarts and is shared by processes on
one store), read back by ``BeeWeave.get_conversation_context``.

When more than ``SessionConfig.max_turns`` turns are held, the oldest are folded into the
summary: by the configured model (``summarizer``: a LangChain chat model, a LlamaIndex LLM
or a function from prompt to text), else extractively: the sentences of the old summary
and the folded turns that share the most words with the rest of the conversation are kept,
in their order, within ``summary_tokens`` (tokens counted as words and CJK characters).
Either way the summary never grows past its budget. A model that fails falls back to the
extractive summary. Turns are redacted by the store's write policy before they are stored.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..user_data import Staged, named_entries, user_entries
from ..validation import check_text, check_user
from .base import LifecycleContext
from .config import SessionConfig

__all__ = ["Turn", "ConversationContext", "Sessions", "extractive_summary", "count_tokens"]

logger = logging.getLogger(__name__)

NAMESPACE = "session_buffer"
ROLES = ("user", "assistant", "system", "tool")
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_PROMPT = """Update the running summary of a conversation with the turns below.
Keep every fact, decision, preference and open question; drop greetings and filler.
Answer with the new summary only, at most {words} words.

Summary so far:
{summary}

Turns to add:
{turns}
"""


def _name(what: str, value: Any) -> str:
    checked = check_text(what, value)
    assert checked is not None  # not optional: check_text returned it or raised
    return checked


def count_tokens(text: str) -> int:
    """Words and CJK characters: a model-free estimate of a text's tokens."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    timestamp: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "timestamp": self.timestamp.isoformat()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        return cls(d["role"], d["content"], datetime.fromisoformat(d["timestamp"]))


@dataclass(frozen=True)
class ConversationContext:
    """A session's working memory: the summary of its older turns and the latest ones.

    ``turns`` are oldest first; ``total_turns`` counts every turn the session had,
    ``summarized_turns`` how many of them are in ``summary`` only.
    """

    session_id: str
    user_id: str
    summary: str = ""
    turns: tuple[Turn, ...] = ()
    total_turns: int = 0
    summarized_turns: int = 0
    summarizer: str = "extractive"  # or "model" (the last fold's)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "user_id": self.user_id, "summary": self.summary,
                "turns": [t.to_dict() for t in self.turns], "total_turns": self.total_turns,
                "summarized_turns": self.summarized_turns, "summarizer": self.summarizer}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def extractive_summary(summary: str, folded: list[Turn], context: list[Turn], budget: int) -> str:
    """The old summary and the folded turns cut to ``budget`` tokens: their sentences that share
    the most words with the whole conversation (centrality), kept in their order."""
    pieces = _sentences(summary) + [s for t in folded for s in _sentences(t.content)]
    if not pieces:
        return ""
    words = [[w.lower() for w in _TOKEN.findall(p)] for p in pieces]
    freq: Counter[str] = Counter()
    for ws in words:
        freq.update(set(ws))
    for t in context:
        freq.update({w.lower() for w in _TOKEN.findall(t.content)})
    scores = []
    for i, ws in enumerate(words):
        shared = sum(math.log1p(freq[w] - 1) for w in set(ws) if len(w) > 1 or not w.isascii())
        # Later sentences are newer: a slight preference, so a long session keeps its recent drift.
        scores.append((shared / math.sqrt(len(ws) + 1)) * (1.0 + 0.2 * i / len(words)))
    keep: list[int] = []
    used = 0
    for i in sorted(range(len(pieces)), key=lambda j: (-scores[j], -j)):
        n = len(words[i])
        if used + n <= budget:
            keep.append(i)
            used += n
    if not keep:  # one sentence longer than the budget: its first tokens
        first = max(range(len(pieces)), key=lambda j: scores[j])
        return " ".join(_TOKEN.findall(pieces[first])[:budget])
    return " ".join(pieces[i] for i in sorted(keep))


def _cut(text: str, budget: int) -> str:
    """``text`` within ``budget`` tokens (a model's summary is held to the budget too)."""
    if count_tokens(text) <= budget:
        return text.strip()
    out, n = [], 0
    for s in _sentences(text):
        k = count_tokens(s)
        if n + k > budget:
            break
        out.append(s)
        n += k
    return " ".join(out) if out else " ".join(_TOKEN.findall(text)[:budget])


def _ask(model: Any) -> Callable[[str], str]:
    if hasattr(model, "invoke"):
        def ask(prompt: str) -> str:
            answer = model.invoke(prompt)
            return str(getattr(answer, "content", answer))
        return ask
    if hasattr(model, "complete"):
        return lambda prompt: str(getattr(model.complete(prompt), "text", ""))
    if callable(model):
        return lambda prompt: str(model(prompt))
    raise InvalidInputError("summarizer must be a LangChain chat model, a LlamaIndex LLM or a function")


_OPTIMISTIC_TRIES = 5


class _Raced(Exception):
    """Another turn was written between the read and the write (internal; retried)."""


def _buffer(state: dict[str, Any], where: str) -> list[str]:
    """Check a session's buffer as ``get`` reads it; it names no memory."""
    try:
        if not isinstance(state.get("summary"), str) or not isinstance(state.get("turns"), list):
            raise TypeError("summary must be a string and turns a list")
        for t in state["turns"]:
            Turn.from_dict(t)
        int(state["total"]), int(state["summarized"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where} is not a session buffer: {exc}") from None
    return []


class Sessions:
    """The session buffers of one store (see the module docstring)."""

    def __init__(self, ctx: LifecycleContext, redact: Callable[[str], str] | None = None) -> None:
        self.ctx = ctx
        self.redact = redact or (lambda text: text)
        model = self.config.summarizer
        self._ask = _ask(model) if model is not None else None

    @property
    def config(self) -> SessionConfig:
        return self.ctx.config.sessions

    @staticmethod
    def _key(user_id: str, session_id: str) -> str:
        return f"{user_id}\x1f{session_id}"

    # -- a user's data (UserData) ------------------------------------------------------------
    keeps = (NAMESPACE,)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """``sessions``: session id -> its buffer ``{"summary", "turns", "total", "summarized",
        "summarizer"}``."""
        return {"sessions": user_entries(self.ctx.backend, NAMESPACE, user_id)}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        return Staged(kv=[entry for entry, _ in named_entries(data, "sessions", NAMESPACE, user_id, _buffer)])

    def add_turn(self, session_id: str, role: str, content: str, *, user_id: str,
                 timestamp: datetime | None = None) -> ConversationContext:
        """Append one turn to the session's buffer; fold the oldest into the summary when
        the buffer is full. Returns the session's context after the turn."""
        session_id, user_id = _name("session_id", session_id), check_user(user_id)
        if role not in ROLES:
            raise InvalidInputError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInputError("a turn's content must be a non-empty string")
        when = timestamp or self.ctx.now()
        turn = Turn(role, self.redact(content.strip()), when)
        key = self._key(user_id, session_id)
        # Atomic against other processes (kv_update). A fold may ask an LLM, which must not run
        # while the store is locked: the new state is built from a read, and written only if
        # no other turn landed meanwhile (else built again); after a few lost races it is built
        # under the lock, so a busy session still makes progress.
        for attempt in range(_OPTIMISTIC_TRIES + 1):
            locked = attempt == _OPTIMISTIC_TRIES
            seen = None if locked else self.ctx.backend.kv_get(NAMESPACE, key)
            built = None if locked else self._appended(seen, turn)

            def change(cur: dict[str, Any] | None, seen: dict[str, Any] | None = seen,
                       built: dict[str, Any] | None = built) -> dict[str, Any]:
                if built is None:
                    return self._appended(cur, turn)
                if cur != seen:
                    raise _Raced
                return built
            try:
                state = self.ctx.backend.kv_update(NAMESPACE, key, change, user_id=user_id)
                break
            except _Raced:
                continue
        assert state is not None
        turns = state["turns"]
        return self._context(session_id, user_id, state, len(turns))

    def _appended(self, state: dict[str, Any] | None, turn: Turn) -> dict[str, Any]:
        """The buffer ``state`` (None: a new session) with ``turn`` appended and, when full,
        its oldest turns folded into the summary."""
        state = dict(state or {"summary": "", "turns": [], "total": 0, "summarized": 0, "summarizer": "extractive"})
        turns = [Turn.from_dict(t) for t in state["turns"]] + [turn]
        summary, how = state["summary"], state.get("summarizer", "extractive")
        over = len(turns) - self.config.max_turns
        if over > 0:
            folded, turns = turns[:over], turns[over:]
            summary, how = self._fold(summary, folded, turns)
            state["summarized"] = int(state["summarized"]) + len(folded)
        state.update(summary=summary, summarizer=how, turns=[t.to_dict() for t in turns],
                     total=int(state["total"]) + 1)
        return state

    def get(self, session_id: str, *, user_id: str, window: int = 10) -> ConversationContext:
        """The summary and the latest ``window`` turns of a session (empty if it has none)."""
        session_id, user_id = _name("session_id", session_id), check_user(user_id)
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise InvalidInputError("window must be a non-negative integer")
        state = self.ctx.backend.kv_get(NAMESPACE, self._key(user_id, session_id))
        if state is None:
            return ConversationContext(session_id, user_id)
        return self._context(session_id, user_id, state, window)

    def clear(self, session_id: str, *, user_id: str) -> bool:
        """Forget a session's buffer and summary (its memories stay); False if it had none."""
        return self.ctx.backend.kv_delete(NAMESPACE, self._key(check_user(user_id),
                                                                _name("session_id", session_id)))

    @staticmethod
    def _context(session_id: str, user_id: str, state: dict[str, Any], window: int) -> ConversationContext:
        turns = [Turn.from_dict(t) for t in state["turns"]]
        shown = turns[len(turns) - window:] if window else []
        # Turns held in the buffer but outside the window are not in the summary: say so.
        return ConversationContext(session_id, user_id, state["summary"], tuple(shown), int(state["total"]),
                                   int(state["summarized"]), state.get("summarizer", "extractive"),
                                   {"hidden_turns": len(turns) - len(shown)})

    def _fold(self, summary: str, folded: list[Turn], kept: list[Turn]) -> tuple[str, str]:
        budget = self.config.summary_tokens
        if self._ask is not None:
            lines = "\n".join(f"{t.role}: {t.content}" for t in folded)
            try:
                text = self._ask(_PROMPT.format(words=budget, summary=summary or "(none)", turns=lines))
                if text.strip():
                    return _cut(" ".join(text.split()), budget), "model"
            except Exception as exc:  # a model failure never loses the turns: summarize without it
                logger.warning("session summary by the model failed (%s: %s); using the extractive one",
                               type(exc).__name__, exc)
        return extractive_summary(summary, folded, kept, budget), "extractive"
