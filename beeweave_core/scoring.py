"""From relevance to the final ranking score: effective weight, recency, confidence.

Weights move with feedback (see the lifecycle) and the earned part decays by
``decay`` per ``period`` from the moment feedback last changed it, computed from
timestamps at read time, so correctness never depends on a batch job having run.
A memory nobody rated sits at the neutral weight 1.0, where every factor is 1:
plain relevance is untouched until there is feedback. Recency is off by default
because it hurts plain relevance on long-lived memories (old facts are not worse).

Expiry is also read from timestamps: a memory whose ``expires_at`` has passed is
ranked down at once, before any maintenance run archives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from .errors import InvalidInputError
from .records import KnowledgeChunk

__all__ = ["ScoringConfig", "RankFields", "effective_weight", "is_expired", "score_factor", "NEUTRAL_WEIGHT"]

NEUTRAL_WEIGHT = 1.0
STALE = "stale"  # the metadata flag the lifecycle sets after repeated negative feedback


class RankFields(NamedTuple):
    """What ranking reads of a memory (see ``score_factor``). A store answers it from small
    per-memory columns, so a search ranks its candidates first and then decodes only the
    records it returns. (A named tuple: a search builds ~20 per query.)"""

    timestamp: datetime
    weight: float = NEUTRAL_WEIGHT
    confidence: float = 1.0
    pinned: bool = False
    stale: bool = False
    reinforced_at: datetime | None = None
    expires_at: datetime | None = None

    @classmethod
    def of(cls, chunk: KnowledgeChunk) -> RankFields:
        return cls(chunk.timestamp, float(chunk.weight), float(chunk.confidence), bool(chunk.pinned),
                   bool(chunk.metadata.get(STALE)), chunk.reinforced_at, chunk.expires_at)


@dataclass(frozen=True)
class ScoringConfig:
    """How a memory's bookkeeping changes its rank.

    Attributes:
        use_weight: multiply relevance by log(1 + w) / log(2) (1.0 at the neutral weight).
        decay: factor applied to the earned weight (w - 1) per ``period``.
        period: the decay period.
        recency_half_life: if set, multiply by 0.5 ** (age / half_life); off by default.
        use_confidence: multiply by the memory's confidence (0..1].
        stale_penalty: multiplier for memories flagged stale by repeated negative feedback
            (``metadata["stale"]``).
        expired_penalty: multiplier for memories whose ``expires_at`` has passed (pinned
            memories never expire).
    """

    use_weight: bool = True
    decay: float = 0.95
    period: timedelta = timedelta(hours=24)
    recency_half_life: timedelta | None = None
    use_confidence: bool = True
    stale_penalty: float = 0.5
    expired_penalty: float = 0.1

    def __post_init__(self) -> None:
        if not (isinstance(self.decay, (int, float)) and 0.0 < self.decay <= 1.0):
            raise InvalidInputError(f"decay must be in (0, 1], got {self.decay!r}")
        for name in ("period", "recency_half_life"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
                raise InvalidInputError(f"{name} must be a positive timedelta, got {value!r}")
        for name in ("stale_penalty", "expired_penalty"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise InvalidInputError(f"{name} must be a number in [0, 1], got {value!r}")


def effective_weight(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> float:
    """The weight now: the earned part (w - 1) decays since ``reinforced_at``; pinned never decays."""
    w = float(chunk.weight)
    if chunk.pinned or w == NEUTRAL_WEIGHT:
        return w
    since = chunk.reinforced_at or chunk.timestamp
    periods = max((now - since) / cfg.period, 0.0)
    return NEUTRAL_WEIGHT + (w - NEUTRAL_WEIGHT) * cfg.decay ** periods


def is_expired(chunk: KnowledgeChunk | RankFields, now: datetime) -> bool:
    """True when ``expires_at`` has passed; pinned memories never expire."""
    return not chunk.pinned and chunk.expires_at is not None and chunk.expires_at <= now


def score_factor(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> float:
    """The multiplier applied to a memory's relevance (1.0 for an unrated, confident memory)."""
    f = 1.0
    if cfg.use_weight:
        f *= math.log1p(max(effective_weight(chunk, now, cfg), 0.0)) / math.log(2)
    if cfg.recency_half_life is not None:
        age = max((now - chunk.timestamp) / cfg.recency_half_life, 0.0)
        f *= 0.5 ** age
    if cfg.use_confidence:
        f *= min(max(float(chunk.confidence), 0.0), 1.0)
    if chunk.stale if isinstance(chunk, RankFields) else chunk.metadata.get(STALE):
        f *= cfg.stale_penalty
    if is_expired(chunk, now):
        f *= cfg.expired_penalty
    return f
