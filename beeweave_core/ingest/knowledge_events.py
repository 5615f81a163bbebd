"""What an agent run hands to the ingestion pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..records import new_id, to_datetime
from .errors import InvalidEventError

__all__ = ["ToolCall", "KnowledgeEvent", "DeadLetter"]


@dataclass
class ToolCall:
    """One tool call of an agent run: the tool, what it was given and what it returned."""

    tool: str
    input: Any = None
    output: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "input": self.input, "output": self.output, "error": self.error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(data["tool"], data.get("input"), data.get("output"), data.get("error"))


@dataclass
class KnowledgeEvent:
    """One agent run (or one conversational turn) to be turned into memories.

    ``feedback`` is the user's rating of the run when it is known at ingest time
    (> 0 positive, < 0 negative); admission rules may require it to be positive.

    The caller may also say what the memories are: ``tags`` (kept first, before the tags
    extraction finds), ``expires_at`` (or ``ttl`` seconds from the event's timestamp, turned
    into ``expires_at`` when the event is checked), ``pinned``, ``confidence`` (0..1),
    ``importance`` (the memories' starting weight, > 0) and ``category`` (kept in the
    memories' metadata, like any other metadata, for filtering).

    ``timestamp`` left out (None) is stamped when the event is ingested, by the store's
    ``clock=``, as a dict event without one is: a store run on a test's or a replay's clock
    must not mix in wall-clock times.
    """

    user_id: str
    query: str = ""
    response: str = ""
    session_id: str | None = None
    agent_id: str | None = None
    intermediate_steps: list[ToolCall] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime | None = None
    id: str = field(default_factory=new_id)
    feedback: float | None = None
    tags: list[str] = field(default_factory=list)
    expires_at: datetime | None = None
    pinned: bool | None = None
    confidence: float | None = None
    importance: float | None = None
    category: str | None = None

    def __post_init__(self) -> None:
        if self.timestamp is not None:
            self.timestamp = to_datetime(self.timestamp)
        if self.expires_at is not None:
            self.expires_at = to_datetime(self.expires_at, "expires_at")
        self.tags = list(self.tags or ())
        self.intermediate_steps = [s if isinstance(s, ToolCall) else ToolCall.from_dict(s)
                                   for s in self.intermediate_steps]

    @property
    def at(self) -> datetime:
        """The event's time. Every event the pipeline reads back has one: ``ingest`` stamps it."""
        if self.timestamp is None:
            raise InvalidEventError(f"event {self.id!r} has no timestamp: it did not go through ingest()")
        return self.timestamp

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "user_id": self.user_id, "query": self.query, "response": self.response,
                "session_id": self.session_id, "agent_id": self.agent_id,
                "intermediate_steps": [s.to_dict() for s in self.intermediate_steps],
                "metadata": self.metadata, "timestamp": None if self.timestamp is None else self.timestamp.isoformat(), "feedback": self.feedback,
                "tags": list(self.tags), "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
                "pinned": self.pinned, "confidence": self.confidence, "importance": self.importance,
                "category": self.category}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnowledgeEvent:
        return cls(**data)


@dataclass(frozen=True)
class DeadLetter:
    """An event whose processing failed: kept with its error until retried or discarded.

    The event is the redacted one when redaction ran before the failure.
    """

    event: KnowledgeEvent
    error: str
    attempts: int
    failed_at: datetime
