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
    """A ``KnowledgeEvent``: one agent run or conversational turn to be turned into memories."""

    id: Optional[str] = Field(default=None, min_length=1, max_length=256,
                              description="Event id; an id already queued or processed is not processed again.")
    user_id: str = Field(min_length=1, max_length=_MAX_ID)
    query: str = ""
    response: str = ""
    session_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    agent_id: Optional[str] = Field(default=None, min_length=1, max_length=_MAX_ID)
    intermediate_steps: list[ToolCallIn] = Field(default_factory=list, max_length=_MAX_LIST)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: Optional[DateLike] = Field(default=None, description="ISO 8601 or epoch seconds; default now.")
    feedback: Optional[float] = Field(default=None, description="The user's rating: > 0 positive, < 0 negative.")


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


class HealthOut(_Out):
    status: Literal["ok"] = "ok"
    version: str


class ErrorOut(_Out):
    """Every error: ``error`` names the kind (a ``BeeWeaveError`` class name, or ``ValidationError``,
    ``Unauthorized``, ``Forbidden``, ``PayloadTooLarge``, ``NotFound``...), ``detail`` says what is wrong."""

    error: str
    detail: str
    errors: Optional[list[dict[str, Any]]] = None

