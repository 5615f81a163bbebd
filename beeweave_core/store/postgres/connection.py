"""One tenant's way into its PostgreSQL schema: the connection pool, schema-qualified
statements, transactions and the tenant's write lock. The store and its helpers (the
local index, the linking reads, the ingest queue) all go through a ``Database``.

Every statement is schema-qualified and runs without server-side prepared statements or
session settings, so the store works through a transaction pooler such as PgBouncer;
connections are in autocommit, so a read is one round trip, and a write is one
transaction sent as a pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from ...errors import InvalidInputError, MissingDependencyError, StoreClosedError, StoreUnavailableError

try:
    import psycopg
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        'the PostgreSQL backend needs psycopg 3, psycopg_pool and pgvector: pip install "beeweave-memory[postgres]"'
    ) from exc

from .options import PostgresOptions
from .schema import check_schema, lock_key, migrate
from .sql import qualify

__all__ = ["Database"]


class Database:
    """The pool and the transactions of one tenant of one schema.

    Opening migrates the schema (or, ``read_only``, only checks it is current)."""

    def __init__(self, url: str, options: PostgresOptions) -> None:
        self.url, self.tenant, self.schema = url, options.tenant, options.schema
        self.read_only = options.read_only
        self.listen_url = options.listen_url or url
        self._lock_key = lock_key("beeweave-tenant", self.schema, self.tenant)
        self._sql: dict[str, str] = {}
        self.closed = False
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(max(options.timeout, 1)),
                                 prepare_threshold=None) as conn:
                self.vschema = check_schema(conn, self.schema) if self.read_only else migrate(conn, self.schema)
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot open the PostgreSQL store: {exc}") from exc
        # prepare_threshold=None: no server-side prepared statements, which a transaction
        # pooler would hand to another client's session.
        self._pool = ConnectionPool(url, min_size=1, max_size=options.pool_size, timeout=options.timeout,
                                    kwargs={"autocommit": True, "prepare_threshold": None},
                                    configure=self._configure, open=False, name=f"beeweave-{self.tenant}")
        try:
            self._pool.open(wait=True, timeout=options.timeout)
        except BaseException:
            self._pool.close()
            raise

    def _configure(self, conn: psycopg.Connection) -> None:
        # Only the client learns the vector type's oid: no session state on the server.
        register_vector_info(conn, TypeInfo.fetch(conn, f'"{self.vschema}".vector'))

    def q(self, text: str) -> str:
        """``text`` schema-qualified (see sql.qualify), computed once per statement text."""
        out = self._sql.get(text)
        if out is None:
            out = self._sql[text] = qualify(text, self.schema, self.vschema)
        return out

    def check(self) -> None:
        if self.closed:
            raise StoreClosedError("the store is closed")

    @contextmanager
    def conn(self, *, write: bool = False) -> Iterator[psycopg.Connection]:
        """One pooled connection in autocommit: each statement is its own transaction."""
        self.check()
        if write and self.read_only:
            raise StoreUnavailableError("this store was opened read_only (e.g. on a replica): write through "
                                        "a store on the primary")
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailableError(f"no PostgreSQL connection free or reachable: {exc}") from exc
        except psycopg.DataError as exc:  # a value PostgreSQL cannot take; the transaction rolled back
            raise InvalidInputError(f"PostgreSQL refused a value: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"the PostgreSQL store failed: {exc}") from exc

    @contextmanager
    def tx(self, *, write: bool = False) -> Iterator[psycopg.Connection]:
        """One transaction sent as a pipeline: BEGIN and COMMIT travel with the statements, so
        only a result the code reads costs a round trip (psycopg's ``conn.transaction()``
        waits for BEGIN and for COMMIT)."""
        with self.conn(write=write) as conn:
            try:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    yield conn
                    conn.execute("COMMIT")
            except BaseException:
                # Whatever failed, nothing was committed: close the block before the pool
                # takes the connection back (a broken connection is discarded by the pool).
                with suppress(psycopg.Error):
                    conn.rollback()
                raise

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection]:
        """A write transaction holding the tenant's write lock: the change log's order is
        the tenant's commit order (local.py), and a record's id is checked and taken at once."""
        with self.tx(write=True) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            yield conn

    def close(self) -> None:
        self.closed = True
        self._pool.close()
