"""The scale-out backend: PostgreSQL with pgvector, shared by many agents and processes.

Nothing is cached in the process: every read is a query, so every process on the
database sees every other's committed writes. BM25 (with session context) runs in
SQL over context postings and maintained statistics and gives the embedded backend's
scores; dense search uses a pgvector HNSW index with an exact scan whenever the
filtered candidate set is small, as the embedded FAISS index does. ``retrieve`` answers
a whole hybrid search's candidates in one statement.

Every statement is schema-qualified and runs without server-side prepared statements
(unless ``prepare_writes`` asks for them on a write's statements) or session settings
(transaction-local ones only), so the store works through a transaction pooler such as
PgBouncer; connections are in autocommit, so a read is one
round trip, and a write is one transaction sent as a pipeline.

Isolation: a ``tenant`` column leads every key and every WHERE clause, so one set of
tables holds many memories that never see each other (and distributes by tenant with
Citus). Writes that change a tenant's index (insert, update, replace, delete) run in
one transaction each, serialised per tenant by an advisory lock because the BM25
statistics are tenant-wide; reads never wait for them. Every committed change of a
record is announced with NOTIFY on the tenant's channel (see ``pg_events``).

Requires ``pip install "beeweave-memory[postgres]"`` (psycopg 3, psycopg_pool, pgvector).
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from ...errors import (
    DimensionMismatchError,
    DuplicateIdError,
    InvalidInputError,
    MissingDependencyError,
    NotFoundError,
    StoreClosedError,
    StoreUnavailableError,
)
from ...events import EventType
from ...filters import Filter
from ...index.context import IndexConfig
from ...index.turns import SessionContext, lends_context
from ...records import KnowledgeChunk, Relationship, to_datetime
from ...scoring import RankFields
from ..base import Capabilities, ChunkRow, VerifyReport, records_in_order, split_changes

try:
    import psycopg
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        'the PostgreSQL backend needs psycopg 3, psycopg_pool and pgvector: pip install "beeweave-memory[postgres]"'
    ) from exc

from ..base import TermEvidence
from ..links import Derive, LinkReads
from . import index as pg_index
from . import links as pg_links
from . import verify as pg_verify
from .events import RemoteListener, channel_name, event_payloads
from .local import LocalCandidates, LocalIndex, OwnInsert, with_batch
from .schema import MIGRATIONS, PG_SCHEMA_VERSION, build_hnsw_index, check_schema, lock_key, migrate
from .search import Candidates, decode_record, rank_fields_of
from .sql import (
    EST_FILTERED,
    EST_USERS,
    EXACT_FROM_FILTERED,
    EXACT_FROM_USERS,
    FILTERED_CTES,
    GET_SQL,
    LEX_FILTERED,
    LEX_PLAIN,
    LEXICAL_SQL,
    POSTINGS_FILTERED,
    POSTINGS_PLAIN,
    SEARCH_SQL,
    VECTOR_SCORES_SQL,
    VECTOR_SQL,
    clean,
    field_expr,
    filter_sql,
    narrowed,
    one,
    qualify,
    split_filter,
)

__all__ = ["PostgresStore"]

logger = logging.getLogger(__name__)

# Up to this many filtered candidates a dense search scans exactly. Lower than the embedded
# store's 10,000: an exact scan in SQL reads each candidate's row and vector from shared
# buffers and joins them (a 10k scan measured 55-100 ms on the loaded development machine,
# against 2-7 ms for the embedded numpy scan), while the graph answers in ~1 ms.
EXACT_LIMIT = 2_000


# A filtered lexical search reads each passing record's context postings by key when
# that costs less than reading every posting of the query terms: one lookup per (record,
# term) counted as this many postings read in order (sql.LEX_FILTERED). Tests set the
# store's ``key_lookup_cost`` to 0 or to a huge value to force either path.
KEY_LOOKUP_COST = 4.0

HNSW_EF_CAP = 1_000  # the largest hnsw.ef_search pgvector accepts

# A batch of this many records or more (add_many writes 512 at a time) may be followed by
# ANALYZE (PostgresStore._analyze_after) of these tables, the ones an add or a search reads.
ANALYZE_BATCH = 256
_ANALYZED = ("chunks", "vectors", "access", "postings", "cpost", "neighbours", "ctxvec", "terms", "df_hist",
             "ucount", "stats", "edges", "changes")

# The change log (schema 0009) keeps a tenant's last CHANGES_KEEP entries: a local index
# further behind rebuilds from the rows. A write of n entries prunes with chance
# n / CHANGES_PRUNE_EVERY.
CHANGES_KEEP = 100_000
CHANGES_PRUNE_EVERY = 10_000

# The tenant's meta key that turns its SQL search off (value "off"; absent: on), written only
# by ``set_sql_search`` under the tenant write lock. Every write reads it inside its own
# transaction, every SQL search beside its statement, so a switch made by any process is
# followed by all from their next write or search.
SQL_SEARCH_KEY = "sql_search"
_SQL_SEARCH_SQL = "SELECT value FROM @meta WHERE tenant = %s AND key = 'sql_search'"


class _SqlSearchOff(Exception):
    """Raised inside this module when a SQL search finds its tenant's SQL search turned off
    (by another process): the search is then answered again from a local index."""


def _no_nul(what: str, values: Sequence[str | None]) -> None:
    for v in values:
        if v is not None and "\x00" in v:
            raise InvalidInputError(f"{what} {v!r} contains a NUL character, which PostgreSQL text cannot hold")


def _columns(c: KnowledgeChunk, mode: SessionContext) -> tuple[Any, ...]:
    doc = c.to_dict()
    doc.pop("relationships")  # edges live in their own table
    pc = c.processed_content
    return (c.id, c.user_id, c.agent_id, c.session_id, c.timestamp.timestamp(), c.status.value,
            pc.type.value if pc else "text", c.intent.value if c.intent else None, list(c.tags), list(c.entities),
            c.tier.value, json.dumps(doc, ensure_ascii=False), lends_context(c, mode))


def _checked(c: KnowledgeChunk, mode: SessionContext) -> tuple[Any, ...]:
    cols = _columns(c, mode)
    _no_nul("id, user, agent or session", cols[:4])
    _no_nul("tag or entity", [*c.tags, *c.entities])
    return cols


def _search_settings(vector_version: str | None, citus: bool) -> list[str]:
    """The transaction-local settings of a search (``{ef}`` filled in per search).

    SET LOCAL lasts until the transaction ends, so nothing leaks to the next client of a
    pooled server connection. On Citus, SET LOCAL reaches the workers only when
    ``citus.propagate_set_commands`` is 'local' — itself set locally first. pgvector 0.8
    and later walk the graph on until enough rows pass the filter (iterative scans);
    earlier versions come back short under a selective filter, and the exact scan answers.
    """
    out = []
    if citus:
        out.append("SET LOCAL citus.propagate_set_commands = 'local'")
    out.append("SET LOCAL hnsw.ef_search = {ef}")
    # The exact-scan branch of a search statement is planned even when its one-time filter
    # skips it, and a parallel plan starts its workers anyway: measured 40 ms of a 100k
    # search on the loaded development machine, for nothing. A search reads ~100 rows by key
    # and a few thousand postings: parallel workers never pay for themselves.
    out.append("SET LOCAL max_parallel_workers_per_gather = 0")
    # Without server-side prepared statements (a transaction pooler would hand them to
    # another client) every search is planned afresh, and searching join orders over its
    # CTEs was most of the planning (8 of 10 ms at 10k on the loaded development machine).
    # The statements are written in the order they should run — the few query terms, then
    # their postings; the ~100 candidates, then their rows by key — so the planner keeps it.
    out.append("SET LOCAL join_collapse_limit = 1")
    out.append("SET LOCAL from_collapse_limit = 1")
    parts = tuple(int(p) for p in re.findall(r"\d+", vector_version or "0")[:2])
    if parts >= (0, 8):
        out.append("SET LOCAL hnsw.iterative_scan = relaxed_order")
    return out


def _split_url(url: str, schema: str | None) -> tuple[str, str]:
    """Take BeeWeave's own ``schema`` query parameter out of the URL (libpq would refuse it)."""
    plain, ours = _own_params(url)
    return plain, schema or ours.get("schema") or "beeweave"


def _own_params(url: str) -> tuple[str, dict[str, str]]:
    """The URL without BeeWeave's own query parameters (``schema``, ``ingest_lease``), and those."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _OWN_PARAMS}
    if not ours:
        return url, {}
    rest = [(k, v) for k, v in query if k not in _OWN_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


_OWN_PARAMS = ("schema", "ingest_lease", "local_index", "prepare_writes", "sql_search")


def _flag(own: Mapping[str, str], name: str) -> bool:
    """A boolean URL parameter of BeeWeave's own (absent: false)."""
    flag = own.get(name, "false").lower()
    if flag not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise InvalidInputError(f"{name} must be true or false, got {flag!r}")
    return flag in ("1", "true", "yes", "on")


class PostgresStore:
    """A ``StoreBackend`` on PostgreSQL + pgvector.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[postgres]"   # and a PostgreSQL with the vector extension

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave

            memory = BeeWeave.from_url("postgresql://user:pw@host/db", tenant="team-a")

    Args:
        url: a libpq URL or conninfo string; ``?schema=NAME`` picks the schema and
            ``?ingest_lease=SECONDS`` how long a worker holds a batch of the shared ingest
            queue before another host's worker may take it (default 120).
        index_config: BM25 and session-context settings for a new tenant; an existing
            tenant keeps its own (a different one is refused).
        pool_size: the most connections this store opens at once.
        tenant: whose memory this is; every query is scoped to it.
        schema: the PostgreSQL schema holding the tables (created if missing).
        exact_limit: up to this many filtered candidates, dense search is an exact scan
            (default 2,000; the first search past it builds the HNSW graph, used once valid).
        ef_search: the HNSW search beam before widening for selective filters.
        timeout: seconds to wait for the database or a free pooled connection.
        read_only: open without writing anything (e.g. on a read replica): searches and
            reads work, every write raises ``StoreUnavailableError``.
        listen_url: where ``listen()`` connects (LISTEN needs a session: a direct or
            session-pooled URL when ``url`` goes through a transaction pooler).
        local_index: answer searches from an index of the tenant held in this process and
            kept current from the database's change log (local.py): a search then reads
            the returned records and the log's position in one round trip (two after this
            store wrote, or when the log moved), for the memory of holding the tenant's
            vectors and postings. Also
            ``?local_index=true`` in the URL; default off.
        sql_search: False turns the tenant's SQL search off (``set_sql_search``) as the store
            opens; True turns it back on. Also ``?sql_search=false`` in the URL; default: the
            tenant's setting as it is (on for a new tenant).
        prepare_writes: run the statements of writes (add, update, delete) as server-side
            prepared statements, so each server connection parses and plans them once
            rather than every time. For direct connections and poolers that carry
            protocol-level prepared statements (PgBouncer 1.22 and later with
            ``max_prepared_statements`` set, and libpq 17 or later); not for older
            transaction poolers, which would hand a statement prepared on one client's
            behalf to another. Reads stay
            unprepared, the linking reads inside an add included (a generic plan
            misjudges them). Also ``?prepare_writes=true``; default off.
    """

    def __init__(self, url: str, *, index_config: IndexConfig | None = None, pool_size: int = 4,
                 tenant: str = "default", schema: str | None = None, exact_limit: int = EXACT_LIMIT,
                 ef_search: int = 96, timeout: float = 30.0, read_only: bool = False,
                 listen_url: str | None = None, local_index: bool | None = None,
                 prepare_writes: bool | None = None, sql_search: bool | None = None) -> None:
        if not isinstance(url, str) or not url:
            raise InvalidInputError("url must be a PostgreSQL URL")
        if not isinstance(tenant, str) or not tenant or "\x00" in tenant:
            raise InvalidInputError("tenant must be a non-empty string without NUL characters")
        if not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError("pool_size must be a positive integer")
        self.url, self.schema = _split_url(url, schema)
        own = _own_params(url)[1]
        lease = own.get("ingest_lease")
        try:
            self.ingest_lease = None if lease is None else float(lease)
        except ValueError:
            raise InvalidInputError(f"ingest_lease must be a number of seconds, got {lease!r}") from None
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", self.schema):
            raise InvalidInputError(f"schema must be a plain SQL identifier, got {self.schema!r}")
        if local_index is None:
            local_index = _flag(own, "local_index")
        if sql_search is None and "sql_search" in own:
            sql_search = _flag(own, "sql_search")
        self.prepare_writes = _flag(own, "prepare_writes") if prepare_writes is None else bool(prepare_writes)
        self.tenant = tenant
        self.read_only = bool(read_only)
        # A replica takes no events (ingest_queue answers None there): it declares no queue.
        self.capabilities = Capabilities(read_only=self.read_only, retrieval=self, term_searches=self,
                                         queue=None if self.read_only else self)
        self.listen_url = _split_url(listen_url, self.schema)[0] if listen_url else self.url
        self.exact_limit, self.ef_search = exact_limit, ef_search
        self.key_lookup_cost = KEY_LOOKUP_COST
        self.origin = uuid.uuid4().hex  # tells this store's own notifications from others'
        self.channel = channel_name(self.schema, tenant)
        self._lock_key = lock_key("beeweave-tenant", self.schema, tenant)
        self._listeners: list[RemoteListener] = []
        self._indexed_dims: set[int] = set()
        self._builder: threading.Thread | None = None
        self._sql: dict[str, str] = {}
        self.last_vector_path = ""  # how the last vector_search answered: exact, hnsw or hnsw+exact
        self._closed = False
        self._prune_draw = random.Random()  # when a write prunes the change log (see _log)
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=int(max(timeout, 1)),
                                 prepare_threshold=None) as conn:
                self._vschema = check_schema(conn, self.schema) if self.read_only else migrate(conn, self.schema)
                version, citus, older = one(conn.execute(
                    "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
                    "EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus'), "
                    "ARRAY(SELECT substr(indexname, 14)::int FROM pg_indexes WHERE schemaname = %s "
                    "AND indexname ~ '^vectors_hnsw_[0-9]+$')", (self.schema,)).fetchone())
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot open the PostgreSQL store: {exc}") from exc
        self._search_settings = _search_settings(version, citus)
        # prepare_threshold=None: no server-side prepared statements, which a transaction
        # pooler would hand to another client's session.
        self._pool = ConnectionPool(self.url, min_size=1, max_size=pool_size, timeout=timeout,
                                    kwargs={"autocommit": True, "prepare_threshold": None},
                                    configure=self._configure, open=False, name=f"beeweave-{tenant}")
        try:
            self._pool.open(wait=True, timeout=timeout)
            self.index_config = self._resolve_index_config(index_config)
        except BaseException:
            self._pool.close()
            raise
        self._local_asked = bool(local_index)
        self.local = LocalIndex(self) if local_index else None
        self._local_lock = threading.Lock()
        self.sql_search = True  # the tenant's setting as last read (see set_sql_search)
        try:
            self._note_sql_search(self.get_meta(SQL_SEARCH_KEY))
            if sql_search is not None and bool(sql_search) != self.sql_search:
                self.set_sql_search(bool(sql_search))
        except BaseException:
            self._pool.close()
            raise
        if older and not self.read_only:
            # A graph from before schema 0011 takes every tenant's inserts, those of tenants
            # without SQL search too, and no search of theirs would replace it: its successor
            # is built now, in the background, and it is dropped once that is valid.
            def build_all() -> None:
                for d in older:
                    self._build_quietly(int(d))

            self._builder = threading.Thread(target=build_all, daemon=True, name="beeweave-hnsw-0011")
            self._builder.start()

    # -- connections -----------------------------------------------------------------
    def _configure(self, conn: psycopg.Connection) -> None:
        # Only the client learns the vector type's oid: no session state on the server.
        register_vector_info(conn, TypeInfo.fetch(conn, f'"{self._vschema}".vector'))

    def _q(self, text: str) -> str:
        """``text`` schema-qualified (see sql.qualify), computed once per statement text."""
        out = self._sql.get(text)
        if out is None:
            out = self._sql[text] = qualify(text, self.schema, self._vschema)
        return out

    def _check(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    @contextmanager
    def _conn(self, *, write: bool = False) -> Iterator[psycopg.Connection]:
        """One pooled connection in autocommit: each statement is its own transaction."""
        self._check()
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
    def _tx(self, *, write: bool = False, read_only: bool = False,
            snapshot: bool = False) -> Iterator[psycopg.Connection]:
        """One transaction sent as a pipeline: BEGIN and COMMIT travel with the statements, so
        only a result the code reads costs a round trip (psycopg's ``conn.transaction()``
        waits for BEGIN and for COMMIT: a search took three round trips instead of one).
        ``snapshot``: a read-only transaction whose statements all see one snapshot
        (REPEATABLE READ), as a search and its read of the SQL-search setting must."""
        begin = ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if snapshot else
                 "BEGIN READ ONLY" if read_only else "BEGIN")
        with self._conn(write=write) as conn:
            try:
                with conn.pipeline():
                    conn.execute(begin)
                    yield conn
                    conn.execute("COMMIT")
            except BaseException:
                # Whatever failed, nothing was committed: close the block before the pool
                # takes the connection back (a broken connection is discarded by the pool).
                with suppress(psycopg.Error):
                    conn.rollback()
                raise

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection]:
        """A transaction holding the tenant's write lock: the BM25 statistics are tenant-wide."""
        with self._tx(write=True) as conn:
            # prepare_writes: every statement is prepared on its first use on this connection
            # (psycopg keeps the names per connection); the pool's connections go back
            # unpreparing (None, their setting) whatever happens.
            conn.prepare_threshold = 0 if self.prepare_writes else None
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                yield conn
            finally:
                conn.prepare_threshold = None

    def _resolve_index_config(self, wanted: IndexConfig | None) -> IndexConfig:
        with self._conn() as conn:
            if not self.read_only:
                conn.execute(self._q("INSERT INTO @meta (tenant, key, value) VALUES (%s, 'index_config', %s) "
                                     "ON CONFLICT DO NOTHING"),
                             (self.tenant, json.dumps((wanted or IndexConfig()).to_dict())))
            row = conn.execute(self._q("SELECT value FROM @meta WHERE tenant = %s AND key = 'index_config'"),
                               (self.tenant,)).fetchone()
        if row is None:  # a read-only store of a tenant nobody wrote yet
            return wanted or IndexConfig()
        cfg = IndexConfig.from_dict(json.loads(row[0]))
        if wanted is not None and wanted != cfg:
            raise InvalidInputError(f"this store was indexed with {cfg}; open it without index_config=")
        return cfg

    @property
    def _w(self) -> float:
        """The lexical context weight in force (0 when context is off)."""
        cfg = self.index_config
        return float(cfg.lexical_context_weight) if cfg.context_radius else 0.0

    @property
    def _vw(self) -> float:
        """The vector context weight in force (0 when context is off)."""
        cfg = self.index_config
        return float(cfg.vector_context_weight) if cfg.context_radius else 0.0

    # -- the tenant's SQL search -----------------------------------------------------------
    def _note_sql_search(self, value: str | None) -> bool:
        """Take the tenant's setting as read (its meta value, None: on); return whether its
        SQL search is on. Off: this store answers searches from a local index from now on."""
        on = value != "off"
        with self._local_lock:
            self.sql_search = on
            if not on and self.local is None:
                self.local = LocalIndex(self)
            elif on and not self._local_asked:
                self.local = None
        return on

    def _read_sql_search(self, cur: psycopg.Cursor[Any]) -> bool:
        """``_note_sql_search`` of what ``cur`` (``_SQL_SEARCH_SQL``) read."""
        row = cur.fetchone()
        return self._note_sql_search(None if row is None else row[0])

    def set_sql_search(self, enabled: bool) -> None:
        """Turn the tenant's SQL search on or off, for every store of the tenant in every process.

        Off: writes stop keeping what only the SQL search reads (the context postings and
        context vectors ``cpost`` and ``ctxvec``, about a third of an add's statement time;
        document frequencies, session neighbours and their lengths; the vectors' place in
        pgvector's graph), which is deleted here, and every store answers its searches from a local
        index (local.py), so each searching process holds the tenant's vectors and
        postings. On: they are rebuilt here from the records (minutes at a million) and
        stores answer in SQL again unless opened with ``local_index``. The switch is one
        transaction under the tenant write lock; other stores follow from their next
        write (which reads the setting under the lock) or search (which reads it beside
        its statement)."""
        self._check()
        if self.read_only:
            raise StoreUnavailableError("this store was opened read_only (e.g. on a replica): switch the SQL "
                                        "search through a store on the primary")
        with self._write() as conn:
            if self._read_sql_search(conn.execute(self._q(_SQL_SEARCH_SQL), (self.tenant,))) != bool(enabled):
                pg_verify.set_context(conn, self._q, self.tenant, bool(enabled), self.index_config.context_radius,
                                      self._w, self._vw)
                if enabled:
                    conn.execute(self._q("DELETE FROM @meta WHERE tenant = %s AND key = %s"),
                                 (self.tenant, SQL_SEARCH_KEY))
                else:
                    self._set_meta(conn, {SQL_SEARCH_KEY: "off"})
        self._note_sql_search(None if enabled else "off")

    def _sql_search_read(self, cur: psycopg.Cursor[Any]) -> None:
        """After a SQL search: raise ``_SqlSearchOff`` if ``cur`` (``_SQL_SEARCH_SQL``, sent with
        the search's statements in one REPEATABLE READ snapshot) finds the tenant's SQL search
        off, i.e. the tables they read emptied."""
        if not self._read_sql_search(cur):
            raise _SqlSearchOff

    def _fields_as_ids(self, flt: Filter) -> Filter:
        """A filter naming declared metadata fields, which a local index does not hold, as the
        ids of the records passing it (read in SQL) for the local index; others as they are."""
        return flt.replace(fields=None, ids=frozenset(self.scan_ids(flt))) if flt.fields else flt

    # -- metadata ------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        if "\x00" in key:
            self._check()
            return None
        with self._conn() as conn:
            if key == "schema_version":
                return str(one(conn.execute(self._q("SELECT max(version) FROM @schema_migrations")).fetchone())[0])
            if key.startswith("migration_"):
                row = conn.execute(self._q("SELECT name FROM @schema_migrations WHERE to_char(version, 'FM0000') = %s"),
                                   (key[len("migration_"):],)).fetchone()
                return None if row is None else row[0]
            row = conn.execute(self._q("SELECT value FROM @meta WHERE tenant = %s AND key = %s"),
                               (self.tenant, key)).fetchone()
            return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        _no_nul("meta", [key, value])
        if key == SQL_SEARCH_KEY:
            raise InvalidInputError(f"{SQL_SEARCH_KEY!r} is switched with set_sql_search(), which also "
                                    "rebuilds or drops what the SQL search reads")
        with self._conn(write=True) as conn:
            self._set_meta(conn, {key: value})

    def _set_meta(self, conn: psycopg.Connection, meta: Mapping[str, str]) -> None:
        for key, value in meta.items():
            conn.execute(self._q("INSERT INTO @meta (tenant, key, value) VALUES (%s, %s, %s) "
                                 "ON CONFLICT (tenant, key) DO UPDATE SET value = excluded.value"),
                         (self.tenant, key, value))

    def index_field(self, name: str) -> None:
        expr = field_expr(name)
        with self._conn(write=True) as conn:
            conn.execute(self._q(f"CREATE INDEX IF NOT EXISTS chunks_field_{name} ON @chunks (tenant, {expr})"))

    # -- writes ----------------------------------------------------------------------------
    def insert(self, rows: Sequence[ChunkRow]) -> None:
        prepared = self._new_rows(rows)
        if prepared:
            with self._write() as conn:
                own = self._insert(conn, prepared, EventType.CREATED)
            local = self.local  # read once: a switch of the tenant's SQL search may drop it meanwhile
            if local is not None and own is not None:
                local.take_own(own)
            self._analyze_after(len(prepared))

    def _analyze_after(self, n: int) -> None:
        """After a bulk insert (``ANALYZE_BATCH`` rows or more) that left the planner's row
        count of the records under half of what is stored, ANALYZE the tables a write and a
        search read. Autovacuum would, within a minute or so; until then the planner plans
        with the statistics of a far smaller table: measured in benchmarks/scale.py, an add
        right after a 10k import took 31.6 ms p50, 10.7 ms once analyzed. The doubling rule
        bounds the cost: a 100k import in batches of 512 analyzes eight times. A role that may not
        ANALYZE (not the owner) only waits for autovacuum."""
        if n < ANALYZE_BATCH or self.read_only:
            return
        try:
            with self._conn() as conn:
                planned, stored = one(conn.execute(self._q(
                    "SELECT (SELECT reltuples FROM pg_class WHERE oid = '@chunks'::regclass), "
                    "(SELECT coalesce(sum(n_docs), 0) FROM @stats)")).fetchone())
                if float(planned) >= 0.5 * float(stored):
                    return
                for table in _ANALYZED:
                    conn.execute(self._q(f"ANALYZE @{table}"))
        except (StoreUnavailableError, InvalidInputError):
            logger.info("ANALYZE after a bulk insert failed; autovacuum will do it", exc_info=True)

    def insert_linked(self, rows: Sequence[ChunkRow], reads: LinkReads, derive: Derive) -> bool:
        """One transaction: the insert, the reads (links.send: no round trip of their own),
        the edges. With a local index, the nearest records are read from it (caught up just
        before the transaction), together with the inserted records themselves, when the
        change log shows, under the write lock, that nothing was committed since: the
        pgvector walk was a fifth of an add. A tenant whose SQL search is off keeps its
        vectors out of pgvector's graph, so its local index answers them always: built by
        the first add if need be, and caught up under the write lock if another store wrote
        meanwhile (``LocalIndex.nearest_locked``)."""
        prepared = self._new_rows(rows)
        local = self.local
        mine = [(r.chunk, np.asarray(r.vector, np.float32)) for _, r in prepared]
        near = None
        if local is not None and reads.similar:
            try:
                near = local.nearest(reads.similar, load=not self.sql_search)
            except StoreUnavailableError:  # the SQL read inside the transaction answers instead
                logger.info("catching the local index up for an add failed; reading in SQL", exc_info=True)
        own = None
        with self._write() as conn:
            sent: list[pg_links.Sent] = []

            def send(high: int | None) -> None:
                found = None
                if near is not None and high == near[0]:
                    found = near[1]
                elif local is not None and high is not None and reads.similar and not self.sql_search:
                    found = local.nearest_locked(conn, high, reads.similar, {c.id for c, _ in mine})
                if found is not None:
                    found = with_batch(found, reads.similar, mine)
                sent.append(pg_links.send(self, conn, reads, found))

            if prepared:
                # The reads need the new rows, not their session context: they go out before
                # it is computed and come back with the session region read.
                own = self._insert(conn, prepared, EventType.CREATED, before_context=send)
            else:
                send(None)
            add, stale = derive(pg_links.receive(self, sent[0]))
            if stale:
                self._delete_edges(conn, stale)
            self._add_edges(conn, add)
        if local is not None and own is not None:
            local.take_own(own)
        self._analyze_after(len(prepared))
        return True

    def _new_rows(self, rows: Sequence[ChunkRow]) -> list[tuple[tuple[Any, ...], ChunkRow]]:
        """Rows to insert with their checked columns; a duplicate id in the batch is refused."""
        self._check()
        rows = list(rows)
        seen: set[str] = set()
        for r in rows:
            if r.chunk.id in seen:
                raise DuplicateIdError(f"a chunk with id {r.chunk.id!r} already exists")
            seen.add(r.chunk.id)
        return [(_checked(r.chunk, self.index_config.session_context), r) for r in rows]

    def _insert(self, conn: psycopg.Connection, prepared: list[tuple[tuple[Any, ...], ChunkRow]],
                event: EventType, *, before_context: Callable[[int], None] | None = None) -> OwnInsert | None:
        """Insert new records with everything derived from them. ``before_context`` is called
        once the records, vectors, postings and counts are written, before their session
        context is (what it sends then rides the session region read's round trip), with the
        change log's last position as read under the write lock. Returns what this store's
        local index takes from memory once the transaction commits (``LocalIndex.take_own``),
        None when nothing was logged."""
        t, q = self.tenant, self._q
        ids = [cols[0] for cols, _ in prepared]
        vectors = [np.asarray(r.vector, np.float32) for _, r in prepared]
        dim = len(vectors[0])
        if any(v.ndim != 1 or len(v) != dim for v in vectors):
            raise DimensionMismatchError("the vectors of one batch must all have the same dimension")
        counts = [dict(Counter(r.terms)) for _, r in prepared]
        for tc in counts:
            _no_nul("term", list(tc))
        n = len(prepared)
        existing, store_dim, seqs, setting, high = one(conn.execute(q(
            "SELECT (SELECT array_agg(id) FROM @chunks WHERE tenant = %(t)s AND id = ANY(%(ids)s)), "
            "(SELECT dim FROM @stats WHERE tenant = %(t)s AND n_docs > 0), "
            "ARRAY(SELECT nextval('@chunk_seq') FROM generate_series(1, %(n)s)), "
            "(SELECT value FROM @meta WHERE tenant = %(t)s AND key = 'sql_search'), "
            "(SELECT coalesce(max(seq), 0) FROM @changes WHERE tenant = %(t)s)"),
            {"t": t, "ids": ids, "n": n}).fetchone())
        context = self._note_sql_search(setting)  # read under the write lock: no switch meanwhile
        if existing:
            first = next(i for i in ids if i in set(existing))
            raise DuplicateIdError(f"a chunk with id {first!r} already exists")
        if store_dim is not None and store_dim != dim:
            raise DimensionMismatchError(f"vectors of dimension {dim} cannot go into a store of dimension {store_dim}")
        seqs = sorted(seqs)
        lengths = [sum(tc.values()) for tc in counts]
        with conn.cursor() as cur:
            cur.executemany(q(
                "INSERT INTO @chunks (tenant, seq, id, user_id, agent_id, session_id, ts, status, ctype, intent, "
                "tags, entities, tier, doc, turn, doc_len) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s, %s)"),
                [(t, seq, *cols, length) for seq, (cols, _), length in zip(seqs, prepared, lengths, strict=True)])
            # (a tenant without SQL search keeps its vectors out of pgvector's graph: schema 0011)
            cur.executemany(q("INSERT INTO @vectors (tenant, seq, dim, embedding, graph) VALUES (%s, %s, %s, %s, %s)"),
                            [(t, seq, dim, vec, context) for seq, vec in zip(seqs, vectors, strict=True)])
        self._set_access(conn, seqs, [r.chunk for _, r in prepared])
        pg_index.count_users(conn, q, t, Counter(cols[1] for cols, _ in prepared))
        pg_index.add_postings(conn, q, t, seqs, counts, df=context)
        # Session neighbours and their lengths, like df, serve only the SQL search: a
        # tenant without it keeps none (its local indexes thread sessions in memory).
        changes: pg_index.SessionChanges = {}
        for seq, (cols, _) in zip(seqs, prepared, strict=True):
            if cols[12] and context:  # a record with a session that takes part in its context
                changes.setdefault((cols[1], cols[3]), []).append((cols[4], seq))
        if before_context is not None:
            pg_index.bump_stats(conn, q, t, docs=n, length=sum(lengths), dim=dim)  # what it reads counts them
            before_context(int(high))
        nb, around = pg_index.rethread(conn, q, t, self.index_config.context_radius, changes)
        if context:
            pg_index.refresh_context(conn, q, t, self._w, [*seqs, *around], self._vw)
        if before_context is None:
            pg_index.bump_stats(conn, q, t, docs=n, length=sum(lengths), nb_length=nb, dim=dim)
        elif nb:
            pg_index.bump_stats(conn, q, t, nb_length=nb)
        logged = self._log(conn, ids)
        self._notify(conn, event, [(cols[0], cols[1], cols[2], cols[8]) for cols, _ in prepared])
        if logged is None:
            return None
        return OwnInsert(int(high), logged, [(seq, cols[11], tc, vec) for seq, (cols, _), tc, vec
                                             in zip(seqs, prepared, counts, vectors, strict=True)])

    def _set_access(self, conn: psycopg.Connection, seqs: Sequence[int], chunks: Sequence[KnowledgeChunk]) -> None:
        """The access counts of records as written (their side table holds the live ones)."""
        conn.execute(self._q(
            "INSERT INTO @access AS a (tenant, seq, n, last) SELECT %s, u.seq, u.n, u.last "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::timestamptz[]) AS u(seq, n, last) "
            "ON CONFLICT (tenant, seq) DO UPDATE SET n = excluded.n, last = excluded.last"),
            (self.tenant, list(seqs), [int(c.access_count) for c in chunks], [c.last_accessed for c in chunks]))

    def _maybe_index(self, dim: int, candidates: int) -> None:
        """Once a search has more candidates than an exact scan handles well, build the HNSW
        index of this dimension in a background thread: the build takes seconds to minutes
        and waits for older transactions. Until the index is valid, searches scan exactly;
        a build cut short (the process ended) leaves an invalid index that the next build
        replaces. A search, not a write, starts it: every insert into a pgvector graph walks
        it (milliseconds a row), so a bulk load with no search meanwhile (the usual import)
        maintains no graph and the graph is built once, over everything, afterwards."""
        if candidates <= self.exact_limit or self.read_only or dim in self._indexed_dims or (
                self._builder is not None and self._builder.is_alive()):
            return
        self._builder = threading.Thread(target=self._build_quietly, args=(dim,), daemon=True,
                                         name=f"beeweave-hnsw-{dim}")
        self._builder.start()

    def _build_quietly(self, dim: int) -> None:
        try:
            self.ensure_vector_index(dim)
        except Exception:  # a failed build only means exact search for longer
            if not self._closed:
                logger.warning("building the HNSW index for dimension %s failed", dim, exc_info=True)

    def ensure_vector_index(self, dim: int | None = None) -> bool:
        """Build the HNSW index for ``dim`` (default: this tenant's) now rather than when the
        store outgrows exact search; return whether it exists (False: another process is
        building it). Safe to call from several processes. Connects to ``listen_url`` (a
        session: the build holds a session lock), which is ``url`` unless given."""
        self._check()
        if self.read_only:
            raise StoreUnavailableError("a read_only store builds no index: call this on the primary")
        dim = int(dim or self.dim or 0)
        if dim <= 0:
            return False
        try:
            with psycopg.connect(self.listen_url, autocommit=True, prepare_threshold=None) as conn:
                built = build_hnsw_index(conn, self.schema, self._vschema, dim)
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot build the vector index: {exc}") from exc
        if built:
            self._indexed_dims.add(dim)
        return built

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        self._check()
        latest = {c.id: c for c in chunks}  # the last version of an id wins, as written in order
        prepared = {cid: (_checked(c, self.index_config.session_context), c) for cid, c in latest.items()}
        if not prepared:
            return
        with self._write() as conn:
            self._update(conn, prepared)

    def _update(self, conn: psycopg.Connection, prepared: dict[str, tuple[tuple[Any, ...], KnowledgeChunk]]) -> None:
        t, q = self.tenant, self._q
        setting = conn.execute(q(_SQL_SEARCH_SQL), (t,))
        old = {r[0]: r[1:] for r in conn.execute(q(
            "SELECT id, seq, user_id, session_id, ts, nb_len, status, turn FROM @chunks "
            "WHERE tenant = %s AND id = ANY(%s)"),
            (t, list(prepared)))}
        context = self._read_sql_search(setting)
        missing = [i for i in prepared if i not in old]
        if missing:
            raise NotFoundError(f"no chunk with id {missing[0]!r}")
        with conn.cursor() as cur:
            cur.executemany(q(
                "UPDATE @chunks SET user_id = %s, agent_id = %s, session_id = %s, ts = %s, status = %s, ctype = %s, "
                "intent = %s, tags = %s, entities = %s, tier = %s, doc = %s::json, turn = %s "
                "WHERE tenant = %s AND id = %s"),
                [(*cols[1:], t, cid) for cid, (cols, _) in prepared.items()])
        self._set_access(conn, [old[cid][0] for cid in prepared], [c for _, c in prepared.values()])
        changes: pg_index.SessionChanges = {}
        moved, dirty, nb = [], [], 0
        users: Counter[str] = Counter()
        for cid, (cols, _) in prepared.items():
            seq, user, session, ts, nb_len, status, turn = old[cid]
            if (user, status) != (cols[1], cols[5]):
                dirty.append(seq)  # its context postings carry user and status
                users[user] -= 1
                users[cols[1]] += 1
            if (user, session, ts, turn) == (cols[1], cols[3], cols[4], cols[12]):
                continue
            moved.append(seq)
            nb -= nb_len
            if turn:
                changes.setdefault((user, session), []).append((ts, seq))
            if cols[12]:
                changes.setdefault((cols[1], cols[3]), []).append((cols[4], seq))
        pg_index.count_users(conn, q, t, users)
        if moved and self.index_config.context_radius and context:
            conn.execute(q("DELETE FROM @neighbours WHERE tenant = %s AND seq = ANY(%s)"), (t, moved))
            conn.execute(q("UPDATE @chunks SET nb_len = 0 WHERE tenant = %s AND seq = ANY(%s)"), (t, moved))
            delta, around = pg_index.rethread(conn, q, t, self.index_config.context_radius, changes)
            nb += delta
            dirty += moved + around
            pg_index.bump_stats(conn, q, t, nb_length=nb)
        if context:
            pg_index.refresh_context(conn, q, t, self._w, dirty, self._vw)
        self._log(conn, list(prepared))
        self._notify(conn, EventType.UPDATED, [(c[0], c[1], c[2], c[8]) for c, _ in prepared.values()])

    def replace(self, rows: Sequence[ChunkRow], *, meta: Mapping[str, str] | None = None) -> None:
        self._check()
        rows = list(rows)
        if meta:
            _no_nul("meta", [v for kv in meta.items() for v in kv])
        if not rows and not meta:
            return
        prepared = self._prepare_rows(rows)
        with self._write() as conn:  # rows and meta (a re-embed's model name) in one transaction
            if prepared:
                self._replace(conn, prepared)
            if meta:
                self._set_meta(conn, meta)

    def _prepare_rows(self, rows: list[ChunkRow]) -> list[tuple[tuple[Any, ...], ChunkRow]]:
        ids = [r.chunk.id for r in rows]
        if len(set(ids)) != len(ids):
            raise DuplicateIdError("replace got the same id twice")
        return [(_checked(r.chunk, self.index_config.session_context), r) for r in rows]

    def _replace(self, conn: psycopg.Connection, prepared: list[tuple[tuple[Any, ...], ChunkRow]]) -> None:
        # A changed text means new postings and a new vector: delete and re-insert under
        # the same id, keeping edges, in one transaction.
        ids = [cols[0] for cols, _ in prepared]
        kept = self._edges(conn, ids, None, "both")
        self._delete(conn, ids, None)
        self._insert(conn, prepared, EventType.UPDATED)
        self._add_edges(conn, kept)

    def modify(self, ids: Sequence[str],
               change: Callable[[dict[str, KnowledgeChunk]], Sequence[KnowledgeChunk | ChunkRow]]) -> None:
        self._check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return
        with self._write() as conn:
            current = self._locked_records(conn, ids)
            chunks, rows = split_changes(change(current), current)
            if chunks:
                self._update(conn, {c.id: (_checked(c, self.index_config.session_context), c) for c in chunks})
            if rows:
                self._replace(conn, self._prepare_rows(rows))

    def _locked_records(self, conn: psycopg.Connection, ids: list[str]) -> dict[str, KnowledgeChunk]:
        """The records of ``ids`` (without relationships), locked: FOR UPDATE of the record and
        its access row keeps them until this transaction ends, so a writer in any process (an
        access write-back too) waits and then reads what this transaction wrote."""
        return {r[0]: decode_record(r[0], r[1], r[2], r[3], None) for r in conn.execute(self._q(
            "SELECT c.id, c.doc::text, a.n, a.last FROM @chunks c JOIN @access a ON a.tenant = c.tenant "
            "AND a.seq = c.seq WHERE c.tenant = %s AND c.id = ANY(%s) ORDER BY c.id FOR UPDATE OF c, a"),
            (self.tenant, ids))}

    def delete_if(self, ids: Sequence[str], still: Callable[[KnowledgeChunk], bool]) -> list[str]:
        self._check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return []
        with self._write() as conn:
            doomed = [cid for cid, c in self._locked_records(conn, ids).items() if still(c)]
            return self._delete(conn, doomed, EventType.DELETED) if doomed else []

    def record_access(self, accesses: Mapping[str, tuple[int, datetime]]) -> None:
        """One statement on the access side table, without the tenant write lock: the rows
        are locked in seq order (so two write-backs cannot deadlock) and a concurrent
        ``modify`` of the same record waits for it or it for the ``modify``."""
        self._check()
        ids = sorted(i for i in accesses if "\x00" not in i)
        if not ids:
            return
        with self._conn(write=True) as conn:
            conn.execute(self._q(
                "WITH u AS (SELECT * FROM unnest(%(ids)s::text[], %(n)s::bigint[], %(last)s::timestamptz[]) "
                "AS u(id, n, last)), "
                "locked AS (SELECT a.seq, u.n, u.last FROM u JOIN @chunks c ON c.tenant = %(t)s AND c.id = u.id "
                "JOIN @access a ON a.tenant = %(t)s AND a.seq = c.seq ORDER BY a.seq FOR UPDATE OF a) "
                "UPDATE @access a SET n = a.n + l.n, last = greatest(a.last, l.last) FROM locked l "
                "WHERE a.tenant = %(t)s AND a.seq = l.seq"),
                {"t": self.tenant, "ids": ids, "n": [int(accesses[i][0]) for i in ids],
                 "last": [to_datetime(accesses[i][1]) for i in ids]})

    def delete(self, ids: Sequence[str]) -> list[str]:
        self._check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return []
        with self._write() as conn:
            return self._delete(conn, ids, EventType.DELETED)

    def _delete(self, conn: psycopg.Connection, ids: Sequence[str], event: EventType | None) -> list[str]:
        """Delete records (their edges go by cascade); ``event=None`` announces nothing."""
        t, q = self.tenant, self._q
        setting = conn.execute(q(_SQL_SEARCH_SQL), (t,))
        gone = conn.execute(q(
            "DELETE FROM @chunks WHERE tenant = %s AND id = ANY(%s) "
            "RETURNING id, seq, user_id, agent_id, session_id, ts, tags, doc_len, nb_len, turn"),
            (t, list(ids))).fetchall()
        context = self._read_sql_search(setting)
        if not gone:
            return []
        seqs = [g[1] for g in gone]
        for table in ("vectors", "access", *(("cpost", "ctxvec") if context else ())):
            conn.execute(q(f"DELETE FROM @{table} WHERE tenant = %s AND seq = ANY(%s)"), (t, seqs))
        pg_index.count_users(conn, q, t, Counter({u: -n for u, n in Counter(g[2] for g in gone).items()}))
        pg_index.remove_postings(conn, q, t, seqs, df=context)
        changes: pg_index.SessionChanges = {}
        if self.index_config.context_radius and context:
            conn.execute(q("DELETE FROM @neighbours WHERE tenant = %s AND seq = ANY(%s)"), (t, seqs))
            for _, seq, user, _, session, ts, *_, turn in gone:
                if turn:
                    changes.setdefault((user, session), []).append((ts, seq))
        nb, around = pg_index.rethread(conn, q, t, self.index_config.context_radius, changes)
        if context:
            pg_index.refresh_context(conn, q, t, self._w, around, self._vw)
        pg_index.bump_stats(conn, q, t, docs=-len(gone), length=-sum(g[7] for g in gone),
                            nb_length=nb - sum(g[8] for g in gone))
        self._log(conn, [g[0] for g in gone])
        if event is not None:
            self._notify(conn, event, [(g[0], g[2], g[3], g[6]) for g in gone])
        deleted = {g[0] for g in gone}
        return [i for i in ids if i in deleted]

    def _log(self, conn: psycopg.Connection, ids: Sequence[str], op: str = "w") -> psycopg.Cursor[Any] | None:
        """Tell local indexes (local.py) which records this write transaction changed ('w'), or
        that the tenant's index must be rebuilt ('f'); under the write lock, so in commit order.
        Returns the cursor of the last entry's ``seq`` (read once the pipeline is through).
        About once every ``CHANGES_PRUNE_EVERY`` entries, entries past the last
        ``CHANGES_KEEP`` go (a local index further behind rebuilds)."""
        if not ids:
            return None
        local = self.local
        if local is not None:
            local.trusted = False  # its next search catches this write up before it ranks
        logged = conn.execute(self._q(
            "WITH e AS (INSERT INTO @changes (tenant, id, op) SELECT %s, unnest(%s::text[]), %s RETURNING seq) "
            "SELECT max(seq) FROM e"), (self.tenant, list(ids), op))
        # By chance, not by this process's count: many short-lived processes (a CLI call, a
        # script) that each log a few entries must prune too, about once every
        # CHANGES_PRUNE_EVERY entries whoever writes them.
        if self._prune_draw.random() * CHANGES_PRUNE_EVERY < len(ids):
            conn.execute(self._q(
                "WITH cut AS (SELECT seq FROM @changes WHERE tenant = %(t)s ORDER BY seq DESC "
                "OFFSET %(keep)s LIMIT 1), "
                "gone AS (DELETE FROM @changes c USING cut WHERE c.tenant = %(t)s AND c.seq <= cut.seq "
                "RETURNING c.seq) "
                "INSERT INTO @meta (tenant, key, value) SELECT %(t)s, 'changes_floor', max(seq)::text FROM gone "
                "HAVING count(*) > 0 ON CONFLICT (tenant, key) DO UPDATE SET value = excluded.value"),
                {"t": self.tenant, "keep": CHANGES_KEEP})
        return logged

    def _notify(self, conn: psycopg.Connection, event: EventType, rows: list[tuple[str, str, str | None, Any]]) -> None:
        payloads = event_payloads(event.value, rows, tenant=self.tenant, origin=self.origin)
        conn.execute("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (self.channel, payloads))

    # -- reads ---------------------------------------------------------------------------
    def contains(self, ids: Sequence[str]) -> set[str]:
        self._check()
        ids = clean(ids)
        if not ids:
            return set()
        with self._conn() as conn:
            return {r[0] for r in conn.execute(self._q("SELECT id FROM @chunks WHERE tenant = %s AND id = ANY(%s)"),
                                               (self.tenant, ids))}

    def get(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        self._check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self._q(GET_SQL), {"t": self.tenant, "ids": ids}).fetchall()
        return {r[0]: decode_record(*r) for r in rows}

    def rank_fields(self, ids: Sequence[str]) -> dict[str, RankFields]:
        self._check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self._q(
                "SELECT id, doc->>'timestamp', doc->>'weight', doc->>'confidence', doc->>'pinned',"
                " doc->'metadata'->'stale', doc->>'reinforced_at', doc->>'expires_at'"
                " FROM @chunks WHERE tenant = %s AND id = ANY(%s)"), (self.tenant, ids)).fetchall()
        return {r[0]: rank_fields_of(*r[1:]) for r in rows}

    def scan(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
             descending: bool = False) -> Iterator[KnowledgeChunk]:
        return records_in_order(self.get, self.scan_ids(flt, order=order, limit=limit, descending=descending))

    def scan_ids(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                 descending: bool = False) -> list[str]:
        self._check()
        stmt, params = self._scan_sql(flt, order=order, limit=limit, descending=descending)
        with self._conn() as conn:
            return [r[0] for r in conn.execute(stmt, params)]

    def _scan_sql(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                  descending: bool = False, columns: str = "c.id") -> tuple[str, dict[str, Any]]:
        """``scan_ids``'s statement (``columns`` of the records instead of their ids alone)."""
        where, args = filter_sql(flt)
        direction = "DESC" if descending else "ASC"
        order_by = f"c.ts {direction}, c.seq {direction}" if order == "timestamp" else f"c.seq {direction}"
        lim = "" if limit is None else " LIMIT %(lim)s"
        return (self._q(f"SELECT {columns} FROM @chunks c WHERE c.tenant = %(t)s{where} ORDER BY {order_by}{lim}"),
                {"t": self.tenant, "lim": max(int(limit or 0), 0), **args})

    def count(self, flt: Filter | None = None) -> int:
        with self._conn() as conn:
            if flt is None:
                row = conn.execute(self._q("SELECT n_docs FROM @stats WHERE tenant = %s"), (self.tenant,)).fetchone()
                return 0 if row is None else int(row[0])
            where, args = filter_sql(flt)
            return int(one(conn.execute(self._q(f"SELECT count(*) FROM @chunks c WHERE c.tenant = %(t)s{where}"),
                                        {"t": self.tenant, **args}).fetchone())[0])

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        self._check()
        ids = clean(ids)
        if not ids:
            return set()
        where, args = filter_sql(flt)
        with self._conn() as conn:
            return {r[0] for r in conn.execute(self._q(
                f"SELECT c.id FROM @chunks c WHERE c.tenant = %(t)s AND c.id = ANY(%(ids)s){where}"),
                {"t": self.tenant, "ids": ids, **args})}

    def statuses(self) -> dict[str, int]:
        """Live record counts per status."""
        with self._conn() as conn:
            return {s: int(n) for s, n in conn.execute(self._q(
                "SELECT status, count(*) FROM @chunks WHERE tenant = %s GROUP BY status"), (self.tenant,))}

    @property
    def dim(self) -> int | None:
        with self._conn() as conn:
            row = conn.execute(self._q("SELECT dim FROM @stats WHERE tenant = %s"), (self.tenant,)).fetchone()
        return None if row is None else row[0]

    # -- retrieval -----------------------------------------------------------------------
    def _lexical_params(self, terms: Mapping[str, int]) -> dict[str, Any]:
        query = {t: c for t, c in terms.items() if "\x00" not in t}
        cfg = self.index_config
        return {"t": self.tenant, "terms": list(query), "qtfs": [float(c) for c in query.values()],
                "w": self._w, "k1": float(cfg.k1), "b": float(cfg.b),
                "by_key": float(self.key_lookup_cost * max(len(query), 1)), "heavy": []}

    def _statement(self, template: str, flt: Filter | None, **fmt: Any) -> tuple[str, dict[str, Any]]:
        """A search statement with the filter's conditions in place, and their parameters.
        A filter beyond user and status is applied where the candidates are generated
        (sql.FILTERED_CTES)."""
        cpf, rest, args = split_filter(flt)
        where, fargs = filter_sql(flt)
        parts = {"{fs}": FILTERED_CTES, "{lex}": LEX_FILTERED, "{postings}": POSTINGS_FILTERED,
                 "{est}": EST_FILTERED, "{exact_from}": EXACT_FROM_FILTERED} if rest else \
            {"{fs}": "", "{lex}": LEX_PLAIN, "{postings}": POSTINGS_PLAIN, "{est}": EST_USERS,
             "{exact_from}": EXACT_FROM_USERS}
        for slot, text in parts.items():
            template = template.replace(slot, text)
        return self._q(template.format(cpf=cpf, flt=where, **fmt)), {**args, **fargs}

    def _vector_params(self, q: np.ndarray, flt: Filter, k: int, exact: bool) -> dict[str, Any]:
        # The graph is pointless when the filter names few enough ids, or holds none of the
        # tenant's vectors (its SQL search off: schema 0011); otherwise the statement
        # decides from the user counts (see sql._VECTOR_CTES).
        few_ids = flt.ids is not None and len(flt.ids) <= self.exact_limit
        graph = not (exact or few_ids) and self.sql_search
        return {"q": q, "vk": max(int(k), 0), "graph": graph, "exact_limit": int(self.exact_limit),
                "users": None if flt.user_ids is None else clean(flt.user_ids), "vw": self._vw}

    def _settings(self, conn: psycopg.Connection, k: int, narrowed: bool = False) -> None:
        """The search's transaction-local settings (see ``_search_settings``). Under a
        filter beyond user and status (``narrowed``) the graph is walked only when more
        than ``exact_limit`` records pass it, yet it may keep few of them: without
        pgvector 0.8's iterative scans the beam is widened tenfold (to pgvector's cap of
        1,000), so a filter keeping a tenth of the records still fills the walk instead of
        falling back to the exact scan (0.57 s for an agent's 12.5k of 100k)."""
        ef = max(int(self.ef_search), 2 * int(k), 1)
        if narrowed and not any("iterative_scan" in s for s in self._search_settings):
            ef *= 10
        # pgvector refuses more (a search for k > 500 failed); a walk capped short of k
        # is answered by the exact scan
        ef = min(ef, HNSW_EF_CAP)
        for stmt in self._search_settings:
            conn.execute(stmt.format(ef=ef), prepare=False)  # a search's, even inside a write

    def _search_rows(self, stmt: str, params: Mapping[str, Any], k: int, narrowed: bool = False, *,
                     context: bool = False) -> list[tuple[Any, ...]]:
        """Run a search statement with its settings in one round trip: BEGIN, the SET
        LOCALs, the statement and COMMIT go out together and the rows are read after the
        pipeline's single sync. ``context``: the statement reads what only SQL search keeps
        (``cpost``, ``ctxvec``), so the tenant's setting is read after it (``_sql_search_read``)."""
        with self._tx(read_only=True, snapshot=context) as conn:
            self._settings(conn, k, narrowed)
            cur = conn.execute(stmt, params)
            setting = conn.execute(self._q(_SQL_SEARCH_SQL), (self.tenant,)) if context else None
        rows = cur.fetchall()
        if setting is not None:
            self._sql_search_read(setting)
        return rows

    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        return self.lexical_searches([terms], flt, k, include=include)[0]

    def lexical_searches(self, queries: Sequence[Mapping[str, int]], flt: Filter, k: int, *,
                         include: Sequence[str] = ()) -> list[list[tuple[str, float]]]:
        """``lexical_search`` of each of ``queries`` in one round trip (one pipelined
        transaction: BEGIN, the SET LOCALs, the statements and COMMIT go out together)."""
        self._check()
        if not queries:
            return []
        local = self.local
        if local is not None and not self.sql_search:
            return local.lexical_searches(queries, self._fields_as_ids(flt), k, include)
        stmt, args = self._statement(LEXICAL_SQL, flt)
        common = {"k": max(int(k), 0), "include": list(dict.fromkeys(clean(include))), **args}
        # With the search settings: the statement's join order as written (sql.LEX_FILTERED
        # reads the passing records, then their postings), which the planner, misjudging
        # the postings of a term, abandoned for reading every posting of the terms.
        with self._tx(snapshot=True) as conn:
            self._settings(conn, k, False)
            cursors = [conn.execute(stmt, {**self._lexical_params(terms), **common}) for terms in queries]
            setting = conn.execute(self._q(_SQL_SEARCH_SQL), (self.tenant,))
        try:
            self._sql_search_read(setting)
        except _SqlSearchOff:
            return self.lexical_searches(queries, flt, k, include=include)
        return [sorted(((i, float(s)) for i, s in cur.fetchall()), key=lambda kv: (-kv[1], kv[0])) for cur in cursors]

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False) -> list[tuple[str, float]]:
        self._check()
        q = np.asarray(vector, np.float32)
        if k <= 0:
            return []
        if q.ndim != 1 or not len(q):
            raise DimensionMismatchError(f"the query vector has shape {q.shape}")
        local = self.local
        if local is not None and not self.sql_search:  # its vectors are not in pgvector's graph
            return local.vector_search(q, self._fields_as_ids(flt), k, exact=exact)
        stmt, params = self._vector_sql(q, flt, k, exact)
        return self._vector_hits(q, self._search_rows(stmt, params, k, narrowed(flt)), params["graph"])

    def _vector_sql(self, q: np.ndarray, flt: Filter, k: int, exact: bool) -> tuple[str, dict[str, Any]]:
        stmt, args = self._statement(VECTOR_SQL, flt, d=int(len(q)))
        return stmt, {"t": self.tenant, **self._vector_params(q, flt, k, exact), **args}

    def _vector_hits(self, q: np.ndarray, rows: list[tuple[Any, ...]], graph: bool) -> list[tuple[str, float]]:
        """``vector_search``'s answer from its statement's rows."""
        if rows and graph:
            self._maybe_index(len(q), int(rows[0][4]))
        hits = [(cid, float(s), path, seq) for cid, s, path, seq, _ in rows if cid is not None]
        if not hits:
            dims = [seq for cid, _, _, seq, _ in rows if cid is None]
            if dims and dims[0] is not None and dims[0] != len(q):
                raise DimensionMismatchError(f"the query vector has shape {q.shape}; this store needs ({dims[0]},)")
            return []
        self.last_vector_path = hits[0][2]
        hits.sort(key=lambda h: (-h[1], h[3]))
        return [(cid, s) for cid, s, _, _ in hits]

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``vector`` with each memory's context vector (own + weighted neighbours)."""
        self._check()
        ids = list(dict.fromkeys(clean(ids)))
        q = np.asarray(vector, np.float32)
        if not ids:
            return {}
        local = self.local
        if local is not None and not self.sql_search:
            return local.vector_scores(q, ids)
        with self._tx(snapshot=True) as conn:
            cur = conn.execute(self._q(VECTOR_SCORES_SQL.format(d=int(len(q)))),
                               {"t": self.tenant, "ids": ids, "q": q, "vw": self._vw})
            setting = conn.execute(self._q(_SQL_SEARCH_SQL), (self.tenant,))
        rows = cur.fetchall()
        try:
            self._sql_search_read(setting)
        except _SqlSearchOff:
            return self.vector_scores(vector, ids)
        return {cid: float(s) for cid, s in rows}

    def retrieve(self, terms: Mapping[str, int], vector: np.ndarray, flt: Filter, k: int, *,
                 evidence: Sequence[str] = (), optimistic: bool = False) -> Candidates | LocalCandidates:
        """A hybrid search's candidates in one statement: the lexical top ``k`` (as
        ``lexical_search``), the dense top ``k`` (as ``vector_search``), and for all of them
        the BM25 score, the context-vector score (as ``vector_scores``), the fields ranking
        reads (as ``rank_fields``) and the record (as ``get``), from one snapshot; with
        ``evidence`` (terms of ``terms``) also calibrated relevance's lexical evidence for
        those terms (``Candidates.evidence``). ``optimistic``: a local index may rank before
        it checks the change log (``LocalIndex.retrieve``)."""
        self._check()
        q = np.asarray(vector, np.float32)
        if q.ndim != 1 or not len(q):
            raise DimensionMismatchError(f"the query vector has shape {q.shape}")
        local = self.local
        if local is not None and (not flt.fields or not self.sql_search):
            # declared fields are not held in memory: with SQL search on, such a search runs
            # in SQL; with it off, SQL reads the ids passing them for the local index
            return local.retrieve(terms, q, self._fields_as_ids(flt), k, evidence, optimistic=optimistic)
        stmt, args = self._statement(SEARCH_SQL, flt, d=int(len(q)))
        params = {**self._lexical_params(terms), "k": max(int(k), 0), **self._vector_params(q, flt, k, False),
                  "heavy": list(dict.fromkeys(clean(evidence))), **args}
        try:
            rows = self._search_rows(stmt, params, k, narrowed(flt), context=True)
        except _SqlSearchOff:
            return self.retrieve(terms, vector, flt, k, evidence=evidence, optimistic=optimistic)
        if rows and params["graph"]:
            self._maybe_index(len(q), int(rows[0][15]))
        if not rows:
            store_dim = self.dim
            if store_dim is not None and store_dim != len(q):
                raise DimensionMismatchError(f"the query vector has shape {q.shape}; this store needs ({store_dim},)")
        rows.sort(key=lambda r: (-r[1], r[0]))
        found = None
        if evidence:
            # every row carries the same bests (none without rows, when no hit needs them)
            best = dict(zip(rows[0][17] or (), map(float, rows[0][18] or ()))) if rows else {}
            found = TermEvidence(best, {r[0]: float(r[16]) for r in rows})
        return Candidates([r[0] for r in rows], np.fromiter((r[1] for r in rows), np.float64, len(rows)),
                          np.fromiter((r[2] for r in rows), np.float64, len(rows)),
                          {r[0]: rank_fields_of(*r[3:10]) for r in rows},
                          {r[0]: (r[11], r[12], r[13], r[14]) for r in rows}, found)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        self._check()
        ids = clean(ids)
        if not ids:
            return {}
        with self._conn() as conn:
            return {cid: e.to_numpy().astype(np.float32) for cid, e in conn.execute(self._q(
                "SELECT c.id, v.embedding FROM @chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq "
                "WHERE c.tenant = %s AND c.id = ANY(%s)"), (self.tenant, ids), binary=True)}

    # -- relationships ----------------------------------------------------------------------
    def add_edges(self, edges: Sequence[Relationship]) -> None:
        self._check()
        if not edges:
            return
        with self._conn(write=True) as conn:
            self._add_edges(conn, list(edges))

    def _add_edges(self, conn: psycopg.Connection, edges: Sequence[Relationship]) -> None:
        """Insert or overwrite edges whose two ends exist (later duplicates win)."""
        latest = {(e.source_id, e.target_id, e.type.value): float(e.weight) for e in edges
                  if "\x00" not in e.source_id + e.target_id}
        if not latest:
            return
        keys = sorted(latest)
        conn.execute(
            self._q("INSERT INTO @edges (tenant, src, dst, type, weight) "
            "SELECT %(t)s, u.src, u.dst, u.type, u.w FROM unnest(%(src)s::text[], %(dst)s::text[], %(type)s::text[], "
            "%(w)s::float8[]) AS u(src, dst, type, w) "
            "WHERE EXISTS (SELECT 1 FROM @chunks c WHERE c.tenant = %(t)s AND c.id = u.src) "
            "AND EXISTS (SELECT 1 FROM @chunks c WHERE c.tenant = %(t)s AND c.id = u.dst) "
            "ON CONFLICT (tenant, src, dst, type) DO UPDATE SET weight = excluded.weight"),
            {"t": self.tenant, "src": [k[0] for k in keys], "dst": [k[1] for k in keys],
             "type": [k[2] for k in keys], "w": [latest[k] for k in keys]})

    def delete_edges(self, edges: Sequence[Relationship]) -> None:
        self._check()
        if not edges:
            return
        with self._conn(write=True) as conn:
            self._delete_edges(conn, edges)

    def _delete_edges(self, conn: psycopg.Connection, edges: Sequence[Relationship]) -> None:
        conn.execute(
            self._q("DELETE FROM @edges e USING unnest(%s::text[], %s::text[], %s::text[]) AS u(src, dst, type) "
            "WHERE e.tenant = %s AND e.src = u.src AND e.dst = u.dst AND e.type = u.type"),
            ([e.source_id for e in edges], [e.target_id for e in edges], [e.type.value for e in edges],
             self.tenant))

    def edges(self, ids: Sequence[str], *, types: Sequence[str] | None = None,
              direction: str = "both") -> list[Relationship]:
        self._check()
        if direction not in ("in", "out", "both"):
            raise InvalidInputError("direction must be 'in', 'out' or 'both'")
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return []
        with self._conn() as conn:
            return self._edges(conn, ids, types, direction)

    def _edges(self, conn: psycopg.Connection, ids: Sequence[str], types: Sequence[str] | None,
               direction: str) -> list[Relationship]:
        ends = {"out": "src = ANY(%(ids)s)", "in": "dst = ANY(%(ids)s)",
                "both": "(src = ANY(%(ids)s) OR dst = ANY(%(ids)s))"}[direction]
        type_sql = "" if types is None else " AND type = ANY(%(types)s::text[])"
        rows = conn.execute(
            self._q(f"SELECT src, dst, type, weight FROM @edges WHERE tenant = %(t)s AND {ends}{type_sql} ORDER BY src, dst, type"),
            {"t": self.tenant, "ids": list(ids),
             "types": None if types is None else [getattr(x, "value", x) for x in types]}).fetchall()
        return [Relationship(s, d, typ, w) for s, d, typ, w in rows]

    # -- auxiliary state -------------------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> None:
        _no_nul("namespace, key or user", [namespace, key, user_id])
        text = json.dumps(value, ensure_ascii=False)
        with self._conn(write=True) as conn:
            conn.execute(self._q("INSERT INTO @kv (tenant, ns, key, value, user_id) VALUES (%s, %s, %s, %s::json, %s) "
                         "ON CONFLICT (tenant, ns, key) DO UPDATE SET value = excluded.value, user_id = excluded.user_id"),
                         (self.tenant, namespace, key, text, user_id))

    def kv_get(self, namespace: str, key: str) -> dict[str, Any] | None:
        if "\x00" in namespace + key:
            self._check()
            return None
        with self._conn() as conn:
            row = conn.execute(self._q("SELECT value FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                               (self.tenant, namespace, key)).fetchone()
        return None if row is None else row[0]

    def kv_delete(self, namespace: str, key: str) -> bool:
        if "\x00" in namespace + key:
            self._check()
            return False
        with self._conn(write=True) as conn:
            cur = conn.execute(self._q("DELETE FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                               (self.tenant, namespace, key))
            return cur.rowcount > 0

    def kv_update(self, namespace: str, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                  *, user_id: str | None = None) -> dict[str, Any] | None:
        _no_nul("namespace, key or user", [namespace, key, user_id])
        with self._tx(write=True) as conn:
            # A lock on the key's name, not its row: it also serialises the first write of a key
            # that does not exist yet (FOR UPDATE would lock nothing). Held until COMMIT.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"beeweave.kv\x1f{self.tenant}\x1f{namespace}\x1f{key}",))
            row = conn.execute(self._q("SELECT value FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                               (self.tenant, namespace, key)).fetchone()
            new = change(None if row is None else row[0])
            if new is None:
                conn.execute(self._q("DELETE FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                             (self.tenant, namespace, key))
            else:
                conn.execute(self._q("INSERT INTO @kv (tenant, ns, key, value, user_id) VALUES (%s, %s, %s, %s::json, %s) "
                                     "ON CONFLICT (tenant, ns, key) DO UPDATE SET value = excluded.value, "
                                     "user_id = excluded.user_id"),
                             (self.tenant, namespace, key, json.dumps(new, ensure_ascii=False), user_id))
        return new

    def kv_scan(self, namespace: str, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        if "\x00" in namespace + prefix:
            self._check()
            return iter(())
        with self._conn() as conn:
            # starts_with, not LIKE: keys may hold % and _. "C" order is code-point order.
            rows = conn.execute(self._q("SELECT key, value FROM @kv WHERE tenant = %s AND ns = %s AND key >= %s "
                                "AND starts_with(key, %s) ORDER BY key"),
                                (self.tenant, namespace, prefix, prefix)).fetchall()
        return iter(rows)

    def log_append(self, stream: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> int:
        _no_nul("stream, key or user", [stream, key, user_id])
        text = json.dumps(value, ensure_ascii=False)
        with self._tx(write=True) as conn:
            # One writer per stream at a time, so sequence numbers are in commit order and a
            # reader polling with after=<last seq> never skips an entry committed late.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("beeweave-log", self.schema, self.tenant, stream),))
            return int(one(conn.execute(
                self._q("INSERT INTO @log (tenant, stream, key, value, user_id) VALUES (%s, %s, %s, %s::json, %s) RETURNING seq"),
                (self.tenant, stream, key, text, user_id)).fetchone())[0])

    def log_read(self, stream: str, key: str | None = None, *, after: int = 0,
                 limit: int | None = None, user_id: str | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        if "\x00" in stream + (key or "") + (user_id or ""):
            self._check()
            return []
        with self._conn() as conn:  # LIMIT NULL is no limit
            rows = conn.execute(
                self._q("SELECT seq, key, value FROM @log WHERE tenant = %(t)s AND stream = %(s)s AND seq > %(after)s "
                "AND (%(key)s::text IS NULL OR key = %(key)s) AND (%(u)s::text IS NULL OR user_id = %(u)s) "
                "ORDER BY seq LIMIT %(limit)s"),
                {"t": self.tenant, "s": stream, "after": after, "key": key, "u": user_id,
                 "limit": None if limit is None else int(limit)}).fetchall()
        return [(int(seq), k, v) for seq, k, v in rows]

    def log_delete(self, stream: str, keys: Sequence[str]) -> int:
        keys = [k for k in keys if "\x00" not in k]  # a key with NUL was never stored
        if not keys or "\x00" in stream:
            self._check()
            return 0
        with self._tx(write=True) as conn:
            # (A count read from the statement: rowcount is not known yet inside a pipeline.)
            return int(one(conn.execute(self._q(
                "WITH d AS (DELETE FROM @log WHERE tenant = %s AND stream = %s AND key = ANY(%s) RETURNING 1) "
                "SELECT count(*) FROM d"), (self.tenant, stream, keys)).fetchone())[0])

    def delete_user(self, user_id: str) -> int:
        self._check()
        if "\x00" in user_id:
            return 0
        with self._write() as conn:
            ids = [r[0] for r in conn.execute(self._q("SELECT id FROM @chunks WHERE tenant = %s AND user_id = %s"),
                                              (self.tenant, user_id))]
            gone = self._delete(conn, ids, EventType.DELETED) if ids else []
            conn.execute(self._q("DELETE FROM @kv WHERE tenant = %s AND user_id = %s"), (self.tenant, user_id))
            conn.execute(self._q("DELETE FROM @log WHERE tenant = %s AND user_id = %s"), (self.tenant, user_id))
            # The user's count row and the ingest queue's copies of their events (processed or
            # not) hold their id and words too.
            conn.execute(self._q("DELETE FROM @ucount WHERE tenant = %s AND user_id = %s"), (self.tenant, user_id))
            conn.execute(self._q("DELETE FROM @ingest_events WHERE tenant = %s AND user_id = %s"),
                         (self.tenant, user_id))
            # Local indexes rebuild (nothing of the user may stay in their memory: terms, graph),
            # so the log need not name the user's records any more.
            conn.execute(self._q("DELETE FROM @changes WHERE tenant = %s AND id = ANY(%s)"), (self.tenant, gone))
            self._log(conn, [""], "f")
        return len(gone)

    def users(self) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(self._q(
                "SELECT user_id FROM @chunks WHERE tenant = %s UNION SELECT user_id FROM @kv WHERE tenant = %s "
                "AND user_id IS NOT NULL UNION SELECT user_id FROM @log WHERE tenant = %s AND user_id IS NOT NULL"),
                (self.tenant, self.tenant, self.tenant)).fetchall()
        return sorted(r[0] for r in rows)

    def drop_tenant(self) -> int:
        """Delete everything of this tenant (records, index, edges, kv, log, meta); return records deleted.
        The store stays open and empty, with its index configuration kept."""
        with self._write() as conn:
            n = one(conn.execute(self._q("SELECT coalesce(max(n_docs), 0) FROM @stats WHERE tenant = %s"),
                                 (self.tenant,)).fetchone())[0]
            for table in ("edges", "neighbours", "postings", "cpost", "terms", "df_hist", "stats", "ucount", "kv",
                          "log", "vectors", "access", "ctxvec", "chunks", "ingest_events", "changes"):
                conn.execute(self._q(f"DELETE FROM @{table} WHERE tenant = %s"), (self.tenant,))
            conn.execute(self._q("DELETE FROM @meta WHERE tenant = %s AND key NOT IN ('index_config', 'sql_search')"),
                         (self.tenant,))
            self._log(conn, [""], "f")
        return int(n)

    # -- integrity ---------------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check the derived tables (lengths, df, statistics, neighbours, context postings,
        user counts, vectors, access rows) and the relationships against this tenant's
        records and postings, in one snapshot."""
        with self._conn() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                context = self._read_sql_search(conn.execute(self._q(_SQL_SEARCH_SQL), (self.tenant,)))
                found = pg_verify.problems(conn, self._q, self.tenant, self.index_config.context_radius, self._w,
                                           self._vw, context=context)
                records, edges = one(conn.execute(self._q(
                    "SELECT (SELECT count(*) FROM @chunks WHERE tenant = %(t)s), "
                    "(SELECT count(*) FROM @edges WHERE tenant = %(t)s)"), {"t": self.tenant}).fetchone())
            finally:
                conn.execute("ROLLBACK")
        return VerifyReport(records=int(records), edges=int(edges), problems=found, problem_count=len(found))

    def repair(self) -> VerifyReport:
        """Recompute every derived table from the records and drop dangling relationships;
        return a fresh check."""
        with self._write() as conn:
            context = self._read_sql_search(conn.execute(self._q(_SQL_SEARCH_SQL), (self.tenant,)))
            pg_verify.rebuild(conn, self._q, self.tenant, self.index_config.context_radius, self._w, self._vw,
                              context=context)
            self._log(conn, [""], "f")
        return self.verify()

    # -- the shared ingest queue -------------------------------------------------------------
    def ingest_queue(self, *, lease: float | None = None, poll_interval: float = 1.0) -> Any:
        """This tenant's ingest queue in the database (``PostgresEventQueue``), which the
        ingest runtime uses instead of a queue file: a 202 is committed here, and the
        workers of every host serving the tenant drain it. None on a read_only store
        (a replica takes no events)."""
        self._check()
        if self.read_only:
            return None
        from .ingest_queue import DEFAULT_LEASE, PostgresEventQueue

        lease = lease if lease is not None else self.ingest_lease
        return PostgresEventQueue(self, lease=DEFAULT_LEASE if lease is None else lease, poll_interval=poll_interval)

    # -- events across processes ------------------------------------------------------------
    def listen(self, callback: Callable[[dict[str, Any]], Any], *, include_own: bool = False) -> RemoteListener:
        """Call ``callback(payload)`` from a background thread for every record change that
        another process (another store) commits on this tenant; ``close()`` the returned
        listener to stop. Payload keys: type, chunk_id, user_id, agent_id, tags, tenant, origin."""
        self._check()
        listener = RemoteListener(self.listen_url, self.channel, callback, origin=self.origin,
                                  include_own=include_own)
        self._listeners.append(listener)
        return listener

    # -- lifecycle ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Nothing to do: every write is committed when it returns."""
        self._check()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for listener in self._listeners:
            listener.close()
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, tenant={self.tenant!r}, schema_version={PG_SCHEMA_VERSION})"


assert PG_SCHEMA_VERSION == len(MIGRATIONS)
