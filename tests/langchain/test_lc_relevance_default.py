"""The LangChain faces with the default model and no options (issue 43): the store's own
"nothing relevant" gate applies (here a store whose default is the model's tuned gate, and a
plain store whose default the faces follow), so an off-topic question injects nothing, and the
score a face exposes
(``Document.metadata["score"]``, the middleware's recalled ``score``, LangGraph's
``SearchItem.score``) is the hit's calibrated relevance, not the fused ranking score (kept as
``metadata["rank_score"]``). ``abstain_below=0`` turns the gate off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from langchain_core.messages import HumanMessage

from beeweave_core import BeeWeave
from beeweave_langchain import BeeWeaveMemory, BeeWeaveMiddleware, BeeWeaveRetriever, BeeWeaveStore
from tests.relevance_faces import FACTS, GATED, OFF_TOPIC, ON_TOPIC, gated_memory

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
    retriever = BeeWeaveRetriever(memory=memory, user_id="alice")
    for question in OFF_TOPIC:
        assert retriever.invoke(question) == []
    docs = retriever.invoke(ON_TOPIC)
    hit = memory.search(ON_TOPIC, user_id="alice", k=4)[0]
    assert docs[0].page_content == "I am allergic to peanuts."
    assert docs[0].metadata["score"] == pytest.approx(hit.relevance)
    assert docs[0].metadata["rank_score"] == pytest.approx(hit.score)
    assert docs[0].metadata["score"] > 0.5
    ungated = BeeWeaveRetriever(memory=memory, user_id="alice", abstain_below=0).invoke(OFF_TOPIC[0])
    assert len(ungated) == 2 and all(d.metadata["score"] < 0.3 for d in ungated)


def test_a_one_memory_store_scores_a_match_high_and_a_stranger_low(one: BeeWeave) -> None:
    [doc] = BeeWeaveRetriever(memory=one, user_id="alice").invoke("Am I allergic to peanuts?")
    assert doc.metadata["score"] > 0.5  # the fused score of a lone memory is 0.5 whatever the query
    assert BeeWeaveRetriever(memory=one, user_id="alice").invoke("How far is the Moon?") == []
    [far] = BeeWeaveRetriever(memory=one, user_id="alice", abstain_below=0).invoke("How far is the Moon?")
    assert far.metadata["score"] < 0.3


def test_conversation_memory_adds_nothing_off_topic_by_default(memory: BeeWeave) -> None:
    mem = BeeWeaveMemory(memory=memory, user_id="alice", long_term_key="long_term")
    for question in OFF_TOPIC:
        assert mem.load_memory_variables({"input": question})["long_term"] == ""
    assert "peanuts" in mem.load_memory_variables({"input": ON_TOPIC})["long_term"]
    off = BeeWeaveMemory(memory=memory, user_id="alice", long_term_key="long_term", abstain_below=0)
    assert "peanuts" in off.load_memory_variables({"input": OFF_TOPIC[0]})["long_term"]


def _recall(mw: BeeWeaveMiddleware, question: str) -> list[dict]:
    out = mw.before_agent({"messages": [HumanMessage(question)]}, SimpleNamespace())
    assert out is not None
    return out["beeweave_recalled"]


def test_the_middleware_injects_nothing_off_topic_and_reports_relevance(memory: BeeWeave) -> None:
    mw = BeeWeaveMiddleware(memory, user_id="alice", capture=False, tools=True)
    for question in OFF_TOPIC:
        assert _recall(mw, question) == []
    recalled = _recall(mw, ON_TOPIC)
    hit = memory.search(ON_TOPIC, user_id="alice", k=5)[0]
    assert recalled[0]["id"] == hit.id and recalled[0]["score"] == pytest.approx(hit.relevance)
    search_tool = next(t for t in mw.tools if t.name == "search_memory")
    assert json.loads(search_tool.invoke({"query": OFF_TOPIC[1]})) == []
    [first, *_] = json.loads(search_tool.invoke({"query": ON_TOPIC}))
    assert first["score"] == pytest.approx(hit.relevance, abs=1e-4)
    off = BeeWeaveMiddleware(memory, user_id="alice", capture=False, abstain_below=0)
    assert len(_recall(off, OFF_TOPIC[0])) == 2


def test_the_langgraph_store_gates_and_scores_items_by_relevance() -> None:
    with BeeWeave(config=GATED) as m:
        store = BeeWeaveStore(m, user_level=0)
        for i, text in enumerate(FACTS):
            store.put(("alice", "facts"), f"f{i}", {"text": text})
        for question in OFF_TOPIC:
            assert store.search(("alice",), query=question) == []
        items = store.search(("alice",), query=ON_TOPIC)
        hit = m.search(ON_TOPIC, user_id="alice", k=10)[0]
        assert items[0].value == {"text": FACTS[0]} and items[0].score == pytest.approx(hit.relevance)
        assert items[0].score > 0.5
        assert len(BeeWeaveStore(m, user_level=0, abstain_below=0).search(("alice",), query=OFF_TOPIC[0])) == 2


def test_on_a_plain_store_every_face_follows_the_engine_default() -> None:
    with BeeWeave() as m:  # whatever the engine's default gate is, the faces' default is the same
        for text in FACTS:
            m.add(text, user_id="alice")
        for question in [*OFF_TOPIC, ON_TOPIC]:
            ids = [h.id for h in m.search(question, user_id="alice", k=4)]
            assert [d.id for d in BeeWeaveRetriever(memory=m, user_id="alice").invoke(question)] == ids
            mw = BeeWeaveMiddleware(m, user_id="alice", capture=False, k=4)
            assert [r["id"] for r in _recall(mw, question)] == ids
