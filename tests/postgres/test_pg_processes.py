"""Several processes on one PostgreSQL memory: concurrent writers lose and duplicate
nothing, another process sees their writes and hears their events (LISTEN/NOTIFY), and
the BM25 statistics maintained under concurrency equal a from-scratch computation."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import HashingEmbedder, TokenizerConfig
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.tokenizer import Tokenizer
from tests.conformance import Reference
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.postgres.pg_workers import writer_records

pytestmark = pytest.mark.slow

WORKERS = Path(__file__).resolve().parent / "pg_workers.py"
WRITERS, PER_WRITER, BATCH, SEED = 4, 60, 15, 3
EVERYTHING = build_filter({"status": ["active", "pending", "archived", "merged", "expired"]})


def _start(role: str, **args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKERS), role, json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out


def test_concurrent_writers_lose_and_duplicate_nothing(pg_url) -> None:  # noqa: F811
    tenant = new_tenant("team")
    expect = WRITERS * PER_WRITER
    store = PostgresStore(pg_url, tenant=tenant)
    heard: list[dict] = []
    lock = threading.Lock()

    def on_event(payload: dict) -> None:
        with lock:
            heard.append(payload)

    listener = store.listen(on_event)
    observer = _start("observer", url=pg_url, tenant=tenant, expect=expect, timeout=90)
    try:
        assert observer.stdout.readline().strip() == "ready"  # listening before anyone writes
        writers = [_start("writer", url=pg_url, tenant=tenant, writer=w, n=PER_WRITER, batch=BATCH, seed=SEED)
                   for w in range(WRITERS)]
        written = [json.loads(_finish(p)) for p in writers]
        seen = json.loads(_finish(observer))
    finally:
        if observer.poll() is None:
            observer.kill()

    # Counts reconciled: every id written exactly once, nothing else.
    all_ids = [i for ids in written for i in ids]
    assert len(all_ids) == len(set(all_ids)) == expect
    assert store.count() == expect
    assert {c.id for c in store.scan(EVERYTHING)} == set(all_ids)
    for w in range(WRITERS):
        assert store.count(build_filter({"agent_id": f"agent-{w}"})) == PER_WRITER

    # The observer process saw every write and heard one creation event per memory.
    assert seen["count"] == expect
    created = [e["chunk_id"] for e in seen["events"] if e["type"] == "memory.created"]
    assert sorted(created) == sorted(all_ids)
    assert {e["agent_id"] for e in seen["events"]} == {f"agent-{w}" for w in range(WRITERS)}
    assert all(e["tags"] == [f"writer-{e['agent_id'].split('-')[1]}"] and e["tenant"] == tenant
               for e in seen["events"])
    # So did this process's listener (other stores' events only).
    deadline = threading.Event()
    for _ in range(50):
        with lock:
            if len(heard) >= expect:
                break
        deadline.wait(0.1)
    listener.close()
    with lock:
        assert sorted(e["chunk_id"] for e in heard if e["type"] == "memory.created") == sorted(all_ids)

    # The statistics maintained by interleaved writers equal a from-scratch computation:
    # in SQL (verify) and in Python over the records in commit order (BM25 with session
    # context, to 1e-6).
    assert store.verify().ok
    tok = Tokenizer(TokenizerConfig())
    records = {r["chunk_id"]: r for w in range(WRITERS) for r in writer_records(w, PER_WRITER, SEED)}
    with store.db.conn() as conn:  # the commit order of the records
        order = [r[0] for r in conn.execute(store.db.q("SELECT id FROM @chunks WHERE tenant = %s ORDER BY seq"), (tenant,))]
    ref = Reference(store.index_config)
    vectors = store.get_vectors(order)
    chunks = store.get(order)
    ref.insert([ChunkRow(chunks[i], vectors[i], tok(records[i]["content"])) for i in order])
    embed = HashingEmbedder(32)
    for text in ("agent memory preference", "python database query index", "the deploy cluster"):
        terms: dict[str, int] = {}
        for t in tok(text):
            terms[t] = terms.get(t, 0) + 1
        got = dict(store.lexical_search(terms, EVERYTHING, 1000))
        want = ref.lexical(terms, {"status": ["active"]})
        assert set(got) == set(want)
        for i in want:
            assert got[i] == pytest.approx(want[i], abs=1e-6)
        q = embed.embed_query(text)
        scores = store.vector_scores(q, order)
        w = store.index_config.vector_context_weight
        for i, nbs in ref.neighbours().items():  # Reference.vector is fixed to the suite's dimension
            v = vectors[i].astype(np.float64) + w * sum((vectors[n].astype(np.float64) for n in nbs), np.zeros(32))
            assert scores[i] == pytest.approx(float(v / np.linalg.norm(v) @ q), abs=1e-5)
    store.close()


def test_racing_inserts_of_the_same_ids_let_exactly_one_through(pg_url) -> None:  # noqa: F811
    tenant = new_tenant("race")
    procs = [_start("inserter", url=pg_url, tenant=tenant, n=10) for _ in range(3)]
    outcomes = sorted(_finish(p).strip().split(":")[0] for p in procs)
    assert outcomes == ["duplicate", "duplicate", "ok"]
    store = PostgresStore(pg_url, tenant=tenant)
    try:
        assert store.count() == 10
        assert len(store.lexical_search({"same": 1}, EVERYTHING, 100)) == 10  # indexed once each
    finally:
        store.close()
