"""The storage protocol every backend implements.

It is deliberately small: records, lexical postings, vectors and relationships.
The engine (``BeeWeave``) owns validation, tokenising, embedding, fusion, expansion
and ranking; a backend only stores and answers these primitive queries, always
with the filter applied inside the query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..errors import BeeWeaveError
from ..filters import Filter
from ..records import KnowledgeChunk, Relationship
from ..scoring import RankFields

if TYPE_CHECKING:
    from .links import Derive, LinkReads

__all__ = ["ChunkRow", "StoreBackend", "SCHEMA_VERSION", "StaleCandidates", "VerifyReport", "records_in_order",
           "split_changes"]

# Bumped by every named migration; a store newer than the code refuses to open.
SCHEMA_VERSION = 4


@dataclass
class ChunkRow:
    """What a backend stores for one chunk: the record, its vector and its index terms."""

    chunk: KnowledgeChunk
    vector: np.ndarray
    terms: list[str]


@dataclass
class VerifyReport:
    """What ``verify()`` found: ``ok`` when the indexes and relationships agree with the records."""

    records: int
    edges: int
    problems: list[str]
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        return not self.problem_count and not self.problems


def split_changes(new: Sequence[KnowledgeChunk | ChunkRow],
                  given: Mapping[str, KnowledgeChunk]) -> tuple[list[KnowledgeChunk], list[ChunkRow]]:
    """What a ``modify`` change returned: (records to update, rows to replace). A record it
    was not given is a programming error and writes nothing."""
    chunks: list[KnowledgeChunk] = []
    rows: list[ChunkRow] = []
    for n in new:
        cid = n.chunk.id if isinstance(n, ChunkRow) else n.id
        if cid not in given:
            from ..errors import InvalidInputError

            raise InvalidInputError(f"modify: the change returned {cid!r}, a record it was not given")
        if isinstance(n, ChunkRow):
            rows.append(n)
        else:
            chunks.append(n)
    return chunks, rows


@runtime_checkable
class StoreBackend(Protocol):
    # -- metadata --------------------------------------------------------------
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def index_field(self, name: str) -> None:
        """Index ``metadata[name]`` for filters on a declared field (beeweave_core.fields;
        ``name`` is an identifier, checked there). Idempotent; safe while others write."""

    # -- records -----------------------------------------------------------------
    def insert(self, rows: Sequence[ChunkRow]) -> None:
        """Insert atomically: all rows or none. Raises DuplicateIdError first if an id exists."""

    def insert_linked(self, rows: Sequence[ChunkRow], reads: LinkReads, derive: Derive) -> bool:
        """``insert(rows)``, then answer ``reads`` as ``links.read_links`` does (seeing the new
        rows), call ``derive`` with the answers and write the edges it returns (the stale
        ones deleted first), as ``links.insert_then_link`` does. ``derive`` must not call the
        backend. PostgreSQL does all of it in one transaction (a failure anywhere stores
        nothing); SQLite commits the rows first. Returns False when the rows were stored
        but the store became unavailable before the edges were (link them again later)."""

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        """Rewrite records whose indexed text did not change (weights, status, tags...)."""

    def replace(self, rows: Sequence[ChunkRow], *, meta: Mapping[str, str] | None = None) -> None:
        """Rewrite records whose text changed: record, vector and postings together, keeping
        their relationships, and set the ``meta`` keys (e.g. ``{"embedder": ...}`` for a
        re-embed) in the same transaction: after a crash or a refused write either all of it
        happened or none (``rows`` may be empty to write only ``meta``)."""

    def modify(self, ids: Sequence[str],
               change: Callable[[dict[str, KnowledgeChunk]], Sequence[KnowledgeChunk | ChunkRow]]) -> None:
        """Read-modify-write records with no lost update.

        ``change`` gets the records of ``ids`` that exist (id -> record, without
        relationships), read while no other writer, thread or process, can change them,
        and returns new versions of some of them: a ``KnowledgeChunk`` is written as by
        ``update``, a ``ChunkRow`` (changed text) as by ``replace``, all in one transaction.
        Only then may another writer read them. If ``change`` raises, nothing is written and
        the error goes to the caller. ``change`` must not call the backend. With no ids it is
        not called.
        """

    def get(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]: ...

    def rank_fields(self, ids: Sequence[str]) -> dict[str, RankFields]:
        """``RankFields.of`` each stored record (absent ids left out), cheaper than ``get``:
        a search ranks its candidates with these and reads only the records it returns."""

    def record_access(self, accesses: Mapping[str, tuple[int, datetime]]) -> None:
        """For each ``id -> (n, last)``: add ``n`` to the record's ``access_count`` and move its
        ``last_accessed`` to ``last`` if that is later; ids not stored are skipped. Like
        ``modify``, no concurrent write is lost; nothing a search filters or ranks on changes."""

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Delete records, their postings, vectors and every edge touching them; return the ids deleted."""

    def delete_if(self, ids: Sequence[str], still: Callable[[KnowledgeChunk], bool]) -> list[str]:
        """``delete`` those of ``ids`` whose record, read while no other writer (thread,
        process or host) can change it, ``still`` holds for (the record without relationships):
        a deletion decided on an earlier read (expired, evicted) never removes what another
        writer renewed meanwhile. Returns the ids deleted. ``still`` must not call the backend."""

    def contains(self, ids: Sequence[str]) -> set[str]: ...

    def scan(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
             descending: bool = False) -> Iterator[KnowledgeChunk]: ...

    def scan_ids(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                 descending: bool = False) -> list[str]:
        """The ids ``scan`` would yield, in the same order, without reading the records."""
        ...

    def count(self, flt: Filter | None = None) -> int: ...

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        """The subset of ``ids`` that exist and match ``flt`` (scope checks for graph expansion)."""

    # -- retrieval ---------------------------------------------------------------
    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        """BM25 over live records matching ``flt``: the top ``k`` plus the scores of the
        ``include`` ids that match ``flt`` (0 when no term matched), best first.

        Scores follow rank_bm25 with the store's ``IndexConfig``: each record's term
        counts include its session neighbours' counts times ``lexical_context_weight``.
        """

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False) -> list[tuple[str, float]]:
        """Cosine similarity of records' own vectors, over records matching ``flt``; best first."""

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine with each record's context vector: normalise(own + w * sum of neighbours')."""

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    # -- relationships -------------------------------------------------------------
    def add_edges(self, edges: Sequence[Relationship]) -> None:
        """Insert or overwrite (same source, target, type) edges."""

    def edges(self, ids: Sequence[str], *, types: Sequence[str] | None = None,
              direction: str = "both") -> list[Relationship]:
        """Edges touching ``ids``: "out" (source in ids), "in" (target in ids) or "both"."""

    def delete_edges(self, edges: Sequence[Relationship]) -> None: ...

    # -- auxiliary state: versions, review notes, patterns, stats, queues ------------------
    def kv_put(self, namespace: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> None:
        """Insert or replace one JSON value. ``user_id`` lets ``delete_user`` find it."""

    def kv_get(self, namespace: str, key: str) -> dict[str, Any] | None: ...

    def kv_delete(self, namespace: str, key: str) -> bool: ...

    def kv_update(self, namespace: str, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                  *, user_id: str | None = None) -> dict[str, Any] | None:
        """Read-modify-write one value atomically, also against other processes and hosts:
        ``change(current or None)`` returns the new value (None: delete it), which is written
        and returned. If ``change`` raises, nothing changes."""

    def kv_scan(self, namespace: str, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        """Every (key, value) of a namespace whose key starts with ``prefix``, in key order."""

    def log_append(self, stream: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> int:
        """Append to an ordered log (e.g. a chunk's version history); return its sequence number."""

    def log_read(self, stream: str, key: str | None = None, *, after: int = 0,
                 limit: int | None = None, user_id: str | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        """(seq, key, value) entries of a stream (optionally one key, or those appended with
        ``user_id``) with seq > ``after``, oldest first."""

    def log_delete(self, stream: str, keys: Sequence[str]) -> int:
        """Delete a stream's entries of these keys (a deleted memory's versions); returns how many."""

    def delete_user(self, user_id: str) -> int:
        """Forget a user: records, postings, vectors, edges, kv and log entries. Returns records deleted."""

    def users(self) -> list[str]:
        """Every user something is stored for (memories, kv or log entries), sorted: whom a
        whole-store ``BeeWeave.reset`` forgets, one ``delete_user`` each."""

    # -- integrity -------------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check lexical and vector indexes and relationships against the records."""

    def repair(self) -> VerifyReport:
        """Rebuild derived indexes from the records, drop dangling relationships; return a fresh check."""

    # -- lifecycle -------------------------------------------------------------------
    def flush(self) -> None:
        """Persist derived structures (e.g. an ANN graph) so the next open is fast."""

    def close(self) -> None: ...


def records_in_order(get: Callable[[Sequence[str]], dict[str, KnowledgeChunk]],
                     ids: Sequence[str]) -> Iterator[KnowledgeChunk]:
    """``scan`` from ``scan_ids``: the records of ``ids`` in that order, read 500 at a time
    (one that vanished meanwhile is skipped)."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        got = get(part)
        for cid in part:
            if cid in got:
                yield got[cid]


@dataclass
class TermEvidence:
    """Calibrated relevance's lexical evidence for a search's evidence terms (the query's
    heaviest, ``relevance.evidence_terms``), read with the candidates' BM25 in one pass.

    Attributes:
        best: each evidence term's best single-term BM25 score in the searched scope (what
            ``lexical_search({term: qtf}, flt, 1)`` ranks first; not positive for a term whose
            idf fell to zero or below); a term no record in scope has is absent, which
            relevance reads as a part of the query the store does not know.
        lexical: each candidate's BM25 over the evidence terms, summing only its positive
            per-term scores (0 when it has none); a local index's only the records asked for.
    """

    best: dict[str, float]
    lexical: dict[str, float]


class Candidates(Protocol):
    """A hybrid search's candidates with both retrievers' scores, the fields ranking reads
    and the records, as one backend round trip returns them; ``evidence`` when the
    search asked for evidence terms, covering at least the ids ``records`` was asked for
    (read once ``records`` returned: a local index scores only those). ``rivals``: when
    ``records`` brings them along, each record's ``contradicts`` relationships in either
    direction (as ``edges(ids, types=["contradicts"])`` answers), so the engine need not ask
    for them; None otherwise."""

    ids: list[str]
    lexical: np.ndarray
    vector: np.ndarray
    fields: dict[str, RankFields]
    evidence: TermEvidence | None
    rivals: dict[str, list[Relationship]] | None

    def records(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]: ...


class StaleCandidates(BeeWeaveError):
    """``Candidates.records`` of an ``optimistic`` retrieve: the candidates were ranked from
    a state of the store that other writes have since moved past. The caller retrieves
    again, not optimistically (the engine does; it never reaches a user)."""


@runtime_checkable
class RetrievesInOneTrip(Protocol):
    """An optional capability: a backend that answers a search's candidate set in one round
    trip (PostgreSQL), so the engine skips the five separate calls (which it must equal),
    and the lexical evidence of calibrated relevance for the ``evidence`` terms, so the
    engine skips that round trip too.

    ``optimistic``: the backend may rank from state it holds without first asking the
    database whether other writes moved past it (a PostgreSQL local index); ``records``
    then asks in its own statement and raises ``StaleCandidates`` if they did, so a search
    costs one round trip when nothing changed. Without it the candidates are current when
    returned."""

    def retrieve(self, terms: Mapping[str, int], vector: np.ndarray, flt: Filter, k: int, *,
                 evidence: Sequence[str] = (), optimistic: bool = False) -> Candidates: ...


@runtime_checkable
class SearchesTermsInOneTrip(Protocol):
    """An optional capability: several ``lexical_search`` calls (same filter, ``k`` and
    ``include``) answered in one round trip (PostgreSQL), each result equal to its own call.
    Calibrated relevance asks one per query term."""

    def lexical_searches(self, queries: Sequence[Mapping[str, int]], flt: Filter, k: int, *,
                         include: Sequence[str] = ()) -> list[list[tuple[str, float]]]: ...
