"""Ingestion pipeline: knowledge events in, memories out.

``BeeWeave.ingest(event)`` validates a :class:`KnowledgeEvent`, commits it to the queue (a
table of the store, :mod:`.queue`) and returns. A background worker takes the events in
batches and: redacts personal data and secrets (:mod:`.redact`),
normalizes text, code and data (:mod:`.normalize`), extracts a summary, tags, entities
and an intent (:mod:`.extract`, :mod:`.llm`), decides active vs pending review
(:mod:`.admission`), embeds, stores and links the memories (:mod:`.pipeline`), and
counts recurring questions (:mod:`.patterns`). Events that fail go to the dead letters;
a process that dies leaves its events queued, and the next open processes them exactly
once (:mod:`.runtime`). ``import_documents`` seeds a store from text, Markdown and JSONL
(:mod:`.documents`).
"""

from .admission import Admission, AdmissionRules, Candidate, SourceRule
from .config import IngestConfig, PatternConfig, PatternScope, QueueFullPolicy, Window
from .errors import ExtractionError, InvalidEventError, QueueFullError
from .extract import Extraction, Extractor, OfflineExtractor
from .knowledge_events import DeadLetter, KnowledgeEvent, ToolCall
from .llm import LLMExtractor
from .normalize import normalize
from .patterns import HotPattern
from .queue import EventQueue, SQLiteEventQueue
from .redact import PiiKind, PiiPattern, Redactor

__all__ = [
    "KnowledgeEvent",
    "ToolCall",
    "DeadLetter",
    "IngestConfig",
    "QueueFullPolicy",
    "PatternConfig",
    "PatternScope",
    "Window",
    "AdmissionRules",
    "SourceRule",
    "Admission",
    "Candidate",
    "Extraction",
    "Extractor",
    "OfflineExtractor",
    "LLMExtractor",
    "HotPattern",
    "EventQueue",
    "SQLiteEventQueue",
    "PiiKind",
    "PiiPattern",
    "Redactor",
    "normalize",
    "QueueFullError",
    "InvalidEventError",
    "ExtractionError",
]
