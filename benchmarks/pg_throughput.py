"""Throughput of the PostgreSQL backend: inserts/s (one and several writer processes) and
searches/s (BM25, vector, and BeeWeave's whole hybrid search), beside the embedded store.

Usage:
    python benchmarks/pg_throughput.py [--url URL] [--n 20000] [--dim 384] [--writers 4]
                                       [--queries 200] [--batch 256] [--backends sqlite,postgres]

Without --url it starts a throw-away PostgreSQL with pgvector (pip package ``pgserver``)
on this machine. Vectors are random unit vectors (the model's time is not the store's),
texts are random sentences over a 2,000-word vocabulary, in sessions of 20 turns, so
BM25 runs with session context as by default.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from pg_server import local_postgres, schema_url  # noqa: E402

from beeweave_core import KnowledgeChunk  # noqa: E402
from beeweave_core.filters import build_filter  # noqa: E402
from beeweave_core.store.base import ChunkRow  # noqa: E402

VOCAB = [f"w{i}" for i in range(2000)]


def make_rows(n: int, dim: int, seed: int, prefix: str = "m") -> list[ChunkRow]:
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = []
    for i in range(n):
        # Zipf-like word choice: a few frequent words, a long tail.
        words = [VOCAB[min(int(rnd.paretovariate(1.1)) - 1, len(VOCAB) - 1)] for _ in range(rnd.randint(6, 30))]
        text = " ".join(words)
        chunk = KnowledgeChunk(raw_content=text, id=f"{prefix}{i}", user_id=f"user{i % 10}",
                               session_id=f"{prefix}-s{i // 20}", timestamp=1_700_000_000 + i)
        rows.append(ChunkRow(chunk, vecs[i], words))
    return rows


def timed_inserts(store, rows: list[ChunkRow], batch: int) -> list[tuple[int, float]]:
    """(rows, seconds) of the inserts up to 10,000 memories and of those after (where
    PostgreSQL maintains the HNSW graph, built in the background at the crossing)."""
    phases: list[tuple[int, float]] = []
    for part in (rows[:10_000], rows[10_000:]):
        t = time.perf_counter()
        for start in range(0, len(part), batch):
            store.insert(part[start : start + batch])
        if part:
            phases.append((len(part), time.perf_counter() - t))
    return phases


def _writer(url: str, tenant: str, n: int, dim: int, seed: int, batch: int, out) -> None:
    from beeweave_core.store.postgres import PostgresStore

    rows = make_rows(n, dim, seed, prefix=f"p{seed}-")
    store = PostgresStore(url, tenant=tenant)
    t = time.perf_counter()
    for start in range(0, len(rows), batch):
        store.insert(rows[start : start + batch])
    out.put(time.perf_counter() - t)
    store.close()


def search_rates(store, queries: list[dict[str, int]], qvecs: np.ndarray) -> dict[str, float]:
    """Searches/s, each scoped to one user (a tenth of the memories), 50 candidates."""
    flt = build_filter(None, user_id="user3")
    out = {}
    t = time.perf_counter()
    for q in queries:
        store.lexical_search(q, flt, 50)
    out["bm25"] = len(queries) / (time.perf_counter() - t)
    t = time.perf_counter()
    for v in qvecs:
        store.vector_search(v, flt, 50)
    out["vector"] = len(qvecs) / (time.perf_counter() - t)
    t = time.perf_counter()
    for v in qvecs:
        store.vector_search(v, build_filter(None), 50)
    out["vector_all"] = len(qvecs) / (time.perf_counter() - t)
    t = time.perf_counter()
    for q, v in zip(queries, qvecs):  # what BeeWeave.search asks of a backend, after embedding
        top = store.vector_search(v, flt, 50)
        lex = store.lexical_search(q, flt, 50, include=[i for i, _ in top])
        store.vector_scores(v, [i for i, _ in lex])
    out["hybrid"] = len(queries) / (time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("BEEWEAVE_PG_URL"))
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--backends", default="sqlite,postgres", help="which to measure in one process")
    args = parser.parse_args()
    # Without --url, a throw-away server, stopped and deleted at the end.
    with (nullcontext(args.url) if args.url else local_postgres()) as server:
        run(args, server)


def run(args: argparse.Namespace, server: str) -> None:
    from beeweave_core.store.postgres import PostgresStore
    from beeweave_core.store.sqlite import SQLiteStore

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = schema_url(server, schema)

    rows = make_rows(args.n, args.dim, seed=1)
    rnd, rng = random.Random(2), np.random.default_rng(2)
    # Query words skip the 20 most frequent ones, as the tokenizer drops stop words.
    queries = [{VOCAB[min(19 + int(rnd.paretovariate(1.1)), 1999)]: 1 for _ in range(4)} for _ in range(args.queries)]
    qvecs = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)

    print(f"{args.n} memories, dim {args.dim}, batches of {args.batch}; {os.cpu_count()} cores")
    backends = {"sqlite": ("sqlite (embedded, in memory)", lambda: SQLiteStore(None)),
                "postgres": ("postgres (one process)", lambda: PostgresStore(url, tenant="bench"))}
    for key in args.backends.split(","):
        name, open_store = backends[key]
        store = open_store()
        phases = timed_inserts(store, rows, args.batch)
        if hasattr(store, "_builder") and store._builder is not None:
            store._builder.join()  # searches below see the finished graph
        rates = search_rates(store, queries, qvecs)
        inserts = ", then ".join(f"{n / secs:,.0f}" for n, secs in phases)
        print(f"  {name}: inserts/s {inserts}; searches/s (one user): bm25 {rates['bm25']:,.0f}, "
              f"vector {rates['vector']:,.0f}, hybrid {rates['hybrid']:,.0f}; vector over all "
              f"{rates['vector_all']:,.0f}", flush=True)
        store.close()

    if args.writers > 1:
        # A fresh schema and at most 10,000 memories in all, so that the rate compares with
        # the single process's first phase (no HNSW graph to maintain).
        multi_url = schema_url(server, f"{schema}_multi")
        per = min(args.n, 10_000) // args.writers
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(multi_url, "bench-multi", per, args.dim, 10 + w, args.batch, out))
                 for w in range(args.writers)]
        t = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        wall = time.perf_counter() - t
        times = [out.get() for _ in procs]
        check = PostgresStore(multi_url, tenant="bench-multi")
        assert check.count() == per * args.writers, "lost or duplicated writes"
        check.close()
        print(f"  postgres ({args.writers} writer processes, one tenant, {per * args.writers} memories): "
              f"{per * args.writers / max(times):,.0f} inserts/s (slowest writer; {wall:.1f}s wall with process start)")


if __name__ == "__main__":
    main()
