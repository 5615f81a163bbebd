"""Conformance of the ``Edges`` role (store/roles.py): relationships by (source, target,
type), and ``insert_linked``, which inserts and links in one call."""

from __future__ import annotations

import pytest

from beeweave_core import (
    BeeWeaveError,
    DuplicateIdError,
    Relationship,
    RelationType,
)
from beeweave_core.filters import build_filter
from beeweave_core.store.links import LinkReads, read_links
from tests.conformance_data import (
    EVERY_STATUS,
    WORLD,
    row,
    vec,
)
from tests.support import dt


class EdgesConformance:
    """``Edges``: relationships and linked inserts. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestEdges``."""

    def test_edges_in_both_directions(self, world) -> None:
        world.add_edges([
            Relationship("w0", "w1", RelationType.SEMANTIC, 0.9),
            Relationship("w0", "w2", RelationType.ENTITY, 0.5),
            Relationship("w3", "w0", RelationType.SESSION, 1.0),
            Relationship("w0", "w1", RelationType.TAG, 0.2),  # same pair, other type: a second edge
        ])
        key = lambda e: (e.source_id, e.target_id, e.type.value)  # noqa: E731
        out = sorted(map(key, world.edges(["w0"], direction="out")))
        assert out == [("w0", "w1", "semantic"), ("w0", "w1", "tag"), ("w0", "w2", "entity")]
        assert sorted(map(key, world.edges(["w0"], direction="in"))) == [("w3", "w0", "session")]
        assert len(world.edges(["w0"])) == 4
        assert sorted(map(key, world.edges(["w1"], direction="in"))) == [("w0", "w1", "semantic"), ("w0", "w1", "tag")]
        assert sorted(map(key, world.edges(["w0"], types=["semantic", RelationType.SESSION]))) == \
            [("w0", "w1", "semantic"), ("w3", "w0", "session")]
        # Both ends asked for: the edge between them is listed once.
        assert len(world.edges(["w0", "w1"])) == 4
        assert world.edges(["w6"]) == []
        with pytest.raises(BeeWeaveError):
            world.edges(["w0"], direction="sideways")

    def test_edges_overwrite_and_delete(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic", 0.3)])
        world.add_edges([Relationship("w0", "w1", "semantic", 0.8)])
        (edge,) = world.edges(["w0"])
        assert edge.weight == pytest.approx(0.8) and isinstance(edge.type, RelationType)
        world.add_edges([Relationship("w1", "w2", "entity")])
        world.delete_edges([Relationship("w0", "w1", "semantic"), Relationship("w5", "w6", "tag")])
        assert world.edges(["w0"]) == []
        assert len(world.edges(["w1"])) == 1
        world.add_edges([])
        world.delete_edges([])

    def test_get_attaches_outgoing_relationships(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic", 0.5), Relationship("w2", "w0", "entity")])
        c = world.get(["w0"])["w0"]
        assert c.relationships == [Relationship("w0", "w1", RelationType.SEMANTIC, 0.5)]
        assert world.get(["w1"])["w1"].relationships == []

    # -- insert with links (what linking fresh memories reads, answered as it inserts) ------------
    def _link_reads(self) -> LinkReads:
        return LinkReads(
            similar=[(vec(5), build_filter({**EVERY_STATUS, "user_id": "ann"}), 3), (vec(9), build_filter(None), 0),
                     (WORLD[2].vector, build_filter({"user_id": "bob", "tags": "y"}), 2)],
            sessions=[build_filter({**EVERY_STATUS, "user_id": "ann", "session_id": "s1"}),
                      build_filter({"user_id": "bob", "session_id": "none-such"})],
            shared=[(build_filter({**EVERY_STATUS, "user_id": "ann", "tags_any": ["x", "y"]}), 2),
                    (build_filter({**EVERY_STATUS, "entities": ["Paris"]}), 5)])

    def test_insert_linked_reads_see_the_new_rows_and_its_edges_are_written(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", RelationType.SESSION, 1.0)])
        new = [row("n1", "kiwi apple", seed=5, session_id="s1", tags=["x"], timestamp=dt(2024, 1, 15),
                   entities=["Paris"]),
               row("n2", "kiwi", seed=6, session_id="s1", timestamp=dt(2024, 9, 1))]
        seen = []

        def derive(facts):
            seen.append(facts)
            return ([Relationship("n1", "w0", RelationType.SESSION, 1.0),
                     Relationship("n1", "w1", RelationType.SESSION, 1.0),
                     Relationship("n2", "gone", RelationType.SEMANTIC, 0.5)],  # an end that is missing: skipped
                    [Relationship("w0", "w1", RelationType.SESSION)])

        assert world.insert_linked(new, self._link_reads(), derive) is True
        (facts,) = seen
        expected = read_links(world, self._link_reads())  # the reads by the protocol's own calls
        assert [[(i, pytest.approx(s, abs=1e-5)) for i, s in hits] for hits in expected.similar] == facts.similar
        assert facts.similar[0][0][0] == "n1" and facts.similar[1] == []
        assert facts.sessions[0][0] == ["w0", "n1", "w1", "n2"] == expected.sessions[0][0]
        assert facts.sessions[0][1] == [Relationship("w0", "w1", RelationType.SESSION, 1.0)]
        assert expected.sessions[0][1] == [Relationship("n1", "w0", RelationType.SESSION, 1.0),
                                           Relationship("n1", "w1", RelationType.SESSION, 1.0)]
        assert facts.sessions[1] == ([], []) == expected.sessions[1]
        assert facts.shared == expected.shared == [["w1", "n1"], ["w4", "n1", "w0"]]
        assert {i: (set(t), set(e)) for i, (t, e) in facts.labels.items()} == \
            {i: (set(t), set(e)) for i, (t, e) in expected.labels.items()}
        assert facts.labels["w4"][1] and set(facts.labels["n1"][0]) == {"x"}
        assert world.count() == len(WORLD) + 2
        key = lambda e: (e.source_id, e.target_id, e.type.value)  # noqa: E731
        assert sorted(map(key, world.edges(["n1", "n2", "w0"]))) == [("n1", "w0", "session"), ("n1", "w1", "session")]

    def test_insert_linked_refuses_a_duplicate_before_reading(self, world) -> None:
        called = []
        with pytest.raises(DuplicateIdError):
            world.insert_linked([row("n1", "kiwi"), row("w1", "kiwi")], self._link_reads(),
                                lambda facts: called.append(facts) or ([], []))
        assert called == [] and world.count() == len(WORLD) and world.contains(["n1"]) == set()

    def test_insert_linked_of_no_rows_links_what_is_there(self, world) -> None:
        assert world.insert_linked([], LinkReads(sessions=[build_filter({"user_id": "ann", "session_id": "s1"})]),
                                   lambda f: ([Relationship(*f.sessions[0][0][:2], RelationType.SESSION)], [])) is True
        assert [(e.source_id, e.target_id) for e in world.edges(["w0"])] == [("w0", "w1")]
        assert world.count() == len(WORLD)
