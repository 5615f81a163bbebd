"""One default top-k for every face, defined once as ``beeweave_core.DEFAULT_TOP_K`` (issue 46:
it was 2 in LlamaIndex and 4 or 5 elsewhere). LangGraph's ``BaseStore.search(limit=10)`` keeps
the default its contract gives."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from beeweave_core import DEFAULT_TOP_K, BeeWeave, BeeWeaveClient, MemoryAPI
from beeweave_core.async_client import AsyncBeeWeaveClient
from beeweave_core.cli import build_parser

pytestmark = pytest.mark.slow


def default(func: Any, name: str) -> Any:
    return inspect.signature(func).parameters[name].default


def test_the_engine_the_clients_and_the_cli() -> None:
    assert default(BeeWeave.search, "k") == DEFAULT_TOP_K
    assert default(MemoryAPI.search, "k") == DEFAULT_TOP_K
    for client in (BeeWeaveClient, AsyncBeeWeaveClient):
        assert default(client.search, "k") == DEFAULT_TOP_K
        assert default(client.search_semantic, "top_k") == DEFAULT_TOP_K
    assert build_parser().parse_args(["search", "port"]).k == DEFAULT_TOP_K


def test_rest() -> None:
    pytest.importorskip("fastapi")
    from beeweave_core.server.schemas import SearchIn, SemanticSearchIn

    assert SearchIn.model_fields["k"].default == DEFAULT_TOP_K
    assert SemanticSearchIn.model_fields["top_k"].default == DEFAULT_TOP_K


def test_mcp() -> None:
    pytest.importorskip("mcp")
    from beeweave_core.mcp.server import build_server
    from beeweave_core.mcp.tools import MemoryTools

    assert default(MemoryTools.search, "k") == DEFAULT_TOP_K
    with BeeWeave(embedder="beeweave:hashing-64") as memory:
        tools = {t.name: t for t in asyncio.run(build_server(memory).list_tools())}
    assert tools["search_memory"].input_schema["properties"]["k"]["default"] == DEFAULT_TOP_K


def test_langchain() -> None:
    pytest.importorskip("langchain")
    from langgraph.store.base import BaseStore

    from beeweave_langchain import BeeWeaveMemory, BeeWeaveMiddleware, BeeWeaveRetriever, BeeWeaveStore

    assert BeeWeaveRetriever.model_fields["k"].default == DEFAULT_TOP_K
    assert BeeWeaveMemory.model_fields["long_term_k"].default == DEFAULT_TOP_K
    assert default(BeeWeaveMiddleware.__init__, "k") == DEFAULT_TOP_K
    with BeeWeave(embedder="beeweave:hashing-64") as memory:
        [search_tool] = [t for t in BeeWeaveMiddleware(memory, user_id="alice", tools=True).tools
                         if t.name == "search_memory"]
    assert search_tool.args["k"]["default"] == DEFAULT_TOP_K
    # The LangGraph store has no default of its own: BaseStore.search's limit=10 is the contract's.
    assert BeeWeaveStore.search is BaseStore.search and default(BaseStore.search, "limit") == 10


def test_llamaindex() -> None:
    pytest.importorskip("llama_index.core")
    from beeweave_llamaindex import BeeWeaveMemory, BeeWeaveMemoryBlock, BeeWeaveRetriever

    assert default(BeeWeaveRetriever.__init__, "similarity_top_k") == DEFAULT_TOP_K
    assert BeeWeaveMemoryBlock.model_fields["similarity_top_k"].default == DEFAULT_TOP_K
    assert BeeWeaveMemory.model_fields["similarity_top_k"].default == DEFAULT_TOP_K
