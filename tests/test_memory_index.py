"""MemoryIndex on its own, no SQLite: what the store tells it (add, update, remove, load) and
what it answers (lexical and vector search, filters, counts), and that ``state()`` and
``restore()`` and a bulk ``load`` of the same rows give the very same answers as the index
built write by write."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from beeweave_core.filters import build_filter
from beeweave_core.index.context import IndexConfig
from beeweave_core.index.memory_index import IndexEntry, MemoryIndex, lex_counts
from beeweave_core.index.turns import SessionContext, lends_context
from beeweave_core.records import ChunkStatus, KnowledgeChunk

DIM = 8
VOCAB = [f"w{i}" for i in range(30)]
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _entry(rnd: random.Random, i: int, terms: dict[str, int], index: MemoryIndex) -> IndexEntry:
    words = [rnd.choice(VOCAB[: 5 + i % 25]) for _ in range(rnd.randint(1, 6))]
    counts: dict[int, int] = {}
    for w in words:
        tid = terms.setdefault(w, len(terms))
        counts[tid] = counts.get(tid, 0) + 1
    chunk = KnowledgeChunk(" ".join(words), user_id=f"u{i % 3}", id=f"m{i}", session_id=f"s{i % 4}",
                           timestamp=T0 + timedelta(minutes=rnd.randint(0, 500)), tags=[f"t{i % 2}"],
                           metadata={"speaker": "ann"} if i % 3 else {})  # the rest are facts: no context
    vec = np.asarray([rnd.gauss(0, 1) for _ in range(DIM)], np.float32)
    return IndexEntry(chunk, vec / np.linalg.norm(vec), counts, seq=i + 1)


def _answers(index: MemoryIndex, rnd: random.Random) -> list[object]:
    out: list[object] = []
    for user in (None, "u0", "u1"):
        flt = build_filter({}, user_id=user) if user else build_filter({})
        out.append(index.count(flt))
        out.append(index.scan_ids(flt))
        for _ in range(3):
            q = {rnd.choice(VOCAB): 1, rnd.choice(VOCAB): 1}
            out.append(index.lexical_search(q, flt, 5))
            v = np.asarray([rnd.gauss(0, 1) for _ in range(DIM)], np.float32)
            hits = index.vector_search(v, flt, 5, exact=True)
            out.append(hits)
            out.append(index.vector_scores(v, [cid for cid, _ in hits]))
    return out


@pytest.fixture
def built() -> tuple[MemoryIndex, dict[str, IndexEntry]]:
    rnd = random.Random(7)
    index = MemoryIndex(IndexConfig())
    terms: dict[str, int] = {}
    entries = [_entry(rnd, i, terms, index) for i in range(60)]
    index.add_terms(terms)
    for start in range(0, 60, 7):
        index.add(entries[start : start + 7])
    live = {e.chunk.id: e for e in entries}
    # Move some memories to another session and status, delete others.
    moved = [live[f"m{i}"].chunk.copy(session_id="s9", status=ChunkStatus.ARCHIVED) for i in (3, 8, 20)]
    index.update(moved)
    for c in moved:
        live[c.id].chunk = c
    gone = index.remove({**{cid: live[cid].term_counts for cid in ("m5", "m6", "m40")}, "nope": {}})
    assert gone == ["m5", "m6", "m40"]
    for cid in gone:
        del live[cid]
    return index, live


def test_writes_are_answered(built: tuple[MemoryIndex, dict[str, IndexEntry]]) -> None:
    index, live = built
    assert len(index) == len(live) == 57
    assert index.contains(["m1", "m5", "m3"]) == {"m1", "m3"}
    assert index.count(build_filter({"status": "archived"})) == 3
    assert set(index.scan_ids(build_filter({"session_id": "s9", "status": "archived"}))) == {"m3", "m8", "m20"}
    # A memory's own vector is its nearest neighbour, and a deleted one is never found.
    for cid in ("m1", "m30", "m59"):
        hits = index.vector_search(live[cid].vector, build_filter({}), 3, exact=True)
        assert hits[0][0] == cid and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    dead = index.get_vectors(["m5"])
    assert dead == {}
    # Every live holder of a term is found (session neighbours of holders may be too), no deleted one.
    term = next(iter(live["m2"].term_counts))
    word = next(w for w, i in index.term_ids.items() if i == term)
    found = {cid for cid, _ in index.lexical_search({word: 1}, build_filter({}), 100)}
    assert {cid for cid, e in live.items() if term in e.term_counts and e.chunk.status == ChunkStatus.ACTIVE} \
        <= found <= set(live)
    assert index.status_counts() == {"active": 54, "archived": 3}


def test_state_restore_and_bulk_load_answer_the_same(built: tuple[MemoryIndex, dict[str, IndexEntry]]) -> None:
    index, live = built
    expected = _answers(index, random.Random(1))
    header, arrays = index.state()
    header = json.loads(json.dumps(header))  # what a snapshot file holds
    restored = MemoryIndex(IndexConfig())
    assert restored.restore(header, {k: np.array(v) for k, v in arrays.items()}, None)
    assert _answers(restored, random.Random(1)) == expected
    # The same rows loaded column-wise, in row order (as on open).
    rows = sorted(live.values(), key=lambda e: e.seq)
    loaded = MemoryIndex(IndexConfig())
    loaded.add_terms(index.term_ids)
    cols = [(e.seq, e.chunk.id, e.chunk.user_id, e.chunk.agent_id, e.chunk.session_id, e.chunk.timestamp.timestamp(),
             e.chunk.status.value, "text", None, json.dumps(e.chunk.tags), json.dumps(e.chunk.entities),
             np.array(list(e.term_counts.items()), np.int32).tobytes(), e.vector.tobytes(), None,
             lends_context(e.chunk, SessionContext.AUTO)) for e in rows]
    loaded.load(*zip(*cols, strict=False))  # type: ignore[arg-type]
    # Slots differ (the bulk load packs them), the answers do not.
    assert _answers(loaded, random.Random(1)) == expected
    assert lex_counts(cols[0][11]) == rows[0].term_counts


def test_verify_finds_a_wrong_vector(built: tuple[MemoryIndex, dict[str, IndexEntry]]) -> None:
    index, live = built
    rows = [(cid, np.array(list(e.term_counts.items()), np.int32).tobytes(), e.vector.tobytes())
            for cid, e in live.items()]
    known = set(index.term_ids.values())
    assert index.verify(rows, known) == []
    bad = [(cid, lex, (np.frombuffer(vec, np.float32) + 1).tobytes() if cid == "m1" else vec)
           for cid, lex, vec in rows]
    assert index.verify(bad, known) == ["m1: vector differs from the record"]
    assert any("missing" in p for p in index.verify(rows[1:], known))
