"""MCP tool arguments go through the engine's validation (issue 47, item 11): NaN or infinite
relevance thresholds and oversized tag lists are refused with a clear error, before anything
is stored or searched. The server used to keep 10,000 tags on one memory."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.errors import InvalidInputError  # noqa: E402
from beeweave_core.mcp.server import build_server  # noqa: E402
from beeweave_core.mcp.tools import MemoryTools  # noqa: E402
from beeweave_core.validation import MAX_TAG_CHARS, MAX_TAGS  # noqa: E402

EMBEDDER = "beeweave:hashing-64"
MANY = [f"t{i}" for i in range(10_000)]


@pytest.mark.parametrize("name", ["min_relevance", "abstain_below"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1.5, -0.1, "0.5", True])
def test_relevance_thresholds_must_be_finite_numbers_in_0_1(tmp_path: Path, name: str, value: object) -> None:
    with BeeWeave(tmp_path / "m.db", embedder=EMBEDDER) as memory:
        ops = MemoryTools(memory)
        with pytest.raises(InvalidInputError, match=name):
            ops.search("alice", "hotel", **{name: value})


@pytest.mark.asyncio
async def test_oversized_tag_lists_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    with BeeWeave(tmp_path / "m.db", embedder=EMBEDDER) as memory:
        async with Client(build_server(memory, default_user_id="alice")) as client:
            for tool, args in [("save_memory", {"content": "The offsite is at the Lakeside hotel."}),
                               ("search_memory", {"query": "offsite hotel"}),
                               ("list_memories", {})]:
                for tags in (MANY, [f"t{i}" for i in range(MAX_TAGS + 1)], ["x" * (MAX_TAG_CHARS + 1)]):
                    res = await client.call_tool(tool, {**args, "tags": tags})
                    assert res.is_error, (tool, len(tags))
                    assert "InvalidInputError" in res.content[0].text and "tag" in res.content[0].text
            assert memory.count() == 0

            ok = await client.call_tool("save_memory", {"content": "The offsite is at the Lakeside hotel.",
                                                        "tags": [f"t{i}" for i in range(MAX_TAGS)]})
            assert not ok.is_error, ok.content
            mid = ok.structured_content["id"]
            res = await client.call_tool("update_memory", {"memory_id": mid, "tags": MANY})
            assert res.is_error and "at most" in res.content[0].text
            assert len(memory.get_many([mid])[0].tags) == MAX_TAGS  # unchanged
