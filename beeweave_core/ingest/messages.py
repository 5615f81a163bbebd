"""Chat messages in, knowledge events out: what ``BeeWeave.add(messages)`` (mem0's
``Memory.add(messages, user_id=...)``) hands to ingestion.

A conversation is cut into turns, each a user's message(s) and what the assistant answered,
with the tools it called on the way; each turn becomes one event and goes through the
ingestion pipeline like any other. So the pipeline decides what becomes memory, as it does
for the middleware, REST and MCP: small talk ("Thanks!" / "You're welcome!") is not kept, a
call of the memory's own tools (``save_memory``, a recall) is never stored again, secrets are
redacted and admission applies. Storing each message as it came would keep all of those.

System messages are left out: they are the agent's instructions, sent again with every
conversation, not something the user or the run taught; kept, they would come back for
every search.

Messages are dicts in the OpenAI / mem0 shape: ``{"role": "user" | "assistant" | "system" |
"tool", "content": ...}``, where content is text or a list of parts (``{"type": "text",
"text": ...}``); an assistant message may carry ``tool_calls`` (``[{"id", "function":
{"name", "arguments"}}]``) and a tool message answers one by ``tool_call_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidEventError
from .knowledge_events import ToolCall

__all__ = ["ChatTurn", "chat_turns", "ROLES"]

ROLES = ("user", "assistant", "system", "tool")


@dataclass
class ChatTurn:
    """One turn of a conversation: what the user said, what the assistant answered, and the
    tools it called in between."""

    query: list[str] = field(default_factory=list)
    response: list[str] = field(default_factory=list)
    steps: list[ToolCall] = field(default_factory=list)

    def said(self) -> bool:
        return bool(self.query or self.response or any(s.output not in (None, "") for s in self.steps))

    def answered(self) -> bool:
        return bool(self.response or self.steps)

    def event(self) -> dict[str, Any]:
        """The turn as an event's content (the caller adds who, when and where)."""
        return {"query": "\n\n".join(self.query), "response": "\n\n".join(self.response),
                "intermediate_steps": [s.to_dict() for s in self.steps]}


def _text(i: int, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, (list, tuple)):  # OpenAI content parts; images and audio say nothing here
        parts = [p.get("text") if isinstance(p, Mapping) else p for p in content]
        return "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    raise InvalidEventError(f"messages[{i}].content must be text or a list of text parts, got {type(content).__name__}")


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # a model's malformed arguments are still what it called the tool with
    return raw


def _tool_calls(i: int, calls: Any) -> list[tuple[str | None, ToolCall]]:
    if not isinstance(calls, (list, tuple)):
        raise InvalidEventError(f"messages[{i}].tool_calls must be a list")
    out = []
    for call in calls:
        if not isinstance(call, Mapping):
            raise InvalidEventError(f"messages[{i}].tool_calls holds a {type(call).__name__}, not a tool call")
        function = call.get("function")
        fn: Mapping[str, Any] = function if isinstance(function, Mapping) else call  # or LangChain's flat call
        name = fn.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidEventError(f"messages[{i}].tool_calls: every call names its tool")
        args = fn.get("arguments", fn.get("args"))
        out.append((call.get("id"), ToolCall(name.strip(), input=_arguments(args))))
    return out


def chat_turns(messages: Any) -> list[ChatTurn]:
    """The turns of a conversation, in order; turns that say nothing are left out.

    A user message after an answer starts a new turn; consecutive user messages are one
    question. A tool message's output goes to the call it answers (``tool_call_id``), else to
    a call of its own (``name``). Bad input raises ``InvalidEventError`` before anything is
    queued."""
    if isinstance(messages, Mapping):
        messages = [messages]
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidEventError(f"messages must be a list of chat messages, got {type(messages).__name__}")
    if not messages:
        raise InvalidEventError("messages is empty: there is nothing to remember")
    turns: list[ChatTurn] = []
    turn = ChatTurn()
    calls: dict[str, ToolCall] = {}
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise InvalidEventError(f"messages[{i}] must be a dict with role and content, got {type(msg).__name__}")
        role = msg.get("role")
        if role not in ROLES:
            raise InvalidEventError(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        text = _text(i, msg.get("content"))
        if role == "system":
            continue
        if role == "user":
            if turn.answered():
                turns.append(turn)
                turn, calls = ChatTurn(), {}
            if text:
                turn.query.append(text)
        elif role == "assistant":
            if text:
                turn.response.append(text)
            for call_id, call in _tool_calls(i, msg.get("tool_calls") or []):
                turn.steps.append(call)
                if isinstance(call_id, str):
                    calls[call_id] = call
        else:  # a tool's answer
            answered = calls.get(str(msg.get("tool_call_id")))
            if answered is None:
                name = msg.get("name")
                answered = ToolCall(name.strip() if isinstance(name, str) and name.strip() else "tool")
                turn.steps.append(answered)
            answered.output = text
    turns.append(turn)
    return [t for t in turns if t.said()]
