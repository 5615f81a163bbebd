"""The graph part: relationships mined when memories are stored, recorded by callers,
followed in search (expansion), repaired after deletions, and the session views.

Edges are stored once (source -> target) and read in both directions; see
:mod:`beeweave_core.network` for what each mined type means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import InvalidInputError, NotFoundError
from ..filters import Filter, build_filter
from ..network import Candidate, ExpandOptions, check_edge_types, check_ranking
from ..records import (
    ALL_STATUSES,
    USER_RELATIONS,
    HitSource,
    KnowledgeChunk,
    Relationship,
    RelationType,
    SearchHit,
)
from ..rerank import mmr as mmr_select
from ..scoring import score_factor
from ..store.links import Derive, LinkFacts, LinkReads, link_stored
from ..user_data import KV_SEP as _SEP
from ..user_data import KvEntry, Staged, mapping, section
from ..validation import check_count, check_id, check_number, check_text
from .search_config import NetworkConfig
from .shared import Shared

__all__ = ["Graph"]

NOTES = "graph.notes"  # kv: "<source>\x1f<target>\x1f<type>" -> {"note": ...}


class Graph:
    """Relationship mining, caller-recorded relations, expansion, session views."""

    def __init__(self, shared: Shared, config: NetworkConfig, redact: Callable[[str], str] | None = None) -> None:
        self.shared = shared
        self.config = config
        self._redact = redact  # the write policy's redaction, for the free text of relation notes

    # -- mining -------------------------------------------------------------------------------
    # A pass reads what it needs in one request (plan), which the backend may answer inside
    # the transaction that inserts the memories (StoreBackend.insert_linked), then derives
    # the edges from the answers without calling the backend (derive).
    def plan(self, chunks: Sequence[KnowledgeChunk],
             vectors: Mapping[str, np.ndarray]) -> tuple[LinkReads, Derive]:
        """What linking freshly stored ``chunks`` (with their ``vectors``) reads, and how
        the edges follow from the answers: the ``link`` hook of records.add_many."""
        cfg = self.config
        reads = LinkReads()
        if cfg.semantic_k > 0:
            for c in chunks:
                vec = vectors.get(c.id)
                if vec is not None:
                    scope = build_filter({"status": ALL_STATUSES}, user_id=c.user_id)
                    reads.similar.append((np.asarray(vec, np.float32), scope, cfg.semantic_k + 1))
        groups: dict[tuple[str, str], set[str]] = {}
        if cfg.session_links:
            for c in chunks:
                if c.session_id is not None:
                    groups.setdefault((c.user_id, c.session_id), set()).add(c.id)
            reads.sessions = [build_filter({"session_id": session, "status": ALL_STATUSES}, user_id=user)
                              for user, session in groups]
        kinds = [(kind, attr) for kind, attr, on in ((RelationType.ENTITY, "entities", cfg.entity_links),
                                                     (RelationType.TAG, "tags", cfg.tag_links)) if on]
        shared_at: list[list[KnowledgeChunk]] = []
        for _, attr in kinds:
            key = "tags_any" if attr == "tags" else "entities"
            with_values = [c for c in chunks if getattr(c, attr)]
            shared_at.append(with_values)
            reads.shared += [(build_filter({key: sorted(set(getattr(c, attr))), "status": ALL_STATUSES},
                                           user_id=c.user_id), cfg.max_shared_links + 1) for c in with_values]
        owners = [c.id for c in chunks if c.id in vectors] if cfg.semantic_k > 0 else []

        def derive(facts: LinkFacts) -> tuple[list[Relationship], list[Relationship]]:
            edges = self._semantic_edges(owners, facts.similar)
            stale: list[Relationship] = []
            for news, (ordered, old) in zip(groups.values(), facts.sessions, strict=True):
                edges += self._session_edges(news, ordered, old, stale)
            at = 0
            for (kind, attr), found in zip(kinds, shared_at, strict=True):
                edges += self._shared_edges(chunks, found, facts.shared[at : at + len(found)], facts.labels,
                                            kind, attr)
                at += len(found)
            return edges, stale

        return reads, derive

    def link(self, chunks: Sequence[KnowledgeChunk]) -> list[Relationship]:
        """Mine and store the relationships of stored chunks; return the new edges."""
        backend = self.shared.backend
        vectors = backend.get_vectors([c.id for c in chunks]) if self.config.semantic_k > 0 else {}
        return list(link_stored(backend, *self.plan(chunks, vectors)))

    def _semantic_edges(self, owners: Sequence[str], found: Sequence[list[tuple[str, float]]]) -> list[Relationship]:
        cfg = self.config
        edges: list[Relationship] = []
        pairs: set[frozenset[str]] = set()
        for cid, hits in zip(owners, found, strict=True):
            near = [(o, sim) for o, sim in hits if o != cid and sim >= cfg.semantic_threshold][: cfg.semantic_k]
            for other, sim in near:
                pair = frozenset((cid, other))
                if pair not in pairs:  # two new memories find each other: one edge
                    pairs.add(pair)
                    edges.append(Relationship(cid, other, RelationType.SEMANTIC, round(float(sim), 6)))
        return edges

    @staticmethod
    def _session_edges(new: set[str], ordered: list[str], old: list[Relationship],
                       stale: list[Relationship]) -> list[Relationship]:
        """The session edges of one session's new memories; adds to ``stale`` the old direct
        links that an insert between two old neighbours replaces."""
        out = [Relationship(a, b, RelationType.SESSION, 1.0) for a, b in zip(ordered, ordered[1:])
               if a in new or b in new]
        pos = {cid: i for i, cid in enumerate(ordered)}
        stale += [e for e in old if e.source_id not in new and e.target_id in pos and e.source_id in pos
                  and pos[e.target_id] - pos[e.source_id] != 1]
        return out

    def _shared_edges(self, chunks: Sequence[KnowledgeChunk], found: Sequence[KnowledgeChunk],
                      ids_of: Sequence[list[str]], labels: Mapping[str, tuple[list[str], list[str]]],
                      kind: RelationType, attr: str) -> list[Relationship]:
        cap = self.config.max_shared_links
        out: list[Relationship] = []
        pairs: set[frozenset[str]] = set()
        known = {c.id: set(getattr(c, attr)) for c in chunks}
        which = 0 if attr == "tags" else 1
        known.update((i, set(labels[i][which])) for ids in ids_of for i in ids if i not in known and i in labels)
        for c, ids in zip(found, ids_of, strict=True):
            values = set(getattr(c, attr))
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

    # -- after a deletion (an on_delete hook) --------------------------------------------------
    def relink(self, before: dict[str, KnowledgeChunk], gone: list[str]) -> None:
        """The memories on either side of a deleted one in its session are linked."""
        sessions = {(c.user_id, c.session_id) for cid, c in before.items() if cid in gone and c.session_id}
        if not sessions or not self.config.session_links:
            return
        backend = self.shared.backend
        edges = []
        for user, session in sessions:
            flt = build_filter({"session_id": session, "status": ALL_STATUSES}, user_id=user)
            ordered = backend.scan_ids(flt, order="timestamp")
            have = {(e.source_id, e.target_id) for e in
                    backend.edges(ordered, types=[RelationType.SESSION], direction="out")}
            edges += [Relationship(a, b, RelationType.SESSION, 1.0) for a, b in zip(ordered, ordered[1:])
                      if (a, b) not in have]
        backend.add_edges(edges)

    # -- relations recorded by callers -----------------------------------------------------------
    def relate(self, source_id: str, target_id: str, type: RelationType | str, *, weight: float = 1.0,
               note: str | None = None) -> Relationship:
        """Record a logical relation (supports, contradicts, cites, causes, derived_from,
        related) from one memory to another of the same user; returns the edge."""
        check_id(source_id, "source_id")
        check_id(target_id, "target_id")
        if source_id == target_id:
            raise InvalidInputError("a memory cannot be related to itself")
        try:
            kind = RelationType(type)
        except ValueError:
            kind = None
        if kind not in USER_RELATIONS:
            allowed = ", ".join(sorted(t.value for t in USER_RELATIONS))
            raise InvalidInputError(f"type must be one of {allowed}; got {type!r}")
        check_number("weight", weight, low=0.0, high=1.0)
        check_text("note", note, optional=True)
        found = self.shared.backend.get([source_id, target_id])
        for cid in (source_id, target_id):
            if cid not in found:
                raise NotFoundError(f"no chunk with id {cid!r}")
        if found[source_id].user_id != found[target_id].user_id:
            raise InvalidInputError("related memories must belong to one user")
        edge = Relationship(source_id, target_id, kind, float(weight))
        with self.shared.write_lock:
            self.shared.backend.add_edges([edge])
            key = f"{source_id}\x1f{target_id}\x1f{kind.value}"
            if note is not None:  # redacted as a memory's text is: a note is stored too
                note = self._redact(note) if self._redact is not None else note
                self.shared.backend.kv_put(NOTES, key, {"note": note}, user_id=found[source_id].user_id)
        return edge

    def note(self, edge: Relationship) -> str | None:
        """The note recorded with a caller's relation, if any."""
        entry = self.shared.backend.kv_get(NOTES, f"{edge.source_id}\x1f{edge.target_id}\x1f{edge.type.value}")
        return None if entry is None else entry.get("note")

    # -- a user's data (UserData) ------------------------------------------------------------
    keeps = (NOTES,)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """``notes``: ``[{"source_id", "target_id", "type", "note"}]`` of the relations between
        the user's memories that a caller recorded a note with (the relations themselves go
        with the memories)."""
        notes = [(k.split(_SEP), v) for k, v in self.shared.backend.kv_scan(NOTES)]
        mine = {cid for cid, c in self.shared.backend.get(sorted({k[0] for k, _ in notes})).items()
                if c.user_id == user_id}
        return {"notes": [dict(zip(("source_id", "target_id", "type"), k, strict=True), note=v["note"])
                          for k, v in notes if k[0] in mine]}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        staged = Staged()
        for i, raw in enumerate(section(data, "notes", list)):
            n = mapping(raw, f"notes[{i}]")
            ends = [check_id(n.get(end), f"notes[{i}].{end}") for end in ("source_id", "target_id")]
            staged.names.update(ends)
            key = _SEP.join((*ends, check_id(n.get("type"), f"notes[{i}].type")))
            staged.kv.append(KvEntry("notes", NOTES, key, {"note": check_text(f"notes[{i}].note", n.get("note"))}))
        return staged

    # -- reading the network -------------------------------------------------------------------
    def relationships(self, chunk_id: str, *, types: Iterable[str] | None = None,
                      direction: str = "both") -> list[Relationship]:
        check_id(chunk_id)
        if not self.shared.backend.contains([chunk_id]):
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        wanted = None if types is None else list(check_edge_types(types))  # a typo is an error, not []
        return self.shared.backend.edges([chunk_id], types=wanted, direction=direction)

    def expand(self, hits: list[SearchHit], flt: Filter, opts: ExpandOptions, k: int) -> list[SearchHit]:
        """Follow edges from the hits; return new hits that say how they were reached."""
        backend = self.shared.backend
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

    def with_contradictions(self, hits: list[SearchHit], flt: Filter,
                            known: Mapping[str, Sequence[Relationship]] | None = None) -> list[SearchHit]:
        """Each hit followed by the memories recorded as contradicting it (``relate(...,
        "contradicts")``, either direction) that the filter allows, so an answer is never
        shown without its rival; each carries a "contradicts" source naming the hit. A rival
        already in the results is marked the same way and moved next to it. ``known``: the
        ``contradicts`` relationships of some hits, as the search read them with the records;
        only the others' are asked of the backend."""
        if not hits:
            return hits
        known = known or {}
        ask = [h.id for h in hits if h.id not in known]
        edges = self.shared.backend.edges(ask, types=[RelationType.CONTRADICTS.value],
                                          direction="both") if ask else []
        if len(ask) < len(hits):  # (an edge between two hits is listed by both: once here, as edges lists it)
            held = {(e.source_id, e.target_id): e for e in edges}
            held.update(((e.source_id, e.target_id), e) for h in hits for e in known.get(h.id, ()))
            edges = [held[key] for key in sorted(held)]
        if not edges:
            return hits
        rivals: dict[str, list[tuple[str, float]]] = {}
        for e in edges:
            rivals.setdefault(e.source_id, []).append((e.target_id, float(e.weight)))
            rivals.setdefault(e.target_id, []).append((e.source_id, float(e.weight)))
        by_id = {h.id: h for h in hits}
        wanted = {cid for h in hits for cid, _ in rivals.get(h.id, ()) if cid not in by_id}
        allowed = self.shared.backend.matching(list(wanted), flt) if wanted else set()
        found = self.shared.backend.get([c for c in wanted if c in allowed]) if allowed else {}
        out: list[SearchHit] = []
        placed: set[str] = set()
        for rank, h in enumerate(hits, start=1):
            if h.id in placed:
                continue
            out.append(h)
            placed.add(h.id)
            for cid, weight in rivals.get(h.id, ()):
                if cid in placed:
                    continue
                other = by_id.get(cid)
                chunk = other.chunk if other is not None else found.get(cid)
                if chunk is None:
                    continue
                src = HitSource(rank, h.score * weight, RelationType.CONTRADICTS.value, h.id, 1)
                base = other if other is not None else SearchHit(chunk, h.score)
                # Moved up next to its rival: it takes this place's score, so the list stays sorted.
                out.append(replace(base, score=h.score, sources={**base.sources, "contradicts": src}))
                placed.add(cid)
        return out

    def postprocess(self, query: str, candidates: Sequence[Candidate], *, user_id: str | None = None,
                    filters: Any = None, rerank: Any = None, mmr: float | None = None,
                    expand: bool | ExpandOptions | None = None, top_n: int | None = None) -> list[SearchHit]:
        """Apply BeeWeave's ranking to results from any retriever (see ``BeeWeave.postprocess``)."""
        if not isinstance(query, str):
            raise InvalidInputError("query must be a string")
        if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Iterable):
            raise InvalidInputError("candidates must be a list of Candidate objects")
        cands = list(candidates)
        if not all(isinstance(c, Candidate) for c in cands):
            raise InvalidInputError("candidates must be Candidate objects")
        if top_n is not None:
            check_count("top_n", top_n)
        opts = check_ranking(rerank, mmr, expand)
        flt = build_filter(filters, user_id=user_id, declared=self.shared.declared_fields)
        backend = self.shared.backend
        embedder = self.shared.embedder
        now = self.shared.clock()
        ids = [c.id for c in cands]
        memories = backend.get(list(backend.matching(ids, flt))) if ids else {}
        hits: list[SearchHit] = []
        for rank, c in enumerate(cands):
            base = float(c.score) if c.score is not None else 1.0 / (1 + rank)
            chunk = memories.get(c.id)
            if chunk is not None:
                hits.append(SearchHit(chunk, base * score_factor(chunk, now, self.shared.scoring),
                                      {"input": HitSource(rank + 1, base)}))
            else:
                ext = KnowledgeChunk(raw_content=c.text if isinstance(c.text, str) and c.text.strip() else "(empty)",
                                     user_id=user_id or "external", id=c.id,
                                     metadata={**c.metadata, "external": True})
                hits.append(SearchHit(ext, base, {"input": HitSource(rank + 1, base)}))
        hits.sort(key=lambda h: (-h.score, h.id))
        if rerank is not None:
            hits = rerank.rerank(query, hits)
        if mmr is not None:
            texts = [h.chunk.content for h in hits]
            vecs: Any = embedder.embed_documents(texts) if texts else []
            hits = mmr_select(hits, {h.id: v for h, v in zip(hits, vecs)}, len(hits), float(mmr))
        if top_n is not None:
            hits = hits[:top_n]
        if opts is not None and hits:
            seeds = [h for h in hits if h.id in memories]
            external = [h for h in hits if h.id not in memories]
            if external:
                vecs = embedder.embed_documents([h.chunk.content for h in external])
                for h, v in zip(external, vecs):
                    for mid, sim in backend.vector_search(v, flt, 1):
                        if sim >= self.config.semantic_threshold and mid not in memories:
                            found = backend.get([mid]).get(mid)
                            if found is not None:
                                src = HitSource(1, h.score * opts.decay * sim, RelationType.SEMANTIC.value, h.id, 1)
                                seeds.append(SearchHit(found, src.score, {"graph": src}))
            seed_ids = {h.id for h in hits}
            linked = [s for s in seeds if s.id not in seed_ids]
            more = self.expand([*[h for h in hits if h.id in memories], *linked], flt,
                               replace(opts, hops=max(opts.hops, 1)), len(hits))
            seen = seed_ids | {h.id for h in linked}
            extra = linked + [h for h in more if h.id not in seen]
            hits = hits + sorted(extra, key=lambda h: (-h.score, h.id))
        return hits

    # -- session views -------------------------------------------------------------------------
    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]:
        flt = build_filter({"session_id": session_id, "status": ALL_STATUSES}, user_id=user_id)
        return list(self.shared.backend.scan(flt, order="timestamp"))

    def context(self, session_id: str, *, user_id: str | None = None, window: int = 10) -> list[KnowledgeChunk]:
        check_count("window", window)
        flt = build_filter({"session_id": session_id}, user_id=user_id)
        latest = list(self.shared.backend.scan(flt, order="timestamp", descending=True, limit=window))
        return latest[::-1]
