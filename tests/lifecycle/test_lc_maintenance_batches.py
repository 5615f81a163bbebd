"""Maintenance in batches: the same outcome as one pass, the write lock released between
batches, expiry rules applied again, and the background schedule."""

from __future__ import annotations

import random
import threading
from datetime import timedelta

import numpy as np

from beeweave_core import BeeWeave, ChunkStatus, ExpiryRule, HashingEmbedder, LifecycleConfig
from beeweave_core.filters import build_filter
from beeweave_core.lifecycle.merge import dedupable
from tests.lifecycle.lifecycle_support import DIM, START, Clock


class CountingLock:
    """The write lock, counting how often it is taken from the outside (depth 0)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.depth = 0
        self.taken = 0

    def acquire(self, *a, **kw):
        got = self._lock.acquire(*a, **kw)
        if got:
            self.depth += 1
            self.taken += self.depth == 1
        return got

    def release(self) -> None:
        self.depth -= 1
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


def _world(m: BeeWeave, n: int, seed: int) -> dict[str, np.ndarray]:
    """n memories of 3 users in tight clusters (duplicates) and loners."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n // 4, DIM))
    vecs = {}
    rnd = random.Random(seed)
    for i in range(n):
        v = centres[rnd.randrange(len(centres))] + rng.standard_normal(DIM) * (0.05 if i % 2 else 2.0)
        v /= np.linalg.norm(v)
        cid = m.add(f"memory {i}", user_id=f"u{i % 3}", chunk_id=f"c{i:04d}", embedding=v.tolist())
        vecs[cid] = v
    return vecs


def _outcome(m: BeeWeave) -> dict[str, str]:
    flt = build_filter({"status": [s.value for s in ChunkStatus]})
    return {c.id: c.status.value for c in m.backend.scan(flt)}


def _reference_merged(m: BeeWeave, vecs: dict[str, np.ndarray], threshold: float) -> None:
    """Every active memory left has no active duplicate of its user: the obvious all-pairs check."""
    active = [c for c in m.backend.scan(build_filter(None)) if dedupable(c)]
    for a in active:
        for b in active:
            if a.id < b.id and a.user_id == b.user_id:
                assert float(vecs[a.id] @ vecs[b.id]) < threshold, (a.id, b.id)


def test_batches_leave_no_duplicates_and_release_the_lock_between_them():
    clock = Clock()
    for batch in (1, 7, 1000):
        cfg = LifecycleConfig(maintenance_batch=batch, merge_candidates=40, access_flush_interval=0.0)
        with BeeWeave(embedder=HashingEmbedder(DIM), clock=clock, lifecycle=cfg) as m:
            vecs = _world(m, 120, seed=3)
            lock = CountingLock()
            m.parts.shared.write_lock = lock  # type: ignore[assignment]
            inner = m.parts.lifecycle.maintenance._batch
            free = []

            def watched(ids, report, gone, inner=inner, lock=lock, free=free):
                free.append(lock.depth == 0)
                return inner(ids, report, gone)

            m.parts.lifecycle.maintenance._batch = watched  # type: ignore[method-assign]
            report = m.maintain()
            assert report.merged > 10
            assert len(free) == -(-120 // batch) and all(free)  # the lock is free at every batch start
            _reference_merged(m, vecs, cfg.merge_threshold)
            merged = {c for c, s in _outcome(m).items() if s == "merged"}
            assert merged == {i for ids in report.merges.values() for i in ids}
            assert lock.taken >= len(report.merges)  # one hold per duplicate group, never one for the pass


def test_writes_go_on_while_a_pass_runs():
    clock = Clock()
    cfg = LifecycleConfig(maintenance_batch=4, access_flush_interval=0.0)
    with BeeWeave(embedder=HashingEmbedder(DIM), clock=clock, lifecycle=cfg) as m:
        _world(m, 80, seed=5)
        target = m.add("a note", user_id="u0", embedding=np.eye(DIM)[0].tolist())
        batches = []
        inner = m.parts.lifecycle.maintenance._batch

        def batch_then_write(ids, report, gone):
            out = inner(ids, report, gone)
            if not batches:  # between the first and second batch, another writer gets in
                t = threading.Thread(target=lambda: m.feedback(target, "up"))
                t.start()
                t.join(timeout=30)
                batches.append(t.is_alive())
            return out

        m.parts.lifecycle.maintenance._batch = batch_then_write  # type: ignore[method-assign]
        m.maintain()
        assert batches == [False] and m.get(target).weight > 1.0


def test_expiry_rules_are_applied_again_in_maintenance(tmp_path):
    """A store reopened with a rule it did not have when the memory was stored."""
    clock = Clock()
    db = tmp_path / "m.db"
    with BeeWeave(db, embedder=HashingEmbedder(DIM), clock=clock) as m:
        cid = m.add("forecast for Lyon: sunny", user_id="u", tags=["forecast"], timestamp=START)
        keep = m.add("Lyon is in France", user_id="u", timestamp=START)
        assert m.get(cid).expires_at is None  # no rule knew "forecast" at insert
    clock.advance(hours=1)
    rule = ExpiryRule("forecast", timedelta(hours=6), tags=("forecast",))
    cfg = LifecycleConfig(expiry_rules=(rule,), access_flush_interval=0.0)
    with BeeWeave(db, embedder=HashingEmbedder(DIM), clock=clock, lifecycle=cfg) as m:
        report = m.maintain()
        assert report.ruled == 1 and report.expired == 0
        assert m.get(cid).expires_at == START + timedelta(hours=6)
        assert m.get(cid).metadata["expiry_rule"] == "forecast"
        clock.advance(hours=6)
        report = m.maintain()
        assert (report.ruled, report.expired) == (0, 1)
        assert m.get(cid).status is ChunkStatus.ARCHIVED and m.get(keep).status is ChunkStatus.ACTIVE


def test_the_background_schedule_runs_and_stops_on_close():
    clock = Clock()
    cfg = LifecycleConfig(access_flush_interval=0.0)
    m = BeeWeave(embedder=HashingEmbedder(DIM), clock=clock, lifecycle=cfg)
    a = m.add("dark mode please", user_id="u", embedding=np.eye(DIM)[0].tolist())
    b = m.add("dark mode, please", user_id="u", embedding=np.eye(DIM)[0].tolist())
    schedule = m.maintain(interval=0.01)
    assert schedule.wait_runs(2, timeout=30) and schedule.running
    assert {m.get(a).status, m.get(b).status} == {ChunkStatus.ACTIVE, ChunkStatus.MERGED}
    assert schedule.errors == 0 and schedule.last_report is not None
    m.close()
    assert not schedule.running
