"""Conformance of the ``SearchIndex`` role (store/roles.py): BM25 with session context
against a reference model, cosine search and scores, each with the filter inside the query."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from beeweave_core import EmbedderChangedError
from beeweave_core.filters import build_filter
from tests.conformance_data import (
    CONTEXT,
    DIM,
    EVERY_STATUS,
    MIXED,
    PLAIN,
    SESSION,
    TURNS,
    WORLD,
    Reference,
    expected_ids,
    ids_of,
    lucene,
    row,
    term_counts,
    vec,
)
from tests.support import dt


class SearchIndexConformance:
    """``SearchIndex``: lexical and vector retrieval. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestSearchIndex``."""

    def test_lexical_search_is_bm25_over_every_live_record(self, world) -> None:
        """Without session context, scores are bm25s's Lucene BM25 on the same terms (see _lucene)."""
        corpus = {r.chunk.id: r.terms for r in WORLD}
        order = sorted(corpus)
        for query in (["apple"], ["grape", "grape", "fig"], ["banana", "date", "unknown"], ["elder"]):
            ref = dict(zip(order, lucene([corpus[i] for i in order], query, PLAIN)))
            for flt in ({}, EVERY_STATUS, {"user_id": "bob", "status": ["active", "archived"]}):
                got = world.lexical_search(term_counts(query), build_filter(flt), 100)
                scores = [s for _, s in got]
                assert scores == sorted(scores, reverse=True)
                want = {i for i in expected_ids(flt) if set(query) & set(corpus[i])}
                assert set(ids_of(got)) == want
                for i, s in got:
                    # Statistics cover every live record, whatever the filter.
                    assert s == pytest.approx(ref[i], abs=1e-6), (query, flt, i)
        assert world.lexical_search({"unknown": 1}, build_filter(None), 10) == []
        assert world.lexical_search({}, build_filter(None), 10) == []
        top = world.lexical_search({"apple": 1}, build_filter(EVERY_STATUS), 2)
        assert len(top) == 2 and top[0][0] == "w1"  # apple twice in a short record

    def test_term_idf_is_the_idf_the_scores_weigh_terms_by(self, world) -> None:
        """``term_idf``: Lucene's idf over every live record (whatever a search's filter), the
        terms no live record holds left out, and the idf of a term one record holds; a term's
        single-term score is that idf times a part that does not depend on it."""
        def lucene_idf(n: int, df: int) -> float:
            return math.log(n + 1) - math.log(df + 0.5)

        corpus = [r.chunk.id for r in WORLD]
        df = {t: sum(t in r.terms for r in WORLD) for r in WORLD for t in r.terms}
        idf, rare = world.term_idf(["apple", "elder", "grape", "unknown", "apple"])
        assert set(idf) == {"apple", "elder", "grape"}
        for t, w in idf.items():
            assert w == pytest.approx(lucene_idf(len(corpus), df[t]), abs=1e-9), t
        assert rare == pytest.approx(lucene_idf(len(corpus), 1), abs=1e-9)
        assert idf["elder"] == pytest.approx(rare, abs=1e-9)  # one record holds it
        assert world.term_idf([]) == ({}, rare)
        # the scores' idf: two terms' scores of the same record are in the ratio of their idfs
        # times the same saturation when the record holds each once ("elder" and "date" in w3)
        scores = {t: dict(world.lexical_search({t: 1}, build_filter(EVERY_STATUS), 100))["w3"] for t in ("elder", "date")}
        both = world.term_idf(["elder", "date"])[0]
        assert scores["elder"] / scores["date"] == pytest.approx(both["elder"] / both["date"], rel=1e-6)
        # a deletion changes N and df; a term whose last record went is left out
        world.delete(["w3"])
        idf, rare = world.term_idf(["apple", "elder"])
        assert set(idf) == {"apple"}
        assert idf["apple"] == pytest.approx(lucene_idf(len(corpus) - 1, df["apple"] - 1), abs=1e-9)
        assert rare == pytest.approx(lucene_idf(len(corpus) - 1, 1), abs=1e-9)

    def test_reference_model_is_bm25s_without_context(self) -> None:
        """Anchors the Reference used for the context tests to bm25s's Lucene BM25."""
        ref = Reference(PLAIN)
        ref.insert(WORLD + SESSION)
        order = sorted(ref.rows)
        for query in (["apple", "kiwi", "kiwi"], ["lime"], ["grape", "papaya"]):
            want = dict(zip(order, lucene([ref.rows[i].terms for i in order], query, PLAIN)))
            got = ref.lexical(term_counts(query), EVERY_STATUS)
            assert got and all(got[i] == pytest.approx(want[i], abs=1e-9) for i in got)

    def _check_context(self, b, ref: Reference) -> None:
        queries = [{"kiwi": 1}, {"lime": 2, "papaya": 1}, {"mango": 1, "quince": 1, "apple": 1}, {"nothing": 1}]
        for flt in ({}, EVERY_STATUS, {"user_id": "ann"}, {"session_id": "chat", "user_id": "bob"}):
            for q in queries:
                got = b.lexical_search(q, build_filter(flt), 1000)
                want = ref.lexical(q, flt)
                assert set(ids_of(got)) == set(want), (q, flt)
                for i, s in got:
                    assert s == pytest.approx(want[i], abs=1e-6), (q, flt, i)
        ids = sorted(ref.rows) + ["no-such-id"]
        for seed in range(3):
            q = vec(500 + seed)
            got = b.vector_scores(q, ids)
            want = ref.vector(q, ids)
            assert set(got) == set(want)
            for i in want:
                assert got[i] == pytest.approx(want[i], abs=1e-5), i

    @pytest.mark.parametrize("cfg", [PLAIN, CONTEXT], ids=["plain", "context"])
    def test_session_context_scores_follow_the_index_config(self, make, cfg) -> None:
        b, ref = make(cfg), Reference(cfg)
        for rows in (WORLD, SESSION):
            b.insert(rows)
            ref.insert(rows)
        self._check_context(b, ref)
        # A deletion in the middle of a conversation changes its neighbours' context.
        b.delete(["t4", "t0"])
        ref.delete(["t4", "t0"])
        self._check_context(b, ref)
        # Moving a memory in time or to another session re-threads the conversation.
        moved = [b.get(["t1"])["t1"].copy(timestamp=dt(2024, 1, 1, 8)),
                 b.get(["t2"])["t2"].copy(session_id="elsewhere"),
                 b.get(["w6"])["w6"].copy(session_id="chat")]
        b.update(moved)
        ref.update(moved)
        self._check_context(b, ref)
        # New text for a memory, and new memories tied in time with old ones.
        new = [row("t5", "apple apple", seed=77, user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 9))]
        b.replace(new)
        ref.replace(new)
        more = [row("t11", "kiwi quince", user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 1)),
                row("t12", "lime", user_id="bob", session_id="chat", timestamp=dt(2024, 1, 1, 2))]
        b.insert(more)
        ref.insert(more)
        self._check_context(b, ref)

    def test_session_context_only_among_conversation_turns(self, make) -> None:
        """By default a memory lends and takes context only when it is a conversation turn:
        facts that share a session with turns are scored on their own text."""
        b, ref = make(TURNS), Reference(TURNS)
        for rows in (WORLD, MIXED):
            b.insert(rows)
            ref.insert(rows)
        assert {i for i, nb in ref.neighbours().items() if nb} == {"t0", "t1", "t3", "t5", "t6", "t8", "t9"}
        self._check_context(b, ref)
        # A fact that becomes a turn joins the conversation; a turn that loses its speaker leaves it.
        changed = [b.get(["t2"])["t2"].copy(metadata={"speaker": "ann"}), b.get(["t0"])["t0"].copy(metadata={}),
                   b.get(["t4"])["t4"].copy(timestamp=dt(2024, 1, 1, 2))]
        b.update(changed)
        ref.update(changed)
        self._check_context(b, ref)
        b.delete(["t3", "t7"])
        ref.delete(["t3", "t7"])
        self._check_context(b, ref)
        more = [row("t11", "kiwi quince", user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 1),
                    metadata={"speaker": "ann"}),
                row("t12", "lime", user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 2))]
        b.insert(more)
        ref.insert(more)
        self._check_context(b, ref)

    def test_include_adds_the_scores_of_named_records(self, make) -> None:
        b = make(PLAIN)
        b.insert(WORLD)
        flt = build_filter({"user_id": ["ann", "bob"]})
        top1 = b.lexical_search({"apple": 1}, flt, 1)
        assert ids_of(top1) == ["w1"]
        got = b.lexical_search({"apple": 1}, flt, 1, include=["w2", "w6", "w4", "w3", "nope", "w1"])
        # w2 (no apple) scores 0; w4 is cid's and w3 archived: both outside the filter.
        assert ids_of(got) == ["w1", "w6", "w2"]
        full = dict(b.lexical_search({"apple": 1}, flt, 100))
        assert dict(got) == {"w1": full["w1"], "w6": full["w6"], "w2": 0.0}
        assert b.lexical_search({"unknown": 1}, flt, 5, include=["w0"]) == [("w0", 0.0)]

    def test_vector_search_is_exact_cosine(self, world) -> None:
        mat = {r.chunk.id: r.vector.astype(np.float64) for r in WORLD}
        for seed in range(5):
            q = vec(100 + seed)
            for flt in ({}, EVERY_STATUS, {"user_id": ["ann", "cid"], **EVERY_STATUS}):
                want_ids = sorted(expected_ids(flt), key=lambda i: -float(mat[i] @ q))
                got = world.vector_search(q, build_filter(flt), 100, exact=True)
                assert ids_of(got) == want_ids
                for i, s in got:
                    assert s == pytest.approx(float(mat[i] @ q), abs=1e-5)
                assert ids_of(world.vector_search(q, build_filter(flt), 3)) == want_ids[:3]
        assert world.vector_search(vec(1), build_filter({"user_id": "nobody"}), 5) == []

    def test_a_query_for_another_model_than_the_stores_vectors_is_refused(self, world) -> None:
        # A searcher still on the model the store was re-embedded away from: its query names
        # its model, checked against the model the store recorded for the vectors searched.
        flt, q = build_filter(EVERY_STATUS), vec(100)
        before = world.vector_search(q, flt, 5, exact=True)
        assert world.vector_search(q, flt, 5, exact=True, model="old") == before  # no model recorded yet
        ids = [r.chunk.id for r in WORLD]
        assert set(world.vector_scores(q, ids, model="old")) == set(ids)

        def switch(current: dict) -> list:  # as a re-embed's switch: every vector and the model together
            return [dataclasses.replace(r, vector=vec(7 + i)) for i, r in enumerate(WORLD) if r.chunk.id in current]

        world.modify(None, switch, meta={"embedder": json.dumps({"name": "new", "dim": DIM})})
        for call in (lambda: world.vector_search(q, flt, 5, model="old"),
                     lambda: world.vector_scores(q, ids, model="old")):
            with pytest.raises(EmbedderChangedError, match="open the store again"):
                call()
        one_trip = world.capabilities.retrieval
        if one_trip is not None:
            with pytest.raises(EmbedderChangedError):
                one_trip.retrieve({"apple": 1}, q, flt, 5, model="old")
            with pytest.raises(EmbedderChangedError):
                one_trip.retrieve({"apple": 1}, q, flt, 5, model="old", optimistic=True)
            assert one_trip.retrieve({"apple": 1}, q, flt, 5, model="new", optimistic=True).ids
        # The store's model, or none named: answered.
        assert world.vector_search(q, flt, 5, model="new") == world.vector_search(q, flt, 5)
        assert set(world.vector_scores(q, ids, model="new")) == set(ids)

    def test_get_vectors(self, world) -> None:
        got = world.get_vectors(["w1", "w5", "nope"])
        assert set(got) == {"w1", "w5"}
        np.testing.assert_allclose(got["w5"], WORLD[5].vector, atol=1e-6)
        assert got["w1"].dtype == np.float32 and got["w1"].shape == (DIM,)

    def test_empty_backend_searches(self, backend) -> None:
        assert backend.lexical_search({"apple": 1}, build_filter(None), 5) == []
        assert backend.term_idf(["apple"]) == ({}, 0.0)
        assert backend.vector_search(vec(1), build_filter(None), 5) == []
        assert backend.count() == 0 and backend.count(build_filter(None)) == 0
        assert list(backend.scan(build_filter(None))) == []

    def test_nonfinite_scores_never_escape(self, world) -> None:
        for s in [s for _, s in world.lexical_search({"apple": 3, "grape": 1}, build_filter(EVERY_STATUS), 50)] + \
                 [s for _, s in world.vector_search(vec(3), build_filter(EVERY_STATUS), 50)]:
            assert math.isfinite(s)
