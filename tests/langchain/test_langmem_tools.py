"""LangMem's memory tools (create_manage_memory_tool / create_search_memory_tool) on a BeeWeaveStore."""

from __future__ import annotations

import json

import pytest

from beeweave_langchain import BeeWeaveStore

langmem = pytest.importorskip("langmem")

CONFIG = {"configurable": {"langgraph_user_id": "alice"}}


def test_langmem_creates_updates_searches_and_deletes_on_beeweave(memory) -> None:
    store = BeeWeaveStore(memory)
    ns = ("memories", "{langgraph_user_id}")
    manage = langmem.create_manage_memory_tool(namespace=ns, store=store)
    search = langmem.create_search_memory_tool(namespace=ns, store=store, response_format="content")
    out = manage.invoke({"content": "Alice prefers window seats on trains.", "action": "create"}, config=CONFIG)
    key = out.rsplit(" ", 1)[-1]
    [item] = store.search(("memories", "alice"))
    assert item.key == key and item.value == {"content": "Alice prefers window seats on trains."}
    assert memory.search("window seats", user_id="alice")[0].chunk.user_id == "alice"  # a BeeWeave memory of alice

    manage.invoke({"content": "Alice prefers aisle seats on trains.", "action": "update", "id": key}, config=CONFIG)
    found = json.loads(search.invoke({"query": "which seat on trains"}, config=CONFIG))
    assert [(f["key"], f["value"]["content"]) for f in found] == [(key, "Alice prefers aisle seats on trains.")]
    assert store.search(("memories", "bob")) == []  # scoped by the user in the namespace

    manage.invoke({"action": "delete", "id": key}, config=CONFIG)
    assert store.search(("memories", "alice")) == [] and memory.count() == 0
