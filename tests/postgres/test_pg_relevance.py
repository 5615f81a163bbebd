"""Calibrated relevance on PostgreSQL reads its lexical evidence (each evidence term's best
single-term score in scope, each hit's BM25 over those terms) from the local index when
the search's records are read (``retrieve(..., evidence=...)``) instead of a second round
trip of single-term searches; both must give the same evidence, so the same
``hit.relevance``: for queries mixing rare and frequent terms, a term no record in scope
has, a dialogue query with more terms than the evidence reads, filtered and not, and a
store too small for BM25's idf (the evidence then comes from the hits' own terms)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from beeweave_core import BeeWeave, IndexConfig, KnowledgeChunk
from beeweave_core.filters import build_filter
from beeweave_core.query import prepare_query
from beeweave_core.relevance import RELEVANCE_TERMS, evidence_terms, lexical_evidence
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from tests.conformance import DIM
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.support import WORDS, term_counts, unit_vectors

pytestmark = pytest.mark.slow

N = 400
VOCAB = WORDS[:50]
# Zipf-like: the first words are in most records (idf near or below 0), the last in few.
WEIGHTS = [1.0 / (i + 1) for i in range(len(VOCAB))]
ONLY_BOB = "hotel"  # not in VOCAB: a word only bob's records have: no record in ann's scope

QUERIES = [
    ["agent", "invoice"],  # frequent + rare
    ["memory", "remembers", "preference", "deadline", "report"],
    ["agent", "agent", "memory", "invoice"],  # a repeated term weighs more
    ["budget", ONLY_BOB],  # a term nobody in ann's scope has
    ["nosuchword", "budget"],  # a term no record has at all
    ["the"],  # too frequent to score (idf floor)
    VOCAB[:24] + VOCAB[:3],  # a dialogue-sized query: more terms than RELEVANCE_TERMS
]
FILTERS: list[dict] = [
    {},
    {"user_id": "ann"},
    {"user_id": "ann", "session_id": ["s1", "s2", "s3"]},
    {"user_id": "bob", "tags": "t1"},
]


def _rows(seed: int) -> list[ChunkRow]:
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    vecs = unit_vectors(rng, N, DIM)
    rows = []
    for i in range(N):
        user = rnd.choice(["ann", "bob"])
        words = rnd.choices(VOCAB, WEIGHTS, k=rnd.randint(2, 12))
        if user == "bob" and rnd.random() < 0.1:
            words.append(ONLY_BOB)
        text = " ".join(words)
        chunk = KnowledgeChunk(raw_content=text, id=f"m{i}", user_id=user, session_id=f"s{rnd.randrange(20)}",
                               tags=[f"t{rnd.randrange(4)}"])
        rows.append(ChunkRow(chunk, vecs[i], text.split()))
    return rows


@pytest.fixture(scope="module")
def store(pg_url):  # noqa: F811
    rows = _rows(3)
    assert not any(ONLY_BOB in r.terms for r in rows if r.chunk.user_id == "ann")
    pg = PostgresStore(pg_url, index_config=IndexConfig(), tenant=new_tenant())
    pg.insert(rows)
    yield pg, rows
    pg.close()


def _both(pg: PostgresStore, rows: list[ChunkRow], words: list[str], flt: dict, seed: int):
    terms = term_counts(words)
    f = build_filter(flt)
    qvec = unit_vectors(np.random.default_rng(seed), 1, DIM)[0]
    got = pg.retrieve(terms, qvec, f, 30, evidence=evidence_terms(terms))
    got.records(got.ids)  # the evidence comes with the records
    assert got.evidence is not None
    own = {r.chunk.id: set(r.terms) for r in rows}
    ids = got.ids
    one_trip = lexical_evidence(pg, terms, f, ids, own, got.evidence)
    two_trips = lexical_evidence(pg, terms, f, ids, own)  # the single-term searches, as before
    return terms, got, one_trip, two_trips


def test_evidence_from_the_search_equals_the_single_term_searches(store) -> None:
    pg, rows = store
    scored = 0
    for qi, words in enumerate(QUERIES):
        for fi, flt in enumerate(FILTERS):
            terms, got, one_trip, two_trips = _both(pg, rows, words, flt, 100 * qi + fi)
            assert one_trip.keys() == two_trips.keys() == set(got.ids)
            for cid in got.ids:
                assert abs(one_trip[cid] - two_trips[cid]) <= 1e-9, (words, flt, cid)
            scored += sum(v > 0 for v in two_trips.values())
            # the bests are the single-term searches' top scores, term by term
            for term in evidence_terms(terms):
                top = pg.lexical_search({term: terms[term]}, build_filter(flt), 1)
                if top:
                    assert got.evidence.best[term] == pytest.approx(top[0][1], rel=0, abs=1e-12), term
                else:
                    assert term not in got.evidence.best, term
    assert scored > 50  # the comparison saw real evidence, not zeros


def test_a_dialogue_query_reads_only_its_heaviest_terms(store) -> None:
    """Past RELEVANCE_TERMS terms the hit's evidence is not its whole BM25 score."""
    pg, rows = store
    words = QUERIES[-1]
    assert len(set(words)) > RELEVANCE_TERMS
    terms, got, one_trip, two_trips = _both(pg, rows, words, {"user_id": "ann"}, 7)
    assert len(got.evidence.best) <= RELEVANCE_TERMS
    differs = [cid for i, cid in enumerate(got.ids) if abs(got.evidence.lexical[cid] - got.lexical[i]) > 1e-9]
    assert differs  # some candidate scored on a term the evidence does not read
    assert max(abs(one_trip[c] - two_trips[c]) for c in got.ids) <= 1e-9


def test_a_term_absent_from_the_scope_weighs_as_the_matched_one_were_it_rare(store) -> None:
    pg, rows = store
    terms, got, one_trip, two_trips = _both(pg, rows, ["budget", ONLY_BOB], {"user_id": "ann"}, 8)
    assert ONLY_BOB not in got.evidence.best and got.evidence.best["budget"] > 0
    # the evidence carries the store's idf (bob's records hold the absent term: it has one)
    assert (got.evidence.idf, got.evidence.rare) == pg.term_idf(["budget", ONLY_BOB])
    idf, rare = got.evidence.idf["budget"], got.evidence.rare
    assert 0 < idf < rare
    # the best "budget" record has its term's best, against that best plus the absent term
    # weighed as "budget" would score were one record to hold it
    assert max(two_trips.values()) == pytest.approx(1 / (1 + rare / idf))
    assert max(abs(one_trip[c] - two_trips[c]) for c in got.ids) <= 1e-9
    _, got_bob, _, _ = _both(pg, rows, ["budget", ONLY_BOB], {"user_id": "bob"}, 8)
    assert ONLY_BOB in got_bob.evidence.best


def _memory(url: str) -> BeeWeave:
    return BeeWeave.from_url(url, tenant=new_tenant(), embedder="beeweave:hashing-64")


def _old_relevance(memory: BeeWeave, query: str, user_id: str, hits):
    """The hits' relevance computed as before: the evidence read by single-term searches."""
    search = memory._search  # noqa: SLF001
    terms = prepare_query(query, memory._shared.tokenizer).terms  # noqa: SLF001
    flt = build_filter(None, user_id=user_id, now=memory._shared.clock())  # noqa: SLF001
    return {h.id: h.relevance for h in search._relevance(terms, flt, hits)}  # noqa: SLF001


def test_search_relevance_needs_no_second_round_trip(pg_url, monkeypatch) -> None:  # noqa: F811
    rows = _rows(5)
    with _memory(pg_url) as memory:
        for r in rows[:150]:
            memory.add(r.chunk.raw_content, user_id=r.chunk.user_id, session_id=r.chunk.session_id)
        queries = ["agent invoice", "memory deadline report preference", "budget hotel", "the", " ".join(VOCAB[:24])]
        found = {}
        backend = type(memory.backend)
        with monkeypatch.context() as m:
            def refuse(*_a, **_k):
                raise AssertionError("relevance made a second round trip")
            m.setattr(backend, "lexical_searches", refuse)
            for q in queries:
                found[q] = memory.search(q, user_id="ann", k=8)
        checked = 0
        for q, hits in found.items():
            old = _old_relevance(memory, q, "ann", hits)
            for h in hits:
                assert h.relevance is not None and abs(h.relevance - old[h.id]) <= 1e-9, (q, h.id)
                checked += 1
        assert checked > 20


def test_a_tiny_store_takes_its_evidence_from_the_hits_terms(pg_url) -> None:  # noqa: F811
    """Two memories: every idf is 0, so the share of the query's terms a hit has decides."""
    with _memory(pg_url) as memory:
        tea = memory.add("green tea every morning", user_id="u")
        nuts = memory.add("allergic to peanuts", user_id="u")
        hits = memory.search("tea", user_id="u", k=2)
        old = _old_relevance(memory, "tea", "u", hits)
        rel = {h.id: h.relevance for h in hits}
        assert rel.keys() == {tea, nuts}
        for cid, value in rel.items():
            assert abs(value - old[cid]) <= 1e-9
        assert rel[tea] > rel[nuts]


def test_a_term_every_record_has_weighs_little_and_is_no_absent_term(pg_url) -> None:  # noqa: F811
    """A term every record has weighs little (Lucene's idf, small but positive; rank_bm25's
    was negative there): its best counts in the denominator and its scores in a hit's sum,
    as when each term was searched alone, and it is not taken for an absent term."""
    texts = ["alpha beta", "alpha beta", "alpha beta gamma"]
    rng = np.random.default_rng(1)
    rows = [ChunkRow(KnowledgeChunk(raw_content=t, id=f"r{i}", user_id="u", session_id=f"s{i}"), v, t.split())
            for i, (t, v) in enumerate(zip(texts, unit_vectors(rng, 3, DIM)))]
    pg = PostgresStore(pg_url, index_config=IndexConfig(), tenant=new_tenant())
    try:
        pg.insert(rows)
        terms, f = {"alpha": 1, "gamma": 1}, build_filter({"user_id": "u"})
        got = pg.retrieve(terms, rows[0].vector, f, 10, evidence=evidence_terms(terms))
        got.records(got.ids)
        assert got.evidence is not None
        best = got.evidence.best
        assert 0 < best["alpha"] < best["gamma"]
        own = {r.chunk.id: set(r.terms) for r in rows}
        one_trip = lexical_evidence(pg, terms, f, got.ids, own, got.evidence)
        assert one_trip == pytest.approx(lexical_evidence(pg, terms, f, got.ids, own), rel=0, abs=1e-9)
        alone = {t: dict(pg.lexical_search({t: 1}, f, 3)) for t in terms}
        total = best["alpha"] + best["gamma"]
        assert one_trip["r2"] == pytest.approx((alone["alpha"]["r2"] + alone["gamma"]["r2"]) / total)
        assert one_trip["r0"] == pytest.approx(alone["alpha"]["r0"] / total) and one_trip["r0"] < 0.2
    finally:
        pg.close()


def test_the_evidence_is_scored_for_the_records_asked_for(pg_url) -> None:  # noqa: F811
    """The local index reads the evidence when the records are asked for, and only theirs:
    each one's as the single-term searches give it, and each term's best in scope the same
    whichever records were asked for."""
    rows = _rows(7)
    pg = PostgresStore(pg_url, index_config=IndexConfig(), tenant=new_tenant())
    try:
        pg.insert(rows)
        terms = term_counts(["budget", "agent", "invoice", VOCAB[-1], VOCAB[-2]])
        f = build_filter({"user_id": "ann"})
        qvec = unit_vectors(np.random.default_rng(7), 1, DIM)[0]
        got = pg.retrieve(terms, qvec, f, 30, evidence=evidence_terms(terms))
        assert got.evidence is None  # nothing read before the records
        asked = got.ids[:4]
        got.records(asked)
        assert got.evidence is not None and set(got.evidence.lexical) == set(asked)
        for term in evidence_terms(terms):
            top = pg.lexical_search({term: terms[term]}, f, 1)
            assert got.evidence.best.get(term, 0.0) == pytest.approx(top[0][1] if top else 0.0, abs=1e-9), term
        own = {r.chunk.id: set(r.terms) for r in rows}
        one_trip = lexical_evidence(pg, terms, f, asked, own, got.evidence)
        assert one_trip == pytest.approx(lexical_evidence(pg, terms, f, asked, own), rel=0, abs=1e-9)
        got.records(got.ids[4:6])  # asked again: the earlier records keep theirs
        assert set(got.evidence.lexical) == set(got.ids[:6])
    finally:
        pg.close()


def test_a_local_index_search_gives_the_relevance_of_the_single_term_searches(pg_url) -> None:  # noqa: F811
    rows = _rows(5)
    with BeeWeave.from_url(pg_url, tenant=new_tenant(), embedder="beeweave:hashing-64") as memory:
        for r in rows[:150]:
            memory.add(r.chunk.raw_content, user_id=r.chunk.user_id, session_id=r.chunk.session_id)
        checked = 0
        for q in ["agent invoice", "memory deadline report preference", "budget hotel", " ".join(VOCAB[:24])]:
            hits = memory.search(q, user_id="ann", k=8)
            old = _old_relevance(memory, q, "ann", hits)
            for h in hits:
                assert h.relevance is not None and abs(h.relevance - old[h.id]) <= 1e-9, (q, h.id)
                checked += 1
        assert checked > 20


def test_relevance_is_the_embedded_stores_whichever_hits_come_back(pg_url) -> None:  # noqa: F811
    """"alpha" is in three of four memories (idf below zero): no returned hit may hold it, yet
    it is in scope, not absent, as in the embedded store, for every k."""
    texts = ["alpha beta", "alpha beta", "alpha beta", "gamma delta"]
    with BeeWeave.from_url(pg_url, tenant=new_tenant(), embedder="beeweave:hashing-64") as pg, \
            BeeWeave(embedder="beeweave:hashing-64") as embedded:
        for i, text in enumerate(texts):
            for m in (pg, embedded):
                m.add(text, user_id="u", chunk_id=f"m{i}", session_id=f"s{i}")
        full = {h.id: h.relevance for h in embedded.search("alpha gamma", user_id="u", k=4)}
        for k in (1, 2, 4):
            got = {h.id: h.relevance for h in pg.search("alpha gamma", user_id="u", k=k)}
            assert got.keys() == {h.id for h in embedded.search("alpha gamma", user_id="u", k=k)}
            for cid, rel in got.items():
                assert rel == pytest.approx(full[cid], abs=1e-6), (k, cid)  # cosines in float32


def test_the_lead_reads_the_same_own_cosines_on_both_backends(pg_url) -> None:  # noqa: F811
    """In one session the ranking blends neighbours into a turn's vector; the relevance lead
    reads each turn's own cosine: PostgreSQL from its local index with the candidates
    (``Candidates.own_vector``), SQLite by reading the vectors. Both give the same relevance."""
    from tests.test_relevance_fast_paths import MEMORIES, _DefaultNamed

    records = [{"content": f"user: {t}", "user_id": "u", "session_id": "one", "chunk_id": f"t{i}"}
               for i, t in enumerate(MEMORIES)]
    url, tenant = pg_url, new_tenant()
    with BeeWeave(embedder=_DefaultNamed()) as lite, \
            BeeWeave.from_url(url, embedder=_DefaultNamed(), tenant=tenant) as pg:
        for m in (lite, pg):
            m.add_many(records, show_progress=False)
        for query in ("which port does staging use", "where is the offsite", "peanut allergy"):
            a = {h.id: h.relevance for h in lite.search(query, user_id="u", k=len(MEMORIES), abstain_below=0)}
            b = {h.id: h.relevance for h in pg.search(query, user_id="u", k=len(MEMORIES), abstain_below=0)}
            assert a.keys() == b.keys()
            for cid in a:
                assert a[cid] == pytest.approx(b[cid], abs=1e-6), (query, cid)
