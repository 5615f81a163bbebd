"""Lost updates: the engine's read-then-write paths over a backend of the conformance suite.

Each path (maintain's expiry, merge, promotion, demotion and settling, capacity, feedback,
review, the LangGraph store's TTL sweep) reads records, decides, and writes. Another process
may write the same record in between; the engine's lock does not keep it out. Each test
holds that window open deterministically: just before the engine's write of the record
reaches the backend, "another process" (the backend's own methods, past the engine and its
lock) changes it. The change must survive the engine's write, and a delete in that window
must not make the engine raise.

Run as ``TestNoLostUpdates`` in :class:`tests.conformance.BackendConformance`, so it runs
against every backend with the suite's ``backend_factory`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from beeweave_core import BeeWeave, ChunkStatus, HashingEmbedder, KnowledgeChunk
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.lifecycle.config import TierConfig
from beeweave_core.records import MemoryTier
from beeweave_core.store.base import ChunkRow, StoreBackend
from tests.lifecycle.lifecycle_support import DIM, Clock, unit

WRITES = ("update", "replace", "modify", "delete", "delete_if")
DELETES = ("delete", "delete_if")
NEW_TEXT = "the meeting moved to friday at noon in the large hall"


def _ids_of(name: str, args: tuple[Any, ...]) -> list[str] | None:
    """The record ids a backend write touches (None: every record, ``modify(None, ...)``)."""
    first = args[0]
    if first is None:
        return None
    if name == "update":
        return [c.id for c in first]
    if name == "replace":
        return [r.chunk.id for r in first]
    return list(first)


class OtherProcess:
    """A second writer of the same store: straight to the backend, as another process's
    engine would, so the first engine's lock does not see it."""

    def __init__(self, backend: StoreBackend) -> None:
        self._modify = backend.modify
        self._delete = backend.delete
        self._vectors = backend.get_vectors

    def edit(self, cid: str, text: str | None = None, *, vector: Sequence[float] | None = None,
             **fields: Any) -> None:
        """Change a record; a new text gets ``vector``, or keeps the one it had."""
        embedding = np.asarray(vector, np.float32) if vector is not None else self._vectors([cid])[cid]

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk | ChunkRow]:
            c = current[cid].copy(**fields)
            if text is None:
                return [c]
            c = c.copy(raw_content=text, processed_content=None)
            return [ChunkRow(c, embedding, text.lower().split())]

        self._modify([cid], change)

    def delete(self, cid: str) -> None:
        self._delete([cid])


def interleave(monkeypatch: pytest.MonkeyPatch, backend: StoreBackend, cid: str, then: Callable[[], None], *,
               on: Sequence[str] = WRITES, skip: int = 0) -> list[str]:
    """Run ``then`` once, just before the engine's ``skip+1``-th write (one of ``on``) touching
    ``cid`` reaches the backend: the window between its read and its write, held open.
    Returns a list that names the write once it happened (a test checks the window opened)."""
    fired: list[str] = []
    left = [skip]
    for name in on:
        original = getattr(backend, name, None)
        if original is None:  # a write this backend does not have (an older one: no delete_if)
            continue

        def wrapper(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            if not fired and ((ids := _ids_of(_name, args)) is None or cid in ids):
                if left[0]:
                    left[0] -= 1
                else:
                    fired.append(_name)
                    then()
            return _original(*args, **kw)

        monkeypatch.setattr(backend, name, wrapper)
    return fired


class LostUpdateConformance:
    """No read-then-write path of the engine loses or reverts another writer's change."""

    @pytest.fixture
    def clock(self) -> Clock:
        return Clock()

    @pytest.fixture
    def engine(self, backend_factory: Callable[..., StoreBackend],
               clock: Clock) -> Iterator[Callable[..., BeeWeave]]:
        """``engine(**lifecycle_options)``: a BeeWeave on a new backend and the test clock."""
        opened: list[BeeWeave] = []

        def make(**options: Any) -> BeeWeave:
            options.setdefault("access_flush_interval", 0.0)
            opened.append(BeeWeave(backend=backend_factory(), embedder=HashingEmbedder(DIM), clock=clock,
                                   lifecycle=LifecycleConfig(**options)))
            return opened[-1]

        yield make
        for m in opened:
            m.close()

    @staticmethod
    def _meeting(m: BeeWeave, **fields: Any) -> str:
        return m.add("the meeting is on monday at ten", user_id="u", embedding=unit(1.0), **fields)

    def _expired(self, m: BeeWeave, clock: Clock) -> str:
        cid = self._meeting(m, expires_at=clock.now + timedelta(hours=1))
        clock.advance(hours=2)
        return cid

    @staticmethod
    def _maintain_racing_an_edit(m: BeeWeave, monkeypatch: pytest.MonkeyPatch, cid: str,
                                 **fields: Any) -> tuple[Any, KnowledgeChunk]:
        """``maintain()`` while another process gives ``cid`` a new text (and ``fields``) just
        before maintain's write of it; (the report, the memory after)."""
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, NEW_TEXT, **fields))
        report = m.maintain()
        assert fired, "maintain wrote nothing of it: the window never opened"
        return report, m.get(cid)

    # -- maintain: expiry ---------------------------------------------------------------------
    def test_maintain_keeps_an_edit_made_before_it_archives(self, engine, clock, monkeypatch) -> None:
        m = engine()
        cid = self._expired(m, clock)
        report, got = self._maintain_racing_an_edit(m, monkeypatch, cid, expires_at=None)
        assert (got.content, got.status, got.expires_at) == (NEW_TEXT, ChunkStatus.ACTIVE, None)
        assert (report.expired, report.archived) == (0, 0)

    def test_maintain_raises_nothing_when_a_memory_is_deleted_before_it_archives(self, engine, clock,
                                                                                 monkeypatch) -> None:
        m = engine()
        cid = self._expired(m, clock)
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.delete(cid))
        report = m.maintain()
        assert fired and not m.backend.contains([cid])
        assert (report.expired, report.archived) == (0, 0)

    def test_maintain_spares_a_memory_renewed_before_it_deletes_it(self, engine, clock, monkeypatch) -> None:
        m = engine(expired_action="delete")
        untouched = m.add("lunch is at noon on tuesday", user_id="u", embedding=unit(0.0, 1.0),
                          expires_at=clock.now + timedelta(hours=1))
        cid = self._expired(m, clock)
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, NEW_TEXT, expires_at=None),
                           on=DELETES)
        report = m.maintain()
        assert fired, "maintain deleted nothing: the window never opened"
        got = m.get(cid)
        assert (got.content, got.status) == (NEW_TEXT, ChunkStatus.ACTIVE)
        assert not m.backend.contains([untouched])  # the record judged is the record found: deleted
        assert (report.expired, report.deleted) == (1, 1)
        assert [a["action"] for a in m.audit(cid)] == ["deleted", "kept"]  # decided, then found renewed

    # -- the LangGraph store's TTL: sweep() and maintain() ----------------------------------
    def _item_store(self, m: BeeWeave, clock: Clock) -> Any:
        pytest.importorskip("langgraph")
        from beeweave_langchain.store import BeeWeaveStore, item_id

        store = BeeWeaveStore(m)
        store.put(("u", "notes"), "plan", {"text": "monday"}, ttl=1)
        clock.advance(minutes=5)
        return store, item_id(("u", "notes"), "plan")

    def test_sweep_spares_an_item_put_again_before_it_deletes_it(self, engine, clock, monkeypatch) -> None:
        m = engine()
        store, cid = self._item_store(m, clock)
        fired = interleave(monkeypatch, m.backend, cid,
                           lambda: store.put(("u", "notes"), "plan", {"text": "friday"}, ttl=60), on=DELETES)
        assert store.sweep() == 0
        assert fired
        assert store.get(("u", "notes"), "plan").value == {"text": "friday"}

    def test_maintain_spares_an_item_put_again_before_its_ttl_deletes_it(self, engine, clock,
                                                                         monkeypatch) -> None:
        m = engine()
        store, cid = self._item_store(m, clock)
        fired = interleave(monkeypatch, m.backend, cid,
                           lambda: store.put(("u", "notes"), "plan", {"text": "friday"}), on=DELETES)
        m.maintain()
        assert fired
        assert store.get(("u", "notes"), "plan").value == {"text": "friday"}

    # -- maintain: merge ----------------------------------------------------------------------
    def _duplicates(self, m: BeeWeave) -> tuple[str, str]:
        primary = m.add("the meeting is on monday at ten in room four", user_id="u", embedding=unit(1.0, 0.0))
        copy = m.add("meeting monday ten room four", user_id="u", embedding=unit(1.0, 0.01))
        return primary, copy

    def test_merge_keeps_an_edit_of_the_primary(self, engine, monkeypatch) -> None:
        m = engine()
        primary, copy = self._duplicates(m)
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, primary,
                           lambda: other.edit(primary, tags=["edited"], metadata={"note": "kept"}))
        report = m.maintain()
        got = m.get(primary)
        assert fired and report.merged == 1
        assert "edited" in got.tags and got.metadata["note"] == "kept"
        assert [f["id"] for f in got.metadata["merged_from"]] == [copy]

    def test_merge_leaves_a_duplicate_whose_text_changed_meanwhile(self, engine, monkeypatch) -> None:
        m = engine()
        primary, copy = self._duplicates(m)
        other = OtherProcess(m.backend)
        # A new text, embedded anew: no longer anyone's duplicate.
        fired = interleave(monkeypatch, m.backend, copy, lambda: other.edit(copy, NEW_TEXT, vector=unit(0.0, 1.0)))
        report = m.maintain()
        got = m.get(copy)
        assert fired and report.merged == 0
        assert (got.content, got.status) == (NEW_TEXT, ChunkStatus.ACTIVE)
        assert "merged_from" not in m.get(primary).metadata

    # -- tiers: promotion, settling, demotion (decay) -----------------------------------------
    def test_promotion_keeps_an_edit_made_before_it_writes(self, engine, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m, tier="short")
        OtherProcess(m.backend).edit(cid, access_count=10)  # used enough, elsewhere: due for promotion
        report, got = self._maintain_racing_an_edit(m, monkeypatch, cid, tags=["edited"])
        assert report.promoted == 1
        assert (got.tier, got.content, got.tags, got.access_count) == (MemoryTier.LONG, NEW_TEXT, ["edited"], 10)

    def test_settling_keeps_an_edit_made_before_it_writes(self, engine, clock, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m, tier="short")
        clock.advance(hours=25)  # past short_ttl, unpromoted: it settles into long-term
        report, got = self._maintain_racing_an_edit(m, monkeypatch, cid)
        assert report.settled == 1
        assert (got.tier, got.content) == (MemoryTier.LONG, NEW_TEXT)

    def test_demotion_keeps_an_edit_made_before_it_writes(self, engine, clock, monkeypatch) -> None:
        m = engine(tiers=TierConfig(demote_below=0.5))
        cid = self._meeting(m, timestamp=clock.now - timedelta(days=400))  # long-term, cold: its score decayed
        report, got = self._maintain_racing_an_edit(m, monkeypatch, cid)
        assert report.demoted == 1
        assert (got.tier, got.content) == (MemoryTier.SHORT, NEW_TEXT)

    # -- capacity -------------------------------------------------------------------------------
    def test_eviction_spares_a_memory_pinned_before_it_writes(self, engine, clock, monkeypatch) -> None:
        m = engine(capacity=1, capacity_on_insert=False)
        old = self._meeting(m, timestamp=clock.now - timedelta(days=30))
        new = m.add("lunch is at noon on tuesday", user_id="u", embedding=unit(0.0, 1.0))
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, old, lambda: other.edit(old, pinned=True))
        m.maintain()
        assert fired
        assert (m.get(old).status, m.get(old).pinned) == (ChunkStatus.ACTIVE, True)
        assert m.get(new).status is ChunkStatus.ARCHIVED  # the one left to evict

    def test_eviction_spares_a_memory_pinned_before_it_deletes_it(self, engine, clock, monkeypatch) -> None:
        m = engine(capacity=1, capacity_on_insert=False, evict_action="delete")
        old = self._meeting(m, timestamp=clock.now - timedelta(days=30))
        m.add("lunch is at noon on tuesday", user_id="u", embedding=unit(0.0, 1.0))
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, old, lambda: other.edit(old, pinned=True), on=DELETES)
        report = m.maintain()
        assert fired, "maintain deleted nothing: the window never opened"
        assert m.get(old).pinned
        assert (report.evicted, report.deleted) == (0, 0)  # decided, then spared: not counted
        assert [a["action"] for a in m.audit(old)] == ["deleted", "kept"]

    # -- feedback and review --------------------------------------------------------------------
    def test_feedback_that_promotes_keeps_an_edit_made_before_the_promotion(self, engine, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m, tier="short", metadata={"importance": 0.6}, trusted=True)  # 1.2 + one "up" (1.0) reaches 2.0
        other = OtherProcess(m.backend)
        # The first write is the feedback's own; the window is the promotion that follows it.
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, NEW_TEXT), skip=1)
        m.feedback(cid, "up")
        got = m.get(cid)
        assert fired
        assert (got.tier, got.content, got.metadata["feedback"]["up"]) == (MemoryTier.LONG, NEW_TEXT, 1)

    def test_marking_a_conflict_keeps_an_edit_made_before_it_writes(self, engine, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m)
        other_view = m.add("the meeting is on tuesday at ten", user_id="u", embedding=unit(0.0, 1.0))
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, NEW_TEXT))
        group = m.mark_conflict([cid, other_view])
        got = m.get(cid)
        assert fired and (got.content, got.metadata["conflict_group"]) == (NEW_TEXT, group)

    # -- admission: approve and reject ----------------------------------------------------------
    def test_approval_keeps_an_edit_made_before_it_writes(self, engine, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m, status="pending", trusted=True)
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, metadata={"note": "kept"}))
        assert m.approve([cid]) == [cid]
        got = m.get(cid)
        assert fired and got.status is ChunkStatus.ACTIVE
        assert got.metadata["note"] == "kept" and got.metadata["ingest"]["reviewed"]["decision"] == "approved"

    def test_rejection_spares_a_memory_approved_before_it_deletes(self, engine, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m, status="pending", trusted=True)
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, status=ChunkStatus.ACTIVE),
                           on=DELETES)
        assert m.reject([cid]) == []
        assert fired and m.get(cid).status is ChunkStatus.ACTIVE

    def test_review_decision_keeps_an_edit_made_before_it_writes(self, engine, monkeypatch) -> None:
        m = engine()
        cid = self._meeting(m)
        other = OtherProcess(m.backend)
        fired = interleave(monkeypatch, m.backend, cid, lambda: other.edit(cid, NEW_TEXT))
        m.resolve_review(cid, "archive")
        got = m.get(cid)
        assert fired and (got.status, got.content) == (ChunkStatus.ARCHIVED, NEW_TEXT)
