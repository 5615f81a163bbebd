"""What only the PostgreSQL backend has: tenants, versioned migrations, the URL's schema,
values PostgreSQL text cannot hold, and exact JSON round trips."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from beeweave_core import IndexConfig, InvalidInputError, KnowledgeChunk, Relationship, SchemaVersionError
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.postgres.schema import MIGRATIONS, hnsw_index_name
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


def test_verify_finds_and_repair_fixes_every_derived_table(pg_url) -> None:  # noqa: F811
    # Every memory with a session has context, so every derived table has rows to damage.
    store = PostgresStore(pg_url, tenant=new_tenant(), index_config=IndexConfig(context_radius=2,
                                                                                  session_context="all"))
    try:
        store.insert([_row(f"v{i}", f"apple {'pie ' * (i % 3)}tart{i}", session_id="s" if i % 4 else None, seed=i,
                           timestamp=1_700_000_000 + i // 2) for i in range(30)])
        store.add_edges([Relationship("v1", "v2", "semantic")])
        store.delete(["v7"])
        report = store.verify()
        assert report.ok and report.records == 29 and report.edges == 1, report.problems
        before = store.lexical_search({"apple": 1, "pie": 2}, EVERYTHING, 50)
        with store._conn() as conn:  # damage everything derived
            t = {"t": store.tenant}
            for damage in ("UPDATE @terms SET df = df + 1 WHERE tenant = %(t)s AND term = 'pie'",
                           "DELETE FROM @df_hist WHERE tenant = %(t)s AND df = 1",
                           "UPDATE @stats SET n_docs = n_docs + 3, total_nb_len = 0 WHERE tenant = %(t)s",
                           "DELETE FROM @neighbours WHERE tenant = %(t)s AND seq IN "
                           "(SELECT seq FROM @chunks WHERE tenant = %(t)s AND id = 'v5')",
                           "UPDATE @chunks SET doc_len = 99 WHERE tenant = %(t)s AND id = 'v9'",
                           "UPDATE @cpost SET f = f + 1 WHERE tenant = %(t)s AND term = 'apple'",
                           "UPDATE @ucount SET n = n + 1 WHERE tenant = %(t)s",
                           "UPDATE @ctxvec SET norm = norm + 1 WHERE tenant = %(t)s",
                           "DELETE FROM @access WHERE tenant = %(t)s AND seq IN "
                           "(SELECT seq FROM @chunks WHERE tenant = %(t)s AND id = 'v3')"):
                conn.execute(store._q(damage), t)
        broken = store.verify()
        assert not broken.ok and broken.problem_count >= 9, broken.problems
        assert store.lexical_search({"apple": 1, "pie": 2}, EVERYTHING, 50) != before
        fixed = store.repair()
        assert fixed.ok, fixed.problems
        got = store.lexical_search({"apple": 1, "pie": 2}, EVERYTHING, 50)
        assert [s for _, s in got] == pytest.approx([s for _, s in before], abs=1e-9)
        # The same order but for ties: a record's sum follows the order of its rebuilt rows, so
        # two records tied before can come out one ulp apart.
        was = dict(before)
        assert all(g == b or abs(was[g] - s) <= 1e-9 for (g, _), (b, s) in zip(got, before, strict=True))
    finally:
        store.close()


def _hnsw_valid(url: str, schema: str, dim: int) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                           (f'"{schema}".{hnsw_index_name(dim)}',)).fetchone()
    return bool(row and row[0])


def test_the_graph_is_built_by_the_first_search_past_exact_limit_not_by_writes() -> None:
    """Inserts never start the HNSW build (a bulk load would otherwise maintain the graph
    row by row); the first search with more candidates than exact_limit does, and until
    the graph is valid its answers stay exact."""
    with fresh_schema("lazy") as schema:
        store = PostgresStore(schema_url(server_url(), schema), tenant=new_tenant(), exact_limit=5)
        try:
            rows = [_row(f"m{i}", f"word{i % 3} memory", seed=i) for i in range(12)]
            store.insert(rows[:6])
            store.insert(rows[6:])
            assert store._builder is None and not _hnsw_valid(server_url(), schema, 8)
            # A search whose filter leaves few candidates needs no graph either.
            store.vector_search(rows[0].vector, build_filter({"ids": ["m1", "m2"]}), 2)
            assert store._builder is None
            vecs = np.stack([r.vector for r in rows])
            want = [f"m{i}" for i in np.argsort(-(vecs @ rows[3].vector), kind="stable")[:4]]
            got = store.retrieve({"memory": 1}, rows[3].vector, EVERYTHING, 4)
            assert store._builder is not None  # the search started the build
            store._builder.join(60)
            assert _hnsw_valid(server_url(), schema, 8)
            assert set(want) <= set(got.ids)
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
