"""What only the PostgreSQL backend has: tenants, versioned migrations, the URL's schema,
values PostgreSQL text cannot hold, and exact JSON round trips."""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

from beeweave_core import BeeWeave, IndexConfig, InvalidInputError, KnowledgeChunk, Relationship, SchemaVersionError
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.postgres.schema import MIGRATIONS
from tests.postgres.pg_support import fresh_schema, new_tenant, pg_url, schema_url, server_url  # noqa: F401

pytestmark = pytest.mark.slow

EVERYTHING = build_filter({"status": ["active", "pending", "archived", "merged", "expired"]})


def _row(cid: str, text: str, user: str = "ann", seed: int = 0, **kw) -> ChunkRow:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    terms = text.replace("\x00", " ").split()  # as the tokenizer does
    return ChunkRow(KnowledgeChunk(raw_content=text, id=cid, user_id=user, **kw), v / np.linalg.norm(v), terms)


@pytest.fixture
def two_tenants(pg_url):  # noqa: F811
    a = PostgresStore(pg_url, tenant=new_tenant("a"))
    b = PostgresStore(pg_url, tenant=new_tenant("b"))
    yield a, b
    a.close()
    b.close()


def test_tenants_share_tables_and_never_see_each_other(two_tenants) -> None:
    a, b = two_tenants
    a.insert([_row("m1", "apple pie", session_id="s", seed=1), _row("m2", "apple tart", session_id="s", seed=2)])
    b.insert([_row("m1", "banana bread", session_id="s", seed=3)])  # the same id and user in another tenant
    assert (a.count(), b.count()) == (2, 1)
    assert a.get(["m1"])["m1"].raw_content == "apple pie" and b.get(["m1"])["m1"].raw_content == "banana bread"
    assert b.lexical_search({"apple": 1}, EVERYTHING, 10) == []
    assert [i for i, _ in b.vector_search(a.get_vectors(["m2"])["m2"], EVERYTHING, 10)] == ["m1"]
    assert b.contains(["m2"]) == set() and b.matching(["m1", "m2"], EVERYTHING) == {"m1"}
    a.add_edges([Relationship("m1", "m2", "semantic")])
    b.add_edges([Relationship("m1", "m2", "semantic")])  # m2 is not b's: nothing is written
    assert b.edges(["m1", "m2"]) == [] and len(a.edges(["m1"])) == 1
    a.kv_put("notes", "k", {"v": 1}, user_id="ann")
    a.log_append("versions", "m1", {"v": 1}, user_id="ann")
    assert b.kv_get("notes", "k") is None and b.log_read("versions") == []
    a.set_meta("embedder", "x")
    assert b.get_meta("embedder") is None
    assert b.delete_user("ann") == 1
    assert a.count() == 2 and a.kv_get("notes", "k") == {"v": 1} and len(a.log_read("versions")) == 1
    # BM25 statistics are per tenant: b's (now empty) corpus changes nothing in a's scores.
    alone = PostgresStore(a.url, schema=a.schema, tenant=new_tenant("c"))
    try:
        alone.insert([_row("m1", "apple pie", session_id="s", seed=1), _row("m2", "apple tart", session_id="s", seed=2)])
        assert alone.lexical_search({"apple": 1, "pie": 1}, EVERYTHING, 5) == \
            a.lexical_search({"apple": 1, "pie": 1}, EVERYTHING, 5)
        assert alone.drop_tenant() == 2
        assert alone.count() == 0 and alone.get(["m1"]) == {}
    finally:
        alone.close()


def test_migrations_are_named_versioned_and_run_once(pg_url) -> None:  # noqa: F811
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        assert store.get_meta("schema_version") == str(len(MIGRATIONS))
        assert store.get_meta("migration_0001") == "0001_initial"
        with psycopg.connect(store.url) as conn:
            conn.execute(f'SET search_path TO "{store.schema}"')
            applied = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
            assert applied == [(i + 1, name) for i, (name, _) in enumerate(MIGRATIONS)]
            PostgresStore(pg_url, tenant=new_tenant()).close()  # a second open migrates nothing
            assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
    finally:
        store.close()


def test_a_newer_schema_is_refused() -> None:
    with fresh_schema("newer") as schema:
        url = schema_url(server_url(), schema)
        PostgresStore(url).close()
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(f'INSERT INTO "{schema}".schema_migrations (version, name) VALUES (99, \'9999_future\')')
        with pytest.raises(SchemaVersionError, match="upgrade beeweave"):
            PostgresStore(url)


def test_index_config_is_kept_per_tenant(pg_url) -> None:  # noqa: F811
    tenant = new_tenant()
    cfg = IndexConfig(context_radius=1)
    PostgresStore(pg_url, tenant=tenant, index_config=cfg).close()
    again = PostgresStore(pg_url, tenant=tenant)
    assert again.index_config == cfg
    again.close()
    with pytest.raises(InvalidInputError, match="open it without index_config"):
        PostgresStore(pg_url, tenant=tenant, index_config=IndexConfig(context_radius=3))


def test_nul_characters_are_refused_or_kept_exactly(pg_url) -> None:  # noqa: F811
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        with pytest.raises(InvalidInputError, match="NUL"):
            store.insert([_row("ok", "fine"), _row("bad", "text", session_id="a\x00b")])
        assert store.count() == 0  # the whole batch was refused
        # Inside the record's text (JSON) a NUL is stored and comes back as it went in.
        store.insert([_row("nul", "zero\x00byte", metadata={"raw": "a\x00b"})])
        got = store.get(["nul"])["nul"]
        assert got.raw_content == "zero\x00byte" and got.metadata == {"raw": "a\x00b"}
        # Filters and lookups with NUL simply match nothing.
        assert store.get(["a\x00"]) == {} and store.count(build_filter({"user_id": "a\x00b"})) == 0
        assert store.lexical_search({"x\x00": 1}, EVERYTHING, 5) == []
    finally:
        store.close()


def test_json_round_trips_exactly(pg_url) -> None:  # noqa: F811
    """jsonb would turn 1e300 into an integer and reorder keys; the store keeps them."""
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        meta = {"z": 1, "a": [1e300, 1.5e-7, 2**70, None, True], "中文": "值"}
        store.insert([_row("j", "json", metadata=meta)])
        got = store.get(["j"])["j"].metadata
        assert got == meta and list(got) == ["z", "a", "中文"] and isinstance(got["a"][0], float)
        store.kv_put("ns", "k", meta)
        assert store.kv_get("ns", "k") == meta
    finally:
        store.close()


def test_url_schema_parameter_and_bad_arguments() -> None:
    with pytest.raises(InvalidInputError):
        PostgresStore(schema_url(server_url(), "no-dashes-allowed"))
    with pytest.raises(InvalidInputError):
        PostgresStore(server_url(), tenant="")
    with pytest.raises(InvalidInputError):
        PostgresStore(server_url(), pool_size=0)
    # Refused before anything is opened: the server named does not exist.
    with pytest.raises(InvalidInputError, match="exact_limit"):
        BeeWeave.from_url("postgresql://nobody@127.0.0.1:1/none", exact_limit=0)
    with pytest.raises(InvalidInputError, match="pool_size"):
        BeeWeave.from_url("postgresql://nobody@127.0.0.1:1/none", pool_size=0)
    with pytest.raises(InvalidInputError, match="sql_search"):
        BeeWeave.from_url("postgresql://nobody@127.0.0.1:1/none?sql_search=false")


def test_a_read_only_store_reads_like_the_primary_and_refuses_writes(pg_url) -> None:  # noqa: F811
    """What a store on a read replica does (here on the primary, with read-only sessions)."""
    from beeweave_core import StoreUnavailableError

    tenant = new_tenant()
    primary = PostgresStore(pg_url, tenant=tenant, index_config=IndexConfig(context_radius=1))
    replica = PostgresStore(pg_url, tenant=tenant, read_only=True)
    try:
        primary.insert([_row("r1", "apple pie", session_id="s", seed=1), _row("r2", "apple tart", session_id="s", seed=2)])
        assert replica.index_config == primary.index_config
        assert replica.lexical_search({"apple": 1}, EVERYTHING, 5) == primary.lexical_search({"apple": 1}, EVERYTHING, 5)
        assert replica.get(["r1"]) == primary.get(["r1"]) and replica.count() == 2
        writes = {
            "insert": lambda: replica.insert([_row("r3", "kiwi")]),
            "delete": lambda: replica.delete(["r1"]),
            "update": lambda: replica.update([primary.get(["r1"])["r1"]]),
            "modify": lambda: replica.modify(["r1"], lambda current: list(current.values())),
            "set_meta": lambda: replica.set_meta("k", "v"),
            "kv_put": lambda: replica.kv_put("ns", "k", {}),
            "log_append": lambda: replica.log_append("s", "k", {}),
            "add_edges": lambda: replica.add_edges([Relationship("r1", "r2", "semantic")]),
        }
        for _name, call in writes.items():
            with pytest.raises(StoreUnavailableError, match="read_only"):
                call()
        assert primary.count() == 2
    finally:
        primary.close()
        replica.close()


def test_verify_finds_and_repair_fixes_what_is_kept_beside_the_records(pg_url) -> None:  # noqa: F811
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        store.insert([_row(f"v{i}", f"apple {'pie ' * (i % 3)}tart{i}", session_id="s" if i % 4 else None, seed=i,
                           timestamp=1_700_000_000 + i // 2) for i in range(30)])
        store.add_edges([Relationship("v1", "v2", "semantic")])
        store.delete(["v7"])
        report = store.verify()
        assert report.ok and report.records == 29 and report.edges == 1, report.problems
        before = store.lexical_search({"apple": 1, "pie": 2}, EVERYTHING, 50)
        with store.db.conn() as conn:  # damage everything kept beside the records
            t = {"t": store.tenant}
            for damage in ("UPDATE @stats SET n_docs = n_docs + 3 WHERE tenant = %(t)s",
                           "DELETE FROM @access WHERE tenant = %(t)s AND seq IN "
                           "(SELECT seq FROM @chunks WHERE tenant = %(t)s AND id = 'v3')",
                           "INSERT INTO @postings (tenant, term, chunk_seq, tf) VALUES (%(t)s, 'ghost', -1, 1)",
                           "INSERT INTO @vectors (tenant, seq, dim, embedding) "
                           "SELECT tenant, -1, dim, embedding FROM @vectors WHERE tenant = %(t)s LIMIT 1"):
                conn.execute(store.db.q(damage), t)
        broken = store.verify()
        assert not broken.ok and broken.problem_count == 4, broken.problems
        fixed = store.repair()
        assert fixed.ok, fixed.problems
        assert store.count() == 29
        assert store.lexical_search({"apple": 1, "pie": 2}, EVERYTHING, 50) == before
    finally:
        store.close()


def test_a_bulk_insert_that_outgrows_the_planner_statistics_analyzes() -> None:
    """Right after an import the planner would plan with the statistics of an empty table
    (adds three times slower until autovacuum ran); a batch of ANALYZE_BATCH rows or more
    that leaves them under half of what is stored runs ANALYZE, a small batch does not."""
    import random

    from beeweave_core.store.postgres.store import ANALYZE_BATCH
    from tests.postgres.test_pg_parity import make_rows

    with fresh_schema("an") as schema:
        url = schema_url(server_url(), schema)
        store = PostgresStore(url, tenant=new_tenant())
        try:
            def planned() -> float:
                with psycopg.connect(server_url(), autocommit=True) as conn:
                    return float(conn.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
                                              (f'"{schema}".chunks',)).fetchone()[0])

            rows = make_rows(random.Random(1), np.random.default_rng(1), ANALYZE_BATCH + 10)
            store.insert(rows[:10])
            assert planned() < 0  # never analyzed: a small batch leaves it to autovacuum
            store.insert(rows[10:])
            assert planned() == ANALYZE_BATCH + 10
        finally:
            store.close()


def _old_store(schema: str, tenant: str, rows: list[ChunkRow], *, sql_search: bool) -> None:
    """A store as the code before schema 0012 left it (every table of the SQL search, a
    pgvector graph; the tenant's SQL search on or off), written with the published
    migrations 0001-0011 and the rows in their layout."""
    with psycopg.connect(server_url(), autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        vschema = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                               "WHERE e.extname = 'vector'").fetchone()[0]
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET LOCAL search_path TO "{schema}", "{vschema}"')
        conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        for i, (name, ddl) in enumerate(MIGRATIONS[:11], start=1):
            conn.execute(ddl)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (i, name))
        conn.execute("INSERT INTO meta (tenant, key, value) VALUES (%s, 'index_config', %s)",
                     (tenant, json.dumps(IndexConfig().to_dict())))
        if not sql_search:
            conn.execute("INSERT INTO meta (tenant, key, value) VALUES (%s, 'sql_search', 'off')", (tenant,))
        for seq, r in enumerate(rows, start=1):
            c, doc = r.chunk, r.chunk.to_dict()
            doc.pop("relationships")
            conn.execute("INSERT INTO chunks (tenant, seq, id, user_id, session_id, ts, status, ctype, tags, entities, "
                         "doc, doc_len, nb_len, tier, turn) VALUES (%s, %s, %s, %s, %s, %s, 'active', 'text', '{}', "
                         "'{}', %s, %s, 0, 'long', true)",
                         (tenant, seq, c.id, c.user_id, c.session_id, c.timestamp.timestamp(), json.dumps(doc),
                          len(r.terms)))
            conn.execute("INSERT INTO vectors (tenant, seq, dim, embedding, graph) VALUES (%s, %s, 8, %s::vector, %s)",
                         (tenant, seq, str([float(x) for x in r.vector]), sql_search))
            conn.execute("INSERT INTO access (tenant, seq, n) VALUES (%s, %s, 0)", (tenant, seq))
            for term in set(r.terms):
                conn.execute("INSERT INTO postings (tenant, term, chunk_seq, tf) VALUES (%s, %s, %s, %s)",
                             (tenant, term, seq, r.terms.count(term)))
                if sql_search:
                    conn.execute("INSERT INTO cpost (tenant, seq, term, user_id, status, f, clen) "
                                 "VALUES (%s, %s, %s, %s, 'active', 1, 1)", (tenant, seq, term, c.user_id))
            conn.execute("INSERT INTO changes (tenant, id, op) VALUES (%s, %s, 'w')", (tenant, c.id))
        conn.execute("SELECT setval('chunk_seq', %s)", (len(rows),))
        conn.execute("INSERT INTO stats (tenant, n_docs, total_len, total_nb_len, dim) VALUES (%s, %s, %s, 0, 8)",
                     (tenant, len(rows), sum(len(r.terms) for r in rows)))
        conn.execute(f"CREATE INDEX vectors_graph_8 ON vectors USING hnsw ((embedding::\"{vschema}\".vector(8)) "
                     f"\"{vschema}\".vector_ip_ops) WHERE dim = 8 AND graph")


@pytest.mark.parametrize("sql_search", [True, False], ids=["sql-search-on", "sql-search-off"])
def test_a_store_of_the_older_schema_migrates_to_the_one_search_path(sql_search) -> None:
    """Schema 0012 drops what only the SQL search read, whatever the tenant's setting was,
    and the store then searches, reads and verifies as a new one."""
    rows = [_row(f"m{i}", f"kiwi {'mango ' * (i % 3)}note{i}", session_id="s", seed=i,
                 timestamp=1_700_000_000 + i) for i in range(12)]
    tenant = new_tenant()
    with fresh_schema("old") as schema:
        _old_store(schema, tenant, rows, sql_search=sql_search)
        store = PostgresStore(schema_url(server_url(), schema), tenant=tenant)
        try:
            assert store.get_meta("schema_version") == str(len(MIGRATIONS)) == "12"
            with psycopg.connect(server_url(), autocommit=True) as conn:
                left = {r[0] for r in conn.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s", (schema,))}
            assert not left & {"cpost", "ctxvec", "df_hist", "neighbours", "terms", "ucount", "vectors_graph_8"}
            assert store.get_meta("sql_search") is None
            assert store.verify().ok
            assert set(store.get(["m1", "m5"])) == {"m1", "m5"}
            hits = store.retrieve({"mango": 1}, rows[5].vector, EVERYTHING, 3)
            assert hits.ids[0] == "m5" or "m5" in hits.ids
            assert dict(store.vector_search(rows[5].vector, EVERYTHING, 1)) == pytest.approx({"m5": 1.0}, abs=1e-5)
            store.insert([_row("new", "kiwi fresh", session_id="s", seed=99)])
            assert store.count() == 13 and "new" in {i for i, _ in store.lexical_search({"fresh": 1}, EVERYTHING, 3)}
        finally:
            store.close()
