"""``maintain()``: expire, merge duplicates, enforce capacity, in batches that never hold the
write lock for a whole pass. Also used at insert time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import numpy as np

from ..errors import InvalidInputError
from ..events import EventType
from ..filters import Filter, build_filter
from ..records import ChunkStatus, KnowledgeChunk
from ..scoring import effective_weight, is_expired, ttl_passed
from .base import LifecycleContext, Outbox, retired
from .config import ForgetAction
from .expiry import eviction_score, eviction_victims, rule_expiry
from .history import record_action, record_version
from .merge import dedupable, fold, plan_groups, primary_key, redirect_edges
from .near import NearDuplicates
from .reports import MaintenanceReport
from .review import flag
from .tiers import Tiers

__all__ = ["Maintenance"]


class Maintenance:
    """Expiry, duplicate merging and capacity, over the whole store or one user's memories."""

    def __init__(self, ctx: LifecycleContext, flush_access: Callable[[], None], tiers: Tiers) -> None:
        self.ctx = ctx
        self._flush_access = flush_access
        self.tiers = tiers
        self.stopping = threading.Event()  # set on close: a running pass stops between batches

    def maintain(self, *, user_id: str | None = None) -> MaintenanceReport:
        """Run the lifecycle over active memories (of one user, or all) and report what changed.

        First working/short-term memories whose promotion score is due move to the
        long-term tier (and cold long-term ones go back to short-term, when
        ``TierConfig.demote_below`` is set). Then, for each memory: (1) expiry rules are applied again (a rule added since it was
        stored applies now); (2) an expired memory is archived or deleted
        (``expired_action``), or put in the review queue when its effective weight is at
        least ``review_weight``; (3) its near-duplicates of the same user (cosine ≥
        ``merge_threshold`` among its ``merge_candidates`` nearest neighbours in the
        vector index) are merged into the best of the group. Then (4) users above
        ``capacity`` lose their lowest-scoring memories. Pinned memories never expire and
        are never evicted or merged away. Decay needs no run: effective weights are
        computed from timestamps whenever they are read.

        The work goes in batches of ``maintenance_batch`` memories: neighbours are found
        without any lock, and the write lock is held only while one batch is re-read and
        written, so searches and writes proceed throughout. A memory changed meanwhile is
        judged on its state when its batch is written.
        """
        if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):
            raise InvalidInputError("user_id must be a non-empty string")
        self._flush_access()  # eviction reads access counts
        report = MaintenanceReport()
        self.tiers.promote_due(user_id=user_id, report=report)  # promoted memories do not expire below
        scope = build_filter(None, user_id=user_id)
        ids = self.ctx.backend.scan_ids(scope)
        size = self.ctx.config.maintenance_batch
        gone: set[str] = set()
        users: set[str] = set()
        for start in range(0, len(ids), size):
            if self.stopping.is_set():  # the store is closing: the rest waits for the next run
                return report
            batch = [i for i in ids[start:start + size] if i not in gone]
            users.update(self._batch(batch, report, gone))
        if self.ctx.config.capacity is not None:
            for u in sorted(users):
                if self.stopping.is_set():
                    break
                with self.ctx.changes() as box:
                    flt = build_filter(None, user_id=u)
                    if self.ctx.backend.count(flt) > self.ctx.config.capacity:
                        self._evict(list(self.ctx.backend.scan(flt)), self.ctx.now(), report, box)
        return report

    def _batch(self, ids: list[str], report: MaintenanceReport, gone: set[str]) -> set[str]:
        """One batch, read without the lock; the lock is taken only to change something: once
        for the batch's expiries, once per duplicate group, each re-read before it is judged
        and written. Returns the users seen."""
        cfg = self.ctx.config
        backend = self.ctx.backend
        before = {cid: c for cid, c in backend.get(ids).items() if c.status is ChunkStatus.ACTIVE}
        if self.tiers.config.demote_below is not None and before:
            with self.ctx.changes() as box:
                fresh = [c for c in backend.get(list(before)).values() if c.status is ChunkStatus.ACTIVE]
                before.update((c.id, c) for c in self.tiers.demote_due(fresh, self.ctx.now(), report, box))
        now = self.ctx.now()
        due = [cid for cid, c in before.items()
               if is_expired(c, now) or ttl_passed(c, now) or rule_expiry(c, cfg.expiry_rules) is not None]
        if due:
            with self.ctx.changes() as box:
                now = self.ctx.now()
                fresh = [c for c in backend.get(due).values() if c.status is ChunkStatus.ACTIVE]
                fresh = self._rule_expiry(fresh, report, box)
                kept = {c.id for c in self._expire(fresh, now, report, box)}
                gone.update(c.id for c in fresh if c.id not in kept)
        live = [c for cid, c in before.items() if cid not in gone and dedupable(c) and not is_expired(c, now)]
        vectors = backend.get_vectors([c.id for c in live])
        scopes: dict[str, Filter] = {}
        for c in live:
            vec = vectors.get(c.id)
            if vec is None or c.id in gone:
                continue
            flt = scopes.get(c.user_id) or scopes.setdefault(c.user_id, build_filter(None, user_id=c.user_id))
            near = [(o, float(sim)) for o, sim in backend.vector_search(vec, flt, cfg.merge_candidates + 1)
                    if o != c.id and o not in gone and sim >= cfg.merge_threshold]
            if not near:
                continue
            with self.ctx.changes() as box:
                now = self.ctx.now()
                fresh = backend.get([c.id]).get(c.id)
                if fresh is not None and fresh.status is ChunkStatus.ACTIVE and not is_expired(fresh, now):
                    self._dedup_one(fresh, near, now, report, box, gone)
        return {c.user_id for c in before.values()}

    def _rule_expiry(self, chunks: list[KnowledgeChunk], report: MaintenanceReport,
                     box: Outbox) -> list[KnowledgeChunk]:
        out, changed = [], []
        for c in chunks:
            found = rule_expiry(c, self.ctx.config.expiry_rules)
            if found is not None:
                c = c.copy(expires_at=found[0], metadata=dict(c.metadata, expiry_rule=found[1]), relationships=[])
                changed.append(c)
                box.emit(EventType.UPDATED, c, fields=["expires_at", "metadata"], expiry_rule=found[1])
            out.append(c)
        if changed:
            self.ctx.backend.update(changed)
            report.ruled += len(changed)
        return out

    def _dedup_one(self, c: KnowledgeChunk, near: list[tuple[str, float]], now: datetime,
                   report: MaintenanceReport, box: Outbox, gone: set[str]) -> None:
        """Merge ``c`` with the neighbours found for it that are still active duplicates."""
        others = [g for g in self.ctx.backend.get([o for o, _ in near if o not in gone]).values()
                  if g.status is ChunkStatus.ACTIVE and dedupable(g) and not is_expired(g, now)]
        if not others:
            return
        group = [c, *others]
        vecs = self.ctx.backend.get_vectors([g.id for g in group])
        ordered = sorted((g for g in group if g.id in vecs), key=lambda g: primary_key(g, now, self.ctx.shared.scoring))

        def neighbours(p: KnowledgeChunk) -> list[tuple[str, float]]:
            return [(g.id, float(np.dot(vecs[p.id], vecs[g.id]))) for g in ordered if g.id != p.id]

        for primary, members in plan_groups(ordered, neighbours, self.ctx.config.merge_threshold):
            self._merge(primary, members, now, box)
            report.merged += len(members)
            report.merges.setdefault(primary.id, []).extend(m.id for m, _ in members)
            gone.update(m.id for m, _ in members)

    # -- expiry ------------------------------------------------------------------------------
    def _expire(self, active: list[KnowledgeChunk], now: datetime, report: MaintenanceReport,
                box: Outbox) -> list[KnowledgeChunk]:
        cfg = self.ctx.config
        keep: list[KnowledgeChunk] = []
        archive: list[KnowledgeChunk] = []
        for c in active:
            if ttl_passed(c, now):  # an item's TTL: deleted, whatever its weight
                report.expired += 1
                self._forget(c, "expired", ForgetAction.DELETE, now, report, archive, box)
                box.emit(EventType.EXPIRED, c, action="deleted")
            elif not is_expired(c, now):
                keep.append(c)
            elif effective_weight(c, now, self.ctx.shared.scoring) >= cfg.review_weight:
                keep.append(c)  # valued: a person decides
                if flag(self.ctx.backend, c, "expired", now):
                    report.flagged += 1
                    box.emit(EventType.EXPIRED, c, action="review")
            else:
                report.expired += 1
                self._forget(c, "expired", cfg.expired_action, now, report, archive, box)
                box.emit(EventType.EXPIRED, c, action="archived" if cfg.expired_action is ForgetAction.ARCHIVE
                         else "deleted")
        self.ctx.backend.update(archive)
        return keep

    def _forget(self, c: KnowledgeChunk, reason: str, action: ForgetAction, now: datetime,
                report: MaintenanceReport, archive: list[KnowledgeChunk], box: Outbox) -> None:
        if action is ForgetAction.ARCHIVE:
            archive.append(retired(c, ChunkStatus.ARCHIVED, reason, now))
            report.archived += 1
            record_action(self.ctx.backend, c, "archived", reason, now)
        else:
            box.delete.append(c.id)
            report.deleted += 1
            record_action(self.ctx.backend, c, "deleted", reason, now)

    # -- capacity ----------------------------------------------------------------------------
    def _evict(self, active: Sequence[KnowledgeChunk], now: datetime, report: MaintenanceReport,
               box: Outbox) -> None:
        cfg = self.ctx.config
        assert cfg.capacity is not None
        by_user: dict[str, list[KnowledgeChunk]] = {}
        for c in active:
            by_user.setdefault(c.user_id, []).append(c)
        archive: list[KnowledgeChunk] = []
        for chunks in by_user.values():
            for v in eviction_victims(chunks, cfg.capacity, now, cfg):
                report.evicted += 1
                self._forget(v, "evicted", cfg.evict_action, now, report, archive, box)
                if cfg.evict_action is ForgetAction.ARCHIVE:
                    box.emit(EventType.UPDATED, v, fields=["status"], reason="evicted",
                             eviction_score=eviction_score(v, now, cfg))
        self.ctx.backend.update(archive)

    def enforce_capacity(self, users: Iterable[str]) -> None:
        cap = self.ctx.config.capacity
        assert cap is not None
        with self.ctx.changes() as box:
            now = self.ctx.now()
            report = MaintenanceReport()
            for u in sorted(set(users)):
                flt = build_filter(None, user_id=u)
                if self.ctx.backend.count(flt) > cap:
                    self._evict(list(self.ctx.backend.scan(flt)), now, report, box)

    # -- dedup and merge ---------------------------------------------------------------------
    def merge_new(self, chunks: Sequence[KnowledgeChunk], *, same_words: float | None = None) -> None:
        """Merge freshly added memories with their duplicates (``merge_on_insert``). With
        ``same_words``, a duplicate must also share that fraction of its words (Jaccard of
        the index terms): vectors alone call "turn the lights on" and "... off" duplicates.
        Each memory looks at its nearest neighbours only (:class:`NearDuplicates`: linear in
        the batch, and a batch of many copies still folds into one primary)."""
        cfg = self.ctx.config
        near = NearDuplicates(self.ctx.backend, self.ctx.shared.tokenizer, candidates=cfg.merge_candidates,
                              threshold=cfg.merge_threshold, same_words=same_words, limit=len(chunks) + 1)
        with self.ctx.changes() as box:
            now = self.ctx.now()
            near.preload([c.id for c in chunks if dedupable(c)])
            done: set[str] = set()
            for c in chunks:
                if c.id in done or not dedupable(c):
                    continue
                vec = near.vector(c.id)
                if vec is None:
                    continue
                group = near.group(c, vec, done)
                if len(group) < 2 or c.id not in {g.id for g in group}:
                    continue
                vecs = near.vectors([g.id for g in group])
                ordered = sorted(group, key=lambda g: primary_key(g, now, self.ctx.shared.scoring))

                def neighbours(p: KnowledgeChunk, vecs: dict[str, np.ndarray] = vecs,
                               ordered: list[KnowledgeChunk] = ordered) -> list[tuple[str, float]]:
                    return [(g.id, float(np.dot(vecs[p.id], vecs[g.id]))) for g in ordered if g.id in vecs]

                for primary, members in plan_groups(ordered, neighbours, cfg.merge_threshold):
                    self._merge(primary, members, now, box)
                    done.update(m.id for m, _ in members)
                    done.add(primary.id)

    def _merge(self, primary: KnowledgeChunk, members: Sequence[tuple[KnowledgeChunk, float]], now: datetime,
               box: Outbox) -> None:
        """Fold ``members`` into ``primary``; mark them merged; move their relationships.

        The primary's state before the merge goes to its version history, and each merged
        memory stays in the store (status "merged", ``metadata["merged_into"]``) with a
        ``merged_into`` edge to the primary.
        """
        others = [m for m, _ in members]
        sims = {m.id: sim for m, sim in members}
        record_version(self.ctx.backend, primary, "merge", now)
        new_primary = fold(primary, others, now, self.ctx.shared.scoring)
        merged = [retired(o, ChunkStatus.MERGED, "duplicate", now, merged_into=primary.id, merged_at=now.isoformat())
                  for o in others]
        delete, add = redirect_edges(self.ctx.backend.edges(list(sims)), sims, primary.id, self.ctx.backend.edges([primary.id]))
        self.ctx.backend.update([new_primary, *merged])
        self.ctx.backend.add_edges(add)  # first add, then delete: a crash in between duplicates, never loses
        self.ctx.backend.delete_edges(delete)
        for o in others:
            record_action(self.ctx.backend, o, "merged", "duplicate", now, into=primary.id, similarity=round(sims[o.id], 6),
                          moved_edges=[e.to_dict() for e in delete if o.id in (e.source_id, e.target_id)])
        box.emit(EventType.UPDATED, new_primary, fields=["access_count", "confidence", "entities", "expires_at",
                                                         "metadata", "summary", "tags", "weight"],
                 reason="merge", merged=[o.id for o in others])
        for o in merged:
            box.emit(EventType.MERGED, o, into=primary.id, similarity=round(sims[o.id], 6))
