"""The memory operations the MCP server offers, as plain functions over one store.

Each function checks its arguments, calls ``BeeWeave``'s public methods and returns
JSON-friendly dicts; nothing here knows about MCP. Every operation is scoped by a
user id: another user's memory is as absent as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..defaults import DEFAULT_TOP_K
from ..errors import BeeWeaveError, InvalidInputError, NotFoundError
from ..filters import build_filter
from ..ingest.knowledge_events import KnowledgeEvent
from ..lifecycle import FeedbackSignal
from ..records import ALL_STATUSES, KnowledgeChunk, SearchHit
from ..server.config import KeyScope
from ..server.service import check_user_id
from ..validation import MAX_TAG_CHARS, MAX_TAGS, check_str_list

__all__ = ["MemoryTools", "memory_dict", "KeyScope", "ScopeError", "resolve_user"]

RECENT = 20  # memories in a user's "recent" resource
LIVE = ("active", "pending")  # what list_memories shows unless asked for other statuses


class ScopeError(BeeWeaveError, PermissionError):
    """The API key may not do this (write another user's memories, forget without admin)."""


def resolve_user(scope: KeyScope | None, user_id: str | None, default_user: str | None, *,
                 write: bool = False) -> str:
    """The user a call is about: the one named; else a one-user key's user; else the server's
    default user. A key scoped to users reaches only theirs: another user's data is absent
    (reads) or refused (writes), as in the REST API."""
    if user_id is None:
        if scope is not None and scope.users is not None and len(scope.users) == 1:
            user_id = next(iter(scope.users))
        elif default_user is not None:
            user_id = default_user
        elif scope is not None and scope.users is not None:
            raise InvalidInputError("this API key covers several users: pass user_id")
        else:
            raise InvalidInputError("pass user_id (this server has no default user: start it with "
                                    "beeweave mcp --user-id USER or BEEWEAVE_USER_ID=USER)")
    user = check_user_id(user_id)
    if scope is not None and scope.users is not None and user not in scope.users:
        if write and scope.shared.writes(user):  # a shared scope the key may write
            return user
        if write:
            raise ScopeError(f"this API key may not write memories of user {user!r}")
        raise NotFoundError(f"no data of user {user!r}")
    return user


def _tags(tags: Any) -> list[str]:
    """Tags from a client: a list of non-empty strings, as many and as long as the REST API takes."""
    return check_str_list("tags", tags, max_items=MAX_TAGS, max_chars=MAX_TAG_CHARS)


def memory_dict(chunk: KnowledgeChunk, score: float | None = None) -> dict[str, Any]:
    """What a client sees of a memory."""
    out: dict[str, Any] = {
        "id": chunk.id, "content": chunk.raw_content, "user_id": chunk.user_id, "session_id": chunk.session_id,
        "agent_id": chunk.agent_id, "tags": list(chunk.tags), "timestamp": chunk.timestamp.isoformat(),
        "weight": round(float(chunk.weight), 4), "status": chunk.status.value,
    }
    if score is not None:
        out["score"] = round(float(score), 4)
    return out


def _hit(h: SearchHit) -> dict[str, Any]:
    """A search result: the memory, its calibrated ``relevance`` (in [0, 1], comparable across
    searches; absent when the search read none), ``score`` (the same relevance: the score every
    face exposes) and ``rank_score`` (the fused score that ranked it, meaningful within this
    search only)."""
    out = memory_dict(h.chunk, h.relevance)
    if h.relevance is not None:
        out["relevance"] = round(float(h.relevance), 4)
    out["rank_score"] = round(float(h.score), 4)
    if h.superseded and h.chunk.invalid_at is not None:  # a fact the user changed: the newer one ranks first
        out["superseded"] = True
        out["invalid_at"] = h.chunk.invalid_at.isoformat()
    return out


class MemoryTools:
    """The operations, bound to one open store (``BeeWeave``)."""

    def __init__(self, memory: Any, *, max_k: int = 50) -> None:
        self.memory = memory
        self.max_k = max_k

    def _own(self, user_id: str, memory_id: str, readable: Sequence[str] = ()) -> KnowledgeChunk:
        """The user's memory (or, for a read, one of the ``readable`` owners': shared
        knowledge the user's searches read); another is as absent as a missing one."""
        check_user_id(user_id)
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInputError("memory_id must be a non-empty string")
        found = self.memory.get_many([memory_id])
        if not found or (found[0].user_id != user_id and found[0].user_id not in readable):
            raise NotFoundError(f"user {user_id!r} has no memory with id {memory_id!r}")
        return found[0]

    def save(self, user_id: str, content: str, tags: Sequence[str] = (), session_id: str | None = None,
             agent_id: str | None = None) -> dict[str, Any]:
        check_user_id(user_id)
        mid = self.memory.add(content, user_id=user_id, tags=_tags(tags), session_id=session_id, agent_id=agent_id)
        return {"id": mid}

    def search(self, user_id: str, query: str, k: int = DEFAULT_TOP_K, tags: Sequence[str] | None = None,
               session_id: str | None = None, min_relevance: float | None = None,
               abstain_below: float | None = None, scopes: Sequence[str] | None = None,
               as_of: str | None = None) -> dict[str, Any]:
        """The user's memories for ``query``, with the shared knowledge ``scopes`` names (None:
        the engine's default, the user's, the tenant's and the granted scopes), as they were
        at ``as_of`` (ISO 8601; None: now);
        ``abstain_below=None`` applies the store's default "nothing relevant" gate
        (``SearchConfig.abstain_below``), ``abstain_below=0`` turns any gate off. The
        thresholds, scopes and ``as_of`` are the engine's to check (its ``SearchRequest``),
        before anything is searched; ``k``'s cap is this server's."""
        check_user_id(user_id)
        if not isinstance(k, int) or not 1 <= k <= self.max_k:
            raise InvalidInputError(f"k must be an integer from 1 to {self.max_k}")
        filters: dict[str, Any] = {}
        if tags is not None and _tags(tags):
            filters["tags_any"] = list(tags)
        if session_id:
            filters["session_id"] = session_id
        hits = self.memory.search(query, user_id=user_id, k=k, filters=filters or None, min_relevance=min_relevance,
                                  abstain_below=abstain_below, scopes=scopes,
                                  **({"as_of": as_of} if as_of is not None else {}))
        return {"memories": [_hit(h) for h in hits]}

    def get(self, user_id: str, memory_id: str, readable: Sequence[str] = ()) -> dict[str, Any]:
        return memory_dict(self._own(user_id, memory_id, readable))

    def update(self, user_id: str, memory_id: str, content: str | None = None,
               tags: Sequence[str] | None = None) -> dict[str, Any]:
        self._own(user_id, memory_id)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = content
        if tags is not None:
            changes["tags"] = _tags(tags)
        if not changes:
            raise InvalidInputError("nothing to update: give content or tags")
        return memory_dict(self.memory.update(memory_id, **changes))

    def delete(self, user_id: str, memory_id: str) -> dict[str, Any]:
        self._own(user_id, memory_id)
        return {"id": memory_id, "deleted": bool(self.memory.delete(memory_id))}

    def feedback(self, user_id: str, memory_ids: Sequence[str], signal: str,
                 readable: Sequence[str] = ()) -> dict[str, Any]:
        """Rate the user's memories, or shared ones of the ``readable`` owners (what a search returned)."""
        if isinstance(memory_ids, str) or not memory_ids:
            raise InvalidInputError("memory_ids is a non-empty list of ids")
        try:
            FeedbackSignal(signal)
        except ValueError:
            raise InvalidInputError(f"signal must be one of {', '.join(s.value for s in FeedbackSignal)}") from None
        for mid in memory_ids:  # every id is checked before any is rated
            self._own(user_id, mid, readable)
        return {"rated": [c.id for c in self.memory.feedback(list(memory_ids), signal)]}

    def remember_turn(self, user_id: str, query: str, response: str = "", session_id: str | None = None,
                      agent_id: str | None = None) -> dict[str, Any]:
        """A conversation turn for the ingestion pipeline (it decides what becomes a memory)."""
        check_user_id(user_id)
        if not isinstance(query, str) or not isinstance(response, str) or not (query.strip() or response.strip()):
            raise InvalidInputError("a turn needs a query or a response")
        event = KnowledgeEvent(user_id=user_id, query=query, response=response, session_id=session_id,
                               agent_id=agent_id, metadata={"source": "mcp"})
        return {"event_id": self.memory.ingest(event)}

    def context(self, user_id: str, session_id: str, window: int = 10) -> dict[str, Any]:
        check_user_id(user_id)
        return {"memories": [memory_dict(c) for c in self.memory.context(session_id, user_id=user_id, window=window)]}

    def trace(self, user_id: str, session_id: str) -> dict[str, Any]:
        check_user_id(user_id)
        return {"memories": [memory_dict(c) for c in self.memory.trace(session_id, user_id=user_id)]}

    def list_memories(self, user_id: str, tags: Sequence[str] | None = None, status: Sequence[str] | None = None,
             limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        """The user's memories oldest first, ``limit`` at a time (active and pending unless
        ``status`` names others); ``next_cursor`` continues (``None``: the last page)."""
        check_user_id(user_id)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 200:
            raise InvalidInputError("limit must be an integer from 1 to 200")
        wanted = list(status) if status else list(LIVE)
        unknown = sorted(set(wanted) - set(ALL_STATUSES))
        if unknown:
            raise InvalidInputError(f"unknown status {unknown}; known: {', '.join(ALL_STATUSES)}")
        filters: dict[str, Any] = {"status": wanted}
        if tags is not None and _tags(tags):
            filters["tags_any"] = list(tags)
        page = self.memory.get_all(user_id=user_id, filters=filters, limit=limit, cursor=cursor)
        return {"memories": [memory_dict(c) for c in page.items], "next_cursor": page.next_cursor}

    def forget(self, user_id: str, confirm: bool = False, flush_timeout: float = 30.0) -> dict[str, Any]:
        """Delete everything of the user (``beeweave forget``): queued events are processed
        first, so none of them brings the user back. Needs ``confirm=True``."""
        check_user_id(user_id)
        if confirm is not True:
            raise InvalidInputError("forget_user deletes every memory of the user for good: pass confirm=true")
        m = self.memory
        m.drain(user_id, timeout=flush_timeout)
        return {"user_id": user_id, "deleted": int(m.forget_user(user_id))}

    def recent(self, user_id: str, limit: int = RECENT) -> list[dict[str, Any]]:
        """The user's newest active memories, newest first."""
        check_user_id(user_id)
        flt = build_filter(None, user_id=user_id)
        return [memory_dict(c) for c in self.memory.backend.scan(flt, order="timestamp", descending=True,
                                                                  limit=limit)]
