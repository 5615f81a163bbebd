"""The knowledge network: relationships mined at ingest, graph expansion in search,
and session views.

Edges are stored once (source -> target) and read in both directions:
- semantic: a new memory -> its most similar existing memories of the same user
  (top ``semantic_k`` above ``semantic_threshold``; weight = cosine);
- session: earlier -> next memory of the same (user, session) in time order;
- entity / tag: a new memory -> recent memories of the same user sharing an entity
  or a tag (weight = shared count / max(len) of the two sets).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .filters import Filter, build_filter
from .records import ChunkStatus, HitSource, KnowledgeChunk, Relationship, RelationType, SearchHit

__all__ = ["NetworkConfig", "NetworkMixin", "ExpandOptions", "Candidate", "check_ranking"]

_ALL_STATUSES = [s.value for s in ChunkStatus]


@dataclass(frozen=True)
class NetworkConfig:
    """Which relationships are mined when memories are added."""

    semantic_k: int = 5
    semantic_threshold: float = 0.6
    session_links: bool = True
    entity_links: bool = True
    tag_links: bool = True
    max_shared_links: int = 10  # per new memory and kind; shared popular tags would link everything


@dataclass(frozen=True)
class ExpandOptions:
    """Graph expansion of search results.

    Attributes:
        hops: how many edges away from a direct hit to go.
        edge_types: which relation types to follow (default: all).
        decay: score multiplier per hop (times the edge weight).
        limit: at most this many expanded hits (default: k).
    """

    hops: int = 1
    edge_types: tuple[str, ...] | None = None
    decay: float = 0.5
    limit: int | None = None

    def __post_init__(self) -> None:
        from .errors import InvalidInputError

        if isinstance(self.hops, bool) or not isinstance(self.hops, int) or self.hops < 0:
            raise InvalidInputError("ExpandOptions.hops must be a non-negative integer")
        if isinstance(self.decay, bool) or not isinstance(self.decay, (int, float)) or not 0 < self.decay <= 1:
            raise InvalidInputError("ExpandOptions.decay must be in (0, 1]")
        if self.limit is not None and (isinstance(self.limit, bool) or not isinstance(self.limit, int)
                                       or self.limit < 0):
            raise InvalidInputError("ExpandOptions.limit must be a non-negative integer or None")
        if self.edge_types is not None:
            types = (self.edge_types,) if isinstance(self.edge_types, str) else tuple(self.edge_types)
            allowed = {t.value for t in RelationType}
            names = tuple(getattr(t, "value", t) for t in types)
            bad = [t for t in names if t not in allowed]
            if bad:
                raise InvalidInputError(f"unknown edge types {bad}; known: {sorted(allowed)}")
            object.__setattr__(self, "edge_types", names)


def check_ranking(rerank: Any, mmr: Any, expand: Any) -> ExpandOptions | None:
    """Validate the ranking options ``search`` and ``postprocess`` share; return the expansion to do."""
    from .errors import InvalidInputError
    from .rerank import Reranker

    if rerank is not None and not isinstance(rerank, Reranker):
        raise InvalidInputError("rerank must have a rerank(query, hits) method")
    if mmr is not None and not (isinstance(mmr, (int, float)) and 0 <= mmr <= 1):
        raise InvalidInputError("mmr must be a number between 0 and 1")
    opts = ExpandOptions() if expand is True else (expand or None)
    if opts is not None and not isinstance(opts, ExpandOptions):
        raise InvalidInputError("expand must be a bool or an ExpandOptions")
    return opts


@dataclass
class Candidate:
    """A result from outside BeeWeave (e.g. a document retriever) to be post-processed.

    If ``id`` is the id of a stored memory, it is treated as that memory.
    """

    id: str
    text: str
    score: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class NetworkMixin:
    """Relationship mining, expansion and session views for ``BeeWeave``."""

    network_config: NetworkConfig = NetworkConfig()

    # -- mining ------------------------------------------------------------------
    def _after_insert(self, chunks: list[KnowledgeChunk], *, link: bool = True) -> None:
        if link:
            self.link(chunks)
        super()._after_insert(chunks, link=link)  # type: ignore[misc]

    def link(self, chunks: Sequence[KnowledgeChunk]) -> list[Relationship]:
        """Mine and store the relationships of freshly stored chunks; return the new edges."""
        cfg = self.network_config
        backend = self._backend  # type: ignore[attr-defined]
        edges: list[Relationship] = []
        if cfg.semantic_k > 0:
            vectors = backend.get_vectors([c.id for c in chunks])
            pairs: set[frozenset[str]] = set()
            for c in chunks:
                vec = vectors.get(c.id)
                if vec is None:
                    continue
                scope = build_filter({"status": _ALL_STATUSES}, user_id=c.user_id)
                found = [(o, sim) for o, sim in backend.vector_search(vec, scope, cfg.semantic_k + 1)
                         if o != c.id and sim >= cfg.semantic_threshold][: cfg.semantic_k]
                for other, sim in found:
                    pair = frozenset((c.id, other))
                    if pair not in pairs:  # two new memories find each other: one edge
                        pairs.add(pair)
                        edges.append(Relationship(c.id, other, RelationType.SEMANTIC, round(float(sim), 6)))
        if cfg.session_links:
            edges += self._session_edges(chunks)
        for kind, attr, on in ((RelationType.ENTITY, "entities", cfg.entity_links),
                               (RelationType.TAG, "tags", cfg.tag_links)):
            if on:
                edges += self._shared_edges(chunks, kind, attr)
        backend.add_edges(edges)
        return edges

    def _session_edges(self, chunks: Sequence[KnowledgeChunk]) -> list[Relationship]:
        backend = self._backend  # type: ignore[attr-defined]
        out: list[Relationship] = []
        stale: list[Relationship] = []
        groups: dict[tuple[str, str], set[str]] = {}
        for c in chunks:
            if c.session_id is not None:
                groups.setdefault((c.user_id, c.session_id), set()).add(c.id)
        for (user, session), new in groups.items():
            flt = build_filter({"session_id": session, "status": _ALL_STATUSES}, user_id=user)
            ordered = backend.scan_ids(flt, order="timestamp")
            for a, b in zip(ordered, ordered[1:]):
                if a in new or b in new:
                    out.append(Relationship(a, b, RelationType.SESSION, 1.0))
            # An insert between two old neighbours replaces their direct link.
            pos = {cid: i for i, cid in enumerate(ordered)}
            for e in backend.edges([i for i in ordered if i not in new], types=[RelationType.SESSION], direction="out"):
                if e.target_id in pos and e.source_id in pos and pos[e.target_id] - pos[e.source_id] != 1:
                    stale.append(e)
        if stale:
            backend.delete_edges(stale)
        return out

    def _shared_edges(self, chunks: Sequence[KnowledgeChunk], kind: RelationType, attr: str) -> list[Relationship]:
        backend = self._backend  # type: ignore[attr-defined]
        cap = self.network_config.max_shared_links
        out: list[Relationship] = []
        pairs: set[frozenset[str]] = set()
        key = "tags_any" if attr == "tags" else "entities"
        found: list[tuple[KnowledgeChunk, set[str], list[str]]] = []
        for c in chunks:
            values = set(getattr(c, attr))
            if values:
                flt = build_filter({key: sorted(values), "status": _ALL_STATUSES}, user_id=c.user_id)
                found.append((c, values, backend.scan_ids(flt, order="timestamp", descending=True, limit=cap + 1)))
        # One read for the whole batch: the same popular memories turn up for many new ones.
        known = {c.id: set(getattr(c, attr)) for c in chunks}
        wanted = list(dict.fromkeys(i for _, _, ids in found for i in ids if i not in known))
        known.update((i, set(getattr(o, attr))) for i, o in backend.get(wanted).items())
        for c, values, ids in found:
            n = 0
            for other in ids:
                if other == c.id or other not in known or n >= cap or frozenset((c.id, other)) in pairs:
                    continue
                pairs.add(frozenset((c.id, other)))  # two new memories of one batch: one edge
                theirs = known[other]
                weight = len(values & theirs) / max(len(values), len(theirs), 1)
                out.append(Relationship(c.id, other, kind, round(weight, 6)))
                n += 1
        return out

    def delete_many(self, chunk_ids: Sequence[str]) -> list[str]:
        """Delete memories; the memories on either side of a deleted one in its session are linked."""
        gone = None
        if isinstance(chunk_ids, (str, bytes)) or not all(isinstance(i, str) for i in chunk_ids):
            gone = super().delete_many(chunk_ids)  # type: ignore[misc]  # the core's clear error
        before = self._backend.get(list(chunk_ids))  # type: ignore[attr-defined]
        if gone is None:
            gone = super().delete_many(chunk_ids)  # type: ignore[misc]
        sessions = {(c.user_id, c.session_id) for cid, c in before.items() if cid in gone and c.session_id}
        if sessions and self.network_config.session_links:
            backend = self._backend  # type: ignore[attr-defined]
            edges = []
            for user, session in sessions:
                flt = build_filter({"session_id": session, "status": _ALL_STATUSES}, user_id=user)
                ordered = backend.scan_ids(flt, order="timestamp")
                have = {(e.source_id, e.target_id) for e in
                        backend.edges(ordered, types=[RelationType.SESSION], direction="out")}
                edges += [Relationship(a, b, RelationType.SESSION, 1.0) for a, b in zip(ordered, ordered[1:])
                          if (a, b) not in have]
            backend.add_edges(edges)
        return gone

    # -- reading the network -----------------------------------------------------------
    def relationships(self, chunk_id: str, *, types: Iterable[str] | None = None,
                      direction: str = "both") -> list[Relationship]:
        """Edges touching a memory: "out", "in" or "both" directions."""
        self.get(chunk_id)  # type: ignore[attr-defined]  # NotFoundError for unknown ids
        return self._backend.edges([chunk_id], types=None if types is None else list(types),  # type: ignore[attr-defined]
                                   direction=direction)

    def _expand(self, hits: list[SearchHit], flt: Filter, opts: ExpandOptions, k: int) -> list[SearchHit]:
        """Follow edges from the hits; return new hits that say how they were reached."""
        backend = self._backend  # type: ignore[attr-defined]
        limit = opts.limit if opts.limit is not None else k
        if opts.hops <= 0 or limit <= 0 or not hits:
            return []
        best: dict[str, tuple[float, str, str, int]] = {}  # id -> (score, via, from, hops)
        seen = {h.id for h in hits}
        frontier = {h.id: h.score for h in hits}
        for hop in range(1, opts.hops + 1):
            edges = backend.edges(list(frontier), types=opts.edge_types, direction="both")
            reached: dict[str, tuple[float, str, str]] = {}
            for e in edges:
                for here, there in ((e.source_id, e.target_id), (e.target_id, e.source_id)):
                    if here in frontier and there not in seen:
                        score = frontier[here] * opts.decay * float(e.weight)
                        if there not in reached or score > reached[there][0]:
                            reached[there] = (score, e.type.value, here)
            # Scope and status are enforced on every reached memory, never assumed from the edge.
            allowed = backend.matching(list(reached), flt)
            frontier = {}
            for cid, (score, via, src) in reached.items():
                if cid in allowed:
                    seen.add(cid)
                    frontier[cid] = score
                    origin = best[src][2] if src in best else src
                    best[cid] = (score, via, origin, hop)
            if not frontier:
                break
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
        chunks = backend.get([cid for cid, _ in ranked])
        out = []
        for rank, (cid, (score, via, origin, hops)) in enumerate(ranked, start=1):
            if cid in chunks:
                out.append(SearchHit(chunks[cid], score, {"graph": HitSource(rank, score, via, origin, hops)}))
        return out

    def postprocess(self, query: str, candidates: Sequence[Candidate], *, user_id: str | None = None,
                    filters: Any = None, rerank: Any = None, mmr: float | None = None,
                    expand: bool | ExpandOptions | None = None, top_n: int | None = None) -> list[SearchHit]:
        """Apply BeeWeave's ranking to results from any retriever.

        Candidates that are stored memories (in scope) get the memory's weight and
        confidence factors; all candidates can be reranked (a ``Reranker``) or
        diversified (MMR); with ``expand``, memories linked to the candidates come in
        as extra hits (external candidates are linked to their most similar memory).
        External candidates come back as transient chunks with ``metadata["external"]``.
        The input is never modified.
        """
        from .errors import InvalidInputError
        from .rerank import mmr as mmr_select
        from .scoring import score_factor

        if not isinstance(query, str):
            raise InvalidInputError("query must be a string")
        if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Iterable):
            raise InvalidInputError("candidates must be a list of Candidate objects")
        cands = list(candidates)
        if not all(isinstance(c, Candidate) for c in cands):
            raise InvalidInputError("candidates must be Candidate objects")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0):
            raise InvalidInputError("top_n must be a non-negative integer")
        opts = check_ranking(rerank, mmr, expand)
        flt = build_filter(filters, user_id=user_id)
        backend = self._backend  # type: ignore[attr-defined]
        now = self.clock()  # type: ignore[attr-defined]
        ids = [c.id for c in cands]
        memories = backend.get(list(backend.matching(ids, flt))) if ids else {}
        hits: list[SearchHit] = []
        for rank, c in enumerate(cands):
            base = float(c.score) if c.score is not None else 1.0 / (1 + rank)
            chunk = memories.get(c.id)
            if chunk is not None:
                hits.append(SearchHit(chunk, base * score_factor(chunk, now, self.scoring),  # type: ignore[attr-defined]
                                      {"input": HitSource(rank + 1, base)}))
            else:
                ext = KnowledgeChunk(raw_content=c.text or " ", user_id=user_id or "", id=c.id,
                                     metadata={**c.metadata, "external": True})
                hits.append(SearchHit(ext, base, {"input": HitSource(rank + 1, base)}))
        hits.sort(key=lambda h: (-h.score, h.id))
        if rerank is not None:
            hits = rerank.rerank(query, hits)
        if mmr is not None:
            texts = [h.chunk.content for h in hits]
            vecs = self.embedder.embed_documents(texts) if texts else []  # type: ignore[attr-defined]
            hits = mmr_select(hits, {h.id: v for h, v in zip(hits, vecs)}, len(hits), float(mmr))
        if top_n is not None:
            hits = hits[:top_n]
        if opts is not None and hits:
            seeds = [h for h in hits if h.id in memories]
            external = [h for h in hits if h.id not in memories]
            if external:
                vecs = self.embedder.embed_documents([h.chunk.content for h in external])  # type: ignore[attr-defined]
                for h, v in zip(external, vecs):
                    for mid, sim in backend.vector_search(v, flt, 1):
                        if sim >= self.network_config.semantic_threshold and mid not in memories:
                            chunk = backend.get([mid]).get(mid)
                            if chunk is not None:
                                src = HitSource(1, h.score * opts.decay * sim, RelationType.SEMANTIC.value, h.id, 1)
                                seeds.append(SearchHit(chunk, src.score, {"graph": src}))
            seed_ids = {h.id for h in hits}
            linked = [s for s in seeds if s.id not in seed_ids]
            more = self._expand([*[h for h in hits if h.id in memories], *linked], flt,
                                replace(opts, hops=max(opts.hops, 1)), len(hits))
            seen = seed_ids | {h.id for h in linked}
            extra = linked + [h for h in more if h.id not in seen]
            hits = hits + sorted(extra, key=lambda h: (-h.score, h.id))
        return hits

    # -- session views -------------------------------------------------------------------
    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]:
        """Every memory of a session (any status), oldest first."""
        flt = build_filter({"session_id": session_id, "status": _ALL_STATUSES}, user_id=user_id)
        return list(self._backend.scan(flt, order="timestamp"))  # type: ignore[attr-defined]

    def context(self, session_id: str, *, user_id: str | None = None, window: int = 10) -> list[KnowledgeChunk]:
        """The latest ``window`` active memories of a session, oldest first (to rebuild a conversation)."""
        from .errors import InvalidInputError

        if not isinstance(window, int) or window < 0:
            raise InvalidInputError("window must be a non-negative integer")
        flt = build_filter({"session_id": session_id}, user_id=user_id)
        latest = list(self._backend.scan(flt, order="timestamp", descending=True, limit=window))  # type: ignore[attr-defined]
        return latest[::-1]

