"""Conformance of the ``Lifecycle`` and ``Integrity`` roles (store/roles.py): a closed
backend refuses work, a reopened one has kept everything, and ``verify``/``repair`` agree
with what is stored."""

from __future__ import annotations

import pytest

from beeweave_core import ChunkStatus, Relationship, StoreClosedError
from beeweave_core.filters import build_filter
from tests.conformance_data import (
    CONTEXT,
    EVERY_STATUS,
    SESSION,
    WORLD,
    ids_of,
    row,
    vec,
)
from tests.support import dt


class LifecycleConformance:
    """``Lifecycle``: close and reopen. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestLifecycle``."""

    def test_closed_backend_refuses_work(self, world) -> None:
        world.flush()
        world.close()
        calls = {
            "get": lambda: world.get(["w0"]),
            "contains": lambda: world.contains(["w0"]),
            "count": lambda: world.count(),
            "matching": lambda: world.matching(["w0"], build_filter(None)),
            "scan": lambda: list(world.scan(build_filter(None))),
            "insert": lambda: world.insert([row("n", "kiwi")]),
            "update": lambda: world.update([WORLD[0].chunk]),
            "replace": lambda: world.replace([WORLD[0]]),
            "modify": lambda: world.modify(["w0"], lambda current: []),
            "rank_fields": lambda: world.rank_fields(["w0"]),
            "record_access": lambda: world.record_access({"w0": (1, dt(2025, 1, 1))}),
            "delete": lambda: world.delete(["w0"]),
            "delete_if": lambda: world.delete_if(["w0"], lambda c: True),
            "lexical_search": lambda: world.lexical_search({"apple": 1}, build_filter(None), 3),
            "vector_search": lambda: world.vector_search(vec(1), build_filter(None), 3),
            "vector_scores": lambda: world.vector_scores(vec(1), ["w0"]),
            "get_vectors": lambda: world.get_vectors(["w0"]),
            "get_meta": lambda: world.get_meta("k"),
            "set_meta": lambda: world.set_meta("k", "v"),
            "edges": lambda: world.edges(["w0"]),
            "add_edges": lambda: world.add_edges([Relationship("w0", "w1", "tag")]),
            "delete_edges": lambda: world.delete_edges([Relationship("w0", "w1", "tag")]),
            "kv_put": lambda: world.kv_put("ns", "k", {}),
            "kv_get": lambda: world.kv_get("ns", "k"),
            "kv_delete": lambda: world.kv_delete("ns", "k"),
            "kv_scan": lambda: list(world.kv_scan("ns")),
            "log_append": lambda: world.log_append("s", "k", {}),
            "log_read": lambda: world.log_read("s"),
            "delete_user": lambda: world.delete_user("ann"),
            "flush": lambda: world.flush(),
        }
        answered = []
        for name, call in calls.items():
            try:
                call()
            except StoreClosedError:
                continue
            answered.append(name)
        assert answered == [], f"these methods still work on a closed backend: {answered}"
        world.close()  # twice is harmless

    def test_reopen_keeps_everything(self, make, reopen) -> None:
        if reopen is None:
            pytest.skip("this backend does not persist")
        world = make(CONTEXT)
        world.insert(WORLD + SESSION)
        world.add_edges([Relationship("w0", "w1", "semantic", 0.5), Relationship("w2", "w0", "entity")])
        world.set_meta("note", "kept")
        world.delete(["w4"])
        everything = build_filter(EVERY_STATUS)
        queries = [{"apple": 1}, {"grape": 2, "fig": 1}, {"kiwi": 1, "lime": 1}]
        world_scores = world.vector_scores(vec(9), [r.chunk.id for r in WORLD + SESSION])
        before = (
            {i: c for i, c in world.get([r.chunk.id for r in WORLD]).items()},
            [world.lexical_search(q, everything, 10) for q in queries],
            [world.vector_search(vec(s), everything, 10) for s in range(3)],
            world.count(everything),
            world.rank_fields([r.chunk.id for r in WORLD]),
        )
        again = reopen(world)
        try:
            assert again.get_meta("note") == "kept"
            after = (
                {i: c for i, c in again.get([r.chunk.id for r in WORLD]).items()},
                [again.lexical_search(q, everything, 10) for q in queries],
                [again.vector_search(vec(s), everything, 10) for s in range(3)],
                again.count(everything),
                again.rank_fields([r.chunk.id for r in WORLD]),
            )
            for name, a, b in zip(("records", "lexical", "vector", "count", "rank fields"), after, before):
                assert a == b, f"{name} differ after reopening"
            ids = [r.chunk.id for r in WORLD + SESSION]
            assert again.vector_scores(vec(9), ids) == pytest.approx(world_scores)
            assert again.contains(["w4"]) == set()
            again.insert([row("n1", "apple kiwi")])  # and it keeps working
            assert "n1" in ids_of(again.lexical_search({"kiwi": 1}, everything, 5))
        finally:
            again.close()


class IntegrityConformance:
    """``Integrity``: the derived indexes checked, and rebuilt, from the records. Fixtures
    come from :class:`tests.conformance.BackendConformance`, which runs this class as
    ``TestIntegrity``."""

    def test_verify_agrees_after_every_kind_of_write_and_repair_keeps_what_is_stored(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "tag")])
        world.update([world.get(["w1"])["w1"].copy(tags=["moved"], user_id="zed")])
        world.replace([row("w3", "kiwi lime", seed=999, user_id="bob", status=ChunkStatus.ARCHIVED)])
        world.modify(["w2"], lambda current: [current["w2"].copy(weight=0.5)])
        world.delete(["w0"])
        report = world.verify()
        assert report.ok, report.problems
        assert (report.records, report.edges) == (len(WORLD) - 1, 0)  # w0's edges went with it
        world.add_edges([Relationship("w1", "w2", "entity")])
        ids = [r.chunk.id for r in WORLD]
        everything = build_filter(EVERY_STATUS)

        def stored() -> tuple:
            return (world.get(ids), world.lexical_search({"kiwi": 1, "apple": 1}, everything, 10),
                    world.vector_search(vec(3), everything, 10, exact=True), world.edges(ids))

        before = stored()
        repaired = world.repair()
        assert repaired.ok, repaired.problems
        assert (repaired.records, repaired.edges) == (len(WORLD) - 1, 1)
        assert stored() == before
