"""Where a PostgreSQL search and add spend their time: per-search latency, round trips,
and EXPLAIN (ANALYZE, BUFFERS) of the one search statement, on a store built from the
scale benchmark's corpus (benchmarks/scale_data.py) on a running server.

    python benchmarks/pg_profile.py URL --n 10000 [--explain] [--queries 50] [--adds 10] [--filtered]
    python benchmarks/pg_profile.py URL --n 10000 --queries 0 --adds 50 [--add-trips]
    python benchmarks/pg_profile.py URL --n 100000 --queries 0 --adds 30 --add-statements
    python benchmarks/pg_profile.py URL --n 10000 --queries 50 --adds 0 --evidence 4

The store (schema ``prof_<n>``, tenant ``scale``) is built on first use and reused, so
a change of the search SQL is measured in seconds. A change of the schema needs
``--rebuild``. Memory ``i`` is written by agent ``agent-{i % 8}`` with the tag
``topic-{i % 64}``, so ``--filtered`` times searches narrowed by session (one of ~5,000),
tag (1/64 of the store) and agent (1/8) beside the one-user search, interleaved.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import pq

sys.path.insert(0, str(Path(__file__).parent))

from scale_data import DEFAULT_CACHE_DIR, Precomputed, ScaleCorpus, Vectors, ensure_text_embeddings  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.filters import Filter  # noqa: E402
from beeweave_core.relevance import evidence_terms  # noqa: E402
from beeweave_core.store.postgres import sql  # noqa: E402
from beeweave_core.store.postgres.sql import SEARCH_SQL, narrowed  # noqa: E402

BLOCK = 8192


def _open(url: str, n: int, embedder: Precomputed) -> BeeWeave:
    sep = "&" if "?" in url else "?"
    return BeeWeave.from_url(f"{url}{sep}schema=prof_{n}", tenant="scale", embedder=embedder)


AGENTS, TOPICS = 8, 64


def _labelled(i: int, record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "agent_id": f"agent-{i % AGENTS}", "tags": [f"topic-{i % TOPICS}"]}


def _filters(corpus: ScaleCorpus, n: int, i: int) -> dict[str, dict[str, Any]]:
    """The filters query ``i`` is timed with (spread over sessions, tags and agents)."""
    j = (i * 7919) % n
    return {"user only": {}, "session": {"session_id": corpus.memory_at(j, 1).session_id},
            "tag": {"tags": [f"topic-{j % TOPICS}"]}, "agent": {"agent_id": f"agent-{j % AGENTS}"}}


def _filtered(memory: BeeWeave, corpus: ScaleCorpus, queries: list, n: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in _filters(corpus, n, 0)}
    hits: dict[str, int] = dict.fromkeys(times, 0)
    for i, q in enumerate(queries):
        flts = list(_filters(corpus, n, i).items())
        for name, flt in flts[:: 1 if i % 2 else -1]:  # alternate the order, so load hits all alike
            t0 = time.perf_counter()
            found = memory.search(q.text, user_id=q.user_id, k=10, query_embedding=q.vector, filters=flt or None)
            if i >= 5:
                times[name].append((time.perf_counter() - t0) * 1000)
                hits[name] += len(found)
    for name, ts in times.items():
        ts.sort()
        print(f"filtered by {name}: search p50 {statistics.median(ts):.1f} ms  p95 {ts[int(0.95 * len(ts))]:.1f} ms "
              f"({len(ts)} searches, {hits[name] / max(len(ts), 1):.1f} hits each)", flush=True)


def _lexical_paths(memory: BeeWeave, corpus: ScaleCorpus, queries: list, n: int) -> None:
    """Both paths of a filtered lexical search (sql.LEX_FILTERED), each forced, interleaved."""
    from beeweave_core.filters import build_filter
    from beeweave_core.query import prepare_query

    backend = memory.backend
    chosen = backend.key_lookup_cost
    for name in ("session", "tag", "agent"):
        times: dict[str, list[float]] = {"by key": [], "through the postings": []}
        for i, q in enumerate(queries):
            flt = build_filter({"user_id": q.user_id, **_filters(corpus, n, i)[name]})
            terms = prepare_query(q.text, memory._shared.tokenizer).terms  # noqa: SLF001
            for path, cost in (("by key", 0.0), ("through the postings", 1e12))[:: 1 if i % 2 else -1]:
                backend.key_lookup_cost = cost
                t0 = time.perf_counter()
                backend.lexical_search(terms, flt, 40)
                times[path].append((time.perf_counter() - t0) * 1000)
        print(f"lexical_search filtered by {name}: " + ", ".join(
            f"{path} p50 {statistics.median(ts):.1f} ms" for path, ts in times.items()), flush=True)
    backend.key_lookup_cost = chosen


def _ab(memory: BeeWeave, queries: list, unscoped: bool, rounds: int = 3) -> None:
    backend = memory.backend
    new = list(backend._search_settings)  # noqa: SLF001
    old = [s for s in new if "hnsw." in s or "citus." in s]
    times: dict[str, list[float]] = {"planner settings": [], "hnsw settings only": []}
    for r in range(rounds):
        for i, q in enumerate(queries):
            for name, settings in (("planner settings", new), ("hnsw settings only", old))[:: 1 if i % 2 else -1]:
                backend._search_settings = settings  # noqa: SLF001
                t0 = time.perf_counter()
                memory.search(q.text, user_id=None if unscoped else q.user_id, k=10, query_embedding=q.vector)
                if r:
                    times[name].append((time.perf_counter() - t0) * 1000)
    backend._search_settings = new  # noqa: SLF001
    for name, ts in times.items():
        ts.sort()
        print(f"{name}: search p50 {statistics.median(ts):.1f} ms  p95 {ts[int(0.95 * len(ts))]:.1f} ms "
              f"({len(ts)} searches)", flush=True)


# The search statement as it was before it returned relevance's lexical evidence, and with
# the evidence read in two other ways than its GROUPING SETS.
_AFTER_TAIL = SEARCH_SQL[len("WITH " + sql._SEARCH_BM25_CTES + "," + sql._VECTOR_CTES):]  # noqa: SLF001
_EVIDENCE_COLUMNS = """,
    coalesce(l.heavy, 0), (SELECT array_agg(term ORDER BY term) FROM tbest), (SELECT array_agg(best ORDER BY term) FROM tbest)"""
assert _EVIDENCE_COLUMNS in _AFTER_TAIL
BEFORE_SQL = ("WITH " + sql._BM25_CTES + "," + sql._VECTOR_CTES  # noqa: SLF001
              + _AFTER_TAIL.replace(_EVIDENCE_COLUMNS, ""))
# A MATERIALIZED CTE of the postings, aggregated by record and by term.
MATERIALIZED_SQL = "WITH " + sql._QI_CTES + """, lp AS MATERIALIZED ({postings}), lex AS (
    SELECT seq, sum(s) AS score, sum(s) FILTER (WHERE s > 0 AND heavy) AS heavy FROM lp GROUP BY seq
), ltop AS MATERIALIZED (
    SELECT seq, score FROM lex ORDER BY score DESC, seq LIMIT %(k)s
), tbest AS (
    SELECT term, max(s) AS best FROM lp WHERE heavy GROUP BY term
),""" + sql._VECTOR_CTES + _AFTER_TAIL  # noqa: SLF001
# Each evidence term's postings read a second time for its best.
TWICE_SQL = "WITH " + sql._QI_CTES + """, lex AS (
    SELECT seq, sum(s) AS score, sum(s) FILTER (WHERE s > 0 AND heavy) AS heavy FROM ({postings}) p GROUP BY seq
), ltop AS MATERIALIZED (
    SELECT seq, score FROM lex ORDER BY score DESC, seq LIMIT %(k)s
), tbest AS (
    SELECT term, max(s) AS best FROM ({postings}) p WHERE heavy GROUP BY term
),""" + sql._VECTOR_CTES + _AFTER_TAIL  # noqa: SLF001


def _evidence(memory: BeeWeave, corpus: ScaleCorpus, queries: list, n: int, rounds: int, filtered: bool) -> None:
    """A search's candidates and its hits' lexical evidence three ways, interleaved per query:
    the statement before plus relevance's second round trip (lexical_searches for the
    heaviest terms, the top 10 as its include), and the one statement returning the evidence
    (GROUPING SETS, as built; a MATERIALIZED CTE of the postings; or the evidence terms'
    postings read twice), all checked to agree; and what the evidence adds to the statement
    (the statement before alone)."""
    from beeweave_core.filters import build_filter
    from beeweave_core.query import prepare_query

    backend = memory.backend
    k = 40
    ways = ("before: statement + second trip", "after: one statement (grouping sets)",
            "one statement (materialized postings)", "one statement (postings read twice)",
            "the statement before alone (no evidence)")
    times: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(rounds):
        for i, q in enumerate(queries):
            flt = build_filter({"user_id": q.user_id, **(_filters(corpus, n, i)["session"] if filtered else {})})
            terms = prepare_query(q.text, memory._shared.tokenizer).terms  # noqa: SLF001
            heavy = evidence_terms(terms)
            qv = q.vector.astype(np.float32)
            params = {**backend._lexical_params(terms), "k": k, **backend._vector_params(qv, flt, k, False),  # noqa: SLF001
                      "heavy": heavy}
            order = list(ways) if (i + r) % 2 else list(reversed(ways))
            answers = {}
            for way in order:
                template = {ways[0]: BEFORE_SQL, ways[1]: SEARCH_SQL, ways[2]: MATERIALIZED_SQL, ways[3]: TWICE_SQL,
                            ways[4]: BEFORE_SQL}[way]
                stmt, fargs = backend._statement(template, flt, d=len(qv))  # noqa: SLF001
                t0 = time.perf_counter()
                rows = backend._search_rows(stmt, {**params, **fargs}, k, narrowed(flt))  # noqa: SLF001
                if way == ways[0]:
                    top = [row[0] for row in sorted(rows, key=lambda row: (-row[1], row[0]))[:10]]
                    backend.lexical_searches([{t: terms[t]} for t in heavy], flt, 1, include=top)
                if r or i >= 5:
                    times[way].append((time.perf_counter() - t0) * 1000)
                answers[way] = sorted((row[0], round(row[1], 9), *(() if len(row) < 19 else (
                    round(row[16], 9), row[17], [round(b, 9) for b in row[18] or ()]))) for row in rows)
            assert answers[ways[1]] == answers[ways[2]] == answers[ways[3]], q.text  # the same evidence each way
            assert [a[:2] for a in answers[ways[1]]] == [a[:2] for a in answers[ways[0]]], q.text
    for way, ts in times.items():
        ts.sort()
        print(f"{way}: p50 {statistics.median(ts):.1f} ms  p95 {ts[int(0.95 * len(ts))]:.1f} ms ({len(ts)})",
              flush=True)


def _trips(backend: object, n: int = 300) -> None:
    one, before = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        backend._search_rows("SELECT 1", {}, 10)  # type: ignore[attr-defined]  # noqa: SLF001
        one.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        with backend._conn() as conn, conn.pipeline(), conn.transaction():  # type: ignore[attr-defined]  # noqa: SLF001
            backend._settings(conn, 10)  # type: ignore[attr-defined]  # noqa: SLF001
            conn.execute("SELECT 1").fetchall()
        before.append((time.perf_counter() - t0) * 1000)
    print(f"settings + SELECT 1: one round trip {statistics.median(one):.2f} ms, in conn.transaction() "
          f"{statistics.median(before):.2f} ms (medians of {n}, interleaved)", flush=True)


def _add_statements(memory: BeeWeave, corpus: ScaleCorpus, vectors: Vectors, n_adds: int, n: int) -> None:
    """Time each statement of ``n_adds`` adds with psycopg's pipeline turned off, so each one
    waits for its result: the sum is larger than a pipelined add, the shares are what counts."""
    spent: dict[str, list[float]] = {}
    plain_execute, plain_pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
    plain_many = psycopg.Cursor.executemany

    def note(query: Any, t0: float) -> None:
        text = query if isinstance(query, str) else repr(query)
        spent.setdefault(" ".join(text.split())[:100], []).append((time.perf_counter() - t0) * 1000)

    def timed(self: psycopg.Connection, query: Any, params: Any = None, **kw: Any) -> Any:
        t0 = time.perf_counter()
        cur = plain_execute(self, query, params, **kw)
        note(query, t0)
        return cur

    def timed_many(self: psycopg.Cursor, query: Any, rows: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        plain_many(self, query, rows, **kw)
        note(query, t0)

    adds = corpus.additions(2 * n_adds, n, 1)[1::2]  # other sessions than the timed adds'
    psycopg.Connection.execute, psycopg.Connection.pipeline = timed, lambda self: nullcontext()  # type: ignore
    psycopg.Cursor.executemany = timed_many  # type: ignore
    try:
        for j, (m, v) in enumerate(zip(adds, vectors.added(adds))):
            memory.add(m.content, user_id=m.user_id, session_id=m.session_id,
                       chunk_id=f"prof-stmt-{time.time_ns()}-{j}", timestamp=m.source.timestamp, embedding=v)
    finally:
        psycopg.Connection.execute, psycopg.Connection.pipeline = plain_execute, plain_pipeline  # type: ignore
        psycopg.Cursor.executemany = plain_many  # type: ignore
    total = sum(sum(v) for v in spent.values()) / n_adds
    print(f"per add, pipeline off: {total:.1f} ms in {sum(len(v) for v in spent.values()) / n_adds:.0f} "
          f"statements; the largest:", flush=True)
    for text, ms in sorted(spent.items(), key=lambda kv: -sum(kv[1]))[:12]:
        print(f"  {sum(ms) / n_adds:6.2f} ms ({100 * sum(ms) / n_adds / total:4.1f} %)  {text}", flush=True)


class _WireTrace:
    """Counts what the timed adds send, from libpq's trace of every connection the store
    takes from its pool: a round trip is a run of client messages answered by the server
    (the client then waits), a statement is a Query or an Execute, a transaction is a
    BEGIN or a statement sent outside one (autocommit)."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.file = backend, tempfile.TemporaryFile("w+")
        self.trips = self.statements = self.transactions = 0
        plain = type(backend)._conn

        @contextmanager
        def traced(*a: Any, **kw: Any) -> Iterator[Any]:
            with plain(backend, *a, **kw) as conn:
                self.file.flush()
                conn.pgconn.trace(self.file.fileno())
                conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
                try:
                    yield conn
                finally:
                    conn.pgconn.untrace()

        backend._conn = traced  # noqa: SLF001

    def __enter__(self) -> None:
        self.file.seek(0)
        self.file.truncate()

    def __exit__(self, *exc: object) -> None:
        self.file.seek(0)
        last, in_tx = "", False
        for line in self.file:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            side, kind = parts[0], parts[2].split(" ")[0]
            if side == "B" and last == "F":
                self.trips += 1
            last = side
            if side == "F" and kind == "Parse":
                text = parts[3] if len(parts) > 3 else ""
                if '"BEGIN' in text:
                    in_tx = True
                    self.transactions += 1
                elif '"COMMIT"' in text:
                    in_tx = False
                else:
                    self.statements += 1
                    self.transactions += not in_tx
            elif side == "F" and kind == "Query":
                self.statements += 1
                self.transactions += 1

    def report(self, n: int) -> None:
        print(f"per add: {self.trips / n:.1f} round trips, {self.statements / n:.1f} statements, "
              f"{self.transactions / n:.1f} transactions (libpq trace of {n} adds)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--data", default="/work/shared/data/locomo")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--adds", type=int, default=10)
    ap.add_argument("--explain", action="store_true")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--unscoped", action="store_true")
    ap.add_argument("--trips", action="store_true",
                    help="time a trivial search statement with the search settings sent as the store sends "
                         "them (one round trip) and in psycopg's conn.transaction() (as before), interleaved")
    ap.add_argument("--explain-filter", choices=("user only", "session", "tag", "agent"), default="user only",
                    help="what --explain's search is narrowed by besides the user")
    ap.add_argument("--filtered", action="store_true",
                    help="time one-user searches also narrowed by session, tag and agent, interleaved")
    ap.add_argument("--lexical-paths", action="store_true",
                    help="time both paths of a filtered lexical search (by key, through the postings), forced")
    ap.add_argument("--add-trips", action="store_true",
                    help="trace the wire protocol of each timed add (libpq's trace) and print its round trips, "
                         "statements and transactions (tracing slows the adds: time them in a run without it)")
    ap.add_argument("--add-statements", action="store_true",
                    help="after the timed adds, run as many more with the pipeline off and time each statement "
                         "(its server time plus a local round trip): where an add's time goes")
    ap.add_argument("--ab", action="store_true",
                    help="time each search with the store's search settings and with only the HNSW ones "
                         "(as before the planner settings), interleaved, so machine load hits both alike")
    ap.add_argument("--evidence", type=int, default=0, metavar="ROUNDS",
                    help="time the search statement and relevance's lexical evidence before (a second round trip) "
                         "and after (in the statement by GROUPING SETS; also a materialized and a read-twice variant), "
                         "interleaved, ROUNDS times "
                         "over the queries (one-user; with --filtered also narrowed by session)")
    args = ap.parse_args()

    corpus = ScaleCorpus.load(Path(args.data))
    vectors = Vectors(corpus, "text", ensure_text_embeddings(args.data, str(DEFAULT_CACHE_DIR)))
    queries = corpus.queries(args.queries + 5, 1, vectors)
    embedder = Precomputed("scale-benchmark:minilm-copies-384")
    embedder.add([q.text for q in queries], np.stack([q.vector for q in queries]))
    if args.rebuild:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS prof_{args.n} CASCADE")
    memory = _open(args.url, args.n, embedder)
    if memory.backend.count(None) < args.n:
        start = time.perf_counter()
        for lo in range(memory.backend.count(None), args.n, BLOCK):
            hi = min(args.n, lo + BLOCK)
            memory.add_many([_labelled(i, m.record(v)) for i, m, v in
                             zip(range(lo, hi), corpus.memories(lo, hi, 1), vectors.store(lo, hi))],
                            link=False, show_progress=False)
        if memory.backend.count(None) > memory.backend.exact_limit:
            memory.backend.ensure_vector_index()
        print(f"built {args.n} in {time.perf_counter() - start:.1f} s", flush=True)
    backend = memory.backend

    times = []
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        memory.search(q.text, user_id=None if args.unscoped else q.user_id, k=10, query_embedding=q.vector)
        if i >= 5:
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    if times:
        print(f"search p50 {statistics.median(times):.1f} ms  p95 {times[int(0.95 * len(times))]:.1f} ms", flush=True)

    if args.filtered:
        _filtered(memory, corpus, queries, args.n)
    if args.lexical_paths:
        _lexical_paths(memory, corpus, queries, args.n)
    if args.ab:
        _ab(memory, queries, args.unscoped)
    if args.trips:
        _trips(memory.backend)
    if args.evidence:
        _evidence(memory, corpus, queries, args.n, args.evidence, args.filtered)

    adds = corpus.additions(args.adds, args.n, 1)
    add_vecs = vectors.added(adds)
    at = []
    tracer = _WireTrace(backend) if args.add_trips else None
    for j, (m, v) in enumerate(zip(adds, add_vecs)):
        t0 = time.perf_counter()
        with tracer or nullcontext():
            memory.add(m.content, user_id=m.user_id, session_id=m.session_id, chunk_id=f"prof-{time.time_ns()}-{j}",
                       timestamp=m.source.timestamp, embedding=v)
        at.append((time.perf_counter() - t0) * 1000)
    if at:
        at.sort()
        print(f"add p50 {statistics.median(at):.1f} ms  p95 {at[int(0.95 * len(at))]:.1f} ms ({len(at)} adds)",
              flush=True)
    if tracer is not None and at:
        tracer.report(len(at))
    if args.add_statements and args.adds:
        _add_statements(memory, corpus, vectors, args.adds, args.n)

    if args.explain:
        q = queries[7]
        from beeweave_core.query import prepare_query

        terms = prepare_query(q.text, memory._shared.tokenizer).terms  # noqa: SLF001
        flt = Filter() if args.unscoped else Filter(user_ids=[q.user_id])
        narrow = _filters(corpus, args.n, 7)[args.explain_filter]
        flt = flt.replace(session_ids=[narrow["session_id"]] if "session_id" in narrow else None,
                          tags_any=narrow.get("tags"), agent_ids=[narrow["agent_id"]] if "agent_id" in narrow else None)
        print(f"EXPLAIN of one search with {flt}", flush=True)
        k = 40
        stmt, fargs = backend._statement(SEARCH_SQL, flt, d=384)
        params = {**backend._lexical_params(terms), "k": k, **backend._vector_params(q.vector.astype(np.float32), flt,
                                                                                     k, False),
                  "heavy": evidence_terms(terms), **fargs}
        with backend._tx() as conn:
            backend._settings(conn, k, narrowed(flt))  # noqa: SLF001
            plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + stmt, params).fetchall()
        print("\n".join(r[0] for r in plan))
    memory.close()


if __name__ == "__main__":
    main()
