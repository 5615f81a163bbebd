"""Relationships mined at ingest: semantic, session, entity and tag edges; stored,
queryable in both directions, and consistent when a memory is deleted."""

from __future__ import annotations

import pytest

from beeweave_core import InvalidInputError, NetworkConfig, NotFoundError, RelationType
from tests.network.net_support import all_edges, at, at_cosine, axis, pairs, typed

# Only one kind of edge at a time, so each test sees exactly what it mines.
SEMANTIC_ONLY = NetworkConfig(session_links=False, entity_links=False, tag_links=False)
SESSION_ONLY = NetworkConfig(semantic_k=0, entity_links=False, tag_links=False)
SHARED_ONLY = NetworkConfig(semantic_k=0, session_links=False)

COSINES = [0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.5]


def _old_at_cosines(m, cosines, user="alice"):
    """Memories whose cosines with axis 0 are ``cosines`` (they may link among themselves)."""
    ids = [f"{user}-{i}" for i in range(len(cosines))]
    m.add_many([dict(content=f"{user} memory {i}", user_id=user, chunk_id=cid, embedding=at_cosine(c, 10 + i))
                for i, (cid, c) in enumerate(zip(ids, cosines))])
    return ids


# -- semantic ------------------------------------------------------------------------------
def test_semantic_edges_go_to_the_five_most_similar_memories_with_the_cosine_as_weight(make):
    m = make(network=SEMANTIC_ONLY)
    old = _old_at_cosines(m, COSINES)
    m.add("the new memory", user_id="alice", chunk_id="new", embedding=axis(0))
    out = m.relationships("new", direction="out")
    assert {e.type for e in out} == {RelationType.SEMANTIC}
    assert {e.target_id: e.weight for e in out} == pytest.approx(dict(zip(old[:5], COSINES[:5])), abs=1e-5)


def test_semantic_edges_respect_the_threshold_and_semantic_k(make):
    m = make(network=NetworkConfig(semantic_k=2, semantic_threshold=0.6, session_links=False,
                                   entity_links=False, tag_links=False))
    old = _old_at_cosines(m, [0.9, 0.7, 0.65])
    m.add("new", user_id="alice", chunk_id="new", embedding=axis(0))
    assert pairs(m.relationships("new", direction="out")) == {("new", old[0]), ("new", old[1])}

    m2 = make(network=SEMANTIC_ONLY)
    old2 = _old_at_cosines(m2, [0.9, 0.61, 0.59, 0.3])
    m2.add("new", user_id="alice", chunk_id="new", embedding=axis(0))
    assert pairs(m2.relationships("new", direction="out")) == {("new", old2[0]), ("new", old2[1])}


def test_semantic_edges_never_reach_another_users_memory(make):
    m = make(network=SEMANTIC_ONLY)
    m.add("bob's twin", user_id="bob", chunk_id="bob-twin", embedding=axis(0))
    m.add("alice's near", user_id="alice", chunk_id="alice-near", embedding=at_cosine(0.8, 5))
    m.add("alice's new", user_id="alice", chunk_id="alice-new", embedding=axis(0))
    m.add("bob's new", user_id="bob", chunk_id="bob-new", embedding=axis(0))
    assert pairs(all_edges(m)) == {("alice-new", "alice-near"), ("bob-new", "bob-twin")}
    assert pairs(m.relationships("bob-twin")) == {("bob-new", "bob-twin")}


def test_two_new_memories_of_one_batch_that_find_each_other_get_one_semantic_edge(make):
    m = make(network=SEMANTIC_ONLY)
    m.add_many([dict(content="a", user_id="u", chunk_id="a", embedding=axis(0)),
                dict(content="b", user_id="u", chunk_id="b", embedding=at_cosine(0.9, 1))])
    edges = all_edges(m)
    assert len(edges) == 1 and {edges[0].source_id, edges[0].target_id} == {"a", "b"}
    assert edges[0].weight == pytest.approx(0.9, abs=1e-5)


# -- session ------------------------------------------------------------------------------------
def _session_edges(m):
    return pairs(all_edges(m), "session")


def test_session_edges_link_each_memory_to_the_next_in_time(make):
    m = make(network=SESSION_ONLY)
    for i in range(4):
        m.add(f"turn {i}", user_id="u", session_id="s1", chunk_id=f"t{i}", timestamp=at(i), embedding=axis(i))
    assert _session_edges(m) == {("t0", "t1"), ("t1", "t2"), ("t2", "t3")}
    assert {(e.type, e.weight) for e in all_edges(m)} == {(RelationType.SESSION, 1.0)}


def test_a_memory_inserted_between_two_replaces_their_direct_edge(make):
    m = make(network=SESSION_ONLY)
    m.add("first", user_id="u", session_id="s", chunk_id="a", timestamp=at(0), embedding=axis(0))
    m.add("third", user_id="u", session_id="s", chunk_id="c", timestamp=at(10), embedding=axis(1))
    assert _session_edges(m) == {("a", "c")}
    m.add("second, said in between", user_id="u", session_id="s", chunk_id="b", timestamp=at(5), embedding=axis(2))
    assert _session_edges(m) == {("a", "b"), ("b", "c")}
    m.add("zeroth", user_id="u", session_id="s", chunk_id="z", timestamp=at(-5), embedding=axis(3))
    assert _session_edges(m) == {("z", "a"), ("a", "b"), ("b", "c")}


def test_session_chain_of_a_shuffled_batched_import_is_in_time_order(make):
    m = make(network=SESSION_ONLY)
    order = [0, 4, 2, 1, 3, 6, 5]
    m.add_many([dict(content=f"turn {t}", user_id="u", session_id="s", chunk_id=f"t{t}", timestamp=at(t),
                     embedding=axis(t)) for t in order], batch_size=2)
    assert _session_edges(m) == {(f"t{t}", f"t{t + 1}") for t in range(6)}


def test_session_edges_stay_within_one_session_of_one_user_and_skip_sessionless_memories(make):
    m = make(network=SESSION_ONLY)
    rows = [("a1", "alice", "s1", 0), ("b1", "bob", "s1", 1), ("a2", "alice", "s2", 2), ("a3", "alice", None, 3),
            ("a4", "alice", "s1", 4), ("a5", "alice", None, 5), ("b2", "bob", "s1", 6)]
    for i, (cid, user, session, t) in enumerate(rows):
        m.add(cid, user_id=user, session_id=session, chunk_id=cid, timestamp=at(t), embedding=axis(i))
    assert _session_edges(m) == {("a1", "a4"), ("b1", "b2")}
    assert m.relationships("a3") == [] and m.relationships("a5") == []


# -- entity and tag -------------------------------------------------------------------------------
def test_entity_and_tag_edges_weigh_the_shared_share_of_the_larger_set(make):
    m = make(network=SHARED_ONLY)
    m.add("old", user_id="u", chunk_id="old", entities=["Paris", "Alice"], tags=["travel"], embedding=axis(0))
    m.add("other", user_id="u", chunk_id="other", entities=["Tokyo"], tags=["work"], embedding=axis(1))
    m.add("new", user_id="u", chunk_id="new", entities=["Paris", "Alice", "Bob"], tags=["travel", "food"],
          embedding=axis(2))
    assert typed(m.relationships("new")) == {("new", "old", "entity", round(2 / 3, 6)), ("new", "old", "tag", 0.5)}
    assert m.relationships("other") == []


def test_shared_edges_never_reach_another_users_memory(make):
    m = make(network=SHARED_ONLY)
    m.add("bob", user_id="bob", chunk_id="bob", entities=["Paris"], tags=["travel"], embedding=axis(0))
    m.add("alice", user_id="alice", chunk_id="alice", entities=["Paris"], tags=["travel"], embedding=axis(1))
    assert all_edges(m) == []


def test_shared_edges_are_capped_by_max_shared_links_keeping_the_most_recent(make):
    m = make(network=NetworkConfig(semantic_k=0, session_links=False, max_shared_links=3))
    for i in range(6):
        m.add(f"old {i}", user_id="u", chunk_id=f"o{i}", tags=["popular"], entities=["Paris"],
              timestamp=at(i), embedding=axis(i))
    m.add("new", user_id="u", chunk_id="new", tags=["popular"], entities=["Paris"], timestamp=at(10),
          embedding=axis(20))
    for kind in ("tag", "entity"):
        assert pairs(m.relationships("new", direction="out", types=[kind])) == {("new", "o5"), ("new", "o4"),
                                                                                 ("new", "o3")}


def test_the_cap_holds_for_a_memory_older_than_those_it_shares_with(make):
    m = make(network=NetworkConfig(semantic_k=0, session_links=False, entity_links=False, max_shared_links=3))
    m.add_many([dict(content=f"old {i}", user_id="u", chunk_id=f"o{i}", tags=["popular"], timestamp=at(10 + i),
                     embedding=axis(i)) for i in range(6)], link=False)
    m.add("imported from last year", user_id="u", chunk_id="early", tags=["popular"], timestamp=at(0),
          embedding=axis(20))
    assert pairs(m.relationships("early", direction="out")) == {("early", "o5"), ("early", "o4"), ("early", "o3")}


def test_default_cap_is_ten_per_kind(make):
    m = make(network=SHARED_ONLY)
    m.add_many([dict(content=f"old {i}", user_id="u", chunk_id=f"o{i:02d}", tags=["popular"], timestamp=at(i),
                     embedding=axis(i)) for i in range(12)], link=False)
    m.add("new", user_id="u", chunk_id="new", tags=["popular"], timestamp=at(20), embedding=axis(30))
    assert pairs(m.relationships("new", direction="out")) == {("new", f"o{i:02d}") for i in range(2, 12)}


def test_a_batch_stores_one_shared_edge_per_pair_like_single_adds(make):
    one_by_one, batch = make(network=SHARED_ONLY), make(network=SHARED_ONLY)
    records = [dict(content="a", user_id="u", chunk_id="a", tags=["t"], timestamp=at(0), embedding=axis(0)),
               dict(content="b", user_id="u", chunk_id="b", tags=["t"], timestamp=at(1), embedding=axis(1))]
    for r in records:
        one_by_one.add_many([r])
    batch.add_many(records)
    assert len(all_edges(one_by_one)) == 1
    assert len(all_edges(batch)) == 1


# -- reading, persistence, deletion ---------------------------------------------------------------------
def _small_network(m):
    m.add("alpha", user_id="u", session_id="s", chunk_id="a", tags=["x"], timestamp=at(0), embedding=axis(0))
    m.add("beta", user_id="u", session_id="s", chunk_id="b", tags=["x"], timestamp=at(1),
          embedding=at_cosine(0.8, 1))
    m.add("gamma", user_id="u", session_id="s", chunk_id="c", timestamp=at(2), embedding=axis(2))


def test_edges_are_queryable_in_both_directions_and_by_type(mem):
    _small_network(mem)
    assert typed(mem.relationships("b", direction="out")) == {("b", "a", "semantic", 0.8), ("b", "a", "tag", 1.0),
                                                              ("b", "c", "session", 1.0)}
    assert typed(mem.relationships("b", direction="in")) == {("a", "b", "session", 1.0)}
    both = mem.relationships("b")
    assert typed(both) == typed(mem.relationships("b", direction="out")) | typed(
        mem.relationships("b", direction="in"))
    assert typed(mem.relationships("a", direction="in", types=["semantic", "tag"])) == {
        ("b", "a", "semantic", 0.8), ("b", "a", "tag", 1.0)}
    assert pairs(mem.relationships("c", types=[RelationType.SESSION])) == {("b", "c")}
    assert mem.relationships("c", types=["tag"]) == []
    assert mem.relationships("a", direction="out", types=["semantic"]) == []


def test_relationships_reject_unknown_ids_and_directions(mem):
    _small_network(mem)
    with pytest.raises(NotFoundError):
        mem.relationships("nope")
    with pytest.raises(InvalidInputError):
        mem.relationships("a", direction="sideways")
    with pytest.raises(InvalidInputError, match="suports"):  # a typo was an empty answer
        mem.relationships("a", types=["suports"])
    assert mem.relationships("a", types="session") == mem.relationships("a", types=[RelationType.SESSION])


def test_edges_survive_close_and_reopen_of_a_file_store(make, db_path):
    m = make(db_path)
    _small_network(m)
    before = typed(all_edges(m))
    assert len(before) == 4
    m.close()
    reopened = make(db_path)
    assert typed(all_edges(reopened)) == before
    assert typed(reopened.relationships("a", direction="in")) == {e for e in before if e[1] == "a"}


@pytest.mark.parametrize("on_disk", [False, True])
def test_deleting_a_memory_removes_every_edge_that_mentions_it(make, db_path, on_disk):
    m = make(db_path if on_disk else None)
    _small_network(m)
    assert any("b" in (e.source_id, e.target_id) for e in all_edges(m))
    assert m.delete("b")
    assert all(("b" not in (e.source_id, e.target_id)) for e in all_edges(m))
    assert m.backend.edges(["b"]) == []
    assert m.verify().ok
    if on_disk:
        m.close()
        m = make(db_path)
        assert m.backend.edges(["b"]) == [] and m.verify().ok
    # the session goes on from what is left
    m.add("delta", user_id="u", session_id="s", chunk_id="d", timestamp=at(3), embedding=axis(3))
    assert ("c", "d") in pairs(all_edges(m), "session") and m.verify().ok


def test_deleting_a_middle_turn_links_its_neighbours(make):
    m = make(network=SESSION_ONLY)
    for i, cid in enumerate("abc"):
        m.add(cid, user_id="u", session_id="s", chunk_id=cid, timestamp=at(i), embedding=axis(i))
    m.delete("b")
    assert _session_edges(m) == {("a", "c")}


def test_add_many_without_link_mines_nothing_and_link_mines_later(mem):
    records = [dict(content=f"turn {i}", user_id="u", session_id="s", chunk_id=f"t{i}", tags=["x"],
                    entities=["E"], timestamp=at(i), embedding=at_cosine(0.9 if i else 1.0, 1 + i))
               for i in range(3)]
    mem.add_many(records, link=False)
    assert all_edges(mem) == []
    mined = mem.link(mem.get_many(["t0", "t1", "t2"]))
    assert {e.type.value for e in mined} == {"semantic", "session", "entity", "tag"}
    assert typed(all_edges(mem)) == typed(mined)
    assert pairs(mined, "session") == {("t0", "t1"), ("t1", "t2")}
