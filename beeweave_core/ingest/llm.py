"""An extractor backed by any LangChain chat model or LlamaIndex LLM.

Structured output is used when the model offers it (LangChain ``with_structured_output``,
LlamaIndex ``structured_predict``); otherwise the model is asked for JSON and the first
JSON object in its reply is read. The design's distiller schema
``{core_summary, entities, category, confidence, raw_excerpt}`` is read as is:
``core_summary`` is the summary, ``confidence`` and ``importance`` may be words
(high / medium / low) or numbers in [0, 1], and the excerpt is kept in ``extra``. Any failure (an exception, no JSON, no summary) falls
back to another extractor, the offline one by default, so extraction never stops the
pipeline. The model sees redacted text only.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..records import Intent, ProcessedContent
from ..validation import confidence_of, importance_of
from .errors import ExtractionError
from .extract import Extraction, Extractor, OfflineExtractor, classify_intent, keywords
from .statements import FactSlot, FactStatement

__all__ = ["LLMExtractor", "EXTRACTION_SCHEMA", "PROMPT"]

logger = logging.getLogger(__name__)

_INTENTS = [i.value for i in Intent]
_FACTS_HELP = ("What the user states about themselves that can change, as {key, value}: key one of "
               + ", ".join(s.value for s in FactSlot) + " (or another short snake_case subject); [] when none.")
EXTRACTION_SCHEMA: dict[str, Any] = {
    "title": "KnowledgeExtraction",
    "description": "What a piece of agent knowledge is about.",
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "One or two sentences."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "3 to 5 short keywords."},
        "entities": {"type": "array", "items": {"type": "string"},
                     "description": "Named people, places, organisations, products or code identifiers."},
        "intent": {"type": "string", "enum": _INTENTS, "description": "What the user wanted."},
        "category": {"type": "string",
                     "description": "What kind of knowledge: preference, fact, procedure, event, opinion..."},
        "confidence": {"type": "string", "enum": ["high", "medium", "low"],
                       "description": "How sure the exchange is of what it teaches."},
        "importance": {"type": "string", "enum": ["high", "medium", "low"],
                       "description": "How much it matters to remember it for later tasks."},
        "facts": {"type": "array", "description": _FACTS_HELP,
                  "items": {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                            "required": ["key", "value"]}},
    },
    "required": ["summary", "tags", "intent"],
}
PROMPT = """Extract what this exchange between a user and an AI agent teaches.
Reply with one JSON object and nothing else. Its keys: "summary" (one or two sentences),
"tags" (a list of 3 to 5 short keywords), "entities" (a list of named people, places,
organisations, products or code identifiers), "intent" (one of {intents}), "category"
(preference, fact, procedure, event, opinion...), "confidence" and "importance" (each high,
medium or low), "facts" (a list of {{"key", "value"}} objects: {facts}).

Question:
{query}

Answer:
{response}
"""
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


class LLMExtractor:
    """Extraction by a language model, with a fallback.

    Setup:
        .. code-block:: python

            from langchain_openai import ChatOpenAI  # any LangChain chat model or LlamaIndex LLM
            from beeweave_core.ingest import IngestConfig, LLMExtractor

            memory = BeeWeave("memory.db", ingest=IngestConfig(extractor=LLMExtractor(ChatOpenAI())))

    Args:
        llm: a LangChain chat model (``invoke``), a LlamaIndex LLM (``complete``) or a
            function from prompt to text.
        fallback: used when the model fails (default: :class:`OfflineExtractor`).
        max_chars: question and answer are each cut to this many characters.

    Attributes:
        failures: how many extractions fell back; ``last_error`` says why the last one did.
    """

    def __init__(self, llm: Any, *, fallback: Extractor | None = None, max_chars: int = 6000) -> None:
        self.llm = llm
        self.fallback: Extractor = fallback or OfflineExtractor()
        self.max_chars = max_chars
        self.failures = 0
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._ask = self._choose(llm)

    def extract(self, query: str, response: str, *, content: ProcessedContent | None = None) -> Extraction:
        try:
            return self._read(self._ask(query[: self.max_chars], response[: self.max_chars]), query, response)
        except Exception as exc:  # any model failure: fall back, never stop the pipeline
            with self._lock:
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
            logger.warning("LLM extraction failed (%s); using the fallback extractor", self.last_error)
            ext = self.fallback.extract(query, response, content=content)
            return replace(ext, extra={**ext.extra, "fallback_from": "llm"})

    # -- asking ------------------------------------------------------------------------
    def _choose(self, llm: Any) -> Callable[[str, str], Any]:
        if hasattr(llm, "invoke") and hasattr(llm, "with_structured_output"):
            return self._ask_langchain
        if hasattr(llm, "complete"):
            return self._ask_llamaindex
        if callable(llm):
            return lambda q, r: llm(self._prompt(q, r))
        from ..errors import InvalidInputError

        raise InvalidInputError(f"LLMExtractor needs a LangChain chat model, a LlamaIndex LLM or a function; "
                                f"got {type(llm).__name__}")

    @staticmethod
    def _prompt(query: str, response: str) -> str:
        return PROMPT.format(intents=", ".join(_INTENTS), facts=_FACTS_HELP, query=query or "(none)",
                             response=response or "(none)")

    def _ask_langchain(self, query: str, response: str) -> Any:
        prompt = self._prompt(query, response)
        try:
            structured = self.llm.with_structured_output(EXTRACTION_SCHEMA)
        except (NotImplementedError, ValueError, TypeError, AttributeError):
            structured = None  # the model has no tool calling / JSON mode: ask for text
        if structured is not None:
            return structured.invoke(prompt)
        return self.llm.invoke(prompt)

    def _ask_llamaindex(self, query: str, response: str) -> Any:
        prompt = self._prompt(query, response)
        if hasattr(self.llm, "structured_predict") and getattr(getattr(self.llm, "metadata", None),
                                                                "is_function_calling_model", False):
            from llama_index.core.prompts import PromptTemplate

            model = _pydantic_model()
            template = PromptTemplate(prompt.replace("{", "{{").replace("}", "}}"))
            return self.llm.structured_predict(model, template)
        return self.llm.complete(prompt)

    # -- reading the answer -------------------------------------------------------------
    def _read(self, answer: Any, query: str, response: str) -> Extraction:
        data = _as_mapping(answer)
        summary = data.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            summary = data.get("core_summary")  # the design's distiller schema
        if not isinstance(summary, str) or not summary.strip():
            raise ExtractionError("the model's answer has no summary")
        tags = _strings(data.get("tags"))[:5]
        if len(tags) < 3:  # the contract is 3-5 tags: complete from the text's own keywords
            tags += [k for k in keywords(query, response, k=5) if k not in tags][: 3 - len(tags)]
        raw_intent = str(data.get("intent") or "").strip().lower().replace(" ", "_").replace("-", "_")
        intent = Intent(raw_intent) if raw_intent in _INTENTS else classify_intent(query, response)
        extra: dict[str, Any] = {"extractor": "llm"}
        excerpt = data.get("raw_excerpt")
        if isinstance(excerpt, str) and excerpt.strip():
            extra["raw_excerpt"] = excerpt.strip()[:1000]
        category = data.get("category")
        facts = _facts(data["facts"]) if "facts" in data else None
        return Extraction(" ".join(summary.split())[:500], tuple(tags), tuple(_strings(data.get("entities"))[:10]),
                          intent, extra,
                          category=" ".join(category.split())[:64] or None if isinstance(category, str) else None,
                          confidence=confidence_of(data.get("confidence")),
                          importance=None if data.get("importance") is None else importance_of(data["importance"]),
                          facts=facts)


def _facts(value: Any) -> tuple[FactStatement, ...] | None:
    """The model's facts; None (the offline rules decide) when it sent something else than a list."""
    if not isinstance(value, list):
        return None
    out: dict[str, FactStatement] = {}
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("key"), str) and isinstance(item.get("value"), str):
            key = "_".join(item["key"].strip().lower().replace("-", " ").split())[:64]
            text = " ".join(item["value"].split())[:200]
            if key and text:
                out.setdefault(key, FactStatement(key, text))
    return tuple(out.values())


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    if not isinstance(value, (list, tuple)):
        return []
    return list(dict.fromkeys(v.strip() for v in value if isinstance(v, str) and v.strip()))


def _as_mapping(answer: Any) -> dict[str, Any]:
    """A dict from whatever the model returned: a dict, a message or completion (its text),
    a pydantic object (structured output), or text."""
    if isinstance(answer, dict):
        return answer
    text = answer
    for attr in ("content", "text", "message"):
        if not isinstance(text, (str, list)) and hasattr(text, attr):
            text = getattr(text, attr)
    if isinstance(text, list):  # LangChain content blocks
        text = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in text)
    if not isinstance(text, str):
        if hasattr(answer, "model_dump"):
            return answer.model_dump()
        raise ExtractionError(f"the model returned {type(answer).__name__}, not JSON text")
    m = _JSON_OBJECT.search(text)
    if m is None:
        raise ExtractionError("the model's answer holds no JSON object")
    try:
        data = json.loads(m.group(0))
    except ValueError as exc:
        raise ExtractionError(f"the model's JSON does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise ExtractionError("the model's JSON is not an object")
    return data


_MODEL: Any = None


def _pydantic_model() -> Any:
    global _MODEL
    if _MODEL is None:
        from pydantic import BaseModel, Field

        class KnowledgeExtraction(BaseModel):
            """What a piece of agent knowledge is about."""

            summary: str = Field(description="One or two sentences.")
            tags: list[str] = Field(description="3 to 5 short keywords.")
            entities: list[str] = Field(default_factory=list, description="Named things.")
            intent: str = Field(description="One of " + ", ".join(_INTENTS))
            category: str | None = Field(default=None, description="preference, fact, procedure, event...")
            confidence: str | None = Field(default=None, description="high, medium or low")
            importance: str | None = Field(default=None, description="high, medium or low")
            facts: list[dict[str, str]] | None = Field(default=None, description=_FACTS_HELP)

        _MODEL = KnowledgeExtraction
    return _MODEL
