"""Request and response bodies of the REST API (pydantic models; they make the OpenAPI spec).

Requests forbid unknown fields, so a misspelt filter or option is a 422 naming it
instead of being silently ignored. Values the engine checks (dates, ids, vectors) are
passed through and its ``InvalidInputError`` becomes a 400 with the engine's message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..fusion import FusionMode
from ..lifecycle.config import FeedbackSignal, ReviewDecision
from ..records import ChunkStatus, ContentType, Intent, RelationType
from ..stats import MemorySummary

__all__ = [
    "EventIn", "ToolCallIn", "IngestAccepted", "FiltersIn", "ExpandIn", "SearchIn", "SearchOut", "HitOut",
    "ChunkOut", "ChunksOut", "FeedbackIn", "IdsIn", "RejectIn", "IdsOut", "ResolveIn", "ReviewItemOut",
    "ReviewQueueOut", "TraceOut", "ForgetOut", "FlushOut", "StatsOut", "HealthOut", "ErrorOut",
    "ExportOut",
]

_MAX_ID = 512
_MAX_LIST = 1000

Id = Field(min_length=1, max_length=_MAX_ID)
StrOrList = Union[str, list[str]]
DateLike = Union[str, float]


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
    error: Optional[str] = Field(default=None, description="The error, if the call failed.")


class EventIn(_In):
    """A ``KnowledgeEvent``: one agent run or conversational turn to be turned into memories.

    The design document's spellings are accepted too: ``agent_response`` for ``response``,
    and ``intermediate_steps`` as LangChain ``[action, observation]`` pairs (the action an
    AgentAction's dict ``{"tool", "tool_input", ...}`` or the tool's name). ``tags``,
    ``expires_at``/``ttl``, ``pinned``, ``confidence``, ``importance`` and ``category`` apply
    to every memory the event becomes (also read from ``metadata`` when not given here).
    """

    id: Optional[str] = Field(default=None, min_length=1, max_length=256,
                              description="Event id; an id already queued or processed is not processed again.")
    user_id: str = Field(min_length=1, max_length=_MAX_ID)
    query: str = ""
    response: str = ""
    session_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    agent_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    agent_response: Optional[str] = Field(default=None, description="Another name of response (the design's).")
    intermediate_steps: list[Union[ToolCallIn, Annotated[list[Any], Field(min_length=2, max_length=2)]]] = Field(
        default_factory=list, max_length=_MAX_LIST)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: Optional[DateLike] = Field(default=None, description="ISO 8601 or epoch seconds; default now.")
    feedback: Optional[float] = Field(default=None, description="The user's rating: > 0 positive, < 0 negative.")
    tags: Optional[list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]]] = Field(default=None, max_length=100)
    expires_at: Optional[DateLike] = None
    ttl: Optional[float] = Field(default=None, gt=0, le=1e10, description="Seconds from the timestamp to the expiry.")
    pinned: Optional[bool] = None
    confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    importance: Optional[float] = Field(default=None, gt=0.0, le=1e6)
    category: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)

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

    user_id: Optional[StrOrList] = None
    agent_id: Optional[StrOrList] = None
    session_id: Optional[StrOrList] = None
    tags: Optional[StrOrList] = None
    tags_any: Optional[StrOrList] = None
    tags_all: Optional[StrOrList] = None
    entities: Optional[StrOrList] = None
    since: Optional[DateLike] = None
    until: Optional[DateLike] = None
    type: Optional[Union[ContentType, list[ContentType]]] = None
    intent: Optional[Union[Intent, list[Intent]]] = None
    status: Optional[Union[ChunkStatus, list[ChunkStatus]]] = None
    ids: Optional[StrOrList] = None

    def to_engine(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(mode="json").items() if v is not None}


class ExpandIn(_In):
    """Graph expansion: follow relationships from the hits."""

    hops: int = Field(default=1, ge=0, le=3)
    edge_types: Optional[list[RelationType]] = Field(default=None, max_length=len(RelationType))
    decay: float = Field(default=0.5, ge=0.0, le=1.0)
    limit: Optional[int] = Field(default=None, ge=0, le=100)


class SearchIn(_In):
    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=5, ge=0, description="How many hits (at most the server's max_k).")
    user_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    filters: Optional[FiltersIn] = None
    fusion: Optional[FusionMode] = None
    min_score: Optional[float] = None
    expand: Union[bool, ExpandIn, None] = None
    mmr: Optional[float] = Field(default=None, ge=0.0, le=1.0, description="MMR lambda (1 = relevance only).")
    loosen: bool = False
    query_embedding: Optional[list[Annotated[float, Field(ge=-3.4e38, le=3.4e38)]]] = Field(
        default=None, min_length=1, max_length=8192, description="A precomputed query vector (float32 range).")


class ProcessedContentOut(_Out):
    type: str
    text: str
    language: Optional[str] = None
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
    agent_id: Optional[str] = None
    session_id: Optional[str] = None
    processed_content: Optional[ProcessedContentOut] = None
    summary: Optional[str] = None
    tags: list[str] = []
    entities: list[str] = []
    intent: Optional[str] = None
    timestamp: str
    weight: float
    reinforced_at: Optional[str] = None
    confidence: float
    access_count: int
    last_accessed: Optional[str] = None
    expires_at: Optional[str] = None
    pinned: bool
    status: str
    relationships: list[RelationshipOut] = []
    metadata: dict[str, Any] = {}


class HitSourceOut(_Out):
    rank: int
    score: float
    via: Optional[str] = None
    from_id: Optional[str] = None
    hops: Optional[int] = None


class HitOut(_Out):
    chunk: ChunkOut
    score: float
    sources: dict[str, HitSourceOut]
    loosened: bool


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
    reason: Optional[str] = Field(default=None, max_length=2000)


class IdsOut(_Out):
    ids: list[str]


class ResolveIn(_In):
    chunk_id: str = Id
    decision: ReviewDecision


class ReviewItemOut(_Out):
    chunk_id: str
    user_id: Optional[str] = None
    reasons: list[str]
    flagged_at: str


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


# -- stats and health -----------------------------------------------------------------------------------
class LatencyOut(_Out):
    count: int
    p50: Optional[float] = None
    p95: Optional[float] = None
    p99: Optional[float] = None
    mean: Optional[float] = None
    max: Optional[float] = None


class GrowthOut(_Out):
    day: str
    added: int
    total: int


class StatsOut(_Out):
    generated_at: str
    user_id: Optional[str] = None
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
    used_share: Optional[float] = None
    dead_letters: int = 0
    pending_events: int = 0


class HealthOut(_Out):
    status: Literal["ok"] = "ok"
    version: str


class ErrorOut(_Out):
    """Every error: ``error`` names the kind (a ``BeeWeaveError`` class name, or ``ValidationError``,
    ``Unauthorized``, ``Forbidden``, ``PayloadTooLarge``, ``NotFound``...), ``detail`` says what is wrong."""

    error: str
    detail: str
    errors: Optional[list[dict[str, Any]]] = None



# -- one memory ----------------------------------------------------------------------------------------
class MemoryIn(_In):
    """A memory added directly (redacted and admitted like an ingested one)."""

    content: str = Field(min_length=1, max_length=200_000)
    user_id: str = Id
    id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID, description="Default: generated.")
    agent_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    session_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    tags: list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: Optional[DateLike] = None
    expires_at: Optional[DateLike] = None
    pinned: Optional[bool] = None
    confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    weight: Optional[float] = Field(default=None, gt=0.0, le=1e6)
    summary: Optional[str] = Field(default=None, max_length=10_000)
    entities: Optional[list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]]] = Field(default=None,
                                                                                           max_length=100)
    status: Optional[Literal["active", "pending"]] = Field(
        default=None, description="Default: what the admission rules decide.")

    def to_record(self) -> dict[str, Any]:
        data = {k: v for k, v in self.model_dump().items() if v is not None}
        if "id" in data:
            data["chunk_id"] = data.pop("id")
        return data


class MemoryPatch(_In):
    """The fields to change (absent fields stay; ``expires_at: null`` removes the expiry)."""

    content: Optional[str] = Field(default=None, min_length=1, max_length=200_000)
    tags: Optional[list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]]] = Field(default=None, max_length=100)
    pinned: Optional[bool] = None
    expires_at: Optional[DateLike] = None
    confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    weight: Optional[float] = Field(default=None, gt=0.0, le=1e6)
    status: Optional[ChunkStatus] = None
    metadata: Optional[dict[str, Any]] = None
    summary: Optional[str] = Field(default=None, max_length=10_000)

    def changes(self) -> dict[str, Any]:
        # Explicitly sent fields only; null is meaningful for expires_at and summary.
        sent = self.model_dump(mode="json", exclude_unset=True)
        return {k: v for k, v in sent.items() if v is not None or k in ("expires_at", "summary")}


class MemoryPageOut(_Out):
    memories: list[ChunkOut]
    next_cursor: Optional[str] = None


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


class RelationshipsOut(_Out):
    id: str
    relationships: list[RelationshipOut]


class RelateIn(_In):
    source_id: str = Id
    target_id: str = Id
    type: str = Field(min_length=1, max_length=64, description="A relation type (user-defined types allowed).")
    weight: float = Field(default=1.0, ge=0.0, le=1e6)
    note: Optional[str] = Field(default=None, max_length=2000)


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
    answer_id: Optional[str] = None
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
    ids: Optional[list[Annotated[str, Field(min_length=1, max_length=256)]]] = Field(
        default=None, max_length=_MAX_LIST, description="Event ids; omit to retry every dead letter.")


class RetriedOut(_Out):
    retried: int


# -- the design document's contract --------------------------------------------------------------------
class SemanticSearchIn(_In):
    query: str = Field(min_length=1, max_length=10_000)
    session_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID,
                                      description="Only memories of this session.")
    user_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    top_k: int = Field(default=5, ge=0)
    tags: Optional[list[Annotated[str, Field(min_length=1, max_length=_MAX_ID)]]] = Field(
        default=None, max_length=100, description="Memories with any of these tags.")


class SemanticResultOut(_Out):
    id: str
    query: str
    agent_response: str
    score: float
    session_id: Optional[str] = None
    user_id: str
    tags: list[str] = []
    timestamp: str
    metadata: dict[str, Any] = {}


class SemanticSearchOut(_Out):
    results: list[SemanticResultOut]
    took_ms: float


class EventOut(_Out):
    seq: int
    type: str
    chunk_id: Optional[str] = None
    user_id: Optional[str] = None
    agent_id: Optional[str] = None
    tags: list[str] = []
    data: dict[str, Any] = {}
    at: str
