"""postprocess(): BeeWeave's ranking applied to candidates from any retriever."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from beeweave_core import Candidate, ExpandOptions, InvalidInputError
from tests.network.net_support import at, axis

JACKET = "bring a rain jacket for the hike"


@pytest.fixture
def trip(mem):
    mem.add("the ryokan is near Kyoto station", user_id="alice", session_id="trip", chunk_id="X",
            timestamp=at(0), embedding=axis(0))
    mem.add("the train leaves at nine", user_id="alice", session_id="trip", chunk_id="Y", timestamp=at(1),
            embedding=axis(1))
    mem.add(JACKET, user_id="alice", chunk_id="M", timestamp=at(2))  # embedded from its text
    mem.add("bob's secret plans", user_id="bob", chunk_id="bob1", timestamp=at(3))
    mem.add(JACKET, user_id="bob", chunk_id="bob2", timestamp=at(4))
    assert mem.relationships("M") == []
    return mem


def test_memories_get_their_weight_factor_and_external_candidates_are_marked(trip):
    trip.update("X", weight=3.0)  # factor log(4) / log(2) = 2
    cands = [Candidate("X", "what the retriever saw", 0.9), Candidate("web-1", "Kyoto travel guide", 1.5,
                                                                       {"source": "web", "tags": ["a"]})]
    before = copy.deepcopy(cands)
    hits = trip.postprocess("kyoto", cands, user_id="alice")
    assert cands == before and "external" not in cands[1].metadata
    assert [h.id for h in hits] == ["X", "web-1"]
    x, web = hits
    assert x.score == pytest.approx(1.8, rel=1e-12) and x.sources["input"].score == 0.9
    assert x.chunk.raw_content == "the ryokan is near Kyoto station" and "external" not in x.chunk.metadata
    assert web.score == 1.5 and web.chunk.raw_content == "Kyoto travel guide"
    assert web.chunk.metadata == {"source": "web", "tags": ["a"], "external": True}


def test_candidates_without_scores_are_ranked_by_position(trip):
    hits = trip.postprocess("q", [Candidate("e1", "one"), Candidate("e2", "two"), Candidate("Y", "y")],
                            user_id="alice")
    assert [(h.id, h.score) for h in hits] == [("e1", 1.0), ("e2", 0.5), ("Y", pytest.approx(1 / 3))]


def test_expansion_brings_linked_memories_as_extra_graph_hits(trip):
    cands = [Candidate("X", "", 0.8)]
    before = copy.deepcopy(cands)
    hits = trip.postprocess("kyoto", cands, user_id="alice", expand=True)
    assert cands == before
    assert [h.id for h in hits] == ["X", "Y"]
    g = hits[1].sources["graph"]
    assert (g.via, g.from_id, g.hops) == ("session", "X", 1)
    assert hits[1].score == pytest.approx(0.8 * 0.5 * 1.0, rel=1e-12)
    assert "graph" not in hits[0].sources


def test_an_external_candidate_is_linked_to_its_most_similar_memory(trip):
    hits = trip.postprocess("hike", [Candidate("web-2", JACKET, 0.6)], user_id="alice",
                            expand=ExpandOptions(decay=0.25))
    assert [h.id for h in hits] == ["web-2", "M"]
    g = hits[1].sources["graph"]
    assert (g.via, g.from_id, g.hops) == ("semantic", "web-2", 1)
    assert hits[1].score == pytest.approx(0.6 * 0.25, rel=1e-5)  # cosine 1 with its own text


def test_another_users_memory_is_neither_used_nor_brought_in(trip):
    hits = trip.postprocess("plans", [Candidate("bob1", "what the retriever saw", 0.9),
                                      Candidate("web", JACKET, 0.5)], user_id="alice", expand=True)
    assert {h.id for h in hits} == {"bob1", "web", "M"}
    bob = next(h for h in hits if h.id == "bob1")
    assert bob.chunk.raw_content == "what the retriever saw" and bob.chunk.metadata == {"external": True}
    assert all(h.chunk.user_id != "bob" for h in hits)


def test_a_reranker_and_top_n_apply_to_candidates(trip):
    class Reverse:
        def rerank(self, query, hits):
            return [replace(h, score=float(i)) for i, h in enumerate(reversed(hits))]

    cands = [Candidate(f"e{i}", f"text {i}", 1.0 - i / 10) for i in range(4)]
    hits = trip.postprocess("q", cands, user_id="alice", rerank=Reverse(), top_n=2)
    assert [h.id for h in hits] == ["e3", "e2"] and [h.score for h in hits] == [0.0, 1.0]


@pytest.mark.parametrize("bad", [dict(candidates=[{"id": "x", "text": "y"}]), dict(query=3),
                                 dict(rerank=object()), dict(top_n=-1)])
def test_bad_arguments_are_refused(trip, bad):
    kw = dict(query="q", candidates=[Candidate("x", "y")])
    kw.update(bad)
    with pytest.raises(InvalidInputError):
        trip.postprocess(kw.pop("query"), kw.pop("candidates"), user_id="alice", **kw)
