"""Configuration of the ingestion pipeline."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from ..config_rules import FLAG, TEXT, Choice, Instance, Items, Number, Rule, check_fields
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
        check_fields(self, _PATTERN_RULES)
        if not self.windows:
            raise InvalidInputError("PatternConfig.windows must hold at least one window")


def _window(value: Any) -> Any:
    """A (span, threshold) pair as a ``Window``; anything else as given, for the rule to refuse."""
    try:
        return Window(*value)
    except TypeError:
        return value


class _WindowRule:
    """A ``Window`` (or a (span, threshold) pair) with a positive span and a threshold of at least 1."""

    def check(self, name: str, value: Any, config: Any) -> Any:
        w = _window(value)
        if (not isinstance(w, Window) or not isinstance(w.span, timedelta) or w.span <= timedelta(0)
                or isinstance(w.threshold, bool) or not isinstance(w.threshold, int) or w.threshold < 1):
            raise InvalidInputError(f"{name} must be {self.text()}, got {value!r}")
        return w

    def text(self) -> str:
        return "a Window(span, threshold) with a positive timedelta span and a threshold of at least 1"


_COUNT = Number(1, integer=True)
_PATTERN_RULES: dict[str, Rule] = {
    "enabled": FLAG, "windows": Items(_WindowRule()), "scope": Choice(PatternScope), "shared_user_id": TEXT,
    "shared_users": Number(0, integer=True), "weight": Number(0, open_low=True), "max_examples": _COUNT,
    "max_hits": _COUNT, "refresh_every": _COUNT,
}


@dataclass(frozen=True)
class IngestConfig:
    """How ``BeeWeave.ingest`` turns knowledge events into memories.

    Pass it as ``BeeWeave(..., ingest=IngestConfig(...))``.

    Attributes:
        redact: redact personal data and secrets before anything is stored or embedded.
        pii_kinds: which built-in kinds to redact (default: all).
        custom_patterns: extra :class:`PiiPattern` rules.
        redact_before_queue: redact on the caller's thread, before the event is written
            to the queue file, so that raw personal data never touches the disk. Costs
            the caller the redaction's time, which grows with the text; off by default (the queue file then
            holds an event only until it is processed, and processed events are zeroed).
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
            slow model call then costs the batch one call's time per ``max_concurrency``
            events instead of one per event. Order is kept: the batch is stored in
            queue order, ``max_concurrency`` events at a time as their extraction ends, while
            the model reads the rest. The offline extractor is CPU work and runs on the
            worker alone. The default, 16, meets the target for a slow model (benchmarks/RESULTS.md,
            "Ingest with a slow extraction model"); lower it for a rate-limited model API, 1 for one call
            at a time.
        queue_path: where the queue file goes; default ``<db>.queue`` beside a SQLite
            store. A backend without a file (e.g. PostgreSQL) keeps the queue in memory
            unless this is set, or ``queue`` is given.
        queue: a ready ``EventQueue`` (e.g. a PostgreSQL table queue).
        fsync: fsync every queued event (survives power loss; costs milliseconds). Without
            it an event is durable against the process dying, not the machine.
        journal_bytes: the size of the memory-mapped intake file (``<queue>.intake``) that
            ``ingest()`` appends to; when it is full, the caller moves it into the queue.
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
    journal_bytes: int = 16 << 20
    autostart: bool = True
    close_timeout: float = 30.0
    retry_max_delay: float = 10.0

    def __post_init__(self) -> None:
        check_fields(self, _INGEST_RULES)
        object.__setattr__(self, "memory_tools", tool_names(self.memory_tools))  # refuses what is not a name
        if self.extractor is not None and not hasattr(self.extractor, "extract"):
            raise InvalidInputError("IngestConfig.extractor must have an extract(query, response, *, content) method; "
                                    "wrap a chat model in LLMExtractor(model)")


_SECONDS = Number(0)
_INGEST_RULES: dict[str, Rule] = {
    "redact": FLAG, "pii_kinds": Items(Choice(PiiKind), optional=True),
    "custom_patterns": Items(Instance(PiiPattern, "a PiiPattern(name, pattern, ...)")), "redact_before_queue": FLAG, "admission": Instance(AdmissionRules, "an AdmissionRules"),
    "patterns": Instance(PatternConfig, "a PatternConfig"), "tier": Choice(MemoryTier), "tool_memories": FLAG,
    "skip_small_talk": FLAG, "memory_tools": Instance((str, Collection), "tool names"), "min_tool_output_chars": Number(0, integer=True),
    "max_tool_output_chars": Number(0, integer=True), "max_event_chars": _COUNT, "max_pending": _COUNT,
    "when_full": Choice(QueueFullPolicy), "full_timeout": _SECONDS, "batch_size": _COUNT, "max_concurrency": _COUNT,
    "queue_path": Instance((str, os.PathLike), "a path", optional=True), "fsync": FLAG, "journal_bytes": _COUNT, "autostart": FLAG, "close_timeout": _SECONDS,
    "retry_max_delay": _SECONDS,
}
