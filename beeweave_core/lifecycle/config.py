"""Configuration of the memory lifecycle: feedback, access tracking, merge, expiry, capacity."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any

from ..config_rules import FLAG, Choice, Duration, Instance, Items, Number, Rule, check_fields
from ..errors import InvalidInputError
from ..records import KnowledgeChunk, MemoryTier
from ..validation import MAX_WEIGHT

__all__ = ["FeedbackSignal", "ForgetAction", "ReviewDecision", "ExpiryRule", "DEFAULT_EXPIRY_RULES", "TierConfig",
           "SessionConfig", "MergeOnInsert", "LifecycleConfig"]


class FeedbackSignal(str, Enum):
    """What an agent or a user says about a memory it was given."""

    USED = "used"  # the memory was put to use (also counts as an access)
    UP = "up"  # it was good
    DOWN = "down"  # it was wrong or unhelpful


class MergeOnInsert(str, Enum):
    """Which new memories ``LifecycleConfig.merge_on_insert`` merges with their duplicates.

    - ``INGESTED`` (default): memories ingestion stores (turns and tool outputs), when safe:
      a near-duplicate by vector that also says nearly the same words (an agent asked the
      same question twice). A memory written with ``add()`` is the caller's: kept as given.
    - ``ALL``: every new memory, by vector similarity alone (``True`` means this).
    - ``OFF``: only ``maintain()`` merges (``False`` means this).
    """

    OFF = "off"
    INGESTED = "ingested"
    ALL = "all"


class ForgetAction(str, Enum):
    """What happens to an expired or evicted memory."""

    ARCHIVE = "archive"  # status "archived": out of search, still readable with get()
    DELETE = "delete"  # gone, with its vectors and relationships


# English words are delimited by lookarounds, not \b: in mixed text such as "今天weather"
# a Chinese character counts as a word character, so \b would never match.
def _en(words: str) -> str:
    return rf"(?<![A-Za-z])(?:{words})(?![A-Za-z])"


_NOW = "|".join((_en(r"today'?s?|tonight|tomorrow|this (?:morning|afternoon|evening)|right now|currently"),
                 "今天|今日|今晚|明天|明日|现在|目前|当前"))
_WEATHER = "|".join((_en(r"weather|forecast|temperature|rain(?:ing|y)?|snow(?:ing|y)?|sunny|cloudy|humidity"),
                     "天气|气温|预报|下雨|下雪|降雨|降温|晴天|阴天|多云|湿度"))
_STOCK = "|".join((_en(r"(?:stock|share) price|shares? (?:is|are) trading|trading at|stock quote"),
                   "股价|股票价格|收盘价|开盘价|行情"))
_NUMBER = r"\d|[零一二两三四五六七八九十百千万亿]+\s*(?:元|块|美元|点)"


@dataclass(frozen=True)
class ExpiryRule:
    """Give a memory an ``expires_at`` when it is added, if it has none.

    A rule matches when the memory has any of ``tags``, or when every one of
    ``patterns`` (case-insensitive regular expressions) is found in its content.
    The memory then expires ``ttl`` after its own timestamp (when it was said).
    """

    name: str
    ttl: timedelta
    patterns: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.ttl, timedelta) or self.ttl <= timedelta(0):
            raise InvalidInputError(f"expiry rule {self.name!r}: ttl must be a positive timedelta")
        if isinstance(self.patterns, str) or isinstance(self.tags, str):
            raise InvalidInputError(f"expiry rule {self.name!r}: patterns and tags are tuples of strings")
        if not self.patterns and not self.tags:
            raise InvalidInputError(f"expiry rule {self.name!r} needs patterns or tags")
        try:
            compiled = tuple(re.compile(p, re.IGNORECASE) for p in self.patterns)
        except re.error as exc:
            raise InvalidInputError(f"expiry rule {self.name!r}: bad pattern: {exc}") from None
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "_compiled", compiled)

    def matches(self, chunk: KnowledgeChunk) -> bool:
        if self.tags and set(self.tags) & set(chunk.tags):
            return True
        text = chunk.content
        return bool(self._compiled) and all(p.search(text) for p in self._compiled)


DEFAULT_EXPIRY_RULES: tuple[ExpiryRule, ...] = (
    # "Today's weather is sunny", "今天天气晴": a weather report tied to a day. A lasting
    # preference ("the user likes rainy weather") has no time cue and does not expire.
    ExpiryRule("weather", timedelta(hours=24), patterns=(_NOW, _WEATHER)),
    # "AAPL stock price is $190", "股价涨到190元": a quote, with a number in it.
    ExpiryRule("stock_price", timedelta(hours=24), patterns=(_STOCK, _NUMBER)),
    ExpiryRule("ephemeral_tag", timedelta(hours=24), tags=("ephemeral", "weather", "stock_price")),
)


@dataclass(frozen=True)
class TierConfig:
    """TTLs of the tiers and the promotion score (``beeweave_core.lifecycle.tiers``).

    Attributes:
        working_ttl: how long a working memory (the current session) lives unpromoted, from
            when it is stored; then ``maintain()`` archives it.
        short_ttl: how long a short-term memory (learnt lately) waits for promotion, from when
            it is stored. Then, unpromoted, it settles into long-term (``short_expires=False``,
            the default: knowledge is kept, and an unused memory sinks in rank by age rather
            than vanishing) or expires and is archived (``short_expires=True``).
        short_expires: see ``short_ttl``.
        promote_at: a score at or above this promotes a memory to long-term.
        use_weight, feedback_weight, importance_weight, repetition_weight: the terms' weights.
        demote_below: long-term memories whose eviction score is below this go back to
            short-term in ``maintain()`` (``None``: never).
    """

    working_ttl: timedelta = timedelta(hours=2)
    short_ttl: timedelta = timedelta(hours=24)
    short_expires: bool = False
    promote_at: float = 2.0
    use_weight: float = 1.0
    feedback_weight: float = 1.0
    importance_weight: float = 2.0
    repetition_weight: float = 1.0
    demote_below: float | None = None

    def __post_init__(self) -> None:
        check_fields(self, _TIER_RULES)

    def ttl(self, tier: MemoryTier) -> timedelta | None:
        """How long a memory of ``tier`` lives unpromoted before it expires (None: it does not)."""
        if tier is MemoryTier.SHORT:
            return self.short_ttl if self.short_expires else None
        return {MemoryTier.WORKING: self.working_ttl}.get(tier)


@dataclass(frozen=True)
class SessionConfig:
    """The working memory of a session (``BeeWeave.add_turn``, ``get_conversation_context``).

    Attributes:
        max_turns: the buffer holds at most this many latest turns; older ones are folded
            into the rolling summary.
        summary_tokens: the summary's budget (words and CJK characters); it never grows past it.
        summarizer: a LangChain chat model, a LlamaIndex LLM or a function from prompt to
            text that writes the summary; ``None``: an extractive summary, no model.
    """

    max_turns: int = 20
    summary_tokens: int = 300
    summarizer: Any = None

    def __post_init__(self) -> None:
        check_fields(self, _SESSION_RULES)
        if self.summarizer is not None and not (callable(self.summarizer) or hasattr(self.summarizer, "invoke")
                                                or hasattr(self.summarizer, "complete")):
            raise InvalidInputError("SessionConfig.summarizer must be a LangChain chat model, a LlamaIndex LLM or "
                                    f"a function, got {self.summarizer!r}")


_TIER_RULES: dict[str, Rule] = {
    "working_ttl": Duration(), "short_ttl": Duration(), "short_expires": FLAG,
    "promote_at": Number(), "use_weight": Number(), "feedback_weight": Number(), "importance_weight": Number(),
    "repetition_weight": Number(), "demote_below": Number(optional=True),
}
_SESSION_RULES: dict[str, Rule] = {"max_turns": Number(1, integer=True), "summary_tokens": Number(1, integer=True)}


@dataclass(frozen=True)
class LifecycleConfig:
    """How memories are reinforced, merged, expired and forgotten.

    Attributes:
        used_delta, up_delta, down_delta: weight change per feedback signal; applied to
            the effective (decayed) weight, then clamped to [min_weight, max_weight].
        min_weight, max_weight: bounds of a memory's weight.
        stale_after: this many ``down`` signals in a row mark a memory stale (ranked down
            by ``ScoringConfig.stale_penalty``) and put it in the review queue.
        access_flush_interval: seconds an access (a search hit) may wait in memory before
            it is written to the store; 0 writes at every search. ``flush()`` and
            ``close()`` always write what is pending.
        access_batch: write at once when this many memories wait.
        merge_threshold: cosine at or above which two memories of a user are duplicates.
        merge_candidates: how many nearest neighbours are examined per memory.
        merge_on_insert: also merge duplicates as they are added, not only in ``maintain()``
            (:class:`MergeOnInsert`: ingested memories when safe by default; ``True`` for
            every memory, ``False`` for none). A merge keeps its history either way.
        expiry_rules: rules that set ``expires_at`` on new memories without one.
        expired_action: what ``maintain()`` does to an expired memory of low weight.
        review_weight: an expired memory whose effective weight is at least this goes to
            the review queue instead.
        capacity: at most this many active memories per user (``None``: no limit).
        capacity_on_insert: enforce ``capacity`` when memories are added (else only in
            ``maintain()``).
        evict_access_weight, evict_age_weight: w1 and w2 of the eviction score
            ln(access_count + 1)·w1 + 1/(age_days + 1)·w2; the lowest go first.
        evict_action: what happens to an evicted memory.
        tiers: :class:`TierConfig`: the TTLs of the working and short-term tiers and
            the promotion score.
        sessions: :class:`SessionConfig`: the session buffer and its rolling summary.
        maintenance_batch: ``maintain()`` works through this many memories at a time and
            holds the write lock only while it writes one batch's changes, so searches and
            writes proceed between (and, for searches, during) batches.
    """

    used_delta: float = 0.1
    up_delta: float = 0.5
    down_delta: float = -0.5
    min_weight: float = 0.05
    max_weight: float = 10.0
    stale_after: int = 3
    access_flush_interval: float = 2.0
    access_batch: int = 256
    merge_threshold: float = 0.9
    merge_candidates: int = 10
    merge_on_insert: MergeOnInsert | bool = MergeOnInsert.INGESTED
    expiry_rules: tuple[ExpiryRule, ...] = DEFAULT_EXPIRY_RULES
    expired_action: ForgetAction = ForgetAction.ARCHIVE
    review_weight: float = 1.5
    capacity: int | None = None
    capacity_on_insert: bool = True
    evict_access_weight: float = 1.0
    evict_age_weight: float = 1.0
    evict_action: ForgetAction = ForgetAction.ARCHIVE
    tiers: TierConfig = field(default_factory=TierConfig)
    sessions: SessionConfig = field(default_factory=SessionConfig)
    maintenance_batch: int = 256

    def __post_init__(self) -> None:
        if isinstance(self.merge_on_insert, bool):  # True: every memory, False: none
            object.__setattr__(self, "merge_on_insert", MergeOnInsert.ALL if self.merge_on_insert else MergeOnInsert.OFF)
        check_fields(self, _LIFECYCLE_RULES)

    def delta(self, signal: FeedbackSignal) -> float:
        return {FeedbackSignal.USED: self.used_delta, FeedbackSignal.UP: self.up_delta,
                FeedbackSignal.DOWN: self.down_delta}[signal]


_COUNT = Number(1, integer=True)
_LIFECYCLE_RULES: dict[str, Rule] = {
    "used_delta": Number(), "up_delta": Number(), "down_delta": Number(),
    "min_weight": Number(0), "max_weight": Number("min_weight", MAX_WEIGHT),  # what a memory may hold
    "stale_after": _COUNT, "access_flush_interval": Number(0), "access_batch": _COUNT,
    "merge_threshold": Number(-1, 1), "merge_candidates": _COUNT, "merge_on_insert": Choice(MergeOnInsert),
    "expiry_rules": Items(Instance(ExpiryRule, "an ExpiryRule")), "expired_action": Choice(ForgetAction), "review_weight": Number(), "capacity": Number(1, integer=True, optional=True),
    "capacity_on_insert": FLAG, "evict_access_weight": Number(), "evict_age_weight": Number(),
    "evict_action": Choice(ForgetAction), "tiers": Instance(TierConfig, "a TierConfig"),
    "sessions": Instance(SessionConfig, "a SessionConfig"), "maintenance_batch": _COUNT,
}


class ReviewDecision(str, Enum):
    """What to do with a memory in the review queue."""

    KEEP = "keep"  # clear the stale mark and a passed expiry; it stays active
    ARCHIVE = "archive"
    DELETE = "delete"
