"""Persistence: a file store reopens with identical search results (ids and scores),
including after deletes and with an HNSW graph saved beside it; stale or corrupt
graph files are ignored safely; the schema version guards newer stores."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import beeweave_core.store.sqlite as sqlite_store
from beeweave_core import BeeWeave, BeeWeaveError, HashingEmbedder, KnowledgeChunk, SchemaVersionError
from beeweave_core.filters import build_filter
from beeweave_core.index.vectors import VectorIndex
from beeweave_core.store.base import SCHEMA_VERSION, ChunkRow
from tests.support import (
    faiss_single_thread,
    frozen_clock,
    search_results,
    sentence,
    snapshot,
    stable_dict,
    unit_vectors,
)

DIM = 16
QUERIES = ["python memory", "deploy kubernetes cluster", "coffee morning meeting", "running runner", "invoice"]


def _open(path: Path) -> BeeWeave:
    return BeeWeave(path, embedder=HashingEmbedder(DIM), clock=frozen_clock)


def _fill(m: BeeWeave, n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return m.add_many([{"content": sentence(rnd), "user_id": rnd.choice(["ann", "bob"]),
                        "tags": rnd.sample(["x", "y", "z"], rnd.randint(0, 2))} for _ in range(n)])


def _results(m: BeeWeave) -> list:
    return [search_results(m, QUERIES, k=10), search_results(m, QUERIES, k=7, user_id="bob"),
            search_results(m, QUERIES[:2], k=5, filters={"tags": "x"}, fusion="weighted")]


def test_round_trip_gives_identical_results(db_path: Path) -> None:
    m = _open(db_path)
    ids = _fill(m, 150, 1)
    before, snap = _results(m), snapshot(m, QUERIES)
    chunks = {c.id: stable_dict(c) for c in m.get_many(ids)}
    m.close()

    m = _open(db_path)
    try:
        assert _results(m) == before
        assert snapshot(m, QUERIES) == snap
        assert {c.id: stable_dict(c) for c in m.get_many(ids)} == chunks
        assert m.count() == 150
    finally:
        m.close()


def test_round_trip_after_deletes_and_more_adds(db_path: Path) -> None:
    m = _open(db_path)
    ids = _fill(m, 150, 2)
    gone = ids[::3]
    for cid in gone:
        assert m.delete(cid)
    _fill(m, 20, 3)
    before = _results(m)
    m.close()

    m = _open(db_path)
    try:
        assert _results(m) == before
        assert m.count() == 150 - len(gone) + 20
        assert not m.backend.contains(gone)
        flt = build_filter(None)
        for q in QUERIES:
            assert not {i for i, _ in m.backend.lexical_search({t: 1 for t in m.tokenizer(q)}, flt, 1000)} & set(gone)
        # Delete again after reopening, then reopen once more.
        for cid in ids[1::3][:10]:
            m.delete(cid)
        before = _results(m)
    finally:
        m.close()
    m = _open(db_path)
    try:
        assert _results(m) == before
    finally:
        m.close()


def test_stored_metadata(db_path: Path) -> None:
    m = _open(db_path)
    m.add("hello world", user_id="u")
    m.close()
    con = sqlite3.connect(db_path)
    meta = dict(con.execute("SELECT key, value FROM meta"))
    con.close()
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert json.loads(meta["embedder"]) == {"name": f"beeweave:hashing-{DIM}", "dim": DIM}
    assert json.loads(meta["tokenizer"])["stemmer"] == "english"
    assert sum(k.startswith("migration_") for k in meta) == SCHEMA_VERSION


def _set_schema_version(path: Path, version: int) -> None:
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
    con.commit()
    con.close()


def test_newer_schema_version_is_refused(db_path: Path) -> None:
    m = _open(db_path)
    m.add("hello world", user_id="u")
    m.close()
    _set_schema_version(db_path, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError) as info:
        _open(db_path)
    assert isinstance(info.value, BeeWeaveError)
    assert "upgrade" in str(info.value)
    # The refusal changed nothing: put the version back and the data is there.
    _set_schema_version(db_path, SCHEMA_VERSION)
    m = _open(db_path)
    try:
        assert m.count() == 1
    finally:
        m.close()


def test_unopenable_path_is_a_beeweave_error(tmp_path: Path) -> None:
    with pytest.raises(BeeWeaveError):
        _open(tmp_path / "no" / "such" / "dir" / "memory.db")


# -- the HNSW graph sidecar ------------------------------------------------------------------
# ``VectorIndex`` takes ``exact_limit`` but the store builds it with the default, which
# is bound when vectors.py is imported (so patching vectors.EXACT_LIMIT has no effect).
# The store is therefore given a VectorIndex whose exact limit is small.
SMALL_LIMIT = 48
N_VEC = 320


class SmallLimitIndex(VectorIndex):
    loads: list[bool] = []

    def __init__(self, dim: int, **kw) -> None:
        kw.setdefault("exact_limit", SMALL_LIMIT)
        super().__init__(dim, **kw)

    def load_graph(self, path, slot_keys) -> bool:
        ok = super().load_graph(path, slot_keys)
        SmallLimitIndex.loads.append(ok)
        return ok

    def restore(self, st, graph, slot_keys) -> bool:  # a snapshot's graph counts as a load too
        ok = super().restore(st, graph, slot_keys)
        if int(st["vec_graph_n"][0]):
            SmallLimitIndex.loads.append(ok)
        return ok


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(sqlite_store, "VectorIndex", SmallLimitIndex)
    SmallLimitIndex.loads = []
    with faiss_single_thread():
        yield SmallLimitIndex


def _sidecar(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + ".hnsw"), path.with_name(path.name + ".hnsw.keys.npy")


def _fill_vectors(m: BeeWeave, n: int, seed: int, user: str = "ann") -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    vecs = unit_vectors(rng, n, DIM)
    rnd = random.Random(seed)
    ids = m.add_many([{"content": sentence(rnd), "user_id": user if i % 4 else "bob", "embedding": v.tolist()}
                      for i, v in enumerate(vecs)])
    return ids, vecs


def _vector_results(m: BeeWeave, queries: np.ndarray) -> list:
    out = []
    for q in queries:
        for user in (None, "bob"):
            out.append(m.backend.vector_search(q, build_filter(None, user_id=user), 10))
        out.append([(h.id, h.score) for h in m.search("coffee", k=10, query_embedding=q.tolist())])
    return out


def _assert_scores_are_true_cosines(m: BeeWeave, queries: np.ndarray, min_recall: float = 0.9) -> None:
    """Whatever graph answered, its ids and scores must be those of the stored vectors."""
    flt = build_filter(None)
    recalls = []
    for q in queries:
        got = m.backend.vector_search(q, flt, 10)
        exact = m.backend.vector_search(q, flt, 10, exact=True)
        stored = m.backend.get_vectors([i for i, _ in got])
        for cid, score in got:
            assert score == pytest.approx(float(stored[cid] @ q), abs=1e-4), "score is not the stored vector's"
        recalls.append(len({i for i, _ in got} & {i for i, _ in exact}) / len(exact))
    assert np.mean(recalls) >= min_recall


def test_hnsw_graph_is_saved_and_reloaded(db_path: Path, small_limit) -> None:
    queries = unit_vectors(np.random.default_rng(99), 12, DIM)
    m = _open(db_path)
    ids, vecs = _fill_vectors(m, N_VEC, 1)
    before = _vector_results(m, queries)  # searching builds the graph
    lexical_before = _results(m)
    m.close()
    graph, keys = _sidecar(db_path)
    assert graph.exists() and keys.exists()

    m = _open(db_path)
    try:
        assert small_limit.loads == [True], "the saved graph was not adopted"
        assert _vector_results(m, queries) == before
        assert _results(m) == lexical_before
        _assert_scores_are_true_cosines(m, queries)
        # Deletes after reopening: tombstones in the reloaded graph.
        for cid in ids[::5]:
            m.delete(cid)
        after_delete = _vector_results(m, queries)
        assert not {i for r in after_delete for i, _ in r} & set(ids[::5])
    finally:
        m.close()

    m = _open(db_path)
    try:
        assert small_limit.loads == [True, True]
        assert _vector_results(m, queries) == after_delete
        # New vectors join the reloaded graph and are found.
        new_ids, new_vecs = _fill_vectors(m, 100, 2)
        for cid, v in list(zip(new_ids, new_vecs, strict=True))[::10]:
            assert m.backend.vector_search(v, build_filter(None), 1)[0][0] == cid
        _assert_scores_are_true_cosines(m, queries)
        final = _vector_results(m, queries)
    finally:
        m.close()

    m = _open(db_path)
    try:
        assert small_limit.loads[-1] is True
        assert _vector_results(m, queries) == final
    finally:
        m.close()


def test_missing_sidecar_only_costs_a_rebuild(db_path: Path, small_limit) -> None:
    queries = unit_vectors(np.random.default_rng(98), 10, DIM)
    m = _open(db_path)
    _fill_vectors(m, N_VEC, 3)
    _vector_results(m, queries)
    m.close()
    for f in _sidecar(db_path):
        f.unlink()
    m = _open(db_path)
    try:
        _assert_scores_are_true_cosines(m, queries)
    finally:
        m.close()


@pytest.mark.parametrize("damage", ["garbage_graph", "truncated_graph", "empty_graph", "garbage_keys",
                                    "graph_without_keys"])
@pytest.mark.slow
def test_corrupt_sidecar_is_ignored(db_path: Path, small_limit, damage: str) -> None:
    queries = unit_vectors(np.random.default_rng(97), 10, DIM)
    m = _open(db_path)
    ids, _ = _fill_vectors(m, N_VEC, 4)
    _vector_results(m, queries)
    for cid in ids[:50]:
        m.delete(cid)
    lexical_before = _results(m)
    m.close()
    graph, keys = _sidecar(db_path)
    if damage == "garbage_graph":
        graph.write_bytes(b"\x00not a faiss index\xff" * 100)
    elif damage == "truncated_graph":
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    elif damage == "empty_graph":
        graph.write_bytes(b"")
    elif damage == "garbage_keys":
        keys.write_bytes(b"garbage" * 50)
    else:
        keys.unlink()

    m = _open(db_path)
    try:
        assert True not in small_limit.loads
        assert m.count() == N_VEC - 50
        assert _results(m) == lexical_before
        _assert_scores_are_true_cosines(m, queries)
        assert not {i for r in _vector_results(m, queries) for i, _ in r} & set(ids[:50])
    finally:
        m.close()
    # Closing wrote a sound graph again.
    m = _open(db_path)
    try:
        assert small_limit.loads[-1] is True
        _assert_scores_are_true_cosines(m, queries)
    finally:
        m.close()


def test_stale_sidecar_from_another_store_is_ignored(db_path: Path, small_limit) -> None:
    """A graph left beside a path whose database was recreated (e.g. the .db deleted
    and a new store made there) must not answer for the new vectors.

    Driven through the backend, so no search (which would rebuild and overwrite the
    graph) happens between creating the new store and reopening it."""
    queries = unit_vectors(np.random.default_rng(96), 12, DIM)

    def fill(store: sqlite_store.SQLiteStore, seed: int) -> None:
        vecs = unit_vectors(np.random.default_rng(seed), N_VEC, DIM)
        store.insert([ChunkRow(KnowledgeChunk(f"memory {i}", "ann", id=f"s{seed}-{i}"), v, ["memory", str(i)])
                      for i, v in enumerate(vecs)])

    old = sqlite_store.SQLiteStore(db_path)
    fill(old, 5)
    old.vector_search(queries[0], build_filter(None), 10)  # builds the graph, saved on close
    old.close()
    assert _sidecar(db_path)[0].exists()
    for f in db_path.parent.glob(db_path.name + "*"):
        if not f.name.endswith((".hnsw", ".npy")):
            f.unlink()

    new = sqlite_store.SQLiteStore(db_path)  # a new database at the same path
    fill(new, 6)
    new.close()

    m = _open(db_path)
    try:
        _assert_scores_are_true_cosines(m, queries)
    finally:
        m.close()


def _term_ids_in_use(path: Path) -> tuple[set[int], set[int]]:
    """(ids of the terms table, term ids the records' postings use), read from the file."""
    con = sqlite3.connect(path)
    try:
        table = {i for (i,) in con.execute("SELECT id FROM terms")}
        used = {int(t) for (lex,) in con.execute("SELECT lex FROM chunks")
                for t in np.frombuffer(lex, np.int32).reshape(-1, 2)[:, 0]}
    finally:
        con.close()
    return table, used


def test_forget_drops_the_users_words_and_graph_and_new_words_never_reuse_a_live_id(db_path: Path,
                                                                                   small_limit) -> None:
    queries = unit_vectors(np.random.default_rng(7), 6, DIM)
    m = _open(db_path)
    try:
        # ann's own words first: their ids are the lowest, so forgetting them leaves holes below live ids
        m.add_many([{"content": f"zorblax quintessa note {i}", "user_id": "ann"} for i in range(3)])
        _fill_vectors(m, N_VEC, 3)  # ann and bob, most words shared
        _vector_results(m, queries)  # builds the graph
        m.flush()
        graph, keys = _sidecar(db_path)
        assert graph.exists() and keys.exists()
        assert m.backend.delete_user("ann") > 0
        assert not graph.exists() and not keys.exists()  # it held ann's vectors
        table, used = _term_ids_in_use(db_path)
        assert table == used and "zorblax" not in m.backend.index.term_ids  # ann's own words are gone
        # Words seen for the first time after the forget get fresh ids, never a live one.
        _fill(m, 40, 4)
        m.add("brandnewword anotherfreshword", user_id="bob")
        assert m.verify().ok
        table, used = _term_ids_in_use(db_path)
        assert table == used
        before, vectors_before = _results(m), _vector_results(m, queries)  # and the graph is rebuilt
    finally:
        m.close()
    m = _open(db_path)  # term ids with holes: the next new word must still find a free one
    try:
        assert _results(m) == before and _vector_results(m, queries) == vectors_before
        m.add("yetanotherunseenword", user_id="carol")
        assert m.verify().ok
        for user in ("ann", "bob", "carol"):
            m.backend.delete_user(user)
        assert m.count() == 0 and m.verify().ok
    finally:
        m.close()
    assert _term_ids_in_use(db_path) == (set(), set())


def test_a_store_emptied_by_deletes_reopens_from_its_snapshot(db_path: Path, caplog) -> None:
    # Forgetting the only user left a snapshot of no records, whose restore failed (an index
    # into an empty array) and logged a traceback on every later open.
    with BeeWeave(db_path, embedder=HashingEmbedder(32)) as m:
        m.add("the only memory", user_id="solo")
    with BeeWeave(db_path, embedder=HashingEmbedder(32)) as m:
        assert m.backend.delete_user("solo") == 1  # what `beeweave forget` and DELETE /users/{id} do
    for _ in range(2):
        with caplog.at_level("WARNING"), BeeWeave(db_path, embedder=HashingEmbedder(32)) as m:
            assert m.count() == 0 and m.search("memory", user_id="solo") == []
            m.add("a new memory", user_id="solo")
            assert [h.chunk.raw_content for h in m.search("new memory", user_id="solo")] == ["a new memory"]
            m.delete_many([c.id for c in m.backend.scan(build_filter(None, user_id="solo"))])
    assert not [r for r in caplog.records if "snapshot" in r.getMessage()]
