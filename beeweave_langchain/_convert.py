"""Type translation between LangChain values and BeeWeave records.

Nothing here decides what to remember or how to rank: these functions only turn
LangChain's messages, documents and agent steps into plain text and JSON values
(and search hits into Documents), so that the engine sees one shape whatever
the chain or agent produced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from beeweave_core.ingest.knowledge_events import ToolCall

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from beeweave_core import SearchHit

__all__ = ["text_of", "jsonable", "last_message_text", "hit_to_document", "tool_calls_from_steps"]

# Keys under which chains commonly put the user's question and the final answer.
INPUT_KEYS = ("input", "question", "query", "user_input", "human_input", "prompt")
OUTPUT_KEYS = ("output", "answer", "result", "response", "text", "content", "generation")
_ROLES = {"human": "human", "user": "human", "ai": "ai", "assistant": "ai"}


def _content_text(content: Any) -> str:
    """Text of a message content: a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)


def _role_of(message: Any) -> str | None:
    kind = getattr(message, "type", None)
    if isinstance(message, Mapping):
        kind = message.get("role", message.get("type"))
    elif isinstance(message, tuple) and len(message) == 2:
        kind = message[0]
    return _ROLES.get(kind, kind) if isinstance(kind, str) else None


def _message_text(message: Any) -> str:
    if isinstance(message, Mapping):
        return _content_text(message.get("content"))
    if isinstance(message, tuple) and len(message) == 2:
        return _content_text(message[1])
    if isinstance(message, str):
        return message
    return _content_text(getattr(message, "content", message))


def _is_message(value: Any) -> bool:
    return (hasattr(value, "content") and hasattr(value, "type")) or (
        isinstance(value, Mapping) and "content" in value and ("role" in value or "type" in value))


def last_message_text(messages: Any, role: str) -> str:
    """The text of the last message with ``role`` ("human" or "ai") that has any text."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return ""
    for message in reversed(messages):
        if isinstance(message, str):
            if role == "human":
                return message
            continue
        if _role_of(message) == role:
            text = _message_text(message)
            if text.strip():
                return text
    return ""


def text_of(value: Any, *, role: str = "human", keys: Sequence[str] = INPUT_KEYS) -> str:
    """Plain text of a chain's input or output.

    Strings are kept; messages give their text; a list of messages gives the last
    one of ``role``; a dict gives its "messages", else the first of ``keys``, else its
    only value; documents give their page content; prompt values their string.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if _is_message(value):
        return _message_text(value)
    if isinstance(value, Mapping):
        if "messages" in value:
            return last_message_text(value["messages"], role)
        for key in keys:
            if key in value:
                return text_of(value[key], role=role, keys=keys)
        if len(value) == 1:
            return text_of(next(iter(value.values())), role=role, keys=keys)
        return str(jsonable(value))
    if hasattr(value, "page_content"):
        return str(value.page_content)
    if hasattr(value, "to_messages"):  # a PromptValue
        return last_message_text(value.to_messages(), role)
    if isinstance(value, Sequence) and value and all(_is_message(m) or isinstance(m, tuple) for m in value):
        return last_message_text(value, role)
    return str(jsonable(value))


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A JSON-friendly copy of a tool input or output (messages become their text)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if _depth > 20:
        return str(value)
    if _is_message(value) and not isinstance(value, Mapping):
        return _message_text(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, _depth + 1) for v in value]
    if hasattr(value, "page_content"):
        return str(value.page_content)
    if hasattr(value, "model_dump"):  # pydantic models, e.g. a structured response
        return jsonable(value.model_dump(), _depth + 1)
    return str(value)


def tool_calls_from_steps(steps: Any) -> list[ToolCall]:
    """``ToolCall`` records from an AgentExecutor's ``intermediate_steps`` ((action, observation) pairs)."""
    calls = []
    for step in steps or ():
        if isinstance(step, Sequence) and len(step) == 2:
            action, observation = step
            calls.append(ToolCall(str(getattr(action, "tool", "tool")), jsonable(getattr(action, "tool_input", None)),
                                  jsonable(observation)))
    return calls


def hit_to_document(hit: SearchHit) -> Document:
    """A LangChain ``Document`` for a search hit; its metadata is plain JSON.

    ``metadata["score"]`` is the hit's calibrated relevance (``SearchHit.relevance``: in [0, 1],
    comparable across searches and stores; None when the search could not read one) and
    ``metadata["rank_score"]`` the fused score that ranked it (meaningful within one search only).
    """
    from langchain_core.documents import Document

    c = hit.chunk
    metadata = {
        "id": c.id,
        "score": None if hit.relevance is None else float(hit.relevance),
        "rank_score": float(hit.score),
        "sources": {name: src.to_dict() for name, src in hit.sources.items()},
        "relationships": [r.to_dict() for r in c.relationships],
        "user_id": c.user_id,
        "session_id": c.session_id,
        "agent_id": c.agent_id,
        "tags": list(c.tags),
        "entities": list(c.entities),
        "timestamp": c.timestamp.isoformat(),
        "summary": c.summary,
        "intent": c.intent.value if c.intent is not None else None,
        "weight": c.weight,
        "loosened": hit.loosened,
        # A fact's validity: ``superseded`` when a newer statement replaced it (ranked after that one).
        "superseded": hit.superseded,
        "valid_from": c.valid_from.isoformat() if c.valid_from is not None else None,
        "invalid_at": c.invalid_at.isoformat() if c.invalid_at is not None else None,
        "metadata": jsonable(c.metadata),
    }
    return Document(id=c.id, page_content=c.raw_content or c.content, metadata=metadata)
