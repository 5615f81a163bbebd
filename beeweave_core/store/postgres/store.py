"""The scale-out backend: PostgreSQL with pgvector, shared by many agents and processes.

The database holds the truth: records, their vectors and term counts, relationships,
key-value state and logs, and a change log of every write. Every search is answered by
the tenant's local index in this process (local.py), caught up from the change log before
it ranks, so every process sees every other's committed writes; the records a search
returns are read from the database.

Isolation: a ``tenant`` column leads every key and every WHERE clause, so one set of
tables holds many memories that never see each other. Writes that change a tenant's
records (insert, update, replace, delete) run in one transaction each under the tenant's
write lock (connection.py), which keeps the change log in commit order; reads never wait
for them. Every committed change of a record is announced with NOTIFY on the tenant's
channel (see ``events.py``).

Requires ``pip install "beeweave-memory[postgres]"`` (psycopg 3, psycopg_pool, pgvector).
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg

from ...errors import DimensionMismatchError, DuplicateIdError, InvalidInputError, NotFoundError, StoreUnavailableError
from ...events import EventType
from ...filters import Filter
from ...index.context import IndexConfig
from ...index.turns import SessionContext, lends_context
from ...records import KnowledgeChunk, Relationship, to_datetime
from ...scoring import RankFields
from ..base import Capabilities, ChunkRow, VerifyReport, check_model, records_in_order, split_changes
from ..links import Derive, LinkReads
from . import links as pg_links
from . import verify as pg_verify
from .connection import Database
from .decode import decode_record, rank_fields_of
from .events import RemoteListener, channel_name, event_payloads
from .ingest_queue import DEFAULT_LEASE, PostgresEventQueue
from .local import LocalCandidates, LocalIndex, OwnInsert, with_batch
from .options import resolve
from .schema import MIGRATIONS, PG_SCHEMA_VERSION, lock_key
from .sql import GET_SQL, clean, field_expr, filter_sql, one, scan_sql

__all__ = ["PostgresStore"]

logger = logging.getLogger(__name__)

# A batch of this many records or more (add_many writes 512 at a time) may be followed by
# ANALYZE (PostgresStore._analyze_after) of these tables, the ones an add or a search reads.
ANALYZE_BATCH = 256
_ANALYZED = ("chunks", "vectors", "access", "postings", "edges", "changes")

# The change log (schema 0009) keeps a tenant's last CHANGES_KEEP entries: a local index
# further behind rebuilds from the rows. A write of n entries prunes with chance
# n / CHANGES_PRUNE_EVERY.
CHANGES_KEEP = 100_000
CHANGES_PRUNE_EVERY = 10_000


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


class PostgresStore:
    """A ``StoreBackend`` on PostgreSQL + pgvector.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[postgres]"   # and a PostgreSQL with the vector extension

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave

            memory = BeeWeave.from_url("postgresql://user:pw@host/db", tenant="team-a")

    Every option but ``index_config`` is also a query parameter of the URL (``?schema=NAME``,
    ``?tenant=...``; an argument wins), checked before anything is opened (options.py).

    Args:
        url: a libpq URL or conninfo string.
        index_config: BM25 and session-context settings for a new tenant; an existing
            tenant keeps its own (a different one is refused).
        tenant: whose memory this is; every query is scoped to it (default "default").
        schema: the PostgreSQL schema holding the tables (created if missing; default "beeweave").
        pool_size: the most connections this store opens at once (default 4).
        timeout: seconds to wait for the database or a free pooled connection (default 30).
        read_only: open without writing anything (e.g. on a read replica): searches and
            reads work, every write raises ``StoreUnavailableError``.
        listen_url: where ``listen()`` connects (LISTEN needs a session: a direct or
            session-pooled URL when ``url`` goes through a transaction pooler).
        ingest_lease: seconds a worker holds a batch of the shared ingest queue before
            another host's worker may take it (default 120).
    """

    def __init__(self, url: str, *, index_config: IndexConfig | None = None, tenant: str | None = None,
                 schema: str | None = None, pool_size: int | None = None, timeout: float | None = None,
                 read_only: bool | None = None, listen_url: str | None = None,
                 ingest_lease: float | None = None) -> None:
        if index_config is not None and not isinstance(index_config, IndexConfig):
            raise InvalidInputError("index_config must be an IndexConfig")
        plain, self.options = resolve(url, {
            "tenant": tenant, "schema": schema, "pool_size": pool_size, "timeout": timeout, "read_only": read_only,
            "listen_url": listen_url, "ingest_lease": ingest_lease})
        self.origin = uuid.uuid4().hex  # tells this store's own notifications from others'
        self.channel = channel_name(self.options.schema, self.options.tenant)
        self._listeners: list[RemoteListener] = []
        self._prune_draw = random.Random()  # when a write prunes the change log (see _log)
        self.db = Database(plain, self.options)
        self.url, self.schema, self.tenant = plain, self.options.schema, self.options.tenant
        self.read_only = self.options.read_only
        # A replica takes no events (ingest_queue answers None there): it declares no queue.
        self.capabilities = Capabilities(read_only=self.read_only, retrieval=self, term_searches=self,
                                         queue=None if self.read_only else self)
        try:
            self.index_config = self._resolve_index_config(index_config)
        except BaseException:
            self.db.close()
            raise
        self.local = LocalIndex(self.db, self.index_config)

    def _resolve_index_config(self, wanted: IndexConfig | None) -> IndexConfig:
        with self.db.conn() as conn:
            if not self.read_only:
                conn.execute(self.db.q("INSERT INTO @meta (tenant, key, value) VALUES (%s, 'index_config', %s) "
                                     "ON CONFLICT DO NOTHING"),
                             (self.tenant, json.dumps((wanted or IndexConfig()).to_dict())))
            row = conn.execute(self.db.q("SELECT value FROM @meta WHERE tenant = %s AND key = 'index_config'"),
                               (self.tenant,)).fetchone()
        if row is None:  # a read-only store of a tenant nobody wrote yet
            return wanted or IndexConfig()
        cfg = IndexConfig.from_dict(json.loads(row[0]))
        if wanted is not None and wanted != cfg:
            raise InvalidInputError(f"this store was indexed with {cfg}; open it without index_config=")
        return cfg

    def _fields_as_ids(self, flt: Filter) -> Filter:
        """A filter naming declared metadata fields, which a local index does not hold, as the
        ids of the records passing it (read in SQL) for the local index; others as they are."""
        return flt.replace(fields=None, ids=frozenset(self.scan_ids(flt))) if flt.fields else flt

    # -- metadata ------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        if "\x00" in key:
            self.db.check()
            return None
        with self.db.conn() as conn:
            if key == "schema_version":
                return str(one(conn.execute(self.db.q("SELECT max(version) FROM @schema_migrations")).fetchone())[0])
            if key.startswith("migration_"):
                row = conn.execute(self.db.q("SELECT name FROM @schema_migrations WHERE to_char(version, 'FM0000') = %s"),
                                   (key[len("migration_"):],)).fetchone()
                return None if row is None else row[0]
            row = conn.execute(self.db.q("SELECT value FROM @meta WHERE tenant = %s AND key = %s"),
                               (self.tenant, key)).fetchone()
            return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        _no_nul("meta", [key, value])
        with self.db.conn(write=True) as conn:
            self._set_meta(conn, {key: value})

    def _set_meta(self, conn: psycopg.Connection, meta: Mapping[str, str]) -> None:
        for key, value in meta.items():
            conn.execute(self.db.q("INSERT INTO @meta (tenant, key, value) VALUES (%s, %s, %s) "
                                 "ON CONFLICT (tenant, key) DO UPDATE SET value = excluded.value"),
                         (self.tenant, key, value))

    def index_field(self, name: str) -> None:
        expr = field_expr(name)
        with self.db.conn(write=True) as conn:
            conn.execute(self.db.q(f"CREATE INDEX IF NOT EXISTS chunks_field_{name} ON @chunks (tenant, {expr})"))

    # -- writes ----------------------------------------------------------------------------
    def insert(self, rows: Sequence[ChunkRow]) -> None:
        prepared = self._new_rows(rows)
        if prepared:
            with self.db.write() as conn:
                own = self._insert(conn, prepared, EventType.CREATED)
            if own is not None:
                self.local.take_own(own)
            self._analyze_after(len(prepared))

    def _analyze_after(self, n: int) -> None:
        """After a bulk insert (``ANALYZE_BATCH`` rows or more) that left the planner's row
        count of the records under half of what is stored, ANALYZE the tables a write and a
        search read. Autovacuum would, within a minute or so; until then the planner plans
        with the statistics of a far smaller table, and an add right after an import took
        about three times as long as once analyzed (benchmarks/history/postgres.md). The doubling rule
        bounds the cost: a 100k import in batches of 512 analyzes eight times. A role that may not
        ANALYZE (not the owner) only waits for autovacuum."""
        if n < ANALYZE_BATCH or self.read_only:
            return
        try:
            with self.db.conn() as conn:
                planned, stored = one(conn.execute(self.db.q(
                    "SELECT (SELECT reltuples FROM pg_class WHERE oid = '@chunks'::regclass), "
                    "(SELECT coalesce(sum(n_docs), 0) FROM @stats)")).fetchone())
                if float(planned) >= 0.5 * float(stored):
                    return
                for table in _ANALYZED:
                    conn.execute(self.db.q(f"ANALYZE @{table}"))
        except (StoreUnavailableError, InvalidInputError):
            logger.info("ANALYZE after a bulk insert failed; autovacuum will do it", exc_info=True)

    def insert_linked(self, rows: Sequence[ChunkRow], reads: LinkReads, derive: Derive) -> bool:
        """One transaction: the insert, the reads (links.send: no round trip of their own),
        the edges. The nearest records are read from the local index (caught up just before
        the transaction, never loaded for it), together with the inserted records themselves,
        when the change log shows, under the write lock, that nothing was committed since; if
        another store wrote meanwhile, the index catches up under the lock
        (``LocalIndex.nearest_locked``); failing both, an exact scan in SQL answers."""
        prepared = self._new_rows(rows)
        local = self.local
        mine = [(r.chunk, np.asarray(r.vector, np.float32)) for _, r in prepared]
        near = None
        if reads.similar:
            try:
                near = local.nearest(reads.similar)
            except StoreUnavailableError:  # the SQL read inside the transaction answers instead
                logger.info("catching the local index up for an add failed; reading in SQL", exc_info=True)
        own = None
        with self.db.write() as conn:
            sent: list[pg_links.Sent] = []

            def send(high: int | None) -> None:
                found = None
                if near is not None and high == near[0]:
                    found = near[1]
                elif near is not None and high is not None:
                    found = local.nearest_locked(conn, high, reads.similar, {c.id for c, _ in mine})
                if found is not None:
                    found = with_batch(found, reads.similar, mine)
                sent.append(pg_links.send(self.db, conn, reads, found))

            if prepared:
                # The reads need the new rows: they go out with the insert's last statements.
                own = self._insert(conn, prepared, EventType.CREATED, before_log=send)
            else:
                send(None)
            add, stale = derive(pg_links.receive(sent[0]))
            if stale:
                self._delete_edges(conn, stale)
            self._add_edges(conn, add)
        if own is not None:
            local.take_own(own)
        self._analyze_after(len(prepared))
        return True

    def _new_rows(self, rows: Sequence[ChunkRow]) -> list[tuple[tuple[Any, ...], ChunkRow]]:
        """Rows to insert with their checked columns; a duplicate id in the batch is refused."""
        self.db.check()
        rows = list(rows)
        seen: set[str] = set()
        for r in rows:
            if r.chunk.id in seen:
                raise DuplicateIdError(f"a chunk with id {r.chunk.id!r} already exists")
            seen.add(r.chunk.id)
        return [(_checked(r.chunk, self.index_config.session_context), r) for r in rows]

    def _insert(self, conn: psycopg.Connection, prepared: list[tuple[tuple[Any, ...], ChunkRow]],
                event: EventType, *, before_log: Callable[[int], None] | None = None) -> OwnInsert | None:
        """Insert new records with their vectors, term counts and access rows. ``before_log``
        is called once they are written (what it sends rides the log's round trip), with the
        change log's last position as read under the write lock. Returns what this store's
        local index takes from memory once the transaction commits (``LocalIndex.take_own``),
        None when nothing was logged."""
        t, q = self.tenant, self.db.q
        ids = [cols[0] for cols, _ in prepared]
        vectors = [np.asarray(r.vector, np.float32) for _, r in prepared]
        dim = len(vectors[0])
        if any(v.ndim != 1 or len(v) != dim for v in vectors):
            raise DimensionMismatchError("the vectors of one batch must all have the same dimension")
        counts = [dict(Counter(r.terms)) for _, r in prepared]
        for tc in counts:
            _no_nul("term", list(tc))
        n = len(prepared)
        # The store's model rides the same statement (no round trip of its own), read under
        # the tenant's write lock: a re-embed's switch, which sets it in its transaction, is
        # committed and seen here, or waits for this write and re-reads its records.
        existing, store_dim, seqs, high, model = one(conn.execute(q(
            "SELECT (SELECT array_agg(id) FROM @chunks WHERE tenant = %(t)s AND id = ANY(%(ids)s)), "
            "(SELECT dim FROM @stats WHERE tenant = %(t)s AND n_docs > 0), "
            "ARRAY(SELECT nextval('@chunk_seq') FROM generate_series(1, %(n)s)), "
            "(SELECT coalesce(max(seq), 0) FROM @changes WHERE tenant = %(t)s), "
            "(SELECT value FROM @meta WHERE tenant = %(t)s AND key = 'embedder')"),
            {"t": t, "ids": ids, "n": n}).fetchone())
        if existing:
            first = next(i for i in ids if i in set(existing))
            raise DuplicateIdError(f"a chunk with id {first!r} already exists")
        check_model([r for _, r in prepared], model)
        if store_dim is not None and store_dim != dim:
            raise DimensionMismatchError(f"vectors of dimension {dim} cannot go into a store of dimension {store_dim}")
        seqs = sorted(seqs)
        with conn.cursor() as cur:
            cur.executemany(q(
                "INSERT INTO @chunks (tenant, seq, id, user_id, agent_id, session_id, ts, status, ctype, intent, "
                "tags, entities, tier, doc, turn) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s)"),
                [(t, seq, *cols) for seq, (cols, _) in zip(seqs, prepared, strict=True)])
            cur.executemany(q("INSERT INTO @vectors (tenant, seq, dim, embedding) VALUES (%s, %s, %s, %s)"),
                            [(t, seq, dim, vec) for seq, vec in zip(seqs, vectors, strict=True)])
        self._set_access(conn, seqs, [r.chunk for _, r in prepared])
        terms = [(term, seq, tf) for seq, tc in zip(seqs, counts, strict=True) for term, tf in tc.items()]
        if terms:
            conn.execute(q("INSERT INTO @postings (tenant, term, chunk_seq, tf) SELECT %s, u.term, u.seq, u.tf "
                           "FROM unnest(%s::text[], %s::bigint[], %s::int[]) AS u(term, seq, tf)"),
                         (t, [x[0] for x in terms], [x[1] for x in terms], [x[2] for x in terms]))
        self._count(conn, n, dim)
        if before_log is not None:
            before_log(int(high))
        logged = self._log(conn, ids)
        self._notify(conn, event, [(cols[0], cols[1], cols[2], cols[8]) for cols, _ in prepared])
        if logged is None:
            return None
        return OwnInsert(int(high), logged, [(seq, cols[11], tc, vec) for seq, (cols, _), tc, vec
                                             in zip(seqs, prepared, counts, vectors, strict=True)])

    def _count(self, conn: psycopg.Connection, n: int, dim: int | None = None) -> None:
        """Move the tenant's record count by ``n`` (and set its vectors' dimension)."""
        conn.execute(self.db.q(
            "INSERT INTO @stats AS s (tenant, n_docs, dim) VALUES (%s, %s, %s) "
            "ON CONFLICT (tenant) DO UPDATE SET n_docs = s.n_docs + excluded.n_docs, dim = coalesce(excluded.dim, s.dim)"),
            (self.tenant, n, dim))

    def _set_access(self, conn: psycopg.Connection, seqs: Sequence[int], chunks: Sequence[KnowledgeChunk]) -> None:
        """The access counts of records as written (their side table holds the live ones)."""
        conn.execute(self.db.q(
            "INSERT INTO @access AS a (tenant, seq, n, last) SELECT %s, u.seq, u.n, u.last "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::timestamptz[]) AS u(seq, n, last) "
            "ON CONFLICT (tenant, seq) DO UPDATE SET n = excluded.n, last = excluded.last"),
            (self.tenant, list(seqs), [int(c.access_count) for c in chunks], [c.last_accessed for c in chunks]))

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        self.db.check()
        latest = {c.id: c for c in chunks}  # the last version of an id wins, as written in order
        prepared = {cid: (_checked(c, self.index_config.session_context), c) for cid, c in latest.items()}
        if not prepared:
            return
        with self.db.write() as conn:
            self._update(conn, prepared)

    def _update(self, conn: psycopg.Connection, prepared: dict[str, tuple[tuple[Any, ...], KnowledgeChunk]]) -> None:
        t, q = self.tenant, self.db.q
        old = {r[0]: r[1] for r in conn.execute(q("SELECT id, seq FROM @chunks WHERE tenant = %s AND id = ANY(%s)"),
                                                (t, list(prepared)))}
        missing = [i for i in prepared if i not in old]
        if missing:
            raise NotFoundError(f"no chunk with id {missing[0]!r}")
        with conn.cursor() as cur:
            cur.executemany(q(
                "UPDATE @chunks SET user_id = %s, agent_id = %s, session_id = %s, ts = %s, status = %s, ctype = %s, "
                "intent = %s, tags = %s, entities = %s, tier = %s, doc = %s::json, turn = %s "
                "WHERE tenant = %s AND id = %s"),
                [(*cols[1:], t, cid) for cid, (cols, _) in prepared.items()])
        self._set_access(conn, [old[cid] for cid in prepared], [c for _, c in prepared.values()])
        self._log(conn, list(prepared))
        self._notify(conn, EventType.UPDATED, [(c[0], c[1], c[2], c[8]) for c, _ in prepared.values()])

    def replace(self, rows: Sequence[ChunkRow], *, meta: Mapping[str, str] | None = None) -> None:
        self.db.check()
        rows = list(rows)
        if meta:
            _no_nul("meta", [v for kv in meta.items() for v in kv])
        if not rows and not meta:
            return
        prepared = self._prepare_rows(rows)
        with self.db.write() as conn:  # rows and meta (a re-embed's model name) in one transaction
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

    def modify(self, ids: Sequence[str] | None,
               change: Callable[[dict[str, KnowledgeChunk]], Sequence[KnowledgeChunk | ChunkRow]], *,
               meta: Mapping[str, str] | None = None) -> None:
        self.db.check()
        if meta:
            _no_nul("meta", [v for kv in meta.items() for v in kv])
        wanted = None if ids is None else list(dict.fromkeys(clean(ids)))
        if wanted is not None and not wanted and not meta:
            return
        with self.db.write() as conn:  # the tenant's write lock: nobody adds a record until it commits
            if wanted is None or wanted:  # (an empty list only writes ``meta``)
                current = self._locked_records(conn, wanted)
                chunks, rows = split_changes(change(current), current)
                if chunks:
                    self._update(conn, {c.id: (_checked(c, self.index_config.session_context), c) for c in chunks})
                if rows:
                    self._replace(conn, self._prepare_rows(rows))
            if meta:
                self._set_meta(conn, meta)

    def _locked_records(self, conn: psycopg.Connection, ids: list[str] | None) -> dict[str, KnowledgeChunk]:
        """The records of ``ids`` (None: every record of the tenant, without relationships),
        locked: FOR UPDATE of the record and its access row keeps them until this transaction
        ends, so a writer in any process (an access write-back too) waits and then reads what
        this transaction wrote."""
        which, args = ("", (self.tenant,)) if ids is None else (" AND c.id = ANY(%s)", (self.tenant, ids))
        return {r[0]: decode_record(r[0], r[1], r[2], r[3], None) for r in conn.execute(self.db.q(
            "SELECT c.id, c.doc::text, a.n, a.last FROM @chunks c JOIN @access a ON a.tenant = c.tenant "
            f"AND a.seq = c.seq WHERE c.tenant = %s{which} ORDER BY c.id FOR UPDATE OF c, a"), args)}

    def delete_if(self, ids: Sequence[str], still: Callable[[KnowledgeChunk], bool]) -> list[str]:
        self.db.check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return []
        with self.db.write() as conn:
            doomed = [cid for cid, c in self._locked_records(conn, ids).items() if still(c)]
            return self._delete(conn, doomed, EventType.DELETED) if doomed else []

    def record_access(self, accesses: Mapping[str, tuple[int, datetime]]) -> None:
        """One statement on the access side table, without the tenant write lock: the rows
        are locked in seq order (so two write-backs cannot deadlock) and a concurrent
        ``modify`` of the same record waits for it or it for the ``modify``."""
        self.db.check()
        ids = sorted(i for i in accesses if "\x00" not in i)
        if not ids:
            return
        with self.db.conn(write=True) as conn:
            conn.execute(self.db.q(
                "WITH u AS (SELECT * FROM unnest(%(ids)s::text[], %(n)s::bigint[], %(last)s::timestamptz[]) "
                "AS u(id, n, last)), "
                "locked AS (SELECT a.seq, u.n, u.last FROM u JOIN @chunks c ON c.tenant = %(t)s AND c.id = u.id "
                "JOIN @access a ON a.tenant = %(t)s AND a.seq = c.seq ORDER BY a.seq FOR UPDATE OF a) "
                "UPDATE @access a SET n = a.n + l.n, last = greatest(a.last, l.last) FROM locked l "
                "WHERE a.tenant = %(t)s AND a.seq = l.seq"),
                {"t": self.tenant, "ids": ids, "n": [int(accesses[i][0]) for i in ids],
                 "last": [to_datetime(accesses[i][1]) for i in ids]})

    def delete(self, ids: Sequence[str]) -> list[str]:
        self.db.check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return []
        with self.db.write() as conn:
            return self._delete(conn, ids, EventType.DELETED)

    def _delete(self, conn: psycopg.Connection, ids: Sequence[str], event: EventType | None) -> list[str]:
        """Delete records (their edges go by cascade); ``event=None`` announces nothing."""
        t, q = self.tenant, self.db.q
        gone = conn.execute(q(
            "DELETE FROM @chunks WHERE tenant = %s AND id = ANY(%s) RETURNING id, seq, user_id, agent_id, tags"),
            (t, list(ids))).fetchall()
        if not gone:
            return []
        seqs = [g[1] for g in gone]
        conn.execute(q("DELETE FROM @vectors WHERE tenant = %s AND seq = ANY(%s)"), (t, seqs))
        conn.execute(q("DELETE FROM @access WHERE tenant = %s AND seq = ANY(%s)"), (t, seqs))
        conn.execute(q("DELETE FROM @postings WHERE tenant = %s AND chunk_seq = ANY(%s)"), (t, seqs))
        self._count(conn, -len(gone))
        self._log(conn, [g[0] for g in gone])
        if event is not None:
            self._notify(conn, event, [(g[0], g[2], g[3], g[4]) for g in gone])
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
        self.local.trusted = False  # its next search catches this write up before it ranks
        logged = conn.execute(self.db.q(
            "WITH e AS (INSERT INTO @changes (tenant, id, op) SELECT %s, unnest(%s::text[]), %s RETURNING seq) "
            "SELECT max(seq) FROM e"), (self.tenant, list(ids), op))
        # By chance, not by this process's count: many short-lived processes (a CLI call, a
        # script) that each log a few entries must prune too, about once every
        # CHANGES_PRUNE_EVERY entries whoever writes them.
        if self._prune_draw.random() * CHANGES_PRUNE_EVERY < len(ids):
            conn.execute(self.db.q(
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
        self.db.check()
        ids = clean(ids)
        if not ids:
            return set()
        with self.db.conn() as conn:
            return {r[0] for r in conn.execute(self.db.q("SELECT id FROM @chunks WHERE tenant = %s AND id = ANY(%s)"),
                                               (self.tenant, ids))}

    def get(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        self.db.check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return {}
        with self.db.conn() as conn:
            rows = conn.execute(self.db.q(GET_SQL), {"t": self.tenant, "ids": ids}).fetchall()
        return {r[0]: decode_record(*r) for r in rows}

    def rank_fields(self, ids: Sequence[str]) -> dict[str, RankFields]:
        self.db.check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return {}
        with self.db.conn() as conn:
            rows = conn.execute(self.db.q(
                "SELECT id, doc->>'timestamp', doc->>'weight', doc->>'confidence', doc->>'pinned',"
                " doc->'metadata'->'stale', doc->>'reinforced_at', doc->>'expires_at'"
                " FROM @chunks WHERE tenant = %s AND id = ANY(%s)"), (self.tenant, ids)).fetchall()
        return {r[0]: rank_fields_of(*r[1:]) for r in rows}

    def scan(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
             descending: bool = False) -> Iterator[KnowledgeChunk]:
        return records_in_order(self.get, self.scan_ids(flt, order=order, limit=limit, descending=descending))

    def scan_ids(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                 descending: bool = False) -> list[str]:
        self.db.check()
        stmt, params = scan_sql(flt, order=order, limit=limit, descending=descending)
        with self.db.conn() as conn:
            return [r[0] for r in conn.execute(self.db.q(stmt), {"t": self.tenant, **params})]

    def count(self, flt: Filter | None = None) -> int:
        with self.db.conn() as conn:
            if flt is None:
                row = conn.execute(self.db.q("SELECT n_docs FROM @stats WHERE tenant = %s"), (self.tenant,)).fetchone()
                return 0 if row is None else int(row[0])
            where, args = filter_sql(flt)
            return int(one(conn.execute(self.db.q(f"SELECT count(*) FROM @chunks c WHERE c.tenant = %(t)s{where}"),
                                        {"t": self.tenant, **args}).fetchone())[0])

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        self.db.check()
        ids = clean(ids)
        if not ids:
            return set()
        where, args = filter_sql(flt)
        with self.db.conn() as conn:
            return {r[0] for r in conn.execute(self.db.q(
                f"SELECT c.id FROM @chunks c WHERE c.tenant = %(t)s AND c.id = ANY(%(ids)s){where}"),
                {"t": self.tenant, "ids": ids, **args})}

    def statuses(self) -> dict[str, int]:
        """Live record counts per status."""
        with self.db.conn() as conn:
            return {s: int(n) for s, n in conn.execute(self.db.q(
                "SELECT status, count(*) FROM @chunks WHERE tenant = %s GROUP BY status"), (self.tenant,))}

    @property
    def dim(self) -> int | None:
        with self.db.conn() as conn:
            row = conn.execute(self.db.q("SELECT dim FROM @stats WHERE tenant = %s"), (self.tenant,)).fetchone()
        return None if row is None else row[0]

    # -- retrieval: the local index ------------------------------------------------------
    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        return self.lexical_searches([terms], flt, k, include=include)[0]

    def lexical_searches(self, queries: Sequence[Mapping[str, int]], flt: Filter, k: int, *,
                         include: Sequence[str] = ()) -> list[list[tuple[str, float]]]:
        """``lexical_search`` of each of ``queries``, from one catch-up of the local index."""
        self.db.check()
        if not queries:
            return []
        return self.local.lexical_searches(queries, self._fields_as_ids(flt), k, include)

    def term_idf(self, terms: Sequence[str]) -> tuple[dict[str, float], float]:
        self.db.check()
        return self.local.term_idf(terms)

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False,
                      model: str | None = None) -> list[tuple[str, float]]:
        self.db.check()
        q = np.asarray(vector, np.float32)
        if k <= 0:
            return []
        if q.ndim != 1 or not len(q):
            raise DimensionMismatchError(f"the query vector has shape {q.shape}")
        return self.local.vector_search(q, self._fields_as_ids(flt), k, exact=exact, model=model)

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str], *, model: str | None = None) -> dict[str, float]:
        """Cosine of ``vector`` with each memory's context vector (own + weighted neighbours)."""
        self.db.check()
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return {}
        return self.local.vector_scores(np.asarray(vector, np.float32), ids, model=model)

    def retrieve(self, terms: Mapping[str, int], vector: np.ndarray, flt: Filter, k: int, *,
                 evidence: Sequence[str] = (), optimistic: bool = False, model: str | None = None) -> LocalCandidates:
        """A hybrid search's candidates from the local index: the lexical top ``k`` (as
        ``lexical_search``), the dense top ``k`` (as ``vector_search``), each scored both
        ways, with the fields ranking reads; the records are read from the database when
        asked for. ``evidence``: terms of ``terms`` whose calibrated-relevance evidence the
        records come with. ``optimistic``: rank before checking the change log
        (``LocalIndex.retrieve``). ``model``: the query's model, refused if the tenant's
        vectors are now another's (``base.check_query_model``), read with them: no round trip."""
        self.db.check()
        q = np.asarray(vector, np.float32)
        if q.ndim != 1 or not len(q):
            raise DimensionMismatchError(f"the query vector has shape {q.shape}")
        return self.local.retrieve(terms, q, self._fields_as_ids(flt), k, evidence, optimistic=optimistic, model=model)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        self.db.check()
        ids = clean(ids)
        if not ids:
            return {}
        with self.db.conn() as conn:
            return {cid: e.to_numpy().astype(np.float32) for cid, e in conn.execute(self.db.q(
                "SELECT c.id, v.embedding FROM @chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq "
                "WHERE c.tenant = %s AND c.id = ANY(%s)"), (self.tenant, ids), binary=True)}

    # -- relationships ----------------------------------------------------------------------
    def add_edges(self, edges: Sequence[Relationship]) -> None:
        self.db.check()
        if not edges:
            return
        with self.db.conn(write=True) as conn:
            self._add_edges(conn, list(edges))

    def _add_edges(self, conn: psycopg.Connection, edges: Sequence[Relationship]) -> None:
        """Insert or overwrite edges whose two ends exist (later duplicates win)."""
        latest = {(e.source_id, e.target_id, e.type.value): float(e.weight) for e in edges
                  if "\x00" not in e.source_id + e.target_id}
        if not latest:
            return
        keys = sorted(latest)
        conn.execute(
            self.db.q("INSERT INTO @edges (tenant, src, dst, type, weight) "
            "SELECT %(t)s, u.src, u.dst, u.type, u.w FROM unnest(%(src)s::text[], %(dst)s::text[], %(type)s::text[], "
            "%(w)s::float8[]) AS u(src, dst, type, w) "
            "WHERE EXISTS (SELECT 1 FROM @chunks c WHERE c.tenant = %(t)s AND c.id = u.src) "
            "AND EXISTS (SELECT 1 FROM @chunks c WHERE c.tenant = %(t)s AND c.id = u.dst) "
            "ON CONFLICT (tenant, src, dst, type) DO UPDATE SET weight = excluded.weight"),
            {"t": self.tenant, "src": [k[0] for k in keys], "dst": [k[1] for k in keys],
             "type": [k[2] for k in keys], "w": [latest[k] for k in keys]})

    def delete_edges(self, edges: Sequence[Relationship]) -> None:
        self.db.check()
        if not edges:
            return
        with self.db.conn(write=True) as conn:
            self._delete_edges(conn, edges)

    def _delete_edges(self, conn: psycopg.Connection, edges: Sequence[Relationship]) -> None:
        conn.execute(
            self.db.q("DELETE FROM @edges e USING unnest(%s::text[], %s::text[], %s::text[]) AS u(src, dst, type) "
            "WHERE e.tenant = %s AND e.src = u.src AND e.dst = u.dst AND e.type = u.type"),
            ([e.source_id for e in edges], [e.target_id for e in edges], [e.type.value for e in edges],
             self.tenant))

    def edges(self, ids: Sequence[str], *, types: Sequence[str] | None = None,
              direction: str = "both") -> list[Relationship]:
        self.db.check()
        if direction not in ("in", "out", "both"):
            raise InvalidInputError("direction must be 'in', 'out' or 'both'")
        ids = list(dict.fromkeys(clean(ids)))
        if not ids:
            return []
        with self.db.conn() as conn:
            return self._edges(conn, ids, types, direction)

    def _edges(self, conn: psycopg.Connection, ids: Sequence[str], types: Sequence[str] | None,
               direction: str) -> list[Relationship]:
        ends = {"out": "src = ANY(%(ids)s)", "in": "dst = ANY(%(ids)s)",
                "both": "(src = ANY(%(ids)s) OR dst = ANY(%(ids)s))"}[direction]
        type_sql = "" if types is None else " AND type = ANY(%(types)s::text[])"
        rows = conn.execute(
            self.db.q(f"SELECT src, dst, type, weight FROM @edges WHERE tenant = %(t)s AND {ends}{type_sql} ORDER BY src, dst, type"),
            {"t": self.tenant, "ids": list(ids),
             "types": None if types is None else [getattr(x, "value", x) for x in types]}).fetchall()
        return [Relationship(s, d, typ, w) for s, d, typ, w in rows]

    # -- auxiliary state -------------------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> None:
        _no_nul("namespace, key or user", [namespace, key, user_id])
        text = json.dumps(value, ensure_ascii=False)
        with self.db.conn(write=True) as conn:
            conn.execute(self.db.q("INSERT INTO @kv (tenant, ns, key, value, user_id) VALUES (%s, %s, %s, %s::json, %s) "
                         "ON CONFLICT (tenant, ns, key) DO UPDATE SET value = excluded.value, user_id = excluded.user_id"),
                         (self.tenant, namespace, key, text, user_id))

    def kv_get(self, namespace: str, key: str) -> dict[str, Any] | None:
        if "\x00" in namespace + key:
            self.db.check()
            return None
        with self.db.conn() as conn:
            row = conn.execute(self.db.q("SELECT value FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                               (self.tenant, namespace, key)).fetchone()
        return None if row is None else row[0]

    def kv_delete(self, namespace: str, key: str) -> bool:
        if "\x00" in namespace + key:
            self.db.check()
            return False
        with self.db.conn(write=True) as conn:
            cur = conn.execute(self.db.q("DELETE FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                               (self.tenant, namespace, key))
            return cur.rowcount > 0

    def kv_update(self, namespace: str, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                  *, user_id: str | None = None) -> dict[str, Any] | None:
        _no_nul("namespace, key or user", [namespace, key, user_id])
        with self.db.tx(write=True) as conn:
            # A lock on the key's name, not its row: it also serialises the first write of a key
            # that does not exist yet (FOR UPDATE would lock nothing). Held until COMMIT.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"beeweave.kv\x1f{self.tenant}\x1f{namespace}\x1f{key}",))
            row = conn.execute(self.db.q("SELECT value FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                               (self.tenant, namespace, key)).fetchone()
            new = change(None if row is None else row[0])
            if new is None:
                conn.execute(self.db.q("DELETE FROM @kv WHERE tenant = %s AND ns = %s AND key = %s"),
                             (self.tenant, namespace, key))
            else:
                conn.execute(self.db.q("INSERT INTO @kv (tenant, ns, key, value, user_id) VALUES (%s, %s, %s, %s::json, %s) "
                                     "ON CONFLICT (tenant, ns, key) DO UPDATE SET value = excluded.value, "
                                     "user_id = excluded.user_id"),
                             (self.tenant, namespace, key, json.dumps(new, ensure_ascii=False), user_id))
        return new

    def kv_scan(self, namespace: str, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        if "\x00" in namespace + prefix:
            self.db.check()
            return iter(())
        with self.db.conn() as conn:
            # starts_with, not LIKE: keys may hold % and _. "C" order is code-point order.
            rows = conn.execute(self.db.q("SELECT key, value FROM @kv WHERE tenant = %s AND ns = %s AND key >= %s "
                                "AND starts_with(key, %s) ORDER BY key"),
                                (self.tenant, namespace, prefix, prefix)).fetchall()
        return iter(rows)

    def log_append(self, stream: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> int:
        _no_nul("stream, key or user", [stream, key, user_id])
        text = json.dumps(value, ensure_ascii=False)
        with self.db.tx(write=True) as conn:
            # One writer per stream at a time, so sequence numbers are in commit order and a
            # reader polling with after=<last seq> never skips an entry committed late.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("beeweave-log", self.schema, self.tenant, stream),))
            return int(one(conn.execute(
                self.db.q("INSERT INTO @log (tenant, stream, key, value, user_id) VALUES (%s, %s, %s, %s::json, %s) RETURNING seq"),
                (self.tenant, stream, key, text, user_id)).fetchone())[0])

    def log_read(self, stream: str, key: str | None = None, *, after: int = 0,
                 limit: int | None = None, user_id: str | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        if "\x00" in stream + (key or "") + (user_id or ""):
            self.db.check()
            return []
        with self.db.conn() as conn:  # LIMIT NULL is no limit
            rows = conn.execute(
                self.db.q("SELECT seq, key, value FROM @log WHERE tenant = %(t)s AND stream = %(s)s AND seq > %(after)s "
                "AND (%(key)s::text IS NULL OR key = %(key)s) AND (%(u)s::text IS NULL OR user_id = %(u)s) "
                "ORDER BY seq LIMIT %(limit)s"),
                {"t": self.tenant, "s": stream, "after": after, "key": key, "u": user_id,
                 "limit": None if limit is None else int(limit)}).fetchall()
        return [(int(seq), k, v) for seq, k, v in rows]

    def log_delete(self, stream: str, keys: Sequence[str]) -> int:
        keys = [k for k in keys if "\x00" not in k]  # a key with NUL was never stored
        if not keys or "\x00" in stream:
            self.db.check()
            return 0
        with self.db.tx(write=True) as conn:
            # (A count read from the statement: rowcount is not known yet inside a pipeline.)
            return int(one(conn.execute(self.db.q(
                "WITH d AS (DELETE FROM @log WHERE tenant = %s AND stream = %s AND key = ANY(%s) RETURNING 1) "
                "SELECT count(*) FROM d"), (self.tenant, stream, keys)).fetchone())[0])

    def delete_user(self, user_id: str) -> int:
        self.db.check()
        if "\x00" in user_id:
            return 0
        with self.db.write() as conn:
            ids = [r[0] for r in conn.execute(self.db.q("SELECT id FROM @chunks WHERE tenant = %s AND user_id = %s"),
                                              (self.tenant, user_id))]
            gone = self._delete(conn, ids, EventType.DELETED) if ids else []
            conn.execute(self.db.q("DELETE FROM @kv WHERE tenant = %s AND user_id = %s"), (self.tenant, user_id))
            conn.execute(self.db.q("DELETE FROM @log WHERE tenant = %s AND user_id = %s"), (self.tenant, user_id))
            # The ingest queue's copies of their events (processed or not) hold their id and words too.
            conn.execute(self.db.q("DELETE FROM @ingest_events WHERE tenant = %s AND user_id = %s"),
                         (self.tenant, user_id))
            # Local indexes rebuild (nothing of the user may stay in their memory: terms, graph),
            # so the log need not name the user's records any more.
            conn.execute(self.db.q("DELETE FROM @changes WHERE tenant = %s AND id = ANY(%s)"), (self.tenant, gone))
            self._log(conn, [""], "f")
        return len(gone)

    def users(self) -> list[str]:
        with self.db.conn() as conn:
            rows = conn.execute(self.db.q(
                "SELECT user_id FROM @chunks WHERE tenant = %s UNION SELECT user_id FROM @kv WHERE tenant = %s "
                "AND user_id IS NOT NULL UNION SELECT user_id FROM @log WHERE tenant = %s AND user_id IS NOT NULL"),
                (self.tenant, self.tenant, self.tenant)).fetchall()
        return sorted(r[0] for r in rows)

    def drop_tenant(self) -> int:
        """Delete everything of this tenant (records, index, edges, kv, log, meta); return records deleted.
        The store stays open and empty, with its index configuration kept."""
        with self.db.write() as conn:
            n = one(conn.execute(self.db.q("SELECT coalesce(max(n_docs), 0) FROM @stats WHERE tenant = %s"),
                                 (self.tenant,)).fetchone())[0]
            for table in ("edges", "postings", "stats", "kv", "log", "vectors", "access", "chunks", "ingest_events",
                          "changes"):
                conn.execute(self.db.q(f"DELETE FROM @{table} WHERE tenant = %s"), (self.tenant,))
            conn.execute(self.db.q("DELETE FROM @meta WHERE tenant = %s AND key <> 'index_config'"), (self.tenant,))
            self._log(conn, [""], "f")
        return int(n)

    # -- integrity ---------------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check what is kept beside this tenant's records (verify.py) against them, in one snapshot."""
        with self.db.conn() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                found = pg_verify.problems(self.db, conn)
                records, edges = one(conn.execute(self.db.q(
                    "SELECT (SELECT count(*) FROM @chunks WHERE tenant = %(t)s), "
                    "(SELECT count(*) FROM @edges WHERE tenant = %(t)s)"), {"t": self.tenant}).fetchone())
            finally:
                conn.execute("ROLLBACK")
        return VerifyReport(records=int(records), edges=int(edges), problems=found, problem_count=len(found))

    def repair(self) -> VerifyReport:
        """Recompute what is kept beside the records and drop dangling relationships; local
        indexes rebuild; return a fresh check."""
        with self.db.write() as conn:
            pg_verify.rebuild(self.db, conn)
            self._log(conn, [""], "f")
        return self.verify()

    # -- the shared ingest queue -------------------------------------------------------------
    def ingest_queue(self, *, lease: float | None = None, poll_interval: float = 1.0) -> PostgresEventQueue:
        """This tenant's ingest queue in the database (``PostgresEventQueue``), which the
        ingest runtime uses instead of a SQLite queue table: a 202 is committed here, and the
        workers of every host serving the tenant drain it. A read_only store (a replica
        takes no events) declares no queue, and refuses to give one."""
        self.db.check()
        if self.read_only:
            raise StoreUnavailableError("a read_only PostgreSQL store takes no events: ingest through the primary")
        lease = lease if lease is not None else self.options.ingest_lease
        return PostgresEventQueue(self.db, lease=DEFAULT_LEASE if lease is None else lease, poll_interval=poll_interval)

    # -- events across processes ------------------------------------------------------------
    def listen(self, callback: Callable[[dict[str, Any]], Any], *, include_own: bool = False) -> RemoteListener:
        """Call ``callback(payload)`` from a background thread for every record change that
        another process (another store) commits on this tenant; ``close()`` the returned
        listener to stop. Payload keys: type, chunk_id, user_id, agent_id, tags, tenant, origin."""
        self.db.check()
        listener = RemoteListener(self.db.listen_url, self.channel, callback, origin=self.origin,
                                  include_own=include_own)
        self._listeners.append(listener)
        return listener

    # -- lifecycle ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Nothing to do: every write is committed when it returns."""
        self.db.check()

    def close(self) -> None:
        if self.db.closed:
            return
        for listener in self._listeners:
            listener.close()
        self.db.close()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, tenant={self.tenant!r}, schema_version={PG_SCHEMA_VERSION})"


assert PG_SCHEMA_VERSION == len(MIGRATIONS)
