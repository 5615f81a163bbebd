"""``MemoryAPI``: what a face (LangChain, LlamaIndex, MCP) may call on a memory.

Both the in-process :class:`beeweave_core.BeeWeave` and the HTTP
:class:`beeweave_core.client.BeeWeaveClient` satisfy it (tests/test_memory_api.py checks
it with mypy's view and at run time), so every adapter works with either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .defaults import DEFAULT_TOP_K
from .lifecycle.provenance import Lineage
from .lifecycle.reports import MaintenanceReport, ReviewItem
from .lifecycle.sessions import ConversationContext
from .records import KnowledgeChunk, SearchHit

__all__ = ["MemoryAPI"]


@runtime_checkable
class MemoryAPI(Protocol):
    """The memory operations an agent framework needs, local or remote."""

    def ingest(self, event: Any) -> str: ...

    def flush(self, timeout: float | None = None) -> bool: ...

    def add_turn(self, session_id: str, role: str, content: str, *, user_id: str) -> ConversationContext: ...

    def get_conversation_context(self, session_id: str, window: int = 10, *,
                                 user_id: str) -> ConversationContext: ...

    def search(self, query: str, *, user_id: str | None = None, k: int = DEFAULT_TOP_K, filters: Mapping[str, Any] | None = None,
               fusion: Any = None, min_score: float | None = None, query_embedding: Sequence[float] | None = None,
               expand: Any = None, rerank: Any = None, mmr: float | None = None,
               loosen: bool = False, min_relevance: float | None = None,
               abstain_below: float | None = None, scopes: Sequence[str] | str | None = None,
               as_of: datetime | str | None = None) -> list[SearchHit]: ...

    def feedback(self, chunk_ids: str | Iterable[str], signal: Any) -> list[KnowledgeChunk]: ...

    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]: ...

    def review(self, *, user_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
               reasons: str | Sequence[str] | None = None) -> list[ReviewItem]: ...

    def decide(self, ids: str | Iterable[str], decision: Any, *, reason: str | None = None) -> list[str]: ...

    def maintain(self, *, user_id: str | None = None) -> MaintenanceReport: ...

    def lineage(self, chunk_id: str) -> Lineage: ...

    def close(self) -> None: ...
