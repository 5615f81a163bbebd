"""BeeWeave core: the memory engine behind every BeeWeave face.

Importing this package loads no model and changes no global setting.
"""

from .api import MemoryAPI
from .client import AuthenticationError, BeeWeaveClient
from .embedders import (
    DEFAULT_MODEL_NAME,
    Embedder,
    HashingEmbedder,
    LangChainEmbedder,
    LlamaIndexEmbedder,
    SentenceTransformerEmbedder,
)
from .engine import SearchConfig
from .engine.watch import Watch
from .errors import (
    BeeWeaveError,
    DimensionMismatchError,
    DuplicateIdError,
    EmbedderMismatchError,
    EmptyContentError,
    InvalidInputError,
    InvalidVectorError,
    MissingDependencyError,
    ModelLoadError,
    NotFoundError,
    SchemaVersionError,
    StoreClosedError,
    StoreUnavailableError,
    TokenizerMismatchError,
    UnknownFilterError,
)
from .events import EventBus, EventType, MemoryEvent
from .filters import Filter
from .fusion import FusionMode
from .index.context import IndexConfig
from .ingest import (
    AdmissionRules,
    DeadLetter,
    ExtractionError,
    Extractor,
    HotPattern,
    IngestConfig,
    InvalidEventError,
    KnowledgeEvent,
    LLMExtractor,
    OfflineExtractor,
    PatternConfig,
    PiiKind,
    PiiPattern,
    QueueFullError,
    QueueFullPolicy,
    Redactor,
    SourceRule,
    ToolCall,
)
from .lifecycle import (
    ExpiryRule,
    FeedbackSignal,
    ForgetAction,
    InvalidationReport,
    LifecycleConfig,
    Lineage,
    MaintenanceReport,
    MaintenanceSchedule,
    MemoryVersion,
    ReviewDecision,
    ReviewItem,
)
from .memory import BeeWeave
from .network import Candidate, ExpandOptions, NetworkConfig
from .records import (
    ChunkStatus,
    ContentType,
    HitSource,
    Intent,
    KnowledgeChunk,
    ProcessedContent,
    Relationship,
    RelationType,
    SearchHit,
)
from .rerank import CrossEncoderReranker, Reranker
from .scoring import ScoringConfig
from .timewords import TimeRange
from .tokenizer import Tokenizer, TokenizerConfig

__version__ = "0.1.0"

__all__ = [
    "BeeWeave",
    "MemoryAPI",
    "SearchConfig",
    "IndexConfig",
    "ScoringConfig",
    "NetworkConfig",
    "ExpandOptions",
    "Candidate",
    "Reranker",
    "CrossEncoderReranker",
    "EventBus",
    "LifecycleConfig",
    "FeedbackSignal",
    "ForgetAction",
    "ReviewDecision",
    "ExpiryRule",
    "MaintenanceReport",
    "MaintenanceSchedule",
    "TimeRange",
    "Lineage",
    "InvalidationReport",
    "Watch",
    "MemoryVersion",
    "ReviewItem",
    "EventType",
    "MemoryEvent",
    "KnowledgeChunk",
    "ProcessedContent",
    "Relationship",
    "SearchHit",
    "HitSource",
    "ContentType",
    "ChunkStatus",
    "Intent",
    "RelationType",
    "FusionMode",
    "Filter",
    "Tokenizer",
    "TokenizerConfig",
    "Embedder",
    "SentenceTransformerEmbedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "HashingEmbedder",
    "DEFAULT_MODEL_NAME",
    "BeeWeaveError",
    "InvalidInputError",
    "EmptyContentError",
    "DimensionMismatchError",
    "InvalidVectorError",
    "UnknownFilterError",
    "DuplicateIdError",
    "NotFoundError",
    "EmbedderMismatchError",
    "TokenizerMismatchError",
    "SchemaVersionError",
    "StoreClosedError",
    "MissingDependencyError",
    "StoreUnavailableError",
    "ModelLoadError",
    "KnowledgeEvent",
    "ToolCall",
    "DeadLetter",
    "IngestConfig",
    "QueueFullPolicy",
    "PatternConfig",
    "HotPattern",
    "AdmissionRules",
    "SourceRule",
    "Extractor",
    "OfflineExtractor",
    "LLMExtractor",
    "Redactor",
    "PiiPattern",
    "PiiKind",
    "QueueFullError",
    "InvalidEventError",
    "ExtractionError",
    "BeeWeaveClient",
    "AuthenticationError",
    "__version__",
]
