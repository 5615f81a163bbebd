"""The MCP search tool with the default model and no options (issue 43): the store's own
"nothing relevant" gate applies (here the model's tuned gate as the store's default), so an off-topic question returns no memory, and each result's ``score``
is its calibrated ``relevance`` (the fused ranking score is ``rank_score``).
``abstain_below=0`` turns the gate off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.mcp.server import build_server  # noqa: E402
from tests.relevance_faces import FACTS, GATED, OFF_TOPIC, ON_TOPIC, gated_memory  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]



def search(memory: BeeWeave, query: str, **more: Any) -> list[dict[str, Any]]:
    res = asyncio.run(build_server(memory).call_tool("search_memory", {"user_id": "alice", "query": query, **more}))
    assert not res.is_error, res.content
    return res.structured_content["memories"]


@pytest.fixture(scope="module")
def memory() -> Iterator[BeeWeave]:
    with gated_memory(*FACTS) as m:
        yield m


def test_search_memory_gates_by_default_and_scores_by_relevance(memory: BeeWeave) -> None:
    for question in OFF_TOPIC:
        assert search(memory, question) == []
    found = search(memory, ON_TOPIC)
    hit = memory.search(ON_TOPIC, user_id="alice", k=5)[0]
    assert found[0]["id"] == hit.id and found[0]["content"] == FACTS[0]
    assert found[0]["score"] == found[0]["relevance"] == pytest.approx(hit.relevance, abs=1e-4)
    assert found[0]["rank_score"] == pytest.approx(hit.score, abs=1e-4)
    ungated = search(memory, OFF_TOPIC[0], abstain_below=0)
    assert len(ungated) == 2 and all(m["score"] < 0.3 for m in ungated)


def test_a_one_memory_store_scores_a_match_high_and_a_stranger_low() -> None:
    with BeeWeave(config=GATED) as one:
        one.add("I am allergic to peanuts.", user_id="alice")
        [match] = search(one, "Am I allergic to peanuts?")
        assert match["score"] > 0.5  # the fused score of a lone memory is 0.5 whatever the query
        assert search(one, "How far is the Moon?") == []
        [far] = search(one, "How far is the Moon?", abstain_below=0)
        assert far["score"] < 0.3


def test_on_a_plain_store_the_tool_follows_the_engine_default() -> None:
    with BeeWeave() as m:
        for text in FACTS:
            m.add(text, user_id="alice")
        for question in [*OFF_TOPIC, ON_TOPIC]:
            assert [f["id"] for f in search(m, question)] == [h.id for h in m.search(question, user_id="alice")]
