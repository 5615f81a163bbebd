"""Strict-then-loose: when tags, entities or min_score leave fewer than k hits, the rest
comes from a looser search, marked ``loosened``; the user scope is never loosened."""

from __future__ import annotations

import pytest

Q = "deploy kubernetes cluster"


@pytest.fixture
def ops(mem):
    alice = [("o1", "deploy kubernetes cluster on monday", ["ops"], ["K8s"]),
             ("o2", "kubernetes cluster rollback after the deploy", ["ops"], ["K8s"]),
             ("u1", "deploy kubernetes service to staging", [], []),
             ("u2", "kubernetes cluster upgrade notes", [], []),
             ("u3", "deploy the web app with a script", [], []),
             ("u4", "cluster of servers in the basement", [], []),
             ("u5", "coffee with the team after the deploy", [], [])]
    mem.add_many([dict(content=c, user_id="alice", chunk_id=i, tags=t, entities=e) for i, c, t, e in alice])
    mem.add_many([dict(content=f"deploy kubernetes cluster number {j}", user_id="bob", chunk_id=f"b{j}",
                       tags=["ops"], entities=["K8s"]) for j in range(8)])
    return mem


def _ids(hits):
    return [h.id for h in hits]


@pytest.mark.parametrize("filters", [{"tags": ["ops"]}, {"entities": ["K8s"]}])
def test_strict_hits_come_first_then_looser_ones_marked_loosened(ops, filters):
    strict = ops.search(Q, user_id="alice", k=5, filters=filters)
    assert sorted(_ids(strict)) == ["o1", "o2"]  # without loosen: only strict hits
    hits = ops.search(Q, user_id="alice", k=5, filters=filters, loosen=True)
    assert [(h.id, h.score, h.loosened) for h in hits[:2]] == [(h.id, h.score, False) for h in strict]
    unfiltered = [i for i in _ids(ops.search(Q, user_id="alice", k=7)) if i not in {"o1", "o2"}]
    assert _ids(hits[2:]) == unfiltered[:3]
    assert all(h.loosened for h in hits[2:]) and len(hits) == 5


def test_loosen_changes_nothing_when_the_strict_search_fills_k(ops):
    strict = ops.search(Q, user_id="alice", k=2, filters={"tags": ["ops"]})
    loose = ops.search(Q, user_id="alice", k=2, filters={"tags": ["ops"]}, loosen=True)
    assert [(h.id, h.score, h.loosened) for h in loose] == [(h.id, h.score, False) for h in strict]


def test_min_score_is_loosened_too(ops):
    top = ops.search(Q, user_id="alice", k=3)
    strict = ops.search(Q, user_id="alice", k=3, min_score=top[0].score)
    assert _ids(strict) == [top[0].id]
    hits = ops.search(Q, user_id="alice", k=3, min_score=top[0].score, loosen=True)
    assert [(h.id, h.loosened) for h in hits] == [(top[0].id, False), (top[1].id, True), (top[2].id, True)]


def test_the_user_scope_is_never_loosened(ops):
    hits = ops.search(Q, user_id="alice", k=20, filters={"tags": ["ops"]}, loosen=True)
    assert sorted(_ids(hits)) == ["o1", "o2", "u1", "u2", "u3", "u4", "u5"]
    assert {h.chunk.user_id for h in hits} == {"alice"}
    by_filter = ops.search(Q, k=20, filters={"user_id": "alice", "tags": ["nothing-has-this"]}, loosen=True)
    assert {h.chunk.user_id for h in by_filter} == {"alice"} and len(by_filter) == 7
