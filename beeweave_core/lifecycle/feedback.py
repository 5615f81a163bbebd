"""Feedback: how one signal changes one memory (a pure function of the memory and now)."""

from __future__ import annotations

from datetime import datetime

from ..records import KnowledgeChunk
from ..scoring import STALE, ScoringConfig, effective_weight, refreshed_weight
from .config import FeedbackSignal, LifecycleConfig

__all__ = ["apply_feedback", "FEEDBACK_KEY", "STALE_KEY"]

FEEDBACK_KEY = "feedback"  # metadata: {"used": n, "up": n, "down": n, "down_streak": n}
STALE_KEY = STALE  # metadata flag read by scoring.score_factor


def apply_feedback(chunk: KnowledgeChunk, signal: FeedbackSignal, now: datetime, cfg: LifecycleConfig,
                   scoring: ScoringConfig) -> KnowledgeChunk:
    """The memory after ``signal``.

    The delta is added to the effective weight now, and ``reinforced_at`` moves to now,
    so the earned part keeps decaying from the new value. ``used`` and ``up`` first give back
    what going unused took (the memory is in use again); ``down`` does not. ``down`` signals in a row
    mark the memory stale after ``cfg.stale_after``; an ``up`` ends the streak and
    clears the stale mark.
    """
    new = chunk.copy(metadata=dict(chunk.metadata), relationships=[])
    delta = cfg.delta(signal)
    if delta:
        start = effective_weight if signal is FeedbackSignal.DOWN else refreshed_weight
        w = start(chunk, now, scoring) + delta
        new.weight = min(max(w, cfg.min_weight), cfg.max_weight)
        new.reinforced_at = now
    counts = dict(new.metadata.get(FEEDBACK_KEY) or {})
    counts[signal.value] = int(counts.get(signal.value, 0)) + 1
    if signal is FeedbackSignal.DOWN:
        counts["down_streak"] = int(counts.get("down_streak", 0)) + 1
        if counts["down_streak"] >= cfg.stale_after:
            new.metadata[STALE_KEY] = True
    elif signal is FeedbackSignal.UP:
        counts["down_streak"] = 0
        new.metadata.pop(STALE_KEY, None)
    else:
        new.access_count += 1
        new.last_accessed = now if new.last_accessed is None else max(new.last_accessed, now)
    new.metadata[FEEDBACK_KEY] = counts
    return new
