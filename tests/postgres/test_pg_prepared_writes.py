"""``prepare_writes``: the statements of a write run as server-side prepared statements on
the connection that ran them, reads never do (the linking reads inside an add included),
and a write the server refuses halfway leaves no statement behind that the next write
could trip on. (The conformance suite runs with the option in
tests/test_conformance_postgres.py; this module checks the server's side of it.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import InvalidInputError
from beeweave_core.filters import build_filter
from beeweave_core.store.postgres import PostgresStore
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.postgres.test_pg_parity import make_rows

EVERY = build_filter({"status": ["active", "archived"]})


def _rows(n: int, seed: int):
    return make_rows(random.Random(seed), np.random.default_rng(seed), n)


def _prepared(store: PostgresStore) -> list[str]:
    """The statements prepared on the store's one pooled connection."""
    with store._conn() as conn:  # noqa: SLF001 - the pool's own connection is the point
        return [r[0] for r in conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()]


def _store(url: str, prepare: bool) -> PostgresStore:
    store = PostgresStore(url, tenant=new_tenant(), pool_size=1, exact_limit=10_000, prepare_writes=prepare)
    store._prune_draw.random = lambda: 1.0  # noqa: SLF001 - no change-log prune: its statement would count
    return store


def _threshold(store: PostgresStore) -> int | None:
    with store._conn() as conn:  # noqa: SLF001
        return conn.prepare_threshold


def test_writes_are_prepared_and_searches_are_not(pg_url):  # noqa: F811
    store = _store(pg_url, True)
    try:
        rows = _rows(12, 3)
        store.insert(rows[:6])
        first = _prepared(store)
        assert any("INSERT INTO" in s and ".chunks" in s for s in first), first
        store.insert(rows[6:])  # the same statements again: reused, not prepared anew
        assert len(_prepared(store)) == len(first)
        before = set(_prepared(store))
        store.vector_search(rows[0].vector, EVERY, 5)
        store.lexical_search({rows[0].terms[0]: 1}, EVERY, 5)
        assert set(_prepared(store)) == before
    finally:
        store.close()


def test_off_by_default_prepares_nothing(pg_url):  # noqa: F811
    store = _store(pg_url, False)
    try:
        store.insert(_rows(4, 4))
        assert _prepared(store) == []
    finally:
        store.close()


def test_a_write_the_server_refuses_halfway_then_a_good_one(pg_url, monkeypatch):  # noqa: F811
    """The server fails the write after its first statements were prepared (an error inside
    the pipeline): the rollback drops the connection's prepared statements (psycopg sends
    DEALLOCATE ALL), the connection goes back unpreparing, and the next write prepares and
    commits as usual."""
    store = _store(pg_url, True)
    try:
        rows = _rows(6, 5)
        store.insert(rows[:2])
        assert _prepared(store)

        def failing_log(conn, ids):  # the change-log write, near the end of the insert
            conn.execute("SELECT 1 / 0")

        with monkeypatch.context() as m:
            m.setattr(store, "_log", failing_log)
            with pytest.raises(InvalidInputError):
                store.insert(rows[2:4])
        assert _prepared(store) == []
        assert _threshold(store) is None
        store.insert(rows[4:])
        assert set(store.get([r.chunk.id for r in rows])) == {r.chunk.id for r in rows[:2] + rows[4:]}
        assert _prepared(store)
    finally:
        store.close()


def test_the_linking_reads_of_an_add_are_not_prepared(pg_url):  # noqa: F811
    """memory.add links the new memory in the insert's transaction (insert_linked): its
    vector search, session scans and settings are reads and stay unprepared."""
    store = _store(pg_url, True)
    memory = BeeWeave(backend=store, embedder=HashingEmbedder(32))
    try:
        for i in range(4):
            memory.add(f"the staging server listens on port 54{i}", user_id="u", session_id="s",
                       tags=["ops"], entities=["staging"])
        prepared = _prepared(store)
        assert any("INSERT INTO" in s for s in prepared), prepared
        reads = ("est AS", "SET LOCAL", "SELECT e.src, e.dst")  # the vector search, its settings, session edges
        assert not any(r in s for r in reads for s in prepared), prepared
    finally:
        memory.close()


def test_the_url_flag(pg_url):  # noqa: F811
    store = PostgresStore(pg_url + "&prepare_writes=true", tenant=new_tenant(), pool_size=1)
    try:
        assert store.prepare_writes
    finally:
        store.close()
    with pytest.raises(InvalidInputError, match="prepare_writes"):
        PostgresStore(pg_url + "&prepare_writes=maybe", tenant=new_tenant())
