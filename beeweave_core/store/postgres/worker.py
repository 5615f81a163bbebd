"""``beeweave worker``: ingest workers without an API, for deployments that run the REST
servers and the workers apart.

The ingest queue of a PostgreSQL store is a table in its database (ingest_queue.py), so
a worker needs nothing but the database: it opens each tenant, whose ingest runtime
polls the shared queue, claims batches under a lease and stores them, exactly once
whichever host accepted the events. Without ``tenants`` it serves every tenant of the
schema, and picks up tenants that appear later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import InvalidInputError

__all__ = ["run_worker", "schema_tenants"]

logger = logging.getLogger(__name__)


def schema_tenants(url: str) -> list[str]:
    """The tenants a PostgreSQL schema holds (every tenant writes its index configuration)."""
    import psycopg

    from .options import resolve
    from .sql import one, qualify

    plain, options = resolve(url, {})
    schema = options.schema
    with psycopg.connect(plain, autocommit=True, prepare_threshold=None) as conn:
        exists = one(conn.execute("SELECT to_regclass(%s)", (f'"{schema}".meta',)).fetchone())[0]
        if exists is None:
            return []
        rows = conn.execute(qualify("SELECT DISTINCT tenant FROM @meta WHERE key = 'index_config' ORDER BY tenant",
                                    schema, "public")).fetchall()
    return [r[0] for r in rows]


def run_worker(url: str, *, tenants: Sequence[str] | None = None, embedder: str | None = None,
               stop: threading.Event | None = None, rescan: float = 30.0,
               opened: Callable[[str], Any] | None = None) -> int:
    """Drain the ingest queues of ``tenants`` (default: every tenant of the schema, rescanned
    every ``rescan`` seconds) until ``stop`` is set; return how many tenants were served.
    ``opened(tenant)`` is called as each tenant's worker starts."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise InvalidInputError("beeweave worker drains the shared ingest queue of a PostgreSQL store: "
                                "--store must be a postgresql:// URL")
    from ... import BeeWeave
    from ...embedders import recorded_model
    from .store import PostgresStore

    stop = stop or threading.Event()
    open_: dict[str, Any] = {}
    try:
        while not stop.is_set():
            for tenant in (list(tenants) if tenants else schema_tenants(url)):
                if tenant not in open_:
                    # Each tenant with the model it was built with, unless one is named (as every
                    # other command opens a store).
                    backend = PostgresStore(url, tenant=tenant)
                    try:
                        memory = BeeWeave(backend=backend,
                                          embedder=embedder if embedder is not None else recorded_model(backend))
                    except BaseException:
                        backend.close()
                        raise
                    memory.start_ingest()  # the worker polls the shared queue from now on
                    open_[tenant] = memory
                    logger.info("beeweave worker: draining tenant %r", tenant)
                    if opened is not None:
                        opened(tenant)
            stop.wait(rescan)
    finally:
        for memory in open_.values():
            try:
                memory.close()  # a batch in hand finishes or stays leased for the next worker
            except Exception:
                logger.exception("beeweave worker: closing a tenant failed")
    return len(open_)
