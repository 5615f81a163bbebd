"""Defaults every face shares, defined once (issue 46: top-k was 2 in LlamaIndex, 4 or 5 elsewhere).

Imports nothing, so the HTTP client alone (``beeweave-memory[client]``) can use it."""

from __future__ import annotations

DEFAULT_TOP_K = 5
"""How many memories a search returns when the caller does not say: ``BeeWeave.search`` and the
clients, the CLI, REST, MCP, the LangChain retriever, classic memory and middleware, and the
LlamaIndex retriever, memory and memory block. LangGraph's ``BaseStore.search(limit=10)`` keeps
the default of its own contract."""
