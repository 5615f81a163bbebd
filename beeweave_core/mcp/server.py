"""The BeeWeave MCP server (official ``mcp`` SDK): memory tools and a recent-memories resource.

Tools: ``save_memory``, ``search_memory``, ``get_memory``, ``update_memory``,
``delete_memory``, ``memory_feedback``, ``remember_turn`` (a turn for the ingestion
pipeline), ``session_context`` and ``session_trace``. Resource template:
``beeweave://users/{user_id}/recent`` (the user's newest memories as JSON). Every call
names its ``user_id``. Bad arguments (wrong types, unknown ids, another user's memory,
empty text) come back as MCP tool errors with the reason; the server goes on.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at
# registration, and they use this function's locals (``max_k``).
import json
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from ..errors import BeeWeaveError
from .tools import MemoryTools

__all__ = ["build_server", "INSTRUCTIONS"]

INSTRUCTIONS = (
    "BeeWeave is the user's long-term memory. Search it (search_memory) before answering questions about "
    "the user, their preferences or earlier work; save durable facts with save_memory; correct outdated "
    "ones with update_memory, and rate the memories you used with memory_feedback. Always pass the "
    "user's id as user_id."
)

UserId = Annotated[str, Field(min_length=1, max_length=512, description="Whose memory (every call is scoped to one user).")]
MemoryId = Annotated[str, Field(min_length=1, description="A memory id, as returned by save_memory or search_memory.")]
SessionId = Annotated[str, Field(min_length=1, description="A conversation or session id.")]


def build_server(memory: Any, *, name: str = "beeweave", max_k: int = 50) -> MCPServer:
    """An ``MCPServer`` over an open store; run it with ``.run("stdio")`` or serve its HTTP app."""
    ops = MemoryTools(memory, max_k=max_k)
    server = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")

    def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BeeWeaveError as exc:  # the caller's mistake or an unavailable store: say why
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    @server.tool(description="Store one memory (a self-contained fact) for a user; returns its id.")
    def save_memory(user_id: UserId, content: Annotated[str, Field(description="The text to remember.")],
                    tags: list[str] | None = None, session_id: str | None = None,
                    agent_id: str | None = None) -> dict[str, Any]:
        return call(ops.save, user_id, content, tags or (), session_id, agent_id)

    @server.tool(description="Hybrid (keyword + semantic) search of a user's memories, best first; each has its "
                 "relevance (0..1). With a relevance gate an empty answer means nothing relevant is stored "
                 "(abstain_below=0 lists the closest memories anyway).")
    def search_memory(user_id: UserId, query: Annotated[str, Field(min_length=1, description="What to look for.")],
                      k: Annotated[int, Field(ge=1, le=max_k, description="How many memories.")] = 5,
                      tags: list[str] | None = None, session_id: str | None = None,
                      min_relevance: Annotated[float | None, Field(
                          ge=0.0, le=1.0, description="Leave out memories whose relevance (0..1) is below this; "
                          "an empty answer then means nothing relevant is stored.")] = None,
                      abstain_below: Annotated[float | None, Field(
                          ge=0.0, le=1.0, description="Return no memory at all unless one's relevance (0..1) "
                          "reaches this; otherwise every memory found, best first. Default: the store's own "
                          "'nothing relevant' gate, if it has one; 0 turns any gate off.")] = None) -> dict[str, Any]:
        return call(ops.search, user_id, query, k, tags, session_id, min_relevance, abstain_below)

    @server.tool(description="One memory of the user by id.")
    def get_memory(user_id: UserId, memory_id: MemoryId) -> dict[str, Any]:
        return call(ops.get, user_id, memory_id)

    @server.tool(description="Change a memory's text and/or tags (the text is re-indexed).")
    def update_memory(user_id: UserId, memory_id: MemoryId, content: str | None = None,
                      tags: list[str] | None = None) -> dict[str, Any]:
        return call(ops.update, user_id, memory_id, content, tags)

    @server.tool(description="Delete one memory of the user.")
    def delete_memory(user_id: UserId, memory_id: MemoryId) -> dict[str, Any]:
        return call(ops.delete, user_id, memory_id)

    @server.tool(description="Rate memories: 'used' (it was put to use), 'up' (good) or 'down' (wrong).")
    def memory_feedback(user_id: UserId, memory_ids: Annotated[list[str], Field(min_length=1)],
                        signal: Annotated[str, Field(pattern="^(used|up|down)$")]) -> dict[str, Any]:
        return call(ops.feedback, user_id, memory_ids, signal)

    @server.tool(description="Hand a conversation turn to BeeWeave's ingestion, which decides what to remember.")
    def remember_turn(user_id: UserId, query: str, response: str = "", session_id: str | None = None,
                      agent_id: str | None = None) -> dict[str, Any]:
        return call(ops.remember_turn, user_id, query, response, session_id, agent_id)

    @server.tool(description="The latest memories of a session, oldest first (to resume a conversation).")
    def session_context(user_id: UserId, session_id: SessionId,
                        window: Annotated[int, Field(ge=0, le=200)] = 10) -> dict[str, Any]:
        return call(ops.context, user_id, session_id, window)

    @server.tool(description="Every memory of a session, oldest first.")
    def session_trace(user_id: UserId, session_id: SessionId) -> dict[str, Any]:
        return call(ops.trace, user_id, session_id)

    @server.resource("beeweave://users/{user_id}/recent", name="recent_memories", mime_type="application/json",
                     description="A user's newest memories, newest first.")
    def recent_memories(user_id: str) -> str:
        try:
            return json.dumps(ops.recent(user_id), ensure_ascii=False)
        except BeeWeaveError as exc:
            raise ResourceError(f"{type(exc).__name__}: {exc}") from exc

    return server
