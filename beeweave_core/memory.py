"""``BeeWeave``: the front class. It owns the shared context, builds the named parts and
delegates each public method to the part that does the work.

Who calls whom (see docs/architecture.md):

    BeeWeave ──> records    (validate -> embed -> write; get, update, delete, reembed)
             ──> search     (retrieve -> fuse -> rank -> rerank/MMR) ──> graph.expand
             ──> graph      (link, relate, expand, relink, postprocess, trace/context)
             ──> lifecycle  (feedback, review) ──> maintenance, facts
             ──> ingestion  (queue + worker) ──> IngestSink ──> records.add_many

Parts hear of each other's work only through the ordered hooks of ``Shared.hooks``,
wired here in one place.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, overload

import numpy as np

from .defaults import DEFAULT_TOP_K
from .embedders import Embedder, as_embedder
from .engine.graph import Graph
from .engine.listing import Page, list_page
from .engine.review_flow import Review
from .engine.search import Search
from .engine.search_config import NetworkConfig, SearchConfig
from .engine.shared import Shared
from .engine.watch import Watch, Watches
from .engine.writes import Records
from .errors import EmbedderMismatchError, InvalidInputError, TokenizerMismatchError
from .events import EventBus
from .fields import declare_fields
from .fusion import FusionMode
from .index.config import IndexConfig
from .ingest.api import Ingestion
from .ingest.config import IngestConfig
from .ingest.documents import DocFormat
from .ingest.knowledge_events import DeadLetter, KnowledgeEvent
from .ingest.patterns import HotPattern
from .ingest.write_policy import WritePolicy
from .lifecycle.base import LifecycleContext
from .lifecycle.config import FeedbackSignal, LifecycleConfig, ReviewDecision
from .lifecycle.lifecycle import Lifecycle
from .lifecycle.provenance import Lineage
from .lifecycle.reports import MaintenanceReport, MemoryVersion, ReviewItem
from .lifecycle.schedule import MaintenanceSchedule
from .lifecycle.sessions import ConversationContext
from .lifecycle.validity import InvalidationReport
from .network import Candidate, ExpandOptions
from .records import KnowledgeChunk, Relationship, RelationType, SearchHit, utcnow
from .rerank import Reranker
from .scopes import ScopeConfig, Scopes
from .scoring import ScoringConfig
from .stats import RecordedUse
from .store.base import StoreBackend, VerifyReport
from .tokenizer import Tokenizer, TokenizerConfig
from .user_export import ExportPlan, ImportReport, UserExport
from .validation import check_chunk, check_user

__all__ = ["BeeWeave", "Parts"]


class Parts(NamedTuple):
    """The named parts of one ``BeeWeave`` (for tests, diagnostics and extensions)."""

    shared: Shared
    records: Records
    search: Search
    graph: Graph
    lifecycle: Lifecycle
    ingestion: Ingestion


def _typed(name: str, value: Any, cls: type) -> Any:
    if value is not None and not isinstance(value, cls):
        raise InvalidInputError(f"{name} must be a {cls.__name__}, got {type(value).__name__}")
    return value


def _known_arguments(cls: type, kwargs: Mapping[str, Any]) -> None:
    """Refuse keyword arguments the constructor does not take, before a store is opened."""
    unknown = sorted(set(kwargs) - set(inspect.signature(cls).parameters) - {"path"})
    if unknown:
        raise InvalidInputError(f"unknown argument(s) {unknown} for {cls.__name__}.from_url")


class BeeWeave:
    """An agent memory: store knowledge chunks, weave them into a network, find them again.

    Setup:
        .. code-block:: bash

            pip install beeweave-memory

    Usage:
        .. code-block:: python

            from beeweave_core import BeeWeave

            with BeeWeave("memory.db") as memory:       # BeeWeave() keeps everything in memory
                memory.add("The user prefers answers in Chinese.", user_id="alice")
                for hit in memory.search("language preference", user_id="alice"):
                    print(hit.score, hit.chunk.raw_content)

    Args:
        path: a SQLite file, created if missing; ``None`` keeps everything in memory.
        embedder: a model name or path, an ``Embedder``, a LangChain ``Embeddings`` or a
            LlamaIndex ``BaseEmbedding``. Default: the bundled all-MiniLM-L6-v2.
        tokenizer: a ``TokenizerConfig`` for a new store; an existing store keeps its own.
        index: an ``IndexConfig`` (BM25 constants, session context) for a new store.
        network: a ``NetworkConfig``: which relationships are mined when memories are stored.
        lifecycle: a ``LifecycleConfig``: feedback deltas, decay, merging, expiry, capacity.
        ingest: an ``IngestConfig``: the queue, redaction, extraction, admission, patterns.
        scoring: a ``ScoringConfig``: how weight, recency and confidence change the rank.
        config: a ``SearchConfig``: search defaults (fusion, candidates, weights).
        clock: returns "now" as an aware datetime; tests pass a controllable one.
        backend: a ready ``StoreBackend`` instead of ``path`` (e.g. ``PostgresStore``).
        scopes: a ``ScopeConfig``: which shared scopes each user reads by default, and which
            agents may write which categories to which scope.
    """

    def __init__(self, path: str | Path | None = None, *, embedder: Any = None,
                 tokenizer: TokenizerConfig | None = None, index: IndexConfig | None = None,
                 network: NetworkConfig | None = None, lifecycle: LifecycleConfig | None = None,
                 ingest: IngestConfig | None = None, scoring: ScoringConfig | None = None,
                 config: SearchConfig | None = None, clock: Callable[[], datetime] | None = None,
                 backend: StoreBackend | None = None, scopes: ScopeConfig | None = None) -> None:
        for name, value, cls in (("tokenizer", tokenizer, TokenizerConfig), ("index", index, IndexConfig),
                                 ("network", network, NetworkConfig), ("lifecycle", lifecycle, LifecycleConfig),
                                 ("ingest", ingest, IngestConfig), ("scoring", scoring, ScoringConfig),
                                 ("config", config, SearchConfig), ("scopes", scopes, ScopeConfig)):
            _typed(name, value, cls)
        if clock is not None and not callable(clock):
            raise InvalidInputError("clock must be a callable returning an aware datetime")
        if backend is not None and (path is not None or index is not None):
            raise InvalidInputError("pass either path (and index) or a ready backend, not both")
        if backend is None:
            from .store.sqlite import SQLiteStore

            backend = SQLiteStore(path, index_config=index)
        self._closed_parts: list[Callable[[], None]] = []
        self._warm_lock = threading.Lock()
        self._warm_for: Any = None  # (the embedder warm_up() last loaded, whether jieba was loaded too)
        try:
            tok = Tokenizer(_resolve_tokenizer(backend, tokenizer))
            emb = _resolve_embedder(backend, embedder)
            shared = Shared(backend, emb, tok, clock=clock or utcnow, config=config or SearchConfig(),
                            scoring=scoring or ScoringConfig())
            self._shared = shared
            ingest = ingest or IngestConfig()
            scope_config = scopes or ScopeConfig()
            self._records = Records(shared, WritePolicy(ingest, scope_config))
            # The write policy's redaction also covers the free text stored beside memories.
            redact = self._records.policy.redactor.redact if self._records.policy else None
            self._graph = Graph(shared, network or NetworkConfig(), redact)
            self._search = Search(shared, self._graph, Scopes(scope_config))
            self._lifecycle = Lifecycle(LifecycleContext(shared, lifecycle or LifecycleConfig(), self._records),
                                        redact=redact)
            self._ingestion = Ingestion(shared, self._records, ingest, self._lifecycle.feedback,
                                        self._lifecycle.facts.timeline.reconcile)
            self._watches = Watches(shared, self._search.embed_query, redact)
            # Every part that keeps state of a user, for one export of that user.
            self._user_data = UserExport(backend, shared.clock, self._records.restore, [
                self._graph, self._watches, *self._lifecycle.user_data, self._ingestion, RecordedUse(backend)])
            hooks = shared.hooks
            # Order matters: links exist before "created" is announced; lifecycle rules
            # (expiry, merge, capacity) see the linked, announced memories.
            hooks.link = self._graph.plan
            hooks.on_insert += [self._records.announce_created, self._lifecycle.on_insert, self._watches.on_insert]
            hooks.on_search += [self._lifecycle.on_search]
            hooks.on_delete += [self._graph.relink, self._lifecycle.on_delete]
            hooks.on_flush += [self._lifecycle.flush]
            # The worker stops before access counts are written, and both before the store closes.
            hooks.on_close += [self._ingestion.close, self._lifecycle.close]
            self._review = Review(self._ingestion, self._lifecycle)
            self._ingestion.open()  # resume events a dead process left queued
        except BaseException:
            self._close_after_failed_init(backend)
            raise

    def _close_after_failed_init(self, backend: StoreBackend) -> None:
        shared = getattr(self, "_shared", None)
        try:
            if shared is not None:
                for hook in shared.hooks.on_close:
                    try:
                        hook()
                    except Exception:  # the original error is the one to report
                        pass
        finally:
            backend.close()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> BeeWeave:
        """Open a store by URL: ``postgresql://...`` (PostgreSQL + pgvector), ``sqlite:///path``
        or a plain path. Other keyword arguments are those of the constructor; the PostgreSQL
        backend's options (store/postgres/options.py: ``tenant``, ``schema``, ``pool_size``...)
        go to it. An unknown or bad argument raises ``InvalidInputError`` before anything is opened."""
        if not isinstance(url, str):
            raise InvalidInputError("url must be a string")
        if url.startswith(("postgresql://", "postgres://")):
            from .store.postgres import PostgresStore
            from .store.postgres.options import OPTIONS

            backend_kw = {k: kwargs.pop(k) for k in OPTIONS if k in kwargs}
            _known_arguments(cls, kwargs)
            backend = PostgresStore(url, index_config=kwargs.pop("index", None), **backend_kw)
            try:
                return cls(backend=backend, **kwargs)
            except BaseException:
                backend.close()
                raise
        _known_arguments(cls, kwargs)
        if url.startswith("sqlite:///"):
            url = url[len("sqlite:///"):]
        return cls(url or None, **kwargs)

    # -- the shared context ---------------------------------------------------------------------
    @property
    def parts(self) -> Parts:
        """The parts this memory is built from; each can be used (and tested) on its own."""
        return Parts(self._shared, self._records, self._search, self._graph, self._lifecycle, self._ingestion)

    @property
    def backend(self) -> StoreBackend:
        return self._shared.backend

    @property
    def embedder(self) -> Embedder:
        return self._shared.embedder

    @property
    def tokenizer(self) -> Tokenizer:
        return self._shared.tokenizer

    @property
    def events(self) -> EventBus:
        return self._shared.events

    @property
    def clock(self) -> Callable[[], datetime]:
        return self._shared.clock

    @property
    def config(self) -> SearchConfig:
        return self._shared.config

    @property
    def scoring(self) -> ScoringConfig:
        return self._shared.scoring

    @property
    def dim(self) -> int | None:
        return self._shared.dim

    @property
    def network_config(self) -> NetworkConfig:
        return self._graph.config

    @property
    def lifecycle(self) -> LifecycleConfig:
        return self._lifecycle.ctx.config

    @property
    def ingest_config(self) -> IngestConfig:
        return self._ingestion.config

    @property
    def scope_config(self) -> ScopeConfig:
        """Who reads and who writes shared scopes (the ``scopes=`` of the constructor)."""
        return self._search.scopes.config

    # -- records ------------------------------------------------------------------------------
    @overload
    def add(self, content: str, *, user_id: str, session_id: str | None = None, agent_id: str | None = None,
            chunk_id: str | None = None, tags: Iterable[str] = (), metadata: Mapping[str, Any] | None = None,
            timestamp: datetime | str | float | None = None, embedding: Sequence[float] | None = None,
            trusted: bool = False, **fields: Any) -> str: ...

    @overload
    def add(self, content: Sequence[Mapping[str, Any]] | Mapping[str, Any], *, user_id: str,
            session_id: str | None = None, agent_id: str | None = None, tags: Iterable[str] = (),
            metadata: Mapping[str, Any] | None = None, timestamp: datetime | str | float | None = None,
            timeout: float | None = None) -> list[str]: ...

    def add(self, content: str | Sequence[Mapping[str, Any]] | Mapping[str, Any], *, user_id: str,
            session_id: str | None = None, agent_id: str | None = None, chunk_id: str | None = None,
            tags: Iterable[str] = (), metadata: Mapping[str, Any] | None = None,
            timestamp: datetime | str | float | None = None, embedding: Sequence[float] | None = None,
            trusted: bool = False, timeout: float | None = None, **fields: Any) -> str | list[str]:
        """Store one memory and return its id; or, given chat messages, what they teach.

        A text: ``fields`` may set any other :class:`KnowledgeChunk` field (summary, entities,
        intent, expires_at, pinned, weight, confidence, tier...). ``embedding`` skips the model.
        The write policy of the store's ``IngestConfig`` applies: personal data and secrets
        are redacted and admission may hold the memory for review; ``trusted=True`` (an
        import of data already clean) stores it as given.

        Messages, as mem0's ``add(messages, user_id=...)``: a list of ``{"role", "content"}``
        dicts (user, assistant, tool; system messages are not kept). Each turn goes through
        ingestion like an ingested event, so small talk and calls of the memory's own tools are
        not stored; waits for it (at most ``timeout`` seconds) and returns the ids of the
        memories stored, oldest turn first (see :mod:`beeweave_core.ingest.messages`).
        """
        if isinstance(content, str):
            if timeout is not None:
                raise InvalidInputError("timeout is for messages, which wait for ingestion; a text is stored at once")
            return self._records.add(content, user_id=user_id, session_id=session_id, agent_id=agent_id,
                                     chunk_id=chunk_id, tags=tags, metadata=metadata, timestamp=timestamp,
                                     embedding=embedding, trusted=trusted, **fields)
        return self._ingestion.add_messages(content, user_id=user_id, session_id=session_id, agent_id=agent_id,
                                            tags=tags, metadata=metadata, timestamp=timestamp, timeout=timeout,
                                            text_only={"chunk_id": chunk_id, "embedding": embedding,
                                                       "trusted": trusted or None, **fields})

    def add_many(self, records: Iterable[Mapping[str, Any] | KnowledgeChunk], *, batch_size: int = 512,
                 show_progress: bool | None = None, link: bool = True, trusted: bool = False) -> list[str]:
        """Store many memories; embeddings are computed in batches. Every record (a dict with the
        keys of :meth:`add`, or a :class:`KnowledgeChunk`) is validated before anything is
        written; each batch is written atomically. ``link=False`` skips relationship mining.
        Redaction and admission apply as in :meth:`add`; ``trusted=True`` skips them."""
        return self._records.add_many(records, batch_size=batch_size, show_progress=show_progress, link=link,
                                      trusted=trusted)

    def restore(self, chunks: Sequence[KnowledgeChunk], *, vectors: Mapping[str, Any] | None = None) -> None:
        """Write memories exactly as another store held them (ids, status, counters, times):
        what an import of an export does (:meth:`import_user`). No redaction,
        admission, linking, merging or ``memory.created`` event; ``vectors`` (by id) skip the
        model. Each chunk is checked first; an id already stored refuses its batch whole."""
        for c in chunks:
            if not isinstance(c, KnowledgeChunk):
                raise InvalidInputError(f"restore takes KnowledgeChunks, got {type(c).__name__}")
            check_chunk(c)
        self._records.restore(chunks, vectors)

    def get(self, chunk_id: str) -> KnowledgeChunk:
        """The memory with this id (``NotFoundError`` if there is none)."""
        return self._records.get(chunk_id)

    def get_many(self, chunk_ids: str | Iterable[str]) -> list[KnowledgeChunk]:
        """The memories that exist, in the order asked; missing ids are skipped."""
        return self._records.get_many(chunk_ids)

    def update(self, chunk_id: str, *, trusted: bool = False, versioned: bool = True,
               **changes: Any) -> KnowledgeChunk:
        """Change fields of a stored memory and return it. New content is re-tokenised and
        re-embedded; feedback or accesses recorded meanwhile are kept. New text, summary,
        tags, entities and metadata are redacted as ``add`` redacts them unless ``trusted``.
        New text keeps the earlier version in ``history(chunk_id)``; ``versioned=False``
        replaces it without one (a key-value store's put)."""
        return self._records.update(chunk_id, trusted=trusted, versioned=versioned, **changes)

    def delete(self, chunk_id: str) -> bool:
        """Delete a memory with its index entries and relationships; False if it did not exist."""
        return self._records.delete(chunk_id)

    def delete_many(self, chunk_ids: str | Iterable[str], *,
                    only_if: Callable[[KnowledgeChunk], bool] | None = None) -> list[str]:
        """Delete memories (a bare string is one id); return the ids that existed and are gone.

        ``only_if`` deletes only the memories it returns True for, called on each as the delete
        reads it, when no other writer (thread, process or host) can change it before it is
        gone: a deletion decided on an earlier read (a TTL sweep's "expired") spares a memory
        renewed meanwhile. It must not call the memory."""
        if only_if is not None and not callable(only_if):
            raise InvalidInputError("only_if must be a callable taking a KnowledgeChunk")
        return self._records.delete_many(chunk_ids, only_if=only_if)

    def forget_user(self, user_id: str) -> int:
        """Delete everything of a user: memories of every status with their index entries,
        relationships and versions, the audit log, facts, review entries, watches, statistics
        and session buffers. Subscribers get ``memory.deleted`` for each memory (its id and
        user, nothing it said). Returns how many memories were deleted. The user's events
        still in the store's ingest queue, and their dead letters, are deleted with the rest (as
        the PostgreSQL store always did): :meth:`drain` first to store them (``MemoryService``
        does)."""
        deleted = self._records.forget_user(check_user(user_id))
        self._ingestion.forget_user(user_id)  # their questions in the shared pattern counts
        self._watches.refresh()  # the user's watches stop here now, not at the next reload
        return deleted

    @property
    def user_data(self) -> UserExport:
        """Every part's state of a user assembled: :meth:`export_user`, :meth:`import_user`, and
        the checks an import makes first (``check_export`` without the store, ``check_import``)."""
        return self._user_data

    def export_user(self, user_id: str) -> dict[str, Any]:
        """Everything stored about a user, as JSON-able data (:mod:`beeweave_core.user_export`):
        memories of every status with their relationships, and each part's sections (versions,
        audit log, facts, conflicts, fact timelines, review queue, sessions, watches, relation
        notes, question patterns, rejected ids, recorded searches). :meth:`import_user` takes
        it back. Events still queued for the user are not in it: ``flush()`` first."""
        return self._user_data.export_user(user_id)

    def import_user(self, data: Mapping[str, Any] | ExportPlan, *,
                    vectors: Mapping[str, Any] | None = None) -> ImportReport:
        """Write a user's export back, into this store or another, as it was (no redaction,
        linking, merging or events); everything is checked before anything is written, and a
        repeated import writes nothing twice. ``vectors`` (by id, from this store's model) skip
        the model."""
        return self._user_data.import_user(data, vectors=vectors)

    def drain(self, user_id: str | None = None, *, timeout: float | None = 30.0) -> bool:
        """What a deletion does first: process the queued events (at most ``timeout``
        seconds) and discard the dead letters of ``user_id`` (``None``: everyone's), so no
        queued or retried event brings deleted memories back; True if the queue drained.
        ``DELETE /api/v1/users/{id}``, MCP ``forget_user`` and :meth:`reset` call it."""
        return self._ingestion.drain(None if user_id is None else check_user(user_id), timeout)

    def reset(self, *, confirm: bool = False, timeout: float | None = 30.0) -> int:
        """Delete every user's everything (mem0's ``reset()``): :meth:`drain`, then
        :meth:`forget_user` for each user the store holds anything of, with the guarantees of
        ``DELETE /api/v1/users/{id}`` (memories of every status, index entries, versions,
        facts, sessions, statistics; ``memory.deleted`` for each memory). The store's
        configuration (model, tokenizer, declared fields) stays. Needs ``confirm=True``;
        returns how many memories were deleted."""
        if confirm is not True:
            raise InvalidInputError("reset() deletes every memory of every user for good: call reset(confirm=True)")
        self.drain(timeout=timeout)
        return sum(self.forget_user(user) for user in self._shared.backend.users())

    def count(self, *, user_id: str | None = None, filters: Mapping[str, Any] | None = None) -> int:
        return self._records.count(user_id=user_id, filters=filters)

    def get_all(self, *, user_id: str | None = None, filters: Mapping[str, Any] | None = None,
                metadata: Mapping[str, Any] | None = None, limit: int = 100, cursor: str | None = None) -> Page:
        """A user's memories (``None``: every user's), oldest first by (timestamp, id), ``limit``
        (1..1000) at a time: ``page.items``, and ``page.next_cursor`` to pass as ``cursor`` for
        the next page (``None``: this was the last). Every status, as ``GET /api/v1/memories``
        lists them (the same code); ``filters={"status": "active"}`` lists what search finds.
        ``filters`` are those of :meth:`search`; ``metadata`` keeps memories whose metadata
        has those values. A cursor is a position, not an offset: memories added or deleted
        meanwhile neither repeat nor skip any other."""
        return list_page(self._shared.backend, user_id=user_id, filters=filters, metadata=metadata, limit=limit,
                         cursor=cursor)

    def declare_fields(self, fields: Mapping[str, str]) -> dict[str, str]:
        """Make ``metadata`` keys filterable, ``{"project_id": "str", "priority": "int"}``
        (types str, int, float, bool); kept in the store. Returns every declared field."""
        return declare_fields(self._shared.backend, fields)

    def declared_fields(self) -> dict[str, str]:
        return self._shared.declared_fields()

    def reembed(self, embedder: Any = None, *, batch_size: int = 256, show_progress: bool = False) -> int:
        """Move the store to another embedding model (default: the default model): every
        vector is recomputed. Resumable: a run that was killed starts where it stopped; the
        store stays wholly on the old model until the switch, one transaction. Returns how
        many memories were embedded."""
        return self._records.reembed(embedder, batch_size=batch_size, show_progress=show_progress)

    # -- search ---------------------------------------------------------------------------------
    def search(self, query: str, *, user_id: str | None = None, k: int = DEFAULT_TOP_K, filters: Mapping[str, Any] | None = None,
               fusion: FusionMode | str | None = None, min_score: float | None = None,
               query_embedding: Sequence[float] | None = None, expand: bool | ExpandOptions | None = None,
               rerank: Reranker | None = None, mmr: float | None = None, loosen: bool = False,
               min_relevance: float | None = None, abstain_below: float | None = None,
               scopes: Sequence[str] | str | None = None, as_of: datetime | str | None = None) -> list[SearchHit]:
        """Hybrid search: BM25 and vector candidates, fused, filtered inside retrieval.

        Args:
            query: what to look for.
            user_id: the searching user: their memories and, by default, the shared knowledge
                they may read (never another user's private memories).
            k: how many hits (graph expansion may add up to ``ExpandOptions.limit`` more).
            filters: user_id, agent_id, session_id, tags / tags_any / tags_all, entities,
                since, until (timestamps, or time words: "last week", "上周"), type, intent,
                status, ids, tier, and any declared metadata field (``declare_fields``). A time phrase in ``query`` itself filters to its range (see
                ``SearchHit.time_range``).
            fusion: "zscore" (default), "rrf" or "weighted".
            min_score: drop hits whose final score is below this.
            query_embedding: a precomputed query vector (skips the model).
            expand: follow relationships from the hits (``True`` for the defaults of
                ``ExpandOptions``); expanded hits carry a "graph" source.
            rerank: a ``Reranker`` (e.g. ``CrossEncoderReranker``) applied to the candidates.
            mmr: MMR trade-off lambda in [0, 1] for diverse results (1 = relevance only).
            loosen: strict-then-loose: if the filters (tags, entities) and ``min_score``
                leave fewer than k hits, search again without them; such hits have
                ``loosened=True``. The user scope is never loosened.
            min_relevance: drop hits whose calibrated relevance (``SearchHit.relevance``, in
                [0, 1] whatever the fusion) is below this; ``SearchConfig.min_relevance`` when
                None (no floor by default; ``beeweave_core.relevance.DEFAULT_MIN_RELEVANCE``
                is the tuned one).
            abstain_below: when no hit's relevance reaches this, return no hit at all (nothing
                relevant: the no-memory path); otherwise the hits as ranked, the less relevant
                ones beside the relevant. ``SearchConfig.abstain_below`` when None, by default
                the store's model's tuned gate (``beeweave_core.relevance.DEFAULT_ABSTAIN_BELOW``
                for the default model, ``calibration_for(model).abstain_below`` another's; none
                for a model nobody fitted); 0 turns it off, as ``min_relevance=0`` does.
            scopes: whose memories to read: ``"user"`` (``user_id``'s own), ``"tenant"`` and
                shared scope names (``"project:atlas/module:parser"``); default: the user, the
                tenant and the scopes ``ScopeConfig.grants`` gives the user (see
                :mod:`beeweave_core.scopes`).
            as_of: search the memory as it was at this time (a datetime or ISO string):
                nothing stored later, and of a fact that changed ("I moved to Munich") the
                statement valid then first. Facts a later statement superseded (at ``as_of``,
                else now) are flagged ``SearchHit.superseded`` and ranked after it.
        """
        return self._search.search(query, user_id=user_id, k=k, filters=filters, fusion=fusion, min_score=min_score,
                                   query_embedding=query_embedding, expand=expand, rerank=rerank, mmr=mmr,
                                   loosen=loosen, min_relevance=min_relevance, abstain_below=abstain_below,
                                   scopes=scopes, as_of=as_of)

    def embed_query(self, query: str) -> np.ndarray:
        """The query's vector, from a small LRU cache when the same query was asked before."""
        return self._search.embed_query(query)

    # -- the network ----------------------------------------------------------------------------
    def link(self, chunks: Sequence[KnowledgeChunk]) -> list[Relationship]:
        """Mine and store the relationships of stored chunks; return the new edges."""
        return self._graph.link(chunks)

    def relate(self, source_id: str, target_id: str, type: RelationType | str, *, weight: float = 1.0,
               note: str | None = None) -> Relationship:
        """Record a logical relation (``supports``, ``contradicts``, ``cites``, ``causes``,
        ``derived_from``, ``related``) between two memories of one user."""
        return self._graph.relate(source_id, target_id, type, weight=weight, note=note)

    def relationships(self, chunk_id: str, *, types: Iterable[str] | None = None,
                      direction: str = "both") -> list[Relationship]:
        """Edges touching a memory: "out", "in" or "both" directions."""
        return self._graph.relationships(chunk_id, types=types, direction=direction)

    def relation_note(self, edge: Relationship) -> str | None:
        """The note recorded with a relation by :meth:`relate`, if any."""
        return self._graph.note(edge)

    def postprocess(self, query: str, candidates: Sequence[Candidate], *, user_id: str | None = None,
                    filters: Any = None, rerank: Any = None, mmr: float | None = None,
                    expand: bool | ExpandOptions | None = None, top_n: int | None = None) -> list[SearchHit]:
        """Apply BeeWeave's ranking to results from any retriever.

        Candidates that are stored memories (in scope) get the memory's weight and confidence
        factors; all can be reranked or diversified (MMR); with ``expand``, memories linked to
        the candidates come in as extra hits. External candidates come back as transient
        chunks with ``metadata["external"]``. The input is never modified.
        """
        return self._graph.postprocess(query, candidates, user_id=user_id, filters=filters, rerank=rerank,
                                       mmr=mmr, expand=expand, top_n=top_n)

    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]:
        """Every memory of a session (any status), oldest first."""
        return self._graph.trace(session_id, user_id=user_id)

    def context(self, session_id: str, *, user_id: str | None = None, window: int = 10) -> list[KnowledgeChunk]:
        """The latest ``window`` active memories of a session, oldest first."""
        return self._graph.context(session_id, user_id=user_id, window=window)

    # -- standing queries -----------------------------------------------------------------------
    def watch(self, query: str, *, user_id: str, agent_id: str | None = None, min_relevance: float = 0.5) -> Watch:
        """A standing query: each new or updated memory of ``user_id`` at least
        ``min_relevance`` relevant to ``query`` emits a ``watch.matched`` event (to the bus,
        and from a server to SSE and webhooks) addressed to ``agent_id``."""
        return self._watches.watch(query, user_id=user_id, agent_id=agent_id, min_relevance=min_relevance)

    def unwatch(self, watch_id: str) -> bool:
        """End a standing query; False if there was none with this id."""
        return self._watches.cancel(watch_id)

    def watches(self, *, user_id: str | None = None) -> list[Watch]:
        """The standing queries of this process (of one user, or all)."""
        return self._watches.all(user_id=user_id)

    # -- lifecycle ------------------------------------------------------------------------------
    def feedback(self, chunk_ids: str | Iterable[str], signal: FeedbackSignal | str) -> list[KnowledgeChunk]:
        """Tell the memory how its memories did: "used", "up" or "down"; return them updated."""
        return self._lifecycle.feedback(chunk_ids, signal)

    def effective_weight(self, chunk_id: str) -> float:
        """A memory's weight now, decayed since its last feedback (pinned: as set)."""
        return self._lifecycle.effective_weight(chunk_id)

    # -- review: one flow for what ingestion holds pending and what the lifecycle flags -----------
    def review(self, *, user_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
               reasons: str | Sequence[str] | None = None) -> list[ReviewItem]:
        """Memories waiting for a decision, oldest first, each with its memory: ``reasons`` say why
        ("pending": held by the admission rules; "stale", "expired", "verify", "fact_conflict":
        flagged by the lifecycle).
        ``reasons="pending"`` (or a list) keeps only those."""
        return self._review.items(user_id=user_id, agent_id=agent_id, limit=limit, reasons=reasons)

    def decide(self, ids: str | Iterable[str], decision: ReviewDecision | str, *,
               reason: str | None = None) -> list[str]:
        """Decide on memories waiting for review: "keep" (a pending one is approved, a flagged one
        cleared), "delete" (a pending one is rejected with ``reason`` and never comes back) or
        "archive" (flagged ones only). Every id is checked first; returns the ids decided."""
        return self._review.decide(ids, decision, reason=reason)

    def review_queue(self, *, user_id: str | None = None) -> list[ReviewItem]:
        """Deprecated: ``review()`` (every reason but "pending")."""
        _deprecated("review_queue()", "review()")
        return self._lifecycle.review_queue(user_id=user_id)

    def resolve_review(self, chunk_id: str, decision: ReviewDecision | str) -> KnowledgeChunk | None:
        """Deprecated: ``decide([chunk_id], decision)``."""
        _deprecated("resolve_review()", "decide(ids, decision)")
        return self._lifecycle.resolve_review(chunk_id, decision)

    def audit(self, chunk_id: str | None = None) -> list[dict[str, Any]]:
        """What the lifecycle did (merged, archived, deleted) and why, oldest first."""
        return self._lifecycle.audit(chunk_id)

    @overload
    def maintain(self, *, user_id: str | None = None, interval: None = None) -> MaintenanceReport: ...

    @overload
    def maintain(self, *, user_id: str | None = None, interval: float) -> MaintenanceSchedule: ...

    def maintain(self, *, user_id: str | None = None,
                 interval: float | None = None) -> MaintenanceReport | MaintenanceSchedule:
        """Expire, merge near-duplicates and enforce capacity now, in small batches that let
        searches and writes proceed; report what changed. With ``interval`` (seconds), run
        it in the background every ``interval`` instead and return the schedule (``stop()``
        ends it; ``close()`` does too)."""
        if interval is not None:
            return self._lifecycle.schedule.start(interval, user_id)
        return self._lifecycle.maintenance.maintain(user_id=user_id)

    def lineage(self, chunk_id: str) -> Lineage:
        """Where a memory came from: events, agents, tools, sources, merged memories, edits,
        lifecycle actions, feedback, typed relations and code validity."""
        return self._lifecycle.provenance.lineage(chunk_id)

    def invalidate(self, paths: Iterable[str], commit: str | None = None, *,
                   user_id: str | None = None) -> InvalidationReport:
        """Files changed (e.g. by a commit): mark the memories about them "to verify", lower
        their weight and queue them for review (``decide(id, "keep")`` restores them)."""
        return self._lifecycle.validity.invalidate(paths, commit, user_id=user_id)

    def remember_fact(self, subject_key: str, content: str, *, user_id: str, source: str | None = None,
                      metadata: Mapping[str, Any] | None = None, tags: Iterable[str] = (), **fields: Any) -> str:
        """Store the current value of a fact about ``subject_key``; the same id every time."""
        return self._lifecycle.facts.remember_fact(subject_key, content, user_id=user_id, source=source,
                                                   metadata=metadata, tags=tags, **fields)

    def fact(self, subject_key: str, *, user_id: str) -> KnowledgeChunk | None:
        """The current memory of a fact, or None."""
        return self._lifecycle.facts.fact(subject_key, user_id=user_id)

    def history(self, chunk_id: str) -> list[MemoryVersion]:
        """The earlier versions of a memory, oldest first."""
        return self._lifecycle.facts.history(chunk_id)

    def remember_opinion(self, content: str, *, user_id: str, topic: str, source: str | None = None,
                         confidence: float = 1.0, metadata: Mapping[str, Any] | None = None, **fields: Any) -> str:
        """Store one view on ``topic`` with its source and confidence; every view is kept."""
        return self._lifecycle.facts.remember_opinion(content, user_id=user_id, topic=topic, source=source,
                                                      confidence=confidence, metadata=metadata, **fields)

    def opinions(self, topic: str, *, user_id: str) -> list[KnowledgeChunk]:
        """The active views on ``topic``: highest confidence first, then newest."""
        return self._lifecycle.facts.opinions(topic, user_id=user_id)

    def mark_conflict(self, chunk_ids: Iterable[str], *, group: str | None = None) -> str:
        """Mark memories of one user as conflicting; return the group's name."""
        return self._lifecycle.facts.mark_conflict(chunk_ids, group=group)

    def conflicts(self, group: str, *, user_id: str) -> list[KnowledgeChunk]:
        """The active members of a conflict group: highest confidence first, then newest."""
        return self._lifecycle.facts.conflicts(group, user_id=user_id)

    # -- working memory -------------------------------------------------------------------------
    def add_turn(self, session_id: str, role: str, content: str, *, user_id: str,
                 timestamp: datetime | None = None) -> ConversationContext:
        """Append a turn ("user", "assistant", "system" or "tool") to a session's stored buffer;
        the oldest turns fold into a rolling summary within its token budget."""
        return self._lifecycle.sessions.add_turn(session_id, role, content, user_id=user_id, timestamp=timestamp)

    def get_conversation_context(self, session_id: str, window: int = 10, *, user_id: str) -> ConversationContext:
        """A session's working memory: the summary of its older turns and its latest ``window`` turns."""
        return self._lifecycle.sessions.get(session_id, user_id=user_id, window=window)

    def clear_session(self, session_id: str, *, user_id: str) -> bool:
        """Forget a session's buffer and summary (its memories stay)."""
        return self._lifecycle.sessions.clear(session_id, user_id=user_id)

    # -- ingestion ------------------------------------------------------------------------------
    def ingest(self, event: KnowledgeEvent | Mapping[str, Any]) -> str:
        """Queue a knowledge event and return its id at once (durable when this returns)."""
        return self._ingestion.ingest(event)

    def start_ingest(self) -> None:
        """Start the worker (needed only with ``IngestConfig(autostart=False)``)."""
        self._ingestion.start_ingest()

    def pending_events(self) -> int:
        """How many ingested events wait for the worker (dead letters not counted)."""
        return self._ingestion.pending_events()

    def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """Events whose processing failed, oldest first, with their errors."""
        return self._ingestion.dead_letters(limit)

    def retry_dead_letters(self, ids: str | Iterable[str] | None = None) -> int:
        """Queue dead events again (all, or those with the given event ids); return how many."""
        return self._ingestion.retry_dead_letters(ids)

    def discard_dead_letters(self, ids: str | Iterable[str]) -> int:
        """Delete dead events for good; return how many."""
        return self._ingestion.discard_dead_letters(ids)

    def pending(self, *, user_id: str | None = None, agent_id: str | None = None,
                limit: int | None = None) -> list[KnowledgeChunk]:
        """Deprecated: ``review(reasons="pending")`` (its items' ``chunk``)."""
        _deprecated("pending()", 'review(reasons="pending")')
        return self._ingestion.pending(user_id=user_id, agent_id=agent_id, limit=limit)

    def approve(self, ids: str | Iterable[str]) -> list[str]:
        """Deprecated: ``decide(ids, "keep")``."""
        _deprecated("approve()", 'decide(ids, "keep")')
        return self._ingestion.approve(ids)

    def reject(self, ids: str | Iterable[str], *, reason: str | None = None) -> list[str]:
        """Deprecated: ``decide(ids, "delete", reason=...)``."""
        _deprecated("reject()", 'decide(ids, "delete", reason=...)')
        return self._ingestion.reject(ids, reason=reason)

    def hot_patterns(self, *, user_id: str | None = None) -> list[HotPattern]:
        """Recurring questions that are hot now, most asked first."""
        return self._ingestion.hot_patterns(user_id=user_id)

    def import_documents(self, sources: Any, *, user_id: str, agent_id: str | None = None,
                         tags: Sequence[str] = (), format: DocFormat | str | None = None,
                         chunk_chars: int = 1200, overlap: int = 150, review: bool = False,
                         show_progress: bool | None = None, batch_size: int = 256) -> list[str]:
        """Import FAQ or documentation files (text, Markdown, JSONL) as seed memories."""
        return self._ingestion.import_documents(sources, user_id=user_id, agent_id=agent_id, tags=tags,
                                                format=format, chunk_chars=chunk_chars, overlap=overlap,
                                                review=review, show_progress=show_progress,
                                                batch_size=batch_size)

    # -- integrity and shutdown -----------------------------------------------------------------
    def verify(self) -> VerifyReport:
        """Check that the lexical and vector indexes and the relationships agree with the records."""
        return self._shared.backend.verify()

    def repair(self) -> VerifyReport:
        """Rebuild the indexes from the records and drop dangling relationships; returns a fresh check."""
        return self._shared.backend.repair()

    def warm_up(self, *, chinese: bool = True) -> float:
        """Load now what the first search would load: the embedding model (its ``warm_up()``
        when it has one, else one query embedding) and jieba's dictionary when the tokenizer
        segments Chinese (``chinese=False``: the model only; jieba then loads with the first
        Chinese text). Returns the seconds it took; once warm, 0.0 at once.

        The first search of a process otherwise pays for it (seconds for the default model).
        ``beeweave serve`` and ``beeweave mcp`` call it at start; search statistics
        (:class:`~beeweave_core.stats.StatsRecorder`) call it, model only, before timing a
        search, so a model load is recorded apart from the search latency without a short
        command such as ``beeweave search`` paying for a dictionary its query may not need.
        """
        emb = self._shared.embedder
        want = (emb, chinese and self._shared.tokenizer.config.chinese)
        if self._warm_for in ((emb, True), want):
            return 0.0
        with self._warm_lock:
            if self._warm_for in ((emb, True), want):
                return 0.0
            t0 = time.perf_counter()
            if self._warm_for is None or self._warm_for[0] is not emb:
                warm = getattr(emb, "warm_up", None)
                if callable(warm):
                    warm()
                else:
                    emb.embed_query("warm up")
            if want[1]:
                self._shared.tokenizer.tokenize("预热")  # jieba's dictionary (and OpenCC's tables)
            self._warm_for = want
            return time.perf_counter() - t0

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued event is processed (at most ``timeout`` seconds), write
        pending access counts and persist the store; True if the queue is empty.

        Returns within ``timeout``: access counts that cannot be written in the time left (a
        long write holds the write lock) wait for the next flush, the timer or ``close()``."""
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        drained = self._ingestion.flush(timeout)
        if deadline is not None and not drained:
            # The worker is storing a batch, holding the store's lock and then the write lock
            # (1,000 tool calls: seconds): the writes below would wait for it. A later flush,
            # the access timer or close() does them.
            return False
        for hook in self._shared.hooks.on_flush:
            hook(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        self._shared.backend.flush()
        return drained

    def close(self) -> None:
        """Stop the worker, write pending access counts and close the store."""
        try:
            for hook in self._shared.hooks.on_close:
                hook()
        finally:
            self._shared.backend.close()

    def __enter__(self) -> BeeWeave:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _deprecated(old: str, new: str) -> None:
    """The review flow's old names (before issue 45) still work, and say what replaces them."""
    warnings.warn(f"BeeWeave.{old} is deprecated: use BeeWeave.{new}, the one review flow for pending and "
                  "flagged memories", DeprecationWarning, stacklevel=3)


def _resolve_tokenizer(backend: StoreBackend, wanted: TokenizerConfig | None) -> TokenizerConfig:
    """The store's recorded tokenizer; a new store records the one asked for (or the default)."""
    stored = backend.get_meta("tokenizer")
    if stored is None:
        cfg = wanted or TokenizerConfig()
        backend.set_meta("tokenizer", json.dumps(cfg.to_dict()))
        return cfg
    cfg = TokenizerConfig.from_dict(json.loads(stored))
    if wanted is not None and wanted != cfg:
        raise TokenizerMismatchError(
            f"this store was indexed with tokenizer {cfg}; open it without tokenizer= (it is "
            "remembered) or build a new store for a different tokenizer")
    return cfg


def _resolve_embedder(backend: StoreBackend, wanted: Any) -> Embedder:
    """The embedder asked for; without one, the model the store was built with (a new store:
    the default). Refused if the store was built with another model."""
    stored = backend.get_meta("embedder")
    info = json.loads(stored) if stored is not None else None
    if wanted is None and info is not None:
        if str(info["name"]).startswith(("langchain:", "llamaindex:")):
            raise EmbedderMismatchError(
                f"this store was embedded with {info['name']!r}, an embeddings object only Python code can "
                "pass: open it with embedder=that object")
        return as_embedder(info["name"])  # e.g. a store built with MiniLM reopens with MiniLM
    emb = as_embedder(wanted)
    if info is not None and info["name"] != emb.name:
        if info["name"].startswith(("langchain:", "llamaindex:")):
            hint = f"open it with the same embeddings object ({info['name']})"
        else:
            hint = f"open it without embedder= (it is remembered) or with embedder={info['name']!r}"
        raise EmbedderMismatchError(
            f"this store was embedded with {info['name']!r} (dim {info['dim']}), not {emb.name!r}: "
            f"{hint}, or move to the new model with BeeWeave.reembed(new_embedder) (beeweave reembed)")
    return emb
