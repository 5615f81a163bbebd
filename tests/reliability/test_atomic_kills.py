"""SIGKILL at random moments during the multi-step writes: a re-embed (every record replaced
with the embedder metadata, one ``replace(rows, meta=)``), ``update(content=)``,
``remember_fact``, forgetting a user, and ``close`` (graph and snapshot). After each kill the
store opens, verifies and searches, and nothing is lost or half-applied: all records or none
moved to the new model and the metadata names the one the vectors have; each updated memory
is there once with one whole version; the fact is one memory; a user is wholly there or wholly
gone. ``BEEWEAVE_KILLS`` runs per write (20 by default)."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.records import KnowledgeChunk
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.sqlite import SQLiteStore
from tests.reliability.rel_support import all_chunks, child, env_number

KILLS = int(env_number("BEEWEAVE_KILLS", 20))
pytestmark = pytest.mark.slow


def _killed(mode: str, db: Path, rnd: random.Random, most: float) -> list[str]:
    """Run the child until it is ready, let it work a random while, SIGKILL it; its lines."""
    proc = child("atomic_child.py", mode, db)
    try:
        line = proc.stdout.readline().strip()
        assert line == "ready", proc.stderr.read()[-3000:]
        time.sleep(rnd.uniform(0.0, most))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out.splitlines()


def _memory(db: Path) -> BeeWeave:
    return BeeWeave(db, embedder=HashingEmbedder(32))


def test_killed_reembed_moves_all_or_nothing(tmp_path: Path) -> None:
    db, rnd = tmp_path / "m.db", random.Random(1)
    store = SQLiteStore(db)
    rng = np.random.default_rng(0)
    store.insert([ChunkRow(KnowledgeChunk(f"memory {i} about topic{i % 7}", user_id=f"u{i % 3}", id=f"c{i}"),
                           (v := rng.standard_normal(16).astype(np.float32)) / np.linalg.norm(v),
                           ["memory", f"topic{i % 7}"]) for i in range(400)])
    store.set_meta("embedder", json.dumps({"name": "test-16", "dim": 16}))
    store.close()
    moved = 0
    for _ in range(KILLS):
        lines = _killed("reembed", db, rnd, 1.5)
        moved += sum(s.startswith("ok") for s in lines)
        s = SQLiteStore(db)
        try:
            dim = json.loads(s.get_meta("embedder"))["dim"]
            vecs = s.get_vectors([f"c{i}" for i in range(400)])
            assert len(vecs) == 400 and {len(v) for v in vecs.values()} == {dim}
            assert s.dim == dim
            assert s.verify().ok, s.verify().problems
            probe = np.ones(dim, np.float32) / np.sqrt(dim)
            assert len(s.vector_search(probe, __import__("beeweave_core.filters").filters.build_filter({}), 5)) == 5
        finally:
            s.close()
    assert moved, "no re-embed ever completed: the kills came too early to test anything"


def test_killed_update_content_keeps_one_whole_version(tmp_path: Path) -> None:
    db, rnd = tmp_path / "m.db", random.Random(2)
    with _memory(db) as m:
        for i in range(10):
            m.add(f"version 0 of memory {i} about apples and pears", user_id="u", chunk_id=f"m{i}")
    for _ in range(KILLS):
        _killed("update", db, rnd, 1.5)
        with _memory(db) as m:
            chunks = all_chunks(m.backend)
            assert set(chunks) == {f"m{i}" for i in range(10)}
            for i in range(10):
                words = chunks[f"m{i}"].content.split()
                assert words[0] == "version" and words[2:] == f"of memory {i} about apples and pears".split()
            assert m.verify().ok, m.verify().problems
            assert m.search("apples", k=3)


def test_killed_remember_fact_keeps_the_fact(tmp_path: Path) -> None:
    db, rnd = tmp_path / "m.db", random.Random(3)
    with _memory(db) as m:
        m.remember_fact("home_city", "lives in town-start", user_id="u")
    for _ in range(KILLS):
        _killed("fact", db, rnd, 1.5)
        with _memory(db) as m:
            f = m.fact("home_city", user_id="u")
            assert f is not None and f.content.startswith("lives in town")
            facts = [c for c in all_chunks(m.backend).values() if c.metadata.get("fact_key") == "home_city"]
            assert [c.id for c in facts] == [f.id]
            assert m.verify().ok, m.verify().problems


def test_killed_forget_leaves_the_user_wholly_there_or_wholly_gone(tmp_path: Path) -> None:
    rnd = random.Random(4)
    for run in range(KILLS):
        db = tmp_path / f"m{run}.db"
        with _memory(db) as m:
            m.add_many([{"content": f"secret{i} of the gone user", "user_id": "gone", "chunk_id": f"g{i}"}
                        for i in range(600)], show_progress=False)
            m.add_many([{"content": f"plain note {i}", "user_id": "kept", "chunk_id": f"k{i}"}
                        for i in range(50)], show_progress=False)
        lines = _killed("forget", db, rnd, 0.6)
        with _memory(db) as m:
            left = m.count(user_id="gone")
            assert left in (0, 600), left
            if "ok 0" in lines:
                assert left == 0
            assert m.count(user_id="kept") >= 50
            assert m.verify().ok, m.verify().problems
            assert m.search("plain note", user_id="kept", k=3)


def test_killed_close_leaves_a_store_that_opens(tmp_path: Path) -> None:
    db, rnd = tmp_path / "m.db", random.Random(5)
    done = 0
    for _ in range(KILLS):
        lines = _killed("close", db, rnd, 3.0)
        done += sum(s.startswith("ok") for s in lines)
        with _memory(db) as m:
            ids = set(all_chunks(m.backend))
            assert len(ids) % 20 == 0  # one add_many is one transaction
            for s in lines:
                if s.startswith("ok"):
                    n = s.split()[1]
                    assert {f"n{n}-{i}" for i in range(20)} <= ids
            assert m.verify().ok, m.verify().problems
            assert m.search("garden", k=3)
    assert done, "no close ever completed"
