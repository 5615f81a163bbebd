"""Conformance of the ``Meta`` and ``Records`` roles (store/roles.py): settings, and the
memories themselves written, read, filtered and rewritten with no lost update."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from beeweave_core import (
    BeeWeaveError,
    ChunkStatus,
    DuplicateIdError,
    EmbedderChangedError,
    InvalidInputError,
    KnowledgeChunk,
    NotFoundError,
    Relationship,
)
from beeweave_core.filters import build_filter
from beeweave_core.scoring import RankFields
from beeweave_core.store.base import ChunkRow
from tests.conformance_data import (
    DIM,
    EVERY_STATUS,
    FIELD_FILTERS,
    FIELD_TYPES_OF_TEST,
    FIELDED,
    FILTERS,
    PLAIN,
    WORLD,
    expected_ids,
    ids_of,
    row,
    vec,
)
from tests.support import dt, matches


class MetaConformance:
    """``Meta``: store-wide settings. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestMeta``."""

    def test_meta(self, backend) -> None:
        assert backend.get_meta("no-such-key") is None
        backend.set_meta("k", "v1")
        assert backend.get_meta("k") == "v1"
        backend.set_meta("k", '{"json": "值"}')
        assert backend.get_meta("k") == '{"json": "值"}'
        assert backend.get_meta("schema_version") is not None


class RecordsConformance:
    """``Records``: every write, read and filter. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestRecords``."""

    def test_insert_get_contains_count(self, world) -> None:
        assert world.count() == len(WORLD)
        assert world.contains(["w0", "w3", "nope"]) == {"w0", "w3"}
        got = world.get(["w2", "nope", "w0", "w2"])
        assert set(got) == {"w0", "w2"}
        for r in WORLD:
            assert world.get([r.chunk.id])[r.chunk.id] == r.chunk

    def test_insert_nothing(self, backend) -> None:
        backend.insert([])
        assert backend.count() == 0
        assert backend.get([]) == {}
        assert backend.contains([]) == set()

    @pytest.mark.parametrize("dup", ["existing", "within_batch"])
    def test_duplicate_id_rejects_the_whole_batch(self, world, dup) -> None:
        batch = [row("n1", "kiwi lime"), row("n2", "kiwi mango")]
        batch.append(row("w1", "kiwi") if dup == "existing" else row("n1", "kiwi again"))
        lex_before = world.lexical_search({"apple": 1}, build_filter(EVERY_STATUS), 50)
        with pytest.raises(DuplicateIdError):
            world.insert(batch)
        assert world.count() == len(WORLD)
        assert world.contains(["n1", "n2"]) == set()
        assert world.lexical_search({"kiwi": 1}, build_filter(EVERY_STATUS), 10) == []
        assert world.lexical_search({"apple": 1}, build_filter(EVERY_STATUS), 50) == lex_before
        assert world.get(["w1"])["w1"] == WORLD[1].chunk
        world.insert(batch[:2])  # the good rows alone go in
        assert world.count() == len(WORLD) + 2

    def test_delete(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "entity"),
                         Relationship("w1", "w2", "session")])
        assert sorted(world.delete(["w0", "nope", "w0"])) == ["w0"]
        assert world.delete(["w0"]) == []
        assert world.count() == len(WORLD) - 1
        assert world.contains(["w0"]) == set() and world.get(["w0"]) == {}
        everything = build_filter(EVERY_STATUS)
        assert "w0" not in {c.id for c in world.scan(everything)}
        assert "w0" not in ids_of(world.lexical_search({"apple": 1, "banana": 1}, everything, 50))
        assert "w0" not in ids_of(world.vector_search(WORLD[0].vector, everything, 50, exact=True))
        assert "w0" not in world.get_vectors(["w0"])
        # Every edge touching w0 went with it, in both directions; others stay.
        assert world.edges(["w0"]) == []
        assert [(e.source_id, e.target_id) for e in world.edges(["w1", "w2"])] == [("w1", "w2")]

    def test_update_changes_attributes_not_text(self, world) -> None:
        c = world.get(["w0"])["w0"]
        c2 = c.copy(status=ChunkStatus.ARCHIVED, tags=["new"], user_id="zed", session_id=None,
                    timestamp=c.timestamp + timedelta(days=400), metadata={"m": 1})
        world.update([c2])
        assert world.get(["w0"])["w0"] == c2
        assert world.count(build_filter({"user_id": "zed"})) == 0  # archived: hidden by default
        assert {c.id for c in world.scan(build_filter({"user_id": "zed", "status": "archived", "tags": "new"}))} == {"w0"}
        assert world.count(build_filter({"tags": "x"})) == len(expected_ids({"tags": "x"}) - {"w0"})
        assert {c.id for c in world.scan(build_filter({"tags": "x", **EVERY_STATUS}))} == \
            expected_ids({"tags": "x", **EVERY_STATUS}) - {"w0"}
        lex = world.lexical_search({"banana": 1}, build_filter({"status": "archived"}), 10)
        assert "w0" in ids_of(lex)
        np.testing.assert_allclose(world.get_vectors(["w0"])["w0"], WORLD[0].vector, atol=1e-6)
        with pytest.raises(NotFoundError):
            world.update([KnowledgeChunk("x", "ann", id="nope")])

    def test_update_moves_a_record_between_tiers(self, world) -> None:
        # Promotion rewrites a record's tier: every read's tier filter follows it.
        c = world.get(["w1"])["w1"]
        assert c.tier.value == "short"
        world.update([c.copy(tier="long")])
        assert world.get(["w1"])["w1"].tier.value == "long"
        short = build_filter({"tier": "short"})
        assert world.count(short) == 0 and world.scan_ids(short) == []
        longf = build_filter({"tier": "long", "user_id": "ann"})
        assert {c.id for c in world.scan(longf)} == {"w0", "w1", "w6"}
        assert "w1" in ids_of(world.lexical_search({"apple": 1}, longf, 10))
        assert "w1" in ids_of(world.vector_search(vec(1), longf, 10))

    def test_validity_times_round_trip(self, make, reopen) -> None:
        # A fact's bi-temporal validity is part of the record: written by insert, rewritten by
        # update, read back as it was (after reopening too); a record without it reads None.
        t = datetime(2025, 1, 10, tzinfo=timezone.utc)
        b = make(PLAIN)
        b.insert([row("v1", "I live in Berlin", valid_from=t), row("v2", "a plain memory")])
        got = b.get(["v1", "v2"])
        assert (got["v1"].valid_from, got["v1"].invalid_at, got["v2"].valid_from) == (t, None, None)
        b.update([got["v1"].copy(invalid_at=t + timedelta(days=45), relationships=[])])
        assert b.get(["v1"])["v1"].invalid_at == t + timedelta(days=45)
        if reopen is not None:
            again = reopen(b)
            try:
                kept = again.get(["v1", "v2"])
                assert (kept["v1"].valid_from, kept["v1"].invalid_at) == (t, t + timedelta(days=45))
                assert (kept["v2"].valid_from, kept["v2"].invalid_at) == (None, None)
            finally:
                again.close()

    def test_rank_fields_are_those_of_the_records(self, world) -> None:
        ids = [r.chunk.id for r in WORLD]

        def expected() -> dict:
            return {i: RankFields.of(c) for i, c in world.get(ids).items()}

        assert world.rank_fields(ids + ["nope", "w1"]) == expected()
        assert world.rank_fields([]) == {}
        c = world.get(["w1"])["w1"]
        far = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)  # beyond float seconds' microseconds
        world.update([c.copy(weight=2.75, confidence=0.4, pinned=True, expires_at=far, metadata={"stale": True},
                             reinforced_at=dt(2024, 3, 2, 5) + timedelta(microseconds=7))])
        world.modify(["w2"], lambda found: [found["w2"].copy(weight=0.3, metadata={"stale": "yes"})])
        world.replace([row("w3", "kiwi", user_id="bob", status=ChunkStatus.ARCHIVED, weight=1.5)])
        world.delete(["w0"])
        got = world.rank_fields(ids)
        assert got == expected() and "w0" not in got
        assert got["w1"].expires_at == far and got["w1"].stale and got["w1"].pinned
        assert got["w2"].stale and got["w2"].weight == 0.3 and got["w3"].weight == 1.5

    def test_replace_changes_text_and_vector_keeps_edges(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "tag")])
        new = row("w0", "kiwi lime", seed=999, user_id="ann", timestamp=dt(2024, 1, 1))
        world.replace([new])
        assert world.count() == len(WORLD)
        assert world.get(["w0"])["w0"].raw_content == "kiwi lime"
        flt = build_filter(None)
        assert ids_of(world.lexical_search({"kiwi": 1}, flt, 5)) == ["w0"]
        assert "w0" not in ids_of(world.lexical_search({"banana": 1}, flt, 50))
        np.testing.assert_allclose(world.get_vectors(["w0"])["w0"], new.vector, atol=1e-6)
        assert ids_of(world.vector_search(new.vector, flt, 1, exact=True)) == ["w0"]
        assert {(e.source_id, e.target_id) for e in world.edges(["w0"])} == {("w0", "w1"), ("w2", "w0")}

    def test_modify_reads_and_writes_in_one_step(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "tag")])
        seen: list[dict[str, KnowledgeChunk]] = []

        def change(current: dict[str, KnowledgeChunk]) -> list:
            seen.append(current)
            c = current["w0"]
            return [c.copy(access_count=c.access_count + 2, tags=["new"], status=ChunkStatus.ARCHIVED),
                    row("w1", "kiwi lime", seed=999, user_id="ann", agent_id="a2", session_id="s1",
                        timestamp=dt(2024, 2, 1))]

        world.modify(["w0", "w1", "nope", "w0"], change)
        assert len(seen) == 1 and set(seen[0]) == {"w0", "w1"}  # the records that exist, once each
        assert seen[0]["w0"] == WORLD[0].chunk  # as stored (no relationships attached)
        w0 = world.get(["w0"])["w0"]
        assert (w0.access_count, w0.tags, w0.status) == (2, ["new"], ChunkStatus.ARCHIVED)
        assert world.count(build_filter({"tags": "new"})) == 0  # archived: the filters see the change
        assert world.get(["w1"])["w1"].raw_content == "kiwi lime"  # a ChunkRow replaces text and vector
        flt = build_filter(EVERY_STATUS)
        assert ids_of(world.lexical_search({"kiwi": 1}, flt, 5)) == ["w1"]
        assert ids_of(world.vector_search(vec(999), flt, 1, exact=True)) == ["w1"]
        assert {(e.source_id, e.target_id) for e in world.edges(["w0", "w1"])} == {("w0", "w1"), ("w2", "w0")}

        calls: list[dict] = []
        world.modify([], lambda current: calls.append(current) or [])
        world.modify(["nope"], lambda current: calls.append(current) or [])
        assert calls == [{}]  # no ids: not called; only missing ids: called with nothing

    def test_modify_of_every_record_sets_meta_in_the_same_step(self, world, backend) -> None:
        # What a re-embed's switch does: every record as stored when the write starts (one
        # added and one deleted since the caller last read included and left out), a new
        # vector each, and the model's name, together.
        world.add_edges([Relationship("w0", "w1", "semantic")])
        world.insert([row("late", "kiwi lime", seed=77)])
        world.delete(["w3"])
        before = world.get([r.chunk.id for r in WORLD] + ["late"])
        seen: list[set[str]] = []
        given: dict[str, np.ndarray] = {}

        def switch(current: dict[str, KnowledgeChunk]) -> list:
            seen.append(set(current))
            given.update({cid: vec(500 + i) for i, cid in enumerate(sorted(current))})
            return [ChunkRow(c, given[c.id], c.content.lower().split()) for c in current.values()]

        world.modify(None, switch, meta={"embedder": "new"})
        assert seen == [set(before)]
        assert world.get(list(before)) == before and world.get_meta("embedder") == "new"
        stored = world.get_vectors(list(before))
        for cid in before:
            np.testing.assert_allclose(stored[cid], given[cid], atol=1e-6)
        flt = build_filter(EVERY_STATUS)
        assert ids_of(world.vector_search(given["late"], flt, 1, exact=True)) == ["late"]
        assert ids_of(world.lexical_search({"kiwi": 1}, flt, 5)) == ["late"]

        def fails(current: dict[str, KnowledgeChunk]) -> list:
            raise NotFoundError("the caller gives up")

        with pytest.raises(NotFoundError):
            world.modify(None, fails, meta={"embedder": "newer"})
        assert world.get_meta("embedder") == "new"  # nothing written, the meta neither
        calls: list[dict] = []
        world.modify([], lambda current: calls.append(current) or [], meta={"embedder": "newer"})
        assert calls == [] and world.get_meta("embedder") == "newer"  # no ids: only the meta
        backend.modify(None, lambda current: calls.append(current) or [], meta={"embedder": "x"})
        assert calls == [{}] and backend.get_meta("embedder") == "x"  # an empty store: called with nothing

    def test_a_vector_for_another_model_than_the_stores_is_refused(self, world, backend) -> None:
        # A writer still on the model another process re-embedded the store away from: its
        # rows name their model, read against the store's in the write's own transaction.
        world.set_meta("embedder", json.dumps({"name": "new", "dim": DIM}))
        before, vectors = world.get(["w0"]), world.get_vectors(["w0"])

        def stale(r: ChunkRow) -> ChunkRow:
            return dataclasses.replace(r, model="old")

        with pytest.raises(EmbedderChangedError, match="'new'"):
            world.insert([row("n1", "kiwi lime", seed=1), stale(row("n2", "kiwi lime", seed=2))])
        with pytest.raises(EmbedderChangedError):
            world.replace([stale(row("w0", "kiwi lime", seed=3))])
        with pytest.raises(EmbedderChangedError):
            world.modify(["w0"], lambda current: [stale(row("w0", "kiwi lime", seed=4))])
        assert world.contains(["n1", "n2"]) == set() and world.count() == len(WORLD)  # nothing written
        assert world.get(["w0"]) == before
        np.testing.assert_allclose(world.get_vectors(["w0"])["w0"], vectors["w0"], atol=1e-6)
        assert ids_of(world.lexical_search({"kiwi": 1}, build_filter(EVERY_STATUS), 5)) == []

        world.insert([dataclasses.replace(row("n1", "kiwi lime", seed=1), model="new")])  # the store's model
        world.replace([dataclasses.replace(row("w0", "kiwi lime", seed=3), model="new")])
        world.insert([row("n2", "kiwi lime", seed=2)])  # no model named: not checked
        assert world.contains(["n1", "n2"]) == {"n1", "n2"}
        backend.insert([stale(row("n3", "kiwi"))])  # no model recorded yet: nothing to check against
        assert backend.contains(["n3"]) == {"n3"}

    def test_modify_writes_nothing_when_change_fails(self, world) -> None:
        before = world.get(["w0", "w1"])

        def fails(current: dict[str, KnowledgeChunk]) -> list:
            current["w0"].tags = ["changed"]
            raise NotFoundError("the caller gives up")

        with pytest.raises(NotFoundError, match="gives up"):
            world.modify(["w0"], fails)
        with pytest.raises(BeeWeaveError):  # a record it was not given
            world.modify(["w0"], lambda current: [current["w0"].copy(tags=["t"]), WORLD[1].chunk.copy(tags=["t"])])
        assert world.get(["w0", "w1"]) == before
        world.modify(["w0"], lambda current: [current["w0"].copy(tags=["after"])])  # and it still works
        assert world.get(["w0"])["w0"].tags == ["after"]

    def test_modify_loses_no_update_between_threads(self, world) -> None:

        def bump(current: dict[str, KnowledgeChunk]) -> list:
            c = current["w0"]
            return [c.copy(access_count=c.access_count + 1)]

        def run() -> None:
            for _ in range(25):
                world.modify(["w0"], bump)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert world.get(["w0"])["w0"].access_count == 100

    def test_delete_if_judges_the_records_it_deletes(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w6", "tag")])
        seen: list[str] = []

        def still(c: KnowledgeChunk) -> bool:
            seen.append(c.id)
            assert c.relationships == []  # as stored, as modify gives them
            return "x" in c.tags

        assert sorted(world.delete_if(["w0", "w2", "nope", "w4", "w0"], still)) == ["w0", "w4"]
        assert sorted(seen) == ["w0", "w2", "w4"]  # each existing record judged once
        assert world.contains(["w0", "w2", "w4"]) == {"w2"}
        assert world.edges(["w1"]) == [] and len(world.edges(["w6"])) == 1  # w0's edges went with it
        assert "w4" not in ids_of(world.lexical_search({"grape": 1}, build_filter(EVERY_STATUS), 50))
        assert world.delete_if([], still) == [] and world.delete_if(["nope"], still) == []

    def test_delete_if_spares_a_record_renewed_before_it_reads(self, world) -> None:
        # What a sweep does: it decided on an earlier read (w0 expired); another writer renews
        # w0 before the delete runs; the delete reads w0 again and keeps it.
        expired = dt(2024, 1, 2)
        world.modify(["w0", "w1"], lambda cur: [c.copy(expires_at=expired) for c in cur.values()])
        decided = [c.id for c in world.scan(build_filter(None)) if c.expires_at == expired]
        world.modify(["w0"], lambda cur: [cur["w0"].copy(expires_at=None, tags=["renewed"])])
        assert world.delete_if(decided, lambda c: c.expires_at == expired) == ["w1"]
        assert world.get(["w0"])["w0"].tags == ["renewed"]

    def test_record_access_adds_counts_and_keeps_the_latest_access(self, world) -> None:

        ids = [r.chunk.id for r in WORLD]
        before = world.get(ids)
        everything = build_filter(EVERY_STATUS)
        searched = (world.rank_fields(ids), world.lexical_search({"apple": 1, "fig": 1}, everything, 10),
                    world.count(build_filter({"tags": "x"})))
        t1 = dt(2025, 1, 1)
        t2 = t1 + timedelta(microseconds=1)
        world.record_access({"w0": (2, t2), "w1": (1, t1), "nope": (5, t1)})
        world.record_access({"w0": (3, t1)})  # an earlier access does not move last_accessed back
        world.record_access({})

        def run() -> None:
            for _ in range(25):
                world.record_access({"w2": (1, t1)})

        threads = [threading.Thread(target=run) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        after = world.get(ids)
        assert (after["w0"].access_count, after["w0"].last_accessed) == (before["w0"].access_count + 5, t2)
        assert (after["w1"].access_count, after["w1"].last_accessed) == (before["w1"].access_count + 1, t1)
        assert after["w2"].access_count == before["w2"].access_count + 100  # no update lost
        assert world.contains(["nope"]) == set()
        for i in ids:  # nothing else changed
            assert after[i].copy(access_count=0, last_accessed=None) == before[i].copy(access_count=0, last_accessed=None)
        assert (world.rank_fields(ids), world.lexical_search({"apple": 1, "fig": 1}, everything, 10),
                world.count(build_filter({"tags": "x"}))) == searched

    def test_scan_order_and_limit(self, world) -> None:
        everything = build_filter(EVERY_STATUS)
        by_time = [r.chunk.id for r in sorted(WORLD, key=lambda r: r.chunk.timestamp)]
        assert [c.id for c in world.scan(everything)] == by_time
        assert [c.id for c in world.scan(everything, descending=True)] == by_time[::-1]
        assert [c.id for c in world.scan(everything, limit=3)] == by_time[:3]
        assert [c.id for c in world.scan(everything, limit=2, descending=True)] == by_time[::-1][:2]
        assert [c.id for c in world.scan(everything, limit=0)] == []
        for kw in ({}, {"descending": True}, {"limit": 3}, {"limit": 2, "descending": True}, {"order": "insertion"}):
            assert world.scan_ids(everything, **kw) == [c.id for c in world.scan(everything, **kw)]

    @pytest.mark.parametrize("flt", FILTERS, ids=[str(sorted(f)) for f in FILTERS])
    def test_every_filter_in_every_read(self, world, flt) -> None:
        want = expected_ids(flt)
        f = build_filter(flt)
        assert world.count(f) == len(want)
        assert {c.id for c in world.scan(f)} == want
        assert world.matching([r.chunk.id for r in WORLD] + ["nope"], f) == want
        terms = {"apple": 1, "banana": 1, "cherry": 1, "date": 1, "fig": 1, "grape": 1}
        assert set(ids_of(world.lexical_search(terms, f, 100))) == want
        for exact in (True, False):
            assert set(ids_of(world.vector_search(vec(1), f, 100, exact=exact))) == want
        k = max(len(want) - 1, 1)
        assert len(world.lexical_search(terms, f, k)) == min(k, len(want))
        assert len(world.vector_search(vec(1), f, k)) == min(k, len(want))

    @pytest.mark.parametrize("flt", FIELD_FILTERS, ids=[str(sorted(f.items())) for f in FIELD_FILTERS])
    def test_declared_field_filters_in_every_read(self, backend, flt) -> None:
        for name in FIELD_TYPES_OF_TEST:
            backend.index_field(name)
            backend.index_field(name)  # again: harmless
        backend.insert(FIELDED)
        want = {r.chunk.id for r in FIELDED if matches(r.chunk, flt)}
        f = build_filter(flt, declared=FIELD_TYPES_OF_TEST)
        assert backend.count(f) == len(want)
        assert {c.id for c in backend.scan(f)} == want
        assert backend.scan_ids(f) == [c.id for c in backend.scan(f)]
        assert backend.matching([r.chunk.id for r in FIELDED], f) == want
        assert set(ids_of(backend.lexical_search({"note": 1}, f, 100))) == want
        for exact in (True, False):
            assert set(ids_of(backend.vector_search(vec(1), f, 100, exact=exact))) == want

    def test_index_field_refuses_a_name_that_is_not_an_identifier(self, backend) -> None:
        for bad in ("a b", "x'); DROP TABLE chunks; --", "1abc", "", "a" * 41):
            with pytest.raises(InvalidInputError):
                backend.index_field(bad)
