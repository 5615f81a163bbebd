"""PostgresStore behind a real PgBouncer in transaction pooling mode: two schemas and two
tenants through two server connections shared by every client, each answering searches from its
local index caught up through the pooler. Nothing crosses: no statement depends on a
connection's search_path, prepared statements or session settings."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest

from beeweave_core import KnowledgeChunk
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from tests.postgres.pg_bouncer import pgbouncer
from tests.postgres.pg_support import fresh_schema, schema_url, server_url

pytestmark = pytest.mark.slow

DIM = 16


def _rows(prefix: str, n: int, seed: int) -> list[ChunkRow]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [ChunkRow(KnowledgeChunk(raw_content=f"{prefix} deploy note {i}", id=f"{prefix}-{i}", user_id="ann",
                                    session_id=f"s{i % 3}"), vecs[i], [prefix, "deploy", "note", str(i)])
            for i in range(n)]


def test_two_schemas_and_tenants_through_transaction_pooling_never_cross() -> None:
    with pgbouncer(server_url(), pool_size=2) as bouncer, fresh_schema("pgb") as s1, fresh_schema("pgb") as s2:
        # One tenant name in both schemas, and a second tenant in the first: three memories.
        stores = {(s, t): PostgresStore(schema_url(bouncer, s), tenant=t, pool_size=3)
                  for s, t in ((s1, "acme"), (s2, "acme"), (s1, "beta"))}
        try:
            names = {key: f"{key[0][-4:]}{key[1]}" for key in stores}
            errors: list[BaseException] = []

            def work(key: tuple[str, str], seed: int) -> None:
                try:
                    store, name = stores[key], names[key]
                    for start in range(0, 60, 10):
                        store.insert(_rows(name, 60, seed)[start : start + 10])
                        # Reads interleave with the other stores' writes on the shared connections.
                        hits = store.lexical_search({"deploy": 1, name: 1}, build_filter(None), 100)
                        assert all(cid.startswith(name + "-") for cid, _ in hits), hits
                        got = store.retrieve({"deploy": 1}, _rows(name, 1, seed + 1)[0].vector, build_filter(None), 20,
                                             evidence=["deploy"], optimistic=True)
                        assert got.ids and all(cid.startswith(name + "-") for cid in got.ids)
                        # the records (pipelined, with the evidence scored meanwhile)
                        records = got.records(got.ids[:5])
                        assert sorted(records) == sorted(got.ids[:5]) and got.evidence is not None
                        assert store.count() == start + 10
                        q = store.ingest_queue()
                        q.put(f"{name}-ev{start}", "ann", '{"id": "x"}')
                        assert {e.id for e in q.take(100)} <= {f"{name}-ev{i}" for i in range(0, 60, 10)}
                except BaseException as exc:  # reported by the main thread
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(key, i)) for i, key in enumerate(stores)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(120)
            assert not errors, errors[0]
            assert all(store.local.loads == 1 for store in stores.values())  # built once, then caught up
            for key, store in stores.items():
                name = names[key]
                assert store.count() == 60
                assert sorted(store.contains([f"{n}-{i}" for n in names.values() for i in range(60)])) == \
                    sorted(f"{name}-{i}" for i in range(60))
                assert store.ingest_queue().pending_count() == 6
                assert store.verify().ok
            # Nothing was left prepared or set on the server connections PgBouncer hands round.
            with psycopg.connect(bouncer, autocommit=True, prepare_threshold=None) as conn:
                assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
                assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'
        finally:
            for store in stores.values():
                store.close()
