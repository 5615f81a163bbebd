"""LangGraph's ``BaseStore`` contract, run against BeeWeaveStore and LangGraph's own InMemoryStore.

LangGraph ships no conformance tests for stores (langgraph-checkpoint-conformance covers
checkpointers only), so these are written from the documented contract of ``BaseStore``,
``Item``/``SearchItem``, ``SearchOp`` (filters with $eq, $ne, $gt, $gte, $lt, $lte, limit,
offset, query) and ``ListNamespacesOp`` (prefix, suffix, wildcards, max_depth). Every test
runs on InMemoryStore too (with the same hashing embedder for query searches), which
shows that the tests ask for LangGraph's behaviour, not for BeeWeave's; BeeWeaveStore runs
on both BeeWeave backends (SQLite in memory, and PostgreSQL + pgvector from tests/postgres/pg_support.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_langchain import BeeWeaveStore
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

DIM = 64


def _embed(texts: list[str]) -> list[list[float]]:
    return [list(map(float, v)) for v in HashingEmbedder(DIM).embed_documents(texts)]


@pytest.fixture(params=["beeweave", "beeweave-postgres", "inmemory"])
def store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    if request.param == "inmemory":
        yield InMemoryStore(index={"dims": DIM, "embed": _embed})
        return
    if request.param == "beeweave-postgres":  # a real PostgreSQL + pgvector, one tenant per test
        memory = BeeWeave.from_url(request.getfixturevalue("pg_url"), tenant=new_tenant(),
                                   embedder=HashingEmbedder(DIM))
    else:
        memory = BeeWeave(embedder=HashingEmbedder(DIM))
    yield BeeWeaveStore(memory)
    memory.close()


DOCS = {
    ("docs", "alice"): {"a1": {"text": "Alice keeps bees on the roof", "year": 2019, "kind": "hobby"},
                        "a2": {"text": "Alice is allergic to peanuts", "year": 2021, "kind": "health"}},
    ("docs", "alice", "work"): {"w1": {"text": "Alice deploys the payment service on Fridays", "year": 2023,
                                       "kind": "work", "meta": {"team": "payments", "level": 3}}},
    ("docs", "bob"): {"b1": {"text": "Bob plays the cello in an orchestra", "year": 2020, "kind": "hobby"}},
    ("docsx",): {"x1": {"text": "A namespace that shares the first letters", "year": 2018, "kind": "other"}},
}


def fill(store: BaseStore) -> None:
    for ns, items in DOCS.items():
        for key, value in items.items():
            store.put(ns, key, value)


def keys(items: list[Any]) -> set[str]:
    return {i.key for i in items}


# -- put / get / delete ----------------------------------------------------------------------
def test_put_then_get_returns_the_item(store: BaseStore) -> None:
    value = {"text": "ünïcode ✓", "n": 3, "x": 1.5, "ok": True, "none": None, "list": [1, "two", {"three": 3}],
             "nested": {"deep": {"deeper": ["a"]}}}
    store.put(("users", "alice"), "profile", value)
    item = store.get(("users", "alice"), "profile")
    assert isinstance(item, Item)
    assert item.value == value and item.key == "profile" and item.namespace == ("users", "alice")
    assert isinstance(item.created_at, datetime) and item.created_at.tzinfo is not None
    assert item.updated_at >= item.created_at


def test_a_value_comes_back_as_put_whatever_it_holds(store: BaseStore) -> None:
    # What looks like personal data, a card number or a very short text is an application's
    # value: a store returns it as put and a query finds it (no redaction, no review queue).
    value = {"text": "Call Alice at 13812345678", "email": "alice@example.com", "card": "4111111111111111",
             "ip": "192.168.1.20"}
    store.put(("contacts",), "alice", value)
    store.put(("notes",), "short", {"text": "hi"})
    assert store.get(("contacts",), "alice").value == value
    assert [i.value for i in store.search(("contacts",), query="Call Alice")] == [value]
    assert [i.key for i in store.search(("notes",), query="hi")] == ["short"]
    store.put(("contacts",), "alice", {**value, "note": "second put"})
    assert store.get(("contacts",), "alice").value == {**value, "note": "second put"}


def test_the_empty_key_is_a_key(store: BaseStore) -> None:
    store.put(("users", "alice"), "", {"text": "the empty key"})
    store.put(("users", "alice"), "k", {"text": "another"})
    assert store.get(("users", "alice"), "").value == {"text": "the empty key"}
    assert keys(store.search(("users", "alice"))) == {"", "k"}
    store.delete(("users", "alice"), "")
    assert store.get(("users", "alice"), "") is None


def test_a_filter_with_a_tuple_matches_the_same_list(store: BaseStore) -> None:
    store.put(("users", "alice"), "k", {"tags": ["a", "b"], "pair": [1, 2]})
    assert keys(store.search(("users",), filter={"tags": ("a", "b")})) == {"k"}
    assert keys(store.search(("users",), filter={"pair": [1, 2]})) == {"k"}
    assert store.search(("users",), filter={"pair": (2, 1)}) == []


def test_a_missing_item_is_none(store: BaseStore) -> None:
    store.put(("users", "alice"), "profile", {"text": "x"})
    assert store.get(("users", "alice"), "other") is None
    assert store.get(("users", "bob"), "profile") is None  # same key, other namespace
    assert store.get(("users",), "profile") is None


def test_the_same_key_in_two_namespaces_is_two_items(store: BaseStore) -> None:
    store.put(("a",), "k", {"v": 1})
    store.put(("a", "b"), "k", {"v": 2})
    assert store.get(("a",), "k").value == {"v": 1}
    assert store.get(("a", "b"), "k").value == {"v": 2}


def test_a_second_put_replaces_the_value_and_keeps_created_at(store: BaseStore) -> None:
    store.put(("users", "alice"), "diet", {"text": "vegetarian", "since": 2019})
    first = store.get(("users", "alice"), "diet")
    store.put(("users", "alice"), "diet", {"text": "vegan"})
    second = store.get(("users", "alice"), "diet")
    assert second.value == {"text": "vegan"}  # replaced, not merged
    assert second.updated_at >= first.updated_at and second.created_at <= second.updated_at
    assert len(store.search(("users", "alice"))) == 1


def test_delete_removes_the_item_and_deleting_nothing_is_fine(store: BaseStore) -> None:
    store.put(("users", "alice"), "diet", {"text": "vegetarian"})
    store.delete(("users", "alice"), "diet")
    assert store.get(("users", "alice"), "diet") is None
    assert store.search(("users",)) == []
    store.delete(("users", "alice"), "diet")  # already gone
    store.delete(("nobody",), "nothing")


@pytest.mark.parametrize("namespace", [(), ("a.b",), ("",), ("langgraph", "x")])
def test_an_invalid_namespace_is_refused(store: BaseStore, namespace: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        store.put(namespace, "k", {"v": 1})


# -- search ----------------------------------------------------------------------------------
def test_search_without_a_query_lists_the_prefix_exactly(store: BaseStore) -> None:
    fill(store)
    assert keys(store.search(("docs",))) == {"a1", "a2", "w1", "b1"}  # not ("docsx",)
    assert keys(store.search(("docs", "alice"))) == {"a1", "a2", "w1"}
    assert keys(store.search(("docs", "alice", "work"))) == {"w1"}
    assert keys(store.search(("docs", "carol"))) == set()
    assert keys(store.search(())) == {"a1", "a2", "w1", "b1", "x1"}
    found = store.search(("docs", "bob"))
    assert all(isinstance(i, SearchItem) and i.score is None for i in found)
    assert found[0].value == DOCS[("docs", "bob")]["b1"] and found[0].namespace == ("docs", "bob")


@pytest.mark.parametrize(("flt", "expected"), [
    ({"kind": "hobby"}, {"a1", "b1"}),
    ({"kind": {"$eq": "hobby"}}, {"a1", "b1"}),
    ({"kind": {"$ne": "hobby"}}, {"a2", "w1"}),
    ({"year": {"$gt": 2020}}, {"a2", "w1"}),
    ({"year": {"$gte": 2020}}, {"a2", "w1", "b1"}),
    ({"year": {"$lt": 2020}}, {"a1"}),
    ({"year": {"$lte": 2020}}, {"a1", "b1"}),
    ({"year": {"$gt": 2019, "$lt": 2023}}, {"a2", "b1"}),
    ({"kind": "hobby", "year": {"$gt": 2019}}, {"b1"}),
    ({"meta": {"team": "payments"}}, {"w1"}),
    ({"meta": {"level": {"$gte": 3}}}, {"w1"}),
    ({"kind": "nothing"}, set()),
])
def test_search_filters_values_with_langgraphs_operators(store: BaseStore, flt: dict, expected: set[str]) -> None:
    fill(store)
    assert keys(store.search(("docs",), filter=flt)) == expected


def test_limit_and_offset_page_through_the_items(store: BaseStore) -> None:
    for i in range(7):
        store.put(("pages",), f"k{i}", {"text": f"page number {i}", "i": i})
    pages = [store.search(("pages",), limit=3, offset=o) for o in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert set().union(*map(keys, pages)) == {f"k{i}" for i in range(7)}
    assert len(store.search(("pages",), limit=2)) == 2
    assert store.search(("pages",), offset=7) == []


def test_a_query_ranks_the_relevant_item_first(store: BaseStore) -> None:
    fill(store)
    found = store.search(("docs",), query="cello orchestra")
    assert found[0].key == "b1"
    assert all(isinstance(i.score, float) for i in found)
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)


def test_a_query_stays_inside_the_prefix_and_the_filter(store: BaseStore) -> None:
    fill(store)
    assert keys(store.search(("docs", "alice"), query="cello orchestra")) <= {"a1", "a2", "w1"}
    found = store.search(("docs",), query="Alice", filter={"kind": "hobby"})
    assert keys(found) <= {"a1", "b1"} and found[0].key == "a1"
    assert len(store.search(("docs",), query="Alice", limit=2)) == 2
    first, second = (store.search(("docs",), query="Alice", limit=1, offset=o) for o in (0, 1))
    assert keys(first).isdisjoint(keys(second))


def test_a_filter_operator_langgraph_does_not_define_is_refused(store: BaseStore) -> None:
    fill(store)
    with pytest.raises(ValueError):
        store.search(("docs",), filter={"year": {"$regex": "20.*"}})


def test_an_unindexed_item_is_still_stored_and_listed(store: BaseStore) -> None:
    store.put(("notes",), "plain", {"text": "not for vector search"}, index=False)
    assert store.get(("notes",), "plain").value == {"text": "not for vector search"}
    assert keys(store.search(("notes",))) == {"plain"}


def test_index_fields_choose_what_a_query_sees(store: BaseStore) -> None:
    store.put(("notes",), "n1", {"title": "quarterly budget", "body": "zebra migration"}, index=["title"])
    store.put(("notes",), "n2", {"title": "zebra migration", "body": "quarterly budget"}, index=["title"])
    assert store.search(("notes",), query="zebra migration")[0].key == "n2"
    assert store.search(("notes",), query="quarterly budget")[0].key == "n1"


# -- namespaces ------------------------------------------------------------------------------
def test_list_namespaces_with_prefix_suffix_wildcards_and_depth(store: BaseStore) -> None:
    fill(store)
    everything = [("docs", "alice"), ("docs", "alice", "work"), ("docs", "bob"), ("docsx",)]
    assert store.list_namespaces() == everything
    assert store.list_namespaces(prefix=("docs",)) == everything[:3]
    assert store.list_namespaces(prefix=("docs", "alice")) == everything[:2]
    assert store.list_namespaces(suffix=("bob",)) == [("docs", "bob")]
    assert store.list_namespaces(prefix=("docs", "*", "work")) == [("docs", "alice", "work")]
    assert store.list_namespaces(prefix=("*", "alice")) == everything[:2]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("docsx",)]
    assert store.list_namespaces(prefix=("docs",), max_depth=2) == [("docs", "alice"), ("docs", "bob")]
    assert store.list_namespaces(limit=2) == everything[:2]
    assert store.list_namespaces(limit=2, offset=2) == everything[2:]


# -- batch and async -------------------------------------------------------------------------
def test_batch_returns_one_result_per_operation_in_order(store: BaseStore) -> None:
    store.put(("b",), "old", {"text": "old item"})
    results = store.batch([
        PutOp(("b",), "new", {"text": "new item"}),
        GetOp(("b",), "old"),
        SearchOp(("b",), limit=10),
        ListNamespacesOp(max_depth=1),
        PutOp(("b",), "old", None),  # a put of None deletes
    ])
    assert results[0] is None and results[4] is None
    assert results[1].value == {"text": "old item"}
    assert keys(results[2]) >= {"old"}
    assert results[3] == [("b",)]
    assert store.get(("b",), "old") is None and store.get(("b",), "new").value == {"text": "new item"}


@pytest.mark.asyncio
async def test_the_async_methods_mirror_the_sync_ones(store: BaseStore) -> None:
    words = ["apple", "violin", "glacier", "tractor", "saffron", "lantern"]
    await asyncio.gather(*(store.aput(("async", f"u{i % 2}"), f"k{i}", {"text": f"a {w} item", "i": i})
                           for i, w in enumerate(words)))
    assert (await store.aget(("async", "u0"), "k2")).value == {"text": "a glacier item", "i": 2}
    assert keys(await store.asearch(("async",), filter={"i": {"$gte": 4}})) == {"k4", "k5"}
    assert (await store.asearch(("async",), query="tractor"))[0].key == "k3"
    assert await store.alist_namespaces(prefix=("async",)) == [("async", "u0"), ("async", "u1")]
    await store.adelete(("async", "u0"), "k2")
    assert await store.aget(("async", "u0"), "k2") is None
    [got] = await store.abatch([GetOp(("async", "u1"), "k1")])
    assert got.value["i"] == 1
