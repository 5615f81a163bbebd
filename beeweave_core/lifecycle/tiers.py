"""Memory tiers: working, short-term and long-term (docs/lifecycle.md, "Tiers").

A memory stored in the working tier gets that tier's TTL as its ``expires_at``, counted
from when it is stored (unless it has one, or is pinned), so it leaves search and is
archived by ``maintain()`` like any expired memory, unless it is promoted first. A
short-term memory is a candidate for promotion for ``short_ttl`` after it is stored
(``metadata["settles_at"]``); unpromoted by then, ``maintain()`` settles it into long-term:
learnt knowledge is kept, and an unused memory sinks in rank by age instead of vanishing
(``TierConfig(short_expires=True)``: it expires like a working memory instead). Promotion to
long-term is a score computed from what the record holds, so it needs no clock of its
own and reads the same in every process:

    score = use·ln(1 + uses) + feedback·(up − down) + importance·importance + repetition·ln(1 + repeats)

where ``uses`` is the access count (search hits and ``used`` feedback), ``up``/``down``
the feedback counts, ``importance`` the memory's importance in [0, 1] (the write policy's
``metadata["importance"]``) and ``repeats`` how many duplicates were merged into it.
The score is evaluated when a memory is stored, when feedback is given, when a search
returns it and in ``maintain()``. A promoted memory loses the expiry its tier gave it
(an expiry from a rule, e.g. today's weather, stays).

Demotion is off by default: with ``demote_below`` set, ``maintain()`` moves long-term
memories whose eviction score (the lifecycle's eviction formula) is below it back to
the short-term tier with a fresh TTL: a second chance to be used before they expire.
A memory whose promotion score still qualifies (e.g. an important one) is not demoted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from ..events import EventType
from ..filters import build_filter
from ..records import ChunkStatus, KnowledgeChunk, MemoryTier, SearchHit
from ..validation import importance_of
from .base import LifecycleContext, Outbox, changed_fields
from .config import TierConfig
from .expiry import eviction_score
from .history import record_action
from .reports import MaintenanceReport

__all__ = ["Tiers", "promotion_score", "TIER_TTL_KEY", "SETTLES_KEY", "tier_expiry", "promoted", "settled",
           "due_to_settle",
           "demoted", "due_for_promotion"]

TIER_TTL_KEY = "tier_ttl"  # metadata: the tier whose TTL set ``expires_at`` (cleared on promotion)
SETTLES_KEY = "settles_at"  # metadata: when an unpromoted short-term memory settles into long-term


def promotion_score(chunk: KnowledgeChunk, cfg: TierConfig, *, extra_uses: int = 0) -> float:
    """The promotion score of a memory (``extra_uses``: accesses not yet written)."""
    md = chunk.metadata
    raw = md.get("feedback")
    counts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    up = int(counts.get("up", 0) or 0)
    down = int(counts.get("down", 0) or 0)
    merged = md.get("merged_from")
    repeats = len(merged) if isinstance(merged, list) else 0
    uses = max(int(chunk.access_count) + int(extra_uses), 0)
    return (cfg.use_weight * math.log1p(uses) + cfg.feedback_weight * (up - down)
            + cfg.importance_weight * importance_of(md.get("importance")) + cfg.repetition_weight * math.log1p(repeats))


def due_for_promotion(chunk: KnowledgeChunk, cfg: TierConfig, *, extra_uses: int = 0) -> bool:
    return chunk.tier is not MemoryTier.LONG and promotion_score(chunk, cfg, extra_uses=extra_uses) >= cfg.promote_at


def tier_expiry(chunk: KnowledgeChunk, cfg: TierConfig, start: datetime | None = None) -> KnowledgeChunk | None:
    """``chunk`` with its tier's TTL as ``expires_at`` (from ``start``, when it is stored; default
    its timestamp), or with the time it settles into long-term (a short-term memory that does
    not expire); None when nothing changes (long-term, pinned, or already set)."""
    if chunk.pinned or chunk.tier is MemoryTier.LONG:
        return None
    begin = start or chunk.timestamp
    ttl = cfg.ttl(chunk.tier)
    if ttl is None:  # a short-term memory that settles instead of expiring
        if SETTLES_KEY in chunk.metadata:
            return None
        at = _plus(begin, cfg.short_ttl)
        return chunk.copy(metadata={**chunk.metadata, SETTLES_KEY: at.isoformat()}, relationships=[])
    if chunk.expires_at is not None:
        return None
    at = _plus(begin, ttl)
    return chunk.copy(expires_at=at, metadata={**chunk.metadata, TIER_TTL_KEY: chunk.tier.value}, relationships=[])


def _plus(begin: datetime, ttl: Any) -> datetime:
    try:
        return begin + ttl
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc)


def due_to_settle(chunk: KnowledgeChunk, cfg: TierConfig, now: datetime) -> bool:
    """An unpromoted short-term memory whose wait is over, and which does not expire: its
    ``settles_at`` has passed, or (stored before memories settled) its tier's expiry has."""
    if chunk.tier is not MemoryTier.SHORT or cfg.short_expires or chunk.pinned:
        return False
    raw = chunk.metadata.get(SETTLES_KEY)
    if isinstance(raw, str):
        try:
            at = datetime.fromisoformat(raw)
        except ValueError:
            return True
        return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)) <= now
    return chunk.metadata.get(TIER_TTL_KEY) == MemoryTier.SHORT.value and chunk.expires_at is not None


def settled(chunk: KnowledgeChunk, now: datetime) -> KnowledgeChunk:
    """``chunk`` in the long-term tier, kept without promotion; an expiry its tier gave it is lifted."""
    md = {k: v for k, v in chunk.metadata.items() if k not in (SETTLES_KEY, TIER_TTL_KEY)}
    md["settled"] = {"from": chunk.tier.value, "at": now.isoformat()}
    expires = None if chunk.metadata.get(TIER_TTL_KEY) is not None else chunk.expires_at
    return chunk.copy(tier=MemoryTier.LONG, expires_at=expires, metadata=md, relationships=[])


def promoted(chunk: KnowledgeChunk, score: float, now: datetime) -> KnowledgeChunk:
    """``chunk`` in the long-term tier; the expiry its tier gave it is lifted."""
    md = dict(chunk.metadata)
    md.pop(SETTLES_KEY, None)
    expires = chunk.expires_at
    if md.pop(TIER_TTL_KEY, None) is not None:
        expires = None
    md["promoted"] = {"from": chunk.tier.value, "at": now.isoformat(), "score": round(score, 4)}
    return chunk.copy(tier=MemoryTier.LONG, expires_at=expires, metadata=md, relationships=[])


def demoted(chunk: KnowledgeChunk, cfg: TierConfig, score: float, now: datetime) -> KnowledgeChunk:
    """``chunk`` back in the short-term tier, expiring one short-term TTL from ``now``."""
    md = {k: v for k, v in chunk.metadata.items() if k != "promoted"}
    md["demoted"] = {"at": now.isoformat(), "eviction_score": round(score, 4)}
    back = chunk.copy(tier=MemoryTier.SHORT, metadata=md, relationships=[])
    if back.expires_at is not None:
        return back
    out = tier_expiry(back, cfg, start=now)
    return out if out is not None else back


def demote_all(chunks: Sequence[KnowledgeChunk], cfg: TierConfig, now: datetime,
               eviction: Callable[[KnowledgeChunk], float]) -> list[tuple[KnowledgeChunk, float]]:
    """(demoted copy, eviction score) of the long-term memories below ``demote_below``."""
    if cfg.demote_below is None:
        return []
    out = []
    for c in chunks:
        if c.tier is not MemoryTier.LONG or c.pinned or promotion_score(c, cfg) >= cfg.promote_at:
            continue  # a memory that would be promoted again at once is not demoted
        score = eviction(c)
        if score < cfg.demote_below:
            out.append((demoted(c, cfg, score, now), score))
    return out


class Tiers:
    """The lifecycle's tier rules over a store: TTLs at insert, promotion whenever the
    score can have changed, demotion in maintenance. Changes are written under the
    shared write lock, read fresh from the store (a feedback or access written meanwhile
    is kept), and audited ("promoted", "demoted")."""

    def __init__(self, ctx: LifecycleContext, waiting: Callable[[str], int] = lambda _id: 0) -> None:
        self.ctx = ctx
        self._waiting = waiting  # a memory's accesses recorded but not yet written (AccessRecorder)

    @property
    def config(self) -> TierConfig:
        return self.ctx.config.tiers

    def on_insert(self, chunks: Sequence[KnowledgeChunk]) -> None:
        """New working/short-term memories: promoted at once when important enough, else
        given their tier's TTL."""
        ids = [c.id for c in chunks if c.tier is not MemoryTier.LONG]
        if ids:
            self._apply(ids, ttl=True, why="stored")

    def after_feedback(self, ids: Sequence[str]) -> None:
        self._apply(list(ids), ttl=False, why="feedback")

    def on_search(self, hits: Sequence[SearchHit]) -> None:
        """A search hit is a use: a short-term memory this use lifts over the bar is promoted
        now, not at the next maintenance. Called before the hit is recorded: its uses are the
        written ones, those waiting in the access recorder, and this one."""
        due = [h.id for h in hits
               if due_for_promotion(h.chunk, self.config, extra_uses=self._waiting(h.id) + 1)]
        if due:
            self._apply(due, ttl=False, why="used", extra_uses=1)

    def promote_due(self, *, user_id: str | None = None, report: MaintenanceReport | None = None) -> list[str]:
        """Promote every working/short-term memory (of one user, or all) whose score is due;
        return their ids. ``maintain()`` calls this before it expires anything."""
        flt = build_filter({"tier": [MemoryTier.WORKING.value, MemoryTier.SHORT.value]}, user_id=user_id)
        ids = self.ctx.backend.scan_ids(flt)
        settled_ids: list[str] = []
        done = self._apply(ids, ttl=True, why="maintenance", settled_out=settled_ids) if ids else []
        if report is not None:
            report.promoted += len(done)
            report.settled += len(settled_ids)
        return done

    def demote_due(self, ids: Sequence[str], now: datetime, report: MaintenanceReport,
                   box: Outbox) -> dict[str, KnowledgeChunk]:
        """Inside ``maintain()``'s write section: the active long-term memories of ``ids``
        below ``demote_below`` back to short-term, judged on the records as the write reads
        them (a use or an edit another process made meanwhile counts, and is kept); return
        the demoted ones by id."""
        cfg = self.ctx.config
        changes: list[tuple[KnowledgeChunk, float]] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            active = [c for c in current.values() if c.status is ChunkStatus.ACTIVE]
            changes[:] = demote_all(active, self.config, now, lambda c: eviction_score(c, now, cfg))
            return [c for c, _ in changes]

        self.ctx.backend.modify(ids, change)
        for c, score in changes:
            record_action(self.ctx.backend, c, "demoted", "cold", now, eviction_score=round(score, 6))
            box.emit(EventType.UPDATED, c, fields=["expires_at", "metadata", "tier"], reason="demoted")
        report.demoted += len(changes)
        return {c.id: c for c, _ in changes}

    def _apply(self, ids: list[str], *, ttl: bool, why: str, extra_uses: int = 0,
               settled_out: list[str] | None = None) -> list[str]:
        """Promote what is due; with ``ttl``, give the rest their tier's TTL; with
        ``settled_out``, settle the short-term memories whose wait is over (their ids go there)."""
        cfg = self.config
        done: list[str] = []
        # (before, after, what happened: "promoted", "settled" or "ttl", the promotion score)
        changed: list[tuple[KnowledgeChunk, KnowledgeChunk, str, float]] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            # Judged on the records as the write reads them: an edit another process made
            # since they were last read (a new text, feedback) is the state promoted, not lost.
            changed.clear()
            for c in current.values():
                if c.tier is MemoryTier.LONG:
                    continue
                # Under the write lock, which the recorder's flush takes too: the stored count
                # and the waiting accesses are read consistently, none counted twice.
                value = promotion_score(c, cfg, extra_uses=self._waiting(c.id) + extra_uses)
                if value >= cfg.promote_at:
                    changed.append((c, promoted(c, value, now), "promoted", value))
                elif settled_out is not None and due_to_settle(c, cfg, now):
                    changed.append((c, settled(c, now), "settled", value))
                elif ttl and (new := tier_expiry(c, cfg, start=now)) is not None:
                    changed.append((c, new, "ttl", value))  # its TTL counts from now: when it is stored
            return [new for _, new, _, _ in changed]

        with self.ctx.changes() as box:
            now = self.ctx.now()
            self.ctx.backend.modify(ids, change)
            for old, new, what, score in changed:
                if what == "promoted":
                    done.append(new.id)
                    record_action(self.ctx.backend, new, "promoted", why, now, score=round(score, 6),
                                  tier_before=old.tier.value)
                    box.emit(EventType.UPDATED, new, fields=changed_fields(old, new), reason="promoted")
                elif what == "settled":
                    if settled_out is not None:
                        settled_out.append(new.id)
                    record_action(self.ctx.backend, new, "settled", why, now, tier_before=old.tier.value)
                    box.emit(EventType.UPDATED, new, fields=changed_fields(old, new), reason="settled")
                else:
                    box.emit(EventType.UPDATED, new, fields=["expires_at", "metadata"], tier_ttl=new.tier.value)
        return done
