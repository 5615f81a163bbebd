"""The design documents' names for BeeWeave's calls, so code written against the designs runs.

Design 004 calls its memory ``query_memories(query, filters={"time_range": ...})``,
``save_memory(...)`` and ``get_conversation_context(window_size=...)``; the engine has the same
calls as :meth:`BeeWeave.search`, :meth:`BeeWeave.add` and :meth:`BeeWeave.get_conversation_context`.
:class:`DesignMemory` only renames and converts arguments and results: every rule stays in the
engine, and it works the same over a local :class:`~beeweave_core.BeeWeave` and over a
:class:`~beeweave_core.BeeWeaveClient` (both have the engine's methods).

==============================================  ==================================================
design 004                                      BeeWeave
==============================================  ==================================================
``query_memories(q, filters, top_k)``            ``search(q, user_id=, k=top_k, filters=)``
``filters={"time_range": (start, end)}``         ``filters={"since": start, "until": end}``
``filters={"time_range": "last week"}``          ``filters={"since": "last week", "until": "last week"}``
``save_memory(content, metadata, tags, ...)``    ``add(content, user_id=, session_id=, ...)``
``get_conversation_context(window_size=10)``     ``get_conversation_context(session_id, window=10, user_id=)``
==============================================  ==================================================

Design 000's client code (§3.2 ingest, §3.3 semantic search) talks HTTP and needs nothing here:
``POST /api/v1/ingest`` takes its ``agent_response`` and LangChain ``[action, observation]``
steps, and ``POST /api/v1/search/semantic`` answers its ``{results: [{query, agent_response,
score, ...}]}`` (docs/rest.md). Give it an API key: our clients raise ``AuthenticationError`` on
a 401/403, never an empty result.

Usage:
    .. code-block:: python

        from beeweave_core import BeeWeave
        from beeweave_core.compat import DesignMemory

        memory = DesignMemory(BeeWeave("memory.db"), user_id="alice", session_id="s1")
        memory.save_memory("Staging listens on port 5433.", metadata={"source": "runbook"}, tags=["ops"])
        memory.query_memories("staging port", filters={"time_range": "last 7 days"})
        memory.get_conversation_context(window_size=10)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .defaults import DEFAULT_TOP_K
from .errors import InvalidInputError

__all__ = ["DesignMemory", "time_range_filters"]

_BOUNDS = (("start", "end"), ("since", "until"), ("from", "to"))


def _bound(value: Any) -> Any:
    # JSON-safe for the HTTP client; the engine reads ISO strings as it reads datetimes.
    return value.isoformat() if isinstance(value, datetime) else value


def time_range_filters(time_range: Any) -> dict[str, Any]:
    """Design 004's ``time_range`` as the engine's ``since``/``until`` (either may be open).

    A time phrase (``"last week"``, ``"上周"``) bounds both ends with its range; a pair
    ``(start, end)`` or a mapping with start/end (or since/until, from/to) gives them; each bound
    is what the engine's filters take: a datetime, an ISO string, epoch seconds or a phrase.
    """
    if isinstance(time_range, str):
        return {"since": time_range, "until": time_range}
    if isinstance(time_range, Mapping):
        keys = next((pair for pair in _BOUNDS if set(time_range) & set(pair)), None)
        if keys is None or set(time_range) - set(keys):
            raise InvalidInputError(f"time_range keys are start/end (or since/until, from/to), got {sorted(time_range)}")
        start, end = time_range.get(keys[0]), time_range.get(keys[1])
    elif isinstance(time_range, Sequence) and len(time_range) == 2:
        start, end = time_range
    else:
        raise InvalidInputError("time_range is a time phrase, a (start, end) pair or {'start': ..., 'end': ...}, "
                                f"got {time_range!r}")
    return {k: _bound(v) for k, v in (("since", start), ("until", end)) if v is not None}


class DesignMemory:
    """Design 004's memory calls for one user (and a current session) over a BeeWeave or a client.

    Args:
        memory: a ``BeeWeave``, ``BeeWeaveClient`` or anything with the engine's ``search``,
            ``add`` and ``get_conversation_context``.
        user_id: whose memories are read and written (the design's calls name no user).
        session_id: the conversation of ``get_conversation_context`` and of saved memories.
        agent_id: recorded on saved memories.
    """

    def __init__(self, memory: Any, *, user_id: str, session_id: str | None = None,
                 agent_id: str | None = None) -> None:
        self.memory = memory
        self.user_id = user_id
        self.session_id = session_id
        self.agent_id = agent_id

    def query_memories(self, query: str, filters: Mapping[str, Any] | None = None, top_k: int = DEFAULT_TOP_K,
                       **search_options: Any) -> list[dict[str, Any]]:
        """``search`` with ``filters["time_range"]`` read as since/until; each hit as a dict:
        ``id, content, score, relevance, tags, metadata, timestamp, session_id`` (the design reads
        results as dicts). Other filters and ``search_options`` are the engine's, unchanged."""
        engine_filters = dict(filters or {})
        if "time_range" in engine_filters:
            engine_filters.update(time_range_filters(engine_filters.pop("time_range")))
        hits = self.memory.search(query, user_id=self.user_id, k=top_k, filters=engine_filters or None,
                                  **search_options)
        return [{"id": h.chunk.id, "content": h.chunk.raw_content, "score": h.score, "relevance": h.relevance,
                 "tags": list(h.chunk.tags), "metadata": dict(h.chunk.metadata),
                 "timestamp": h.chunk.timestamp, "session_id": h.chunk.session_id} for h in hits]

    def save_memory(self, content: str, metadata: Mapping[str, Any] | None = None, *,
                    tags: Sequence[str] = (), **fields: Any) -> str:
        """``add`` for this user, session and agent; returns the memory's id. ``fields`` are the
        engine's (``timestamp``, ``pinned``, ``expires_at``, ``confidence``...)."""
        return str(self.memory.add(content, user_id=self.user_id, session_id=fields.pop("session_id", self.session_id),
                                   agent_id=fields.pop("agent_id", self.agent_id), tags=list(tags),
                                   metadata=dict(metadata) if metadata else None, **fields))

    def get_conversation_context(self, window_size: int = 10, session_id: str | None = None) -> Any:
        """The session's ``ConversationContext``: the summary of older turns and the latest
        ``window_size`` turns (``session_id`` defaults to this object's)."""
        session = session_id or self.session_id
        if not session:
            raise InvalidInputError("get_conversation_context needs a session: DesignMemory(..., session_id=...) "
                                    "or get_conversation_context(session_id=...)")
        return self.memory.get_conversation_context(session, window=window_size, user_id=self.user_id)
