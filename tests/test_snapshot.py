"""The store snapshot (store/snapshot.py): a store reopened from its snapshot answers exactly
as one rebuilt from its records, and a snapshot is used only while the database vouches for
it — any write, a foreign writer, a damaged or swapped file all fall back to the rebuild."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import beeweave_core.store.sqlite as sqlite_store
from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.filters import build_filter
from beeweave_core.index.vectors import VectorIndex
from beeweave_core.store.snapshot import snapshot_path
from tests.support import faiss_single_thread, frozen_clock, search_results, sentence, unit_vectors

DIM = 16
QUERIES = ["python memory", "deploy kubernetes cluster", "coffee morning meeting", "running runner", "invoice"]


@pytest.fixture
def small_graph(monkeypatch):
    """Stores whose HNSW graph starts at 40 vectors, so the snapshot meets graph and tail."""
    monkeypatch.setattr(sqlite_store, "VectorIndex", lambda dim, **kw: VectorIndex(dim, exact_limit=40, **kw))
    with faiss_single_thread():
        yield


def _open(path: Path) -> BeeWeave:
    return BeeWeave(path, embedder=HashingEmbedder(DIM), clock=frozen_clock)


def _fill(m: BeeWeave, n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    vecs = unit_vectors(np.random.default_rng(seed), n, DIM)
    return m.add_many([{"content": sentence(rnd), "user_id": rnd.choice(["ann", "bob", "cy"]),
                        "session_id": f"s{rnd.randint(0, 9)}", "tags": rnd.sample(["x", "y", "z"], rnd.randint(0, 2)),
                        "entities": rnd.sample(["Paris", "Rust"], rnd.randint(0, 1)), "embedding": v.tolist()}
                       for v in vecs], show_progress=False)


def _answers(m: BeeWeave) -> list:
    queries = unit_vectors(np.random.default_rng(5), 4, DIM)
    return [search_results(m, QUERIES, k=10), search_results(m, QUERIES, k=6, user_id="bob"),
            search_results(m, QUERIES[:3], k=5, filters={"tags_any": ["x"], "session_id": "s3"}),
            search_results(m, QUERIES[:2], k=5, filters={"entities": ["Paris"]}),
            [m.backend.vector_search(q, build_filter(None), 8) for q in queries],
            m.count(), m.count(user_id="cy"),
            # What ranking reads: from the columns, or (rebuilt) from the records on first use.
            m.backend.rank_fields(m.backend.scan_ids(build_filter(None)))]


def _rebuilt_answers(path: Path, tmp: Path) -> list:
    """The same store opened without its snapshot (copied away from it)."""
    copy = tmp / "rebuilt" / path.name
    copy.parent.mkdir()
    for f in path.parent.iterdir():
        if f.name.startswith(path.name) and not f.name.endswith(".snapshot"):
            shutil.copy(f, copy.parent / f.name)
    m = _open(copy)
    try:
        assert m.backend.snapshot_token is None
        return _answers(m)
    finally:
        m.close()


def _lived_in(path: Path) -> None:
    m = _open(path)
    ids = _fill(m, 150, 1)
    m.delete_many(ids[::7])  # dead slots, holes in sessions
    m.update(ids[3], session_id="s9", tags=["z"])  # moved in the session order
    m.update(ids[4], weight=3.5, confidence=0.5, pinned=True)  # ranked apart from the others
    m.update(ids[5], weight=0.2, metadata={"stale": True})
    _fill(m, 30, 2)  # more after the deletes: part of them in the graph's tail
    m.search("python memory")
    m.close()


def test_reopened_from_the_snapshot_answers_exactly_as_rebuilt(tmp_path: Path, small_graph) -> None:
    db = tmp_path / "memory.db"
    _lived_in(db)
    assert snapshot_path(db).exists()
    m = _open(db)
    try:
        assert m.backend.snapshot_token is not None, "the snapshot was not used"
        from_snapshot = _answers(m)
        assert m.verify().ok
    finally:
        m.close()
    assert from_snapshot == _rebuilt_answers(db, tmp_path)


def test_writes_after_a_snapshot_load_are_kept_and_the_next_snapshot_has_them(tmp_path: Path, small_graph) -> None:
    db = tmp_path / "memory.db"
    _lived_in(db)
    m = _open(db)
    assert m.backend.snapshot_token is not None
    new = _fill(m, 60, 3)  # enough to push part of the tail into the graph
    assert not snapshot_path(db).exists(), "a write must retire the snapshot"
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM meta WHERE key='snapshot'").fetchone()[0] == 0
    m.delete_many(new[:5])
    expected = _answers(m)
    m.close()
    m = _open(db)
    try:
        assert m.backend.snapshot_token is not None
        assert _answers(m) == expected
        assert m.verify().ok
    finally:
        m.close()
    assert _rebuilt_answers(db, tmp_path) == expected


def test_a_write_the_store_did_not_see_makes_the_snapshot_stale(tmp_path: Path, small_graph) -> None:
    """A writer that knows nothing of snapshots (an old BeeWeave, a script) deletes a row."""
    db = tmp_path / "memory.db"
    _lived_in(db)
    with sqlite3.connect(db) as raw:
        victim = raw.execute("SELECT id FROM chunks ORDER BY seq LIMIT 1").fetchone()[0]
        raw.execute("DELETE FROM chunks WHERE id=?", (victim,))
        raw.execute("DELETE FROM edges WHERE src=? OR dst=?", (victim, victim))
    m = _open(db)
    try:
        assert m.backend.snapshot_token is None
        assert victim not in {h.id for q in QUERIES for h in m.search(q, k=50)}
        assert m.verify().ok
    finally:
        m.close()


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "garbage", "other_token", "missing_graph"])
def test_a_damaged_or_swapped_snapshot_only_costs_a_rebuild(tmp_path: Path, small_graph, damage: str) -> None:
    db = tmp_path / "memory.db"
    _lived_in(db)
    snap = snapshot_path(db)
    if damage == "truncate":
        snap.write_bytes(snap.read_bytes()[: snap.stat().st_size // 2])
    elif damage == "garbage":
        snap.write_bytes(b"not a snapshot" * 100)
    elif damage == "other_token":  # an older snapshot of the same database
        older = snap.read_bytes()
        m = _open(db)
        _fill(m, 5, 4)
        m.close()
        snap.write_bytes(older)
    else:
        db.with_name(db.name + ".hnsw").unlink()
    expected = _rebuilt_answers(db, tmp_path)
    m = _open(db)
    try:
        assert m.backend.snapshot_token is None
        assert _answers(m) == expected
        assert m.verify().ok
    finally:
        m.close()


def test_the_snapshot_keeps_no_trace_of_a_forgotten_user(tmp_path: Path, small_graph) -> None:
    db = tmp_path / "memory.db"
    m = _open(db)
    _fill(m, 80, 6)
    m.add("the secret plan of zanzibar-quokka", user_id="user-to-forget-xyz", session_id="s1")
    m.close()
    assert b"user-to-forget-xyz" in snapshot_path(db).read_bytes()
    m = _open(db)
    m.backend.delete_user("user-to-forget-xyz")
    m.close()
    data = snapshot_path(db).read_bytes()
    assert b"user-to-forget-xyz" not in data and b"zanzibar" not in data
