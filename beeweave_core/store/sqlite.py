"""The embedded backend: SQLite (WAL) is the system of record; BM25 postings and
vectors are held in memory for speed and rebuilt from SQLite on open.

SQLite holds every record, its vector and its term counts, so nothing derived can
be lost: the in-memory indexes are caches of committed rows. The HNSW graph is
saved beside the database on ``flush``/``close`` to make reopening a large store
fast; a missing or stale graph file only costs a rebuild.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..index.bm25 import BM25Index, scores_at, top_k
from ..index.context import IndexConfig, SessionOrder
from ..errors import DuplicateIdError, SchemaVersionError, StoreClosedError, StoreUnavailableError
from ..filters import Filter
from ..records import KnowledgeChunk, Relationship, to_datetime
from ..scoring import RankFields
from ..index.vectors import VectorIndex, matvec
from .base import SCHEMA_VERSION, ChunkRow, VerifyReport, records_in_order, split_changes
from ..index.columns import AttributeColumns, Selection
from ..index.rank_columns import RankColumns
from .snapshot import load_snapshot, new_token, save_snapshot, snapshot_path

__all__ = ["SQLiteStore"]

# Named, ordered migrations. Each runs once, inside a transaction, and bumps
# meta.schema_version; never edit a published one, add the next.
MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", """
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE chunks (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            agent_id TEXT,
            session_id TEXT,
            ts REAL NOT NULL,
            status TEXT NOT NULL,
            ctype TEXT NOT NULL,
            intent TEXT,
            tags TEXT NOT NULL,
            entities TEXT NOT NULL,
            doc TEXT NOT NULL,
            lex BLOB NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX chunks_scope ON chunks (user_id, session_id, ts);
        CREATE TABLE terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
        CREATE TABLE edges (
            src TEXT NOT NULL, dst TEXT NOT NULL, type TEXT NOT NULL, weight REAL NOT NULL,
            PRIMARY KEY (src, dst, type)
        ) WITHOUT ROWID;
        CREATE INDEX edges_dst ON edges (dst, src);
        CREATE TABLE kv (
            ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, user_id TEXT,
            PRIMARY KEY (ns, key)
        ) WITHOUT ROWID;
        CREATE INDEX kv_user ON kv (user_id);
        CREATE TABLE log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, key TEXT NOT NULL,
            value TEXT NOT NULL, user_id TEXT
        );
        CREATE INDEX log_stream ON log (stream, key, seq);
        CREATE INDEX log_user ON log (user_id);
    """),
]
assert len(MIGRATIONS) == SCHEMA_VERSION


def _same_store(graph: Path, store_id: str) -> bool:
    id_path = Path(str(graph) + ".id")
    return id_path.exists() and id_path.read_text().strip() == store_id


# SQLite result codes (the primary code, the low byte) that mean the store cannot be
# written now, whatever the write was: busy or locked by another connection, I/O errors, a
# missing or unopenable file, a read-only file, a full disk, a WAL lock protocol failure.
_UNAVAILABLE_CODES = frozenset({5, 6, 8, 10, 13, 14, 15})
_UNAVAILABLE_WORDS = ("locked", "busy", "disk i/o", "unable to open", "readonly", "read-only", "disk is full")


def _unavailable(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return (code & 0xFF) in _UNAVAILABLE_CODES
    message = str(exc).lower()
    return any(w in message for w in _UNAVAILABLE_WORDS)


def _count_terms(terms: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in terms:
        counts[t] = counts.get(t, 0) + 1
    return counts


class SQLiteStore:
    """Embedded backend. ``path=None`` keeps everything in memory."""

    # (the _term_ids it was computed for, the first term id above every id in use): see _term_base
    _term_top: tuple[dict[str, int], int] | None = None

    def __init__(self, path: str | Path | None = None, *, index_config: IndexConfig | None = None,
                 timeout: float = 30.0) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.RLock()
        self._closed = False
        try:
            self._db = sqlite3.connect(
                ":memory:" if self.path is None else str(self.path), timeout=timeout,
                check_same_thread=False, isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL is durable across process crashes
            self._db.execute("PRAGMA foreign_keys=ON")
            # Deleted rows are overwritten with zeros: forgotten text does not linger in free pages.
            self._db.execute("PRAGMA secure_delete=ON")
            self._migrate()
        except BaseException as exc:
            if hasattr(self, "_db"):
                self._db.close()  # never leak the connection of a store that failed to open
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreUnavailableError(f"cannot open the store at {self.path}: {exc}") from exc
            raise
        try:
            self._init_indexes(index_config)
        except BaseException:
            self._db.close()
            raise

    _snapshot_token: str | None = None  # the snapshot the database's meta names, while it is valid
    _mask_cache: tuple[tuple[Any, ...], Selection] | None = None  # see _selection

    def _snapshot_gone(self) -> None:
        """After the first committed write since a snapshot: its token is gone, so is the file."""
        if self._snapshot_token is not None:
            self._snapshot_token = None
            if self.path is not None:
                try:  # the write is committed; a file that cannot go now is stale all the same
                    snapshot_path(self.path).unlink(missing_ok=True)
                except OSError:
                    pass

    def _init_indexes(self, index_config: IndexConfig | None) -> None:
        self.index_config = self._resolve_index_config(index_config)
        self._fresh_indexes()
        self._load()

    # -- schema ------------------------------------------------------------------
    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the store at {self.path} has schema {version}; this BeeWeave understands up to "
                f"{SCHEMA_VERSION}: upgrade beeweave"
            )
        for i, (name, sql) in enumerate(MIGRATIONS[version:], start=version + 1):
            with self._tx():
                for stmt in sql.split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(i),))
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('migration_' || ?, ?)", (f"{i:04d}", name))

    def _resolve_index_config(self, wanted: IndexConfig | None) -> IndexConfig:
        row = self._db.execute("SELECT value FROM meta WHERE key='index_config'").fetchone()
        if row is None:
            cfg = wanted or IndexConfig()
            with self._tx():
                self._db.execute("INSERT INTO meta VALUES ('index_config', ?)", (json.dumps(cfg.to_dict()),))
            return cfg
        cfg = IndexConfig.from_dict(json.loads(row[0]))
        if wanted is not None and wanted != cfg:
            from ..errors import InvalidInputError

            raise InvalidInputError(
                f"this store was indexed with {cfg}; open it without index= (BeeWeave) / index_config= "
                "(SQLiteStore): the stored configuration is used, or build a new store for another one")
        return cfg

    def _store_id(self) -> str:
        """A random id made when the database is created: ties side files to this database."""
        row = self._db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()
        if row is None:
            import uuid

            value = uuid.uuid4().hex
            with self._tx():
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', ?)", (value,))
            row = self._db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()
        return str(row[0])

    def _refresh_neighbours(self, slots: Any) -> None:
        for slot in set(slots):
            self._lex.set_neighbours(slot, self._order.neighbours(slot))

    def _tx(self) -> Any:
        """A write transaction. A store another process holds locked past ``timeout``, or one the
        disk cannot serve, raises :class:`StoreUnavailableError` and is left unchanged (rolled back);
        the in-memory indexes are only touched after a commit, so they stay as they were too."""
        store = self

        class _Tx:
            def __enter__(self) -> None:
                try:
                    store._db.execute("BEGIN IMMEDIATE")
                    if store._snapshot_token is not None:  # this write makes the snapshot stale
                        store._db.execute("DELETE FROM meta WHERE key='snapshot'")
                except sqlite3.OperationalError as exc:
                    if store._db.in_transaction:
                        store._db.execute("ROLLBACK")
                    store._raise_unavailable(exc, "could not start a write")
                    raise

            def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
                if exc_type is None:
                    try:
                        store._db.execute("COMMIT")
                        store._snapshot_gone()
                        return
                    except sqlite3.OperationalError as commit_exc:
                        exc = commit_exc
                if store._db.in_transaction:  # some errors (a full disk, I/O) already rolled it back
                    try:
                        store._db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # the error below says what went wrong
                if isinstance(exc, sqlite3.OperationalError):
                    store._raise_unavailable(exc, "a write failed")
                    if exc_type is None:
                        raise exc

        return _Tx()

    def _raise_unavailable(self, exc: sqlite3.OperationalError, what: str) -> None:
        """Raise StoreUnavailableError for an error that means the store cannot be written now."""
        if _unavailable(exc):
            raise StoreUnavailableError(f"the store at {self.path or ':memory:'} is unavailable ({what}): {exc}") \
                from exc

    def _check(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    # -- load --------------------------------------------------------------------
    def _graph_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.path.name + ".hnsw")

    def _load(self, *, snapshot: bool = True) -> None:
        """Rebuild the in-memory indexes from committed rows, column-wise (fast at 1M rows),
        or restore them from a snapshot the database still vouches for (see snapshot.py)."""
        if snapshot and self._load_snapshot():
            return
        self._term_ids = {t: i for i, t in self._db.execute("SELECT id, term FROM terms")}
        rows = self._db.execute(
            "SELECT seq, id, user_id, agent_id, session_id, ts, status, ctype, intent, tags, entities, lex, vector "
            "FROM chunks ORDER BY seq"
        ).fetchall()
        if not rows:
            return
        seqs, ids, users, agents, sessions, tss, statuses, ctypes, intents, tags, ents, lexes, vecs = zip(*rows)
        del rows
        dim = len(vecs[0]) // 4
        self._vec = VectorIndex(dim)
        # Keep the slot numbering of a saved HNSW graph so it can be reused as is.
        graph = self._graph_path()
        saved: np.ndarray | None = None
        if graph is not None and Path(str(graph) + ".keys.npy").exists():
            try:
                saved = np.load(str(graph) + ".keys.npy")
                if not _same_store(graph, self._store_id()):
                    saved = None  # a graph left by another database at this path
            except Exception:
                saved = None
        seq_arr = np.asarray(seqs, np.int64)
        if saved is None:
            slots = np.arange(len(seqs), dtype=np.int64)
            self._seqs = list(seqs)
        else:
            pos = {int(s): i for i, s in enumerate(saved.tolist())}
            extra = iter(range(len(saved), len(saved) + len(seqs)))
            slots = np.fromiter((pos[q] if q in pos else next(extra) for q in seqs), np.int64, len(seqs))
            self._seqs = saved.tolist() + [-1] * (int(slots.max()) + 1 - len(saved))
            for q, sl in zip(seqs, slots.tolist()):
                self._seqs[sl] = q
        n_slots = len(self._seqs)
        self._ids = [None] * n_slots
        for cid, sl in zip(ids, slots.tolist()):
            self._ids[sl] = cid
        self._slot_of = dict(zip(ids, slots.tolist()))
        # Vectors: one buffer, one reshape. Slots of deleted rows stay dead placeholders.
        mat = np.zeros((n_slots, dim), np.float32)
        mat[slots] = np.frombuffer(b"".join(vecs), np.float32).reshape(len(vecs), dim)
        del vecs
        self._vec.set(np.arange(n_slots), mat)
        for sl in np.setdiff1d(np.arange(n_slots), slots).tolist():
            self._vec.remove(sl)
        # Postings: (term, tf) pairs of every row, tagged with the row's slot.
        counts = np.fromiter((len(b) // 8 for b in lexes), np.int64, len(lexes))
        pairs = np.frombuffer(b"".join(lexes), np.int32).reshape(-1, 2)
        del lexes
        pair_slots = np.repeat(slots, counts).astype(np.int32)
        lens = np.bincount(np.repeat(np.arange(len(slots)), counts), weights=pairs[:, 1], minlength=len(slots))
        self._lex.add_bulk(pair_slots, pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.float32), slots,
                           lens.astype(np.int64))
        # Filter columns.
        self._cols.set_bulk(slots, users, agents, sessions, np.asarray(tss, np.float64), statuses, ctypes, intents,
                            tags, ents)
        # Session neighbourhoods, computed for all sessions at once.
        user_codes = self._cols.arrays["user"][slots].astype(np.int64)
        session_codes = self._cols.arrays["session"][slots].astype(np.int64)
        nb = self._order.add_bulk(slots, user_codes, session_codes, np.asarray(tss, np.float64), seq_arr)
        self._lex.set_neighbours_bulk(slots, nb)
        if graph is not None and saved is not None:
            self._vec.load_graph(graph, np.asarray(self._seqs, np.int64))
        elif graph is not None and graph.exists():
            graph.unlink()  # stale: never let it be mistaken for ours later

    def _load_snapshot(self) -> bool:
        if self.path is None:
            return False
        row = self._db.execute("SELECT value FROM meta WHERE key='snapshot'").fetchone()
        if row is None:
            return False
        graph = self._graph_path()
        if graph is not None and not _same_store(graph, self._store_id()):
            graph = None
        try:
            # VectorIndex is looked up at call time: tests swap in one with a small exact limit.
            ok = load_snapshot(self, snapshot_path(self.path), row[0], graph, lambda dim: VectorIndex(dim))
        except Exception:  # half restored: start again from the rows
            import logging

            logging.getLogger(__name__).warning("BeeWeave: could not restore the snapshot of %s; rebuilding "
                                                "the indexes from the records", self.path, exc_info=True)
            ok = False
        if not ok:
            self._fresh_indexes()
            return False
        self._snapshot_token = row[0]
        return True

    def _fresh_indexes(self) -> None:
        """Empty in-memory indexes (before a load, or to start a failed one again)."""
        self._mask_cache = None
        cfg = self.index_config
        self._term_ids: dict[str, int] = {}
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._seqs: list[int] = []
        self._lex = BM25Index(cfg.k1, cfg.b, cfg.epsilon, radius=cfg.context_radius,
                              context_weight=cfg.lexical_context_weight)
        self._order = SessionOrder(cfg.context_radius)
        self._vec: VectorIndex | None = None
        self._cols = AttributeColumns()
        self._rank = RankColumns()

    def _save_snapshot(self) -> None:
        """At close: write the snapshot, then name it in meta (a crash in between leaves it unnamed)."""
        if self.path is None or self._vec is None or self._snapshot_token is not None:
            return  # nothing to save, or the snapshot on disk is still the current one
        token = new_token()
        try:
            save_snapshot(self, snapshot_path(self.path), token)
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (token,))
            self._db.execute("COMMIT")
            self._snapshot_token = token
        except Exception:  # only the next open's speed is at stake
            import logging

            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            snapshot_path(self.path).unlink(missing_ok=True)
            logging.getLogger(__name__).warning("BeeWeave: could not save a snapshot of %s", self.path,
                                                exc_info=True)

    def _order_key(self, slot: int, session: str | None) -> tuple[int, int] | None:
        if session is None:
            return None
        return (int(self._cols.arrays["user"][slot]), int(self._cols.arrays["session"][slot]))

    # -- metadata ------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            self._check()
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._check()
            with self._tx():
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- writes --------------------------------------------------------------------
    def _term_rows(self, terms: Sequence[str], new_terms: dict[str, int]) -> dict[int, int]:
        counts: dict[int, int] = {}
        for t, c in _count_terms(terms).items():
            tid = self._term_ids.get(t)
            if tid is None:
                tid = new_terms.get(t)
                if tid is None:
                    tid = self._term_base() + len(new_terms)
                    new_terms[t] = tid
            counts[tid] = c
        return counts

    def _term_base(self) -> int:
        """The first term id above every id in use. Not len(_term_ids): forget deletes unused
        terms, so ids have holes and that number may belong to a live term. Computed once per
        _term_ids (rebuilt on open and repair), then advanced by insert."""
        top = self._term_top
        if top is None or top[0] is not self._term_ids:
            top = self._term_top = (self._term_ids, max(self._term_ids.values(), default=-1) + 1)
        return top[1]

    @staticmethod
    def _columns(c: KnowledgeChunk) -> tuple[Any, ...]:
        doc = c.to_dict()
        doc.pop("relationships")  # edges live in their own table
        pc = c.processed_content
        return (c.id, c.user_id, c.agent_id, c.session_id, c.timestamp.timestamp(), c.status.value,
                pc.type.value if pc else "text", c.intent.value if c.intent else None,
                json.dumps(c.tags, ensure_ascii=False), json.dumps(c.entities, ensure_ascii=False),
                json.dumps(doc, ensure_ascii=False))

    def insert(self, rows: Sequence[ChunkRow]) -> None:
        with self._lock:
            self._check()
            seen: set[str] = set()
            for r in rows:
                if r.chunk.id in self._slot_of or r.chunk.id in seen:
                    raise DuplicateIdError(f"a chunk with id {r.chunk.id!r} already exists")
                seen.add(r.chunk.id)
            if not rows:
                return
            dim = len(rows[0].vector)
            if self._vec is None or (self._vec.dim != dim and self._vec.n_alive == 0):
                # First rows, or every old vector was just replaced by a re-embed.
                self._vec = VectorIndex(dim)
                self._mask_cache = None
                self._vec.set(np.arange(len(self._ids)), np.zeros((len(self._ids), dim), np.float32))
                for s in range(len(self._ids)):
                    self._vec.remove(s)
            new_terms: dict[str, int] = {}
            term_counts = [self._term_rows(r.terms, new_terms) for r in rows]
            lex_blobs = [np.array(list(tc.items()), np.int32).reshape(-1, 2).tobytes() for tc in term_counts]
            with self._tx():
                if new_terms:
                    self._db.executemany("INSERT INTO terms (id, term) VALUES (?, ?)",
                                         [(i, t) for t, i in new_terms.items()])
                seqs = []
                for r, blob in zip(rows, lex_blobs):
                    cur = self._db.execute(
                        "INSERT INTO chunks (id, user_id, agent_id, session_id, ts, status, ctype, intent, tags, entities,"
                        " doc, lex, vector) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (*self._columns(r.chunk), blob, np.asarray(r.vector, np.float32).tobytes()),
                    )
                    seqs.append(cur.lastrowid)
            # Committed: now mirror into the in-memory indexes (cannot fail on bad input).
            if new_terms:
                self._term_top = (self._term_ids, self._term_base() + len(new_terms))
            self._term_ids.update(new_terms)
            first = len(self._ids)
            slots = np.arange(first, first + len(rows))
            self._vec.set(slots, np.stack([np.asarray(r.vector, np.float32) for r in rows]))
            self._vec.maybe_extend_graph()  # a full tail joins the graph now, not at some search
            touched: list[int] = []
            for slot, seq, r, tc in zip(slots.tolist(), seqs, rows, term_counts):
                c = r.chunk
                self._ids.append(c.id)
                self._seqs.append(seq)
                self._slot_of[c.id] = slot
                self._lex.add(slot, tc)
                self._cols.set(slot, c.user_id, c.agent_id, c.session_id, c.timestamp.timestamp(), c.status.value,
                               c.processed_content.type.value if c.processed_content else "text",
                               c.intent.value if c.intent else None, c.tags, c.entities)
                self._rank.set(slot, c)
                touched += self._order.add(slot, self._order_key(slot, c.session_id), c.timestamp.timestamp(), seq)
            self._refresh_neighbours(touched)

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        with self._lock:
            self._check()
            self._require([c.id for c in chunks])
            with self._tx():
                self._write_records(chunks)
            self._mirror_records(chunks)

    def _require(self, ids: Sequence[str]) -> None:
        missing = [i for i in ids if i not in self._slot_of]
        if missing:
            from ..errors import NotFoundError

            raise NotFoundError(f"no chunk with id {missing[0]!r}")

    def _write_records(self, chunks: Sequence[KnowledgeChunk]) -> None:
        """The UPDATE statements of ``update``, inside the caller's transaction."""
        for c in chunks:
            cols = self._columns(c)
            self._db.execute(
                "UPDATE chunks SET user_id=?, agent_id=?, session_id=?, ts=?, status=?, ctype=?, intent=?,"
                " tags=?, entities=?, doc=? WHERE id=?", (*cols[1:], c.id))

    def _mirror_records(self, chunks: Sequence[KnowledgeChunk]) -> None:
        """Committed: mirror rewritten records into the in-memory columns and session order."""
        touched: list[int] = []
        cols = self._cols
        for c in chunks:
            slot = self._slot_of[c.id]
            before = (cols.arrays["user"][slot], cols.arrays["session"][slot], cols.ts[slot])
            cols.set(slot, c.user_id, c.agent_id, c.session_id, c.timestamp.timestamp(),
                     c.status.value, c.processed_content.type.value if c.processed_content else "text",
                     c.intent.value if c.intent else None, c.tags, c.entities)
            self._rank.set(slot, c)
            if before == (cols.arrays["user"][slot], cols.arrays["session"][slot], cols.ts[slot]):
                continue  # same place in the same session (e.g. counts or tags changed): no neighbour moved
            touched.append(slot)  # its own neighbours change too (e.g. it left its session)
            touched += self._order.remove(slot)
            touched += self._order.add(slot, self._order_key(slot, c.session_id), c.timestamp.timestamp(),
                                       self._seqs[slot])
        self._refresh_neighbours(touched)

    def replace(self, rows: Sequence[ChunkRow]) -> None:
        # A changed text means new postings and a new vector: delete and re-insert
        # under the same id, keeping edges, in one transaction.
        with self._lock:
            self._check()
            ids = [r.chunk.id for r in rows]
            edges = self.edges(ids)
            self._delete(ids, keep_edges=True)
            self.insert(rows)
            self.add_edges(edges)

    def modify(self, ids: Sequence[str],
               change: Callable[[dict[str, KnowledgeChunk]], Sequence[KnowledgeChunk | ChunkRow]]) -> None:
        with self._lock:  # no other thread of this store writes between the read and the write
            self._check()
            if not ids:
                return
            wanted = [i for i in dict.fromkeys(ids) if i in self._slot_of]
            with self._tx():  # BEGIN IMMEDIATE: nor does another connection to the file
                current = self._chunks_from_rows(self._record_rows(wanted), edges=False)
                chunks, rows = split_changes(change(current), current)
                self._write_records(chunks)
            self._mirror_records(chunks)
            if rows:  # new text: postings and vector change too (still under this store's lock)
                self.replace(rows)

    def record_access(self, accesses: Mapping[str, tuple[int, datetime]]) -> None:
        # Search hits are counted in batches of hundreds: rewriting two fields in SQL costs a
        # fraction of decoding, changing and re-encoding every record (as modify would) and
        # nothing in memory (filter and rank columns) depends on them.
        with self._lock:
            self._check()
            seqs = {self._seqs[slot]: (n, to_datetime(last)) for cid, (n, last) in accesses.items()
                    if (slot := self._slot_of.get(cid)) is not None}
            if not seqs:
                return
            with self._tx():
                updates = []
                for seq, was in self._select_by_seq("seq, json_extract(doc, '$.last_accessed')", list(seqs)):
                    n, last = seqs[seq]
                    updates.append((n, (last if was is None else max(to_datetime(was), last)).isoformat(), seq))
                self._db.executemany(
                    "UPDATE chunks SET doc = json_set(doc, '$.access_count', json_extract(doc, '$.access_count') + ?,"
                    " '$.last_accessed', ?) WHERE seq = ?", updates)

    def delete(self, ids: Sequence[str]) -> list[str]:
        with self._lock:
            self._check()
            return self._delete(ids, keep_edges=False)

    def _delete(self, ids: Sequence[str], *, keep_edges: bool) -> list[str]:
        present = [i for i in dict.fromkeys(ids) if i in self._slot_of]
        if not present:
            return []
        lex = {}
        for i in range(0, len(present), 500):
            part = present[i : i + 500]
            lex.update(self._db.execute(
                f"SELECT id, lex FROM chunks WHERE id IN ({','.join('?' * len(part))})", part).fetchall())
        with self._tx():
            self._db.executemany("DELETE FROM chunks WHERE id=?", [(i,) for i in present])
            if not keep_edges:
                self._db.executemany("DELETE FROM edges WHERE src=? OR dst=?", [(i, i) for i in present])
        touched: list[int] = []
        for cid in present:
            slot = self._slot_of.pop(cid)
            self._ids[slot] = None
            pairs = np.frombuffer(lex[cid], np.int32).reshape(-1, 2)
            self._lex.remove(slot, dict(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist())))
            assert self._vec is not None
            self._vec.remove(slot)
            self._cols.clear(slot)
            self._rank.clear(slot)
            touched += self._order.remove(slot)
        self._refresh_neighbours(s for s in touched if self._ids[s] is not None)
        return present

    # -- reads ---------------------------------------------------------------------
    def contains(self, ids: Sequence[str]) -> set[str]:
        with self._lock:
            self._check()
            return {i for i in ids if i in self._slot_of}

    def _chunks_from_rows(self, rows: Sequence[tuple[str, str]], *, edges: bool = True) -> dict[str, KnowledgeChunk]:
        out = {cid: KnowledgeChunk.from_stored(json.loads(doc)) for cid, doc in rows}
        if out and edges:
            for e in self.edges(list(out), direction="out"):
                out[e.source_id].relationships.append(e)
        return out

    def get(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        with self._lock:
            self._check()
            wanted = [i for i in dict.fromkeys(ids) if i in self._slot_of]
            return self._chunks_from_rows(self._record_rows(wanted))

    def rank_fields(self, ids: Sequence[str]) -> dict[str, RankFields]:
        with self._lock:
            self._check()
            slots = {i: s for i in dict.fromkeys(ids) if (s := self._slot_of.get(i)) is not None}
            unknown = self._rank.unknown(list(slots.values()))
            if unknown:  # not written since the indexes were rebuilt from the rows: read once
                names = list(slots)
                for c in self._chunks_from_rows(self._record_rows([names[j] for j in unknown]), edges=False).values():
                    self._rank.set(self._slot_of[c.id], c)
            return dict(zip(slots, self._rank.fields(list(slots.values()))))

    def _record_rows(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(id, doc) of stored ids, looked up by row number: one b-tree walk per row instead of
        two (the id index, then the table), which matters once the file is gigabytes."""
        return self._select_by_seq("id, doc", [self._seqs[self._slot_of[i]] for i in ids if i in self._slot_of])

    def _select_by_seq(self, columns: str, seqs: Sequence[int]) -> list[tuple[Any, ...]]:
        """``SELECT columns FROM chunks`` of the rows numbered ``seqs``, 500 parameters a statement."""
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(seqs), 500):
            part = seqs[i : i + 500]
            rows += self._db.execute(
                f"SELECT {columns} FROM chunks WHERE seq IN ({','.join('?' * len(part))})", part).fetchall()
        return rows

    def scan(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
             descending: bool = False) -> Iterator[KnowledgeChunk]:
        return records_in_order(self.get, self.scan_ids(flt, order=order, limit=limit, descending=descending))

    def scan_ids(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                 descending: bool = False) -> list[str]:
        with self._lock:
            self._check()
            mask = self._mask(flt)
            slots = np.flatnonzero(mask)
            if order == "timestamp":
                keys = self._cols.ts[slots]
                slots = slots[np.lexsort((slots, keys))]
            if descending:
                slots = slots[::-1]
            if limit is not None:
                slots = slots[: max(limit, 0)]
            return [self._ids[s] for s in slots.tolist()]  # type: ignore[misc]

    def count(self, flt: Filter | None = None) -> int:
        with self._lock:
            self._check()
            if flt is None:
                return len(self._slot_of)
            return int(self._mask(flt).sum())

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        with self._lock:
            self._check()
            mask = self._mask(flt)
            return {i for i in ids if i in self._slot_of and mask[self._slot_of[i]]}

    def _mask(self, flt: Filter) -> np.ndarray:
        """The filter's boolean mask over slots (read-only)."""
        return self._selection(flt).mask()

    def _selection(self, flt: Filter) -> Selection:
        """What the filter allows (see Selection). A search asks twice (dense and lexical
        side), so the last one is kept until a slot lives, dies or changes its attributes."""
        alive = self._alive()
        if self._vec is None:
            return Selection(None, self._cols.mask(flt, alive, self._slot_of), len(alive))
        key = (flt, self._vec._n, self._vec.n_alive, self._cols.version)
        cached = self._mask_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        few = self._cols.slots(flt, alive, self._slot_of)
        sel = Selection(few, None if few is not None else self._cols.mask(flt, alive, self._slot_of), len(alive))
        self._mask_cache = (key, sel)
        return sel

    def _scope(self, flt: Filter) -> np.ndarray | None:
        """The user/session part of the filter as a BM25 pre-filter, None when it holds
        every live memory (pre-filtering would then only cost time)."""
        scope = self._cols.scope_mask(flt, self._alive())
        if scope is not None and int(np.count_nonzero(scope)) == self._lex.n_docs:
            return None
        return scope

    def _alive(self) -> np.ndarray:
        return self._vec.alive_mask() if self._vec is not None else np.zeros(0, bool)

    # -- retrieval -----------------------------------------------------------------
    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        with self._lock:
            self._check()
            qt = {self._term_ids[t]: c for t, c in terms.items() if t in self._term_ids}
            if not self._slot_of:
                return []
            sel = self._selection(flt)
            # The other retriever's candidates, to be scored too (0 without any query term).
            found = np.fromiter((s for cid in include if (s := self._slot_of.get(cid)) is not None), np.int64)
            extra = np.unique(found[sel.allows(found)])
            if not qt:
                top_slots, top_scores, extra_scores = np.zeros(0, np.int64), np.zeros(0), np.zeros(len(extra))
            elif sel.slots is not None:  # a few users
                if self._lex.prefers_documents(qt, len(sel.slots)):
                    slots, scores = self._lex.score_documents(qt, sel.slots)  # no pass over every slot
                else:  # their postings are few: nothing to prune
                    slots, scores = self._lex.score(qt, sel.mask(), sel.scope(lambda: self._scope(flt)))
                top_slots, top_scores = top_k(slots, scores, k)
                extra_scores = scores_at(slots, scores, extra)
            else:
                top_slots, top_scores, extra_scores = self._lex.search(
                    qt, k, sel.mask(), sel.scope(lambda: self._scope(flt)), extra)
            out = {self._ids[s]: float(sc) for s, sc in zip(top_slots.tolist(), top_scores.tolist())}
            for s, sc in zip(extra.tolist(), extra_scores.tolist()):
                out.setdefault(self._ids[s], float(sc))  # type: ignore[arg-type]
            return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))  # type: ignore[arg-type]

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False) -> list[tuple[str, float]]:
        with self._lock:
            self._check()
            if self._vec is None or not self._slot_of:
                return []
            sel, query = self._selection(flt), np.asarray(vector, np.float32)
            if sel.slots is not None and (exact or len(sel.slots) <= self._vec.exact_limit):
                slots, scores = self._vec.search_slots(query, k, sel.slots)
            else:
                slots, scores = self._vec.search(query, k, sel.mask(), exact=exact)
            return [(self._ids[s], float(sc)) for s, sc in zip(slots.tolist(), scores.tolist())]  # type: ignore[misc]

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``vector`` with each memory's context vector (own + weighted neighbours)."""
        with self._lock:
            self._check()
            slots = np.array([self._slot_of[i] for i in ids if i in self._slot_of], np.int64)
            if self._vec is None or not len(slots):
                return {}
            mat = self._vec.vectors(slots).astype(np.float64)
            w = self.index_config.vector_context_weight
            if w and self.index_config.context_radius:
                nb = self._lex.neighbours(slots)
                valid = nb >= 0
                nvec = self._vec.vectors(np.where(valid, nb, 0).ravel()).reshape(*nb.shape, -1)
                mat = mat + w * np.einsum("ijk,ij->ik", nvec, valid.astype(nvec.dtype))
                mat /= np.maximum(np.sqrt(np.einsum("ij,ij->i", mat, mat))[:, None], 1e-12)
            scores = matvec(mat, np.asarray(vector, np.float64))
            return {self._ids[s]: float(x) for s, x in zip(slots.tolist(), scores.tolist())}  # type: ignore[misc]

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            self._check()
            assert self._vec is not None or not ids
            return {i: self._vec.get(self._slot_of[i]) for i in ids if i in self._slot_of}  # type: ignore[union-attr]

    @property
    def dim(self) -> int | None:
        return None if self._vec is None else self._vec.dim

    # -- relationships ---------------------------------------------------------------
    def add_edges(self, edges: Sequence[Relationship]) -> None:
        with self._lock:
            self._check()
            if not edges:
                return
            with self._tx():
                self._db.executemany(
                    "INSERT OR REPLACE INTO edges (src, dst, type, weight) VALUES (?,?,?,?)",
                    [(e.source_id, e.target_id, e.type.value, float(e.weight)) for e in edges
                     if e.source_id in self._slot_of and e.target_id in self._slot_of])

    def delete_edges(self, edges: Sequence[Relationship]) -> None:
        with self._lock:
            self._check()
            with self._tx():
                self._db.executemany("DELETE FROM edges WHERE src=? AND dst=? AND type=?",
                                     [(e.source_id, e.target_id, e.type.value) for e in edges])

    def edges(self, ids: Sequence[str], *, types: Sequence[str] | None = None,
              direction: str = "both") -> list[Relationship]:
        with self._lock:
            self._check()
            if direction not in ("in", "out", "both"):
                from ..errors import InvalidInputError

                raise InvalidInputError("direction must be 'in', 'out' or 'both'")
            ids = list(dict.fromkeys(ids))
            type_sql, type_args = "", []
            if types is not None:
                tv = [getattr(t, "value", t) for t in types]
                type_sql, type_args = f" AND type IN ({','.join('?' * len(tv))})", tv
            out: dict[tuple[str, str, str], Relationship] = {}
            for i in range(0, len(ids), 400):
                part = ids[i : i + 400]
                marks = ",".join("?" * len(part))
                cols = [("src", "out"), ("dst", "in")]
                for col, d in cols:
                    if direction in (d, "both"):
                        for src, dst, typ, w in self._db.execute(
                                f"SELECT src, dst, type, weight FROM edges WHERE {col} IN ({marks}){type_sql}",
                                [*part, *type_args]):
                            out[(src, dst, typ)] = Relationship(src, dst, typ, w)
            return [out[key] for key in sorted(out)]  # deterministic, whatever SQLite's plan

    # -- auxiliary state ------------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> None:
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._check()
            with self._tx():
                self._db.execute("INSERT OR REPLACE INTO kv VALUES (?,?,?,?)", (namespace, key, text, user_id))

    def kv_get(self, namespace: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            self._check()
            row = self._db.execute("SELECT value FROM kv WHERE ns=? AND key=?", (namespace, key)).fetchone()
        return None if row is None else json.loads(row[0])

    def kv_delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            self._check()
            with self._tx():
                cur = self._db.execute("DELETE FROM kv WHERE ns=? AND key=?", (namespace, key))
            return cur.rowcount > 0

    def kv_scan(self, namespace: str, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        with self._lock:
            self._check()
            # substr() instead of LIKE: keys may hold % and _ .
            rows = self._db.execute(
                "SELECT key, value FROM kv WHERE ns=? AND substr(key, 1, ?)=? ORDER BY key",
                (namespace, len(prefix), prefix)).fetchall()
        for key, value in rows:
            yield key, json.loads(value)

    def log_append(self, stream: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> int:
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._check()
            with self._tx():
                cur = self._db.execute("INSERT INTO log (stream, key, value, user_id) VALUES (?,?,?,?)",
                                       (stream, key, text, user_id))
            return int(cur.lastrowid)  # type: ignore[arg-type]

    def log_read(self, stream: str, key: str | None = None, *, after: int = 0,
                 limit: int | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        sql = "SELECT seq, key, value FROM log WHERE stream=? AND seq>?"
        args: list[Any] = [stream, after]
        if key is not None:
            sql += " AND key=?"
            args.append(key)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._lock:
            self._check()
            rows = self._db.execute(sql, args).fetchall()
        return [(seq, k, json.loads(v)) for seq, k, v in rows]

    def delete_user(self, user_id: str) -> int:
        """Forget a user: their records, relationships, kv and log rows, and every trace of them
        in the files: words no one else uses leave the terms table, deleted rows are zeroed
        (secure_delete) and the WAL is emptied into the file, and the HNSW graph, which keeps
        deleted points, is dropped (and rebuilt without them when a search needs it)."""
        with self._lock:
            self._check()
            ids = [r[0] for r in self._db.execute("SELECT id FROM chunks WHERE user_id=?", (user_id,))]
            if ids:
                self._drop_graph_files()  # first: a crash after the delete must not leave a graph holding them
            gone = self._delete(ids, keep_edges=False) if ids else []
            unused = self._unused_terms()
            with self._tx():
                self._db.execute("DELETE FROM kv WHERE user_id=?", (user_id,))
                self._db.execute("DELETE FROM log WHERE user_id=?", (user_id,))
                self._db.executemany("DELETE FROM terms WHERE id=?", [(tid,) for tid in unused.values()])
            for term in unused:
                del self._term_ids[term]  # their ids are never handed out again by this store (_term_base)
            if gone and self._vec is not None:
                self._vec.drop_graph()
            self._empty_wal()
            return len(gone)

    def _unused_terms(self) -> dict[str, int]:
        """Terms no live record holds (document frequency 0)."""
        df = self._lex._df
        return {t: i for t, i in self._term_ids.items() if i >= len(df) or df[i] <= 0}

    def _drop_graph_files(self) -> None:
        graph = self._graph_path()
        for side in ([] if graph is None else [graph, Path(str(graph) + ".keys.npy")]):
            side.unlink(missing_ok=True)

    def _empty_wal(self) -> None:
        """Copy the WAL into the database file and truncate it, so deleted content is nowhere."""
        if self.path is None:
            return
        try:
            busy = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy, detail = 1, str(exc)
        else:
            detail = "another connection is reading"
        if busy:
            import logging

            logging.getLogger(__name__).warning(
                "BeeWeave: could not empty the WAL of %s after forgetting a user (%s); the deleted rows stay "
                "in it until the next checkpoint", self.path, detail)

    # -- integrity -------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check the in-memory indexes and the relationships against the committed records."""
        with self._lock:
            self._check()
            problems: list[str] = []
            rows = self._db.execute("SELECT id, lex, vector FROM chunks").fetchall()
            ids = {cid for cid, _, _ in rows}
            if ids != set(self._slot_of):
                problems.append(f"index ids differ from records: {len(ids - set(self._slot_of))} missing, "
                                f"{len(set(self._slot_of) - ids)} extra")
            known_terms = set(self._term_ids.values())
            df: dict[int, int] = {}
            for cid, lex, vec in rows:
                slot = self._slot_of.get(cid)
                if slot is None:
                    continue
                pairs = np.frombuffer(lex, np.int32).reshape(-1, 2)
                for tid, tf in pairs.tolist():
                    df[tid] = df.get(tid, 0) + 1
                    if tid not in known_terms:
                        problems.append(f"{cid}: term id {tid} missing from the terms table")
                    p = self._lex._postings[tid] if tid < len(self._lex._postings) else None
                    i = -1 if p is None else int(np.searchsorted(p.slots[: p.n], slot))
                    if p is None or i >= p.n or p.slots[i] != slot or p.tfs[i] != tf:
                        problems.append(f"{cid}: posting for term {tid} missing or wrong")
                if self._vec is None or not np.array_equal(self._vec.get(slot), np.frombuffer(vec, np.float32)):
                    problems.append(f"{cid}: vector differs from the record")
            live_df = {t: int(c) for t, c in enumerate(self._lex._df[: len(self._lex._postings)].tolist()) if c}
            if live_df != df:
                problems.append("document frequencies differ from the records")
            if self._lex.n_docs != len(rows) or (self._vec is not None and self._vec.n_alive != len(rows)):
                problems.append("live document counts differ from the records")
            dangling = self._db.execute(
                "SELECT count(*) FROM edges WHERE src NOT IN (SELECT id FROM chunks) OR dst NOT IN (SELECT id FROM chunks)"
            ).fetchone()[0]
            if dangling:
                problems.append(f"{dangling} relationships point at missing records")
            return VerifyReport(records=len(rows), edges=self._db.execute("SELECT count(*) FROM edges").fetchone()[0],
                                problems=problems[:100], problem_count=len(problems))

    def repair(self) -> VerifyReport:
        """Rebuild every index from the records and drop dangling relationships; return the new check."""
        with self._lock:
            self._check()
            with self._tx():
                self._db.execute("DELETE FROM edges WHERE src NOT IN (SELECT id FROM chunks) "
                                 "OR dst NOT IN (SELECT id FROM chunks)")
            graph = self._graph_path()
            for side in ([] if graph is None else [graph, Path(str(graph) + ".keys.npy")]):
                if side.exists():
                    side.unlink()
            self._fresh_indexes()
            self._load(snapshot=False)
            return self.verify()

    # -- lifecycle -------------------------------------------------------------------
    def flush(self) -> None:
        with self._lock:
            self._check()
            graph = self._graph_path()
            if graph is not None and self._vec is not None and self._vec.has_graph:
                Path(str(graph) + ".id").write_text(self._store_id())
                self._vec.save_graph(graph, np.asarray(self._seqs, np.int64))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
                self._save_snapshot()
            finally:
                self._closed = True
                self._db.close()

    def statuses(self) -> dict[str, int]:
        """Live record counts per status (cheap; used by stats)."""
        with self._lock:
            self._check()
            return self._cols.status_counts(self._alive())
