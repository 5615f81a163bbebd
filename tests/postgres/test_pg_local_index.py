"""PostgresStore's local index (store/postgres/local.py): a search's candidates come from an
index held in the process and caught up from the change log, and must equal what a store
opened afresh (its index loaded from the rows) answers (same ids, BM25 and context-vector
scores to 1e-6, the same lexical evidence, fields and records), and see every write
committed before the search,
whichever store (process, host) committed it: inserts, updates that move a record out of a
filter or into another session, new text, deletes, a forgotten user, a repair, a dropped
tenant, and a log pruned past what the index holds."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import numpy as np
import pytest

from beeweave_core import ChunkStatus, IndexConfig
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.postgres import store as pg_store
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.postgres.test_pg_parity import DIM, make_rows, queries, random_filters
from tests.support import term_counts, unit_vectors

pytestmark = pytest.mark.slow

# Every record, whatever its status.
EVERY = build_filter({"status": ["active", "archived"]})


@contextmanager
def _pair(url: str, cfg: IndexConfig | None = None) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one tenant, a writer and a searching one; both closed after."""
    tenant = new_tenant()
    writer = PostgresStore(url, index_config=cfg, tenant=tenant)
    local = PostgresStore(url, tenant=tenant)
    try:
        yield writer, local
    finally:
        writer.close()
        local.close()


def _held(local: PostgresStore, vector: np.ndarray) -> list[str]:
    """The ids a search of every record (up to 100) finds through the local index."""
    return local.retrieve({}, vector, EVERY, 100).ids


def assert_same_candidates(fresh: PostgresStore, local: PostgresStore, terms: dict, qvec: np.ndarray,
                           flt: dict, k: int) -> None:
    f = build_filter(flt)
    evidence = sorted(terms)[:3]
    want = fresh.retrieve(terms, qvec, f, k, evidence=evidence)
    got = local.retrieve(terms, qvec, f, k, evidence=evidence)
    assert got.ids == want.ids, (terms, flt)
    np.testing.assert_allclose(got.lexical, want.lexical, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.vector, want.vector, rtol=0, atol=1e-5)
    assert got.fields == want.fields
    assert got.records(got.ids) == want.records(want.ids)
    assert got.evidence is not None and want.evidence is not None
    assert set(got.evidence.best) == set(want.evidence.best)
    for term, score in want.evidence.best.items():
        assert got.evidence.best[term] == pytest.approx(score, abs=1e-6)
    for cid in got.ids:
        assert got.evidence.lexical.get(cid, 0.0) == pytest.approx(want.evidence.lexical.get(cid, 0.0), abs=1e-6)


def _check_all(writer, local, rnd, rng) -> None:
    """``local``'s candidates against a store opened now, whose index is loaded from the rows."""
    qvec = unit_vectors(rng, 1, DIM)[0]
    fresh = PostgresStore(writer.url, schema=writer.schema, tenant=writer.tenant, pool_size=1)
    try:
        for flt in random_filters(rnd):
            for terms in queries(rnd)[:3]:
                assert_same_candidates(fresh, local, terms, qvec, flt, 12)
    finally:
        fresh.close()


@pytest.mark.parametrize("cfg", [IndexConfig(), IndexConfig(context_radius=0)], ids=["context", "plain"])
def test_local_candidates_equal_a_fresh_load_through_every_kind_of_write(pg_url, cfg) -> None:  # noqa: F811
    rnd, rng = random.Random(11), np.random.default_rng(11)
    with _pair(pg_url, cfg) as (writer, local):
        rows = make_rows(rnd, rng, 200)
        writer.insert(rows[:120])
        _check_all(writer, local, rnd, rng)  # the first search builds the index
        assert local.local.loads == 1
        writer.insert(rows[120:])  # another store's writes: caught up, not rebuilt
        _check_all(writer, local, rnd, rng)
        ids = [r.chunk.id for r in rows]
        writer.delete(rnd.sample(ids, 30))
        alive = sorted(writer.contains(ids))
        changed = []
        for cid in rnd.sample(alive, 30):  # moves in time and between sessions, status, tags
            c = writer.get([cid])[cid]
            changed.append(c.copy(timestamp=c.timestamp + timedelta(hours=rnd.randint(-5, 5)),
                                  session_id=rnd.choice(["s1", "s2", None]),
                                  status=rnd.choice([ChunkStatus.ACTIVE, ChunkStatus.ARCHIVED]), tags=["z"]))
        writer.update(changed)
        vecs = unit_vectors(rng, 10, DIM)
        new_text = [ChunkRow(writer.get([cid])[cid].copy(raw_content="fresh words here"), vecs[i],
                             ["fresh", "words", "here"]) for i, cid in enumerate(rnd.sample(alive, 10))]
        writer.replace(new_text)
        _check_all(writer, local, rnd, rng)
        got = local.retrieve(term_counts(["fresh"]), vecs[0], EVERY, 20)
        assert {r.chunk.id for r in new_text} <= set(got.ids)
        assert local.local.loads == 1


def test_own_writes_and_deletes_are_seen_at_once(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(5), np.random.default_rng(5)
    with _pair(pg_url) as (_, local):
        rows = make_rows(rnd, rng, 40)
        local.insert(rows)
        assert set(_held(local, rows[0].vector)) == {r.chunk.id for r in rows}
        local.delete([rows[0].chunk.id])
        held = _held(local, rows[0].vector)
        assert rows[0].chunk.id not in held and len(held) == 39


def test_own_inserts_are_indexed_from_memory_as_a_catch_up_would(pg_url, monkeypatch) -> None:  # noqa: F811
    """This store's inserts, taken into its built index from memory (``take_own``): nothing is
    read back, and the candidates still equal a fresh load's. An insert after another
    store's write is not taken (the index is behind): the catch-up reads both."""
    from beeweave_core.store.postgres.local import LocalIndex

    rnd, rng = random.Random(17), np.random.default_rng(17)
    applied: list[int] = []
    real = LocalIndex._apply

    def counted(self, changed, got):
        applied.append(len(changed))
        return real(self, changed, got)

    monkeypatch.setattr(LocalIndex, "_apply", counted)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 160)
        local.insert(rows[:60])  # not built yet: nothing to take
        _check_all(writer, local, rnd, rng)
        assert local.local.loads == 1
        for i in range(60, 120, 12):  # batches into sessions already held: neighbours change
            local.insert(rows[i : i + 12])
            assert local.local.trusted
        _check_all(writer, local, rnd, rng)
        assert applied == [] and local.local.loads == 1
        writer.insert(rows[120:130])
        local.insert(rows[130:140])  # behind another store's write: left to the catch-up
        assert not local.local.trusted
        _check_all(writer, local, rnd, rng)
        assert applied == [20] and local.local.loads == 1
        local.insert(rows[140:])
        _check_all(writer, local, rnd, rng)
        assert applied == [20] and local.local.loads == 1
        assert set(local.local.index.slot_of) == {r.chunk.id for r in rows}


def test_own_inserts_taken_from_memory_can_be_deleted_and_rewritten(pg_url) -> None:  # noqa: F811
    """What the index took from memory is removed, moved and replaced as a caught-up record
    is (its term counts are kept for the removal)."""
    rnd, rng = random.Random(23), np.random.default_rng(23)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 80)
        local.insert(rows[:40])
        _check_all(writer, local, rnd, rng)
        local.insert(rows[40:])  # taken from memory
        ids = [r.chunk.id for r in rows[40:]]
        local.delete(ids[:10])
        writer.delete(ids[10:20])
        c = local.get([ids[20]])[ids[20]]
        local.update([c.copy(session_id="s2", status=ChunkStatus.ARCHIVED)])
        vecs = unit_vectors(rng, 2, DIM)
        writer.replace([ChunkRow(writer.get([cid])[cid].copy(raw_content="fresh words"), vecs[i], ["fresh", "words"])
                     for i, cid in enumerate(ids[21:23])])
        _check_all(writer, local, rnd, rng)
        assert set(local.local.index.slot_of) == writer.contains([r.chunk.id for r in rows])
        assert local.local.loads == 1


def test_an_insert_caught_up_before_the_index_takes_it_is_not_taken_twice(pg_url, monkeypatch) -> None:  # noqa: F811
    """Another thread's search may catch the committed insert up from the log before this
    thread's ``take_own`` runs; the index then holds it once."""
    from beeweave_core.store.postgres.local import LocalIndex

    rnd, rng = random.Random(29), np.random.default_rng(29)
    real = LocalIndex.take_own

    def search_first(self, own):
        self.refresh()  # as a search in another thread would, between the commit and this
        real(self, own)

    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 50)
        local.insert(rows[:30])
        _check_all(writer, local, rnd, rng)
        monkeypatch.setattr(LocalIndex, "take_own", search_first)
        local.insert(rows[30:])
        index = local.local.index
        assert len(index) == 50 and sorted(cid for cid in index.ids if cid is not None) == sorted(
            r.chunk.id for r in rows)
        _check_all(writer, local, rnd, rng)


@pytest.mark.parametrize("failure", [MemoryError, KeyboardInterrupt])
def test_an_own_insert_the_index_cannot_take_is_kept_and_rebuilt(pg_url, monkeypatch, failure) -> None:  # noqa: F811
    """A failure while the index takes this store's committed insert is no failure of the
    insert: it is kept, and the next search builds the index again from the rows. An
    interrupt half way is passed on, and the half-taken index is built again too."""
    from beeweave_core.index.memory_index import MemoryIndex

    rnd, rng = random.Random(19), np.random.default_rng(19)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 30)
        local.insert(rows[:20])
        _held(local, rows[0].vector)
        real = MemoryIndex.add

        def broken(self, entries):
            real(self, entries[:3])  # some of it taken, then the failure
            raise failure("no room")

        monkeypatch.setattr(MemoryIndex, "add", broken)
        if failure is KeyboardInterrupt:
            with pytest.raises(KeyboardInterrupt):
                local.insert(rows[20:])
        else:
            local.insert(rows[20:])  # committed; the index is marked for a rebuild
        monkeypatch.undo()
        assert writer.contains([r.chunk.id for r in rows[20:]]) == {r.chunk.id for r in rows[20:]}
        assert set(_held(local, rows[0].vector)) == {r.chunk.id for r in rows}
        assert local.local.loads == 2
        _check_all(writer, local, rnd, rng)


def test_forgetting_a_user_repair_and_drop_rebuild_the_index(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(3), np.random.default_rng(3)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 90)
        writer.insert(rows)
        _held(local, rows[0].vector)
        assert local.local.loads == 1
        writer.delete_user("ann")
        held = _held(local, rows[0].vector)
        assert local.local.loads == 2
        assert set(held) == {r.chunk.id for r in rows if r.chunk.user_id != "ann"}
        assert not any(c.user_id == "ann" for c in local.get(held).values())
        writer.repair()
        _check_all(writer, local, rnd, rng)
        assert local.local.loads == 3
        writer.drop_tenant()
        assert _held(local, rows[0].vector) == []
        writer.insert(rows[:5])
        assert len(_held(local, rows[0].vector)) == 5


def test_a_log_pruned_past_the_index_rebuilds_it(pg_url, monkeypatch) -> None:  # noqa: F811
    rnd, rng = random.Random(9), np.random.default_rng(9)
    monkeypatch.setattr(pg_store, "CHANGES_KEEP", 5)
    monkeypatch.setattr(pg_store, "CHANGES_PRUNE_EVERY", 1)  # every write prunes
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 60)
        writer.insert(rows[:10])
        _held(local, rows[0].vector)
        for i in range(10, 60, 5):  # 50 more entries, pruned to the last few as they come
            writer.insert(rows[i : i + 5])
        held = _held(local, rows[0].vector)
        assert local.local.loads == 2
        assert set(held) == {r.chunk.id for r in rows}


def test_a_declared_field_filter_reads_the_passing_ids_in_sql(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(4), np.random.default_rng(4)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 30)
        writer.insert(rows)
        flt = build_filter({"speaker": "ann"}, declared={"speaker": "str"})
        got = local.retrieve({}, rows[0].vector, flt, 50)
        want = {r.chunk.id for r in rows if r.chunk.metadata.get("speaker") == "ann"
                and r.chunk.status is ChunkStatus.ACTIVE}
        assert set(got.ids) == want and want


def test_bad_and_removed_url_parameters_are_refused_before_anything_opens(pg_url) -> None:  # noqa: F811
    from beeweave_core.errors import InvalidInputError

    for param, name in [("pool_size=0", "pool_size"), ("timeout=soon", "timeout"), ("read_only=maybe", "read_only"),
                        ("local_index=true", "local_index"), ("sql_search=false", "sql_search")]:
        with pytest.raises(InvalidInputError, match=name):
            PostgresStore(pg_url + "&" + param, tenant=new_tenant())


def test_concurrent_writers_lose_nothing_for_a_searching_local_index(pg_url) -> None:  # noqa: F811
    """Three stores write (inserts, updates, deletes) at once while the local one searches
    throughout; afterwards it holds exactly the database's records and answers as a fresh load does.
    (A log out of commit order would leave an index missing a write for good.)"""
    import threading

    rnd, rng = random.Random(21), np.random.default_rng(21)
    rows = make_rows(rnd, rng, 240)
    errors: list[BaseException] = []
    done = threading.Event()
    with _pair(pg_url) as (writer, local):
        writers = [PostgresStore(pg_url, tenant=writer.tenant, pool_size=2) for _ in range(3)]

        def write(w: int) -> None:
            try:
                mine = rows[w * 80 : (w + 1) * 80]
                for i in range(0, 80, 8):
                    writers[w].insert(mine[i : i + 8])
                    if i >= 16:
                        writers[w].delete([mine[i - 16].chunk.id])
                        c = writers[w].get([mine[i - 8].chunk.id])[mine[i - 8].chunk.id]
                        writers[w].update([c.copy(status=ChunkStatus.ARCHIVED, session_id="s9")])
            except BaseException as exc:
                errors.append(exc)

        def search() -> None:
            try:
                while not done.is_set():
                    local.retrieve({"alpha": 1}, rows[0].vector, EVERY, 50)
            except BaseException as exc:
                errors.append(exc)

        try:
            threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
            reader = threading.Thread(target=search)
            reader.start()
            for th in threads:
                th.start()
            for th in threads:
                th.join(120)
            done.set()
            reader.join(60)
            assert not errors, errors[0]
            local.local.refresh()
            stored = set(writer.contains([r.chunk.id for r in rows]))
            assert set(local.local.index.slot_of) == stored and len(stored) == 240 - 3 * 8
            assert local.local.loads == 1
            _check_all(writer, local, rnd, rng)
        finally:
            done.set()
            for w in writers:
                w.close()


def test_a_catch_up_that_fails_half_way_rebuilds_at_the_next_search(pg_url, monkeypatch) -> None:  # noqa: F811
    from beeweave_core.store.postgres.local import LocalIndex

    rnd, rng = random.Random(13), np.random.default_rng(13)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 40)
        writer.insert(rows[:20])
        _held(local, rows[0].vector)
        writer.insert(rows[20:])
        real = LocalIndex._apply

        def half(self, changed, got):
            real(self, changed[:3], got)  # some of it applied, then a failure
            raise RuntimeError("failed half way")

        monkeypatch.setattr(LocalIndex, "_apply", half)
        with pytest.raises(RuntimeError):
            _held(local, rows[0].vector)
        monkeypatch.setattr(LocalIndex, "_apply", real)
        held = _held(local, rows[0].vector)
        assert local.local.loads == 2 and set(held) == {r.chunk.id for r in rows}


def test_short_lived_stores_prune_the_log_too(pg_url, monkeypatch) -> None:  # noqa: F811
    """Forty stores that each write one record and close (as CLI calls do) still prune the
    log: pruning is drawn per write (chance 1/2 here), not counted per process, which
    would never reach 2 in any of them. (Twenty entries left would take 17 writes in a row
    without a prune: a chance of 2^-17.)"""
    import psycopg

    monkeypatch.setattr(pg_store, "CHANGES_KEEP", 3)
    monkeypatch.setattr(pg_store, "CHANGES_PRUNE_EVERY", 2)
    tenant = new_tenant()
    rows = make_rows(random.Random(17), np.random.default_rng(17), 40)
    for row in rows:
        store = PostgresStore(pg_url, tenant=tenant, pool_size=1)
        store.insert([row])
        store.close()
    store = PostgresStore(pg_url, tenant=tenant, pool_size=1)
    try:
        with psycopg.connect(store.url, autocommit=True) as conn:
            left = conn.execute(f'SELECT count(*) FROM "{store.schema}".changes WHERE tenant = %s',
                                (tenant,)).fetchone()[0]
        assert left < 20
    finally:
        store.close()


def test_the_first_search_scans_exactly_while_the_graph_is_built(pg_url, monkeypatch) -> None:  # noqa: F811
    """A process's first search loads the tenant and answers at once by an exact scan; the
    vector graph is built in a thread meanwhile and taken in by a later search."""
    import functools
    import threading
    import time

    from beeweave_core.index import vectors as vectors_mod
    from beeweave_core.store.postgres import local as pg_local

    monkeypatch.setattr(pg_local, "VectorIndex", functools.partial(vectors_mod.VectorIndex, exact_limit=50))
    release = threading.Event()
    real = vectors_mod._GraphBuild._build

    def held_back(self, *args):
        release.wait(60)  # the build takes as long as the test wants
        real(self, *args)

    monkeypatch.setattr(vectors_mod._GraphBuild, "_build", held_back)
    rnd, rng = random.Random(31), np.random.default_rng(31)
    with _pair(pg_url) as (writer, local):
        rows = make_rows(rnd, rng, 300)
        writer.insert(rows)
        vecs = np.stack([r.vector for r in rows])
        q = unit_vectors(rng, 1, DIM)[0]
        want = [rows[i].chunk.id for i in np.argsort(-(vecs @ q), kind="stable")[:10]]
        start = time.monotonic()
        got = local.vector_search(q, EVERY, 10)
        assert time.monotonic() - start < 30  # did not wait for the graph
        vec = local.local.index.vec
        assert [i for i, _ in got] == want and not vec.has_graph
        writer.insert(make_rows(random.Random(32), np.random.default_rng(32), 20, start=1000))
        assert len(local.vector_search(q, EVERY, 400)) == 320  # caught up meanwhile, still exact
        release.set()
        local.local.wait_for_graph()
        assert vec.has_graph and vec.graph_size == 300  # the tail keeps what came after the load
        later = [i for i, _ in local.vector_search(q, EVERY, 10)]
        assert len(set(later) & set(want)) >= 8
        assert local.local.loads == 1
