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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from .config_rules import FLAG, Duration, Number, Rule, check_fields
from .records import KnowledgeChunk

__all__ = ["ScoringConfig", "RankFields", "effective_weight", "refreshed_weight", "is_expired", "ttl_passed", "score_factor",
           "rank_factors", "use_order", "NEUTRAL_WEIGHT"]

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
        use_weight: multiply the fused score by log(1 + w) / log(2) (1.0 at the neutral
            weight); its praise and going-unused part reorders only hits of comparable
            relevance (``rank_factors``, ``use_order``).
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
    base, earned = _weight_parts(chunk, now, cfg)
    return max(base + earned, 0.0)


def _weight_parts(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> tuple[float, float]:
    """The weight now as its neutral part (sunk by going unused) and what feedback earned
    (praise > 0, blame < 0), each decayed; a pinned memory's stored weight, undecayed."""
    w = float(chunk.weight)
    if chunk.pinned:
        return NEUTRAL_WEIGHT, w - NEUTRAL_WEIGHT
    periods = _periods(chunk, now, cfg)
    earned = w - NEUTRAL_WEIGHT
    rate = cfg.decay if earned > 0 else cfg.penalty_decay
    return _unused_base(periods, cfg), earned * rate ** periods


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
    """The multiplier applied to a memory's score: ``lift * penalty`` of ``rank_factors``
    (1.0 for an unrated, confident memory)."""
    lift, penalty = rank_factors(chunk, now, cfg)
    return lift * penalty


def rank_factors(chunk: KnowledgeChunk | RankFields, now: datetime, cfg: ScoringConfig) -> tuple[float, float]:
    """A memory's rank factors as ``(lift, penalty)``, both 1.0 for an unrated, confident memory.

    ``lift`` is the weight factor ``log(1 + w) / log 2`` of the weight without blame: praise
    above 1, going unused below. It says how the memory was used, not what it says, so it is
    to order memories of comparable relevance only (``use_order``).
    ``penalty`` is everything that says a memory should sink whatever its relevance: blame
    (what a ``down`` took off the weight factor), expiry, the stale mark, low confidence and
    (when on) recency.
    """
    lift = penalty = 1.0
    if cfg.use_weight:
        base, earned = _weight_parts(chunk, now, cfg)
        lift = _weight_factor(base + max(earned, 0.0))
        if earned < 0:
            penalty = _weight_factor(base + earned) / lift if lift > 0 else 0.0
    if cfg.recency_half_life is not None:
        age = max((now - chunk.timestamp) / cfg.recency_half_life, 0.0)
        penalty *= 0.5 ** age
    if cfg.use_confidence:
        penalty *= min(max(float(chunk.confidence), 0.0), 1.0)
    if chunk.stale if isinstance(chunk, RankFields) else chunk.metadata.get(STALE):
        penalty *= cfg.stale_penalty
    if is_expired(chunk, now):
        penalty *= cfg.expired_penalty
    return lift, penalty


def _weight_factor(w: float) -> float:
    return math.log1p(max(w, 0.0)) / math.log(2)


def use_order(lifted: Sequence[float], relevant: Sequence[bool]) -> list[int]:
    """The final order of hits given in their order without the lift (``rank_factors``):
    ``lifted`` their scores with it, ``relevant`` whether each reaches the store's gate.

    Use reorders only neighbours of the same kind: each run of consecutive relevant hits, and
    each of hits below the gate, is sorted by ``lifted`` (stably); no hit crosses into another
    run. So a memory praised every day still comes first among the answers to a question, but
    never above the answer to another question it does not answer, and going unused sinks a
    memory only below comparable ones.
    """
    order: list[int] = []
    start = 0
    for end in range(1, len(lifted) + 1):
        if end == len(lifted) or relevant[end] != relevant[start]:
            order.extend(sorted(range(start, end), key=lambda i: -lifted[i]))
            start = end
    return order
