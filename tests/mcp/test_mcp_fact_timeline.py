"""Facts that change, through the MCP search tool: the current home first, the old one marked
``superseded`` (with ``invalid_at``), and ``as_of`` answering with the value valid then."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("mcp")

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.mcp.server import build_server  # noqa: E402
from tests.fact_faces import CASES, T1, moved_memory  # noqa: E402


def search(memory: BeeWeave, query: str, **more: Any) -> list[dict[str, Any]]:
    res = asyncio.run(build_server(memory).call_tool("search_memory", {"user_id": "alice", "query": query,
                                                                       "abstain_below": 0, **more}))
    assert not res.is_error, res.content
    return res.structured_content["memories"]


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_search_memory_marks_the_superseded_value_and_answers_as_of(lang: str) -> None:
    _, _, question, old, new = CASES[lang]
    with moved_memory(lang) as m:
        now = search(m, question)
        then = search(m, question, as_of=(T1 - timedelta(days=1)).isoformat())
    assert new in now[0]["content"] and "superseded" not in now[0]
    stale = next(h for h in now if old in h["content"])
    assert stale["superseded"] is True and stale["invalid_at"] == T1.isoformat()
    assert old in then[0]["content"] and "superseded" not in then[0]
    assert not any(new in h["content"] for h in then)
