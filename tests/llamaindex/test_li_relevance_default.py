"""The LlamaIndex faces with the default model and no options (issue 43): the store's own
"nothing relevant" gate applies (here a store whose default is the model's tuned gate, and a
plain store whose default the faces follow), so an off-topic question gets no node and adds no memory, and
``NodeWithScore.score`` is the hit's calibrated relevance (the fused ranking score is kept as
``node.metadata["rank_score"]``), so LlamaIndex's ``SimilarityPostprocessor`` can cut on it.
``abstain_below=0`` turns the gate off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.postprocessor import SimilarityPostprocessor

from beeweave_core import BeeWeave
from beeweave_llamaindex import BeeWeaveMemory, BeeWeaveMemoryBlock, BeeWeaveRetriever
from tests.relevance_faces import FACTS, OFF_TOPIC, ON_TOPIC, gated_memory

pytestmark = [pytest.mark.model, pytest.mark.slow]



@pytest.fixture(scope="module")
def memory() -> Iterator[BeeWeave]:
    with gated_memory(*FACTS) as m:
        yield m


@pytest.fixture(scope="module")
def one() -> Iterator[BeeWeave]:
    with gated_memory("I am allergic to peanuts.") as m:
        yield m


def test_the_retriever_gates_by_default_and_scores_by_relevance(memory: BeeWeave) -> None:
    retriever = BeeWeaveRetriever(memory, user_id="alice")
    for question in OFF_TOPIC:
        assert retriever.retrieve(question) == []
    nodes = retriever.retrieve(ON_TOPIC)
    hit = memory.search(ON_TOPIC, user_id="alice", k=2)[0]
    assert nodes[0].node.get_content() == "I am allergic to peanuts."
    assert nodes[0].score == pytest.approx(hit.relevance) and nodes[0].score > 0.5
    assert nodes[0].node.metadata["rank_score"] == pytest.approx(hit.score)
    ungated = BeeWeaveRetriever(memory, user_id="alice", abstain_below=0).retrieve(OFF_TOPIC[0])
    assert len(ungated) == 2 and all(n.score is not None and n.score < 0.3 for n in ungated)
    # A similarity cutoff reads the score as a similarity: only the relevant memory stays.
    kept = SimilarityPostprocessor(similarity_cutoff=0.5).postprocess_nodes(
        BeeWeaveRetriever(memory, user_id="alice", abstain_below=0).retrieve(ON_TOPIC))
    assert [n.node.get_content() for n in kept] == ["I am allergic to peanuts."]


def test_a_one_memory_store_scores_a_match_high_and_a_stranger_low(one: BeeWeave) -> None:
    [node] = BeeWeaveRetriever(one, user_id="alice").retrieve("Am I allergic to peanuts?")
    assert node.score is not None and node.score > 0.5  # the fused score of a lone memory is 0.5
    assert BeeWeaveRetriever(one, user_id="alice").retrieve("How far is the Moon?") == []
    [far] = BeeWeaveRetriever(one, user_id="alice", abstain_below=0).retrieve("How far is the Moon?")
    assert far.score is not None and far.score < 0.3


def test_the_memory_block_is_empty_off_topic_by_default(memory: BeeWeave) -> None:
    block = BeeWeaveMemoryBlock(memory, user_id="alice")
    for question in OFF_TOPIC:
        assert asyncio.run(block.aget([ChatMessage(role="user", content=question)])) == ""
    assert "peanuts" in asyncio.run(block.aget([ChatMessage(role="user", content=ON_TOPIC)]))
    off = BeeWeaveMemoryBlock(memory, user_id="alice", abstain_below=0)
    assert "peanuts" in asyncio.run(off.aget([ChatMessage(role="user", content=OFF_TOPIC[0])]))


def test_the_agent_memory_adds_nothing_off_topic_by_default(memory: BeeWeave) -> None:
    mem = BeeWeaveMemory(memory, user_id="alice")
    for question in OFF_TOPIC:
        assert mem.get(question) == []  # no memory message at all
    [system] = mem.get(ON_TOPIC)
    assert "peanuts" in system.content
    off = BeeWeaveMemory(memory, user_id="alice", abstain_below=0)
    assert "peanuts" in off.get(OFF_TOPIC[0])[0].content


def test_on_a_plain_store_the_faces_follow_the_engine_default() -> None:
    with BeeWeave() as m:  # whatever the engine's default gate is, the faces' default is the same
        for text in FACTS:
            m.add(text, user_id="alice")
        for question in [*OFF_TOPIC, ON_TOPIC]:
            hits = m.search(question, user_id="alice", k=2)
            nodes = BeeWeaveRetriever(m, user_id="alice", similarity_top_k=2).retrieve(question)
            assert [n.node.node_id for n in nodes] == [h.id for h in hits]
            assert [n.score for n in nodes] == pytest.approx([h.relevance for h in hits])
