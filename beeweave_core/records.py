"""Typed records: the knowledge chunk, its relationships and search hits.

Every record converts to plain JSON-able dicts and back without loss, so the
same shapes travel through SQLite, PostgreSQL, the REST API and the adapters.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from .errors import InvalidInputError
from .timewords import TimeRange
from .validation import check_chunk, str_items, to_datetime

__all__ = [
    "ContentType",
    "ChunkStatus",
    "ALL_STATUSES",
    "MemoryTier",
    "Intent",
    "RelationType",
    "USER_RELATIONS",
    "ProcessedContent",
    "Relationship",
    "KnowledgeChunk",
    "HitSource",
    "SearchHit",
    "utcnow",
    "to_datetime",
    "new_id",
]


class ContentType(str, Enum):
    TEXT = "text"
    CODE = "code"
    DATA = "data"


class ChunkStatus(str, Enum):
    ACTIVE = "active"
    PENDING = "pending"
    ARCHIVED = "archived"
    MERGED = "merged"
    EXPIRED = "expired"


# Every status: a filter's ``status`` that reaches archived, merged and pending memories too.
ALL_STATUSES = [s.value for s in ChunkStatus]


class MemoryTier(str, Enum):
    """How long a memory is meant to live (docs/lifecycle.md, "Tiers").

    ``working``: the current session's turns; ``short``: what was learnt lately (expires
    after the short-term TTL unless promoted); ``long``: kept until evicted or forgotten.
    """

    WORKING = "working"
    SHORT = "short"
    LONG = "long"


class Intent(str, Enum):
    INFORMATION_QUERY = "information_query"
    CODE_GENERATION = "code_generation"
    DOCUMENT_WRITING = "document_writing"
    PROBLEM_DIAGNOSIS = "problem_diagnosis"
    OTHER = "other"


class RelationType(str, Enum):
    """Edge types. The first five are mined or written by BeeWeave itself; the logical
    relations below them are recorded by callers with ``BeeWeave.relate``."""

    SEMANTIC = "semantic"
    SESSION = "session"
    ENTITY = "entity"
    TAG = "tag"
    MERGED_INTO = "merged_into"
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    CITES = "cites"
    CAUSES = "causes"
    DERIVED_FROM = "derived_from"
    RELATED = "related"


# The relations a caller may record; the others are BeeWeave's own bookkeeping.
USER_RELATIONS = frozenset({RelationType.SUPPORTS, RelationType.CONTRADICTS, RelationType.CITES,
                            RelationType.CAUSES, RelationType.DERIVED_FROM, RelationType.RELATED})


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> str:
    return uuid.uuid4().hex


def _enum(cls: type[Enum], value: Any, name: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in cls)
        raise InvalidInputError(f"{name} must be one of {allowed}; got {value!r}") from None


@dataclass
class ProcessedContent:
    """The normalized form of a memory: plain text, code with its language, or data."""

    type: ContentType = ContentType.TEXT
    text: str = ""
    language: str | None = None
    payload: Any = None  # parsed JSON / table rows for ContentType.DATA

    def __post_init__(self) -> None:
        self.type = _enum(ContentType, self.type, "processed_content.type")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value, "text": self.text, "language": self.language, "payload": self.payload}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessedContent:
        kw: dict[str, Any] = {k: data.get(k) for k in ("type", "text", "language", "payload") if k in data}
        return cls(**kw)


@dataclass(frozen=True)
class Relationship:
    """A typed, weighted edge from one chunk to another."""

    source_id: str
    target_id: str
    type: RelationType
    weight: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", _enum(RelationType, self.type, "relationship type"))
        # A weight read back from JSON (PostgreSQL's json_agg) is 1 for 1.0: one type on every backend.
        if type(self.weight) is int:
            object.__setattr__(self, "weight", float(self.weight))

    def to_dict(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "target_id": self.target_id, "type": self.type.value, "weight": self.weight}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Relationship:
        return cls(data["source_id"], data["target_id"], data["type"], float(data.get("weight", 1.0)))


@dataclass
class KnowledgeChunk:
    """One memory. ``raw_content`` is what was said; the rest is derived or bookkeeping."""

    raw_content: str
    user_id: str
    id: str = field(default_factory=new_id)
    agent_id: str | None = None
    session_id: str | None = None
    processed_content: ProcessedContent | None = None
    summary: str | None = None
    tags: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    intent: Intent | None = None
    timestamp: datetime = field(default_factory=utcnow)
    weight: float = 1.0
    reinforced_at: datetime | None = None  # when feedback last changed ``weight`` (decay runs from here)
    confidence: float = 1.0
    access_count: int = 0
    last_accessed: datetime | None = None
    expires_at: datetime | None = None
    pinned: bool = False
    status: ChunkStatus = ChunkStatus.ACTIVE
    tier: MemoryTier = MemoryTier.LONG  # records stored before tiers existed read back as long-term
    relationships: list[Relationship] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    # Bi-temporal validity of a fact (what the memory states was true from ``valid_from``
    # until ``invalid_at``, when a newer statement superseded it). None: not a fact with a
    # timeline, or still valid. Records stored before these fields read back with None.
    valid_from: datetime | None = None
    invalid_at: datetime | None = None

    def __post_init__(self) -> None:
        pc = self.processed_content
        if pc is None:
            self.processed_content = ProcessedContent(ContentType.TEXT, self.raw_content)
        elif isinstance(pc, Mapping):
            self.processed_content = ProcessedContent.from_dict(dict(pc))
        elif not isinstance(pc, ProcessedContent):  # e.g. a list in an imported file
            raise InvalidInputError(f"processed_content must be an object with type and text, got {type(pc).__name__}")
        self.status = _enum(ChunkStatus, self.status, "status")
        self.tier = _enum(MemoryTier, self.tier, "tier")
        if self.intent is not None:
            self.intent = _enum(Intent, self.intent, "intent")
        self.timestamp = to_datetime(self.timestamp)
        if self.last_accessed is not None:
            self.last_accessed = to_datetime(self.last_accessed, "last_accessed")
        if self.reinforced_at is not None:
            self.reinforced_at = to_datetime(self.reinforced_at, "reinforced_at")
        if self.expires_at is not None:
            self.expires_at = to_datetime(self.expires_at, "expires_at")
        if self.valid_from is not None:
            self.valid_from = to_datetime(self.valid_from, "valid_from")
        if self.invalid_at is not None:
            self.invalid_at = to_datetime(self.invalid_at, "invalid_at")
        self.tags = str_items("tags", self.tags)
        self.entities = str_items("entities", self.entities)
        self.relationships = [r if isinstance(r, Relationship) else Relationship.from_dict(r) for r in self.relationships]
        check_chunk(self)  # a chunk that exists is storable (records read back from a store skip this)

    @property
    def content(self) -> str:
        """The text that is indexed: the normalized text, else the raw content."""
        pc = self.processed_content
        return pc.text if pc is not None and pc.text else self.raw_content

    @classmethod
    def _field_names(cls) -> tuple[str, ...]:
        # dataclasses.fields() rebuilds its tuple at every call: a search reads dozens of
        # records, so the names are computed once per class.
        names = cls.__dict__.get("_names_cache")
        if names is None:
            names = tuple(f.name for f in fields(cls))
            type.__setattr__(cls, "_names_cache", names)
        return names

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self._field_names():
            v = getattr(self, name)
            if isinstance(v, Enum):
                v = v.value
            elif isinstance(v, datetime):
                v = v.isoformat()
            elif isinstance(v, ProcessedContent):
                v = v.to_dict()
            elif name == "relationships":
                v = [r.to_dict() for r in v]
            elif isinstance(v, list):
                v = list(v)
            out[name] = v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnowledgeChunk:
        unknown = set(data).difference(cls._field_names())
        if unknown:
            raise InvalidInputError(f"unknown KnowledgeChunk fields: {sorted(unknown)}")
        return cls(**data)

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> KnowledgeChunk:
        """A record as a store wrote it (``to_dict`` of a chunk that was validated then),
        built without validating it again: a search reads ~20 records and validation was
        half of their decoding. Anything else (missing or unknown fields, an older shape)
        takes ``from_dict``. ``data`` is consumed."""
        names = cls._field_names()
        rels = data.setdefault("relationships", [])  # stores keep edges apart from the record
        for name in _OPTIONAL_LATER:  # records written before these fields existed stay on the fast path
            data.setdefault(name, None)
        if len(data) != len(names) or not all(n in data for n in names):
            return cls.from_dict(data)
        for name in _STORED_TIMES:
            v = data[name]
            if v is not None:
                data[name] = datetime.fromisoformat(v)  # written by isoformat() of a UTC datetime
        pc = data["processed_content"]
        if pc is not None:
            if len(pc) == 4 and "payload" in pc and "language" in pc and "text" in pc:
                pc["type"] = _CONTENT_TYPES[pc["type"]]
                obj = ProcessedContent.__new__(ProcessedContent)
                obj.__dict__.update(pc)
                pc = obj
            else:
                pc = ProcessedContent.from_dict(pc)
        data["processed_content"] = pc
        data["status"] = _STATUSES[data["status"]]
        data["tier"] = _TIERS[data["tier"]]
        if data["intent"] is not None:
            data["intent"] = Intent(data["intent"])
        if rels:
            data["relationships"] = [Relationship.from_dict(r) for r in rels]
        chunk = cls.__new__(cls)
        chunk.__dict__.update(data)
        return chunk

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KnowledgeChunk:
        return cls.from_dict(json.loads(text))

    def copy(self, **changes: Any) -> KnowledgeChunk:
        return replace(self, **changes)


_STORED_TIMES = ("timestamp", "reinforced_at", "last_accessed", "expires_at", "valid_from", "invalid_at")
_OPTIONAL_LATER = ("valid_from", "invalid_at")  # fields added after stores existed
_CONTENT_TYPES = {m.value: m for m in ContentType}
_STATUSES = {m.value: m for m in ChunkStatus}
_TIERS = {m.value: m for m in MemoryTier}


@dataclass(frozen=True)
class HitSource:
    """How one retriever saw a hit: its rank (1-based) and raw score, or the edge it came by."""

    rank: int
    score: float
    via: str | None = None  # edge type, for graph expansion
    from_id: str | None = None  # the hit the edge started from
    hops: int = 0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rank": self.rank, "score": self.score}
        if self.via is not None:
            d.update(via=self.via, from_id=self.from_id, hops=self.hops)
        return d


@dataclass
class SearchHit:
    """One search result: the chunk, its ranking score, which retrievers found it and its
    calibrated relevance (``beeweave_core.relevance``: in [0, 1], the same scale whatever the
    fusion mode or the store's size; None for hits of other retrievers)."""

    chunk: KnowledgeChunk
    score: float
    sources: dict[str, HitSource] = field(default_factory=dict)
    loosened: bool = False  # True when found only after a strict search was relaxed
    time_range: TimeRange | None = None  # the range a time phrase in the query was resolved to
    relevance: float | None = None
    # True when a newer statement of the same fact superseded this memory at the time searched
    # (now, or the search's ``as_of``): it is kept for history and ranked after the current one.
    superseded: bool = False

    @property
    def id(self) -> str:
        return self.chunk.id

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk": self.chunk.to_dict(),
            "score": self.score,
            "sources": {k: v.to_dict() for k, v in self.sources.items()},
            "loosened": self.loosened,
            "time_range": None if self.time_range is None else self.time_range.to_dict(),
            "relevance": self.relevance,
            "superseded": self.superseded,
        }
