"""BeeWeaveRetriever: behaviour tests on a tiny store, in the style of LlamaIndex's retriever tests."""

from __future__ import annotations

import asyncio
import threading

import pytest
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from beeweave_core import BeeWeaveError, InvalidInputError, UnknownFilterError
from beeweave_llamaindex import BeeWeaveRetriever
from beeweave_llamaindex.filters import to_beeweave_filters

QUERY = "alice tea peanuts coffee python"
ACTIVE = {"m1", "m2", "m3", "m4", "m6"}


def ids(nodes: list[NodeWithScore]) -> set[str]:
    return {n.node.node_id for n in nodes}


def test_nodes_carry_the_memory(store) -> None:
    nodes = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=2).retrieve("allergic to peanuts")
    assert len(nodes) == 2
    top = nodes[0]
    assert isinstance(top.node, TextNode)
    assert top.node.node_id == "m2"
    assert top.node.get_content() == "alice is allergic to peanuts"
    meta = top.node.metadata
    assert meta["user_id"] == "alice" and meta["session_id"] == "s1" and meta["tags"] == ["health"]
    assert meta["timestamp"].startswith("2022-01-01")
    assert set(meta["sources"]) == {"lexical", "vector"}
    assert meta["loosened"] is False
    assert meta["relationships"] == [r.to_dict() for r in store.get("m2").relationships]
    assert "raw_content" not in meta and "id" not in meta
    hits = store.search("allergic to peanuts", user_id="alice", k=2)
    # The node's score is the calibrated relevance; the fused ranking score is kept as rank_score.
    assert top.score == pytest.approx(hits[0].relevance)
    assert meta["rank_score"] == pytest.approx(hits[0].score)
    assert nodes[0].node.metadata["rank_score"] >= nodes[1].node.metadata["rank_score"]


def test_bookkeeping_metadata_stays_out_of_the_prompt(store) -> None:
    node = BeeWeaveRetriever(store, user_id="alice").retrieve("peanuts")[0].node
    shown = node.get_content(metadata_mode="llm")
    assert "tags:" in shown and "timestamp:" in shown
    assert "access_count" not in shown and "sources" not in shown


def test_top_k_larger_than_the_store_returns_everything_in_scope(store) -> None:
    nodes = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=100).retrieve(QUERY)
    assert ids(nodes) == {"m1", "m2", "m3", "m4"}  # m5 is archived, m6 is bob's


def test_top_k_zero_returns_nothing(store) -> None:
    assert BeeWeaveRetriever(store, similarity_top_k=0).retrieve(QUERY) == []


def test_empty_store_returns_nothing(memory) -> None:
    assert BeeWeaveRetriever(memory, similarity_top_k=5).retrieve(QUERY) == []


def test_user_scope_never_returns_another_users_memory(store) -> None:
    assert ids(BeeWeaveRetriever(store, user_id="bob", similarity_top_k=100).retrieve(QUERY)) == {"m6"}


def test_session_scope(store) -> None:
    assert ids(BeeWeaveRetriever(store, session_id="s2", similarity_top_k=100).retrieve(QUERY)) == {"m3", "m4"}


def test_session_given_as_scope_and_filter_is_refused(store) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="session_id", value="s1")])
    with pytest.raises(InvalidInputError, match="session_id"):
        BeeWeaveRetriever(store, session_id="s2", filters=flt)


def test_string_and_query_bundle_give_the_same_nodes(store) -> None:
    r = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=3)
    as_str = [(n.node.node_id, n.score) for n in r.retrieve("green tea")]
    as_bundle = [(n.node.node_id, n.score) for n in r.retrieve(QueryBundle("green tea"))]
    assert as_str == as_bundle and as_str


def test_empty_query_is_a_beeweave_error(store) -> None:
    with pytest.raises(BeeWeaveError):
        BeeWeaveRetriever(store).retrieve("   ")


# -- filters ------------------------------------------------------------------------------
F = FilterOperator
SUPPORTED = [
    ("user_id", F.EQ, "bob", {"user_id": "bob"}, {"m6"}),
    ("user_id", F.IN, ["alice"], {"user_id": ["alice"]}, {"m1", "m2", "m3", "m4"}),
    ("agent_id", F.EQ, "planner", {"agent_id": "planner"}, {"m1", "m2", "m6"}),
    ("agent_id", F.IN, ["coder"], {"agent_id": ["coder"]}, {"m3"}),
    ("session_id", F.EQ, "s2", {"session_id": "s2"}, {"m3", "m4"}),
    ("session_id", F.IN, ["s1", "s3"], {"session_id": ["s1", "s3"]}, {"m1", "m2", "m6"}),
    ("type", F.EQ, "code", {"type": "code"}, {"m3"}),
    ("type", F.IN, ["text"], {"type": ["text"]}, {"m1", "m2", "m4", "m6"}),
    ("intent", F.EQ, "information_query", {"intent": "information_query"}, {"m1", "m6"}),
    ("intent", F.IN, ["other", "code_generation"], {"intent": ["other", "code_generation"]}, {"m3", "m4"}),
    ("status", F.EQ, "archived", {"status": "archived"}, {"m5"}),
    ("status", F.IN, ["active", "archived"], {"status": ["active", "archived"]}, ACTIVE | {"m5"}),
    ("tags", F.IN, ["health"], {"tags_any": ["health"]}, {"m2", "m4"}),
    ("tags", F.ANY, ["code", "health"], {"tags_any": ["code", "health"]}, {"m2", "m3", "m4"}),
    ("tags", F.ALL, ["drink", "health"], {"tags_all": ["drink", "health"]}, {"m4"}),
    ("tags", F.CONTAINS, "python", {"tags_all": "python"}, {"m3"}),
    ("entities", F.IN, ["coffee"], {"entities": ["coffee"]}, {"m6"}),
    ("entities", F.ANY, ["tea"], {"entities": ["tea"]}, {"m1", "m4"}),
    ("entities", F.CONTAINS, "peanut", {"entities": "peanut"}, {"m2", "m4"}),
    ("timestamp", F.GTE, "2023-01-01T00:00:00+00:00", {"since": "2023-01-01T00:00:00+00:00"}, {"m3", "m4", "m6"}),
    ("timestamp", F.GT, "2022-06-01T00:00:00+00:00", {"since": "2022-06-01T00:00:00+00:00"}, {"m3", "m4", "m6"}),
    ("timestamp", F.LTE, "2022-01-01T00:00:00+00:00", {"until": "2022-01-01T00:00:00+00:00"}, {"m1", "m2"}),
    ("timestamp", F.LT, 1622505600, {"until": 1622505600}, {"m1"}),  # epoch seconds of 2021-06-01
]


@pytest.mark.parametrize(("key", "op", "value", "translated", "expected"), SUPPORTED,
                         ids=[f"{k}-{o.name}" for k, o, *_ in SUPPORTED])
def test_each_supported_operator(store, key, op, value, translated, expected) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=op)])
    assert to_beeweave_filters(flt) == translated
    assert ids(BeeWeaveRetriever(store, filters=flt, similarity_top_k=100).retrieve(QUERY)) == expected


def test_filters_combine_with_and_including_nested_and(store) -> None:
    flt = MetadataFilters(filters=[
        MetadataFilter(key="user_id", value="alice"),
        MetadataFilters(filters=[MetadataFilter(key="tags", value=["drink"], operator=F.ANY),
                                 MetadataFilter(key="timestamp", value="2022-01-01T00:00:00Z", operator=F.GTE)]),
    ], condition=FilterCondition.AND)
    assert ids(BeeWeaveRetriever(store, filters=flt, similarity_top_k=100).retrieve(QUERY)) == {"m4"}


def test_filters_and_user_scope_must_agree(store) -> None:
    # Searched together they would read only the users in both: nothing here, alice alone for
    # [alice, bob]; a silent narrowing, so the retriever refuses it (issue 44).
    flt = MetadataFilters(filters=[MetadataFilter(key="user_id", value="bob")])
    with pytest.raises(InvalidInputError, match="user_id"):
        BeeWeaveRetriever(store, user_id="alice", filters=flt, similarity_top_k=100)


UNSUPPORTED = [
    ("user_id", F.NE, "bob"),
    ("user_id", F.ANY, ["alice"]),
    ("tags", F.NIN, ["drink"]),
    ("tags", F.EQ, "drink"),
    ("session_id", F.TEXT_MATCH, "s"),
    ("agent_id", F.TEXT_MATCH_INSENSITIVE, "plan"),
    ("timestamp", F.EQ, "2021-01-01T00:00:00+00:00"),
    ("entities", F.ALL, ["tea"]),
    ("status", F.IS_EMPTY, None),
]


@pytest.mark.parametrize(("key", "op", "value"), UNSUPPORTED, ids=[f"{k}-{o.name}" for k, o, _ in UNSUPPORTED])
def test_unsupported_operator_names_itself(store, key, op, value) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=op)])
    with pytest.raises(InvalidInputError, match=op.name) as err:
        BeeWeaveRetriever(store, filters=flt)
    assert isinstance(err.value, BeeWeaveError)


@pytest.mark.parametrize("condition", [FilterCondition.OR, FilterCondition.NOT])
def test_or_and_not_are_refused(store, condition) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="user_id", value="alice"),
                                   MetadataFilter(key="user_id", value="bob")], condition=condition)
    with pytest.raises(InvalidInputError, match=condition.value):
        BeeWeaveRetriever(store, filters=flt)


def test_nested_or_is_refused(store) -> None:
    inner = MetadataFilters(filters=[MetadataFilter(key="tags", value=["a"], operator=F.ANY)],
                            condition=FilterCondition.OR)
    with pytest.raises(InvalidInputError, match="or"):
        BeeWeaveRetriever(store, filters=MetadataFilters(filters=[inner]))


def test_unknown_key_is_refused(store) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="author", value="x")])
    with pytest.raises(UnknownFilterError, match="author"):
        BeeWeaveRetriever(store, filters=flt)


def test_two_filters_on_one_condition_are_refused(store) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="timestamp", value=1, operator=F.GT),
                                   MetadataFilter(key="timestamp", value=2, operator=F.GTE)])
    with pytest.raises(InvalidInputError, match="since"):
        BeeWeaveRetriever(store, filters=flt)


def test_bad_filter_value_is_the_cores_error(store) -> None:
    flt = MetadataFilters(filters=[MetadataFilter(key="status", value="sleeping")])
    with pytest.raises(InvalidInputError, match="sleeping"):
        BeeWeaveRetriever(store, filters=flt).retrieve(QUERY)


# -- search options, async, engines ---------------------------------------------------------
def test_search_options_reach_the_engine(store) -> None:
    nodes = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=1, expand=True).retrieve("allergic peanuts")
    assert nodes[0].node.node_id == "m2"
    graph = [n for n in nodes[1:] if "graph" in n.node.metadata["sources"]]
    assert graph and graph[0].node.metadata["sources"]["graph"]["from_id"] == "m2"


def test_aretrieve_matches_retrieve_and_runs_off_the_event_loop(store, monkeypatch) -> None:
    r = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=3)
    expected = [(n.node.node_id, n.score) for n in r.retrieve("green tea")]
    threads = []
    search = store.search

    def recording_search(*args, **kwargs):
        threads.append(threading.get_ident())
        return search(*args, **kwargs)

    monkeypatch.setattr(store, "search", recording_search)

    async def run():
        return await asyncio.gather(r.aretrieve("green tea"), r.aretrieve(QueryBundle("green tea")))

    for nodes in asyncio.run(run()):
        assert [(n.node.node_id, n.score) for n in nodes] == expected
    assert len(threads) == 2 and threading.get_ident() not in threads


def test_retriever_query_engine_end_to_end(store) -> None:
    retriever = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("what is alice allergic to")
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in
                                                               retriever.retrieve("what is alice allergic to")]
    assert "alice is allergic to peanuts" in str(response)  # MockLLM echoes its prompt
    assert "bob" not in str(response)
    aresponse = asyncio.run(engine.aquery("what is alice allergic to"))
    assert [n.node.node_id for n in aresponse.source_nodes] == [n.node.node_id for n in response.source_nodes]


def test_context_chat_engine(store) -> None:
    engine = ContextChatEngine.from_defaults(retriever=BeeWeaveRetriever(store, user_id="bob"), llm=MockLLM())
    reply = engine.chat("what does bob drink")
    assert "bob drinks black coffee" in str(reply)
    assert [n.node.node_id for n in reply.source_nodes] == ["m6"]


def test_relevance_gates_reach_the_search(store) -> None:
    query = "allergic to peanuts"
    hits = store.search(query, user_id="alice", k=4)
    best = max(h.relevance for h in hits)
    # A gate above the best hit: nothing; at the best hit: every hit as ranked.
    assert BeeWeaveRetriever(store, user_id="alice", similarity_top_k=4,
                             abstain_below=min(1.0, best + 1e-6)).retrieve(query) == []
    gated = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=4, abstain_below=best).retrieve(query)
    assert [n.node.node_id for n in gated] == [h.id for h in hits]
    # A floor keeps only the hits that reach it.
    floor = sorted(h.relevance for h in hits)[-2]
    kept = BeeWeaveRetriever(store, user_id="alice", similarity_top_k=4, min_relevance=floor).retrieve(query)
    assert {n.node.node_id for n in kept} == {h.id for h in hits if h.relevance >= floor}


@pytest.mark.parametrize("gate", ["min_relevance", "abstain_below"])
def test_a_gate_outside_zero_one_is_refused_at_construction(store, gate) -> None:
    with pytest.raises(InvalidInputError, match=gate):
        BeeWeaveRetriever(store, **{gate: 1.5})
