"""The write policy of memories written directly: ``BeeWeave.add``/``add_many`` (unless
``trusted=True``), ``POST /api/v1/memories``, ``beeweave memory add``.

A memory a client adds directly must not bypass what ingestion guarantees: its text, tags
and metadata are redacted by the same :class:`Redactor` (same PII kinds, custom patterns,
on/off switch of the store's ``IngestConfig``) before anything is stored, and admission
decides whether it is active at once or waits for review (role ``"manual"``). An edit
that changes content, tags or metadata is redacted the same way.

A memory written to a shared scope or the tenant (an owner id ``scope:...``, see
:mod:`beeweave_core.scopes`) must be allowed by the scope's write rules
(``ScopeConfig.writers``: which agents may write which categories where); an ingested
event to such a scope is checked by :meth:`WritePolicy.check_scope` before it is queued.
Trusted writes (imports, the engine's own pattern memories) are the program's, not an
agent's, and are not checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..errors import PermissionDeniedError
from ..records import ChunkStatus, KnowledgeChunk, ProcessedContent
from ..scopes import Scope, ScopeConfig, is_scope_owner
from ..validation import importance_of
from .admission import Candidate, admit
from .config import IngestConfig
from .redact import Redactor

__all__ = ["WritePolicy"]

_TEXT_FIELDS = ("content", "raw_content", "summary")  # raw_content: the name update() also takes


class WritePolicy:
    """Redaction and admission for directly written memories.

    Args:
        config: the store's ingest configuration (its redaction and admission rules).
        scopes: the store's scope configuration (its write rules for shared scopes).
    """

    def __init__(self, config: IngestConfig, scopes: ScopeConfig | None = None) -> None:
        self.config = config
        self.scopes = scopes or ScopeConfig()
        self.redactor = Redactor(config.pii_kinds, config.custom_patterns, enabled=config.redact)

    def check_scope(self, owner: Any, agent_id: Any, category: Any) -> None:
        """Refuse (``PermissionDeniedError``) a write to a shared scope or the tenant that no
        write rule allows; a user's own memories are not governed by the rules. An owner id
        ``scope:...`` must name a valid scope even without rules, so that no memory is stored
        under an owner no search can name."""
        if not is_scope_owner(owner):
            return
        scope = Scope.parse(owner)
        rules = self.scopes.writers
        agent = agent_id if isinstance(agent_id, str) else None
        kind = category if isinstance(category, str) else None
        if rules is not None and not any(r.allows(scope, agent, kind) for r in rules):
            raise PermissionDeniedError(
                f"agent {agent!r} may not write {'memories' if kind is None else repr(kind) + ' memories'} "
                f"to scope {scope.name!r}: no rule of ScopeConfig.writers allows it")

    def check_move(self, current: KnowledgeChunk, changes: Mapping[str, Any]) -> None:
        """An edit that gives a memory another owner writes to both: moving one into a
        shared scope, or out of one, needs the scope's write rule as a new memory there does."""
        owner = changes.get("user_id", current.user_id)
        if owner == current.user_id:
            return
        meta = changes.get("metadata", current.metadata)
        category = meta.get("category") if isinstance(meta, Mapping) else None
        agent = changes.get("agent_id", current.agent_id)
        for scope_owner in (current.user_id, owner):
            self.check_scope(scope_owner, agent, category)

    def _check_record(self, record: Mapping[str, Any]) -> None:
        meta = record.get("metadata")
        self.check_scope(record.get("user_id"), record.get("agent_id"),
                         meta.get("category") if isinstance(meta, Mapping) else None)

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
        self._check_record(record)
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

    def direct(self, record: Mapping[str, Any] | KnowledgeChunk) -> Mapping[str, Any] | KnowledgeChunk:
        """A record of ``BeeWeave.add``/``add_many``: redacted, and held for review when
        admission says so. Unlike :meth:`new_memory`, ``metadata["ingest"]`` is written only
        when redaction or admission did something (a clean memory is stored as given)."""
        if isinstance(record, KnowledgeChunk):
            return self._direct_chunk(record)
        if not isinstance(record, Mapping):
            return record  # refused by the records part, with its own message
        self._check_record(record)
        out = dict(record)
        counts: Counter[str] = Counter()
        out = self._redact(out, counts)
        candidate = None if out.get("status") is not None else self._candidate(
            out.get("content"), out.get("user_id"), out.get("agent_id"), out.get("confidence"), out.get("metadata"))
        status, info = self._admitted(candidate, counts)
        if status is not ChunkStatus.ACTIVE:
            out["status"] = status
        if info:
            meta = dict(out.get("metadata") or {}) if isinstance(out.get("metadata") or {}, Mapping) else {}
            out["metadata"] = self._noted(meta, info)
        return out

    def _direct_chunk(self, c: KnowledgeChunk) -> KnowledgeChunk:
        self.check_scope(c.user_id, c.agent_id, c.metadata.get("category"))
        counts: Counter[str] = Counter()
        r = self.redactor
        changes: dict[str, Any] = {}
        if r.enabled:
            raw = r.redact(c.raw_content, counts)
            if raw != c.raw_content:
                changes["raw_content"] = raw
                pc = c.processed_content
                if pc is not None:
                    changes["processed_content"] = type(pc)(pc.type, r.redact(pc.text), pc.language,
                                                            r.redact_tree(pc.payload) if pc.payload is not None
                                                            else None)
            for name in ("summary",):
                value = getattr(c, name)
                if isinstance(value, str) and (red := r.redact(value, counts)) != value:
                    changes[name] = red
            for name in ("tags", "entities"):
                values = getattr(c, name)
                red_list = [r.redact(v, counts) for v in values]
                if red_list != values:
                    changes[name] = red_list
            meta = r.redact_tree(dict(c.metadata), counts)
            if meta != c.metadata:
                changes["metadata"] = meta
        # A chunk's status is always set: only "active" is decided here.
        candidate = None if c.status is not ChunkStatus.ACTIVE else self._candidate(
            changes.get("raw_content", c.raw_content), c.user_id, c.agent_id, c.confidence, c.metadata)
        status, info = self._admitted(candidate, counts)
        if status is not ChunkStatus.ACTIVE:
            changes["status"] = status
        if info:
            changes["metadata"] = self._noted(dict(changes.get("metadata", c.metadata)), info)
        return c.copy(**changes) if changes else c

    def _admitted(self, candidate: Candidate | None, counts: Counter[str]) -> tuple[ChunkStatus, dict[str, Any]]:
        """Admission's verdict on a direct write (active when there is nothing to judge) and
        what ``metadata["ingest"]`` records of it and of the redactions."""
        status = ChunkStatus.ACTIVE
        info: dict[str, Any] = {}
        if candidate is not None:
            status, reasons = admit(self.config.admission, candidate)
            if reasons:
                info["review"] = reasons
        if counts:
            info["redactions"] = dict(counts)
        return status, info

    @staticmethod
    def _noted(meta: dict[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
        """``meta`` with ``info`` added to its ``ingest`` notes (a direct write's role: manual)."""
        old = meta.get("ingest")
        meta["ingest"] = {**old, **info} if isinstance(old, Mapping) else {"role": "manual", **info}
        return meta

    @staticmethod
    def _candidate(content: Any, user_id: Any, agent_id: Any, confidence: Any, metadata: Any) -> Candidate:
        md = metadata if isinstance(metadata, Mapping) else {}
        conf = float(confidence) if isinstance(confidence, (int, float)) and not isinstance(confidence, bool) else None
        return Candidate(content if isinstance(content, str) else "", str(user_id),
                         agent_id if isinstance(agent_id, str) else None, (), None, "manual",
                         confidence=conf, importance=importance_of(md.get("importance"))
                         if md.get("importance") is not None else None)

    def changes(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """An update's changes, with new text, tags, metadata and processed content redacted."""
        out = self._redact(dict(changes), Counter())
        pc = out.get("processed_content")
        r = self.redactor
        if r.enabled and isinstance(pc, ProcessedContent):
            out["processed_content"] = type(pc)(pc.type, r.redact(pc.text), pc.language,
                                                r.redact_tree(pc.payload) if pc.payload is not None else None)
        elif r.enabled and isinstance(pc, Mapping):
            out["processed_content"] = r.redact_tree(dict(pc))
        return out
