"""From relevance to the final ranking score: effective weight, recency, confidence.

Weights move with feedback (see the lifecycle) and sink when a memory goes unused, all
computed from timestamps at read time (from the moment feedback last changed the weight,
or the memory's timestamp), so correctness never depends on a batch job having run:

    w(t) = floor + (1 - floor) * unused_decay**t + (w - 1) * rate**t

with t in periods and rate = ``decay`` for praise (w > 1), ``penalty_decay`` (slower) for a
penalty (w < 1). A new memory starts at the neutral weight 1.0 (every factor 1), an unused
one sinks towards ``floor``, praise fades faster than blame: a memory used again and again
stays above one used once, and a memory voted down stays below neutral for months. Reading
a memory (a search hit) is not using it: only feedback refreshes it, so a search never
changes another search's order. Recency is off by default because it hurts plain relevance
on long-lived memories (old facts are not worse).

Expiry is also read from timestamps: a memory whose ``expires_at`` has passed is
ranked down at once, before any maintenance run archives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from .config_rules import FLAG, Duration, Number, Rule, check_fields
from .records import KnowledgeChunk

__all__ = ["ScoringConfig", "RankFields", "effective_weight", "refreshed_weight", "is_expired", "ttl_passed", "score_factor", "NEUTRAL_WEIGHT"]

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
        decay: factor applied to praise, the earned weight above neutral (w - 1 > 0), per ``period``.
        penalty_decay: factor applied to a penalty (w - 1 < 0) per ``period``: slower than
            praise, so a memory voted down stays below neutral.
        unused_decay: factor per ``period`` by which the neutral part (1 - floor) of an
            unused memory fades (0.98: half in about 34 days); 1 turns sinking off.
        floor: where an unused memory's weight settles (the factor log(1 + floor) / log 2).
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
    penalty_decay: float = 0.99
    unused_decay: float = 0.98
    floor: float = 0.5
    period: timedelta = timedelta(hours=24)
    recency_half_life: timedelta | None = None
    use_confidence: bool = True
    stale_penalty: float = 0.5
    expired_penalty: float = 0.1

    def __post_init__(self) -> None:
        check_fields(self, _SCORING_RULES)


_FACTOR = Number(0, 1, open_low=True)  # a decay factor per period: 0 would erase at once
_SCORING_RULES: dict[str, Rule] = {
    "use_weight": FLAG, "decay": _FACTOR, "penalty_decay": _FACTOR, "unused_decay": _FACTOR,
    "floor": Number(0, 1), "period": Duration(), "recency_half_life": Duration(optional=True),
    "use_confidence": FLAG, "stale_penalty": Number(0, 1), "expired_penalty": Number(0, 1),
}


def effective_weight(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> float:
    """The weight now (see the module docstring), from ``reinforced_at`` or the timestamp;
    pinned memories never decay."""
    w = float(chunk.weight)
    if chunk.pinned:
        return w
    periods = _periods(chunk, now, cfg)
    earned = w - NEUTRAL_WEIGHT
    rate = cfg.decay if earned > 0 else cfg.penalty_decay
    return max(_unused_base(periods, cfg) + earned * rate ** periods, 0.0)


def refreshed_weight(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> float:
    """The weight now with what going unused took given back: where a memory that is being
    used (a ``used`` or ``up`` signal) restarts, before the signal's delta is added."""
    if chunk.pinned:
        return float(chunk.weight)
    periods = _periods(chunk, now, cfg)
    return effective_weight(chunk, now, cfg) + NEUTRAL_WEIGHT - _unused_base(periods, cfg)


def _periods(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> float:
    since = chunk.reinforced_at or chunk.timestamp
    return max((now - since) / cfg.period, 0.0)


def _unused_base(periods: float, cfg: ScoringConfig) -> float:
    """The neutral weight after ``periods`` unused: 1 at first, ``floor`` in the end."""
    return cfg.floor + (NEUTRAL_WEIGHT - cfg.floor) * cfg.unused_decay ** periods


def is_expired(chunk: KnowledgeChunk | RankFields, now: datetime) -> bool:
    """True when ``expires_at`` has passed; pinned memories never expire."""
    return not chunk.pinned and chunk.expires_at is not None and chunk.expires_at <= now


def ttl_passed(chunk: KnowledgeChunk, now: datetime) -> bool:
    """An item an application keeps under its own key (``kind="item"``: the LangGraph store's)
    whose ``expires_at`` passed. Pinned as it is, its expiry is a TTL, a deletion date: it is
    absent from every search and maintenance deletes it (not a ranking hint, as for others)."""
    return chunk.metadata.get("kind") == "item" and chunk.expires_at is not None and chunk.expires_at <= now


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
