"""Request and response bodies of the REST API (pydantic models; they make the OpenAPI spec).

Requests forbid unknown fields, so a misspelt filter or option is a 422 naming it
instead of being silently ignored. Values the engine checks (dates, ids, vectors) are
passed through and its ``InvalidInputError`` becomes a 400 with the engine's message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

from ..defaults import DEFAULT_TOP_K
from ..fusion import FusionMode
from ..lifecycle.config import FeedbackSignal, ReviewDecision
from ..records import ChunkStatus, ContentType, Intent, MemoryTier, RelationType
from ..stats import MemorySummary
from ..validation import MAX_WEIGHT

__all__ = [
    "EventIn", "ToolCallIn", "IngestAccepted", "FiltersIn", "ExpandIn", "SearchIn", "SearchOut", "HitOut",
    "ChunkOut", "ChunksOut", "FeedbackIn", "IdsIn", "RejectIn", "IdsOut", "ResolveIn", "DecideIn", "ReviewItemOut", "ReviewWaitingOut", "ReviewOut",
    "ReviewQueueOut", "TraceOut", "ForgetOut", "FlushOut", "StatsOut", "HealthOut", "ErrorOut",
    "ExportOut", "AccessOut",
]

_MAX_ID = 512
_MAX_LIST = 1000

Id = Field(min_length=1, max_length=_MAX_ID)
StrOrList = str | list[str]
FieldValue = StrictBool | StrictInt | StrictFloat | StrictStr  # a declared field's value: never coerced
DateLike = str | float


def _check_unicode(data: Any) -> Any:
    """JSON may carry a lone surrogate ("\\ud800"); no stored text may hold one. Iterative, so
    deeply nested metadata cannot exhaust the stack."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"text holds a lone surrogate at position {exc.start}; send valid Unicode") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return data


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return _check_unicode(data)


class _Out(BaseModel):
    # Newer engines may add fields; they pass through instead of failing the response.
    model_config = ConfigDict(extra="allow")


# -- ingest ---------------------------------------------------------------------------------------
class ToolCallIn(_In):
    tool: str = Field(min_length=1, max_length=_MAX_ID, description="The tool's name.")
    input: Any = Field(default=None, description="What the tool was given (any JSON).")
    output: Any = Field(default=None, description="What it returned (any JSON).")
    error: str | None = Field(default=None, description="The error, if the call failed.")


class EventIn(_In):
    """A ``KnowledgeEvent``: one agent run or conversational turn to be turned into memories.

    The design document's spellings are accepted too: ``agent_response`` for ``response``,
    and ``intermediate_steps`` as LangChain ``[action, observation]`` pairs (the action an
    AgentAction's dict ``{"tool", "tool_input", ...}`` or the tool's name). ``tags``,
    ``expires_at``/``ttl``, ``pinned``, ``confidence``, ``importance`` and ``category`` apply
    to every memory the event becomes (also read from ``metadata`` when not given here).
    """

    id: str | None = Field(default=None, min_length=1, max_length=256,
                              description="Event id; an id already queued or processed is not processed again.")
    user_id: str = Field(min_length=1, max_length=_MAX_ID)
    query: str = ""
    response: str = ""
    session_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)
    agent_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)
    agent_response: str | None = Field(default=None, description="Another name of response (the design's).")
    intermediate_steps: list[ToolCallIn | Annotated[list[Any], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list, max_length=_MAX_LIST)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: DateLike | None = Field(default=None, description="ISO 8601 or epoch seconds; default now.")
    feedback: float | None = Field(default=None, description="The user's rating: > 0 positive, < 0 negative.")
    tags: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] | None = Field(default=None, max_length=100)
    expires_at: DateLike | None = None
    ttl: float | None = Field(default=None, gt=0, le=1e10, description="Seconds from the timestamp to the expiry.")
    pinned: bool | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    importance: float | None = Field(default=None, gt=0.0, le=1e6)
    category: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)

    def to_event(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class IngestAccepted(_Out):
    id: str
    status: Literal["queued"] = "queued"


class FlushOut(_Out):
    drained: bool
    pending: int


# -- search ---------------------------------------------------------------------------------------
class FiltersIn(_In):
    """Filters run inside retrieval; each list means "any of"."""

    user_id: StrOrList | None = None
    agent_id: StrOrList | None = None
    session_id: StrOrList | None = None
    tags: StrOrList | None = None
    tags_any: StrOrList | None = None
    tags_all: StrOrList | None = None
    entities: StrOrList | None = None
    since: DateLike | None = None
    until: DateLike | None = None
    type: ContentType | list[ContentType] | None = None
    intent: Intent | list[Intent] | None = None
    status: ChunkStatus | list[ChunkStatus] | None = None
    ids: StrOrList | None = None
    tier: MemoryTier | list[MemoryTier] | None = None
    # Any other key is a declared metadata field (GET /api/v1/fields); the engine refuses the
    # undeclared ones with the list of known keys, as it does in the library.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    __pydantic_extra__: dict[str, FieldValue | list[FieldValue]]

    def to_engine(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(mode="json").items() if v is not None}


class ExpandIn(_In):
    """Graph expansion: follow relationships from the hits."""

    hops: int = Field(default=1, ge=0, le=3)
    edge_types: list[RelationType] | None = Field(default=None, max_length=len(RelationType))
    decay: float = Field(default=0.5, ge=0.0, le=1.0)
    limit: int | None = Field(default=None, ge=0, le=100)


class SearchIn(_In):
    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=DEFAULT_TOP_K, ge=0, description="How many hits (at most the server's max_k).")
    user_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)
    filters: FiltersIn | None = None
    fusion: FusionMode | None = None
    min_score: float | None = None
    min_relevance: float | None = Field(default=None, ge=0.0, le=1.0,
                                        description="Drop hits whose calibrated relevance is below this.")
    abstain_below: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Return no hit when no hit's calibrated relevance reaches this (nothing relevant). "
                    "Absent or null: the store's default gate (SearchConfig.abstain_below); 0 turns any gate off.")
    expand: bool | ExpandIn | None = None
    mmr: float | None = Field(default=None, ge=0.0, le=1.0, description="MMR lambda (1 = relevance only).")
    loosen: bool = False
    query_embedding: list[Annotated[float, Field(ge=-3.4e+38, le=3.4e+38)]] | None = Field(
        default=None, min_length=1, max_length=8192, description="A precomputed query vector (float32 range).")
    as_of: DateLike | None = Field(
        default=None, description="Search the memory as it was then (ISO 8601 or epoch seconds): nothing stored "
                                  "later, and of a fact that changed, the statement valid then first.")
    scopes: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] | None = Field(
        default=None, min_length=1, max_length=64,
        description='Whose memories to read: "user" (the user\'s own), "tenant", shared scopes such as '
                    '"project:atlas/module:parser". Absent: the user\'s, the tenant\'s and the scopes the key reads.')


class ProcessedContentOut(_Out):
    type: str
    text: str
    language: str | None = None
    payload: Any = None


class RelationshipOut(_Out):
    source_id: str
    target_id: str
    type: str
    weight: float


class ChunkOut(_Out):
    """A ``KnowledgeChunk`` as JSON (``KnowledgeChunk.to_dict()``)."""

    id: str
    raw_content: str
    user_id: str
    agent_id: str | None = None
    session_id: str | None = None
    processed_content: ProcessedContentOut | None = None
    summary: str | None = None
    tags: list[str] = []
    entities: list[str] = []
    intent: str | None = None
    timestamp: str
    weight: float
    reinforced_at: str | None = None
    confidence: float
    access_count: int
    last_accessed: str | None = None
    expires_at: str | None = None
    pinned: bool
    status: str
    tier: str = "long"  # a server from before tiers sends none: its memories are long-term
    relationships: list[RelationshipOut] = []
    metadata: dict[str, Any] = {}
    valid_from: str | None = None  # a fact's bi-temporal validity (see lifecycle/timeline.py)
    invalid_at: str | None = None


class HitSourceOut(_Out):
    rank: int
    score: float
    via: str | None = None
    from_id: str | None = None
    hops: int | None = None


class HitOut(_Out):
    """One search hit: ``relevance`` is its calibrated relevance in [0, 1] (comparable across
    searches), ``score`` the fused score that ranked it (meaningful within one search only)."""

    chunk: ChunkOut
    score: float
    sources: dict[str, HitSourceOut]
    loosened: bool
    time_range: dict[str, str] | None = None
    relevance: float | None = None
    superseded: bool = False  # a newer statement of the same fact replaced it (at the time searched)


class SearchOut(_Out):
    hits: list[HitOut]
    took_ms: float


class ChunksOut(_Out):
    chunks: list[ChunkOut]


class TraceOut(_Out):
    session_id: str
    chunks: list[ChunkOut]


# -- feedback and review ----------------------------------------------------------------------------
class FeedbackIn(_In):
    chunk_ids: list[str] = Field(min_length=1, max_length=_MAX_LIST)
    signal: FeedbackSignal


class IdsIn(_In):
    ids: list[str] = Field(min_length=1, max_length=_MAX_LIST)


class RejectIn(IdsIn):
    reason: str | None = Field(default=None, max_length=2000)


class IdsOut(_Out):
    ids: list[str]


class ResolveIn(_In):
    chunk_id: str = Id
    decision: ReviewDecision


class DecideIn(IdsIn):
    decision: ReviewDecision
    reason: str | None = Field(default=None, max_length=2000)


class ReviewItemOut(_Out):
    chunk_id: str
    user_id: str | None = None
    reasons: list[str]
    flagged_at: str


class ReviewWaitingOut(ReviewItemOut):
    chunk: ChunkOut


class ReviewOut(_Out):
    items: list[ReviewWaitingOut]


class ReviewQueueOut(_Out):
    items: list[ReviewItemOut]


# -- users --------------------------------------------------------------------------------------------
class ForgetOut(_Out):
    user_id: str
    deleted: int


class ExportOut(_Out):
    format: str
    user_id: str
    exported_at: str
    chunks: list[ChunkOut]
    versions: list[dict[str, Any]]
    audit: list[dict[str, Any]]
    facts: dict[str, Any]
    conflicts: dict[str, Any]
    review: list[ReviewItemOut]
    hot_patterns: list[dict[str, Any]]
    searches: list[dict[str, Any]]
    watches: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[dict[str, Any]] = Field(default_factory=list)
    timeline: dict[str, Any] = Field(default_factory=dict)
    sessions: dict[str, Any] = Field(default_factory=dict)
    patterns: dict[str, Any] = Field(default_factory=dict)
    rejected: dict[str, Any] = Field(default_factory=dict)
    used: dict[str, Any] = Field(default_factory=dict)


class ImportCheckOut(_Out):
    """``POST /users/{user_id}/import/check``: the export would be imported (nothing written)."""

    user_id: str
    checked: bool


class ImportOut(_Out):
    """What ``POST /users/{user_id}/import`` wrote (``ImportReport``)."""

    user_id: str
    memories: int
    skipped: int
    relationships: int
    versions: int
    audit: int
    dropped_relationships: int
    other: dict[str, int]


# -- stats and health -----------------------------------------------------------------------------------
class LatencyOut(_Out):
    count: int
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    max: float | None = None


class GrowthOut(_Out):
    day: str
    added: int
    total: int


class StatsOut(_Out):
    generated_at: str
    user_id: str | None = None
    total: int
    by_status: dict[str, int]
    by_agent: dict[str, int]
    by_intent: dict[str, int]
    growth: list[GrowthOut]
    hottest: list[MemorySummary]
    newest: list[MemorySummary]
    latency: LatencyOut
    searches: int
    searches_with_hits: int
    searches_used: int
    used_share: float | None = None
    dead_letters: int = 0
    pending_events: int = 0
    model_loads: int = Field(0, description="Recorded searches that first loaded the embedding model; "
                             "that load is not in latency.")
    model_load_ms: float | None = Field(None, description="The longest such model load, in milliseconds.")


class AccessOut(_Out):
    """What the request's API key may do (``GET /api/v1/me``)."""

    tenant: str
    users: list[str] | None = Field(description="The users the key may touch; null: every user of the tenant.")
    admin: bool


FieldType = Literal["str", "int", "float", "bool"]  # fields.FIELD_TYPES


class FieldsIn(_In):
    """Metadata fields to declare as filters (``BeeWeave.declare_fields``)."""

    fields: dict[str, FieldType] = Field(min_length=1, max_length=100,
                                         description="Field name (an identifier) to its type.")


class FieldsOut(_Out):
    """The store's declared metadata fields, usable as keys of ``filters``."""

    fields: dict[str, FieldType]


class HealthOut(_Out):
    status: Literal["ok"] = "ok"
    version: str


class ErrorOut(_Out):
    """Every error: ``error`` names the kind (a ``BeeWeaveError`` class name, or ``ValidationError``,
    ``Unauthorized``, ``Forbidden``, ``PayloadTooLarge``, ``NotFound``...), ``detail`` says what is wrong."""

    error: str
    detail: str
    errors: list[dict[str, Any]] | None = None



# -- one memory ----------------------------------------------------------------------------------------
class MemoryIn(_In):
    """A memory added directly (redacted and admitted like an ingested one)."""

    content: str = Field(min_length=1, max_length=200_000)
    user_id: str = Id
    id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID, description="Default: generated.")
    agent_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)
    session_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)
    tags: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: DateLike | None = None
    expires_at: DateLike | None = None
    pinned: bool | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    weight: float | None = Field(default=None, ge=0.0, le=MAX_WEIGHT)
    summary: str | None = Field(default=None, max_length=10_000)
    entities: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] | None = Field(default=None,
                                                                                           max_length=100)
    status: Literal["active", "pending"] | None = Field(
        default=None, description="Default: what the admission rules decide.")
    tier: MemoryTier | None = Field(default=None, description="Default: long.")

    def to_record(self) -> dict[str, Any]:
        data = {k: v for k, v in self.model_dump().items() if v is not None}
        if "id" in data:
            data["chunk_id"] = data.pop("id")
        return data


class MemoryPatch(_In):
    """The fields to change (absent fields stay; ``expires_at: null`` removes the expiry)."""

    content: str | None = Field(default=None, min_length=1, max_length=200_000)
    tags: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] | None = Field(default=None, max_length=100)
    pinned: bool | None = None
    expires_at: DateLike | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    weight: float | None = Field(default=None, ge=0.0, le=MAX_WEIGHT)
    status: ChunkStatus | None = None
    metadata: dict[str, Any] | None = None
    summary: str | None = Field(default=None, max_length=10_000)

    def changes(self) -> dict[str, Any]:
        # Explicitly sent fields only; null is meaningful for expires_at and summary.
        sent = self.model_dump(mode="json", exclude_unset=True)
        return {k: v for k, v in sent.items() if v is not None or k in ("expires_at", "summary")}


class MemoryPageOut(_Out):
    memories: list[ChunkOut]
    next_cursor: str | None = None


class DeletedOut(_Out):
    id: str
    deleted: bool


class VersionOut(_Out):
    seq: int
    chunk: ChunkOut
    replaced_at: str
    reason: str


class HistoryOut(_Out):
    id: str
    versions: list[VersionOut]


class LineageOut(_Out):
    id: str
    user_id: str
    agents: list[str] = []
    events: list[str] = []
    tools: list[str] = []
    sources: list[Any] = []
    merged_from: list[dict[str, Any]] = []
    merged_into: str | None = None
    edits: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    feedback: dict[str, Any] = {}
    relations: list[dict[str, Any]] = []
    code: dict[str, Any] | None = None


class RelationshipsOut(_Out):
    id: str
    relationships: list[RelationshipOut]


class RelateIn(_In):
    source_id: str = Id
    target_id: str = Id
    type: str = Field(min_length=1, max_length=64, description="A relation type (user-defined types allowed).")
    weight: float = Field(default=1.0, ge=0.0, le=1e6)
    note: str | None = Field(default=None, max_length=2000)


class FactsOut(_Out):
    user_id: str
    facts: dict[str, ChunkOut]


class HotPatternOut(_Out):
    key: str
    user_id: str
    intent: str
    terms: list[str]
    query: str
    examples: list[str]
    counts: dict[str, int]
    memory_id: str
    answer_id: str | None = None
    first_seen: str
    last_seen: str


class HotPatternsOut(_Out):
    patterns: list[HotPatternOut]


class DeadLetterOut(_Out):
    event: dict[str, Any]
    error: str
    attempts: int
    failed_at: str


class DeadLettersOut(_Out):
    dead_letters: list[DeadLetterOut]


class RetryIn(_In):
    ids: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(
        default=None, max_length=_MAX_LIST, description="Event ids; omit to retry every dead letter.")


class RetriedOut(_Out):
    retried: int


# -- the design document's contract --------------------------------------------------------------------
class SemanticSearchIn(_In):
    query: str = Field(min_length=1, max_length=10_000)
    session_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID,
                                      description="Only memories of this session.")
    user_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID)
    top_k: int = Field(default=DEFAULT_TOP_K, ge=0)
    tags: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] | None = Field(
        default=None, max_length=100, description="Memories with any of these tags.")


class WatchIn(_In):
    query: str = Field(min_length=1, max_length=10_000)
    user_id: str = Field(min_length=1, max_length=_MAX_ID)
    agent_id: str | None = Field(default=None, min_length=1, max_length=_MAX_ID,
                                 description="The agent the watch.matched events are addressed to.")
    min_relevance: float = Field(default=0.5, ge=0.0, le=1.0)


class WatchOut(_Out):
    id: str
    query: str
    user_id: str
    agent_id: str | None = None
    min_relevance: float
    fired: int = 0


class WatchesOut(_Out):
    watches: list[WatchOut]


class SemanticResultOut(_Out):
    id: str
    query: str
    agent_response: str
    score: float
    session_id: str | None = None
    user_id: str
    tags: list[str] = []
    timestamp: str
    metadata: dict[str, Any] = {}


class SemanticSearchOut(_Out):
    results: list[SemanticResultOut]
    took_ms: float
