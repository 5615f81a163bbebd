"""The BeeWeave MCP server (official ``mcp`` SDK): memory tools and a recent-memories resource.

Tools: ``save_memory``, ``search_memory``, ``get_memory``, ``list_memories``,
``update_memory``, ``delete_memory``, ``forget_user``, ``memory_feedback``,
``remember_turn`` (a turn for the ingestion pipeline), ``session_context`` and
``session_trace``. Resource template: ``beeweave://users/{user_id}/recent`` (the user's
newest memories as JSON). A call names its ``user_id``, or gets the server's default user
(``default_user_id``: ``beeweave mcp --user-id`` / ``BEEWEAVE_USER_ID``). Over HTTP, a key
scoped to users reaches only theirs and ``forget_user`` needs an admin key, as in the REST
API. Bad arguments (wrong types, unknown ids, another user's memory, empty text) come back
as MCP tool errors with the reason; the server goes on.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at
# registration, and they use this function's locals (``max_k``).
import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from .. import __version__
from ..defaults import DEFAULT_TOP_K
from ..errors import BeeWeaveError
from ..scopes import Scopes
from ..server.service import check_user_id
from .tools import KeyScope, MemoryTools, ScopeError, resolve_user

__all__ = ["build_server", "instructions", "INSTRUCTIONS", "SCOPE_KEY"]

SCOPE_KEY = "beeweave.key_scope"  # where the HTTP key check leaves the key's KeyScope in the ASGI scope

INSTRUCTIONS = (
    "BeeWeave is the user's long-term memory. Search it (search_memory) before answering questions about "
    "the user, their preferences or earlier work; save durable facts with save_memory; correct outdated "
    "ones with update_memory, and rate the memories you used with memory_feedback. Always pass the "
    "user's id as user_id."
)


def instructions(default_user_id: str | None) -> str:
    if default_user_id is None:
        return INSTRUCTIONS
    return INSTRUCTIONS.replace("Always pass the user's id as user_id.",
                                f"Leave user_id out to use the default user ({default_user_id!r}).")


UserId = Annotated[str | None, Field(min_length=1, max_length=512, description=(
    "Whose memory (every call is scoped to one user); left out: the server's default user."))]
MemoryId = Annotated[str, Field(min_length=1, description="A memory id, as returned by save_memory or search_memory.")]
SessionId = Annotated[str, Field(min_length=1, description="A conversation or session id.")]


def _key_scope(ctx: Any) -> KeyScope | None:
    """The API key's scope of an HTTP request (``None`` over stdio: the local user may do anything)."""
    try:
        request = ctx.request_context.request
    except (AttributeError, ValueError):  # outside a request (call_tool in process)
        return None
    scope = getattr(request, "scope", None)
    found = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, KeyScope) else None


def build_server(memory: Any, *, name: str = "beeweave", max_k: int = 50,
                 default_user_id: str | None = None) -> MCPServer:
    """An ``MCPServer`` over an open store; run it with ``.run("stdio")`` or serve its HTTP app.
    ``default_user_id`` is the user of calls that name none."""
    if default_user_id is not None:
        default_user_id = check_user_id(default_user_id)
    ops = MemoryTools(memory, max_k=max_k)
    server = MCPServer(name, version=__version__, instructions=instructions(default_user_id), log_level="WARNING")

    def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BeeWeaveError as exc:  # the caller's mistake or an unavailable store: say why
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    def who(ctx: Any, user_id: str | None, *, write: bool = False) -> str:
        return call(resolve_user, _key_scope(ctx), user_id, default_user_id, write=write)

    def readable(ctx: Any, user: str) -> list[str]:
        """The owners a search of ``user`` reads by default (with a key: within the key's scopes)."""
        key = _key_scope(ctx)
        return call(Scopes(getattr(memory, "scope_config", None)).owners, user,
                    None if key is None else call(key.search_scopes, None))

    @server.tool(description="Store one memory (a self-contained fact) for a user; returns its id.")
    def save_memory(content: Annotated[str, Field(description="The text to remember.")], ctx: Context,
                    user_id: UserId = None, tags: list[str] | None = None, session_id: str | None = None,
                    agent_id: str | None = None) -> dict[str, Any]:
        return call(ops.save, who(ctx, user_id, write=True), content, tags or (), session_id, agent_id)

    @server.tool(description="Hybrid (keyword + semantic) search of a user's memories, best first; each has its "
                 "relevance (0..1). With a relevance gate an empty answer means nothing relevant is stored "
                 "(abstain_below=0 lists the closest memories anyway).")
    def search_memory(query: Annotated[str, Field(min_length=1, description="What to look for.")], ctx: Context,
                      user_id: UserId = None, k: Annotated[int, Field(ge=1, le=max_k, description="How many memories.")] = DEFAULT_TOP_K,
                      tags: list[str] | None = None, session_id: str | None = None,
                      min_relevance: Annotated[float | None, Field(
                          ge=0.0, le=1.0, description="Leave out memories whose relevance (0..1) is below this; "
                          "an empty answer then means nothing relevant is stored.")] = None,
                      abstain_below: Annotated[float | None, Field(
                          ge=0.0, le=1.0, description="Return no memory at all unless one's relevance (0..1) "
                          "reaches this; otherwise every memory found, best first. Default: the store's own "
                          "'nothing relevant' gate, if it has one; 0 turns any gate off.")] = None,
                      scopes: Annotated[list[str] | None, Field(
                          description='Whose knowledge to read: "user" (the user\'s own), "tenant", shared scopes '
                          'such as "project:atlas/module:parser". Default: the user\'s, the tenant\'s and the '
                          "shared scopes the user may read.")] = None,
                      as_of: Annotated[str | None, Field(
                          description="Search the memory as it was at this time (ISO 8601, e.g. 2025-03-01): of a "
                          "fact the user changed (where they live...), the value true then. Default: now, "
                          "where a changed fact's old value comes marked superseded, after the new one.")] = None,
                      ) -> dict[str, Any]:
        key = _key_scope(ctx)
        read = scopes if key is None else call(key.search_scopes, scopes)
        return call(ops.search, who(ctx, user_id), query, k, tags, session_id, min_relevance, abstain_below, read,
                    as_of)

    @server.tool(description="One memory of the user by id.")
    def get_memory(memory_id: MemoryId, ctx: Context, user_id: UserId = None) -> dict[str, Any]:
        user = who(ctx, user_id)
        return call(ops.get, user, memory_id, readable(ctx, user))

    @server.tool(description="A user's memories, oldest first, a page at a time (active and pending ones unless "
                 "status names others); pass next_cursor for the next page (null: the last).")
    def list_memories(ctx: Context, user_id: UserId = None, tags: list[str] | None = None,
                      status: list[str] | None = None,
                      limit: Annotated[int, Field(ge=1, le=200, description="Memories per page.")] = 20,
                      cursor: str | None = None) -> dict[str, Any]:
        return call(ops.list_memories, who(ctx, user_id), tags, status, limit, cursor)

    @server.tool(description="Change a memory's text and/or tags (the text is re-indexed).")
    def update_memory(memory_id: MemoryId, ctx: Context, user_id: UserId = None, content: str | None = None,
                      tags: list[str] | None = None) -> dict[str, Any]:
        return call(ops.update, who(ctx, user_id, write=True), memory_id, content, tags)

    @server.tool(description="Delete one memory of the user.")
    def delete_memory(memory_id: MemoryId, ctx: Context, user_id: UserId = None) -> dict[str, Any]:
        return call(ops.delete, who(ctx, user_id, write=True), memory_id)

    @server.tool(description="Forget a user: delete every memory and everything else stored about them, for good "
                 "(the user asked to be forgotten). Needs confirm=true; over HTTP, an admin API key.")
    def forget_user(confirm: Annotated[bool, Field(description="true: yes, delete it all.")], ctx: Context,
                    user_id: UserId = None) -> dict[str, Any]:
        scope = _key_scope(ctx)
        user = who(ctx, user_id, write=True)
        if scope is not None and not scope.admin:
            raise ToolError(f"{ScopeError.__name__}: forgetting a user needs an admin API key")
        return call(ops.forget, user, confirm)

    @server.tool(description="Rate memories: 'used' (it was put to use), 'up' (good) or 'down' (wrong).")
    def memory_feedback(memory_ids: Annotated[list[str], Field(min_length=1)],
                        signal: Annotated[str, Field(pattern="^(used|up|down)$")], ctx: Context,
                        user_id: UserId = None) -> dict[str, Any]:
        user = who(ctx, user_id, write=True)
        return call(ops.feedback, user, memory_ids, signal, readable(ctx, user))

    @server.tool(description="Hand a conversation turn to BeeWeave's ingestion, which decides what to remember.")
    def remember_turn(query: str, ctx: Context, user_id: UserId = None, response: str = "",
                      session_id: str | None = None, agent_id: str | None = None) -> dict[str, Any]:
        return call(ops.remember_turn, who(ctx, user_id, write=True), query, response, session_id, agent_id)

    @server.tool(description="The latest memories of a session, oldest first (to resume a conversation).")
    def session_context(session_id: SessionId, ctx: Context, user_id: UserId = None,
                        window: Annotated[int, Field(ge=0, le=200)] = 10) -> dict[str, Any]:
        return call(ops.context, who(ctx, user_id), session_id, window)

    @server.tool(description="Every memory of a session, oldest first.")
    def session_trace(session_id: SessionId, ctx: Context, user_id: UserId = None) -> dict[str, Any]:
        return call(ops.trace, who(ctx, user_id), session_id)

    @server.resource("beeweave://users/{user_id}/recent", name="recent_memories", mime_type="application/json",
                     description="A user's newest memories, newest first.")
    def recent_memories(user_id: str, ctx: Context) -> str:
        try:
            user = resolve_user(_key_scope(ctx), user_id, default_user_id)
            return json.dumps(ops.recent(user), ensure_ascii=False)
        except BeeWeaveError as exc:
            raise ResourceError(f"{type(exc).__name__}: {exc}") from exc

    return server
