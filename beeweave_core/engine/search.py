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
from ..filters import Filter
from ..fusion import FusionMode, fuse_scores
from ..index.vectors import matvec
from ..language import embedder_languages, retriever_weights
from ..lifecycle.timeline import current_first
from ..network import ExpandOptions
from ..query import prepare_query, split_questions
from ..records import HitSource, Relationship, SearchHit
from ..relevance import (
    BACKGROUND,
    Calibration,
    Evidence,
    calibration_for,
    counts_as_use,
    default_gate,
    evidence_terms,
    gated,
    lexical_evidence,
    mean_cosine,
    relevance,
    scores_kept_sorted,
    semantic_leads,
    term_coverage,
    top_cosines,
)
from ..rerank import Reranker, mmr
from ..scopes import Scopes
from ..scoring import rank_factors, ttl_passed, use_order
from ..store.base import Candidates, StaleCandidates, TermEvidence
from ..timewords import DATED_LAG, find_time
from .search_request import SearchRequest, build_search_request
from .shared import Shared

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Search"]


def _use_reorders(plain: list[str], lifted: list[str]) -> bool:
    """Whether use (the lift) changes which hits a search returns or their order."""
    return plain != lifted


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
        """``BeeWeave.search``: the arguments validated into one ``SearchRequest``, then run."""
        return self.run(build_search_request(
            self.shared, self.scopes, query, user_id=user_id, k=k, filters=filters, fusion=fusion, min_score=min_score,
            query_embedding=query_embedding, expand=expand, rerank=rerank, mmr=mmr, loosen=loosen,
            min_relevance=min_relevance, abstain_below=abstain_below, scopes=scopes, as_of=as_of))

    def run(self, req: SearchRequest) -> list[SearchHit]:
        """The hits of a validated search, with graph expansion, contradictions, the facts'
        current statements first; the ``on_search`` hooks see them."""
        if req.k == 0:
            return []
        rivals: dict[str, list[Relationship]] = {}  # read with the records, when the backend can
        hits = self._timed_search(req, rivals)
        if req.loosen and len(hits) < req.k:
            hits += self._loosened(req, hits, rivals)
        hits = self._expanded(req, gated(hits, req.abstain_below))
        if self.shared.config.contradictions:
            hits = self.graph.with_contradictions(hits, req.flt, known=rivals)
        # A fact's newer statement first, the one it superseded (at ``at``) flagged after it.
        hits = current_first(hits, req.at, self.shared.backend, req.flt, len(hits))
        for hook in self.shared.hooks.on_search:
            hook(hits, req.now)
        return hits

    def _loosened(self, req: SearchRequest, hits: list[SearchHit],
                  rivals: dict[str, list[Relationship]]) -> list[SearchHit]:
        """Strict-then-loose: the hits a search without the tags, entities and ``min_score``
        adds to ``hits``, up to k (the owners are never loosened)."""
        loose = replace(req, flt=req.flt.replace(tags_any=None, tags_all=None, entities=None), min_score=None)
        seen = {h.id for h in hits}
        more = self._timed_search(loose, rivals)
        return [replace(h, loosened=True) for h in more if h.id not in seen][: req.k - len(hits)]

    def _timed_search(self, req: SearchRequest, rivals: dict[str, list[Relationship]]) -> list[SearchHit]:
        """A time phrase in the query ("上周讨论的备份问题") filters to its range and leaves the
        text; when nothing in that range matches (the phrase was about the conversation's own
        time, not the clock's), the query is searched as written."""
        when = find_time(req.query, req.now, dated_lag=DATED_LAG) if self.shared.config.time_words else None
        if when is not None:
            r, flt = when.range, req.flt
            since = r.start if flt.since is None else max(flt.since, r.start)
            until = r.until if flt.until is None else min(flt.until, r.until)
            if since <= until:
                text = when.text if when.text.strip() else req.query
                hits = self._search_questions(replace(req, query=text, flt=flt.replace(since=since, until=until)),
                                              rivals)
                if hits:
                    return [replace(h, time_range=r) for h in hits]
        return self._search_questions(req, rivals)

    def _expanded(self, req: SearchRequest, hits: list[SearchHit]) -> list[SearchHit]:
        """``hits`` and, when asked, the memories reached over their edges: each as relevant
        as the hit it came from, decayed per hop (those below ``min_relevance`` left out)."""
        opts = req.expand
        if opts is None:
            return hits
        origin = {h.id: h.relevance or 0.0 for h in hits}
        out = list(hits)
        for h in self.graph.expand(hits, req.flt, opts, req.k):
            g = h.sources.get("graph")
            rel = origin.get(g.from_id or "", 0.0) * opts.decay ** g.hops if g is not None else 0.0
            if req.min_relevance is None or rel >= req.min_relevance:
                out.append(replace(h, relevance=rel))
        return out

    def _background(self, qvec: np.ndarray | None) -> np.ndarray:
        """The query's cosines with the everyday statements (what both curves read), or none
        when the store's model reads neither curve's side of them."""
        embedder = self.shared.embedder
        curve = calibration_for(embedder.name)
        if qvec is not None and (curve.margin or curve.lead_weight):
            return BACKGROUND.cosines(embedder, qvec)
        return np.zeros(0, dtype=np.float32)

    def _relevance(self, terms: Mapping[str, int], flt: Filter, hits: list[SearchHit],
                   found: TermEvidence | None = None, qvec: np.ndarray | None = None,
                   candidates: Mapping[str, float] | None = None,
                   background: np.ndarray | None = None) -> list[SearchHit]:
        """Each hit with its calibrated relevance (``beeweave_core.relevance``); ``found``: its
        lexical evidence as the search's round trip read it; ``candidates``: the search's
        candidates' own cosines (``_own_cosines``: each hit's lead is read from its own against
        the highest); ``background``: ``_background(qvec)`` when the search already read it."""
        if not hits:
            return hits
        curve = calibration_for(self.shared.embedder.name)
        if background is None:
            background = self._background(qvec)
        evidence = self._evidence(terms, flt, hits, found, mean_cosine(background) if curve.margin else 0.0)
        if curve.lead_weight and qvec is not None:
            self._with_leads(evidence, hits, curve, qvec, background, candidates or {})
        out = []
        for h in hits:
            ce = h.sources.get("rerank")
            out.append(replace(h, relevance=relevance(evidence[h.id], ce.score if ce is not None else None, curve)))
        return out

    def _evidence(self, terms: Mapping[str, int], flt: Filter, hits: list[SearchHit], found: TermEvidence | None,
                  background: float) -> dict[str, Evidence]:
        """Each hit's evidence but its lead: its cosine, lexical score and coverage, and the
        query's ``background`` (for a hit the vectors found)."""
        tokenize = self.shared.tokenizer.tokenize
        own = {h.id: set(tokenize(h.chunk.content)) for h in hits}
        lexical = lexical_evidence(self.shared.backend, terms, flt, [h.id for h in hits], own, found)
        evidence: dict[str, Evidence] = {}
        for h in hits:
            vec = h.sources.get("vector")
            evidence[h.id] = Evidence(vec.score if vec is not None else 0.0, lexical.get(h.id, 0.0),
                                      term_coverage(terms, own[h.id]), background if vec is not None else 0.0)
        return evidence

    def _with_leads(self, evidence: dict[str, Evidence], hits: list[SearchHit], curve: Calibration,
                    qvec: np.ndarray, background: np.ndarray, cosines: Mapping[str, float]) -> None:
        """Each vector hit's ``Evidence.lead``, set in ``evidence`` (``semantic_leads``), from
        its own cosine against the candidates' highest (``cosines``: the candidates' own)."""
        words = curve._replace(lead_weight=0.0)

        def matters(cid: str, rise: float) -> bool:  # the lead's curve above the words' one
            return relevance(evidence[cid]._replace(lead=rise), calibration=curve) > relevance(
                evidence[cid], calibration=words)

        near = [(h.id, cosines.get(h.id, v.score)) for h in hits if (v := h.sources.get("vector")) is not None]
        top = top_cosines(np.fromiter(cosines.values(), np.float64, len(cosines))) if cosines else []
        rises = semantic_leads(self.shared.backend, self.shared.embedder, [cid for cid, _ in near],
                               [c for _, c in near], top, qvec, matters, background=background.tolist())
        for (cid, _), rise in zip(near, rises, strict=True):
            evidence[cid] = evidence[cid]._replace(lead=rise)

    def _search_questions(self, req: SearchRequest, rivals: dict[str, list[Relationship]]) -> list[SearchHit]:
        """A query that asks several questions is searched question by question (each embedded
        on its own unless the caller gave the vector) and the answers taken in turns
        (``take_turns``)."""
        parts = split_questions(req.query)
        if len(parts) == 1:
            return self._search_once(req, rivals)
        return take_turns([self._search_once(replace(req, query=part), rivals) for part in parts], req.k)

    def _search_once(self, req: SearchRequest, rivals: dict[str, list[Relationship]], *,
                     optimistic: bool = True) -> list[SearchHit]:
        """One question's hits; ``rivals`` gathers the ``contradicts`` relationships the
        backend read with the records (``Candidates.rivals``). ``optimistic``: the backend
        may rank before it checks for others' writes (``Capabilities.retrieval``); a second try
        after stale candidates is not, so there is never a third."""
        backend = self.shared.backend
        # A dialogue query: its latest turns embedded, recent terms weigh more, cost bounded
        # (a plain question passes through unchanged).
        prepared = prepare_query(req.query, self.shared.tokenizer)
        # The query vector names its model (a given one too: it must be for the model this
        # BeeWeave uses), as every vector written does: the backend refuses it if another
        # process moved the store to another model since (``check_query_model``).
        model = self.shared.embedder.name
        qvec = req.query_vector
        if qvec is None and backend.count(None):
            qvec = self.embed_query(prepared.text)
        got, ids, scores = self._candidates(req, prepared.terms, qvec, model, optimistic)
        # The semantic lead (does this memory stand out from the next closest?) reads each
        # candidate's cosine with its own vector: the ranking's blends in its session
        # neighbours', and within one session those crowd together so that no memory stands
        # out (the answer to "who is travelling with me?" read 0.17 among the eight turns of
        # its trip's session, 0.96 on its own).
        own = (self._own_cosines(got, ids, qvec, scores["vector"])
               if calibration_for(self.shared.embedder.name).lead_weight else {})
        ranked, by_use = self._ranked(req, ids, scores, got)
        wanted = [cid for cid, _, _ in ranked]
        try:
            chunks = got.records(wanted) if got is not None else backend.get(wanted)
        except StaleCandidates:  # ranked from a local index others have written past: again
            return self._search_once(req, rivals, optimistic=False)
        if got is not None and (read := got.rivals) is not None:
            rivals.update(read)
        scored = [SearchHit(chunks[cid], score, src) for cid, score, src in ranked
                  if cid in chunks and not ttl_passed(chunks[cid], req.now)]
        found = got.evidence if got is not None else None
        # Read once: ordering by use reads relevance over the pool, the hits returned again.
        background = self._background(qvec) if scored else None
        if by_use:
            scored = self._by_use(req, self._relevance(prepared.terms, req.flt, scored, found, qvec, own,
                                                       background))
        scored = self._reordered(req, scored)
        scored = self._relevance(prepared.terms, req.flt, scored[: req.k], found, qvec, own, background)
        if req.min_relevance is not None:
            scored = [h for h in scored if h.relevance is not None and h.relevance >= req.min_relevance]
        return scored

    def _own_cosines(self, got: Candidates | None, ids: list[str], qvec: np.ndarray | None,
                     context: np.ndarray) -> dict[str, float]:
        """Each candidate's cosine with its own vector, as the backend's one trip gave them or
        read here (a local index's vectors are in memory); a candidate without a vector keeps
        the ranking's cosine."""
        if qvec is None or not ids:
            return {}
        given = got.own_vector if got is not None else None
        if given is not None:
            return dict(zip(ids, given.tolist(), strict=True))
        vectors = self.shared.backend.get_vectors(ids)
        held = [cid for cid in ids if cid in vectors]
        own = dict(zip(held, matvec(np.stack([vectors[cid] for cid in held]).astype(np.float64),
                                    np.asarray(qvec, np.float64)).tolist(), strict=True)) if held else {}
        return {cid: own.get(cid, float(c)) for cid, c in zip(ids, context.tolist(), strict=True)}

    def _by_use(self, req: SearchRequest, hits: list[SearchHit]) -> list[SearchHit]:
        """``hits`` (ordered without the lift, scored with it, with their relevance) in
        ``use_order``: use reorders hits only among neighbours on the same side of the store's
        gate (``counts_as_use``); cut to k unless a reranker or MMR is to see more. A hit's
        score is at most the one above it, so the scores stay sorted."""
        gate = default_gate(self.shared.config.abstain_below, self.shared.embedder.name)
        order = use_order([h.score for h in hits], [counts_as_use(h.relevance, gate) for h in hits])
        return scores_kept_sorted([hits[i] for i in order[: None if req.reorders else req.k]])

    def _candidates(self, req: SearchRequest, terms: Mapping[str, int], qvec: np.ndarray | None, model: str,
                    optimistic: bool) -> tuple[Candidates | None, list[str], dict[str, np.ndarray]]:
        """The question's candidates and both retrievers' scores of them, with the backend's
        one-trip answer (``Candidates``) when it gives one."""
        if qvec is not None and (one_trip := self.shared.backend.capabilities.retrieval) is not None:
            # The backend answers the candidates, their fields and records, and the hits'
            # lexical evidence of relevance in one round trip.
            got = one_trip.retrieve(terms, qvec, req.flt, max(self.shared.config.candidates, 4 * req.k),
                                    evidence=evidence_terms(terms), optimistic=optimistic, model=model)
            return got, got.ids, {"lexical": got.lexical, "vector": got.vector}
        ids, scores = self._retrieve(terms, req.flt, req.k, qvec, model)
        return None, ids, scores

    def _reordered(self, req: SearchRequest, hits: list[SearchHit]) -> list[SearchHit]:
        """The ranked hits through the reranker, then MMR, when the search asked for them."""
        if req.rerank is not None:
            hits = req.rerank.rerank(req.query, hits)
        if req.mmr is not None:
            hits = mmr(hits, self.shared.backend.get_vectors([h.id for h in hits]), req.k, req.mmr)
        return hits

    def _ranked(self, req: SearchRequest, ids: list[str], scores: dict[str, np.ndarray],
                got: Candidates | None) -> tuple[list[tuple[str, float, dict[str, HitSource]]], bool]:
        """The candidates fused, times each memory's rank factors, best first, above
        ``min_score``; cut to k unless a reranker or MMR is to see more. True with the whole
        pool ordered without the lift when use would reorder what is returned and the store
        has a gate: ``_by_use`` orders it by relevance (reading the pool's records). A model
        nobody fitted has no gate, and every hit counts as relevant: the lifted order."""
        # Weight factors can lift a candidate a little, so look a bit past k; rerankers see more.
        k = req.k
        pool_size = max(4 * k, 40) if req.reorders else max(2 * k, k + 10)
        cfg = self.shared.config
        # Lean on BM25 for the part of the query the embedder's languages do not cover.
        weights = retriever_weights(req.query, embedder_languages(self.shared.embedder), cfg.weights)
        pool = fuse_scores(ids, scores, mode=req.mode, weights=weights, rrf_k=cfg.rrf_k, limit=pool_size)
        # Ranked by the few fields scoring reads; only the records returned are decoded (the
        # pool's when use would reorder them: their relevance decides where it may). Stable
        # sorts on the score alone: equal scores keep fusion's order, whose ties the evidence broke.
        fields = got.fields if got is not None else self.shared.backend.rank_fields([cid for cid, _, _ in pool])
        scoring = self.shared.scoring
        # Each candidate without its lift (relevance and penalties: the order use may not
        # overrule) and with it.
        plain: list[tuple[str, float, float, dict[str, HitSource]]] = []
        for cid, score, src in pool:
            if (f := fields.get(cid)) is not None:
                if req.mode is FusionMode.ZSCORE:  # the z-sum onto (0, 1), monotone, for the factors to multiply
                    score = 1.0 / (1.0 + math.exp(-max(min(score, 60.0), -60.0)))
                lift, penalty = rank_factors(f, req.now, scoring)
                plain.append((cid, score * penalty, score * penalty * lift, src))
        if req.min_score is not None:
            plain = [t for t in plain if t[2] >= req.min_score]
        lifted = sorted(plain, key=lambda t: -t[2])
        plain.sort(key=lambda t: -t[1])
        n = len(lifted) if req.reorders else k
        gate = default_gate(cfg.abstain_below, self.shared.embedder.name)
        if not gate or not _use_reorders([t[0] for t in plain[:n]], [t[0] for t in lifted[:n]]):
            # The lifted order is what use_order gives: with no gate every hit is on one side
            # (one run), and if no hit passes another none passes one of another run; the
            # hits' relevance is not needed to rank them.
            return [(cid, score, src) for cid, _, score, src in lifted[:n]], False
        return [(cid, score, src) for cid, _, score, src in plain], True

    def _retrieve(self, terms: Mapping[str, int], flt: Filter, k: int, qvec: np.ndarray | None,
                  model: str | None = None) -> tuple[list[str], dict[str, np.ndarray]]:
        """Candidates from both retrievers, each then scored by both: the ids, and each
        retriever's scores (for the query's term counts) aligned with them, so fusion
        compares one set on both scales."""
        backend = self.shared.backend
        depth = max(self.shared.config.candidates, 4 * k)
        if backend.count(None) == 0 or qvec is None:
            return [], {"lexical": np.zeros(0), "vector": np.zeros(0)}
        vector_top = backend.vector_search(qvec, flt, depth, model=model)
        lexical = backend.lexical_search(terms, flt, depth, include=[cid for cid, _ in vector_top])
        vector = backend.vector_scores(qvec, [cid for cid, _ in lexical], model=model)
        if len(vector) < len(lexical):  # deleted meanwhile: gone from both lists
            lexical = [(cid, sc) for cid, sc in lexical if cid in vector]
        ids = [cid for cid, _ in lexical]
        return ids, {"lexical": np.fromiter((sc for _, sc in lexical), np.float64, len(ids)),
                     "vector": np.fromiter((vector[cid] for cid in ids), np.float64, len(ids))}


def take_turns(answers: Sequence[Sequence[SearchHit]], k: int) -> list[SearchHit]:
    """The first ``k`` of several questions' hits, each question's best before any question's
    second (ties by score): merged by score alone, a question whose terms are rare fills the
    whole top k and the other question's answer falls out of it. A memory that answers
    several keeps its best place and score; a hit's score is at most the one above it, so the
    scores stay sorted."""
    place: dict[str, tuple[int, float]] = {}
    best: dict[str, SearchHit] = {}
    for hits in answers:
        for rank, h in enumerate(hits):
            if h.id not in best or h.score > best[h.id].score:
                best[h.id] = h
            place[h.id] = min(place.get(h.id, (rank, -h.score)), (rank, -h.score))
    return scores_kept_sorted([best[cid] for cid in sorted(best, key=lambda c: (*place[c], c))[:k]])
