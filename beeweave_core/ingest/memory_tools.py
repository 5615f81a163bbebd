"""The memory's own tools: their calls are never captured as new memories.

An agent that saves, searches or recalls memories through tools would otherwise learn
from those calls: a ``save_memory`` call would be stored a second time as
``save_memory: {"content": …}`` (ranking above the clean memory), and a recall tool would
re-store what it recalled on every run. The rule, applied by the ingestion pipeline to
every event whatever face sent it (the LangChain middleware and callback handler, REST,
MCP, the CLI):

- a call of a memory tool never becomes a memory of its own;
- a run whose tool calls were all memory tools (it saved, or searched and answered from
  what it found) is not captured as a turn either, nor counted as a recurring question:
  its question and answer would only repeat what the tools saved or found.

Memory tools are :data:`MEMORY_TOOLS` (``IngestConfig.memory_tools``) and the names an
event lists in ``metadata["memory_tools"]`` (a face's ``memory_tools=`` argument, or a
tool it saw searching BeeWeave); a client's prefix (``mcp__beeweave__save_memory``) is
seen through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError
from .knowledge_events import ToolCall

__all__ = ["MEMORY_TOOLS", "METADATA_KEY", "tool_names", "memory_tool_names", "event_memory_tools",
           "is_memory_tool", "memory_only"]

#: The tool names of BeeWeave's own faces and of common memory toolkits.
MEMORY_TOOLS: frozenset[str] = frozenset({
    # beeweave_langchain.BeeWeaveMiddleware(tools=True)
    "search_memory", "save_memory", "update_memory", "forget_memory",
    # the MCP server (beeweave_core.mcp.server)
    "get_memory", "list_memories", "delete_memory", "forget_user", "memory_feedback", "remember_turn",
    "session_context", "session_trace",
    # LangMem's create_manage_memory_tool / create_search_memory_tool (default names)
    "manage_memory",
})

#: The event metadata key under which a face names more memory tools (not kept on the memories).
METADATA_KEY = "memory_tools"

_SEPARATORS = ("__", ".", "/", ":")  # MCP clients prefix a server's tools: "mcp__beeweave__save_memory"


def tool_names(names: Iterable[str] | str) -> frozenset[str]:
    """``names`` (one tool name or several) as a set; refuses anything but non-empty strings."""
    listed = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(n, str) and n.strip() for n in listed):
        raise InvalidInputError(f"memory_tools must be tool names (non-empty strings), got {names!r}")
    return frozenset(n.strip() for n in listed)


def memory_tool_names(extra: Iterable[str] | str | None = None) -> frozenset[str]:
    """The default memory tools and the caller's ``extra`` names (one name or several)."""
    return MEMORY_TOOLS if extra is None else MEMORY_TOOLS | tool_names(extra)


def event_memory_tools(metadata: Mapping[str, Any], names: Iterable[str] = MEMORY_TOOLS) -> frozenset[str]:
    """``names`` and the memory tools an event's metadata lists (anything but names is ignored)."""
    listed = metadata.get(METADATA_KEY)
    listed = [listed] if isinstance(listed, str) else listed if isinstance(listed, (list, tuple)) else []
    return frozenset(names) | {n for n in listed if isinstance(n, str) and n}


def is_memory_tool(name: str, names: Iterable[str] = MEMORY_TOOLS) -> bool:
    """Whether a tool called ``name`` is one of the memory's own tools: by its name, or
    its last part when a client prefixed it (``mcp__beeweave__search_memory``)."""
    names = names if isinstance(names, (set, frozenset)) else frozenset(names)
    return name in names or any(sep in name and name.rsplit(sep, 1)[1] in names for sep in _SEPARATORS)


def memory_only(steps: Sequence[ToolCall], names: Iterable[str] = MEMORY_TOOLS) -> bool:
    """Whether a run called tools and all of them were memory tools (then it teaches nothing new)."""
    names = names if isinstance(names, (set, frozenset)) else frozenset(names)
    return bool(steps) and all(is_memory_tool(s.tool, names) for s in steps)
