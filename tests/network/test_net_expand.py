"""Graph expansion in search: hops, decay, edge types, limits, provenance and scope."""

from __future__ import annotations

import pytest

from beeweave_core import ExpandOptions, Relationship
from tests.network.net_support import at, axis

ALL = {"status": ["active", "pending", "archived", "merged", "expired"]}


@pytest.fixture
def graph(mem):
    """Alice's seed S is the only memory that matches "zebra"; around it (no mined edges):

        S -semantic 0.8-> A -session 1.0-> B -tag 0.5-> C
        D -entity 0.6-> S        D -entity 0.2-> B
        S -tag 0.9-> Z (bob's)   S -semantic 0.7-> R (archived)
    """
    rows = [("S", "alice", "zebra stripes in the savanna"), ("A", "alice", "lions hunt at dawn"),
            ("B", "alice", "giraffes eat leaves"), ("C", "alice", "elephants remember water holes"),
            ("D", "alice", "hyenas laugh at night"), ("Z", "bob", "bob keeps a pet parrot"),
            ("R", "alice", "an archived note about rhinos")]
    mem.add_many([dict(content=text, user_id=user, chunk_id=cid, embedding=axis(i), timestamp=at(i))
                  for i, (cid, user, text) in enumerate(rows)], link=False)
    mem.update("R", status="archived")
    mem.backend.add_edges([Relationship("S", "A", "semantic", 0.8), Relationship("A", "B", "session", 1.0),
                           Relationship("B", "C", "tag", 0.5), Relationship("D", "S", "entity", 0.6),
                           Relationship("D", "B", "entity", 0.2), Relationship("S", "Z", "tag", 0.9),
                           Relationship("S", "R", "semantic", 0.7)])
    return mem


def _search(m, expand, *, user_id="alice", filters=None):
    hits = m.search("zebra", user_id=user_id, k=1, filters=filters, query_embedding=axis(0), expand=expand)
    assert hits[0].id == "S" and "graph" not in hits[0].sources
    return hits[0].score, {h.id: h for h in hits[1:]}


def _graph(hit):
    g = hit.sources["graph"]
    return g.via, g.from_id, g.hops


def test_one_hop_follows_edges_both_ways_with_score_parent_times_decay_times_weight(graph):
    s, got = _search(graph, ExpandOptions(hops=1, decay=0.5, limit=10))
    assert set(got) == {"A", "D"}  # not Z (bob's), not R (archived)
    assert got["A"].score == pytest.approx(s * 0.5 * 0.8, rel=1e-12)
    assert got["D"].score == pytest.approx(s * 0.5 * 0.6, rel=1e-12)
    assert _graph(got["A"]) == ("semantic", "S", 1)
    assert _graph(got["D"]) == ("entity", "S", 1)
    assert got["A"].sources["graph"].score == got["A"].score
    assert [h.sources["graph"].rank for h in got.values()] == [1, 2]


def test_scores_decay_per_hop_along_the_best_path_and_remember_the_direct_hit(graph):
    s, got = _search(graph, ExpandOptions(hops=3, decay=0.4, limit=10))
    assert set(got) == {"A", "D", "B", "C"}
    a = s * 0.4 * 0.8
    b = a * 0.4 * 1.0  # better than through D: s * 0.4 * 0.6 * 0.4 * 0.2
    assert got["A"].score == pytest.approx(a, rel=1e-12)
    assert got["B"].score == pytest.approx(b, rel=1e-12)
    assert got["C"].score == pytest.approx(b * 0.4 * 0.5, rel=1e-12)
    assert _graph(got["B"]) == ("session", "S", 2)
    assert _graph(got["C"]) == ("tag", "S", 3)
    scores = [h.score for h in got.values()]
    assert scores == sorted(scores, reverse=True)


def test_hops_limit_the_depth(graph):
    assert set(_search(graph, ExpandOptions(hops=2, limit=10))[1]) == {"A", "D", "B"}
    assert _search(graph, ExpandOptions(hops=0, limit=10))[1] == {}


def test_edge_types_restrict_which_edges_are_followed(graph):
    assert set(_search(graph, ExpandOptions(hops=3, edge_types=("semantic",), limit=10))[1]) == {"A"}
    assert set(_search(graph, ExpandOptions(hops=3, edge_types=("session", "tag"), limit=10))[1]) == set()
    _, got = _search(graph, ExpandOptions(hops=3, edge_types=("entity", "tag"), limit=10))
    assert set(got) == {"D", "B", "C"}  # S <- D -> B -> C
    assert _graph(got["B"]) == ("entity", "S", 2)


def test_limit_caps_the_expanded_hits_keeping_the_best(graph):
    _, got = _search(graph, ExpandOptions(hops=3, limit=2))
    assert set(got) == {"A", "D"}  # A 0.4s, D 0.3s, B 0.2s, C 0.05s with decay 0.5
    _, got = _search(graph, ExpandOptions(hops=3, limit=0))
    assert got == {}


def test_limit_defaults_to_k(graph):
    hits = graph.search("zebra", user_id="alice", k=1, query_embedding=axis(0), expand=True)
    assert [h.id for h in hits] == ["S", "A"]


def test_archived_memories_come_in_only_when_the_status_filter_asks(graph):
    s, got = _search(graph, ExpandOptions(hops=1, limit=10), filters=ALL)
    assert set(got) == {"A", "D", "R"}
    assert got["R"].score == pytest.approx(s * 0.5 * 0.7, rel=1e-12)
    assert got["R"].chunk.status.value == "archived"


def test_expansion_never_returns_another_users_memory(graph):
    for expand in (True, ExpandOptions(hops=5, limit=100), ExpandOptions(hops=5, limit=100, edge_types=("tag",))):
        hits = graph.search("zebra", user_id="alice", k=10, query_embedding=axis(0), expand=expand, filters=ALL)
        assert "Z" not in {h.id for h in hits}
        assert {h.chunk.user_id for h in hits} == {"alice"}


def test_expanded_hits_follow_the_direct_hits_without_repeating_them(graph):
    hits = graph.search("zebra lions", user_id="alice", k=3, expand=ExpandOptions(hops=3, limit=10))
    ids = [h.id for h in hits]
    assert len(ids) == len(set(ids))
    direct = [h for h in hits if "graph" not in h.sources]
    assert hits[: len(direct)] == direct and len(direct) == 3
    assert all(h.sources["graph"].from_id in {d.id for d in direct} for h in hits[3:])


def test_expansion_follows_mined_session_edges(mem):
    for i, text in enumerate(["we planned the trip to Kyoto", "booked the ryokan near the station",
                              "the train leaves at nine"]):
        mem.add(text, user_id="u", session_id="trip", chunk_id=f"t{i}", timestamp=at(i), embedding=axis(i))
    hits = mem.search("Kyoto", user_id="u", k=1, query_embedding=axis(0), expand=True)
    assert [h.id for h in hits] == ["t0", "t1"]
    assert _graph(hits[1]) == ("session", "t0", 1)
    assert hits[1].score == pytest.approx(hits[0].score * 0.5, rel=1e-12)


def test_no_expand_means_no_graph_hits(graph):
    hits = graph.search("zebra", user_id="alice", k=1, query_embedding=axis(0))
    assert [h.id for h in hits] == ["S"]


def test_edge_types_given_as_a_bare_string_is_refused_or_understood(graph):
    from beeweave_core import InvalidInputError

    try:
        _, got = _search(graph, ExpandOptions(hops=2, edge_types="semantic", limit=10))  # type: ignore[arg-type]
    except InvalidInputError:
        return
    assert set(got) == {"A"}
