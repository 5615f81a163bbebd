"""The search part: retrieve -> fuse -> rank -> rerank / MMR, then graph expansion.

Each retriever (BM25 with session context, vectors) contributes its top candidates;
every candidate is then scored by both, fused, multiplied by the memory's rank factors
(weight, confidence, recency) and cut to k. The ``on_search`` hooks see the hits.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..defaults import DEFAULT_TOP_K
from ..errors import InvalidInputError
from ..filters import Filter, build_filter
from ..fusion import FusionMode, fuse_scores
from ..language import embedder_languages, retriever_weights
from ..lifecycle.timeline import current_first
from ..network import ExpandOptions, check_ranking
from ..query import prepare_query, split_questions
from ..records import Relationship, SearchHit, to_datetime
from ..relevance import (
    BACKGROUND,
    LEAD_OF,
    Evidence,
    calibration_for,
    default_gate,
    evidence_terms,
    lexical_evidence,
    relevance,
    semantic_leads,
    term_coverage,
)
from ..rerank import Reranker, mmr
from ..scopes import Scopes
from ..scoring import score_factor, ttl_passed
from ..store.base import StaleCandidates, TermEvidence
from ..timewords import DATED_LAG, find_time
from ..validation import check_content, check_count, check_number, check_vector
from .shared import Shared

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Search"]


class Search:
    """Hybrid search over the store, and the query-embedding cache."""

    def __init__(self, shared: Shared, graph: Graph, scopes: Scopes | None = None) -> None:
        self.shared = shared
        self.graph = graph
        self.scopes = scopes or Scopes()  # which owners (user, shared scopes, tenant) a search reads
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_model: Any = None  # the embedder the cached vectors came from
        self._lock = threading.Lock()

    def embed_query(self, query: str) -> np.ndarray:
        """The query's vector, from a small LRU cache when the same query was asked before."""
        embedder = self.shared.embedder
        with self._lock:
            if self._cache_model is not embedder:  # reembed() moved the store to another model
                self._cache.clear()
                self._cache_model = embedder
            hit = self._cache.get(query)
            if hit is not None:
                self._cache.move_to_end(query)
                return hit
        vec = embedder.embed_query(query)
        with self._lock:
            if self._cache_model is embedder:
                self._cache[query] = vec
                while len(self._cache) > self.shared.config.query_cache_size:
                    self._cache.popitem(last=False)
        return vec

    def search(self, query: str, *, user_id: str | None = None, k: int = DEFAULT_TOP_K, filters: Mapping[str, Any] | None = None,
               fusion: FusionMode | str | None = None, min_score: float | None = None,
               query_embedding: Sequence[float] | None = None, expand: bool | ExpandOptions | None = None,
               rerank: Reranker | None = None, mmr: float | None = None, loosen: bool = False,
               min_relevance: float | None = None, abstain_below: float | None = None,
               scopes: Sequence[str] | str | None = None,
               as_of: datetime | str | None = None) -> list[SearchHit]:
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
        check_count("k", k)
        try:
            mode = FusionMode(fusion) if fusion is not None else self.shared.config.fusion
        except ValueError:
            raise InvalidInputError(
                f"fusion must be one of {', '.join(m.value for m in FusionMode)}, got {fusion!r}") from None
        now = self.shared.clock()
        flt = build_filter(filters, user_id=self.scopes.owners(user_id, scopes), now=now,
                           declared=self.shared.declared_fields)
        at = now if as_of is None else to_datetime(as_of, "as_of")
        if as_of is not None:  # what was known then: nothing stored later (facts: see below)
            flt = flt.replace(until=at if flt.until is None else min(flt.until, at))
        qvec = None
        if query_embedding is not None:
            qvec = self._query_vector(query_embedding)
        if min_score is not None:
            check_number("min_score", min_score)
        if min_relevance is None:
            min_relevance = self.shared.config.min_relevance
        if min_relevance is not None:
            check_number("min_relevance", min_relevance, low=0.0, high=1.0)
        if abstain_below is None and min_relevance == 0:
            abstain_below = 0.0  # no threshold at all: the caller wants every hit
        if abstain_below is None:  # the store's, else its model's tuned gate (none for a model nobody fitted)
            abstain_below = default_gate(self.shared.config.abstain_below, self.shared.embedder.name)
        if abstain_below is not None:
            check_number("abstain_below", abstain_below, low=0.0, high=1.0)
        opts = check_ranking(rerank, mmr, expand)
        check_content(query, "query")
        if k == 0:
            return []
        rivals: dict[str, list[Relationship]] = {}  # read with the records, when the backend can
        hits = self._timed_search(query, flt, k, qvec, mode, min_score, rerank, mmr, now, min_relevance, rivals)
        if loosen and len(hits) < k:
            loose = flt.replace(tags_any=None, tags_all=None, entities=None)
            seen = {h.id for h in hits}
            more = self._timed_search(query, loose, k, qvec, mode, None, rerank, mmr, now, min_relevance, rivals)
            hits += [replace(h, loosened=True) for h in more if h.id not in seen][: k - len(hits)]
        if abstain_below is not None and max((h.relevance or 0.0 for h in hits), default=0.0) < abstain_below:
            hits = []  # nothing relevant: the caller takes the no-memory path
        if opts is not None:
            hits += self._expanded(hits, self.graph.expand(hits, flt, opts, k), opts, min_relevance)
        if self.shared.config.contradictions:
            hits = self.graph.with_contradictions(hits, flt, known=rivals)
        # A fact's newer statement first, the one it superseded (at ``at``) flagged after it.
        hits = current_first(hits, at, self.shared.backend, flt, len(hits))
        for hook in self.shared.hooks.on_search:
            hook(hits, now)
        return hits

    def _timed_search(self, query: str, flt: Filter, k: int, qvec: np.ndarray | None, mode: FusionMode,
                      min_score: float | None, rerank: Reranker | None, mmr_lambda: float | None,
                      now: datetime, min_relevance: float | None = None,
                      rivals: dict[str, list[Relationship]] | None = None) -> list[SearchHit]:
        """A time phrase in the query ("上周讨论的备份问题") filters to its range and leaves the
        text; when nothing in that range matches (the phrase was about the conversation's own
        time, not the clock's), the query is searched as written."""
        when = find_time(query, now, dated_lag=DATED_LAG) if self.shared.config.time_words else None
        if when is not None:
            r = when.range
            since = r.start if flt.since is None else max(flt.since, r.start)
            until = r.until if flt.until is None else min(flt.until, r.until)
            if since <= until:
                text = when.text if when.text.strip() else query
                hits = self._search_questions(text, flt.replace(since=since, until=until), k, qvec, mode, min_score,
                                              rerank, mmr_lambda, now, min_relevance, rivals)
                if hits:
                    return [replace(h, time_range=r) for h in hits]
        return self._search_questions(query, flt, k, qvec, mode, min_score, rerank, mmr_lambda, now, min_relevance,
                                      rivals)

    @staticmethod
    def _expanded(hits: list[SearchHit], more: list[SearchHit], opts: ExpandOptions,
                  min_relevance: float | None) -> list[SearchHit]:
        """A memory reached over edges is as relevant as the hit it came from, decayed per hop."""
        origin = {h.id: h.relevance or 0.0 for h in hits}
        out = []
        for h in more:
            g = h.sources.get("graph")
            rel = origin.get(g.from_id or "", 0.0) * opts.decay ** g.hops if g is not None else 0.0
            if min_relevance is None or rel >= min_relevance:
                out.append(replace(h, relevance=rel))
        return out

    def _relevance(self, terms: Mapping[str, int], flt: Filter, hits: list[SearchHit],
                   found: TermEvidence | None = None, qvec: np.ndarray | None = None,
                   top: Sequence[float] = ()) -> list[SearchHit]:
        """Each hit with its calibrated relevance (``beeweave_core.relevance``); ``found``: its
        lexical evidence as the search's round trip read it; ``top``: the highest cosines of
        the search's candidates (each hit's lead is read against them)."""
        if not hits:
            return hits
        tokenize = self.shared.tokenizer.tokenize
        curve = calibration_for(self.shared.embedder.name)
        background = BACKGROUND.cosine(self.shared.embedder, qvec) if curve.margin and qvec is not None else 0.0
        own = {h.id: set(tokenize(h.chunk.content)) for h in hits}
        lexical = lexical_evidence(self.shared.backend, terms, flt, [h.id for h in hits], own, found)
        evidence: dict[str, Evidence] = {}
        for h in hits:
            vec = h.sources.get("vector")
            evidence[h.id] = Evidence(vec.score if vec is not None else 0.0, lexical.get(h.id, 0.0),
                                      term_coverage(terms, own[h.id]), background if vec is not None else 0.0)
        if curve.lead_weight and qvec is not None:
            words = curve._replace(lead_weight=0.0)

            def matters(cid: str, rise: float) -> bool:  # the lead's curve above the words' one
                return relevance(evidence[cid]._replace(lead=rise), calibration=curve) > relevance(
                    evidence[cid], calibration=words)

            near = [(h.id, v.score) for h in hits if (v := h.sources.get("vector")) is not None]
            rises = semantic_leads(self.shared.backend, self.shared.embedder, [cid for cid, _ in near],
                                   [c for _, c in near], top, qvec, matters)
            for (cid, _), rise in zip(near, rises, strict=True):
                evidence[cid] = evidence[cid]._replace(lead=rise)
        out = []
        for h in hits:
            ce = h.sources.get("rerank")
            ev = evidence[h.id]
            out.append(replace(h, relevance=relevance(ev, ce.score if ce is not None else None, curve)))
        return out

    def _query_vector(self, vec: Any) -> np.ndarray:
        return check_vector(vec, self.shared.dim or self.shared.embedder.dim, "query_embedding")

    def _search_questions(self, query: str, flt: Filter, k: int, qvec: np.ndarray | None, mode: FusionMode,
                          min_score: float | None, rerank: Reranker | None, mmr_lambda: float | None,
                          now: datetime, min_relevance: float | None = None,
                          rivals: dict[str, list[Relationship]] | None = None) -> list[SearchHit]:
        """A query that asks several questions is searched question by question (each embedded
        on its own unless the caller gave the vector); a memory keeps its best score."""
        parts = split_questions(query)
        if len(parts) == 1:
            return self._search_once(query, flt, k, qvec, mode, min_score, rerank, mmr_lambda, now, min_relevance,
                                     rivals)
        best: dict[str, SearchHit] = {}
        for part in parts:
            for h in self._search_once(part, flt, k, qvec, mode, min_score, rerank, mmr_lambda, now, min_relevance,
                                       rivals):
                if h.id not in best or h.score > best[h.id].score:
                    best[h.id] = h
        return sorted(best.values(), key=lambda h: (-h.score, h.id))[:k]

    def _search_once(self, query: str, flt: Filter, k: int, qvec: np.ndarray | None, mode: FusionMode,
                     min_score: float | None, rerank: Reranker | None, mmr_lambda: float | None,
                     now: datetime, min_relevance: float | None = None,
                     rivals: dict[str, list[Relationship]] | None = None, *,
                     optimistic: bool = True) -> list[SearchHit]:
        """One question's hits; ``rivals`` gathers the ``contradicts`` relationships the
        backend read with the records (``Candidates.rivals``). ``optimistic``: the backend
        may rank before it checks for others' writes (``Capabilities.retrieval``); a second try
        after stale candidates is not, so there is never a third."""
        backend = self.shared.backend
        # A dialogue query: its latest turns embedded, recent terms weigh more, cost bounded
        # (a plain question passes through unchanged).
        prepared = prepare_query(query, self.shared.tokenizer)
        if qvec is None and backend.count(None):
            qvec = self.embed_query(prepared.text)
        got = None
        if qvec is not None and (one_trip := backend.capabilities.retrieval) is not None:
            # The backend answers the candidates, their fields and records, and the hits'
            # lexical evidence of relevance in one round trip.
            got = one_trip.retrieve(prepared.terms, qvec, flt, max(self.shared.config.candidates, 4 * k),
                                    evidence=evidence_terms(prepared.terms), optimistic=optimistic)
            ids, scores = got.ids, {"lexical": got.lexical, "vector": got.vector}
        else:
            ids, scores = self._retrieve(prepared.terms, flt, k, qvec)
        # Weight factors can lift a candidate a little, so look a bit past k; rerankers see more.
        pool_size = max(2 * k, k + 10) if rerank is None and mmr_lambda is None else max(4 * k, 40)
        cfg = self.shared.config
        # Lean on BM25 for the part of the query the embedder's languages do not cover.
        weights = retriever_weights(query, embedder_languages(self.shared.embedder), cfg.weights)
        pool = fuse_scores(ids, scores, mode=mode, weights=weights, rrf_k=cfg.rrf_k, limit=pool_size)
        if mode is FusionMode.ZSCORE:
            # Map the z-sum onto (0, 1) (monotone) so that weight factors can multiply it.
            pool = [(c, 1.0 / (1.0 + math.exp(-max(min(s, 60.0), -60.0))), src) for c, s, src in pool]
        # Ranked by the few fields scoring reads; only the records returned are decoded. A stable
        # sort on the score alone: equal scores keep fusion's order, whose ties the evidence broke.
        fields = got.fields if got is not None else backend.rank_fields([cid for cid, _, _ in pool])
        scoring = self.shared.scoring
        ranked = sorted(((cid, score * score_factor(f, now, scoring), src) for cid, score, src in pool
                         if (f := fields.get(cid)) is not None), key=lambda t: -t[1])
        if min_score is not None:
            ranked = [t for t in ranked if t[1] >= min_score]
        if rerank is None and mmr_lambda is None:
            ranked = ranked[:k]
        wanted = [cid for cid, _, _ in ranked]
        try:
            chunks = got.records(wanted) if got is not None else backend.get(wanted)
        except StaleCandidates:  # ranked from a local index others have written past: again
            return self._search_once(query, flt, k, qvec, mode, min_score, rerank, mmr_lambda, now, min_relevance,
                                     rivals, optimistic=False)
        if got is not None and rivals is not None and (read := got.rivals) is not None:
            rivals.update(read)
        scored = [SearchHit(chunks[cid], score, src) for cid, score, src in ranked
                  if cid in chunks and not ttl_passed(chunks[cid], now)]
        if rerank is not None:
            scored = rerank.rerank(query, scored)
        if mmr_lambda is not None:
            scored = mmr(scored, backend.get_vectors([h.id for h in scored]), k, float(mmr_lambda))
        vector = scores["vector"]  # the candidates' cosines: the top ones are what a hit's lead is read against
        top = np.sort(vector)[::-1][: LEAD_OF + 1].tolist() if len(vector) else []
        scored = self._relevance(prepared.terms, flt, scored[:k], got.evidence if got is not None else None, qvec,
                                 top)
        if min_relevance is not None:
            scored = [h for h in scored if h.relevance is not None and h.relevance >= min_relevance]
        return scored

    def _retrieve(self, terms: Mapping[str, int], flt: Filter, k: int,
                  qvec: np.ndarray | None) -> tuple[list[str], dict[str, np.ndarray]]:
        """Candidates from both retrievers, each then scored by both: the ids, and each
        retriever's scores (for the query's term counts) aligned with them, so fusion
        compares one set on both scales."""
        backend = self.shared.backend
        depth = max(self.shared.config.candidates, 4 * k)
        if backend.count(None) == 0 or qvec is None:
            return [], {"lexical": np.zeros(0), "vector": np.zeros(0)}
        vector_top = backend.vector_search(qvec, flt, depth)
        lexical = backend.lexical_search(terms, flt, depth, include=[cid for cid, _ in vector_top])
        vector = backend.vector_scores(qvec, [cid for cid, _ in lexical])
        if len(vector) < len(lexical):  # deleted meanwhile: gone from both lists
            lexical = [(cid, sc) for cid, sc in lexical if cid in vector]
        ids = [cid for cid, _ in lexical]
        return ids, {"lexical": np.fromiter((sc for _, sc in lexical), np.float64, len(ids)),
                     "vector": np.fromiter((vector[cid] for cid in ids), np.float64, len(ids))}
