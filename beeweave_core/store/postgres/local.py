"""A PostgreSQL store's local index: the tenant's search index held in this process.

A ``PostgresStore`` answers every search (``retrieve`` and the separate lexical and dense
calls) from a :class:`~beeweave_core.index.memory_index.MemoryIndex`
— the embedded store's BM25 with session context, vectors and filter columns — built
from the tenant's rows at the first search and kept current from the change log
(schema 0009): every write transaction logs the ids it changed under the tenant write
lock, so within a tenant the log's ``seq`` follows commit order. The database stays the
only truth: the records a search returns, with their access counts and relationships, are
read from it (the fields ranking reads are held in memory: they change only by logged writes).

A search reads the log's last ``seq``; if the log moved on (another process or host
wrote), the index catches up (the log entries and the changed rows in one snapshot) and the
candidates are ranked again in memory. This store's own inserts are indexed from memory
as they commit (``LocalIndex.take_own``). When the last search found the index current and
this store has not written since (but for inserts it indexed so), the engine's search ranks first and reads the log's last
``seq`` in the statement that reads the records it returns (one round trip, not two), and
ranks again only if the log moved. So a search never sees less than what was committed
before it started, whichever host committed it. A log entry ``'f'`` (a user forgotten, a repair, a dropped
tenant), or a log pruned past what the index holds, rebuilds the index from the rows.

What it costs: the process holds the tenant's vectors and postings, and the first search
of a process loads them; the vector graph (past ``VectorIndex.exact_limit`` vectors) is
then built in a thread while searches scan exactly. Searches with a declared-metadata-field filter, which the
in-memory columns do not hold, read the ids passing it in SQL first.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field, fields, replace
from functools import partial
from itertools import chain
from typing import Any

import numpy as np
import psycopg

from ...errors import DimensionMismatchError
from ...filters import Filter
from ...index.catch_up import ChangedRow, apply_changes
from ...index.context import IndexConfig
from ...index.memory_index import IndexEntry, MemoryIndex, lex_counts
from ...index.vectors import VectorIndex
from ...records import ChunkStatus, KnowledgeChunk, Relationship, RelationType
from ...relevance import term_evidence
from ...scoring import RankFields
from ..base import StaleCandidates, TermEvidence, check_query_model, model_name
from .connection import Database
from .decode import decode_record, rank_fields_of
from .sql import GET_CHECKED_SQL, GET_WITH_RIVALS_SQL, clean, one

logger = logging.getLogger(__name__)

__all__ = ["LocalCandidates", "LocalIndex", "OwnInsert", "records_with_rivals", "with_batch"]

# What the index is built from, per record: the columns it filters on, its text's term
# counts and its vector. (``turn``: whether it takes part in its session's context.)
# The fields ranking reads come from the document, parsed once per row (``f``), except
# for a document holding a NUL (``\u0000``, kept exactly in ``json``), which PostgreSQL
# refuses to take any field of: its whole text comes instead (the last column) and is
# parsed here.
_COLUMNS = """c.seq, c.id, c.user_id, c.agent_id, c.session_id, c.ts, c.status, c.ctype, c.intent,
    {tags}, {entities}, c.tier, c.turn, {doc}, p.terms, p.tfs, {vector},
    f."timestamp", f.weight, f.confidence, f.pinned, f.metadata->'stale', f.reinforced_at, f.expires_at,
    CASE WHEN NOT nul.plain THEN c.doc::text END"""
_FIELDS_FROM = """CROSS JOIN LATERAL (SELECT strpos(c.doc::text, '\\u0000') = 0 AS plain) nul
CROSS JOIN LATERAL json_to_record(CASE WHEN nul.plain THEN c.doc ELSE '{}'::json END) AS f("timestamp" text,
    weight text, confidence text, pinned text, metadata json, reinforced_at text, expires_at text)"""
_ROW_COLUMNS = _COLUMNS.format(tags="c.tags", entities="c.entities", doc="c.doc::text", vector="v.embedding")

# (the postings of a record read once, both arrays in one pass of its index range)
_ROW_FROM = """FROM @chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq
""" + _FIELDS_FROM + """
LEFT JOIN LATERAL (SELECT array_agg(p.term ORDER BY p.term) AS terms, array_agg(p.tf ORDER BY p.term) AS tfs
    FROM @postings p WHERE p.tenant = c.tenant AND p.chunk_seq = c.seq) p ON true"""

# Every record, without its document (the columns hold all the index needs; a record caught
# up later is built from its document), and the tenant's postings grouped in one pass rather
# than looked up record by record; tags and entities as JSON text and vectors in pgvector's
# binary form, which ``_load`` decodes for all rows at once rather than row by row.
_LOAD_SQL = """WITH p AS (SELECT p.chunk_seq, array_agg(p.term ORDER BY p.term) AS terms,
    array_agg(p.tf ORDER BY p.term) AS tfs FROM @postings p WHERE p.tenant = %(t)s GROUP BY p.chunk_seq)
SELECT """ + _COLUMNS.format(tags="array_to_json(c.tags)::text", entities="array_to_json(c.entities)::text",
                             doc="NULL", vector="@vector_send(v.embedding)") + """
FROM @chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq
""" + _FIELDS_FROM + """
LEFT JOIN p ON p.chunk_seq = c.seq WHERE c.tenant = %(t)s ORDER BY c.seq"""

_HIGH_SQL = "SELECT coalesce(max(seq), 0) FROM @changes WHERE tenant = %(t)s"

# The model the tenant's vectors were written under (see ``LocalIndex.model``), read in the
# snapshot the index is built or caught up from: a column of the statements those send anyway.
_MODEL_SQL = "(SELECT value FROM @meta WHERE tenant = %(t)s AND key = 'embedder')"

_LOAD_HIGH_SQL = "SELECT (" + _HIGH_SQL + "), " + _MODEL_SQL

_LOG_SQL = """SELECT coalesce(max(seq), %(seen)s), coalesce(bool_or(op = 'f'), false),
    (SELECT value FROM @meta WHERE tenant = %(t)s AND key = 'changes_floor'),
    coalesce(array_agg(DISTINCT id) FILTER (WHERE op = 'w'), '{}'),
    """ + _MODEL_SQL + """
FROM @changes WHERE tenant = %(t)s AND seq > %(seen)s"""

_CHANGED_SQL = "SELECT " + _ROW_COLUMNS + "\n" + _ROW_FROM + """
WHERE c.tenant = %(t)s AND c.id IN (SELECT id FROM @changes WHERE tenant = %(t)s AND seq > %(seen)s)"""


@contextmanager
def _snapshot(conn: psycopg.Connection) -> Iterator[None]:
    """One read-only snapshot for the statements inside (the log's position and the rows),
    in one round trip: BEGIN, the statements and ROLLBACK go out in a pipeline; their
    cursors are read after the block."""
    try:
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield
            conn.execute("ROLLBACK")
    except BaseException:
        with suppress(psycopg.Error):  # the pool must not take back an open transaction
            conn.rollback()
        raise


def _vectors(sent: Sequence[bytes]) -> list[bytes]:
    """Vectors in pgvector's binary form (int16 dimension, int16 unused, big-endian float32s)
    as native float32 bytes, decoded all at once."""
    width = len(sent[0])
    if any(len(b) != width for b in sent):
        raise DimensionMismatchError("the tenant's vectors do not all have one dimension")
    raw = np.frombuffer(b"".join(sent), np.uint8).reshape(len(sent), width)[:, 4:]
    return [row.tobytes() for row in np.ascontiguousarray(raw).view(">f4").astype(np.float32)]


def _pairs(counts: Mapping[int, int]) -> bytes:
    """Term counts as the index stores them: (term id, count) int32 pairs."""
    return np.array(sorted(counts.items()), np.int32).reshape(-1, 2).tobytes()


@dataclass
class OwnInsert:
    """An insert transaction of this store, as its local index takes it once committed."""

    before: int  # the change log's last seq, read under the tenant write lock before the insert
    logged: psycopg.Cursor[Any]  # its own entries' last seq, readable once the transaction is through
    rows: list[tuple[int, str, dict[str, int], np.ndarray]]  # each record's seq, stored document, term counts, vector


@dataclass
class LocalCandidates:
    """A search's candidates from the local index (``base.Candidates``): the scores and the
    fields ranking reads come from memory; the records the engine returns are read from the
    database when asked for (with their access counts and relationships, as ``get`` reads
    them), so only ~k records travel instead of every candidate's."""

    ids: list[str]
    lexical: np.ndarray
    vector: np.ndarray
    fields: dict[str, RankFields]
    _get: Callable[[Sequence[str], Callable[[], None]],
                   tuple[dict[str, KnowledgeChunk], dict[str, list[Relationship]]]] = field(repr=False)
    # The lexical evidence of the records asked for (``LocalIndex._evidence``), or None when
    # the search asked for none: only the hits need it, ~10 of ~90 candidates, so scoring
    # each term against every candidate would be work thrown away.
    _evidence_of: Callable[[Sequence[str]], TermEvidence] | None = field(default=None, repr=False)
    evidence: TermEvidence | None = None  # filled by ``records`` (``base.Candidates.evidence``)
    rivals: dict[str, list[Relationship]] | None = None  # filled by ``records``
    own_vector: np.ndarray | None = None  # ``base.Candidates.own_vector``, from memory

    def records(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        wanted = [cid for cid in ids if cid in self.fields]

        def read_evidence() -> None:  # in memory, while the server reads the records
            if self._evidence_of is None:
                return
            found = self._evidence_of(wanted)
            if self.evidence is not None:  # asked again: keep the earlier records' too
                found = replace(found, lexical={**self.evidence.lexical, **found.lexical})
            self.evidence = found

        chunks, rivals = self._get(wanted, read_evidence)
        self.rivals = {**(self.rivals or {}), **rivals}
        return chunks


def records_with_rivals(db: Database, ids: Sequence[str], *, seen: int | None = None,
                        meanwhile: Callable[[], None] | None = None, lock: threading.Lock | None = None
                        ) -> tuple[dict[str, KnowledgeChunk], dict[str, list[Relationship]]]:
    """``store.get(ids)`` and, from the same statement, each record's ``contradicts``
    relationships either way (``base.Candidates.rivals``), as ``store.edges`` would list them.
    ``seen``: the statement also checks that the change log's last entry is still ``seen``
    (the ranking that chose ``ids`` was current) and raises ``StaleCandidates`` if not.

    ``meanwhile``: work done, holding ``lock``, after the statement is sent and before its
    rows are awaited (a pipeline: the server plans and runs it meanwhile, so the relevance
    evidence computed here costs the search no time of its own). The lock is taken
    before the connection, the order ``LocalIndex.retrieve`` takes them in (a thread holding
    a connection while it waits for the lock could starve one holding the lock of a
    connection), and let go before the rows are awaited."""
    db.check()
    ids = list(dict.fromkeys(clean(ids)))
    if not ids and seen is None:
        with lock if lock is not None else nullcontext():
            if meanwhile is not None:
                meanwhile()
        return {}, {}
    args = {"t": db.tenant, "ids": ids}
    held = lock.acquire() if lock is not None else False
    try:
        with db.conn() as conn:
            with conn.pipeline():
                cur = conn.execute(db.q(GET_WITH_RIVALS_SQL if seen is None else GET_CHECKED_SQL), args)
                try:
                    if meanwhile is not None:
                        meanwhile()
                finally:  # failed or not, other searches need not wait for these rows
                    if held:
                        lock.release()  # type: ignore[union-attr]
                        held = False
            got = cur.fetchall()
    finally:
        if held:
            lock.release()  # type: ignore[union-attr]
    if seen is None:
        rows = got
    else:
        if int(got[0][0]) != seen:
            raise StaleCandidates(f"the change log moved from {seen} to {got[0][0]}")
        rows = [r[1:] for r in got if r[1] is not None]
    chunks: dict[str, KnowledgeChunk] = {}
    rivals: dict[str, list[Relationship]] = {}
    for *row, incoming in rows:
        cid = row[0]
        chunk = chunks[cid] = decode_record(*row)
        rivals[cid] = [e for e in chunk.relationships if e.type is RelationType.CONTRADICTS]
        rivals[cid] += [Relationship(src, cid, RelationType.CONTRADICTS, w) for src, w in json.loads(incoming or "[]")]
    return chunks, rivals


def with_batch(found: Sequence[list[tuple[str, float]]], similar: Sequence[tuple[np.ndarray, Filter, int]],
               rows: Sequence[tuple[KnowledgeChunk, np.ndarray]]) -> list[list[tuple[str, float]]] | None:
    """The nearest-records reads ``found`` among committed records (a local index's), with
    the records of the insert they are read for (``rows``: record, float32 vector) as SQL inside that
    transaction finds them too; None when a read's scope asks more than user and status
    (what linking asks: engine/graph.py), which the records are not matched against here."""
    out = []
    for hits, (q, scope, k) in zip(found, similar, strict=True):
        if any(getattr(scope, f) is not None for f in _BEYOND_USER_AND_STATUS):
            return None
        qv = np.asarray(q, np.float32)
        mine = [(c.id, float(np.dot(qv, v))) for c, v in rows
                if (scope.user_ids is None or c.user_id in scope.user_ids)
                and (scope.statuses is None or ChunkStatus(c.status).value in scope.statuses)]
        held = {cid for cid, _ in hits}
        # ties in insertion order, as SQL's (dist, seq): the index's hits, then the batch's
        out.append(sorted([*hits, *(m for m in mine if m[0] not in held)], key=lambda kv: -kv[1])[:k])
    return out


_BEYOND_USER_AND_STATUS = [f.name for f in fields(Filter) if f.name not in ("user_ids", "statuses")]


class LocalIndex:
    """One tenant's search index in this process, caught up from the change log."""

    def __init__(self, db: Database, index_config: IndexConfig) -> None:
        self._db = db
        # The graph of a loaded tenant is built in a thread: until it is, a search that needs
        # it scans exactly (a short-lived process answers its first search without it).
        self.index = MemoryIndex(index_config, make_vectors=lambda dim: VectorIndex(dim, background=True))
        self.seen = -1  # the last log entry the index reflects; -1: not built yet
        # id -> the term counts it is indexed with, as (term id, count) int32 pairs (a dict per
        # memory would hold ~0.7 kB; these ~0.1 kB): what removing it from BM25 needs
        self._counts: dict[str, bytes] = {}
        self._lock = threading.Lock()
        # Whether a search may rank before it checks the log (``retrieve``'s ``optimistic``),
        # and an add read its nearest records (``nearest``): set by a check that found the
        # index current and by an own insert indexed from memory (``take_own``), cleared by a
        # check that found it behind (another store writes: checking first saves ranking
        # twice) and by this store's writes. Never what makes an answer right: an optimistic
        # ranking is checked by its records' statement, and an add's reads by the log's
        # position under the write lock, whatever this says.
        self.trusted = False
        self.loads = 0  # how often the index was built from the rows (tests read it)
        # The model's name the tenant recorded (meta ``embedder``) as of the vectors the index
        # holds, read in the snapshot they came from (a load, a catch-up): a search's query
        # vector for another model is refused (``check_query_model``) with no statement of its own.
        self.model: str | None = None

    # -- building and catching up -----------------------------------------------------
    def _term_counts(self, terms: Sequence[str] | None, tfs: Sequence[int] | None) -> dict[int, int]:
        if not terms:
            return {}
        ids = self.index.term_ids
        new = {t: len(ids) + i for i, t in enumerate(dict.fromkeys(t for t in terms if t not in ids))}
        if new:
            self.index.add_terms(new)
        return {ids[t]: int(n) for t, n in zip(terms, tfs or (), strict=True)}

    def _all_counts(self, terms: Sequence[Sequence[str] | None], tfs: Sequence[Sequence[int] | None]) -> list[bytes]:
        """Every row's term counts as ``_pairs`` gives them (new terms numbered in order of
        first appearance, as ``_term_counts`` row by row), computed for all rows at once."""
        lens = np.fromiter((len(t) if t else 0 for t in terms), np.int64, len(terms))
        flat = list(chain.from_iterable(t for t in terms if t))
        ids = self.index.term_ids
        new = dict.fromkeys(t for t in flat if t not in ids)
        if new:
            self.index.add_terms({t: len(ids) + i for i, t in enumerate(new)})
        tid = np.fromiter(map(ids.__getitem__, flat), np.int32, len(flat))
        tf = np.fromiter(chain.from_iterable(f for f in tfs if f), np.int32, len(flat))
        order = np.lexsort((tid, np.repeat(np.arange(len(lens)), lens)))
        buf = np.stack([tid[order], tf[order]], axis=1).astype(np.int32).tobytes()
        ends = (np.cumsum(lens) * 8).tolist()
        return [buf[end - 8 * n : end] for end, n in zip(ends, lens.tolist(), strict=True)]

    def _load(self, conn: psycopg.Connection) -> None:
        """Build the index from every row of the tenant, in one snapshot with the log's last seq."""
        q, t = self._db.q, self._db.tenant
        with _snapshot(conn):
            high_cur = conn.execute(q(_LOAD_HIGH_SQL), {"t": t})
            rows_cur = conn.execute(q(_LOAD_SQL), {"t": t}, binary=True)
        (high, model), rows = one(high_cur.fetchone()), rows_cur.fetchall()
        high = int(high)
        index = self.index
        self.seen = -1  # until the index is whole again: a failure below means a load next time
        index.clear()
        self._counts = {}
        if rows:
            cols = list(zip(*rows, strict=True))
            lexes = self._all_counts(cols[14], cols[15])
            self._counts = dict(zip(cols[1], lexes, strict=True))
            index.load(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9],
                       cols[10], lexes, _vectors(cols[16]), cols[11], cols[12])
            slot_of, rank = index.slot_of, index.rank
            for r in rows:
                rank.set_fields(slot_of[r[1]], rank_fields_of(*r[17:24]) if r[24] is None else
                                RankFields.of(KnowledgeChunk.from_stored(json.loads(r[24]))))
        self.seen = high
        self.model = model_name(model)
        self.loads += 1

    def _catch_up(self, conn: psycopg.Connection, log: tuple[Any, ...], rows: Sequence[tuple[Any, ...]], *,
                  load: bool = True) -> bool:
        """Apply the log entries after ``seen`` (``log``: ``_LOG_SQL``'s row) with the changed
        ``rows`` (``_CHANGED_SQL``'s), read in one snapshot. Returns False, changing nothing,
        when that needs a load and ``load`` is off."""
        high, forget, floor, changed, model = log
        # a rebuild is asked for, or entries this index needs were pruned
        if forget or (floor is not None and int(floor) > self.seen):
            if not load:
                return False
            self._load(conn)
            return True
        try:
            applied = self._apply(changed, rows)
        except BaseException:
            self.seen = -1  # half applied: build it again from the rows at the next search
            raise
        if not applied:  # cannot happen (every held record's counts are kept): build it again
            self.seen = -1
            if not load:
                return False
            self._load(conn)
            return True
        self.seen = int(high)
        self.model = model_name(model)  # (a re-embed's switch logs every record it rewrites)
        return True

    def _entry(self, seq: int, doc: str, terms: Sequence[str] | None, tfs: Sequence[int] | None,
               vector: np.ndarray) -> IndexEntry:
        """A record as the index takes it (its stored document, term counts and vector), its
        term counts kept for its removal."""
        chunk = KnowledgeChunk.from_stored(json.loads(doc))
        counts = self._term_counts(terms, tfs)
        self._counts[chunk.id] = _pairs(counts)
        return IndexEntry(chunk, vector, counts, seq)

    def _apply(self, changed: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> bool:
        """Patch the index with the current rows of the ``changed`` ids (absent: deleted);
        False, the index unchanged, when a held record's term counts are unknown."""
        current = {r[1]: ChangedRow(int(r[0]), r[13], partial(self._entry, int(r[0]), r[13], r[14], r[15],
                                                               r[16].to_numpy().astype(np.float32)))
                   for r in rows}

        def held(cid: str) -> dict[int, int] | None:
            counts = self._counts.pop(cid, None)
            return None if counts is None else lex_counts(counts)

        return apply_changes(self.index, changed, current, held) is not None

    # -- the search ---------------------------------------------------------------------
    def _candidates(self, terms: Mapping[str, int], q: np.ndarray, flt: Filter, k: int
                    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """What the engine's separate calls would give (``Search._retrieve``), from memory, and
        each candidate's cosine with its own vector (``Candidates.own_vector``)."""
        index = self.index
        if index.dim is not None and index.dim != len(q):
            raise DimensionMismatchError(f"the query vector has shape {q.shape}; this store needs ({index.dim},)")
        vector_top = index.vector_search(q, flt, k)
        lexical = index.lexical_search(terms, flt, k, include=[cid for cid, _ in vector_top])
        ids = [cid for cid, _ in lexical]
        vector, own = index.vector_scores(q, ids), index.own_vector_scores(q, ids)
        return (ids, np.fromiter((s for _, s in lexical), np.float64, len(ids)),
                np.fromiter((vector.get(cid, 0.0) for cid in ids), np.float64, len(ids)),
                np.fromiter((own.get(cid, 0.0) for cid in ids), np.float64, len(ids)))

    def _evidence(self, terms: Mapping[str, int], flt: Filter, evidence: Sequence[str],
                  ids: Sequence[str]) -> TermEvidence:
        """Calibrated relevance's lexical evidence (``base.TermEvidence``) for ``ids``, as
        ``relevance.term_evidence`` makes it of each term's single-term search in scope.

        The caller holds the index's lock. Read when the engine asks for the records (while
        the server reads them: ``records_with_rivals``), not with the candidates. If another
        search caught the index up in between, these are the newer index's scores: the
        ranking's own state is what an optimistic search's records statement checks, and
        relevance read from a newer state is as right as a search started a moment later."""
        unique = list(dict.fromkeys(evidence))
        index = self.index

        def search(words: Sequence[str], include: Sequence[str]) -> list[list[tuple[str, float]]]:
            return [index.lexical_search({t: terms[t]}, flt, 1, include=include) for t in words]

        return term_evidence(unique, search(unique, ids), ids, lambda unsure: search(unsure, ()),
                             index.term_idf(unique))

    @contextmanager
    def _fresh(self, *, load: bool = True) -> Iterator[MemoryIndex | None]:
        """The index, caught up with every write committed before this call, held under the
        lock until the block ends; None when that needs a load and ``load`` is off."""
        with self._lock:
            with self._db.conn() as conn:
                current = self._bring_up(conn, load)
            yield self.index if current else None

    def _bring_up(self, conn: psycopg.Connection, load: bool) -> bool:
        """Catch the index up (``_fresh``); False, changing nothing, when that needs a load
        and ``load`` is off."""
        self.trusted = False
        if self.seen >= 0:
            q, t = self._db.q, self._db.tenant
            high = one(conn.execute(q(_HIGH_SQL), {"t": t}).fetchone())[0]
            if int(high) > self.seen:  # another store wrote: the index is then as new as this search
                # The log entries after ``seen`` and their rows in one snapshot and one round
                # trip (BEGIN, the two reads and ROLLBACK in a pipeline: four round trips when
                # each waited; the rows are read for nothing only when the log asks for a rebuild).
                args = {"t": t, "seen": self.seen}
                with _snapshot(conn):
                    log = conn.execute(q(_LOG_SQL), args)
                    changed = conn.execute(q(_CHANGED_SQL), args, binary=True)
                return self._catch_up(conn, one(log.fetchone()), changed.fetchall(), load=load)
            if int(high) == self.seen:
                self.trusted = True  # nothing new: the next search may rank first
                return True
            # below it: the log was emptied under the index; start again from the rows
        if not load:
            return False
        self._load(conn)
        return True

    def retrieve(self, terms: Mapping[str, int], vector: np.ndarray, flt: Filter, k: int,
                 evidence: Sequence[str], *, optimistic: bool = False, model: str | None = None) -> LocalCandidates:
        """``PostgresStore.retrieve`` answered from the local index (see the module's text).

        ``optimistic`` (the engine's searches): when the last search found the index current
        and this store has not written since but for the inserts it indexed from memory
        (``trusted``), rank first and let the records'
        statement check the change log (``records_with_rivals``): one round trip instead of
        two. If another store wrote meanwhile, ``records`` raises ``StaleCandidates`` and the
        engine retrieves again, which then catches up first.

        ``model``: the query vector's model, refused (``EmbedderChangedError``) when the index
        holds vectors the tenant recorded under another (``model``): another process re-embedded
        it. An index whose model is not the query's is caught up first, even when trusted:
        this store may have switched the tenant itself and not read its switch back yet."""
        q = np.asarray(vector, np.float32)
        terms = {t: c for t, c in terms.items() if "\x00" not in t}
        evidence = [t for t in clean(evidence) if t in terms]
        with self._lock:
            hoped = self.seen if optimistic and self.trusted and self.seen >= 0 else None
            if hoped is not None and model is not None and self.model not in (None, model):
                hoped = None
            if hoped is None:
                with self._db.conn() as conn:
                    self._bring_up(conn, True)
            check_query_model(model, self.model)
            ids, lexical, vec, own = self._candidates(terms, q, flt, k)
            # every held slot has its fields (filled at load and by every write caught up)
            fields = self.index.rank_fields(ids, lambda missing: records_with_rivals(self._db, missing)[0].values())
        return LocalCandidates(ids, lexical, vec, fields, lambda wanted, meanwhile: self._records(wanted, hoped, meanwhile),
                               (lambda wanted: self._evidence(terms, flt, evidence, wanted)) if evidence else None,
                               own_vector=own)

    def _records(self, ids: Sequence[str], hoped: int | None, meanwhile: Callable[[], None]
                 ) -> tuple[dict[str, KnowledgeChunk], dict[str, list[Relationship]]]:
        """The records of an optimistic search (``hoped``: the log entry its ranking reflects)
        with the check that no write came after it; stale, the next search checks first."""
        try:
            return records_with_rivals(self._db, ids, seen=hoped, meanwhile=meanwhile, lock=self._lock)
        except StaleCandidates:
            self.trusted = False
            raise

    def take_own(self, own: OwnInsert) -> None:
        """Index the records of this store's committed insert from memory, as a catch-up would
        from their rows (and with the same log position), if the index reflected the log just
        before it: the insert held the tenant write lock, so nothing else came in between. The
        next search or add then has nothing to catch up (reading its predecessor back was
        most of an add's time at 100k). Otherwise the next search catches the insert up from the log."""
        with self._lock:
            if self.seen < 0 or self.seen != own.before:
                return  # not built, or behind (or past it: another thread caught the insert up)
            try:
                after = int(one(own.logged.fetchone())[0])
                self.index.add([self._entry(seq, doc, list(counts), list(counts.values()), vector)
                                for seq, doc, counts, vector in own.rows])
            except Exception:  # committed all the same: the next search builds the index again
                logger.warning("a local index could not take this store's insert; it is rebuilt at the next search",
                               exc_info=True)
                self.seen = -1
                return
            except BaseException:  # (an interrupt) half taken: built again at the next search
                self.seen = -1
                raise
            self.seen = after
            self.trusted = True  # as current as a check at the commit would have found it

    def nearest(self, similar: Sequence[tuple[np.ndarray, Filter, int]]
                ) -> tuple[int, list[list[tuple[str, float]]]] | None:
        """A linking pass's nearest-records reads (``LinkReads.similar``) answered from the
        index, with the log position they reflect; None when the index is not built or must
        be rebuilt (an add pays for no load: an exact scan of its scope in SQL answers), or
        the vectors do not fit it. The caller uses them only if the log has not
        moved past that position when it holds the tenant write lock (else ``nearest_locked``),
        so when the index was found current (``trusted``) they are read without checking
        the log first; otherwise it is caught up first."""
        with self._lock:
            if not (self.trusted and self.seen >= 0):
                with self._db.conn() as conn:
                    if not self._bring_up(conn, False):
                        return None
            return self._nearest(similar)

    def _nearest(self, similar: Sequence[tuple[np.ndarray, Filter, int]]) -> tuple[int, list[list[tuple[str, float]]]] | None:
        index = self.index
        if index.dim is not None and any(len(q) != index.dim for q, _, _ in similar):
            return None
        return self.seen, [index.vector_search(np.asarray(q, np.float32), scope, k) for q, scope, k in similar]

    def nearest_locked(self, conn: psycopg.Connection, high: int, similar: Sequence[tuple[np.ndarray, Filter, int]],
                       writing: Collection[str]) -> list[list[tuple[str, float]]] | None:
        """``nearest`` inside the caller's write transaction on ``conn``, which holds the tenant
        write lock and read the log's last position ``high`` under it: the entries the index
        lacks and their rows are read on ``conn`` (nothing commits meanwhile) and applied
        first: when another store wrote after ``nearest``. None (the caller reads in SQL) when that
        needs a load, or the index is busy for a second (a search holding it may wait for
        a pooled connection the waiting writers hold), or the entries name an id this
        transaction writes (``writing``): its rows, read here, are this transaction's own,
        uncommitted (another store deleted the id, this one adds it again)."""
        if not self._lock.acquire(timeout=1.0):
            return None
        try:
            if self.seen < 0 or self.seen > high:
                return None
            if self.seen < high:
                q, args = self._db.q, {"t": self._db.tenant, "seen": self.seen}
                log = conn.execute(q(_LOG_SQL), args)
                changed = conn.execute(q(_CHANGED_SQL), args, binary=True)
                entries, rows = one(log.fetchone()), changed.fetchall()
                if not set(entries[3]).isdisjoint(writing):
                    return None
                if not self._catch_up(conn, entries, rows, load=False) or self.seen != high:
                    return None
            answered = self._nearest(similar)
            return None if answered is None else answered[1]
        finally:
            self._lock.release()

    def lexical_searches(self, queries: Sequence[Mapping[str, int]], flt: Filter, k: int,
                         include: Sequence[str]) -> list[list[tuple[str, float]]]:
        """``PostgresStore.lexical_searches`` from the local index."""
        include = clean(include)
        with self._fresh() as index:
            assert index is not None  # (load=True)
            return [index.lexical_search({t: c for t, c in terms.items() if "\x00" not in t}, flt, k, include=include)
                    for terms in queries]

    def term_idf(self, terms: Sequence[str]) -> tuple[dict[str, float], float]:
        """``PostgresStore.term_idf`` from the local index."""
        with self._fresh() as index:
            assert index is not None  # (load=True)
            return index.term_idf(t for t in terms if "\x00" not in t)

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False,
                      model: str | None = None) -> list[tuple[str, float]]:
        """``PostgresStore.vector_search`` from the local index."""
        q = np.asarray(vector, np.float32)
        with self._fresh() as index:
            assert index is not None  # (load=True)
            check_query_model(model, self.model)
            if index.dim is not None and index.dim != len(q):
                raise DimensionMismatchError(f"the query vector has shape {q.shape}; this store needs ({index.dim},)")
            return index.vector_search(q, flt, k, exact=exact)

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str], *, model: str | None = None) -> dict[str, float]:
        """``PostgresStore.vector_scores`` (context vectors) from the local index."""
        q = np.asarray(vector, np.float32)
        with self._fresh() as index:
            assert index is not None  # (load=True)
            check_query_model(model, self.model)
            if index.dim is not None and index.dim != len(q):
                return {}  # as the SQL statement answers: no record's vector has this dimension
            return index.vector_scores(q, list(clean(ids)))

    def wait_for_graph(self) -> None:
        """Wait for the vector graph being built in the background, if any (benchmarks, tests)."""
        with self._lock:
            if self.index.vec is not None:
                self.index.vec.wait_for_graph()

    def refresh(self) -> None:
        """Catch up now (tests; a search does it when it must)."""
        with self._fresh():
            pass
