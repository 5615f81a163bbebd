"""Configuration of the ingestion pipeline."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import InvalidInputError
from ..records import MemoryTier
from .admission import AdmissionRules
from .memory_tools import MEMORY_TOOLS, tool_names
from .redact import PiiKind, PiiPattern

__all__ = ["QueueFullPolicy", "PatternScope", "Window", "PatternConfig", "IngestConfig"]


class QueueFullPolicy(str, Enum):
    """What ``ingest()`` does when ``max_pending`` events are waiting.

    - ``BLOCK`` (default): wait up to ``full_timeout`` seconds for the worker to make
      room, then raise :class:`QueueFullError`. A full queue means the worker cannot keep
      up; slowing the agent down briefly loses nothing, and a caller that must never
      wait long gets an error it can act on.
    - ``RAISE``: raise :class:`QueueFullError` at once.
    - ``DROP_OLDEST``: accept the new event and move the oldest waiting one to the dead
      letters (error "dropped: queue full"): it is kept, not processed, and
      ``retry_dead_letters()`` brings it back. For agents that must never wait.
    """

    BLOCK = "block"
    RAISE = "raise"
    DROP_OLDEST = "drop_oldest"


class PatternScope(str, Enum):
    """Whose questions are counted together: each user's own (``USER``) or everyone's."""

    USER = "user"
    GLOBAL = "global"


class Window(NamedTuple):
    """A sliding window: a key is hot when it was seen ``threshold`` times within ``span``."""

    span: timedelta
    threshold: int

    @property
    def name(self) -> str:
        secs = int(self.span.total_seconds())
        for unit, size, least in (("d", 86400, 2 * 86400), ("h", 3600, 3600), ("m", 60, 60)):
            if secs % size == 0 and secs >= least:
                return f"{secs // size}{unit}"  # 1h, 24h, 7d, 30m
        return f"{secs}s"


@dataclass(frozen=True)
class PatternConfig:
    """Recurring-question detection.

    Attributes:
        enabled: count questions at all.
        windows: the sliding windows; a key is hot when any window reaches its threshold.
        scope: count per user or across users (``GLOBAL`` pattern memories belong to
            ``shared_user_id``).
        shared_user_id: the owner of shared patterns: the tenant scope by default, so every
            user's search finds them (``beeweave_core.scopes.scope_owner("team:support")``
            for a team's).
        shared_users: a question asked by this many different users is a shared pattern: with
            ``USER`` scope, also counted across users and published to ``shared_user_id``
            (0: no shared patterns); with ``GLOBAL``, the users a pattern needs. Never one
            user's repeated question: it would copy that user's text into shared knowledge.
        weight: the weight of a pattern memory (ordinary memories have 1.0).
        max_examples: how many example questions a pattern keeps.
        max_hits: at most this many sightings are kept per key (the newest; counts stop there).
        refresh_every: while a key stays hot, its memory is rewritten (counts, best
            answer) every this many sightings.
    """

    enabled: bool = True
    windows: Sequence[Window] = (Window(timedelta(hours=1), 3), Window(timedelta(hours=24), 5))
    scope: PatternScope = PatternScope.USER
    shared_user_id: str = "scope:tenant"
    shared_users: int = 3
    weight: float = 2.0
    max_examples: int = 5
    max_hits: int = 200
    refresh_every: int = 10

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", PatternScope(self.scope))
        wins = tuple(Window(*w) for w in self.windows)
        if not wins or any(w.span.total_seconds() <= 0 or w.threshold < 1 for w in wins):
            raise InvalidInputError("pattern windows need a positive span and a threshold of at least 1")
        object.__setattr__(self, "windows", wins)
        if not isinstance(self.refresh_every, int) or self.refresh_every < 1:
            raise InvalidInputError("refresh_every must be a positive integer")
        if isinstance(self.shared_users, bool) or not isinstance(self.shared_users, int) or self.shared_users < 0:
            raise InvalidInputError("shared_users must be an integer >= 0")


@dataclass(frozen=True)
class IngestConfig:
    """How ``BeeWeave.ingest`` turns knowledge events into memories.

    Pass it as ``BeeWeave(..., ingest=IngestConfig(...))``.

    Attributes:
        redact: redact personal data and secrets before anything is stored or embedded.
        pii_kinds: which built-in kinds to redact (default: all).
        custom_patterns: extra :class:`PiiPattern` rules.
        redact_before_queue: redact on the caller's thread, before the event is written
            to the queue, so that raw personal data never touches the disk. Costs the
            caller about 0.3 ms per KB of text; off by default (the queue then holds an
            event only until it is processed, and processed events are zeroed).
        extractor: an ``Extractor`` (default: the offline one); e.g. ``LLMExtractor(llm)``.
        admission: :class:`AdmissionRules` (active vs pending review).
        patterns: :class:`PatternConfig` (recurring questions).
        tier: the tier of the memories an event becomes (default short-term: they expire
            after ``TierConfig.short_ttl`` unless use, feedback or importance promote
            them; see docs/lifecycle.md). Imported documents are long-term.
        tool_memories: store a tool call's output as its own memory (see ``pipeline``).
        skip_small_talk: a turn that teaches nothing (greetings and thanks answered in kind, a
            request answered by an acknowledgement alone) is not stored (``small_talk``).
        min_tool_output_chars: shorter tool outputs are not memories of their own.
        max_tool_output_chars: longer tool outputs are cut (with a marker) in the memory.
        memory_tools: the names of the memory's own tools (save, search, recall, the MCP
            server's): their calls never become memories, else a save would be stored twice
            and a recall would re-store what it recalled on every run. Default
            ``memory_tools.MEMORY_TOOLS`` (replace it to change the list, ``()`` for none);
            a client's prefix (``mcp__beeweave__save_memory``) is seen through.
        max_event_chars: a larger event is refused by ``ingest``.
        max_pending: the queue bound.
        when_full: :class:`QueueFullPolicy` when ``max_pending`` events wait.
        full_timeout: how long ``BLOCK`` waits before raising.
        batch_size: events per worker batch (one embedding call per batch).
        max_concurrency: at most this many events of a batch are prepared (redacted,
            extracted) at once, each on its own thread, when the extractor calls a model: a
            1-2 s model call then costs the batch about a second per ``max_concurrency``
            events instead of a second per event. Order is kept: the batch is stored in
            queue order, ``max_concurrency`` events at a time as their extraction ends, while
            the model reads the rest. The offline extractor is CPU work and runs on the
            worker alone. 16 keeps 100 events of a 1 s model within 10 s
            (benchmarks/RESULTS.md); lower it for a rate-limited model API, 1 for one call
            at a time.
        queue_path: a SQLite file for the queue (its table ``ingest_events``); by default
            the queue is a table of a SQLite store's own file, and a PostgreSQL store's is in
            its database. Another backend without a file keeps the queue in memory unless
            this is set, or ``queue`` is given.
        queue: a ready ``EventQueue`` (e.g. a PostgreSQL table queue).
        fsync: fsync every queued event (survives power loss; costs milliseconds). Without
            it an event is durable against the process dying, not the machine.
        autostart: start the worker on the first ``ingest``/on open. ``False`` leaves
            events queued until ``flush()`` or ``start_ingest()``.
        close_timeout: how long ``close()`` waits for the worker's current batch.
        retry_max_delay: while the store is unavailable (locked, down, unreachable), the
            worker keeps its batch pending and retries after 0.5 s, doubling the wait up to
            this many seconds, until the store is back; ``flush()`` retries at once. Other
            errors send an event to the dead letters.
    """

    redact: bool = True
    pii_kinds: Sequence[PiiKind | str] | None = None
    custom_patterns: Sequence[PiiPattern] = ()
    redact_before_queue: bool = False
    extractor: Any = None
    admission: AdmissionRules = field(default_factory=AdmissionRules)
    patterns: PatternConfig = field(default_factory=PatternConfig)
    tier: MemoryTier = MemoryTier.SHORT
    tool_memories: bool = True
    skip_small_talk: bool = True
    min_tool_output_chars: int = 20
    max_tool_output_chars: int = 8000
    memory_tools: Collection[str] = MEMORY_TOOLS
    max_event_chars: int = 1_000_000
    max_pending: int = 10_000
    when_full: QueueFullPolicy = QueueFullPolicy.BLOCK
    full_timeout: float = 5.0
    batch_size: int = 64
    max_concurrency: int = 16
    queue_path: str | Path | None = None
    queue: Any = None
    fsync: bool = False
    autostart: bool = True
    close_timeout: float = 30.0
    retry_max_delay: float = 10.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "when_full", QueueFullPolicy(self.when_full))
        object.__setattr__(self, "memory_tools", tool_names(self.memory_tools))
        try:
            object.__setattr__(self, "tier", MemoryTier(self.tier))
        except ValueError:
            raise InvalidInputError(f"tier must be working, short or long; got {self.tier!r}") from None
        for name in ("max_pending", "batch_size", "max_concurrency", "max_event_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
        for name in ("full_timeout", "close_timeout", "retry_max_delay"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise InvalidInputError(f"{name} must be a non-negative number of seconds")
        if not isinstance(self.admission, AdmissionRules):
            raise InvalidInputError("admission must be an AdmissionRules")
        if not isinstance(self.patterns, PatternConfig):
            raise InvalidInputError("patterns must be a PatternConfig")
        if self.extractor is not None and not hasattr(self.extractor, "extract"):
            raise InvalidInputError("extractor must have an extract(query, response, *, content) method; "
                                    "wrap a chat model in LLMExtractor(model)")
