"""BeeWeaveNodePostprocessor: nodes from any retriever, ranked and expanded by BeeWeave,
without ever touching the caller's nodes."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from beeweave_core import ExpandOptions, HitSource, InvalidInputError
from beeweave_llamaindex import BeeWeaveNodePostprocessor, BeeWeaveRetriever


class LongestFirst:
    """A stand-in cross-encoder: longer texts score higher; it records the queries it saw."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def rerank(self, query, hits):
        self.queries.append(query)
        ordered = sorted(hits, key=lambda h: -len(h.chunk.content))
        return [replace(h, score=float(len(h.chunk.content)),
                        sources={**h.sources, "rerank": HitSource(rank, float(len(h.chunk.content)))})
                for rank, h in enumerate(ordered, start=1)]


def doc_nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_="d1", text="Green tea has caffeine.", metadata={"file": "tea.md", "tags": ["a"]},
                                    embedding=[0.1, 0.2]), score=0.9),
        NodeWithScore(node=TextNode(id_="d2", text="Peanut allergies can be severe and need care.",
                                    metadata={"file": "health.md"}), score=0.7),
        NodeWithScore(node=TextNode(id_="d3", text="Coffee", metadata={"file": "coffee.md"}), score=None),
    ]


def dump(nodes: list[NodeWithScore]) -> list[dict]:
    return [n.model_dump() for n in nodes]


def scored(nodes: list[NodeWithScore]) -> list[tuple[str, float]]:
    return [(n.node.node_id, n.score) for n in nodes]


def test_external_nodes_come_back_as_copies_with_beeweaves_score(store) -> None:
    nodes = doc_nodes()
    out = BeeWeaveNodePostprocessor(store).postprocess_nodes(nodes, query_str="tea")
    assert [n.node.node_id for n in out] == ["d1", "d2", "d3"]
    assert [n.score for n in out] == [0.9, 0.7, pytest.approx(1 / 3)]  # no score: 1 / (1 + rank)
    for got, given in zip(out, nodes):
        assert got is not given and got.node is not given.node
        assert got.node.model_dump() == given.node.model_dump()


def test_input_nodes_are_never_modified(store) -> None:
    nodes = doc_nodes() + BeeWeaveRetriever(store, user_id="alice", similarity_top_k=2).retrieve("peanuts")
    before = dump(nodes)
    post = BeeWeaveNodePostprocessor(store, reranker=LongestFirst(), user_id="alice", expand=True, mmr=0.5)
    out = post.postprocess_nodes(nodes, query_str="peanut allergy")
    assert dump(nodes) == before
    for n in out:  # changing what came out does not reach the caller's nodes either
        n.node.metadata["touched"] = True
        n.score = -1.0
    assert dump(nodes) == before
    asyncio.run(post.apostprocess_nodes(nodes, query_bundle=QueryBundle("peanut allergy")))
    assert dump(nodes) == before


def test_memory_nodes_get_the_memorys_weight(store) -> None:
    store.update("m2", weight=3.0, pinned=True)  # pinned: no decay; factor log(1 + 3) / log(2) = 2
    given = [NodeWithScore(node=TextNode(id_="m2", text="whatever the caller had"), score=0.4),
             NodeWithScore(node=TextNode(id_="d1", text="a document"), score=0.5)]
    out = BeeWeaveNodePostprocessor(store, user_id="alice").postprocess_nodes(given, query_str="peanuts")
    assert scored(out) == [("m2", pytest.approx(0.8)), ("d1", 0.5)]
    memory_node = out[0].node
    assert memory_node.get_content() == "alice is allergic to peanuts"  # built from the stored memory
    assert memory_node.metadata["sources"]["input"] == {"rank": 1, "score": 0.4}
    assert memory_node.metadata["tags"] == ["health"]


def test_another_users_memory_is_just_a_node(store) -> None:
    given = [NodeWithScore(node=TextNode(id_="m6", text="caller text"), score=0.4)]
    out = BeeWeaveNodePostprocessor(store, user_id="alice").postprocess_nodes(given, query_str="coffee")
    assert out[0].node.get_content() == "caller text"
    assert out[0].node.model_dump() == given[0].node.model_dump()


def test_expansion_brings_linked_memories_with_how_they_were_reached(store) -> None:
    given = [NodeWithScore(node=TextNode(id_="m2", text="x"), score=1.0)]
    post = BeeWeaveNodePostprocessor(store, user_id="alice", expand=ExpandOptions(hops=1, limit=5))
    out = post.postprocess_nodes(given, query_str="peanuts")
    assert out[0].node.node_id == "m2"
    linked = {n.node.node_id: n.node.metadata["sources"]["graph"] for n in out[1:]}
    assert "m4" in linked and linked["m4"]["from_id"] == "m2"
    assert all(n.node.metadata["user_id"] == "alice" for n in out)


def test_an_external_node_links_to_its_most_similar_memory(store) -> None:
    given = [NodeWithScore(node=TextNode(id_="doc", text="bob drinks black coffee"), score=1.0)]
    out = BeeWeaveNodePostprocessor(store, user_id="bob", expand=True).postprocess_nodes(given, query_str="coffee")
    assert out[0].node.node_id == "doc"
    assert out[1].node.node_id == "m6"
    assert out[1].node.metadata["sources"]["graph"]["via"] == "semantic"


def test_top_n_and_empty_input(store) -> None:
    post = BeeWeaveNodePostprocessor(store, top_n=2)
    assert [n.node.node_id for n in post.postprocess_nodes(doc_nodes(), query_str="tea")] == ["d1", "d2"]
    assert post.postprocess_nodes([], query_str="tea") == []
    assert BeeWeaveNodePostprocessor(store, top_n=0).postprocess_nodes(doc_nodes(), query_str="tea") == []


def test_query_str_and_query_bundle_are_the_same(store) -> None:
    reranker = LongestFirst()
    post = BeeWeaveNodePostprocessor(store, reranker=reranker)
    by_str = post.postprocess_nodes(doc_nodes(), query_str="tea")
    by_bundle = post.postprocess_nodes(doc_nodes(), query_bundle=QueryBundle("tea"))
    assert scored(by_str) == scored(by_bundle) == [("d2", 45.0), ("d1", 23.0), ("d3", 6.0)]
    assert reranker.queries == ["tea", "tea"]
    with pytest.raises(ValueError):  # LlamaIndex's own rule
        post.postprocess_nodes(doc_nodes(), query_bundle=QueryBundle("tea"), query_str="tea")


def test_reranking_without_a_query_is_a_clear_error(store) -> None:
    post = BeeWeaveNodePostprocessor(store, reranker=LongestFirst())
    with pytest.raises(InvalidInputError, match="query"):
        post.postprocess_nodes(doc_nodes())


def test_without_a_query_only_scores_count(store) -> None:
    out = BeeWeaveNodePostprocessor(store, top_n=1).postprocess_nodes(doc_nodes())
    assert scored(out) == [("d1", 0.9)]


def test_mmr_keeps_every_node(store) -> None:
    out = BeeWeaveNodePostprocessor(store, mmr=0.3).postprocess_nodes(doc_nodes(), query_str="tea")
    assert sorted(n.node.node_id for n in out) == ["d1", "d2", "d3"]
    assert out[0].node.node_id == "d1"  # the most relevant is always chosen first


def test_filters_decide_which_nodes_count_as_memories(store) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="tags", value=["drink"], operator=FilterOperator.ANY)])
    given = [NodeWithScore(node=TextNode(id_=i, text="caller text"), score=0.5) for i in ("m1", "m2")]
    out = BeeWeaveNodePostprocessor(store, filters=flt).postprocess_nodes(given, query_str="tea")
    texts = {n.node.node_id: n.node.get_content() for n in out}
    assert texts == {"m1": "alice drinks green tea every morning", "m2": "caller text"}


def test_unsupported_filters_are_refused_at_construction(store) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="tags", value=["x"], operator=FilterOperator.NIN)])
    with pytest.raises(InvalidInputError, match="NIN"):
        BeeWeaveNodePostprocessor(store, filters=flt)


def test_apostprocess_matches_and_runs_off_the_event_loop(store, monkeypatch) -> None:
    post = BeeWeaveNodePostprocessor(store, user_id="alice", expand=True)
    nodes = doc_nodes() + [NodeWithScore(node=TextNode(id_="m2", text="x"), score=0.8)]
    expected = scored(post.postprocess_nodes(nodes, query_str="peanuts"))
    threads = []
    original = store.postprocess

    def recording(*args, **kwargs):
        threads.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(store, "postprocess", recording)
    out = asyncio.run(post.apostprocess_nodes(nodes, query_str="peanuts"))
    assert scored(out) == expected
    assert threads and threading.get_ident() not in threads


def test_config_is_pydantic_and_the_store_stays_private(store) -> None:
    post = BeeWeaveNodePostprocessor(store, user_id="alice", top_n=3, expand=True, reranker=LongestFirst())
    assert BeeWeaveNodePostprocessor.class_name() == "BeeWeaveNodePostprocessor"
    config = post.to_dict()
    assert config["user_id"] == "alice" and config["top_n"] == 3 and config["expand"] is True
    assert config["class_name"] == "BeeWeaveNodePostprocessor"
    assert not any(k in config for k in ("memory", "_memory", "reranker", "_reranker"))
    for name in ("user_id", "filters", "mmr", "expand", "top_n"):
        assert BeeWeaveNodePostprocessor.model_fields[name].description
