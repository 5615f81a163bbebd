"""Errors of the ingestion pipeline (all ``BeeWeaveError`` subclasses)."""

from __future__ import annotations

from ..errors import BeeWeaveError, InvalidInputError

__all__ = ["QueueFullError", "InvalidEventError", "ExtractionError"]


class QueueFullError(BeeWeaveError):
    """The ingest queue holds ``IngestConfig.max_pending`` events and the full-queue policy
    refused the new one; nothing was written. Retry later, call ``flush()``, or raise the
    bound."""


class InvalidEventError(InvalidInputError):
    """A knowledge event is malformed; nothing was written."""


class ExtractionError(BeeWeaveError):
    """An extractor could not produce a usable result (the LLM extractor then falls back)."""
