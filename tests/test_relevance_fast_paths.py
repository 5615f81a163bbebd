"""The search's relevance reads its inputs once (issue 45, item 6), each fast path checked
against the slow obvious computation: the query's background cosines are read once per
question for both curves, the candidates' cosines are only partly sorted and only on a
curve with a lead, and ``leads`` picks the background's highest once for all hits."""

from __future__ import annotations

import random

import numpy as np
import pytest

import beeweave_core.engine.search as search_module
import beeweave_core.relevance as relevance_module
from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.embedders import DEFAULT_MODEL_NAME
from beeweave_core.engine.search_request import build_search_request
from beeweave_core.query import prepare_query
from beeweave_core.relevance import (
    BACKGROUND,
    LEAD_OF,
    QUESTIONS,
    Evidence,
    calibration_for,
    lead,
    leads,
    lexical_evidence,
    memory_lead,
    relevance,
    term_coverage,
    top_cosines,
)

MEMORIES = ["Staging listens on port 5433.", "The offsite is at the Lakeside hotel.", "I am allergic to peanuts.",
            "Our backups run every night at two.", "The staging database is called atlas.",
            "Alice reviews the parser module.", "我住在杭州西湖区。", "Lunch is at noon on Fridays."]


class _DefaultNamed:
    """The hashing embedder under the default model's name: the default model's curve (the
    background margin and the lead) without loading the model."""

    name = DEFAULT_MODEL_NAME

    def __init__(self) -> None:
        self._inner = HashingEmbedder(64)

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed_documents(self, texts):
        return self._inner.embed_documents(texts)

    def embed_query(self, text):
        return self._inner.embed_query(text)


@pytest.fixture
def memory():
    m = BeeWeave(embedder=_DefaultNamed())
    m.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
    yield m
    m.close()


def _slow_relevance(memory: BeeWeave, query: str, hits) -> dict[str, float]:
    """Each hit's relevance for ``query`` read the obvious way: its lead from every other
    memory's own cosine and every everyday statement's, sorted whole for each hit (a hit the
    vectors did not find, with no "vector" source, has no cosine evidence)."""
    shared = memory.parts.shared
    emb, backend = shared.embedder, shared.backend
    curve = calibration_for(emb.name)
    assert curve.margin and curve.lead_weight  # the curve reads both
    qvec = np.asarray(memory.embed_query(query), dtype=np.float32)
    background = [float(x) for x in BACKGROUND.cosines(emb, qvec)]
    ids = [c.id for c in memory.get_all(user_id="u").items]
    vectors = backend.get_vectors(ids)
    cosine = {cid: float(vectors[cid] @ qvec) for cid in ids}
    terms = prepare_query(query, shared.tokenizer).terms
    flt = build_search_request(shared, memory.parts.search.scopes, query, user_id="u", k=len(ids), filters=None,
                               fusion=None, min_score=None, query_embedding=None, expand=None, rerank=None,
                               mmr=None, loosen=False, min_relevance=None, abstain_below=0, scopes=None,
                               as_of=None).flt
    own = {c.id: set(shared.tokenizer.tokenize(c.content)) for c in memory.get_all(user_id="u").items}
    lexical = lexical_evidence(backend, terms, flt, ids, own)
    out = {}
    for h in hits:
        cid = h.id
        if "vector" not in h.sources:
            out[cid] = relevance(Evidence(0.0, lexical[cid], term_coverage(terms, own[cid])), calibration=curve)
            continue
        others = [cosine[o] for o in ids if o != cid]
        nearest = sorted(others + background, reverse=True)[:LEAD_OF]
        rise = cosine[cid] - sum(nearest) / len(nearest)
        if rise > 0:
            rise = min(rise, memory_lead(vectors[cid], qvec, QUESTIONS.vectors(emb)))
        # the word curve reads the ranking's cosine, the lead each memory's own
        ev = Evidence(h.sources["vector"].score, lexical[cid], term_coverage(terms, own[cid]),
                      float(np.mean(background)), rise)
        out[cid] = relevance(ev, calibration=curve)
    return out


@pytest.mark.parametrize("query", ["which port does staging use", "where is the offsite", "peanut allergy"])
def test_in_one_session_the_lead_reads_each_memorys_own_vector(query) -> None:
    """Ranking blends a memory's session neighbours into its vector; the lead reads the
    memory's own (the slow computation's leads are of the own vectors): within one session
    the blended cosines crowd together and no memory would stand out."""
    with BeeWeave(embedder=_DefaultNamed()) as m:
        # turns of one conversation (a speaker tag): they lend each other context
        m.add_many([{"content": f"user: {t}", "user_id": "u", "session_id": "one"} for t in MEMORIES],
                   show_progress=False)
        hits = m.search(query, user_id="u", k=len(MEMORIES), abstain_below=0)
        # the ranking's cosines are the blended ones: not the own vectors' (else this proves nothing)
        vectors = m.parts.shared.backend.get_vectors([h.id for h in hits])
        qvec = np.asarray(m.embed_query(query), dtype=np.float32)
        assert any(abs(h.sources["vector"].score - float(vectors[h.id] @ qvec)) > 1e-3
                   for h in hits if "vector" in h.sources)
        expected = _slow_relevance(m, query, hits)
        for h in hits:
            assert h.relevance == pytest.approx(expected[h.id], abs=1e-6), h.chunk.content


@pytest.mark.parametrize("query", ["which port does staging use", "where is the offsite", "peanut allergy"])
def test_relevance_reads_the_background_once_and_equals_the_slow_computation(memory, monkeypatch, query) -> None:
    calls = []
    cosines = BACKGROUND.cosines

    def counted(embedder, vector):
        calls.append(1)
        return cosines(embedder, vector)

    monkeypatch.setattr(BACKGROUND, "cosines", counted)
    hits = memory.search(query, user_id="u", k=len(MEMORIES), abstain_below=0)
    assert len(calls) == 1  # one question: one read, for the background and the leads both
    monkeypatch.undo()
    expected = _slow_relevance(memory, query, hits)
    assert len(hits) == len(MEMORIES) and sum("vector" in h.sources for h in hits) >= 3
    for h in hits:
        assert h.relevance == pytest.approx(expected[h.id], abs=1e-6), h.chunk.content
    monkeypatch.setattr(BACKGROUND, "cosines", counted)
    calls.clear()
    memory.search(f"{query}? Where is lunch?", user_id="u", k=3, abstain_below=0)
    assert len(calls) == 2  # two questions, each embedded on its own: one read each


def test_the_candidates_cosines_are_sorted_only_on_a_curve_with_a_lead(memory, monkeypatch) -> None:
    calls = []

    def counted(cosines, n=LEAD_OF + 1):
        calls.append(len(cosines))
        return top_cosines(cosines, n)

    monkeypatch.setattr(search_module, "top_cosines", counted)
    assert memory.search("which port does staging use", user_id="u", abstain_below=0)
    assert calls == [len(MEMORIES)]  # the default model's curve reads the lead: once, over every candidate
    calls.clear()
    with BeeWeave(embedder=HashingEmbedder(64)) as plain:  # a model nobody fitted: MiniLM's curve, no lead
        plain.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
        assert calibration_for(plain.embedder.name).lead_weight == 0
        assert plain.search("which port does staging use", user_id="u")
    assert calls == []


def test_top_cosines_equals_a_full_sort() -> None:
    rng = random.Random(45)
    for size in [0, 1, 5, 6, 7, 40, 300]:
        for _ in range(20):
            # few distinct values: ties at the cut
            values = np.asarray([rng.choice([0.1, 0.5, 0.5, 0.8, rng.random()]) for _ in range(size)])
            for n in (1, LEAD_OF + 1, 50):
                assert top_cosines(values, n) == np.sort(values)[::-1][:n].tolist()


def test_leads_equal_each_hit_read_against_the_whole_background(monkeypatch) -> None:
    rng = random.Random(6)
    for _ in range(200):
        top = sorted((rng.uniform(-1, 1) for _ in range(rng.randint(0, LEAD_OF + 1))), reverse=True)
        # the hits: some of the top's own cosines, some below it
        hits = [rng.choice(top) for _ in range(rng.randint(0, len(top)))] + [rng.uniform(-1, 1)]
        background = [rng.uniform(-1, 1) for _ in range(rng.randint(0, 60))]
        slow = []
        for c in hits:
            others = list(top)
            if c in others:
                others.remove(c)
            else:
                others = others[:LEAD_OF]
            slow.append(lead(c, others, background))
        assert leads(hits, top, background) == slow
    # each hit's lead sorts at most the background's LEAD_OF highest, picked once
    seen = []

    def recording(cosine, others, background):
        seen.append(len(background))
        return lead(cosine, others, background)

    monkeypatch.setattr(relevance_module, "lead", recording)
    leads([0.9, 0.5, 0.1], [0.9, 0.8], [rng.random() for _ in range(200)])
    assert seen == [LEAD_OF] * 3
