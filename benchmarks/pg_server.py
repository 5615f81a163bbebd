"""A throw-away PostgreSQL with pgvector for the benchmarks, from the pip package ``pgserver``.

Used by pg_throughput.py and scale.py (the tests have their own, tests/postgres/pg_support.py).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MAINTENANCE_WORK_MEM = "4GB"  # the graph of 1M vectors of 384 dimensions is ~2 GB


@contextmanager
def local_postgres(parent: str | Path | None = None) -> Iterator[str]:
    """Start PostgreSQL in a new data directory under ``parent`` (default: the system temp
    directory) and yield its URL; on leaving, stop the server and delete the directory.

    The server is stopped here rather than by pgserver's atexit hook, which never runs in a
    multiprocessing worker (it ends with ``os._exit``).
    """
    import pgserver

    data = tempfile.mkdtemp(prefix="beeweave-bench-pg-", dir=parent)
    # As root, pgserver runs PostgreSQL as its own unprivileged user, which must be able to
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
