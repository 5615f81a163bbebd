"""``maintain()``: expire, merge duplicates, enforce capacity, in batches that never hold the
write lock for a whole pass. Also used at insert time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..events import EventType
from ..filters import Filter, build_filter
from ..records import ChunkStatus, KnowledgeChunk
from ..scoring import is_expired, ttl_passed
from .base import Forget, LifecycleContext, Outbox, retired
from .config import ForgetAction
from .expiry import Fate, eviction_score, eviction_victims, expiry_fate, rule_expiry
from .history import record_action, record_version
from .merge import dedupable, fold, plan_groups, primary_key, redirect_edges
from .near import NearDuplicates
from .reports import MaintenanceReport
from .review import flag
from .tiers import Tiers

__all__ = ["Maintenance"]


class Maintenance:
    """Expiry, duplicate merging and capacity, over the whole store or one user's memories."""

    def __init__(self, ctx: LifecycleContext, flush_access: Callable[[], object], tiers: Tiers) -> None:
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
                        self._evict(self.ctx.backend.scan_ids(flt), self.ctx.now(), report, box)
                _uncount(box.spared, report)
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
                before.update(self.tiers.demote_due(list(before), self.ctx.now(), report, box))
        now = self.ctx.now()
        due = [cid for cid, c in before.items()
               if is_expired(c, now) or ttl_passed(c, now) or rule_expiry(c, cfg.expiry_rules) is not None]
        if due:
            with self.ctx.changes() as box:
                now = self.ctx.now()
                gone.update(self._expire(due, now, report, box))
            _uncount(box.spared, report)
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
            merged = self._merge(primary, members, now, box)
            report.merged += len(merged)
            if merged:
                report.merges.setdefault(primary.id, []).extend(merged)
            gone.update(merged)

    # -- expiry ------------------------------------------------------------------------------
    def _expire(self, ids: list[str], now: datetime, report: MaintenanceReport, box: Outbox) -> set[str]:
        """Expiry rules, then each memory's fate, judged on the records as the write reads them
        (``modify``): an edit another process made since the batch was read (a new text, an
        expiry lifted) is what is judged, and kept; a memory deleted meanwhile is not there.
        Returns the ids archived or to delete."""
        cfg = self.ctx.config
        judged: list[tuple[KnowledgeChunk, str | None, Fate]] = []  # (record, expiry rule applied, fate)

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            judged.clear()
            out = []
            for c in current.values():
                if c.status is not ChunkStatus.ACTIVE:
                    continue
                found = rule_expiry(c, cfg.expiry_rules)
                if found is not None:
                    c = c.copy(expires_at=found[0], metadata=dict(c.metadata, expiry_rule=found[1]), relationships=[])
                fate = expiry_fate(c, now, cfg, self.ctx.shared.scoring)
                judged.append((c, None if found is None else found[1], fate))
                if fate is Fate.ARCHIVE:
                    out.append(retired(c, ChunkStatus.ARCHIVED, "expired", now))
                elif found is not None:
                    out.append(c)
            return out

        self.ctx.backend.modify(ids, change)
        forgotten: set[str] = set()
        for c, rule, fate in judged:
            if rule is not None:
                report.ruled += 1
                box.emit(EventType.UPDATED, c, fields=["expires_at", "metadata"], expiry_rule=rule)
            if fate is Fate.REVIEW:
                if flag(self.ctx.backend, c, "expired", now):
                    report.flagged += 1
                    box.emit(EventType.EXPIRED, c, action="review")
            elif fate is not Fate.KEEP:
                report.expired += 1
                forgotten.add(c.id)
                self._forget(c, "expired", fate, now, report, box,
                             ((EventType.EXPIRED, {"action": "archived" if fate is Fate.ARCHIVE else "deleted"}),))
        return forgotten

    def _forget(self, c: KnowledgeChunk, reason: str, fate: Fate, now: datetime, report: MaintenanceReport,
                box: Outbox, events: tuple[tuple[EventType, dict[str, Any]], ...]) -> None:
        """Count, audit and announce ``c`` leaving: archived (already written), or deleted after
        the lock is released if it is still the record judged (``Forget``)."""
        if fate is Fate.ARCHIVE:
            report.archived += 1
            record_action(self.ctx.backend, c, "archived", reason, now)
            for type_, data in events:
                box.emit(type_, c, **data)
        else:
            report.deleted += 1
            record_action(self.ctx.backend, c, "deleted", reason, now)
            box.forget.append(Forget(c, reason, now, events))

    # -- capacity ----------------------------------------------------------------------------
    def _evict(self, ids: Sequence[str], now: datetime, report: MaintenanceReport, box: Outbox) -> None:
        """Users above capacity lose their lowest-scoring memories, chosen among the records
        as the write reads them: one another process used or pinned meanwhile is judged so."""
        cfg = self.ctx.config
        assert cfg.capacity is not None
        capacity = cfg.capacity
        fate = Fate.ARCHIVE if cfg.evict_action is ForgetAction.ARCHIVE else Fate.DELETE
        victims: list[KnowledgeChunk] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            by_user: dict[str, list[KnowledgeChunk]] = {}
            for c in current.values():
                if c.status is ChunkStatus.ACTIVE:
                    by_user.setdefault(c.user_id, []).append(c)
            victims[:] = [v for chunks in by_user.values() for v in eviction_victims(chunks, capacity, now, cfg)]
            if fate is Fate.DELETE:
                return []
            return [retired(v, ChunkStatus.ARCHIVED, "evicted", now) for v in victims]

        self.ctx.backend.modify(ids, change)
        for v in victims:
            report.evicted += 1
            events: tuple[tuple[EventType, dict[str, Any]], ...] = ()
            if fate is Fate.ARCHIVE:
                events = ((EventType.UPDATED, {"fields": ["status"], "reason": "evicted",
                                               "eviction_score": eviction_score(v, now, cfg)}),)
            self._forget(v, "evicted", fate, now, report, box, events)

    def enforce_capacity(self, users: Iterable[str]) -> None:
        cap = self.ctx.config.capacity
        assert cap is not None
        with self.ctx.changes() as box:
            now = self.ctx.now()
            report = MaintenanceReport()
            for u in sorted(set(users)):
                flt = build_filter(None, user_id=u)
                if self.ctx.backend.count(flt) > cap:
                    self._evict(self.ctx.backend.scan_ids(flt), now, report, box)

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
            near.preload([c for c in chunks if dedupable(c)])
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
               box: Outbox) -> list[str]:
        """Fold ``members`` into ``primary``; mark them merged; move their relationships;
        return the ids merged.

        The primary's state before the merge goes to its version history, and each merged
        memory stays in the store (status "merged", ``metadata["merged_into"]``) with a
        ``merged_into`` edge to the primary. The fold is judged again on the records as the
        write reads them (``modify``): it starts from the primary as it is then (another
        process's edit of it is kept), a member that is no longer an active duplicate with the
        text its similarity was measured on stays as it is, and nothing is merged if the
        primary is no longer such a duplicate.
        """
        sims = {m.id: sim for m, sim in members}
        read = {c.id: c for c in (primary, *(m for m, _ in members))}
        # Before the write (a crash in between leaves a spare version, never a lost one); the
        # primary's text cannot have changed by the write: the merge is off if it did.
        record_version(self.ctx.backend, primary, "merge", now)
        folded: list[KnowledgeChunk] = []  # the new primary, then the members merged as they were
        merged: list[KnowledgeChunk] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            folded.clear()
            merged.clear()
            p = current.get(primary.id)
            if p is None or not _still_duplicate(p, read[p.id], now):
                return []
            others = [current[m] for m in sims
                      if m in current and _still_duplicate(current[m], read[m], now) and not current[m].pinned]
            if not others:
                return []
            folded[:] = [fold(p, others, now, self.ctx.shared.scoring), *others]
            merged[:] = [retired(o, ChunkStatus.MERGED, "duplicate", now, merged_into=primary.id,
                                 merged_at=now.isoformat()) for o in others]
            return [folded[0], *merged]

        self.ctx.backend.modify([primary.id, *sims], change)
        if not folded:
            return []
        new_primary, others = folded[0], folded[1:]
        sims = {o.id: sims[o.id] for o in others}
        delete, add = redirect_edges(self.ctx.backend.edges(list(sims)), sims, primary.id, self.ctx.backend.edges([primary.id]))
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
        return [o.id for o in others]


def _still_duplicate(found: KnowledgeChunk, read: KnowledgeChunk, now: datetime) -> bool:
    """Whether a memory judged a duplicate on an earlier read (``read``) still is one as the
    write finds it: active, mergeable, and saying what its similarity was measured on."""
    return (found.status is ChunkStatus.ACTIVE and dedupable(found) and not is_expired(found, now)
            and found.content == read.content)


def _uncount(spared: Sequence[Forget], report: MaintenanceReport) -> None:
    """Deletions not done (``Forget``: another writer changed the memory first) leave the report."""
    for f in spared:
        report.deleted -= 1
        if f.reason == "expired":
            report.expired -= 1
        elif f.reason == "evicted":
            report.evicted -= 1

