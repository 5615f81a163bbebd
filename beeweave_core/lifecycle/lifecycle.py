"""The lifecycle part: feedback, access tracking, review, and the rules that run when
memories are stored; it holds the maintenance and facts parts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError, NotFoundError
from ..events import EventType
from ..records import ChunkStatus, KnowledgeChunk, SearchHit
from ..relevance import counts_as_use, default_gate
from ..scoring import effective_weight as _effective_weight
from ..scoring import is_expired
from ..validation import id_list
from .access import AccessRecorder, Pending
from .base import LifecycleContext, changed_fields, retired
from .config import FeedbackSignal, MergeOnInsert, ReviewDecision
from .conflicts import order_conflicts
from .expiry import inherited_expiry, rule_expiry
from .facts import Facts
from .feedback import FEEDBACK_KEY, STALE_KEY, apply_feedback
from .history import forget_versions, read_actions, record_action
from .maintenance import Maintenance
from .provenance import Provenance
from .reports import ReviewItem
from .review import flag, read_queue, unflag
from .schedule import MaintenanceSchedule
from .sessions import Sessions
from .tiers import Tiers
from .timeline import stated_fact
from .validity import CodeValidity, verified

__all__ = ["Lifecycle"]


class Lifecycle:
    """A memory that lives: feedback reinforces, time decays, duplicates merge, old news expires.

    Configured by ``BeeWeave(..., lifecycle=LifecycleConfig(...))``. Its parts:
    ``maintenance`` (expire, merge, evict) and ``facts`` (facts, opinions, conflicts).
    """

    def __init__(self, ctx: LifecycleContext, redact: Callable[[str], str] | None = None) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.access = AccessRecorder(self._write_access, batch=cfg.access_batch,
                                     interval=cfg.access_flush_interval, write_lock=ctx.shared.write_lock)
        self.tiers = Tiers(ctx, self.access.waiting)
        self.maintenance = Maintenance(ctx, self.access.flush, self.tiers)
        self.schedule = MaintenanceSchedule(lambda user_id: self.maintenance.maintain(user_id=user_id))
        self.facts = Facts(ctx)
        self.sessions = Sessions(ctx, redact)  # working memory: session buffers and their summaries
        self.provenance = Provenance(ctx)
        self.validity = CodeValidity(ctx)

    # -- feedback ----------------------------------------------------------------------------
    def feedback(self, chunk_ids: str | Iterable[str], signal: FeedbackSignal | str, *,
                 once: Callable[[KnowledgeChunk], KnowledgeChunk | None] | None = None) -> list[KnowledgeChunk]:
        """Tell the memory how its memories did: "used", "up" or "down"; return them updated.

        The signal's delta (``LifecycleConfig``) is added to the effective weight and the
        decay restarts from now; ``used`` also counts as an access. After ``stale_after``
        ``down`` signals in a row a memory is marked stale (ranked down) and put in the
        review queue; ``up`` clears that. Unknown ids raise ``NotFoundError`` and change
        nothing.

        ``once`` makes a rating land at most once (the ingest worker's rating of an event's
        memories, which a retried batch repeats): called on each memory as read inside the
        write, it returns the memory marked as rated, and the signal applies to that in the
        same write, or None to leave the memory as it is. With ``once``, unknown ids are
        skipped (a memory deleted meanwhile has nothing to rate); only changed memories are
        returned.
        """
        try:
            sig = FeedbackSignal(signal)
        except ValueError:
            raise InvalidInputError(f"signal must be one of used, up, down; got {signal!r}") from None
        ids = id_list(chunk_ids)
        if not ids:
            return []
        found: dict[str, KnowledgeChunk] = {}
        new: list[KnowledgeChunk] = []
        when: list[datetime] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            missing = [i for i in ids if i not in current]
            if missing and once is None:
                raise NotFoundError(f"no chunk with id {missing[0]!r}")
            when.append(self.ctx.now())  # read while the records are held: feedback applies in time order
            found.update(current)
            targets = [current[i] for i in ids if i in current]
            if once is not None:  # marked in the write that rates it: a repeated call finds the mark
                targets = [m for m in map(once, targets) if m is not None]
            new[:] = [apply_feedback(c, sig, when[0], self.ctx.config, self.ctx.shared.scoring) for c in targets]
            return new

        with self.ctx.changes() as box:
            # Read and written in one step of the backend: a feedback, access or update that
            # another thread or process writes meanwhile is read here, never overwritten.
            self.ctx.backend.modify(ids, change)
            for c in new:
                was_stale = bool(found[c.id].metadata.get(STALE_KEY))
                if c.metadata.get(STALE_KEY) and not was_stale:
                    flag(self.ctx.backend, c, "stale", when[0])
                elif was_stale and not c.metadata.get(STALE_KEY):
                    unflag(self.ctx.backend, c.id, "stale")
                box.emit(EventType.UPDATED, c, fields=changed_fields(found[c.id], c), feedback=sig.value)
        if once is not None:
            ids = [c.id for c in new]
            if not ids:
                return []
        self.tiers.after_feedback(ids)  # praise or use may lift a short-term memory to long-term
        return self.ctx.records.get_many(ids)

    def effective_weight(self, chunk_id: str) -> float:
        """A memory's weight now: its earned part decayed since the last feedback (pinned: as set)."""
        return _effective_weight(self.ctx.records.get(chunk_id), self.ctx.now(), self.ctx.shared.scoring)

    # -- review ------------------------------------------------------------------------------
    def review_queue(self, *, user_id: str | None = None) -> list[ReviewItem]:
        """Memories flagged for a decision (stale, or expired but valued), oldest flag first."""
        return read_queue(self.ctx.backend, user_id)

    def resolve_review(self, chunk_id: str, decision: ReviewDecision | str) -> KnowledgeChunk | None:
        """Decide on a flagged memory: "keep" (clear stale and a passed expiry), "archive" or
        "delete". Returns the memory (None once deleted) and takes it out of the queue."""
        try:
            choice = ReviewDecision(decision)
        except ValueError:
            raise InvalidInputError(f"decision must be keep, archive or delete; got {decision!r}") from None
        with self.ctx.changes() as box:
            c = self.ctx.records.get(chunk_id)
            now = self.ctx.now()
            if choice is ReviewDecision.DELETE:
                record_action(self.ctx.backend, c, "deleted", "review", now)
                box.delete.append(c.id)
            else:
                decided: list[KnowledgeChunk] = []  # (as the write found it, as written)

                def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
                    # The decision applies to the memory as the write reads it: an edit another
                    # process made since it was read above is kept.
                    found = current.get(chunk_id)
                    if found is None:
                        raise NotFoundError(f"no chunk with id {chunk_id!r} (deleted meanwhile)")
                    if choice is ReviewDecision.ARCHIVE:
                        new = retired(found, ChunkStatus.ARCHIVED, "review", now)
                    else:
                        md = dict(found.metadata, **{FEEDBACK_KEY: dict(found.metadata.get(FEEDBACK_KEY) or {},
                                                                        down_streak=0)})
                        md.pop(STALE_KEY, None)
                        new = verified(found.copy(metadata=md, relationships=[],
                                                  expires_at=None if is_expired(found, now) else found.expires_at))
                    decided[:] = [found, new]
                    return [new]

                self.ctx.backend.modify([chunk_id], change)
                if choice is ReviewDecision.ARCHIVE:
                    record_action(self.ctx.backend, decided[0], "archived", "review", now)
                box.emit(EventType.UPDATED, decided[1], fields=changed_fields(decided[0], decided[1]),
                         review=choice.value)
            unflag(self.ctx.backend, c.id)
        return None if choice is ReviewDecision.DELETE else self.ctx.records.get(chunk_id)

    def audit(self, chunk_id: str | None = None) -> list[dict[str, Any]]:
        """What the lifecycle did (merged, archived, deleted) and why, oldest first."""
        return read_actions(self.ctx.backend, chunk_id)

    # -- hooks -------------------------------------------------------------------------------
    def on_search(self, hits: list[SearchHit], now: datetime) -> None:
        """Conflicting memories side by side in confidence order; accesses recorded for the
        hits that reach the store's gate (not on a store opened read-only, e.g. on a replica:
        it writes nothing, so a use there neither counts nor promotes)."""
        order_conflicts(hits)
        if self.ctx.backend.capabilities.read_only:
            return
        # Only uses that count: a hit below the store's gate (returned beside a relevant one, or
        # by a search with the gate off) was not what the question was about. What an answer
        # drew on is rated by attribution (feedback), not here.
        shared = self.ctx.shared
        gate = default_gate(shared.config.abstain_below, shared.embedder.name)
        used = [h for h in hits if counts_as_use(h.relevance, gate)]
        # Promotion first, then the record: the recorder may write this hit at once (batch full,
        # interval 0), and the tiers count it as the one extra use, never twice.
        self.tiers.on_search(used)
        self.access.record((h.id for h in used), now)

    def _write_access(self, pending: Pending) -> None:
        with self.ctx.shared.write_lock:
            self.ctx.backend.record_access(pending)  # memories deleted meanwhile are skipped

    def on_insert(self, chunks: list[KnowledgeChunk], link: bool) -> None:
        """Expiry rules, merge-on-insert and capacity for freshly stored memories."""
        self._apply_expiry_rules(chunks)  # a rule's expiry (today's weather) wins over a tier's TTL
        self.tiers.on_insert(chunks)
        cfg = self.ctx.config
        if cfg.merge_on_insert is MergeOnInsert.ALL:
            self.maintenance.merge_new(chunks)
        elif cfg.merge_on_insert is MergeOnInsert.INGESTED:
            ingested = [c for c in chunks if isinstance(c.metadata.get("ingest"), dict)
                        and c.metadata["ingest"].get("role") in ("turn", "tool")]
            if ingested:
                self.maintenance.merge_new(ingested, same_words=0.8)
        if cfg.capacity is not None and cfg.capacity_on_insert:
            self.maintenance.enforce_capacity(c.user_id for c in chunks)

    def on_delete(self, before: dict[str, KnowledgeChunk], gone: list[str]) -> None:
        """Deleted memories take their earlier versions with them (in a second write after the
        delete's: a process dying in between leaves the versions until the user is forgotten)."""
        forget_versions(self.ctx.backend, gone)
        # A deleted statement leaves its fact's timeline: the one it superseded may be current again.
        dropped = set(gone)
        for user, key in {(c.user_id, f["key"]) for c in before.values()
                          if c.id in dropped and (f := stated_fact(c.metadata))}:
            self.facts.timeline.settle(user, key)

    def flush(self, timeout: float | None = None) -> bool:
        """Write pending access counts (False: not within ``timeout``; they wait for the next)."""
        return self.access.flush(timeout)

    def close(self) -> None:
        self.maintenance.stopping.set()  # a pass under way stops after its current batch
        self.schedule.stop()
        self.access.close()

    def _apply_expiry_rules(self, chunks: Sequence[KnowledgeChunk]) -> None:
        rules = self.ctx.config.expiry_rules
        due = {c.id: found for c in chunks if (found := rule_expiry(c, rules)) is not None}
        due.update(inherited_expiry(chunks, due))
        if not due:
            return
        new: list[KnowledgeChunk] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            # On the records as the write reads them: an edit made since they were stored stays.
            new[:] = [c.copy(expires_at=due[cid][0], metadata=dict(c.metadata, expiry_rule=due[cid][1]),
                             relationships=[])
                      for cid, c in current.items() if c.expires_at is None and not c.pinned]
            return new

        with self.ctx.changes() as box:
            self.ctx.backend.modify(list(due), change)
            for c in new:
                box.emit(EventType.UPDATED, c, fields=["expires_at", "metadata"], expiry_rule=c.metadata["expiry_rule"])

