"""The write policy of memories added one by one (``POST /api/v1/memories``, ``beeweave memory add``).

A memory a client adds directly must not bypass what ingestion guarantees: its text, tags
and metadata are redacted by the same :class:`Redactor` (same PII kinds, custom patterns,
on/off switch of the store's ``IngestConfig``) before anything is stored, and admission
decides whether it is active at once or waits for review (role ``"manual"``). An edit
that changes content, tags or metadata is redacted the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..records import ChunkStatus
from .admission import Candidate, admit
from .config import IngestConfig
from .redact import Redactor

__all__ = ["WritePolicy"]

_TEXT_FIELDS = ("content", "summary")


class WritePolicy:
    """Redaction and admission for directly written memories.

    Args:
        config: the store's ingest configuration (its redaction and admission rules).
    """

    def __init__(self, config: IngestConfig) -> None:
        self.config = config
        self.redactor = Redactor(config.pii_kinds, config.custom_patterns, enabled=config.redact)

    def _redact(self, record: dict[str, Any], counts: Counter[str]) -> dict[str, Any]:
        if not self.redactor.enabled:
            return record
        for key in _TEXT_FIELDS:
            if isinstance(record.get(key), str):
                record[key] = self.redactor.redact(record[key], counts)
        if isinstance(record.get("tags"), list):
            record["tags"] = [self.redactor.redact(t, counts) if isinstance(t, str) else t for t in record["tags"]]
        if isinstance(record.get("entities"), list):
            record["entities"] = [self.redactor.redact(t, counts) if isinstance(t, str) else t
                                  for t in record["entities"]]
        if isinstance(record.get("metadata"), Mapping):
            record["metadata"] = self.redactor.redact_tree(dict(record["metadata"]), counts)
        return record

    def new_memory(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record to pass to ``BeeWeave.add``: redacted, with the status admission decides
        (a status the caller gives explicitly is kept; "pending" is never upgraded)."""
        out = dict(record)
        counts: Counter[str] = Counter()
        out = self._redact(out, counts)
        meta = dict(out.get("metadata") or {})
        info: dict[str, Any] = {"role": "manual"}
        if counts:
            info["redactions"] = dict(counts)
        if out.get("status") is None:
            content = out.get("content")
            candidate = Candidate(content if isinstance(content, str) else "", str(out.get("user_id")),
                                  out.get("agent_id"), (), None, "manual")
            status, reasons = admit(self.config.admission, candidate)
            if status is not ChunkStatus.ACTIVE:
                out["status"] = status
            if reasons:
                info["review"] = reasons
        meta["ingest"] = {**(meta.get("ingest") or {}), **info} if isinstance(meta.get("ingest"), Mapping) else info
        out["metadata"] = meta
        return out

    def changes(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """An update's changes, with new text, tags and metadata redacted."""
        return self._redact(dict(changes), Counter())
