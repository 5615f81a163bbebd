"""The storage contract by roles: what a backend implements, one small protocol per role.

``StoreBackend`` is every role together; the engine annotates with it. A new backend
implements the nine required roles below, declares its ``Capabilities`` once, and passes
the conformance suite (tests/conformance.py), which is split the same way. docs/backends.md
is the page a backend author reads.

Required roles: ``Meta``, ``Records``, ``SearchIndex``, ``Edges``, ``KeyValue``, ``Log``,
``Users``, ``Integrity``, ``Lifecycle``. Optional roles (``RetrievesInOneTrip``,
``SearchesTermsInOneTrip``, ``OwnsQueue``) are never probed for: a backend that plays one
names itself in the matching field of its ``Capabilities``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..errors import InvalidInputError
from ..filters import Filter
from ..records import KnowledgeChunk, Relationship
from ..scoring import RankFields
from .exchange import Candidates, ChunkRow, Derive, LinkReads, VerifyReport

if TYPE_CHECKING:
    from ..ingest.queue import EventQueue

__all__ = ["Capabilities", "Edges", "Integrity", "KeyValue", "Lifecycle", "Log", "Meta", "OwnsQueue", "Records",
           "RetrievesInOneTrip", "SearchIndex", "SearchesTermsInOneTrip", "StoreBackend", "Users"]


class Meta(Protocol):
    """Store-wide settings as strings (schema version, embedder, tokenizer, declared fields)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


class Records(Protocol):
    """The memories themselves: written whole, read by id or by filter, never a lost update."""

    def insert(self, rows: Sequence[ChunkRow]) -> None:
        """Insert atomically: all rows or none. Raises DuplicateIdError first if an id exists.

        Every write of rows (``insert``, ``insert_linked``, ``replace``, ``modify``) passes
        the store's meta ``embedder``, read in its own transaction under its write lock, to
        ``base.check_model`` before storing a vector: a row whose ``model`` is not the
        store's is refused (``EmbedderChangedError``, nothing written)."""

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        """Rewrite records whose indexed text did not change (weights, status, tags...)."""

    def replace(self, rows: Sequence[ChunkRow], *, meta: Mapping[str, str] | None = None) -> None:
        """Rewrite records whose text changed: record, vector and postings together, keeping
        their relationships, and set the ``meta`` keys (e.g. ``{"embedder": ...}`` for a
        re-embed) in the same transaction: after a crash or a refused write either all of it
        happened or none (``rows`` may be empty to write only ``meta``)."""

    def modify(self, ids: Sequence[str] | None,
               change: Callable[[dict[str, KnowledgeChunk]], Sequence[KnowledgeChunk | ChunkRow]], *,
               meta: Mapping[str, str] | None = None) -> None:
        """Read-modify-write records with no lost update.

        ``change`` gets the records of ``ids`` that exist (id -> record, without
        relationships), read while no other writer, thread or process, can change them,
        and returns new versions of some of them: a ``KnowledgeChunk`` is written as by
        ``update``, a ``ChunkRow`` (changed text) as by ``replace``, all in one transaction,
        with the ``meta`` keys. Only then may another writer read them. If ``change`` raises,
        nothing is written (nor ``meta``) and the error goes to the caller. ``change`` must
        not call the backend. With no ids it is not called (``meta`` is still written).

        ``ids`` None: every stored record, those another writer added up to this transaction
        included (a re-embed's switch: every record gets the new model's vector and the
        model's name is set in the same transaction).
        """

    def get(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        """The stored records of ``ids`` (absent ids left out), each with its outgoing relationships."""

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

    def contains(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that are stored."""

    def scan(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
             descending: bool = False) -> Iterator[KnowledgeChunk]:
        """The records matching ``flt`` by ``order``: "timestamp" (ties in insertion order) or
        "insertion"; reversed if ``descending``; at most ``limit``."""

    def scan_ids(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                 descending: bool = False) -> list[str]:
        """The ids ``scan`` would yield, in the same order, without reading the records."""

    def count(self, flt: Filter | None = None) -> int:
        """How many records match ``flt`` (None: every record, whatever its status)."""

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        """The subset of ``ids`` that exist and match ``flt`` (scope checks for graph expansion)."""

    def index_field(self, name: str) -> None:
        """Index ``metadata[name]`` for filters on a declared field (beeweave_core.fields;
        ``name`` is an identifier, checked there). Idempotent; safe while others write."""


class SearchIndex(Protocol):
    """The two retrievers' primitive queries, always with the filter applied inside the query."""

    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        """BM25 over live records matching ``flt``: the top ``k`` plus the scores of the
        ``include`` ids that match ``flt`` (0 when no term matched), best first.

        Scores follow rank_bm25 with the store's ``IndexConfig``: each record's term
        counts include its session neighbours' counts times ``lexical_context_weight``.
        """

    def term_idf(self, terms: Sequence[str]) -> tuple[dict[str, float], float]:
        """The weights ``lexical_search`` gives terms: each of ``terms``' idf, Lucene's
        ``log(N + 1) - log(df + 0.5)`` over every live record whatever a filter (N of them, df
        those holding the term, as in the scores), terms no live record holds left out; and
        the idf of a term one record holds (df = 1), the highest a held term has (0 when the
        store is empty). Calibrated relevance reads them (``relevance.lexical_evidence``): a
        query term no memory in scope holds weighs as the heaviest matched term would score
        were it that rare."""

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False,
                      model: str | None = None) -> list[tuple[str, float]]:
        """Cosine similarity of records' own vectors, over records matching ``flt``; best first.

        ``model``: the embedding model ``vector`` is for (a search's query; None: not
        checked). The backend passes it, with the model the store recorded (meta
        ``embedder``) as of the records it answers from, to ``base.check_query_model``,
        which raises ``EmbedderChangedError`` when they differ: another process moved the
        store to another model after this one was opened. Read with those records (e.g. by
        the catch-up that brought their vectors in), not asked for on every search."""

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str], *,
                      model: str | None = None) -> dict[str, float]:
        """Cosine with each record's context vector: normalise(own + w * sum of neighbours').
        ``model``: as for ``vector_search``."""

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Each stored record's own vector (absent ids left out)."""


class Edges(Protocol):
    """Relationships between records, keyed by (source, target, type)."""

    def add_edges(self, edges: Sequence[Relationship]) -> None:
        """Insert or overwrite (same source, target, type) edges."""

    def edges(self, ids: Sequence[str], *, types: Sequence[str] | None = None,
              direction: str = "both") -> list[Relationship]:
        """Edges touching ``ids``: "out" (source in ids), "in" (target in ids) or "both"."""

    def delete_edges(self, edges: Sequence[Relationship]) -> None:
        """Delete these (source, target, type) edges; absent ones are skipped."""

    def insert_linked(self, rows: Sequence[ChunkRow], reads: LinkReads, derive: Derive) -> bool:
        """``insert(rows)``, then answer ``reads`` as ``links.read_links`` does (seeing the new
        rows), call ``derive`` with the answers and write the edges it returns (the stale
        ones deleted first), as ``links.insert_then_link`` does. ``derive`` must not call the
        backend. PostgreSQL does all of it in one transaction (a failure anywhere stores
        nothing); SQLite commits the rows first. Returns False when the rows were stored
        but the store became unavailable before the edges were (link them again later)."""


class KeyValue(Protocol):
    """JSON values by (namespace, key): versions, review notes, patterns, stats."""

    def kv_put(self, namespace: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> None:
        """Insert or replace one JSON value. ``user_id`` lets ``delete_user`` find it."""

    def kv_get(self, namespace: str, key: str) -> dict[str, Any] | None: ...

    def kv_delete(self, namespace: str, key: str) -> bool:
        """Delete one value; True when there was one."""

    def kv_update(self, namespace: str, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                  *, user_id: str | None = None) -> dict[str, Any] | None:
        """Read-modify-write one value atomically, also against other processes and hosts:
        ``change(current or None)`` returns the new value (None: delete it), which is written
        and returned. If ``change`` raises, nothing changes."""

    def kv_scan(self, namespace: str, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
        """Every (key, value) of a namespace whose key starts with ``prefix``, in key order."""


class Log(Protocol):
    """Append-only streams of JSON entries: a memory's version history, the audit trail."""

    def log_append(self, stream: str, key: str, value: dict[str, Any], *, user_id: str | None = None) -> int:
        """Append to an ordered log (e.g. a chunk's version history); return its sequence number."""

    def log_read(self, stream: str, key: str | None = None, *, after: int = 0,
                 limit: int | None = None, user_id: str | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        """(seq, key, value) entries of a stream (optionally one key, or those appended with
        ``user_id``) with seq > ``after``, oldest first."""

    def log_delete(self, stream: str, keys: Sequence[str]) -> int:
        """Delete a stream's entries of these keys (a deleted memory's versions); returns how many."""


class Users(Protocol):
    """Whom the store holds something for, across every other role."""

    def delete_user(self, user_id: str) -> int:
        """Forget a user: records, postings, vectors, edges, kv and log entries. Returns records deleted."""

    def users(self) -> list[str]:
        """Every user something is stored for (memories, kv or log entries), sorted: whom a
        whole-store ``BeeWeave.reset`` forgets, one ``delete_user`` each."""


class Integrity(Protocol):
    """The derived indexes checked, and rebuilt, from the records."""

    def verify(self) -> VerifyReport:
        """Check lexical and vector indexes and relationships against the records."""

    def repair(self) -> VerifyReport:
        """Rebuild derived indexes from the records, drop dangling relationships; return a fresh check."""


class Lifecycle(Protocol):
    """Opening is the constructor's; these end the work. After ``close`` every other
    method raises ``StoreClosedError``."""

    def flush(self) -> None:
        """Persist derived structures (e.g. an ANN graph) so the next open is fast."""

    def close(self) -> None:
        """Release the store; closing twice is harmless."""


@runtime_checkable
class RetrievesInOneTrip(Protocol):
    """An optional role: a backend that answers a search's candidate set in one round
    trip (PostgreSQL), so the engine skips the five separate calls (which it must equal),
    and the lexical evidence of calibrated relevance for the ``evidence`` terms, so the
    engine skips that round trip too.

    ``optimistic``: the backend may rank from state it holds without first asking the
    database whether other writes moved past it (a PostgreSQL local index); ``records``
    then asks in its own statement and raises ``StaleCandidates`` if they did, so a search
    costs one round trip when nothing changed. Without it the candidates are current when
    returned."""

    def retrieve(self, terms: Mapping[str, int], vector: np.ndarray, flt: Filter, k: int, *,
                 evidence: Sequence[str] = (), optimistic: bool = False, model: str | None = None) -> Candidates:
        """``model``: checked as ``vector_search`` does, against the state the candidates are
        ranked from (an optimistic ranking from state whose model is not ``model`` catches up
        first: the store may have moved, or only this state)."""


@runtime_checkable
class SearchesTermsInOneTrip(Protocol):
    """An optional role: several ``lexical_search`` calls (same filter, ``k`` and
    ``include``) answered in one round trip (PostgreSQL), each result equal to its own call.
    Calibrated relevance asks one per query term."""

    def lexical_searches(self, queries: Sequence[Mapping[str, int]], flt: Filter, k: int, *,
                         include: Sequence[str] = ()) -> list[list[tuple[str, float]]]: ...


@runtime_checkable
class OwnsQueue(Protocol):
    """An optional role: the store keeps ingested events in its own database (PostgreSQL:
    a table every host serving the tenant drains), so the ingest runtime uses that queue
    instead of its own queue table in the store's file."""

    def ingest_queue(self, *, lease: float | None = None, poll_interval: float = 1.0) -> EventQueue: ...


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond the required roles, declared once when it opens.

    The engine reads these fields and never probes a backend for methods or attributes, so
    a backend that plays an optional role says so here, typed: the field holds the object
    that plays it (usually the backend itself), and mypy checks at the declaration that it
    does. The default declares nothing optional: a durable store with no file of its own.

    Attributes:
        file: the store's database file; the ingest queue is a table in it.
        durable: False when nothing stored outlives ``close()`` (an in-memory SQLite), so
            neither need ingested events; a durable store with neither ``file`` nor
            ``queue`` keeps them in memory until processed, with a warning.
        read_only: every write is refused (a replica): a search records no accesses.
        retrieval: the ``RetrievesInOneTrip`` role, when the backend plays it.
        term_searches: the ``SearchesTermsInOneTrip`` role.
        queue: the ``OwnsQueue`` role.
    """

    file: Path | None = None
    durable: bool = True
    read_only: bool = False
    retrieval: RetrievesInOneTrip | None = field(default=None, repr=False)
    term_searches: SearchesTermsInOneTrip | None = field(default=None, repr=False)
    queue: OwnsQueue | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # A wrong object here would fail only at the first search or ingest: refuse it now.
        if self.file is not None and not isinstance(self.file, Path):
            raise InvalidInputError(f"Capabilities.file must be a Path or None, not {type(self.file).__name__}")
        for name, value, role in (("retrieval", self.retrieval, RetrievesInOneTrip),
                                  ("term_searches", self.term_searches, SearchesTermsInOneTrip),
                                  ("queue", self.queue, OwnsQueue)):
            if value is not None and not isinstance(value, role):
                raise InvalidInputError(f"Capabilities.{name}: {type(value).__name__} does not play {role.__name__}")


@runtime_checkable
class StoreBackend(Meta, Records, SearchIndex, Edges, KeyValue, Log, Users, Integrity, Lifecycle, Protocol):
    """A storage backend: every required role, and the ``Capabilities`` it declares.

    The engine (``BeeWeave``) owns validation, tokenising, embedding, fusion, expansion
    and ranking; a backend only stores and answers the roles' primitive queries."""

    capabilities: Capabilities
