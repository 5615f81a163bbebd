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
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DuplicateIdError, InvalidInputError, SchemaVersionError, StoreClosedError, StoreUnavailableError
from ..fields import FIELD_NAME
from ..filters import Filter
from ..index.catch_up import ChangedRow, apply_changes
from ..index.context import IndexConfig
from ..index.memory_index import IndexEntry, MemoryIndex, lex_counts
from ..index.turns import lends_context
from ..index.vectors import VectorIndex
from ..records import KnowledgeChunk, Relationship, to_datetime
from ..scoring import RankFields
from .base import (
    SCHEMA_VERSION,
    Capabilities,
    ChunkRow,
    VerifyReport,
    check_model,
    check_query_model,
    model_name,
    records_in_order,
    split_changes,
)
from .files import file_id
from .links import Derive, LinkReads, insert_then_link
from .snapshot import load_snapshot, new_token, save_snapshot, snapshot_path
from .wal import empty_wal, use_wal

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
    # Several processes on one file (see "Several processes" in the class docstring): term ids
    # handed out by the database and never reused, and a change log each process reads to
    # bring its in-memory index up to date with the others' commits.
    ("0002_shared_writers", """
        CREATE TABLE terms_v2 (id INTEGER PRIMARY KEY AUTOINCREMENT, term TEXT NOT NULL UNIQUE);
        INSERT INTO terms_v2 (id, term) SELECT id, term FROM terms;
        DROP TABLE terms;
        ALTER TABLE terms_v2 RENAME TO terms;
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, op TEXT NOT NULL, lex BLOB
        );
    """),
    # Memory tiers (working / short / long, docs/lifecycle.md): a filter column like status.
    # Rows written before tiers existed were long-term memories.
    ("0003_tiers", """
        ALTER TABLE chunks ADD COLUMN tier TEXT NOT NULL DEFAULT 'long';
    """),
    # Whether a record takes part in session context (index/turns.py), decided when it is
    # written. Rows written before had context whenever they had a session.
    ("0004_turns", """
        ALTER TABLE chunks ADD COLUMN turn INTEGER NOT NULL DEFAULT 1;
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


class _Mirror:
    """What one write transaction did, told to the in-memory index once it committed."""

    __slots__ = ("new_terms", "removed", "updated", "added")

    def __init__(self) -> None:
        self.new_terms: dict[str, int] = {}
        self.removed: dict[str, dict[int, int]] = {}  # id -> the term counts it was indexed with
        self.updated: list[KnowledgeChunk] = []
        self.added: list[IndexEntry] = []

    def apply(self, index: MemoryIndex) -> None:
        index.remove(self.removed)
        index.update([c for c in self.updated if c.id in index])
        index.add_terms(self.new_terms)
        index.add(self.added)


class SQLiteStore:
    """Embedded backend. ``path=None`` keeps everything in memory.

    The rows, transactions and migrations are here; everything held in memory to answer
    searches is the :class:`MemoryIndex` (``self.index``), told about each committed write.

    Several processes: any number of processes (and stores in one process) may open one file
    and read and write it. Every transaction that writes records also appends to the
    ``changes`` table (row id, and for a deletion the term counts it had). Before each call a
    store asks SQLite whether another connection committed (``PRAGMA data_version``, a few
    microseconds) and, if so, reads the changes it has not seen and patches its index; a write
    does the same inside its own ``BEGIN IMMEDIATE``, so it always starts from the current
    state. Term ids are handed out by the database (an AUTOINCREMENT counter, never reused)
    inside that transaction. ``delete_user`` logs a ``forget``: every other process reloads its
    term map and drops its HNSW graph. The snapshot is written at close under the write lock
    after catching up, and every write transaction deletes its token, so a snapshot never
    holds less (or more) than the database had when it was named.
    """

    # How many change-log entries are kept; a process further behind rebuilds its index.
    CHANGE_LOG_KEEP = 100_000

    _ready = False  # the index exists: transactions catch up with other processes' commits
    _seen = 0  # the last change-log entry this store's index reflects
    _data_version = -1  # PRAGMA data_version when the index was last brought up to date
    _next_prune = 0  # prune the change log when _seen reaches this
    _snapshot_token: str | None = None  # the snapshot the database's meta names, while it is valid
    # The model the store recorded (meta ``embedder``, its name) as of the vectors the index
    # holds: read where they come in (a load, a catch-up applying others' rows, in the same
    # read transaction) and set by this store's own writes of it. A search's query vector
    # names its model and is refused for another (``check_query_model``): no read per search.
    _model: str | None = None

    def __init__(self, path: str | Path | None = None, *, index_config: IndexConfig | None = None,
                 timeout: float = 30.0) -> None:
        self.path = None if path is None else Path(path)
        self.capabilities = Capabilities(file=self.path, durable=self.path is not None)
        self._lock = threading.RLock()
        self._closed = False
        try:
            self._db = sqlite3.connect(
                ":memory:" if self.path is None else str(self.path), timeout=timeout,
                check_same_thread=False, isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            )
            use_wal(self._db, timeout)
            # Which file this store holds open: a file deleted (or replaced) under an open store
            # would take every later write with it when the store closes (see _check_file).
            self._file_id = None if self.path is None else file_id(self.path)
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
            self.index_config = self._resolve_index_config(index_config)
            # VectorIndex is looked up at call time: tests swap in one with other limits.
            self._store_id_value = self._store_id()
            self.index = MemoryIndex(self.index_config, lambda dim: VectorIndex(dim))
            self._load()
            self._ready = True
        except BaseException:
            self._db.close()
            raise

    def _check_file(self) -> None:
        """The store's file is still the one opened. SQLite keeps writing to a deleted file's
        inode, so without this every write after ``rm store.db`` would be acknowledged and then
        lost when the store closes (and a reopen would start a new, empty store)."""
        if self._file_id is not None and file_id(self.path) != self._file_id:  # type: ignore[arg-type]
            raise StoreUnavailableError(f"the store file {self.path} was deleted or replaced while open: nothing "
                                        "more is written to it; close this store and open the file again")

    def _snapshot_gone(self) -> None:
        """After the first committed write since a snapshot: its token is gone, so is the file."""
        if self._snapshot_token is not None:
            self._snapshot_token = None
            if self.path is not None:
                try:  # the write is committed; a file that cannot go now is stale all the same
                    snapshot_path(self.path).unlink(missing_ok=True)
                except OSError:
                    pass

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
                now = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if now is not None and int(now[0]) >= i:
                    continue  # another process opening the file at the same time applied it
                for stmt in sql.split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(i),))
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('migration_' || ?, ?)", (f"{i:04d}", name))

    def _resolve_index_config(self, wanted: IndexConfig | None) -> IndexConfig:
        row = self._db.execute("SELECT value FROM meta WHERE key='index_config'").fetchone()
        if row is None:
            with self._tx():  # OR IGNORE: another process creating the file at the same time may be first
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('index_config', ?)",
                                 (json.dumps((wanted or IndexConfig()).to_dict()),))
            row = self._db.execute("SELECT value FROM meta WHERE key='index_config'").fetchone()
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

    def _tx(self) -> Any:
        """A write transaction. A store another process holds locked past ``timeout``, or one the
        disk cannot serve, raises :class:`StoreUnavailableError` and is left unchanged (rolled back);
        the in-memory index is only touched after a commit, so it stays as it was too."""
        store = self

        class _Tx:
            def __enter__(self) -> None:
                try:
                    store._db.execute("BEGIN IMMEDIATE")
                    # Whoever wrote it, this write makes the snapshot stale.
                    store._snapshot_named = store._db.execute("DELETE FROM meta WHERE key='snapshot'").rowcount > 0
                    if store._ready:
                        store._catch_up()  # start from every commit before this one
                except sqlite3.Error as exc:
                    store._rollback()
                    store._raise_unavailable(exc, "could not start a write")
                    raise
                except BaseException:
                    store._rollback()
                    raise

            def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
                if exc_type is None:
                    try:
                        store._db.execute("COMMIT")
                        store._committed()
                        return
                    except sqlite3.Error as commit_exc:
                        exc = commit_exc
                store._rollback()
                store._logged = None
                if isinstance(exc, sqlite3.Error):
                    store._raise_unavailable(exc, "a write failed")
                    if exc_type is None:
                        raise exc

        return _Tx()

    _store_id_value = ""
    _snapshot_named = False  # the running transaction deleted a snapshot's token
    _logged: int | None = None  # the last change-log entry the running transaction wrote

    def _rollback(self) -> None:
        if self._db.in_transaction:  # some errors (a full disk, I/O) already rolled it back
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the error being raised says what went wrong

    def _committed(self) -> None:
        if self._logged is not None:  # this store wrote the last entries: it holds the write lock
            self._seen, self._logged = self._logged, None
            if self._seen >= self._next_prune:
                self._next_prune = self._seen + self.CHANGE_LOG_KEEP // 10
                self._prune_changes()
        if self._snapshot_named or self._snapshot_token is not None:
            self._snapshot_named = False
            self._snapshot_gone()

    def _raise_unavailable(self, exc: sqlite3.Error, what: str) -> None:
        """Raise StoreUnavailableError for an error that means the store cannot be written now."""
        if _unavailable(exc):
            raise StoreUnavailableError(f"the store at {self.path or ':memory:'} is unavailable ({what}): {exc}") \
                from exc

    def _check(self) -> None:
        """Every call starts here: the store is open and its index has every commit made so far."""
        if self._closed:
            raise StoreClosedError("the store is closed")
        self._check_file()
        if self.path is not None and not self._db.in_transaction:  # (in one: caught up at its BEGIN)
            try:
                version = self._db.execute("PRAGMA data_version").fetchone()[0]
                if version != self._data_version:
                    self._db.execute("BEGIN")  # one consistent view of the changes and their rows
                    try:
                        self._catch_up()
                    finally:
                        self._db.execute("COMMIT")
                    self._data_version = version
            except sqlite3.Error as exc:
                raise self._catch_up_failed(exc) from exc

    def _catch_up_failed(self, exc: sqlite3.Error) -> StoreUnavailableError:
        """The error to raise when reading others' changes failed (rolled back here)."""
        self._rollback()
        return StoreUnavailableError(f"the store at {self.path} is unavailable (reading others' changes): {exc}")

    # -- other processes' commits ---------------------------------------------------
    def _log(self, ids: Sequence[str], op: str) -> None:
        """Record written (op 'w') record ids in the change log, inside the caller's transaction."""
        if ids:
            self._db.executemany("INSERT INTO changes (id, op) VALUES (?, ?)", [(i, op) for i in ids])
            self._logged = int(self._db.execute("SELECT last_insert_rowid()").fetchone()[0])

    def _catch_up(self) -> None:
        """Apply the change-log entries after ``_seen`` to the index (inside a transaction)."""
        floor = self._db.execute("SELECT value FROM meta WHERE key='changes_floor'").fetchone()
        entries = self._db.execute("SELECT seq, id, op, lex FROM changes WHERE seq > ? ORDER BY seq",
                                   (self._seen,)).fetchall()
        if floor is not None and self._seen < int(floor[0]):  # the entries this store needs were pruned
            self._load(snapshot=False)
            return
        if not entries:
            return
        # The vectors about to come in were written under this model (a re-embed's switch sets
        # it in the transaction that rewrites every vector): one primary-key read, only when
        # others' rows come in. A change of the model alone (an empty store's switch) brings
        # no vector, so nothing to compare a query with until rows come in, read with them.
        self._model = self._recorded_model()
        if any(op == "forget" for _, _, op, _ in entries):
            # A user was forgotten: their rows, terms and log entries are gone, so rebuild from
            # the rows (no graph or snapshot holding their vectors survives this either).
            self._drop_graph_files()
            self._load(snapshot=False)
            return
        index = self.index
        high = max(index.term_ids.values(), default=-1)
        index.add_terms({t: i for i, t in self._db.execute("SELECT id, term FROM terms WHERE id > ?", (high,))})
        held_lex: dict[str, dict[int, int]] = {}  # the term counts of the version this index holds
        changed: list[str] = []
        for _, cid, op, lex in entries:
            if op == "d" and cid not in held_lex and lex is not None:
                held_lex[cid] = lex_counts(lex)
            changed.append(cid)
        changed = list(dict.fromkeys(changed))
        current: dict[str, ChangedRow] = {}
        for i in range(0, len(changed), 500):
            part = changed[i : i + 500]
            for cid, seq, lex, vector, doc in self._db.execute(
                    f"SELECT id, seq, lex, vector, doc FROM chunks WHERE id IN ({','.join('?' * len(part))})", part):
                current[cid] = ChangedRow(int(seq), doc, partial(_entry_of, doc, vector, lex, int(seq)))
        applied = apply_changes(index, changed, current, held_lex.get)
        if applied is None:  # cannot happen: a row leaves only by a logged deletion
            self._load(snapshot=False)
            return
        # Only now: an error reading the rows above (rolled back) leaves these entries to
        # the next catch-up instead of skipping them for good.
        self._seen = int(entries[-1][0])
        if applied:
            self._snapshot_token = None  # the index is no longer the snapshot it was loaded from

    def _prune_changes(self) -> None:
        """Keep the last CHANGE_LOG_KEEP entries (a process further behind rebuilds its index)."""
        floor = self._seen - self.CHANGE_LOG_KEEP
        if floor <= 0:
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM changes WHERE seq <= ?", (floor,))
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('changes_floor', ?)", (str(floor),))
            self._db.execute("COMMIT")
        except sqlite3.Error:  # only the log's size is at stake: next time
            self._rollback()

    # -- load --------------------------------------------------------------------
    def _graph_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.path.name + ".hnsw")

    def _saved_graph_keys(self, graph: Path | None) -> np.ndarray | None:
        """The slot numbering of the HNSW graph saved for this database, if there is one."""
        if graph is None or not Path(str(graph) + ".keys.npy").exists():
            return None
        try:
            saved = np.load(str(graph) + ".keys.npy")
            return saved if _same_store(graph, self._store_id_value) else None  # else: another database's
        except Exception:
            return None

    def _load(self, *, snapshot: bool = True) -> None:
        """Rebuild the in-memory index from committed rows, column-wise (fast at 1M rows),
        or restore it from a snapshot the database still vouches for (see snapshot.py):
        in one read transaction, so the change log position matches what was read."""
        if self._db.in_transaction:
            self._load_in_tx(snapshot)
            return
        self._data_version = self._db.execute("PRAGMA data_version").fetchone()[0]
        self._db.execute("BEGIN")
        try:
            self._load_in_tx(snapshot)
        finally:
            self._db.execute("COMMIT")

    def _load_in_tx(self, snapshot: bool) -> None:
        self._seen = int(self._db.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0])
        self._model = self._recorded_model()
        if snapshot and self._load_snapshot():
            return
        index = self.index
        index.clear()
        index.add_terms({t: i for i, t in self._db.execute("SELECT id, term FROM terms")})
        rows = self._db.execute(
            "SELECT seq, id, user_id, agent_id, session_id, ts, status, ctype, intent, tags, entities, lex, vector, "
            "tier, turn FROM chunks ORDER BY seq"
        ).fetchall()
        if not rows:
            return
        columns = list(zip(*rows, strict=False))
        del rows
        graph = self._graph_path()
        saved = self._saved_graph_keys(graph)
        index.load(*columns, graph=graph, saved=saved)
        del columns
        if graph is not None and saved is None and graph.exists():
            graph.unlink()  # stale: never let it be mistaken for ours later

    def _load_snapshot(self) -> bool:
        if self.path is None:
            return False
        row = self._db.execute("SELECT value FROM meta WHERE key='snapshot'").fetchone()
        if row is None:
            return False
        graph = self._graph_path()
        if graph is not None and not _same_store(graph, self._store_id_value):
            graph = None
        try:
            ok = load_snapshot(self.index, snapshot_path(self.path), row[0], graph, self._rows_and_last_seq())
        except Exception:  # half restored: start again from the rows
            import logging

            logging.getLogger(__name__).warning("BeeWeave: could not restore the snapshot of %s; rebuilding "
                                                "the indexes from the records", self.path, exc_info=True)
            ok = False
        if not ok:
            self.index.clear()
            return False
        self._snapshot_token = row[0]
        return True

    def _rows_and_last_seq(self) -> tuple[int, int]:
        n, last = self._db.execute("SELECT count(*), coalesce(max(seq), 0) FROM chunks").fetchone()
        return int(n), int(last)

    def _recorded_model(self) -> str | None:
        return model_name(self._recorded_embedder())

    def _recorded_embedder(self) -> str | None:
        """The meta ``embedder`` as this connection's transaction sees it."""
        row = self._db.execute("SELECT value FROM meta WHERE key='embedder'").fetchone()
        return None if row is None else row[0]

    def _wrote_meta(self, meta: Mapping[str, str] | None) -> None:
        """After this store committed ``meta``: its own writes do not move ``data_version``."""
        if meta and "embedder" in meta:
            self._model = model_name(meta["embedder"])

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
            self._wrote_meta({key: value})

    def index_field(self, name: str) -> None:
        if not FIELD_NAME.match(name):  # it becomes part of a statement
            raise InvalidInputError(f"field name {name!r} must be an identifier")
        with self._lock:
            self._check()
            with self._tx():
                self._db.execute(f"CREATE INDEX IF NOT EXISTS chunks_field_{name} ON chunks "
                                 f"(json_extract(doc, '$.metadata.{name}'))")

    def _resolved(self, flt: Filter) -> Filter:
        """The filter with its declared-field conditions turned into the ids that meet them
        (read from the rows, where metadata lives; the in-memory columns do not hold it)."""
        if not flt.fields:
            return flt
        where, args = [], []
        for name, _kind, values in flt.fields:
            if not FIELD_NAME.match(name):
                raise InvalidInputError(f"field name {name!r} must be an identifier")
            path = f"'$.metadata.{name}'"
            ors = []
            for v in values:
                if isinstance(v, bool):  # JSON true/false read as 1/0: tell them by their JSON type
                    ors.append(f"json_type(doc, {path}) = ?")
                    args.append("true" if v else "false")
                elif isinstance(v, str):
                    ors.append(f"(json_type(doc, {path}) = 'text' AND json_extract(doc, {path}) = ?)")
                    args.append(v)
                else:
                    ors.append(f"(json_type(doc, {path}) IN ('integer', 'real') AND json_extract(doc, {path}) = ?)")
                    args.append(v)
            where.append("(" + " OR ".join(ors) + ")")
        ids = {r[0] for r in self._db.execute(f"SELECT id FROM chunks WHERE {' AND '.join(where)}", args)}
        return flt.replace(fields=None, ids=frozenset(ids if flt.ids is None else ids & flt.ids))

    # -- writes --------------------------------------------------------------------
    # Each public write is one transaction: inside it the statements (``_put_rows``,
    # ``_drop_rows``, ``_write_records``) and their change-log entries; after the commit the
    # in-memory index is told (``_Mirror.apply``), which cannot fail on bad input.
    def _term_counts(self, rows: Sequence[ChunkRow]) -> tuple[list[dict[int, int]], dict[str, int]]:
        """Each row's term counts by term id, inside the write transaction: a term the database
        does not hold yet gets the next id of its AUTOINCREMENT counter (this store caught up
        at BEGIN, so its term map is the table's)."""
        known = self.index.term_ids
        words = [_count_terms(r.terms) for r in rows]
        fresh = list(dict.fromkeys(t for w in words for t in w if t not in known))
        new_terms: dict[str, int] = {}
        if fresh:
            top = self._db.execute("SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name='terms'").fetchone()[0]
            top = max(int(top), max(known.values(), default=0))
            new_terms = {t: top + 1 + i for i, t in enumerate(fresh)}
            before = self._db.total_changes
            self._db.executemany("INSERT OR IGNORE INTO terms (id, term) VALUES (?, ?)",
                                 [(i, t) for t, i in new_terms.items()])
            if self._db.total_changes - before != len(fresh):  # not caught up after all: the table decides
                for i in range(0, len(fresh), 500):
                    part = fresh[i : i + 500]
                    new_terms.update(self._db.execute(
                        f"SELECT term, id FROM terms WHERE term IN ({','.join('?' * len(part))})", part))
        ids = known if not new_terms else {**known, **new_terms}
        return [{ids[t]: c for t, c in w.items()} for w in words], new_terms

    def _columns(self, c: KnowledgeChunk) -> tuple[Any, ...]:
        doc = c.to_dict()
        doc.pop("relationships")  # edges live in their own table
        pc = c.processed_content
        return (c.id, c.user_id, c.agent_id, c.session_id, c.timestamp.timestamp(), c.status.value,
                pc.type.value if pc else "text", c.intent.value if c.intent else None,
                json.dumps(c.tags, ensure_ascii=False), json.dumps(c.entities, ensure_ascii=False),
                c.tier.value, json.dumps(doc, ensure_ascii=False),
                int(lends_context(c, self.index.config.session_context)))

    def _require_new(self, rows: Sequence[ChunkRow]) -> None:
        seen: set[str] = set()
        for r in rows:
            if r.chunk.id in self.index or r.chunk.id in seen:
                raise DuplicateIdError(f"a chunk with id {r.chunk.id!r} already exists")
            seen.add(r.chunk.id)

    def insert(self, rows: Sequence[ChunkRow]) -> None:
        with self._lock:
            self._check()
            self._require_new(rows)  # before any statement: bad input never starts a write
            if not rows:
                return
            mirror = _Mirror()
            with self._tx():
                self._require_new(rows)  # again: another process may have added one meanwhile
                self._put_rows(rows, mirror)
            mirror.apply(self.index)

    def insert_linked(self, rows: Sequence[ChunkRow], reads: LinkReads, derive: Derive) -> bool:
        # The index learns of rows only after their commit, so the reads follow it; the
        # lock keeps this store's other threads from writing in between.
        with self._lock:
            return insert_then_link(self, rows, reads, derive)

    def _put_rows(self, rows: Sequence[ChunkRow], mirror: _Mirror) -> None:
        """The INSERT statements of ``insert``, inside the caller's transaction."""
        if any(r.model is not None for r in rows):
            # Under BEGIN IMMEDIATE: a re-embed's switch (one transaction setting this) is
            # either committed, and seen here, or waits for this write and re-reads its rows.
            check_model(rows, self._recorded_embedder())
        dims = {len(r.vector) for r in rows}
        vec = self.index.vec
        staying = 0 if vec is None else vec.n_alive - sum(cid in self.index for cid in mirror.removed)
        if len(dims) > 1 or (staying and dims != {vec.dim}):  # type: ignore[union-attr]
            # E.g. another process re-embedded the store meanwhile: refused, nothing written.
            from ..errors import DimensionMismatchError

            raise DimensionMismatchError(f"vectors of dimension {sorted(dims)} for a store whose vectors have "
                                         f"{None if vec is None else vec.dim}")
        term_counts, mirror.new_terms = self._term_counts(rows)
        for r, tc in zip(rows, term_counts, strict=True):
            cur = self._db.execute(
                "INSERT INTO chunks (id, user_id, agent_id, session_id, ts, status, ctype, intent, tags, entities,"
                " tier, doc, turn, lex, vector) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (*self._columns(r.chunk), np.array(list(tc.items()), np.int32).reshape(-1, 2).tobytes(),
                 np.asarray(r.vector, np.float32).tobytes()),
            )
            mirror.added.append(IndexEntry(r.chunk, r.vector, tc, int(cur.lastrowid)))  # type: ignore[arg-type]
        self._log([r.chunk.id for r in rows], "w")

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        with self._lock:
            self._check()
            self._require([c.id for c in chunks])
            mirror = _Mirror()
            with self._tx():
                self._require([c.id for c in chunks])  # deleted meanwhile by another process?
                self._write_records(chunks, mirror)
            mirror.apply(self.index)

    def _require(self, ids: Sequence[str]) -> None:
        missing = [i for i in ids if i not in self.index]
        if missing:
            from ..errors import NotFoundError

            raise NotFoundError(f"no chunk with id {missing[0]!r}")

    def _write_records(self, chunks: Sequence[KnowledgeChunk], mirror: _Mirror) -> None:
        """The UPDATE statements of ``update``, inside the caller's transaction."""
        for c in chunks:
            cols = self._columns(c)
            self._db.execute(
                "UPDATE chunks SET user_id=?, agent_id=?, session_id=?, ts=?, status=?, ctype=?, intent=?,"
                " tags=?, entities=?, tier=?, doc=?, turn=? WHERE id=?", (*cols[1:], c.id))
        self._log([c.id for c in chunks], "w")
        mirror.updated += chunks

    def replace(self, rows: Sequence[ChunkRow], *, meta: Mapping[str, str] | None = None) -> None:
        """A changed text means new postings and a new vector: delete and re-insert under the
        same ids, keeping their edges, and write ``meta`` (e.g. the embedder a re-embed moved
        to), all in one transaction: a crash or a full disk leaves all of it or none."""
        with self._lock:
            self._check()
            mirror = _Mirror()
            with self._tx():
                self._replace_rows(rows, mirror)
                for key, value in (meta or {}).items():
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
            mirror.apply(self.index)
            self._wrote_meta(meta)

    def _replace_rows(self, rows: Sequence[ChunkRow], mirror: _Mirror) -> None:
        self._drop_rows(self.index.present([r.chunk.id for r in rows]), mirror, keep_edges=True)
        if rows:
            self._put_rows(rows, mirror)

    def modify(self, ids: Sequence[str] | None,
               change: Callable[[dict[str, KnowledgeChunk]], Sequence[KnowledgeChunk | ChunkRow]], *,
               meta: Mapping[str, str] | None = None) -> None:
        with self._lock:  # no other thread of this store writes between the read and the write
            self._check()
            if ids is not None and not ids and not meta:
                return
            mirror = _Mirror()
            with self._tx():  # BEGIN IMMEDIATE: nor does another connection to the file
                if ids is None:  # every record, read after catching up: another process's latest adds too
                    found = self._db.execute("SELECT id, doc FROM chunks ORDER BY seq").fetchall()
                else:
                    found = self._record_rows(self.index.present(ids))
                current = self._chunks_from_rows(found, edges=False)
                if ids is None or ids:  # (an empty list only writes ``meta``)
                    chunks, rows = split_changes(change(current), current)
                    self._write_records(chunks, mirror)
                    if rows:  # new text: postings and vector change too, in the same transaction
                        self._replace_rows(rows, mirror)
                for key, value in (meta or {}).items():
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
            mirror.apply(self.index)
            self._wrote_meta(meta)

    def record_access(self, accesses: Mapping[str, tuple[int, datetime]]) -> None:
        # Search hits are counted in batches of hundreds: rewriting two fields in SQL costs a
        # fraction of decoding, changing and re-encoding every record (as modify would) and
        # nothing in memory (filter and rank columns) depends on them, so nothing is logged.
        with self._lock:
            self._check()
            if not any(cid in self.index for cid in accesses):
                return
            with self._tx():
                seqs = {seq: (n, to_datetime(last)) for cid, (n, last) in accesses.items()
                        if (seq := self.index.seq_of(cid)) is not None}
                updates = []
                for seq, was in self._select_by_seq("seq, json_extract(doc, '$.last_accessed')", list(seqs)):
                    n, last = seqs[seq]
                    updates.append((n, (last if was is None else max(to_datetime(was), last)).isoformat(), seq))
                self._db.executemany(
                    "UPDATE chunks SET doc = json_set(doc, '$.access_count', json_extract(doc, '$.access_count') + ?,"
                    " '$.last_accessed', ?) WHERE seq = ?", updates)

    def delete(self, ids: Sequence[str]) -> list[str]:
        return self.delete_if(ids, None)

    def delete_if(self, ids: Sequence[str], still: Callable[[KnowledgeChunk], bool] | None) -> list[str]:
        """Delete the records of ``ids`` that ``still`` judges doomed (None: every one, unread)."""
        with self._lock:
            self._check()
            if not self.index.present(ids):
                return []
            mirror = _Mirror()
            with self._tx():  # BEGIN IMMEDIATE: the records judged are those deleted
                doomed = self.index.present(ids)
                if still is not None:
                    current = self._chunks_from_rows(self._record_rows(doomed), edges=False)
                    doomed = [cid for cid, c in current.items() if still(c)]
                self._drop_rows(doomed, mirror, keep_edges=False)
            mirror.apply(self.index)
            return doomed

    def _drop_rows(self, ids: Sequence[str], mirror: _Mirror, *, keep_edges: bool) -> None:
        """The DELETE statements of ``delete``, inside the caller's transaction. Each deletion is
        logged with the term counts the row had: other processes un-index it with them."""
        if not ids:
            return
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            for cid, lex in self._db.execute(f"SELECT id, lex FROM chunks WHERE id IN ({marks})", part):
                mirror.removed[cid] = lex_counts(lex)
            self._db.execute(f"INSERT INTO changes (id, op, lex) SELECT id, 'd', lex FROM chunks WHERE id IN ({marks})",
                             part)
            self._db.execute(f"DELETE FROM chunks WHERE id IN ({marks})", part)
            if not keep_edges:
                self._db.execute(f"DELETE FROM edges WHERE src IN ({marks}) OR dst IN ({marks})", [*part, *part])
        self._logged = int(self._db.execute("SELECT last_insert_rowid()").fetchone()[0])

    # -- reads ---------------------------------------------------------------------
    def contains(self, ids: Sequence[str]) -> set[str]:
        with self._lock:
            self._check()
            return self.index.contains(ids)

    def _chunks_from_rows(self, rows: Sequence[tuple[str, str]], *, edges: bool = True) -> dict[str, KnowledgeChunk]:
        out = {cid: KnowledgeChunk.from_stored(json.loads(doc)) for cid, doc in rows}
        if out and edges:
            for e in self.edges(list(out), direction="out"):
                out[e.source_id].relationships.append(e)
        return out

    def get(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        with self._lock, self._reading():
            return self._chunks_from_rows(self._record_rows(self.index.present(ids)))

    def rank_fields(self, ids: Sequence[str]) -> dict[str, RankFields]:
        with self._lock, self._reading():
            return self.index.rank_fields(
                ids, lambda names: self._chunks_from_rows(self._record_rows(names), edges=False).values())

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """``_check`` for reads that look rows up by the row numbers the index holds: the
        catch-up and those reads in one read transaction. Apart, another process's rewrite
        committed in between gives the row a new number, and the read would silently miss a
        memory that is there. Whether to catch up is the change log's last entry as this
        snapshot sees it (``data_version``, read before the snapshot, can miss a commit)."""
        if self.path is None or self._closed or self._db.in_transaction:
            self._check()  # nothing to hold open (or already in one: caught up at its BEGIN)
            yield
            return
        try:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            self._db.execute("BEGIN")
            if self._db.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0] > self._seen:
                self._catch_up()
            self._data_version = version  # as _check would: every commit up to it is in the index
        except sqlite3.Error as exc:
            raise self._catch_up_failed(exc) from exc
        except BaseException:
            self._rollback()
            raise
        try:
            yield
        finally:
            self._rollback()  # a read transaction: nothing to keep

    def _record_rows(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(id, doc) of stored ids, looked up by row number: one b-tree walk per row instead of
        two (the id index, then the table), which matters once the file is gigabytes."""
        seq_of = self.index.seq_of
        return self._select_by_seq("id, doc", [q for i in ids if (q := seq_of(i)) is not None])

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
            return self.index.scan_ids(self._resolved(flt), order=order, limit=limit, descending=descending)

    def count(self, flt: Filter | None = None) -> int:
        with self._lock:
            self._check()
            return self.index.count(None if flt is None else self._resolved(flt))

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        with self._lock:
            self._check()
            return self.index.matching(ids, self._resolved(flt))

    # -- retrieval -----------------------------------------------------------------
    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        with self._lock:
            self._check()
            return self.index.lexical_search(terms, self._resolved(flt), k, include=include)

    def term_idf(self, terms: Sequence[str]) -> tuple[dict[str, float], float]:
        with self._lock:
            self._check()
            return self.index.term_idf(terms)

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False,
                      model: str | None = None) -> list[tuple[str, float]]:
        with self._lock:
            self._check()  # caught up: ``_model`` is that of the vectors searched
            check_query_model(model, self._model)
            return self.index.vector_search(vector, self._resolved(flt), k, exact=exact)

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str], *, model: str | None = None) -> dict[str, float]:
        """Cosine of ``vector`` with each memory's context vector (own + weighted neighbours)."""
        with self._lock:
            self._check()
            check_query_model(model, self._model)
            return self.index.vector_scores(vector, ids)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            self._check()
            return self.index.get_vectors(ids)

    @property
    def dim(self) -> int | None:
        return self.index.dim

    @property
    def snapshot_token(self) -> str | None:
        """The token of the snapshot the index was loaded from, while it still matches the
        database (None once a write made it stale, or when the index was built from rows)."""
        return self._snapshot_token

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
                     if e.source_id in self.index and e.target_id in self.index])

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

    def kv_update(self, namespace: str, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                  *, user_id: str | None = None) -> dict[str, Any] | None:
        with self._lock:
            self._check()
            with self._tx():  # BEGIN IMMEDIATE: no other process writes between the read and the write
                row = self._db.execute("SELECT value FROM kv WHERE ns=? AND key=?", (namespace, key)).fetchone()
                new = change(None if row is None else json.loads(row[0]))
                if new is None:
                    self._db.execute("DELETE FROM kv WHERE ns=? AND key=?", (namespace, key))
                else:
                    self._db.execute("INSERT OR REPLACE INTO kv VALUES (?,?,?,?)",
                                     (namespace, key, json.dumps(new, ensure_ascii=False), user_id))
        return new

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
                 limit: int | None = None, user_id: str | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        sql = "SELECT seq, key, value FROM log WHERE stream=? AND seq>?"
        args: list[Any] = [stream, after]
        if key is not None:
            sql += " AND key=?"
            args.append(key)
        if user_id is not None:
            sql += " AND user_id=?"
            args.append(user_id)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._lock:
            self._check()
            rows = self._db.execute(sql, args).fetchall()
        return [(seq, k, json.loads(v)) for seq, k, v in rows]

    def log_delete(self, stream: str, keys: Sequence[str]) -> int:
        keys = list(keys)
        if not keys:
            return 0
        with self._lock:
            self._check()
            with self._tx():
                n = 0
                for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                    part = keys[start:start + 500]
                    n += self._db.execute(f"DELETE FROM log WHERE stream=? AND key IN ({','.join('?' * len(part))})",
                                          [stream, *part]).rowcount
            return n

    def delete_user(self, user_id: str) -> int:
        """Forget a user: their records, relationships, kv and log rows, and every trace of them
        in the files: words no one else uses leave the terms table, deleted rows are zeroed
        (secure_delete) and the WAL is emptied into the file, and the HNSW graph, which keeps
        deleted points, is dropped (and rebuilt without them when a search needs it). One
        transaction, logged as a ``forget``: other processes drop their graph and terms too."""
        with self._lock:
            self._check()
            mirror = _Mirror()
            # First: a crash after the delete must not leave a graph (or snapshot) holding them.
            self._drop_graph_files()
            if self.path is not None:
                snapshot_path(self.path).unlink(missing_ok=True)
            with self._tx():
                ids = [r[0] for r in self._db.execute("SELECT id FROM chunks WHERE user_id=?", (user_id,))]
                self._drop_rows(ids, mirror, keep_edges=False)
                self._db.execute("DELETE FROM kv WHERE user_id=?", (user_id,))
                self._db.execute("DELETE FROM log WHERE user_id=?", (user_id,))
                # The ingest queue is a table of this file (ingest/queue.py; named here, not
                # imported: the store does not depend on ingestion): the user's pending events and
                # dead letters hold their words, and a pending one would store their memories again
                # after this forget. PostgreSQL's forget deletes them too.
                if self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='ingest_events'"
                                    ).fetchone() is not None:
                    self._db.execute("DELETE FROM ingest_events WHERE user_id=?", (user_id,))
                # Terms no remaining record holds, counted from this index once the rows are gone.
                df = self.index.lex._df.copy()
                for counts in mirror.removed.values():
                    for tid in counts:
                        if tid < len(df):
                            df[tid] -= 1
                unused = {t: i for t, i in self.index.term_ids.items() if i >= len(df) or df[i] <= 0}
                self._db.executemany("DELETE FROM terms WHERE id=?", [(tid,) for tid in unused.values()])
                # The change log keeps no trace of them either: other processes see one anonymous
                # "forget" and rebuild their index from the rows (forgetting is rare).
                for i in range(0, len(ids), 500):
                    part = ids[i : i + 500]
                    self._db.execute(f"DELETE FROM changes WHERE id IN ({','.join('?' * len(part))})", part)
                self._log([""], "forget")
            mirror.apply(self.index)
            self.index.drop_terms(unused)
            if mirror.removed:
                self.index.drop_graph()
            self._empty_wal()
            return len(mirror.removed)

    def users(self) -> list[str]:
        with self._lock:
            self._check()
            rows = self._db.execute("SELECT user_id FROM chunks UNION SELECT user_id FROM kv WHERE user_id IS NOT NULL "
                                    "UNION SELECT user_id FROM log WHERE user_id IS NOT NULL").fetchall()
        return sorted(r[0] for r in rows)

    def _drop_graph_files(self) -> None:
        graph = self._graph_path()
        for side in ([] if graph is None else [graph, Path(str(graph) + ".keys.npy")]):
            side.unlink(missing_ok=True)

    def _empty_wal(self) -> None:
        """Copy the WAL into the database file and truncate it, so deleted content is nowhere."""
        if self.path is not None:
            empty_wal(self._db, str(self.path))

    # -- integrity -------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check the in-memory index and the relationships against the committed records."""
        with self._lock, self._reading():  # the records of the state the index was caught up to
            rows = self._db.execute("SELECT id, lex, vector FROM chunks").fetchall()
            known_terms = {i for (i,) in self._db.execute("SELECT id FROM terms")}
            problems = self.index.verify(rows, known_terms)
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
            self._load(snapshot=False)
            return self.verify()

    # -- lifecycle -------------------------------------------------------------------
    def _save_graph(self) -> None:
        """Write the HNSW graph beside the database (under the write lock, see flush/close)."""
        graph = self._graph_path()
        if graph is not None and self.index.has_graph:
            Path(str(graph) + ".id").write_text(self._store_id_value)
            self.index.save_graph(graph)

    def _locked(self) -> Any:
        """The database's write lock, held while side files are written, after catching up with
        other processes (so what is written is the database as it is), without retiring the
        snapshot as a write transaction does."""
        store = self

        class _Locked:
            def __enter__(self) -> None:
                store._db.execute("BEGIN IMMEDIATE")
                try:
                    store._catch_up()
                except BaseException:
                    store._rollback()
                    raise

            def __exit__(self, exc_type: Any, *_: Any) -> None:
                if exc_type is None:
                    store._db.execute("COMMIT")
                else:
                    store._rollback()

        return _Locked()

    def flush(self) -> None:
        with self._lock:
            self._check()
            if self.path is None or not self.index.has_graph:
                return
            try:
                with self._locked():
                    self._save_graph()
            except sqlite3.Error as exc:
                raise StoreUnavailableError(f"the store at {self.path} is unavailable (flush): {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self._save_side_files()
            finally:
                self._closed = True
                self._db.close()

    def _save_side_files(self) -> None:
        """At close: the graph, then the snapshot, then its name in meta (a crash in between leaves
        it unnamed), all under the write lock and after catching up: no other process can write
        in between, so the snapshot is exactly the database it names."""
        if self.path is None or file_id(self.path) != self._file_id:
            return  # no store, or its file is gone: side files would describe nothing
        import logging

        log = logging.getLogger(__name__)
        try:
            with self._locked():
                self._save_graph()
                row = self._db.execute("SELECT value FROM meta WHERE key='snapshot'").fetchone()
                if self.index.vec is None or (row is not None and row[0] == self._snapshot_token):
                    return  # nothing to save, or the snapshot on disk is still the current one
                token = new_token()
                try:
                    save_snapshot(self.index, snapshot_path(self.path), token, self._rows_and_last_seq())
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (token,))
                except Exception:
                    snapshot_path(self.path).unlink(missing_ok=True)
                    raise
            self._snapshot_token = token
        except Exception as exc:  # only the next open's speed is at stake
            # One line, not a traceback: on a full disk this runs while the caller's own error
            # (StoreUnavailableError) is reported, and a CLI would print both (see BEEWEAVE_DEBUG).
            log.warning("BeeWeave: could not save the graph and snapshot of %s (%s: %s); the next open "
                        "rebuilds them", self.path, type(exc).__name__, exc)
            log.debug("BeeWeave: saving the graph and snapshot of %s failed", self.path, exc_info=True)

    def statuses(self) -> dict[str, int]:
        """Live record counts per status (cheap; used by stats)."""
        with self._lock:
            self._check()
            return self.index.status_counts()


def _entry_of(doc: str, vector: bytes, lex: bytes, seq: int) -> IndexEntry:
    """A stored row as the index takes it."""
    return IndexEntry(KnowledgeChunk.from_stored(json.loads(doc)), np.frombuffer(vector, np.float32), lex_counts(lex), seq)
