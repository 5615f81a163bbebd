"""``prepare_writes``: the statements of a write run as server-side prepared statements on
the connection that ran them, searches never do, and a failed write leaves no statement
behind that the next write could trip on. (The conformance suite runs with the option in
tests/test_conformance_postgres.py; this module checks the server's side of it.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

from beeweave_core.errors import DuplicateIdError, InvalidInputError
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
    return PostgresStore(url, tenant=new_tenant(), pool_size=1, exact_limit=10_000, prepare_writes=prepare)


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


def test_a_failed_write_then_a_good_one(pg_url):  # noqa: F811
    """A refused write rolls back and drops the connection's prepared statements (psycopg
    deallocates them on ROLLBACK); the next write prepares and commits as usual."""
    store = _store(pg_url, True)
    try:
        rows = _rows(6, 5)
        store.insert(rows[:3])
        with pytest.raises(DuplicateIdError):
            store.insert([rows[0]])
        store.insert(rows[3:])
        got = set( store.get([r.chunk.id for r in rows]))
        assert got == {r.chunk.id for r in rows}
        assert _prepared(store)
    finally:
        store.close()


def test_the_url_flag(pg_url):  # noqa: F811
    store = PostgresStore(pg_url + "&prepare_writes=true", tenant=new_tenant(), pool_size=1)
    try:
        assert store.prepare_writes
    finally:
        store.close()
    with pytest.raises(InvalidInputError, match="prepare_writes"):
        PostgresStore(pg_url + "&prepare_writes=maybe", tenant=new_tenant())
