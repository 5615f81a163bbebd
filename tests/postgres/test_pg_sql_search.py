"""A tenant's SQL search turned off (``PostgresStore.set_sql_search``): its writes keep no
context postings or context vectors (``cpost``, ``ctxvec``), every store of the tenant answers
its searches from a local index, and the answers equal those of the same records in a
tenant whose SQL search is on. Turned on again, the two tables are rebuilt and SQL search
answers as before. A store that opened before another process switched follows at its
next write (which reads the setting under the tenant lock) or search (which reads it
beside its statement)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta

import numpy as np
import psycopg
import pytest

from beeweave_core import BeeWeave, ChunkStatus
from beeweave_core.errors import InvalidInputError, StoreUnavailableError
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.postgres.test_pg_local_index import assert_same_candidates
from tests.postgres.test_pg_parity import DIM, make_rows, queries, random_filters
from tests.support import unit_vectors

pytestmark = pytest.mark.slow


def _context_rows(store: PostgresStore) -> int:
    """The tenant's rows in the two tables only the SQL search reads."""
    with psycopg.connect(store.url) as conn:
        return int(conn.execute(
            f'SELECT (SELECT count(*) FROM "{store.schema}".cpost WHERE tenant = %(t)s) '
            f'+ (SELECT count(*) FROM "{store.schema}".ctxvec WHERE tenant = %(t)s)', {"t": store.tenant}).fetchone()[0])


@contextmanager
def _twins(url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two empty tenants: SQL search on (the default) and off; both closed after."""
    on = PostgresStore(url, tenant=new_tenant(), exact_limit=10_000)
    off = PostgresStore(url + "&sql_search=false", tenant=new_tenant(), exact_limit=10_000)
    try:
        assert on.sql_search and on.local is None
        assert not off.sql_search and off.local is not None
        yield on, off
    finally:
        on.close()
        off.close()


def _write_everything(stores: list[PostgresStore], rnd: random.Random, rng: np.random.Generator) -> None:
    """The same inserts, deletes, updates (time, session, status, tags) and new texts in each store."""
    rows = make_rows(rnd, rng, 160)
    ids = [r.chunk.id for r in rows]
    gone = rnd.sample(ids, 20)
    alive = sorted(set(ids) - set(gone))
    moved = rnd.sample(alive, 25)
    moves = [(timedelta(hours=rnd.randint(-5, 5)), rnd.choice(["s1", "s2", None]),
              rnd.choice([ChunkStatus.ACTIVE, ChunkStatus.ARCHIVED])) for _ in moved]
    rewritten = rnd.sample(alive, 8)
    vecs = unit_vectors(rng, len(rewritten), DIM)
    for store in stores:
        store.insert(rows)
        store.delete(gone)
        store.update([store.get([cid])[cid].copy(timestamp=store.get([cid])[cid].timestamp + dt, session_id=session,
                                                  status=status, tags=["z"])
                      for cid, (dt, session, status) in zip(moved, moves, strict=True)])
        store.replace([ChunkRow(store.get([cid])[cid].copy(raw_content="fresh words here"), vecs[i],
                                ["fresh", "words", "here"]) for i, cid in enumerate(rewritten)])


def _same_answers(on: PostgresStore, off: PostgresStore, rnd: random.Random, rng: np.random.Generator) -> None:
    qvec = unit_vectors(rng, 1, DIM)[0]
    for flt in random_filters(rnd):
        for terms in queries(rnd)[:3]:
            assert_same_candidates(on, off, terms, qvec, flt, 12)
            f = build_filter(flt)
            # every match (k past the store's size), so ties at the cut cannot differ
            want, got = dict(on.lexical_search(terms, f, 500)), dict(off.lexical_search(terms, f, 500))
            assert set(got) == set(want)
            assert all(got[cid] == pytest.approx(score, abs=1e-6) for cid, score in want.items())
    ids = on.scan_ids(build_filter({"status": ["active", "archived"]}))[:30]
    want, got = on.vector_scores(qvec, ids), off.vector_scores(qvec, ids)
    assert set(got) == set(want)
    for cid, score in want.items():
        assert got[cid] == pytest.approx(score, abs=1e-5)


def test_writes_keep_no_context_and_searches_equal_a_tenant_with_sql_search(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(21), np.random.default_rng(21)
    with _twins(pg_url) as (on, off):
        _write_everything([on, off], random.Random(1), np.random.default_rng(1))
        assert _context_rows(off) == 0 and _context_rows(on) > 0
        assert on.verify().problems == [] and off.verify().problems == []
        _same_answers(on, off, rnd, rng)


def test_switching_off_and_on_drops_and_rebuilds_what_sql_search_reads(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(22), np.random.default_rng(22)
    with _twins(pg_url) as (reference, store):
        store.set_sql_search(True)
        assert store.sql_search and store.local is None
        _write_everything([reference, store], random.Random(2), np.random.default_rng(2))
        before = _context_rows(store)
        assert before > 0
        store.set_sql_search(False)
        assert _context_rows(store) == 0 and store.verify().problems == []
        assert store.get_meta("sql_search") == "off"
        _same_answers(reference, store, rnd, rng)
        store.set_sql_search(False)  # already off: nothing to do
        store.set_sql_search(True)
        assert _context_rows(store) == before and store.verify().problems == []
        assert store.local is None and store.get_meta("sql_search") is None
        _same_answers(reference, store, rnd, rng)


def test_a_store_opened_before_the_switch_follows_at_its_next_search_and_write(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(23), np.random.default_rng(23)
    tenant = new_tenant()
    rows = make_rows(rnd, rng, 60)
    with closing(PostgresStore(pg_url, tenant=tenant, exact_limit=10_000)) as first, \
            closing(PostgresStore(pg_url, tenant=tenant, exact_limit=10_000)) as second:
        first.insert(rows[:40])
        terms, qvec, flt = queries(rnd)[0], unit_vectors(rng, 1, DIM)[0], build_filter({})
        want = second.retrieve(terms, qvec, flt, 10)
        first.set_sql_search(False)
        assert second.sql_search and second.local is None  # it has not looked yet
        got = second.retrieve(terms, qvec, flt, 10)  # the statement's answer is not used: the local index's is
        assert not second.sql_search and second.local is not None
        assert got.ids == want.ids
        np.testing.assert_allclose(got.lexical, want.lexical, rtol=0, atol=1e-6)
        first.set_sql_search(True)
        assert second.local is not None  # until its next search or write reads the setting
        again = second.retrieve(terms, qvec, flt, 10)  # its freshness check reads it: SQL from the next one
        assert again.ids == want.ids and second.sql_search and second.local is None
        first.set_sql_search(False)
        first.set_sql_search(True)
        second._note_sql_search("off")  # as if it had last seen it off  # noqa: SLF001
        second.insert(rows[40:])  # the write reads the setting under the lock: context rows kept
        assert second.sql_search and second.local is None
        assert second.verify().problems == []
        first.set_sql_search(False)
        second.delete([rows[0].chunk.id])  # reads the setting under the lock: keeps nothing
        assert not second.sql_search and _context_rows(second) == 0
        assert second.verify().problems == []
        # the other SQL-only reads follow too
        with closing(PostgresStore(pg_url, tenant=tenant, exact_limit=10_000)) as third:
            assert not third.sql_search  # read as it opens
            first.set_sql_search(True)
            first.set_sql_search(False)
            third._note_sql_search(None)  # as if it had last seen it on  # noqa: SLF001
            assert third.lexical_search(terms, flt, 5) == second.lexical_search(terms, flt, 5)
            assert not third.sql_search


def test_a_declared_field_filter_reads_its_ids_in_sql_and_ranks_locally(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(24), np.random.default_rng(24)
    with _twins(pg_url) as (on, off):
        rows = make_rows(rnd, rng, 50)
        on.insert(rows)
        off.insert(rows)
        flt = build_filter({"speaker": "ann"}, declared={"speaker": "str"})
        terms, qvec = queries(rnd)[0], rows[0].vector
        want = on.retrieve(terms, qvec, flt, 20)
        got = off.retrieve(terms, qvec, flt, 20)
        assert got.ids == want.ids and got.ids
        np.testing.assert_allclose(got.lexical, want.lexical, rtol=0, atol=1e-6)
        assert off.local is not None and off.local.seen >= 0  # the local index answered


def test_bad_input_and_read_only_stores_change_nothing(pg_url) -> None:  # noqa: F811
    with pytest.raises(InvalidInputError, match="sql_search"):
        PostgresStore(pg_url + "&sql_search=sometimes", tenant=new_tenant())
    tenant = new_tenant()
    with closing(PostgresStore(pg_url, tenant=tenant)) as store:
        with pytest.raises(InvalidInputError, match="set_sql_search"):
            store.set_meta("sql_search", "off")
        assert store.sql_search and store.get_meta("sql_search") is None
        with closing(PostgresStore(pg_url, tenant=tenant, read_only=True)) as replica:
            with pytest.raises(StoreUnavailableError, match="read_only"):
                replica.set_sql_search(False)
        assert store.get_meta("sql_search") is None
        store.drop_tenant()
        store.set_sql_search(False)
        store.drop_tenant()  # keeps the tenant's setting, as it keeps its index configuration
        assert store.get_meta("sql_search") == "off"


def test_the_engine_on_a_tenant_without_sql_search(pg_url) -> None:  # noqa: F811
    url = pg_url + "&sql_search=false"
    with BeeWeave.from_url(url, tenant=new_tenant(), embedder="beeweave:hashing-64") as memory:
        memory.add("Staging listens on port 5433.", user_id="alice", session_id="s1")
        memory.add("The user prefers answers in Chinese.", user_id="alice", session_id="s1")
        hits = memory.search("staging port", user_id="alice", k=2)
        assert hits[0].chunk.raw_content == "Staging listens on port 5433."
        assert memory.backend.local is not None and _context_rows(memory.backend) == 0


def test_a_switch_between_a_sql_search_and_its_setting_read_is_seen(pg_url) -> None:  # noqa: F811
    """The search statement and the setting read share one snapshot: a switch back on that
    commits between them cannot pass off an answer read from the emptied tables."""
    from beeweave_core.store.postgres.store import _SQL_SEARCH_SQL

    rnd, rng = random.Random(25), np.random.default_rng(25)
    tenant = new_tenant()
    with closing(PostgresStore(pg_url, tenant=tenant, exact_limit=10_000)) as first, \
            closing(PostgresStore(pg_url, tenant=tenant, exact_limit=10_000)) as second:
        first.insert(make_rows(rnd, rng, 60))
        terms, qvec, flt = queries(rnd)[0], unit_vectors(rng, 1, DIM)[0], build_filter({})
        want = second.retrieve(terms, qvec, flt, 10)
        first.set_sql_search(False)  # the tables emptied; ``second`` still believes it on
        held: dict = {}
        settings, qualify = second._settings, second._q  # noqa: SLF001

        def keep_conn(conn, k, narrowed=False):
            held["conn"] = conn
            return settings(conn, k, narrowed)

        def q(text):
            if text == _SQL_SEARCH_SQL and "conn" in held:
                conn = held.pop("conn")
                conn._pipeline.sync()  # the search statement has run (tables empty)  # noqa: SLF001
                first.set_sql_search(True)  # another process switches back on and commits
            return qualify(text)

        second._settings, second._q = keep_conn, q  # noqa: SLF001
        got = second.retrieve(terms, qvec, flt, 10)
        assert got.ids == want.ids
        np.testing.assert_allclose(got.lexical, want.lexical, rtol=0, atol=1e-6)
        np.testing.assert_allclose(got.vector, want.vector, rtol=0, atol=1e-5)


def _graph_flags(store: PostgresStore) -> tuple[int, int]:
    """The tenant's vectors in pgvector's graph, and out of it (``vectors.graph``)."""
    with psycopg.connect(store.url) as conn:
        return tuple(int(n) for n in conn.execute(
            f'SELECT count(*) FILTER (WHERE graph), count(*) FILTER (WHERE NOT graph) FROM "{store.schema}".vectors '
            "WHERE tenant = %s", (store.tenant,)).fetchone())


def test_a_tenant_without_sql_search_keeps_its_vectors_out_of_the_graph(pg_url) -> None:  # noqa: F811
    """Its vectors never go into pgvector's graph (40 % of an add's server time): nearest
    records come from its local indexes, equal to the exact answers of SQL search."""
    rnd, rng = random.Random(24), np.random.default_rng(24)
    with _twins(pg_url) as (on, off):
        _write_everything([on, off], random.Random(4), np.random.default_rng(4))
        n = on.count(build_filter({"status": ["active", "archived"]}))
        assert _graph_flags(on) == (n, 0) and _graph_flags(off) == (0, n)
        on.ensure_vector_index()
        qvec = unit_vectors(rng, 1, DIM)[0]
        for flt in random_filters(rnd):
            f = build_filter(flt)
            want = on.vector_search(qvec, f, 8, exact=True)
            for exact in (True, False):
                got = off.vector_search(qvec, f, 8, exact=exact)
                assert [i for i, _ in got] == [i for i, _ in want]
                assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
        off.set_sql_search(True)
        assert _graph_flags(off) == (n, 0) and off.verify().problems == []
        off.set_sql_search(False)
        assert _graph_flags(off) == (0, n) and off.verify().problems == []
        with psycopg.connect(off.url, autocommit=True) as conn:  # a flag gone wrong is found and repaired
            conn.execute(f'UPDATE "{off.schema}".vectors SET graph = true WHERE tenant = %s', (off.tenant,))
        assert any("graph" in p for p in off.verify().problems)
        off.repair()
        assert _graph_flags(off) == (0, n) and off.verify().problems == []


def test_schema_0011_takes_tenants_without_sql_search_out_of_the_graph(pg_url) -> None:  # noqa: F811
    """A schema from before 0011 (every vector in the graph, whose index has the older name)
    is migrated at the next open without a rewrite: the open builds the new index in the
    background and only then drops the old one, and repair() takes the older vectors of a
    tenant without SQL search out of the graph and drops its df and neighbours."""
    from beeweave_core.store.postgres import verify as pg_verify
    from beeweave_core.store.postgres.schema import hnsw_index_name

    with _twins(pg_url) as (on, off):
        _write_everything([on, off], random.Random(5), np.random.default_rng(5))
        schema, url = on.schema, on.url
        with off._write() as conn:  # noqa: SLF001  (before 0011 a tenant without SQL search kept these)
            pg_verify.set_context(conn, off._q, off.tenant, True, off.index_config.context_radius, 0.3, 0.3)  # noqa: SLF001
            for table in ("cpost", "ctxvec"):
                conn.execute(off._q(f"DELETE FROM @{table} WHERE tenant = %s"), (off.tenant,))  # noqa: SLF001
        assert off.verify().problems  # (what 0011 deletes)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        conn.execute("DROP INDEX IF EXISTS " + hnsw_index_name(DIM))
        conn.execute("ALTER TABLE vectors DROP COLUMN graph")
        conn.execute(f"CREATE INDEX vectors_hnsw_{DIM} ON vectors USING hnsw ((embedding::vector({DIM})) "
                     f"vector_ip_ops) WHERE dim = {DIM}")
        conn.execute("DELETE FROM schema_migrations WHERE version = 11")
    started = time.perf_counter()
    again, off_again = PostgresStore(pg_url, tenant=on.tenant), PostgresStore(pg_url, tenant=off.tenant)
    try:
        n = again.count(build_filter({"status": ["active", "archived"]}))
        # the migration rewrites nothing: the older rows of a tenant without SQL search wait for repair()
        assert _graph_flags(again) == (n, 0) and _graph_flags(off_again) == (n, 0)
        assert again.verify().problems == [] and len(off_again.verify().problems) == 2
        off_again.repair()
        assert _graph_flags(off_again) == (0, n) and off_again.verify().problems == []
        assert time.perf_counter() - started < 60
        assert again._builder is not None  # noqa: SLF001  (the open started the new graph's build)
        again._builder.join(60)  # noqa: SLF001
        off_again._builder.join(60)  # noqa: SLF001
        with psycopg.connect(url) as conn:
            names = {r[0]: r[1] for r in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (schema,)).fetchall()}
        assert f"vectors_hnsw_{DIM}" not in names and "graph" in names[hnsw_index_name(DIM)]
    finally:
        again.close()
        off_again.close()
