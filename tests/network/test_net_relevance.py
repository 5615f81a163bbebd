"""Calibrated relevance: read from absolute evidence, so it means the same in a store of one
memory or many and under every fusion mode; ``min_relevance`` turns "nothing relevant" into
an empty answer."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.engine.search_config import SearchConfig
from beeweave_core.filters import build_filter
from beeweave_core.fusion import FusionMode
from beeweave_core.query import prepare_query
from beeweave_core.relevance import (
    DEFAULT_ABSTAIN_BELOW,
    DEFAULT_MIN_RELEVANCE,
    Evidence,
    calibration_for,
    lexical_evidence,
    relevance,
    term_coverage,
)

DEPLOY = "Deploy the staging cluster with make release on the build host"
CAKE = "Grandma's chocolate cake needs three eggs and dark cocoa"


def _store(*texts: str, **kw) -> BeeWeave:
    m = BeeWeave(embedder=HashingEmbedder(64), **kw)
    for t in texts:
        m.add(t, user_id="u")
    return m


def _evidence(m: BeeWeave, query: str, hit) -> Evidence:
    """The evidence of the only hit of a store of one, as the definition reads it: its cosine;
    lexically, BM25's idf is 0 there, so the share of the query's terms found in some hit that
    this one has (1 when it has any of them); its coverage."""
    shared = m.parts.shared
    terms = prepare_query(query, shared.tokenizer).terms
    vec = m.backend.vector_scores(m.embed_query(query), [hit.id])[hit.id]
    own = set(shared.tokenizer.tokenize(hit.chunk.content))
    cover = term_coverage(terms, own)
    assert cover == sum(t in own for t in terms) / len(terms)
    return Evidence(max(vec, 0.0), 1.0 if cover > 0 else 0.0, cover)


def test_one_memory_store_relevance_tracks_the_evidence_not_the_pool() -> None:
    with _store(DEPLOY) as m:
        on = m.search("how do I deploy staging with make release", user_id="u")[0]
        off = m.search("chocolate cake recipe", user_id="u")[0]
        assert on.score == pytest.approx(0.5) and off.score == pytest.approx(0.5)  # a pool of one says nothing
        assert on.relevance > 10 * off.relevance and off.relevance < 0.05
        # In a store of one, BM25's idf is 0: the terms it has, coverage and the cosine carry the evidence.
        curve = calibration_for(m.embedder.name)  # the hashing embedder's: MiniLM's curve, as a reading
        assert on.relevance == pytest.approx(relevance(_evidence(m, "how do I deploy staging with make release", on),
                                                       calibration=curve))


def test_two_memory_store_each_hit_gets_its_own_evidence() -> None:
    with _store(DEPLOY, CAKE) as m:
        hits = {h.id: h for h in m.search("deploy staging with make release", user_id="u", k=2)}
        deploy, cake = sorted(hits.values(), key=lambda h: -h.score)
        assert deploy.chunk.content == DEPLOY and deploy.score > 0.7 and cake.score < 0.3
        assert deploy.relevance > DEFAULT_MIN_RELEVANCE > 0.05 > cake.relevance
        # The relevance of the deploy memory is what it was alone: the other memory does not move it.
        with _store(DEPLOY) as alone:
            assert alone.search("deploy staging with make release", user_id="u")[0].relevance == \
                pytest.approx(deploy.relevance, abs=0.02)


def test_more_matching_evidence_means_more_relevance() -> None:
    with _store(DEPLOY, CAKE, "The build host is in rack 4", "Make sure release notes are written") as m:
        rel = [m.search(q, user_id="u", k=1)[0].relevance
               for q in ("cluster", "staging cluster", "deploy staging cluster", "deploy staging cluster with make release")]
        assert rel == sorted(rel) and rel[-1] > rel[0]


@pytest.mark.parametrize("floor", [0.2, 0.5])
def test_the_same_min_relevance_gives_the_same_hits_under_every_fusion(floor: float) -> None:
    texts = [DEPLOY, CAKE, "The build host is in rack 4", "Release notes go in the wiki", "Cocoa powder is bitter"]
    with _store(*texts) as m:
        for query in ("deploy the staging cluster", "chocolate cake eggs", "quantum field theory"):
            got = {}
            for mode in FusionMode:
                hits = m.search(query, user_id="u", k=5, fusion=mode, min_relevance=floor)
                got[mode] = {h.id: round(h.relevance, 12) for h in hits}
                assert all(h.relevance >= floor for h in hits)
            assert got[FusionMode.ZSCORE] == got[FusionMode.RRF] == got[FusionMode.WEIGHTED]


def test_an_off_topic_query_returns_nothing_at_the_default_floor() -> None:
    with _store(DEPLOY, CAKE) as m:
        assert m.search("what is the capital of Australia", user_id="u", min_relevance=DEFAULT_MIN_RELEVANCE) == []
        assert len(m.search("what is the capital of Australia", user_id="u")) == 2  # no floor: unchanged
        on = m.search("chocolate cake with eggs and cocoa", user_id="u", k=2)
        assert on[0].chunk.content == CAKE and on[0].relevance > DEFAULT_MIN_RELEVANCE > on[1].relevance
        assert [h.chunk.content for h in m.search("chocolate cake with eggs and cocoa", user_id="u",
                                                  min_relevance=DEFAULT_MIN_RELEVANCE)] == [CAKE]


def test_search_config_sets_the_default_floor_and_a_call_overrides_it() -> None:
    with _store(DEPLOY, CAKE, config=SearchConfig(min_relevance=0.5)) as m:
        assert m.search("what is the capital of Australia", user_id="u") == []
        assert len(m.search("what is the capital of Australia", user_id="u", min_relevance=0.0)) == 2


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5", True])
def test_bad_min_relevance_is_refused(bad) -> None:
    with _store(DEPLOY) as m, pytest.raises(InvalidInputError):
        m.search("deploy", user_id="u", min_relevance=bad)


def test_sources_name_only_the_retrievers_that_matched() -> None:
    with _store(DEPLOY, CAKE, "Cocoa powder is bitter") as m:
        hits = m.search("deploy staging", user_id="u", k=3)
        assert "lexical" in hits[0].sources and hits[0].sources["lexical"].score > 0
        for h in hits[1:]:
            assert "lexical" not in h.sources  # no shared term: BM25 did not find it
            assert all(s.score > 0 for s in h.sources.values())


def test_expanded_hits_are_no_more_relevant_than_where_they_came_from() -> None:
    with BeeWeave(embedder=HashingEmbedder(64)) as m:
        m.add(DEPLOY, user_id="u", session_id="s")
        m.add("Afterwards check the dashboard for errors", user_id="u", session_id="s")
        hits = m.search("deploy staging make release", user_id="u", k=1, expand=True)
        assert len(hits) == 2 and "graph" in hits[1].sources
        assert hits[1].relevance == pytest.approx(hits[0].relevance * 0.5)  # ExpandOptions.decay
        assert [h.id for h in m.search("deploy staging make release", user_id="u", k=1, expand=True,
                                       min_relevance=hits[0].relevance * 0.6)] == [hits[0].id]


def test_relevance_travels_in_to_dict() -> None:
    with _store(DEPLOY) as m:
        hit = m.search("deploy", user_id="u")[0]
        assert hit.to_dict()["relevance"] == hit.relevance


# -- the "nothing relevant" gate (abstain_below): all or nothing, decided by the best hit --------
GATE_TEXTS = [DEPLOY, CAKE, "The build host is in rack 4", "Release notes go in the wiki", "Cocoa powder is bitter"]


def test_the_gate_returns_nothing_off_topic_and_every_hit_on_topic() -> None:
    with _store(*GATE_TEXTS) as m:
        assert m.search("quantum field theory lecture", user_id="u", k=5, abstain_below=DEFAULT_ABSTAIN_BELOW) == []
        ranked = m.search("deploy the staging cluster with make release", user_id="u", k=5)
        gated = m.search("deploy the staging cluster with make release", user_id="u", k=5,
                         abstain_below=DEFAULT_ABSTAIN_BELOW)
        assert ranked[0].relevance >= DEFAULT_ABSTAIN_BELOW > ranked[-1].relevance  # a weak hit in the top k
        assert [h.id for h in gated] == [h.id for h in ranked]  # kept beside the relevant one, as ranked
        # A floor at the same value would have dropped the weak ones.
        floored = m.search("deploy the staging cluster with make release", user_id="u", k=5,
                           min_relevance=DEFAULT_ABSTAIN_BELOW)
        assert len(floored) < len(gated)


@pytest.mark.parametrize("gate", [0.3, DEFAULT_ABSTAIN_BELOW, 0.7])
def test_the_same_gate_decides_alike_under_every_fusion(gate: float) -> None:
    with _store(*GATE_TEXTS) as m:
        for query in ("deploy the staging cluster", "chocolate cake eggs", "quantum field theory", "rack"):
            got = {mode: bool(m.search(query, user_id="u", k=5, fusion=mode, abstain_below=gate)) for mode in FusionMode}
            assert len(set(got.values())) == 1, (query, got)
            best = max(h.relevance for h in m.search(query, user_id="u", k=5))
            assert got[FusionMode.ZSCORE] == (best >= gate)


def test_search_config_sets_the_default_gate_and_a_call_overrides_it() -> None:
    with _store(DEPLOY, CAKE, config=SearchConfig(abstain_below=0.6)) as m:
        assert m.search("what is the capital of Australia", user_id="u") == []
        assert len(m.search("what is the capital of Australia", user_id="u", abstain_below=0.0)) == 2


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5", True])
def test_a_bad_gate_is_refused_and_counts_no_access(bad) -> None:
    with BeeWeave(embedder=HashingEmbedder(64)) as m:
        cid = m.add(DEPLOY, user_id="u")
        with pytest.raises(InvalidInputError, match="abstain_below"):
            m.search("deploy", user_id="u", abstain_below=bad)
        assert m.get(cid).access_count == 0


def test_a_new_users_two_memories_are_told_apart_by_the_terms_each_has() -> None:
    """In a store of two BM25 still weighs a term (Lucene's idf; rank_bm25's was 0 there): the
    tea memory's lexical evidence is its score for "tea" against the best score of every query
    term, the two that no memory holds counting as much as "tea"; the peanuts memory has none."""
    with BeeWeave(embedder=HashingEmbedder(64)) as m:
        tea = m.add("I drink oolong tea in the afternoon.", user_id="u", session_id="monday")
        nuts = m.add("Please remember that I am allergic to peanuts.", user_id="u", session_id="monday")
        shared = m.parts.shared
        terms = prepare_query("What tea should I bring to the office?", shared.tokenizer).terms
        hits = m.search("What tea should I bring to the office?", user_id="u", k=2)
        own = {h.id: set(shared.tokenizer.tokenize(h.chunk.content)) for h in hits}
        assert set(terms) == {"tea", "bring", "offic"}
        lex = lexical_evidence(m.backend, terms, build_filter(None, user_id="u"), [tea, nuts], own)
        assert lex == {tea: pytest.approx(1 / 3), nuts: 0.0}
        assert lexical_evidence(m.backend, terms, build_filter(None, user_id="u"), [tea, nuts]) == lex
        rel = {h.id: h.relevance for h in hits}
        assert rel[tea] > 5 * rel[nuts]


def test_a_query_term_no_memory_holds_weighs_against_the_hits() -> None:
    """A term absent from the searched scope counts in the lexical evidence's denominator as
    much as the heaviest matched term would were it held by one memory: a memory that only
    names the person asked about is not evidence for "what is Mel allergic to?" when no
    memory mentions an allergy."""
    texts = ["Mel went hiking with her dog", "Mel painted a sunset by the lake", "Jon baked bread",
             "Jon fixed his bike", "The weather was rainy all week"]
    with _store(*texts) as m:
        f = build_filter(None, user_id="u")
        ids = [h.id for h in m.search("Mel hiking", user_id="u", k=5)]
        hiking = next(h.id for h in m.search("hiking", user_id="u", k=1))
        own = {cid: set(m.parts.shared.tokenizer.tokenize(m.get(cid).content)) for cid in ids}

        def lexical(query: str) -> dict[str, float]:
            return lexical_evidence(m.backend, prepare_query(query, m.parts.shared.tokenizer).terms, f, ids, own)

        alone = lexical("Mel")
        assert max(alone.values()) == pytest.approx(1.0)
        absent = lexical("Mel allergic")  # "allergic": in no memory
        idf, rare = m.backend.term_idf(["mel", "allergic"])
        assert set(idf) == {"mel"} and idf["mel"] < rare  # two of the five memories name Mel
        assert max(absent.values()) == pytest.approx(1 / (1 + rare / idf["mel"]))
        assert all(absent[c] == pytest.approx(alone[c] / (1 + rare / idf["mel"])) for c in ids)
        both = lexical("Mel hiking")  # a term some memory holds is weighed by its own best
        assert both[hiking] == pytest.approx(1.0)
        assert m.search("Mel allergic", user_id="u", k=1)[0].relevance < m.search("Mel", user_id="u", k=1)[0].relevance


def test_a_term_every_memory_holds_is_not_taken_for_an_absent_one() -> None:
    """A term every memory holds weighs little (Lucene's idf, small but positive; rank_bm25's
    was below zero), and the scope holds it: it counts with its own best, not as a missing
    topic (which would count as much as the heaviest term, "gamma")."""
    with _store("alpha beta", "alpha beta", "alpha beta gamma") as m:
        f = build_filter(None, user_id="u")
        terms = prepare_query("alpha gamma", m.parts.shared.tokenizer).terms
        ids = [h.id for h in m.search("alpha gamma", user_id="u", k=3)]
        own = {cid: set(m.parts.shared.tokenizer.tokenize(m.get(cid).content)) for cid in ids}
        got = lexical_evidence(m.backend, terms, f, ids, own)
        gamma = next(c for c in ids if "gamma" in own[c])
        best = {t: m.backend.lexical_search({t: 1}, f, 1)[0][1] for t in ("alpha", "gamma")}
        assert 0 < best["alpha"] < best["gamma"]
        alpha_of_gamma = dict(m.backend.lexical_search({"alpha": 1}, f, 3))[gamma]
        assert got[gamma] == pytest.approx((alpha_of_gamma + best["gamma"]) / (best["alpha"] + best["gamma"]))
        assert got[gamma] > 0.9


@pytest.mark.parametrize("k", [1, 2, 4])
def test_relevance_does_not_depend_on_which_other_hits_come_back(k: int) -> None:
    """Whether a term is in the scope is read from the scope, not from the hits: "alpha" (in
    three of four memories: a small idf) is not taken for an absent term when no hit returned
    holds it."""
    with _store("alpha beta", "alpha beta", "alpha beta", "gamma delta") as m:
        full = {h.id: h.relevance for h in m.search("alpha gamma", user_id="u", k=4)}
        for h in m.search("alpha gamma", user_id="u", k=k):
            assert h.relevance == pytest.approx(full[h.id], abs=1e-12)
        f = build_filter(None, user_id="u")
        terms = prepare_query("alpha gamma", m.parts.shared.tokenizer).terms
        (gamma, best_gamma), = m.backend.lexical_search({"gamma": 1}, f, 1)
        best_alpha = m.backend.lexical_search({"alpha": 1}, f, 1)[0][1]
        assert 0 < best_alpha < best_gamma  # taken for absent, alpha would count as gamma
        assert lexical_evidence(m.backend, terms, f, [gamma]) == {gamma: pytest.approx(best_gamma / (best_alpha + best_gamma))}


def test_an_absent_term_weighs_as_the_heaviest_matched_term() -> None:
    """Two matched terms of different weights and one absent: the absent one counts as the
    heavier of the two (not their sum, not the lighter)."""
    texts = ["rare words here", "common words", "common talk", "common chat", "common notes", "other things"]
    with _store(*texts) as m:
        f = build_filter(None, user_id="u")
        terms = prepare_query("rare common zzyzx", m.parts.shared.tokenizer).terms
        best = {t: m.backend.lexical_search({t: 1}, f, 1)[0][1] for t in ("rare", "common")}
        assert best["rare"] > best["common"] > 0
        ids = [cid for cid, _ in m.backend.lexical_search({"rare": 1, "common": 1}, f, 6)]
        got = lexical_evidence(m.backend, terms, f, ids)
        rare = next(cid for cid, _ in m.backend.lexical_search({"rare": 1}, f, 1))
        total = best["rare"] + best["common"] + max(best.values())
        assert got[rare] == pytest.approx(best["rare"] / total)
