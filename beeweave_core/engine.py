"""``BeeWeave``: the engine every face of BeeWeave calls.

Public methods validate and then call the storage backend; nothing reaches the
backend before every argument has been checked, so bad input changes nothing.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .embedders import DEFAULT_MODEL_NAME, Embedder, as_embedder
from .errors import (
    DimensionMismatchError,
    DuplicateIdError,
    EmbedderMismatchError,
    EmptyContentError,
    InvalidInputError,
    InvalidVectorError,
    NotFoundError,
    TokenizerMismatchError,
)
from .filters import Filter, build_filter
from .index.context import IndexConfig
from .fusion import FusionMode, fuse_scores
from .network import ExpandOptions, check_ranking
from .rerank import Reranker, mmr
from .scoring import ScoringConfig, score_factor
from .events import EventBus, EventType, MemoryEvent
from .records import ChunkStatus, KnowledgeChunk, ProcessedContent, SearchHit, to_datetime, utcnow
from .store.base import ChunkRow, StoreBackend
from .language import embedder_languages, retriever_weights
from .query import prepare_query
from .tokenizer import Tokenizer, TokenizerConfig

__all__ = ["MemoryCore", "SearchConfig"]

_RECORD_KEYS = {"content", "user_id", "session_id", "agent_id", "chunk_id", "tags", "metadata", "timestamp",
                "embedding", "entities", "summary", "intent", "expires_at", "pinned", "weight", "confidence"}


@dataclass
class SearchConfig:
    """Defaults for :meth:`BeeWeave.search`; each can be overridden per call.

    Attributes:
        fusion: how lexical and vector scores are combined (z-scores by default).
        rrf_k: the constant of reciprocal-rank fusion.
        weights: per-retriever weights ("lexical", "vector").
        candidates: how many candidates each retriever contributes (at least 4·k).
        query_cache_size: how many query embeddings to keep (repeated queries skip the model).
    """

    fusion: FusionMode = FusionMode.ZSCORE
    rrf_k: float = 60.0
    weights: dict[str, float] = field(default_factory=lambda: {"lexical": 1.0, "vector": 1.0})
    candidates: int = 50
    query_cache_size: int = 1024


def _check_str(name: str, value: Any, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    _check_encodable(name, value)
    return value


def _check_encodable(name: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} is not valid Unicode (lone surrogate at {exc.start})") from None


def _check_str_list(name: str, values: Any) -> None:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise InvalidInputError(f"{name} must be a list of strings")
    for v in values:
        _check_str(name[:-1] if name.endswith("s") else name, v)


def _check_chunk(c: KnowledgeChunk) -> None:
    """Every text field of a chunk must be storable; checked before anything is written."""
    _check_str("raw_content", c.raw_content)
    _check_str("user_id", c.user_id)
    _check_str("id", c.id)
    for name in ("agent_id", "session_id"):
        _check_str(name, getattr(c, name), optional=True)
    if c.summary is not None:
        if not isinstance(c.summary, str):
            raise InvalidInputError("summary must be a string")
        _check_encodable("summary", c.summary)
    _check_str_list("tags", c.tags)
    _check_str_list("entities", c.entities)
    if not isinstance(c.pinned, bool):
        raise InvalidInputError(f"pinned must be True or False, got {type(c.pinned).__name__}")
    pc = c.processed_content
    if pc is not None:
        if not isinstance(pc.text, str):
            raise InvalidInputError("processed_content.text must be a string")
        _check_encodable("processed_content.text", pc.text)
        if pc.language is not None:
            if not isinstance(pc.language, str):
                raise InvalidInputError("processed_content.language must be a string")
            _check_encodable("processed_content.language", pc.language)
        _check_json("processed_content.payload", pc.payload)
    if not isinstance(c.metadata, Mapping):
        raise InvalidInputError("metadata must be a mapping")
    _check_json("metadata", c.metadata)
    for name in ("weight", "confidence"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InvalidInputError(f"{name} must be a finite number")
    if isinstance(c.access_count, bool) or not isinstance(c.access_count, int) or c.access_count < 0:
        raise InvalidInputError("access_count must be a non-negative integer")


def _check_json(name: str, value: Any) -> None:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidInputError(f"{name} must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"{name} is nested too deeply") from None


class MemoryCore:
    """An agent memory: store knowledge chunks, find them again with hybrid search.

    Setup:
        .. code-block:: bash

            pip install beeweave

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave

            memory = BeeWeave("memory.db")  # or BeeWeave() for an in-memory store

    Usage:
        .. code-block:: python

            memory.add("The user prefers answers in Chinese.", user_id="alice")
            for hit in memory.search("language preference", user_id="alice"):
                print(hit.score, hit.chunk.raw_content)
            memory.close()

    Args:
        path: a SQLite file, created if missing; ``None`` keeps everything in memory.
        embedder: a model name or path, an ``Embedder``, a LangChain ``Embeddings`` or a
            LlamaIndex ``BaseEmbedding``. Default: the bundled all-MiniLM-L6-v2.
        tokenizer: a ``TokenizerConfig`` for a new store; an existing store keeps its own.
        index: an ``IndexConfig`` (BM25 constants, session context) for a new store.
        backend: a ready ``StoreBackend`` instead of ``path`` (e.g. PostgreSQL).
        config: search defaults.
        clock: returns "now" as an aware datetime; tests pass a controllable one.
        scoring: how weight, recency and confidence change the rank (``ScoringConfig``).
    """

    def __init__(self, path: str | Path | None = None, *, embedder: Any = None,
                 tokenizer: TokenizerConfig | None = None, index: IndexConfig | None = None,
                 backend: StoreBackend | None = None, config: SearchConfig | None = None,
                 clock: Callable[[], datetime] | None = None, scoring: ScoringConfig | None = None) -> None:
        if backend is not None and (path is not None or index is not None):
            raise InvalidInputError("pass either path (and index) or a ready backend, not both")
        if backend is None:
            from .store.sqlite import SQLiteStore

            backend = SQLiteStore(path, index_config=index)
        self._backend = backend
        self._dim: int | None = None
        try:
            self.tokenizer = Tokenizer(self._resolve_tokenizer(tokenizer))
            self.embedder: Embedder = self._resolve_embedder(embedder)
        except BaseException:
            backend.close()
            raise
        self.config = config or SearchConfig()
        self.clock: Callable[[], datetime] = clock or utcnow  # tests pass a controllable clock
        self.scoring = scoring or ScoringConfig()
        self.events = EventBus()
        self._qcache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._qlock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        """Open a store by URL: ``postgresql://...`` (PostgreSQL + pgvector), ``sqlite:///path``
        or a plain path. Other keyword arguments are those of the constructor; ``pool_size``,
        ``tenant``, ``schema``, ``read_only`` and ``listen_url`` go to the PostgreSQL backend."""
        if not isinstance(url, str):
            raise InvalidInputError("url must be a string")
        if url.startswith(("postgresql://", "postgres://")):
            from .store.postgres import PostgresStore

            backend_kw = {k: kwargs.pop(k) for k in ("pool_size", "tenant", "schema", "read_only", "listen_url")
                          if k in kwargs}
            return cls(backend=PostgresStore(url, index_config=kwargs.pop("index", None), **backend_kw), **kwargs)
        if url.startswith("sqlite:///"):
            url = url[len("sqlite:///"):]
        return cls(url or None, **kwargs)

    # -- set-up ------------------------------------------------------------------
    def _resolve_tokenizer(self, wanted: TokenizerConfig | None) -> TokenizerConfig:
        stored = self._backend.get_meta("tokenizer")
        if stored is None:
            cfg = wanted or TokenizerConfig()
            self._backend.set_meta("tokenizer", json.dumps(cfg.to_dict()))
            return cfg
        cfg = TokenizerConfig.from_dict(json.loads(stored))
        if wanted is not None and wanted != cfg:
            raise TokenizerMismatchError(
                f"this store was indexed with tokenizer {cfg}; open it without tokenizer= (it is "
                "remembered) or build a new store for a different tokenizer")
        return cfg

    def _resolve_embedder(self, wanted: Any) -> Embedder:
        stored = self._backend.get_meta("embedder")
        emb = as_embedder(wanted)
        if stored is not None:
            info = json.loads(stored)
            if info["name"] != emb.name:
                if info["name"] == DEFAULT_MODEL_NAME:
                    hint = "open it without embedder= to use the default model"
                elif info["name"].startswith(("langchain:", "llamaindex:")):
                    hint = f"open it with the same embeddings object ({info['name']})"
                else:
                    hint = f"open it with embedder={info['name']!r}"
                raise EmbedderMismatchError(
                    f"this store was embedded with {info['name']!r} (dim {info['dim']}), not {emb.name!r}: "
                    f"{hint}, or move to the new model with BeeWeave.reembed(new_embedder)")
        return emb

    def _record_embedder(self, dim: int) -> None:
        if self._dim == dim:
            return
        stored = self._backend.get_meta("embedder")
        if stored is None:
            self._backend.set_meta("embedder", json.dumps({"name": self.embedder.name, "dim": dim}))
            self._dim = dim
        elif json.loads(stored)["dim"] != dim:
            raise DimensionMismatchError(
                f"vectors of dimension {dim} cannot go into a store of dimension {json.loads(stored)['dim']}")

    @property
    def backend(self) -> StoreBackend:
        return self._backend

    @property
    def dim(self) -> int | None:
        if self._dim is None:  # cached: asked on every search with a query vector
            stored = self._backend.get_meta("embedder")
            self._dim = json.loads(stored)["dim"] if stored else None
        return self._dim

    # -- writing -------------------------------------------------------------------
    def add(self, content: str, *, user_id: str, session_id: str | None = None, agent_id: str | None = None,
            chunk_id: str | None = None, tags: Iterable[str] = (), metadata: Mapping[str, Any] | None = None,
            timestamp: datetime | str | float | None = None, embedding: Sequence[float] | None = None,
            **fields: Any) -> str:
        """Store one memory and return its id.

        ``fields`` may set any other :class:`KnowledgeChunk` field (summary, entities,
        intent, expires_at, pinned, weight, confidence...). ``embedding`` skips the
        model with a precomputed vector.
        """
        record: dict[str, Any] = dict(fields, content=content, user_id=user_id, session_id=session_id,
                                      agent_id=agent_id, chunk_id=chunk_id, tags=tags, metadata=metadata,
                                      timestamp=timestamp, embedding=embedding)
        return self.add_many([record], show_progress=False)[0]

    def add_many(self, records: Iterable[Mapping[str, Any] | KnowledgeChunk], *, batch_size: int = 512,
                 show_progress: bool | None = None, link: bool = True) -> list[str]:
        """Store many memories; embeddings are computed in batches.

        Each record is a dict with the keys of :meth:`add` or a :class:`KnowledgeChunk`.
        Every record is validated before anything is written; each batch is written
        atomically. ``link=False`` skips relationship mining (bulk imports).
        """
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
            raise InvalidInputError("add_many takes a list of records (dicts or KnowledgeChunks)")
        items = [self._to_chunk(r) for r in records]
        ids = [c.id for c, _ in items]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise DuplicateIdError(f"the id {dup!r} appears twice in this batch")
        existing = self._backend.contains(ids)
        if existing:
            raise DuplicateIdError(f"a chunk with id {sorted(existing)[0]!r} already exists")
        progress = None
        if show_progress or (show_progress is None and len(items) >= 2000):
            from tqdm.auto import tqdm

            progress = tqdm(total=len(items), desc="beeweave add", unit="mem")
        try:
            for start in range(0, len(items), batch_size):
                batch = items[start : start + batch_size]
                self._backend.insert(self._rows(batch))
                self._after_insert([c for c, _ in batch], link=link)
                if progress is not None:
                    progress.update(len(batch))
        finally:
            if progress is not None:
                progress.close()
        return ids

    def _to_chunk(self, r: Mapping[str, Any] | KnowledgeChunk) -> tuple[KnowledgeChunk, np.ndarray | None]:
        if isinstance(r, KnowledgeChunk):
            _check_chunk(r)
            return r, None
        if not isinstance(r, Mapping):
            raise InvalidInputError(f"a record must be a dict or a KnowledgeChunk, got {type(r).__name__}")
        unknown = set(r) - _RECORD_KEYS
        if unknown:
            raise InvalidInputError(f"unknown record keys {sorted(unknown)}; known: {sorted(_RECORD_KEYS)}")
        content = r.get("content")
        if not isinstance(content, str):
            raise InvalidInputError(f"content must be a string, got {type(content).__name__}")
        if not content.strip():
            raise EmptyContentError("content is empty: there is nothing to remember")
        _check_encodable("content", content)
        user_id = _check_str("user_id", r.get("user_id"))
        session_id = _check_str("session_id", r.get("session_id"), optional=True)
        agent_id = _check_str("agent_id", r.get("agent_id"), optional=True)
        chunk_id = _check_str("chunk_id", r.get("chunk_id"), optional=True)
        tags = r.get("tags") or ()
        if isinstance(tags, str) or not isinstance(tags, Iterable):
            raise InvalidInputError("tags must be a list of strings")
        tags = [_check_str("tag", t) for t in tags]
        metadata = r.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise InvalidInputError(f"metadata must be a mapping, got {type(metadata).__name__}")
        metadata = dict(metadata)
        _check_json("metadata", metadata)
        extra = {k: r[k] for k in ("entities", "summary", "intent", "expires_at", "pinned", "weight", "confidence")
                 if r.get(k) is not None}
        for key in ("weight", "confidence"):
            if key in extra and (not isinstance(extra[key], (int, float)) or not math.isfinite(extra[key])):
                raise InvalidInputError(f"{key} must be a finite number")
        kw: dict[str, Any] = dict(raw_content=content, user_id=user_id, session_id=session_id, agent_id=agent_id,
                                  tags=list(dict.fromkeys(tags)), metadata=metadata, **extra)
        if chunk_id is not None:
            kw["id"] = chunk_id
        kw["timestamp"] = to_datetime(r["timestamp"]) if r.get("timestamp") is not None else self.clock()
        try:
            chunk = KnowledgeChunk(**kw)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(str(exc)) from None
        _check_chunk(chunk)
        vec = r.get("embedding")
        return chunk, None if vec is None else self._check_vector(vec)

    def _check_vector(self, vec: Any) -> np.ndarray:
        try:
            arr = np.asarray(vec, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidVectorError(f"embedding is not a vector of numbers: {exc}") from None
        dim = self.dim or self.embedder.dim
        if arr.ndim != 1 or arr.shape[0] != dim:
            raise DimensionMismatchError(f"embedding has shape {arr.shape}; this store needs ({dim},)")
        if not np.isfinite(arr).all():
            raise InvalidVectorError("embedding contains NaN or infinity")
        norm = float(np.linalg.norm(arr))
        if norm == 0:
            raise InvalidVectorError("embedding is all zeros")
        return arr / norm

    def _rows(self, batch: list[tuple[KnowledgeChunk, np.ndarray | None]]) -> list[ChunkRow]:
        need = [i for i, (_, v) in enumerate(batch) if v is None]
        vectors: list[np.ndarray | None] = [v for _, v in batch]
        if need:
            embedded = self.embedder.embed_documents([batch[i][0].content for i in need])
            for i, v in zip(need, embedded):
                vectors[i] = self._check_vector(v)
        dim = len(vectors[0])  # type: ignore[arg-type]
        self._record_embedder(dim)
        return [ChunkRow(c, v, self.tokenizer(c.content)) for (c, _), v in zip(batch, vectors)]  # type: ignore[arg-type]

    # -- reading -------------------------------------------------------------------
    def get(self, chunk_id: str) -> KnowledgeChunk:
        _check_str("chunk_id", chunk_id)
        got = self._backend.get([chunk_id])
        if chunk_id not in got:
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        return got[chunk_id]

    def get_many(self, chunk_ids: Sequence[str]) -> list[KnowledgeChunk]:
        """The chunks that exist, in the order asked; missing ids are skipped."""
        for i in chunk_ids:
            _check_str("chunk_id", i)
        got = self._backend.get(list(chunk_ids))
        return [got[i] for i in chunk_ids if i in got]

    def delete(self, chunk_id: str) -> bool:
        """Delete a chunk with its index entries and relationships; False if it did not exist."""
        _check_str("chunk_id", chunk_id)
        return bool(self.delete_many([chunk_id]))

    def delete_many(self, chunk_ids: Sequence[str]) -> list[str]:
        """Delete chunks; return the ids that existed and are now gone."""
        for i in chunk_ids:
            _check_str("chunk_id", i)
        before = self._backend.get(list(chunk_ids)) if self.events.active else {}
        gone = self._backend.delete(list(chunk_ids))
        for cid in gone:
            c = before.get(cid)
            self._emit(EventType.DELETED, c, chunk_id=cid)
        return gone

    def update(self, chunk_id: str, **changes: Any) -> KnowledgeChunk:
        """Change fields of a stored chunk and return it.

        A change of ``raw_content`` (or ``processed_content``) re-tokenises and
        re-embeds the chunk; other fields are rewritten in place. ``id`` cannot change.
        The changes are applied to the record as it is when written, so feedback or
        accesses recorded meanwhile (by this process or another) are kept.
        """
        if "id" in changes:
            raise InvalidInputError("a chunk's id cannot change")
        if "content" in changes:
            changes["raw_content"] = changes.pop("content")
        pc = changes.get("processed_content")
        if pc is not None and not isinstance(pc, (ProcessedContent, dict)):
            raise InvalidInputError(
                f"processed_content must be a ProcessedContent or a dict, got {type(pc).__name__}")
        current = self.get(chunk_id)
        new = self._changed(current, changes)  # every check runs before anything is written
        # Embedding is slow: done now, outside any lock, for the text this update gives.
        rows = self._rows([(new, None)]) if new.content != current.content else []

        def change(found: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk | ChunkRow]:
            fresh = found.get(chunk_id)
            if fresh is None:
                raise NotFoundError(f"no chunk with id {chunk_id!r} (deleted meanwhile)")
            out = self._changed(fresh, changes)
            if out.content == fresh.content:
                return [out]
            if rows and rows[0].chunk.content == out.content:
                return [ChunkRow(out, rows[0].vector, rows[0].terms)]
            # Another update changed the text this one derives from: embed that (rare).
            vec = self._check_vector(self.embedder.embed_documents([out.content])[0])
            return [ChunkRow(out, vec, self.tokenizer(out.content))]

        with self._write_lock():
            self._backend.modify([chunk_id], change)
        out = self.get(chunk_id)
        self._emit(EventType.UPDATED, out, fields=sorted(changes))
        return out

    def _changed(self, chunk: KnowledgeChunk, changes: Mapping[str, Any]) -> KnowledgeChunk:
        """``chunk`` with ``changes`` (field -> value) applied, validated as on the way in."""
        data = chunk.to_dict()
        unknown = set(changes) - set(data)
        if unknown:
            raise InvalidInputError(f"unknown KnowledgeChunk fields: {sorted(unknown)}")
        if "raw_content" in changes and "processed_content" not in changes:
            data["processed_content"] = None  # derived from the old text: re-derive from the new one
        data.update(changes)
        data.pop("relationships")
        try:
            new = KnowledgeChunk.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(str(exc)) from None
        self._to_chunk(new)  # same validation as on the way in
        return new

    def _write_lock(self) -> AbstractContextManager[Any]:
        """Held around a read-modify-write of records; the lifecycle layer shares its own lock."""
        return nullcontext()

    # -- hooks for the network, lifecycle and ingestion layers ----------------------------
    def _emit(self, type_: EventType, chunk: KnowledgeChunk | None, *, chunk_id: str | None = None,
              **data: Any) -> None:
        if not self.events.active:
            return
        self.events.emit(MemoryEvent(
            type_, chunk.id if chunk else chunk_id, chunk.user_id if chunk else None,
            chunk.agent_id if chunk else None, tuple(chunk.tags) if chunk else (), data, self.clock()))

    def _after_insert(self, chunks: list[KnowledgeChunk], *, link: bool = True) -> None:
        """Called once per committed batch of new chunks."""
        for c in chunks:
            self._emit(EventType.CREATED, c)

    def _after_search(self, hits: list[SearchHit], now: datetime) -> None:
        """Called with the hits a search returns (e.g. to record accesses)."""

    def _before_close(self) -> None:
        """Stop background work before the backend closes."""

    def count(self, *, user_id: str | None = None, filters: Mapping[str, Any] | None = None) -> int:
        if user_id is None and filters is None:
            return self._backend.count(None)
        return self._backend.count(build_filter(filters, user_id=user_id))

    # -- search ----------------------------------------------------------------------
    def embed_query(self, query: str) -> np.ndarray:
        """The query's vector, from a small LRU cache when the same query was asked before."""
        with self._qlock:
            hit = self._qcache.get(query)
            if hit is not None:
                self._qcache.move_to_end(query)
                return hit
        vec = self.embedder.embed_query(query)
        with self._qlock:
            self._qcache[query] = vec
            while len(self._qcache) > self.config.query_cache_size:
                self._qcache.popitem(last=False)
        return vec

    def search(self, query: str, *, user_id: str | None = None, k: int = 5, filters: Mapping[str, Any] | None = None,
               fusion: FusionMode | str | None = None, min_score: float | None = None,
               query_embedding: Sequence[float] | None = None, expand: bool | ExpandOptions | None = None,
               rerank: Reranker | None = None, mmr: float | None = None, loosen: bool = False) -> list[SearchHit]:
        """Hybrid search: BM25 and vector candidates, fused, filtered inside retrieval.

        Args:
            query: what to look for.
            user_id: restrict to one user's memories (never returns another user's).
            k: how many hits (graph expansion may add up to ``ExpandOptions.limit`` more).
            filters: user_id, agent_id, session_id, tags / tags_any / tags_all, entities,
                since, until, type, intent, status, ids.
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
        """
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
        _check_encodable("query", query)
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise InvalidInputError(f"k must be a non-negative integer, got {k!r}")
        try:
            mode = FusionMode(fusion) if fusion is not None else self.config.fusion
        except ValueError:
            raise InvalidInputError(
                f"fusion must be one of {', '.join(m.value for m in FusionMode)}, got {fusion!r}") from None
        flt = build_filter(filters, user_id=user_id)
        qvec = None if query_embedding is None else self._check_vector(query_embedding)
        if min_score is not None and (not isinstance(min_score, (int, float)) or not math.isfinite(min_score)):
            raise InvalidInputError("min_score must be a finite number")
        opts = check_ranking(rerank, mmr, expand)
        if not query.strip():
            raise EmptyContentError("query is empty")
        if k == 0:
            return []
        now = self.clock()
        hits = self._search_once(query, flt, k, qvec, mode, min_score, rerank, mmr, now)
        if loosen and len(hits) < k:
            loose = flt.replace(tags_any=None, tags_all=None, entities=None)
            seen = {h.id for h in hits}
            more = self._search_once(query, loose, k, qvec, mode, None, rerank, mmr, now)
            hits += [replace(h, loosened=True) for h in more if h.id not in seen][: k - len(hits)]
        if opts is not None:
            hits += self._expand(hits, flt, opts, k)  # type: ignore[attr-defined]
        self._after_search(hits, now)
        return hits

    def _search_once(self, query: str, flt: Filter, k: int, qvec: np.ndarray | None, mode: FusionMode,
                     min_score: float | None, rerank: Reranker | None, mmr_lambda: float | None,
                     now: datetime) -> list[SearchHit]:
        # [retrieval] A dialogue query: its latest turns embedded, recent terms weigh more, cost bounded.
        prepared = prepare_query(query, self.tokenizer)
        if qvec is None and self._backend.count(None):
            qvec = self.embed_query(prepared.text)
        ids, scores = self._retrieve(prepared.terms, flt, k, qvec)
        # Weight factors can lift a candidate a little, so look a bit past k; rerankers see more.
        pool_size = max(2 * k, k + 10) if rerank is None and mmr_lambda is None else max(4 * k, 40)
        # [retrieval] Lean on BM25 for the part of the query the embedder's languages do not cover.
        weights = retriever_weights(query, embedder_languages(self.embedder), self.config.weights)
        pool = fuse_scores(ids, scores, mode=mode, weights=weights, rrf_k=self.config.rrf_k,
                           limit=pool_size)
        if mode is FusionMode.ZSCORE:
            # Map the z-sum onto (0, 1) (monotone) so that weight factors can multiply it.
            pool = [(c, 1.0 / (1.0 + math.exp(-max(min(s, 60.0), -60.0))), src) for c, s, src in pool]
        # Ranked by the few fields scoring reads; only the records returned are decoded.
        fields = self._backend.rank_fields([cid for cid, _, _ in pool])
        ranked = sorted(((cid, score * score_factor(f, now, self.scoring), src) for cid, score, src in pool
                         if (f := fields.get(cid)) is not None), key=lambda t: (-t[1], t[0]))
        if min_score is not None:
            ranked = [t for t in ranked if t[1] >= min_score]
        if rerank is None and mmr_lambda is None:
            ranked = ranked[:k]
        chunks = self._backend.get([cid for cid, _, _ in ranked])
        scored = [SearchHit(chunks[cid], score, src) for cid, score, src in ranked if cid in chunks]
        if rerank is not None:
            scored = rerank.rerank(query, scored)
        if mmr_lambda is not None:
            scored = mmr(scored, self._backend.get_vectors([h.id for h in scored]), k, float(mmr_lambda))
        return scored[:k]

    def _retrieve(self, terms: Mapping[str, int], flt: Filter, k: int,
                  qvec: np.ndarray | None) -> tuple[list[str], dict[str, np.ndarray]]:
        """Candidates from both retrievers, each then scored by both: the ids, and each
        retriever's scores aligned with them.

        Each retriever contributes its top candidates; every candidate is then scored
        lexically (BM25 with session context) and by vector (cosine with its context
        vector), so fusion compares the same set on both scales.
        """
        depth = max(self.config.candidates, 4 * k)
        if self._backend.count(None) == 0 or qvec is None:
            return [], {"lexical": np.zeros(0), "vector": np.zeros(0)}
        vector_top = self._backend.vector_search(qvec, flt, depth)
        lexical = self._backend.lexical_search(terms, flt, depth, include=[cid for cid, _ in vector_top])
        vector = self._backend.vector_scores(qvec, [cid for cid, _ in lexical])
        if len(vector) < len(lexical):  # deleted meanwhile: gone from both lists
            lexical = [(cid, sc) for cid, sc in lexical if cid in vector]
        ids = [cid for cid, _ in lexical]
        return ids, {"lexical": np.fromiter((sc for _, sc in lexical), np.float64, len(ids)),
                     "vector": np.fromiter((vector[cid] for cid in ids), np.float64, len(ids))}

    # -- integrity ---------------------------------------------------------------------
    def verify(self) -> Any:
        """Check that the lexical and vector indexes and the relationships agree with the records."""
        return self._backend.verify()

    def repair(self) -> Any:
        """Rebuild the indexes from the records and drop dangling relationships; returns a fresh check."""
        return self._backend.repair()

    # -- lifecycle ---------------------------------------------------------------------
    def flush(self) -> None:
        self._backend.flush()

    def close(self) -> None:
        try:
            self._before_close()
        finally:
            self._backend.close()

    def __enter__(self) -> MemoryCore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def reembed(self, embedder: Any, *, batch_size: int = 256) -> None:
        """Move the store to another embedding model: every vector is recomputed."""
        new = as_embedder(embedder)
        everything = build_filter({"status": [s.value for s in ChunkStatus]})
        chunks = list(self._backend.scan(everything))
        rows: list[ChunkRow] = []
        for start in range(0, len(chunks), batch_size):
            batch = chunks[start : start + batch_size]
            vecs = new.embed_documents([c.content for c in batch])
            rows += [ChunkRow(c, v, self.tokenizer(c.content)) for c, v in zip(batch, vecs)]
        self.embedder = new
        self._backend.set_meta("embedder", json.dumps({"name": new.name, "dim": int(new.dim)}))
        self._dim = int(new.dim)
        if rows:
            self._backend.replace(rows)
        with self._qlock:
            self._qcache.clear()
