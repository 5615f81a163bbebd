"""``LifecycleMixin``: feedback, access tracking, decay, review, and the hooks into the core."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ..engine import _check_str
from ..errors import InvalidInputError, NotFoundError
from ..events import EventType
from ..records import ChunkStatus, KnowledgeChunk, SearchHit
from ..scoring import effective_weight as _effective_weight
from ..scoring import is_expired
from .access import AccessRecorder, Pending
from .base import id_list, retired
from .config import FeedbackSignal, LifecycleConfig, ReviewDecision
from .conflicts import order_conflicts
from .expiry import rule_expiry
from .facts import FactsMixin
from .feedback import FEEDBACK_KEY, STALE_KEY, apply_feedback
from .history import read_actions, record_action
from .maintenance import MaintenanceMixin
from .reports import ReviewItem
from .review import flag, read_queue, unflag

__all__ = ["LifecycleMixin"]


class LifecycleMixin(MaintenanceMixin, FactsMixin):
    """A memory that lives: feedback reinforces, time decays, duplicates merge, old news expires.

    Usage:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_core.lifecycle import LifecycleConfig

            memory = BeeWeave("memory.db", lifecycle=LifecycleConfig(capacity=10_000))
            hits = memory.search("deploy steps", user_id="alice")
            memory.feedback([hits[0].id], "up")       # ranks it higher from now on
            memory.remember_fact("home_city", "Alice lives in Paris.", user_id="alice")
            memory.maintain()                          # merge, expire, evict (e.g. nightly)

    Args:
        lifecycle: a :class:`LifecycleConfig` (keyword argument of the ``BeeWeave`` constructor).
    """

    def __init__(self, *args: Any, lifecycle: LifecycleConfig | None = None, **kwargs: Any) -> None:
        if lifecycle is not None and not isinstance(lifecycle, LifecycleConfig):
            raise InvalidInputError("lifecycle must be a LifecycleConfig")
        self.lifecycle = lifecycle or LifecycleConfig()
        self._lc_lock = threading.RLock()
        self._access = AccessRecorder(self._write_access, batch=self.lifecycle.access_batch,
                                      interval=self.lifecycle.access_flush_interval, write_lock=self._lc_lock)
        super().__init__(*args, **kwargs)

    # -- feedback ----------------------------------------------------------------------------
    def feedback(self, chunk_ids: str | Iterable[str], signal: FeedbackSignal | str) -> list[KnowledgeChunk]:
        """Tell the memory how its memories did: "used", "up" or "down"; return them updated.

        The signal's delta (``LifecycleConfig``) is added to the effective weight and the
        decay restarts from now; ``used`` also counts as an access. After ``stale_after``
        ``down`` signals in a row a memory is marked stale (ranked down) and put in the
        review queue; ``up`` clears that. Unknown ids raise ``NotFoundError`` and change
        nothing.
        """
        try:
            sig = FeedbackSignal(signal)
        except ValueError:
            raise InvalidInputError(f"signal must be one of used, up, down; got {signal!r}") from None
        ids = id_list(chunk_ids)
        for i in ids:
            _check_str("chunk_id", i)
        if not ids:
            return []
        found: dict[str, KnowledgeChunk] = {}
        new: list[KnowledgeChunk] = []
        when: list[datetime] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            missing = [i for i in ids if i not in current]
            if missing:
                raise NotFoundError(f"no chunk with id {missing[0]!r}")
            when.append(self.clock())  # read while the records are held: feedback applies in time order
            found.update(current)
            new[:] = [apply_feedback(current[i], sig, when[0], self.lifecycle, self.scoring) for i in ids]
            return new

        with self._changes() as box:
            # Read and written in one step of the backend: a feedback, access or update that
            # another thread or process writes meanwhile is read here, never overwritten.
            self.backend.modify(ids, change)
            for c in new:
                was_stale = bool(found[c.id].metadata.get(STALE_KEY))
                if c.metadata.get(STALE_KEY) and not was_stale:
                    flag(self.backend, c, "stale", when[0])
                elif was_stale and not c.metadata.get(STALE_KEY):
                    unflag(self.backend, c.id, "stale")
                box.emit(EventType.UPDATED, c, fields=_changed_fields(found[c.id], c), feedback=sig.value)
        return self.get_many(ids)

    def effective_weight(self, chunk_id: str) -> float:
        """A memory's weight now: its earned part decayed since the last feedback (pinned: as set)."""
        return _effective_weight(self.get(chunk_id), self.clock(), self.scoring)

    # -- review ------------------------------------------------------------------------------
    def review_queue(self, *, user_id: str | None = None) -> list[ReviewItem]:
        """Memories flagged for a decision (stale, or expired but valued), oldest flag first."""
        return read_queue(self.backend, user_id)

    def resolve_review(self, chunk_id: str, decision: ReviewDecision | str) -> KnowledgeChunk | None:
        """Decide on a flagged memory: "keep" (clear stale and a passed expiry), "archive" or
        "delete". Returns the memory (None once deleted) and takes it out of the queue."""
        try:
            choice = ReviewDecision(decision)
        except ValueError:
            raise InvalidInputError(f"decision must be keep, archive or delete; got {decision!r}") from None
        with self._changes() as box:
            c = self.get(chunk_id)
            now = self.clock()
            if choice is ReviewDecision.DELETE:
                record_action(self.backend, c, "deleted", "review", now)
                box.delete.append(c.id)
            else:
                if choice is ReviewDecision.ARCHIVE:
                    new = retired(c, ChunkStatus.ARCHIVED, "review", now)
                    record_action(self.backend, c, "archived", "review", now)
                else:
                    md = dict(c.metadata, **{FEEDBACK_KEY: dict(c.metadata.get(FEEDBACK_KEY) or {}, down_streak=0)})
                    md.pop(STALE_KEY, None)
                    new = c.copy(metadata=md, relationships=[],
                                 expires_at=None if is_expired(c, now) else c.expires_at)
                self.backend.update([new])
                box.emit(EventType.UPDATED, new, fields=_changed_fields(c, new), review=choice.value)
            unflag(self.backend, c.id)
        return None if choice is ReviewDecision.DELETE else self.get(chunk_id)

    def audit(self, chunk_id: str | None = None) -> list[dict[str, Any]]:
        """What the lifecycle did (merged, archived, deleted) and why, oldest first."""
        return read_actions(self.backend, chunk_id)

    # -- access tracking ---------------------------------------------------------------------
    def _after_search(self, hits: list[SearchHit], now: datetime) -> None:
        order_conflicts(hits)
        self._access.record((h.id for h in hits), now)
        super()._after_search(hits, now)

    def _write_access(self, pending: Pending) -> None:
        with self._lc_lock:
            self.backend.record_access(pending)  # memories deleted meanwhile are skipped

    def _write_lock(self) -> threading.RLock:
        """``update()`` holds the lifecycle's lock: no feedback or access write interleaves."""
        return self._lc_lock

    def flush(self) -> None:
        """Write pending access counts, then persist the store (see ``MemoryCore.flush``)."""
        self._access.flush()
        super().flush()

    def _before_close(self) -> None:
        try:
            access = getattr(self, "_access", None)
            if access is not None:
                access.close()
        finally:
            super()._before_close()

    # -- hooks -------------------------------------------------------------------------------
    def _after_insert(self, chunks: list[KnowledgeChunk], *, link: bool = True) -> None:
        super()._after_insert(chunks, link=link)
        self._apply_expiry_rules(chunks)
        if self.lifecycle.merge_on_insert:
            self._merge_new(chunks)
        if self.lifecycle.capacity is not None and self.lifecycle.capacity_on_insert:
            self._enforce_capacity(c.user_id for c in chunks)

    def _apply_expiry_rules(self, chunks: Sequence[KnowledgeChunk]) -> None:
        rules = self.lifecycle.expiry_rules
        due = {c.id: found for c in chunks if (found := rule_expiry(c, rules)) is not None}
        if not due:
            return
        with self._changes() as box:
            fresh = self.backend.get(list(due))
            new = []
            for cid, c in fresh.items():
                at, rule = due[cid]
                if c.expires_at is None and not c.pinned:
                    new.append(c.copy(expires_at=at, metadata=dict(c.metadata, expiry_rule=rule), relationships=[]))
            self.backend.update(new)
            for c in new:
                box.emit(EventType.UPDATED, c, fields=["expires_at", "metadata"], expiry_rule=c.metadata["expiry_rule"])


def _changed_fields(old: KnowledgeChunk, new: KnowledgeChunk) -> list[str]:
    a, b = old.to_dict(), new.to_dict()
    return sorted(k for k in a if k != "relationships" and a[k] != b[k])
