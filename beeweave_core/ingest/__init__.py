"""Ingestion pipeline: knowledge events in, memories out (being built: see issue 4).

The building blocks so far: PII redaction (:mod:`.redact`), normalization of text, code
and data (:mod:`.normalize`), and extraction of a summary, tags, entities and an intent
(:mod:`.extract` offline, :mod:`.llm` with any LangChain or LlamaIndex model).
"""

from .errors import ExtractionError, InvalidEventError, QueueFullError
from .extract import Extraction, Extractor, OfflineExtractor
from .llm import LLMExtractor
from .normalize import normalize
from .records import DeadLetter, KnowledgeEvent, ToolCall
from .redact import PiiKind, PiiPattern, Redactor

__all__ = [
    "KnowledgeEvent",
    "ToolCall",
    "DeadLetter",
    "Extraction",
    "Extractor",
    "OfflineExtractor",
    "LLMExtractor",
    "PiiKind",
    "PiiPattern",
    "Redactor",
    "normalize",
    "QueueFullError",
    "InvalidEventError",
    "ExtractionError",
]
