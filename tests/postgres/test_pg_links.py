"""Linking inside the insert on PostgreSQL (StoreBackend.insert_linked: the insert, the
link reads in one round trip, the edges, one transaction) gives the embedded store's
edges, and a failure anywhere in it stores nothing."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder, KnowledgeChunk
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.links import LinkReads
from beeweave_core.store.postgres import PostgresStore
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.support import sentence

pytestmark = pytest.mark.slow

NOW = datetime(2024, 6, 1, tzinfo=timezone.utc)
WORDS = ["kiwi", "mango", "lime", "papaya", "quince", "fig", "grape", "melon"]


def _records(n: int) -> list[dict]:
    """Memories added one at a time in shuffled time order, so new ones land between old
    session neighbours (whose direct edge they replace), with shared tags and entities and
    a small vocabulary, so the hashing vectors find semantic neighbours over the threshold."""
    rnd = random.Random(7)
    out = [{"content": sentence(rnd, 2, 5, WORDS), "user_id": rnd.choice(["ann", "bob"]), "chunk_id": f"m{i}",
            "session_id": rnd.choice(["s0", "s1", None]), "timestamp": 1_700_000_000 + rnd.randint(0, 40) * 60,
            "tags": rnd.sample(["work", "home", "food"], rnd.randint(0, 2)),
            "entities": rnd.sample(["Paris", "Acme", "Bob"], rnd.randint(0, 2))} for i in range(n)]
    rnd.shuffle(out)
    return out


def _edges(memory: BeeWeave, ids: list[str]) -> list[tuple[str, str, str, float]]:
    return sorted((e.source_id, e.target_id, e.type.value, round(e.weight, 5)) for e in memory.backend.edges(ids))


def test_single_and_batched_adds_link_as_the_embedded_store(pg_url) -> None:  # noqa: F811
    records = _records(60)
    ids = [r["chunk_id"] for r in records]
    with BeeWeave.from_url(pg_url, embedder=HashingEmbedder(32), tenant=new_tenant(), clock=lambda: NOW) as pg, \
            BeeWeave(embedder=HashingEmbedder(32), clock=lambda: NOW) as lite:
        for memory in (pg, lite):
            for r in records[:40]:
                memory.add(**r)
            memory.add_many(records[40:50])
            memory.add_many(records[50:], batch_size=4)  # several batches: the ids checked first
        got, want = _edges(pg, ids), _edges(lite, ids)
        assert got == want
        kinds = {e[2] for e in got}
        assert kinds == {"semantic", "session", "tag", "entity"}
        # BeeWeave.link (the reads by the protocol's own calls) mines stored memories alike
        for memory in (pg, lite):
            memory.link(memory.get_many(ids[:10]))
        assert _edges(pg, ids) == _edges(lite, ids) != got


def _row(cid: str, seed: int, session: str = "s") -> ChunkRow:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return ChunkRow(KnowledgeChunk(raw_content=f"kiwi {cid}", id=cid, user_id="ann", session_id=session),
                    v / np.linalg.norm(v), ["kiwi", cid])


def test_a_failure_while_linking_stores_nothing(pg_url) -> None:  # noqa: F811
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        store.insert([_row("a", 1), _row("b", 2)])
        reads = LinkReads(similar=[(_row("c", 3).vector, build_filter({"user_id": "ann"}), 3)],
                          sessions=[build_filter({"user_id": "ann", "session_id": "s"})])

        def derive(facts):
            assert facts.sessions[0][0] == ["a", "b", "c"]  # the reads saw the row being inserted
            raise RuntimeError("the graph part failed")

        with pytest.raises(RuntimeError):
            store.insert_linked([_row("c", 3)], reads, derive)
        assert store.contains(["a", "b", "c"]) == {"a", "b"} and store.count() == 2
        assert store.lexical_search({"c": 1}, build_filter(None), 5) == []
    finally:
        store.close()


def test_a_failure_while_linking_leaves_a_built_local_index_without_the_record(pg_url) -> None:  # noqa: F811
    """The local index takes an insert only once its transaction committed."""
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        store.insert([_row("a", 1), _row("b", 2)])
        everyone = build_filter({"user_id": "ann"})
        assert sorted(store.retrieve({"kiwi": 1}, _row("a", 1).vector, everyone, 5).ids) == ["a", "b"]
        reads = LinkReads(similar=[(_row("c", 3).vector, everyone, 3)])

        def derive(facts):
            raise RuntimeError("the graph part failed")

        with pytest.raises(RuntimeError):
            store.insert_linked([_row("c", 3)], reads, derive)
        assert "c" not in store.local.index
        assert sorted(store.retrieve({"kiwi": 1}, _row("c", 3).vector, everyone, 5).ids) == ["a", "b"]
    finally:
        store.close()


@contextmanager
def _two(url: str) -> Iterator[tuple[BeeWeave, BeeWeave]]:
    """Two memories on one new tenant."""
    tenant = new_tenant()
    with BeeWeave.from_url(url, embedder=HashingEmbedder(32), tenant=tenant,
                           clock=lambda: NOW) as first, \
            BeeWeave.from_url(url, embedder=HashingEmbedder(32), tenant=tenant, clock=lambda: NOW) as other:
        yield first, other


def _spy_send(monkeypatch) -> list[bool]:
    """Record, for each linking pass sent, whether its nearest records came from a local index."""
    from beeweave_core.store.postgres import links as pg_links

    used: list[bool] = []
    real = pg_links.send

    def spy(store, conn, reads, near=None):
        used.append(near is not None)
        return real(store, conn, reads, near)

    monkeypatch.setattr(pg_links, "send", spy)
    return used


def test_adds_read_their_nearest_records_from_a_built_local_index_and_link_alike(pg_url, monkeypatch) -> None:  # noqa: F811
    records = _records(60)
    ids = [r["chunk_id"] for r in records]
    used = _spy_send(monkeypatch)
    with BeeWeave.from_url(pg_url, embedder=HashingEmbedder(32), tenant=new_tenant(), clock=lambda: NOW) as pg, \
            BeeWeave(embedder=HashingEmbedder(32), clock=lambda: NOW) as lite:
        for memory in (pg, lite):
            # the local index is not built yet: an exact scan in SQL reads (an add loads nothing)
            memory.add(**records[0])
            memory.search("kiwi mango", user_id="ann")  # builds it
            for r in records[1:40]:
                memory.add(**r)
            memory.add_many(records[40:])  # a batch: the index, and the batch's own records
        assert _edges(pg, ids) == _edges(lite, ids)
        assert {e[2] for e in _edges(pg, ids)} >= {"semantic"}
    assert used == [False] + [True] * 40


def test_a_write_after_the_local_read_is_caught_up_under_the_lock(pg_url, monkeypatch) -> None:  # noqa: F811
    """When another store wrote between the add's local read and its lock, the index takes
    that write inside the add's transaction and answers, and links the other store's record."""
    from beeweave_core.store.postgres.local import LocalIndex

    used = _spy_send(monkeypatch)
    tenant = new_tenant()
    with BeeWeave.from_url(pg_url, embedder=HashingEmbedder(32), tenant=tenant, clock=lambda: NOW) as first, \
            BeeWeave.from_url(pg_url, embedder=HashingEmbedder(32), tenant=tenant, clock=lambda: NOW) as other:
        first.add("kiwi mango lime", user_id="ann", chunk_id="a0")
        first.search("kiwi", user_id="ann")  # builds the local index
        caught = []
        real, real_locked = LocalIndex.nearest, LocalIndex.nearest_locked

        def then_another_store_writes(self, similar, **kw):
            got = real(self, similar, **kw)
            if self is first.backend.local:
                other.add("papaya quince fig", user_id="ann", chunk_id="b0")  # committed before the add's lock
            return got

        def spy_locked(self, conn, high, similar, writing):
            caught.append(high)
            return real_locked(self, conn, high, similar, writing)

        monkeypatch.setattr(LocalIndex, "nearest", then_another_store_writes)
        monkeypatch.setattr(LocalIndex, "nearest_locked", spy_locked)
        first.add("papaya quince fig", user_id="ann", chunk_id="a1")
        semantic = {(e.source_id, e.target_id) for e in first.backend.edges(["a1"]) if e.type.value == "semantic"}
        assert ("a1", "b0") in semantic or ("b0", "a1") in semantic  # the index took b0 first
        assert "b0" in first.backend.local.index and len(caught) == 1
        assert not first.backend.verify().problems
    assert used[-1] is True


def test_an_add_reading_a_trusted_index_behind_another_stores_write_catches_up(pg_url, monkeypatch) -> None:  # noqa: F811
    """After a search found the index current, an add reads its nearest records from it
    without checking the log first; when another store wrote in between, the check under
    the write lock catches the index up there, and the add links the other store's record too."""
    used = _spy_send(monkeypatch)
    with _two(pg_url) as (first, other):
        first.add("kiwi mango lime", user_id="ann", chunk_id="a0")
        first.search("kiwi", user_id="ann")
        first.search("kiwi", user_id="ann")
        assert first.backend.local.trusted
        first.add("kiwi lime tart", user_id="ann", chunk_id="a1")  # from the index, taken back from memory
        assert used[-1] is True and first.backend.local.trusted
        other.add("papaya quince fig", user_id="ann", chunk_id="b0")
        first.add("papaya quince fig", user_id="ann", chunk_id="a2")
        assert used[-1] is True
        semantic = {(e.source_id, e.target_id) for e in first.backend.edges(["a2"]) if e.type.value == "semantic"}
        assert ("a2", "b0") in semantic or ("b0", "a2") in semantic
        assert first.backend.local.trusted  # caught up under the lock, then its own insert taken
        other.add("grape melon fig", user_id="ann", chunk_id="b1")
        first.add("grape melon lime", user_id="ann", chunk_id="a3")  # behind again: caught up under the lock
        assert used[-1] is True
        semantic = {(e.source_id, e.target_id) for e in first.backend.edges(["a3"]) if e.type.value == "semantic"}
        assert ("a3", "b1") in semantic or ("b1", "a3") in semantic
        assert {h.id for h in first.search("papaya quince fig", user_id="ann", k=5)} >= {"a2", "b0"}


def test_an_add_never_loads_the_local_index(pg_url, monkeypatch) -> None:  # noqa: F811
    """A rebuild asked for by another store (a forgotten user) is left to the next search:
    the add reads its nearest records in SQL instead of loading the tenant."""
    used = _spy_send(monkeypatch)
    with _two(pg_url) as (first, other):
        first.add("kiwi mango lime", user_id="ann", chunk_id="a0")
        other.add("papaya quince fig", user_id="bob", chunk_id="b0")
        first.search("kiwi", user_id="ann")  # builds the local index
        local = first.backend.local
        loads = local.loads
        other.backend.delete_user("bob")  # logs a rebuild
        first.add("kiwi mango papaya", user_id="ann", chunk_id="a1")
        assert local.loads == loads and used[-1] is False
        assert first.backend.contains(["a1"]) == {"a1"}
        first.search("kiwi", user_id="ann")
        assert local.loads == loads + 1


def test_an_id_deleted_by_another_store_and_added_again_is_indexed_once(pg_url) -> None:  # noqa: F811
    """The catch-up under an add's lock must not read the add's own uncommitted row: when
    another store deleted the id this add writes again, the add reads in SQL instead, and
    the index holds the record once (and not at all when the add fails)."""
    tenant = new_tenant()
    with BeeWeave.from_url(pg_url, embedder=HashingEmbedder(32), tenant=tenant, clock=lambda: NOW) as a, \
            BeeWeave.from_url(pg_url, embedder=HashingEmbedder(32), tenant=tenant, clock=lambda: NOW) as b:
        a.add("kiwi mango lime", user_id="ann", chunk_id="x")
        a.search("kiwi", user_id="ann")  # builds the index
        a.add("papaya quince fig", user_id="ann", chunk_id="y")  # taken from memory: trusted
        b.backend.delete(["x"])
        a.add("kiwi mango lime melon", user_id="ann", chunk_id="x")
        index = a.backend.local.index
        assert [i for i in index.ids if i == "x"] == ["x"]
        q = np.asarray(HashingEmbedder(32).embed_documents(["kiwi mango lime melon"])[0], np.float32)
        everyone = build_filter({}, user_id="ann")
        assert [i for i, _ in a.backend.vector_search(q, everyone, 5)].count("x") == 1
        a.backend.delete(["x"])
        assert "x" not in [i for i, _ in a.backend.vector_search(q, everyone, 5)]
        b.backend.delete(["y"])  # and an add that fails leaves nothing behind

        def derive(facts):
            raise RuntimeError("the graph part failed")

        row = ChunkRow(KnowledgeChunk(raw_content="papaya quince fig", id="y", user_id="ann"), q, ["papaya"])
        with pytest.raises(RuntimeError):
            a.backend.insert_linked([row], LinkReads(similar=[(q, everyone, 3)]), derive)
        assert not a.backend.contains(["y"]) and "y" not in [i for i, _ in a.backend.vector_search(q, everyone, 5)]
