"""What BeeWeaveStore adds to the BaseStore contract: scopes, TTL, index settings, JSON values,
a non-blocking event loop, persistence, and bad input that changes nothing."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import pytest
from langgraph.store.base import PutOp

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.records import ChunkStatus
from beeweave_langchain import BeeWeaveStore
from beeweave_langchain.store import item_id


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def timed(clock: Clock):
    m = BeeWeave(embedder=HashingEmbedder(32), clock=clock)
    yield m
    m.close()


def test_namespaces_map_to_beeweave_scopes(memory) -> None:
    store = BeeWeaveStore(memory, agent_level=2, session_level=3)
    store.put(("memories", "alice", "planner", "s1"), "k", {"text": "Alice flies to Oslo"})
    store.put(("shared",), "k", {"text": "a note for everyone"})
    chunk = memory.get(item_id(("memories", "alice", "planner", "s1"), "k"))
    assert (chunk.user_id, chunk.agent_id, chunk.session_id) == ("alice", "planner", "s1")
    assert memory.get(item_id(("shared",), "k")).user_id == "langgraph"  # no user level: the default user
    # the engine's own search sees the items with their scope
    [hit] = memory.search("Oslo", user_id="alice")
    assert hit.id == item_id(("memories", "alice", "planner", "s1"), "k")
    assert store.search(("memories", "bob"), query="Oslo") == []


def test_the_store_ignores_memories_it_did_not_write(memory) -> None:
    memory.add("Alice flies to Oslo", user_id="alice")
    store = BeeWeaveStore(memory)
    assert store.search(("memories", "alice"), query="Oslo") == []
    assert store.list_namespaces() == []


def test_ttl_sets_expires_at_and_an_expired_item_is_gone(timed, clock: Clock) -> None:
    store = BeeWeaveStore(timed)
    store.put(("cache",), "short", {"text": "a short lived note"}, ttl=10)
    store.put(("cache",), "long", {"text": "a long lived note"})
    assert timed.get(item_id(("cache",), "short")).expires_at == clock.now + timedelta(minutes=10)
    clock.now += timedelta(minutes=5)
    assert store.get(("cache",), "short") is not None  # a read refreshes the ttl: now expires at +15
    clock.now += timedelta(minutes=9)
    assert store.get(("cache",), "short", refresh_ttl=False) is not None
    clock.now += timedelta(minutes=2)
    assert store.get(("cache",), "short") is None
    assert {i.key for i in store.search(("cache",))} == {"long"}
    assert {i.key for i in store.search(("cache",), query="note")} == {"long"}
    assert store.sweep() == 1 and timed.count() == 1


def test_an_expired_item_is_absent_from_the_engines_search_and_maintenance_deletes_it(timed, clock: Clock) -> None:
    # A trial put a one-time code with a TTL: the store hid it once expired, but the engine's
    # search (so the retrievers, the middleware and MCP) kept returning it, and maintain()
    # kept it (items are pinned).
    store = BeeWeaveStore(timed)
    store.put(("memories", "alice"), "otp", {"text": "Alice one-time code 884211"}, ttl=1)
    store.put(("memories", "alice"), "home", {"text": "Alice code word is heron"})
    assert item_id(("memories", "alice"), "otp") in [h.id for h in timed.search("Alice one-time code",
                                                                                  user_id="alice", k=10)]
    clock.now += timedelta(minutes=2)
    assert [h.id for h in timed.search("Alice one-time code", user_id="alice", k=10)] == [
        item_id(("memories", "alice"), "home")]
    report = timed.maintain()
    assert report.expired == 1 and timed.count() == 1
    assert timed.get_many([item_id(("memories", "alice"), "otp")]) == []


def test_sweep_interval_minutes_sweeps_in_the_background() -> None:
    memory = BeeWeave(embedder=HashingEmbedder(32))  # the real clock: the sweeper runs in real time
    store = BeeWeaveStore(memory, ttl={"sweep_interval_minutes": 0.002})  # every 0.12 s
    try:
        store.put(("cache",), "k", {"text": "x"}, ttl=0.001)  # 0.06 s
        deadline = time.monotonic() + 10
        while memory.count() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.count() == 0
    finally:
        assert store.stop_ttl_sweeper(5)
        with pytest.raises(InvalidInputError, match="sweep_interval_minutes"):
            BeeWeaveStore(memory, ttl={"sweep_interval_minutes": 0})
        memory.close()


def test_a_read_racing_a_delete_is_a_miss_not_an_error(timed, monkeypatch) -> None:
    # Refresh on read updated an item another thread had just deleted: NotFoundError.
    store = BeeWeaveStore(timed, ttl={"default_ttl": 60})
    store.put(("ns",), "x", {"text": "x"})
    real_update = timed.update

    def deleted_meanwhile(chunk_id, **changes):
        timed.delete(chunk_id)
        return real_update(chunk_id, **changes)

    monkeypatch.setattr(timed, "update", deleted_meanwhile)
    item = store.get(("ns",), "x")
    assert item is not None and item.key == "x"  # what was read; the refresh found nothing to keep alive


def test_the_default_ttl_comes_from_the_ttl_config(timed, clock: Clock) -> None:
    store = BeeWeaveStore(timed, ttl={"default_ttl": 1, "refresh_on_read": False})
    store.put(("cache",), "k", {"text": "x"})
    clock.now += timedelta(seconds=50)
    store.get(("cache",), "k")  # no refresh
    clock.now += timedelta(seconds=20)
    assert store.get(("cache",), "k") is None


def test_index_settings_are_honoured_or_refused(memory) -> None:
    BeeWeaveStore(memory, index={"dims": 32, "fields": ["text"]})
    with pytest.raises(InvalidInputError, match="embedder"):
        BeeWeaveStore(memory, index={"dims": 32, "embed": "openai:text-embedding-3-small"})
    with pytest.raises(InvalidInputError, match="dimension"):
        BeeWeaveStore(memory, index={"dims": 1536})
    store = BeeWeaveStore(memory, index={"fields": ["title"]})
    store.put(("n",), "k", {"title": "zebra", "body": "quarterly budget"})
    assert memory.get(item_id(("n",), "k")).raw_content == "zebra"
    assert store.search(("n",), query="zebra")[0].key == "k"


def test_a_bad_put_in_a_batch_writes_nothing(memory) -> None:
    store = BeeWeaveStore(memory)
    with pytest.raises(InvalidInputError):
        store.batch([PutOp(("a",), "good", {"text": "fine"}), PutOp(("a",), "bad", {"when": datetime.now()})])
    with pytest.raises(InvalidInputError):
        store.put(("a",), "nan", {"x": float("nan")})
    with pytest.raises(InvalidInputError):
        store.put(("a",), "k", {"text": "x"}, ttl=-1)
    assert memory.count() == 0


def test_abatch_does_not_block_the_event_loop(memory) -> None:
    store = BeeWeaveStore(memory)
    calls = []
    search = memory.search

    def slow_search(*args, **kwargs):
        time.sleep(0.3)  # a slow engine (a remote database, a big model)
        calls.append(1)
        return search(*args, **kwargs)

    memory.search = slow_search
    store.put(("a",), "k", {"text": "hello world"})

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        found = await store.asearch(("a",), query="hello")
        task.cancel()
        assert found[0].key == "k" and calls
        return ticks

    assert asyncio.run(main()) >= 10  # the loop kept running while the engine worked


def test_items_survive_a_reopen(tmp_path) -> None:
    path = tmp_path / "store.db"
    with BeeWeave(path, embedder=HashingEmbedder(32)) as m:
        BeeWeaveStore(m).put(("memories", "alice"), "diet", {"text": "vegetarian", "since": 2019})
        created = BeeWeaveStore(m).get(("memories", "alice"), "diet").created_at
    with BeeWeave(path, embedder=HashingEmbedder(32)) as m:
        item = BeeWeaveStore(m).get(("memories", "alice"), "diet")
        assert item.value == {"text": "vegetarian", "since": 2019} and item.created_at == created
        assert BeeWeaveStore(m).list_namespaces() == [("memories", "alice")]


def test_a_deleted_namespace_is_no_longer_listed(memory) -> None:
    store = BeeWeaveStore(memory)
    store.put(("a", "b"), "k", {"text": "x"})
    store.delete(("a", "b"), "k")
    assert store.list_namespaces() == []


def test_maintenance_never_merges_or_hides_an_item(memory) -> None:
    # Two items of the same words under different keys and namespaces, and an agent's own
    # memory of the same words: maintenance used to fold k3 into k1 (k3 vanished from its
    # namespace, k1 showed up in k3's) and a later put of k3 stayed invisible.
    store = BeeWeaveStore(memory)
    store.put(("memories", "alice"), "k1", {"text": "Alice is allergic to peanuts."})
    store.put(("memories", "alice", "work"), "k3", {"text": "Alice is allergic to peanuts!"})
    own = memory.add("Alice is allergic to peanuts", user_id="alice")
    memory.maintain()
    assert keys_of(store.search(("memories",))) == {"k1", "k3"}
    assert keys_of(store.search(("memories", "alice", "work"))) == {"k3"}
    assert store.list_namespaces() == [("memories", "alice"), ("memories", "alice", "work")]
    for ns, key in ((("memories", "alice"), "k1"), (("memories", "alice", "work"), "k3")):
        chunk = memory.get(item_id(ns, key))
        assert chunk.status is ChunkStatus.ACTIVE and chunk.pinned and chunk.metadata["kind"] == "item"
    assert memory.get(own).status is ChunkStatus.ACTIVE  # not absorbed into an item either
    store.put(("memories", "alice", "work"), "k3", {"text": "Alice now works at Initech."})
    assert [i.key for i in store.search(("memories",), query="Initech", limit=1)] == ["k3"]


def test_a_put_replaces_the_value_without_a_version(memory) -> None:
    # LangGraph's put replaces; an item updated every turn must not grow a history without end.
    store = BeeWeaveStore(memory)
    for text in ("vegetarian", "vegan", "pescatarian"):
        store.put(("memories", "alice"), "diet", {"text": text})
    assert memory.history(item_id(("memories", "alice"), "diet")) == []


def test_a_put_makes_an_archived_or_unpinned_item_live_again(memory) -> None:
    store = BeeWeaveStore(memory)
    store.put(("memories", "alice"), "diet", {"text": "vegetarian"})
    cid = item_id(("memories", "alice"), "diet")
    memory.update(cid, status="archived", pinned=False)  # a person's edit, or an older version
    assert store.search(("memories", "alice")) == []
    store.put(("memories", "alice"), "diet", {"text": "vegan"})
    assert [i.value for i in store.search(("memories", "alice"))] == [{"text": "vegan"}]
    assert memory.get(cid).pinned


def test_redact_applies_the_memory_redaction_to_items(memory) -> None:
    value = {"text": "Call Alice at 13812345678", "email": "alice@example.com"}
    store = BeeWeaveStore(memory, redact=True)
    for _ in range(2):  # the first put adds the memory, the second updates it: both redact
        store.put(("contacts",), "alice", value)
        got = store.get(("contacts",), "alice").value
        assert "13812345678" not in str(got) and "alice@example.com" not in str(got)
        assert "13812345678" not in memory.get(item_id(("contacts",), "alice")).content
    store.put(("notes",), "short", {"text": "hi"})  # redaction only: nothing is held for review
    assert store.get(("notes",), "short").value == {"text": "hi"}
    assert [i.key for i in store.search(("notes",), query="hi")] == ["short"]
    with pytest.raises(InvalidInputError):
        BeeWeaveStore(memory, redact="yes")


def keys_of(items: list) -> set[str]:
    return {i.key for i in items}
